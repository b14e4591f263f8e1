"""PySpark audit jobs: export cluster metadata and topic logs, check replicas for divergence."""
