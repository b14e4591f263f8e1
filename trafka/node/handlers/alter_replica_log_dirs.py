"""AlterReplicaLogDirs v1-2: move replicas between the log dirs of this broker (KIP-113).

`kafka-reassign-partitions` sends it when a plan names `log_dirs`; `Admin.alterReplicaLogDirs`
directly. kio carries v1-2 (Kafka 4 removed v0); v2 is the flexible version (KIP-482).

Per partition, with Kafka's errors (ReplicaManager.alterReplicaLogDirs):

* LOG_DIR_NOT_FOUND: the path (compared as an absolute path) is not one of `log.dirs`;
* KAFKA_STORAGE_ERROR: the destination dir is offline, or fails during the move;
* UNKNOWN_TOPIC_OR_PARTITION: no such partition in the cluster; NOT_LEADER_OR_FOLLOWER:
  the partition exists but has no replica (no log) on this broker. Kafka remembers the
  destination for a replica created later; trafka does not (new replicas go to the least
  loaded dir);
* NONE: the replica is in the destination dir, now or already.

The move itself (`LocalLogs.move_to_dir_off_loop`, trafka/log/dir_move.py): the partition
dir is copied to `<dest>/<topic>-<partition>.<uuid>-future` in a worker thread while the
log keeps serving, then, on the event loop, the log is closed, the remainder (appended
tails, changed index and checkpoint files) copied, the future dir renamed into place and the
log reopened, the old dir deleted; no append or read sees the log half-moved and the loop
stalls only for the remainder. The answer is sent when the move is done: DescribeLogDirs
never shows a future replica (`is_future_key`) and `kafka-reassign-partitions --verify`
finds the replica in its new dir at once (Kafka answers at once and copies with a
ReplicaAlterLogDirsThread). A replica deleted, or moved by another request, while its copy
runs gets NOT_LEADER_OR_FOLLOWER (Kafka would redirect a move in progress to the newer
destination).

Authorization: ALTER on the CLUSTER, else CLUSTER_AUTHORIZATION_FAILED for every partition.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kio.schema.errors import ErrorCode

from trafka.log.errors import LogDirFailedError
from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation

log = logging.getLogger("trafka.node.handlers.alter_replica_log_dirs")


@register(
    api_key=ApiKey.ALTER_REPLICA_LOG_DIRS, name="AlterReplicaLogDirs", min_version=1, max_version=2
)
async def handle(ctx: RequestContext, request: Any) -> Any:
    allowed = ctx.authorize(AclOperation.ALTER)
    results: dict[str, list[dict[str, Any]]] = {}
    for wanted_dir in request.dirs:
        for topic in wanted_dir.topics:
            for partition in topic.partitions:
                if allowed:
                    error = await _move(ctx, str(wanted_dir.path), str(topic.name), int(partition))
                else:
                    error = ErrorCode.cluster_authorization_failed
                results.setdefault(str(topic.name), []).append(
                    {"partition_index": int(partition), "error_code": int(error)}
                )
    return build(
        response_class(request),
        {
            "throttle_time": 0,
            "results": [
                {"topic_name": name, "partitions": partitions}
                for name, partitions in results.items()
            ],
        },
    )


async def _move(ctx: RequestContext, path: str, topic: str, partition: int) -> ErrorCode:
    logs = ctx.services.logs
    destination = logs.log_dir_named(path)
    if destination is None:
        return ErrorCode.log_dir_not_found
    if not logs.is_online(destination):
        return ErrorCode.kafka_storage_error
    if logs.get(topic, partition) is None:
        if ctx.services.topics.partition(topic, partition) is None:
            return ErrorCode.unknown_topic_or_partition
        return ErrorCode.not_leader_or_follower
    try:
        await logs.move_to_dir_off_loop(
            topic, partition, destination, lambda: int(time.time() * 1000)
        )
    except ValueError:  # deleted or moved by another request meanwhile
        return ErrorCode.not_leader_or_follower
    except LogDirFailedError as error:
        log.error("moving %s-%d to %s failed: %s", topic, partition, destination, error)
        return ErrorCode.kafka_storage_error
    log.info("moved %s-%d to %s", topic, partition, destination)
    return ErrorCode.none
