"""The ``sema`` format: ``key=value`` lines (``pid``, ``timestamp``, ``tag``), shared by the
Rust ``sema`` and TypeScript ``semats`` tools (docs/specs/sema.txt, "Lock File Format";
docs/specs/semats.txt, "Parsing Rules").

Lockwarden writes more keys after those, which both tools ignore (``host``, ``start``,
``proc``, ``token``, ``ttl``, and ``acquired`` once a lock was refreshed): docs/formats.md,
"Formats" and "Refresh: age and expiry".
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from core.errors import ParseError
from core.formats._common import (
    MAX_PID,
    WHITESPACE,
    add_seconds,
    as_utc,
    clean_tag,
    clean_value,
    decode_text,
    from_unix,
    is_proc_id,
    is_token,
    number_text,
    raw_text,
    short,
)
from core.formats.writing import Built, WriteRequest
from core.record import LockRecord

FORMAT = "sema"

KNOWN_KEYS = ("pid", "timestamp", "tag", "host", "start", "proc", "token", "ttl", "acquired")
_KNOWN = frozenset(KNOWN_KEYS)
_OWN_KEYS = frozenset(KNOWN_KEYS[3:])
"""Lockwarden's keys (``host`` ... ``acquired``): a file with none of them is parsed without
looking for each (docs/performance.md, "Listing and watching 100,000 locks")."""
"""Keys with a meaning: the specs' three, then Lockwarden's, in the order we write them."""

_INT_RE = re.compile(r"^[+-]?[0-9]+\Z")
_FLOAT_RE = re.compile(r"^[+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")

_T = TypeVar("_T")

MAX_TIMESTAMP = 253402300799
"""Last second of year 9999 (the end of Python's ``datetime`` range)."""


def split_lines(text: str) -> dict[str, str]:
    """The ``key=value`` pairs of a sema file, later keys winning (as in the spec's Python
    snippet, docs/specs/sema.txt "Example: Parsing in Python").

    Rules (docs/specs/semats.txt "Parsing Rules" 1-4,
    docs/specs/sema.txt "Format Rules" 2 and 5): split on ``\\n`` (a ``\\r`` before
    it is part of the CRLF ending); split each line on its first ``=``; trim key and value (Unicode
    whitespace); skip empty lines and lines without ``=``. Lines with an empty key are skipped too.
    """
    pairs: dict[str, str] = {}
    for line in text.split("\n"):
        if "=" not in line:
            continue
        key, _, value = line.partition("=")
        key = key.strip(WHITESPACE)
        if not key:
            continue
        pairs[key] = value.strip(WHITESPACE)
    return pairs


def looks_like(text: str) -> bool:
    """True when some line has a ``=`` (the shape of a sema file; detection by content)."""
    return any("=" in line for line in text.split("\n"))


def _integer(pairs: dict[str, str], key: str) -> int:
    if key not in pairs:
        raise ParseError(f"no {key}= line (a sema lock needs pid= and timestamp=)")
    value = pairs[key]
    if not value:
        raise ParseError(f"{key} is empty")
    if not _INT_RE.match(value):
        raise ParseError(f"{key} is not an integer: {short(value)}")
    if len(value) > 30:
        raise ParseError(f"{key} is out of range: {short(value)}")
    return int(value)


def _float(value: str) -> float | None:
    if not _FLOAT_RE.match(value) or len(value) > 64:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _own_key(
    pairs: dict[str, str],
    metadata: dict[str, Any],
    key: str,
    convert: Callable[[str], _T | None],
) -> _T | None:
    """The value of Lockwarden's key ``key`` converted by ``convert``; None when absent, or
    when it does not fit (its text then stays in ``metadata``, for display)."""
    if key not in pairs:
        return None
    value = convert(pairs[key])
    if value is None:
        metadata[key] = pairs[key]
    return value


def parse(data: bytes, path: str = "") -> LockRecord:
    """Parse the bytes of a sema lock (``path``: for messages only).

    Rules: docs/specs/semats.txt "Parsing Rules" and "Error Cases", docs/specs/sema.txt "Field
    Definitions" and "Format Rules", as docs/formats.md, "Formats", states them with what
    Lockwarden adds: ``pid`` 1..2**32-1, unknown keys kept as text in ``record.metadata``,
    control characters in the tag made spaces, and its own keys (``host``, ``start``,
    ``token``, ``proc``, ``ttl``, ``acquired``) read into the record when their value fits
    (else left in ``metadata``). ``acquired_at`` is ``timestamp``, or ``acquired`` when earlier
    (docs/formats.md, "Refresh: age and expiry"), as an aware UTC datetime; ``expires_at``
    stays ``None`` (``LockRecord.effective_expiry()`` adds ``ttl``).

    Raises:
        ParseError: with a reason in plain words; nothing else escapes.
    """
    text = decode_text(data)
    pairs = split_lines(text)
    if not pairs:
        raise ParseError("no key=value lines: not a sema lock")
    pid = _integer(pairs, "pid")
    if pid <= 0:
        raise ParseError(f"pid must be a positive integer, not {pid}")
    if pid > MAX_PID:
        raise ParseError(f"pid is out of range: {pid}")
    timestamp = _integer(pairs, "timestamp")
    if timestamp < 0:
        raise ParseError(f"timestamp is negative: {timestamp}")
    if timestamp > MAX_TIMESTAMP:
        raise ParseError(f"timestamp is out of range (after the year 9999): {timestamp}")
    acquired_at = from_unix(timestamp, "timestamp")

    metadata: dict[str, Any] = {k: v for k, v in pairs.items() if k not in _KNOWN}
    tag = clean_value(pairs["tag"]) if "tag" in pairs else None
    if _OWN_KEYS.isdisjoint(pairs):  # another tool's lock (sema's own keys only)
        return LockRecord(path=path, format=FORMAT, holder=None, pid=pid, host=None,
                          acquired_at=acquired_at, expires_at=None, ttl=None, tag=tag,
                          metadata=metadata, raw=raw_text(data), token=None, start=None,
                          proc=None, renewed_at=None)

    def fits_ttl(value: str) -> float | None:
        ttl = _float(value)
        return ttl if ttl is not None and add_seconds(acquired_at, ttl) is not None else None

    def fits_acquired(value: str) -> int | None:
        if not _INT_RE.match(value) or len(value) > 30:
            return None
        seconds = int(value)
        return seconds if 0 <= seconds <= timestamp else None

    host = _own_key(pairs, metadata, "host", lambda v: sys.intern(clean_value(v)) or None)
    start = _own_key(pairs, metadata, "start", _float)
    proc = _own_key(pairs, metadata, "proc", lambda v: v if is_proc_id(v) else None)
    token = _own_key(pairs, metadata, "token", lambda v: v if is_token(v) else None)
    ttl = _own_key(pairs, metadata, "ttl", fits_ttl)
    acquired = _own_key(pairs, metadata, "acquired", fits_acquired)
    renewed_at: datetime | None = None
    expires_at: datetime | None = None
    if acquired is not None and acquired < timestamp:
        renewed_at, acquired_at = acquired_at, from_unix(acquired, "acquired")
        expires_at = add_seconds(renewed_at, ttl) if ttl is not None else None
    return LockRecord(
        path=path,
        format=FORMAT,
        holder=None,
        pid=pid,
        host=host,
        acquired_at=acquired_at,
        expires_at=expires_at,
        ttl=ttl,
        tag=tag,
        metadata=metadata,
        raw=raw_text(data),
        token=token,
        start=start,
        proc=proc,
        renewed_at=renewed_at,
    )


def format_start(start: float) -> str:
    """Text of a ``start=`` value: Unix seconds with 6 decimals (microseconds; psutil's
    ``create_time`` is at best that precise)."""
    return f"{start:.6f}"


def serialize(record: LockRecord) -> bytes:
    """The bytes of a sema lock for ``record`` (LF line endings, docs/specs/semats.txt
    "Line Endings").

    Writes ``pid``, ``timestamp`` (``renewed_at``, else ``acquired_at``, as whole Unix
    seconds), ``tag`` (when not ``None``), then Lockwarden's ``host``, ``start``, ``proc``,
    ``token``, ``ttl`` when set (docs/DESIGN.md "Formats"), and ``acquired`` (``acquired_at``) when
    it is earlier than ``timestamp`` (a refreshed lock). Every value has control characters
    replaced by spaces and is trimmed (docs/specs/semats.txt "Tag Sanitization",
    "Parsing Rules" 3), so no value can inject a line and ``parse(serialize(r))`` gives back what
    was written. ``metadata`` is not written.

    Raises:
        ValueError: no valid ``pid`` or ``acquired_at``, a non-finite/negative ``start`` or
            ``ttl``, or a ``token`` that is not 32 lowercase hex digits.
    """
    if record.pid is None or not 0 < record.pid <= MAX_PID:
        raise ValueError(f"a sema lock needs a PID in 1..{MAX_PID}, not {record.pid!r}")
    if record.acquired_at is None:
        raise ValueError("a sema lock needs acquired_at (its timestamp)")
    acquired = math.floor(as_utc(record.acquired_at).timestamp())
    renewed = record.renewed_at if record.renewed_at is not None else record.acquired_at
    timestamp = math.floor(as_utc(renewed).timestamp())
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise ValueError(f"timestamp out of range: {timestamp}")
    lines = [f"pid={record.pid}", f"timestamp={timestamp}"]
    if record.tag is not None:
        lines.append(f"tag={clean_tag(record.tag)}")
    if record.host is not None:
        host = clean_value(record.host)
        if host:
            lines.append(f"host={host}")
    if record.start is not None:
        if not (math.isfinite(record.start) and record.start >= 0):
            raise ValueError(f"start must be finite and >= 0, not {record.start!r}")
        lines.append(f"start={format_start(record.start)}")
    if record.proc is not None:
        if not is_proc_id(record.proc):
            raise ValueError(f"proc is not a process identity: {record.proc!r}")
        lines.append(f"proc={record.proc}")
    if record.token is not None:
        if not is_token(record.token):
            raise ValueError("token must be 32 lowercase hex digits")
        lines.append(f"token={record.token}")
    if record.ttl is not None:
        if not (math.isfinite(record.ttl) and record.ttl >= 0):
            raise ValueError(f"ttl must be finite and >= 0, not {record.ttl!r}")
        lines.append(f"ttl={number_text(float(record.ttl))}")
    if 0 <= acquired < timestamp:
        lines.append(f"acquired={acquired}")
    emptied = record.metadata.get("emptied")
    if isinstance(emptied, str) and clean_value(emptied):
        lines.append(f"emptied={clean_value(emptied)}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def make_record(
    path: str,
    *,
    pid: int,
    timestamp: datetime,
    tag: str | None = None,
    host: str | None = None,
    start: float | None = None,
    token: str | None = None,
    ttl: float | None = None,
    proc: str | None = None,
    acquired: datetime | None = None,
    emptied: str | None = None,
) -> LockRecord:
    """A sema :class:`LockRecord` ready to be written, with ``raw`` holding its text.

    ``emptied``: the empty file this lock replaced, to be put back on release
    (:class:`core.engine.gate.EmptyFile` text), written as ``emptied=`` and kept in
    ``metadata["emptied"]`` (sema and semats ignore unknown keys).

    ``timestamp`` (aware; naive is taken as UTC) is cut to whole seconds, as sema stores it;
    ``acquired``, for a refreshed lock, is when it was first taken (cut the same way): when it
    is earlier than ``timestamp`` it is written as ``acquired=`` and becomes ``acquired_at``,
    ``timestamp`` becomes ``renewed_at`` and the lease runs from it (``expires_at``);
    ``tag`` (:func:`core.formats._common.clean_tag`) and ``host`` are sanitised and trimmed as
    :func:`serialize` writes them; ``start``
    is rounded to the microseconds written. The result equals ``parse(record.raw, path)``.

    Raises:
        ValueError: as :func:`serialize` (bad pid, token, ttl or start).
    """
    seconds = math.floor(as_utc(timestamp).timestamp())
    acquired_at = from_unix(seconds, "timestamp") if 0 <= seconds <= MAX_TIMESTAMP else None
    if acquired_at is None:
        raise ValueError(f"timestamp out of range: {timestamp!r}")
    renewed_at: datetime | None = None
    expires_at: datetime | None = None
    first = math.floor(as_utc(acquired).timestamp()) if acquired is not None else seconds
    if 0 <= first < seconds:
        renewed_at, acquired_at = acquired_at, from_unix(first, "acquired")
        if ttl is not None and math.isfinite(ttl) and ttl >= 0:
            expires_at = add_seconds(renewed_at, float(ttl))
    clean_host = clean_value(host) if host is not None else None
    if start is not None and math.isfinite(start) and start >= 0:
        start = float(format_start(start))
    record = LockRecord(
        path=path,
        format=FORMAT,
        pid=pid,
        host=clean_host or None,
        acquired_at=acquired_at,
        expires_at=expires_at,
        ttl=float(ttl) if ttl is not None else None,
        tag=clean_tag(tag) if tag is not None else None,
        token=token,
        start=start,
        proc=proc,
        renewed_at=renewed_at,
        metadata={"emptied": clean_value(emptied)} if emptied else {},
    )
    data = serialize(record)
    return _replace_raw(record, data)


def build(request: WriteRequest) -> Built:
    """The sema lock Lockwarden writes for ``request`` (docs/DESIGN.md, "Formats": ``pid``,
    ``timestamp``, ``tag`` first, then ``host``, ``start``, ``proc``, ``token``, ``ttl`` and, for a
    renewal, ``acquired`` = ``request.acquired``, which both reference tools ignore), as
    :func:`make_record` makes it. ``timestamp`` is ``request.at``: for a renewal the refresh time,
    so that sema (stale when ``timestamp`` is older than its timeout,
    docs/specs/sema.txt "Stale Detection") never breaks a lock that is being
    refreshed.

    Raises:
        ValueError: as :func:`serialize` (bad pid, token, ttl or start).
    """
    holder = request.holder
    record = make_record(
        request.path, pid=holder.pid, timestamp=request.at, tag=request.tag, host=holder.host,
        start=holder.start, token=request.token, ttl=request.ttl, proc=holder.proc,
        acquired=request.acquired, emptied=request.emptied,
    )
    return Built(record, record.raw.encode("utf-8"))  # raw is exactly the serialised bytes


def _replace_raw(record: LockRecord, data: bytes) -> LockRecord:
    """``record`` (just built by :func:`make_record`, seen by no one else) with ``raw`` set to
    the text of ``data``: set in place rather than copied with ``dataclasses.replace`` (a
    second construction: ~4 us of each acquisition)."""
    object.__setattr__(record, "raw", raw_text(data))
    return record
