"""The main window's status line (docs/gui.md "Window"): the watched directories and their
observer mode, a busy bar while the first scan runs, the count of locks per state, and a
button naming how many problems the configuration file has, which opens the Problems panel
(:mod:`app.frame.problems`, where each is listed whole: the status line never shows a problem's
text cut mid-word)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QLabel, QProgressBar, QStatusBar, QToolButton

from app.bridges.config_store import ConfigStore
from app.bridges.watch_bridge import WatchBridge
from app.table.lockinfo import plural
from app.table.model import LockTableModel
from core.record import State
from core.text import printable


class StatusLine(QObject):
    """Widgets added to ``bar``: :attr:`dirs_label`, :attr:`scan_progress` (shown until the
    inventory is :attr:`~app.bridges.watch_bridge.WatchBridge.ready`), :attr:`counts_label`,
    :attr:`config_button` (shown while the configuration has problems); :meth:`update`
    fills them from the inventory, the model and the configuration.

    Signals:
        problemsClicked(): :attr:`config_button` was pressed (the window shows its Problems
            panel).
    """

    problemsClicked = Signal()

    def __init__(self, bar: QStatusBar, *, inventory: WatchBridge, model: LockTableModel,
                 store: ConfigStore, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._inventory, self._model, self._store = inventory, model, store
        self.dirs_label = QLabel()
        self.dirs_label.setAccessibleName("Watched directories")
        self.counts_label = QLabel()
        self.counts_label.setAccessibleName("Lock counts")
        self.scan_progress = QProgressBar()
        self.scan_progress.setRange(0, 0)  # busy: the first scan's size is not known ahead
        self.scan_progress.setMaximumWidth(140)
        self.scan_progress.setTextVisible(False)
        self.scan_progress.setAccessibleName("First scan in progress")
        self.scan_progress.setVisible(not inventory.initial_done)
        inventory.ready.connect(self.scan_progress.hide)
        self.servers_label = QLabel()
        self.servers_label.setAccessibleName("Lock servers")
        self.servers_label.setStyleSheet("color: #d23c3c;")
        self.servers_label.hide()
        self.config_button = QToolButton()
        self.config_button.setAutoRaise(True)
        self.config_button.setAccessibleName("Configuration problems")
        self.config_button.setStyleSheet("color: #d23c3c;")
        self.config_button.clicked.connect(lambda: self.problemsClicked.emit())
        self.config_button.hide()
        store.problemsChanged.connect(self.set_config_problems)
        bar.addWidget(self.dirs_label, 1)
        bar.addPermanentWidget(self.config_button)
        bar.addPermanentWidget(self.servers_label)
        bar.addPermanentWidget(self.scan_progress)
        bar.addPermanentWidget(self.counts_label)
        self.set_config_problems(store.problems())

    def set_server_problems(self, problems: list[str]) -> None:
        """Show the lock servers that failed their last poll (or cannot be configured): a
        short warning, each problem in the tooltip; hidden when there is none."""
        if not problems:
            self.servers_label.hide()
            return
        self.servers_label.setText(
            f"⚠ {plural(len(problems), 'lock server problem')}")
        self.servers_label.setToolTip("\n".join(printable(p) for p in problems))
        self.servers_label.show()

    def set_config_problems(self, problems: list[str]) -> None:
        """Show how many problems the configuration file has (a button that opens the
        Problems panel, where each is listed whole); hidden when there is none."""
        if not problems:
            self.config_button.hide()
            return
        self.config_button.setText(f"⚠ {plural(len(problems), 'configuration problem')}")
        self.config_button.setToolTip("Show them in the Problems panel")
        self.config_button.show()

    def update(self) -> None:
        """Watched directories with their observer mode; counts per state."""
        dirs = self._inventory.dirs
        if dirs:
            tip = "\n".join(printable(f"{d.path}: {d.mode}"
                                      + (f" — {d.message}" if d.message else ""))
                            for d in dirs)
            self.dirs_label.setText(printable("Watching " + ", ".join(
                f"{d.path} ({d.mode})" for d in dirs)))
            self.dirs_label.setToolTip(tip)
        else:
            n = len(self._store.config.all_watches())
            self.dirs_label.setText(
                "Not watching any directory" if n == 0
                else f"Starting to watch {plural(n, 'directory', 'directories')}…")
        counts = self._model.counts()
        order = (State.HELD, State.STALE, State.EXPIRED, State.WRITING, State.UNREADABLE)
        text = "  ".join(f"{counts[s]} {s.value}" for s in order if counts[s])
        if not self._inventory.initial_done:
            text = f"scanning… {text}".strip()
        self.counts_label.setText(text or "no locks")
