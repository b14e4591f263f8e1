"""`ktool configs --entity-type users` without a broker: kafka-configs.sh's SCRAM syntax."""

from __future__ import annotations

import pytest

from trafka.security.scram import salted_password
from trafka.tools.configs_cmd import (
    ConfigCommandError,
    describe_line,
    parse_scram_configs,
    split_top_level,
    upsertions,
)


def test_add_config_syntax() -> None:
    assert split_top_level("A=[x=1,y=2],B=[z=3]") == ["A=[x=1,y=2]", "B=[z=3]"]
    parsed = parse_scram_configs(
        "SCRAM-SHA-512=[iterations=8192,password=alice-secret],SCRAM-SHA-256=[password=p,w]"
    )
    assert parsed == {"SCRAM-SHA-512": (8192, "alice-secret"), "SCRAM-SHA-256": (4096, "p")}


@pytest.mark.parametrize(
    "text",
    [
        "SCRAM-SHA-1=[password=x]",
        "SCRAM-SHA-512=password",
        "SCRAM-SHA-512=[iterations=8192]",
        "SCRAM-SHA-512=[iterations=100,password=x]",
        "SCRAM-SHA-512=[iterations=many,password=x]",
    ],
)
def test_bad_add_configs_are_refused(text: str) -> None:
    with pytest.raises(ConfigCommandError):
        parse_scram_configs(text)


def test_upsertion_carries_a_salted_password_never_the_password() -> None:
    [upsertion] = upsertions("alice", {"SCRAM-SHA-512": (8192, "alice-secret")})
    assert upsertion["mechanism"] == 2 and upsertion["iterations"] == 8192
    assert len(upsertion["salt"]) == 32
    assert upsertion["salted_password"] == salted_password(
        "SCRAM-SHA-512", "alice-secret", upsertion["salt"], 8192
    )
    assert b"alice-secret" not in repr(upsertion).encode()


def test_describe_line_is_kafka_configs_sh() -> None:
    assert describe_line("alice", [(2, 8192), (1, 4096)]) == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=8192"
    )


def test_java_double_prints_as_java() -> None:
    from trafka.tools.configs_cmd import java_double

    assert java_double(1048576.0) == "1048576.0"
    assert java_double(12.5) == "12.5"
    assert java_double(2.0e7) == "2.0E7"
    assert java_double(1.5e10) == "1.5E10"
    assert java_double(0.0001) == "1.0E-4"
    assert java_double(0.0) == "0.0"
    assert java_double(9999999.0) == "9999999.0"


def test_add_config_and_entity_pairs() -> None:
    from trafka.tools.configs_cmd import entities_of, parse_add_config, quota_line

    assert parse_add_config("a=1,cleanup.policy=[compact,delete]") == {
        "a": "1",
        "cleanup.policy": "compact,delete",
    }
    assert parse_add_config("SCRAM-SHA-256=[password=x]") == {"SCRAM-SHA-256": "[password=x]"}
    argv = ["configs", "--entity-type", "users", "--entity-default", "--entity-type", "clients"]
    argv += ["--entity-name", "c1"]
    assert entities_of(argv, ["users", "clients"], ["c1"], True) == [
        ("users", None),
        ("clients", "c1"),
    ]
    assert entities_of(["x", "--entity-type", "ips"], ["ips"], [], False) == [("ips", "?")]
    assert (
        quota_line([("client-id", "c1"), ("user", None)], [("producer_byte_rate", 1024.0)])
        == "Quota configs for the default user-principal, client-id 'c1' are "
        "producer_byte_rate=1024.0"
    )
