"""Kafka wire protocol: trio server and client, framing, request/response headers, codecs."""
