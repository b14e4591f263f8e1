"""Kafka's topic name rules (`org.apache.kafka.common.internals.Topic`), as pure functions.

A topic name is at most 249 characters of `[a-zA-Z0-9._-]`, not empty, not `.` or `..`.
The whole name must match (`fullmatch`): `re.match(r"^...$")` would accept a trailing
newline, and a name with a newline breaks every line-based checkpoint file it lands in.
`/` is refused too (it would be a path separator in the log dir and in the quorum tree).

Because Kafka's metric names turn `.` into `_`, two topics whose names differ only there
collide: creating `a_b` while `a.b` exists is refused (InvalidTopicException, "Topic 'a_b'
collides with existing topic: a.b"), and `kafka-topics.sh` warns when a new name holds
either character.

Every path that creates a topic (CreateTopics, Metadata auto-creation, `ktool topics
create`) calls `topic_name_error` and `colliding_topic`; checkpoint readers skip lines whose
topic fails `topic_name_error`.

Group ids follow Kafka too: any non-empty string (the coordinator answers INVALID_GROUP_ID
for an empty one). They are stored only in binary `__consumer_offsets` records, never in a
path or a line-based file, so a newline or `/` in a group id is harmless and accepted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")

COLLISION_WARNING = (
    "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore "
    "('_') could collide. To avoid issues it is best to use either, but not both."
)
"""What `kafka-topics.sh --create` prints for a name that holds `.` or `_`."""


def topic_name_error(name: str, *, what: str = "Topic name") -> str | None:
    """Kafka's `Topic.validate`: None for a legal name, else Kafka's message."""
    if not name:
        return f"{what} is illegal, it can't be empty"
    if name in (".", ".."):
        return f'{what} cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"{what} is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"{what.lower()}: {name}"
        )
    if _LEGAL_TOPIC_NAME.fullmatch(name) is None:
        return (
            f"{what} {_quoted(name)} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def is_legal_topic_name(name: str) -> bool:
    return topic_name_error(name) is None


def has_collision_chars(name: str) -> bool:
    """Kafka's `Topic.hasCollisionChars`: the name holds `.` or `_`."""
    return "." in name or "_" in name


def unify_collision_chars(name: str) -> str:
    """Kafka's `Topic.unifyCollisionChars`: `.` becomes `_`."""
    return name.replace(".", "_")


def colliding_topic(name: str, existing: Iterable[str]) -> str | None:
    """An existing topic other than `name` whose name collides with it, or None."""
    if not has_collision_chars(name):
        return None
    unified = unify_collision_chars(name)
    for other in existing:
        if other != name and unify_collision_chars(other) == unified:
            return other
    return None


def _quoted(name: str) -> str:
    """The name in double quotes; control characters escaped so the message stays one line."""
    if name.isprintable():
        return f'"{name}"'
    return '"' + name.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
