"""Broker configuration: Kafka's key names, types, defaults, validation and documentation.

A node's configuration is built in layers, lowest first (Kafka's precedence, and the
`source` DescribeConfigs reports):

1. the defaults of `BROKER_CONFIG_DEFS` (source DEFAULT_CONFIG, 5);
2. a `server.properties` file (`--config FILE`) and `--set key=value` flags, which override
   the file (source STATIC_BROKER_CONFIG, 4);
3. dynamic broker configs written with AlterConfigs / IncrementalAlterConfigs and kept in the
   metadata tree: the cluster-wide default `/config/brokers/<default>` (resource name "",
   DYNAMIC_DEFAULT_BROKER_CONFIG, 3), then this broker's `/config/brokers/<id>`
   (DYNAMIC_BROKER_CONFIG, 2). Every broker re-reads both on a config change notification
   (`trafka.node.config.changes`), so a change made through any broker reaches all.

Every key is Kafka's name with Kafka's default unless the `reason` of its definition says
otherwise. An unknown key or a value of the wrong type raises `ConfigError` with one line
naming the key and the problem (knode prints it and exits non-zero).

The single-node embedded defaults (issue 3): `listeners=PLAINTEXT://localhost:9092`,
`log.dirs=./data/node-<id>`, `controller.quorum.voters=<id>@localhost:9093`.

Topic-level configs (`retention.ms`, `cleanup.policy`, ...) belong to `trafka.log.config`;
`TOPIC_CONFIG_SYNONYMS` maps each to the broker keys that supply its default (Kafka's
`LogConfig.TopicConfigSynonyms`), which DescribeConfigs reports as synonyms.

Replication throttles (KIP-73): `leader.replication.throttled.rate` and
`follower.replication.throttled.rate` obey only the dynamic values in `/config/brokers/<id>`
and then `/config/brokers/<default>` (read by the replica manager,
`trafka.node.replication.throttle`), as Kafka's BrokerConfigHandler does: a value in
server.properties is shown by DescribeConfigs but does not throttle.

`broker.rack` is advertised in Metadata and places replicas: rack-aware assignment when every
live broker has one (`trafka.node.replica_assignment`).

Security keys (listeners, ssl.*, sasl.*, per listener as ``listener.name.<name>.<key>``) are
resolved by `trafka.node.security.listeners` when the broker is built (docs/security.md).
`replica.selector.class` (KIP-392) lets consumers with `client.rack` read from a follower in
their rack (`trafka.node.replication.replica_selector`; Kafka's RackAwareReplicaSelector is the
only class accepted). Client quotas (`quota.window.num`, `quota.window.size.seconds`; the
quotas themselves are entity configs, `trafka.node.quota`). Not implemented: KRaft
`controller.listener.names` (the quorum port comes from `controller.quorum.voters`).
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final


class ConfigError(ValueError):
    """A bad configuration key or value; str() is one line naming the key and the problem."""


class ConfigType(enum.IntEnum):
    """DescribeConfigs `config_type` (KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """DescribeConfigs `config_source` (KIP-226)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8


_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One broker key: Kafka's name, type, default (None = no default), range and doc."""

    name: str
    config_type: ConfigType
    default: Any
    doc: str
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    dynamic: bool = False
    """Can be changed with AlterConfigs at runtime (Kafka's per-broker dynamic configs)."""
    sensitive: bool = False
    reason: str = ""
    """Why the default differs from Kafka's, if it does."""

    def parse(self, raw: object) -> Any:
        """Turn a string (or an already typed value) into this key's typed value."""
        try:
            value = _parse_typed(self.config_type, raw)
        except (TypeError, ValueError):
            raise ConfigError(
                f"invalid value {raw!r} for configuration {self.name}: "
                f"expected {self.config_type.name.lower()}"
            ) from None
        self.validate(value)
        return value

    def validate(self, value: Any) -> None:
        if value is None:
            return
        if self.name == "max.connections.per.ip.overrides":
            _check_host_counts(self.name, str(value))
        if isinstance(value, int) and not isinstance(value, bool):
            if self.minimum is not None and value < self.minimum:
                raise ConfigError(
                    f"invalid value {value} for configuration {self.name}: "
                    f"value must be at least {self.minimum}"
                )
            if self.maximum is not None and value > self.maximum:
                raise ConfigError(
                    f"invalid value {value} for configuration {self.name}: "
                    f"value must be no more than {self.maximum}"
                )
        if self.choices:
            items = value if isinstance(value, list) else [value]
            for item in items:
                if item not in self.choices:
                    raise ConfigError(
                        f"invalid value {item!r} for configuration {self.name}: "
                        f"string must be one of: {', '.join(self.choices)}"
                    )

    def render(self, value: Any) -> str | None:
        """Kafka's string form of a typed value (DescribeConfigs, server.properties)."""
        if value is None:
            return None
        if self.config_type is ConfigType.BOOLEAN:
            return "true" if value else "false"
        if self.config_type is ConfigType.LIST:
            return ",".join(str(v) for v in value)
        return str(value)


def _parse_typed(config_type: ConfigType, raw: object) -> Any:
    if raw is None:
        return None
    if config_type is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            raise ValueError(text)
        return text == "true"
    if config_type in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
        if isinstance(raw, bool):
            raise TypeError(raw)
        value = int(str(raw).strip())
        limit = _INT32_MAX if config_type is ConfigType.INT else _INT64_MAX
        if config_type is ConfigType.SHORT:
            limit = 2**15 - 1
        if not -limit - 1 <= value <= limit:
            raise ValueError(value)
        return value
    if config_type is ConfigType.DOUBLE:
        return float(str(raw).strip())
    if config_type is ConfigType.LIST:
        if isinstance(raw, list):
            return [str(v) for v in raw]
        text = str(raw).strip()
        return [part.strip() for part in text.split(",") if part.strip()] if text else []
    return str(raw).strip()


def _d(
    name: str,
    config_type: ConfigType,
    default: Any,
    doc: str,
    **kwargs: Any,
) -> ConfigDef:
    return ConfigDef(name, config_type, default, doc, **kwargs)


_T = ConfigType
_DAY_MS = 24 * 3600 * 1000

BROKER_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    # --- identity, roles, listeners ---------------------------------------------------------
    _d("node.id", _T.INT, None, "This node's id (KRaft); also its broker id.", minimum=0),
    _d("broker.id", _T.INT, -1, "Synonym of node.id kept for ZooKeeper-era configs."),
    _d(
        "process.roles",
        _T.LIST,
        ["broker", "controller"],
        "The roles this node plays: broker,controller (combined: a quorum voter that can "
        "become the controller) or broker (a quorum learner that never votes nor controls).",
        choices=("broker", "controller"),
        reason="Kafka has no default; a one-node trafka is combined by default.",
    ),
    _d(
        "listeners",
        _T.LIST,
        ["PLAINTEXT://localhost:9092"],
        "Listener URIs (NAME://host:port) the node binds for clients.",
    ),
    _d(
        "advertised.listeners",
        _T.LIST,
        None,
        "Listener URIs given to clients in Metadata; defaults to listeners.",
    ),
    _d(
        "broker.rack",
        _T.STRING,
        None,
        "Rack of this broker, advertised in Metadata; replicas are spread over racks.",
    ),
    # --- listeners' security (docs/security.md; per listener: listener.name.<name>.<key>) ---
    _d(
        "listener.security.protocol.map",
        _T.LIST,
        ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"],
        "Listener name -> security protocol (NAME:PROTOCOL pairs).",
    ),
    _d(
        "inter.broker.listener.name",
        _T.STRING,
        None,
        "The listener brokers use to talk to each other (controller requests, replica "
        "fetches, controlled shutdown); only it accepts those APIs.",
        reason="Unset with one listener: that listener (Kafka requires it to be PLAINTEXT).",
    ),
    _d(
        "security.inter.broker.protocol",
        _T.STRING,
        "PLAINTEXT",
        "Security protocol between brokers; the listener of that name when "
        "inter.broker.listener.name is unset.",
        choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
    ),
    _d(
        "sasl.enabled.mechanisms",
        _T.LIST,
        ["GSSAPI"],
        "SASL mechanisms a SASL listener offers (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).",
    ),
    _d(
        "sasl.mechanism.inter.broker.protocol",
        _T.STRING,
        "GSSAPI",
        "The SASL mechanism brokers use on a SASL inter-broker listener.",
    ),
    _d(
        "sasl.jaas.config",
        _T.STRING,
        None,
        "JAAS login config; per listener and mechanism as "
        'listener.name.<l>.<mechanism>.sasl.jaas.config (PLAIN users: user_<name>="<pw>"; '
        'the broker\'s own client: username=".." password="..").',
        sensitive=True,
    ),
    _d(
        "sasl.server.max.receive.size",
        _T.INT,
        524288,
        "Largest SASL token accepted before authentication.",
        minimum=1,
    ),
    _d(
        "connections.max.reauth.ms",
        _T.LONG,
        0,
        "SASL session lifetime (KIP-368); 0 = no re-authentication required.",
        minimum=0,
    ),
    # --- authorization (docs/security.md, "Authorization"; trafka.security.acl) -----------
    _d(
        "authorizer.class.name",
        _T.STRING,
        "",
        "Empty: every principal may do everything. kafka.security.authorizer.AclAuthorizer "
        "or org.apache.kafka.metadata.authorizer.StandardAuthorizer: ACLs (from /kafka-acl).",
    ),
    _d(
        "super.users",
        _T.STRING,
        None,
        "Principals allowed everything whatever the ACLs say, separated by ';' "
        "(User:admin;User:broker).",
    ),
    _d(
        "allow.everyone.if.no.acl.found",
        _T.BOOLEAN,
        False,
        "With an authorizer: a resource with no ACL at all is open to everyone.",
    ),
    _d(
        "ssl.keystore.type",
        _T.STRING,
        "PEM",
        "Only PEM is supported.",
        choices=("PEM",),
        reason="Kafka's default is JKS; only PEM is implemented.",
    ),
    _d("ssl.keystore.location", _T.STRING, None, "PEM file: certificate chain and private key."),
    _d("ssl.keystore.password", _T.STRING, None, "Unused for PEM.", sensitive=True),
    _d(
        "ssl.keystore.certificate.chain",
        _T.STRING,
        None,
        "PEM certificate chain (inline).",
        sensitive=False,
    ),
    _d("ssl.keystore.key", _T.STRING, None, "PEM private key (inline).", sensitive=True),
    _d(
        "ssl.key.password", _T.STRING, None, "Password of an encrypted private key.", sensitive=True
    ),
    _d(
        "ssl.truststore.type",
        _T.STRING,
        "PEM",
        "Only PEM is supported.",
        choices=("PEM",),
        reason="Kafka's default is JKS; only PEM is implemented.",
    ),
    _d("ssl.truststore.location", _T.STRING, None, "PEM file of trusted CA certificates."),
    _d("ssl.truststore.password", _T.STRING, None, "Unused for PEM.", sensitive=True),
    _d("ssl.truststore.certificates", _T.STRING, None, "Trusted CA certificates (inline PEM)."),
    _d(
        "ssl.client.auth",
        _T.STRING,
        "none",
        "Client certificates: none, requested, required.",
        choices=("none", "requested", "required"),
    ),
    _d(
        "ssl.enabled.protocols",
        _T.LIST,
        ["TLSv1.2", "TLSv1.3"],
        "TLS versions accepted.",
        choices=("TLSv1.2", "TLSv1.3"),
    ),
    _d(
        "ssl.protocol",
        _T.STRING,
        "TLSv1.3",
        "Accepted for compatibility; see ssl.enabled.protocols.",
    ),
    _d(
        "ssl.cipher.suites",
        _T.LIST,
        [],
        "TLS 1.2 cipher suites (OpenSSL or IANA names); empty = the defaults.",
    ),
    _d(
        "ssl.endpoint.identification.algorithm",
        _T.STRING,
        "https",
        "https: the broker's own client checks the peer's host name; empty: it does not.",
    ),
    _d(
        "ssl.principal.mapping.rules",
        _T.STRING,
        "DEFAULT",
        "Rules mapping a client certificate's subject to a principal name (Kafka's syntax).",
    ),
    _d(
        "controller.quorum.voters",
        _T.LIST,
        None,
        "The metadata quorum: id@host:port,... Defaults to <node.id>@localhost:9093.",
    ),
    _d(
        "controller.quorum.secret",
        _T.PASSWORD,
        None,
        "Shared secret authenticating quorum traffic (pysyncobj password).",
        sensitive=True,
        reason="trafka only: the quorum port is never unauthenticated across hosts.",
    ),
    _d(
        "controller.quorum.secret.file",
        _T.STRING,
        None,
        "A file holding controller.quorum.secret. A one-voter quorum without either "
        "generates <log dir>/quorum/quorum.secret.",
    ),
    _d(
        "controller.quorum.fsync.interval.ms",
        _T.INT,
        1000,
        "How often the quorum journal is fsynced (trafka only).",
        minimum=1,
    ),
    _d(
        "controller.quorum.request.timeout.ms",
        _T.INT,
        30000,
        "How long a metadata write is retried before it fails.",
        minimum=1,
    ),
    _d("zookeeper.chroot", _T.STRING, "", "A prefix for every znode path (ZK-02)."),
    _d(
        "controller.quorum.election.timeout.ms",
        _T.INT,
        1000,
        "Raft election timeout.",
        minimum=10,
    ),
    _d("cluster.id", _T.STRING, None, "Cluster id; generated and stored at /cluster/id."),
    # --- storage ------------------------------------------------------------------------------
    _d(
        "log.dirs",
        _T.LIST,
        None,
        "Directories of the partition logs. Defaults to ./data/node-<node.id>.",
        reason="Kafka defaults to /tmp/kraft-combined-logs; trafka keeps data near the user.",
    ),
    _d("log.dir", _T.STRING, None, "A single log directory (used when log.dirs is unset)."),
    _d(
        "log.segment.bytes",
        _T.INT,
        1024**3,
        "Maximum size of one segment file (at least 1 MiB, as in Kafka 4, KIP-1030).",
        minimum=1024 * 1024,
        dynamic=True,
    ),
    _d("log.roll.ms", _T.LONG, None, "Roll a segment after this time (ms)."),
    _d("log.roll.hours", _T.INT, 168, "Roll a segment after this time (hours).", minimum=1),
    _d("log.retention.ms", _T.LONG, None, "Time retention (ms); -1 = unlimited.", dynamic=True),
    _d("log.retention.minutes", _T.INT, None, "Time retention (minutes)."),
    _d("log.retention.hours", _T.INT, 168, "Time retention (hours)."),
    _d(
        "log.retention.bytes",
        _T.LONG,
        -1,
        "Size retention per partition; -1 = unlimited.",
        dynamic=True,
    ),
    _d(
        "log.retention.check.interval.ms",
        _T.LONG,
        300000,
        "How often retention is checked.",
        minimum=1,
    ),
    _d(
        "log.cleanup.policy",
        _T.LIST,
        ["delete"],
        "delete, compact or both.",
        choices=("delete", "compact"),
        dynamic=True,
    ),
    _d("log.cleaner.enable", _T.BOOLEAN, True, "Run the log cleaner (compaction)."),
    _d("log.cleaner.min.compaction.lag.ms", _T.LONG, 0, "Minimum age before compaction."),
    _d(
        "log.cleaner.delete.retention.ms",
        _T.LONG,
        _DAY_MS,
        "How long tombstones are kept.",
    ),
    _d("log.cleaner.min.cleanable.ratio", _T.DOUBLE, 0.5, "Dirty ratio that triggers cleaning."),
    _d("log.index.interval.bytes", _T.INT, 4096, "Bytes between offset index entries."),
    _d("log.index.size.max.bytes", _T.INT, 10 * 1024 * 1024, "Maximum index file size."),
    _d("log.flush.interval.messages", _T.LONG, _INT64_MAX, "Messages between fsyncs."),
    _d("log.flush.interval.ms", _T.LONG, None, "Milliseconds between fsyncs."),
    _d(
        "log.flush.scheduler.interval.ms",
        _T.LONG,
        _INT64_MAX,
        "How often the flusher checks logs.",
    ),
    _d("log.message.timestamp.type", _T.STRING, "CreateTime", "CreateTime or LogAppendTime."),
    _d(
        "log.message.timestamp.difference.max.ms",
        _T.LONG,
        _INT64_MAX,
        "Maximum difference between a record's timestamp and the broker's clock.",
    ),
    _d("compression.type", _T.STRING, "producer", "Topic compression; producer keeps it."),
    _d(
        "message.max.bytes",
        _T.INT,
        1048588,
        "Largest record batch the broker accepts (topic: max.message.bytes).",
        minimum=0,
        dynamic=True,
    ),
    _d("num.recovery.threads.per.data.dir", _T.INT, 1, "Threads recovering logs at start."),
    # --- topics -------------------------------------------------------------------------------
    _d(
        "num.partitions",
        _T.INT,
        1,
        "Partitions of auto-created topics.",
        minimum=1,
        maximum=4_000,  # trafka.node.topics.MAX_PARTITIONS
    ),
    _d(
        "default.replication.factor",
        _T.INT,
        1,
        "Replication factor of auto-created topics.",
        minimum=1,
    ),
    _d("min.insync.replicas", _T.INT, 1, "Minimum ISR size for acks=all.", minimum=1),
    _d("auto.create.topics.enable", _T.BOOLEAN, True, "Create topics on Metadata requests."),
    _d("delete.topic.enable", _T.BOOLEAN, True, "Allow DeleteTopics."),
    _d(
        "unclean.leader.election.enable",
        _T.BOOLEAN,
        False,
        "Elect an out-of-ISR replica when no ISR member is alive.",
        dynamic=True,
    ),
    # --- replication and controller -----------------------------------------------------------
    _d("replica.lag.time.max.ms", _T.LONG, 30000, "Time before a lagging follower leaves ISR."),
    _d("replica.fetch.wait.max.ms", _T.INT, 500, "Follower fetch long-poll wait."),
    _d("replica.fetch.min.bytes", _T.INT, 1, "Follower fetch min bytes."),
    _d("replica.fetch.max.bytes", _T.INT, 1048576, "Follower fetch bytes per partition."),
    _d(
        "replica.fetch.response.max.bytes",
        _T.INT,
        10485760,
        "Follower fetch bytes per response.",
    ),
    _d("replica.fetch.backoff.ms", _T.INT, 1000, "Follower back-off after a fetch error."),
    _d(
        "num.replica.fetchers",
        _T.INT,
        1,
        "Fetcher tasks (each with its connection and fetch session) per source broker; a "
        "partition goes to abs(31 * hash(topic) + partition) % num.replica.fetchers.",
        minimum=1,
    ),
    _d(
        "max.request.partition.size.limit",
        _T.INT,
        2000,
        "The most partitions one DescribeTopicPartitions answer carries (KIP-966).",
        minimum=1,
    ),
    _d(
        "replica.selector.class",
        _T.STRING,
        None,
        "KIP-392: the selector naming a consumer's preferred read replica; unset: the "
        "leader. Only Kafka's org.apache.kafka.common.replica.RackAwareReplicaSelector.",
        choices=("", "org.apache.kafka.common.replica.RackAwareReplicaSelector"),
    ),
    _d(
        "replica.high.watermark.checkpoint.interval.ms",
        _T.LONG,
        5000,
        "How often high watermarks are checkpointed.",
    ),
    _d(
        "auto.leader.rebalance.enable",
        _T.BOOLEAN,
        True,
        "Move leadership back to preferred replicas.",
    ),
    _d(
        "leader.imbalance.per.broker.percentage",
        _T.INT,
        10,
        "Imbalance that triggers a rebalance.",
    ),
    _d(
        "leader.imbalance.check.interval.seconds",
        _T.LONG,
        300,
        "How often leader imbalance is checked.",
    ),
    _d(
        "controlled.shutdown.enable",
        _T.BOOLEAN,
        True,
        "Move leaders away before shutting down.",
    ),
    _d("controlled.shutdown.max.retries", _T.INT, 3, "Controlled shutdown attempts."),
    _d(
        "controlled.shutdown.retry.backoff.ms",
        _T.LONG,
        5000,
        "Back-off between controlled shutdown attempts.",
    ),
    _d(
        "broker.session.timeout.ms",
        _T.INT,
        9000,
        "A broker that is silent for this long loses its registration.",
        minimum=100,
    ),
    _d(
        "broker.heartbeat.interval.ms",
        _T.INT,
        2000,
        "Interval between broker heartbeats (quorum session pings).",
        minimum=10,
    ),
    _d(
        "leader.replication.throttled.rate",
        _T.LONG,
        _INT64_MAX,
        "Upper bound (B/s) on replication traffic for leaders listed in each topic's "
        "leader.replication.throttled.replicas (KIP-73). Set dynamically only.",
        minimum=0,
        dynamic=True,
    ),
    _d(
        "follower.replication.throttled.rate",
        _T.LONG,
        _INT64_MAX,
        "Upper bound (B/s) on replication traffic for followers listed in each topic's "
        "follower.replication.throttled.replicas (KIP-73). Set dynamically only.",
        minimum=0,
        dynamic=True,
    ),
    _d(
        "quota.window.num",
        _T.INT,
        11,
        "Samples kept in memory for client quotas (trafka.node.quota).",
        minimum=1,
    ),
    _d(
        "quota.window.size.seconds",
        _T.INT,
        1,
        "Time span of each client quota sample.",
        minimum=1,
    ),
    _d(
        "replica.alter.log.dirs.io.max.bytes.per.second",
        _T.LONG,
        _INT64_MAX,
        "Upper bound (B/s) on disk IO moving replicas between log directories of one broker. "
        "Stored for Kafka's tools (kafka-reassign-partitions --verify deletes it with the two "
        "rates above); trafka never moves replicas between log directories, so it limits nothing.",
        minimum=0,
        dynamic=True,
    ),
    # --- groups and offsets -------------------------------------------------------------------
    _d(
        "offsets.topic.num.partitions",
        _T.INT,
        50,
        "Partitions of __consumer_offsets.",
        minimum=1,
        maximum=4_000,  # trafka.node.topics.MAX_PARTITIONS
    ),
    _d(
        "offsets.topic.replication.factor",
        _T.SHORT,
        3,
        "Replication factor of __consumer_offsets (capped by live brokers).",
        minimum=1,
    ),
    _d(
        "offsets.topic.segment.bytes",
        _T.INT,
        104857600,
        "Segment size of __consumer_offsets.",
    ),
    _d("offsets.retention.minutes", _T.INT, 10080, "Offset retention for empty groups."),
    _d(
        "offsets.retention.check.interval.ms",
        _T.LONG,
        600000,
        "How often expired offsets are removed.",
    ),
    _d(
        "offsets.commit.timeout.ms",
        _T.INT,
        5000,
        "Timeout of offset commits waiting for replication.",
    ),
    _d(
        "group.initial.rebalance.delay.ms",
        _T.INT,
        3000,
        "Delay of the first rebalance of a new group.",
    ),
    _d("group.min.session.timeout.ms", _T.INT, 6000, "Smallest session timeout accepted."),
    _d("group.max.session.timeout.ms", _T.INT, 1800000, "Largest session timeout accepted."),
    _d("group.max.size", _T.INT, _INT32_MAX, "Largest consumer group.", minimum=1),
    # --- KIP-848 consumer groups -----------------------------------------------------------
    _d(
        "group.consumer.session.timeout.ms",
        _T.INT,
        45000,
        "Session timeout of KIP-848 consumer group members.",
        minimum=1,
    ),
    _d(
        "group.consumer.min.session.timeout.ms",
        _T.INT,
        45000,
        "Smallest group.consumer.session.timeout.ms accepted.",
        minimum=1,
    ),
    _d(
        "group.consumer.max.session.timeout.ms",
        _T.INT,
        60000,
        "Largest group.consumer.session.timeout.ms accepted.",
        minimum=1,
    ),
    _d(
        "group.consumer.heartbeat.interval.ms",
        _T.INT,
        5000,
        "Heartbeat interval given to KIP-848 consumer group members.",
        minimum=1,
    ),
    _d(
        "group.consumer.min.heartbeat.interval.ms",
        _T.INT,
        5000,
        "Smallest group.consumer.heartbeat.interval.ms accepted.",
        minimum=1,
    ),
    _d(
        "group.consumer.max.heartbeat.interval.ms",
        _T.INT,
        15000,
        "Largest group.consumer.heartbeat.interval.ms accepted.",
        minimum=1,
    ),
    _d(
        "group.consumer.assignors",
        _T.LIST,
        ["uniform", "range"],
        "Server-side assignors of KIP-848 consumer groups; the first is the default.",
        choices=("uniform", "range"),
        reason="Kafka also accepts assignor class names; trafka knows only these two.",
    ),
    _d(
        "group.consumer.max.size",
        _T.INT,
        _INT32_MAX,
        "Largest KIP-848 consumer group.",
        minimum=1,
    ),
    _d(
        "group.consumer.migration.policy",
        _T.STRING,
        "bidirectional",
        "Conversion between classic and consumer groups with members (KIP-848 online "
        "migration): bidirectional, upgrade (classic to consumer), downgrade (consumer to "
        "classic) or disabled. Empty groups convert whatever the policy.",
        choices=("bidirectional", "upgrade", "downgrade", "disabled"),
    ),
    _d(
        "transactional.id.expiration.ms",
        _T.INT,
        604800000,
        "Expiry of idle transactional ids.",
    ),
    # --- transactions (KIP-98) ----------------------------------------------------------------
    _d(
        "transaction.state.log.num.partitions",
        _T.INT,
        50,
        "Partitions of __transaction_state.",
        minimum=1,
    ),
    _d(
        "transaction.state.log.replication.factor",
        _T.SHORT,
        3,
        "Replication factor of __transaction_state (capped by live brokers).",
        minimum=1,
    ),
    _d(
        "transaction.state.log.min.isr",
        _T.INT,
        2,
        "min.insync.replicas of __transaction_state (capped by its replication factor).",
        minimum=1,
    ),
    _d(
        "transaction.state.log.segment.bytes",
        _T.INT,
        104857600,
        "Segment size of __transaction_state.",
    ),
    _d(
        "transaction.max.timeout.ms",
        _T.INT,
        900000,
        "Largest transaction timeout a producer may ask for.",
        minimum=1,
    ),
    _d(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        _T.INT,
        10000,
        "How often transactions open past their timeout are aborted.",
        minimum=1,
    ),
    _d(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        _T.INT,
        3600000,
        "How often expired transactional ids are removed.",
        minimum=1,
    ),
    _d(
        "producer.id.expiration.ms",
        _T.INT,
        86400000,
        "Expiry of idle producer ids (KIP-854).",
    ),
    # --- network ------------------------------------------------------------------------------
    _d(
        "socket.request.max.bytes",
        _T.INT,
        104857600,
        "Largest request frame; bigger frames close the connection.",
        minimum=1,
    ),
    _d("socket.send.buffer.bytes", _T.INT, 102400, "SO_SNDBUF; -1 = OS default."),
    _d("socket.receive.buffer.bytes", _T.INT, 102400, "SO_RCVBUF; -1 = OS default."),
    _d(
        "max.connections",
        _T.INT,
        10_000,
        "Connections in total (also per listener: listener.name.<l>.max.connections); at the "
        "limit a listener stops accepting until one closes. The inter-broker listener is "
        "exempt from the broker-wide limit and closes the least recently used other "
        "connection instead (KIP-402).",
        minimum=0,
        dynamic=True,
        reason="Kafka's default is unlimited; a finite one bounds descriptors and memory.",
    ),
    _d(
        "max.connections.per.ip",
        _T.INT,
        1_000,
        "Connections per client IP; more are closed at once.",
        minimum=0,
        dynamic=True,
        reason="Kafka's default is unlimited; one client cannot take every connection.",
    ),
    _d(
        "max.connections.per.ip.overrides",
        _T.STRING,
        "",
        "Per-IP limits replacing max.connections.per.ip: 'ip:count,ip:count'.",
        dynamic=True,
    ),
    _d(
        "max.connection.creation.rate",
        _T.INT,
        2**31 - 1,
        "Connections/s accepted broker-wide (also per listener: "
        "listener.name.<l>.max.connection.creation.rate); beyond it the listener waits "
        "before accepting the next (KIP-612). The inter-broker listener is exempt from the "
        "broker-wide rate.",
        minimum=0,
        dynamic=True,
    ),
    _d(
        "queued.max.request.bytes",
        _T.LONG,
        512 * 1024 * 1024,
        "Request bytes read but not yet answered, over all connections; reading pauses "
        "beyond it (-1 = unbounded).",
        reason="Kafka's default is unbounded (-1).",
    ),
    _d(
        "connections.max.idle.ms",
        _T.LONG,
        600000,
        "Idle connections are closed after this time.",
    ),
    _d(
        "queued.max.requests",
        _T.INT,
        500,
        "In-flight requests per connection before reading pauses.",
        minimum=1,
    ),
    _d("num.network.threads", _T.INT, 3, "Accepted for compatibility; trio uses one thread."),
    _d("num.io.threads", _T.INT, 8, "Accepted for compatibility; trio uses one thread."),
    _d(
        "fetch.max.bytes",
        _T.INT,
        57671680,
        "Largest fetch response the broker builds.",
        minimum=0,
    ),
    _d(
        "max.incremental.fetch.session.cache.slots",
        _T.INT,
        1000,
        "Incremental fetch sessions (KIP-227) the node keeps for consumers and followers; "
        "0 turns sessions off (every fetch is answered sessionless).",
        minimum=0,
    ),
    _d(
        "request.timeout.ms",
        _T.INT,
        30000,
        "Timeout of inter-broker requests.",
    ),
    _d(
        "loop.watchdog.threshold.ms",
        _T.INT,
        1000,
        "Log a WARNING with the event loop thread's stack when one task holds the loop "
        "longer than this (trafka/node/loop_watchdog.py); 0 turns the watchdog off.",
        minimum=0,
        reason="Kafka has no such key (its network and request threads are separate).",
    ),
    _d(
        "metrics.listener",
        _T.STRING,
        "",
        "Prometheus endpoint of this node, http://host:port (docs/metrics.md); empty = off. "
        "A host-less http://:port binds 127.0.0.1.",
        reason="Kafka has no such key (it exposes JMX; the JMX exporter is a separate agent).",
    ),
)

BROKER_CONFIG_BY_NAME: Mapping[str, ConfigDef] = {d.name: d for d in BROKER_CONFIG_DEFS}

TOPIC_CONFIG_SYNONYMS: Mapping[str, tuple[str, ...]] = {
    "segment.bytes": ("log.segment.bytes",),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "retention.bytes": ("log.retention.bytes",),
    "cleanup.policy": ("log.cleanup.policy",),
    "max.message.bytes": ("message.max.bytes",),
    "min.insync.replicas": ("min.insync.replicas",),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
    "compression.type": ("compression.type",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "message.timestamp.difference.max.ms": ("log.message.timestamp.difference.max.ms",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "segment.index.bytes": ("log.index.size.max.bytes",),
}
"""Topic key -> broker keys supplying its default, strongest first (LogConfig synonyms)."""

_CONVERSIONS_MS: Mapping[str, int] = {
    "log.retention.minutes": 60_000,
    "log.retention.hours": 3_600_000,
    "log.roll.hours": 3_600_000,
}


@dataclass(frozen=True, slots=True)
class Listener:
    """One `NAME://host:port` listener."""

    name: str
    host: str
    port: int

    def uri(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Voter:
    """One `id@host:port` entry of controller.quorum.voters."""

    node_id: int
    host: str
    port: int


_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:]*):(\d+)$")
_VOTER = re.compile(r"^(\d+)@(\[[^\]]*\]|[^:]+):(\d+)$")


def _check_host_counts(key: str, text: str) -> None:
    """Kafka's `host:count,host:count` map (max.connections.per.ip.overrides)."""
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip() or not count.strip().isdigit():
            raise ConfigError(
                f"invalid value {text!r} for configuration {key}: expected host:count,... "
                f"({item!r})"
            )


def parse_listener(text: str, key: str = "listeners") -> Listener:
    match = _LISTENER.match(text.strip())
    if not match:
        raise ConfigError(
            f"invalid value {text!r} for configuration {key}: expected NAME://host:port"
        )
    port = int(match.group(3))
    if not 0 <= port <= 65535:
        raise ConfigError(f"invalid value {text!r} for configuration {key}: port out of range")
    return Listener(match.group(1).upper(), match.group(2).strip("[]"), port)


def parse_voter(text: str) -> Voter:
    match = _VOTER.match(text.strip())
    if not match:
        raise ConfigError(
            f"invalid value {text!r} for configuration controller.quorum.voters: "
            "expected id@host:port"
        )
    return Voter(int(match.group(1)), match.group(2).strip("[]"), int(match.group(3)))


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """A node's effective configuration: typed values and where each one came from."""

    static_values: Mapping[str, Any]
    """Keys set by server.properties or --set, parsed to their types."""
    dynamic_values: Mapping[str, Any] = field(default_factory=dict)
    """Keys set with AlterConfigs for this broker (source DYNAMIC_BROKER_CONFIG)."""
    dynamic_default_values: Mapping[str, Any] = field(default_factory=dict)
    """Keys set with AlterConfigs for all brokers (DYNAMIC_DEFAULT_BROKER_CONFIG)."""

    # ---- construction -----------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        node_id: int | None = None,
        properties: Mapping[str, str] | None = None,
        overrides: Iterable[str] = (),
    ) -> BrokerConfig:
        """Defaults < properties file < `--set key=value` overrides < explicit node_id."""
        raw: dict[str, str] = dict(properties or {})
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"invalid --set {item!r}: expected key=value")
            raw[key.strip()] = value.strip()
        if node_id is not None:
            raw["node.id"] = str(node_id)
        values = {key: _definition(key).parse(value) for key, value in raw.items()}
        if values.get("node.id") is None and values.get("broker.id", -1) not in (None, -1):
            values["node.id"] = values["broker.id"]
        # Kafka's KafkaConfig.populateSynonyms: broker.id follows node.id when unset, and the
        # two may not disagree.
        if values.get("node.id") is not None:
            if values.get("broker.id", -1) in (None, -1):
                values["broker.id"] = values["node.id"]
            elif values["broker.id"] != values["node.id"]:
                raise ConfigError(
                    f"invalid configuration broker.id={values['broker.id']}: it must equal "
                    f"node.id={values['node.id']}"
                )
        config = cls(static_values=values)
        config.check()
        return config

    def with_dynamic(
        self,
        dynamic_values: Mapping[str, Any],
        dynamic_default_values: Mapping[str, Any] | None = None,
    ) -> BrokerConfig:
        return BrokerConfig(
            static_values=self.static_values,
            dynamic_values=dict(dynamic_values),
            dynamic_default_values=dict(
                self.dynamic_default_values
                if dynamic_default_values is None
                else dynamic_default_values
            ),
        )

    def check(self) -> None:
        """Cross-key validation; raises ConfigError with one line."""
        if self.node_id < 0:
            raise ConfigError("missing configuration node.id: pass --id N or --set node.id=N")
        names = set()
        for listener in self.listeners:
            if listener.name in names:
                raise ConfigError(f"invalid configuration listeners: {listener.name} repeated")
            names.add(listener.name)
        if not self.listeners:
            raise ConfigError("invalid configuration listeners: at least one listener needed")
        self._check_roles()
        self._check_consumer_group_timeouts()

    def _check_consumer_group_timeouts(self) -> None:
        """Kafka's GroupCoordinatorConfig rules for the KIP-848 timeouts."""
        for key in ("session.timeout.ms", "heartbeat.interval.ms"):
            value = self.get_int(f"group.consumer.{key}")
            low = self.get_int(f"group.consumer.min.{key}")
            high = self.get_int(f"group.consumer.max.{key}")
            if not low <= value <= high:
                raise ConfigError(
                    f"invalid configuration group.consumer.{key}={value}: must be between "
                    f"group.consumer.min.{key}={low} and group.consumer.max.{key}={high}"
                )
        if self.get_int("group.consumer.heartbeat.interval.ms") >= self.get_int(
            "group.consumer.session.timeout.ms"
        ):
            raise ConfigError(
                "invalid configuration group.consumer.heartbeat.interval.ms: must be less "
                "than group.consumer.session.timeout.ms"
            )

    def _check_roles(self) -> None:
        """Kafka's KafkaConfig rules for `process.roles` against `controller.quorum.voters`
        (its messages): a node with the controller role is a voter, a broker-only node is
        not (it runs as a quorum learner). A controller-only node is not implemented."""
        roles = self.process_roles
        rendered = ",".join(roles)
        if not roles:
            raise ConfigError(
                "invalid configuration process.roles: at least one role (broker, controller) "
                "is needed (ZooKeeper mode does not exist here)"
            )
        if len(set(roles)) != len(roles):
            raise ConfigError(
                f"invalid configuration process.roles={rendered}: "
                "Duplicate role names found in `process.roles`"
            )
        if "broker" not in roles:
            raise ConfigError(
                f"invalid configuration process.roles={rendered}: a controller-only node is "
                "not implemented (use broker,controller or broker)"
            )
        if not self.is_controller and not self.get("controller.quorum.voters"):
            # The embedded default is a one-voter quorum of this very node.
            raise ConfigError(
                f"invalid configuration process.roles={rendered}: a broker-only node needs "
                "controller.quorum.voters (the voters whose quorum it joins as a learner)"
            )
        voter_ids = ",".join(str(v.node_id) for v in self.quorum_voters)
        if self.is_controller and not self.is_quorum_voter:
            raise ConfigError(
                f"invalid configuration process.roles={rendered}: If process.roles contains "
                f"the 'controller' role, the node id {self.node_id} must be included in the "
                f"set of voters controller.quorum.voters={voter_ids}"
            )
        if not self.is_controller and self.is_quorum_voter:
            raise ConfigError(
                f"invalid configuration process.roles={rendered}: If process.roles contains "
                f"just the 'broker' role, the node id {self.node_id} must not be included in "
                f"the set of voters controller.quorum.voters={voter_ids}"
            )

    # ---- lookups ----------------------------------------------------------------------------
    def get(self, key: str) -> Any:
        """The effective typed value of a broker key: per-broker dynamic > cluster-default
        dynamic > static > default (Kafka's DynamicBrokerConfig precedence)."""
        definition = _definition(key)
        for layer in (self.dynamic_values, self.dynamic_default_values, self.static_values):
            if key in layer:
                return layer[key]
        return definition.default

    def source(self, key: str) -> ConfigSource:
        if key in self.dynamic_values:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if key in self.dynamic_default_values:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if key in self.static_values:
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG

    def per_listener(self, inner: str) -> dict[str, Any]:
        """Every ``listener.name.<l>.<inner>`` value set in any layer, by upper-case listener
        name (the most specific layer wins, as `get`)."""
        found: dict[str, Any] = {}
        for layer in (self.static_values, self.dynamic_default_values, self.dynamic_values):
            for key, value in layer.items():
                scoped = listener_key(key)
                if scoped is not None and scoped[1] == inner:
                    found[scoped[0]] = value
        return found

    def is_set(self, key: str) -> bool:
        return self.source(key) is not ConfigSource.DEFAULT_CONFIG

    def get_int(self, key: str) -> int:
        value = self.get(key)
        assert isinstance(value, int), key
        return value

    def get_bool(self, key: str) -> bool:
        return bool(self.get(key))

    @property
    def node_id(self) -> int:
        value = self.get("node.id")
        return -1 if value is None else int(value)

    @property
    def process_roles(self) -> list[str]:
        return [str(role) for role in self.get("process.roles")]

    @property
    def is_controller(self) -> bool:
        """`controller` is one of this node's roles: it votes in the metadata quorum and
        competes for `/controller`. A broker-only node does neither."""
        return "controller" in self.process_roles

    @property
    def is_quorum_voter(self) -> bool:
        return self.node_id in {v.node_id for v in self.quorum_voters}

    @property
    def listeners(self) -> list[Listener]:
        return [parse_listener(text) for text in self.get("listeners")]

    @property
    def advertised_listeners(self) -> list[Listener]:
        raw = self.get("advertised.listeners")
        if not raw:
            return self.listeners
        return [parse_listener(text, "advertised.listeners") for text in raw]

    @property
    def quorum_voters(self) -> list[Voter]:
        raw = self.get("controller.quorum.voters")
        if not raw:
            return [Voter(self.node_id, "localhost", 9093)]
        return [parse_voter(text) for text in raw]

    @property
    def log_dirs(self) -> list[Path]:
        raw = self.get("log.dirs")
        if raw:
            return [Path(p) for p in raw]
        single = self.get("log.dir")
        if single:
            return [Path(single)]
        return [Path("data") / f"node-{self.node_id}"]

    def ms_value(self, key: str) -> int | None:
        """A *.ms / *.minutes / *.hours value in milliseconds."""
        value = self.get(key)
        if value is None:
            return None
        return int(value) * _CONVERSIONS_MS.get(key, 1)

    @property
    def log_retention_ms(self) -> int:
        """log.retention.ms > .minutes > .hours (Kafka's precedence, SEEDS §14)."""
        for key in ("log.retention.ms", "log.retention.minutes", "log.retention.hours"):
            if self.is_set(key) or key == "log.retention.hours":
                value = self.ms_value(key)
                if value is not None:
                    return value if value >= 0 else -1
        raise AssertionError("log.retention.hours has a default")

    @property
    def log_roll_ms(self) -> int:
        if self.get("log.roll.ms") is not None:
            return int(self.get("log.roll.ms"))
        value = self.ms_value("log.roll.hours")
        assert value is not None
        return value

    def quorum_properties(self) -> dict[str, str]:
        """The keys trafka.metadata_quorum.config reads, as Kafka strings."""
        keys = (
            "controller.quorum.secret",
            "controller.quorum.secret.file",
            "controller.quorum.election.timeout.ms",
            "controller.quorum.fsync.interval.ms",
            "controller.quorum.request.timeout.ms",
            "broker.session.timeout.ms",
            "broker.heartbeat.interval.ms",
            "zookeeper.chroot",
        )
        result = {k: _definition(k).render(self.get(k)) or "" for k in keys}
        result["controller.quorum.voters"] = ",".join(
            f"{v.node_id}@{v.host}:{v.port}" for v in self.quorum_voters
        )
        return {k: v for k, v in result.items() if v}

    def topic_defaults(self) -> dict[str, str]:
        """Broker-supplied defaults of topic-level keys, as Kafka strings (for LogConfig)."""
        result: dict[str, str] = {}
        for topic_key, broker_keys in TOPIC_CONFIG_SYNONYMS.items():
            if topic_key == "retention.ms":
                result[topic_key] = str(self.log_retention_ms)
                continue
            if topic_key == "segment.ms":
                result[topic_key] = str(self.log_roll_ms)
                continue
            for broker_key in broker_keys:
                value = self.get(broker_key)
                if value is not None:
                    rendered = _definition(broker_key).render(value)
                    if rendered is not None:
                        result[topic_key] = rendered
                    break
        return result

    def topic_synonym(self, topic_key: str) -> tuple[str, str, ConfigSource] | None:
        """The broker key that supplies a topic key's default: (name, value, source)."""
        for broker_key in TOPIC_CONFIG_SYNONYMS.get(topic_key, ()):
            if self.is_set(broker_key):
                rendered = _definition(broker_key).render(self.get(broker_key))
                return broker_key, rendered or "", self.source(broker_key)
        broker_keys = TOPIC_CONFIG_SYNONYMS.get(topic_key, ())
        for broker_key in reversed(broker_keys):
            default = _definition(broker_key).default
            if default is not None:
                rendered = _definition(broker_key).render(default) or ""
                return broker_key, rendered, ConfigSource.DEFAULT_CONFIG
        return None

    def describe(self, key: str) -> tuple[str | None, ConfigSource, bool]:
        """(rendered value, source, sensitive) for DescribeConfigs on a broker."""
        definition = _definition(key)
        if definition.sensitive:
            return None, self.source(key), True
        return definition.render(self.get(key)), self.source(key), False


_LISTENER_PREFIX: Final = "listener.name."
_SASL_MECHANISM_PREFIXES: Final = ("plain.", "scram-sha-256.", "scram-sha-512.", "gssapi.")


def listener_key(key: str) -> tuple[str, str] | None:
    """``listener.name.<listener>.<key>`` -> (LISTENER, key), the mechanism prefix of
    ``listener.name.<l>.<mechanism>.sasl.jaas.config`` kept in the key; None otherwise."""
    if not key.startswith(_LISTENER_PREFIX):
        return None
    listener, sep, inner = key[len(_LISTENER_PREFIX) :].partition(".")
    if not sep or not listener or not inner:
        return None
    return listener.upper(), inner


def _definition(key: str) -> ConfigDef:
    try:
        return BROKER_CONFIG_BY_NAME[key]
    except KeyError:
        pass
    scoped = listener_key(key)
    if scoped is not None:
        inner = scoped[1]
        for prefix in _SASL_MECHANISM_PREFIXES:
            if inner.startswith(prefix) and inner[len(prefix) :] in BROKER_CONFIG_BY_NAME:
                inner = inner[len(prefix) :]
                break
        base = BROKER_CONFIG_BY_NAME.get(inner)
        if base is not None and (inner.startswith(("ssl.", "sasl.")) or inner in _PER_LISTENER):
            return dataclasses.replace(base, name=key, dynamic=inner in _PER_LISTENER_DYNAMIC)
    raise ConfigError(f"unknown configuration {key!r}") from None


_PER_LISTENER_DYNAMIC: Final = frozenset({"max.connections", "max.connection.creation.rate"})
"""Listener-prefixed keys that AlterConfigs may change (Kafka's ListenerReconfigurable)."""
_PER_LISTENER: Final = frozenset({"connections.max.reauth.ms"}) | _PER_LISTENER_DYNAMIC


def definition(key: str) -> ConfigDef:
    """The definition of a broker key; ConfigError for unknown keys."""
    return _definition(key)


def parse_properties(text: str, source: str = "server.properties") -> dict[str, str]:
    """Kafka's `server.properties` (java.util.Properties subset): key=value or key: value
    lines, `#`/`!` comments, backslash line continuation. Returns raw strings."""
    result: dict[str, str] = {}
    pending = ""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not pending and (not stripped or stripped[0] in "#!"):
            continue
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            pending += stripped[:-1]
            continue
        stripped = pending + stripped
        pending = ""
        match = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", stripped)
        if not match:
            raise ConfigError(f"{source}:{number}: expected key=value, got {stripped!r}")
        result[match.group(1)] = match.group(2)
    return result


def load_properties_file(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror}") from None
    return parse_properties(text, str(path))
