"""The ``af`` proof tool's locks (docs/specs/af.txt): ``af-ledger``
(``<proof>/ledger/ledger.lock``, which Lockwarden can write, adding keys af's Go decoder
ignores) and ``af-claim`` (``<proof>/locks/*.lock``, and claims replayed from the ledger's event
files; read-only).

Rules: docs/formats.md, "Formats" and "af ledger"; what the real ``af`` does that the spec does
not state (event file names, the events the CLI and library record, an expired claim staying
claimed until reaped): docs/DESIGN.md, "Facts about the real af tool".
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from core.errors import ParseError, UnreadableError
from core.formats._common import (
    a_type,
    as_finite,
    clean_tag,
    clean_value,
    decode_text,
    format_time,
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
from core.fsutil import read_lock_file
from core.record import LockRecord

LEDGER_FORMAT = "af-ledger"
CLAIM_FORMAT = "af-claim"

LEDGER_KEYS = ("agent_id", "acquired_at")
"""Keys that make a JSON object an af ledger lock (docs/specs/af.txt §1 "Lock File
Format")."""

CLAIM_KEYS = ("node_id", "owner", "expires_at")
"""Keys that make a JSON object an af claim lock (docs/specs/af.txt §2 "Lock File
Format")."""

EVENT_FILE_RE = re.compile(r"^(?:event-)?([0-9]{1,18})\.json\Z")
"""Ledger event file names: ``event-NNNNNN.json`` (docs/specs/af.txt §3 "Sequence
Number Tracking") and ``NNNNNN.json`` (what the real af writes)."""

MAX_EVENT_BYTES = 1024 * 1024
"""Largest ledger event file read by :func:`replay_ledger` (events may carry node text)."""

_LOCKWARDEN_KEYS = ("pid", "host", "start", "proc", "token")


# -- af-ledger --------------------------------------------------------------------------------


def parse_ledger_lock(data: bytes, path: str = "") -> LockRecord:
    """Parse ``ledger/ledger.lock`` (docs/specs/af.txt §1 "Lock File Format"):
    ``agent_id`` (string) -> ``holder``; ``acquired_at`` (RFC 3339) -> ``acquired_at``. No expiry
    (§1 "Timeout Behavior": "No automatic lock expiration").

    Lockwarden's keys, when present and valid, are read back: ``pid`` (integer) -> ``pid``,
    ``host`` -> ``host``, ``start`` (number, Unix s) -> ``start``, ``token`` (32 lowercase hex)
    -> ``token``. Other keys (and ours when invalid) go to ``metadata``.

    Raises:
        ParseError: not a JSON object, or ``agent_id``/``acquired_at`` missing or of the wrong
            type.
    """
    obj = load_json_object(decode_text(data), "af ledger lock")
    return ledger_from_object(obj, data, path)


def ledger_from_object(obj: dict[str, Any], data: bytes, path: str) -> LockRecord:
    """:func:`parse_ledger_lock` on an already decoded JSON object."""
    what = "af ledger lock"
    agent_id = require_str(obj, "agent_id", what)
    acquired_at = parse_time(require_str(obj, "acquired_at", what), "acquired_at")
    metadata = {k: v for k, v in obj.items() if k not in LEDGER_KEYS + _LOCKWARDEN_KEYS}
    pid = valid_pid(obj.get("pid")) if "pid" in obj else None
    host = obj.get("host") if isinstance(obj.get("host"), str) and obj.get("host") else None
    start_value = obj.get("start")
    start = as_finite(start_value)
    if start is not None and start < 0:
        start = None
    token = obj["token"] if is_token(obj.get("token")) else None
    proc = obj["proc"] if is_proc_id(obj.get("proc")) else None
    for key, used in (("pid", pid), ("host", host), ("start", start), ("proc", proc),
                      ("token", token)):
        if key in obj and used is None:
            metadata[key] = obj[key]
    return LockRecord(
        path=path,
        format=LEDGER_FORMAT,
        holder=agent_id,
        pid=pid,
        host=host,
        acquired_at=acquired_at,
        metadata=metadata,
        raw=raw_text(data),
        token=token,
        start=start,
        proc=proc,
    )


def serialize_ledger_lock(record: LockRecord) -> bytes:
    """Bytes of an af ledger lock: one compact JSON line ``{"agent_id", "acquired_at", "pid",
    "host", "start", "token"}`` (the last four only when set) and a newline, as Go's
    ``json.Encoder`` ends its output. ``acquired_at`` is RFC 3339 UTC (fraction only when
    non-zero; Go's ``time.Parse(RFC3339)`` accepts it).

    Raises:
        ValueError: no ``holder`` (agent_id) or no ``acquired_at``, or a bad token/start.
    """
    if record.holder is None:
        raise ValueError("an af ledger lock needs a holder (agent_id)")
    if record.acquired_at is None:
        raise ValueError("an af ledger lock needs acquired_at")
    obj: dict[str, Any] = {
        "agent_id": record.holder,
        "acquired_at": format_time(record.acquired_at, digits=6),
    }
    if record.pid is not None:
        if valid_pid(record.pid) is None:
            raise ValueError(f"bad pid: {record.pid!r}")
        obj["pid"] = record.pid
    if record.host:  # an empty host means none (parse reads it back as None)
        obj["host"] = record.host
    if record.start is not None:
        if not (math.isfinite(record.start) and record.start >= 0):
            raise ValueError(f"start must be finite and >= 0, not {record.start!r}")
        obj["start"] = float(record.start)
    if record.proc is not None:
        if not is_proc_id(record.proc):
            raise ValueError(f"proc is not a process identity: {record.proc!r}")
        obj["proc"] = record.proc
    if record.token is not None:
        if not is_token(record.token):
            raise ValueError("token must be 32 lowercase hex digits")
        obj["token"] = record.token
    emptied = record.metadata.get("emptied")
    if isinstance(emptied, str) and emptied:
        obj["emptied"] = emptied
    return (json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n").encode("ascii")


def build_ledger(request: WriteRequest) -> Built:
    """The af ledger lock Lockwarden writes for ``request``: ``agent_id`` is ``request.tag``
    (control and format characters as spaces, :func:`core.formats._common.clean_tag`), or
    ``lockwarden-pid-<pid>@<host>`` without one; then Lockwarden's ``pid``, ``host``,
    ``start``, ``proc`` and ``token`` (:func:`serialize_ledger_lock`). af has no lease: ``ttl``
    is not written. ``record.raw`` stays empty.

    Raises:
        ValueError: as :func:`serialize_ledger_lock`.
    """
    holder = request.holder
    record = LockRecord(
        path=request.path,
        format=LEDGER_FORMAT,
        holder=(clean_tag(request.tag) if request.tag else "")
        or f"lockwarden-pid-{holder.pid}@{holder.host}",
        pid=holder.pid,
        host=holder.host,
        acquired_at=request.at,
        token=request.token,
        start=holder.start,
        proc=holder.proc,
        metadata={"emptied": request.emptied} if request.emptied else {},
    )
    return Built(record, serialize_ledger_lock(record))


# -- af-claim ---------------------------------------------------------------------------------


def parse_claim_lock(data: bytes, path: str = "") -> LockRecord:
    """Parse a claim lock file ``<proof>/locks/*.lock`` (docs/specs/af.txt §2
    "Lock File Format (File-Based Locks)"): ``node_id`` -> ``tag`` and ``metadata["node_id"]``;
    ``owner`` -> ``holder``; ``acquired_at``/``expires_at`` in RFC3339Nano (nanoseconds truncated to
    microseconds). ``ttl`` = ``expires_at - acquired_at`` in seconds when both are known and
    the difference is not negative. ``acquired_at`` may be missing (then ``None``).

    Raises:
        ParseError: not a JSON object, or a required field missing or of the wrong type.
    """
    obj = load_json_object(decode_text(data), "af claim lock")
    return claim_from_object(obj, data, path)


def claim_from_object(obj: dict[str, Any], data: bytes, path: str) -> LockRecord:
    """:func:`parse_claim_lock` on an already decoded JSON object."""
    what = "af claim lock"
    node_id = require_str(obj, "node_id", what)
    owner = require_str(obj, "owner", what)
    expires_at = parse_time(require_str(obj, "expires_at", what), "expires_at")
    acquired_at = None
    if "acquired_at" in obj:
        acquired_at = parse_time(require_str(obj, "acquired_at", what), "acquired_at")
    metadata = {
        k: v for k, v in obj.items() if k not in ("node_id", "owner", "acquired_at", "expires_at")
    }
    metadata["node_id"] = node_id
    return _claim_record(path, node_id, owner, acquired_at, expires_at, metadata, raw_text(data))


def _claim_record(
    path: str,
    node_id: str,
    owner: str,
    acquired_at: datetime | None,
    expires_at: datetime | None,
    metadata: dict[str, Any],
    raw: str,
) -> LockRecord:
    ttl = None
    if acquired_at is not None and expires_at is not None and expires_at >= acquired_at:
        ttl = (expires_at - acquired_at).total_seconds()
    return LockRecord(
        path=path,
        format=CLAIM_FORMAT,
        holder=owner,
        acquired_at=acquired_at,
        expires_at=expires_at,
        ttl=ttl,
        tag=clean_value(node_id),
        metadata=metadata,
        raw=raw,
    )


# -- ledger replay ----------------------------------------------------------------------------


@dataclass
class _Claim:
    node_id: str
    owner: str
    acquired_at: datetime
    expires_at: datetime | None
    event_file: str
    raw: str


def _node_sort_key(node_id: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in node_id.split("."))


def _event_files(ledger_dir: str, problems: list[str]) -> list[tuple[int, str]]:
    try:
        names = os.listdir(ledger_dir)
    except OSError as exc:
        problems.append(f"cannot list the ledger directory {ledger_dir}: {exc.strerror or exc}")
        return []
    files: list[tuple[int, str]] = []
    for name in names:
        m = EVENT_FILE_RE.match(name)
        if m:
            files.append((int(m.group(1)), name))
    files.sort()
    seen: dict[int, str] = {}
    for seq, name in files:
        if seq in seen:
            problems.append(
                f"{name} and {seen[seq]} both claim sequence number {seq}; both were replayed"
            )
        else:
            seen[seq] = name
    return files


def _event_time(event: dict[str, Any], key: str) -> datetime:
    return parse_time(require_str(event, key, "event"), key)


def _deadline(event: dict[str, Any], key: str, since: datetime) -> datetime:
    """A claim's end: an RFC 3339 time (what af writes), or a Go duration after ``since``."""
    value = event.get(key)
    if isinstance(value, str) and (seconds := parse_go_duration(value)) is not None:
        try:
            return since + timedelta(seconds=seconds)
        except OverflowError:
            raise ParseError(f"{key} is out of range: {short(value)}") from None
    return _event_time(event, key)


def _node_ids(event: dict[str, Any]) -> list[str]:
    value = event.get("node_ids")
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise ParseError(f"node_ids is {a_type(value)}, not a list of strings")
    return list(value)


def _apply(event: dict[str, Any], name: str, raw: str, claims: dict[str, _Claim]) -> None:
    """Apply one lock-related event to ``claims`` (node_id -> claim). ParseError if malformed."""
    kind = event.get("type")
    if kind == "nodes_claimed":
        when = _event_time(event, "timestamp")
        owner = require_str(event, "owner", "nodes_claimed event")
        until = _deadline(event, "timeout", when)
        for node in _node_ids(event):
            claims[node] = _Claim(node, owner, when, until, name, raw)
    elif kind == "lock_acquired":
        when = _event_time(event, "timestamp")
        node = require_str(event, "node_id", "lock_acquired event")
        owner = require_str(event, "owner", "lock_acquired event")
        until = _deadline(event, "expires_at", when)
        claims[node] = _Claim(node, owner, when, until, name, raw)
    elif kind == "claim_refreshed":
        node = require_str(event, "node_id", "claim_refreshed event")
        when = _event_time(event, "timestamp")
        until = _deadline(event, "new_timeout", when)
        claim = claims.get(node)
        if claim is None:
            raise ParseError(f"refreshes node {node!r}, which is not claimed")
        claim.expires_at = until
        if isinstance(event.get("owner"), str):
            claim.owner = event["owner"]
        claim.event_file = name
        claim.raw = raw
    elif kind == "nodes_released":
        for node in _node_ids(event):
            claims.pop(node, None)
    elif kind in ("lock_released", "lock_reaped"):
        node = require_str(event, "node_id", f"{kind} event")
        claims.pop(node, None)


def replay_ledger_detailed(ledger_dir: str) -> tuple[list[LockRecord], list[str]]:
    """Claims currently held in an af ledger, and the problems met, in plain words.

    Reads the event files (``NNNNNN.json`` and ``event-NNNNNN.json``, in sequence order) with
    :func:`core.fsutil.read_lock_file` (no symlink is followed, no FIFO opened) and replays
    (docs/specs/af.txt §2 "Claim Lock State Reconstruction", plus the real CLI's
    events, docs/DESIGN.md):

    - ``nodes_claimed {node_ids, owner, timeout}``: claim each node until ``timeout``
      (RFC 3339; a Go duration such as ``"5m"`` is read as relative to the event);
    - ``claim_refreshed {node_id, owner, new_timeout}``: move the node's expiry;
    - ``nodes_released {node_ids}``, ``lock_released {node_id}``, ``lock_reaped {node_id}``:
      free the node(s);
    - ``lock_acquired {node_id, owner, expires_at}``: claim the node.

    Other event types are not about locks and are passed over. Expired claims are returned
    too: af keeps them claimed until reaped (docs/DESIGN.md). Unreadable or malformed event files
    (and malformed lock events) are skipped and described in the problem list.

    Returns:
        ``(records, problems)``: one ``af-claim`` :class:`LockRecord` per claimed node, sorted
        by node id, with path ``f"{ledger_dir}#{node_id}"``, ``holder`` = owner, ``tag`` =
        node id, ``acquired_at`` = the claiming event's ``timestamp``, ``expires_at``, ``ttl``,
        ``metadata`` ``{"node_id", "event_file"}`` and ``raw`` = the last event that set it.
        Never raises for file contents or I/O errors.
    """
    problems: list[str] = []
    claims: dict[str, _Claim] = {}
    for _seq, name in _event_files(ledger_dir, problems):
        path = os.path.join(ledger_dir, name)
        try:
            data, _info = read_lock_file(path, limit=MAX_EVENT_BYTES)
        except FileNotFoundError:
            problems.append(f"{name}: vanished while the ledger was read")
            continue
        except UnreadableError as exc:
            problems.append(f"{name}: {exc.reason}")
            continue
        except OSError as exc:  # pragma: no cover - read_lock_file wraps OS errors
            problems.append(f"{name}: {exc.strerror or exc}")
            continue
        try:
            event = load_json_object(decode_text(data), "event")
            _apply(event, name, raw_text(data), claims)
        except ParseError as exc:
            problems.append(f"{name}: {exc.reason}; skipped")
    records = [
        _claim_record(
            f"{ledger_dir}#{c.node_id}",
            c.node_id,
            c.owner,
            c.acquired_at,
            c.expires_at,
            {"node_id": c.node_id, "event_file": c.event_file},
            c.raw,
        )
        for c in sorted(claims.values(), key=lambda c: _node_sort_key(c.node_id))
    ]
    return records, problems


def replay_ledger(ledger_dir: str) -> list[LockRecord]:
    """The claims currently held in the af ledger ``ledger_dir`` (see
    :func:`replay_ledger_detailed`, which also returns the problems met). Never raises for
    file contents or I/O errors."""
    return replay_ledger_detailed(ledger_dir)[0]


# -- meta.json --------------------------------------------------------------------------------

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART_RE = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> float | None:
    """Seconds of a Go ``time.ParseDuration`` string (``"5m"``, ``"30s"``, ``"1h"``,
    ``"1m30s"``, ``"1.5h"``, ``"300ms"``, ``"0"``), or ``None`` when it is not one. A sign is
    accepted as Go does."""
    if not isinstance(text, str) or not text or len(text) > 100:
        return None
    sign = 1.0
    body = text
    if body[0] in "+-":
        sign = -1.0 if body[0] == "-" else 1.0
        body = body[1:]
    if body == "0":
        return 0.0
    if not body:
        return None
    total = 0.0
    pos = 0
    while pos < len(body):
        m = _DURATION_PART_RE.match(body, pos)
        if m is None:
            return None
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    return sign * total if math.isfinite(total) else None


def read_lock_timeout(proof_dir: str) -> float | None:
    """The claim lock timeout of an af proof, in seconds, from ``<proof_dir>/meta.json``'s
    ``lock_timeout`` (docs/specs/af.txt §2 "Lock Timeout Configuration": a Go
    duration such as ``"5m"``; default 5 minutes, valid range 1 s to 1 h). An integer is read as
    Go's JSON form of a ``time.Duration``: nanoseconds.

    Returns ``None`` when the file is missing, unreadable or malformed, or the key is absent
    or not a non-negative duration (the caller then uses af's default of 300 s). Never raises.
    """
    try:
        data, _info = read_lock_file(os.path.join(proof_dir, "meta.json"))
        obj = load_json_object(decode_text(data), "meta.json")
    except (OSError, ParseError):
        return None
    value = obj.get("lock_timeout")
    seconds: float | None = None
    if isinstance(value, str):
        seconds = parse_go_duration(value.strip())
    elif isinstance(value, int) and not isinstance(value, bool):
        seconds = value / 1e9
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds
