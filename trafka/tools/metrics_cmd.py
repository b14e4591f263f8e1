"""`ktool metrics`: a node's headline figures from its Prometheus endpoint (docs/metrics.md).

    ktool metrics --url http://127.0.0.1:9404/metrics
    ktool metrics --bootstrap-server HOST:PORT [--broker-id N]

With `--bootstrap-server` the tool asks the node for its `metrics.listener` (DescribeConfigs
on the BROKER resource of the node it reached, found in Metadata by its host:port, or
`--broker-id`) and scrapes that; a node without one is one line on stderr, exit 1.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping
from typing import Annotated, Any, Final

import trio
import typer
from prometheus_client.parser import text_string_to_metric_families

from trafka.client import command_config
from trafka.net import codec
from trafka.net.api_keys import ApiKey
from trafka.net.client import ClientError, KafkaConnection
from trafka.net.kio_shape import build
from trafka.tools.output import JsonFlag, emit_json

BROKER_RESOURCE: Final = 4

Samples = dict[str, list[tuple[dict[str, str], float]]]

HEADLINES: Final[tuple[tuple[str, str, Mapping[str, str]], ...]] = (
    ("MessagesIn", "kafka_server_brokertopicmetrics_messagesin_total", {}),
    ("BytesIn", "kafka_server_brokertopicmetrics_bytesin_total", {}),
    ("BytesOut", "kafka_server_brokertopicmetrics_bytesout_total", {}),
    ("FailedProduceRequests", "kafka_server_brokertopicmetrics_failedproducerequests_total", {}),
    ("FailedFetchRequests", "kafka_server_brokertopicmetrics_failedfetchrequests_total", {}),
    ("PartitionCount", "kafka_server_replicamanager_partitioncount", {}),
    ("LeaderCount", "kafka_server_replicamanager_leadercount", {}),
    ("UnderReplicatedPartitions", "kafka_server_replicamanager_underreplicatedpartitions", {}),
    ("UnderMinIsrPartitionCount", "kafka_server_replicamanager_underminisrpartitioncount", {}),
    ("IsrShrinks", "kafka_server_replicamanager_isrshrinks_total", {}),
    ("IsrExpands", "kafka_server_replicamanager_isrexpands_total", {}),
    ("ActiveControllerCount", "kafka_controller_kafkacontroller_activecontrollercount", {}),
    ("OfflinePartitionsCount", "kafka_controller_kafkacontroller_offlinepartitionscount", {}),
    ("GlobalTopicCount", "kafka_controller_kafkacontroller_globaltopiccount", {}),
    ("GlobalPartitionCount", "kafka_controller_kafkacontroller_globalpartitioncount", {}),
    ("NumGroups", "kafka_coordinator_group_groupmetadatamanager_numgroups", {}),
    ("QuorumLeader", "kafka_server_raft_metrics_current_leader", {}),
    ("QuorumEpoch", "kafka_server_raft_metrics_current_epoch", {}),
)


class MetricsCommandError(Exception):
    pass


def parse(text: str) -> Samples:
    """Sample name -> [(labels, value)]."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def _one(samples: Samples, name: str, labels: Mapping[str, str]) -> float | None:
    for found, value in samples.get(name, ()):
        if found == dict(labels):
            return value
    return None


def _figure(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:.3f}"


def render(samples: Samples) -> list[str]:
    """The headline lines: Kafka's metric names, then requests per API (count, mean ms)."""
    lines = []
    for label, name, labels in HEADLINES:
        value = _one(samples, name, labels)
        lines.append(f"{label:<28}{'-' if value is None else _figure(value)}")
    connections = samples.get("kafka_server_socket_server_metrics_connection_count", [])
    for labels, value in sorted(connections, key=lambda item: item[0].get("listener", "")):
        lines.append(f"{'Connections ' + labels.get('listener', ''):<28}{_figure(value)}")
    counts = {
        labels["request"]: value
        for labels, value in samples.get("kafka_network_requestmetrics_totaltimems_count", [])
    }
    sums = {
        labels["request"]: value
        for labels, value in samples.get("kafka_network_requestmetrics_totaltimems_sum", [])
    }
    if counts:
        lines.append(f"{'REQUEST':<28}{'COUNT':>10} {'MEAN-TOTAL-MS':>14}")
        for api, count in sorted(counts.items(), key=lambda item: -item[1]):
            mean = sums.get(api, 0.0) / count if count else 0.0
            lines.append(f"{api:<28}{int(count):>10} {mean:>14.3f}")
    return lines


def headline_document(url: str, samples: Samples) -> dict[str, Any]:
    """`--json`: the same figures as `render` (null when the node does not export one),
    connections per listener, and per API its request count and mean total time."""
    counts = {
        labels["request"]: value
        for labels, value in samples.get("kafka_network_requestmetrics_totaltimems_count", [])
    }
    sums = {
        labels["request"]: value
        for labels, value in samples.get("kafka_network_requestmetrics_totaltimems_sum", [])
    }
    return {
        "url": url,
        "headlines": {label: _one(samples, name, labels) for label, name, labels in HEADLINES},
        "connections": {
            labels.get("listener", ""): value
            for labels, value in samples.get(
                "kafka_server_socket_server_metrics_connection_count", []
            )
        },
        "requests": {
            api: {
                "count": int(count),
                "mean_total_time_ms": sums.get(api, 0.0) / count if count else 0.0,
            }
            for api, count in counts.items()
        },
    }


def scrape(url: str, timeout_s: float = 10.0) -> str:
    if not url.startswith("http://"):
        raise MetricsCommandError(f"invalid --url {url!r}: expected http://host:port/metrics")
    if url.rstrip("/").count("/") == 2:
        url = url.rstrip("/") + "/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return str(response.read().decode())
    except OSError as error:
        raise MetricsCommandError(f"cannot scrape {url}: {error}") from None


async def _request(connection: KafkaConnection, api_key: int, data: dict[str, Any]) -> Any:
    version = connection.version_for(api_key, 1, 4)
    request_class = codec.request_class(api_key, version)
    assert request_class is not None
    return await connection.request(build(request_class, data), version)


async def metrics_url_of(bootstrap: str, broker_id: int | None) -> str:
    """The node's `metrics.listener` (DescribeConfigs on its BROKER resource)."""
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    if not host or not port.isdigit():
        raise MetricsCommandError(f"invalid --bootstrap-server {bootstrap!r}: expected host:port")
    connection = await KafkaConnection.connect(
        host, int(port), client_id="ktool-metrics", security=command_config.current()
    )
    try:
        await connection.negotiate_api_versions()
        if broker_id is None:
            metadata = await _request(connection, ApiKey.METADATA, {"topics": []})
            matches = [b.node_id for b in metadata.brokers if (b.host, b.port) == (host, int(port))]
            if len(matches) != 1 and len(metadata.brokers) != 1:
                raise MetricsCommandError(
                    f"{bootstrap} is not one broker's address in Metadata: give --broker-id"
                )
            broker_id = int(matches[0] if matches else metadata.brokers[0].node_id)
        response = await _request(
            connection,
            ApiKey.DESCRIBE_CONFIGS,
            {
                "resources": [
                    {
                        "resource_type": BROKER_RESOURCE,
                        "resource_name": str(broker_id),
                        "configuration_keys": ["metrics.listener"],
                    }
                ]
            },
        )
    finally:
        await connection.close()
    result = response.results[0]
    if result.error_code:
        raise MetricsCommandError(
            f"DescribeConfigs on broker {broker_id}: error {result.error_code}"
        )
    for entry in result.configs:
        if entry.name == "metrics.listener" and entry.value:
            return f"{entry.value.rstrip('/')}/metrics"
    raise MetricsCommandError(f"broker {broker_id} has no metrics endpoint (metrics.listener)")


def metrics(
    url: Annotated[str | None, typer.Option("--url", help="http://host:port[/metrics]")] = None,
    bootstrap_server: Annotated[
        str | None, typer.Option("--bootstrap-server", help="host:port of the node")
    ] = None,
    broker_id: Annotated[
        int | None, typer.Option("--broker-id", help="The node to ask (default: the one reached)")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Print a node's headline metrics (its Prometheus endpoint, docs/metrics.md)."""
    try:
        if url is None:
            if bootstrap_server is None:
                raise MetricsCommandError("give --url or --bootstrap-server")
            url = trio.run(metrics_url_of, bootstrap_server, broker_id)
        samples = parse(scrape(url))
    except (MetricsCommandError, ClientError, OSError) as error:
        typer.echo(f"Error: {error}", err=True)
        raise typer.Exit(1) from None
    if as_json:
        emit_json(headline_document(url, samples))
        return
    lines = render(samples)
    typer.echo(f"Metrics of {url}")
    for line in lines:
        typer.echo(line)
