"""Turning one line of bytes into an :class:`~core.audit.model.AuditEntry` (no I/O).

Part of :mod:`core.audit`. Used by the readers (:mod:`core.audit.read`) and by the writer, which
must tell a complete last line from an interrupted write (:func:`is_entry_object`).
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

from core.audit.model import BLANK, MAX_LINE_BYTES, OWN_FIELDS, AuditEntry
from core.fsutil import human_size


def is_blank(data: bytes) -> bool:
    """True for a line (bytes, without its LF) that holds only spaces, tabs and CR, or nothing:
    not an entry and not part of the chain."""
    return not data.strip(BLANK)


def load_object(data: bytes) -> dict[str, Any] | None:
    """The JSON object a line (UTF-8 bytes without its LF) holds, or None when it is not valid
    UTF-8, not valid JSON or not an object. Never raises."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None
    return obj if isinstance(obj, dict) else None


def is_entry_object(data: bytes) -> bool:
    """True when a line (bytes without its LF) is a complete JSON object. The writer uses it on
    a last line that lacks its newline: an object only lost its LF; anything else is an
    interrupted write (a torn line) to repair."""
    return load_object(data) is not None


def parse_line(
    log: str, lineno: int, data: bytes, total: int, digest: str, offset: int = -1
) -> AuditEntry:
    """The entry for one non-blank line.

    Args:
        log: path of the log (copied into the entry).
        lineno: the line's number (1-based, or negative from the end for ``tail``).
        data: the line's bytes without its LF, at most ``MAX_LINE_BYTES + 1`` of them.
        total: the line's full length in bytes (may exceed ``len(data)``).
        digest: SHA-256 hex of the whole line ("" when unknown).
        offset: byte offset of the line's first byte in the file (-1 when unknown).

    Returns an entry with ``error`` set when the line is longer than :data:`MAX_LINE_BYTES`,
    not UTF-8, not JSON or not a JSON object. Never raises.
    """
    raw = data[:MAX_LINE_BYTES].decode("utf-8", errors="replace")
    if total > MAX_LINE_BYTES:
        reason = (
            f"line is {human_size(total)}, longer than the "
            f"{human_size(MAX_LINE_BYTES)} an audit entry can be"
        )
        return AuditEntry(log, lineno, raw, digest, error=reason, offset=offset)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return AuditEntry(
            log, lineno, raw, digest, error=f"not valid UTF-8 (byte {exc.start})", offset=offset
        )
    try:
        obj = json.loads(text)
    except ValueError:
        return AuditEntry(log, lineno, raw, digest, error="not valid JSON", offset=offset)
    if not isinstance(obj, dict):
        return AuditEntry(log, lineno, raw, digest, error="not a JSON object", offset=offset)
    return _entry(log, lineno, raw.rstrip("\r"), digest, offset, obj)


def _entry(
    log: str, lineno: int, raw: str, digest: str, offset: int, obj: dict[str, Any]
) -> AuditEntry:
    """The entry of a line holding the JSON object ``obj`` (fields of the wrong type: None)."""
    details = obj.get("details")
    pid = obj.get("pid")
    return AuditEntry(
        log_path=log,
        line=lineno,
        raw=raw,
        digest=digest,
        timestamp=parse_ts(obj.get("timestamp")),
        operation=_str(obj.get("operation")),
        lock_path=_str(obj.get("lockPath")),
        details=details if isinstance(details, dict) else {},
        user=_str(obj.get("user")),
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        host=_str(obj.get("host")),
        via=_str(obj.get("via")),
        format=_str(obj.get("format")),
        result=_str(obj.get("result")),
        prev=_str(obj.get("prev")),
        foreign=OWN_FIELDS.isdisjoint(obj),
        offset=offset,
    )


def _str(v: object) -> str | None:
    """``v`` if it is a string, else None."""
    return v if isinstance(v, str) else None


def parse_ts(v: object) -> _dt.datetime | None:
    """ISO 8601 text (``Z`` or an offset; naive taken as UTC) to an aware UTC datetime; None
    for anything else. Never raises."""
    if not isinstance(v, str):
        return None
    try:
        ts = _dt.datetime.fromisoformat(v)
    except ValueError:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=_dt.UTC)
    return ts.astimezone(_dt.UTC)
