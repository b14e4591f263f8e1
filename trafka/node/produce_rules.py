"""What a client may append through Produce, before the log sees it (issue 12, item 3).

Kafka's rules, checked per partition on the request's bytes (batch headers only, nothing
decoded), in this order:

1. internal topics (`__consumer_offsets`, `__transaction_state`): INVALID_TOPIC_EXCEPTION,
   "Cannot append to internal topic" (Kafka's `ReplicaManager.appendToLocalLog`; the
   coordinators append through the replica manager, never through Produce);
2. the record set of a v3+ Produce holds exactly one batch, of magic 2
   (`ProduceRequest.validateRecords`): INVALID_RECORD;
3. control batches (commit/abort markers) from clients: INVALID_RECORD, "clients are not
   allowed to write control records" (markers come only from WriteTxnMarkers);
4. transactional batches: `transactional_batch_refusal` decides what needs no coordinator:
   without a transactional id in the request, TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka's
   `KafkaApis.handleProduceRequest`). Whether the producer added the partition to its
   ongoing transaction (KIP-890 part 1: else INVALID_TXN_STATE, so no client can pin a
   partition's last stable offset) is asked of the transaction coordinator by
   `trafka.node.txn_verification` before the append.

Record-level rules (lengths, varints, offset deltas, keys on compacted topics) are the
log's (`trafka.log.validation`). Deviation: Kafka checks that the partition exists
(UNKNOWN_TOPIC_OR_PARTITION) before rules 2-4; here a malformed record set for an unknown
partition gets the rule's error.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from trafka.log import batch as batch_format
from trafka.log.errors import CorruptRecordError

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass(frozen=True, slots=True)
class ProduceRefusal:
    error_code: ErrorCode
    message: str


def check_produce_partition(
    topic: str, records: bytes | bytearray | memoryview, *, transactional_id: str | None
) -> ProduceRefusal | None:
    """None if the partition's record set may go on to the log, else why not."""
    if topic in INTERNAL_TOPICS:
        return ProduceRefusal(
            ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic}"
        )
    if not records:
        return None  # the replica manager answers CORRUPT_MESSAGE
    try:
        magic = batch_format.magic_at(records)
        if magic != 2:
            return ProduceRefusal(
                ErrorCode.invalid_record,
                "Produce requests with version 3 or later are only allowed to contain "
                "record batches with magic version 2",
            )
        header = batch_format.parse_header(records)
    except CorruptRecordError as error:
        return ProduceRefusal(ErrorCode.corrupt_message, str(error))
    if header.size < len(records):
        return ProduceRefusal(
            ErrorCode.invalid_record,
            "Produce requests are only allowed to contain exactly one record batch per partition",
        )
    if header.is_control:
        return ProduceRefusal(
            ErrorCode.invalid_record, "clients are not allowed to write control records"
        )
    if header.is_transactional:
        return transactional_batch_refusal(
            topic, header.producer_id, header.producer_epoch, transactional_id=transactional_id
        )
    return None


def transactional_batch_refusal(
    topic: str, producer_id: int, producer_epoch: int, *, transactional_id: str | None
) -> ProduceRefusal | None:
    """The transaction rule (module docstring, rule 4): None admits the batch.

    The coordinator's verification (partition added to the producer's transaction) is
    `trafka.node.txn_verification`'s, in the Produce handler."""
    if transactional_id is None:
        return ProduceRefusal(
            ErrorCode.transactional_id_authorization_failed,
            "transactional records need the request's transactional id",
        )
    return None
