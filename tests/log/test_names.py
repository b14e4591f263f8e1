"""Kafka's topic name rules (trafka.log.names), the one function every creation path uses."""

from __future__ import annotations

import pytest

from trafka.log.names import (
    colliding_topic,
    has_collision_chars,
    is_legal_topic_name,
    topic_name_error,
)


@pytest.mark.parametrize(
    "name",
    [
        "",
        ".",
        "..",
        "a" * 250,
        "orders\n",  # `re.match("^...$")` accepted this: `$` matches before a final newline
        "\norders",
        "or\nders",
        "bad/name",
        "../x",
        "bad name",
        "tab\there",
        "ümlaut",
        "a:b",
        "a\x00b",
    ],
)
def test_illegal_names(name: str) -> None:
    error = topic_name_error(name)
    assert error is not None
    assert "\n" not in error  # the message stays one line, even for a name with a newline
    assert not is_legal_topic_name(name)


@pytest.mark.parametrize("name", ["a", "a.b_c-D9", "a" * 249, "__consumer_offsets", "..."])
def test_legal_names(name: str) -> None:
    assert topic_name_error(name) is None


def test_messages_are_kafkas() -> None:
    assert topic_name_error("") == "Topic name is illegal, it can't be empty"
    assert topic_name_error("..") == 'Topic name cannot be "." or ".."'
    assert topic_name_error("a/b") == (
        'Topic name "a/b" is illegal, it contains a character other than ASCII '
        "alphanumerics, '.', '_' and '-'"
    )
    assert topic_name_error("x" * 250) == (
        "Topic name is illegal, it can't be longer than 249 characters, topic name: " + "x" * 250
    )
    assert topic_name_error("a\nb") == (
        'Topic name "a\\nb" is illegal, it contains a character other than ASCII '
        "alphanumerics, '.', '_' and '-'"
    )


def test_collisions() -> None:
    assert has_collision_chars("a.b") and has_collision_chars("a_b")
    assert not has_collision_chars("ab-c")
    assert colliding_topic("a_b", ["x", "a.b"]) == "a.b"
    assert colliding_topic("a.b", ["a_b"]) == "a_b"
    assert colliding_topic("a.b", ["a.b"]) is None  # the same topic is not a collision
    assert colliding_topic("ab", ["ab"]) is None
    assert colliding_topic("a.b.c", ["a_b.c", "zzz"]) == "a_b.c"
