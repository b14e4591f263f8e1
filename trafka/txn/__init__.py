"""The transaction coordinator as pure logic (KIP-98, KIP-360, KIP-447, KIP-664, KIP-890 part 1).

`state.py` holds the transaction states and their legal edges, `records.py` Kafka's
`__transaction_state` key/value layouts, `coordinator.py` the coordinator of one
`__transaction_state` partition. No event loop, no clock: callers pass `now_ms`.
"""
