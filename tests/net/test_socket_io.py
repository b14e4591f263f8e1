"""`receive_now` / `send_now`: plain trio sockets read and written through their descriptor,
a checkpoint only when the kernel has nothing to give or no room to take. Bytes arrive whole
and in order across full buffers, frames split anywhere are reassembled, and a closed socket
is an error, never a read of whatever file took its number."""

from __future__ import annotations

import os
import socket as stdlib_socket

import pytest
import trio

from trafka.net.framing import FrameReader, receive_now, send_buffers, send_now


async def test_buffers_larger_than_the_socket_buffer_arrive_whole_and_in_order() -> None:
    left, right = trio.socket.socketpair()
    left.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_SNDBUF, 16 * 1024)
    buffers = [bytes([i % 251]) * (1000 + i) for i in range(600)]  # ~780 KB, many sends
    expected = b"".join(buffers)
    received = bytearray()
    async with trio.open_nursery() as nursery:

        async def slow_reader() -> None:
            while len(received) < len(expected):
                received.extend(await right.recv(7_000))
                await trio.sleep(0)

        nursery.start_soon(slow_reader)
        with trio.fail_after(20):
            await send_buffers(left, buffers)
    assert bytes(received) == expected
    left.close()
    right.close()


async def test_frames_split_anywhere_are_read_whole() -> None:
    left, right = trio.socket.socketpair()
    frames = [os.urandom(n) for n in (0, 1, 5, 4096, 70_000, 3)]
    wire = b"".join(len(f).to_bytes(4, "big") + f for f in frames)
    reader = FrameReader(right)
    got: list[bytes] = []
    async with trio.open_nursery() as nursery:

        async def dribble() -> None:
            for start in range(0, len(wire), 777):  # pieces that cut sizes and bodies
                await send_now(left, (wire[start : start + 777],))
                await trio.sleep(0.001)
            left.close()

        nursery.start_soon(dribble)
        with trio.fail_after(20):
            while (frame := await reader.next_frame()) is not None:
                got.append(bytes(frame))
    assert got == frames
    right.close()


async def test_a_closed_socket_is_an_error_not_a_read_of_a_reused_descriptor() -> None:
    left, right = trio.socket.socketpair()
    right.close()
    other_left, other_right = stdlib_socket.socketpair()  # likely takes the freed number
    try:
        other_left.send(b"not yours")
        with pytest.raises(trio.ClosedResourceError):
            await receive_now(right, memoryview(bytearray(64)))
        with pytest.raises(trio.ClosedResourceError):
            await send_now(right, (b"x",))
        assert other_right.recv(64) == b"not yours"  # nothing was taken from it
    finally:
        other_left.close()
        other_right.close()
        left.close()


async def test_a_receiver_waiting_for_bytes_is_woken_by_a_close() -> None:
    left, right = trio.socket.socketpair()
    async with trio.open_nursery() as nursery:

        async def close_soon() -> None:
            await trio.sleep(0.05)
            right.close()

        nursery.start_soon(close_soon)
        with trio.fail_after(5), pytest.raises(trio.ClosedResourceError):
            await receive_now(right, memoryview(bytearray(64)))
    left.close()
