"""Message classes kio does not carry, declared in kio's frozen-dataclass style.

One serializer serves these and kio's own classes: ``kio.serial.entity_reader`` (native) and
``kio.serial.entity_writer`` introspect the dataclass fields and the ``__flexible__`` flag, so
`trafka.net.codec` needs no special case for them.

What is declared and why (docs/protocol.md has the full reasoning):

* Produce v0-v2 and ListOffsets v0: old versions a Kafka 3.x broker still accepts.
* LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6), ControlledShutdown (7): the
  controller channel of the seeds (PROTO-19, PROTO-20), one non-flexible and one flexible
  version each.
* TrafkaDescribeZNodes (10000) v0: NOT a Kafka API; reads the metadata quorum's znode tree
  for `ktool quorum ls|get|stat|tree|export --bootstrap-server` (docs/protocol.md). Listed in
  `PRIVATE_API_KEYS`: accepted by the node, never advertised in ApiVersions.

NOT declared: Fetch v0-v3 (they need magic 0/1 down-conversion; every client we know
uses v4+; Kafka 4.0 dropped them), OffsetCommit v0-v1 and OffsetFetch v0 (ZooKeeper-stored
offsets), CreateTopics v0-v1, DeleteTopics v0, DescribeConfigs v0, OffsetForLeaderEpoch v0-v1
(all removed by KIP-896 and sent by none of the clients in REFERENCE.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from . import controlled_shutdown as _cs
from . import describe_znodes as _dz
from . import leader_and_isr as _lai
from . import list_offsets_v0 as _lo
from . import produce_v0_v2 as _produce
from . import stop_replica as _sr
from . import update_metadata as _um

#: (api_key, api_version) -> request class, for every declared version.
DECLARED_REQUESTS: Mapping[tuple[int, int], type] = MappingProxyType(
    {
        (0, 0): _produce.ProduceRequestV0,
        (0, 1): _produce.ProduceRequestV0,
        (0, 2): _produce.ProduceRequestV0,
        (2, 0): _lo.ListOffsetsRequestV0,
        (4, 3): _lai.LeaderAndIsrRequestV3,
        (4, 4): _lai.LeaderAndIsrRequestV4,
        (5, 1): _sr.StopReplicaRequestV1,
        (5, 2): _sr.StopReplicaRequestV2,
        (5, 3): _sr.StopReplicaRequestV3,
        (6, 5): _um.UpdateMetadataRequestV5,
        (6, 6): _um.UpdateMetadataRequestV6,
        (7, 1): _cs.ControlledShutdownRequestV1,
        (7, 2): _cs.ControlledShutdownRequestV2,
        (7, 3): _cs.ControlledShutdownRequestV3,
        (_dz.DESCRIBE_ZNODES_API_KEY, 0): _dz.DescribeZNodesRequestV0,
    }
)

#: (api_key, api_version) -> response class, for every declared version.
DECLARED_RESPONSES: Mapping[tuple[int, int], type] = MappingProxyType(
    {
        (0, 0): _produce.ProduceResponseV0,
        (0, 1): _produce.ProduceResponseV1,
        (0, 2): _produce.ProduceResponseV2,
        (2, 0): _lo.ListOffsetsResponseV0,
        (4, 3): _lai.LeaderAndIsrResponseV3,
        (4, 4): _lai.LeaderAndIsrResponseV4,
        (5, 1): _sr.StopReplicaResponseV1,
        (5, 2): _sr.StopReplicaResponseV2,
        (5, 3): _sr.StopReplicaResponseV2,
        (6, 5): _um.UpdateMetadataResponseV5,
        (6, 6): _um.UpdateMetadataResponseV6,
        (7, 1): _cs.ControlledShutdownResponseV1,
        (7, 2): _cs.ControlledShutdownResponseV1,
        (7, 3): _cs.ControlledShutdownResponseV3,
        (_dz.DESCRIBE_ZNODES_API_KEY, 0): _dz.DescribeZNodesResponseV0,
    }
)

#: Names of the APIs kio does not know at all.
DECLARED_API_NAMES: Mapping[int, str] = MappingProxyType(
    {
        4: "LeaderAndIsr",
        5: "StopReplica",
        6: "UpdateMetadata",
        7: "ControlledShutdown",
        _dz.DESCRIBE_ZNODES_API_KEY: _dz.DESCRIBE_ZNODES_API_NAME,
    }
)

#: trafka's own (non-Kafka) API keys: served by the node, never advertised in ApiVersions.
PRIVATE_API_KEYS: frozenset[int] = frozenset({_dz.DESCRIBE_ZNODES_API_KEY})
