"""Client quotas (Kafka's ClientQuotaManager family, KIP-13/KIP-55/KIP-124/KIP-219/KIP-612).

`entities` (names, znode paths, keys, validation), `rate` (the sampled rate and the throttle
arithmetic) and `manager` (precedence, sensors, throttle decisions) are pure: names, values
and `now_ms` in, decisions out. `service` is the trio shell over the metadata tree.
"""
