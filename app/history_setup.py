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
from typing import TYPE_CHECKING, NamedTuple

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QApplication, QDockWidget, QLabel

from app.history.free_watch import FreeWatch, wanted
from app.history.recorder import HistoryRecorder
from core.record import LockStatus
from core.text import printable

if TYPE_CHECKING:
    from app.actions.commands import Commands
    from app.bridges.config_store import ConfigStore
    from app.bridges.remote_poller import RemotePoller
    from app.bridges.watch_bridge import WatchBridge
    from app.history.view import HistoryPane
    from app.tray import TrayController
    from app.window import MainWindow
    from core.config import Config


class _WindowParts(NamedTuple):
    """The history's parts that live in the window (:meth:`HistoryParts.attach_window`)."""

    pane: HistoryPane
    dock: QDockWidget
    paused_label: QLabel
    act_history: QAction
    act_notify: QAction


class HistoryParts(QObject):
    """The history's parts of one app (built by :func:`install`).

    The recorder and "Notify me when free" work from the start, tray only; the window's parts
    (the pane, its dock, the status bar's label, the window's actions) are built by
    :meth:`attach_window` when the app builds its window, on first show (docs/performance.md
    "Idle tray"). Reading one of them before builds the window (``window``, a callable).

    Attributes:
        recorder: :class:`app.history.recorder.HistoryRecorder` (records nothing when
            ``[history] enabled = false`` or in the demo).
        pane, dock: the History pane and its dock widget (hidden until asked for).
        free: :class:`app.history.free_watch.FreeWatch`.
        paused_label: the status bar's "History paused" warning (hidden while recording).
        act_history, act_notify: the window's "History" (the pane: what was seen) and "Notify
            me when free".
    """

    def __init__(self, *, config: Config, record: bool, window: Callable[[], MainWindow],
                 inventory: WatchBridge, tray: TrayController | None,
                 remote: RemotePoller | None = None, store: ConfigStore | None = None,
                 ops: Commands | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self._window_of = window
        self.window: MainWindow | None = None
        self._parts: _WindowParts | None = None
        self._action_shown: str | None = None  # the lock "Show in timeline" opened
        self.tray, self.inventory = tray, inventory
        settings = config.history
        if not record:
            from dataclasses import replace

            settings = replace(settings, enabled=False)
        self.recorder = HistoryRecorder(settings, self)
        inventory.change_listeners.append(self.recorder.on_change)
        inventory.start_listeners.append(self.recorder.on_started)
        if remote is not None and self.recorder.recorder is not None:  # locks on servers
            remote.poll_listeners.append(self.recorder.recorder.observe)
        self._paused: object = None
        self.recorder.statusChanged.connect(self.show_paused)
        self.free = FreeWatch(self)
        inventory.updated.connect(self.free.apply)
        self.free.freed.connect(self._freed)
        if tray is not None:
            tray.lock_extras = self.tray_extras
        if ops is not None:
            ops.dialogOpened.connect(self._dialog_opened)

    def attach_window(self, window: MainWindow) -> None:
        """Build the window's parts: the pane in a dock under the table (Ctrl+Shift+H), the
        status bar's paused label, "Notify me when free" on the table's context menu."""
        from app.history.view import HistoryPane

        self.window = window
        paused_label = QLabel()
        paused_label.setAccessibleName("History status")
        paused_label.setStyleSheet("color: #d23c3c;")
        paused_label.hide()
        window.statusBar().addPermanentWidget(paused_label)

        pane = HistoryPane()
        dock = QDockWidget("History", window)
        dock.setObjectName("history-dock")
        dock.setWidget(pane)
        dock.setAccessibleName("History")
        window.add_bottom_dock(dock)  # a tab beside Problems and Hosts
        dock.hide()
        act_history = dock.toggleViewAction()
        act_history.setText("History")
        act_history.setShortcut(QKeySequence("Ctrl+Shift+H"))
        act_history.setToolTip("Who held the selected lock, when and for how long "
                               "(Ctrl+Shift+H)")
        window.addAction(act_history)
        act_notify = QAction("Notify me when free", window)
        act_notify.setCheckable(True)
        act_notify.setToolTip("One notification when this lock is released, reclaimed "
                              "or turns stale")
        window.addAction(act_notify)
        window.extra_context_actions += [None, act_notify, act_history]
        window.menus.view.insertAction(window.act_problems, act_history)
        window.menus.lock.addAction(act_notify)
        self._parts = _WindowParts(pane, dock, paused_label, act_history, act_notify)
        self.show_paused(self._paused)
        dock.visibilityChanged.connect(lambda _v: self.follow_selection())
        window.table.selectionModel().selectionChanged.connect(
            lambda *_a: self.follow_selection())
        self.inventory.updated.connect(self._updated)
        act_notify.triggered.connect(self._toggle_selected)
        window.table.selectionModel().selectionChanged.connect(lambda *_a: self._sync_notify())
        self.free.changed.connect(self._sync_notify)
        self._sync_notify()

    @property
    def parts(self) -> _WindowParts:
        """The window's parts (the window is built now if it is not yet)."""
        if self._parts is None:
            self._window_of()  # the app's window property calls attach_window
        assert self._parts is not None
        return self._parts

    @property
    def pane(self) -> HistoryPane:
        """The History pane (builds the window if needed)."""
        return self.parts.pane

    @property
    def dock(self) -> QDockWidget:
        """The History pane's dock widget (builds the window if needed)."""
        return self.parts.dock

    @property
    def paused_label(self) -> QLabel:
        """The status bar's "History paused" warning (builds the window if needed)."""
        return self.parts.paused_label

    @property
    def act_history(self) -> QAction:
        """The window's "History" action, showing the pane (builds the window if needed)."""
        return self.parts.act_history

    @property
    def act_notify(self) -> QAction:
        """The window's "Notify me when free" action (builds the window if needed)."""
        return self.parts.act_notify

    # -- recorder -----------------------------------------------------------------------------

    def show_paused(self, reason: object) -> None:
        """The status bar's warning: history is paused and why (hidden while it records);
        kept for the window until it is built."""
        self._paused = reason
        if self._parts is None:
            return
        label = self._parts.paused_label
        if isinstance(reason, str):
            label.setText("⚠ History paused")
            label.setToolTip(printable(f"History paused: {reason}. The monitor "
                                       "keeps working; writing is retried."))
            label.show()
        else:
            label.hide()

    # -- History pane -------------------------------------------------------------------------

    @property
    def _win(self) -> MainWindow:
        """The window (built now if it is not yet)."""
        return self.window if self.window is not None else self._window_of()

    def follow_selection(self) -> None:
        """Show the selected lock's history while the dock is visible."""
        if not self.dock.isVisible():
            return
        st = self._win.current_status()
        if self._action_shown is not None and (st is None or st.path == self._action_shown):
            # "Show in timeline" of a lock that may leave the table (released): a late
            # selection or visibility signal does not take the pane away from it; selecting
            # another lock does
            return
        self._action_shown = None
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
        self._action_shown = lock
        self.dock.show()
        self.dock.raise_()
        self._win.select_path(lock)
        self.pane.show_action(lock, digest, t)

    # -- Notify me when free ------------------------------------------------------------------

    def _sync_notify(self) -> None:
        st = self._win.current_status()
        self.act_notify.setEnabled(st is not None and (wanted(st) or self.free.watching(st.path)))
        self.act_notify.setChecked(st is not None and self.free.watching(st.path))

    def _toggle_selected(self) -> None:
        st = self._win.current_status()
        if st is not None:
            on = self.free.toggle(st)
            self._win.statusBar().showMessage(printable(
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
            self._win.statusBar().showMessage(printable(f"{title}: {body}"), 15000)
            QApplication.alert(self._win)

    def close(self) -> None:
        """Stop the recorder (writes what is queued)."""
        self.recorder.close()


def install(*, config: Config, record: bool, window: Callable[[], MainWindow],
            inventory: WatchBridge, tray: TrayController | None, remote: RemotePoller | None,
            store: ConfigStore, ops: Commands, parent: QObject) -> HistoryParts:
    """Build and connect the history's parts (see :class:`HistoryParts`); ``window`` returns
    the app's window, building it on first call (and the app then calls
    :meth:`HistoryParts.attach_window`)."""
    return HistoryParts(config=config, record=record, window=window, inventory=inventory,
                        tray=tray, remote=remote, store=store, ops=ops, parent=parent)
