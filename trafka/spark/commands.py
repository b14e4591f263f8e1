"""The audit commands as functions returning exit codes: used by `ktool audit` and by the
`python -m trafka.spark.export|check` (spark-submit) entry points.

Nothing here imports pyspark at module level, so a missing pyspark or Java becomes a
one-line message and exit code 2 rather than a traceback. Exit codes: 0 ok, 1 violations
found (`check`), 2 could not run (environment, bad arguments, unreadable input).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

from trafka.spark.session import DEFAULT_MASTER, AuditEnvironmentError, check_environment

EXIT_OK = 0
EXIT_VIOLATIONS = 1
EXIT_CANNOT_RUN = 2


def split_log_dirs(values: Sequence[str]) -> list[str]:
    """`--log-dirs a,b --log-dirs c` -> [a, b, c] (absolute paths)."""
    paths = [p.strip() for value in values for p in value.split(",") if p.strip()]
    return [os.path.abspath(p) for p in paths]


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_CANNOT_RUN


def export_command(
    log_dirs: Sequence[str],
    out: str,
    *,
    fmt: str = "parquet",
    metadata: str | None = None,
    master: str | None = DEFAULT_MASTER,
) -> int:
    paths = split_log_dirs(log_dirs)
    if not paths:
        return _fail("--log-dirs is required")
    problem = check_environment()
    if problem is not None:
        return _fail(problem)
    from trafka.spark.jobs import run_export
    from trafka.spark.session import build_session

    try:
        spark = build_session(master, "trafka-audit-export")
        counts = run_export(spark, paths, os.path.abspath(out), fmt=fmt, metadata_path=metadata)
    except (AuditEnvironmentError, OSError, ValueError) as error:
        return _fail(str(error).splitlines()[0] if str(error) else type(error).__name__)
    print(json.dumps(counts, sort_keys=True))
    return EXIT_OK


def check_command(
    log_dirs: Sequence[str],
    *,
    metadata: str | None = None,
    report: str | None = None,
    master: str | None = DEFAULT_MASTER,
) -> int:
    paths = split_log_dirs(log_dirs)
    if not paths:
        return _fail("--log-dirs is required")
    problem = check_environment()
    if problem is not None:
        return _fail(problem)
    from trafka.spark.jobs import run_check
    from trafka.spark.session import build_session

    try:
        spark = build_session(master, "trafka-audit-check")
        result = run_check(spark, paths, metadata_path=metadata)
    except (AuditEnvironmentError, OSError, ValueError) as error:
        return _fail(str(error).splitlines()[0] if str(error) else type(error).__name__)
    if report is not None:
        with open(report, "w", encoding="utf-8") as handle:
            json.dump(result.to_json_object(), handle, indent=2, sort_keys=True)
            handle.write("\n")
    print(result.summary())
    return EXIT_VIOLATIONS if result.errors else EXIT_OK
