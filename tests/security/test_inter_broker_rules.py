"""The pure admission rule of inter-broker requests (trafka.node.security.inter_broker.decide)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from trafka.node.security.inter_broker import ClusterFacts, InterBrokerClaim, decide

FACTS = ClusterFacts(
    on_inter_broker_listener=True,
    cluster_action_allowed=True,
    broker_epochs={1: 100, 2: 200},
    controller_epoch=7,
    own_broker_id=2,
)


def _with(**changes: object) -> ClusterFacts:
    values = {
        "on_inter_broker_listener": FACTS.on_inter_broker_listener,
        "cluster_action_allowed": FACTS.cluster_action_allowed,
        "broker_epochs": FACTS.broker_epochs,
        "controller_epoch": FACTS.controller_epoch,
        "own_broker_id": FACTS.own_broker_id,
    }
    values.update(changes)
    return ClusterFacts(**values)  # type: ignore[arg-type]


def test_the_real_controller_is_admitted() -> None:
    for api_key in (4, 5, 6):
        assert decide(InterBrokerClaim(api_key, 1, 7, 200), FACTS) is ErrorCode.none


def test_any_request_off_the_inter_broker_listener_is_refused() -> None:
    facts = _with(on_inter_broker_listener=False)
    for claim in (
        InterBrokerClaim(4, 1, 7, 200),
        InterBrokerClaim(7, 1, None, 100),
        InterBrokerClaim(1, 1, None, -1),
    ):
        assert decide(claim, facts) is ErrorCode.cluster_authorization_failed


def test_a_principal_without_cluster_action_is_refused() -> None:
    claim = InterBrokerClaim(6, 1, 7, 200)
    assert decide(claim, _with(cluster_action_allowed=False)) is (
        ErrorCode.cluster_authorization_failed
    )


def test_forged_epochs_and_unknown_senders_are_refused() -> None:
    refused = ErrorCode.cluster_authorization_failed
    assert decide(InterBrokerClaim(6, 1, 2**31 - 1, 200), FACTS) is refused
    assert decide(InterBrokerClaim(5, 1, 7, 2**62), FACTS) is refused
    assert decide(InterBrokerClaim(4, 9, 7, 200), FACTS) is refused
    assert decide(InterBrokerClaim(7, 1, None, 2**62), FACTS) is refused
    assert decide(InterBrokerClaim(7, 1, None, -1), FACTS) is refused
    assert decide(InterBrokerClaim(1, 9, None, -1), FACTS) is refused
    assert decide(InterBrokerClaim(6, 1, 7, 200), _with(controller_epoch=None)) is refused


def test_older_epochs_get_kafkas_stale_errors() -> None:
    assert decide(InterBrokerClaim(4, 1, 6, 200), FACTS) is ErrorCode.stale_controller_epoch
    assert decide(InterBrokerClaim(4, 1, 7, 150), FACTS) is ErrorCode.stale_broker_epoch
    assert decide(InterBrokerClaim(7, 1, None, 50), FACTS) is ErrorCode.stale_broker_epoch


def test_followers_are_registered_brokers_other_than_this_one() -> None:
    assert decide(InterBrokerClaim(1, 1, None, -1), FACTS) is ErrorCode.none
    assert decide(InterBrokerClaim(23, 1, None, -1), FACTS) is ErrorCode.none
    assert decide(InterBrokerClaim(1, 2, None, -1), FACTS) is (
        ErrorCode.cluster_authorization_failed
    )
    assert decide(InterBrokerClaim(1, 1, None, 100), FACTS) is ErrorCode.none
    assert decide(InterBrokerClaim(1, 1, None, 101), FACTS) is (
        ErrorCode.cluster_authorization_failed
    )


def test_sessions_admit_only_authentication_before_and_after_their_lifetime() -> None:
    from trafka.net.security import ConnectionSession, ListenerSecurity
    from trafka.security.principal import KafkaPrincipal

    session = ConnectionSession.for_listener(ListenerSecurity(security_protocol="SASL_SSL"))
    assert not session.admits(3, 0.0)
    assert session.admits(18, 0.0) and session.admits(17, 0.0) and session.admits(36, 0.0)
    session.authenticated_as(KafkaPrincipal.user("alice"), now_s=10.0, lifetime_ms=3000)
    assert session.admits(3, 12.9)
    assert not session.admits(3, 13.0)
    assert session.admits(17, 13.0)
    session.authenticated_as(KafkaPrincipal.user("alice"), now_s=13.5, lifetime_ms=0)
    assert session.admits(3, 1e9)
    plaintext = ConnectionSession.for_listener(ListenerSecurity())
    assert plaintext.admits(3, 0.0)


def test_frames_before_sasl_authentication_are_capped() -> None:
    from trafka.net.security import ConnectionSession, ListenerSecurity
    from trafka.security.principal import KafkaPrincipal
    from trafka.security.sasl import SaslServerConfig

    listener = ListenerSecurity(
        security_protocol="SASL_PLAINTEXT",
        sasl=SaslServerConfig(mechanisms=("PLAIN",), max_receive_size=524288),
    )
    session = ConnectionSession.for_listener(listener)
    assert session.unauthenticated_frame_limit() == 524288
    session.authenticated_as(KafkaPrincipal.user("alice"), now_s=0.0, lifetime_ms=0)
    assert session.unauthenticated_frame_limit() is None
    assert ConnectionSession.for_listener(ListenerSecurity()).unauthenticated_frame_limit() is None


async def test_cluster_facts_follow_the_tree_and_are_reused_between_changes() -> None:
    from trafka.metadata_quorum import znodes
    from trafka.node.metadata_store import memory_store
    from trafka.node.security.inter_broker import read_facts

    async with memory_store() as store:
        await store.create(znodes.BROKER_IDS, b"")
        await store.create(znodes.broker_path(1), b"{}")
        await store.create(znodes.CONTROLLER_EPOCH, znodes.ControllerEpoch(3).to_json())

        def facts() -> tuple[dict[int, int], int | None]:
            read = read_facts(
                store, on_inter_broker_listener=True, cluster_action_allowed=True, own_broker_id=1
            )
            return dict(read.broker_epochs), read.controller_epoch

        first = facts()
        assert set(first[0]) == {1} and first[1] == 3
        listed: list[str] = []
        real_children = store.children_local

        def counting_children(path: str, *, watch: bool = False) -> list[str]:
            listed.append(path)
            return real_children(path, watch=watch)

        store.children_local = counting_children  # type: ignore[method-assign]
        assert facts() == first
        assert listed == []  # nothing changed: the cached facts
        await store.create(znodes.broker_path(2), b"{}")
        second = facts()
        assert set(second[0]) == {1, 2} and second[0][1] == first[0][1]
        await store.delete(znodes.broker_path(1))
        await store.create(znodes.broker_path(1), b"{}")  # re-registered: a new epoch
        third = facts()
        assert third[0][1] > first[0][1]
        await store.set_data(znodes.CONTROLLER_EPOCH, znodes.ControllerEpoch(4).to_json())
        assert facts()[1] == 4
