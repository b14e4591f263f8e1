"""The nemeses: faults injected into a running `ChaosCluster`, each with its heal.

    isolate-one            one node cut off from every other node (clients still reach it)
    split                  a random minority / majority split
    bridge                 two halves that cannot talk, one node in both (it sees everyone)
    isolate-controller     the node that is the controller, cut off
    isolate-quorum-leader  the node that leads the metadata quorum (Raft), cut off
    one-way                a node's outgoing packets to the other nodes dropped (it still
                           receives theirs): asymmetric loss
    kill                   SIGKILL one node; heal: start it again
    pause                  SIGSTOP one node; heal: SIGCONT
    rolling-restart        SIGTERM (controlled shutdown) each node in turn, start it, wait
                           until it answers, next
    kill-all               SIGKILL every node at once; heal: start them all
    disk-full              fill the tmpfs holding one node's log dir; heal: free it (and
                           start the node if it stopped)

Network nemeses need the namespaces and nftables (`tests.chaos.netns`), disk-full the tmpfs;
when one is unavailable `inject` raises `Unavailable` with the reason and the harness
records the nemesis as skipped.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import trio

from tests.chaos.history import Fault
from tests.chaos.netns import Network, Unavailable
from tests.chaos.nodes import ChaosCluster
from tests.chaos.workload import Clock, admin_client
from trafka.client.metadata import describe_quorum_on, on_server

NETWORK_NEMESES = (
    "isolate-one",
    "split",
    "bridge",
    "isolate-controller",
    "isolate-quorum-leader",
    "one-way",
)
PROCESS_NEMESES = ("kill", "pause", "rolling-restart", "kill-all")
DISK_NEMESES = ("disk-full",)
ALL_NEMESES = (*NETWORK_NEMESES, *PROCESS_NEMESES, *DISK_NEMESES)


@dataclass
class Injected:
    fault: Fault
    heal: Callable[[], None]


class Nemeses:
    def __init__(
        self,
        cluster: ChaosCluster,
        network: Network | None,
        network_reason: str | None,
        rng: random.Random,
        clock: Clock,
        ready_timeout_s: float,
    ) -> None:
        self.cluster = cluster
        self.network = network
        self.network_reason = network_reason
        self.rng = rng
        self.clock = clock
        self.ready_timeout_s = ready_timeout_s
        self.node_ids = sorted(cluster.nodes)

    # ---- what is unavailable -----------------------------------------------------------------
    def unavailable(self, name: str) -> str | None:
        if name in NETWORK_NEMESES:
            if self.network is None:
                return self.network_reason or "no network namespaces"
            return self.network.nft_reason
        if name in DISK_NEMESES:
            if self.cluster.disk_node is None:
                return "no node has a small disk"
            return self.cluster.disk_reason
        return None

    # ---- who leads ---------------------------------------------------------------------------
    def controller(self) -> int | None:
        admin = admin_client(self.cluster.bootstrap_servers)
        try:
            controller = int(admin.list_topics(timeout=5).controller_id)
        except Exception:
            return None
        return controller if controller in self.cluster.nodes else None

    def quorum_leader(self) -> int | None:
        for node in self.cluster.nodes.values():
            if not node.running or node.paused:
                continue
            try:
                status = trio.run(on_server, node.host, node.port, 5.0, "chaos", describe_quorum_on)
            except Exception:
                continue
            if status.leader_id in self.cluster.nodes:
                return int(status.leader_id)
        return None

    # ---- inject ------------------------------------------------------------------------------
    def inject(self, name: str) -> Injected:
        reason = self.unavailable(name)
        if reason:
            raise Unavailable(reason)
        method: Callable[[Fault], Callable[[], None]] = getattr(self, "_" + name.replace("-", "_"))
        fault = Fault(nemesis=name, detail="", start=self.clock.now())
        heal = method(fault)
        return Injected(fault, heal)

    def _net(self) -> Network:
        assert self.network is not None
        return self.network

    def _isolate(self, fault: Fault, node_id: int, why: str) -> Callable[[], None]:
        others = set(self.node_ids) - {node_id}
        self._net().partition([{node_id}, others])
        fault.detail = f"node {node_id} ({why}) cut off from {sorted(others)}"
        fault.nodes = [node_id]
        return self._net().heal

    def _isolate_one(self, fault: Fault) -> Callable[[], None]:
        return self._isolate(fault, self.rng.choice(self.node_ids), "random")

    def _isolate_controller(self, fault: Fault) -> Callable[[], None]:
        controller = self.controller()
        if controller is None:
            return self._isolate(fault, self.rng.choice(self.node_ids), "controller unknown")
        return self._isolate(fault, controller, "controller")

    def _isolate_quorum_leader(self, fault: Fault) -> Callable[[], None]:
        leader = self.quorum_leader()
        if leader is None:
            return self._isolate(fault, self.rng.choice(self.node_ids), "quorum leader unknown")
        return self._isolate(fault, leader, "quorum leader")

    def _split(self, fault: Fault) -> Callable[[], None]:
        shuffled = self.node_ids[:]
        self.rng.shuffle(shuffled)
        minority = set(shuffled[: (len(shuffled) - 1) // 2])
        majority = set(shuffled) - minority
        self._net().partition([minority, majority])
        fault.detail = f"minority {sorted(minority)} / majority {sorted(majority)}"
        fault.nodes = sorted(minority)
        return self._net().heal

    def _bridge(self, fault: Fault) -> Callable[[], None]:
        shuffled = self.node_ids[:]
        self.rng.shuffle(shuffled)
        middle = shuffled[0]
        rest = shuffled[1:]
        half = len(rest) // 2
        left, right = set(rest[:half]) | {middle}, set(rest[half:]) | {middle}
        self._net().partition([left, right])
        fault.detail = (
            f"{sorted(left - {middle})} | {sorted(right - {middle})}, node {middle} in both"
        )
        fault.nodes = [middle]
        return self._net().heal

    def _one_way(self, fault: Fault) -> Callable[[], None]:
        node_id = self.rng.choice(self.node_ids)
        others = set(self.node_ids) - {node_id}
        self._net().block(node_id, outgoing=others)
        fault.detail = f"node {node_id} cannot send to {sorted(others)} (still receives)"
        fault.nodes = [node_id]
        return self._net().heal

    def _kill(self, fault: Fault) -> Callable[[], None]:
        node_id = self.rng.choice(self.node_ids)
        self.cluster.kill(node_id)
        fault.detail = f"SIGKILL node {node_id}"
        fault.nodes = [node_id]
        return lambda: self.cluster.start(node_id)

    def _pause(self, fault: Fault) -> Callable[[], None]:
        node_id = self.rng.choice(self.node_ids)
        self.cluster.pause(node_id)
        fault.detail = f"SIGSTOP node {node_id}"
        fault.nodes = [node_id]
        return lambda: self.cluster.resume(node_id)

    def _rolling_restart(self, fault: Fault) -> Callable[[], None]:
        order = self.node_ids[:]
        self.rng.shuffle(order)
        codes = []
        for node_id in order:
            codes.append(self.cluster.terminate(node_id))
            self.cluster.start(node_id)
            self.cluster.wait_ready([node_id], self.ready_timeout_s)
        fault.detail = f"SIGTERM+start in order {order}; exit codes {codes}"
        fault.nodes = order
        return lambda: None

    def _kill_all(self, fault: Fault) -> Callable[[], None]:
        for node_id in self.node_ids:
            self.cluster.kill(node_id)
        fault.detail = "SIGKILL every node"
        fault.nodes = list(self.node_ids)

        def heal() -> None:
            for node_id in self.node_ids:
                self.cluster.start(node_id)

        return heal

    def _disk_full(self, fault: Fault) -> Callable[[], None]:
        node_id = self.cluster.disk_node
        assert node_id is not None
        written = self.cluster.fill_disk(node_id)
        fault.detail = f"node {node_id}'s log dir tmpfs filled ({written >> 20} MiB)"
        fault.nodes = [node_id]

        def heal() -> None:
            self.cluster.free_disk(node_id)
            if not self.cluster.nodes[node_id].running:
                fault.detail += "; the node had stopped, started again"
                self.cluster.start(node_id)

        return heal
