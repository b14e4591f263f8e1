"""The log engine: Kafka's own on-disk format, synchronous, no networking, no consensus.

Record batch codec (v2, and decoding of v0/v1 message sets), compression codecs, segments,
offset and time indexes, the partition log (append, read, truncate, roll, retention,
compaction), recovery on start, and Kafka's checkpoint files.
"""
