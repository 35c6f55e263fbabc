"""Other hosts' locks as rows of the app's one table: pure functions, no Qt, no database.

A fleet row's key is :func:`fleet_key` (``lockwarden-fleet://<host>/<path>``), never the bare
path, so it never takes the place of this host's own row of the same file; :func:`fleet_origin`
gives host and path back; :func:`published_status` turns the published verdict into a read-only
:class:`core.record.LockStatus`; :func:`host_of` is the Host column; :func:`action_safety`
offers actions on a fleet row only where the same lock file is at the same path here, read by
the same engine. Rules: docs/gui.md, "Fleet"; docs/fleet.md, "The app".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core.codes import Code
from core.reasons import Reason
from core.record import Liveness, LockRecord, LockStatus, State

FLEET_SCHEME = "lockwarden-fleet://"
"""Prefix of a fleet row's key in the table (:func:`fleet_key`)."""


def fleet_key(host: str, path: str) -> str:
    """The table key of ``host``'s published lock at ``path`` (an absolute path there)."""
    return f"{FLEET_SCHEME}{host}{path if path.startswith('/') else '/' + path}"


def fleet_origin(key: str) -> tuple[str, str] | None:
    """``(host, path)`` of a fleet row's key (:func:`fleet_key`); None for any other path."""
    if not key.startswith(FLEET_SCHEME):
        return None
    host, sep, rest = key[len(FLEET_SCHEME):].partition("/")
    return (host, "/" + rest) if sep and host else None


def real_path(key: str) -> str:
    """The lock's path on its own host: a fleet row's path, else ``key`` itself."""
    origin = fleet_origin(key)
    return key if origin is None else origin[1]


def display_path(key: str) -> str:
    """A row's path as shown: ``host:/path`` for a fleet row (as ``scp`` writes it), else the
    path itself."""
    origin = fleet_origin(key)
    return key if origin is None else f"{origin[0]}:{origin[1]}"


def directory_of(key: str) -> str:
    """The Directory column's text: ``host:/dir`` for a fleet row (as ``scp`` writes it),
    else the path's directory."""
    origin = fleet_origin(key)
    if origin is None:
        return os.path.dirname(key)
    return f"{origin[0]}:{os.path.dirname(origin[1])}"


def host_of(st: LockStatus, my_host: str) -> str:
    """The Host column's text: a fleet row's publishing host; else the host the lock's record
    names; else ``my_host`` for a lock file here (its PID, if any, is checked here); "" for a
    lock on a server, whose record names no host."""
    origin = fleet_origin(st.path)
    if origin is not None:
        return origin[0]
    rec = st.record
    if rec is not None and rec.host:
        return rec.host
    return "" if "://" in st.path else my_host


def _time(v: object) -> datetime | None:
    if isinstance(v, int | float) and not isinstance(v, bool):
        try:
            return datetime.fromtimestamp(float(v), UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(v, str) and v:
        try:
            dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            return None
        return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)
    return None


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v: object) -> str | None:
    return v if isinstance(v, str) and v else None


def _reasons(raw: object) -> tuple[Reason, ...]:
    """The published reasons (``[{"code": ..., **params}]``) as :class:`Reason` objects; a
    code this version does not know (another host runs a newer one) is left out."""
    out: list[Reason] = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        try:
            code = Code(str(item.get("code")))
        except ValueError:
            continue
        params = {k: v for k, v in item.items() if k not in ("code", "text")
                  and (v is None or isinstance(v, str | int | float | bool))}
        out.append(Reason.of(code, **params))
    return tuple(out)


def published_status(host: str, path: str, verdict: Mapping[str, Any]) -> LockStatus:
    """The status of the lock ``host`` published at ``path`` with ``verdict`` (as
    :class:`core.fleet.hosts.PublishedLock` holds it), keyed by :func:`fleet_key`. Its state,
    liveness and reasons are the publishing host's: that host judged its own PIDs."""
    key = fleet_key(host, path)
    try:
        state = State(str(verdict.get("state")))
    except ValueError:
        state = State.UNREADABLE
    try:
        liveness = Liveness(str(verdict.get("liveness")))
    except ValueError:
        liveness = Liveness.UNKNOWN
    fmt = _str(verdict.get("format"))
    rec = None
    if fmt is not None:
        ttl = verdict.get("ttl")
        rec = LockRecord(path=key, format=fmt, holder=_str(verdict.get("holder")),
                         pid=_int(verdict.get("pid")), host=_str(verdict.get("host")),
                         acquired_at=_time(verdict.get("timestamp")),
                         expires_at=_time(verdict.get("expires_at")),
                         ttl=float(ttl) if isinstance(ttl, int | float) and not isinstance(
                             ttl, bool) and verdict.get("expires_at") is None else None,
                         tag=_str(verdict.get("tag")))
    return LockStatus(path=key, state=state, liveness=liveness,
                      reasons=_reasons(verdict.get("reasons")), record=rec,
                      error=_str(verdict.get("error")))


@dataclass(frozen=True, slots=True)
class Safety:
    """Whether actions on a fleet row are offered here: ``ok``, and ``why`` (a sentence for
    the actions' tooltip either way)."""

    ok: bool
    why: str


def _identity(rec: LockRecord | None) -> tuple[object, ...] | None:
    if rec is None:
        return None
    return (rec.format, rec.pid, rec.host, rec.timestamp, rec.holder)


def action_safety(host: str, path: str, published: LockStatus,
                  here: LockStatus | None) -> Safety:
    """May this host act on ``host``'s lock at ``path``? ``published`` is the fleet row
    (:func:`published_status`); ``here`` the same engine's verdict on ``path`` on this host
    (:func:`core.verdicts.inspect.inspect`), or None when nothing is there. Yes only when
    the file here is the lock that host published (same format, PID, host, acquisition time
    and holder): a shared file system. Rule: docs/gui.md, "Fleet"."""
    elsewhere = (f"act on it on {host}, where it is: its lock is in a directory of that host "
                 "that this host does not share (a private /tmp, a local disk)")
    if here is None or not here.present:
        return Safety(False, f"{path} does not exist on this host: {elsewhere}.")
    mine, theirs = _identity(here.record), _identity(published.record)
    if theirs is None:
        return Safety(False, f"{host} published no lock record for {path}, so this host "
                      f"cannot tell whether the file here is the same: {elsewhere}.")
    if mine != theirs:
        return Safety(False, f"the file at {path} on this host is not the lock {host} "
                      f"published (another holder, PID or time): {elsewhere}.")
    return Safety(True, f"{path} is a shared file: the same lock is at this path here, so "
                  "actions go through this host's engine as for its own locks.")

