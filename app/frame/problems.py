"""The Problems panel (docs/gui.md, "Problems"): a dock of the main window that lists every
problem whole, one per row, wrapped, never cut: the configuration file's (each warning of
:func:`core.config.load`, the file that cannot be used first, with its line and column), the
lock servers' (a failed poll, a password that cannot be read), the fleet database's (down,
slow or refusing: :mod:`app.fleet.bridge`) and the watched directories'
(missing, failing). **Open configuration file** and **Settings…** are at hand. The status line
and the tray count the configuration's problems too (:mod:`app.frame.statusline`, :mod:`app.tray`).
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QSize, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.bridges.config_store import ConfigStore
from app.bridges.watch_bridge import WatchBridge
from app.table.lockinfo import plural
from core.text import printable
from core.watch.watcher import DirStatus

SOURCES = ("configuration", "audit", "lock server", "fleet", "directory")
"""What a problem is about, in the order the panel lists them."""

PROBLEM_DIR_MODES = ("missing", "error")
"""Directory modes listed as problems (as the tray's)."""


NO_PROBLEMS = ("The configuration file reads well, and every watched directory, lock server "
               "and the fleet database (where configured) answers.")
"""What the empty panel says under "No problems" instead of showing a blank list."""

SHOWN_ROWS = 4
"""How many problems the panel is tall enough for when it first opens (it can be dragged
taller): the table keeps the room, and one problem does not take half the window."""


class ProblemList(QListWidget):
    """The panel's list, whose size hint is the height of its first :data:`SHOWN_ROWS`
    problems (at least two lines of text), not Qt's fixed default."""

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        rows = sum(max(0, self.sizeHintForRow(i)) for i in range(min(self.count(), SHOWN_ROWS)))
        rows = max(rows, 2 * self.fontMetrics().lineSpacing())
        return QSize(hint.width(), rows + 2 * self.frameWidth() + 4)


class ProblemsPanel(QDockWidget):
    """The dock. It follows the store's
    :attr:`~app.bridges.config_store.ConfigStore.problemsChanged`
    and the inventory's ``dirsChanged`` itself; lock servers' problems come through
    :meth:`set_server_problems`.

    Args:
        store: the configuration (its problems, its file).
        inventory: the watched directories and their modes.
        parent: the main window.

    Signals:
        countChanged(int): the number of problems listed changed.
        settingsRequested(): **Settings…** was pressed.
    """

    countChanged = Signal(int)
    settingsRequested = Signal()

    def __init__(self, store: ConfigStore, inventory: WatchBridge,
                 parent: QWidget | None = None) -> None:
        super().__init__("Problems", parent)
        self.setObjectName("problems")
        self.setAccessibleName("Problems")
        self._store = store
        self._by_source: dict[str, list[str]] = {s: [] for s in SOURCES}
        self.summary = QLabel()
        self.summary.setAccessibleName("Problem count")
        self.summary.setWordWrap(True)
        self.empty_note = QLabel(NO_PROBLEMS)
        self.empty_note.setAccessibleName("No problems")
        self.empty_note.setWordWrap(True)
        self.empty_note.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.empty_note.setEnabled(False)  # greyed, as the table's empty note
        self.list = ProblemList()
        self.list.setAccessibleName("Problems")
        self.list.setWordWrap(True)
        self.list.setTextElideMode(Qt.TextElideMode.ElideNone)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setSelectionMode(QListWidget.SelectionMode.SingleSelection)
        self.open_file = QPushButton("Open configuration file")
        self.open_file.setToolTip(store.path)
        self.open_file.clicked.connect(self.open_config_file)
        self.settings = QPushButton("Settings…")
        self.settings.clicked.connect(lambda: self.settingsRequested.emit())
        row = QHBoxLayout()
        row.addWidget(self.summary, 1)
        row.addWidget(self.open_file)
        row.addWidget(self.settings)
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(row)
        lay.addWidget(self.list, 1)
        lay.addWidget(self.empty_note, 1)
        self.setWidget(body)
        store.problemsChanged.connect(self.set_config_problems)
        inventory.dirsChanged.connect(self.set_dir_problems)
        self.set_config_problems(store.problems())
        self.set_dir_problems(inventory.dirs)
        self._fill()  # says so when there are none

    # -- the problems -------------------------------------------------------------------------

    def set_config_problems(self, problems: Sequence[str]) -> None:
        """The configuration file's problems (each warning of :func:`core.config.load`,
        which names the file, the line and the key)."""
        self._set("configuration", list(problems))

    def set_server_problems(self, problems: Sequence[str]) -> None:
        """The lock servers that failed their last poll or cannot be configured."""
        self._set("lock server", list(problems))

    def set_fleet_problems(self, problems: Sequence[str]) -> None:
        """The fleet database's (publishing or reading failed: :mod:`app.fleet.bridge`)."""
        self._set("fleet", list(problems))

    def add_audit_problem(self, text: str) -> None:
        """An audit entry that could be written nowhere (``core.audit.write.add_lost_listener``;
        docs/audit.md, "When an entry cannot be written"); the last 20 are kept."""
        self._set("audit", [*self._by_source["audit"], text][-20:])

    def set_dir_problems(self, dirs: Sequence[DirStatus]) -> None:
        """The watched directories that are missing or failing."""
        self._set("directory", [f"{d.path}: {d.mode}" + (f": {d.message}" if d.message else "")
                                for d in dirs if d.mode in PROBLEM_DIR_MODES])

    def problems(self, source: str | None = None) -> list[str]:
        """The problems listed (of one ``source`` of :data:`SOURCES`, or all), each whole."""
        if source is not None:
            return list(self._by_source[source])
        return [p for s in SOURCES for p in self._by_source[s]]

    def count(self) -> int:
        """How many problems are listed."""
        return sum(len(v) for v in self._by_source.values())

    def _set(self, source: str, problems: list[str]) -> None:
        if problems == self._by_source[source]:
            return
        before = self.count()
        self._by_source[source] = problems
        self._fill()
        if self.count() != before:
            self.countChanged.emit(self.count())

    def _fill(self) -> None:
        self.list.clear()
        for source in SOURCES:
            for p in self._by_source[source]:
                text = printable(p)
                item = QListWidgetItem(f"{source.capitalize()}: {text}")
                item.setToolTip(printable(self._store.path) if source == "configuration"
                                else text)
                self.list.addItem(item)
        n = self.count()
        self.summary.setText(plural(n, "problem") if n else "No problems")
        self.list.setVisible(bool(n))
        self.empty_note.setVisible(not n)

    # -- actions ------------------------------------------------------------------------------

    def open_config_file(self) -> bool:
        """Open the configuration file in the desktop's editor for it; True when one did."""
        ok = QDesktopServices.openUrl(QUrl.fromLocalFile(self._store.path))
        if not ok:
            self.summary.setText(f"No application could open {printable(self._store.path)}: "
                                 "open it in a text editor.")
        return ok

    def reveal(self) -> None:
        """Show the panel and bring it forward."""
        self.show()
        self.raise_()
