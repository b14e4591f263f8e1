"""Hand-built Kafka requests over a plain socket (for bad-input and handshake tests)."""

from __future__ import annotations

import socket
import struct

from trafka.net import codec, headers, protocol


def frame_request(api_key: int, api_version: int, correlation_id: int, body: bytes) -> bytes:
    try:
        header_version = protocol.request_header_version(api_key, api_version)
    except codec.CodecError:  # unknown API or version: header v1 like any classic request
        header_version = 2 if api_key == 18 and api_version >= 3 else 1
    header = headers.encode_request_header(
        api_key, api_version, correlation_id, "raw-test", header_version
    )
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def read_frame(sock: socket.socket, timeout_s: float = 10.0) -> bytes | None:
    """One response frame, or None when the server closed the connection."""
    sock.settimeout(timeout_s)
    size_bytes = _read_exactly(sock, 4)
    if size_bytes is None:
        return None
    (size,) = struct.unpack(">i", size_bytes)
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, count: int) -> bytes | None:
    data = b""
    while len(data) < count:
        try:
            chunk = sock.recv(count - len(data))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


def api_versions(port: int, version: int) -> tuple[int, dict[int, tuple[int, int]]]:
    """Send ApiVersions vN (empty body fields); return (error_code, {api_key: (min, max)})."""
    request_cls = codec.request_class(18, min(version, 3))
    assert request_cls is not None
    if version >= 3:
        body = codec.encode_request(
            request_cls(client_software_name="raw", client_software_version="1.0")
        )
    else:
        body = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(frame_request(18, version, 7, body))
        frame = read_frame(sock)
    assert frame is not None, "connection closed"
    (correlation_id,) = struct.unpack_from(">i", frame, 0)
    assert correlation_id == 7
    (error_code,) = struct.unpack_from(">h", frame, 4)
    if error_code != 0 or version > 3:
        # v0 body layout: error, int32 count, entries (KIP-511)
        (count,) = struct.unpack_from(">i", frame, 6)
        entries = [struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(count)]
        return error_code, {k: (lo, hi) for k, lo, hi in entries}
    response = codec.decode_response(18, version, frame, 4)
    return int(response.error_code), {
        int(a.api_key): (int(a.min_version), int(a.max_version)) for a in response.api_keys
    }
