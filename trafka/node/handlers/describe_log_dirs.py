"""DescribeLogDirs v1-4: the log directories of this broker and the partitions in them.

* v1: throttle_time_ms (v0 is not carried by kio). v2: flexible (KIP-482).
* v3: top-level error_code. v4: total_bytes and usable_bytes per directory (KIP-827).

A null topic list describes every partition. Sizes come from the logs' segment files;
offset_lag is 0 (no future replicas). `is_future_key` is always false.

Replicas moved by AlterReplicaLogDirs move synchronously (no future logs exist).

Authorization: DESCRIBE on the CLUSTER (else CLUSTER_AUTHORIZATION_FAILED and no results;
before v3, which has no top-level error, just no results), as Kafka.
"""

from __future__ import annotations

import shutil
from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation


@register(api_key=ApiKey.DESCRIBE_LOG_DIRS, name="DescribeLogDirs", min_version=1, max_version=4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.DESCRIBE):
        return build(
            response_class(request),
            {
                "throttle_time": 0,
                "error_code": int(ErrorCode.cluster_authorization_failed),
                "results": [],
            },
        )
    services = ctx.services
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {str(t.topic): {int(p) for p in t.partitions} for t in request.topics}
    by_dir: dict[str, dict[str, list[dict[str, Any]]]] = {
        str(d): {} for d in services.configs.config.log_dirs
    }
    for dir_name, topic, partition, size in services.logs.partition_sizes():
        if wanted is not None and partition not in wanted.get(topic, set()):
            continue
        by_dir.setdefault(dir_name, {}).setdefault(topic, []).append(
            {
                "partition_index": partition,
                "partition_size": size,
                "offset_lag": 0,
                "is_future_key": False,
            }
        )
    results = []
    for dir_name, topics in by_dir.items():
        try:
            usage = shutil.disk_usage(dir_name)
            total, usable = usage.total, usage.free
        except OSError:
            total, usable = -1, -1
        results.append(
            {
                "error_code": 0,
                "log_dir": dir_name,
                "topics": [
                    {"name": name, "partitions": parts} for name, parts in sorted(topics.items())
                ],
                "total_bytes": total,
                "usable_bytes": usable,
            }
        )
    return build(response_class(request), {"throttle_time": 0, "error_code": 0, "results": results})
