"""Sorting and filtering of the lock table: :class:`LockFilterProxy` over
:class:`app.table.model.LockTableModel` (docs/gui.md "Window").

The proxy keeps its row order as a Python list of source rows and sorts it with the model's
precomputed keys (:meth:`app.table.model.LockTableModel.column_sort_keys`): a
``QSortFilterProxyModel``
compares rows through ``data()``, one Python call per side of every comparison, which took 6 s
to sort 100,000 rows and ~80 ms to place each 500 new ones (docs/performance.md "GUI under
load"). Updates arrive as batches (:class:`app.table.model.Batch`): the rows a batch removes leave
the proxy before they leave the model, new rows are appended in one block, and the order is
restored once per batch, with one ``layoutChanged`` when it moved at all: the new rows and the
changed ones are merged into the rest of the sorted order by binary search
(:func:`app.table.row_order.merged`) while they are few, so a chunk of a first fill or a batch of
changes costs O(k log n) key look-ups and a copy of the list, not a re-sort of every row.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import filterfalse
from typing import Any

from PySide6.QtCore import (
    QAbstractItemModel,
    QAbstractTableModel,
    QModelIndex,
    QObject,
    Qt,
)

from app.table.columns import NCOLS, ROLES, Col
from app.table.fleet_rows import host_of
from app.table.lockinfo import is_attention
from app.table.model import Batch, LockTableModel, ModelIndex, row_blocks
from app.table.row_order import MERGE_BELOW, merged, position_of, runs_of
from core.record import LockStatus

MANY_RUNS = 16
"""Above this many separate runs of proxy rows to remove, the rows are first moved to the end
in one layout change and removed as one block (each removal signal costs the view and the
row list a pass)."""



class LockFilterProxy(QAbstractTableModel):
    """Sort/filter proxy over :class:`app.table.model.LockTableModel`: a flat table whose rows are
    source rows in sorted, filtered order.

    Sorting (:meth:`sort`) uses :data:`app.table.columns.SORT_ROLE` keys, ties keeping their
    previous order; column ``-1`` is the source order. Filtering: the filter box text
    (case-insensitive substring, every word must match some column), "stale only" (state stale
    or expired) and "held by me" (:meth:`LockTableModel.is_mine`).

    Each model batch reaches the view as: removals (before the model removes the rows), one
    ``rowsInserted`` for the new rows (appended), one ``layoutChanged`` when the order moved
    (the single re-sort of the batch), then one ``dataChanged`` per contiguous block of
    changed proxy rows.
    """

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._src: LockTableModel | None = None
        self._order: list[int] = []
        self._pos: dict[int, int] | None = None
        self._col = -1
        self._desc = False
        self._words: list[str] = []
        self._stale_only = False
        self._mine_only = False
        self._host: str | None = None
        self._batch_rows = -1  # source rows before the batch in progress; -1 outside a batch

    # -- source ------------------------------------------------------------------------------

    def setSourceModel(self, model: QAbstractItemModel) -> None:
        """Attach ``model``, a :class:`LockTableModel` (its ticks are then re-emitted by this
        proxy, see :class:`LockTableModel`). Raises ``TypeError`` for any other model."""
        if not isinstance(model, LockTableModel):
            raise TypeError("LockFilterProxy shows a LockTableModel")
        self.beginResetModel()
        old = self._src
        if old is not None:
            old.ticked.disconnect(self._ticked)
            old.batchStarted.disconnect(self._batch_started)
            old.batchFinished.disconnect(self._batch_finished)
            old.dataChanged.disconnect(self._source_data_changed)
            old.modelReset.disconnect(self._source_reset)
            old.layoutChanged.disconnect(self._source_reset)
            old.source_ticks = True
        self._src = model
        self._batch_rows = -1
        model.source_ticks = False
        model.ticked.connect(self._ticked)
        model.batchStarted.connect(self._batch_started)
        model.batchFinished.connect(self._batch_finished)
        model.dataChanged.connect(self._source_data_changed)
        model.modelReset.connect(self._source_reset)
        model.layoutChanged.connect(self._source_reset)
        self._order = self._sorted(self._accepted(range(model.rowCount())))
        self._pos = None
        self.endResetModel()

    def sourceModel(self) -> LockTableModel | None:
        """The :class:`LockTableModel` shown, or ``None``."""
        return self._src

    # -- Qt model API ------------------------------------------------------------------------

    def rowCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008
        """Number of shown rows (0 under a valid parent: a flat table)."""
        return 0 if parent.isValid() else len(self._order)

    def columnCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008
        """Number of columns (:class:`app.table.columns.Col`)."""
        return 0 if parent.isValid() else NCOLS

    def data(self, index: ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:  # QVariant
        """The source cell's data (:meth:`LockTableModel.data`); ``None`` at once for a role
        no cell answers (:data:`app.table.columns.ROLES`)."""
        if role not in ROLES:
            return None
        row = index.row()
        if not index.isValid() or self._src is None or row >= len(self._order):
            return None
        return self._src.cell(self._order[row], index.column(), role)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:  # a QVariant, as Qt's own signature
        """Column titles from the source; row numbers (1-based) vertically."""
        if orientation == Qt.Orientation.Vertical:
            return section + 1 if role == Qt.ItemDataRole.DisplayRole else None
        return None if self._src is None else self._src.headerData(section, orientation, role)

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        """Sort by ``column`` (``-1``: source order) in ``order``: one ``layoutChanged``."""
        self._col = column if 0 <= column < NCOLS else -1
        self._desc = order == Qt.SortOrder.DescendingOrder
        self._relayout(self._sorted(self._order))

    def sortColumn(self) -> int:
        """The column sorted by, ``-1`` for the source order."""
        return self._col

    def sortOrder(self) -> Qt.SortOrder:
        """The sort order."""
        return Qt.SortOrder.DescendingOrder if self._desc else Qt.SortOrder.AscendingOrder

    # -- mapping -----------------------------------------------------------------------------

    def mapToSource(self, index: ModelIndex) -> QModelIndex:
        """The source index of proxy ``index`` (invalid for an invalid one)."""
        if not index.isValid() or self._src is None or index.row() >= len(self._order):
            return QModelIndex()
        return self._src.index(self._order[index.row()], index.column())

    def mapFromSource(self, index: ModelIndex) -> QModelIndex:
        """The proxy index of source ``index``; invalid when it is filtered out."""
        if not index.isValid():
            return QModelIndex()
        row = self._where({index.row()}).get(index.row())
        return QModelIndex() if row is None else self.index(row, index.column())

    def _positions(self) -> dict[int, int]:
        """Source row -> proxy row (built once per order change, on demand)."""
        if self._pos is None:
            self._pos = dict(zip(self._order, range(len(self._order)), strict=True))
        return self._pos

    def _where(self, rows: set[int]) -> dict[int, int]:
        """Proxy row of each shown source row in ``rows``: from the position map when it is
        built, else by binary search on the sort keys (:func:`app.table.row_order.position_of`:
        the order is sorted by them), the map built only when a search misses (a row filtered
        out)."""
        if self._pos is None:
            src = self._src
            keys = None if src is None or self._col < 0 else src.column_sort_keys(self._col)
            key = None if keys is None else keys.__getitem__
            found: dict[int, int] = {}
            for r in rows:
                p = position_of(self._order, r, key, self._desc and key is not None)
                if p is None:
                    break
                found[r] = p
            else:
                return found
        pos = self._positions()
        return {r: p for r in rows if (p := pos.get(r)) is not None}

    # -- filters -----------------------------------------------------------------------------

    def set_text(self, text: str) -> None:
        """Filter box text; empty shows everything."""
        words = text.lower().split()
        if words != self._words:
            self._words = words
            self._refilter()

    def set_stale_only(self, on: bool) -> None:
        """Quick filter: only stale and expired locks."""
        if on != self._stale_only:
            self._stale_only = on
            self._refilter()

    def set_held_by_me(self, on: bool) -> None:
        """Quick filter: only locks held by this app's process."""
        if on != self._mine_only:
            self._mine_only = on
            self._refilter()

    def set_host(self, host: str | None) -> None:
        """Host filter: only locks whose Host column (:func:`app.table.fleet_rows.host_of`) is
        ``host`` (case-insensitive); None shows every host's."""
        host = host.lower() if host else None
        if host != self._host:
            self._host = host
            self._refilter()

    @property
    def host(self) -> str | None:
        """The host filter (lower case), or None."""
        return self._host

    @property
    def active(self) -> bool:
        """True when any filter is on."""
        return bool(self._words or self._stale_only or self._mine_only or self._host)

    def accepts(self, source_row: int) -> bool:
        """Source row ``source_row`` passes the text and quick filters."""
        model = self._src
        if model is None or not self.active:
            return True
        st = model.status(source_row)
        if self._stale_only and not is_attention(st.state):
            return False
        if self._mine_only and not model.is_mine(st):
            return False
        if self._host and host_of(st, model.my_host).lower() != self._host:
            return False
        if self._words:
            text = model.search_text(source_row)
            return all(w in text for w in self._words)
        return True

    def _accepted(self, rows: Sequence[int] | range) -> list[int]:
        """The rows of ``rows`` that pass the filters (:meth:`accepts`), in order; the filter
        box alone is checked without a method call per row (a keystroke at 100,000 rows: ~50
        ms instead of ~150, docs/performance.md "GUI under load")."""
        model = self._src
        if not self.active or model is None:
            return list(rows)
        if self._stale_only or self._mine_only or self._host:
            return [r for r in rows if self.accepts(r)]
        text = model.search_text
        first, *more = self._words
        found = [r for r in rows if first in text(r)]
        for word in more:
            found = [r for r in found if word in text(r)]
        return found

    def _refilter(self) -> None:
        model = self._src
        if model is None:
            return
        keep = set(self._accepted(range(model.rowCount())))
        self._remove_proxy_rows([p for p, r in enumerate(self._order) if r not in keep])
        shown = set(self._order)
        self._add_rows([r for r in sorted(keep) if r not in shown])

    # -- row operations ----------------------------------------------------------------------

    def _sorted(self, rows: list[int]) -> list[int]:
        if self._src is None or self._col < 0:
            return sorted(rows)
        keys = self._src.column_sort_keys(self._col)
        return sorted(rows, key=keys.__getitem__, reverse=self._desc)

    def _relayout(self, order: list[int]) -> None:
        """Show ``order`` (the same rows, moved): one layout change, persistent indexes (the
        selection) follow their rows; nothing when the order did not move."""
        if order == self._order:
            return
        self.layoutAboutToBeChanged.emit()
        old = self._order
        persistent = self.persistentIndexList()
        self._order = order
        self._pos = None
        if persistent:  # the selection: a few indexes on one or two rows
            where = self._where({old[i.row()] for i in persistent if 0 <= i.row() < len(old)})
            moved = []
            for idx in persistent:
                row = idx.row()
                new = where.get(old[row]) if 0 <= row < len(old) else None
                moved.append(QModelIndex() if new is None else self.index(new, idx.column()))
            self.changePersistentIndexList(persistent, moved)
        self.layoutChanged.emit()

    def _remove_proxy_rows(self, rows: list[int]) -> None:
        """Remove proxy ``rows`` (ascending), highest run first; many runs are first moved to
        the end (one layout change) and removed as one block."""
        if not rows:
            return
        runs = runs_of(rows)
        if len(runs) > MANY_RUNS:
            gone = set(rows)
            kept = [r for p, r in enumerate(self._order) if p not in gone]
            self._relayout(kept + [self._order[p] for p in rows])
            runs = [(len(kept), len(self._order) - 1)]
        for first, last in reversed(runs):
            self.beginRemoveRows(QModelIndex(), first, last)
            del self._order[first : last + 1]
            self._pos = None
            self.endRemoveRows()

    def _add_rows(self, rows: list[int], *, moved: Sequence[int] = ()
                  ) -> dict[int, int] | None:
        """Show source ``rows`` and put the shown rows ``moved`` (whose sort keys may have
        changed) back in place: one insertion at the end (the new rows, sorted among
        themselves), then one layout change. The new and moved rows are merged into the rest
        of the order (:func:`app.table.row_order.merged`) while they are few; else the whole order
        is sorted.

        Returns the proxy row of each new and moved row after a merge, else ``None`` (then
        :meth:`_where` finds them)."""
        n = len(self._order)
        if not rows and not moved:
            return {}
        where: dict[int, int] | None = None
        order: list[int] | None = None
        if n and (len(rows) + len(moved)) * MERGE_BELOW < n:
            rest = self._order
            if moved:
                rest = list(filterfalse(set(moved).__contains__, rest))
            where = {}
            if self._src is None or self._col < 0:
                order = merged(rest, [*moved, *rows], None, False, where)  # the source order
            else:
                keys = self._src.column_sort_keys(self._col)
                order = merged(rest, [*moved, *rows], keys.__getitem__, self._desc, where)
        if rows:
            rows = self._sorted(rows)
            self.beginInsertRows(QModelIndex(), n, n + len(rows) - 1)
            self._order.extend(rows)
            self._pos = None
            self.endInsertRows()
        if n:
            self._relayout(order if order is not None else self._sorted(self._order))
        return where

    # -- batches from the source -------------------------------------------------------------

    def _batch_started(self, removed: list[int]) -> None:
        """The model is about to apply a batch removing source rows ``removed``: those leave
        this proxy now, while the model still has them (a view reading the selected row as it
        goes reads the right lock)."""
        assert self._src is not None
        self._batch_rows = self._src.rowCount()
        if removed:
            self._remove_proxy_rows(sorted(self._where(set(removed)).values()))

    def _batch_finished(self, batch: Batch) -> None:
        """The batch is in place: renumber, re-filter the changed rows, append the new ones,
        re-sort once, then one ``dataChanged`` per block of changed proxy rows."""
        n_before, self._batch_rows = self._batch_rows, -1
        if batch.removed:
            self._renumber(batch.removed, n_before)
        self._changed(batch.changed, inserted=batch.inserted, columns=batch.columns)

    def _renumber(self, removed: list[int], n_before: int) -> None:
        """Source rows ``removed`` (ascending) are gone: shift the source rows after them."""
        new_number: list[int] = []
        prev = 0
        for k, r in enumerate(removed):
            new_number.extend(range(prev - k, r - k))
            new_number.append(-1)
            prev = r + 1
        new_number.extend(range(prev - len(removed), n_before - len(removed)))
        self._order = list(map(new_number.__getitem__, self._order))
        self._pos = None

    def _changed(self, spans: list[tuple[int, int, int]], *,
                 inserted: tuple[int, int] | None = None,
                 columns: frozenset[int] | None = None) -> None:
        """Rows ``spans`` (source row, first and last column) changed and rows ``inserted``
        were appended: re-filter, show the new, re-sort once when the sort column is among
        ``columns`` (default: the spans' columns), then ``dataChanged`` per proxy block."""
        add: list[int] = []
        kept = [r for r, _c0, _c1 in spans]  # the changed rows shown before and after
        if spans and self.active:
            pos = self._positions()
            out = [p for r in kept if (p := pos.get(r)) is not None and not self.accepts(r)]
            add = [r for r in kept if r not in pos and self.accepts(r)]
            self._remove_proxy_rows(sorted(out))
            kept = [r for r in kept if r in pos and self.accepts(r)]
        if inserted is not None:
            add += self._accepted(range(inserted[0], inserted[1] + 1))
        resort = self._col >= 0 and bool(spans) and (
            self._col in columns if columns is not None
            else any(c0 <= self._col <= c1 for _r, c0, c1 in spans))
        where: dict[int, int] | None = None
        if add or resort:  # the changed rows are placed again too: their new rows are known
            where = self._add_rows(add, moved=kept)
        if not spans:
            return
        if where is None:
            where = self._where(set(kept))
        shown = sorted((where[r], c0, c1) for r, c0, c1 in spans if r in where)
        for first, last, c0, c1 in row_blocks(shown):
            self.dataChanged.emit(self.index(first, c0), self.index(last, c1))

    def _source_data_changed(self, top: QModelIndex, bottom: QModelIndex,
                             roles: Sequence[int] = ()) -> None:
        """A ``dataChanged`` outside a batch (the model's own ticks, when not routed here):
        treated as a change of those rows. Inside a batch :meth:`_batch_finished` handles
        it."""
        if self._batch_rows >= 0 or not top.isValid():
            return
        self._changed([(r, top.column(), bottom.column())
                       for r in range(top.row(), bottom.row() + 1)])

    def _source_reset(self, *_args: object) -> None:
        """The source was reset or re-laid out: rebuild (the model does neither after its
        first fill; kept for safety)."""
        model = self._src
        if model is None:
            return
        self.beginResetModel()
        self._order = self._sorted(self._accepted(range(model.rowCount())))
        self._pos = None
        self.endResetModel()

    def _ticked(self) -> None:
        n = len(self._order)
        if n:
            self.dataChanged.emit(self.index(0, Col.AGE), self.index(n - 1, Col.EXPIRES),
                                  [Qt.ItemDataRole.DisplayRole])

    # -- queries -----------------------------------------------------------------------------

    def status_at(self, row: int) -> LockStatus | None:
        """Status of proxy row ``row`` or ``None``."""
        if self._src is None or not 0 <= row < len(self._order):
            return None
        return self._src.status(self._order[row])

    def source_row(self, row: int) -> int:
        """Source row of proxy row ``row`` (``IndexError`` outside the table)."""
        return self._order[row]

