"""`ktool transactions`: Kafka's kafka-transactions.sh for trafka (KIP-664, docs/transactions.md).

    ktool transactions list
    ktool transactions describe --transactional-id ID
    ktool transactions describe-producers --topic T --partition P
    ktool transactions abort --topic T --partition P (--start-offset O |
        --producer-id I --producer-epoch E --coordinator-epoch C)
    ktool transactions find-hanging (--broker-id B | --topic T [--partition P])
        [--max-transaction-timeout MINUTES]

Every command takes `--bootstrap-server host:port` (default localhost:9092). Output columns
are kafka-transactions.sh's: list `TransactionalId Coordinator ProducerId TransactionState`;
describe `CoordinatorId TransactionalId ProducerId ProducerEpoch TransactionState
TransactionTimeoutMs CurrentTransactionStartTimeMs TransactionDurationMs TopicPartitions`;
describe-producers `ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence
LastTimestamp CurrentTransactionStartOffset`; find-hanging `Topic Partition ProducerId
ProducerEpoch CoordinatorEpoch StartOffset LastTimestamp Duration(min)`. Values Kafka
prints as absent are `None`. Errors are one line on stderr with exit code 1.

How (as Kafka's admin client): list sends ListTransactions to every broker; describe finds
the coordinator (FindCoordinator key type 1) and sends DescribeTransactions;
describe-producers sends DescribeProducers to the partition's leader; abort sends
WriteTxnMarkers (ABORT) for the producer to the leader; find-hanging lists the open
transactions of the partitions' producer states that started more than
`--max-transaction-timeout` minutes ago (default 15, Kafka's `transaction.max.timeout.ms`)
and reports those whose producer id the coordinators do not list with that partition in an
open transaction.

`--json` prints the rows as a list of objects keyed by the columns in snake_case
(`trafka.tools.output`; describe's `topic_partitions` a list). `--command-config FILE`
(ktool's global option) secures the connections.

Not implemented: `--broker-id` on describe-producers (the leader is always asked).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

import typer

from trafka.net.api_keys import ApiKey
from trafka.tools.groups_cmd import GroupsError, _Admin, _error_name, _run, format_table
from trafka.tools.output import JsonFlag, emit_json, table_document

transactions_app = typer.Typer(
    help="List, describe and abort transactions (kafka-transactions.sh).", no_args_is_help=True
)

BootstrapOption = Annotated[
    str, typer.Option("--bootstrap-server", help="host:port of any broker.")
]
TopicOption = Annotated[str, typer.Option("--topic", help="The topic.")]
PartitionOption = Annotated[int, typer.Option("--partition", help="The partition.")]

_TRANSACTION_KEY_TYPE = 1
_OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


def _none(value: int) -> object:
    return "None" if value < 0 else value


@dataclass(frozen=True, slots=True)
class ProducerRow:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    last_sequence: int
    last_timestamp: int
    txn_start_offset: int


async def _producers(admin: _Admin, topic: str, partition: int) -> list[ProducerRow]:
    await admin.metadata([topic])
    leader = admin.leaders.get((topic, partition))
    if leader is None or leader not in admin.brokers:
        raise GroupsError(f"no leader for {topic}-{partition}")
    response = await admin.request(
        admin.brokers[leader],
        ApiKey.DESCRIBE_PRODUCERS,
        0,
        {"topics": [{"name": topic, "partition_indexes": [partition]}]},
    )
    result = response.topics[0].partitions[0]
    if int(result.error_code) != 0:
        raise GroupsError(f"{topic}-{partition}: {_error_name(int(result.error_code))}")
    return [
        ProducerRow(
            int(p.producer_id),
            int(p.producer_epoch),
            int(p.coordinator_epoch),
            int(p.last_sequence),
            int(p.last_timestamp),
            int(p.current_txn_start_offset),
        )
        for p in result.active_producers
    ]


async def _listings(admin: _Admin) -> list[tuple[str, int, int, str]]:
    """(transactional id, coordinator, producer id, state) from every broker."""
    await admin.metadata([])
    rows = []
    for broker_id, address in sorted(admin.brokers.items()):
        response = await admin.request(
            address, ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []}
        )
        for t in response.transaction_states:
            rows.append(
                (str(t.transactional_id), broker_id, int(t.producer_id), str(t.transaction_state))
            )
    return sorted(rows)


@transactions_app.command("list")
def list_transactions(
    bootstrap_server: BootstrapOption = "localhost:9092", as_json: JsonFlag = False
) -> None:
    """Every transactional id of the cluster (ListTransactions to each broker)."""
    rows = _run(_listings, bootstrap_server)
    _print_table(
        ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows, as_json
    )


def _print_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], as_json: bool
) -> list[dict[str, object]]:
    document = table_document(headers, rows)
    if as_json:
        emit_json(document)
    else:
        typer.echo(format_table(headers, rows))
    return document


@transactions_app.command("describe")
def describe(
    transactional_id: Annotated[str, typer.Option("--transactional-id", help="The id.")],
    bootstrap_server: BootstrapOption = "localhost:9092",
    as_json: JsonFlag = False,
) -> None:
    """The coordinator's view of one transactional id (DescribeTransactions)."""

    async def body(admin: _Admin) -> list[object]:
        await admin.metadata([])
        found = await admin.request(
            admin._bootstrap,
            ApiKey.FIND_COORDINATOR,
            3,
            {"key": transactional_id, "key_type": _TRANSACTION_KEY_TYPE},
        )
        if int(found.error_code) != 0:
            raise GroupsError(
                f"cannot find the coordinator of '{transactional_id}': "
                f"{_error_name(int(found.error_code))}"
            )
        coordinator = int(found.node_id)
        response = await admin.request(
            (str(found.host), int(found.port)),
            ApiKey.DESCRIBE_TRANSACTIONS,
            0,
            {"transactional_ids": [transactional_id]},
        )
        state = response.transaction_states[0]
        if int(state.error_code) != 0:
            raise GroupsError(f"'{transactional_id}': {_error_name(int(state.error_code))}")
        start = state.transaction_start_time
        start_ms = -1 if start is None else int(start.timestamp() * 1000)
        duration = int(time.time() * 1000) - start_ms if start_ms >= 0 else -1
        partitions = ",".join(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)
        return [
            coordinator,
            transactional_id,
            int(state.producer_id),
            int(state.producer_epoch),
            str(state.transaction_state),
            int(state.transaction_timeout.total_seconds() * 1000),
            _none(start_ms),
            _none(duration),
            partitions,
        ]

    row = _run(body, bootstrap_server)
    headers = [
        "CoordinatorId",
        "TransactionalId",
        "ProducerId",
        "ProducerEpoch",
        "TransactionState",
        "TransactionTimeoutMs",
        "CurrentTransactionStartTimeMs",
        "TransactionDurationMs",
        "TopicPartitions",
    ]
    if as_json:
        document = table_document(headers, [row])[0]
        document["topic_partitions"] = [p for p in str(row[-1]).split(",") if p]
        emit_json(document)
    else:
        typer.echo(format_table(headers, [row]))


@transactions_app.command("describe-producers")
def describe_producers(
    topic: TopicOption,
    partition: PartitionOption,
    bootstrap_server: BootstrapOption = "localhost:9092",
    as_json: JsonFlag = False,
) -> None:
    """The active producers of a partition (DescribeProducers to its leader)."""

    async def body(admin: _Admin) -> list[ProducerRow]:
        return await _producers(admin, topic, partition)

    rows = _run(body, bootstrap_server)
    headers = [
        "ProducerId",
        "ProducerEpoch",
        "LatestCoordinatorEpoch",
        "LastSequence",
        "LastTimestamp",
        "CurrentTransactionStartOffset",
    ]
    table: Sequence[Sequence[object]] = [
        [
            r.producer_id,
            r.producer_epoch,
            r.coordinator_epoch,
            r.last_sequence,
            r.last_timestamp,
            _none(r.txn_start_offset),
        ]
        for r in rows
    ]
    _print_table(headers, table, as_json)


@transactions_app.command("abort")
def abort(
    topic: TopicOption,
    partition: PartitionOption,
    start_offset: Annotated[
        int | None, typer.Option("--start-offset", help="First offset of the transaction.")
    ] = None,
    producer_id: Annotated[int | None, typer.Option("--producer-id")] = None,
    producer_epoch: Annotated[int | None, typer.Option("--producer-epoch")] = None,
    coordinator_epoch: Annotated[int | None, typer.Option("--coordinator-epoch")] = None,
    bootstrap_server: BootstrapOption = "localhost:9092",
) -> None:
    """Abort a (hanging) transaction in one partition: an ABORT marker via WriteTxnMarkers."""

    async def body(admin: _Admin) -> None:
        if start_offset is not None:
            match = [
                r
                for r in await _producers(admin, topic, partition)
                if r.txn_start_offset == start_offset
            ]
            if not match:
                raise GroupsError(
                    f"no open transaction starts at offset {start_offset} in {topic}-{partition}"
                )
            row = match[0]
            pid, epoch, coordinator = (
                row.producer_id,
                row.producer_epoch,
                max(row.coordinator_epoch, 0),
            )
        elif None not in (producer_id, producer_epoch, coordinator_epoch):
            assert producer_id is not None and producer_epoch is not None
            assert coordinator_epoch is not None
            pid, epoch, coordinator = producer_id, producer_epoch, coordinator_epoch
            await admin.metadata([topic])
        else:
            raise GroupsError(
                "give --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch"
            )
        leader = admin.leaders.get((topic, partition))
        if leader is None or leader not in admin.brokers:
            raise GroupsError(f"no leader for {topic}-{partition}")
        response = await admin.request(
            admin.brokers[leader],
            ApiKey.WRITE_TXN_MARKERS,
            1,
            {
                "markers": [
                    {
                        "producer_id": pid,
                        "producer_epoch": epoch,
                        "transaction_result": False,
                        "coordinator_epoch": coordinator,
                        "topics": [{"name": topic, "partition_indexes": [partition]}],
                    }
                ]
            },
        )
        code = int(response.markers[0].topics[0].partitions[0].error_code)
        if code != 0:
            raise GroupsError(f"abort of {topic}-{partition} failed: {_error_name(code)}")

    _run(body, bootstrap_server)


@transactions_app.command("find-hanging")
def find_hanging(
    broker_id: Annotated[int | None, typer.Option("--broker-id", help="Its partitions.")] = None,
    topic: Annotated[str | None, typer.Option("--topic")] = None,
    partition: Annotated[int | None, typer.Option("--partition")] = None,
    max_transaction_timeout: Annotated[
        int, typer.Option("--max-transaction-timeout", help="Minutes (default 15).")
    ] = 15,
    bootstrap_server: BootstrapOption = "localhost:9092",
    as_json: JsonFlag = False,
) -> None:
    """Open transactions older than the timeout that no coordinator knows of."""

    async def body(admin: _Admin) -> list[list[object]]:
        if broker_id is None and topic is None:
            raise GroupsError("give --broker-id or --topic")
        await admin.metadata(None if topic is None else [topic])
        candidates = [
            tp
            for tp, leader in sorted(admin.leaders.items())
            if (topic is None or tp[0] == topic)
            and (partition is None or tp[1] == partition)
            and (broker_id is None or leader == broker_id)
        ]
        now_ms = int(time.time() * 1000)
        limit_ms = max_transaction_timeout * 60_000
        open_txns = []
        for t, p in candidates:
            for row in await _producers(admin, t, p):
                if row.txn_start_offset >= 0 and now_ms - row.last_timestamp > limit_ms:
                    open_txns.append((t, p, row))
        if not open_txns:
            return []
        known = {pid for _, _, pid, state in await _listings(admin) if state in _OPEN_STATES}
        return [
            [
                t,
                p,
                row.producer_id,
                row.producer_epoch,
                row.coordinator_epoch,
                row.txn_start_offset,
                row.last_timestamp,
                (now_ms - row.last_timestamp) // 60_000,
            ]
            for t, p, row in open_txns
            if row.producer_id not in known
        ]

    rows = _run(body, bootstrap_server)
    headers = [
        "Topic",
        "Partition",
        "ProducerId",
        "ProducerEpoch",
        "CoordinatorEpoch",
        "StartOffset",
        "LastTimestamp",
        "Duration(min)",
    ]
    _print_table(headers, rows, as_json)
