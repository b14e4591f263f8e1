"""Every field name a handler writes literally is a field of its API, checked statically.

At run time `kio_shape.build` raises `UnknownField` for a key the struct has in no version
(tests/net/test_kio_shape.py), but only on the paths a test drives. This scan covers every
path of every handler module: the string keys of its dict literals (the data handed to
`build`) and the names it reads with `getattr(request_or_entity, "name", default)` (fields
some versions lack) must each be a field of some struct of the handler's API. A misspelt
name, in a branch no test reaches, fails here.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from trafka.net import codec
from trafka.net.kio_shape import api_field_names, response_class
from trafka.node.handlers.registry import load_all

HANDLERS = [(h.api_key, h.module) for h in load_all().handlers()]

NOT_MESSAGE_DATA: dict[str, frozenset[str]] = {}
"""Per handler module: literal keys that are not message fields (none so far)."""


def literal_names(source: str) -> set[str]:
    """Dict-literal string keys and `getattr(x, "literal", ...)` names of a module."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            names.update(
                key.value
                for key in node.keys
                if isinstance(key, ast.Constant) and isinstance(key.value, str)
            )
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            names.add(node.args[1].value)
    return names


@pytest.mark.parametrize(("api_key", "module"), HANDLERS, ids=[m for _, m in HANDLERS])
def test_literal_field_names_are_fields_of_the_api(api_key: int, module: str) -> None:
    source = Path(sys.modules[module].__file__ or "").read_text()
    unknown = literal_names(source) - api_field_names(api_key) - NOT_MESSAGE_DATA.get(module, set())
    assert not unknown, f"{module}: no struct of API {api_key} has {sorted(unknown)}"


def test_the_scan_finds_a_misspelt_name() -> None:
    source = 'build(cls, {"throttle_time": 0, "error_cod": 1})\ngetattr(r, "session_idd", 0)\n'
    assert literal_names(source) == {"throttle_time", "error_cod", "session_idd"}
    assert {"error_cod", "session_idd"} - api_field_names(1) == {"error_cod", "session_idd"}


@pytest.mark.parametrize(("api_key", "module"), HANDLERS, ids=[m for _, m in HANDLERS])
def test_every_served_version_arrives_as_its_own_request_class(api_key: int, module: str) -> None:
    """What the net server decodes (`codec.request_class`) is the request's own class of that
    API and version, and the class a handler builds its answer with (`response_class`) is the
    one the codec encodes for that version (trafka's declared versions share a layout:
    StopReplica v3 answers with v2's class)."""
    handler = load_all().get(api_key)
    assert handler is not None
    for version in range(handler.min_version, handler.max_version + 1):
        request_class = codec.request_class(api_key, version)
        assert request_class is not None, (module, version)
        assert (int(request_class.__api_key__), int(request_class.__version__)) == (
            api_key,
            version,
        ), (module, version)
        answer = response_class(request_class)
        assert int(answer.__api_key__) == api_key
        assert answer is codec.response_class(api_key, version), (module, version)
