"""`ktool`: administer a trafka (or Kafka) cluster and inspect log files.

Each command group lives in its own module under `trafka/tools/` and is registered here with
one line. Errors are printed as one line on stderr with a non-zero exit code, never a
traceback.
"""

from __future__ import annotations

import typer

from trafka.tools.audit_cmd import audit_app
from trafka.tools.dump_log import dump_log_app
from trafka.tools.groups_cmd import groups_app
from trafka.tools.quorum_cmd import quorum_app
from trafka.tools.reassign_cmd import register as register_reassign
from trafka.tools.topics_cmd import topics_app
from trafka.tools.transactions_cmd import transactions_app

app = typer.Typer(
    name="ktool",
    help="Administer a trafka cluster: topics, quorum, reassignment, groups, logs, audit.",
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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
