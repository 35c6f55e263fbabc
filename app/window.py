"""The main window: lock table with filter box and quick filters, detail pane, toolbar,
context menu, shortcuts and status bar (docs/gui.md "Window").

The window only presents and asks: what it needs comes in through its constructor, and the
operations it offers (acquire, release, reclaim, force release, open folder, copy path,
settings, audit log, quit) leave it as ``...Requested`` signals that
:class:`app.application.LockwardenApp` connects to :class:`app.actions.commands.Commands`.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import QItemSelection, QModelIndex, QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QResizeEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QDockWidget,
    QLabel,
    QLineEdit,
    QSplitter,
    QTabWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from app.bridges.config_store import ConfigStore
from app.bridges.lock_actions import LockActions, lost_message
from app.bridges.watch_bridge import WatchBridge
from app.fleet.hosts_panel import HostFilter, HostsPanel
from app.frame import state as window_state
from app.frame.actions import ActionsWindow
from app.frame.menus import MenuBar
from app.frame.problems import ProblemsPanel
from app.frame.statusline import StatusLine
from app.style.icons import app_icon
from app.table.columns import Col
from app.table.detail import DetailPane
from app.table.fleet_rows import fleet_origin
from app.table.lockinfo import human_duration, under_any
from app.table.model import LockTableModel
from app.table.proxy import LockFilterProxy
from app.table.view import LockTable
from core.record import LockStatus, State
from core.text import printable

if TYPE_CHECKING:
    from core.fleet.hosts import HostSummary


class MainWindow(ActionsWindow):
    """Lock table, filter box, quick filters, detail pane, actions, status bar.

    Args:
        model: the lock table model (counts, ticks, "held by me").
        proxy: the sort/filter proxy the table shows.
        inventory: the watched directories and their modes (status bar).
        actions: which locks this app holds (Release), and lost locks (status bar).
        store: the configuration (number of watched directories).
        settings: where geometry, splitter, column widths and sort order persist.
        hide_on_close: True with a tray: closing only hides the window; False: closing asks
            to quit (:attr:`quitRequested`).

    Signals: those of :class:`app.frame.actions.ActionsWindow`.
    """

    def __init__(self, *, model: LockTableModel, proxy: LockFilterProxy, inventory: WatchBridge,
                 actions: LockActions, store: ConfigStore, settings: QSettings,
                 hide_on_close: bool) -> None:
        super().__init__()
        self._model = model
        self._proxy = proxy
        self._inventory = inventory
        self._actions = actions
        self._store = store
        self.extra_context_actions: list[QAction | None] = []
        """Added at the end of the table's context menu (``None``: a separator); the History
        parts add theirs (:mod:`app.history_setup`)."""
        self.settings = settings
        self._hide_on_close = hide_on_close
        self._closing = False
        self._auto_selected = False
        self._hidden_by_filter: str | None = None  # selected, then hidden by a filter
        self.setWindowTitle("Lockwarden")
        self.setWindowIcon(app_icon())
        self.resize(1100, 680)
        self._build_table()
        self._build_filters()
        self._make_actions()
        self._build_toolbars()
        central = QWidget()
        lay = QVBoxLayout(central)
        lay.setContentsMargins(4, 0, 4, 0)
        self.banner = QLabel()
        self.banner.setWordWrap(True)
        self.banner.setAccessibleName("Demo mode")
        self.banner.setStyleSheet("background: #d4a417; color: #1b1b1b; padding: 4px 8px; "
                                  "border-radius: 3px;")
        self.banner.hide()
        lay.addWidget(self.banner)
        lay.addWidget(self.splitter)
        self.setCentralWidget(central)
        self._build_status_bar()
        self._build_problems()
        self._build_hosts()
        self._build_menus()
        actions.heldChanged.connect(self._update_actions)
        actions.lost.connect(self._lock_lost)
        self.restore_state()
        self.update_status()
        self._update_actions()
        self._update_empty()

    # -- building -----------------------------------------------------------------------------

    def _build_table(self) -> None:
        self.table = LockTable(self._proxy)
        self.table.setAccessibleName("Locks")
        self.table.setAccessibleDescription(
            "Every lock in the watched directories: state, lock, directory, format, holder, "
            "PID, liveness, age, expiry and tag")
        self.table.selected_removed = self._selected_removed
        self.table.customContextMenuRequested.connect(self._context_menu)
        self.table.selectionModel().selectionChanged.connect(self._selection_changed)
        self._proxy.dataChanged.connect(self._proxy_data_changed)
        self._model.ticked.connect(self._tick_detail)
        self._proxy.rowsInserted.connect(self._update_empty)
        self._proxy.rowsInserted.connect(self._select_first)
        self._proxy.rowsRemoved.connect(self._update_empty)
        self._proxy.layoutChanged.connect(self._update_empty)
        self.empty = QLabel(self.table.viewport())
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self.empty.setEnabled(False)
        self.detail = DetailPane()
        self.detail.historyRequested.connect(self.historyRequested)
        self.detail.endHolderRequested.connect(self.endHolderRequested)
        self.table.doubleClicked.connect(lambda _i: self.detail.raw.setFocus())
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(self.detail)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        self.splitter = split

    def _build_filters(self) -> None:
        self.filter = QLineEdit()
        self.filter.setAccessibleName("Filter locks")
        self.filter.setPlaceholderText("Filter (Ctrl+F): lock, holder, PID, tag…")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self._filter_changed)
        self.stale_only = QCheckBox("Stale only")
        self.stale_only.setToolTip("Show only stale and expired locks")
        self.stale_only.toggled.connect(self._quick_filters)
        self.held_by_me = QCheckBox("Held by me")
        self.held_by_me.setToolTip("Show only locks this Lockwarden holds")
        self.held_by_me.toggled.connect(self._quick_filters)
        self.host_filter = HostFilter()
        self.host_filter.hostChanged.connect(self._host_changed)

    def _build_problems(self) -> None:
        """The Problems panel (:mod:`app.frame.problems`), docked below; open from the start when
        the configuration has problems; Ctrl+Shift+P and the status line's button show it."""
        self.problems = ProblemsPanel(self._store, self._inventory, self)
        self.setTabPosition(Qt.DockWidgetArea.BottomDockWidgetArea,
                            QTabWidget.TabPosition.North)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.problems)
        self.problems.setVisible(bool(self._store.problems()))
        self.problems.settingsRequested.connect(lambda: self.settingsRequested.emit())
        self.status_line.problemsClicked.connect(self.problems.reveal)
        self.act_problems = self.problems.toggleViewAction()
        self.act_problems.setShortcut(QKeySequence("Ctrl+Shift+P"))
        self.act_problems.setToolTip("Show or hide the Problems panel (Ctrl+Shift+P)")
        self.addAction(self.act_problems)

    def _build_hosts(self) -> None:
        """The Hosts panel (:mod:`app.fleet.hosts_panel`), a tab beside the Problems panel
        under the table (docs/gui.md "Docks"), and the host filter; both hidden until a
        ``[fleet]`` is configured (:meth:`set_fleet`); Ctrl+Shift+O."""
        self.hosts = HostsPanel(self)
        self.add_bottom_dock(self.hosts)
        self.hosts.hide()
        self.hosts.hostChosen.connect(self.host_filter.choose)
        self.act_hosts = self.hosts.toggleViewAction()
        self.act_hosts.setShortcut(QKeySequence("Ctrl+Shift+O"))
        self.act_hosts.setToolTip("Show or hide the Hosts panel: every host of the fleet "
                                  "(Ctrl+Shift+O)")
        self.act_hosts.setEnabled(False)
        self.addAction(self.act_hosts)

    def _build_menus(self) -> None:
        """The menu bar (:class:`app.frame.menus.MenuBar`)."""
        self.menus = MenuBar(self, open_config=self.problems.open_config_file,
                             panels=[self.act_problems, self.act_hosts],
                             columns=self.table.column_menu, config_path=self._store.path,
                             state_path=self.settings.fileName())

    def add_bottom_dock(self, dock: QDockWidget) -> None:
        """Dock ``dock`` under the table as a tab beside the Problems panel: the docks share
        one area, which leaves the table :data:`app.table.view.MIN_ROWS` rows."""
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, dock)
        self.tabifyDockWidget(self.problems, dock)

    def set_fleet(self, active: bool) -> None:
        """A ``[fleet]`` is configured (or no more): the Host column, the host filter and the
        Hosts panel (shown at once) appear, or go with the host filter cleared."""
        was = self.act_hosts.isEnabled()
        self.act_hosts.setEnabled(active)
        self._host_filter_action.setVisible(active)
        self.table.setColumnHidden(Col.HOST, not active)
        header = self.table.horizontalHeader()
        if active and header.visualIndex(Col.HOST) == Col.HOST:  # where it was added: last
            header.moveSection(Col.HOST, Col.LOCK + 1)  # beside the lock, unless moved since
        if active and not was:
            self.hosts.set_hosts([], current=True, me=None)
            self.hosts.show()
            self.hosts.raise_()
        elif not active:
            self.host_filter.choose(None)
            self.hosts.hide()
            self.hosts.set_hosts([], current=False, me=None, configured=False)

    def show_hosts(self, hosts: Sequence[HostSummary], *, current: bool,
                   me: str | None) -> None:
        """The fleet's hosts in the Hosts panel and the host filter (with this host's)."""
        self.hosts.set_hosts(hosts, current=current, me=me)
        self.host_filter.set_hosts([h.host for h in hosts] + ([me] if me else []))
        self._update_actions()  # a fleet row's safety may have just been checked

    def _build_toolbars(self) -> None:
        tb = QToolBar("Actions")
        tb.setObjectName("actions")
        tb.setAccessibleName("Lock actions")
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        tb.setMovable(False)
        # what fits the default width; Copy path and Rescan are in the menus, the context
        # menu and on their keys (docs/gui.md "Menus")
        for a in (self.act_acquire, self.act_release, self.act_reclaim, self.act_force,
                  self.act_end_holder, None, self.act_open_folder, self.act_history, None,
                  self.act_audit, self.act_settings):
            if a is None:
                tb.addSeparator()
            else:
                tb.addAction(a)
        self.addToolBar(tb)
        fbar = QToolBar("Filter")
        fbar.setObjectName("filter")
        fbar.setMovable(False)
        self.filter.setMinimumWidth(240)
        self.filter.setMaximumWidth(520)
        fbar.addWidget(self.filter)
        fbar.addSeparator()
        fbar.addWidget(self.stale_only)
        fbar.addWidget(self.held_by_me)
        self._host_filter_action = fbar.addWidget(self.host_filter)
        self._host_filter_action.setVisible(False)
        self.addToolBarBreak()
        self.addToolBar(fbar)

    def _build_status_bar(self) -> None:
        self.status_line = StatusLine(self.statusBar(), inventory=self._inventory,
                                      model=self._model, store=self._store, parent=self)
        self.dirs_label = self.status_line.dirs_label
        self.counts_label = self.status_line.counts_label
        self.scan_progress = self.status_line.scan_progress
        self._inventory.ready.connect(self.update_status)
        self._status_timer = QTimer(self)
        self._status_timer.setSingleShot(True)
        self._status_timer.setInterval(200)
        self._status_timer.timeout.connect(self.update_status)
        self._model.countsChanged.connect(self._status_timer.start)
        self._inventory.dirsChanged.connect(self._dirs_changed)
        self._inventory.updated.connect(self._detail_updated)

    def rescan(self) -> None:
        """Rescan every watched directory (in a worker thread), saying so for 2 s."""
        self._inventory.rescan()
        self.statusBar().showMessage("Rescanning…", 2000)

    def focus_filter(self) -> None:
        """Focus the filter box and select its text (Ctrl+F)."""
        self.filter.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.filter.selectAll()

    def show_problems(self) -> None:
        """The tray's "Problems…" entry: the Problems panel when it lists any (configuration,
        lock servers, directories), and the table filtered to the unreadable locks when there
        are any."""
        if self.problems.count():
            self.problems.reveal()
        if self._model.counts().get(State.UNREADABLE, 0):
            self.filter.setText("unreadable")

    def _selected_removed(self, path: str) -> None:
        """The selected lock left the list (released, removed or filtered out): say so in
        the detail pane; nothing else is selected in its place."""
        self.detail.show_status(None)
        self._update_actions()
        # the source model may be removing the row right now: decide why once it is done (the
        # detail pane as context: the call is dropped if the window is destroyed meanwhile)
        QTimer.singleShot(0, self.detail, lambda: self._say_gone(path))

    def _say_gone(self, path: str) -> None:
        if self.detail.status is not None:  # the user selected another lock meanwhile
            return
        row = self._model.row_of(path)
        shown = row is not None and self._proxy.mapFromSource(
            self._model.index(row, 0)).isValid()
        if row is None:
            why = "it was released or removed"
        elif not shown and self._proxy.active:
            why = "it is hidden by the filter"
            self._hidden_by_filter = path  # selected again when a filter shows it
        else:  # gone from the list and back before this line was written: not the same lock
            why = "it was released or removed (a lock at the same path is listed again)"
        self.detail.reasons.setText(
            f"{html.escape(os.path.basename(path))} is no longer in the list: {why}.")

    def show_demo(self, directory: str) -> None:
        """Mark the window as the demo's (``--demo``): title and a banner naming ``directory``,
        which demo processes fill and which is removed on quit."""
        self.setWindowTitle("Lockwarden — Demo")
        self.banner.setText(f"Demo mode: watching {printable(directory)}, where demo processes "
                            "take, crash and release locks. None is yours; it goes when you "
                            "quit.")
        self.banner.show()

    def clear_filters(self) -> None:
        """Empty the filter box and untick the quick filters: every lock is shown."""
        self.filter.clear()
        self.stale_only.setChecked(False)
        self.held_by_me.setChecked(False)
        self.host_filter.choose(None)

    def select_path(self, path: str) -> bool:
        """Select the row of ``path``; False when it is not visible."""
        row = self._model.row_of(path)
        if row is None:
            return False
        pidx = self._proxy.mapFromSource(self._model.index(row, 0))
        if not pidx.isValid():
            return False
        self.table.selectRow(pidx.row())
        self.table.scrollTo(pidx)
        return True

    # -- filters, selection, detail -----------------------------------------------------------

    def _filter_changed(self, text: str) -> None:
        self._proxy.set_text(text)
        self._filters_applied()

    def _quick_filters(self) -> None:
        self._proxy.set_stale_only(self.stale_only.isChecked())
        self._proxy.set_held_by_me(self.held_by_me.isChecked())
        self._filters_applied()

    def _host_changed(self, host: str | None) -> None:
        self._proxy.set_host(host)
        self._filters_applied()

    def _filters_applied(self) -> None:
        """After a filter changed: the lock a filter hid while selected is selected again
        once a filter shows it (unless the user chose another meanwhile); the empty-table
        note follows."""
        hidden = self._hidden_by_filter
        if hidden is not None:
            if self.detail.status is not None and self.detail.status.path != hidden:
                self._hidden_by_filter = None  # the user chose another lock meanwhile
            elif self.detail.status is None and self.select_path(hidden):
                self._hidden_by_filter = None
        self._update_empty()

    def _selection_changed(self, _sel: QItemSelection, _desel: QItemSelection) -> None:
        self.refresh_detail()
        self._update_actions()

    def _proxy_data_changed(self, top: QModelIndex, bottom: QModelIndex,
                            *_roles: object) -> None:
        st = self.detail.status
        if st is None:
            return
        idx = self.table.selectionModel().currentIndex()
        only_time = top.column() >= Col.AGE and bottom.column() <= Col.EXPIRES
        if idx.isValid() and top.row() <= idx.row() <= bottom.row() and not only_time:
            self.refresh_detail()
            self._update_actions()

    def _age_text(self, st: LockStatus) -> str:
        age = self._model.age_seconds(st)
        return human_duration(age) if age is not None else ""

    def refresh_detail(self, st: LockStatus | None = None) -> None:
        """Show the selected lock in the detail pane (``st``: its newest status, else the
        table's)."""
        st = st or self.current_status()
        if st is None:
            self.detail.show_status(None)
            return
        watched = [d.path for d in self._inventory.dirs]
        self.detail.show_status(st, age=self._age_text(st), mine=self._model.is_mine(st),
                                now=self._model.now,
                                outside=bool(watched) and not under_any(st.path, watched)
                                and fleet_origin(st.path) is None)

    def _detail_updated(self, updates: list[tuple[str, LockStatus | None]]) -> None:
        """A new verdict on the shown lock: show it now, even when no table cell changed (a
        reclaim within the same second keeps PID, tag and age; only the token and the
        acquisition changed). Uses the update itself, whatever order the model applies it in."""
        shown = self.detail.status
        if shown is None:
            return
        for path, st in updates:
            if path == shown.path and st is not None and st.present and st is not shown:
                self.refresh_detail(st)
                self._update_actions()

    def _tick_detail(self) -> None:
        """Each second: the selected lock's time-dependent texts follow the clock."""
        st = self.detail.status
        if st is not None:
            self.detail.tick(age=self._age_text(st), now=self._model.now)

    def _select_first(self, *_args: object) -> None:
        """Select the first row once, when the first locks arrive, so that the detail pane
        explains something from the start."""
        if self._auto_selected or self.current_status() is not None:
            return
        self._auto_selected = True
        self.table.selectRow(0)

    def _update_empty(self, *_args: object) -> None:
        n = self._proxy.rowCount()
        if n:
            self.empty.hide()
            return
        if self._proxy.active and self._model.rowCount():
            text = "No lock matches the filter."
        else:
            dirs = len(self._store.config.all_watches())
            text = (f"No locks in the {dirs} watched "
                    f"{'directory' if dirs == 1 else 'directories'}.\n"
                    "Acquire one with Ctrl+N, or add directories in Settings.")
        self.empty.setText(text)
        self.empty.resize(self.table.viewport().size())
        self.empty.show()
        if self.current_status() is None:
            self.detail.show_status(None)

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Keep the empty-table hint centred."""
        super().resizeEvent(event)
        self.empty.resize(self.table.viewport().size())

    # -- status bar ---------------------------------------------------------------------------

    def _dirs_changed(self, _dirs: object) -> None:
        """The watched directories changed: the status bar, and the detail pane (whether the
        selected lock lies outside them)."""
        self.update_status()
        self.refresh_detail()

    def update_status(self) -> None:
        """The status line (:class:`app.frame.statusline.StatusLine`) and the empty-table hint."""
        self.status_line.update()
        self._update_empty()

    def _lock_lost(self, path: str, replaced: bool) -> None:
        """A lock this app held was taken away (:attr:`app.bridges.lock_actions.LockActions.lost`):
        say so
        in the status bar for 15 s."""
        title, body = lost_message(path, replaced)
        self.statusBar().showMessage(printable(f"{title}: {body}"), 15000)

    # -- persistence and closing --------------------------------------------------------------

    def restore_state(self) -> None:
        """Window geometry, splitter, column widths, hidden columns, sort order, filter text
        and quick filters from QSettings (:func:`app.frame.state.restore`)."""
        window_state.restore(self.settings, self._saved_parts())

    def save_state(self) -> None:
        """Store what :meth:`restore_state` restores (:func:`app.frame.state.save`)."""
        window_state.save(self.settings, self._saved_parts())

    def _saved_parts(self) -> window_state.Parts:
        return window_state.Parts(self, self.splitter, self.table.horizontalHeader(),
                                  self._proxy, self.filter, self.stale_only, self.held_by_me)

    def close_for_quit(self) -> None:
        """Close for good: the app is quitting (it saved the state already)."""
        self._closing = True
        self.close()

    def closeEvent(self, event: QCloseEvent) -> None:
        """With a tray the window only hides; without one closing it asks to quit
        (:attr:`quitRequested`). After :meth:`close_for_quit` it just closes."""
        if self._closing:
            event.accept()
            return
        self.save_state()
        event.ignore()
        if self._hide_on_close:
            self.hide()
        else:
            self.quitRequested.emit()
