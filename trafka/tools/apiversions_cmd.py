"""`ktool broker-api-versions`: kafka-broker-api-versions.sh line for line.

    ktool broker-api-versions --bootstrap-server HOST:PORT
    127.0.0.1:9092 (id: 1 rack: null isFenced: false) -> (
        Produce(0): 0 to 9 [usable: 9],
        ...
        AlterReplicaLogDirs(34): UNSUPPORTED,
        ...
    )

(each API line starts with a tab, as Kafka's). As BrokerApiVersionsCommand: every broker
Metadata lists is asked ApiVersions, and each API a Kafka 4 client knows on the broker
listener is printed with the broker's range and the version this tool would use ("usable":
the highest version both sides speak; "unusable: node too new/old" when the ranges do not
meet), or UNSUPPORTED; APIs the broker offers beyond that list follow (trafka's private
ones among them). The usable versions are ktool's own (what kio and trafka.net.messages
can encode), so they may differ from the Java tool's: ktool still speaks LeaderAndIsr,
StopReplica, UpdateMetadata and ControlledShutdown. `--json` prints one document instead
(trafka's addition).
"""

from __future__ import annotations

from typing import Any

import typer

from trafka.net import codec, protocol
from trafka.net.api_keys import ApiKey
from trafka.tools.offsets_cmd import Bootstrap, ClusterClient, run_on_cluster
from trafka.tools.output import JsonFlag, emit_json

CLIENT_APIS: tuple[int, ...] = (
    *range(0, 52),
    55,
    57,
    60,
    61,
    64,
    65,
    66,
    68,
    69,
    71,
    72,
    *range(74, 82),
    *range(83, 95),
)
"""The API keys Kafka 4.4's kafka-broker-api-versions prints (ApiKeys with the broker
listener), in its order."""

NAMES_KIO_LACKS = {93: "StreamsGroupTopologyDescriptionUpdate", 94: "UnregisterController"}


def api_label(api_key: int) -> str:
    name = NAMES_KIO_LACKS.get(api_key) or codec.api_name(api_key)
    return f"{name}({api_key})"


def describe_api(api_key: int, broker: protocol.ApiVersionRange | None) -> dict[str, Any]:
    """One API's entry: the broker's range and ktool's usable version (None: unsupported)."""
    if broker is None:
        return {"api_key": api_key, "name": api_label(api_key), "supported": False}
    ours = codec.known_versions(api_key)
    common = [v for v in ours if broker.min_version <= v <= broker.max_version]
    entry: dict[str, Any] = {
        "api_key": api_key,
        "name": api_label(api_key),
        "supported": True,
        "min_version": broker.min_version,
        "max_version": broker.max_version,
        "usable": max(common) if common else None,
    }
    if not common:
        entry["unusable"] = (
            "node too new" if ours and max(ours) < broker.min_version else ("node too old")
        )
    return entry


def api_line(entry: dict[str, Any]) -> str:
    if not entry["supported"]:
        return f"\t{entry['name']}: UNSUPPORTED"
    low, high = entry["min_version"], entry["max_version"]
    versions = f"{low}" if low == high else f"{low} to {high}"
    usable = (
        f"[usable: {entry['usable']}]"
        if entry["usable"] is not None
        else f"[unusable: {entry['unusable']}]"
    )
    return f"\t{entry['name']}: {versions} {usable}"


def broker_entries(ranges: dict[int, protocol.ApiVersionRange]) -> list[dict[str, Any]]:
    known = [describe_api(key, ranges.get(key)) for key in CLIENT_APIS]
    extra = [describe_api(key, ranges[key]) for key in sorted(ranges) if key not in CLIENT_APIS]
    return known + extra


def broker_api_versions(
    bootstrap_server: Bootstrap = "localhost:9092",
    as_json: JsonFlag = False,
) -> None:
    """The API versions every broker supports (kafka-broker-api-versions.sh)."""

    async def body(cluster: ClusterClient) -> None:
        metadata: Any = None
        last: Exception | None = None
        for address in cluster.bootstrap:
            try:
                metadata = await cluster.call(address, ApiKey.METADATA, {"topics": []}, 12)
                break
            except OSError as error:
                last = error
        if metadata is None:
            raise OSError(f"no broker of {cluster.bootstrap} answered: {last}")
        brokers: list[dict[str, Any]] = []
        for broker in sorted(metadata.brokers, key=lambda b: int(b.node_id)):
            address = (str(broker.host), int(broker.port))
            connection = await cluster.connection(address)
            brokers.append(
                {
                    "id": int(broker.node_id),
                    "host": address[0],
                    "port": address[1],
                    "rack": None if broker.rack is None else str(broker.rack),
                    "apis": broker_entries(dict(connection.broker_versions)),
                }
            )
        if as_json:
            emit_json({"brokers": brokers})
            return
        for entry in brokers:
            rack = "null" if entry["rack"] is None else entry["rack"]
            typer.echo(
                f"{entry['host']}:{entry['port']} (id: {entry['id']} rack: {rack} "
                "isFenced: false) -> ("
            )
            typer.echo(",\n".join(api_line(api) for api in entry["apis"]))
            typer.echo(")")

    run_on_cluster(body, bootstrap_server, "")


def register(app: typer.Typer) -> None:
    app.command("broker-api-versions")(broker_api_versions)
