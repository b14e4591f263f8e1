"""docs/glossary.md explains every checklist id, discrepancy note and KIP the code cites.

A citation such as `CTL-34`, a range such as `CTL-17..20` (every id in it), `D17` or
`KIP-101` in `trafka/` (checklist ids also in `tests/`) must have its own row in the
glossary, so a reader can follow it without anything outside the repository.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GLOSSARY = ROOT / "docs" / "glossary.md"

PREFIXES = "ADM|BST|CTL|EOS|EXT|GRP|KR|LOG|MSG|NET|PERF|PRD|PROTO|REP|ZK"
"""The checklist's sections (messages, paths, replication, log, protocol, controller, ...)."""

CHECKLIST_ID = re.compile(rf"\b({PREFIXES})-(\d{{2,3}})(?:\.\.(?:(?:{PREFIXES})-)?(\d{{2,3}}))?\b")
DISCREPANCY = re.compile(r"\bD([1-9]|[1-3][0-9])\b")
KIP = re.compile(r"\bKIP-(\d{1,4})\b")
ROW = re.compile(r"^\| *((?:[A-Z]{1,5}-)?[A-Z]?\d{1,4}) *\|", re.MULTILINE)


def checklist_ids(text: str) -> set[str]:
    """Every checklist id `text` cites; `CTL-17..20` and `KR-01..KR-08` cite each id between."""
    ids: set[str] = set()
    for match in CHECKLIST_ID.finditer(text):
        prefix, first, last = match.group(1), match.group(2), match.group(3)
        end = int(last) if last else int(first)
        ids.update(f"{prefix}-{n:0{len(first)}d}" for n in range(int(first), end + 1))
    return ids


def discrepancy_ids(text: str) -> set[str]:
    return {f"D{m.group(1)}" for m in DISCREPANCY.finditer(text)}


def kip_ids(text: str) -> set[str]:
    return {f"KIP-{m.group(1)}" for m in KIP.finditer(text)}


def _sources(*folders: str) -> Iterable[str]:
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path.read_text()


def _glossary_rows() -> set[str]:
    return set(ROW.findall(GLOSSARY.read_text()))


def test_every_cited_checklist_id_has_a_glossary_row() -> None:
    cited = set().union(*(checklist_ids(text) for text in _sources("trafka", "tests")))
    assert cited, "no citations found: the pattern is wrong"
    assert sorted(cited - _glossary_rows()) == []


def test_every_cited_discrepancy_note_and_kip_has_a_glossary_row() -> None:
    texts = list(_sources("trafka"))
    cited = set().union(*(discrepancy_ids(t) | kip_ids(t) for t in texts))
    assert "D17" in cited and "KIP-101" in cited
    assert sorted(cited - _glossary_rows()) == []


def test_the_glossary_is_linked_from_the_architecture_doc() -> None:
    assert "glossary.md" in (ROOT / "docs" / "architecture.md").read_text()


def test_citations_are_found_and_ranges_expanded() -> None:
    text = (
        "(CTL-17..20, KR-01..KR-03; REP-15) D17 at §16-D20, 0xD2 not one; CRC-32 and "
        "SHA-256 are not checklist ids; KIP-101/279 and KIP-482."
    )
    assert checklist_ids(text) == {
        "CTL-17",
        "CTL-18",
        "CTL-19",
        "CTL-20",
        "KR-01",
        "KR-02",
        "KR-03",
        "REP-15",
    }
    assert discrepancy_ids(text) == {"D17", "D20"}
    assert kip_ids(text) == {"KIP-101", "KIP-482"}
    rows = set(ROW.findall("| CTL-34 | x |\n| D7 | y |\n| KIP-98 | z |\n- CTL-01 in prose\n"))
    assert rows == {"CTL-34", "D7", "KIP-98"}
