"""One chaos run: start the cluster in namespaces, run the workload, apply nemeses on a
seeded schedule, heal, read everything back, check, report.

    config = ChaosConfig(seed=16, nodes=3, duration_s=90, base_dir=Path("/tmp/chaos"))
    outcome = run_chaos(config)       # prints the seed, one line per fault, the verdict
    outcome.report.valid              # the checker's verdict (tests.chaos.checker)

Outputs in `base_dir`: `report.json` (the checker's report plus the run's settings),
`history.json` (every write, read and fault), `timeline.html` (tests.chaos.timeline), and
the nodes' stderr logs. Everything the run created (processes, namespaces, bridge, tmpfs
mount) is removed in `finally`, also on SIGTERM/SIGINT; leftovers of an earlier killed run
are removed first (`tests.chaos.netns.cleanup_leftovers`).
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import ConfigResource, NewTopic

from tests.chaos.checker import Report, check_history
from tests.chaos.history import ClientError, History, Read
from tests.chaos.nemesis import ALL_NEMESES, Nemeses
from tests.chaos.netns import Network, Unavailable, cleanup_leftovers
from tests.chaos.nodes import ChaosCluster
from tests.chaos.replicas import ReplicaCheck, check_replicas
from tests.chaos.timeline import markdown_table, write_html
from tests.chaos.workload import (
    CLIENT_LOGGER,
    Clock,
    ConsumerWorker,
    MetadataWorker,
    ProducerWorker,
    admin_client,
    client_config,
)

BASE_SETTINGS = [
    "controller.quorum.secret=chaos-harness-secret",
    "offsets.topic.num.partitions=3",
    "group.initial.rebalance.delay.ms=0",
]
FAST_TIMEOUTS = [
    "broker.session.timeout.ms=3000",
    "broker.heartbeat.interval.ms=500",
    "replica.lag.time.max.ms=4000",
    "replica.fetch.wait.max.ms=200",
]
"""Short timeouts for the 90-second test (so several faults fit); `make chaos` keeps Kafka's
defaults (broker.session.timeout.ms=9000, replica.lag.time.max.ms=30000)."""
TOPIC = "chaos"


def log(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class ChaosConfig:
    seed: int
    base_dir: Path
    nodes: int = 3
    duration_s: float = 90.0
    partitions: int = 6
    nemeses: tuple[str, ...] = ALL_NEMESES
    hold_s: tuple[float, float] = (5.0, 9.0)
    quiet_s: tuple[float, float] = (4.0, 7.0)
    settings: list[str] = field(default_factory=lambda: [*BASE_SETTINGS, *FAST_TIMEOUTS])
    idempotent_producers: int = 3
    rate_per_producer: float = 40.0
    message_timeout_ms: int = 120_000
    """librdkafka bumps an idempotent producer's epoch when a message times out, and re-sends
    the unacknowledged messages of other partitions as new ones (possible duplicates): kept
    well above the longest unavailability (kill-all: about a minute on the loaded machine)."""
    metadata_interval_s: float = 10.0
    ready_timeout_s: float = 120.0
    settle_timeout_s: float = 90.0
    spark_audit: bool = False
    every_nemesis_once: bool = False
    """Keep going past `duration_s` until every available nemesis ran at least once."""
    use_namespaces: bool = True
    disk_mb: int = 256


@dataclass
class Outcome:
    report: Report
    history: History
    replicas: ReplicaCheck
    report_path: Path
    timeline_path: Path
    audit: dict[str, Any] = field(default_factory=dict)


class _Interrupted(BaseException):
    pass


def _nemesis_schedule(rng: random.Random, names: tuple[str, ...]) -> Iterator[str]:
    """Every enabled nemesis once per round, in a seeded random order."""
    while True:
        order = list(names)
        rng.shuffle(order)
        yield from order


def _wait(seconds: float, stop: Callable[[], bool] | None = None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if stop is not None and stop():
            return
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


def _create_topic(bootstrap: str, partitions: int, timeout_s: float) -> None:
    admin = admin_client(bootstrap)
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            futures = admin.create_topics(
                [NewTopic(TOPIC, partitions, 3, config={"min.insync.replicas": "2"})],
                operation_timeout=20,
            )
            futures[TOPIC].result(timeout=30)
            break
        except Exception as error:
            if "TOPIC_ALREADY_EXISTS" in str(error):
                break
            last = error
            time.sleep(1)
    else:
        raise AssertionError(f"could not create the topic: {last}")
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(TOPIC, timeout=5).topics[TOPIC]
            if len(metadata.partitions) == partitions and all(
                p.leader >= 0 and len(p.isrs) == 3 for p in metadata.partitions.values()
            ):
                return
        except Exception as error:
            last = error
        time.sleep(0.5)
    raise AssertionError(f"topic {TOPIC} never got leaders and a full ISR: {last}")


def _wait_full_isr(bootstrap: str, topics: list[str], timeout_s: float) -> list[str]:
    """Wait until every partition of `topics` has a leader and a full ISR; returns the
    partitions that did not (as 'topic-p: leader L isr [...]')."""
    admin = admin_client(bootstrap)
    deadline = time.monotonic() + timeout_s
    lagging: list[str] = ["(metadata never read)"]
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(timeout=5)
            lagging = []
            for topic in topics:
                found = metadata.topics.get(topic)
                if found is None:
                    lagging.append(f"{topic}: missing")
                    continue
                for p in found.partitions.values():
                    if p.leader < 0 or len(p.isrs) < len(p.replicas):
                        lagging.append(f"{topic}-{p.id}: leader {p.leader} isr {sorted(p.isrs)}")
            if not lagging:
                return []
        except Exception as error:
            lagging = [str(error)]
        time.sleep(1)
    return lagging


def _final_read(
    bootstrap: str, partitions: int, clock: Clock, timeout_s: float
) -> tuple[list[Read], bool]:
    """Every partition from the beginning to its high watermark, by a fresh consumer."""
    consumer = Consumer(
        client_config(
            bootstrap,
            **{
                "group.id": "chaos-final-read",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            },
        )
    )
    reads: list[Read] = []
    complete = True
    try:
        targets: dict[int, int] = {}
        for partition in range(partitions):
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(TOPIC, partition), timeout=30
            )
            targets[partition] = high
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        positions = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + timeout_s
        while any(positions[p] < targets[p] for p in targets) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=1.0):
                if message.error() is not None:
                    continue
                partition = message.partition() or 0
                offset = message.offset() or 0
                raw = message.value()
                reads.append(
                    Read(
                        consumer="final",
                        assignment=0,
                        time=clock.now(),
                        partition=partition,
                        offset=offset,
                        value=raw.decode() if isinstance(raw, bytes) else str(raw),
                    )
                )
                positions[partition] = offset + 1
        complete = all(positions[p] >= targets[p] for p in targets)
        if not complete:
            log(f"final read incomplete: positions {positions}, high watermarks {targets}")
    finally:
        consumer.close()
    return reads, complete


def _check_metadata(bootstrap: str, ops: list[dict[str, Any]]) -> None:
    admin = admin_client(bootstrap)
    topics = admin.list_topics(timeout=15).topics
    for op in ops:
        present = op["name"] in topics
        if present:
            resource = ConfigResource(ConfigResource.Type.TOPIC, op["name"])
            try:
                configs = admin.describe_configs([resource])[resource].result(timeout=15)
                retention = configs["retention.ms"].value
                present = retention == op["config"]["retention.ms"]
                if not present:
                    op["found_retention_ms"] = retention
            except Exception as error:
                op["describe_error"] = str(error)[:200]
                present = False
        op["present_at_end"] = present


def _spark_audit(log_dirs: list[Path], out: Path) -> dict[str, Any]:
    """`ktool audit check --log-dirs ...` (Spark) over every node's log dir."""
    result = subprocess.run(
        [sys.executable, "-m", "trafka.tools.ktool", "audit", "check",
         "--log-dirs", ",".join(str(p) for p in log_dirs), "--report", str(out),
         "--master", "local[2]"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    summary: dict[str, Any] = {"exit_code": result.returncode, "report": str(out)}
    if out.exists():
        report = json.loads(out.read_text())
        summary.update(
            ok=report.get("ok"),
            error_count=report.get("error_count"),
            violation_counts=report.get("violation_counts"),
        )
    else:
        summary["stderr"] = result.stderr[-2000:]
    return summary


def run_chaos(config: ChaosConfig) -> Outcome:
    base = config.base_dir
    if base.exists() and any(base.glob("node-*")):
        # the nodes would start on the old run's data and the checker would read its values
        raise ValueError(f"{base} already holds a run's nodes: give a new output directory")
    base.mkdir(parents=True, exist_ok=True)
    run_id = os.getpid()
    client_log = logging.FileHandler(base / "clients.log")
    client_log.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    CLIENT_LOGGER.addHandler(client_log)
    CLIENT_LOGGER.setLevel(logging.DEBUG)
    rng = random.Random(config.seed)
    log(
        f"seed {config.seed}: {config.nodes} nodes, {config.duration_s:.0f} s, "
        f"nemeses {', '.join(config.nemeses)}; output in {base}"
    )
    for item in cleanup_leftovers(current_run=run_id):
        log(f"removed a leftover of an earlier run: {item}")

    previous: dict[int, Any] = {}

    def interrupted(signum: int, frame: FrameType | None) -> None:
        raise _Interrupted(f"signal {signal.Signals(signum).name}")

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            previous[int(sig)] = signal.signal(sig, interrupted)

    network: Network | None = None
    network_reason: str | None = None
    if config.use_namespaces:
        try:
            network = Network.create(run_id, range(1, config.nodes + 1))
        except Unavailable as error:
            network_reason = str(error)
    else:
        network_reason = "namespaces turned off (use_namespaces=False)"
    if network_reason:
        log(f"network namespaces unavailable: {network_reason}; network nemeses skipped")
    elif network is not None and network.nft_reason:
        log(f"partitions unavailable: {network.nft_reason}; network nemeses skipped")
    cluster: ChaosCluster | None = None
    workers: list[ProducerWorker | ConsumerWorker | MetadataWorker] = []
    try:
        disk_node = rng.randrange(1, config.nodes + 1) if "disk-full" in config.nemeses else None
        cluster = ChaosCluster(
            base_dir=base,
            node_count=config.nodes,
            settings=list(config.settings),
            network=network,
            run_id=run_id,
            disk_node=disk_node,
            disk_mb=config.disk_mb,
        )
        if cluster.disk_reason:
            log(f"small disk unavailable: {cluster.disk_reason}; disk-full skipped")
        return _run(config, cluster, network, network_reason, rng, workers)
    finally:
        for worker in workers:
            worker.stopping.set()
        if cluster is not None:
            cluster.close()
            cluster.unmount()
        if network is not None:
            network.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        CLIENT_LOGGER.removeHandler(client_log)
        client_log.close()


def _run(
    config: ChaosConfig,
    cluster: ChaosCluster,
    network: Network | None,
    network_reason: str | None,
    rng: random.Random,
    workers: list[ProducerWorker | ConsumerWorker | MetadataWorker],
) -> Outcome:
    base = config.base_dir
    started = time.monotonic()
    for node_id in cluster.nodes:
        cluster.start(node_id)
    not_ready = cluster.wait_ready(sorted(cluster.nodes), config.ready_timeout_s)
    if not_ready:
        raise AssertionError(f"nodes {not_ready} never answered\n{cluster.describe_failure()}")
    bootstrap = cluster.bootstrap_servers
    _create_topic(bootstrap, config.partitions, config.ready_timeout_s)
    log(f"cluster up in {time.monotonic() - started:.0f} s: {bootstrap}")

    clock = Clock()
    history = History(topic=TOPIC, partitions=config.partitions)
    producers = [
        ProducerWorker(
            f"idem{i}", idempotent=True, bootstrap=bootstrap, topic=TOPIC,
            partitions=config.partitions, rate=config.rate_per_producer, clock=clock,
            message_timeout_ms=config.message_timeout_ms,
        )
        for i in range(1, config.idempotent_producers + 1)
    ]  # fmt: skip
    producers.append(
        ProducerWorker(
            "plain", idempotent=False, bootstrap=bootstrap, topic=TOPIC,
            partitions=config.partitions, rate=config.rate_per_producer, clock=clock,
            message_timeout_ms=config.message_timeout_ms,
        )
    )  # fmt: skip
    consumers = [
        ConsumerWorker(
            name, group=group, bootstrap=bootstrap, topic=TOPIC, partitions=config.partitions,
            clock=clock, group_id="chaos-group" if group else f"chaos-{name}",
        )
        for name, group in (("group1", True), ("group2", True), ("assigned", False))
    ]  # fmt: skip
    metadata = MetadataWorker(
        bootstrap=bootstrap, prefix="chaos-meta", interval_s=config.metadata_interval_s,
        clock=clock,
    )  # fmt: skip
    workers.extend([*producers, *consumers, metadata])
    for worker in workers:
        worker.start()

    nemeses = Nemeses(cluster, network, network_reason, rng, clock, config.ready_timeout_s)
    schedule = _nemesis_schedule(rng, config.nemeses)
    tail_s = 5.0
    _wait(rng.uniform(*config.quiet_s))
    tried_without_running = 0
    ran: set[str] = set()

    def more() -> bool:
        if tried_without_running >= len(config.nemeses):
            return False  # none of them can run
        if clock.now() < config.duration_s - tail_s:
            return True
        left = set(config.nemeses) - ran - set(history.skipped)
        return config.every_nemesis_once and bool(left)

    while more():
        name = next(schedule)
        if clock.now() >= config.duration_s - tail_s and name in ran:
            continue
        try:
            injected = nemeses.inject(name)
        except Unavailable as error:
            if name not in history.skipped:
                log(f"{name} unavailable: {error}")
            history.skipped[name] = str(error)
            tried_without_running += 1
            continue
        tried_without_running = 0
        ran.add(name)
        fault = injected.fault
        history.faults.append(fault)
        log(f"t={fault.start:6.1f} {name}: {fault.detail}")
        hold = rng.uniform(*config.hold_s)
        _wait(max(0.0, fault.start + hold - clock.now()))
        fault.heal = clock.now()
        injected.heal()
        missing = cluster.wait_ready(sorted(cluster.nodes), config.ready_timeout_s)
        fault.end = clock.now()
        log(
            f"t={fault.heal:6.1f} healed {name}; all nodes answering at t={fault.end:.1f}"
            + (f" (not answering: {missing})" if missing else "")
        )
        _wait(rng.uniform(*config.quiet_s))
    for name in config.nemeses:
        if name not in history.skipped and nemeses.unavailable(name):
            history.skipped[name] = str(nemeses.unavailable(name))

    # ---- settle: heal everything, every node up, full ISR, let the workload run a bit -----
    if network is not None and not network.nft_reason:
        network.heal()
    for node_id in cluster.nodes:
        cluster.resume(node_id)
    missing = cluster.wait_ready(sorted(cluster.nodes), config.ready_timeout_s)
    lagging = _wait_full_isr(bootstrap, [TOPIC], config.settle_timeout_s)
    if lagging:
        log(f"partitions without a full ISR after settling: {lagging}")
    _wait(3)
    for producer in producers:
        producer.stopping.set()
    for producer in producers:
        producer.join(timeout=producer.flush_timeout_s + 30)
    metadata.stopping.set()
    metadata.join(timeout=60)
    # consumers catch up to the end before they stop
    _wait(5)
    for consumer in consumers:
        consumer.stopping.set()
    for consumer in consumers:
        consumer.join(timeout=30)
    history.duration = clock.now()
    final, complete = _final_read(bootstrap, config.partitions, clock, timeout_s=120)
    history.final_reads_complete = complete
    for worker in producers:
        history.writes.extend(worker.writes)
        history.errors.extend(worker.errors)
    for consumer in consumers:
        history.reads.extend(consumer.reads)
        history.errors.extend(consumer.errors)
    history.reads.extend(final)
    history.meta_ops = metadata.ops
    try:
        _check_metadata(bootstrap, history.meta_ops)
    except Exception as error:
        history.errors.append(ClientError(clock.now(), "metadata-check", str(error)))
        for op in history.meta_ops:
            op.setdefault("present_at_end", None)
    nodes_down = [n for n in cluster.nodes if not cluster.ready(n)]
    nodes_down = sorted(set(nodes_down) | set(missing))

    # ---- stop the nodes (checkpoints flushed), compare the replicas ------------------------
    cluster.close()
    meta_topics = [op["name"] for op in history.meta_ops]
    replicas = check_replicas([str(p) for p in cluster.log_dirs()], [TOPIC, *meta_topics])
    audit: dict[str, Any] = {}
    if config.spark_audit:
        log("running ktool audit check (Spark) over every log dir")
        audit = _spark_audit(cluster.log_dirs(), base / "audit-report.json")
        log(f"ktool audit check: {audit}")

    divergences = list(replicas.divergences)
    if audit and audit.get("ok") is False:
        divergences.append({"ktool_audit_check": audit})
    report = check_history(
        history,
        seed=config.seed,
        replica_divergences=divergences,
        nodes_down=nodes_down,
        node_crashes=cluster.crashes,
    )
    for client_error in history.errors:
        if client_error.error.startswith("worker crashed"):
            report.notes.append(f"{client_error.client}: {client_error.error}")
    for node_id, code in cluster.deaths:
        report.notes.append(f"node {node_id} exited by itself with code {code}")
    if replicas.behind:
        report.notes.append(f"replicas behind the high watermark: {replicas.behind}")
    if lagging:
        report.notes.append(f"partitions without a full ISR after settling: {lagging}")
    report_path = base / "report.json"
    document = json.loads(report.to_json())
    document["config"] = {
        k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()
    }
    document["replicas"] = {
        "compared_batches": replicas.compared_batches,
        "behind": replicas.behind,
        "partitions": replicas.partitions,
    }
    document["audit"] = audit
    document["deaths"] = cluster.deaths
    document["faults"] = [asdict(f) for f in history.faults]
    report_path.write_text(json.dumps(document, indent=2, sort_keys=True, default=str))
    (base / "history.json").write_text(json.dumps(history.to_json_object(), default=str))
    (base / "summary.md").write_text(
        f"seed {config.seed}, {config.nodes} nodes, {history.duration:.0f} s: {report.verdict}\n\n"
        + markdown_table(report)
    )
    timeline_path = base / "timeline.html"
    write_html(timeline_path, history, report)
    log(report.verdict)
    log(f"report {report_path}, timeline {timeline_path}")
    return Outcome(
        report=report,
        history=history,
        replicas=replicas,
        report_path=report_path,
        timeline_path=timeline_path,
        audit=audit,
    )
