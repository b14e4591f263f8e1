"""The controller mutation quota (KIP-599), pure: Kafka's token bucket, strict and permissive
charging, precedence, and the charge the topic APIs call. No event loop except the service
test over an in-memory store."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from trafka.node.metadata_store import memory_store
from trafka.node.quota.entities import DEFAULT, QuotaEntity
from trafka.node.quota.manager import ControllerMutationQuota, QuotaManager, QuotaType
from trafka.node.quota.rate import TokenBucket
from trafka.node.quota.service import MutationCharge, QuotaService
from trafka.node.topics import TopicError

M = "controller_mutation_rate"


def test_the_bucket_starts_full_with_the_burst_and_refills_at_the_rate() -> None:
    bucket = TokenBucket(rate=2.0)  # 11 windows of 1 s: a burst of 22 partitions
    assert bucket.burst == 22.0
    assert bucket.available(1_000) == 22.0
    bucket.record(30, 1_000)  # one large mutation may go below zero
    assert bucket.available(1_000) == -8.0
    assert bucket.throttle_time_ms(1_000) == 4_000  # 8 partitions at 2/s
    assert bucket.throttle_time_ms(3_000) == 2_000
    assert bucket.throttle_time_ms(5_000) == 0
    assert bucket.available(1_000_000) == 22.0  # never above the burst
    bucket.record(-100, 1_000_000)  # nor by a negative record
    assert bucket.available(1_000_000) == 22.0


def test_a_zero_rate_never_refills_and_throttles_one_quota_window() -> None:
    bucket = TokenBucket(rate=0.0)
    assert bucket.available(0) == 0.0
    bucket.record(1, 0)
    assert bucket.throttle_time_ms(60_000) == 11_000


def test_strict_refuses_only_while_below_zero_and_reports_the_wait() -> None:
    quota = ControllerMutationQuota(TokenBucket(rate=1.0), strict=True)  # burst 11
    assert quota.record(10, 0)  # 1 left
    assert quota.record(5, 0)  # admitted although it goes to -4 (check, then record)
    assert quota.throttle_time_ms == 0
    assert not quota.record(1, 0)  # below zero: refused, 4 s to wait
    assert quota.throttle_time_ms == 4_000
    assert not quota.record(1, 2_000)
    assert quota.throttle_time_ms == 4_000  # the largest throttle of the request
    assert quota.record(3, 4_000)  # back at zero: admitted


def test_permissive_admits_everything_and_throttles_the_response() -> None:
    quota = ControllerMutationQuota(TokenBucket(rate=1.0), strict=False)
    assert quota.record(10, 0)
    assert quota.throttle_time_ms == 0
    assert quota.record(5, 0)
    assert quota.record(5, 0)
    assert quota.throttle_time_ms == 9_000  # -9 tokens at 1/s


def test_precedence_and_a_shared_bucket_per_sensor() -> None:
    manager = QuotaManager()
    manager.set_configs(
        {
            QuotaEntity(client_id="admin"): {M: 1.0},
            QuotaEntity(user="alice"): {M: 100.0},
            QuotaEntity(client_id=DEFAULT): {"producer_byte_rate": 10.0},
        }
    )
    # No controller_mutation_rate for bob / other: unbounded.
    unbounded = manager.controller_mutation("bob", "other", 0, strict=True)
    assert unbounded.bucket is None and unbounded.record(10_000, 0)
    # alice's user quota wins over the client id's.
    alice = manager.controller_mutation("alice", "admin", 0, strict=True)
    assert alice.bucket is not None and alice.bucket.rate == 100.0
    # Two users of client id "admin" share the client-id level bucket.
    first = manager.controller_mutation("bob", "admin", 0, strict=True)
    assert first.record(11, 0)
    second = manager.controller_mutation("carol", "admin", 0, strict=True)
    assert second.record(1, 0)  # at zero: admitted, now -1
    third = manager.controller_mutation("dave", "admin", 0, strict=True)
    assert not third.record(1, 0)
    assert third.throttle_time_ms == 1_000
    # A changed rate applies to the existing bucket at its next use.
    manager.set_entity(QuotaEntity(client_id="admin"), {M: 2.0})
    fourth = manager.controller_mutation("bob", "admin", 0, strict=True)
    assert fourth.bucket is not None and fourth.bucket.rate == 2.0
    assert not fourth.record(1, 0) and fourth.throttle_time_ms == 500
    manager.count_mutation_throttle(third)
    manager.count_mutation_throttle(fourth)
    assert manager.throttle_time_ms_totals[QuotaType.CONTROLLER_MUTATION] == 1_500
    assert QuotaType.CONTROLLER_MUTATION.metric_type == "ControllerMutation"


def test_the_charge_raises_kafkas_error_and_finishes_with_the_throttle() -> None:
    manager = QuotaManager()
    manager.set_configs({QuotaEntity(user=DEFAULT): {M: 1.0}})
    now = [0]
    charge = MutationCharge(
        manager.controller_mutation("u", "c", 0, strict=True), lambda: now[0], manager
    )
    charge(12)  # 11 - 12 = -1
    with pytest.raises(TopicError) as refused:
        charge(1)
    assert refused.value.error_code == ErrorCode.throttling_quota_exceeded
    assert refused.value.message == "The throttling quota has been exceeded."
    assert charge.finish() == 1_000
    unbounded = MutationCharge.unbounded()
    unbounded(1_000_000)
    assert unbounded.finish() == 0


async def test_the_service_charges_only_when_a_mutation_quota_applies() -> None:
    async with memory_store() as store:
        service = QuotaService(store, QuotaManager(), now_ms=lambda: 0)
        service.controller_mutations("u", "c", strict=True)(1_000)  # no quota at all
        await service.alter(QuotaEntity(client_id="c"), [(M, 1.0)], validate_only=False)
        charge = service.controller_mutations("u", "c", strict=True)
        charge(20)
        with pytest.raises(TopicError):
            charge(1)
        assert charge.finish() == 9_000
        permissive = service.controller_mutations("u", "c", strict=False)
        permissive(1)  # admitted
        assert permissive.finish() == 10_000
        service.controller_mutations("u", "other", strict=True)(1_000)  # not this client
