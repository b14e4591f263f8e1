"""Topic-level config keys as DescribeConfigs lists them: type, Kafka default, doc.

Values are validated and obeyed by `trafka.log.config.LogConfig`; this table adds what
DescribeConfigs needs (the type and documentation), with Kafka's defaults rendered as
strings. A topic key whose default comes from a broker key (`retention.ms` from
`log.retention.hours`, ...) reports that broker key as a synonym
(`trafka.node.config.broker.TOPIC_CONFIG_SYNONYMS`).

`leader.replication.throttled.replicas` / `follower.replication.throttled.replicas` are
obeyed by the replica manager (`trafka.node.replication.throttle`, KIP-73); their format is
checked by `trafka.log.config.validate_throttled_replicas`.
"""

from __future__ import annotations

from collections.abc import Mapping

from trafka.node.config.broker import ConfigType

_T = ConfigType
_LONG_MAX = str(2**63 - 1)

TOPIC_CONFIG_DEFS: Mapping[str, tuple[ConfigType, str | None, str]] = {
    "cleanup.policy": (_T.LIST, "delete", "delete, compact or both."),
    "compression.type": (_T.STRING, "producer", "Final compression; producer keeps it."),
    "delete.retention.ms": (_T.LONG, "86400000", "How long tombstones are kept."),
    "file.delete.delay.ms": (_T.LONG, "60000", "Delay before deleting a file."),
    "flush.messages": (_T.LONG, _LONG_MAX, "Messages between fsyncs."),
    "flush.ms": (_T.LONG, _LONG_MAX, "Milliseconds between fsyncs."),
    "follower.replication.throttled.replicas": (
        _T.LIST,
        "",
        "Replicas throttled on the follower side (KIP-73): '*' or partitionId:brokerId,...",
    ),
    "index.interval.bytes": (_T.INT, "4096", "Bytes between offset index entries."),
    "leader.replication.throttled.replicas": (
        _T.LIST,
        "",
        "Replicas throttled on the leader side (KIP-73): '*' or partitionId:brokerId,...",
    ),
    "max.compaction.lag.ms": (_T.LONG, _LONG_MAX, "Longest a record stays uncompacted."),
    "max.message.bytes": (_T.INT, "1048588", "Largest record batch accepted."),
    "message.timestamp.type": (_T.STRING, "CreateTime", "CreateTime or LogAppendTime."),
    "message.timestamp.difference.max.ms": (_T.LONG, _LONG_MAX, "Accepted clock skew."),
    "min.cleanable.dirty.ratio": (_T.DOUBLE, "0.5", "Dirty ratio that triggers cleaning."),
    "min.compaction.lag.ms": (_T.LONG, "0", "Minimum age before compaction."),
    "min.insync.replicas": (_T.INT, "1", "Minimum ISR size for acks=all."),
    "preallocate": (_T.BOOLEAN, "false", "Preallocate segment files (not implemented)."),
    "retention.bytes": (_T.LONG, "-1", "Size retention per partition; -1 = none."),
    "retention.ms": (_T.LONG, "604800000", "Time retention; -1 = forever."),
    "segment.bytes": (_T.INT, "1073741824", "Segment file size."),
    "segment.index.bytes": (_T.INT, "10485760", "Index file size."),
    "segment.jitter.ms": (_T.LONG, "0", "Random jitter of segment.ms."),
    "segment.ms": (_T.LONG, "604800000", "Roll a segment after this time."),
    "unclean.leader.election.enable": (
        _T.BOOLEAN,
        "false",
        "Elect an out-of-ISR replica as a last resort.",
    ),
}
