"""ElectLeaders v0-2: preferred or unclean leader election on the controller (KIP-460).

* v0: preferred only (`topic_partitions` null = every partition);
* v1: `election_type` (0 PREFERRED, 1 UNCLEAN) and a top-level error code;
* v2: flexible (KIP-482).

Served by the controller only (others answer NOT_CONTROLLER, as Kafka; admin clients send
it to the controller named in Metadata). The request becomes one controller event,
`PreferredReplicaElection(from_admin_path=False)` (CTL-36) or `UncleanLeaderElection`
(REP-32); each partition is answered from that step's elections (success) or failures
(ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
UNKNOWN_TOPIC_OR_PARTITION).

Not implemented: waiting for the new leaders' LeaderAndIsr to be acknowledged (the answer is
sent once the election is committed to the tree).

Authorization: ALTER on the CLUSTER (else CLUSTER_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, has_field, response_class
from trafka.node.controller.events import PreferredReplicaElection, UncleanLeaderElection
from trafka.node.controller.selectors import ElectionFailure
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.node.replication.ids import TopicPartition
from trafka.security.authorizer import AclOperation

UNCLEAN = 1


def _answer(request: Any, error: int, results: dict[TopicPartition, tuple[int, str | None]]) -> Any:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp in sorted(results):
        code, message = results[tp]
        by_topic.setdefault(tp.topic, []).append(
            {"partition_id": tp.partition, "error_code": code, "error_message": message}
        )
    data: dict[str, Any] = {
        "throttle_time": 0,
        "replica_election_results": [
            {"topic": t, "partition_result": ps} for t, ps in by_topic.items()
        ],
    }
    if has_field(response_class(request), "error_code"):
        data["error_code"] = error
    return build(response_class(request), data)


@register(api_key=ApiKey.ELECT_LEADERS, name="ElectLeaders", min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.ALTER):
        code = int(ErrorCode.cluster_authorization_failed)
        named = [
            TopicPartition(str(t.topic), int(p))
            for t in request.topic_partitions or ()
            for p in t.partitions
        ]
        return _answer(request, code, {tp: (code, None) for tp in named})
    services = ctx.services
    if request.topic_partitions is None:
        wanted = [
            TopicPartition(name, p)
            for name, state in sorted(services.topics.topics.items())
            for p in sorted(state.partitions)
        ]
    else:
        wanted = [
            TopicPartition(str(t.topic), int(p))
            for t in request.topic_partitions
            for p in t.partitions
        ]
    service = services.controller
    if service is None or not service.is_active:
        code = int(ErrorCode.not_controller)
        return _answer(request, code, {tp: (code, None) for tp in wanted})
    unclean = int(getattr(request, "election_type", 0)) == UNCLEAN
    event = (
        UncleanLeaderElection(tuple(wanted))
        if unclean
        else PreferredReplicaElection(tuple(wanted), from_admin_path=False)
    )
    step = await service.run_event(event)
    if step is None:
        code = int(ErrorCode.request_timed_out)
        return _answer(request, code, {tp: (code, None) for tp in wanted})
    results: dict[TopicPartition, tuple[int, str | None]] = {}
    for report in step.elections:
        results[report.tp] = (0, None)
    for tp, reason in step.failed_elections:
        if tp not in results:
            results[tp] = (int(ElectionFailure(reason).error), reason.value)
    for tp in wanted:
        if tp not in results:
            # Not elected and not reported: an unclean election of a partition that has a
            # leader, or a preferred leader already leading.
            results[tp] = (int(ErrorCode.election_not_needed), None)
    return _answer(request, 0, {tp: results[tp] for tp in wanted})
