"""Size-prefixed frames: ``size int32 (big-endian)`` then ``size`` bytes (PROTO-07).

`FrameReader` reads requests from a trio socket with ``recv_into`` into one preallocated
receive buffer per connection (PLATFORM.md §4: about twice the throughput of
``receive_some`` plus concatenation). The size prefix is checked against the limit
(``socket.request.max.bytes``, default 104857600) *before* anything is allocated for the
frame (PROTO-05, DESIGN decision 6), then the request header's first 8 bytes (api key,
version, correlation id) are shown to the caller's `check_header` before anything else is
reserved or read; a frame that does not fit the receive buffer gets its own buffer that
grows with the bytes actually received (doubling, from 64 KiB), never the announced size
at once: a 4-byte prefix claiming 100 MB costs nothing until 100 MB arrive (issue 12).

`FileRegion` and `send_chunks` are the writing side: a response is a list of byte chunks and
file regions, and file regions go out with ``os.sendfile`` (non-blocking, parking on
``trio.lowlevel.wait_writable``); regions up to 16 KiB are read (one pread) and sent in one
``send`` with the bytes around them (fewer syscalls, one segment). One writer task per
connection owns the socket's sending side, so raw-fd sendfile and ``send`` never interleave.
"""

from __future__ import annotations

import errno
import mmap
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

import trio

DEFAULT_SOCKET_REQUEST_MAX_BYTES: Final = 104_857_600
DEFAULT_RECEIVE_BUFFER_BYTES: Final = 64 * 1024
_SIZE_BYTES: Final = 4
_HEADER_PEEK_BYTES: Final = 8
"""api_key int16, api_version int16, correlation_id int32: what `check_header` sees."""
_MIN_LARGE_FRAME_BYTES: Final = 64 * 1024
_INITIAL_BUFFER_BYTES: Final = 4 * 1024
"""A connection's receive buffer starts this small and grows (to `receive_buffer_bytes`)
when a frame needs it: 1,000 idle connections held 64 MiB of zeroed buffers (S2, issue 19)."""
_NO_BUFFER: Final = bytearray()
"""What a plain socket's reader holds while it waits with no bytes pending: nothing (never
written: `_make_room` allocates first)."""
_NO_VIEW: Final = memoryview(_NO_BUFFER)
_MAPPED_FRAME_BYTES: Final = 1024 * 1024
"""Frames of this size and more are read into an anonymous mapping of their whole size."""


class FrameError(Exception):
    """The peer sent bytes that cannot be framed; the connection must be closed."""


class FrameTooLarge(FrameError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame size {size} outside 0..{limit} (socket.request.max.bytes)")
        self.size = size
        self.limit = limit


class TruncatedFrame(FrameError):
    """The peer closed the connection in the middle of a frame."""


@dataclass(frozen=True, slots=True)
class FileRegion:
    """`length` bytes of the file at `path` starting at `position`, sent with sendfile."""

    path: str
    position: int
    length: int

    def __post_init__(self) -> None:
        if self.position < 0 or self.length < 0:
            raise ValueError(f"bad file region {self}")


Chunk = bytes | bytearray | memoryview | FileRegion


def chunks_size(chunks: Sequence[Chunk]) -> int:
    return sum(c.length if isinstance(c, FileRegion) else len(c) for c in chunks)


class FrameReader:
    """Reads size-prefixed frames from a trio socket into a buffer that starts small and
    grows to `receive_buffer_bytes` when a frame needs it (larger frames get their own).

    On a plain socket the buffer is held only while bytes are there to read or pending: a
    reader that finds the socket empty between frames lets its buffer go before it waits,
    and allocates one of the same size when the socket is readable (idle connections hold
    none; S2, issue 19)."""

    __slots__ = (
        "_buffer",
        "_capacity",
        "_end",
        "_limit",
        "_plain",
        "_size",
        "_socket",
        "_start",
        "_view",
    )

    def __init__(
        self,
        socket: trio.socket.SocketType,
        *,
        max_frame_bytes: int = DEFAULT_SOCKET_REQUEST_MAX_BYTES,
        receive_buffer_bytes: int = DEFAULT_RECEIVE_BUFFER_BYTES,
    ) -> None:
        if receive_buffer_bytes < 2 * _SIZE_BYTES:
            raise ValueError("receive buffer too small")
        self._socket = socket
        self._plain = is_plain(socket)
        self._limit = max_frame_bytes
        self._capacity = receive_buffer_bytes
        self._size = min(receive_buffer_bytes, _INITIAL_BUFFER_BYTES)
        """The size of the buffer to allocate when the reader holds none."""
        self._buffer = _NO_BUFFER
        self._view = _NO_VIEW
        self._start = 0
        self._end = 0

    def _make_room(self) -> None:
        """A buffer with a free tail: allocated if none is held, compacted if full."""
        if self._buffer is _NO_BUFFER:
            self._buffer = bytearray(self._size)
            self._view = memoryview(self._buffer)
            self._start = self._end = 0
        elif self._end == len(self._buffer):
            pending = self._end - self._start
            self._buffer[:pending] = self._view[self._start : self._end]
            self._start, self._end = 0, pending

    async def _receive(self) -> int:
        """Receive into the free tail of the buffer; on a plain socket only waiting is a
        checkpoint (as `receive_now`), and a wait with nothing pending holds no buffer."""
        if not self._plain:
            self._make_room()
            received: int = await self._socket.recv_into(self._view[self._end :])
            self._end += received
            return received
        while True:
            self._make_room()
            ready = read_ready(self._socket, self._view[self._end :])
            if ready is not None:
                self._end += ready
                return ready
            if self._start == self._end:
                self._size = len(self._buffer)
                self._buffer = _NO_BUFFER
                self._view = _NO_VIEW
            await trio.lowlevel.wait_readable(self._socket)

    async def next_frame(
        self,
        reserve: Callable[[int], Awaitable[None]] | None = None,
        check_header: Callable[[bytes], None] | None = None,
    ) -> bytes | memoryview | None:
        """The next frame's payload, or None on a clean end of stream between frames.

        Raises FrameTooLarge before allocating for an oversize or negative prefix, and
        TruncatedFrame when the stream ends inside a frame. `check_header(first_bytes)` is
        called once per frame with its first min(size, 8) bytes (api key, version,
        correlation id) before anything else happens for it, and may raise to refuse it;
        `reserve(size)` is awaited next, before the body is read or allocated (the server's
        byte budgets).
        """
        reserved = False
        while True:
            available = self._end - self._start
            if available >= _SIZE_BYTES:
                size = int.from_bytes(
                    self._view[self._start : self._start + _SIZE_BYTES], "big", signed=True
                )
                if size < 0 or size > self._limit:
                    raise FrameTooLarge(size, self._limit)
                if not reserved:
                    head = min(size, _HEADER_PEEK_BYTES)
                    if available - _SIZE_BYTES < head:
                        if await self._receive() == 0:
                            raise TruncatedFrame("stream ended inside a request header")
                        continue
                    if check_header is not None:
                        begin = self._start + _SIZE_BYTES
                        check_header(bytes(self._view[begin : begin + head]))
                    if reserve is not None:
                        await reserve(size)
                    reserved = True
                if available - _SIZE_BYTES >= size:
                    begin = self._start + _SIZE_BYTES
                    self._start = begin + size
                    if self._start == self._end:
                        self._start = self._end = 0
                    return bytes(self._view[begin : begin + size])
                needed = size + _SIZE_BYTES
                if needed > len(self._buffer):
                    if needed > self._capacity:
                        return await self._read_large_frame(size)
                    self._grow(needed)
            if await self._receive() == 0:
                if self._end == self._start:
                    return None
                raise TruncatedFrame(
                    f"stream ended with {self._end - self._start} bytes of an unfinished frame"
                )

    def _grow(self, needed: int) -> None:
        """A larger buffer (doubling, at most the capacity) holding the pending bytes."""
        size = min(self._capacity, max(needed, 2 * len(self._buffer)))
        buffer = bytearray(size)
        buffer[: self._end - self._start] = self._view[self._start : self._end]
        self._end -= self._start
        self._start = 0
        self._buffer = buffer
        self._view = memoryview(buffer)

    async def _read_large_frame(self, size: int) -> memoryview:
        """Read a frame larger than the receive buffer into a buffer that doubles as bytes
        arrive (at most twice what was received, never the announced size up front).

        From `_MAPPED_FRAME_BYTES` on, the buffer is instead an anonymous private mapping of
        the whole size: the kernel backs its pages only as bytes arrive, so it costs no more
        memory than the doubling buffer, and nothing is copied or zero-filled on the event
        loop (growing a bytearray to tens of MB copied and faulted it in one step: the loop
        watchdog caught such a step holding a loaded node's loop for a second)."""
        have = self._end - self._start - _SIZE_BYTES
        received_part = self._view[self._start + _SIZE_BYTES : self._end]
        if size >= _MAPPED_FRAME_BYTES:
            mapped = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            mapped[:have] = received_part
            self._start = self._end = 0
            return await self._fill(mapped, have, size)
        frame = bytearray(received_part)
        self._start = self._end = 0
        while have < size:
            if len(frame) == have:
                grow = min(size, max(2 * have, _MIN_LARGE_FRAME_BYTES)) - have
                frame.extend(bytes(grow))
            view = memoryview(frame)
            try:
                received: int = await self._socket.recv_into(view[have:])
            finally:
                view.release()
            if received == 0:
                raise TruncatedFrame(f"stream ended after {have} of {size} bytes")
            have += received
        # Read-only: kio's native reader refuses writable buffers, and nobody should write.
        return memoryview(frame).toreadonly()

    async def _fill(self, mapped: mmap.mmap, have: int, size: int) -> memoryview:
        # On an error the mapping is unmapped when the last view of it is collected.
        view = memoryview(mapped)
        while have < size:
            received: int = await self._socket.recv_into(view[have:])
            if received == 0:
                raise TruncatedFrame(f"stream ended after {have} of {size} bytes")
            have += received
        return view.toreadonly()


async def send_file_region(socket: trio.socket.SocketType, region: FileRegion) -> None:
    """Send a file region with non-blocking os.sendfile (PLATFORM.md §4).

    Raises OSError if the file is shorter than the region: the frame's size prefix is
    already on the wire, so the caller must close the connection.
    """
    fd = os.open(region.path, os.O_RDONLY)
    try:
        offset = region.position
        end = region.position + region.length
        while offset < end:
            try:
                sent = os.sendfile(socket.fileno(), fd, offset, end - offset)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(socket)
                continue
            if sent == 0:
                raise OSError(errno.EIO, f"{region.path} ended before {end}")
            offset += sent
    finally:
        os.close(fd)


def read_file_region(region: FileRegion) -> bytes:
    """A small file region's bytes (one pread): sent with the bytes around it in one
    ``send``, where sendfile would cost an open, three sends and three segments for the
    receiver to wake on (a parked follower Fetch answering one small batch). Raises OSError
    if the file is shorter than the region, as `send_file_region`."""
    fd = os.open(region.path, os.O_RDONLY)
    try:
        data = os.pread(fd, region.length, region.position)
        while len(data) < region.length:
            more = os.pread(fd, region.length - len(data), region.position + len(data))
            if not more:
                raise OSError(
                    errno.EIO, f"{region.path} ended before {region.position + region.length}"
                )
            data += more
        return data
    finally:
        os.close(fd)


_READ_REGION_BELOW_BYTES: Final = 16 * 1024
"""File regions up to this size are read and sent with their neighbours (`send_chunks`)."""
_MAX_IOVECS: Final = 512
_JOIN_BELOW_BYTES: Final = 16 * 1024


def is_plain(socket: object) -> bool:
    """A plain trio socket, read and written through its descriptor by `receive_now` and
    `send_now` (not a TLS transport, not a test double)."""
    return isinstance(socket, trio.socket.SocketType)


def _descriptor(socket: trio.socket.SocketType) -> int:
    """The socket's descriptor, asked at each use: a closed socket's number may already
    belong to another file."""
    fd = socket.fileno()
    if fd < 0:
        raise trio.ClosedResourceError("socket was closed")
    return fd


async def receive_now(socket: trio.socket.SocketType, view: memoryview) -> int:
    """`recv_into` on a plain trio socket, waiting only when nothing is there.

    trio's socket methods end every successful call with a checkpoint: the task goes to the
    back of the run queue and the loop polls epoll before it runs again. A request crosses
    several such calls on each node it visits (a synchronous commit on 3 nodes, a dozen),
    each a scheduling pass of latency for bytes already received. Here only waiting is a
    checkpoint, so callers that loop must checkpoint now and then themselves (the server's
    read loop does, every `CHECKPOINT_EVERY` frames)."""
    while (received := read_ready(socket, view)) is None:
        await trio.lowlevel.wait_readable(socket)
    return received


def read_ready(socket: trio.socket.SocketType, view: memoryview) -> int | None:
    """`readv` into `view` of what a plain trio socket holds (0: end of stream), without
    waiting: None when nothing is there."""
    try:
        return os.readv(_descriptor(socket), (view,))
    except BlockingIOError:
        return None


async def send_now(
    socket: trio.socket.SocketType, buffers: Sequence[bytes | bytearray | memoryview]
) -> int:
    """`sendmsg` on a plain trio socket, as `receive_now`: a checkpoint only when the
    socket's send buffer is full."""
    while True:
        try:
            return os.writev(_descriptor(socket), buffers)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(socket)


CHECKPOINT_EVERY: Final = 8
"""Frames or responses a connection's loop handles between two checkpoints of its own (it
yields anyway whenever it waits)."""


async def send_buffers(
    socket: trio.socket.SocketType, buffers: Sequence[bytes | bytearray | memoryview]
) -> None:
    """Send buffers in order: small totals joined into one ``send``, large ones with
    scatter-gather ``sendmsg`` so record bytes are not copied."""
    plain = is_plain(socket)
    total = sum(len(b) for b in buffers)
    if total <= _JOIN_BELOW_BYTES or len(buffers) == 1:
        view = memoryview(b"".join(buffers) if len(buffers) > 1 else buffers[0]).cast("B")
        while view:
            sent_now: int = await (send_now(socket, (view,)) if plain else socket.send(view))
            view = view[sent_now:]
        return
    views = [memoryview(b).cast("B") for b in buffers if len(b)]
    index = 0
    while index < len(views):
        batch = views[index : index + _MAX_IOVECS]
        sent: int = await (send_now(socket, batch) if plain else socket.sendmsg(batch))
        while sent and index < len(views):
            head = views[index]
            if sent >= len(head):
                sent -= len(head)
                index += 1
            else:
                views[index] = head[sent:]
                sent = 0


async def send_chunks(socket: trio.socket.SocketType, chunks: Sequence[Chunk]) -> None:
    """Send chunks in order: byte chunks with sendmsg, file regions with sendfile (a TLS
    transport sends them itself: `trafka.net.tls.TlsTransport.send_chunks`)."""
    own = getattr(socket, "send_chunks", None)
    if own is not None:
        await own(chunks)
        return
    pending: list[bytes | bytearray | memoryview] = []
    for chunk in chunks:
        if isinstance(chunk, FileRegion):
            if chunk.length <= _READ_REGION_BELOW_BYTES:
                pending.append(read_file_region(chunk))
                continue
            if pending:
                await send_buffers(socket, pending)
                pending = []
            if chunk.length:
                await send_file_region(socket, chunk)
        else:
            pending.append(chunk)
    if pending:
        await send_buffers(socket, pending)
