"""`python -m trafka.spark.check` / `spark-submit trafka/spark/check.py`: audit log dirs.

    python -m trafka.spark.check --log-dirs /data/b1,/data/b2,/data/b3 \\
        [--metadata snapshot.json | --bootstrap-server host:port[,...]]
        [--report report.json] [--master local[*]]

Prints a summary, writes the JSON report, exits 1 when a violation of severity "error"
was found (see `trafka.spark.checks`), 2 when the check could not run.
"""

from __future__ import annotations

import argparse
import sys

from trafka.client.metadata import DEFAULT_TIMEOUT_S
from trafka.spark.commands import check_command
from trafka.spark.session import DEFAULT_MASTER


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="trafka.spark.check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--log-dirs", action="append", required=True, help="comma-separated")
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
    parser.add_argument("--report", help="write the JSON report here")
    parser.add_argument(
        "--master",
        default=None,
        help=f"Spark master (default: spark-submit's, else {DEFAULT_MASTER})",
    )
    args = parser.parse_args(argv)
    return check_command(
        args.log_dirs,
        metadata=args.metadata,
        report=args.report,
        master=args.master,
        bootstrap_server=args.bootstrap_server,
        metadata_timeout_s=args.metadata_timeout,
    )


if __name__ == "__main__":
    sys.exit(main())
