"""Network namespaces for the chaos harness: one per node, veth pairs into a bridge.

    network = Network.create(run_id, [1, 2, 3])     # raises Unavailable with the reason
    network.address(2)                              # "10.213.X.12": node 2's only address
    network.block(2, outgoing={1}, incoming={1})    # nftables in node 2's namespace
    network.heal()                                  # every node reaches every node again
    network.close()                                 # namespaces, veths and bridge removed

Layout: a bridge `chb<run>` in the root namespace holds 10.213.X.1/24 (X chosen free); node n
lives in namespace `chaos<run>n<n>` with `eth0` = 10.213.X.(10+n), the other end of its veth
(`chv<run>n<n>`) enslaved to the bridge. Clients in the root namespace reach every node
through the bridge; nodes reach each other only through it. Partitions are nftables sets in
each node's namespace (`table inet chaos`: an output chain dropping packets to the addresses
in `@out_block`, an input chain dropping packets from `@in_block`), so they drop the nodes'
real traffic (Kafka and quorum ports alike) while every process keeps running and the
clients' address (the bridge's) is never blocked.

Everything is named after the run id (the harness's pid), so `cleanup_leftovers()` removes
what a previous, killed run left behind (its pid no longer alive) and nothing else.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field

PREFIX = "chaos"
SUBNET_PREFIX = "10.213"
_NS_NAME = re.compile(r"^chaos(\d+)n\d+$")
_LINK_NAME = re.compile(r"^(?:chb(\d+)|chv(\d+)n\d+)$")
_MOUNT_SOURCE = re.compile(r"^chaos(\d+)$")

NFT_TABLE = """
table inet chaos {
  set out_block { type ipv4_addr; }
  set in_block { type ipv4_addr; }
  chain output { type filter hook output priority 0; policy accept; ip daddr @out_block drop; }
  chain input { type filter hook input priority 0; policy accept; ip saddr @in_block drop; }
}
"""


class Unavailable(Exception):
    """A mechanism (namespaces, nftables, tmpfs) cannot be used here; the message says why."""


def _run(args: list[str], *, stdin: str | None = None, check: bool = True) -> str:
    result = subprocess.run(
        args, input=stdin, capture_output=True, text=True, timeout=30, check=False
    )
    if check and result.returncode != 0:
        raise subprocess.CalledProcessError(result.returncode, args, result.stdout, result.stderr)
    return result.stdout


def _pid_alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def ns_name(run_id: int, node_id: int) -> str:
    return f"{PREFIX}{run_id}n{node_id}"


def cleanup_leftovers(*, current_run: int | None = None) -> list[str]:
    """Remove namespaces, links and tmpfs mounts of earlier runs whose harness process is
    gone (processes still inside such a namespace are SIGKILLed first). Returns what was
    removed."""
    removed: list[str] = []
    if shutil.which("ip") is None:
        return removed

    def stale(pid_text: str | None) -> bool:
        if pid_text is None:
            return False
        pid = int(pid_text)
        return pid != current_run and not _pid_alive(pid)

    try:
        listing = _run(["ip", "netns", "list"], check=False)
    except (OSError, subprocess.SubprocessError):
        listing = ""
    for line in listing.splitlines():
        name = line.split()[0] if line.split() else ""
        match = _NS_NAME.match(name)
        if match and stale(match.group(1)):
            pids = _run(["ip", "netns", "pids", name], check=False).split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _run(["ip", "netns", "del", name], check=False)
            removed.append(f"netns {name}")
    links = _run(["ip", "-o", "link", "show"], check=False)
    for line in links.splitlines():
        parts = line.split(":")
        if len(parts) < 2:
            continue
        name = parts[1].strip().split("@")[0]
        match = _LINK_NAME.match(name)
        if match and stale(match.group(1) or match.group(2)):
            _run(["ip", "link", "del", name], check=False)
            removed.append(f"link {name}")
    removed.extend(unmount_leftovers(current_run=current_run))
    return removed


def unmount_leftovers(*, current_run: int | None = None) -> list[str]:
    removed: list[str] = []
    try:
        with open("/proc/mounts") as mounts:
            entries = [line.split() for line in mounts]
    except OSError:
        return removed
    for entry in entries:
        if len(entry) < 3 or entry[2] != "tmpfs":
            continue
        match = _MOUNT_SOURCE.match(entry[0])
        if match and int(match.group(1)) != current_run and not _pid_alive(int(match.group(1))):
            mount_point = entry[1].replace("\\040", " ")
            _run(["umount", "-l", mount_point], check=False)
            removed.append(f"tmpfs {mount_point}")
    return removed


def _choose_subnet(run_id: int) -> str:
    used = _run(["ip", "-o", "-4", "addr", "show"], check=False)
    for step in range(250):
        third = (run_id + step) % 250 + 1
        candidate = f"{SUBNET_PREFIX}.{third}"
        if f" {candidate}." not in used:
            return candidate
    raise Unavailable(f"no free {SUBNET_PREFIX}.X.0/24 subnet for the bridge")


@dataclass
class Network:
    run_id: int
    node_ids: list[int]
    subnet: str
    nft_reason: str | None = None
    """Why partitions cannot be made (None: nftables works in the namespaces)."""
    created: list[str] = field(default_factory=list)
    blocked: dict[int, tuple[frozenset[int], frozenset[int]]] = field(default_factory=dict)

    @property
    def bridge(self) -> str:
        return f"chb{self.run_id}"

    def namespace(self, node_id: int) -> str:
        return ns_name(self.run_id, node_id)

    def veth(self, node_id: int) -> str:
        return f"chv{self.run_id}n{node_id}"

    def address(self, node_id: int) -> str:
        return f"{self.subnet}.{10 + node_id}"

    @property
    def client_address(self) -> str:
        return f"{self.subnet}.1"

    def exec_prefix(self, node_id: int) -> list[str]:
        """`ip netns exec <ns>`: execs the command in place, so the pid is the command's."""
        return ["ip", "netns", "exec", self.namespace(node_id)]

    @classmethod
    def create(cls, run_id: int, node_ids: Iterable[int]) -> Network:
        if shutil.which("ip") is None:
            raise Unavailable("iproute2 (`ip`) is not installed")
        if os.geteuid() != 0:
            raise Unavailable("network namespaces need root (CAP_NET_ADMIN)")
        network = cls(run_id=run_id, node_ids=list(node_ids), subnet=_choose_subnet(run_id))
        try:
            network._build()
        except (OSError, subprocess.SubprocessError) as error:
            detail = getattr(error, "stderr", "") or str(error)
            network.close()
            raise Unavailable(f"cannot build namespaces/bridge: {detail.strip()}") from None
        return network

    def _build(self) -> None:
        _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        self.created.append(f"link {self.bridge}")
        _run(["ip", "addr", "add", f"{self.client_address}/24", "dev", self.bridge])
        _run(["ip", "link", "set", self.bridge, "up"])
        for node_id in self.node_ids:
            ns = self.namespace(node_id)
            _run(["ip", "netns", "add", ns])
            self.created.append(f"netns {ns}")
            _run(
                [
                    "ip",
                    "link",
                    "add",
                    self.veth(node_id),
                    "type",
                    "veth",
                    "peer",
                    "name",
                    "eth0",
                    "netns",
                    ns,
                ]
            )
            _run(["ip", "link", "set", self.veth(node_id), "master", self.bridge, "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{self.address(node_id)}/24", "dev", "eth0"])
            _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        if shutil.which("nft") is None:
            self.nft_reason = "nftables (`nft`) is not installed"
            return
        for node_id in self.node_ids:
            try:
                _run([*self.exec_prefix(node_id), "nft", "-f", "-"], stdin=NFT_TABLE)
            except subprocess.CalledProcessError as error:
                self.nft_reason = f"nft failed in the namespace: {error.stderr.strip()}"
                return

    # ---- partitions ------------------------------------------------------------------------
    def block(
        self, node_id: int, *, outgoing: Iterable[int] = (), incoming: Iterable[int] = ()
    ) -> None:
        """Node `node_id` drops packets to `outgoing` and from `incoming` (node ids)."""
        if self.nft_reason:
            raise Unavailable(self.nft_reason)
        out_set, in_set = frozenset(outgoing), frozenset(incoming)
        script = ["flush set inet chaos out_block", "flush set inet chaos in_block"]
        if out_set:
            addresses = ", ".join(self.address(n) for n in sorted(out_set))
            script.append(f"add element inet chaos out_block {{ {addresses} }}")
        if in_set:
            addresses = ", ".join(self.address(n) for n in sorted(in_set))
            script.append(f"add element inet chaos in_block {{ {addresses} }}")
        _run([*self.exec_prefix(node_id), "nft", "-f", "-"], stdin="\n".join(script) + "\n")
        self.blocked[node_id] = (out_set, in_set)

    def partition(self, groups: list[set[int]]) -> None:
        """Nodes talk only within their group (a node in two groups bridges them)."""
        for node_id in self.node_ids:
            reachable = set().union(*(g for g in groups if node_id in g)) or {node_id}
            cut = set(self.node_ids) - reachable
            self.block(node_id, outgoing=cut, incoming=cut)

    def heal(self) -> None:
        for node_id in list(self.blocked):
            self.block(node_id)
        self.blocked.clear()

    def close(self) -> None:
        """Delete the namespaces (their veth ends go with them) and the bridge. Processes
        still running inside a namespace are SIGKILLed first (the harness's own nodes)."""
        for node_id in self.node_ids:
            ns = self.namespace(node_id)
            pids = _run(["ip", "netns", "pids", ns], check=False).split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _run(["ip", "netns", "del", ns], check=False)
            _run(["ip", "link", "del", self.veth(node_id)], check=False)
        _run(["ip", "link", "del", self.bridge], check=False)
        self.created.clear()
