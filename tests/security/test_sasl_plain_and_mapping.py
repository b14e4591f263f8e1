"""SASL/PLAIN, JAAS options and ssl.principal.mapping.rules (Kafka's semantics)."""

from __future__ import annotations

import pytest

from trafka.security.mapping import NoMatchingRule, PrincipalMapper, parse_rules
from trafka.security.principal import ANONYMOUS, KafkaPrincipal
from trafka.security.sasl import PLAIN_FAILED_MESSAGE, PlainServer, SaslFailed, parse_jaas


def test_jaas_options_and_plain_users() -> None:
    jaas = parse_jaas(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="p\\"w";'
    )
    assert jaas["username"] == "admin"
    assert jaas["user_alice"] == 'p"w'


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\0alice\0wrong", PLAIN_FAILED_MESSAGE),
        (b"\0mallory\0x", PLAIN_FAILED_MESSAGE),
        (b"\0alice", "expected 3 tokens"),
        (b"\0\0pw", "username not specified"),
        (b"\0alice\0", "password not specified"),
        (b"bob\0alice\0alice-pw", "authorization id"),
        (b"\0\xff\0x", "not UTF-8"),
    ],
)
def test_plain_refuses_bad_tokens(token: bytes, message: str) -> None:
    server = PlainServer({"alice": "alice-pw"})
    with pytest.raises(SaslFailed, match=message):
        server.evaluate(token)
    assert not server.complete and server.username is None


def test_plain_accepts_the_right_password() -> None:
    server = PlainServer({"alice": "alice-pw"})
    assert server.evaluate(b"alice\0alice\0alice-pw") == b""
    assert server.complete and server.username == "alice"


RULES = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,"
    "DEFAULT"
)


@pytest.mark.parametrize(
    ("subject", "name"),
    [
        ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "Duke"),
        ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
        ("cn=duke,ou=JavaSoft,o=Sun Microsystems", "DUKE"),
        ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
    ],
)
def test_kafka_mapping_rules(subject: str, name: str) -> None:
    # The cases of Kafka's SslPrincipalMapperTest.
    assert PrincipalMapper.from_rules(RULES).name(subject) == name


def test_default_and_no_matching_rule() -> None:
    assert PrincipalMapper.from_rules(None).name("CN=a,O=b") == "CN=a,O=b"
    mapper = PrincipalMapper.from_rules("RULE:^CN=(.*)$/$1/")
    assert mapper.name("CN=alice") == "alice"
    with pytest.raises(NoMatchingRule, match="No rules apply to O=x"):
        mapper.name("O=x")


@pytest.mark.parametrize("rules", ["RULE:^CN=(.*$/$1/", "RULE:a/b/X", "garbage"])
def test_invalid_rules_are_refused(rules: str) -> None:
    with pytest.raises(ValueError):
        parse_rules(rules)


def test_principals() -> None:
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    assert KafkaPrincipal.parse("User:alice") == KafkaPrincipal.user("alice")
    with pytest.raises(ValueError):
        KafkaPrincipal.parse("alice")
