"""KIP-848 consumer groups in the pure coordinator: epochs, reconciliation, fencing, static
members, regex, metadata changes, offsets with member epochs, records and reloading.

No event loop: requests and `now_ms` in, results and records out.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

import pytest
from kio.schema.errors import ErrorCode

from trafka.group.assignors import AssignorMember, range_assign, uniform_assign
from trafka.group.config import GroupConfig
from trafka.group.consumer_group import (
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResult,
    TopicsImage,
    flatten,
    group_by_topic,
)
from trafka.group.consumer_records import (
    ConsumerGroupCurrentMemberAssignmentRecord,
    ConsumerGroupMetadataRecord,
    TopicMetadataEntry,
)
from trafka.group.coordinator import GroupCoordinator
from trafka.group.messages import (
    CommitPartition,
    JoinGroupRequest,
    OffsetCommitRequest,
    Protocol,
    RequestId,
    TopicPartition,
)
from trafka.group.records import OffsetsTopicRecord, decode_record, encode_record

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def image(**topics: int) -> dict[str, TopicMetadataEntry]:
    return {
        name: TopicMetadataEntry(uuid.UUID(int=index + 1), name, count)
        for index, (name, count) in enumerate(sorted(topics.items()))
    }


@dataclass
class Cluster:
    """One coordinator, a topics image, the records written so far (encoded and decoded
    again, so every record goes through the codec)."""

    topics: dict[str, TopicMetadataEntry] = field(default_factory=lambda: image(t=6))
    config: GroupConfig = field(default_factory=GroupConfig)
    now_ms: int = 1_000_000
    coordinator: GroupCoordinator = field(init=False)
    log: list[OffsetsTopicRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.coordinator = GroupCoordinator(self.config, random.Random(1), self.now_ms)

    def _keep(self, records: tuple[OffsetsTopicRecord, ...]) -> None:
        for record in records:
            key, value = encode_record(record)
            self.log.append(decode_record(key, value))

    def heartbeat(
        self,
        member_id: str,
        epoch: int,
        *,
        owned: frozenset[tuple[uuid.UUID, int]] | None = None,
        topics: tuple[str, ...] | None = None,
        regex: str | None = None,
        instance_id: str | None = None,
        assignor: str | None = None,
        rebalance_timeout_ms: int = -1,
        group: str = "g",
    ) -> ConsumerHeartbeatResult:
        if epoch == 0:
            owned = owned if owned is not None else frozenset()
            if topics is None and regex is None:
                topics = ("t",)
            if rebalance_timeout_ms < 0:
                rebalance_timeout_ms = 30_000
        request = ConsumerHeartbeatRequest(
            group_id=group,
            member_id=member_id,
            member_epoch=epoch,
            instance_id=instance_id,
            rack_id=None,
            rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_topic_names=topics,
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            owned=group_by_topic(owned) if owned is not None else None,
            client_id="c",
            client_host="/127.0.0.1",
            api_version=1,
        )
        result, effects = self.coordinator.consumer_group_heartbeat(
            request, self.topics, self.now_ms
        )
        self._keep(effects.records)
        return result

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self._keep(self.coordinator.tick(self.now_ms).records)

    def reload(self) -> GroupCoordinator:
        return GroupCoordinator.load(self.config, random.Random(2), self.log, self.now_ms)


@dataclass
class Client:
    """A protocol-following consumer: it owns what its last assignment said, revoking
    before it reports; `owned` is what it would consume from."""

    cluster: Cluster
    member_id: str
    epoch: int = 0
    owned: frozenset[tuple[uuid.UUID, int]] = frozenset()
    history: list[frozenset[tuple[uuid.UUID, int]]] = field(default_factory=list)
    topics: tuple[str, ...] = ("t",)

    def beat(self) -> ConsumerHeartbeatResult:
        if self.epoch == 0:
            result = self.cluster.heartbeat(self.member_id, 0, topics=self.topics)
        else:
            result = self.cluster.heartbeat(self.member_id, self.epoch, owned=self.owned)
        assert result.error == ErrorCode.none, result
        self.epoch = result.member_epoch
        if result.assignment is not None:
            self.owned = flatten(result.assignment)
        self.history.append(self.owned)
        return result


def _disjoint(clients: list[Client]) -> None:
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for client in clients:
        for partition in client.owned:
            assert partition not in seen, f"{partition} owned by {seen[partition]} and {client}"
            seen[partition] = client.member_id


def _converge(clients: list[Client], rounds: int = 10) -> None:
    for _ in range(rounds):
        for client in clients:
            client.beat()
            _disjoint(clients)


# --- assignors ---------------------------------------------------------------------------------


def _members(
    *names: str,
    current: dict[str, set[tuple[uuid.UUID, int]]] | None = None,
    topics: frozenset[uuid.UUID] = frozenset({T1}),
) -> dict[str, AssignorMember]:
    current = current or {}
    return {n: AssignorMember(n, None, topics, frozenset(current.get(n, set()))) for n in names}


def test_uniform_balances_and_covers_every_partition() -> None:
    result = uniform_assign(_members("a", "b", "c"), {T1: 10})
    assert sorted(len(p) for p in result.values()) == [3, 3, 4]
    assert set().union(*result.values()) == {(T1, p) for p in range(10)}


def test_uniform_is_sticky_when_a_member_leaves_and_joins() -> None:
    before = uniform_assign(_members("a", "b", "c", "d"), {T1: 12})
    after_leave = uniform_assign(
        _members("a", "b", "c", current={m: set(before[m]) for m in "abc"}), {T1: 12}
    )
    for member in "abc":
        assert before[member] <= after_leave[member]  # the stayers lose nothing
    after_join = uniform_assign(
        _members("a", "b", "c", "e", current={m: set(after_leave[m]) for m in "abc"}), {T1: 12}
    )
    for member in "abc":
        assert after_join[member] <= after_leave[member]  # they only give up what e needs
    assert sorted(len(p) for p in after_join.values()) == [3, 3, 3, 3]


def test_uniform_heterogeneous_subscriptions() -> None:
    members = {
        "a": AssignorMember("a", None, frozenset({T1}), frozenset()),
        "b": AssignorMember("b", None, frozenset({T1, T2}), frozenset()),
    }
    result = uniform_assign(members, {T1: 2, T2: 2})
    assert all(topic == T1 for topic, _ in result["a"])
    assert len(result["a"]) == 2 - 0 or len(result["a"]) >= 1
    assert set().union(*result.values()) == {(T1, 0), (T1, 1), (T2, 0), (T2, 1)}
    assert sorted(len(p) for p in result.values()) == [2, 2]


@pytest.mark.parametrize("seed", range(30))
def test_uniform_random_groups_cover_everything_once(seed: int) -> None:
    rng = random.Random(seed)
    topics = [uuid.UUID(int=n + 1) for n in range(rng.randrange(1, 4))]
    counts = {t: rng.randrange(0, 12) for t in topics}
    homogeneous = rng.random() < 0.5
    members = {}
    for index in range(rng.randrange(1, 9)):
        subscribed = (
            frozenset(topics) if homogeneous else frozenset(t for t in topics if rng.random() < 0.6)
        )
        current = frozenset(
            (rng.choice(topics), rng.randrange(0, 14)) for _ in range(rng.randrange(0, 6))
        )
        members[f"m{index}"] = AssignorMember(f"m{index}", None, subscribed, current)
    result = uniform_assign(members, counts)
    wanted = {
        (t, p)
        for t in topics
        if any(t in m.subscribed_topic_ids for m in members.values())
        for p in range(counts[t])
    }
    owned = [tp for assignment in result.values() for tp in assignment]
    assert len(owned) == len(set(owned)) and set(owned) == wanted
    for member_id, assignment in result.items():
        assert all(t in members[member_id].subscribed_topic_ids for t, _ in assignment)
    if homogeneous:
        sizes = [len(a) for a in result.values()]
        assert max(sizes) - min(sizes) <= 1


def test_range_gives_contiguous_ranges_per_topic() -> None:
    result = range_assign(_members("a", "b", topics=frozenset({T1, T2})), {T1: 3, T2: 2})
    assert result["a"] == {(T1, 0), (T1, 1), (T2, 0)}
    assert result["b"] == {(T1, 2), (T2, 1)}


# --- epochs and reconciliation -----------------------------------------------------------------


def test_first_member_gets_everything_at_epoch_one() -> None:
    cluster = Cluster()
    result = cluster.heartbeat("m1", 0)
    assert result.error == ErrorCode.none
    assert result.member_epoch == 1
    assert result.heartbeat_interval_ms == 5000
    assert flatten(result.assignment or ()) == {(T1, p) for p in range(6)}
    assert cluster.coordinator.consumer_group_describe("g", cluster.topics).state == "Stable"


def test_partitions_move_only_after_revocation() -> None:
    cluster = Cluster()
    a = Client(cluster, "a")
    a.beat()
    b = Client(cluster, "b")
    joined = b.beat()
    # b is at the new epoch but gets nothing a still holds
    assert joined.member_epoch == 2 and b.owned == frozenset()
    # a is told to revoke half, and stays at epoch 1 until it does
    step = cluster.heartbeat("a", 1, owned=a.owned)
    assert step.member_epoch == 1
    kept = flatten(step.assignment or ())
    assert len(kept) == 3
    state = cluster.coordinator.consumer_group_describe("g", cluster.topics)
    assert state.state == "Reconciling"
    # b still gets nothing while a has not revoked
    assert b.beat().member_epoch == 2 and b.owned == frozenset()
    # a revokes: epoch 2
    done = cluster.heartbeat("a", 1, owned=kept)
    assert done.member_epoch == 2
    a.epoch, a.owned = 2, kept
    b.beat()
    assert len(b.owned) == 3 and not (b.owned & a.owned)
    a.beat()
    assert cluster.coordinator.consumer_group_describe("g", cluster.topics).state == "Stable"


def test_ten_compliant_members_never_share_a_partition() -> None:
    cluster = Cluster(topics=image(t=20))
    clients: list[Client] = []
    rng = random.Random(5)
    for index in range(10):
        clients.append(Client(cluster, f"m{index}"))
        rng.shuffle(clients)
        _converge(clients, rounds=2)
    _converge(clients)
    assert sorted(len(c.owned) for c in clients) == [2] * 10
    before = {c.member_id: c.owned for c in clients}
    leaver = clients.pop(3)
    assert cluster.heartbeat(leaver.member_id, -1).member_epoch == -1
    for client in clients:
        client.history.clear()
    _converge(clients)
    for client in clients:  # a leave moves only the leaver's partitions
        assert all(before[client.member_id] <= owned for owned in client.history)
    assert set().union(*(c.owned for c in clients)) == {(T1, p) for p in range(20)}
    snapshot = {c.member_id: c.owned for c in clients}
    newcomer = Client(cluster, "new")
    clients.append(newcomer)
    for client in clients:
        client.history.clear()
    _converge(clients)
    assert len(newcomer.owned) == 2
    for client in clients[:-1]:  # a join takes only what the newcomer needs, never flaps
        lost = snapshot[client.member_id] - client.owned
        assert len(lost) <= 1
        assert all(client.owned <= owned for owned in client.history)


def test_fencing_rules() -> None:
    cluster = Cluster()
    cluster.heartbeat("a", 0)
    assert cluster.heartbeat("a", 5, owned=frozenset()).error == ErrorCode.fenced_member_epoch
    assert cluster.heartbeat("zz", 1).error == ErrorCode.unknown_member_id
    cluster.heartbeat("b", 0)
    # a lost the response of epoch 2: retrying with epoch 1 and a subset of its assignment
    a_owned = frozenset({(T1, p) for p in range(3)})
    step = cluster.heartbeat("a", 1, owned=frozenset({(T1, p) for p in range(6)}))
    assert step.error == ErrorCode.none
    kept = flatten(step.assignment or ())
    done = cluster.heartbeat("a", 1, owned=kept)
    assert done.member_epoch == 2
    assert cluster.heartbeat("a", 1, owned=kept).error == ErrorCode.none  # lost response
    assert cluster.heartbeat("a", 1, owned=a_owned | {(T1, 5), (T1, 4), (T1, 3)}).error == (
        ErrorCode.fenced_member_epoch
    )
    assert cluster.heartbeat("a", 0, topics=("t",)).error == ErrorCode.none  # rejoin


def test_invalid_requests() -> None:
    cluster = Cluster()
    assert cluster.heartbeat("", 0).error == ErrorCode.invalid_request
    assert cluster.heartbeat("a", 0, assignor="sticky").error == ErrorCode.unsupported_assignor
    assert cluster.heartbeat("a", 0, regex="(").error == ErrorCode.invalid_regular_expression
    assert cluster.heartbeat("a", -2).error == ErrorCode.invalid_request
    assert cluster.heartbeat("a", 3).error == ErrorCode.group_id_not_found
    assert cluster.heartbeat("m" * 40_000, 0).error == ErrorCode.invalid_request


def test_leave_moves_group_epoch_and_frees_partitions() -> None:
    cluster = Cluster()
    a, b = Client(cluster, "a"), Client(cluster, "b")
    _converge([a, b])
    group_epoch = cluster.coordinator.consumer_group_describe("g", cluster.topics).epoch
    assert cluster.heartbeat("b", -1).member_epoch == -1
    _converge([a])
    assert len(a.owned) == 6
    description = cluster.coordinator.consumer_group_describe("g", cluster.topics)
    assert description.epoch == group_epoch + 1
    assert cluster.heartbeat("a", -1).member_epoch == -1
    assert cluster.coordinator.consumer_group_describe("g", cluster.topics).state == "Empty"


def test_session_and_rebalance_timeouts_fence() -> None:
    cluster = Cluster()
    a, b = Client(cluster, "a"), Client(cluster, "b")
    _converge([a, b])
    cluster.advance(40_000)
    a.beat()
    cluster.advance(6_000)  # b: 46 s without a heartbeat > 45 s
    assert [
        m.member_id
        for m in cluster.coordinator.consumer_group_describe("g", cluster.topics).members
    ] == ["a"]
    _converge([a])
    assert len(a.owned) == 6
    # a member that does not revoke within its rebalance timeout is fenced
    c = Client(cluster, "c")
    c.beat()
    cluster.heartbeat("a", a.epoch, owned=a.owned)  # told to revoke, does not
    cluster.advance(30_001)
    members = cluster.coordinator.consumer_group_describe("g", cluster.topics).members
    assert [m.member_id for m in members] == ["c"]


def test_static_member_temporary_leave_and_return() -> None:
    cluster = Cluster()
    first = cluster.heartbeat("s1", 0, instance_id="inst")
    cluster.heartbeat("x", 0)
    owned = flatten(
        cluster.heartbeat("s1", 1, owned=flatten(first.assignment or ())).assignment or ()
    )
    cluster.heartbeat("s1", 1, owned=owned)
    epoch_before = cluster.coordinator.consumer_group_describe("g", cluster.topics).epoch
    left = cluster.heartbeat("s1", -2, instance_id="inst")
    assert left.member_epoch == -2
    back = cluster.heartbeat("s9", 0, instance_id="inst")
    assert back.error == ErrorCode.none
    assert flatten(back.assignment or ()) == owned  # same partitions, no rebalance
    description = cluster.coordinator.consumer_group_describe("g", cluster.topics)
    assert {m.member_id for m in description.members} == {"s9", "x"}
    assert description.epoch == epoch_before
    dup = cluster.heartbeat("s10", 0, instance_id="inst")
    assert dup.error == ErrorCode.unreleased_instance_id
    assert cluster.heartbeat("s9", back.member_epoch, instance_id="zzz").error == (
        ErrorCode.fenced_instance_id
    )


def test_metadata_changes_move_the_group_epoch() -> None:
    cluster = Cluster()
    a = Client(cluster, "a")
    _converge([a])
    epoch = cluster.coordinator.consumer_group_describe("g", cluster.topics).epoch
    cluster.topics = {**cluster.topics, "t": TopicMetadataEntry(T1, "t", 8)}
    _converge([a])
    assert len(a.owned) == 8
    assert cluster.coordinator.consumer_group_describe("g", cluster.topics).epoch == epoch + 1
    cluster.topics = {}
    _converge([a])
    assert a.owned == frozenset()


def test_regex_subscription_follows_topics() -> None:
    cluster = Cluster(topics=image(orders_eu=2, orders_us=2, other=2))
    result = cluster.heartbeat("a", 0, regex="orders_.*", topics=None)
    ids = {cluster.topics[n].topic_id for n in ("orders_eu", "orders_us")}
    assert {topic for topic, _ in flatten(result.assignment or ())} == ids
    # the shell hands over a new image whenever topics change
    asia = TopicMetadataEntry(uuid.UUID(int=99), "orders_asia", 1)
    cluster.topics = {**cluster.topics, "orders_asia": asia}
    step = cluster.heartbeat("a", result.member_epoch, owned=flatten(result.assignment or ()))
    assert (uuid.UUID(int=99), 0) in flatten(step.assignment or ())
    description = cluster.coordinator.consumer_group_describe("g", cluster.topics)
    assert description.members[0].subscribed_topic_regex == "orders_.*"


def test_range_assignor_on_request() -> None:
    cluster = Cluster(topics=image(t=4))
    cluster.heartbeat("a", 0, assignor="range")
    description = cluster.coordinator.consumer_group_describe("g", cluster.topics)
    assert description.assignor == "range"


# --- offsets ------------------------------------------------------------------------------------


def _commit(
    cluster: Cluster, member_id: str, epoch: int, offset: int, version: int = 9
) -> ErrorCode:
    errors, effects = cluster.coordinator.offset_commit(
        OffsetCommitRequest(
            group_id="g",
            generation_id=epoch,
            member_id=member_id,
            group_instance_id=None,
            retention_time_ms=-1,
            partitions=(CommitPartition("t", 0, offset, -1, ""),),
            api_version=version,
        ),
        cluster.now_ms,
    )
    cluster._keep(effects.records)
    return errors[0].error


def test_offset_commit_checks_member_epochs() -> None:
    cluster = Cluster()
    a, b = Client(cluster, "a"), Client(cluster, "b")
    a.beat()
    assert _commit(cluster, "a", 1, 10) == ErrorCode.none
    b.beat()
    _converge([a, b])
    assert _commit(cluster, "a", 1, 11) == ErrorCode.stale_member_epoch
    assert _commit(cluster, "a", a.epoch + 1, 11) == ErrorCode.fenced_member_epoch
    assert _commit(cluster, "zz", a.epoch, 11) == ErrorCode.unknown_member_id
    assert _commit(cluster, "a", a.epoch, 11, version=8) == ErrorCode.unsupported_version
    assert _commit(cluster, "", -1, 11) == ErrorCode.unknown_member_id  # group not empty
    assert _commit(cluster, "a", a.epoch, 12) == ErrorCode.none
    fetched = cluster.coordinator.offset_fetch(
        "g", (TopicPartition("t", 0),), member=("a", a.epoch - 1)
    )
    assert fetched.error == ErrorCode.stale_member_epoch


def test_classic_consumer_reads_offsets_after_the_group_empties() -> None:
    cluster = Cluster(config=GroupConfig(group_initial_rebalance_delay_ms=0))
    a = Client(cluster, "a")
    a.beat()
    assert _commit(cluster, "a", a.epoch, 42) == ErrorCode.none
    join = JoinGroupRequest(
        group_id="g",
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(Protocol("range", b""),),
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        client_id="classic",
        client_host="h",
        api_version=3,
    )
    refused = cluster.coordinator.join_group(RequestId(1), join, cluster.now_ms)
    assert refused.replies[0].result.error == ErrorCode.inconsistent_group_protocol
    assert cluster.heartbeat("a", -1).member_epoch == -1
    converted = cluster.coordinator.join_group(RequestId(2), join, cluster.now_ms)
    cluster._keep(converted.records)
    assert converted.replies[0].result.error == ErrorCode.none
    listing = cluster.coordinator.list_groups()
    assert [(g.group_id, g.group_type) for g in listing] == [("g", "classic")]
    fetched = cluster.coordinator.offset_fetch("g", (TopicPartition("t", 0),))
    assert fetched.partitions[0].offset == 42
    reloaded = cluster.reload()  # the conversion is durable too
    assert reloaded.list_groups()[0].group_type == "classic"
    assert reloaded.offset_fetch("g", None).partitions[0].offset == 42


# --- records and reloading ---------------------------------------------------------------------


def test_reload_rebuilds_members_epochs_and_pending_revocations() -> None:
    cluster = Cluster()
    a, b = Client(cluster, "a"), Client(cluster, "b")
    a.beat()
    b.beat()
    cluster.heartbeat("a", 1, owned=a.owned)  # a must revoke; not yet done
    before = cluster.coordinator.consumer_group_describe("g", cluster.topics)
    reloaded = cluster.reload()
    after = reloaded.consumer_group_describe("g", cluster.topics)
    assert after == before
    # the new coordinator still withholds a's partitions from b until a revokes
    cluster.coordinator = reloaded
    step = cluster.heartbeat("b", b.epoch, owned=b.owned)
    assert flatten(step.assignment or ()) == frozenset() if step.assignment else True
    assert not any(p in b.owned for p in a.owned)


def test_records_use_kafkas_key_versions() -> None:
    cluster = Cluster()
    cluster.heartbeat("a", 0)
    kinds = {encode_record(r)[0][:2] for r in cluster.log}
    assert kinds == {b"\x00\x03", b"\x00\x04", b"\x00\x05", b"\x00\x06", b"\x00\x07", b"\x00\x08"}
    metadata = [r for r in cluster.log if isinstance(r, ConsumerGroupMetadataRecord)]
    assert encode_record(metadata[0]) == (b"\x00\x03\x00\x01g", b"\x00\x00\x00\x00\x00\x01\x00")
    current = [r for r in cluster.log if isinstance(r, ConsumerGroupCurrentMemberAssignmentRecord)]
    assert current[-1].value is not None and current[-1].value.member_epoch == 1


@pytest.mark.parametrize("seed", range(20))
def test_arbitrary_bytes_never_crash_the_decoder(seed: int) -> None:
    rng = random.Random(seed)
    for key_version in range(3, 9):
        key = key_version.to_bytes(2, "big") + b"\x00\x01g\x00\x01m"[: rng.randrange(9)]
        value = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        try:
            decode_record(key, value)
        except ValueError:
            pass


def test_images_are_plain_mappings() -> None:
    topics: TopicsImage = image(a=1)
    assert topics["a"].partitions == 1
