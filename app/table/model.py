"""The lock inventory as a Qt table: :class:`LockTableModel`, one row per lock path, updated in
place. Columns, roles and cell contents live in :mod:`app.table.columns`; sorting and filtering in
:mod:`app.table.proxy`.

Rules (docs/DESIGN.md "GUI", docs/gui.md "Window"):

- Rows are keyed by lock path. Updates change rows in place and emit ``dataChanged`` once per
  contiguous block of changed rows, over the columns whose cells changed; added/removed locks
  insert/remove rows. The model is never reset after the first fill. Each batch is framed by
  :attr:`LockTableModel.batchStarted` and :attr:`LockTableModel.batchFinished`, so that the
  proxy re-sorts once per batch (:mod:`app.table.proxy`).
- Ages and expiry countdowns tick once a second: a timer emits ``dataChanged`` for the age and
  expires columns only.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
    QTimer,
    Signal,
)

from app.style.icons import state_icon
from app.table import columns
from app.table.columns import HEADERS, NCOLS, SORT_ROLE, STATUS_ROLE, Col
from app.table.lockinfo import STATE_EXPLAIN, Update, display_state, holder_changed
from core.reasons import texts
from core.record import LockStatus, State
from core.text import printable
from core.verdicts.liveness import hostname

ModelIndex = QModelIndex | QPersistentModelIndex

Transition = tuple[LockStatus | None, LockStatus | None]
"""(old, new) status of one path whose state or holder changed; ``None`` for absent."""


@dataclass(frozen=True, slots=True)
class Batch:
    """What one :meth:`LockTableModel.apply` did, for :class:`app.table.proxy.LockFilterProxy`.

    Attributes:
        removed: source rows removed, numbered as before the batch, ascending.
        changed: ``(row, first column, last column)`` per row changed in place, numbered as
            after the batch, ascending.
        inserted: first and last new row (appended at the end), or ``None``.
        columns: the columns in which some cell changed (a sort by any other column keeps
            its order).
    """

    removed: list[int]
    changed: list[tuple[int, int, int]]
    inserted: tuple[int, int] | None
    columns: frozenset[int] = frozenset()


def row_blocks(spans: Iterable[tuple[int, int, int]]) -> list[tuple[int, int, int, int]]:
    """Group ``(row, first column, last column)`` spans, sorted by row, into blocks of
    contiguous rows: ``(first row, last row, first column, last column)``, the columns the
    union of the block's spans (one ``dataChanged`` each)."""
    blocks: list[tuple[int, int, int, int]] = []
    for row, c0, c1 in spans:
        if blocks and blocks[-1][1] + 1 == row:
            first, _last, b0, b1 = blocks[-1]
            blocks[-1] = (first, row, min(b0, c0), max(b1, c1))
        else:
            blocks.append((row, row, c0, c1))
    return blocks


class LockTableModel(QAbstractTableModel):
    """Lock inventory rows keyed by lock path.

    Args:
        parent: Qt parent.
        my_pid: PID whose locks are "held by me" (default: this process, os.getpid()).
        my_host: host name for "held by me" (default: :func:`core.verdicts.liveness.hostname`).
        clock: returns "now" as an aware UTC datetime (tests pass a fixed clock).
        tick_ms: age refresh period in milliseconds (1000; 0 disables the timer).

    Signals:
        batchStarted(list[int]): a batch begins; the rows it will remove (ascending), the
            model still as before.
        batchFinished(Batch): the batch's rows are in place (:class:`Batch`).
        transitions(list[tuple[LockStatus | None, LockStatus | None]]): after each applied
            batch, (old, new) per path whose state or holder changed, ``None`` for absent
            (the tray's notifications).
        countsChanged(): the per-state counts may have changed.
        ticked(): the clock advanced (once a second); ages and countdowns changed.

    Ticks: with ``source_ticks`` (the default) a tick emits this model's ``dataChanged`` on
    the age and expires columns. :class:`app.table.proxy.LockFilterProxy` turns that off and emits
    its own ``dataChanged`` on those columns instead: Qt's proxy re-checks the sort position of
    every changed row (4 ``data()`` calls per row, whatever the roles), which for 10,000 rows
    costs ~200 ms a second, while a uniform age shift never changes the order.
    """

    batchStarted = Signal(object)
    batchFinished = Signal(object)
    transitions = Signal(object)
    countsChanged = Signal()
    ticked = Signal()

    def __init__(
        self,
        parent: QObject | None = None,
        *,
        my_pid: int | None = None,
        my_host: str | None = None,
        clock: Callable[[], datetime] | None = None,
        tick_ms: int = 1000,
    ) -> None:
        super().__init__(parent)
        self._rows: list[LockStatus] = []
        self._keys: list[tuple[Hashable, ...] | None] = []
        """:func:`app.table.columns.cell_keys` per row, computed on the row's first change (``None``
        until then): a first fill of 100,000 rows never pays for them."""
        self._sort: dict[int, list[str]] = {}
        """Sort keys of the columns sorted by so far (column -> key per row): computed for a
        column on its first sort, then kept up to date row by row."""
        self._search: list[str | None] = []
        self._index: dict[str, int] = {}
        self._counts: Counter[State] = Counter()
        self.source_ticks = True
        self.my_pid = os.getpid() if my_pid is None else my_pid
        self.my_host = hostname() if my_host is None else my_host
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
        """Number of columns (:class:`app.table.columns.Col`)."""
        return 0 if parent.isValid() else NCOLS

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:  # a QVariant: str, int or None (as Qt's own signature)
        """Column titles (horizontal) and row numbers (vertical)."""
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if orientation == Qt.Orientation.Horizontal:
            return HEADERS[Col(section)] if 0 <= section < NCOLS else None
        return section + 1

    def data(self, index: ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:  # QVariant
        """Display text, state icon, tooltip (reasons), :data:`app.table.columns.STATUS_ROLE`,
        :data:`app.table.columns.SORT_ROLE` and alignment of one cell; ``None`` for anything
        else."""
        if not index.isValid():
            return None
        return self.cell(index.row(), index.column(), role)

    def cell(self, row: int, col: int, role: int) -> Any:  # a QVariant, as data()
        """:meth:`data` of source row ``row``, column ``col`` without a QModelIndex (the
        proxy's path); ``None`` outside the table."""
        if not (0 <= row < len(self._rows) and 0 <= col < NCOLS):
            return None
        if role == SORT_ROLE:  # hot path: the proxy asks this on every comparison
            keys = self._sort.get(col)
            if keys is not None:
                return keys[row]
            return columns.sort_key(self._rows[row], Col(col), self.my_host)
        st = self._rows[row]
        if role == Qt.ItemDataRole.DisplayRole:  # escaped: a tag or path can hold anything
            return printable(columns.display(st, Col(col), self._now, self.my_host))
        if role == STATUS_ROLE:
            return st
        if role == Qt.ItemDataRole.DecorationRole and col == Col.STATE:
            return state_icon(display_state(st))
        if role == Qt.ItemDataRole.ToolTipRole and col in (Col.STATE, Col.LOCK):
            words = texts(st.reasons)
            lines = [st.path, STATE_EXPLAIN[display_state(st)], *words]
            if st.error and st.error not in words:
                lines.append(st.error)
            return "\n".join(printable(line) for line in lines)
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (Col.PID, Col.AGE, Col.EXPIRES):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    # -- cell contents at the current tick ----------------------------------------------------

    def age_seconds(self, st: LockStatus) -> float | None:
        """Age of the lock at the model's current tick, in seconds, or ``None``."""
        return columns.age_seconds(st, self._now)

    def expires_in(self, st: LockStatus) -> float | None:
        """Seconds until expiry (negative once expired) at the current tick, or ``None``."""
        return columns.expires_in(st, self._now)

    def holder_text(self, st: LockStatus) -> str:
        """Holder column text (:func:`app.table.columns.holder_text` for this host)."""
        return columns.holder_text(st, self.my_host)

    # -- updates ------------------------------------------------------------------------------

    def apply(self, updates: Iterable[Update]) -> None:
        """Apply a batch of updates in order: a status for a new path inserts a row, for a
        known path changes that row in place; a ``None`` status or a ``free`` one removes the
        row -- except a free kernel-lock anchor (:attr:`core.record.LockStatus.present`: its
        file is there, nobody holds it), which is a row in state free.

        Signals, in this order: :attr:`batchStarted` (the rows about to go, the model still
        unchanged); removals, one ``rowsRemoved`` per contiguous run, highest first; the
        in-place changes, one ``dataChanged`` per contiguous block of changed rows (its columns
        span every changed cell of the block); the new rows, one ``rowsInserted`` at the end;
        :attr:`batchFinished`; then :attr:`transitions` and :attr:`countsChanged` once per
        batch (docs/gui.md "Window")."""
        final: dict[str, LockStatus | None] = {}
        for path, st in updates:
            final[path] = st if st is not None and st.present else None
        if not final:
            return
        trans: list[Transition] = []
        removed: list[int] = []
        added: list[LockStatus] = []
        changed: list[LockStatus] = []
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
            changed.append(st)
        removed.sort()
        self.batchStarted.emit(removed)
        if removed:
            self._remove_rows(removed)
        spans: list[tuple[int, int, int]] = []
        cols: set[int] = set()
        for st in changed:
            row = self._index[st.path]
            row_cols = self._change_row(row, st)
            if row_cols:
                spans.append((row, row_cols[0], row_cols[-1]))
                cols.update(row_cols)
        spans.sort()
        for first, last, c0, c1 in row_blocks(spans):
            self.dataChanged.emit(self.index(first, c0), self.index(last, c1))
        inserted: tuple[int, int] | None = None
        if added:
            inserted = (len(self._rows), len(self._rows) + len(added) - 1)
            self._insert_rows(added)
        self.batchFinished.emit(Batch(removed=removed, changed=spans, inserted=inserted,
                                      columns=frozenset(cols)))
        if trans:
            self.transitions.emit(trans)
        if removed or added or trans:
            self.countsChanged.emit()

    def sync(self, statuses: Iterable[LockStatus]) -> None:
        """Make the rows equal to ``statuses`` (a full snapshot) without a reset: paths not in
        the snapshot are removed, others inserted or changed in place. The first fill of an
        empty model uses a single insert."""
        new = {s.path: s for s in statuses}
        ups: list[Update] = [(p, None) for p in self._index if p not in new]
        ups += list(new.items())
        self.apply(ups)

    def _change_row(self, row: int, st: LockStatus) -> list[int]:
        """Store ``st`` in ``row``; the columns whose cells changed, ascending (none: no
        signal; :meth:`apply` emits one per block of rows)."""
        keys = columns.cell_keys(st, self.my_host)
        old = self._rows[row]
        old_keys = self._keys[row]
        if old_keys is None:  # first change of the row: its keys as inserted
            old_keys = columns.cell_keys(old, self.my_host)
        self._rows[row] = st
        if old.state is not st.state:
            self._counts[old.state] -= 1
            self._counts[st.state] += 1
        if keys == old_keys:
            return []
        self._keys[row] = keys
        for col, col_keys in self._sort.items():
            col_keys[row] = columns.sort_key(st, Col(col), self.my_host)
        self._search[row] = None
        return [c for c in range(len(keys)) if keys[c] != old_keys[c]]

    def _insert_rows(self, statuses: list[LockStatus]) -> None:
        """Append ``statuses`` as new rows: their cell keys and search texts wait until they
        are needed; the sort keys of the columns sorted by so far are computed now."""
        first = len(self._rows)
        self.beginInsertRows(QModelIndex(), first, first + len(statuses) - 1)
        self._rows.extend(statuses)
        self._counts.update(st.state for st in statuses)
        self._keys.extend([None] * len(statuses))
        self._search.extend([None] * len(statuses))
        sort_key, host = columns.sort_key, self.my_host
        for col, col_keys in self._sort.items():
            c = Col(col)
            col_keys.extend([sort_key(st, c, host) for st in statuses])
        self._index.update(zip([st.path for st in statuses], range(first, first + len(statuses)),
                               strict=True))
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
                del self._index[st.path]
            del self._rows[first : last + 1]
            del self._keys[first : last + 1]
            for col_keys in self._sort.values():
                del col_keys[first : last + 1]
            del self._search[first : last + 1]
            self.endRemoveRows()
        index = self._index  # renumber only the rows after the lowest removed one
        for i in range(rows[-1], len(self._rows)):
            index[self._rows[i].path] = i

    def stop_ticking(self) -> None:
        """Stop the one-second age timer."""
        self._timer.stop()

    def tick(self) -> None:
        """Advance the clock, emit :attr:`ticked` and (with ``source_ticks``) ``dataChanged``
        for the age and expires columns, with the display role only: every age grows by the
        same amount, so the sort order cannot change and the proxy need not re-sort (see
        :data:`app.table.columns.FILTER_ROLE`)."""
        self._now = self._clock()
        if not self._rows:
            return
        self.ticked.emit()
        if self.source_ticks:
            self.dataChanged.emit(
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

    def column_sort_keys(self, col: int) -> list[str]:
        """The :data:`app.table.columns.SORT_ROLE` key of column ``col`` for every source row, in
        row order (the proxy sorts source rows with it). The model's own list, kept up to
        date from then on: read it, never change it."""
        keys = self._sort.get(col)
        if keys is None:
            sort_key, c, host = columns.sort_key, Col(col), self.my_host
            keys = self._sort[col] = [sort_key(st, c, host) for st in self._rows]
        return keys

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
            parts = columns.searched_texts(st, self.my_host)
            parts.append(st.path)
            parts.extend(texts(st.reasons))
            text = "\x1f".join(parts).lower()
            self._search[row] = text
        return text
