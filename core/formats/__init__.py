"""Lock formats: bytes <-> :class:`core.record.LockRecord` (DESIGN.md, "Formats").

OWNER: formats helper. Interface (others rely on these exact names):

    detect(data: bytes, path: str = "") -> str
        Name of the format that accepts ``data`` (content first; the path only breaks ties,
        e.g. ``ledger/ledger.lock``). Raises ParseError (with the best reason) if none does.
    parse(data: bytes, path: str = "", *, format: str | None = None) -> LockRecord
        Parse with ``format`` or the detected one. Only ParseError ever escapes.
    serialize(record: LockRecord) -> bytes
        Bytes of a lock in ``record.format`` (sema, task-mcp, af-ledger). ValueError for a
        format we do not write.
"""

from __future__ import annotations

from core.record import LockRecord


def detect(data: bytes, path: str = "") -> str:
    raise NotImplementedError


def parse(data: bytes, path: str = "", *, format: str | None = None) -> LockRecord:
    raise NotImplementedError


def serialize(record: LockRecord) -> bytes:
    raise NotImplementedError
