"""The app, offscreen, on real lock holders (docs/gui.md "Holder", "Empty files", "End holder
process"): an empty file a real filelock left behind is a free row -- no red tray, no
"unreadable" -- and can be removed on request; the Holder column, the detail pane and the tray
name the holder process, its user and PID, and mark the user's own locks; "End holder
process…" is in the toolbar and the detail pane, names the process, its user and its command
line, ends it with SIGTERM and kills it only after a second confirmation."""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QToolBar

from app.table.columns import Col
from core.record import State
from tests.support.cli import lw as cli

linux = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux /proc")
ME = getpass.getuser()

RELEASE = r"""
import sys, filelock
with filelock.FileLock(sys.argv[1]):
    pass
"""

STUBBORN = r"""
import fcntl, os, signal, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("ready", flush=True)
sys.stdin.read()
"""


def _cell(lw: Any, path: Path, col: Col) -> str:
    m = lw.model
    row = m.row_of(str(path))
    assert row is not None, path
    text = m.data(m.index(row, col))
    assert isinstance(text, str)
    return text


@linux
def test_an_empty_file_filelock_left_is_a_free_row(make_app: Any, lockdir: Path,
                                                   qtbot: Any) -> None:
    path = lockdir / "model.lock"
    subprocess.run([sys.executable, "-c", RELEASE, str(path)], check=True, timeout=60)
    t = os.stat(path).st_mtime - 7200
    os.utime(path, (t, t))  # an hour-old leftover: once "stale", it is free
    lw = make_app([lockdir], tray=True)
    lw.start(show_window=True)
    qtbot.waitUntil(lambda: lw.model.status_of(str(path)) is not None, timeout=10_000)
    st = lw.model.status_of(str(path))
    assert st.state is State.FREE and st.empty_free
    assert _cell(lw, path, Col.STATE) == "free"
    lw.tray.refresh()
    assert lw.tray.state == "free" and lw.tray.problems_text() == ""  # no red
    w = lw.window
    assert w.select_path(str(path))
    assert w.detail.values["State"].text().startswith("free")
    assert w.detail.values["Safe action"].text().startswith("leave it")
    assert "unreadable" not in w.detail.reasons.text()
    assert "the file is empty" not in w.detail.reasons.text()
    assert not w.act_reclaim.isEnabled()  # nothing to break: it is free
    # removing it is offered, on request, and holds its flock (core/engine/unheld.py)
    assert w.act_force.isEnabled()
    n = len(lw.ops.dialogs)
    w.act_force.trigger()
    dlg = lw.ops.dialogs[n]
    assert dlg.windowTitle() == "Remove empty lock file…" and dlg.ok.isEnabled()
    dlg.accept()
    qtbot.waitUntil(lambda: not path.exists() and lw.ops.busy == 0, timeout=10_000)
    qtbot.waitUntil(lambda: lw.model.status_of(str(path)) is None, timeout=10_000)


@linux
def test_holders_are_named_and_mine_marked(make_app: Any, lockdir: Path, qtbot: Any) -> None:
    if shutil.which("flock") is None:
        pytest.skip("flock(1) is needed")
    kernel = lockdir / "uv.lock"
    flock = subprocess.Popen(["flock", str(kernel), "sh", "-c", "echo ready; exec cat"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        assert flock.stdout is not None and flock.stdout.readline() == "ready\n"
        sema, pidfile = lockdir / "deploy.lock", lockdir / "daemon.pid"
        assert cli("try", str(sema), "--pid", str(sleeper.pid)).returncode == 0
        pidfile.write_text(f"{sleeper.pid}\n")
        lw = make_app([lockdir], tray=True)
        lw.start(show_window=True)
        qtbot.waitUntil(lambda: all(lw.model.status_of(str(p)) is not None
                                    for p in (kernel, sema)), timeout=10_000)
        assert _cell(lw, kernel, Col.HOLDER) == f"mine — flock (PID {flock.pid}, user {ME})"
        assert _cell(lw, kernel, Col.PID) == str(flock.pid)
        assert _cell(lw, sema, Col.HOLDER) == f"mine — sleep (PID {sleeper.pid}, user {ME})"
        w = lw.window
        assert w.select_path(str(kernel))
        assert w.detail.values["Holder"].text() == f"mine — flock (PID {flock.pid}, user {ME})"
        assert w.detail.values["PID"].text() == str(flock.pid)
        liveness = w.detail.values["Liveness"].text()  # and which way it is followed
        assert liveness.startswith("alive — liveness "), liveness
        lw.tray.rebuild_menu()
        titles = [a.text() for a in lw.tray.menu.actions() if a.menu() is not None]
        assert any(t.startswith("deploy.lock") and "mine" in t for t in titles), titles
    finally:
        for p in (flock, sleeper):
            p.kill()
            p.wait()


@linux
def test_end_holder_from_the_toolbar_and_detail_pane(make_app: Any, lockdir: Path, qtbot: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import core.engine.end_holder as eh

    monkeypatch.setattr(eh, "TERM_GRACE", 0.5)  # a short bounded wait for the test
    path = lockdir / "hung.lock"
    p = subprocess.Popen([sys.executable, "-c", STUBBORN, str(path)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        lw = make_app([lockdir])
        lw.start(show_window=True)
        qtbot.waitUntil(lambda: (st := lw.model.status_of(str(path))) is not None
                        and st.kernel_pid == p.pid, timeout=10_000)
        w = lw.window
        toolbar = w.findChild(QToolBar, "actions")
        assert w.act_end_holder in toolbar.actions()
        assert w.select_path(str(path))
        assert w.act_end_holder.isEnabled() and w.detail.end_holder.isEnabled()
        n = len(lw.ops.dialogs)
        w.detail.end_holder.click()
        dlg = lw.ops.dialogs[n]
        text = dlg.label.text()
        assert dlg.windowTitle() == "End holder process…"
        assert f"(PID {p.pid})" in text and f"User: {ME}" in text
        assert "Command line: " in text and " -c " in text and "SIGTERM" in text
        assert not dlg.ok.isEnabled()  # a reason first
        dlg.reason.setText("it hangs")
        dlg.accept()
        # SIGTERM is ignored: after the bounded wait, a second confirmation before SIGKILL
        qtbot.waitUntil(lambda: any(d.windowTitle() == "Kill holder process…"
                                    for d in lw.ops.dialogs), timeout=30_000)
        assert p.poll() is None
        kill = next(d for d in lw.ops.dialogs if d.windowTitle() == "Kill holder process…")
        assert f"(PID {p.pid})" in kill.label.text() and "SIGKILL" in kill.label.text()
        kill.accept()
        assert p.wait(timeout=30) == -signal.SIGKILL
        qtbot.waitUntil(lambda: lw.ops.busy == 0, timeout=10_000)
    finally:
        p.kill()
        p.wait()
    entries = [json.loads(x) for x in (lockdir / ".lock_audit.log").read_text().splitlines()]
    assert [e["details"]["signal"] for e in entries if e["operation"] == "end_holder"] == [
        "SIGTERM", "SIGKILL"]


@linux
def test_end_holder_of_a_flock_lock_says_the_child_keeps_it(make_app: Any, lockdir: Path,
                                                            qtbot: Any) -> None:
    """``flock LOCK sleep 600``: the kernel names flock(1), whose child shares the descriptor.
    Ending flock leaves the lock held by sleep: the confirmation says so before (as the CLI's
    kill-holder prompt), and the app says so after -- never a silent "done"."""
    if shutil.which("flock") is None:
        pytest.skip("flock(1) is needed")
    from tests.support.app_spies import SignalSpy

    path = lockdir / "deploy.lock"
    flock = subprocess.Popen(["flock", str(path), "sh", "-c", "echo ready; exec sleep 600"],
                             stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        assert flock.stdout is not None and flock.stdout.readline() == "ready\n"
        child = next(int(p) for p in Path(f"/proc/{flock.pid}/task/{flock.pid}/children")
                     .read_text().split())
        lw = make_app([lockdir])
        lw.start(show_window=True)
        qtbot.waitUntil(lambda: (st := lw.model.status_of(str(path))) is not None
                        and st.kernel_pid == flock.pid, timeout=10_000)
        errors = SignalSpy(lw.ops.errorShown)
        dlg = lw.ops.open_end_holder(str(path))
        assert dlg is not None
        text = dlg.label.text()
        assert f"flock (PID {flock.pid})" in text
        assert f"sleep (PID {child}) shares it and keeps the lock after this one ends" in text
        dlg.reason.setText("hung deploy")
        dlg.accept()
        assert flock.wait(timeout=30) == -signal.SIGTERM
        qtbot.waitUntil(lambda: errors.last is not None, timeout=30_000)
        assert errors.last is not None
        title, body = errors.last
        assert title == "The lock is still held"
        assert f"flock (PID {flock.pid}) ended" in body
        assert f"sleep (PID {child})" in body and "still holds" in body
        assert Path(f"/proc/{child}").exists()  # nothing else was ended
    finally:
        flock.kill()
        flock.wait()
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


def test_a_live_vims_swap_is_marked_mine(tmp_path: Path) -> None:
    """A Vim of this user editing a file: its swap's holder is that Vim, marked "mine" like
    every other lock whose holder process runs as the user (docs/gui.md, "Holder")."""
    from app.table.columns import holder_text
    from core.verdicts.inspect import inspect
    from tests.support.editors import live_vim

    with live_vim(tmp_path) as (swap, pid):
        st = inspect(str(swap))
        assert st.state is State.HELD and st.evidence.pid == pid
        text = holder_text(st, "elsewhere")
        assert text.startswith("mine — ") and f"vim (PID {pid}" in text, text
