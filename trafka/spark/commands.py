"""The audit commands as functions returning exit codes: used by `ktool audit` and by the
`python -m trafka.spark.export|check` (spark-submit) entry points.

Nothing here imports pyspark at module level, so a missing pyspark or Java becomes a
one-line message and exit code 2 rather than a traceback. Exit codes: 0 ok, 1 violations
found (`check`), 2 could not run (environment, bad arguments, unreadable input).

The metadata side is `metadata` (a snapshot file, `ktool quorum export`) or
`bootstrap_server` (`HOST:PORT[,...]`: the same document read live from a running node
through its Kafka listener, `trafka.client.metadata`), never both. Either is read and
parsed BEFORE Spark starts, so a missing file, bad JSON or an unreachable server costs no
JVM start and ends in one line on stderr and exit code 2.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from trafka.client.metadata import DEFAULT_TIMEOUT_S, MetadataReadError, read_export_document
from trafka.spark.metadata import SnapshotFormatError, read_snapshot_document
from trafka.spark.session import DEFAULT_MASTER, AuditEnvironmentError, check_environment

EXIT_OK = 0
EXIT_VIOLATIONS = 1
EXIT_CANNOT_RUN = 2


_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def output_path(out: str) -> str:
    """`--out` for Spark's writers: a URI (hdfs://, s3a://, file://) as given, so the
    export can go to shared storage on a real cluster; a plain path made absolute."""
    return out if _URI_SCHEME.match(out) else os.path.abspath(out)


def split_log_dirs(values: Sequence[str]) -> list[str]:
    """`--log-dirs a,b --log-dirs c` -> [a, b, c] (absolute paths)."""
    paths = [p.strip() for value in values for p in value.split(",") if p.strip()]
    return [os.path.abspath(p) for p in paths]


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_CANNOT_RUN


def _first_line(error: BaseException) -> str:
    text = str(error)
    return text.splitlines()[0] if text else type(error).__name__


class MetadataArgumentError(ValueError):
    """The metadata side of the command cannot be read (one-line message)."""


def read_metadata_document(
    metadata: str | None,
    bootstrap_server: str | None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Any:
    """The snapshot document from `--metadata` or `--bootstrap-server` (None: neither).

    Raises MetadataArgumentError: both given, file missing or not JSON, no server answered.
    """
    if metadata is not None and bootstrap_server is not None:
        raise MetadataArgumentError("give --metadata or --bootstrap-server, not both")
    if metadata is not None:
        try:
            return read_snapshot_document(metadata)
        except (OSError, SnapshotFormatError) as error:
            raise MetadataArgumentError(f"--metadata: {_first_line(error)}") from None
    if bootstrap_server is not None:
        try:
            return read_export_document(bootstrap_server, timeout_s=timeout_s)
        except MetadataReadError as error:
            raise MetadataArgumentError(
                f"cannot read metadata from {bootstrap_server}: {_first_line(error)}"
            ) from None
    return None


def progress_conf(show_progress: bool) -> dict[str, str]:
    """The Spark setting of the console progress bar (stage tasks done / total)."""
    return {"spark.ui.showConsoleProgress": "true" if show_progress else "false"}


def export_command(
    log_dirs: Sequence[str],
    out: str,
    *,
    fmt: str = "parquet",
    metadata: str | None = None,
    master: str | None = DEFAULT_MASTER,
    bootstrap_server: str | None = None,
    metadata_timeout_s: float = DEFAULT_TIMEOUT_S,
    show_progress: bool = True,
) -> int:
    """`show_progress`: Spark's console progress bar (per stage: tasks, i.e. partition
    slices, done / total) on stderr; ktool turns it off when stderr is not a terminal or
    with --quiet."""
    paths = split_log_dirs(log_dirs)
    if not paths:
        return _fail("--log-dirs is required")
    try:
        document = read_metadata_document(metadata, bootstrap_server, timeout_s=metadata_timeout_s)
    except MetadataArgumentError as error:
        return _fail(str(error))
    problem = check_environment()
    if problem is not None:
        return _fail(problem)
    from trafka.spark.jobs import run_export
    from trafka.spark.session import build_session

    try:
        spark = build_session(
            master, "trafka-audit-export", extra_conf=progress_conf(show_progress)
        )
        counts = run_export(spark, paths, output_path(out), fmt=fmt, metadata_document=document)
    except (AuditEnvironmentError, OSError, ValueError) as error:
        return _fail(_first_line(error))
    print(json.dumps(counts, sort_keys=True))
    return EXIT_OK


def check_command(
    log_dirs: Sequence[str],
    *,
    metadata: str | None = None,
    report: str | None = None,
    master: str | None = DEFAULT_MASTER,
    bootstrap_server: str | None = None,
    metadata_timeout_s: float = DEFAULT_TIMEOUT_S,
) -> int:
    paths = split_log_dirs(log_dirs)
    if not paths:
        return _fail("--log-dirs is required")
    try:
        document = read_metadata_document(metadata, bootstrap_server, timeout_s=metadata_timeout_s)
    except MetadataArgumentError as error:
        return _fail(str(error))
    problem = check_environment()
    if problem is not None:
        return _fail(problem)
    from trafka.spark.jobs import run_check
    from trafka.spark.session import build_session

    try:
        spark = build_session(master, "trafka-audit-check")
        result = run_check(spark, paths, metadata_document=document)
    except (AuditEnvironmentError, OSError, ValueError) as error:
        return _fail(_first_line(error))
    if report is not None:
        with open(report, "w", encoding="utf-8") as handle:
            json.dump(result.to_json_object(), handle, indent=2, sort_keys=True)
            handle.write("\n")
    print(result.summary())
    return EXIT_VIOLATIONS if result.errors else EXIT_OK
