"""`ktool audit export|check` and `python -m trafka.spark.export|check`: the metadata flags.

`--metadata FILE` and `--bootstrap-server HOST:PORT[,...]` are alternatives; every failure
on the metadata side (both flags, a missing or non-JSON file, a malformed address, a server
that refuses or never answers) is one line on stderr and exit code 2, decided before Spark
starts (these tests would take seconds more, and print a JVM banner, if it started).
No Spark, no knode: plain sockets on loopback stand in for unreachable servers.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.ports import free_port
from trafka.node.metadata_client import MetadataReadError, parse_bootstrap
from trafka.spark import check as check_entry
from trafka.spark import export as export_entry
from trafka.spark.commands import EXIT_CANNOT_RUN, output_path
from trafka.tools.ktool import app


@pytest.fixture
def log_dir(tmp_path: Path) -> str:
    path = tmp_path / "b1"
    path.mkdir()
    (path / "meta.properties").write_text("version=1\nnode.id=1\n")
    return str(path)


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A listening socket that never accepts: connects succeed, nothing ever answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield f"127.0.0.1:{server.getsockname()[1]}"


def _audit(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["audit", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result.exit_code, result.stderr


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err


@pytest.mark.parametrize("command", ["export", "check"])
def test_metadata_and_bootstrap_server_together_is_one_line(
    command: str, log_dir: str, tmp_path: Path
) -> None:
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text('{"nodes": []}')
    out = ["--out", str(tmp_path / "out")] if command == "export" else []
    code, err = _audit(
        command,
        "--log-dirs",
        log_dir,
        *out,
        "--metadata",
        str(snapshot),
        "--bootstrap-server",
        "127.0.0.1:9092",
    )
    assert code == EXIT_CANNOT_RUN
    assert _one_line(err) == "error: give --metadata or --bootstrap-server, not both\n"


@pytest.mark.parametrize("command", ["export", "check"])
def test_unreachable_bootstrap_server_is_one_line_exit_2(
    command: str, log_dir: str, tmp_path: Path
) -> None:
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there: connection refused
    out = ["--out", str(tmp_path / "out")] if command == "export" else []
    code, err = _audit(command, "--log-dirs", log_dir, *out, "--bootstrap-server", dead)
    assert code == EXIT_CANNOT_RUN
    line = _one_line(err)
    assert line.startswith(f"error: cannot read metadata from {dead}: no server answered: ")
    assert "cannot connect" in line
    assert not (tmp_path / "out").exists()  # nothing was written: Spark never started


def test_every_bootstrap_server_is_tried_and_named(
    log_dir: str, silent_server: str, tmp_path: Path
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    bootstrap = f"{dead},{silent_server}"
    code, err = _audit(
        "check", "--log-dirs", log_dir, "--bootstrap-server", bootstrap, "--metadata-timeout", "0.5"
    )
    assert code == EXIT_CANNOT_RUN
    line = _one_line(err)
    assert f"{dead}: " in line and "cannot connect" in line
    assert f"{silent_server} did not answer within 0.5 s" in line


def test_malformed_bootstrap_server_and_bad_snapshots(log_dir: str, tmp_path: Path) -> None:
    code, err = _audit("check", "--log-dirs", log_dir, "--bootstrap-server", "no-port")
    assert code == EXIT_CANNOT_RUN
    assert "expected host:port" in _one_line(err)
    code, err = _audit("check", "--log-dirs", log_dir, "--metadata", str(tmp_path / "none"))
    assert code == EXIT_CANNOT_RUN
    assert _one_line(err).startswith("error: --metadata: ")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    code, err = _audit("check", "--log-dirs", log_dir, "--metadata", str(broken))
    assert code == EXIT_CANNOT_RUN
    assert "not JSON" in _one_line(err)


def test_spark_submit_entry_points_take_the_same_flags(
    log_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    assert check_entry.main(["--log-dirs", log_dir, "--bootstrap-server", dead]) == 2
    assert f"cannot read metadata from {dead}" in _one_line(capsys.readouterr().err)
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text("{}")
    both = ["--metadata", str(snapshot), "--bootstrap-server", dead]
    out = ["--out", str(tmp_path / "out")]
    assert export_entry.main(["--log-dirs", log_dir, *out, *both]) == 2
    assert "not both" in _one_line(capsys.readouterr().err)


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2,") == (("a", 1), ("b", 2))
    assert parse_bootstrap("[::1]:9092") == (("::1", 9092),)
    for bad in ("", ",", "host", ":9092", "host:port", "host:0", "host:70000"):
        with pytest.raises(MetadataReadError):
            parse_bootstrap(bad)


def test_output_uris_are_kept_and_paths_made_absolute() -> None:
    for uri in ("hdfs://namenode:8020/audit", "s3a://bucket/audit", "file:///tmp/audit"):
        assert output_path(uri) == uri
    assert output_path("audit") == str(Path.cwd() / "audit")
