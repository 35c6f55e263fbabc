"""``lockwarden --self-test`` (frozen) and ``python -m app.startup.selftest`` (source): check that a
build has everything it needs, without a display and without touching the user's files.

The checks, one printed line each, in order -- ``qt``, ``text`` (ICU), ``icons``, ``app``,
``lock``, ``audit``, ``watch`` -- and what each proves: docs/packaging.md, "The self-test". The
exit status is 0 when every check passed, 1 otherwise; nothing outside a fresh temp directory is
written.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

#: Icons every build must contain (SVG sources, see ``resources/icons/``).
REQUIRED_SVGS: tuple[str, ...] = (
    "lockwarden.svg",
    "tray-free.svg",
    "tray-held.svg",
    "tray-stale.svg",
    "tray-problem.svg",
    "tray-template.svg",
)


class CheckFailed(Exception):
    """A self-test check failed; the message is printed after ``FAIL <name>:``."""


def is_frozen() -> bool:
    """True inside a PyInstaller bundle."""
    return bool(getattr(sys, "frozen", False))


def resources_dir() -> Path:
    """``sys._MEIPASS/resources`` when frozen, else ``<repo>/resources``."""
    base = getattr(sys, "_MEIPASS", None)
    if base:
        return Path(base) / "resources"
    return Path(__file__).resolve().parents[2] / "resources"


def _check_qt() -> str:
    import importlib

    from PySide6 import QtSvg  # noqa: F401 - importing is the check
    from PySide6.QtCore import qVersion
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "lockwarden"])
    name = QApplication.platformName()
    if name != "offscreen":
        raise CheckFailed(f"platform is {name!r}, expected 'offscreen'")
    if sys.platform == "win32":
        importlib.import_module("PySide6.QtNetwork")
    _check_single_instance()
    del app
    net = ", QtNetwork" if sys.platform == "win32" else ""
    return (f"Qt {qVersion()} on the offscreen platform; QtSvg{net} import; "
            "single-instance guard answers")


def _check_single_instance() -> None:
    """A guard listens on a private temporary name; on POSIX a client's "show" reaches it."""
    from app.startup.single import SingleInstance

    with tempfile.TemporaryDirectory(prefix="lockwarden-selftest-") as tmp:
        name = (os.path.join(tmp, "gui.sock") if sys.platform != "win32"
                else f"lockwarden-selftest-{os.getpid()}")
        first = SingleInstance(name)
        try:
            if not first.acquire() or first.server is None:
                raise CheckFailed("the single-instance guard could not listen")
            if sys.platform == "win32":
                return
            import socket

            hits: list[bool] = []
            first.activated.connect(lambda: hits.append(True))
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.connect(name)
                client.sendall(b"show\n")
                first._connection()  # what its socket notifier calls
            if not hits:
                raise CheckFailed("the single-instance guard did not answer a second launch")
        finally:
            first.close()


def _check_text() -> str:
    """Locale-aware case mapping, which Qt delegates to ICU (Qt's own fallback, used when ICU
    is unusable, maps Turkish "i" to "I"): ICU loads and works in the bundle (the Linux build
    ships a trimmed ICU data library, packaging/trim_icu.py; case mapping itself uses the data
    compiled into libicuuc)."""
    from PySide6.QtCore import QLocale

    upper = QLocale(QLocale.Language.Turkish).toUpper("i")
    if upper != "\u0130":
        raise CheckFailed(f"Turkish upper case of 'i' is {upper!r}, expected '\u0130'")
    lower = QLocale(QLocale.Language.Turkish).toLower("I")
    if lower != "\u0131":
        raise CheckFailed(f"Turkish lower case of 'I' is {lower!r}, expected '\u0131'")
    data = _icu_data_check()
    return "locale-aware case mapping through ICU works" + (f"; {data}" if data else "")


def _icu_data_check() -> str:
    """Where Qt ships its own ICU (Linux wheels: ``PySide6/Qt/lib/libicuuc.so.<N>``), open the
    root resource bundle from ICU's data library through ICU's C API; a data library whose
    items cannot be found (a bad trim) fails here. Returns "" where there is no bundled ICU."""
    import ctypes

    base = getattr(sys, "_MEIPASS", None)
    if base:
        libdir = Path(base) / "PySide6" / "Qt" / "lib"
    else:
        import PySide6

        libdir = Path(PySide6.__file__).resolve().parent / "Qt" / "lib"
    libs = sorted(libdir.glob("libicuuc.so.*"))
    if not libs:
        return ""
    major = libs[0].name.rsplit(".so.", 1)[1].split(".")[0]
    uc = ctypes.CDLL(str(libs[0]))
    ures_open = getattr(uc, f"ures_open_{major}")
    ures_open.restype = ctypes.c_void_p
    ures_open.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]
    ures_close = getattr(uc, f"ures_close_{major}")
    ures_close.argtypes = [ctypes.c_void_p]
    status = ctypes.c_int(0)
    bundle = ures_open(None, b"root", ctypes.byref(status))
    if bundle:
        ures_close(bundle)
    if status.value > 0 or not bundle:  # U_FAILURE: error codes are > 0
        raise CheckFailed(f"ICU {major} cannot open its root resource bundle "
                          f"(UErrorCode {status.value})")
    return f"ICU {major} data opens"


def _check_icons() -> str:
    from PySide6.QtGui import QIcon, QImage
    from PySide6.QtSvg import QSvgRenderer

    icons = resources_dir() / "icons"
    problems: list[str] = []
    svgs = sorted(p.name for p in icons.glob("*.svg")) if icons.is_dir() else []
    for name in REQUIRED_SVGS:
        if name not in svgs:
            problems.append(f"{name} missing")
    for name in svgs:
        svg_path = str(icons / name)
        if not QSvgRenderer(svg_path).isValid():
            problems.append(f"{name}: QSvgRenderer cannot parse it")
            continue
        pm = QIcon(svg_path).pixmap(32, 32)
        if pm.isNull():
            problems.append(f"{name}: QIcon renders nothing (svg icon engine missing?)")
    generated = resources_dir() / "generated"
    gen_files = (
        sorted(p for p in generated.iterdir() if p.suffix in (".png", ".ico"))
        if generated.is_dir() else []
    )
    for path in gen_files:
        if QImage(str(path)).isNull():
            problems.append(f"{path.name}: QImage cannot load it")
    if is_frozen() and not gen_files:
        problems.append("no generated PNG/ICO icons in the bundle")
    if problems:
        raise CheckFailed("; ".join(problems))
    gen = f", {len(gen_files)} generated" if gen_files else ", no generated files (source tree)"
    return f"{len(svgs)} SVG loaded{gen}"


def _check_app_modules() -> str:
    import importlib

    names = ("app.main", "app.application", "app.tray", "app.window", "app.table.model",
             "app.style.icons", "app.startup.single", "core.cli.main", "core.watch.watcher",
             "core.watch.scan",
             "core.config")
    for name in names:
        importlib.import_module(name)
    return f"{len(names)} modules import"


def _check_lock(tmp: Path) -> str:
    from core.engine.lock import Lock
    from core.reasons import render_all
    from core.record import Liveness, State
    from core.verdicts.inspect import inspect as inspect_lock

    path = str(tmp / "selftest.lock")
    lock = Lock(path, tag="lockwarden self-test")
    lock.acquire(blocking=False)
    try:
        status = inspect_lock(path)
        if status.state is not State.HELD or status.liveness is not Liveness.ALIVE:
            raise CheckFailed(f"after acquire: {status.state}/{status.liveness} "
                              f"({render_all(status.reasons)})")
    finally:
        if lock.is_held:
            lock.release()
    after = inspect_lock(path)
    if after.state is not State.FREE:
        raise CheckFailed(f"after release: {after.state}, expected free")
    return "acquired, inspected (held, alive), released, free again"


def _check_audit(tmp: Path) -> str:
    from core import audit
    from core.text import plural

    lock_path = str(tmp / "selftest.lock")
    entries = [e for e in audit.read(str(tmp)) if e.lock_path == lock_path]
    ops = [e.operation for e in entries]
    for op in ("acquire", "release"):
        if op not in ops:
            raise CheckFailed(f"no {op!r} entry for {lock_path} (found {ops})")
    result = audit.verify(str(tmp))
    if not result.ok:
        raise CheckFailed(f"chain does not verify: {result.reason}")
    return (f"{plural(len(entries), 'entry', 'entries')} read back, chain of "
            f"{plural(result.entries, 'entry', 'entries')} verified")


def _check_watch(tmp: Path) -> str:
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    observer = Observer()
    observer.schedule(FileSystemEventHandler(), str(tmp), recursive=False)
    observer.start()
    try:
        if not observer.is_alive():
            raise CheckFailed("observer thread did not start")
    finally:
        observer.stop()
        observer.join(timeout=5)
    return f"{type(observer).__name__} started and stopped"


def run_checks(out: Callable[[str], None] = print) -> int:
    """Run every check, report each through ``out``; return the number of failures."""
    failures = 0

    def one(name: str, fn: Callable[[], str]) -> bool:
        nonlocal failures
        try:
            detail = fn()
        except Exception as exc:
            failures += 1
            text = str(exc) if isinstance(exc, CheckFailed) else (
                f"{type(exc).__name__}: {exc}"
            )
            out(f"FAIL {name}: {' '.join(text.split())}")
            if os.environ.get("LOCKWARDEN_SELFTEST_DEBUG"):
                traceback.print_exc()
            return False
        out(f"ok   {name}: {detail}")
        return True

    one("qt", _check_qt)
    one("text", _check_text)
    one("icons", _check_icons)
    one("app", _check_app_modules)
    with tempfile.TemporaryDirectory(prefix="lockwarden-selftest-") as d:
        tmp = Path(d)
        if one("lock", lambda: _check_lock(tmp)):
            one("audit", lambda: _check_audit(tmp))
        else:
            failures += 1
            out("FAIL audit: skipped (the lock check failed)")
        one("watch", lambda: _check_watch(tmp))
    return failures


def main(argv: Sequence[str] | None = None) -> int:
    """Run the self-test; print a header and one line per check; return 0 if all passed,
    1 otherwise. ``argv`` is accepted for symmetry with the other entry points and ignored."""
    del argv
    # Force the offscreen platform: the self-test must run on a headless machine, and it must
    # not pop up anything on a desktop (before any Qt import creates an application).
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from core import __version__

    kind = "frozen" if is_frozen() else "source"
    print(f"lockwarden {__version__} self-test ({kind}, Python "
          f"{sys.version_info.major}.{sys.version_info.minor}, {sys.platform})", flush=True)
    try:
        failures = run_checks(lambda line: print(line, flush=True))
    except BrokenPipeError:  # stdout closed early (e.g. piped into head): still report status
        return 1
    print("self-test passed" if failures == 0 else f"self-test FAILED ({failures} failed)",
          flush=True)
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
