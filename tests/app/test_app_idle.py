"""An idle app wakes only when it has work (docs/performance.md "Idle tray"): no repeating
timer faster than once a second, and SIGTERM still quits it cleanly, woken by the signal
itself rather than by a polling timer."""

from __future__ import annotations

import gc
import os
import signal

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from PySide6.QtCore import QTimer
from shiboken6 import isValid

from app.main import SignalWaker, _quit_on_signals, _release_after_first_scan

pytestmark = pytest.mark.usefixtures("qapp")


@pytest.fixture
def idle_app(make_app, qtbot, lockdir):
    lw = make_app([lockdir])
    lw.start(show_window=False)
    qtbot.waitUntil(lambda: lw.inventory.initial_done, timeout=10_000)
    return lw


def test_no_repeating_timer_faster_than_a_second(idle_app):
    waker = _quit_on_signals(idle_app)
    try:
        fast = [(t.objectName() or repr(t), t.interval()) for t in gc.get_objects()
                if isinstance(t, QTimer) and isValid(t)  # a wrapper whose timer is gone
                and t.isActive() and not t.isSingleShot()
                and t.interval() < 1000]
        assert fast == []
    finally:
        waker.stop()


def test_sigterm_quits_through_the_wakeup_socket(idle_app, qtbot):
    waker = _quit_on_signals(idle_app)
    assert isinstance(waker, SignalWaker)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        qtbot.waitUntil(lambda: idle_app.quitting, timeout=5_000)
    finally:
        waker.stop()
    assert signal.getsignal(signal.SIGTERM) is not waker._on_signal


def test_pyside_keeps_the_source_of_each_module_imported_after_it() -> None:
    """The cause (docs/performance.md "Idle tray"): PySide6's ``__feature__`` check reads the
    source of every module imported after it, and ``linecache`` keeps it."""
    import subprocess
    import sys

    code = ("import linecache, PySide6.QtCore, app.tray; "
            "import app.table.model; print(app.table.model.__file__ in linecache.cache)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "True"


def test_the_started_app_gives_back_the_source_text_start_up_left(idle_app, qtbot):
    import linecache

    import app.tray

    assert linecache.getlines(app.tray.__file__)  # what PySide6 leaves behind
    _release_after_first_scan(idle_app)
    qtbot.waitUntil(lambda: not linecache.cache, timeout=5_000)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="Linux's /proc/self/maps")
def test_the_app_hashes_without_openssl_and_the_digests_are_the_same() -> None:
    """As in the bundle (packaging/lockwarden.spec): no libcrypto mapped in an idle tray, and
    the audit chain's SHA-256 unchanged."""
    import hashlib
    import subprocess
    import sys

    code = ("import app.main, sys; took = app.main.hash_without_openssl(); import hashlib; "
            "print(took, hashlib.sha256(b'lockwarden').hexdigest(), "
            "any('libcrypto' in line for line in open('/proc/self/maps')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    took, digest, mapped = out.stdout.split()
    assert took == "True" and mapped == "False"
    assert digest == hashlib.sha256(b"lockwarden").hexdigest()


def test_lockwarden_gui_keeps_hashlib_off_openssl_too() -> None:
    """``lockwarden gui`` goes through the CLI, which imports hashlib before the app starts."""
    import subprocess
    import sys

    code = ("import contextlib, sys, app.console\n"
            "with contextlib.suppress(SystemExit):\n"
            "    app.console.main(['gui', '--help'])\n"
            "print('RESULT', sys.modules.get('_hashlib', 'absent'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.splitlines()[-1] == "RESULT None"
