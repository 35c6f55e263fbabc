"""Entry point of the desktop app: ``lockwarden-gui``, ``lockwarden gui``, ``python -m app``.

Flags: ``--config PATH`` (TOML configuration, default ``core.config.default_config_path()``),
``--demo`` (watch a temporary directory where helper processes show every lock state; cleaned
up on quit), ``--minimized`` (start in the tray without the window). A second launch for the
same user and configuration raises the first instance's window and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Qt and the app are imported only when the GUI really starts
    from PySide6.QtWidgets import QApplication

    from app.application import LockwardenApp

_T0 = time.monotonic()


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser of the GUI."""
    p = argparse.ArgumentParser(prog="lockwarden-gui",
                                description="Lockwarden: watch lock files and who holds them.")
    p.add_argument("--config", metavar="PATH", help="configuration file (TOML)")
    p.add_argument("--demo", action="store_true",
                   help="watch a temporary directory where demo processes take locks")
    p.add_argument("--minimized", action="store_true", help="start in the tray, no window")
    p.add_argument("--demo-helper", nargs=2, metavar=("ROLE", "DIR"), help=argparse.SUPPRESS)
    p.add_argument("--who", metavar="PATH",
                   help="open \"What's using this?\" on a file or folder (the file managers' "
                        "menu entry runs this)")
    return p


def _qapplication() -> QApplication:
    """The process's QApplication (created when there is none), named and with its icon."""
    from PySide6.QtWidgets import QApplication

    from app.style.icons import app_icon

    existing = QApplication.instance()
    qapp = existing if isinstance(existing, QApplication) else QApplication([sys.argv[0]])
    qapp.setApplicationName("Lockwarden")
    qapp.setOrganizationName("Lockwarden")
    qapp.setDesktopFileName("lockwarden")
    qapp.setWindowIcon(app_icon())
    return qapp


class SignalWaker:
    """SIGINT/SIGTERM: release our locks and quit, without a polling timer.

    Python's C-level handler writes the signal number to a socket (``signal.set_wakeup_fd``);
    a ``QSocketNotifier`` on the other end wakes Qt's loop, and entering Python there runs the
    Python handler, which only records the signal (it runs between any two bytecodes of the
    GUI thread, maybe inside a locked section); the notifier's slot then quits. The app thus
    wakes for a signal only, where a 200 ms timer woke it five times a second for nothing
    (docs/performance.md "Idle tray"). Keep a reference; :meth:`stop` restores the previous
    handlers and wakeup fd.
    """

    def __init__(self, lw: LockwardenApp) -> None:
        from PySide6.QtCore import QSocketNotifier

        self._lw = lw
        self._requested: list[int] = []
        self._read, self._write = socket.socketpair()
        self._read.setblocking(False)
        self._write.setblocking(False)
        self._old_fd = signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        self._old = {sig: signal.signal(sig, self._on_signal)
                     for sig in (signal.SIGINT, signal.SIGTERM)}
        self.notifier = QSocketNotifier(self._read.fileno(), QSocketNotifier.Type.Read)
        self.notifier.activated.connect(self._readable)

    def _on_signal(self, sig: int, _frame: FrameType | None) -> None:
        self._requested.append(sig)

    def _readable(self, *_args: object) -> None:
        with contextlib.suppress(OSError):
            self._read.recv(512)
        if self._requested and not self._lw.quitting:
            self._lw.finish_quit(release=True)

    def stop(self) -> None:
        """Restore the previous signal handlers and wakeup fd; close the socket pair."""
        self.notifier.setEnabled(False)
        signal.set_wakeup_fd(self._old_fd)
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._read.close()
        self._write.close()


def _quit_on_signals(lw: LockwardenApp) -> SignalWaker:
    """Quit cleanly on SIGINT/SIGTERM (:class:`SignalWaker`)."""
    return SignalWaker(lw)


def hash_without_openssl() -> bool:
    """Let :mod:`hashlib` use Python's own SHA-256 (``_sha256``...) instead of OpenSSL's, as
    the bundle does (packaging/lockwarden.spec leaves OpenSSL out): mapping ``libcrypto`` cost
    the idle tray 3.3 MB for audit lines of a few hundred bytes (docs/performance.md "Idle
    tray"). Digests are the same. Only before anything imported :mod:`hashlib`; returns
    whether it took effect (False when hashlib was already loaded, e.g. through the CLI)."""
    if "hashlib" in sys.modules:
        return "_hashlib" not in sys.modules or sys.modules["_hashlib"] is None
    sys.modules.setdefault("_hashlib", None)  # type: ignore[arg-type]  # None: "import fails"
    return sys.modules["_hashlib"] is None


def release_startup_memory() -> None:
    """Give back what start-up left behind and nothing will read again: the source text of
    every module imported after PySide6 (PySide6's ``__feature__`` check reads each one with
    ``inspect.getsource``, and ``linecache`` keeps it: ~6.6 MB for the tray's modules), then
    collect and, on glibc, return freed heap pages to the system (``malloc_trim``).
    Tracebacks read the files again when they need them (docs/performance.md "Idle tray")."""
    import gc
    import linecache

    linecache.clearcache()
    gc.collect()
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").malloc_trim(0)


def _release_after_first_scan(lw: LockwardenApp) -> None:
    """Call :func:`release_startup_memory` a second after the loop starts (not before the
    tray icon shows), and again once the first scan is in (a busy /tmp can take many seconds;
    the modules it imports are read by then)."""
    from PySide6.QtCore import QTimer

    QTimer.singleShot(1000, release_startup_memory)
    if lw.inventory.initial_done:
        return

    def once() -> None:
        lw.inventory.ready.disconnect(once)
        QTimer.singleShot(0, release_startup_memory)

    lw.inventory.ready.connect(once)


def _report_startup(lw: LockwardenApp, report: str) -> None:
    """Once the tray icon is visible and placed, write "<Unix time> <seconds since start>"
    to the file ``report`` (``LOCKWARDEN_STARTUP_REPORT``, read by the start-up benchmark)."""
    from PySide6.QtCore import QTimer

    tray = lw.tray
    if tray is None:
        return

    def check() -> None:
        if tray.icon.isVisible() and tray.icon.geometry().isValid():
            with open(report, "w", encoding="utf-8") as f:
                f.write(f"{time.time():.3f} {time.monotonic() - _T0:.3f}\n")
        else:
            QTimer.singleShot(10, check)

    QTimer.singleShot(0, check)


def _who_window(path: str) -> int:
    """``--who PATH``: the "What's using this?" window alone (no tray, no second instance
    check: the file managers' entry opens one window per file). With
    ``LOCKWARDEN_WHO_ONCE`` set (tests running the entry's command), the first scan's summary
    is printed and the window closes."""
    from app.dialogs.who import WhoDialog

    qapp = _qapplication()
    dialog = WhoDialog(os.path.abspath(os.path.expanduser(path)))
    if os.environ.get("LOCKWARDEN_WHO_ONCE"):
        def once(*_: object) -> None:
            print(dialog.note.text(), flush=True)
            dialog.reject()

        dialog.scanned.connect(once)
    dialog.finished.connect(qapp.quit)
    dialog.show()
    return int(qapp.exec())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the app; returns the exit status (0 also when another instance was raised, 1
    without a graphical display)."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.demo_helper:
        from app.startup.demo import helper_main

        return helper_main(args.demo_helper[0], args.demo_helper[1])
    hash_without_openssl()
    from app.startup.display import problem

    why = problem()
    if why is not None:
        print(f"lockwarden-gui: {why}", file=sys.stderr)
        return 1
    if args.who is not None:
        return _who_window(args.who)

    from app.startup.single import InstanceLocationError, SingleInstance, server_name
    from core import config as cfgmod

    qapp = _qapplication()
    config_path = os.path.abspath(args.config) if args.config else cfgmod.default_config_path()
    guard: SingleInstance | None = None
    try:
        guard = SingleInstance(server_name("demo" if args.demo else config_path))
    except InstanceLocationError as exc:
        print(f"lockwarden-gui: no private place for the single-instance socket ({exc}); "
              "starting anyway, a second launch will open a second window", file=sys.stderr,
              flush=True)
    if guard is not None and not guard.acquire():
        print("Lockwarden is already running; raised its window.", flush=True)
        return 0

    demo = None
    if args.demo:
        from app.startup.demo import Demo

        demo = Demo()
        demo.start()
        config_path = demo.config_path

    from app.application import LockwardenApp

    lw = LockwardenApp(qapp, config_path=config_path, demo=demo)
    if guard is not None:
        guard.activated.connect(lw.show_window)
    lw.start(show_window=not (args.minimized or lw.config.ui.start_minimized))
    pulse = _quit_on_signals(lw)
    _release_after_first_scan(lw)
    report = os.environ.get("LOCKWARDEN_STARTUP_REPORT")
    if report:
        _report_startup(lw, report)
    try:
        rc = qapp.exec()
    finally:
        pulse.stop()
        if not lw.quitting:
            lw.finish_quit(release=True)
        if guard is not None:
            guard.close()
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
