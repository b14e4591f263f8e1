"""DescribeQuorum v0-1: the metadata quorum's leader, epoch, high watermark and replicas.

KRaft's `kafka-metadata-quorum.sh describe --status/--replication` asks this (KIP-595,
KIP-836 for v1's last-fetch/caught-up timestamps). trafka's quorum is a pysyncobj Raft group
replicating the znode tree, reported as KRaft reports its `__cluster_metadata`-0 partition:
leader id and epoch (the Raft term), high watermark (the commit index), voters and observers
(learner nodes) with their log end offsets.

Any node answers, as the quorum status it sees locally. A request for another topic or
partition gets UNKNOWN_TOPIC_OR_PARTITION for it.

Not implemented: v2 (KIP-853 directory ids and node endpoints).

Authorization: DESCRIBE on the CLUSTER (else CLUSTER_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.metadata_quorum.status import METADATA_TOPIC, describe_quorum_topics
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation


@register(api_key=ApiKey.DESCRIBE_QUORUM, name="DescribeQuorum", min_version=0, max_version=1)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.DESCRIBE):
        return build(
            response_class(request),
            {"error_code": int(ErrorCode.cluster_authorization_failed), "topics": []},
        )
    ours = describe_quorum_topics(ctx.services.store.status())
    topics: list[dict[str, Any]] = []
    for topic in request.topics:
        if topic.topic_name == METADATA_TOPIC:
            wanted = {p.partition_index for p in topic.partitions}
            partitions = [p for p in ours[0]["partitions"] if p["partition_index"] in wanted]
            missing = wanted - {p["partition_index"] for p in partitions}
        else:
            partitions, missing = [], {p.partition_index for p in topic.partitions}
        partitions += [
            {
                "partition_index": index,
                "error_code": int(ErrorCode.unknown_topic_or_partition),
                "leader_id": -1,
                "leader_epoch": -1,
                "high_watermark": -1,
                "current_voters": [],
                "observers": [],
            }
            for index in sorted(missing)
        ]
        topics.append({"topic_name": topic.topic_name, "partitions": partitions})
    return build(response_class(request), {"error_code": 0, "topics": topics})
