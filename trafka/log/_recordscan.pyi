"""Type stub of the C record scanner (trafka/log/_recordscan.c)."""

def scan_records(
    data: bytes | bytearray | memoryview, start: int, end: int, count: int, need_keys: bool, /
) -> tuple[int, int, list[int] | None] | None: ...
