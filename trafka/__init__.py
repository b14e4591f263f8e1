"""trafka: a Kafka-compatible, KRaft-style cluster written in Python.

Layers (imports point down only; enforced by import-linter, see pyproject.toml):

    tools/                      knode and ktool command lines (typer only here)
    spark/                      PySpark audit jobs (pyspark only here)
    node/                       composition root: broker, controller, replica manager, handlers
    group/  metadata_quorum/    coordinator logic; replicated znode tree + pysyncobj transport
    net/    log/                trio server/client + protocol codecs; storage engine
"""

__version__ = "0.1.0"
