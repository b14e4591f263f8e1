"""Produce and consume over TLS vs PLAINTEXT through one real knode, and SASL
authentications per second (issue 14: goal >= 0.6 produce, >= 0.5 consume).

One `knode` with two listeners on the same log: ``PLAIN`` (PLAINTEXT, sendfile on fetch)
and ``TLS`` (SSL, file regions read and encrypted), plus ``SCRAM`` (SASL_SSL) and
``SASLPLAIN`` (SASL_PLAINTEXT) for the authentication rate. Per repeat and per listener, in
alternation: one confluent-kafka producer process sends `--messages` 100-byte values
(acks=1, linger 5 ms) to a fresh topic, then one consumer process reads them back (assign,
no group). Prints msgs/s per listener and the TLS/PLAINTEXT ratios; then authentications
per second: trafka's own client connecting and authenticating in a loop (SCRAM-SHA-512 over
TLS, PLAIN over TCP) for `--auth-seconds`.

    .venv/bin/python bench/tls.py                       # 500k msgs, 3 repeats
    .venv/bin/python bench/tls.py --messages 200000 --repeat 1
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.certs import CertificateAuthority  # noqa: E402

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret";'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _security(listener: str, ca: Path) -> dict[str, str]:
    if listener == "TLS":
        return {"security.protocol": "ssl", "ssl.ca.location": str(ca)}
    return {}


def produce(bootstrap: str, conf: dict[str, str], topic: str, count: int, out: object) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, **conf})
    value = b"x" * 100
    start = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    out.put(time.perf_counter() - start)  # type: ignore[attr-defined]


def consume(bootstrap: str, conf: dict[str, str], topic: str, count: int, out: object) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 1048576,
            **conf,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    start = time.perf_counter()
    while seen < count:
        for message in consumer.consume(10000, timeout=1):
            if message.error() is None:
                seen += 1
    out.put(time.perf_counter() - start)  # type: ignore[attr-defined]
    consumer.close()


def _run(target: object, *args: object) -> float:
    queue: multiprocessing.Queue[float] = multiprocessing.Queue()
    process = multiprocessing.Process(target=target, args=(*args, queue))  # type: ignore[arg-type]
    process.start()
    elapsed = queue.get(timeout=600)
    process.join()
    return elapsed


def authentications_per_second(
    port: int, protocol: str, mechanism: str, ca: Path, seconds: float
) -> float:
    import trio

    from trafka.net.client import KafkaConnection
    from trafka.net.client_security import ClientSecurity

    context = ssl.create_default_context(cafile=str(ca)) if protocol == "SASL_SSL" else None
    user = "carol" if mechanism.startswith("SCRAM") else "bench"
    password = "carol-secret" if user == "carol" else "bench-secret"
    security = ClientSecurity(protocol, context, mechanism, user, password)

    async def loop() -> int:
        done = 0
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            connection = await KafkaConnection.connect("127.0.0.1", port, security=security)
            await connection.close()
            done += 1
        return done

    return trio.run(loop) / seconds


def _create_scram_user(bootstrap: str) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"carol-secret"
            )
        ]
    ).values():
        future.result(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--auth-seconds", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trafka-tls-bench-") as tmp:
        base = Path(tmp)
        ca = CertificateAuthority(base / "certs")
        broker = ca.issue("broker", "localhost")
        ports = {
            "PLAIN": free_port(),
            "TLS": free_port(),
            "SCRAM": free_port(),
            "SASLPLAIN": free_port(),
        }
        settings = [
            "listeners=" + ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
            "listener.security.protocol.map=PLAIN:PLAINTEXT,TLS:SSL,SCRAM:SASL_SSL,"
            "SASLPLAIN:SASL_PLAINTEXT",
            "inter.broker.listener.name=PLAIN",
            "listener.name.scram.sasl.enabled.mechanisms=SCRAM-SHA-512",
            "listener.name.saslplain.sasl.enabled.mechanisms=PLAIN",
            f"listener.name.saslplain.plain.sasl.jaas.config={JAAS}",
            f"ssl.keystore.location={broker.chain}",
            f"log.dirs={base / 'data'}",
            f"controller.quorum.voters=1@127.0.0.1:{free_port()}",
        ]
        command = [sys.executable, "-m", "trafka.tools.knode", "start", "--id", "1"]
        for item in settings:
            command += ["--set", item]
        with open(base / "knode.log", "wb") as stderr:
            node = subprocess.Popen(command, stderr=stderr, stdout=subprocess.DEVNULL, cwd=tmp)
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    socket.create_connection(("127.0.0.1", ports["PLAIN"]), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or node.poll() is not None:
                        raise SystemExit((base / "knode.log").read_text()[-2000:]) from None
                    time.sleep(0.5)
            results: dict[str, dict[str, list[float]]] = {
                listener: {"produce": [], "consume": []} for listener in ("PLAIN", "TLS")
            }
            for repeat in range(args.repeat):
                for listener in ("PLAIN", "TLS"):
                    bootstrap = f"127.0.0.1:{ports[listener]}"
                    conf = _security(listener, ca.ca_file)
                    topic = f"bench-{listener.lower()}-{repeat}"
                    produce_s = _run(produce, bootstrap, conf, topic, args.messages)
                    consume_s = _run(consume, bootstrap, conf, topic, args.messages)
                    results[listener]["produce"].append(args.messages / produce_s)
                    results[listener]["consume"].append(args.messages / consume_s)
                    print(
                        f"repeat {repeat + 1} {listener:5} produce "
                        f"{args.messages / produce_s:10,.0f} msgs/s  consume "
                        f"{args.messages / consume_s:10,.0f} msgs/s",
                        flush=True,
                    )
            for kind in ("produce", "consume"):
                plain = statistics.median(results["PLAIN"][kind])
                tls = statistics.median(results["TLS"][kind])
                print(
                    f"median {kind}: PLAINTEXT {plain:,.0f} msgs/s, TLS {tls:,.0f} msgs/s, "
                    f"ratio {tls / plain:.2f}"
                )
            _create_scram_user(f"127.0.0.1:{ports['PLAIN']}")
            for name, port, protocol, mechanism in (
                ("SCRAM-SHA-512 over TLS", ports["SCRAM"], "SASL_SSL", "SCRAM-SHA-512"),
                ("PLAIN over TCP", ports["SASLPLAIN"], "SASL_PLAINTEXT", "PLAIN"),
            ):
                rate = authentications_per_second(
                    port, protocol, mechanism, ca.ca_file, args.auth_seconds
                )
                print(f"authentications/s, {name}: {rate:,.0f}")
        finally:
            node.terminate()
            try:
                node.wait(30)
            except subprocess.TimeoutExpired:
                node.kill()


if __name__ == "__main__":
    main()
