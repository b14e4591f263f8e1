"""docs/architecture.md matches the tree (issue 13's Must show): every package of trafka and
every module and subpackage of trafka/node is named in the doc's tree, and every name the
node's part of the tree gives exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "architecture.md").read_text()
TREE = DOC.split("## The tree", 1)[1].split("```")[1]
NODE = ROOT / "trafka" / "node"


def _node_part() -> str:
    return TREE.split("  node/", 1)[1].split("\n  spark/", 1)[0]


def test_every_package_of_trafka_is_in_the_tree() -> None:
    packages = {p.name for p in (ROOT / "trafka").iterdir() if (p / "__init__.py").exists()}
    named = set(re.findall(r"^  (\w+)/", TREE, re.MULTILINE))
    assert packages == named


def test_every_module_of_node_is_in_the_tree() -> None:
    part = _node_part()
    top = {p.name for p in NODE.glob("*.py") if p.name != "__init__.py"}
    missing = {name for name in top if not re.search(rf"^    {re.escape(name)}\b", part, re.M)}
    assert not missing, f"node modules missing from docs/architecture.md: {sorted(missing)}"
    packages = {p.name for p in NODE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    packages |= {p.name for p in NODE.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    missing = {name for name in packages if f"    {name}/" not in part}
    assert not missing, f"node packages missing from docs/architecture.md: {sorted(missing)}"


def test_every_module_the_node_tree_names_exists() -> None:
    part = _node_part()
    named = set(re.findall(r"^    (\w+\.py)\b", part, re.MULTILINE))
    assert named, "no module found in the node part of the tree"
    assert not {name for name in named if not (NODE / name).exists()}
    for package in re.findall(r"^    (\w+)/", part, re.MULTILINE):
        block = re.split(r"\n    (?=\S)", part.split(f"    {package}/", 1)[1], maxsplit=1)[0]
        for module in re.findall(r"\b(\w+)\.py\b", block):
            assert (NODE / package / f"{module}.py").exists(), f"{package}/{module}.py"


def test_every_module_of_a_node_package_is_named_in_its_block() -> None:
    """handlers/ excepted: one module per Kafka API (docs/node.md lists them)."""
    part = _node_part()
    for package in re.findall(r"^    (\w+)/", part, re.MULTILINE):
        if package == "handlers":
            continue
        block = re.split(r"\n    (?=\S)", part.split(f"    {package}/", 1)[1], maxsplit=1)[0]
        words = set(re.findall(r"\w+", block))
        modules = {p.stem for p in (NODE / package).glob("*.py") if p.stem != "__init__"}
        assert modules <= words, f"{package}/: {sorted(modules - words)} not in the doc's tree"
