"""Who may speak as a broker: the inter-broker APIs' admission, and the broker's own client.

Admission (issue 12 item 2, issue 14 item 4). LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown (API 4-7), a Fetch with ``replica_id >= 0`` and an OffsetForLeaderEpoch
with ``replica_id >= 0`` act as the controller or as a replica. They are admitted only when

1. they arrive on the inter-broker listener (``inter.broker.listener.name``);
2. the connection's principal may CLUSTER_ACTION on the cluster (the node's `Authorizer`;
   the allow-all default admits every principal, as Kafka without an authorizer);
3. the sender they name is a registered broker (``/brokers/ids/<id>``), and - for API 4-6 -
   their controller epoch is the quorum's ``/controller_epoch`` and their broker epoch is
   this broker's registration epoch; for ControlledShutdown the broker epoch is the sender's
   registration epoch (the czxid of its ephemeral znode); a follower is never this broker
   itself, and a Fetch v15+ replica epoch must be the follower's registration epoch.

Anything else gets CLUSTER_AUTHORIZATION_FAILED and changes nothing. An older epoch gets
Kafka's STALE_CONTROLLER_EPOCH / STALE_BROKER_EPOCH (a late request from a real controller,
harmless). A newer controller epoch than the local replica of the tree shows waits up to
`EPOCH_CATCH_UP_S` for the tree to catch up (the controller writes the epoch before it sends),
then is refused: a forged epoch can no longer fence anyone.

`decide` is the pure rule; `admit` reads the facts from the node.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import trio
from kio.schema.errors import ErrorCode

from trafka.metadata_quorum import znodes
from trafka.net import codec
from trafka.net.api_keys import ApiKey
from trafka.net.client import KafkaConnection
from trafka.net.client_security import ClientSecurity
from trafka.net.kio_shape import build, response_class
from trafka.node.metadata_store import LocalTreeReads, NoNode
from trafka.security.authorizer import AclOperation, Action, Authorizer, Requester

log = logging.getLogger("trafka.node.broker")

LEADER_AND_ISR: Final = ApiKey.LEADER_AND_ISR
STOP_REPLICA: Final = ApiKey.STOP_REPLICA
UPDATE_METADATA: Final = ApiKey.UPDATE_METADATA
CONTROLLED_SHUTDOWN: Final = ApiKey.CONTROLLED_SHUTDOWN
FETCH: Final = ApiKey.FETCH
OFFSET_FOR_LEADER_EPOCH: Final = ApiKey.OFFSET_FOR_LEADER_EPOCH
CONTROLLER_APIS: Final = frozenset({LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA})
EPOCH_CATCH_UP_S: Final = 5.0
EPOCH_POLL_S: Final = 0.05


@dataclass(frozen=True, slots=True)
class InterBrokerClaim:
    """What an inter-broker request claims: who sent it and which epochs it carries."""

    api_key: int
    sender: int
    controller_epoch: int | None = None
    broker_epoch: int | None = None


def claim_of(api_key: int, request: Any) -> InterBrokerClaim | None:
    """The claim of a request that acts as a broker; None for ordinary client requests."""
    if api_key in CONTROLLER_APIS:
        return InterBrokerClaim(
            api_key,
            int(request.controller_id),
            int(request.controller_epoch),
            int(getattr(request, "broker_epoch", -1)),
        )
    if api_key == CONTROLLED_SHUTDOWN:
        return InterBrokerClaim(
            api_key, int(request.broker_id), None, int(getattr(request, "broker_epoch", -1))
        )
    if api_key in (FETCH, OFFSET_FOR_LEADER_EPOCH):
        replica_id = int(getattr(request, "replica_id", -1))
        state = getattr(request, "replica_state", None)
        if state is not None and int(state.replica_id) >= 0:
            replica_id = int(state.replica_id)
        if replica_id >= 0:
            epoch = -1 if state is None else int(state.replica_epoch)
            return InterBrokerClaim(api_key, replica_id, None, epoch)
    return None


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What the node knows when deciding (read from the local replica of the tree)."""

    on_inter_broker_listener: bool
    cluster_action_allowed: bool
    broker_epochs: Mapping[int, int]
    """Registered broker id -> registration epoch (czxid of /brokers/ids/<id>)."""
    controller_epoch: int | None
    own_broker_id: int


def decide(claim: InterBrokerClaim, facts: ClusterFacts) -> ErrorCode:
    """Admit (NONE) or refuse an inter-broker request; pure."""
    if not facts.on_inter_broker_listener or not facts.cluster_action_allowed:
        return ErrorCode.cluster_authorization_failed
    if claim.api_key in CONTROLLER_APIS:
        if facts.controller_epoch is None or claim.controller_epoch is None:
            return ErrorCode.cluster_authorization_failed
        if claim.controller_epoch < facts.controller_epoch:
            # A late request of a previous controller (harmless): Kafka's answer.
            return ErrorCode.stale_controller_epoch
    sender_epoch = facts.broker_epochs.get(claim.sender)
    if sender_epoch is None:
        return ErrorCode.cluster_authorization_failed
    if claim.api_key in CONTROLLER_APIS:
        if claim.controller_epoch != facts.controller_epoch:
            return ErrorCode.cluster_authorization_failed
        own_epoch = facts.broker_epochs.get(facts.own_broker_id)
        return _epoch_check(claim.broker_epoch, own_epoch)
    if claim.api_key == CONTROLLED_SHUTDOWN:
        return _epoch_check(claim.broker_epoch, sender_epoch)
    if claim.sender == facts.own_broker_id:
        # A broker never fetches from itself as a follower.
        return ErrorCode.cluster_authorization_failed
    if claim.broker_epoch is not None and claim.broker_epoch >= 0:
        return _epoch_check(claim.broker_epoch, sender_epoch)
    return ErrorCode.none


def _epoch_check(claimed: int | None, registered: int | None) -> ErrorCode:
    if claimed is None or registered is None:
        return ErrorCode.cluster_authorization_failed
    if 0 <= claimed < registered:
        return ErrorCode.stale_broker_epoch
    if claimed != registered:
        return ErrorCode.cluster_authorization_failed
    return ErrorCode.none


_TreeFacts = tuple[dict[int, int], int | None]
_FACTS_CACHE: weakref.WeakKeyDictionary[Any, tuple[tuple[int, int], _TreeFacts]] = (
    weakref.WeakKeyDictionary()
)
"""Per tree replica: the broker epochs and controller epoch last read, with the zxids they
were read at (every follower Fetch asks; reading and parsing them each time cost ~5% of a
leader's time in the commit-latency profile, docs/performance.md)."""


def _tree_facts(quorum: LocalTreeReads) -> _TreeFacts:
    """(broker id -> registration epoch, controller epoch) from the local replica; reused
    while /brokers/ids has the same children (its pzxid) and /controller_epoch the same
    data (its mzxid)."""
    ids_stat = quorum.exists_local(znodes.BROKER_IDS)
    epoch_stat = quorum.exists_local(znodes.CONTROLLER_EPOCH)
    key = (
        -1 if ids_stat is None else int(ids_stat.pzxid),
        -1 if epoch_stat is None else int(epoch_stat.mzxid),
    )
    try:
        cached = _FACTS_CACHE.get(quorum)
    except TypeError:  # not weakly referenceable (a test double): no cache
        cached = None
    if cached is not None and cached[0] == key:
        return cached[1]
    epochs: dict[int, int] = {}
    try:
        children = quorum.children_local(znodes.BROKER_IDS)
    except NoNode:
        children = []
    for child in children:
        if not child.isdigit():
            continue
        stat = quorum.exists_local(znodes.broker_path(int(child)))
        if stat is not None:
            epochs[int(child)] = int(stat.czxid)
    controller_epoch: int | None
    try:
        raw, _ = quorum.get_local(znodes.CONTROLLER_EPOCH)
        controller_epoch = znodes.ControllerEpoch.from_json(bytes(raw)).epoch
    except (NoNode, znodes.ZNodeFormatError):
        controller_epoch = None
    facts = (epochs, controller_epoch)
    try:
        _FACTS_CACHE[quorum] = (key, facts)
    except TypeError:
        pass
    return facts


def read_facts(
    quorum: LocalTreeReads,
    *,
    on_inter_broker_listener: bool,
    cluster_action_allowed: bool,
    own_broker_id: int,
) -> ClusterFacts:
    epochs, controller_epoch = _tree_facts(quorum)
    return ClusterFacts(
        on_inter_broker_listener=on_inter_broker_listener,
        cluster_action_allowed=cluster_action_allowed,
        broker_epochs=epochs,
        controller_epoch=controller_epoch,
        own_broker_id=own_broker_id,
    )


async def admit(
    claim: InterBrokerClaim,
    *,
    quorum: LocalTreeReads,
    authorizer: Authorizer,
    requester: Requester,
    inter_broker_listener: str,
    own_broker_id: int,
) -> ErrorCode:
    """`decide` with the node's facts; waits (bounded) for a newer controller epoch."""
    allowed = authorizer.authorize(requester, [Action.cluster(AclOperation.CLUSTER_ACTION)])[0]

    def facts() -> ClusterFacts:
        return read_facts(
            quorum,
            on_inter_broker_listener=requester.listener_name == inter_broker_listener,
            cluster_action_allowed=allowed,
            own_broker_id=own_broker_id,
        )

    current = facts()
    decision = decide(claim, current)
    deadline = trio.current_time() + EPOCH_CATCH_UP_S
    while (
        decision is ErrorCode.cluster_authorization_failed
        and current.on_inter_broker_listener
        and allowed
        and trio.current_time() < deadline
        and _may_catch_up(claim, current)
    ):
        # The local replica may lag the controller's write of /controller_epoch or of a
        # broker's (re-)registration.
        await trio.sleep(EPOCH_POLL_S)
        current = facts()
        decision = decide(claim, current)
    return decision


async def refuse_if_not_admitted(
    api_key: int,
    request: Any,
    *,
    store: LocalTreeReads,
    authorizer: Authorizer,
    requester: Requester,
    inter_broker_listener: str,
    own_broker_id: int,
) -> Any | None:
    """For a request that acts as a broker (`claim_of`): the refusal to send instead of
    handling it (logged), or None when it is admitted or is an ordinary client request.
    Asked by the broker's dispatch before the handler runs."""
    claim = claim_of(api_key, request)
    if claim is None:
        return None
    error = await admit(
        claim,
        quorum=store,
        authorizer=authorizer,
        requester=requester,
        inter_broker_listener=inter_broker_listener,
        own_broker_id=own_broker_id,
    )
    if error is ErrorCode.none:
        return None
    log.warning(
        "refused %s from %s on %s (%s as broker %d): %s",
        codec.api_name(api_key),
        requester.client_host,
        requester.listener_name,
        requester.principal,
        claim.sender,
        error.name,
    )
    return refusal(request, error)


def _may_catch_up(claim: InterBrokerClaim, facts: ClusterFacts) -> bool:
    if claim.sender not in facts.broker_epochs:
        return True
    if claim.api_key in CONTROLLER_APIS:
        return (
            facts.controller_epoch is None
            or (claim.controller_epoch or 0) > facts.controller_epoch
            or (claim.broker_epoch or 0) > facts.broker_epochs.get(facts.own_broker_id, -1)
        )
    return (claim.broker_epoch or 0) > facts.broker_epochs[claim.sender]


def refusal(request: Any, error: ErrorCode) -> Any:
    """The response to a refused inter-broker request: `error` at the top level and on
    every partition it names (so no client reads it as success)."""
    code = int(error)
    api_key = int(request.__api_key__)
    cls = response_class(request)
    if api_key == FETCH:
        responses = [
            {
                "topic": getattr(t, "topic", ""),
                "topic_id": getattr(t, "topic_id", None),
                "partitions": [
                    {
                        "partition_index": int(p.partition),
                        "error_code": code,
                        "high_watermark": -1,
                        "last_stable_offset": -1,
                        "log_start_offset": -1,
                        "records": None,
                    }
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ]
        return build(cls, {"error_code": code, "session_id": 0, "responses": responses})
    if api_key == OFFSET_FOR_LEADER_EPOCH:
        topics = [
            {
                "topic": str(t.topic),
                "partitions": [
                    {
                        "error_code": code,
                        "partition": int(p.partition),
                        "leader_epoch": -1,
                        "end_offset": -1,
                    }
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ]
        return build(cls, {"topics": topics})
    if api_key == CONTROLLED_SHUTDOWN:
        return build(cls, {"error_code": code, "remaining_partitions": []})
    return build(cls, {"error_code": code})


@dataclass(frozen=True, slots=True)
class InterBrokerClient:
    """How this broker reaches others: the inter-broker listener's name and security."""

    listener_name: str | None = None
    """None: a broker's first endpoint (a node built without a BrokerConfig, in tests)."""
    security: ClientSecurity | None = None

    async def connect(
        self,
        host: str,
        port: int,
        *,
        client_id: str,
        connect_timeout_s: float = 10.0,
        request_timeout_s: float = 30.0,
    ) -> KafkaConnection:
        return await KafkaConnection.connect(
            host,
            port,
            client_id=client_id,
            connect_timeout_s=connect_timeout_s,
            request_timeout_s=request_timeout_s,
            security=self.security,
        )
