"""The tray icon: aggregate state with a stale-count badge, tooltip with counts, menu of held
and stale locks with their actions, notifications (issue 5 "Tray").

Aggregate state, worst first: ``problem`` (a watched directory missing or failing, or an
unreadable lock), ``stale`` (any stale or expired lock), ``held``, ``free``. The badge counts
stale + expired locks whatever the icon.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from app.icons import app_icon, state_icon, tray_icon
from app.model import holder_changed, is_attention, not_a_lock_file
from core.reasons import render_all
from core.record import LockStatus, State

if TYPE_CHECKING:
    from app.application import LockwardenApp

MENU_LIMIT = 15
"""Locks listed in the tray menu before "N more…"."""


def aggregate(counts: dict[State, int], dirs: list[Any]) -> str:
    """Aggregate tray state from per-state counts and ``DirStatus`` list (see module doc)."""
    if any(getattr(d, "mode", "") in ("missing", "error") for d in dirs) or \
            counts.get(State.UNREADABLE, 0):
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


class TrayController(QObject):
    """Owns the :class:`QSystemTrayIcon` and its menu."""

    def __init__(self, ctx: LockwardenApp) -> None:
        super().__init__(ctx)
        self.ctx = ctx
        self.icon = QSystemTrayIcon(app_icon(), self)
        self.menu = QMenu()
        self.menu.aboutToShow.connect(self.rebuild_menu)
        self.icon.setContextMenu(self.menu)
        self.icon.activated.connect(self._activated)
        self.state = ""
        self.badge = -1
        self.paused = False
        self._notified: dict[str, State] = {}
        self.messages: list[tuple[str, str]] = []
        self.message_icons: list[QSystemTrayIcon.MessageIcon] = []
        self._dup_names: set[str] | None = None
        ctx.model.countsChanged.connect(self._forget_names)
        self._refresh = QTimer(self)
        self._refresh.setSingleShot(True)
        self._refresh.setInterval(250)
        self._refresh.timeout.connect(self.refresh)
        ctx.model.countsChanged.connect(self._schedule_refresh)
        ctx.inventory.dirsChanged.connect(lambda _d: self._schedule_refresh())
        ctx.model.transitions.connect(self._transitions)
        self.act_pause = QAction("Pause notifications", self)
        self.act_pause.setCheckable(True)
        self.paused = bool(getattr(ctx.config.notifications, "paused", False))
        self.act_pause.setChecked(self.paused)
        self.act_pause.toggled.connect(self._set_paused)
        self.refresh()
        self.rebuild_menu()

    def _schedule_refresh(self) -> None:
        """Refresh at most every 250 ms while changes keep coming: a running timer is left
        alone, never restarted (restarting it on each change starved the icon under steady
        churn; qutebrowser's ``misc/throttle.py`` pattern)."""
        if not self._refresh.isActive():
            self._refresh.start()

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
        self.ctx.set_notifications_paused(on)

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason in (QSystemTrayIcon.ActivationReason.Trigger,
                      QSystemTrayIcon.ActivationReason.DoubleClick):
            self.ctx.show_window()

    # -- icon and tooltip ---------------------------------------------------------------------

    def refresh(self) -> None:
        """Update icon, badge and tooltip from the model's counts and the directories."""
        counts = self.ctx.model.counts()
        state = aggregate(counts, self.ctx.inventory.dirs)
        badge = counts[State.STALE] + counts[State.EXPIRED]
        if (state, badge) != (self.state, self.badge):
            self.state, self.badge = state, badge
            self.icon.setIcon(tray_icon(state, badge))
        parts = [f"{counts[s]} {s.value}" for s in
                 (State.HELD, State.STALE, State.EXPIRED, State.WRITING, State.UNREADABLE)
                 if counts[s]]
        problems = [d for d in self.ctx.inventory.dirs
                    if getattr(d, "mode", "") in ("missing", "error")]
        lines = ["Lockwarden", ", ".join(parts) if parts else "no locks held"]
        lines += [f"{d.path}: {d.mode}" for d in problems]
        self.icon.setToolTip("\n".join(lines))

    # -- menu ---------------------------------------------------------------------------------

    def menu_locks(self) -> list[LockStatus]:
        """Locks listed in the menu: stale/expired first, then held, newest first within."""
        sts = [s for s in self.ctx.model.statuses()
               if is_attention(s.state) or s.state is State.HELD]
        m = self.ctx.model
        sts.sort(key=lambda s: (0 if is_attention(s.state) else 1, m.age_seconds(s) or 0.0))
        return sts

    def rebuild_menu(self) -> None:
        """Fill the menu: locks with their submenus (at most :data:`MENU_LIMIT`, then
        "N more…"; a name two listed locks share gets its parent directory), then
        "Problems…" if any, "Open Lockwarden", "Acquire lock…", "Audit log…", "Settings…",
        "Pause notifications", "Quit"."""
        menu = self.menu
        self._dup_names = None
        menu.clear()
        c = self.ctx
        locks = self.menu_locks()
        if not locks:
            a = menu.addAction("No held or stale locks")
            a.setEnabled(False)
        for st in locks[:MENU_LIMIT]:
            self._lock_submenu(menu, st)
        if len(locks) > MENU_LIMIT:
            more = menu.addAction(f"{len(locks) - MENU_LIMIT} more…")
            more.triggered.connect(c.show_window)
        problems = self.problems_text()
        if problems:
            menu.addSeparator()
            act = menu.addAction(state_icon("problem"), f"Problems: {problems} — Open…")
            act.setToolTip("Show the problems in the Lockwarden window")
            act.triggered.connect(self.open_problems)
        menu.addSeparator()
        menu.addAction("Open Lockwarden").triggered.connect(c.show_window)
        menu.addAction("Acquire lock…").triggered.connect(lambda: c.open_acquire(None))
        menu.addAction("Audit log…").triggered.connect(self._with_window(c.open_audit))
        menu.addAction("Settings…").triggered.connect(self._with_window(c.open_settings))
        menu.addAction(self.act_pause)
        menu.addSeparator()
        menu.addAction("Quit").triggered.connect(c.request_quit)

    def _with_window(self, fn: Any) -> Any:
        """A slot that shows the window, then calls ``fn`` (dialogs open over the window)."""

        def slot() -> None:
            self.ctx.show_window()
            fn()

        return slot

    def problems_text(self) -> str:
        """What makes the tray red, in a few words ("2 unreadable, 1 directory missing"), or
        "" when nothing does (see :func:`aggregate`)."""
        parts = []
        unreadable = self.ctx.model.counts().get(State.UNREADABLE, 0)
        if unreadable:
            parts.append(f"{unreadable} unreadable")
        for mode, word in (("missing", "missing"), ("error", "failing")):
            k = sum(1 for d in self.ctx.inventory.dirs if getattr(d, "mode", "") == mode)
            if k:
                parts.append(f"{k} {'directory' if k == 1 else 'directories'} {word}")
        return ", ".join(parts)

    def open_problems(self) -> None:
        """Open the window showing the problems: unreadable locks filtered in the table, the
        directories' modes in the status bar."""
        c = self.ctx
        c.show_window()
        if c.model.counts().get(State.UNREADABLE, 0):
            c.window.filter.setText("unreadable")

    def _lock_submenu(self, menu: QMenu, st: LockStatus) -> QMenu:
        c = self.ctx
        rec = st.record
        who = ""
        if rec is not None:
            who = rec.holder or (f"PID {rec.pid}" if rec.pid is not None else "")
        title = f"{self.lock_title(st.path)} — {st.state.value}" + (f" ({who})" if who else "")
        sub = menu.addMenu(state_icon(st.state.value), title)
        sub.setToolTip(st.path)
        path = st.path
        if c.actions.holds(path):
            sub.addAction("Release").triggered.connect(lambda: c.release(path))
        if not st.read_only and not not_a_lock_file(st):
            if is_attention(st.state):
                sub.addAction("Reclaim").triggered.connect(lambda: c.open_reclaim(path))
            sub.addAction("Force release…").triggered.connect(
                lambda: c.open_force_release(path))
        sub.addSeparator()
        sub.addAction("Copy path").triggered.connect(lambda: c.copy_path(path))
        sub.addAction("Open folder").triggered.connect(lambda: c.open_folder(path))
        return sub

    # -- notifications ------------------------------------------------------------------------

    def _transitions(self, trans: list[tuple[LockStatus | None, LockStatus | None]]) -> None:
        """Notifications for a batch of state/holder changes (issue 5 "Tray"): a lock became
        stale or expired (once per lock, not per tick); a lock was acquired (a new lock or a
        new holder, not a stale lock turning held again) or released, if asked. Nothing for
        what the first scan found (it was there before the app started), and no "released"
        for a lock of ours that was lost (the app says "Lost …" instead)."""
        n = self.ctx.config.notifications
        self._dup_names = None  # this batch may have added a lock of the same name
        quiet = not self.ctx.inventory.initial_done
        lost_now = self.ctx.lost_now
        messages: list[tuple[str, str, bool]] = []  # title, body, is a warning
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
                    messages.append((f"{os.path.basename(new.path)} is {new.state.value}",
                                     why or new.path, True))
            elif quiet:
                continue
            elif new is not None and new.state is State.HELD and n.on_acquire and (
                    old is None or old.record is None or holder_changed(old, new)):
                who = holder_summary(new)
                messages.append((f"{self.lock_title(new.path)} acquired", who or new.path,
                                 False))
            elif new is None and old is not None and old.state is State.HELD and \
                    n.on_release and old.path not in lost_now:
                messages.append((f"{self.lock_title(old.path)} released", old.path, False))
        if not messages or self.paused:
            return
        if len(messages) > 3:
            title = f"{len(messages)} lock changes"
            body = "\n".join(t for t, _, _ in messages[:5])
            messages = [(title, body, any(w for _, _, w in messages))]
        for title, body, warn in messages:
            self.notify(title, body, warning=warn)

    def notify(self, title: str, body: str, *, warning: bool = True) -> None:
        """Show a tray notification (recorded in :attr:`messages` and its icon in
        :attr:`message_icons`, for tests): the Warning icon for stale/expired/lost, the
        Information icon (``warning=False``) for acquire/release."""
        icon = (QSystemTrayIcon.MessageIcon.Warning if warning
                else QSystemTrayIcon.MessageIcon.Information)
        self.messages.append((title, body))
        self.message_icons.append(icon)
        if self.icon.isVisible() and QSystemTrayIcon.supportsMessages():
            self.icon.showMessage(title, body, icon, 8000)

    def lock_title(self, path: str) -> str:
        """A lock's name for menus and notifications: the file name, with its parent
        directory when another listed lock has the same name ("build/x.lock")."""
        name = os.path.basename(path)
        if self._dup_names is None:
            seen: dict[str, int] = {}
            for s in self.ctx.model.statuses():
                b = os.path.basename(s.path)
                seen[b] = seen.get(b, 0) + 1
            self._dup_names = {b for b, k in seen.items() if k > 1}
        if name in self._dup_names:
            parent = os.path.basename(os.path.dirname(path))
            return f"{parent}/{name}" if parent else name
        return name
