"""Node metrics (issue 17 item 3, docs/metrics.md): counters kept as plain integers on the
hot path (`registry`), Kafka's metric names as the Prometheus JMX exporter writes them
(`names`), and the Prometheus families built from a snapshot at scrape time (`families`).

Pure: no event loop, no I/O; the node's shell is `trafka.node.metrics_service`."""
