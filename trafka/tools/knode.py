"""`knode`: run one trafka node.

    knode start --id 1                                   # embedded defaults
    knode start --id 2 --config server.properties        # Kafka's server.properties format
    knode start --id 1 --set listeners=PLAINTEXT://127.0.0.1:19092 --set log.dirs=/tmp/d1

Embedded defaults: listener PLAINTEXT://localhost:9092, data in ./data/node-<id>, a
one-voter quorum (<id>@localhost:9093). `--set key=value` (repeatable) overrides the file.
SIGTERM/SIGINT shut the node down cleanly (logs flushed, checkpoints written). A bad key or
value, or a busy port, prints one line on stderr and exits with status 2 (no traceback).
"""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import Annotated

import trio
import typer

from trafka.node.broker import Broker, StartupError
from trafka.node.config import BrokerConfig, ConfigError, load_properties_file

app = typer.Typer(
    name="knode",
    help="Run a trafka node (a Kafka-compatible broker with an embedded metadata quorum).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Run a trafka node."""


def _fail(message: str) -> typer.Exit:
    print(f"knode: error: {message}", file=sys.stderr)
    return typer.Exit(code=2)


async def _run(broker: Broker) -> None:
    async with trio.open_nursery() as nursery:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            await nursery.start(broker.run)
            print(
                f"knode: node {broker.node_id} ready on "
                + ",".join(listener.uri() for listener in broker.config.listeners),
                file=sys.stderr,
                flush=True,
            )
            async for signum in signals:
                logging.getLogger("trafka.knode").info(
                    "received %s, shutting down", signal.Signals(signum).name
                )
                nursery.cancel_scope.cancel()
                break


@app.command()
def start(
    node_id: Annotated[int | None, typer.Option("--id", help="node.id of this node")] = None,
    config_file: Annotated[
        Path | None, typer.Option("--config", help="server.properties file")
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", help="key=value overriding the config file (repeatable)"),
    ] = None,
    log_level: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING")] = "INFO",
) -> None:
    """Start a node and serve until SIGTERM/SIGINT."""
    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        properties = load_properties_file(config_file) if config_file else {}
        config = BrokerConfig.build(node_id, properties, overrides or [])
        broker = Broker(config)
        trio.run(_run, broker)
    except (ConfigError, StartupError) as error:
        raise _fail(str(error)) from None
    except BaseExceptionGroup as group:
        found = group.subgroup((ConfigError, StartupError))
        if found is not None:
            first: BaseException = found
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            raise _fail(str(first)) from None
        raise


def main() -> None:
    app()


if __name__ == "__main__":
    main()
