"""The main window's actions (docs/gui.md "Window"): the ``...Requested`` signals, the
toolbar's and context menu's actions with their shortcuts, and which of them the selected lock
allows -- including a lock another host published (a fleet row, :mod:`app.table.fleet_rows`),
whose actions are offered only where they are safe from here, with the reason as their
tooltip (docs/gui.md, "Fleet"). :class:`app.window.MainWindow` builds on it.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from typing import TypeAlias

from PySide6.QtCore import QPoint, Qt, Signal, SignalInstance
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu

from app.bridges.lock_actions import LockActions
from app.table.fleet_rows import Safety, fleet_origin, real_path
from app.table.lockinfo import forceable, held_by_user, is_remote, not_a_lock_file, reclaimable
from app.table.view import LockTable
from core.holder import process_label
from core.record import LockStatus, State
from core.text import printable

Shortcut: TypeAlias = QKeySequence | QKeySequence.StandardKey | None


class ActionsWindow(QMainWindow):
    """The window's signals and actions (module docstring); the subclass provides
    :attr:`table`, :attr:`_actions` and :attr:`extra_context_actions`.

    Signals (the user asked for an operation; ``str`` is the selected lock's path -- for a
    fleet row, its path on its host, which is this host's path too when actions are offered):
        acquireRequested(), releaseRequested(str), reclaimRequested(str),
        forceReleaseRequested(str), openFolderRequested(str), copyPathRequested(str),
        settingsRequested(), auditRequested(), whoRequested(), historyRequested(str: a lock's
        audit entries),
        endHolderRequested(str), quitRequested().
    """

    acquireRequested = Signal()
    releaseRequested = Signal(str)
    reclaimRequested = Signal(str)
    forceReleaseRequested = Signal(str)
    openFolderRequested = Signal(str)
    copyPathRequested = Signal(str)
    settingsRequested = Signal()
    auditRequested = Signal()
    whoRequested = Signal()
    historyRequested = Signal(str)
    endHolderRequested = Signal(str)
    quitRequested = Signal()

    table: LockTable
    _actions: LockActions
    extra_context_actions: list[QAction | None]
    fleet_safety_of: Callable[[str], Safety | None] | None = None
    """Where :meth:`fleet_safety` asks (the app sets :meth:`app.fleet.bridge.FleetBridge.
    safety` when a ``[fleet]`` is configured)."""
    _tips: dict[QAction, str]

    def fleet_safety(self, key: str) -> Safety | None:
        """Whether actions on the fleet row ``key`` are safe here (not yet known: no); None
        for any other row."""
        origin = fleet_origin(key)
        if origin is None:
            return None
        ask = self.fleet_safety_of
        known = None if ask is None else ask(key)
        return known or Safety(False, f"whether {origin[1]} here is the file {origin[0]} "
                               "published is being checked")

    def current_status(self) -> LockStatus | None:
        """Status of the selected row, or ``None``."""
        return self.table.selected_status()

    def rescan(self) -> None:
        """Rescan (F5, Ctrl+R): the window does it."""
        raise NotImplementedError

    def focus_filter(self) -> None:
        """Find (Ctrl+F): the window does it."""
        raise NotImplementedError

    def fleet_guarded(self) -> tuple[QAction, ...]:
        """The actions refused on a fleet row that is not safe from here."""
        return (self.act_release, self.act_reclaim, self.act_force, self.act_end_holder,
                self.act_open_folder, self.act_history)

    def _fleet_tooltips(self, safety: Safety | None) -> None:
        """On a fleet row not safe from here, its guarded actions' tooltips say why; else
        their own tooltips."""
        if not hasattr(self, "_tips"):
            self._tips = {a: a.toolTip() for a in self.fleet_guarded()}
        for a, tip in self._tips.items():
            a.setToolTip(tip if safety is None or safety.ok else
                         printable(f"Not from here: {safety.why}"))

    # -- actions ------------------------------------------------------------------------------

    def _action(self, text: str, slot: Callable[[], object], shortcut: Shortcut = None,
                tip: str = "") -> QAction:
        a = QAction(text, self)
        if shortcut is not None:
            a.setShortcut(QKeySequence(shortcut))
            a.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        a.setToolTip(tip or text)
        a.triggered.connect(slot)
        self.addAction(a)
        return a

    def _on_selected(self, signal: SignalInstance) -> Callable[[], None]:
        """A slot emitting ``signal`` with the selected lock's path (nothing without one)."""

        def slot() -> None:
            st = self.current_status()
            if st is not None:
                signal.emit(real_path(st.path))

        return slot

    def _make_actions(self) -> None:
        self.act_acquire = self._action("Acquire…", lambda: self.acquireRequested.emit(),
                                        QKeySequence.StandardKey.New,
                                        "Acquire a lock held by Lockwarden (Ctrl+N)")
        self.act_release = self._action("Release", self._on_selected(self.releaseRequested),
                                        None, "Release a lock this Lockwarden holds (Del)")
        # Del is its own action, enabled whenever a row is selected: on a lock this app does
        # not hold it explains why nothing happens instead of doing nothing silently
        # (the Lock menu lists it, with its key, as "Release")
        self.act_release_key = self._action(
            "Release", self.release_key, QKeySequence.StandardKey.Delete,
            "Release the selected lock when this Lockwarden holds it; otherwise say why not "
            "(Del)")
        self.act_reclaim = self._action("Reclaim", self._on_selected(self.reclaimRequested),
                                        QKeySequence("Ctrl+Shift+R"),
                                        "Break a stale lock and take it (Ctrl+Shift+R)")
        self.act_force = self._action("Force release…",
                                      self._on_selected(self.forceReleaseRequested),
                                      QKeySequence("Ctrl+Shift+Del"),
                                      "Delete the lock file whoever holds it (Ctrl+Shift+Del)")
        self.act_end_holder = self._action(
            "End holder process…", self._on_selected(self.endHolderRequested), None,
            "End (SIGTERM) the process holding this kernel lock: the only way to free it")
        self.act_open_folder = self._action("Open folder",
                                            self._on_selected(self.openFolderRequested))
        self.act_copy = self._action("Copy path", self._on_selected(self.copyPathRequested),
                                     QKeySequence("Ctrl+Shift+C"))
        self.act_history = self._action("Audit entries…",
                                        self._on_selected(self.historyRequested),
                                        QKeySequence("Ctrl+H"),
                                        "What was done to the selected lock, by whom and why: "
                                        "its audit entries (Ctrl+H)")
        self.act_rescan = self._action("Rescan", self.rescan, None,
                                       "Scan the watched directories again (F5, Ctrl+R)")
        self.act_rescan.setShortcuts(list(dict.fromkeys(
            [QKeySequence("F5"), QKeySequence("Ctrl+R"),
             *QKeySequence.keyBindings(QKeySequence.StandardKey.Refresh)])))
        self.act_settings = self._action("Settings…", lambda: self.settingsRequested.emit(),
                                         QKeySequence("Ctrl+,"), "Settings (Ctrl+,)")
        prefs = QKeySequence(QKeySequence.StandardKey.Preferences)
        if not prefs.isEmpty() and prefs != QKeySequence("Ctrl+,"):
            self.act_settings.setShortcuts([QKeySequence("Ctrl+,"), prefs])
        self.act_audit = self._action("Audit log…", lambda: self.auditRequested.emit(),
                                      QKeySequence("Ctrl+L"),
                                      "Every audit entry of the watched directories (Ctrl+L)")
        self.act_who = self._action("What's using this…", lambda: self.whoRequested.emit(),
                                    QKeySequence("Ctrl+Shift+U"),
                                    "Every process using a file or folder (Ctrl+Shift+U)")
        self.act_find = self._action("Find", self.focus_filter, QKeySequence.StandardKey.Find)
        self.act_close = self._action("Close window", self.close, QKeySequence.StandardKey.Close)
        self.act_quit = self._action("Quit", lambda: self.quitRequested.emit(),
                                     QKeySequence("Ctrl+Q"))
        # Ctrl+Q everywhere (some platform themes have no Quit key), and the platform's own
        self.act_quit.setShortcuts(list(dict.fromkeys(
            [QKeySequence("Ctrl+Q"),
             *QKeySequence.keyBindings(QKeySequence.StandardKey.Quit)])))

    def release_key(self) -> None:
        """Del: release the selected lock when this Lockwarden holds it; otherwise say in the
        status bar why not and what to use instead."""
        st = self.current_status()
        if st is None:
            return
        safety = self.fleet_safety(st.path)
        if safety is not None and not safety.ok:
            self.statusBar().showMessage(printable(f"Not from here: {safety.why}"), 10000)
            return
        if self._actions.holds(real_path(st.path)):
            self.releaseRequested.emit(real_path(st.path))
            return
        if st.kind == "kernel":
            self.statusBar().showMessage(
                f"{os.path.basename(st.path)} is a kernel lock's file: only the kernel knows "
                "whether it is held, and Lockwarden never deletes it.", 10000)
            return
        name = os.path.basename(st.path)
        process = process_label(st) if held_by_user(st) else ""
        if process:  # "mine" in the Holder column: your user's process, not this app
            self.statusBar().showMessage(printable(
                f"{name} is held by {process} of your user, not by this Lockwarden, so Del "
                f"does not release it: release it from there (lockwarden release "
                f"{shlex.quote(st.path)}), "
                "or use Force release… (Ctrl+Shift+Del)."), 10000)
            return
        self.statusBar().showMessage(
            f"{name} is not held by this Lockwarden, so Del does not "
            "release it; use Force release… (Ctrl+Shift+Del) to delete it anyway.", 10000)

    def _update_actions(self) -> None:
        st = self.current_status()
        safety = None if st is None else self.fleet_safety(st.path)
        self._fleet_tooltips(safety)
        if safety is not None and not safety.ok:
            for a in self.fleet_guarded():
                a.setEnabled(False)
            self.act_release_key.setEnabled(True)  # Del says why
            self.act_copy.setEnabled(True)
            return
        has = st is not None
        writable = st is not None and not st.read_only and not not_a_lock_file(st)
        # ours: Release, never break
        mine = st is not None and self._actions.holds(real_path(st.path))
        self.act_release.setEnabled(mine)
        self.act_release_key.setEnabled(has)
        self.act_reclaim.setEnabled(st is not None and not mine and reclaimable(st))
        self.act_force.setEnabled(writable and st is not None and not mine and forceable(st))
        self.act_end_holder.setEnabled(st is not None and st.kernel_pid is not None)
        self.act_open_folder.setEnabled(st is not None and not is_remote(st.path))
        self.act_copy.setEnabled(has)
        self.act_history.setEnabled(has and safety is None)
        if st is not None and st.state is State.STALE:
            self.act_reclaim.setText("Reclaim")
        elif st is not None:
            self.act_reclaim.setText("Reclaim…")

    def _context_menu(self, pos: QPoint) -> None:
        idx = self.table.indexAt(pos)
        if idx.isValid():
            self.table.selectRow(idx.row())
        menu = self.build_context_menu()
        menu.popup(self.table.viewport().mapToGlobal(pos))

    def build_context_menu(self) -> QMenu:
        """The table's context menu for the current selection."""
        menu = QMenu(self)
        for a in (self.act_release, self.act_reclaim, self.act_force, self.act_end_holder, None,
                  self.act_open_folder, self.act_copy, self.act_history, None, self.act_acquire,
                  self.act_rescan, *self.extra_context_actions):
            if a is None:
                menu.addSeparator()
            else:
                menu.addAction(a)
        return menu
