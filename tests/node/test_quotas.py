"""Client quotas, pure: entities, precedence, the rate and throttle arithmetic, the
DescribeClientQuotas filter, throttle times put into responses. No event loop."""

from __future__ import annotations

import datetime

import pytest

from trafka.net.fetch_encoding import FetchResponseData, encode_fetch_response
from trafka.net.server import EncodedResponse
from trafka.node.quota.describe import FilterError, MatchType, QuotaFilter
from trafka.node.quota.entities import (
    DEFAULT,
    QuotaEntity,
    QuotaEntityError,
    desanitize,
    quota_values,
    sanitize,
    stored_value,
)
from trafka.node.quota.manager import QuotaManager, QuotaType, resolve, resolve_ip
from trafka.node.quota.rate import Rate, throttle_time_ms
from trafka.node.quota.throttling import (
    exempt_from_request_quota,
    response_size,
    with_throttle_time,
)

P = "producer_byte_rate"

# ---- entities -------------------------------------------------------------------------------


def test_sanitize_matches_kafkas_sanitizer() -> None:
    assert sanitize("alice") == "alice"
    assert sanitize("User:CN=a b,O=x") == "User%3ACN%3Da%20b%2CO%3Dx"
    assert sanitize("<default>") == "%3Cdefault%3E"  # never the default entity
    assert sanitize("a*b~c.d-e_f") == "a%2Ab%7Ec.d-e_f"
    assert desanitize(sanitize("ü/ß x")) == "ü/ß x"


def test_entity_paths_and_wire_round_trip() -> None:
    both = QuotaEntity.from_wire([("client-id", "c 1"), ("user", None)])
    assert both == QuotaEntity(user=DEFAULT, client_id="c%201")
    assert both.path() == "users/<default>/clients/c%201"
    assert both.wire_components() == [("user", None), ("client-id", "c 1")]
    assert QuotaEntity.from_path(both.path()) == both
    assert QuotaEntity.from_path("clients/c1") == QuotaEntity(client_id="c1")
    assert QuotaEntity.from_path("ips/<default>") == QuotaEntity(ip=DEFAULT)
    assert QuotaEntity.from_path("users/a/topics/b") is None
    assert QuotaEntity.from_wire([("ip", "10.0.0.1")]).path() == "ips/10.0.0.1"


@pytest.mark.parametrize(
    ("components", "message"),
    [
        ([], "Invalid empty client quota entity"),
        ([("group", "g")], "Unhandled client quota entity type: group"),
        ([("user", "")], "Empty user not supported"),
        ([("user", "a"), ("user", "b")], "Duplicate user entity type"),
        ([("ip", "10.0.0.1"), ("user", "a")], "IP entity should not be used"),
        ([("ip", "not-an-ip")], "not-an-ip is not a valid IP"),
        ([("user", "..")], "Invalid quota entity name"),
        ([("user", "a" * 1000), ("client-id", "é" * 200)], "longer than"),
    ],
)
def test_bad_entities_are_refused_with_kafkas_messages(
    components: list[tuple[str, str | None]], message: str
) -> None:
    with pytest.raises(QuotaEntityError, match=message):
        QuotaEntity.from_wire(components)


def test_stored_values_follow_the_key_types() -> None:
    user = QuotaEntity(user="a")
    assert stored_value(user, P, 1048576.0) == "1048576"
    assert stored_value(user, "request_percentage", 12.5) == "12.5"
    assert stored_value(user, "controller_mutation_rate", 10) == "10.0"
    with pytest.raises(QuotaEntityError, match="must be a LONG value"):
        stored_value(user, P, 10.5)
    with pytest.raises(QuotaEntityError, match="Invalid configuration key connection_creation"):
        stored_value(user, "connection_creation_rate", 10)
    ip = QuotaEntity(ip=DEFAULT)
    assert stored_value(ip, "connection_creation_rate", 100) == "100"
    with pytest.raises(QuotaEntityError, match="Invalid configuration key producer_byte_rate"):
        stored_value(ip, P, 100)
    with pytest.raises(QuotaEntityError):
        stored_value(user, P, float("nan"))
    # SCRAM credentials in the same znode are not quotas.
    assert quota_values(
        user, {P: "100", "SCRAM-SHA-256": "salt=..", "consumer_byte_rate": "x"}
    ) == {P: 100.0}


# ---- precedence -----------------------------------------------------------------------------

LEVELS = [
    (QuotaEntity("alice", "c1"), ("alice", "c1")),
    (QuotaEntity("alice", DEFAULT), ("alice", "c1")),
    (QuotaEntity("alice", None), ("alice", "")),
    (QuotaEntity(DEFAULT, "c1"), ("alice", "c1")),
    (QuotaEntity(DEFAULT, DEFAULT), ("alice", "c1")),
    (QuotaEntity(DEFAULT, None), ("alice", "")),
    (QuotaEntity(None, "c1"), ("", "c1")),
    (QuotaEntity(None, DEFAULT), ("", "c1")),
]


def test_precedence_is_kafkas_and_names_the_sensor_by_the_matched_level() -> None:
    configs = {entity: {P: float(rank)} for rank, (entity, _) in enumerate(LEVELS)}
    for rank, (entity, tags) in enumerate(LEVELS):
        resolved = resolve(configs, P, "alice", "c1")
        assert resolved is not None
        assert (resolved.entity, resolved.bound, resolved.tags) == (entity, float(rank), tags)
        del configs[entity]  # the next level takes over
    assert resolve(configs, P, "alice", "c1") is None


def test_each_key_is_resolved_on_its_own_and_other_users_are_unaffected() -> None:
    configs = {
        QuotaEntity("alice", None): {P: 100.0},
        QuotaEntity(None, "c1"): {"consumer_byte_rate": 200.0},
    }
    produce = resolve(configs, P, "alice", "c1")
    fetch = resolve(configs, "consumer_byte_rate", "alice", "c1")
    assert produce is not None and produce.bound == 100.0
    assert fetch is not None and (fetch.bound, fetch.tags) == (200.0, ("", "c1"))
    assert resolve(configs, P, "bob", "c1") is None
    # A principal name with characters Kafka sanitizes is looked up sanitized.
    odd = {QuotaEntity(sanitize("CN=x,O=y"), None): {P: 5.0}}
    assert resolve(odd, P, "CN=x,O=y", "any") is not None


def test_ip_quota_prefers_the_ip_then_the_default() -> None:
    configs = {
        QuotaEntity(ip="10.0.0.1"): {"connection_creation_rate": 5.0},
        QuotaEntity(ip=DEFAULT): {"connection_creation_rate": 50.0},
    }
    assert resolve_ip(configs, "10.0.0.1").bound == 5.0  # type: ignore[union-attr]
    assert resolve_ip(configs, "10.0.0.2").bound == 50.0  # type: ignore[union-attr]


# ---- rate and throttle arithmetic -----------------------------------------------------------


def test_rate_is_measured_since_the_oldest_live_sample() -> None:
    rate = Rate(samples=11, window_size_ms=1000)
    rate.record(10_000, now_ms=0)
    assert rate.window_ms(0) == 1000  # at least one window
    assert rate.per_second(0) == 10_000.0
    for second in range(1, 15):
        rate.record(1000, now_ms=second * 1000)
    # At t=14 s the samples of t=0..3 are obsolete (11 windows): 11 samples of 1000 remain.
    assert rate.total(14_000) == 11_000
    assert rate.window_ms(14_500) == 10_500
    assert rate.per_second(30_000) == 0.0  # everything expired


def test_throttle_time_is_kafkas_formula() -> None:
    assert throttle_time_ms(rate=100.0, bound=100.0, window_ms=10_000) == 0
    assert throttle_time_ms(rate=150.0, bound=100.0, window_ms=10_000) == 5000
    assert throttle_time_ms(rate=110.0, bound=100.0, window_ms=11_000) == 1100
    assert throttle_time_ms(rate=1.0, bound=0.0, window_ms=1000) == 1000


def test_a_burst_is_throttled_until_the_rate_is_back_at_the_bound() -> None:
    manager = QuotaManager()
    manager.set_configs({QuotaEntity(None, "c1"): {P: 1000.0}})
    assert manager.record(QuotaType.PRODUCE, "ANONYMOUS", "c1", 1000, now_ms=0) == 0
    # 4,000 bytes more at once: 5,000 bytes in the first window -> 4 s of silence.
    assert manager.record(QuotaType.PRODUCE, "ANONYMOUS", "c1", 4000, now_ms=0) == 4000
    # Another client id has no quota: never throttled, nothing recorded.
    assert manager.record(QuotaType.PRODUCE, "ANONYMOUS", "c2", 10**9, now_ms=0) == 0
    # A client sending at 90% of the bound, once a second: its first seconds look faster
    # (two sends within the one-window minimum), then it is never throttled.
    throttles = [
        manager.record(QuotaType.PRODUCE, "ANONYMOUS", "c1", 900, now_ms=ms)
        for ms in range(15_000, 40_000, 1000)
    ]
    assert max(throttles) <= 800
    assert throttles[-12:] == [0] * 12


class _KafkaPaddedRate(Rate):
    """Kafka's `Rate.windowSize`: padded to samples - 1 full windows."""

    def window_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full = elapsed // self.window_size_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_size_ms
        return elapsed


def _greedy_client(manager: QuotaManager, quota: float, request: int, start_ms: int) -> float:
    """A client that sends `request` bytes as soon as its throttle ends (as librdkafka and
    Java do, KIP-219); its rate over [start_ms, start_ms + 20 s] as a multiple of quota."""
    now, sent = 0, 0
    while now < start_ms + 20_000:
        if now >= start_ms:
            sent += request
        throttle = manager.record(QuotaType.PRODUCE, "ANONYMOUS", "slow", request, now)
        now += max(5, throttle)
    return sent / 20 / quota


@pytest.mark.parametrize("request_bytes", [16_384, 262_144, 1_048_576])
@pytest.mark.parametrize("start_ms", [0, 30_000])
def test_greedy_producer_is_held_within_one_percent_of_its_quota(
    request_bytes: int, start_ms: int
) -> None:
    manager = QuotaManager()
    quota = 1_048_576.0
    manager.set_configs({QuotaEntity(None, "slow"): {P: quota}})
    assert abs(_greedy_client(manager, quota, request_bytes, start_ms) - 1) < 0.01


def test_kafkas_padded_window_would_let_a_greedy_client_exceed_by_ten_percent() -> None:
    """Why `Rate.window_ms` is SimpleRate's (trafka.node.quota.rate's docstring)."""
    import trafka.node.quota.manager as manager_module

    manager = QuotaManager()
    quota = 1_048_576.0
    manager.set_configs({QuotaEntity(None, "slow"): {P: quota}})
    original = manager_module.Rate
    manager_module.Rate = _KafkaPaddedRate  # type: ignore[misc]
    try:
        ratio = _greedy_client(manager, quota, 16_384, 30_000)
    finally:
        manager_module.Rate = original  # type: ignore[misc]
    assert ratio > 1.08


def test_request_time_throttle_is_bounded_by_one_window() -> None:
    manager = QuotaManager()
    manager.set_configs({QuotaEntity(DEFAULT, None): {"request_percentage": 10.0}})
    # 10% of one thread over 10 s = 1 s of handler time; 5 s in one go is far over.
    throttle = manager.record_request_time("alice", "c", elapsed_ms=5000, now_ms=0)
    assert throttle == 1000
    assert manager.record_request_time("alice", "c", elapsed_ms=1, now_ms=0) == 1000
    assert manager.record_request_time("bob", "c", elapsed_ms=1, now_ms=0) == 0


def test_connection_rate_refuses_without_counting_the_refused_connection() -> None:
    manager = QuotaManager()
    manager.set_configs({QuotaEntity(ip=DEFAULT): {"connection_creation_rate": 2.0}})
    accepted = [manager.record_connection("10.0.0.1", now_ms=0) for _ in range(5)]
    assert accepted[:2] == [0, 0]  # 2/s over the one-window minimum
    assert all(0 < delay <= 1000 for delay in accepted[2:])
    assert manager.record_connection("10.0.0.2", now_ms=0) == 0  # per IP
    assert manager.record_connection("10.0.0.1", now_ms=11_000) == 0


def test_sensors_are_bounded() -> None:
    manager = QuotaManager(max_sensors=10)
    manager.set_configs({QuotaEntity(None, DEFAULT): {P: 1.0}})
    for index in range(100):
        manager.record(QuotaType.PRODUCE, "u", f"client-{index}", 1, now_ms=index)
    assert len(manager.snapshot(100)) <= 10


def test_changed_configs_apply_to_existing_sensors() -> None:
    manager = QuotaManager()
    entity = QuotaEntity(None, "c1")
    assert manager.set_configs({entity: {P: 1000.0}})
    assert not manager.set_configs({entity: {P: 1000.0}})
    manager.record(QuotaType.PRODUCE, "u", "c1", 10_000, now_ms=0)
    assert manager.set_entity(entity, {P: 100_000.0})
    assert manager.record(QuotaType.PRODUCE, "u", "c1", 10_000, now_ms=0) == 0
    assert manager.set_entity(entity, {})
    assert not manager.any_client_quota


# ---- DescribeClientQuotas filter ------------------------------------------------------------

ENTITIES = {
    QuotaEntity("alice", None): {P: 1.0},
    QuotaEntity("alice", "c1"): {P: 2.0},
    QuotaEntity(DEFAULT, None): {P: 3.0},
    QuotaEntity(None, "c1"): {P: 4.0},
    QuotaEntity(None, DEFAULT): {P: 5.0},
    QuotaEntity(ip="10.0.0.1"): {"connection_creation_rate": 6.0},
}


def _paths(wire: list[tuple[str, int, str | None]], strict: bool) -> list[str]:
    return [e.path() for e, _ in QuotaFilter.parse(wire, strict).select(ENTITIES)]


def test_filter_match_types_and_strictness() -> None:
    exact, default, specified = MatchType.EXACT, MatchType.DEFAULT, MatchType.SPECIFIED
    assert _paths([("user", exact, "alice")], strict=True) == ["users/alice"]
    assert _paths([("user", exact, "alice")], strict=False) == [
        "users/alice",
        "users/alice/clients/c1",
    ]
    assert _paths([("user", default, None)], strict=True) == ["users/<default>"]
    assert _paths([("user", specified, None)], strict=True) == ["users/<default>", "users/alice"]
    assert _paths([("client-id", specified, None)], strict=True) == [
        "clients/<default>",
        "clients/c1",
    ]
    assert _paths([("user", exact, "alice"), ("client-id", exact, "c1")], strict=True) == [
        "users/alice/clients/c1"
    ]
    assert _paths([("ip", specified, None)], strict=True) == ["ips/10.0.0.1"]
    assert len(_paths([], strict=False)) == len(ENTITIES)
    assert _paths([], strict=True) == []


@pytest.mark.parametrize(
    ("wire", "unsupported", "message"),
    [
        ([("user", 0, "a"), ("user", 0, "b")], False, "Duplicate user filter component"),
        ([("", 0, "a")], False, "Unexpected empty filter component entity type"),
        ([("group", 0, "a")], True, "Custom entity type 'group' not supported"),
        ([("ip", 2, None), ("user", 2, None)], False, "IP filter component should not"),
        ([("user", 7, None)], False, "Unexpected match type"),
    ],
)
def test_bad_filters(
    wire: list[tuple[str, int, str | None]], unsupported: bool, message: str
) -> None:
    with pytest.raises(FilterError, match=message) as caught:
        QuotaFilter.parse(wire, strict=False)
    assert caught.value.unsupported is unsupported


# ---- throttle times in responses ------------------------------------------------------------


def test_throttle_time_goes_into_kio_and_pre_encoded_fetch_responses() -> None:
    from kio.schema.describe_client_quotas.v1.response import DescribeClientQuotasResponse
    from kio.schema.errors import ErrorCode

    response = DescribeClientQuotasResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        entries=(),
    )
    throttled = with_throttle_time(48, 1, response, 250)
    assert throttled.throttle_time == datetime.timedelta(milliseconds=250)  # type: ignore[attr-defined]
    fetch = encode_fetch_response(12, FetchResponseData(topics=[]))
    patched = with_throttle_time(1, 12, fetch, 1234)
    assert isinstance(patched, EncodedResponse)
    assert bytes(patched.chunks[0])[:4] == (1234).to_bytes(4, "big")
    assert response_size(patched) == response_size(fetch)
    # Metadata v3+ answers are pre-encoded too (trafka.net.metadata_encoding); v0-2 have
    # no throttle_time_ms
    metadata = EncodedResponse((b"\x00\x00\x00\x00" + b"rest", b"more"))
    patched = with_throttle_time(3, 12, metadata, 777)
    assert isinstance(patched, EncodedResponse)
    assert b"".join(bytes(c) for c in patched.chunks) == (777).to_bytes(4, "big") + b"restmore"
    assert with_throttle_time(3, 2, metadata, 777) is metadata


def test_exempt_apis() -> None:
    assert exempt_from_request_quota(18, None)  # ApiVersions
    assert exempt_from_request_quota(4, None)  # LeaderAndIsr
    assert not exempt_from_request_quota(3, None)  # Metadata

    class FollowerFetch:
        replica_id = 2

    class ConsumerFetch:
        replica_id = -1

    assert exempt_from_request_quota(1, FollowerFetch())
    assert not exempt_from_request_quota(1, ConsumerFetch())
