"""Metadata's topics written straight from the handler's dicts (issue 19, S2).

kio turns the handler's dicts into structs (`kio_shape.build`, with its phantom-type checks
on every int) and writes them field by field: a full Metadata of 10,000 partitions took
~0.4 s of the event loop, ~7x Kafka's time. A topic entry is a handful of fixed fields and
arrays of int32, so it is written here with `struct` directly: the same bytes as kio's for
every version the handler serves (v0-12; tests/net/test_metadata_encoding.py compares them
on random answers), and the rest of the response (brokers, cluster id, controller) is still
kio's (`large_requests.encode_in_slices`).

Per version (Kafka's MetadataResponse.json): v1+ is_internal; v5+ offline_replicas; v7+
leader_epoch; v8+ topic_authorized_operations; v9+ flexible (compact arrays and strings,
an empty tagged-field section per struct); v10+ topic_id; v12 nullable topic name (a null
name is written as null in any version: the handler never gives one below v12).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_PARTITION: Final = struct.Struct(">hii")
"""error_code, partition_index, leader_id."""
_PARTITION_WITH_EPOCH: Final = struct.Struct(">hiii")
"""... and leader_epoch (v7+)."""
_ZERO_UUID: Final = uuid.UUID(int=0)

Partition = tuple[int, int, int, int, Sequence[int], Sequence[int], Sequence[int]]
"""error_code, partition_index, leader_id, leader_epoch, replica_nodes, isr_nodes,
offline_replicas."""
FIRST_FLEXIBLE_VERSION: Final = 9


def encode_topic(version: int, topic: Mapping[str, Any], out: bytearray) -> None:
    """Append one MetadataResponseTopic of `version` to `out`: `topic` holds the topic's
    fields by their kio names, its `partitions` as `Partition` tuples."""
    flexible = version >= FIRST_FLEXIBLE_VERSION
    out += _INT16.pack(topic["error_code"])
    _string(topic["name"], flexible, out)
    if version >= 10:
        out += (topic["topic_id"] or _ZERO_UUID).bytes
    if version >= 1:
        out.append(1 if topic["is_internal"] else 0)
    partitions: Sequence[Partition] = topic["partitions"]
    _count(len(partitions), flexible, out)
    with_epoch = version >= 7
    with_offline = version >= 5
    for error_code, index, leader, epoch, replicas, isr, offline in partitions:
        if with_epoch:
            out += _PARTITION_WITH_EPOCH.pack(error_code, index, leader, epoch)
        else:
            out += _PARTITION.pack(error_code, index, leader)
        _int32s(replicas, flexible, out)
        _int32s(isr, flexible, out)
        if with_offline:
            _int32s(offline, flexible, out)
        if flexible:
            out.append(0)  # no tagged fields
    if version >= 8:
        out += _INT32.pack(topic["topic_authorized_operations"])
    if flexible:
        out.append(0)


def _string(value: str | None, flexible: bool, out: bytearray) -> None:
    if value is None:
        if flexible:
            out.append(0)
        else:
            out += _INT16.pack(-1)
        return
    raw = value.encode()
    if flexible:
        _uvarint(len(raw) + 1, out)
    else:
        out += _INT16.pack(len(raw))
    out += raw


def _count(count: int, flexible: bool, out: bytearray) -> None:
    if flexible:
        _uvarint(count + 1, out)
    else:
        out += _INT32.pack(count)


def _int32s(values: Sequence[int], flexible: bool, out: bytearray) -> None:
    _count(len(values), flexible, out)
    if values:
        out += struct.pack(f">{len(values)}i", *values)


def _uvarint(value: int, out: bytearray) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
