"""ktool's shared JSON output and progress lines (trafka.tools.output) and the documents each
command builds from them: pure, no cluster."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace as NS
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from tests.metadata_quorum.test_quorum_cmd import STATUS
from trafka.metadata_quorum.tree import Stat
from trafka.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    PatternType,
    ResourcePattern,
)
from trafka.security.authorizer import AclOperation, ResourceType
from trafka.spark.commands import progress_conf
from trafka.tools import audit_cmd
from trafka.tools.acls_cmd import listing_document
from trafka.tools.configs_cmd import (
    DEFAULT_ENTITY,
    ConfigEntry,
    DescribedEntity,
    config_line,
    described_document,
    described_lines,
    quotas_document,
    scram_document,
)
from trafka.tools.ktool import app
from trafka.tools.metrics_cmd import headline_document, parse
from trafka.tools.output import (
    Progress,
    emit_json,
    human_bytes,
    json_text,
    reassignment_progress,
    snake_case,
    table_document,
)
from trafka.tools.quorum_cmd import (
    data_document,
    replication_document,
    stat_document,
    status_document,
    tree_document,
)
from trafka.tools.reassign_cmd import copy_progress, partition_status, verify_document

# ---- the one serialisation ---------------------------------------------------------------


def test_json_text_sorts_keys_indents_and_stays_ascii() -> None:
    text = json_text({"b": 1, "a": {"é": None, "c": [1, 2]}})
    assert text == (
        '{\n  "a": {\n    "c": [\n      1,\n      2\n    ],\n    "\\u00e9": null\n  },\n  "b": 1\n}'
    )
    assert text.isascii()


def test_emit_json_prints_one_document_and_a_newline() -> None:
    stream = io.StringIO()
    emit_json([{"z": 1, "y": 2}], stream)
    assert stream.getvalue().endswith("}\n]\n")
    assert json.loads(stream.getvalue()) == [{"y": 2, "z": 1}]
    assert stream.getvalue().index('"y"') < stream.getvalue().index('"z"')


@pytest.mark.parametrize(
    ("header", "key"),
    [
        ("ProducerId", "producer_id"),
        ("CurrentTransactionStartOffset", "current_transaction_start_offset"),
        ("LOG-END-OFFSET", "log_end_offset"),
        ("Duration(min)", "duration_min"),
        ("NodeId", "node_id"),
        ("TopicPartitions", "topic_partitions"),
        ("LastCaughtUpTimestamp", "last_caught_up_timestamp"),
    ],
)
def test_snake_case_column_keys(header: str, key: str) -> None:
    assert snake_case(header) == key


def test_table_document_types_cells_and_nulls_absent_markers() -> None:
    rows = [["t1", 3, "None"], ["t2", -1, "-"]]
    assert table_document(["TransactionalId", "ProducerId", "StartOffset"], rows) == [
        {"transactional_id": "t1", "producer_id": 3, "start_offset": None},
        {"transactional_id": "t2", "producer_id": -1, "start_offset": None},
    ]
    with pytest.raises(AssertionError):
        table_document(["A-B", "A_B"], [])


# ---- progress --------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_redraws_one_line_on_a_terminal() -> None:
    stream = _Terminal()
    progress = Progress(stream=stream)
    assert progress.enabled
    progress.update("Reassignment: 0/10 partition(s) done")
    progress.update("Reassignment: 9/10 partition(s) done")
    progress.finish("done")
    assert stream.getvalue() == (
        "\rReassignment: 0/10 partition(s) done"
        "\rReassignment: 9/10 partition(s) done"
        "\rdone" + " " * (len("Reassignment: 9/10 partition(s) done") - 4) + "\n"
    )


def test_progress_is_silent_off_a_terminal_and_with_quiet() -> None:
    cases: list[tuple[io.StringIO, bool]] = [(io.StringIO(), False), (_Terminal(), True)]
    for stream, quiet in cases:
        shown = Progress(stream=stream, quiet=quiet)
        assert not shown.enabled
        shown.update("Reassignment: 1/2 partition(s) done")
        shown.finish("x")
        assert stream.getvalue() == ""


def test_progress_texts() -> None:
    assert human_bytes(999) == "999 B"
    assert human_bytes(1_500_000) == "1.5 MB"
    assert reassignment_progress(2, 6) == "Reassignment: 2/6 partition(s) done"
    assert reassignment_progress(2, 6, 1_500_000, 4_000_000) == (
        "Reassignment: 2/6 partition(s) done, 1.5 MB of 4.0 MB copied to new replicas"
    )
    assert reassignment_progress(0, 1, 0, 0) == "Reassignment: 0/1 partition(s) done"


def test_copy_progress_counts_new_replicas_against_their_leader() -> None:
    a, b = ("t", 0), ("t", 1)
    adding = {a: [4, 5], b: [6]}
    leaders = {a: 1, b: 2}
    sizes = {1: {a: 1000}, 2: {b: 500}, 4: {a: 1000}, 5: {a: 250}, 6: {b: 9999}}
    assert copy_progress(adding, leaders, sizes, set()) == (1000 + 250 + 500, 2500)
    assert copy_progress(adding, leaders, sizes, {a}) == (2000 + 500, 2500)
    assert copy_progress(adding, leaders, {4: {a: 1}}, set()) is None  # no leader size


def test_verify_document_and_statuses() -> None:
    plan = {("t", 0): [2, 3], ("t", 1): [3, 1], ("u", 0): [1]}
    ongoing = {("t", 1): object()}
    current = {("t", 0): [2, 3], ("t", 1): [1, 2], ("u", 0): [2]}
    assert partition_status(("t", 0), [2, 3], ongoing, current) == "completed"
    document = verify_document(plan, ongoing, current, throttles_removed=False)
    assert document == {
        "complete": False,
        "throttles_removed": False,
        "partitions": [
            {
                "topic": "t",
                "partition": 0,
                "status": "completed",
                "target_replicas": [2, 3],
                "replicas": [2, 3],
            },
            {
                "topic": "t",
                "partition": 1,
                "status": "in_progress",
                "target_replicas": [3, 1],
                "replicas": [1, 2],
            },
            {
                "topic": "u",
                "partition": 0,
                "status": "mismatch",
                "target_replicas": [1],
                "replicas": [2],
            },
        ],
    }


# ---- per-command documents -------------------------------------------------------------------


def test_quorum_documents() -> None:
    assert status_document(STATUS) == {
        "cluster_id": "abc",
        "leader_id": 2,
        "leader_epoch": 7,
        "high_watermark": 120,
        "max_follower_lag": 3,
        "max_follower_lag_time_ms": 600,
        "current_voters": [1, 2, 3],
        "current_observers": [4],
    }
    rows = replication_document(STATUS)
    assert [r["node_id"] for r in rows] == [2, 1, 3, 4]
    assert rows[1] == {
        "node_id": 1,
        "log_end_offset": 118,
        "lag": 3,
        "last_fetch_timestamp": 1000,
        "last_caught_up_timestamp": 900,
        "status": "Follower",
    }
    stat = Stat(1, 2, 3, 10, 20, 4, 5, 0, 7, 0)
    assert stat_document("/a", stat)["data_version"] == 4
    assert data_document("/a", b"\xff") == {"path": "/a", "data": None, "data_base64": "/w=="}
    assert data_document("/a", b"{}")["data"] == "{}"
    assert tree_document([("/", b""), ("/a", b"x")], with_data=False) == ["/", "/a"]


def test_acl_listing_document() -> None:
    binding = AclBinding(
        ResourcePattern(ResourceType.TOPIC, "orders", PatternType.PREFIXED),
        AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
    )
    other = AclBinding(
        ResourcePattern(ResourceType.GROUP, "g", PatternType.LITERAL),
        AccessControlEntry("User:bob", "*", AclOperation.READ, AclPermissionType.DENY),
    )
    assert listing_document([binding, other], ["User:alice"]) == [
        {
            "resource_type": "TOPIC",
            "resource_name": "orders",
            "pattern_type": "PREFIXED",
            "principal": "User:alice",
            "host": "*",
            "operation": "READ",
            "permission_type": "ALLOW",
        }
    ]
    assert len(listing_document([binding, other])) == 2


def test_config_documents_and_lines_agree() -> None:
    entry = ConfigEntry(
        "retention.ms",
        "1000",
        False,
        "DYNAMIC_TOPIC_CONFIG",
        (("DYNAMIC_TOPIC_CONFIG", "retention.ms", "1000"), ("DEFAULT_CONFIG", "log.x", None)),
    )
    secret = ConfigEntry("ssl.key.password", None, True, "DYNAMIC_BROKER_CONFIG", ())
    assert config_line(entry) == (
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, "
        "DEFAULT_CONFIG:log.x=None}"
    )
    assert config_line(secret) == "  ssl.key.password=null sensitive=true synonyms={}"
    described = [
        DescribedEntity("topics", "orders", False, (entry,)),
        DescribedEntity("brokers", DEFAULT_ENTITY, False, (secret,)),
    ]
    assert described_lines(described) == [
        "Dynamic configs for topic orders are:",
        config_line(entry),
        "Default configs for brokers in the cluster are:",
        config_line(secret),
    ]
    document = described_document(described)
    assert document[1]["entity_name"] is None
    assert document[1]["configs"][0] == {
        "name": "ssl.key.password",
        "value": None,
        "sensitive": True,
        "source": "DYNAMIC_BROKER_CONFIG",
        "synonyms": [],
    }
    assert document[0]["configs"][0]["synonyms"][1] == {
        "source": "DEFAULT_CONFIG",
        "name": "log.x",
        "value": None,
    }
    assert quotas_document([([("user", "alice"), ("client-id", None)], [("a", 1.5)])]) == [
        {"entity": {"user": "alice", "client-id": None}, "quotas": {"a": 1.5}}
    ]
    assert scram_document([("alice", [(2, 8192), (1, 4096)])]) == [
        {
            "user": "alice",
            "credentials": [
                {"mechanism": "SCRAM-SHA-256", "iterations": 4096},
                {"mechanism": "SCRAM-SHA-512", "iterations": 8192},
            ],
        }
    ]


def test_metrics_headline_document() -> None:
    text = (
        "# TYPE kafka_server_replicamanager_partitioncount gauge\n"
        "kafka_server_replicamanager_partitioncount 4.0\n"
        "# TYPE kafka_network_requestmetrics_totaltimems histogram\n"
        'kafka_network_requestmetrics_totaltimems_count{request="Produce"} 4.0\n'
        'kafka_network_requestmetrics_totaltimems_sum{request="Produce"} 10.0\n'
    )
    document = headline_document("http://x/metrics", parse(text))
    assert document["headlines"]["PartitionCount"] == 4.0
    assert document["headlines"]["LeaderCount"] is None
    assert document["requests"] == {"Produce": {"count": 4, "mean_total_time_ms": 2.5}}


# ---- every describe/list command takes --json ------------------------------------------------

JSON_COMMANDS = {
    "topics list",
    "topics describe",
    "groups list",
    "groups describe",
    "transactions list",
    "transactions describe",
    "transactions describe-producers",
    "transactions find-hanging",
    "quorum status",
    "quorum replication",
    "quorum ls",
    "quorum get",
    "quorum stat",
    "quorum tree",
    "reassign verify",
    "reassign list",
    "acls",
    "configs",
    "metrics",
    "get-offsets",
    "delete-records",
    "log-dirs",
    "broker-api-versions",
}
"""The describe/list commands (and the mutating ones whose result is data). Not here:
`produce`/`consume` (records), `dump-log` (Kafka's DumpLogSegments text), `quorum export`
(its output is JSON already), `reassign generate` (prints Kafka's plan JSON), `audit`
(writes files; prints a JSON summary already)."""


def _commands(group: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf command of the ktool app by its full name (typer's click objects)."""
    found: dict[str, Any] = {}
    if hasattr(group, "commands"):
        for name, command in group.commands.items():
            found.update(_commands(command, f"{prefix} {name}".strip()))
    else:
        found[prefix] = group
    return found


def test_every_describe_and_list_command_takes_json() -> None:
    commands = _commands(typer.main.get_command(app))
    assert set(commands) >= JSON_COMMANDS
    missing = [
        name
        for name in sorted(JSON_COMMANDS)
        if not any("--json" in getattr(p, "opts", ()) for p in commands[name].params)
    ]
    assert missing == []


def test_reassign_wait_and_quiet_options() -> None:
    commands = _commands(typer.main.get_command(app))
    for name in ("reassign execute", "reassign verify", "audit export"):
        options = {o for p in commands[name].params for o in getattr(p, "opts", ())}
        assert "--quiet" in options, name
    for name in ("reassign execute", "reassign verify"):
        options = {o for p in commands[name].params for o in getattr(p, "opts", ())}
        assert "--wait" in options, name


# ---- audit export: Spark's progress bar follows the same rule -------------------------------


def test_audit_export_progress_follows_the_terminal_and_quiet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bool] = []

    def fake_export(*args: Any, show_progress: bool, **kwargs: Any) -> int:
        seen.append(show_progress)
        return 0

    monkeypatch.setattr(audit_cmd, "export_command", fake_export)
    runner = CliRunner()
    assert runner.invoke(app, ["audit", "export", "--log-dirs", "x", "--out", "y"]).exit_code == 0
    monkeypatch.setattr(audit_cmd, "Progress", lambda quiet: NS(enabled=not quiet))
    for args in ([], ["--quiet"]):
        result = runner.invoke(app, ["audit", "export", "--log-dirs", "x", "--out", "y", *args])
        assert result.exit_code == 0
    assert seen == [False, True, False]  # not a terminal; a terminal; a terminal but --quiet
    assert progress_conf(True) == {"spark.ui.showConsoleProgress": "true"}
    assert progress_conf(False) == {"spark.ui.showConsoleProgress": "false"}
