"""The lock table's columns: their order and titles, the custom item roles, and what each cell
shows and sorts by (docs/gui.md "Window").

Cell contents are pure functions of a :class:`core.record.LockStatus`, the table's clock
(``now``, aware UTC) and this host's name, so :class:`app.table.model.LockTableModel` only keeps
rows
and emits signals. Sort keys (:func:`sort_key`) are strings that order like the column's real
type (ages and countdowns as times, PIDs as numbers) with the lock path as tie-break: the proxy
then sorts in C++, and rows whose values are equal keep a stable order.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Hashable
from datetime import datetime

from PySide6.QtCore import Qt

from app.table.fleet_rows import directory_of, host_of
from app.table.lockinfo import (
    STATE_WORDS,
    display_state,
    held_by_user,
    human_duration,
    lock_name,
    server_of,
)
from core.holder import process_label
from core.record import LockStatus, State


class Col(enum.IntEnum):
    """Columns of the lock table, in display order."""

    STATE = 0
    LOCK = 1
    DIRECTORY = 2
    FORMAT = 3
    HOLDER = 4
    PID = 5
    LIVENESS = 6
    AGE = 7
    EXPIRES = 8
    TAG = 9
    TOOL = 10
    KIND = 11
    HOST = 12


NCOLS = len(Col)

HEADERS: dict[Col, str] = {
    Col.STATE: "State",
    Col.LOCK: "Lock",
    Col.DIRECTORY: "Directory",
    Col.FORMAT: "Format",
    Col.HOLDER: "Holder",
    Col.PID: "PID",
    Col.LIVENESS: "Liveness",
    Col.AGE: "Age",
    Col.EXPIRES: "Expires",
    Col.TAG: "Tag",
    Col.TOOL: "Tool",
    Col.KIND: "Kind",
    Col.HOST: "Host",
}

STATUS_ROLE = int(Qt.ItemDataRole.UserRole) + 1
"""Role returning the row's :class:`~core.record.LockStatus` (any column)."""
SORT_ROLE = int(Qt.ItemDataRole.UserRole) + 2
"""Role returning the cell's sort key, a ``str`` ordering like the column's real type, then
the lock path as a tie-break (see :func:`sort_key`). The keys do not depend on the clock, so
they are computed once per change: age sorts by the Unix time the age counts from (reversed: a
larger age is an earlier time), expires by the expiry's Unix time; both order exactly like the
durations shown."""
ROLES = frozenset({int(Qt.ItemDataRole.DisplayRole), int(Qt.ItemDataRole.DecorationRole),
                   int(Qt.ItemDataRole.ToolTipRole), int(Qt.ItemDataRole.TextAlignmentRole),
                   STATUS_ROLE, SORT_ROLE})
"""The roles some cell answers; any other (font, colours, check state: a painted cell asks
seven roles) is ``None`` at once, before any look-up."""
FILTER_ROLE = int(Qt.ItemDataRole.UserRole) + 3
"""The proxy's filter role. No cell answers it: :class:`app.table.proxy.LockFilterProxy` filters in
Python on whole rows, and a ``dataChanged`` whose roles omit it and :data:`SORT_ROLE` (the age
tick) is only forwarded by the proxy, without re-filtering or re-sorting 10,000 rows every
second."""

#: Order of states when sorting by the state column: the ones needing attention first.
STATE_ORDER: dict[State, int] = {
    State.STALE: 0,
    State.EXPIRED: 1,
    State.UNREADABLE: 2,
    State.WRITING: 3,
    State.HELD: 4,
    State.FREE: 5,
}

_TIME_SPAN = 1e12  # Unix seconds beyond any lock's time (year 33658); keeps keys positive


def _fixed(seconds: float) -> str:
    """A non-negative time as a fixed-width string that sorts like the number (µs)."""
    return f"{min(max(seconds, 0.0), 2 * _TIME_SPAN):021.6f}"


def base_time(st: LockStatus) -> float | None:
    """Unix time (s) the age counts from: the record's acquired_at, else the file's mtime;
    ``None`` when neither is known, and for a free path (a free kernel-lock anchor's file is
    there, but no lock is held: its mtime is not a lock's age)."""
    if st.state is State.FREE:
        return None
    rec = st.record
    if rec is not None and rec.acquired_at is not None:
        return rec.acquired_at.timestamp()
    if st.file is not None:
        return st.file.mtime_ns / 1e9
    return None


def expiry(st: LockStatus) -> float | None:
    """Unix time (s) the lock expires at (TTL or ``expires_at``), or ``None``."""
    rec = st.record
    exp = rec.effective_expiry() if rec is not None else None
    return exp.timestamp() if exp is not None else None


def age_seconds(st: LockStatus, now: datetime) -> float | None:
    """Age of the lock at ``now`` in seconds (>= 0), or ``None``."""
    base = base_time(st)
    return None if base is None else max(0.0, now.timestamp() - base)


def expires_in(st: LockStatus, now: datetime) -> float | None:
    """Seconds from ``now`` until expiry (negative once expired), or ``None``."""
    exp = expiry(st)
    return None if exp is None else exp - now.timestamp()


MINE = "mine"
"""The mark of a lock whose holder process runs as this app's user (docs/gui.md, "Holder")."""


def holder_text(st: LockStatus, my_host: str) -> str:
    """Holder column text (docs/gui.md, "Holder"): the record's owner, then the holder process
    as far as it is known -- name, PID and user (:func:`core.holder.process_label`: the live
    process a lock records, pidfiles and sema locks too; the process the kernel names for a
    kernel lock; the process that has an empty file open) -- else the host when it is not
    ``my_host``; led by ``"mine — "`` when that process runs as this app's user
    (:func:`app.table.lockinfo.held_by_user`). Empty when nothing is known."""
    rec = st.record
    parts: list[str] = []
    if rec is not None and rec.holder:
        parts.append(rec.holder)
    process = process_label(st)
    if process:
        parts.append(process)
    elif rec is not None and rec.host and rec.host != my_host and not rec.holder:
        parts.append(rec.host)
    text = " · ".join(parts)
    if text and held_by_user(st):  # first, so a narrow column still shows it
        text = f"{MINE} — {text}"
    return text


def _countdown(left: float | None) -> str:
    if left is None:
        return ""
    if left >= 0:
        return "in " + human_duration(left)
    return human_duration(-left) + " ago"


def _pid_text(st: LockStatus) -> str:
    """The PID cell: the recorded PID, else a kernel lock's holder as the kernel names it
    (:attr:`core.record.LockStatus.holder_pid`)."""
    pid = st.holder_pid
    return "" if pid is None else str(pid)


def _liveness_text(st: LockStatus) -> str:
    """The liveness cell: for a recorded lock, or a kernel-held file without a record."""
    return st.liveness.value if st.record is not None or st.kernel_held else ""


def _lock_and_directory(path: str) -> tuple[str, str]:
    """The Lock and Directory cells: a file's name and directory; for a lock on a server the
    lock after ``#`` and the server's URL (docs/remote.md, "Paths")."""
    server = server_of(path)
    if server is None:
        return os.path.basename(path), directory_of(path)
    return lock_name(path), server


def static_text(st: LockStatus, col: Col, my_host: str) -> str:
    """The text of a cell that does not follow the clock (every column but age and expires,
    which give "")."""
    rec = st.record
    if col == Col.STATE:
        return STATE_WORDS[display_state(st)]
    if col == Col.LOCK:
        return _lock_and_directory(st.path)[0]
    if col == Col.DIRECTORY:
        return _lock_and_directory(st.path)[1]
    if col == Col.HOLDER:
        return holder_text(st, my_host)
    if col == Col.TOOL:
        return st.tool
    if col == Col.KIND:
        return st.kind
    if col == Col.HOST:
        return host_of(st, my_host)
    if col == Col.PID:
        return _pid_text(st)
    if col == Col.LIVENESS:
        return _liveness_text(st)
    if rec is None:
        return ""
    if col == Col.FORMAT:
        return rec.format
    if col == Col.TAG:
        return rec.tag or ""
    return ""


SEARCHED = tuple(c for c in Col if c not in (Col.AGE, Col.EXPIRES))
"""The columns the filter box searches (the ones that do not follow the clock), in order."""


def searched_texts(st: LockStatus, my_host: str) -> list[str]:
    """:func:`static_text` of each column of :data:`SEARCHED`, in that order, computed in one
    pass (the filter box's first search of 100,000 rows asks this of every row)."""
    rec = st.record
    path = st.path
    fmt, tag = ("", "") if rec is None else (rec.format, rec.tag or "")
    return [STATE_WORDS[display_state(st)], *_lock_and_directory(path), fmt,
            holder_text(st, my_host), _pid_text(st), _liveness_text(st), tag, st.tool, st.kind,
            host_of(st, my_host)]


def display(st: LockStatus, col: Col, now: datetime, my_host: str) -> str:
    """The text of cell ``col`` of ``st``'s row at ``now`` (aware UTC)."""
    if col == Col.AGE:
        age = age_seconds(st, now)
        if age is None:
            return ""
        if st.age_is_lower_bound:  # counted from when it was first seen: at least that
            return "?" if age < 1.0 else f"≥ {human_duration(age)}"
        return human_duration(age)
    if col == Col.EXPIRES:
        return _countdown(expires_in(st, now))
    return static_text(st, col, my_host)


def sort_key(st: LockStatus, col: Col, my_host: str) -> str:
    """The cell's sort key: a string that orders like the column's real type (state rank, PID
    as a number, age/expiry as times) followed by the lock path, so rows whose values are equal
    keep a stable order instead of jumping when one of them changes (Qt re-inserts a changed
    row at the edge of its equal range). Strings compare in C++, so sorting never calls Python.
    No key depends on the clock."""
    rec = st.record
    if col == Col.STATE:
        key = str(STATE_ORDER.get(st.state, 9))
    elif col == Col.PID:
        pid = rec.pid if rec and rec.pid is not None else st.kernel_pid
        key = f"{(pid if pid is not None else -1) + 1:012d}"
    elif col == Col.AGE:
        base = base_time(st)
        # a larger age is an earlier time; no age sorts first ("!" < digits)
        key = "!" if base is None else _fixed(_TIME_SPAN - base)
    elif col == Col.EXPIRES:
        exp = expiry(st)
        key = "~" if exp is None else _fixed(exp)  # never expires: last ("~" > digits)
    else:
        key = static_text(st, col, my_host).lower()
    return key + "\x00" + st.path


def sort_keys(st: LockStatus, my_host: str) -> tuple[str, ...]:
    """:func:`sort_key` of every column, in :class:`Col` order."""
    return tuple(sort_key(st, c, my_host) for c in Col)


def cell_keys(st: LockStatus, my_host: str) -> tuple[Hashable, ...]:
    """Per-column identity of the cells' content, independent of the clock: a cell whose key
    is unchanged need not be repainted."""
    rec = st.record
    return (
        (st.state, st.error, st.liveness),  # liveness: "held" vs "held, holder dead"
        (st.path, tuple(r.stable() for r in st.reasons)),
        st.path,
        rec.format if rec else None,
        holder_text(st, my_host),
        rec.pid if rec else st.kernel_pid,
        st.liveness if rec else None,
        base_time(st),
        expiry(st),
        rec.tag if rec else None,
        st.tool,
        st.kind,
        host_of(st, my_host),
    )
