"""Puts history into the app (docs/gui.md "History" and "Notify me when free"): the recorder
fed by the watcher, its paused status in the status bar, the History pane in a dock under the
table (Ctrl+Shift+H), and "Notify me when free" on the table's context menu and the tray's
lock menus.

Kept out of :mod:`app.window` and :mod:`app.tray`, which only expose hooks
(``MainWindow.extra_context_actions``, ``TrayController.lock_extras``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QApplication, QDockWidget, QLabel

from app.free_watch import FreeWatch, wanted
from app.history_bridge import HistoryRecorder
from app.history_view import HistoryPane
from core.reasons import printable
from core.record import LockStatus

if TYPE_CHECKING:
    from app.commands import Commands
    from app.config_store import ConfigStore
    from app.remote_poller import RemotePoller
    from app.tray import TrayController
    from app.watch_bridge import Inventory
    from app.window import MainWindow
    from core.config import Config


class HistoryParts(QObject):
    """The history's parts of one app (built by :func:`install`).

    Attributes:
        recorder: :class:`app.history_bridge.HistoryRecorder` (records nothing when
            ``[history] enabled = false`` or in the demo).
        pane, dock: the History pane and its dock widget (hidden until asked for).
        free: :class:`app.free_watch.FreeWatch`.
        paused_label: the status bar's "History paused" warning (hidden while recording).
        act_history, act_notify: the window's "History timeline" and "Notify me when free".
    """

    def __init__(self, *, config: Config, record: bool, window: MainWindow,
                 inventory: Inventory, tray: TrayController | None,
                 remote: RemotePoller | None = None, store: ConfigStore | None = None,
                 ops: Commands | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.window, self.tray, self.inventory = window, tray, inventory
        settings = config.history
        if not record:
            from dataclasses import replace

            settings = replace(settings, enabled=False)
        self.recorder = HistoryRecorder(settings, self)
        inventory.change_listeners.append(self.recorder.on_change)
        inventory.start_listeners.append(self.recorder.on_started)
        if remote is not None and self.recorder.recorder is not None:  # locks on servers
            remote.poll_listeners.append(self.recorder.recorder.observe)

        self.paused_label = QLabel()
        self.paused_label.setAccessibleName("History status")
        self.paused_label.setStyleSheet("color: #d23c3c;")
        self.paused_label.hide()
        window.statusBar().addPermanentWidget(self.paused_label)
        self.recorder.statusChanged.connect(self.show_paused)

        self.pane = HistoryPane()
        self.dock = QDockWidget("History", window)
        self.dock.setObjectName("history-dock")
        self.dock.setWidget(self.pane)
        self.dock.setAccessibleName("History")
        window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.dock)
        self.dock.hide()
        self.act_history = self.dock.toggleViewAction()
        self.act_history.setText("History timeline")
        self.act_history.setShortcut(QKeySequence("Ctrl+Shift+H"))
        self.act_history.setToolTip("Who held the selected lock, when and for how long "
                                    "(Ctrl+Shift+H)")
        window.addAction(self.act_history)
        self.dock.visibilityChanged.connect(lambda _v: self.follow_selection())
        window.table.selectionModel().selectionChanged.connect(
            lambda *_a: self.follow_selection())
        inventory.updated.connect(self._updated)

        self.free = FreeWatch(self)
        self.act_notify = QAction("Notify me when free", window)
        self.act_notify.setCheckable(True)
        self.act_notify.setToolTip("One notification when this lock is released, reclaimed "
                                   "or turns stale")
        self.act_notify.triggered.connect(self._toggle_selected)
        window.addAction(self.act_notify)
        window.extra_context_actions += [None, self.act_notify, self.act_history]
        window.table.selectionModel().selectionChanged.connect(lambda *_a: self._sync_notify())
        inventory.updated.connect(self.free.apply)
        self.free.changed.connect(self._sync_notify)
        self.free.freed.connect(self._freed)
        if tray is not None:
            tray.lock_extras = self.tray_extras
        if ops is not None:
            ops.dialogOpened.connect(self._dialog_opened)
        self._sync_notify()

    # -- recorder -----------------------------------------------------------------------------

    def show_paused(self, reason: object) -> None:
        """The status bar's warning: history is paused and why (hidden while it records)."""
        if isinstance(reason, str):
            self.paused_label.setText("⚠ History paused")
            self.paused_label.setToolTip(printable(f"History paused: {reason}. The monitor "
                                                   "keeps working; writing is retried."))
            self.paused_label.show()
        else:
            self.paused_label.hide()

    # -- History pane -------------------------------------------------------------------------

    def follow_selection(self) -> None:
        """Show the selected lock's history while the dock is visible."""
        if not self.dock.isVisible():
            return
        st = self.window.current_status()
        self.pane.show_path(st.path if st is not None else None)

    def _updated(self, updates: list[tuple[str, LockStatus | None]]) -> None:
        target = self.pane.target
        if not self.dock.isVisible() or target is None:
            return
        inside = target.rstrip(os.sep) + os.sep
        if any(p == target or (self.pane.target_is_dir and p.startswith(inside))
               for p, _ in updates):
            self.pane.reload()

    def _dialog_opened(self, dlg: object) -> None:
        """The audit viewer gets "Show in timeline"."""
        from app.dialogs.audit import AuditDialog

        if isinstance(dlg, AuditDialog):
            dlg.to_timeline.setVisible(True)
            dlg.timelineRequested.connect(self.show_action)

    def show_action(self, lock: str, digest: str, t: float) -> None:
        """Open the History pane on ``lock`` at the change the audit entry ``digest`` (written
        at ``t``, Unix s) made."""
        self.dock.show()
        self.dock.raise_()
        self.window.select_path(lock)
        self.pane.show_action(lock, digest, t)

    # -- Notify me when free ------------------------------------------------------------------

    def _sync_notify(self) -> None:
        st = self.window.current_status()
        self.act_notify.setEnabled(st is not None and (wanted(st) or self.free.watching(st.path)))
        self.act_notify.setChecked(st is not None and self.free.watching(st.path))

    def _toggle_selected(self) -> None:
        st = self.window.current_status()
        if st is not None:
            on = self.free.toggle(st)
            self.window.statusBar().showMessage(printable(
                f"Will notify when {st.path} is free" if on
                else f"No notification for {st.path}"), 5000)

    def tray_extras(self, st: LockStatus) -> list[tuple[str, Callable[[], None]]]:
        """The tray's lock submenu entries: "Notify me when free" (or "Don't notify")."""
        if self.free.watching(st.path):
            return [("Don't notify when free", lambda: self.free.remove(st.path))]
        if wanted(st):
            def watch() -> None:
                self.free.add(st)

            return [("Notify me when free", watch)]
        return []

    def _freed(self, path: str, title: str, body: str, kind: str) -> None:
        """One notification per request. A lock that turned stale is already announced by
        the tray when ``[notifications] on_stale`` is on and not paused: not twice."""
        notes = self.store.config.notifications if self.store is not None else None
        if (kind == "stale" and self.tray is not None and notes is not None and notes.on_stale
                and not notes.paused):
            return
        if self.tray is not None and self.tray.icon.isVisible():
            self.tray.notify(title, body, warning=False, path=path)
        else:
            self.window.statusBar().showMessage(printable(f"{title}: {body}"), 15000)
            QApplication.alert(self.window)

    def close(self) -> None:
        """Stop the recorder (writes what is queued)."""
        self.recorder.close()


def install(*, config: Config, record: bool, window: MainWindow, inventory: Inventory,
            tray: TrayController | None, remote: RemotePoller | None, store: ConfigStore,
            ops: Commands, parent: QObject) -> HistoryParts:
    """Build and connect the history's parts (see :class:`HistoryParts`)."""
    return HistoryParts(config=config, record=record, window=window, inventory=inventory,
                        tray=tray, remote=remote, store=store, ops=ops, parent=parent)
