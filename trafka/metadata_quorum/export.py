"""`ktool quorum export`: the whole znode tree as one JSON document (read by the Spark audit).

Format (version 1; docs/metadata-quorum.md has the same text):

    {
      "format": "trafka-metadata-quorum-export",
      "version": 1,
      "exported_at_ms": 1700000000000,
      "status": {"node_id": 1, "leader_id": 1, "leader_epoch": 3, "high_watermark": 120,
                 "last_zxid": 118, "cluster_id": "...", "source": "learner|data-dir|node"},
      "nodes": [
        {"path": "/", "data": "", "data_base64": "", "czxid": 0, "mzxid": 0, "pzxid": 7,
         "ctime_ms": 0, "mtime_ms": 0, "version": 0, "cversion": 5, "ephemeral_owner": 0,
         "data_length": 0, "num_children": 5},
        ...
      ],
      "sessions": [{"session_id": 12, "owner": "node-1", "timeout_ms": 9000,
                    "ephemerals": ["/brokers/ids/1", "/controller"]}]
    }

`nodes` is depth-first with children in sorted order, so a parent always precedes its
children. `data` is the payload as UTF-8 text, or null when it is not valid UTF-8;
`data_base64` always holds the exact bytes. Pure: no clock, the caller passes the time.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

from trafka.metadata_quorum.tree import Stat, ZNodeTree

EXPORT_FORMAT = "trafka-metadata-quorum-export"
EXPORT_VERSION = 1


def node_document(path: str, data: bytes, stat: Stat) -> dict[str, Any]:
    """One znode of the export: path, data (UTF-8 text or None, and base64), and its Stat."""
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {
        "path": path,
        "data": text,
        "data_base64": base64.b64encode(data).decode("ascii"),
        **dataclasses.asdict(stat),
    }


def export_tree(
    tree: ZNodeTree, *, exported_at_ms: int, status: dict[str, Any] | None = None
) -> dict[str, Any]:
    nodes = [node_document(path, data, stat) for path, data, stat in tree.walk("/")]
    sessions = [
        {
            "session_id": s.session_id,
            "owner": s.owner,
            "timeout_ms": s.timeout_ms,
            "ephemerals": list(s.ephemerals),
        }
        for s in tree.sessions()
    ]
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at_ms": exported_at_ms,
        "status": {"last_zxid": tree.last_zxid, **(status or {})},
        "nodes": nodes,
        "sessions": sessions,
    }
