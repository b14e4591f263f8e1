"""Security values and pure state machines: principals, the authorizer port, SASL mechanisms
(PLAIN, SCRAM-SHA-256/512), ssl.principal.mapping.rules.

The lowest layer (below `trafka.net` and `trafka.log`): no event loop, no sockets, no node
state. The net layer runs these machines on connections and attaches a `KafkaPrincipal` to
each; the node passes it to every handler in its `RequestContext` (see docs/security.md).
"""
