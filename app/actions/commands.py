"""The user-facing operations the window and the tray both offer: acquire, release, reclaim,
force release and its undo, copy path, open folder, settings, audit log (docs/gui.md "Window",
"Dialogs").

Dialogs open with ``open()`` (non-blocking) and act on ``accepted``; lock operations run in
worker threads through :class:`app.bridges.lock_actions.LockActions` (the GUI thread never waits on
a
network directory); their errors become message boxes (:meth:`Commands.show_error`), never
tracebacks.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import QApplication, QDialog, QMessageBox, QWidget

from app.actions.end_holder import EndHolderFlow
from app.actions.settings_apply import (
    file_menus_installed,
    rewatch,
    set_autostart,
    set_file_menus,
)
from app.bridges.audit_sources import remember_watched_logs, viewer_logs
from app.bridges.config_store import ConfigStore
from app.bridges.lock_actions import ActionError, LockActions, policy_for
from app.bridges.remote_poller import RemotePoller
from app.bridges.watch_bridge import WatchBridge
from app.startup import autostart
from app.style.theme import apply_theme
from app.table.lockinfo import is_remote, status_now
from app.table.model import LockTableModel
from core.config import Config
from core.record import LockStatus, State
from core.text import printable, printable_lines
from core.verdicts.inspect import inspect

if TYPE_CHECKING:  # the dialogs are imported when one first opens (docs/performance.md "Idle tray")
    from app.dialogs import AcquireDialog, AcquireRequest, AuditDialog, SettingsDialog
    from app.dialogs.who import WhoDialog
    from core.engine.trash import Kept


_REFUSAL_TITLES = {"kernel_lock": "Kernel lock", "ledger_claim": "Read-only lock",
                   "not_a_lock": "Not a lock file", "unreadable": "Not a lock file",
                   "not_writable": "Not replaced", "unsaved": "Unsaved changes",
                   "held": "Held"}
"""Message box titles of the gate's refusals, by :class:`core.codes.ReadOnlyKind` or
:class:`core.engine.gate.Refusal` value."""


def unexpected(exc: BaseException) -> str:
    """The words of an exception no operation expected, for a dialog: its message only, never
    its class name ("TagTooLong: ..."); the class and traceback go to stderr, for a bug
    report."""
    import traceback

    traceback.print_exception(exc, file=sys.stderr)
    return printable_lines(str(exc)) or "Something unexpected went wrong; see the terminal."


class Commands(QObject):
    """What the user can do to locks and settings, shared by the window and the tray.

    Args:
        qapp: the application (themes are applied to it).
        model: the lock table (statuses quoted by confirmations; audit sources).
        inventory: watching (re-scans, new watched directories).
        actions: the engine operations and the locks this app holds.
        store: the configuration (read, saved when Settings change it).
        dialog_parent: the window dialogs and message boxes open over, or a callable that
            returns it, called each time one opens (the app builds its window on first use).
        remember_logs: keep the watched directories' audit logs in this user's list of known
            logs (:meth:`remember_logs`; False in demo mode).

    Signals:
        dialogOpened(QDialog): a dialog or message box was opened.
        errorShown(str, str): title and text of an error just shown to the user (a message
            box, or the Acquire dialog's error line).
        settingsApplied(): new settings are in effect (the window re-reads the status bar).
        undoChanged(str): what Undo would do now, in words ("" when there is nothing to undo):
            the last force release that kept its file (:attr:`last_kept`).
    """

    dialogOpened = Signal(object)
    errorShown = Signal(str, str)
    settingsApplied = Signal()
    undoChanged = Signal(str)
    _failed = Signal(str, str)  # from worker threads, delivered queued
    _opDone = Signal()
    _acquireDone = Signal(object, object, object)
    _undone = Signal(object, bool)

    def __init__(self, *, qapp: QApplication, model: LockTableModel, inventory: WatchBridge,
                 actions: LockActions, store: ConfigStore,
                 dialog_parent: QWidget | Callable[[], QWidget],
                 remote: RemotePoller | None = None, parent: QObject | None = None,
                 remember_logs: bool = True) -> None:
        super().__init__(parent)
        self._remember = remember_logs
        self._qapp = qapp
        self._remote = remote
        self._model = model
        self._inventory = inventory
        self._actions = actions
        self._store = store
        self._parent_of = dialog_parent
        self._dialogs: list[QDialog] = []
        self._busy = 0
        self.last_acquire_dir: str | None = None
        """Directory of the last successful acquire (the Acquire dialog's default)."""
        self.last_kept: Kept | None = None
        """Where the last force release put the file it removed (Undo puts it back)."""
        self._failed.connect(self.show_error)
        self._opDone.connect(self._op_done)
        self._acquireDone.connect(self._acquire_done)
        self._undone.connect(self._undo_done)
        store.saveFailed.connect(self.show_error)
        actions.kept.connect(self._offer_undo)
        self._end_holder = EndHolderFlow(self, actions, parent=self)
        self.remember_logs()

    # -- bookkeeping --------------------------------------------------------------------------

    @property
    def _parent(self) -> QWidget:
        """The window dialogs open over (built now when the app builds it on first use)."""
        p = self._parent_of
        return p if isinstance(p, QWidget) else p()

    def dialog_parent(self) -> QWidget:
        """The window dialogs open over (:attr:`_parent`)."""
        return self._parent

    @property
    def busy(self) -> int:
        """Number of lock operations started from the GUI that are still running."""
        return self._busy

    @property
    def dialogs(self) -> list[QDialog]:
        """The dialogs and message boxes open now, oldest first (a copy)."""
        return list(self._dialogs)

    def show_dialog(self, dlg: QDialog) -> None:
        """Open ``dlg`` non-blocking (``open()``), keep it in :attr:`dialogs` until it is
        finished (then delete it) and emit :attr:`dialogOpened`."""
        self._dialogs.append(dlg)

        def done(_r: int) -> None:
            if dlg in self._dialogs:
                self._dialogs.remove(dlg)
            dlg.deleteLater()

        dlg.finished.connect(done)
        dlg.open()
        self.dialogOpened.emit(dlg)

    def close_dialogs(self) -> None:
        """Delete every open dialog (the app is being disposed)."""
        for dlg in self._dialogs:
            dlg.deleteLater()
        self._dialogs.clear()

    def show_error(self, title: str, text: str) -> QMessageBox:
        """Show an error message (non-blocking) and emit :attr:`errorShown`."""
        box = QMessageBox(QMessageBox.Icon.Warning, title, text, parent=self._parent)
        self.show_dialog(box)
        self.errorShown.emit(title, text)
        return box

    def run_in_worker(self, fn: Callable[[], object]) -> None:
        """Run a lock operation in a worker thread; its :class:`ActionError` (or any other
        exception) becomes a message box. :attr:`busy` counts it until it ends."""
        self._busy += 1

        def work() -> None:
            try:
                fn()
            except ActionError as exc:
                self._failed.emit(exc.title, str(exc))
            except Exception as exc:  # never a traceback in the user's face
                self._failed.emit("Unexpected error", unexpected(exc))
            finally:
                self._opDone.emit()

        threading.Thread(target=work, name="lockwarden-action", daemon=True).start()

    def _op_done(self) -> None:
        self._busy -= 1

    def status_for(self, path: str) -> LockStatus | None:
        """The table's status of ``path`` (else a fresh inspection; ``None`` when free or
        unreadable by the engine), with its reasons worded for now (confirmations quote
        them)."""
        st = self._model.status_of(path)
        if st is not None:
            return status_now(st)
        try:
            st = inspect(path)
        except Exception:
            return None
        return st if st.present else None

    # -- acquire and release ------------------------------------------------------------------

    def open_acquire(self, directory: str | None = None) -> AcquireDialog:
        """Open the Acquire dialog; its directory is ``directory``, else the one last used
        for a successful acquire, else the first watched one. The lock is acquired in a
        worker thread, held by this process; on failure the dialog stays open with the error
        and the typed fields."""
        from app.dialogs import AcquireDialog
        dirs = self._store.watched_dirs()
        start = directory or self.last_acquire_dir or (dirs[0] if dirs else "")
        dlg = AcquireDialog(dirs, self._parent, directory=start)

        def submit(req: AcquireRequest) -> None:
            self._busy += 1

            def work() -> None:
                err: str | None = None
                try:
                    self._actions.acquire(req.path, format=req.format, tag=req.tag,
                                          ttl=req.ttl,
                                          policy=policy_for(self._store.config, req.path))
                except ActionError as exc:
                    err = str(exc)
                except Exception as exc:  # never a traceback in the user's face
                    err = unexpected(exc)
                try:
                    self._acquireDone.emit(dlg, req, err)
                except RuntimeError:  # the app is gone
                    pass

            threading.Thread(target=work, name="lockwarden-acquire", daemon=True).start()

        dlg.submit = submit
        self.show_dialog(dlg)
        return dlg

    def _acquire_done(self, dlg: AcquireDialog, req: AcquireRequest, err: str | None) -> None:
        self._busy -= 1
        if err is None:
            self.last_acquire_dir = os.path.dirname(req.path)
        if dlg not in self._dialogs:  # closed meanwhile
            if err is not None:
                self.show_error("Could not acquire the lock", err)
            return
        if err is None:
            dlg.succeeded()
        else:
            dlg.failed(err)
            self.errorShown.emit("Could not acquire the lock", err)

    def release(self, path: str) -> None:
        """Release a lock this app holds, in a worker thread (errors shown)."""
        self.run_in_worker(lambda: self._actions.release(path))

    # -- reclaim and force release ------------------------------------------------------------

    def _breakable(self, path: str, nothing_title: str, *,
                   reclaim: bool) -> LockStatus | None:
        """The status of a lock this app may break, or ``None`` after telling the user why
        not: free now, held by this app (Release it instead), or what the engine's gate
        refuses to replace (``reclaim``) or remove -- a claim in an af ledger, a kernel lock,
        what is not a lock file... (:func:`core.engine.gate.ask`; unsaved work is asked about
        by the Force release dialog, which can discard it by name)."""
        st = self.status_for(path)
        if st is None:
            self.show_error(nothing_title, f"{path} is free now.")
            return None
        if self._actions.holds(path):
            self.show_error("Held by this Lockwarden", f"{printable(path)} is held by this "
                            "Lockwarden: use Release to give it back.")
            return None
        if is_remote(path):
            return st
        from core.engine import gate

        intent = gate.Intent.FORCE_RECLAIM if reclaim else gate.Intent.FORCE_RELEASE
        answer = gate.ask(path, st, intent, discard_unsaved=not reclaim, kernel=False)
        if answer.act is gate.Act.REFUSE:
            why = str(answer.kind or answer.refusal or "")
            self.show_error(_REFUSAL_TITLES.get(why, "Not changed"),
                            f"{printable(path)}: {answer.words()}.")
            return None
        return st

    def open_reclaim(self, path: str) -> QDialog | None:
        """Reclaim: a light confirmation for a stale lock, a forced-reclaim confirmation with
        a reason otherwise -- also for an expired lock, whose holder is alive (breaking a live
        holder's lock is a forced decision, docs/gui.md "Window"). Returns the dialog
        (``None`` if the lock cannot be reclaimed; the user was told why)."""
        from app.dialogs import force_dialog, reclaim_dialog
        st = self._breakable(path, "Nothing to reclaim", reclaim=True)
        if st is None:
            return None
        light = st.state is State.STALE
        dlg = reclaim_dialog(st, self._parent) if light else force_dialog(
            st, reclaim=True, parent=self._parent)

        def go() -> None:
            reason = dlg.reason.text().strip() or None
            self.run_in_worker(lambda: self._actions.reclaim(path, force=not light, reason=reason,
                                                    status=st))

        dlg.accepted.connect(go)
        self.show_dialog(dlg)
        return dlg

    def open_force_release(self, path: str) -> QDialog | None:
        """Force release with a confirmation naming the holder and asking for a reason; for a
        file that stands for unsaved work (a Vim swap with unsaved changes), a confirmation
        that names the changes, offers the recovery command and needs them discarded by name
        (docs/gui.md, "Window"). Returns the dialog (``None`` if the lock cannot be released;
        the user was told why)."""
        from app.dialogs import force_dialog, unsaved_dialog
        from core.verdicts.unsaved import unsaved_changes
        st = self._breakable(path, "Nothing to release", reclaim=False)
        if st is None:
            return None
        if st.empty_free:
            return self._open_remove_empty(st)
        why = None if is_remote(path) else unsaved_changes(st)
        dlg = (force_dialog(st, reclaim=False, parent=self._parent) if why is None
               else unsaved_dialog(st, why, parent=self._parent))

        def go() -> None:
            reason = dlg.reason.text().strip()
            if is_remote(path):
                token = st.record.token if st.record is not None else None
                self.run_in_worker(lambda: self._release_remote(path, token or "", reason))
            else:
                self.run_in_worker(lambda: self._actions.force_release(
                    path, reason=reason, discard_unsaved=why is not None))

        dlg.accepted.connect(go)
        self.show_dialog(dlg)
        return dlg

    # -- undo ---------------------------------------------------------------------------------

    def _offer_undo(self, kept: Kept) -> None:
        """A force release kept its file: Undo now puts that one back."""
        self.last_kept = kept
        self.undoChanged.emit(self.undo_text())

    def undo_text(self) -> str:
        """What Undo would do, in words ("" when there is nothing to undo)."""
        k = self.last_kept
        if k is None:
            return ""
        return (f"Force-released {printable(os.path.basename(k.original))}: the file is in "
                f"{printable(k.where())}")

    def undo_force_release(self) -> bool:
        """Put the file of the last force release back where it was, in a worker thread
        (:meth:`app.bridges.lock_actions.LockActions.restore`: never over a lock taken meanwhile;
        errors shown, and Undo offered again while the kept file is still there). False when
        there is nothing to undo."""
        kept = self.last_kept
        if kept is None:
            return False
        self.last_kept = None
        self.undoChanged.emit("")

        def work() -> None:
            try:
                self._actions.restore(kept, reason="undo of a force release")
            except BaseException:
                self._undone.emit(kept, False)
                raise
            self._undone.emit(kept, True)

        self.run_in_worker(work)
        return True

    def _undo_done(self, kept: Kept, done: bool) -> None:
        if not done and self.last_kept is None and os.path.isfile(kept.path):
            self.last_kept = kept  # e.g. the path was taken: the user may try again later
        self.undoChanged.emit(self.undo_text())

    def _open_remove_empty(self, st: LockStatus) -> QDialog:
        """Removing an empty lock file that nobody holds or has open (``free``): a plain
        confirmation; the engine removes it holding its flock (core/engine/unheld.py), and
        refuses if a process locked or opened it meanwhile (docs/gui.md, "Empty files")."""
        from app.dialogs.confirm import ConfirmDialog

        path = st.path
        dlg = ConfirmDialog(
            "Remove empty lock file…",
            f"Remove {printable(os.path.basename(path))}?\n\nPath: {printable(path)}\n\n"
            "It is an empty lock file that no process holds or has open: filelock, "
            "portalocker, fasteners and flock(1) leave such a file when they release, and "
            "use it again next time. Removing it is safe only if no program uses this path "
            "any more; Lockwarden holds the file's lock while it removes it, and leaves it if "
            "a process locks or opens it meanwhile.", "Remove", parent=self._parent)
        dlg.accepted.connect(lambda: self.run_in_worker(
            lambda: self._actions.force_release(path, reason="empty lock file nobody held")))
        self.show_dialog(dlg)
        return dlg

    def open_end_holder(self, path: str) -> QDialog | None:
        """Ending the process that holds a kernel lock on ``path`` (docs/gui.md, "End holder
        process"; :meth:`app.actions.end_holder.EndHolderFlow.open`). ``None`` when no running
        process can be proven to hold it (the user is told)."""
        return self._end_holder.open(path)

    def _release_remote(self, path: str, token: str, reason: str) -> None:
        """Force-release a lock on a server, checked against the token shown (worker thread).

        Raises:
            ActionError: the server refused, the lock changed hands, or it cannot be reached.
        """
        from core.errors import LockError

        if self._remote is None:
            raise ActionError("Could not force-release the lock", "No server is configured.")
        try:
            self._remote.release(path, token, force=True, reason=reason or None)
        except LockError as exc:
            raise ActionError("Could not force-release the lock", printable(str(exc))) from exc

    # -- paths --------------------------------------------------------------------------------

    def copy_path(self, path: str) -> None:
        """Put ``path`` on the clipboard."""
        QGuiApplication.clipboard().setText(path)

    def open_folder(self, path: str) -> None:
        """Open the lock's directory in the file manager (an error is shown if none can; a lock
        on a server has no folder)."""
        if is_remote(path):
            self.show_error("No folder", f"{printable(path)} is a lock on a server.")
            return
        d = path if os.path.isdir(path) else os.path.dirname(path)
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(d)):
            self.show_error("Cannot open folder", f"No file manager could open {d}.")

    # -- settings -----------------------------------------------------------------------------

    def open_settings(self) -> SettingsDialog:
        """Open Settings; on OK the dialog saves (it stays open when it cannot:
        :class:`app.dialogs.settings.SettingsDialog`), then what the file holds is applied
        without restart."""
        from app.dialogs import SettingsDialog
        try:
            enabled = autostart.is_enabled()
        except OSError:
            enabled = False
        previous = self._store.config
        dlg = SettingsDialog(previous, autostart=enabled, file_menus=file_menus_installed(),
                             store=self._store, parent=self._parent)

        def go() -> None:
            self.apply_settings(self._store.config, autostart_on=dlg.autostart.isChecked(),
                                previous=previous)
            why = set_file_menus(dlg.file_menus.isChecked())
            if why is not None:
                self.show_error("File manager's menu", why)

        dlg.accepted.connect(go)
        self.show_dialog(dlg)
        return dlg

    def apply_settings(self, config: Config, *, autostart_on: bool | None = None,
                       previous: Config | None = None) -> None:
        """Apply ``config`` now: watched directories (``Watcher.set_specs``, in a worker
        thread), theme, notifications; set start at login if given; emit
        :attr:`settingsApplied`. Without ``previous``, ``config`` is first saved
        (:meth:`app.bridges.config_store.ConfigStore.set`: only its changes are edited into the
        file)
        unless it equals the configuration in effect (warnings aside: then nothing is written);
        with ``previous`` (what was in effect before Settings saved), it is already saved and
        in effect."""
        if previous is None:
            old = self._store.config
            if replace(config, warnings=[]) == replace(old, warnings=[]):
                # nothing changed (OK without edits): do not rewrite the user's file
                self._apply_autostart(autostart_on)
                return
            self._store.set(config)
            config = self._store.config
        else:
            old = previous
        if config.all_watches() != old.all_watches():
            rewatch(config, model=self._model, inventory=self._inventory,
                    held=self._actions.kept_paths())
            self.remember_logs()
        if config.ui.theme != old.ui.theme:
            apply_theme(self._qapp, config.ui.theme)
        self._apply_autostart(autostart_on)
        self.settingsApplied.emit()

    def _apply_autostart(self, autostart_on: bool | None) -> None:
        why = set_autostart(autostart_on)
        if why is not None:
            self.show_error("Start at login", why)

    # -- audit log ----------------------------------------------------------------------------

    def remember_logs(self) -> None:
        """Add the audit logs of the watched directories to this user's list of known logs
        (:func:`core.audit.remember`), so a directory removed from Settings keeps its history
        in the viewer. Not in demo mode (its directory is temporary); an unwritable list is
        skipped (the viewer still reads the watched directories)."""
        if self._remember:
            remember_watched_logs(self._store.watched_dirs())

    def audit_sources(self) -> list[str]:
        """Audit logs the viewer reads: this user's own log first (entries whose directory
        could not take them, and every entry about a lock in a git repository), then the logs
        of every directory ever watched (:func:`core.audit.known_logs`), of the watched
        directories and of every directory holding a listed lock (docs/audit.md, "The viewer's
        logs")."""
        return viewer_logs(self._store.watched_dirs()
                           + [os.path.dirname(s.path) for s in self._model.statuses()])

    def open_audit(self) -> AuditDialog:
        """Open the audit log viewer."""
        from app.dialogs import AuditDialog
        dlg = AuditDialog(self.audit_sources(), self._parent)
        self.show_dialog(dlg)
        return dlg

    def open_who(self, path: str | None = None) -> WhoDialog:
        """Open "What's using this?" (non-modal; on ``path`` when given)."""
        from app.dialogs.who import WhoDialog
        dlg = WhoDialog(path, self._parent)
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.show()
        return dlg

    def open_history(self, path: str) -> AuditDialog:
        """Open the audit log viewer on one lock's entries (its history): the log beside it,
        the watched directories' and the per-user fallback log, filtered by its path."""
        from app.dialogs import AuditDialog
        sources = [os.path.join(os.path.dirname(path), ".lock_audit.log"), *self.audit_sources()]
        dlg = AuditDialog(list(dict.fromkeys(sources)), self._parent, lock=path)
        self.show_dialog(dlg)
        return dlg
