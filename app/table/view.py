"""The lock table view of the main window (docs/gui.md "Window"): single-row selection that
never jumps to a neighbour, the directory column elided in the middle, default widths and
columns that fit the default window, room for :data:`MIN_ROWS` rows whatever the docks take
(docs/gui.md "Docks"), and a column chooser on the header's context menu (hidden columns
persist with the header state the window saves)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QPersistentModelIndex, QSize, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QMenu,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QWidget,
)

from app.table.columns import HEADERS, STATUS_ROLE, Col
from core.record import LockStatus

DEFAULT_WIDTHS = {Col.STATE: 132, Col.LOCK: 150, Col.DIRECTORY: 170, Col.FORMAT: 76,
                  Col.HOLDER: 230, Col.PID: 64, Col.LIVENESS: 70, Col.AGE: 64,
                  Col.EXPIRES: 96, Col.TAG: 100, Col.TOOL: 80, Col.KIND: 60,
                  Col.HOST: 100}
"""Column widths in pixels before the user changes them (then they persist). The shown ones
add up to 976 px, the Tag column taking the rest: the table of the default 1,100 px window is
about 1,085 px wide, so nothing needs scrolling to (the Host column of a fleet leaves Tag
narrow). Expires fits its longest countdown ("in 23h 59m")."""

DEFAULT_HIDDEN = (Col.FORMAT, Col.TOOL, Col.KIND, Col.HOST)
"""Columns hidden until the user shows them (View ▸ Columns, the header's context menu): the
detail pane names the format, tool and kind of the selected lock; Host appears with a fleet."""

MIN_ROWS = 8
"""Rows the table always has room for: the docks under it (History, Problems, Hosts) take
only what is left (docs/gui.md "Docks")."""


class ElideMiddleDelegate(QStyledItemDelegate):
    """Elides a cell's text in the middle ("/home/…/build/a"): for directories, whose
    distinguishing part is often at the end."""

    def initStyleOption(self, option: QStyleOptionViewItem,
                        index: QModelIndex | QPersistentModelIndex) -> None:
        """Qt hook: the default options, with middle elision."""
        super().initStyleOption(option, index)
        option.textElideMode = Qt.TextElideMode.ElideMiddle


class LockTable(QTableView):
    """The lock table over ``model`` (the sort/filter proxy), sorted by state, one row
    selected at a time.

    Qt's single-selection view selects a neighbour when the selected row is removed; here the
    selection is cleared instead and :attr:`selected_removed` is called with the removed
    lock's path (a lock must never be swapped under the user's cursor)."""

    def __init__(self, model: QAbstractItemModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.selected_removed: Callable[[str], None] | None = None
        self.setModel(model)
        self.setSortingEnabled(True)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setAlternatingRowColors(True)
        self.setWordWrap(False)
        self.setShowGrid(False)
        self.verticalHeader().hide()
        self.verticalHeader().setDefaultSectionSize(24)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        hh = self.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        hh.setStretchLastSection(True)
        hh.setSortIndicatorShown(True)
        for col, w in DEFAULT_WIDTHS.items():
            self.setColumnWidth(int(col), w)
        for col in DEFAULT_HIDDEN:
            self.setColumnHidden(int(col), True)
        self._elide_middle = ElideMiddleDelegate(self)
        self.setItemDelegateForColumn(int(Col.DIRECTORY), self._elide_middle)
        self.sortByColumn(int(Col.STATE), Qt.SortOrder.AscendingOrder)
        # the minimum height counts the scroll bar only while there is one
        self.horizontalScrollBar().rangeChanged.connect(lambda *_r: self.updateGeometry())
        hh.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        hh.customContextMenuRequested.connect(
            lambda pos: self.column_menu().popup(hh.mapToGlobal(pos)))

    def minimumSizeHint(self) -> QSize:
        """Qt hook: tall enough for the header, :data:`MIN_ROWS` rows and the horizontal
        scroll bar while the columns need one, so that a dock never squeezes the table to a
        row or two."""
        hint = super().minimumSizeHint()
        rows = MIN_ROWS * self.verticalHeader().defaultSectionSize()
        sb = self.horizontalScrollBar()
        bar = sb.sizeHint().height() if sb.maximum() > 0 else 0
        height = self.horizontalHeader().sizeHint().height() + rows + bar + 2 * self.frameWidth()
        return QSize(hint.width(), max(hint.height(), height))

    def column_menu(self) -> QMenu:
        """A menu of checkable column names: unticking one hides the column (State and Lock
        always stay, so a row can still be told apart)."""
        menu = QMenu(self)
        hh = self.horizontalHeader()
        for col in Col:
            act = menu.addAction(HEADERS[col])
            act.setCheckable(True)
            act.setChecked(not hh.isSectionHidden(int(col)))
            act.setEnabled(col not in (Col.STATE, Col.LOCK))
            act.toggled.connect(lambda on, c=int(col): hh.setSectionHidden(c, not on))
        return menu

    def rowsAboutToBeRemoved(self, parent: QModelIndex | QPersistentModelIndex, start: int,
                             end: int) -> None:
        """Qt hook: clear the selection first when it is among the removed rows."""
        sm = self.selectionModel()
        rows = sm.selectedRows() if sm is not None else []
        if rows and start <= rows[0].row() <= end and not parent.isValid():
            value = rows[0].data(STATUS_ROLE)
            sm.clear()
            if isinstance(value, LockStatus) and self.selected_removed is not None:
                self.selected_removed(value.path)
        super().rowsAboutToBeRemoved(parent, start, end)

    def selected_status(self) -> LockStatus | None:
        """Status of the selected row, or ``None`` (the current index alone does not count:
        Qt moves it to a neighbour when the selected row disappears)."""
        rows = self.selectionModel().selectedRows()
        if not rows:
            return None
        value = rows[0].data(STATUS_ROLE)
        return value if isinstance(value, LockStatus) else None
