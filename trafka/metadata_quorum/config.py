"""Configuration of the metadata quorum, with Kafka's KRaft key names where Kafka has one.

* `node.id` (required): this node's id.
* `controller.quorum.voters` (default `<node.id>@127.0.0.1:9093`): `1@host:port,2@host:port`,
  the Raft voters and their quorum ports. A node not listed is a non-voting learner (KRaft's
  "observer") that still holds a full local replica for reads and watches.
* `controller.quorum.secret`: the cluster secret that encrypts and authenticates the quorum
  port. `controller.quorum.secret.file`: a file holding it; it must be mode 0600 (or
  stricter), non-empty and at least 16 characters, or the node refuses to start with one
  line; a voter creates it (0600, random) when it is missing. For a one-voter cluster without
  either, its voter generates `<data dir>/quorum.secret` (mode 0600); several voters, or a
  learner, without a secret is a configuration error.
* `controller.quorum.election.timeout.ms` (1000): randomized in [t, 2t] (Kafka's rule).
* `controller.quorum.fsync.interval.ms` (1000, trafka's own): how often the journal is
  msync'ed and fsync'ed (see transport.py).
* `controller.quorum.request.timeout.ms` (30000): how long a write is retried, with the same
  request id, before OperationTimeout.
* `broker.session.timeout.ms` (9000), `broker.heartbeat.interval.ms` (2000): sessions.
* `zookeeper.chroot` (""): a prefix applied to every path (ZK-02).
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from trafka.metadata_quorum.sessions import (
    BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT,
    BROKER_SESSION_TIMEOUT_MS_DEFAULT,
)

logger = logging.getLogger(__name__)


class QuorumConfigError(ValueError):
    """A quorum setting that cannot be used (bad voters string, no secret, ...)."""


@dataclass(frozen=True, slots=True)
class Voter:
    node_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        """pysyncobj's node id: `host:port`."""
        return f"{self.host}:{self.port}"


def parse_voters(text: str) -> tuple[Voter, ...]:
    """Parse Kafka's `controller.quorum.voters`: `1@host:port,2@[::1]:port`."""
    voters: list[Voter] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        node, at, address = item.partition("@")
        host, colon, port = address.rpartition(":")
        if not at or not colon or not node.strip().isdigit() or not port.isdigit() or not host:
            raise QuorumConfigError(f"bad controller.quorum.voters entry {item!r}")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        port_number = int(port)
        if not 0 < port_number < 65536:
            raise QuorumConfigError(f"bad port in {item!r}")
        voters.append(Voter(int(node), host, port_number))
    if not voters:
        raise QuorumConfigError("controller.quorum.voters is empty")
    if len({v.node_id for v in voters}) != len(voters):
        raise QuorumConfigError("controller.quorum.voters lists a node id twice")
    if len({v.address for v in voters}) != len(voters):
        raise QuorumConfigError("controller.quorum.voters lists an address twice")
    return tuple(voters)


@dataclass(frozen=True, slots=True)
class QuorumConfig:
    node_id: int
    voters: tuple[Voter, ...]
    data_dir: Path
    secret: str
    election_timeout_ms: int = 1000
    fsync_interval_ms: int = 1000
    request_timeout_ms: int = 30_000
    attempt_timeout_ms: int = 2_000
    session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS_DEFAULT
    heartbeat_interval_ms: int = BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT
    chroot: str = ""
    session_owner: str = ""
    open_session: bool = True
    watch_queue_size: int = 10_000
    connection_retry_ms: int = 300
    # The trio thread and pysyncobj's tick thread hand the GIL back and forth on every
    # write; Python's default 5 ms switch interval turns that into a convoy (bench: p99
    # 18 ms -> 10 ms, concurrent writes/s 450 -> 760 at 1 ms). Applied by the bridge only
    # while the process still has Python's default; None leaves it alone.
    gil_switch_interval_s: float | None = 0.001

    @property
    def is_voter(self) -> bool:
        return any(v.node_id == self.node_id for v in self.voters)

    @property
    def self_voter(self) -> Voter | None:
        return next((v for v in self.voters if v.node_id == self.node_id), None)

    @property
    def owner(self) -> str:
        return self.session_owner or f"node-{self.node_id}"

    def voter_for_address(self, address: str) -> Voter | None:
        return next((v for v in self.voters if v.address == address), None)


MIN_SECRET_FILE_CHARS = 16
"""A secret file shorter than this is refused (the generated ones hold 43 characters)."""
GENERATED_SECRET_FILE = "quorum.secret"


def _secret_file_error(path: Path, problem: str) -> QuorumConfigError:
    return QuorumConfigError(f"quorum secret file {path}: {problem}")


def read_secret_file(path: Path) -> str:
    """A secret file's content, refused with one line when it is not a regular file, is
    readable or writable by group or others, is empty, or is shorter than
    MIN_SECRET_FILE_CHARS characters (an empty file would make a key derived from "")."""
    try:
        status = os.stat(path)
    except OSError as error:
        raise _secret_file_error(path, error.strerror or str(error)) from None
    if not stat.S_ISREG(status.st_mode):
        raise _secret_file_error(path, "not a regular file")
    mode = stat.S_IMODE(status.st_mode)
    if mode & 0o077:
        raise _secret_file_error(
            path, f"readable or writable by group or others (mode {mode:04o}); chmod 600 it"
        )
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise _secret_file_error(path, f"cannot read it ({error})") from None
    if not text:
        raise _secret_file_error(path, "empty")
    if len(text) < MIN_SECRET_FILE_CHARS:
        raise _secret_file_error(
            path, f"{len(text)} characters, fewer than {MIN_SECRET_FILE_CHARS}"
        )
    return text


def create_secret_file(path: Path) -> tuple[str, bool]:
    """Create `path` (mode 0600) holding a new random secret, unless it exists; atomic, so
    nodes sharing the path on one machine race safely. Returns (secret, created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(value + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)  # fails if another process created it first
        except FileExistsError:
            return read_secret_file(path), False
        _fsync_dir(path.parent)
        return value, True
    finally:
        tmp.unlink(missing_ok=True)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def load_secret(
    data_dir: Path,
    voters: tuple[Voter, ...],
    secret: str | None,
    secret_file: str | None,
    *,
    node_id: int | None = None,
) -> str:
    """The cluster secret: given, read from a file, or generated.

    `controller.quorum.secret.file` naming a missing file: a voter creates it (0600, a new
    random secret) and logs where; nodes sharing the path on one machine (the compose
    example) all use the first one written. Across machines, copy the file to every node
    before starting them. A learner never generates: it must hold the voters' secret, or it
    would wait forever on frames it cannot decrypt, and neither does a tool (`node_id`
    None, e.g. `ktool quorum --secret-file`). Without either setting, the voter of a
    one-voter cluster generates `<data dir>/quorum.secret`.
    """
    is_learner = node_id is not None and all(v.node_id != node_id for v in voters)
    if secret:
        if len(secret) < MIN_SECRET_FILE_CHARS:
            logger.warning(
                "controller.quorum.secret is %d characters, fewer than %d: use a longer one "
                "(or controller.quorum.secret.file)",
                len(secret),
                MIN_SECRET_FILE_CHARS,
            )
        return secret
    if secret_file:
        path = Path(secret_file)
        if not path.exists() and node_id is not None and not is_learner:
            value, created = create_secret_file(path)
            if created:
                logger.warning(
                    "generated a new quorum secret in %s (mode 0600): every node of this "
                    "cluster must use this file (copy it to the other machines)",
                    path,
                )
            return value
        return read_secret_file(path)
    generated = data_dir / GENERATED_SECRET_FILE
    if generated.exists():
        return read_secret_file(generated)
    if len(voters) != 1:
        raise QuorumConfigError(
            "a quorum with several voters needs controller.quorum.secret or "
            "controller.quorum.secret.file (the quorum port unpickles what it receives)"
        )
    if is_learner:
        raise QuorumConfigError(
            f"node {node_id} is a learner of the quorum of voter {voters[0].node_id}: it needs "
            "that voter's secret in controller.quorum.secret or controller.quorum.secret.file"
        )
    value, _created = create_secret_file(generated)
    return value


def _int_setting(props: Mapping[str, str], key: str, default: int) -> int:
    raw = props.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise QuorumConfigError(f"{key} must be an integer, got {raw!r}") from None
    if value <= 0:
        raise QuorumConfigError(f"{key} must be positive")
    return value


def config_from_properties(
    props: Mapping[str, str], *, node_id: int, data_dir: Path
) -> QuorumConfig:
    """Build a QuorumConfig from Kafka-named properties (strings, as in server.properties)."""
    voters_text = props.get("controller.quorum.voters") or f"{node_id}@127.0.0.1:9093"
    voters = parse_voters(voters_text)
    secret = load_secret(
        data_dir,
        voters,
        props.get("controller.quorum.secret"),
        props.get("controller.quorum.secret.file"),
        node_id=node_id,
    )
    session_timeout_ms = _int_setting(
        props, "broker.session.timeout.ms", BROKER_SESSION_TIMEOUT_MS_DEFAULT
    )
    heartbeat_interval_ms = _int_setting(
        props, "broker.heartbeat.interval.ms", BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT
    )
    if heartbeat_interval_ms >= session_timeout_ms:
        raise QuorumConfigError("broker.heartbeat.interval.ms must be < broker.session.timeout.ms")
    return QuorumConfig(
        node_id=node_id,
        voters=voters,
        data_dir=data_dir,
        secret=secret,
        election_timeout_ms=_int_setting(props, "controller.quorum.election.timeout.ms", 1000),
        fsync_interval_ms=_int_setting(props, "controller.quorum.fsync.interval.ms", 1000),
        request_timeout_ms=_int_setting(props, "controller.quorum.request.timeout.ms", 30_000),
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=heartbeat_interval_ms,
        chroot=props.get("zookeeper.chroot", ""),
    )
