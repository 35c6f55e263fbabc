"""The running app: configuration, inventory (watcher bridge), model and proxy, lock actions,
main window and tray, and the user-facing operations both the window and the tray call.

Dialogs open with ``open()`` (non-blocking) and act on ``accepted``; errors from the engine
become message boxes (:meth:`LockwardenApp.show_error`), never tracebacks.
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QSettings, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import QApplication, QDialog, QMessageBox, QSystemTrayIcon

from app import autostart
from app.actions import ActionError, LockActions
from app.dialogs import AcquireDialog, AuditDialog, SettingsDialog, force_dialog, reclaim_dialog
from app.inventory import Inventory
from app.model import LockFilterProxy, LockTableModel, not_a_lock_file, status_now
from app.qtcompat import GarbageCollector, emit
from app.theme import apply_theme
from app.tray import TrayController
from app.window import MainWindow
from core.record import LockStatus, State


def state_settings_path(config_path: str) -> str:
    """Where window geometry, column widths and sort order are kept: ``gui-state.ini`` beside
    the configuration file (so a test's temporary config keeps its state private)."""
    return str(Path(config_path).parent / "gui-state.ini")


class LockwardenApp(QObject):
    """The app object. ``use_tray=None`` decides with
    ``QSystemTrayIcon.isSystemTrayAvailable()``; without a tray the window is the app and
    closing it quits.

    Signals:
        dialogOpened(QDialog): a dialog was opened (tests and screenshots drive it).
        quitRequested(): the quit confirmation was answered and the app is quitting.
        errorRaised(str, str): title and text of a failed operation (from worker threads).
    """

    dialogOpened = Signal(object)
    quitRequested = Signal()
    errorRaised = Signal(str, str)
    _opDone = Signal()
    _acquireDone = Signal(object, object, object)

    def __init__(
        self,
        qapp: QApplication,
        *,
        config_path: str | None = None,
        demo: Any = None,
        use_tray: bool | None = None,
    ) -> None:
        super().__init__()
        from core import audit, config

        self._prev_via = audit.get_via()
        audit.set_via("gui")
        self.qapp = qapp
        self.gc = GarbageCollector()  # unparented: outlives dispose() until it has collected
        self.config_path = config_path or config.default_config_path()
        self.config: Any = config.load(self.config_path)
        self.demo = demo
        if demo is not None:
            self.config = replace(self.config, watches=list(demo.specs()), warnings=[])
        self.settings = QSettings(state_settings_path(self.config_path),
                                  QSettings.Format.IniFormat)
        self.theme = apply_theme(qapp, self.config.ui.theme)
        self.quitting = False
        self.last_error: tuple[str, str] | None = None
        self.dialogs: list[QDialog] = []
        self.busy = 0
        self.lost_locks: list[str] = []
        self.lost_now: set[str] = set()
        """Paths found lost in the batch of transitions being handled (the tray does not
        announce them as released)."""
        self.errorRaised.connect(self.show_error)
        self._opDone.connect(self._op_done)
        self._acquireDone.connect(self._acquire_done)
        self.last_acquire_dir: str | None = None

        self.model = LockTableModel(self)
        self.proxy = LockFilterProxy(self)
        self.proxy.setSourceModel(self.model)
        self.inventory = Inventory(self)
        self.inventory.updated.connect(self.model.apply)
        self.actions = LockActions(self)
        self.actions.touched.connect(self._touched)
        self.model.transitions.connect(self._check_lost)

        if use_tray is None:
            use_tray = QSystemTrayIcon.isSystemTrayAvailable()
        self.tray: TrayController | None = TrayController(self) if use_tray else None
        self.window = MainWindow(self, self.settings)
        qapp.setQuitOnLastWindowClosed(self.tray is None)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, *, show_window: bool = True) -> None:
        """Start watching; show the tray icon, and the window unless ``show_window`` is False
        and a tray exists (without a tray the window always shows)."""
        self.inventory.rescan_interval = float(self.config.ui.rescan_interval)
        self.inventory.start(list(self.config.watches))
        if self.tray is not None:
            self.tray.show()
        if show_window or self.tray is None:
            self.show_window()
        if self.config.warnings:
            self.window.statusBar().showMessage(
                "Configuration: " + "; ".join(self.config.warnings), 15000)

    def show_window(self) -> None:
        """Show, raise and activate the main window."""
        w = self.window
        if w.isMinimized():
            w.setWindowState(w.windowState() & ~Qt.WindowState.WindowMinimized)
        w.show()
        w.raise_()
        w.activateWindow()

    def request_quit(self) -> QMessageBox | None:
        """Quit; with locks held by this app, first ask whether to release them (returns the
        question box, answered asynchronously)."""
        if self.quitting:
            return None
        held = [p for p in self.actions.held if self.actions.holds(p)]
        if not held:
            self.finish_quit(release=False)
            return None
        names = "\n".join(f"• {p}" for p in held[:10])
        box = QMessageBox(QMessageBox.Icon.Question, "Quit Lockwarden",
                          f"Lockwarden holds {len(held)} lock(s):\n{names}\n\n"
                          "Release them before quitting? Locks left behind become stale "
                          "once Lockwarden has exited.", parent=self.window)
        rel = box.addButton("Release and quit", QMessageBox.ButtonRole.AcceptRole)
        keep = box.addButton("Quit without releasing", QMessageBox.ButtonRole.DestructiveRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(rel)

        def answered(_r: int) -> None:
            b = box.clickedButton()
            if b is rel:
                self.finish_quit(release=True)
            elif b is keep:
                self.finish_quit(release=False)

        box.finished.connect(answered)
        self._open(box)
        return box

    def finish_quit(self, *, release: bool) -> None:
        """Release held locks if asked, stop watching and helpers, quit the event loop."""
        if self.quitting:
            return
        self.quitting = True
        if release:
            errors = self.actions.release_all()
            for e in errors:
                print(f"lockwarden: {e}", flush=True)
        self.window.save_state()
        self.inventory.close()
        if self.tray is not None:
            self.tray.hide()
        if self.demo is not None:
            self.demo.stop()
        self.window.close()
        emit(self.quitRequested)
        self.qapp.quit()

    def dispose(self) -> None:
        """Delete the window, the tray menu and this object now (after :meth:`finish_quit`;
        used by tests and the screenshot script, which create several apps in one process)."""
        from PySide6.QtCore import QCoreApplication, QEvent

        collector = self.gc
        self.model.stop_ticking()
        for dlg in list(self.dialogs):
            dlg.deleteLater()
        self.dialogs.clear()
        if self.tray is not None:
            self.tray.menu.deleteLater()
            self.tray.icon.hide()
        self.window.deleteLater()
        self.deleteLater()
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        collector.stop()
        from core import audit

        audit.set_via(self._prev_via)  # process-wide: give it back (tests share a process)

    # -- helpers ------------------------------------------------------------------------------

    def _open(self, dlg: QDialog) -> None:
        self.dialogs.append(dlg)

        def done(_r: int) -> None:
            if dlg in self.dialogs:
                self.dialogs.remove(dlg)
            dlg.deleteLater()

        dlg.finished.connect(done)
        dlg.open()
        emit(self.dialogOpened, dlg)

    def show_error(self, title: str, text: str) -> QMessageBox:
        """Show an error message (non-blocking) and remember it in :attr:`last_error`."""
        self.last_error = (title, text)
        box = QMessageBox(QMessageBox.Icon.Warning, title, text, parent=self.window)
        self._open(box)
        return box

    def _touched(self, path: str) -> None:
        """Re-inspect a path an operation changed, in a worker thread; the result goes through
        the inventory like the watcher's (the watcher's own event then changes nothing)."""

        def work() -> None:
            try:
                self.inventory.refresh_path(path)
            except Exception as exc:  # the watcher heals it; never crash here
                print(f"lockwarden: cannot re-inspect {path}: {exc}", flush=True)

        threading.Thread(target=work, name="lockwarden-inspect", daemon=True).start()

    def _check_lost(self, trans: list[tuple[LockStatus | None, LockStatus | None]]) -> None:
        """Tell the user when a lock this app holds was removed or replaced by someone else."""
        self.lost_now = set()
        for old, new in trans:
            if old is None:
                continue
            path = old.path
            if self.actions.lost(path, new):
                title = f"Lost {os.path.basename(path)}"
                body = ("Someone removed this lock while Lockwarden held it." if new is None
                        else "Someone else replaced this lock while Lockwarden held it.")
                if self.tray is not None:
                    self.tray.notify(title, f"{body}\n{path}", warning=True)
                self.window.statusBar().showMessage(f"{title}: {body}", 15000)
                self.lost_locks.append(path)
                self.lost_now.add(path)

    def _status(self, path: str) -> LockStatus | None:
        """The table's status of ``path`` (else a fresh inspection), with its reasons worded
        for now (confirmations quote them)."""
        st = self.model.status_of(path)
        if st is None:
            import core

            try:
                st = core.inspect(path)
            except Exception:
                return None
            if st.state is State.FREE:
                return None
            return st
        return status_now(st)

    def _run(self, fn: Any) -> None:
        """Run a lock operation in a worker thread (the GUI thread never waits on a network
        directory); its :class:`ActionError` becomes a message box. :attr:`busy` counts the
        operations still running."""
        self.busy += 1

        def work() -> None:
            try:
                fn()
            except ActionError as exc:
                emit(self.errorRaised, exc.title, str(exc))
            except Exception as exc:  # never a traceback in the user's face
                emit(self.errorRaised, "Unexpected error", f"{type(exc).__name__}: {exc}")
            finally:
                emit(self._opDone)

        threading.Thread(target=work, name="lockwarden-action", daemon=True).start()

    def _op_done(self) -> None:
        self.busy -= 1

    # -- operations (window and tray) ---------------------------------------------------------

    def watched_dirs(self) -> list[str]:
        """Paths of the watched directories, in configuration order."""
        return [w.path for w in self.config.watches]

    def open_acquire(self, directory: str | None = None) -> AcquireDialog:
        """Open the Acquire dialog; its directory is ``directory``, else the one last used
        for a successful acquire, else the first watched one. The lock is acquired in a
        worker thread, held by this process; on failure the dialog stays open with the error
        and the typed fields."""
        dirs = self.watched_dirs()
        start = directory or self.last_acquire_dir or (dirs[0] if dirs else "")
        dlg = AcquireDialog(dirs, self.window, directory=start)

        def submit(v: dict[str, Any]) -> None:
            self.busy += 1

            def work() -> None:
                err: str | None = None
                try:
                    self.actions.acquire(v["path"], format=v["format"], tag=v["tag"],
                                         ttl=v["ttl"])
                except ActionError as exc:
                    err = str(exc)
                except Exception as exc:  # never a traceback in the user's face
                    err = f"{type(exc).__name__}: {exc}"
                try:
                    emit(self._acquireDone, dlg, v, err)
                except RuntimeError:  # the app is gone
                    pass

            threading.Thread(target=work, name="lockwarden-acquire", daemon=True).start()

        dlg.submit = submit
        self._open(dlg)
        return dlg

    def _acquire_done(self, dlg: AcquireDialog, v: dict[str, Any], err: str | None) -> None:
        self.busy -= 1
        if err is None:
            self.last_acquire_dir = os.path.dirname(v["path"])
        if dlg not in self.dialogs:  # closed meanwhile
            if err is not None:
                self.show_error("Could not acquire the lock", err)
            return
        if err is None:
            dlg.succeeded()
        else:
            self.last_error = ("Could not acquire the lock", err)
            dlg.failed(err)

    def release(self, path: str) -> None:
        """Release a lock this app holds (errors shown)."""
        self._run(lambda: self.actions.release(path))

    def _breakable(self, path: str, nothing_title: str) -> LockStatus | None:
        """The status of a lock this app may break, or ``None`` after telling the user why
        not (free now, a read-only ledger claim, or not a lock file at all)."""
        st = self._status(path)
        if st is None:
            self.show_error(nothing_title, f"{path} is free now.")
            return None
        if st.read_only:
            self.show_error("Read-only lock", f"{path} is managed by its ledger; Lockwarden "
                                              "does not change it.")
            return None
        if not_a_lock_file(st):
            self.show_error("Not a lock file", f"{path} {st.error}; Lockwarden does not "
                                               "touch it.")
            return None
        return st

    def open_reclaim(self, path: str) -> QDialog | None:
        """Reclaim: a light confirmation for a stale lock, a forced-reclaim confirmation with
        a reason otherwise -- also for an expired lock, whose holder is alive (issue 5
        "Dialogs": breaking a live holder's lock is a forced decision). Returns the dialog
        (``None`` if the lock is gone)."""
        st = self._breakable(path, "Nothing to reclaim")
        if st is None:
            return None
        light = st.state is State.STALE
        dlg = reclaim_dialog(st, self.window) if light else force_dialog(
            st, reclaim=True, parent=self.window)

        def go() -> None:
            reason = dlg.reason.text().strip() or None
            self._run(lambda: self.actions.reclaim(path, force=not light, reason=reason,
                                                   status=st))

        dlg.accepted.connect(go)
        self._open(dlg)
        return dlg

    def open_force_release(self, path: str) -> QDialog | None:
        """Force release with a confirmation naming the holder and asking for a reason."""
        st = self._breakable(path, "Nothing to release")
        if st is None:
            return None
        dlg = force_dialog(st, reclaim=False, parent=self.window)

        def go() -> None:
            reason = dlg.reason.text().strip()
            self._run(lambda: self.actions.force_release(path, reason=reason))

        dlg.accepted.connect(go)
        self._open(dlg)
        return dlg

    def copy_path(self, path: str) -> None:
        """Put ``path`` on the clipboard."""
        QGuiApplication.clipboard().setText(path)

    def open_folder(self, path: str) -> None:
        """Open the lock's directory in the file manager."""
        d = path if os.path.isdir(path) else os.path.dirname(path)
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(d)):
            self.show_error("Cannot open folder", f"No file manager could open {d}.")

    def rescan(self) -> None:
        """Rescan every watched directory (in the watcher's thread)."""
        self.inventory.rescan()
        self.window.statusBar().showMessage("Rescanning…", 2000)

    def open_settings(self) -> SettingsDialog:
        """Open Settings; on accept save and apply them without restart."""
        try:
            enabled = autostart.is_enabled()
        except OSError:
            enabled = False
        dlg = SettingsDialog(self.config, autostart=enabled, parent=self.window)

        def go() -> None:
            self.apply_settings(dlg.result_config(), autostart_on=dlg.autostart.isChecked())

        dlg.accepted.connect(go)
        self._open(dlg)
        return dlg

    def apply_settings(self, config: Any, *, autostart_on: bool | None = None) -> None:
        """Save ``config`` (``core.config.save``) and apply it now: watched directories
        (``Watcher.set_specs``), theme, notifications; set start at login if given. A
        ``config`` equal to the current one (warnings aside) is neither saved nor applied."""
        from core import config as cfgmod

        old = self.config
        if replace(config, warnings=[]) == replace(old, warnings=[]):
            # nothing changed (OK without edits): do not rewrite the user's file
            self._apply_autostart(autostart_on)
            return
        self.config = config
        if self.demo is None:
            try:
                cfgmod.save(config, self.config_path)
            except OSError as exc:
                self.show_error("Settings not saved",
                                f"Could not write {self.config_path}: {exc.strerror or exc}")
        if list(config.watches) != list(old.watches):
            self.inventory.set_specs(list(config.watches))
            kept = {w.path for w in config.watches}
            gone = [s.path for s in self.model.statuses() if not _under_any(s.path, kept)]
            if gone:
                self.inventory.push([(p, None) for p in gone])
        if config.ui.theme != old.ui.theme:
            self.theme = apply_theme(self.qapp, config.ui.theme)
        self._apply_autostart(autostart_on)
        self.window.update_status()

    def _apply_autostart(self, autostart_on: bool | None) -> None:
        if autostart_on is None:
            return
        try:
            if autostart_on != autostart.is_enabled():
                autostart.set_enabled(autostart_on)
        except OSError as exc:
            self.show_error("Start at login", f"Could not change the login item: {exc}")

    def set_notifications_paused(self, paused: bool) -> None:
        """Pause or resume notifications and remember it in the configuration."""
        notes = self.config.notifications
        if getattr(notes, "paused", None) == paused:
            return
        self.config = replace(self.config, notifications=replace(notes, paused=paused))
        if self.demo is None:
            from core import config as cfgmod

            try:
                cfgmod.save(self.config, self.config_path)
            except OSError as exc:
                self.show_error("Settings not saved",
                                f"Could not write {self.config_path}: {exc.strerror or exc}")

    def audit_sources(self) -> list[str]:
        """Directories whose ``.lock_audit.log`` the viewer reads: the watched ones and every
        directory holding a listed lock, plus the per-user fallback log."""
        from core import audit

        srcs: list[str] = []
        for d in self.watched_dirs() + [os.path.dirname(s.path) for s in self.model.statuses()]:
            p = os.path.join(d, ".lock_audit.log")
            if p not in srcs:
                srcs.append(p)
        try:
            srcs.append(audit.fallback_log_path())
        except Exception:
            pass
        return srcs

    def open_audit(self) -> AuditDialog:
        """Open the audit log viewer."""
        dlg = AuditDialog(self.audit_sources(), self.window)
        self._open(dlg)
        return dlg


def _under_any(path: str, dirs: set[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip(os.sep) + os.sep) for d in dirs)
