"""One quorum member in its own process, driven by JSON lines (for the process tests).

    python -m tests.metadata_quorum.quorum_proc '<json config>'

Config keys: node_id, voters ("1@127.0.0.1:p,..."), data_dir, secret, and optional
election_timeout_ms, session_timeout_ms, heartbeat_interval_ms, attempt_timeout_ms.

stdin: one request per line, `{"id": n, "op": ..., ...}`; stdout: `{"id": n, "ok": true, ...}`
or `{"id": n, "ok": false, "error": "NO_NODE"}`, plus unsolicited `{"event": ...}` lines
(watch events, session expiry). Ops: create, set, delete, get (barrier read), get_local,
children_local (optionally "watch": true), exists_local, status, digest, session, sync,
timed_sets (n sequential writes, their latencies in ms),
keep_ephemeral (create an ephemeral node and re-create it after every session expiry),
quit. A line `{"ready": true, ...}` is printed once the member is ready.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import trio

from trafka.metadata_quorum.bridge import MetadataQuorum, SessionEvent, open_metadata_quorum
from trafka.metadata_quorum.config import QuorumConfig, parse_voters
from trafka.metadata_quorum.tree import ZooKeeperError


def emit(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class Member:
    def __init__(self, quorum: MetadataQuorum) -> None:
        self.quorum = quorum
        self.kept: dict[str, bytes] = {}

    async def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        quorum = self.quorum
        op = request["op"]
        path = request.get("path", "/")
        data = request.get("data", "").encode()
        watch = bool(request.get("watch", False))
        if op == "create":
            created = await quorum.create(
                path,
                data,
                ephemeral=bool(request.get("ephemeral")),
                sequential=bool(request.get("sequential")),
            )
            return {"path": created}
        if op == "keep_ephemeral":
            self.kept[path] = data
            await quorum.create(path, data, ephemeral=True)
            return {"path": path}
        if op == "set":
            stat = await quorum.set_data(path, data, request.get("version", -1))
            return {"version": stat.version}
        if op == "delete":
            await quorum.delete(path, request.get("version", -1))
            return {}
        if op in ("get", "get_local"):
            if op == "get":
                value, stat = await quorum.get(path, watch=watch)
            else:
                value, stat = quorum.get_local(path, watch=watch)
            return {"data": value.decode(), "owner": stat.ephemeral_owner, "czxid": stat.czxid}
        if op == "exists_local":
            found = quorum.exists_local(path, watch=watch)
            return {"exists": found is not None, "owner": found.ephemeral_owner if found else 0}
        if op == "stat_children":
            found = quorum.exists_local(path)
            return {"count": found.num_children if found else 0}
        if op == "children_local":
            return {"children": quorum.children_local(path, watch=watch)}
        if op == "burst":
            # n creates from `tasks` concurrent writers; reports what was acknowledged.
            acknowledged: list[str] = []
            failed: list[str] = []
            prefix, n, tasks = path, int(request["n"]), int(request.get("tasks", 8))
            await quorum.create_recursive(prefix)

            async def writer(first: int) -> None:
                for index in range(first, n, tasks):
                    try:
                        acknowledged.append(await quorum.create(f"{prefix}/b{index:05d}"))
                    except ZooKeeperError as error:
                        failed.append(f"{index}:{error.code.name}")

            async with trio.open_nursery() as nursery:
                for first in range(tasks):
                    nursery.start_soon(writer, first)
            return {"acknowledged": acknowledged, "failed": failed}
        if op == "timed_sets":
            # n sequential writes of `path`, each timed in this process (milliseconds)
            latencies: list[float] = []
            for index in range(int(request["n"])):
                started = trio.current_time()
                await quorum.set_data(path, b"%d" % index)
                latencies.append((trio.current_time() - started) * 1000)
            return {"latencies_ms": latencies}
        if op == "sync":
            return {"zxid": await quorum.sync()}
        if op == "snapshot":
            quorum.force_snapshot()
            return {}
        if op == "digest":
            return {"zxid": quorum.last_zxid(), "digest": quorum.tree_digest()}
        if op == "session":
            return {"session_id": quorum.session_id}
        if op == "status":
            status = quorum.status()
            return {
                "leader_id": status.leader_id,
                "is_leader": status.is_leader,
                "term": status.leader_epoch,
                "high_watermark": status.high_watermark,
            }
        raise ValueError(f"unknown op {op!r}")

    async def serve_request(self, request: dict[str, Any]) -> None:
        reply: dict[str, Any] = {"id": request.get("id")}
        try:
            reply.update(await self.handle(request))
            reply["ok"] = True
        except ZooKeeperError as error:
            reply.update(ok=False, error=error.code.name)
        except Exception as error:
            reply.update(ok=False, error=repr(error))
        emit(reply)

    async def forward_events(self) -> None:
        async for event in self.quorum.events():
            if isinstance(event, SessionEvent):
                recreated = []
                for path, data in self.kept.items():
                    try:
                        await self.quorum.create(path, data, ephemeral=True)
                        recreated.append(path)
                    except ZooKeeperError as error:
                        emit({"event": "recreate_failed", "path": path, "error": error.code.name})
                emit(
                    {
                        "event": event.kind.value,
                        "old_session": event.old_session_id,
                        "new_session": event.new_session_id,
                        "recreated": recreated,
                    }
                )
            else:
                emit({"event": event.type.name, "path": event.path, "zxid": event.zxid})


async def read_lines(stream: trio.lowlevel.FdStream) -> Any:
    buffer = b""
    while True:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)


async def main(settings: dict[str, Any]) -> None:
    config = QuorumConfig(
        node_id=settings["node_id"],
        voters=parse_voters(settings["voters"]),
        data_dir=Path(settings["data_dir"]),
        secret=settings["secret"],
        election_timeout_ms=settings.get("election_timeout_ms", 200),
        session_timeout_ms=settings.get("session_timeout_ms", 1500),
        heartbeat_interval_ms=settings.get("heartbeat_interval_ms", 300),
        attempt_timeout_ms=settings.get("attempt_timeout_ms", 500),
        request_timeout_ms=settings.get("request_timeout_ms", 20_000),
        fsync_interval_ms=settings.get("fsync_interval_ms", 1000),
    )
    async with open_metadata_quorum(config) as quorum:
        await quorum.wait_ready()
        member = Member(quorum)
        emit({"ready": True, "node_id": config.node_id, "session_id": quorum.session_id})
        async with trio.open_nursery() as nursery:
            nursery.start_soon(member.forward_events)
            stdin = trio.lowlevel.FdStream(os.dup(0))
            async for request in read_lines(stdin):
                if request.get("op") == "quit":
                    break
                nursery.start_soon(member.serve_request, request)
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main, json.loads(sys.argv[1]))
