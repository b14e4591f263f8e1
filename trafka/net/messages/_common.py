"""Shared imports for the declared message modules (kio's frozen-dataclass style).

Every class carries the ClassVars kio's reader and writer look at: ``__type__``,
``__version__``, ``__flexible__``, ``__api_key__``, ``__header_schema__``. Field metadata
carries ``kafka_type`` exactly as kio's generated classes do, so
``kio.serial.entity_reader`` and ``kio.serial.entity_writer`` serve these classes too.
The message modules must NOT use ``from __future__ import annotations``: kio
introspects real (not string) field types.
"""

from __future__ import annotations

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1

__all__ = ("RequestHeaderV1", "RequestHeaderV2", "ResponseHeaderV0", "ResponseHeaderV1")
