"""``ssl.principal.mapping.rules``: a client certificate's subject -> a principal name.

Kafka's syntax and semantics (`SslPrincipalMapper`, KIP-371): a comma-separated list of
rules, tried in order; the first that yields a name wins.

* ``DEFAULT``: the subject as is, in RFC 2253 form (``CN=alice,OU=eng,O=Example,C=US``);
* ``RULE:<pattern>/<replacement>/[L|U]``: when the Java regex `pattern` matches the *whole*
  subject, every match of it is replaced by `replacement` (``$1``.. are groups, ``\\x`` is a
  literal x); ``L``/``U`` lower-/upper-cases the result.

No rule applies: `NoMatchingRule` ("No rules apply to <subject>"), and Kafka refuses the
connection. The default list is ``DEFAULT``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

_RULE_PATTERN: Final = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER: Final = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER: Final = re.compile(_RULE_PATTERN)


class NoMatchingRule(Exception):
    pass


@dataclass(frozen=True, slots=True)
class MappingRule:
    pattern: re.Pattern[str] | None
    """None: DEFAULT."""
    replacement: str = ""
    to_lower: bool = False
    to_upper: bool = False

    def apply(self, subject: str) -> str | None:
        if self.pattern is None:
            return subject
        if self.pattern.fullmatch(subject) is None:
            return None
        result = self.pattern.sub(_python_replacement(self.replacement), subject)
        if self.to_lower:
            return result.lower()
        if self.to_upper:
            return result.upper()
        return result


def _python_replacement(replacement: str) -> str:
    """Java's Matcher.replaceAll syntax ($n, \\x) -> Python's re.sub syntax."""
    out: list[str] = []
    index = 0
    while index < len(replacement):
        char = replacement[index]
        if char == "\\" and index + 1 < len(replacement):
            literal = replacement[index + 1]
            out.append("\\\\" if literal == "\\" else literal)
            index += 2
            continue
        if char == "$":
            match = re.match(r"\$(\d+)", replacement[index:])
            if match:
                out.append(f"\\g<{match.group(1)}>")
                index += len(match.group(0))
                continue
        out.append("\\\\" if char == "\\" else char)
        index += 1
    return "".join(out)


def _java_pattern(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as error:
        raise ValueError(f"Invalid rule pattern {text!r}: {error}") from None


def parse_rules(text: str) -> tuple[MappingRule, ...]:
    """Parse ``ssl.principal.mapping.rules``; ValueError with Kafka's message."""
    rules: list[MappingRule] = []
    for raw in _split_rules(text):
        match = _RULE_PARSER.match(raw)
        if match is None:
            raise ValueError(f"Invalid rule: {raw}")
        if match.end() != len(raw):
            raise ValueError(f"Invalid rule: `{raw}`, unmatched substring: `{raw[match.end() :]}`")
        if match.group(1) is not None:
            rules.append(MappingRule(None))
        elif match.group(2) is not None:
            flag = match.group(6)
            rules.append(
                MappingRule(
                    _java_pattern(match.group(2)),
                    match.group(4),
                    to_lower=flag == "L",
                    to_upper=flag == "U",
                )
            )
    return tuple(rules)


def _split_rules(text: str) -> list[str]:
    stripped = text.strip()
    result: list[str] = []
    position = 0
    while position <= len(stripped):
        match = _RULE_SPLITTER.search(stripped, position)
        if match is None:
            break
        result.append(match.group(1))
        if match.end() == position:
            # An empty match at the end: done (Java's find() would advance past it).
            break
        position = match.end()
        if position >= len(stripped):
            break
    return result


@dataclass(frozen=True, slots=True)
class PrincipalMapper:
    """A parsed rule list; `name(subject)` -> the principal name."""

    rules: tuple[MappingRule, ...]

    @classmethod
    def from_rules(cls, text: str | None) -> PrincipalMapper:
        return cls(parse_rules(text or "DEFAULT"))

    def name(self, subject: str) -> str:
        for rule in self.rules:
            result = rule.apply(subject)
            if result is not None:
                return result
        raise NoMatchingRule(f"No rules apply to {subject}")

    def names(self, subjects: Sequence[str]) -> list[str]:
        return [self.name(s) for s in subjects]
