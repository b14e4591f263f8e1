"""`ktool audit export|check`: the Spark audit jobs over log dirs (docs/audit.md).

    ktool audit export --log-dirs /data/b1,/data/b2 --out audit/ [--format parquet|json]
                       [--metadata snapshot.json] [--master local[*]]
    ktool audit check  --log-dirs /data/b1,/data/b2 [--metadata snapshot.json]
                       [--report report.json] [--master local[*]]

The broker of each log dir comes from its meta.properties. `check` exits 1 when it finds
a violation, 2 when it cannot run (Java or pyspark missing: a one-line message).

Not implemented: `--bootstrap-server` (reading metadata live from a node); export a
snapshot with `ktool quorum export` and pass it with `--metadata`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from trafka.spark.commands import check_command, export_command
from trafka.spark.session import DEFAULT_MASTER

audit_app = typer.Typer(
    help="Export and audit topic logs and cluster metadata with Spark.", no_args_is_help=True
)

LogDirsOption = Annotated[
    list[str], typer.Option("--log-dirs", help="Log dirs, comma-separated (repeatable).")
]
MetadataOption = Annotated[
    str | None, typer.Option("--metadata", help="Quorum snapshot JSON (ktool quorum export).")
]
MasterOption = Annotated[str, typer.Option("--master", help="Spark master URL.")]


@audit_app.command("export")
def export(
    log_dirs: LogDirsOption,
    out: Annotated[str, typer.Option("--out", help="Output directory.")],
    fmt: Annotated[str, typer.Option("--format", help="parquet or json.")] = "parquet",
    metadata: MetadataOption = None,
    master: MasterOption = DEFAULT_MASTER,
) -> None:
    """Write every record of every replica (by topic), consumer offsets and metadata."""
    if fmt not in ("parquet", "json"):
        typer.echo("error: --format must be parquet or json", err=True)
        raise typer.Exit(2)
    raise typer.Exit(export_command(log_dirs, out, fmt=fmt, metadata=metadata, master=master))


@audit_app.command("check")
def check(
    log_dirs: LogDirsOption,
    metadata: MetadataOption = None,
    report: Annotated[
        str | None, typer.Option("--report", help="Write the JSON report here.")
    ] = None,
    master: MasterOption = DEFAULT_MASTER,
) -> None:
    """Compare replicas below the HW, offsets, indexes, ISR and committed offsets."""
    raise typer.Exit(check_command(log_dirs, metadata=metadata, report=report, master=master))
