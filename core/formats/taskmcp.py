"""The ``task-mcp`` format: Task MCP's ``atomic_lock`` JSON locks (docs/specs/task-mcp.txt,
"Lock File Format"), both shapes read: the code's (``since`` in epoch milliseconds) and the
spec's "Enhanced Lock File Format" (``since`` as ISO 8601, a ``metadata`` object).

What Lockwarden writes -- ``since`` as integer epoch milliseconds, ``metadata`` holding only
:data:`ALLOWED_METADATA`, its own keys at the top level, mode 0600 (:data:`FILE_MODE`) -- and
why: docs/formats.md, "task-mcp: what Lockwarden writes"; the helpers: docs/formats.md, "Task
MCP helpers".
"""

from __future__ import annotations

import getpass
import json
import math
import os
import re
import socket
import sys
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from core.errors import ParseError
from core.formats._common import (
    EPOCH,
    a_type,
    add_seconds,
    as_finite,
    as_utc,
    clean_tag,
    clean_value,
    decode_text,
    from_unix,
    is_proc_id,
    is_token,
    load_json_object,
    parse_time,
    raw_text,
    require_str,
    short,
    valid_pid,
)
from core.formats.writing import Built, WriteRequest
from core.record import LockRecord

FORMAT = "task-mcp"

KEYS = ("owner", "since", "ttl")
"""Keys that make a JSON object a Task MCP lock (docs/specs/task-mcp.txt "Current
Implementation")."""

TTL_STRATEGIES: dict[str, dict[str, float]] = {
    "local": {"interactive": 3600.0, "automated": 1800.0, "emergency": 300.0},
    "ci": {"automated": 86400.0, "interactive": 3600.0},
    "cloud": {"interactive": 7200.0, "automated": 14400.0},
    "container": {"interactive": 1800.0, "automated": 3600.0},
}
"""Default TTLs in seconds (docs/specs/task-mcp.txt "TTL Strategy", "Default TTL Values
by Environment")."""

ENVIRONMENTS = ("local", "ci", "cloud", "container")
PURPOSES = ("interactive", "automated", "emergency")

LOCKWARDEN_ENVIRONMENT = "local"
"""The environment Lockwarden declares in the locks it writes and as a requester in the reclaim
matrix (docs/specs/task-mcp.txt "Local Development")."""

LOCKWARDEN_PURPOSE = "interactive"
"""The purpose Lockwarden declares in the locks it writes and as a requester in the reclaim
matrix (docs/specs/task-mcp.txt "Enhanced Lock File Format")."""

ALLOWED_METADATA: tuple[str, ...] = (
    "hostname", "process_id", "user_identity", "session_id", "environment", "purpose",
)
"""The only ``metadata`` fields Task MCP accepts (docs/specs/task-mcp.txt "Security
Controls", ``validateLockOwner``: ``allowedFields``; any other field is an ``Unexpected metadata
field`` error). Lockwarden's ``metadata`` holds no other key."""

FILE_MODE = 0o600
"""Permission bits of the task-mcp lock files Lockwarden creates (as Task MCP's own)."""

_OWNER_PID_RE = re.compile(r"^pid-([0-9]{1,10})@(.+)\Z", re.DOTALL)


def default_ttl(environment: str, purpose: str) -> float:
    """Default TTL in seconds for an environment and purpose (docs/specs/task-mcp.txt
    "Default TTL Values by Environment").

    The spec's table lacks some pairs; we fill them so that every pair has a value:

    - ``emergency`` outside ``local``: 300 s, the spec's only emergency value (an emergency
      lock is meant to be short everywhere);
    - a purpose the environment lacks otherwise: that environment's ``interactive`` value;
    - an unknown environment: ``local``'s row; an unknown purpose: ``interactive``.
    """
    row = TTL_STRATEGIES.get(environment, TTL_STRATEGIES["local"])
    if purpose in row:
        return row[purpose]
    if purpose == "emergency":
        return TTL_STRATEGIES["local"]["emergency"]
    return row["interactive"]


def current_user() -> str:
    """The real OS user running this process (``getpass.getuser()``), falling back to
    ``uid-<N>`` when the user database has no name for the uid (containers)."""
    try:
        return getpass.getuser()
    except Exception:
        if sys.platform == "win32":  # no UIDs there
            return "unknown"
        return f"uid-{os.getuid()}"


def default_owner(pid: int, host: str | None = None) -> str:
    """Task MCP's default owner text ``pid-<pid>@<host>`` (docs/specs/task-mcp.txt
    "Local Development")."""
    return f"pid-{pid}@{host if host is not None else socket.gethostname()}"


def default_metadata(
    pid: int, *, environment: str = "local", purpose: str = "interactive"
) -> dict[str, Any]:
    """Metadata Lockwarden writes in a Task MCP lock (docs/specs/task-mcp.txt "Enhanced
    Lock File Format", "Local Development"): ``hostname``, ``process_id`` (``pid``),
    ``user_identity`` (the real OS user from :func:`current_user`, never a value a requester
    claims), ``environment``, ``purpose``."""
    return {
        "hostname": socket.gethostname(),
        "process_id": pid,
        "user_identity": current_user(),
        "environment": environment,
        "purpose": purpose,
    }


def _since(obj: dict[str, Any]) -> datetime:
    if "since" not in obj:
        raise ParseError("task-mcp lock has no 'since' field")
    value = obj["since"]
    if isinstance(value, str):
        return parse_time(value.strip(), "since")
    millis = as_finite(value)
    if millis is not None:
        if millis < 0:
            raise ParseError(f"since is negative: {short(value)}")
        try:
            if isinstance(value, int):  # exact: no float rounding of large millisecond counts
                return EPOCH + timedelta(milliseconds=value)
            return from_unix(millis / 1000.0, "since")
        except (ParseError, OverflowError):
            raise ParseError(f"since is out of range: {short(value)} ms") from None
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise ParseError(f"since is out of range: {short(value)}")
    raise ParseError(f"since is {a_type(value)}, not epoch milliseconds or an ISO 8601 string")


def parse(data: bytes, path: str = "") -> LockRecord:
    """Parse a Task MCP lock (docs/specs/task-mcp.txt "Lock File Format").

    - ``owner`` (string) -> ``holder``;
    - ``since`` -> ``acquired_at``: a number is epoch **milliseconds** ("Current
      Implementation"), a string is ISO 8601 ("Enhanced Lock File Format");
    - ``ttl`` (number, seconds, >= 0) -> ``ttl``; ``expires_at`` = ``since + ttl``;
    - ``metadata`` (object, optional; ``null`` = none) -> ``metadata`` (a copy);
    - ``pid``: ``metadata.process_id``, else from an owner ``pid-<N>@<host>`` (Task MCP's
      default owner, docs/specs/task-mcp.txt "Local Development"); ``host``:
      ``metadata.hostname``, else a top-level ``host``, else that owner's host part;
    - ``tag``: the top-level ``tag`` when it is a string (where Lockwarden writes it), else
      ``metadata.tag`` (where older Lockwarden versions wrote it), control characters
      replaced by spaces;
    - Lockwarden's top-level ``token`` (32 lowercase hex), ``start`` (Unix s) and ``proc`` when
      valid. Other top-level keys (``reclaimed_from``, ``reclaimed_reason``) stay in ``raw``.

    Raises:
        ParseError: not a JSON object, or ``owner``/``since``/``ttl``/``metadata`` missing or
            of the wrong type, or times out of range.
    """
    obj = load_json_object(decode_text(data), "task-mcp lock")
    return from_object(obj, data, path)


def from_object(obj: dict[str, Any], data: bytes, path: str) -> LockRecord:
    """:func:`parse` on an already decoded JSON object."""
    owner = require_str(obj, "owner", "task-mcp lock")
    since = _since(obj)
    if "ttl" not in obj:
        raise ParseError("task-mcp lock has no 'ttl' field")
    ttl_value = obj["ttl"]
    maybe_ttl = as_finite(ttl_value)
    if maybe_ttl is None:
        if isinstance(ttl_value, int | float) and not isinstance(ttl_value, bool):
            raise ParseError(f"ttl is out of range: {short(ttl_value)}")
        raise ParseError(f"ttl is {a_type(ttl_value)}, not a number of seconds")
    ttl = maybe_ttl
    if ttl < 0:
        raise ParseError(f"ttl is negative: {short(ttl_value)}")
    expires_at = add_seconds(since, ttl)
    if expires_at is None:
        raise ParseError(f"since + ttl is out of range (ttl {short(ttl_value)} s)")
    meta_value = obj.get("metadata")
    if meta_value is None:
        metadata: dict[str, Any] = {}
    elif isinstance(meta_value, dict):
        metadata = dict(meta_value)
    else:
        raise ParseError(f"metadata is {a_type(meta_value)}, not an object")

    pid = valid_pid(metadata.get("process_id"))
    host_value = metadata.get("hostname")
    if not (isinstance(host_value, str) and host_value):
        host_value = obj.get("host")
    host = host_value if isinstance(host_value, str) and host_value else None
    m = _OWNER_PID_RE.match(owner)
    if m:
        if pid is None:
            pid = valid_pid(int(m.group(1)))
        if host is None:
            host = m.group(2)

    tag_value = obj.get("tag")
    if not isinstance(tag_value, str):
        tag_value = metadata.get("tag")  # where Lockwarden wrote it before
    tag = clean_value(tag_value) if isinstance(tag_value, str) else None

    token = obj["token"] if is_token(obj.get("token")) else None
    proc = obj["proc"] if is_proc_id(obj.get("proc")) else None
    start_value = obj.get("start")
    start = as_finite(start_value)
    if start is not None and start < 0:
        start = None

    return LockRecord(
        path=path,
        format=FORMAT,
        holder=owner,
        pid=pid,
        host=host,
        acquired_at=since,
        expires_at=expires_at,
        ttl=ttl,
        tag=tag,
        metadata=metadata,
        raw=raw_text(data),
        token=token,
        start=start,
        proc=proc,
    )


def _ttl_json(ttl: float) -> int | float:
    if float(ttl).is_integer() and abs(ttl) < 2**53:
        return int(ttl)
    return float(ttl)


def serialize(record: LockRecord) -> bytes:
    """Bytes of a Task MCP lock, indented by 2 as Task MCP's ``JSON.stringify(info, null, 2)``,
    ASCII-only: ``owner``, ``since`` (integer epoch milliseconds, as ``atomic_lock`` writes and
    reads it: docs/specs/task-mcp.txt "Current Implementation"), ``ttl`` (seconds; an
    integer when whole), ``metadata`` (as in the record), then ``tag``, ``token``, ``start`` and
    ``proc`` when set.

    Raises:
        ValueError: no ``holder``/``acquired_at``/``ttl``, a negative or non-finite ``ttl``, an
            ``acquired_at`` before 1970, metadata that is not JSON-serialisable, or a bad
            token/start.
    """
    return _serialize(record, None)


def _serialize(record: LockRecord, extra: Mapping[str, str | None] | None) -> bytes:
    """:func:`serialize`, plus the top-level keys ``extra`` after the others."""
    if record.holder is None:
        raise ValueError("a task-mcp lock needs a holder (owner)")
    millis = since_millis(record)
    if millis is None:
        raise ValueError("a task-mcp lock needs acquired_at (since)")
    if millis < 0:
        raise ValueError(f"since must not be before 1970: {record.acquired_at!r}")
    if record.ttl is None or not math.isfinite(record.ttl) or record.ttl < 0:
        raise ValueError(f"a task-mcp lock needs a finite ttl >= 0, not {record.ttl!r}")
    obj: dict[str, Any] = {
        "owner": record.holder,
        "since": millis,
        "ttl": _ttl_json(record.ttl),
        "metadata": dict(record.metadata),
    }
    if record.tag is not None:
        obj["tag"] = clean_tag(record.tag)
    if record.token is not None:
        if not is_token(record.token):
            raise ValueError("token must be 32 lowercase hex digits")
        obj["token"] = record.token
    if record.start is not None:
        if not (math.isfinite(record.start) and record.start >= 0):
            raise ValueError(f"start must be finite and >= 0, not {record.start!r}")
        obj["start"] = float(record.start)
    if record.proc is not None:
        if not is_proc_id(record.proc):
            raise ValueError(f"proc is not a process identity: {record.proc!r}")
        obj["proc"] = record.proc
    for key, value in (extra or {}).items():
        if key in obj:
            raise ValueError(f"{key!r} is already a field of the lock")
        obj[key] = value
    try:
        text = json.dumps(obj, indent=2, allow_nan=False, ensure_ascii=True)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"metadata cannot be written as JSON: {exc}") from None
    return (text + "\n").encode("ascii")


def make_record(
    path: str,
    *,
    owner: str,
    since: datetime,
    ttl: float,
    metadata: dict[str, Any],
    token: str | None = None,
    start: float | None = None,
    proc: str | None = None,
    tag: str | None = None,
    extra: Mapping[str, str | None] | None = None,
) -> LockRecord:
    """A Task MCP :class:`LockRecord` ready to be written, ``raw`` holding its text
    (:func:`serialize`).

    ``since`` (aware; naive is taken as UTC) is cut to whole milliseconds as written; ``ttl`` is
    seconds; ``metadata`` is copied (use :func:`default_metadata`: only :data:`ALLOWED_METADATA`
    fields); ``tag`` is written at the top level; ``extra`` are more top-level keys (a reclaim's
    ``reclaimed_from`` and ``reclaimed_reason``, docs/specs/task-mcp.txt "Reclaim
    Process"), kept in ``raw`` only. ``pid`` and ``host`` are derived as :func:`parse` derives them,
    so the result equals ``parse(record.raw, path)``.

    Raises:
        ValueError: as :func:`serialize`, or an ``extra`` key that is already a field.
    """
    since = as_utc(since)
    since = since.replace(microsecond=since.microsecond // 1000 * 1000)
    draft = LockRecord(
        path=path,
        format=FORMAT,
        holder=owner,
        acquired_at=since,
        ttl=float(ttl),
        tag=tag,
        metadata=dict(metadata),
        token=token,
        start=float(start) if start is not None else None,
        proc=proc,
    )
    data = _serialize(draft, extra)
    try:
        return parse(data, path)
    except ParseError as exc:
        raise ValueError(f"cannot make a task-mcp lock: {exc.reason}") from None


def build(request: WriteRequest) -> Built:
    """The Task MCP lock Lockwarden writes for ``request`` (docs/formats.md, "task-mcp: what
    Lockwarden writes"): owner ``pid-<pid>@<host>`` (docs/specs/task-mcp.txt "Local
    Development"), ``since`` = ``request.at`` in epoch milliseconds, ``ttl`` = ``request.ttl``,
    metadata from :func:`default_metadata` (environment :data:`LOCKWARDEN_ENVIRONMENT`, purpose
    :data:`LOCKWARDEN_PURPOSE`; only :data:`ALLOWED_METADATA` fields), then at the top level
    ``tag``, ``token``, ``start``, ``proc`` and -- for a reclaim -- ``reclaimed_from`` and
    ``reclaimed_reason`` (docs/specs/task-mcp.txt "Reclaim Process"). File mode
    :data:`FILE_MODE`.

    A renewal (``request.acquired`` set) keeps ``since`` at the first acquisition and extends
    ``ttl`` so that the lease ends ``request.ttl`` seconds after ``request.at``: Task MCP
    judges expiry by ``since + ttl`` and the lock's age stays its age (the ``refreshLock`` of
    docs/specs/task-mcp.txt moves ``since`` instead, which would make a lock held for
    hours look minutes old).

    Raises:
        ValueError: ``request.ttl`` is None (a task-mcp lock is a lease), or as
            :func:`serialize`.
    """
    if request.ttl is None:
        raise ValueError("a task-mcp lock needs a ttl (use default_ttl)")
    holder = request.holder
    metadata = default_metadata(holder.pid, environment=LOCKWARDEN_ENVIRONMENT,
                                purpose=LOCKWARDEN_PURPOSE)
    extra: dict[str, str | None] = {}
    if request.reclaimed is not None:
        extra["reclaimed_from"] = request.reclaimed.holder
        extra["reclaimed_reason"] = request.reclaimed.reason
    if request.emptied:
        extra["emptied"] = request.emptied
    since, ttl = request.at, request.ttl
    if request.acquired is not None:
        first, now = _millis(request.acquired), _millis(request.at)
        if first < now:
            since, ttl = request.acquired, (now - first) / 1000 + request.ttl
    record = make_record(
        request.path, owner=default_owner(holder.pid, holder.host), since=since,
        ttl=ttl, metadata=metadata, token=request.token, start=holder.start,
        proc=holder.proc, tag=request.tag, extra=extra,
    )
    return Built(record, record.raw.encode("utf-8"), FILE_MODE)  # raw: the serialised bytes


def _millis(dt: datetime) -> int:
    delta = as_utc(dt) - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1000 + delta.microseconds // 1000


def since_millis(record: LockRecord) -> int | None:
    """``acquired_at`` as epoch milliseconds (the code's ``since`` form), or ``None``."""
    if record.acquired_at is None:
        return None
    return _millis(record.acquired_at)


def with_since(record: LockRecord, since: datetime) -> LockRecord:
    """A copy of a task-mcp ``record`` with ``since`` moved (Task MCP's own ``refreshLock``,
    docs/specs/task-mcp.txt "Auto-Refresh Mechanism"): same owner, ttl, metadata, tag,
    token and start; ``raw`` rewritten. The engine's refresh keeps ``since`` and extends ``ttl``
    instead (:func:`build`)."""
    return make_record(
        record.path,
        owner=record.holder or "",
        since=since,
        ttl=record.ttl if record.ttl is not None else 0.0,
        metadata=record.metadata,
        token=record.token,
        start=record.start,
        proc=record.proc,
        tag=record.tag,
    )


__all__ = [
    "ALLOWED_METADATA",
    "FILE_MODE",
    "FORMAT",
    "LOCKWARDEN_ENVIRONMENT",
    "LOCKWARDEN_PURPOSE",
    "TTL_STRATEGIES",
    "build",
    "current_user",
    "default_metadata",
    "default_owner",
    "default_ttl",
    "make_record",
    "parse",
    "serialize",
    "since_millis",
    "with_since",
]
