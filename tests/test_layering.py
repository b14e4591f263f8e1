"""Layering rules import-linter cannot express: pysyncobj is imported by the quorum transport
and its connection wrapper only, and no module of trafka takes part in an import cycle.

The cycle check complements the `acyclic_siblings` contract in pyproject.toml (which sees
cycles between the modules of a package and between sibling packages, but not one through a
package's own `__init__`): it builds the module graph with grimp, as import-linter does
(imports inside functions and under TYPE_CHECKING included). Neither check excludes
anything: the contract has no `ignore_imports` (the one known cycle, node.broker with
node.group_service and node.handlers, was allow-listed until the broker split removed it).
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "trafka"


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_pysyncobj_is_imported_only_by_the_quorum_transport() -> None:
    importers = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "pysyncobj" in _imported_roots(path)
    )
    assert importers == ["metadata_quorum/guarded_port.py", "metadata_quorum/transport.py"]


# ------------------------------------------------------------------ import cycles


def import_cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    return sorted(cycles)


def test_the_acyclic_contract_covers_all_of_trafka_and_ignores_nothing() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (acyclic,) = [c for c in contracts if c["type"] == "acyclic_siblings"]
    assert acyclic["ancestors"] == ["trafka"]
    assert "skip_descendants" not in acyclic and "ignore_imports" not in acyclic


def _trafka_edges() -> dict[str, set[str]]:
    graph = grimp.build_graph("trafka", cache_dir=None)
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        if not module.startswith("trafka"):
            continue
        edges[module] = {
            imported
            for imported in graph.find_modules_directly_imported_by(module)
            if imported.startswith("trafka")
        }
    return edges


def test_no_module_takes_part_in_an_import_cycle() -> None:
    cycles = import_cycles(_trafka_edges())
    assert cycles == [], f"import cycles in trafka (break them; see docs/architecture.md): {cycles}"


def test_cycle_finder_sees_cycles_through_packages_and_long_rings() -> None:
    edges = {
        "p": {"p.a"},
        "p.a": {"p"},  # a package and its own module
        "r.1": {"r.2"},
        "r.2": {"r.3"},
        "r.3": {"r.1", "leaf"},
        "leaf": set(),
        "chain.a": {"chain.b"},
        "chain.b": {"leaf"},
        "self": {"self"},  # a module importing itself is no cycle between modules
    }
    assert import_cycles(edges) == [["p", "p.a"], ["r.1", "r.2", "r.3"]]
