"""One module per Kafka API; each registers itself (ApiVersions is derived from the registry)."""
