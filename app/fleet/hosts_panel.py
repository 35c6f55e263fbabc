"""The Hosts panel and the host filter (docs/gui.md, "Fleet"): with a ``[fleet]`` table, a dock
of the main window lists every host of the fleet -- its last heartbeat's age, how many locks it
publishes, how many of those need attention, and whether it is silent (no heartbeat for the
silence bound, docs/fleet.md "Verdicts") -- and a combo box in the filter bar shows one host's
locks only (:meth:`app.table.proxy.LockFilterProxy.set_host`). Enter or a double click on a host
filters the table to it. Both follow :class:`app.fleet.bridge.FleetBridge`; neither touches
the database.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDockWidget,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.table.lockinfo import human_duration, plural
from core.text import printable

if TYPE_CHECKING:
    from core.fleet.hosts import HostSummary

HEADERS = ("Host", "Last heartbeat", "Locks", "Problems", "Status")
"""The panel's columns."""

ALL_HOSTS = "All hosts"
"""The host filter's first entry: no host filter."""

SILENT_COLOR = QColor("#c0392b")
"""Text colour of a silent host's row (its status also says "silent" in words)."""


class _HostTable(QTableWidget):
    """The hosts' table: Enter on a row asks to filter the locks to that host."""

    activatedHost = Signal(str)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Enter/Return: :attr:`activatedHost` with the current row's host."""
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and self.currentRow() >= 0:
            item = self.item(self.currentRow(), 0)
            if item is not None:
                self.activatedHost.emit(item.text())
                return
        super().keyPressEvent(event)


class HostsPanel(QDockWidget):
    """The dock (module docstring). :meth:`set_hosts` fills it.

    Signals:
        hostChosen(str): the user chose a host (Enter, double click): filter to it.
    """

    hostChosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Hosts", parent)
        self.setObjectName("hosts")
        self.setAccessibleName("Hosts")
        self.summary = QLabel("No fleet configured ([fleet] in the configuration file)")
        self.summary.setAccessibleName("Fleet summary")
        self.summary.setWordWrap(True)
        self.table = _HostTable(0, len(HEADERS))
        self.table.setAccessibleName("Hosts of the fleet")
        self.table.setAccessibleDescription(
            "Every host publishing to the fleet database: last heartbeat, locks, locks that "
            "need attention, silent or not. Enter shows only that host's locks.")
        self.table.setHorizontalHeaderLabels(list(HEADERS))
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.activatedHost.connect(self.hostChosen)
        self.table.cellDoubleClicked.connect(self._double_clicked)
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.summary)
        lay.addWidget(self.table, 1)
        self.setWidget(body)

    def _double_clicked(self, row: int, _col: int) -> None:
        item = self.table.item(row, 0)
        if item is not None:
            self.hostChosen.emit(item.text())

    def set_hosts(self, hosts: Sequence[HostSummary], *, current: bool, me: str | None,
                  configured: bool = True) -> None:
        """Show ``hosts`` (``current``: just read; False: the last ones known while the
        database cannot be read). ``me``: this host's name in the fleet (marked "this
        host")."""
        if not configured:
            self.summary.setText("No fleet configured ([fleet] in the configuration file)")
            self.table.setRowCount(0)
            return
        silent = [h for h in hosts if h.silent]
        text = f"{plural(len(hosts), 'host')}, {plural(sum(h.locks for h in hosts), 'lock')}"
        if not hosts:
            text = ("No host has published to the fleet database yet: this host's first "
                    "heartbeat is on its way.")
        if silent:
            text += f"; {len(silent)} silent: " + ", ".join(printable(h.host) for h in silent)
        if not current:
            text = ("The fleet database cannot be read (see Problems): as last known. " + text)
        self.summary.setText(text)
        self.table.setRowCount(len(hosts))
        for row, h in enumerate(hosts):
            status = "not trusted" if h.untrusted else "silent" if h.silent else "live"
            if me is not None and h.host == me:
                status += " (this host)"
            cells = (printable(h.host), f"{human_duration(h.age_s)} ago", str(h.locks),
                     str(h.attention) if h.attention else "", status)
            tip = (f"{printable(h.host)}: its rows were not written by the role bound to this "
                   "host name (docs/fleet.md, \"Trust\"): none of its reports or locks is used"
                   if h.untrusted else
                   f"{printable(h.host)}: no heartbeat for {human_duration(h.age_s)}; its "
                   "locks are judged by the age and TTL rules again" if h.silent else
                   f"{printable(h.host)}: heartbeat every {h.interval_s:g} s"
                   + (f"; {printable(h.version)}" if h.version else ""))
            for col, text_ in enumerate(cells):
                item = QTableWidgetItem(text_)
                item.setToolTip(tip)
                if col in (2, 3):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                if h.silent or h.untrusted:
                    item.setForeground(QBrush(SILENT_COLOR))
                self.table.setItem(row, col, item)

    def rows(self) -> list[list[str]]:
        """The table's texts, row by row (what a screen reader reads)."""
        return [[(it.text() if (it := self.table.item(r, c)) is not None else "")
                 for c in range(self.table.columnCount())]
                for r in range(self.table.rowCount())]


class HostFilter(QComboBox):
    """The filter bar's host filter: :data:`ALL_HOSTS`, then each host of the fleet.

    Signals:
        hostChanged(object): the chosen host (``str``), or None for every host.
    """

    hostChanged = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Host filter")
        self.setToolTip("Show only the locks of one host (the Host column)")
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.addItem(ALL_HOSTS)
        self.currentIndexChanged.connect(self._changed)

    def _changed(self, index: int) -> None:
        self.hostChanged.emit(None if index <= 0 else self.itemText(index))

    def set_hosts(self, hosts: Sequence[str]) -> None:
        """Offer ``hosts`` (the chosen one stays chosen, and listed, while it is chosen)."""
        chosen = self.host()
        names = sorted(set(hosts) | ({chosen} if chosen else set()))
        if names == [self.itemText(i) for i in range(1, self.count())]:
            return
        self.blockSignals(True)
        try:
            self.clear()
            self.addItem(ALL_HOSTS)
            self.addItems(names)
            self.setCurrentIndex(names.index(chosen) + 1 if chosen else 0)
        finally:
            self.blockSignals(False)

    def host(self) -> str | None:
        """The chosen host, or None (every host)."""
        return None if self.currentIndex() <= 0 else self.currentText()

    def choose(self, host: str | None) -> None:
        """Choose ``host`` (added when not listed yet); None: every host."""
        if host is None:
            self.setCurrentIndex(0)
            return
        if self.findText(host) < 0:
            self.set_hosts([*(self.itemText(i) for i in range(1, self.count())), host])
        self.setCurrentIndex(self.findText(host))
