"""`ktool`: administer a trafka (or Kafka) cluster and inspect log files.

Each command group lives in its own module under `trafka/tools/` and is registered here with
one line. `--command-config FILE` anywhere on the command line secures every connection
(Kafka's client properties, `trafka.client.command_config`). Errors are printed as one line
on stderr with a non-zero exit code, never a traceback.

Output conventions shared by every command (`trafka.tools.output`, docs/ktool.md): `--json`
on each describe/list command prints one JSON document (keys sorted, Kafka's shape where
Kafka's tool prints JSON, snake_case otherwise); long operations (`reassign execute|verify
--wait`, `audit export`) show progress on stderr only when it is a terminal and `--quiet` is
not given.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from trafka.client import command_config
from trafka.tools.acls_cmd import acls
from trafka.tools.apiversions_cmd import register as register_api_versions
from trafka.tools.audit_cmd import audit_app
from trafka.tools.configs_cmd import configs
from trafka.tools.console_cmd import consume, produce
from trafka.tools.dump_log import dump_log_app
from trafka.tools.groups_cmd import groups_app
from trafka.tools.logdirs_cmd import register as register_log_dirs
from trafka.tools.metrics_cmd import metrics
from trafka.tools.offsets_cmd import register as register_offsets
from trafka.tools.quorum_cmd import quorum_app
from trafka.tools.reassign_cmd import register as register_reassign
from trafka.tools.topics_cmd import topics_app
from trafka.tools.transactions_cmd import transactions_app

app = typer.Typer(
    name="ktool",
    help=(
        "Administer a trafka cluster: topics, quorum, reassignment, groups, logs, audit. "
        "--command-config FILE (Kafka's client properties), anywhere on the command line, "
        "secures every connection of any command; --json on describe/list commands prints "
        "one JSON document (docs/ktool.md)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Command registrations (one line per command module):
app.add_typer(topics_app, name="topics")
app.add_typer(dump_log_app, name="dump-log")
app.add_typer(audit_app, name="audit")
app.add_typer(groups_app, name="groups")
app.add_typer(transactions_app, name="transactions")
app.add_typer(quorum_app, name="quorum")
register_reassign(app)  # reassign, preferred-elect
app.command("acls")(acls)
app.command("configs")(configs)
app.command("metrics")(metrics)
register_offsets(app)  # get-offsets, delete-records
register_log_dirs(app)  # log-dirs
register_api_versions(app)  # broker-api-versions
app.command("consume")(consume)
app.command("produce")(produce)


def main() -> None:
    """`--command-config FILE` (Kafka's client properties: security.protocol, sasl.*, ssl.*)
    may stand anywhere on the command line, as in Kafka's tools; it secures every connection
    the command opens (`trafka.client.command_config`)."""
    try:
        argv, config_file = command_config.strip_option(sys.argv[1:])
        if config_file is not None:
            command_config.use(command_config.load(Path(config_file)))
    except command_config.CommandConfigError as error:
        typer.echo(f"Error: {error}", err=True)
        raise SystemExit(1) from None
    app(args=argv, prog_name="ktool")


if __name__ == "__main__":
    main()
