"""The running app: builds the parts and wires them (docs/DESIGN.md "GUI", docs/gui.md).

:class:`LockwardenApp` is the composition root. It creates, in this order, the configuration
store, the table model and its proxy, the inventory (the watcher's bridge to the GUI thread),
the lock actions (the locks this app holds), the tray and the operations; each part receives
what it needs as constructor arguments and reports through Qt signals, which only this module
connects. No part knows the app object.

The main window (with the filter proxy, the Undo bar and the history's pane) is built the first
time it is needed -- shown, a dialog opened over it, a test reading :attr:`LockwardenApp.window`
-- not at start: a tray-only app neither imports nor holds it (docs/performance.md "Idle
tray"; tests/app/test_app_idle.py).

Import arrows point one way: this module imports every part; no part imports it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, QEvent, QObject, QSettings, Qt, Signal
from PySide6.QtWidgets import QApplication, QMessageBox, QSystemTrayIcon

from app.actions.commands import Commands
from app.bridges.config_store import ConfigStore
from app.bridges.lock_actions import LockActions
from app.bridges.remote_poller import RemotePoller
from app.bridges.watch_bridge import WatchBridge
from app.fleet.bridge import FleetBridge
from app.history_setup import install as install_history
from app.startup.collector import GarbageCollector
from app.style.theme import apply_theme
from app.table.lockinfo import plural
from app.table.model import LockTableModel
from app.tray import TrayController
from core import audit
from core import config as cfgmod
from core.audit import add_lost_listener
from core.config import Config
from core.text import printable

if TYPE_CHECKING:  # built on first show (docs/performance.md "Idle tray")
    from app.actions.undo import UndoBar
    from app.startup.demo import Demo
    from app.table.proxy import LockFilterProxy
    from app.window import MainWindow
    from core.fleet.hosts import HostSummary


def state_settings_path(config_path: str) -> str:
    """Where window geometry, column widths and sort order are kept: ``gui-state.ini`` beside
    the configuration file (so a test's temporary config keeps its state private)."""
    return str(Path(config_path).parent / "gui-state.ini")


class LockwardenApp(QObject):
    """The app object. ``use_tray=None`` decides with
    ``QSystemTrayIcon.isSystemTrayAvailable()``; without a tray the window is the app and
    closing it quits.

    Args:
        qapp: the running QApplication.
        config_path: the TOML configuration (default :func:`core.config.default_config_path`).
        demo: a started :class:`app.startup.demo.Demo` whose directory is watched instead of the
            configured ones (its configuration is never saved); stopped on quit.
        use_tray: show a tray icon (``None``: when the platform has a tray).

    Attributes:
        store, model, proxy, inventory, actions, window, tray (``None`` without a tray),
        ops, undo (the window's Undo of a force release): the parts (see the module doc);
        ``proxy``, ``window`` and ``undo`` are built on first use (:attr:`window_built`).

    Signals:
        quitRequested(): the quit confirmation was answered and the app is quitting.
    """

    quitRequested = Signal()
    auditLost = Signal(str)  # an audit entry written nowhere, from any thread

    def __init__(
        self,
        qapp: QApplication,
        *,
        config_path: str | None = None,
        demo: Demo | None = None,
        use_tray: bool | None = None,
    ) -> None:
        super().__init__()
        self._prev_via = audit.get_via()
        audit.set_via("gui")
        self.qapp = qapp
        self.gc = GarbageCollector()  # unparented: outlives dispose() until it has collected
        path = config_path or cfgmod.default_config_path()
        config = cfgmod.load(path)
        if demo is not None:
            config = replace(config, watches=list(demo.specs()), warnings=[])
        self.demo = demo
        self.store = ConfigStore(config, path, persist=demo is None, parent=self)
        self.settings = QSettings(state_settings_path(path), QSettings.Format.IniFormat)
        apply_theme(qapp, config.ui.theme)
        self.quitting = False

        self.model = LockTableModel(self)
        self._proxy: LockFilterProxy | None = None
        self._window: MainWindow | None = None
        self._undo: UndoBar | None = None
        self._hide_on_close = False
        self.inventory = WatchBridge(self)
        self.actions = LockActions(self)
        if demo is None:  # the locks kept at the last quit are listed again
            self.actions.restore_kept(self.settings)
        self.inventory.kept = self.actions.kept_paths
        self.inventory.updated.connect(self.model.apply)
        self.inventory.updated.connect(self.actions.observe)
        self.actions.touched.connect(self.inventory.reinspect)

        if use_tray is None:
            use_tray = QSystemTrayIcon.isSystemTrayAvailable()
        self.tray: TrayController | None = None
        if use_tray:
            self.tray = TrayController(model=self.model, inventory=self.inventory,
                                       actions=self.actions, store=self.store, parent=self)
        self._hide_on_close = use_tray
        self.remote = RemotePoller(self.inventory, self)
        self.fleet = FleetBridge(self.inventory, self)
        self.fleet.problemsChanged.connect(self._fleet_problems)
        self.ops = Commands(qapp=qapp, model=self.model, inventory=self.inventory,
                              actions=self.actions, store=self.store,
                              dialog_parent=lambda: self.window, remote=self.remote,
                              parent=self, remember_logs=demo is None)
        self.history = install_history(config=config, record=demo is None,
                                       window=lambda: self.window, inventory=self.inventory,
                                       tray=self.tray, remote=self.remote, store=self.store,
                                       ops=self.ops, parent=self)
        self.ops.settingsApplied.connect(lambda: self.set_fleet(self.store.config))
        # audit entries written nowhere (a full disk): emitted from worker threads, shown in
        # the window's Problems panel (the window is built for it: nothing lost)
        self.auditLost.connect(lambda text: self.window.problems.add_audit_problem(text))
        self._forget_lost = add_lost_listener(lambda path, op, error: self.auditLost.emit(
            f"{op} of {printable(path)} was done, but its audit entry could not be written "
            f"anywhere: {printable(error)}"))
        if self.tray is None:
            _ = self.window  # the window is the app
        if self.tray is not None:
            self._connect_tray(self.tray)
        qapp.setQuitOnLastWindowClosed(self.tray is None)

    # -- the window, built on first use ------------------------------------------------------

    @property
    def window_built(self) -> bool:
        """True once the main window exists (it is built on first use)."""
        return self._window is not None

    @property
    def proxy(self) -> LockFilterProxy:
        """The window's sort/filter proxy over :attr:`model` (built on first use)."""
        if self._proxy is None:
            from app.table.proxy import LockFilterProxy

            self._proxy = LockFilterProxy(self)
            self._proxy.setSourceModel(self.model)
        return self._proxy

    @property
    def window(self) -> MainWindow:
        """The main window, built (hidden) the first time it is asked for, with its Undo bar
        and the history's pane, connected to the operations."""
        if self._window is None:
            from app.actions.undo import UndoBar
            from app.window import MainWindow

            w = MainWindow(model=self.model, proxy=self.proxy, inventory=self.inventory,
                           actions=self.actions, store=self.store, settings=self.settings,
                           hide_on_close=self._hide_on_close)
            self._window = w
            if self.demo is not None:
                w.show_demo(self.demo.dir)
            self._undo = UndoBar(w, self.ops, text_boxes=(w.filter,), edit=w.menus.edit)
            if self.ops.last_kept is not None:  # a force release from the tray came first
                self._undo._changed(self.ops.undo_text())
            self.history.attach_window(w)
            self._connect_window(w)
            self._fleet_into_window(w)
        return self._window

    @property
    def undo(self) -> UndoBar:
        """The window's Undo of a force release (builds the window if needed)."""
        _ = self.window
        assert self._undo is not None
        return self._undo

    # -- wiring -------------------------------------------------------------------------------

    def _connect_window(self, w: MainWindow) -> None:
        ops = self.ops
        w.acquireRequested.connect(lambda: ops.open_acquire(None))
        w.releaseRequested.connect(ops.release)
        w.reclaimRequested.connect(ops.open_reclaim)
        w.forceReleaseRequested.connect(ops.open_force_release)
        w.openFolderRequested.connect(ops.open_folder)
        w.copyPathRequested.connect(ops.copy_path)
        w.settingsRequested.connect(ops.open_settings)
        w.auditRequested.connect(ops.open_audit)
        w.whoRequested.connect(lambda: ops.open_who(None))
        w.historyRequested.connect(ops.open_history)
        w.endHolderRequested.connect(ops.open_end_holder)
        w.quitRequested.connect(self.request_quit)
        ops.settingsApplied.connect(w.update_status)
        ops.settingsApplied.connect(lambda: self.remote.set_config(self.store.config))
        self.remote.problemsChanged.connect(w.status_line.set_server_problems)
        self.remote.problemsChanged.connect(w.problems.set_server_problems)
        if self.remote.problems:  # servers that failed before the window was built
            w.status_line.set_server_problems(self.remote.problems)
            w.problems.set_server_problems(self.remote.problems)

    def _connect_tray(self, tray: TrayController) -> None:
        ops = self.ops
        tray.showWindowRequested.connect(self.show_window)
        tray.acquireRequested.connect(lambda: ops.open_acquire(None))
        tray.releaseRequested.connect(ops.release)
        tray.reclaimRequested.connect(ops.open_reclaim)
        tray.forceReleaseRequested.connect(ops.open_force_release)
        tray.copyPathRequested.connect(ops.copy_path)
        tray.openFolderRequested.connect(ops.open_folder)
        tray.auditRequested.connect(self._open_audit_over_window)
        tray.whoRequested.connect(lambda: self.ops.open_who(None))
        tray.settingsRequested.connect(self._open_settings_over_window)
        tray.problemsRequested.connect(self.show_problems)
        tray.showLockRequested.connect(self.show_lock)
        tray.quitRequested.connect(self.request_quit)

    def _open_audit_over_window(self) -> None:
        """The tray's "Audit log…": dialogs open over the window, so show it first."""
        self.show_window()
        self.ops.open_audit()

    def _open_settings_over_window(self) -> None:
        """The tray's "Settings…": show the window, then open Settings over it."""
        self.show_window()
        self.ops.open_settings()

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def config(self) -> Config:
        """The configuration in effect (:attr:`store`)."""
        return self.store.config

    @property
    def config_path(self) -> str:
        """The configuration file."""
        return self.store.path

    def start(self, *, show_window: bool = True) -> None:
        """Start watching; show the tray icon, and the window unless ``show_window`` is False
        and a tray exists (without a tray the window always shows)."""
        config = self.store.config
        self.inventory.rescan_interval = float(config.ui.rescan_interval)
        self.inventory.start(config.all_watches())
        self.remote.set_config(config)
        self.set_fleet(config)
        if self.tray is not None:
            self.tray.show()
        if show_window or self.tray is None:
            self.show_window()
        # the configuration's problems: in the Problems panel (open from the start) and on
        # stderr (app.bridges.config_store.ConfigStore), never cut in the status line

    def set_fleet(self, config: Config) -> None:
        """Publish to and read ``config``'s ``[fleet]`` (:class:`app.fleet.bridge.FleetBridge`;
        never in the demo, whose locks are not this host's); the window shows the Host column,
        the host filter and the Hosts panel while one is configured."""
        if self.demo is not None:
            config = replace(config, fleet=None)
        if self.fleet.active and config.fleet == self.fleet.spec:
            return
        self.fleet.set_config(config)
        if self.window_built:
            self.window.set_fleet(config.fleet is not None)

    def _fleet_into_window(self, w: MainWindow) -> None:
        """What the fleet said before the window was built (it is built on first use): the
        action-safety rule, the Host column and Hosts panel, the hosts and the problems."""
        w.fleet_safety_of = self.fleet.safety
        self.fleet.hostsChanged.connect(lambda hosts: self._show_hosts(w, hosts))
        if self.fleet.spec is not None:
            w.set_fleet(True)
            if self.fleet.hosts:
                self._show_hosts(w, self.fleet.hosts)
        if self.fleet.problems:
            w.problems.set_fleet_problems(self.fleet.problems)

    def _show_hosts(self, w: MainWindow, hosts: list[HostSummary]) -> None:
        """The fleet's hosts in ``w``'s Hosts panel, this host marked."""
        spec = self.fleet.spec
        w.show_hosts(hosts, current=self.fleet.hosts_current,
                     me=spec.host if spec is not None else None)

    def _fleet_problems(self, problems: list[str]) -> None:
        """The fleet's problems in the Problems panel, which opens when they start (kept by
        the bridge until the window is built, then shown: :meth:`_fleet_into_window`)."""
        if not self.window_built:
            return
        panel = self.window.problems
        had = bool(panel.problems("fleet"))
        panel.set_fleet_problems(problems)
        if problems and not had:
            panel.reveal()

    def show_window(self) -> None:
        """Show, raise and activate the main window."""
        w = self.window
        if w.isMinimized():
            w.setWindowState(w.windowState() & ~Qt.WindowState.WindowMinimized)
        w.show()
        w.raise_()
        w.activateWindow()

    def show_lock(self, path: str) -> None:
        """Show the window with ``path`` selected (a clicked notification); filters that hide
        it are cleared. Just shows the window when the lock is no longer listed."""
        self.show_window()
        w = self.window
        if not w.select_path(path):
            w.clear_filters()
            w.select_path(path)

    def show_problems(self) -> None:
        """Open the window showing the problems: unreadable locks filtered in the table, the
        directories' modes in the status bar."""
        self.show_window()
        self.window.show_problems()

    def request_quit(self) -> QMessageBox | None:
        """Quit; with locks held by this app, first ask whether to release them (returns the
        question box, answered asynchronously)."""
        if self.quitting:
            return None
        held = self.actions.held_paths()
        if not held:
            self.finish_quit(release=False)
            return None
        names = "\n".join(f"• {printable(p)}" for p in held[:10])
        if len(held) > 10:
            names += f"\n… and {plural(len(held) - 10, 'more lock')}"
        them = "it" if len(held) == 1 else "them"
        box = QMessageBox(QMessageBox.Icon.Question, "Quit Lockwarden",
                          f"Lockwarden holds {plural(len(held), 'lock')}:\n{names}\n\n"
                          f"Release {them} before quitting? A lock left behind becomes stale "
                          "once Lockwarden has exited.", parent=self._window)
        rel = box.addButton("Release all", QMessageBox.ButtonRole.AcceptRole)
        keep = box.addButton("Keep", QMessageBox.ButtonRole.DestructiveRole)
        rel.setToolTip("Release the locks Lockwarden holds, then quit")
        keep.setToolTip("Quit and leave the lock files behind")
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(rel)

        def answered(_r: int) -> None:
            b = box.clickedButton()
            if b is rel:
                self.finish_quit(release=True)
            elif b is keep:
                self.finish_quit(release=False)

        box.finished.connect(answered)
        self.ops.show_dialog(box)
        return box

    def finish_quit(self, *, release: bool) -> None:
        """Release held locks if asked, stop watching and helpers, quit the event loop."""
        if self.quitting:
            return
        self.quitting = True
        if self.tray is not None:
            self.tray.hide()  # first: releasing on the way out raises no balloons
        if release:
            for e in self.actions.release_all():
                print(f"lockwarden: {e}", flush=True)
        if self.demo is None:
            self.actions.save_kept(self.settings)
        if self._window is not None:  # a window never built has no state to keep
            self._window.save_state()
        self.remote.close()
        self.fleet.close()
        self.inventory.close()
        self.history.close()
        self._forget_lost()
        if self.demo is not None:
            self.demo.stop()
        if self._window is not None:
            self._window.close_for_quit()
        self.quitRequested.emit()
        self.qapp.quit()

    def dispose(self) -> None:
        """Delete the window, the tray menu and this object now (after :meth:`finish_quit`;
        used by tests and the screenshot script, which create several apps in one process)."""
        collector = self.gc
        self._forget_lost()
        self.model.stop_ticking()
        self.ops.close_dialogs()
        if self.tray is not None:
            self.tray.menu.deleteLater()
            self.tray.icon.hide()
        if self._window is not None:
            self._window.deleteLater()
        self.deleteLater()
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        collector.stop()
        audit.set_via(self._prev_via)  # process-wide: give it back (tests share a process)
