"""The fetcher's side of a fetch session, and the fetcher id of `num.replica.fetchers`."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from trafka.node.replication.fetch_session_client import FetchSessionClient
from trafka.node.replication.ids import TopicPartition
from trafka.node.replication.replica_fetcher import fetcher_id

A, B, C = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def test_full_then_incremental_with_changes_and_forgotten() -> None:
    client: FetchSessionClient[TopicPartition, int] = FetchSessionClient()
    first = client.build({A: 0, B: 0})
    assert (first.session_id, first.epoch, first.to_send) == (0, 0, {A: 0, B: 0})
    assert client.on_response(first, 0, 77, [A, B])
    second = client.build({A: 5, B: 0, C: 0})  # A moved on, C added
    assert (second.session_id, second.epoch) == (77, 1)
    assert second.to_send == {A: 5, C: 0} and second.to_forget == []
    assert client.on_response(second, 0, 77, [A])  # B and C unchanged: not named
    third = client.build({A: 5, C: 0})
    assert third.epoch == 2 and third.to_send == {} and third.to_forget == [B]


def test_errors_start_over() -> None:
    client: FetchSessionClient[TopicPartition, int] = FetchSessionClient()
    assert client.on_response(client.build({A: 0}), 0, 9, [A])
    request = client.build({A: 0})
    assert not client.on_response(request, int(ErrorCode.invalid_fetch_session_epoch), 0, [])
    again = client.build({A: 0})
    assert (again.session_id, again.epoch, again.to_send) == (9, 0, {A: 0})  # closes 9
    assert not client.on_response(again, int(ErrorCode.fetch_session_id_not_found), 0, [])
    assert client.build({A: 0}).session_id == 0
    # an incremental answer naming a partition outside the session is not applied
    assert client.on_response(client.build({A: 0}), 0, 10, [A])
    assert not client.on_response(client.build({A: 0}), 0, 10, [B])
    assert client.build({A: 0}).epoch == 0
    # a full answer that leaves out a partition is not applied either
    assert not client.on_response(client.build({A: 0, B: 0}), 0, 11, [A])


def test_no_session_from_the_leader_keeps_full_fetches() -> None:
    client: FetchSessionClient[TopicPartition, int] = FetchSessionClient()
    assert client.on_response(client.build({A: 0}), 0, 0, [A])
    assert client.build({A: 1}).epoch == 0


def test_fetcher_id_is_kafkas() -> None:
    # Kafka: Utils.abs(31 * topic.hashCode + partition) % numFetchers; "t".hashCode = 116
    assert fetcher_id(TopicPartition("t", 0), 4) == (31 * 116) % 4
    assert fetcher_id(TopicPartition("t", 5), 7) == (31 * 116 + 5) % 7
    assert {fetcher_id(TopicPartition("orders", p), 1) for p in range(50)} == {0}
    assert {fetcher_id(TopicPartition("orders", p), 3) for p in range(50)} == {0, 1, 2}
    # a hash that overflows int32 is wrapped as Java does
    long_name = "a-rather-long-topic-name-whose-hash-overflows"
    assert 0 <= fetcher_id(TopicPartition(long_name, 2**31 - 1), 5) < 5
