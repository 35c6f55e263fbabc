"""The tray icon: aggregate state with a stale-count badge, tooltip with counts, menu of held
and stale locks with their actions, notifications (docs/gui.md "Tray").

Aggregate state, worst first: ``problem`` (a watched directory missing or failing, an
unreadable lock, or a problem in the configuration file), ``stale`` (any stale or expired
lock), ``held``, ``free``. The badge counts stale + expired locks whatever the icon.

The tray only presents and asks: the operations of its menu leave it as ``...Requested``
signals that :class:`app.application.LockwardenApp` connects.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from app.bridges.config_store import ConfigStore
from app.bridges.lock_actions import LockActions, lost_message
from app.bridges.watch_bridge import WatchBridge
from app.style.icons import app_icon, state_icon, tray_icon
from app.table.columns import MINE
from app.table.lockinfo import (
    STATE_WORDS,
    display_state,
    forceable,
    held_by_user,
    holder_changed,
    is_attention,
    not_a_lock_file,
    plural,
    reclaimable,
    under_any,
)
from app.table.model import LockTableModel, Transition
from core.config import expand_path
from core.reasons import render_all
from core.record import LockStatus, State
from core.text import printable
from core.watch.watcher import DirStatus

MENU_LIMIT = 15
"""Locks listed in the tray menu before "N more…"."""

REFRESH_MS = 250
"""The icon and tooltip are refreshed at most this often, in milliseconds: a change after a
quiet spell at once, later ones gathered until the interval since the last refresh ends."""

PROBLEM_MODES = ("missing", "error")
"""Directory modes (:attr:`core.watch.watcher.DirStatus.mode`) that make the tray red."""


def aggregate(counts: dict[State, int], dirs: Sequence[DirStatus],
              config_problems: int = 0) -> str:
    """Aggregate tray state from per-state counts, the watched directories and the number of
    the configuration file's problems (see module doc): ``problem``, ``stale``, ``held`` or
    ``free``."""
    if (any(d.mode in PROBLEM_MODES for d in dirs) or counts.get(State.UNREADABLE, 0)
            or config_problems):
        return "problem"
    if counts.get(State.STALE, 0) or counts.get(State.EXPIRED, 0):
        return "stale"
    if counts.get(State.HELD, 0) or counts.get(State.WRITING, 0):
        return "held"
    return "free"


def holder_summary(st: LockStatus) -> str:
    """Owner, PID and host of a lock in one short string (for notifications)."""
    rec = st.record
    if rec is None:
        return ""
    parts = [rec.holder, f"PID {rec.pid}" if rec.pid is not None else None, rec.host]
    return " ".join(p for p in parts if p)


class Note(NamedTuple):
    """One notification: ``title``, ``body`` (one text, or its lines), whether it is a
    ``warning``, and the ``path`` of the lock it is about (clicking it opens the window
    there)."""

    title: str
    body: str | Sequence[str]
    warning: bool
    path: str | None


class TrayController(QObject):
    """Owns the :class:`QSystemTrayIcon` and its menu.

    Args:
        model: the lock table model (counts, statuses, transitions, "held by me").
        inventory: the watched directories and whether the first scan is in.
        actions: which locks this app holds; its ``released``/``lost`` announcements.
        store: the configuration (notification choices, pause).
        parent: Qt parent.

    Notifications: for the inventory's transitions (:meth:`_transitions`), except the
    disappearance of a lock held by this process (:meth:`LockTableModel.is_mine`), which only
    :class:`app.bridges.lock_actions.LockActions` can tell apart -- released by us
    (:attr:`released`) or
    lost (:attr:`lost`); it announces it and the tray shows what it says.

    Signals:
        notified(str, str, QSystemTrayIcon.MessageIcon): a notification was raised (title,
            body, icon), whether or not the platform can show balloons.
        showWindowRequested(), acquireRequested(), releaseRequested(str),
        reclaimRequested(str), forceReleaseRequested(str), copyPathRequested(str),
        openFolderRequested(str), auditRequested(), whoRequested(), settingsRequested(),
        problemsRequested(),
        quitRequested(): the user asked for that from the menu or the icon (``str``: path).
    """

    notified = Signal(str, str, object)
    showWindowRequested = Signal()
    showLockRequested = Signal(str)
    acquireRequested = Signal()
    releaseRequested = Signal(str)
    reclaimRequested = Signal(str)
    forceReleaseRequested = Signal(str)
    copyPathRequested = Signal(str)
    openFolderRequested = Signal(str)
    auditRequested = Signal()
    whoRequested = Signal()
    settingsRequested = Signal()
    problemsRequested = Signal()
    quitRequested = Signal()

    def __init__(self, *, model: LockTableModel, inventory: WatchBridge, actions: LockActions,
                 store: ConfigStore, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._model = model
        self._inventory = inventory
        self._actions = actions
        self._store = store
        self.lock_extras: Callable[[LockStatus], list[tuple[str, Callable[[], None]]]] | None = None
        """More entries of each lock's submenu, ``(text, slot)`` (the History parts' "Notify me
        when free", :mod:`app.history_setup`)."""
        self.icon = QSystemTrayIcon(app_icon(), self)
        self.menu = QMenu()
        self.menu.aboutToShow.connect(self.rebuild_menu)
        self.icon.setContextMenu(self.menu)
        self.icon.activated.connect(self._activated)
        self._clicked_path: str | None = None  # the lock of the last notification
        self.icon.messageClicked.connect(self.message_clicked)
        self.state = ""
        self.badge = -1
        self._notified: dict[str, State] = {}
        self._dup_names: set[str] | None = None
        model.countsChanged.connect(self._forget_names)
        self._refresh = QTimer(self)
        self._refresh.setSingleShot(True)
        self._refresh.timeout.connect(self.refresh)
        self._last_refresh = -float("inf")  # time.monotonic() of the last refresh
        model.countsChanged.connect(self._schedule_refresh)
        inventory.dirsChanged.connect(lambda _d: self._schedule_refresh())
        store.problemsChanged.connect(lambda _p: self._schedule_refresh())
        self._dir_modes: dict[str, str] = {}
        inventory.dirsChanged.connect(self._dirs_changed)
        model.transitions.connect(self._transitions)
        actions.released.connect(self._released)
        actions.lost.connect(self._lost)
        self.act_pause = QAction("Pause notifications", self)
        self.act_pause.setCheckable(True)
        self.paused = store.config.notifications.paused
        self.act_pause.setChecked(self.paused)
        self.act_pause.toggled.connect(self._set_paused)
        self.refresh()
        self.rebuild_menu()

    def _schedule_refresh(self) -> None:
        """Refresh on the next event-loop turn when the last refresh is :data:`REFRESH_MS` or
        more ago (a holder's death shows at once), else when that interval ends: at most one
        refresh every :data:`REFRESH_MS` while changes keep coming. A running timer is left
        alone, never restarted (restarting it on each change starved the icon under steady
        churn; qutebrowser's ``misc/throttle.py`` pattern)."""
        if not self._refresh.isActive():
            wait_ms = REFRESH_MS - (time.monotonic() - self._last_refresh) * 1000
            self._refresh.start(int(wait_ms) + 1 if wait_ms > 0 else 0)

    def _forget_names(self) -> None:
        self._dup_names = None

    def show(self) -> None:
        """Show the icon."""
        self.icon.show()

    def hide(self) -> None:
        """Hide the icon."""
        self.icon.hide()

    def _set_paused(self, on: bool) -> None:
        self.paused = on
        self._store.set_notifications_paused(on)

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason in (QSystemTrayIcon.ActivationReason.Trigger,
                      QSystemTrayIcon.ActivationReason.DoubleClick):
            self.showWindowRequested.emit()

    # -- icon and tooltip ---------------------------------------------------------------------

    def refresh(self) -> None:
        """Update icon, badge and tooltip from the model's counts and the directories."""
        self._last_refresh = time.monotonic()
        counts = self._model.counts()
        dirs = self._inventory.dirs
        config_problems = len(self._store.problems())
        state = aggregate(counts, dirs, config_problems)
        badge = counts[State.STALE] + counts[State.EXPIRED]
        if (state, badge) != (self.state, self.badge):
            self.state, self.badge = state, badge
            self.icon.setIcon(tray_icon(state, badge))
        parts = [f"{counts[s]} {s.value}" for s in
                 (State.HELD, State.STALE, State.EXPIRED, State.WRITING, State.UNREADABLE)
                 if counts[s]]
        lines = ["Lockwarden", ", ".join(parts) if parts else "no locks held"]
        lines += [f"{d.path}: {d.mode}" for d in dirs if d.mode in PROBLEM_MODES]
        if config_problems:
            lines.append(f"{config_problems} configuration problem"
                         f"{'' if config_problems == 1 else 's'}")
        self.icon.setToolTip("\n".join(lines))

    # -- menu ---------------------------------------------------------------------------------

    def menu_locks(self) -> list[LockStatus]:
        """Locks listed in the menu: stale/expired first, then held, newest first within."""
        m = self._model
        sts = [s for s in m.statuses() if is_attention(s.state) or s.state is State.HELD]
        sts.sort(key=lambda s: (0 if is_attention(s.state) else 1, m.age_seconds(s) or 0.0))
        return sts

    def rebuild_menu(self) -> None:
        """Fill the menu: locks with their submenus (at most :data:`MENU_LIMIT`, then
        "N more…"; a name two listed locks share gets its parent directory), then
        "Problems…" if any, "Open Lockwarden", "Acquire lock…", "Audit log…", "What's using
        this…", "Settings…",
        "Pause notifications", "Quit"."""
        menu = self.menu
        self._dup_names = None
        menu.clear()
        locks = self.menu_locks()
        if not locks:
            menu.addAction("No held or stale locks").setEnabled(False)
        for st in locks[:MENU_LIMIT]:
            self._lock_submenu(menu, st)
        if len(locks) > MENU_LIMIT:
            more = menu.addAction(f"{len(locks) - MENU_LIMIT} more…")
            more.triggered.connect(lambda: self.showWindowRequested.emit())
        problems = self.problems_text()
        if problems:
            menu.addSeparator()
            act = menu.addAction(state_icon("problem"), f"Problems: {problems} — Open…")
            act.setToolTip("Show the problems in the Lockwarden window")
            act.triggered.connect(lambda: self.problemsRequested.emit())
        menu.addSeparator()
        menu.addAction("Open Lockwarden").triggered.connect(
            lambda: self.showWindowRequested.emit())
        menu.addAction("Acquire lock…").triggered.connect(lambda: self.acquireRequested.emit())
        menu.addAction("Audit log…").triggered.connect(lambda: self.auditRequested.emit())
        menu.addAction("What's using this…").triggered.connect(lambda: self.whoRequested.emit())
        menu.addAction("Settings…").triggered.connect(lambda: self.settingsRequested.emit())
        menu.addAction(self.act_pause)
        menu.addSeparator()
        menu.addAction("Quit").triggered.connect(lambda: self.quitRequested.emit())

    def problems_text(self) -> str:
        """What makes the tray red, in a few words ("2 unreadable, 1 directory missing,
        1 configuration problem"), or "" when nothing does (see :func:`aggregate`)."""
        parts = []
        unreadable = self._model.counts().get(State.UNREADABLE, 0)
        if unreadable:
            parts.append(f"{unreadable} unreadable")
        for mode, word in (("missing", "missing"), ("error", "failing")):
            k = sum(1 for d in self._inventory.dirs if d.mode == mode)
            if k:
                parts.append(f"{k} {'directory' if k == 1 else 'directories'} {word}")
        k = len(self._store.problems())
        if k:
            parts.append(f"{k} configuration problem{'' if k == 1 else 's'}")
        return ", ".join(parts)

    def _lock_submenu(self, menu: QMenu, st: LockStatus) -> QMenu:
        rec = st.record
        who = ""
        if rec is not None:
            who = rec.holder or (f"PID {rec.pid}" if rec.pid is not None else "")
        if held_by_user(st):  # its holder runs as this user (docs/gui.md, "Holder")
            who = f"{who}, {MINE}" if who else MINE
        word = STATE_WORDS[display_state(st)]
        title = f"{self.lock_title(st.path)} — {word}" + (f" ({who})" if who else "")
        sub = menu.addMenu(state_icon(display_state(st)), printable(title))
        sub.setToolTip(printable(st.path))
        path = st.path

        def add(text: str, signal: Callable[[str], None]) -> None:
            sub.addAction(text).triggered.connect(lambda: signal(path))

        if self._actions.holds(path):  # our own lock: Release, never break it
            add("Release", self.releaseRequested.emit)
        elif not st.read_only and not not_a_lock_file(st):
            if is_attention(st.state) and reclaimable(st):
                add("Reclaim", self.reclaimRequested.emit)
            if forceable(st):
                add("Force release…", self.forceReleaseRequested.emit)
        for text, slot in self.lock_extras(st) if self.lock_extras is not None else ():
            sub.addAction(text).triggered.connect(slot)
        sub.addSeparator()
        add("Copy path", self.copyPathRequested.emit)
        add("Open folder", self.openFolderRequested.emit)
        return sub

    # -- notifications ------------------------------------------------------------------------

    def _transitions(self, trans: list[Transition]) -> None:
        """Notifications for a batch of state/holder changes: a lock became stale or expired
        (once per lock, not per tick); a lock was acquired (a new lock or a new holder, not a
        stale lock turning held again) or released, if asked. Nothing for what the first scan
        found (it was there before the app started), and nothing for the disappearance of a
        lock of this process: :class:`app.bridges.lock_actions.LockActions` announces that
        (released or
        lost)."""
        n = self._store.config.notifications
        self._dup_names = None  # this batch may have added a lock of the same name
        quiet = not self._inventory.initial_done
        messages: list[Note] = []
        for old, new in trans:
            if (new is None or not is_attention(new.state)) and old is not None:
                self._notified.pop(old.path, None)
            if new is not None and is_attention(new.state):
                if self._notified.get(new.path) is new.state:
                    continue
                self._notified[new.path] = new.state
                want = n.on_stale if new.state is State.STALE else n.on_expired
                if want and not quiet:
                    why = render_all(new.reasons[:2])
                    messages.append(Note(f"{os.path.basename(new.path)} is {new.state.value}",
                                         why or new.path, True, new.path))
            elif quiet:
                continue
            elif new is not None and new.state is State.HELD and n.on_acquire and (
                    old is None or old.record is None or holder_changed(old, new)):
                who = holder_summary(new)
                messages.append(Note(f"{self.lock_title(new.path)} acquired", who or new.path,
                                     False, new.path))
            elif (new is None or new.state is State.FREE) and old is not None and \
                    old.state is State.HELD and n.on_release and not self._model.is_mine(old) \
                    and self._watched(old.path):
                forced = self._actions.forced_recently(old.path)
                if forced is None:
                    messages.append(Note(f"{self.lock_title(old.path)} released", old.path,
                                         False, old.path))
                else:  # not its holder's doing: the user's force release
                    why = f": {forced}" if forced else ""
                    messages.append(Note(f"{self.lock_title(old.path)} force-released",
                                         [f"by you{why}", old.path], False, old.path))
        self._show(messages)

    def _watched(self, path: str) -> bool:
        """True when ``path`` lies in a directory that is watched now (in the configuration,
        and neither missing nor failing): only there does a lock that disappears count as
        released. A directory that vanished, or that left the watch list, takes its locks
        out of view; it does not release them."""
        config = [expand_path(w.path) for w in self._store.config.all_watches()]
        gone = [d.path for d in self._inventory.dirs if d.mode in PROBLEM_MODES]
        return under_any(path, config) and not under_any(path, gone)

    def _dirs_changed(self, dirs: Sequence[DirStatus]) -> None:
        """One notice (Warning) for a watched directory that vanished (moved or removed)
        while it was watched, naming how many of the listed locks were in it: they are no
        longer watched, not released."""
        notes: list[Note] = []
        modes = {d.path: d.mode for d in dirs}
        for d in dirs:
            before = self._dir_modes.get(d.path)
            if d.mode == "missing" and before is not None and before not in PROBLEM_MODES:
                n = sum(1 for s in self._model.statuses() if under_any(s.path, [d.path]))
                what = "The watched directory was moved or removed"
                if n:
                    what += (f": {plural(n, 'lock')} there "
                             f"{'is' if n == 1 else 'are'} no longer watched")
                notes.append(Note(f"{os.path.basename(d.path.rstrip(os.sep)) or d.path} "
                                  "is gone", [what + ".", d.path], True, None))
        self._dir_modes = modes
        if self._inventory.initial_done:
            self._show(notes)

    def _released(self, path: str) -> None:
        """This app released a lock it held: "released", when asked for (Information)."""
        if self._store.config.notifications.on_release and self._inventory.initial_done:
            self._show([Note(f"{self.lock_title(path)} released", path, False, path)])

    def _lost(self, path: str, replaced: bool) -> None:
        """A lock this app held was taken away: "Lost …" (Warning), even when paused."""
        title, body = lost_message(path, replaced)
        self.notify(title, [body, path], warning=True, path=path)

    def _show(self, messages: list[Note]) -> None:
        """Raise ``messages`` unless paused; more than three become one summary (clicking it
        opens the window on the first)."""
        if not messages or self.paused:
            return
        if len(messages) > 3:
            title = f"{len(messages)} lock changes"
            body = [m.title for m in messages[:5]]
            messages = [Note(title, body, any(m.warning for m in messages), messages[0].path)]
        for m in messages:
            self.notify(m.title, m.body, warning=m.warning, path=m.path)

    def notify(self, title: str, body: str | Sequence[str], *, warning: bool = True,
               path: str | None = None) -> None:
        """Raise a tray notification and emit :attr:`notified`: the Warning icon for
        stale/expired/lost, the Information icon (``warning=False``) for acquire/release.
        ``body`` is one text or a sequence of lines: each is escaped
        (:func:`core.text.printable`: a path or tag can hold anything, a line break
        included) and the lines are joined by real line breaks.
        Shown as a balloon when the icon is visible and the platform supports messages;
        clicking it emits :attr:`showLockRequested` with ``path`` (the window opens on that
        lock), or :attr:`showWindowRequested` when there is none."""
        icon = (QSystemTrayIcon.MessageIcon.Warning if warning
                else QSystemTrayIcon.MessageIcon.Information)
        lines = [body] if isinstance(body, str) else list(body)
        title = printable(title)
        text = "\n".join(printable(line) for line in lines)
        self._clicked_path = path
        self.notified.emit(title, text, icon)
        if self.icon.isVisible() and QSystemTrayIcon.supportsMessages():
            self.icon.showMessage(title, text, icon, 8000)

    def message_clicked(self) -> None:
        """The user clicked the last notification: open the window on its lock."""
        if self._clicked_path is not None:
            self.showLockRequested.emit(self._clicked_path)
        else:
            self.showWindowRequested.emit()

    def lock_title(self, path: str) -> str:
        """A lock's name for menus and notifications: the file name, with its parent
        directory when another listed lock has the same name ("build/x.lock")."""
        name = os.path.basename(path)
        if self._dup_names is None:
            seen: dict[str, int] = {}
            for s in self._model.statuses():
                b = os.path.basename(s.path)
                seen[b] = seen.get(b, 0) + 1
            self._dup_names = {b for b, k in seen.items() if k > 1}
        if name in self._dup_names:
            parent = os.path.basename(os.path.dirname(path))
            return f"{parent}/{name}" if parent else name
        return name
