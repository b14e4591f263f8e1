"""Kafka's znode paths and JSON payloads as typed codecs (SEEDS.md §2, ZK-03..ZK-12).

Layouts follow Kafka's `core/src/main/scala/kafka/zk/ZkData.scala` (3.x), so a tool that
knows Kafka's ZooKeeper layout reads our tree. Every payload is a frozen dataclass with
`to_json() -> bytes` and `from_json(bytes)`; `from_json` raises `ZNodeFormatError` on any
malformed input (never another exception). Nothing else in trafka handles raw znode JSON.

Path -> payload class, with an example of the exact bytes:

* `/brokers/ids/<id>` (ephemeral) -> `BrokerRegistration` v5:
  `{"features":{...},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
  "endpoints":["PLAINTEXT://h:9092"],"jmx_port":-1,"port":9092,"host":"h","version":5,
  "timestamp":"<ms>","rack":"r"}` (rack omitted when unset; host/port are the PLAINTEXT
  listener's, or null/-1)
* `/controller` (ephemeral) -> `ControllerRegistration`:
  `{"version":1,"brokerid":1,"timestamp":"<ms>"}`
* `/controller_epoch` -> `ControllerEpoch`: the decimal integer, e.g. `b"3"`
* `/brokers/topics/<t>` -> `TopicAssignment` v3: `{"version":3,"topic_id":"<base64 uuid>",
  "partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{}}` (v1/v2 decoded)
* `/brokers/topics/<t>/partitions/<p>/state` -> `PartitionState`:
  `{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}`
  (v2 adds `leader_recovery_state`, KIP-704)
* `/admin/reassign_partitions` -> `ReassignPartitions`:
  `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}`
* `/admin/preferred_replica_election` -> `PreferredReplicaElection`:
  `{"version":1,"partitions":[{"topic":"t","partition":0}]}`
* `/admin/delete_topics/<t>` -> empty data (the child's name is the topic)
* `/isr_change_notification/isr_change_<10 digits>` -> `IsrChangeNotification`:
  `{"version":1,"partitions":[{"topic":"t","partition":0}]}`
* `/config/topics/<t>`, `/config/brokers/<id>`, `/config/groups/<sanitized group id>`
  -> `EntityConfig`:
  `{"version":1,"config":{"k":"v"}}`
* `/config/changes/config_change_<10 digits>` -> `ConfigChangeNotification`:
  `{"version":2,"entity_path":"topics/t"}`
* `/cluster/id` -> `ClusterId`: `{"version":"1","id":"<base64 uuid>"}`
* `/latest_producer_id_block` -> `ProducerIdBlock`:
  `{"version":1,"broker":1,"block_start":"0","block_end":"999"}`

Not implemented: `/feature` (KIP-584 finalized features), `/config/users|clients|ips`
quota entities beyond the generic `EntityConfig`, ACL paths (`/kafka-acl...`), delegation
tokens, `/log_dir_event_notification`.
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, NoReturn

# ---------------------------------------------------------------------------------------
# Paths

BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_GROUPS = "/config/groups"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"

#: Persistent paths Kafka creates at startup (KafkaZkClient.createTopLevelPaths).
PERSISTENT_PATHS: tuple[str, ...] = (
    ADMIN,
    DELETE_TOPICS,
    BROKERS,
    BROKER_IDS,
    BROKER_TOPICS,
    BROKER_SEQID,
    CONFIG,
    CONFIG_TOPICS,
    CONFIG_BROKERS,
    CONFIG_CHANGES,
    "/config/clients",
    "/config/users",
    "/config/ips",
    ISR_CHANGE_NOTIFICATION,
    CLUSTER,
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{int(broker_id)}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{partitions_path(topic)}/{int(partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def broker_config_path(broker_id: int | str) -> str:
    """`<default>` is Kafka's name for the cluster-wide default broker config."""
    return f"{CONFIG_BROKERS}/{broker_id}"


def group_config_path(group_id: str) -> str:
    """`/config/groups/<sanitized group id>`: a group's dynamic configs (KIP-848; Kafka's KRaft
    keeps them as ConfigRecords of resource type GROUP, this is their ZooKeeper-style place).
    The id is sanitized like Kafka's user and client-id entities (`Sanitizer`: URL encoding,
    a space as `%20`, `*` as `%2A`) since a group id may hold `/`."""
    return f"{CONFIG_GROUPS}/{sanitize_entity_name(group_id)}"


def sanitize_entity_name(name: str) -> str:
    """Kafka's `Sanitizer.sanitize`: URLEncoder's encoding (letters, digits and `.-_*` kept),
    with a space as `%20` and `*` as `%2A`."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize_entity_name(name: str) -> str:
    return urllib.parse.unquote(name)


def isr_change_sequence_prefix() -> str:
    """Create this path with sequential=True; the quorum appends 10 digits."""
    return f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}"


def config_change_sequence_prefix() -> str:
    return f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}"


# ---------------------------------------------------------------------------------------
# JSON helpers

MAX_PAYLOAD_BYTES = 1_048_576


class ZNodeFormatError(ValueError):
    """A znode payload that does not parse as the expected Kafka layout."""


def _fail(what: str, detail: str) -> NoReturn:
    raise ZNodeFormatError(f"{what}: {detail}")


def _load(data: bytes, what: str) -> dict[str, Any]:
    if not isinstance(data, bytes | bytearray | memoryview):
        _fail(what, "payload is not bytes")
    if len(data) > MAX_PAYLOAD_BYTES:
        _fail(what, "payload too large")
    try:
        value = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        _fail(what, f"not JSON ({error})")
    if not isinstance(value, dict):
        _fail(what, "not a JSON object")
    return value


def _dump(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def _int(obj: dict[str, Any], key: str, what: str, default: int | None = None) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(what, f"{key!r} must be an integer")
    return value


def _str(obj: dict[str, Any], key: str, what: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        _fail(what, f"{key!r} must be a string")
    return value


def _int_string(obj: dict[str, Any], key: str, what: str) -> int:
    """Kafka writes timestamps and block bounds as decimal strings."""
    value = obj.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    _fail(what, f"{key!r} must be a decimal string")


def _int_list(value: Any, what: str, key: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(x, int) and not isinstance(x, bool) for x in value
    ):
        _fail(what, f"{key!r} must be a list of integers")
    return tuple(value)


def _str_map(value: Any, what: str, key: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        _fail(what, f"{key!r} must map strings to strings")
    return dict(value)


def _assignment(value: Any, what: str, key: str) -> dict[int, tuple[int, ...]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        _fail(what, f"{key!r} must be an object")
    result: dict[int, tuple[int, ...]] = {}
    for partition, replicas in value.items():
        try:
            number = int(partition)
        except (TypeError, ValueError):
            _fail(what, f"{key!r} has a non-numeric partition {partition!r}")
        result[number] = _int_list(replicas, what, key)
    return dict(sorted(result.items()))


def _assignment_json(value: dict[int, tuple[int, ...]]) -> dict[str, list[int]]:
    return {str(p): list(r) for p, r in sorted(value.items())}


def _topic_partitions(obj: dict[str, Any], what: str) -> list[dict[str, Any]]:
    partitions = obj.get("partitions")
    if not isinstance(partitions, list) or not all(isinstance(p, dict) for p in partitions):
        _fail(what, "'partitions' must be a list of objects")
    return partitions


# ---------------------------------------------------------------------------------------
# Payloads


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener: `listener_name://host:port` with its security protocol."""

    listener_name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


def _parse_endpoint(text: Any, protocols: dict[str, str], what: str) -> Endpoint:
    if not isinstance(text, str) or "://" not in text:
        _fail(what, f"bad endpoint {text!r}")
    name, _, rest = text.partition("://")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        _fail(what, f"bad endpoint {text!r}")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return Endpoint(name, host, int(port), protocols.get(name, name))


@dataclass(frozen=True, slots=True)
class FeatureRange:
    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """`/brokers/ids/<id>` (ZK-03), Kafka's BrokerIdZNode version 5 (KIP-584 features)."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    timestamp_ms: int
    rack: str | None = None
    jmx_port: int = -1
    features: dict[str, FeatureRange] = field(default_factory=dict)
    version: int = 5

    def to_json(self) -> bytes:
        plaintext = next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)
        value: dict[str, Any] = {
            "features": {
                name: {"min_version": r.min_version, "max_version": r.max_version}
                for name, r in sorted(self.features.items())
            },
            "listener_security_protocol_map": {
                e.listener_name: e.security_protocol for e in self.endpoints
            },
            "endpoints": [e.connection_string() for e in self.endpoints],
            "jmx_port": self.jmx_port,
            "port": plaintext.port if plaintext else -1,
            "host": plaintext.host if plaintext else None,
            "version": self.version,
            "timestamp": str(self.timestamp_ms),
        }
        if self.rack is not None:
            value["rack"] = self.rack
        return _dump(value)

    @classmethod
    def from_json(cls, data: bytes, broker_id: int) -> BrokerRegistration:
        what = f"/brokers/ids/{broker_id}"
        obj = _load(data, what)
        version = _int(obj, "version", what)
        protocols = _str_map(obj.get("listener_security_protocol_map") or {}, what, "map")
        raw_endpoints = obj.get("endpoints")
        if version >= 2:
            if not isinstance(raw_endpoints, list):
                _fail(what, "'endpoints' must be a list")
            endpoints = tuple(_parse_endpoint(e, protocols, what) for e in raw_endpoints)
        else:
            endpoints = (Endpoint("PLAINTEXT", _str(obj, "host", what), _int(obj, "port", what)),)
        rack = obj.get("rack")
        if rack is not None and not isinstance(rack, str):
            _fail(what, "'rack' must be a string")
        features: dict[str, FeatureRange] = {}
        raw_features = obj.get("features") or {}
        if not isinstance(raw_features, dict):
            _fail(what, "'features' must be an object")
        for name, rng in raw_features.items():
            if not isinstance(rng, dict):
                _fail(what, "bad feature range")
            features[str(name)] = FeatureRange(
                _int(rng, "min_version", what), _int(rng, "max_version", what)
            )
        return cls(
            broker_id=broker_id,
            endpoints=endpoints,
            timestamp_ms=_int_string(obj, "timestamp", what),
            rack=rack,
            jmx_port=_int(obj, "jmx_port", what, -1),
            features=features,
            version=version,
        )


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    """`/controller` (ZK-05, ZK-08): the ephemeral node all brokers race to create."""

    broker_id: int
    timestamp_ms: int

    def to_json(self) -> bytes:
        return _dump(
            {"version": 1, "brokerid": self.broker_id, "timestamp": str(self.timestamp_ms)}
        )

    @classmethod
    def from_json(cls, data: bytes) -> ControllerRegistration:
        obj = _load(data, CONTROLLER)
        return cls(_int(obj, "brokerid", CONTROLLER), _int_string(obj, "timestamp", CONTROLLER))


@dataclass(frozen=True, slots=True)
class ControllerEpoch:
    """`/controller_epoch` (ZK-10, KR-04): a plain decimal integer, not JSON."""

    epoch: int

    def to_json(self) -> bytes:
        return str(self.epoch).encode("ascii")

    @classmethod
    def from_json(cls, data: bytes) -> ControllerEpoch:
        try:
            text = bytes(data).decode("ascii").strip()
            if not text.lstrip("-").isdigit() or len(text) > 20:
                raise ValueError(text)
            return cls(int(text))
        except (UnicodeDecodeError, ValueError, TypeError):
            _fail(CONTROLLER_EPOCH, "not a decimal integer")


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """`/brokers/topics/<t>`: partition -> replicas, plus ongoing reassignment (KIP-455)."""

    partitions: dict[int, tuple[int, ...]]
    topic_id: str | None = None
    adding_replicas: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        value: dict[str, Any] = {"version": 3 if self.topic_id is not None else 2}
        if self.topic_id is not None:
            value["topic_id"] = self.topic_id
        value["partitions"] = _assignment_json(self.partitions)
        value["adding_replicas"] = _assignment_json(self.adding_replicas)
        value["removing_replicas"] = _assignment_json(self.removing_replicas)
        return _dump(value)

    @classmethod
    def from_json(cls, data: bytes) -> TopicAssignment:
        what = "/brokers/topics/<t>"
        obj = _load(data, what)
        topic_id = obj.get("topic_id")
        if topic_id is not None and not isinstance(topic_id, str):
            _fail(what, "'topic_id' must be a string")
        return cls(
            partitions=_assignment(obj.get("partitions"), what, "partitions"),
            topic_id=topic_id,
            adding_replicas=_assignment(obj.get("adding_replicas"), what, "adding_replicas"),
            removing_replicas=_assignment(obj.get("removing_replicas"), what, "removing_replicas"),
        )


@dataclass(frozen=True, slots=True)
class PartitionState:
    """`/brokers/topics/<t>/partitions/<p>/state` (CTL-42): LeaderAndIsr + controller epoch."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = 0  # KIP-704: 0 RECOVERED, 1 RECOVERING

    def to_json(self) -> bytes:
        value: dict[str, Any] = {
            "controller_epoch": self.controller_epoch,
            "leader": self.leader,
            "version": 1 if self.leader_recovery_state == 0 else 2,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
        }
        if self.leader_recovery_state != 0:
            value["leader_recovery_state"] = self.leader_recovery_state
        return _dump(value)

    @classmethod
    def from_json(cls, data: bytes) -> PartitionState:
        what = "partition state"
        obj = _load(data, what)
        return cls(
            leader=_int(obj, "leader", what),
            leader_epoch=_int(obj, "leader_epoch", what),
            isr=_int_list(obj.get("isr"), what, "isr"),
            controller_epoch=_int(obj, "controller_epoch", what),
            leader_recovery_state=_int(obj, "leader_recovery_state", what, 0),
        )


@dataclass(frozen=True, slots=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ReassignPartitions:
    """`/admin/reassign_partitions` (CTL-31): the plan, deleted by the controller when done."""

    partitions: tuple[PartitionReassignment, ...]

    def to_json(self) -> bytes:
        return _dump(
            {
                "version": 1,
                "partitions": [
                    {"topic": p.topic, "partition": p.partition, "replicas": list(p.replicas)}
                    for p in self.partitions
                ],
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> ReassignPartitions:
        what = REASSIGN_PARTITIONS
        obj = _load(data, what)
        return cls(
            tuple(
                PartitionReassignment(
                    _str(p, "topic", what),
                    _int(p, "partition", what),
                    _int_list(p.get("replicas"), what, "replicas"),
                )
                for p in _topic_partitions(obj, what)
            )
        )


def _partitions_json(partitions: tuple[TopicPartition, ...]) -> list[dict[str, Any]]:
    return [{"topic": p.topic, "partition": p.partition} for p in partitions]


def _partitions_from(obj: dict[str, Any], what: str) -> tuple[TopicPartition, ...]:
    return tuple(
        TopicPartition(_str(p, "topic", what), _int(p, "partition", what))
        for p in _topic_partitions(obj, what)
    )


@dataclass(frozen=True, slots=True)
class PreferredReplicaElection:
    """`/admin/preferred_replica_election` (CTL-37, KR-08)."""

    partitions: tuple[TopicPartition, ...]

    def to_json(self) -> bytes:
        return _dump({"version": 1, "partitions": _partitions_json(self.partitions)})

    @classmethod
    def from_json(cls, data: bytes) -> PreferredReplicaElection:
        return cls(_partitions_from(_load(data, PREFERRED_REPLICA_ELECTION), "preferred"))


@dataclass(frozen=True, slots=True)
class IsrChangeNotification:
    """`/isr_change_notification/isr_change_<seq>` (ZK-12, KR-07)."""

    partitions: tuple[TopicPartition, ...]

    def to_json(self) -> bytes:
        return _dump({"version": 1, "partitions": _partitions_json(self.partitions)})

    @classmethod
    def from_json(cls, data: bytes) -> IsrChangeNotification:
        return cls(_partitions_from(_load(data, ISR_CHANGE_NOTIFICATION), "isr change"))


@dataclass(frozen=True, slots=True)
class EntityConfig:
    """`/config/topics/<t>`, `/config/brokers/<id>`: overrides of Kafka's defaults."""

    config: dict[str, str]

    def to_json(self) -> bytes:
        return _dump({"version": 1, "config": dict(sorted(self.config.items()))})

    @classmethod
    def from_json(cls, data: bytes) -> EntityConfig:
        obj = _load(data, CONFIG)
        return cls(_str_map(obj.get("config") or {}, CONFIG, "config"))


@dataclass(frozen=True, slots=True)
class ConfigChangeNotification:
    """`/config/changes/config_change_<seq>`: `entity_path` like `topics/orders`."""

    entity_path: str

    def to_json(self) -> bytes:
        return _dump({"version": 2, "entity_path": self.entity_path})

    @classmethod
    def from_json(cls, data: bytes) -> ConfigChangeNotification:
        return cls(_str(_load(data, CONFIG_CHANGES), "entity_path", CONFIG_CHANGES))


@dataclass(frozen=True, slots=True)
class ClusterId:
    """`/cluster/id`: note Kafka writes the version as the *string* "1"."""

    cluster_id: str

    def to_json(self) -> bytes:
        return _dump({"version": "1", "id": self.cluster_id})

    @classmethod
    def from_json(cls, data: bytes) -> ClusterId:
        return cls(_str(_load(data, CLUSTER_ID), "id", CLUSTER_ID))


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """`/latest_producer_id_block`: the last producer-id block handed out (KIP-98)."""

    broker_id: int
    block_start: int
    block_end: int

    def to_json(self) -> bytes:
        return _dump(
            {
                "version": 1,
                "broker": self.broker_id,
                "block_start": str(self.block_start),
                "block_end": str(self.block_end),
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> ProducerIdBlock:
        what = LATEST_PRODUCER_ID_BLOCK
        obj = _load(data, what)
        return cls(
            _int(obj, "broker", what),
            _int_string(obj, "block_start", what),
            _int_string(obj, "block_end", what),
        )
