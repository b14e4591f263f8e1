"""The node's security: named listeners (listeners), who may act as a broker (inter_broker),
TLS/SASL set-up from the config (setup), SCRAM credentials in the tree (scram_store)."""
