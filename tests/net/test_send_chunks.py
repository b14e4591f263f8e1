"""`send_chunks`: a response's bytes and file regions, in order. Small regions are read and
sent with their neighbours in one send (one segment for the receiver, no sendfile); large
ones go out with sendfile; a file shorter than its region is an OSError (the caller closes
the connection: the frame's size prefix is already on the wire)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from trafka.net.framing import FileRegion, send_chunks


class _CountingSocket:
    """Accepts every send whole and records it; no fileno (sendfile would fail)."""

    def __init__(self) -> None:
        self.sends: list[bytes] = []

    async def send(self, data: memoryview) -> int:
        self.sends.append(bytes(data))
        return len(data)


async def test_a_small_region_goes_out_in_one_send_with_its_neighbours(tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"JUNK" + b"records" * 100 + b"MORE")
    socket = _CountingSocket()
    await send_chunks(socket, [b"head", FileRegion(str(segment), 4, 700), b"tail"])  # type: ignore[arg-type]
    assert socket.sends == [b"head" + b"records" * 100 + b"tail"]


async def test_a_large_region_is_sent_whole_and_in_order(tmp_path: Path) -> None:
    payload = bytes(range(256)) * 400  # 100 KiB: sendfile
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"JUNK" + payload + b"MORE")
    left, right = trio.socket.socketpair()
    received = bytearray()
    expected = b"head" + payload + b"tail"
    async with trio.open_nursery() as nursery:

        async def receive() -> None:
            while len(received) < len(expected):
                received.extend(await right.recv(1 << 16))

        nursery.start_soon(receive)
        with trio.fail_after(10):
            await send_chunks(left, [b"head", FileRegion(str(segment), 4, len(payload)), b"tail"])
    assert bytes(received) == expected
    left.close()
    right.close()


@pytest.mark.parametrize("length", [100, 100_000])
async def test_a_file_shorter_than_its_region_is_an_error(tmp_path: Path, length: int) -> None:
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"x" * (length // 2))
    left, right = trio.socket.socketpair()  # its buffer holds what is sent before the error
    with pytest.raises(OSError), trio.fail_after(10):
        await send_chunks(left, [b"head", FileRegion(str(segment), 0, length)])
    left.close()
    right.close()
