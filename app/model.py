"""The lock inventory as a Qt table: :class:`LockTableModel` (one row per lock path, updated
in place) and :class:`LockFilterProxy` (sorting by real types, filter box, quick filters).

Rules (DESIGN.md "GUI", issue 5 "Main window"):

- Rows are keyed by lock path. Updates change rows in place and emit ``dataChanged`` only for
  the cells whose content changed; added/removed locks insert/remove rows. The model is never
  reset after the first fill.
- Ages and expiry countdowns tick once a second: a timer emits ``dataChanged`` for the age and
  expires columns only.
- :data:`SORT_ROLE` gives each cell a string sort key ordering like its real type (ages and
  countdowns as times, PIDs as numbers) with the path as tie-break, so the proxy sorts
  durations as durations, keeps equal rows in a stable order and stays in C++.
"""

from __future__ import annotations

import enum
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    QTimer,
    Signal,
)

from app.icons import state_icon
from app.qtcompat import emit
from core.reasons import Code, UnreadableKind, advance, texts
from core.record import LockStatus, State

ModelIndex = QModelIndex | QPersistentModelIndex


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
}

STATUS_ROLE = int(Qt.ItemDataRole.UserRole) + 1
"""Role returning the row's :class:`~core.record.LockStatus` (any column)."""
SORT_ROLE = int(Qt.ItemDataRole.UserRole) + 2
"""Role returning the cell's sort key, a ``str`` ordering like the column's real type, then
the lock path as a tie-break (see :meth:`LockTableModel._sort_key`). The keys do not depend
on the clock, so they are computed once per change: age sorts by the Unix time the age counts
from (reversed: a larger age is an earlier time), expires by the expiry's Unix time; both
order exactly like the durations shown."""
FILTER_ROLE = int(Qt.ItemDataRole.UserRole) + 3
"""The proxy's filter role. No cell answers it: :class:`LockFilterProxy` filters in Python on
whole rows, and a ``dataChanged`` whose roles omit it and :data:`SORT_ROLE` (the age tick) is
only forwarded by the proxy, without re-filtering or re-sorting 10,000 rows every second."""

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

Update = tuple[str, LockStatus | None]
"""One update: (lock path, new status or ``None`` when the lock disappeared)."""


def human_duration(seconds: float) -> str:
    """Duration in words via :func:`core.policy.human_duration` ("3m 12s", "2h 0m")."""
    from core.policy import human_duration as _hd

    return _hd(float(int(max(0.0, seconds))))


def holder_changed(old: LockStatus, new: LockStatus) -> bool:
    """True when the lock file now names another acquisition (token, PID or timestamp)."""
    a, b = old.record, new.record
    if a is None or b is None:
        return False
    return (a.token, a.pid, a.acquired_at) != (b.token, b.pid, b.acquired_at)


def status_now(st: LockStatus, now: datetime | None = None) -> LockStatus:
    """``st`` as it reads at ``now`` (default: the clock): ticking reason parameters moved
    along the clock (:func:`core.reasons.advance`) and ``checked_at`` set to ``now``."""
    at = now or datetime.now(UTC)
    dt = max((at - st.checked_at).total_seconds(), 0.0)
    return replace(st, reasons=advance(st.reasons, dt), checked_at=max(at, st.checked_at))


def current_reasons(st: LockStatus, now: datetime | None = None) -> list[str]:
    """The verdict's reasons in words as they read at ``now`` (default: the clock), for the
    detail pane and the confirmations: the watcher does not resend a verdict whose only change
    is a ticking parameter ("held for 3m 12s"), so those parameters are moved along the clock
    here (:func:`core.reasons.advance`) before rendering. Never raises."""
    at = now or datetime.now(UTC)
    return texts(advance(st.reasons, max((at - st.checked_at).total_seconds(), 0.0)))


def not_a_lock_file(st: LockStatus) -> bool:
    """True when the path is a symlink, FIFO, socket, device or directory
    (:func:`core.fsutil.read_lock_file` refused it without opening it): Lockwarden offers
    neither Reclaim nor Force release for what is not a lock file."""
    return st.state is State.UNREADABLE and st.file is None and any(
        r.code is Code.UNREADABLE and _kind(r.get("kind")) in NOT_FILE_KINDS
        for r in st.reasons)


NOT_FILE_KINDS = frozenset(k for k in UnreadableKind if k.not_a_file)
"""Unreadable kinds that are no regular file (symlink, FIFO, socket, device, directory)."""


def _kind(value: object) -> UnreadableKind | None:
    try:
        return UnreadableKind(str(value))
    except ValueError:
        return None


def is_attention(state: State) -> bool:
    """True for the states the tray counts as "stale or expired"."""
    return state in (State.STALE, State.EXPIRED)


class LockTableModel(QAbstractTableModel):
    """Lock inventory rows keyed by lock path.

    Args:
        parent: Qt parent.
        my_pid: PID whose locks are "held by me" (default: this process, os.getpid()).
        my_host: host name for "held by me" (default: :func:`core.liveness.hostname`).
        clock: returns "now" as an aware UTC datetime (tests pass a fixed clock).
        tick_ms: age refresh period in milliseconds (1000; 0 disables the timer).

    Signals:
        transitions(list[tuple[LockStatus | None, LockStatus | None]]): after each applied
            batch, (old, new) per path whose state or holder changed, ``None`` for absent
            (used for notifications and to notice locks this app lost).
        countsChanged(): the per-state counts may have changed.
        ticked(): the clock advanced (once a second); ages and countdowns changed.

    Ticks: with ``source_ticks`` (the default) a tick emits this model's ``dataChanged`` on
    the age and expires columns. :class:`LockFilterProxy` turns that off and emits its own
    ``dataChanged`` on those columns instead: Qt's proxy re-checks the sort position of every
    changed row (4 ``data()`` calls per row, whatever the roles), which for 10,000 rows costs
    ~200 ms a second, while a uniform age shift never changes the order.
    """

    transitions = Signal(object)
    countsChanged = Signal()
    ticked = Signal()

    def __init__(
        self,
        parent: Any = None,
        *,
        my_pid: int | None = None,
        my_host: str | None = None,
        clock: Callable[[], datetime] | None = None,
        tick_ms: int = 1000,
    ) -> None:
        super().__init__(parent)
        self._rows: list[LockStatus] = []
        self._keys: list[tuple[Any, ...]] = []
        self._sort: list[tuple[Any, ...]] = []
        self._search: list[str | None] = []
        self._index: dict[str, int] = {}
        self._counts: Counter[State] = Counter()
        self.source_ticks = True
        self.my_pid = os.getpid() if my_pid is None else my_pid
        if my_host is None:
            from core.liveness import hostname

            my_host = hostname()
        self.my_host = my_host
        self._clock = clock or (lambda: datetime.now(UTC))
        self._now = self._clock()
        self._timer = QTimer(self)
        self._timer.setInterval(tick_ms if tick_ms > 0 else 1000)
        self._timer.timeout.connect(self.tick)
        if tick_ms > 0:
            self._timer.start()

    # -- Qt model API -------------------------------------------------------------------------

    def rowCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008
        """Number of locks (0 under a valid parent: this is a flat table)."""
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008
        """Number of columns (:class:`Col`)."""
        return 0 if parent.isValid() else NCOLS

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        """Column titles (horizontal) and row numbers (vertical)."""
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if orientation == Qt.Orientation.Horizontal:
            return HEADERS[Col(section)] if 0 <= section < NCOLS else None
        return section + 1

    def data(self, index: ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        """Display text, state icon, tooltip (reasons), :data:`STATUS_ROLE`, :data:`SORT_ROLE`
        and alignment of one cell; ``None`` for anything else."""
        if not index.isValid():
            return None
        row, col = index.row(), index.column()
        if row >= len(self._rows) or col >= NCOLS:
            return None
        if role == SORT_ROLE:  # hot path: the proxy asks this on every comparison
            return self._sort[row][col]
        st = self._rows[row]
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(st, Col(col))
        if role == STATUS_ROLE:
            return st
        if role == Qt.ItemDataRole.DecorationRole and col == Col.STATE:
            return state_icon(st.state.value)
        if role == Qt.ItemDataRole.ToolTipRole and col in (Col.STATE, Col.LOCK):
            words = texts(st.reasons)
            lines = [st.path, *words]
            if st.error and st.error not in words:
                lines.append(st.error)
            return "\n".join(lines)
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (Col.PID, Col.AGE, Col.EXPIRES):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    # -- cell contents ------------------------------------------------------------------------

    @staticmethod
    def _base_time(st: LockStatus) -> float | None:
        """Unix time the age counts from: acquired_at, else the file's mtime."""
        rec = st.record
        if rec is not None and rec.acquired_at is not None:
            return rec.acquired_at.timestamp()
        if st.file is not None:
            return st.file.mtime_ns / 1e9
        return None

    @staticmethod
    def _expiry(st: LockStatus) -> float | None:
        rec = st.record
        exp = rec.effective_expiry() if rec is not None else None
        return exp.timestamp() if exp is not None else None

    def age_seconds(self, st: LockStatus) -> float | None:
        """Age of the lock at the model's current tick, in seconds, or ``None``."""
        base = self._base_time(st)
        return None if base is None else max(0.0, self._now.timestamp() - base)

    def expires_in(self, st: LockStatus) -> float | None:
        """Seconds until expiry (negative once expired) at the current tick, or ``None``."""
        exp = self._expiry(st)
        return None if exp is None else exp - self._now.timestamp()

    def holder_text(self, st: LockStatus) -> str:
        """Holder column text: the record's owner, else the host when it is another one,
        else empty (the PID has its own column)."""
        rec = st.record
        if rec is None:
            return ""
        if rec.holder:
            return rec.holder
        if rec.host and rec.host != self.my_host:
            return rec.host
        return ""

    def _display(self, st: LockStatus, col: Col) -> str:
        rec = st.record
        if col == Col.STATE:
            return st.state.value
        if col == Col.LOCK:
            return os.path.basename(st.path)
        if col == Col.DIRECTORY:
            return os.path.dirname(st.path)
        if col == Col.FORMAT:
            return rec.format if rec else ""
        if col == Col.HOLDER:
            return self.holder_text(st)
        if col == Col.PID:
            return str(rec.pid) if rec and rec.pid is not None else ""
        if col == Col.LIVENESS:
            return st.liveness.value if rec else ""
        if col == Col.AGE:
            age = self.age_seconds(st)
            return "" if age is None else human_duration(age)
        if col == Col.EXPIRES:
            left = self.expires_in(st)
            if left is None:
                return ""
            if left >= 0:
                return "in " + human_duration(left)
            return human_duration(-left) + " ago"
        if col == Col.TAG:
            return rec.tag or "" if rec else ""
        return ""

    def _sort_key(self, st: LockStatus, col: Col) -> str:
        """The cell's sort key: a string that orders like the column's real type (state
        rank, PID as a number, age/expiry as times) followed by the lock path, so rows whose
        values are equal keep a stable order instead of jumping when one of them changes
        (Qt re-inserts a changed row at the edge of its equal range). Strings compare in
        C++, so sorting never calls Python."""
        rec = st.record
        if col == Col.STATE:
            key = str(STATE_ORDER.get(st.state, 9))
        elif col == Col.PID:
            key = f"{(rec.pid if rec and rec.pid is not None else -1) + 1:012d}"
        elif col == Col.AGE:
            base = self._base_time(st)
            # a larger age is an earlier time; no age sorts first ("!" < digits)
            key = "!" if base is None else _fixed(_TIME_SPAN - base)
        elif col == Col.EXPIRES:
            exp = self._expiry(st)
            key = "~" if exp is None else _fixed(exp)  # never expires: last ("~" > digits)
        else:
            key = self._display(st, col).lower()
        return key + "\x00" + st.path

    def _sort_keys(self, st: LockStatus) -> tuple[Any, ...]:
        return tuple(self._sort_key(st, c) for c in Col)

    def _cell_keys(self, st: LockStatus) -> tuple[Any, ...]:
        """Per-column identity of the cells' content, independent of the clock."""
        rec = st.record
        return (
            (st.state, st.error),
            (st.path, tuple(r.stable() for r in st.reasons)),
            st.path,
            rec.format if rec else None,
            self.holder_text(st),
            rec.pid if rec else None,
            st.liveness if rec else None,
            self._base_time(st),
            self._expiry(st),
            rec.tag if rec else None,
        )

    # -- updates ------------------------------------------------------------------------------

    def apply(self, updates: Iterable[Update]) -> None:
        """Apply a batch of updates in order: a status for a new path inserts a row, for a
        known path changes that row in place (``dataChanged`` on the changed cells only); a
        ``None`` status or a ``free`` one removes the row. Emits :attr:`transitions` and
        :attr:`countsChanged` once per batch."""
        final: dict[str, LockStatus | None] = {}
        for path, st in updates:
            final[path] = None if st is None or st.state is State.FREE else st
        if not final:
            return
        trans: list[tuple[LockStatus | None, LockStatus | None]] = []
        removed: list[int] = []
        added: list[LockStatus] = []
        for path, st in final.items():
            row = self._index.get(path)
            if row is None:
                if st is not None:
                    added.append(st)
                    trans.append((None, st))
                continue
            old = self._rows[row]
            if st is None:
                removed.append(row)
                trans.append((old, None))
                continue
            if old.state is not st.state or holder_changed(old, st):
                trans.append((old, st))
            self._change_row(row, st)
        if removed:
            self._remove_rows(removed)
        if added:
            self._insert_rows(added)
        if trans:
            emit(self.transitions, trans)
        if removed or added or trans:
            emit(self.countsChanged)

    def apply_changeset(self, changes: Any) -> None:
        """Apply a :class:`core.watch.ChangeSet` (``added``, ``changed``, ``removed`` lists of
        :class:`LockStatus`)."""
        ups: list[Update] = [(s.path, None) for s in changes.removed]
        ups += [(s.path, s) for s in changes.added]
        ups += [(s.path, s) for s in changes.changed]
        self.apply(ups)

    def sync(self, statuses: Iterable[LockStatus]) -> None:
        """Make the rows equal to ``statuses`` (a full snapshot) without a reset: paths not in
        the snapshot are removed, others inserted or changed in place. The first fill of an
        empty model uses a single insert."""
        new = {s.path: s for s in statuses}
        ups: list[Update] = [(p, None) for p in self._index if p not in new]
        ups += list(new.items())
        self.apply(ups)

    def _change_row(self, row: int, st: LockStatus) -> None:
        keys = self._cell_keys(st)
        old_keys = self._keys[row]
        old = self._rows[row]
        self._rows[row] = st
        if old.state is not st.state:
            self._counts[old.state] -= 1
            self._counts[st.state] += 1
        if keys == old_keys:
            return
        self._keys[row] = keys
        self._sort[row] = self._sort_keys(st)
        self._search[row] = None
        changed = [c for c in range(len(keys)) if keys[c] != old_keys[c]]
        # one signal per run of adjacent changed columns
        start = prev = changed[0]
        for c in [*changed[1:], -2]:
            if c != prev + 1:
                emit(self.dataChanged, self.index(row, start), self.index(row, prev))
                start = c
            prev = c

    def _insert_rows(self, statuses: list[LockStatus]) -> None:
        first = len(self._rows)
        self.beginInsertRows(QModelIndex(), first, first + len(statuses) - 1)
        for i, st in enumerate(statuses):
            self._rows.append(st)
            self._counts[st.state] += 1
            self._keys.append(self._cell_keys(st))
            self._sort.append(self._sort_keys(st))
            self._search.append(None)
            self._index[st.path] = first + i
        self.endInsertRows()

    def _remove_rows(self, rows: list[int]) -> None:
        rows = sorted(set(rows), reverse=True)
        # group into contiguous runs, highest first, so earlier row numbers stay valid
        runs: list[tuple[int, int]] = []
        for r in rows:
            if runs and runs[-1][0] == r + 1:
                runs[-1] = (r, runs[-1][1])
            else:
                runs.append((r, r))
        for first, last in runs:
            self.beginRemoveRows(QModelIndex(), first, last)
            for st in self._rows[first : last + 1]:
                self._counts[st.state] -= 1
            del self._rows[first : last + 1]
            del self._keys[first : last + 1]
            del self._sort[first : last + 1]
            del self._search[first : last + 1]
            self.endRemoveRows()
        self._index = {st.path: i for i, st in enumerate(self._rows)}

    def stop_ticking(self) -> None:
        """Stop the one-second age timer."""
        self._timer.stop()

    def tick(self) -> None:
        """Advance the clock and emit ``dataChanged`` for the age and expires columns, with
        the display role only: every age grows by the same amount, so the sort order cannot
        change and the proxy need not re-sort (see :data:`FILTER_ROLE`)."""
        self._now = self._clock()
        if not self._rows:
            return
        emit(self.ticked)
        if self.source_ticks:
            emit(
                self.dataChanged,
                self.index(0, Col.AGE),
                self.index(len(self._rows) - 1, Col.EXPIRES),
                [Qt.ItemDataRole.DisplayRole],
            )

    # -- queries ------------------------------------------------------------------------------

    @property
    def now(self) -> datetime:
        """The model's clock at the last tick (aware UTC)."""
        return self._now

    def status(self, row: int) -> LockStatus:
        """Status of source row ``row``."""
        return self._rows[row]

    def row_of(self, path: str) -> int | None:
        """Source row of ``path``, or ``None``."""
        return self._index.get(path)

    def status_of(self, path: str) -> LockStatus | None:
        """Status of ``path``, or ``None`` when the path is not in the table."""
        row = self._index.get(path)
        return None if row is None else self._rows[row]

    def statuses(self) -> list[LockStatus]:
        """All statuses in source row order (a copy)."""
        return list(self._rows)

    def counts(self) -> Counter[State]:
        """Number of locks per state (kept up to date incrementally; a copy)."""
        return +self._counts

    def is_mine(self, st: LockStatus) -> bool:
        """True when the lock's record names this app's PID on this host ("held by me")."""
        rec = st.record
        if rec is None or rec.pid != self.my_pid:
            return False
        return rec.host is None or rec.host == self.my_host

    def search_text(self, row: int) -> str:
        """Lower-case text of every column of ``row`` plus its path and reasons (cached)."""
        text = self._search[row]
        if text is None:
            st = self._rows[row]
            parts = [self._display(st, c) for c in Col if c not in (Col.AGE, Col.EXPIRES)]
            parts.append(st.path)
            parts.extend(texts(st.reasons))
            text = "\x1f".join(parts).lower()
            self._search[row] = text
        return text


class LockFilterProxy(QSortFilterProxyModel):
    """Sort/filter proxy over :class:`LockTableModel`.

    Sorting uses :data:`SORT_ROLE` (real types, evaluated in C++). Filtering: the filter box
    text (case-insensitive substring, every word must match some column), "stale only"
    (state stale or expired) and "held by me" (:meth:`LockTableModel.is_mine`).
    """

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)
        self.setFilterRole(FILTER_ROLE)
        self.setDynamicSortFilter(True)
        self._words: list[str] = []
        self._stale_only = False
        self._mine_only = False

    def setSourceModel(self, model: Any) -> None:
        """Attach ``model``; for a :class:`LockTableModel`, ticks are re-emitted by this proxy
        (see :class:`LockTableModel`)."""
        old = self.sourceModel()
        if isinstance(old, LockTableModel):
            old.ticked.disconnect(self._ticked)
            old.source_ticks = True
        super().setSourceModel(model)
        if isinstance(model, LockTableModel):
            model.source_ticks = False
            model.ticked.connect(self._ticked)

    def _ticked(self) -> None:
        n = self.rowCount()
        if n:
            emit(self.dataChanged, self.index(0, Col.AGE), self.index(n - 1, Col.EXPIRES),
                 [Qt.ItemDataRole.DisplayRole])

    def _refilter(self, change: Callable[[], None]) -> None:
        self.beginFilterChange()
        change()
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def set_text(self, text: str) -> None:
        """Filter box text; empty shows everything."""
        words = text.lower().split()
        if words != self._words:
            self._refilter(lambda: setattr(self, "_words", words))

    def set_stale_only(self, on: bool) -> None:
        """Quick filter: only stale and expired locks."""
        if on != self._stale_only:
            self._refilter(lambda: setattr(self, "_stale_only", on))

    def set_held_by_me(self, on: bool) -> None:
        """Quick filter: only locks held by this app's process."""
        if on != self._mine_only:
            self._refilter(lambda: setattr(self, "_mine_only", on))

    @property
    def active(self) -> bool:
        """True when any filter is on."""
        return bool(self._words or self._stale_only or self._mine_only)

    def filterAcceptsRow(self, source_row: int, source_parent: ModelIndex) -> bool:
        """Row passes the text and quick filters."""
        if not (self._words or self._stale_only or self._mine_only):
            return True
        model = self.sourceModel()
        if not isinstance(model, LockTableModel):
            return True
        st = model.status(source_row)
        if self._stale_only and not is_attention(st.state):
            return False
        if self._mine_only and not model.is_mine(st):
            return False
        if self._words:
            text = model.search_text(source_row)
            return all(w in text for w in self._words)
        return True

    def status_at(self, row: int) -> LockStatus | None:
        """Status of proxy row ``row`` or ``None``."""
        idx = self.index(row, 0)
        if not idx.isValid():
            return None
        value = self.data(idx, STATUS_ROLE)
        return value if isinstance(value, LockStatus) else None
