"""`ktool audit export|check`: the Spark audit jobs over log dirs (docs/audit.md).

    ktool audit export --log-dirs /data/b1,/data/b2 --out audit/ [--format parquet|json]
                       [--metadata snapshot.json | --bootstrap-server host:port[,...]]
                       [--master local[*]]
    ktool audit check  --log-dirs /data/b1,/data/b2
                       [--metadata snapshot.json | --bootstrap-server host:port[,...]]
                       [--report report.json] [--master local[*]]

The broker of each log dir comes from its meta.properties. The metadata side is a snapshot
file (`ktool quorum export`) or, with `--bootstrap-server`, the same document read live from
a running node over its Kafka listener (TrafkaDescribeZNodes + DescribeQuorum; each server of
the list in turn until one answers, `--metadata-timeout` seconds each). Giving both is an
error. `check` exits 1 when it finds a violation, 2 when it cannot run (Java or pyspark
missing, both metadata flags, an unreadable snapshot, no server answering: a one-line
message on stderr).

Progress: `export` shows Spark's console progress bar (per stage, tasks done / total; a
task is a slice of a partition's log) on stderr only when stderr is a terminal and `--quiet`
is not given (`trafka.tools.output.Progress`); the `[audit]` step lines are always printed.

The work is done by `trafka.spark.commands` (shared with `python -m trafka.spark.export|check`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from trafka.client.metadata import DEFAULT_TIMEOUT_S
from trafka.spark.commands import check_command, export_command
from trafka.spark.session import DEFAULT_MASTER
from trafka.tools.output import Progress, QuietFlag

audit_app = typer.Typer(
    help="Export and audit topic logs and cluster metadata with Spark.", no_args_is_help=True
)

LogDirsOption = Annotated[
    list[str], typer.Option("--log-dirs", help="Log dirs, comma-separated (repeatable).")
]
MetadataOption = Annotated[
    str | None, typer.Option("--metadata", help="Quorum snapshot JSON (ktool quorum export).")
]
BootstrapOption = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-server",
        help="host:port[,...] of a running node: read the metadata live (not with --metadata).",
    ),
]
MetadataTimeoutOption = Annotated[
    float,
    typer.Option("--metadata-timeout", help="Seconds per server for the live metadata read."),
]
MasterOption = Annotated[str, typer.Option("--master", help="Spark master URL.")]


@audit_app.command("export")
def export(
    log_dirs: LogDirsOption,
    out: Annotated[str, typer.Option("--out", help="Output directory.")],
    fmt: Annotated[str, typer.Option("--format", help="parquet or json.")] = "parquet",
    metadata: MetadataOption = None,
    bootstrap_server: BootstrapOption = None,
    metadata_timeout: MetadataTimeoutOption = DEFAULT_TIMEOUT_S,
    master: MasterOption = DEFAULT_MASTER,
    quiet: QuietFlag = False,
) -> None:
    """Write every record of every replica (by topic), consumer offsets and metadata.
    Progress (Spark's stage bar: tasks done / total) on stderr when it is a terminal."""
    if fmt not in ("parquet", "json"):
        typer.echo("error: --format must be parquet or json", err=True)
        raise typer.Exit(2)
    raise typer.Exit(
        export_command(
            log_dirs,
            out,
            fmt=fmt,
            metadata=metadata,
            master=master,
            bootstrap_server=bootstrap_server,
            metadata_timeout_s=metadata_timeout,
            show_progress=Progress(quiet=quiet).enabled,
        )
    )


@audit_app.command("check")
def check(
    log_dirs: LogDirsOption,
    metadata: MetadataOption = None,
    bootstrap_server: BootstrapOption = None,
    metadata_timeout: MetadataTimeoutOption = DEFAULT_TIMEOUT_S,
    report: Annotated[
        str | None, typer.Option("--report", help="Write the JSON report here.")
    ] = None,
    master: MasterOption = DEFAULT_MASTER,
) -> None:
    """Compare replicas below the HW, offsets, indexes, ISR and committed offsets."""
    raise typer.Exit(
        check_command(
            log_dirs,
            metadata=metadata,
            report=report,
            master=master,
            bootstrap_server=bootstrap_server,
            metadata_timeout_s=metadata_timeout,
        )
    )
