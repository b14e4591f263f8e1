"""The composition root: broker, controller, replica manager, one module per Kafka API."""
