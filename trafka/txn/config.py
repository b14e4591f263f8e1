"""Transaction coordinator settings, with Kafka's names and defaults (KIP-98)."""

from __future__ import annotations

from dataclasses import dataclass

TRANSACTION_STATE_TOPIC = "__transaction_state"


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """Broker settings the coordinator obeys.

    transaction_max_timeout_ms: `transaction.max.timeout.ms`, 900000 (15 min); an
        InitProducerId asking for more (or for <= 0) gets INVALID_TRANSACTION_TIMEOUT.
    transactional_id_expiration_ms: `transactional.id.expiration.ms`, 604800000 (7 days) of
        no update with no open transaction, after which the id expires (Dead + tombstone).
    abort_timed_out_transaction_cleanup_interval_ms:
        `transaction.abort.timed.out.transaction.cleanup.interval.ms`, 10000: how often
        transactions open past their timeout are looked for (and aborted).
    remove_expired_transaction_cleanup_interval_ms:
        `transaction.remove.expired.transaction.cleanup.interval.ms`, 3600000.
    max_transactional_ids: our own bound on the ids one coordinator partition holds (a new id
        beyond it gets COORDINATOR_NOT_AVAILABLE, as a group beyond `max_groups` does).
    max_partitions_per_transaction: our own bound on one transaction's partitions (Kafka has
        none; beyond it AddPartitionsToTxn answers INVALID_REQUEST, so a hostile client cannot
        make one `__transaction_state` record unbounded).
    """

    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    max_transactional_ids: int = 100_000
    max_partitions_per_transaction: int = 10_000
