"""`python -m trafka.spark.export` / `spark-submit trafka/spark/export.py`: export log dirs.

    python -m trafka.spark.export --log-dirs /data/b1,/data/b2 --out audit/ \\
        [--format parquet|json] [--metadata snapshot.json | --bootstrap-server host:port[,...]]
        [--master local[*]]

See `trafka.spark.jobs.run_export` for the output layout.
"""

from __future__ import annotations

import argparse
import sys

from trafka.client.metadata import DEFAULT_TIMEOUT_S
from trafka.spark.commands import export_command
from trafka.spark.session import DEFAULT_MASTER


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="trafka.spark.export",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--log-dirs", action="append", required=True, help="comma-separated")
    parser.add_argument("--out", required=True)
    parser.add_argument("--format", choices=("parquet", "json"), default="parquet")
    parser.add_argument("--metadata", help="quorum snapshot JSON (ktool quorum export)")
    parser.add_argument(
        "--bootstrap-server",
        help="host:port[,...] of a running node: read the metadata live (not with --metadata)",
    )
    parser.add_argument(
        "--metadata-timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help="seconds per server for the live metadata read",
    )
    parser.add_argument(
        "--master",
        default=None,
        help=f"Spark master (default: spark-submit's, else {DEFAULT_MASTER})",
    )
    args = parser.parse_args(argv)
    return export_command(
        args.log_dirs,
        args.out,
        fmt=args.format,
        metadata=args.metadata,
        master=args.master,
        bootstrap_server=args.bootstrap_server,
        metadata_timeout_s=args.metadata_timeout,
    )


if __name__ == "__main__":
    sys.exit(main())
