"""Sorting and filtering of the lock table: :class:`LockFilterProxy` over
:class:`app.model.LockTableModel` (docs/gui.md "Window")."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QAbstractItemModel, QObject, QSortFilterProxyModel, Qt

from app.columns import FILTER_ROLE, SORT_ROLE, STATUS_ROLE, Col
from app.lockinfo import is_attention
from app.model import LockTableModel, ModelIndex
from core.record import LockStatus


class LockFilterProxy(QSortFilterProxyModel):
    """Sort/filter proxy over :class:`LockTableModel`.

    Sorting uses :data:`app.columns.SORT_ROLE` (real types, evaluated in C++). Filtering: the
    filter box text (case-insensitive substring, every word must match some column), "stale
    only" (state stale or expired) and "held by me" (:meth:`LockTableModel.is_mine`).
    """

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)
        self.setFilterRole(FILTER_ROLE)
        self.setDynamicSortFilter(True)
        self._words: list[str] = []
        self._stale_only = False
        self._mine_only = False

    def setSourceModel(self, model: QAbstractItemModel) -> None:
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
            self.dataChanged.emit(self.index(0, Col.AGE), self.index(n - 1, Col.EXPIRES),
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
