"""``kill-holder`` ends only a process proven to hold the lock *now* (docs/engine.md, "Ending a
holder"; core/engine/end_holder.py, core/kernel/proof.py). ``/proc/locks`` names the process that
*took* an flock: one that forks a child keeping the descriptor and closes its own copy is still
named there while the child holds the lock. It was SIGTERMed by ``kill-holder --yes`` while the
real holder lived on. The caller's own shell is never ended by ``--yes``; a confirmed start time
that no longer matches signals nothing. Real processes, real flock(2), real /proc."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.engine.end_holder import NotKernelHeld, end_holder
from core.verdicts.liveness import process_facts
from tests.support.cli import ENV, LW, lw

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/locks") or
                                not hasattr(os, "pidfd_open"),
                                reason="/proc/locks and pidfds (Linux) are needed")

TAKER = r"""
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
child = os.fork()
if child == 0:
    os.read(0, 1)  # the child keeps the locked description until its stdin closes
    os._exit(0)
os.close(fd)       # the taker lets go of its copy: the kernel still names it in /proc/locks
print(child, flush=True)
os.read(0, 1)
os.waitpid(child, 0)
"""


@pytest.fixture
def handed_down(lockdir: Path) -> Iterator[tuple[Path, subprocess.Popen[str], int]]:
    """A lock taken by a process (alive) and held only by its forked child."""
    path = lockdir / "cargo.lock"
    taker = subprocess.Popen([sys.executable, "-c", TAKER, str(path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert taker.stdout is not None
    child = int(taker.stdout.readline())
    try:
        yield path, taker, child
    finally:
        for pid in (child, taker.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        taker.wait()


def _wait_gone(pid: int) -> None:
    fd = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        assert poller.poll(30_000), f"PID {pid} did not exit"
    finally:
        os.close(fd)


def test_the_taker_that_let_go_is_not_ended_its_child_is(
        handed_down: tuple[Path, subprocess.Popen[str], int]) -> None:
    path, taker, child = handed_down
    out = lw("kill-holder", str(path), "--yes", "--reason", "test")
    assert out.returncode == 0, out.stderr
    assert f"sent SIGTERM to PID {child}," in out.stdout
    _wait_gone(child)  # the real holder got the signal...
    assert taker.poll() is None  # ...and the taker, which holds nothing, runs on
    assert process_facts(taker.pid) is not None


def test_a_start_time_that_no_longer_matches_signals_nothing(
        handed_down: tuple[Path, subprocess.Popen[str], int]) -> None:
    path, _taker, child = handed_down
    facts = process_facts(child)
    assert facts is not None
    with pytest.raises(NotKernelHeld, match="another process than the one confirmed"):
        end_holder(str(path), reason="test", expected_pid=child,
                   expected_start=facts.start - 60)
    with pytest.raises(NotKernelHeld, match="does not hold its kernel lock now"):
        end_holder(str(path), reason="test", expected_pid=_taker.pid)
    assert process_facts(child) == facts and process_facts(_taker.pid) is not None


@pytest.mark.skipif(shutil.which("flock") is None, reason="flock(1) is needed")
def test_yes_never_ends_the_callers_own_shell(lockdir: Path) -> None:
    path = lockdir / "shell.lock"
    path.write_bytes(b"")
    lw_cmd = " ".join(LW)
    script = f'exec 9>"$1"; flock 9; {lw_cmd} kill-holder "$1" --yes --reason test 9>&-; ' \
             'echo "rc=$?"; echo survived'
    out = subprocess.run(["bash", "-c", script, "bash", str(path)], capture_output=True,
                         text=True, timeout=60, env=ENV, check=False)
    assert "survived" in out.stdout, out.stderr
    assert "rc=1" in out.stdout
    assert "is the shell or program that started this command" in out.stderr


def test_the_app_confirms_the_real_holder(make_app: Any, qtbot: Any,
                                          handed_down: tuple[Path, subprocess.Popen[str], int]
                                          ) -> None:
    path, taker, child = handed_down
    app = make_app([path.parent])
    app.start(show_window=False)
    qtbot.waitUntil(lambda: app.model.status_of(str(path)) is not None, timeout=10_000)
    n = len(app.ops.dialogs)
    dlg = app.ops.open_end_holder(str(path))
    assert dlg is app.ops.dialogs[n]
    assert f"(PID {child})" in dlg.label.text()
    assert f"(PID {taker.pid})" not in dlg.label.text()
    dlg.reason.setText("test")
    dlg.accept()
    _wait_gone(child)
    qtbot.waitUntil(lambda: app.ops.busy == 0, timeout=10_000)
    assert taker.poll() is None


GONE_TAKER = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
child = os.fork()
if child == 0:
    os.read(0, 1)  # the child keeps the locked description until its stdin closes
    os._exit(0)
print(child, flush=True)  # and the taker exits: /proc/locks keeps showing its PID
"""
NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"


def _spawn_as(pid: int, argv: list[str]) -> subprocess.Popen[bytes] | None:
    """Start ``argv`` so that it gets PID ``pid`` (the kernel's next PID set through
    ``ns_last_pid``; other processes of the machine may take it first: a few attempts)."""
    for _ in range(50):
        with open(NS_LAST_PID, "w") as f:
            f.write(str(pid - 1))
        p = subprocess.Popen(argv)
        if p.pid == pid:
            return p
        p.kill()
        p.wait()
    return None


@pytest.mark.skipif(not os.access(NS_LAST_PID, os.W_OK),
                    reason="needs root to choose the next PID (ns_last_pid)")
def test_a_process_that_got_the_takers_pid_is_not_ended(lockdir: Path) -> None:
    path = lockdir / "uv.lock"
    taker = subprocess.Popen([sys.executable, "-c", GONE_TAKER, str(path)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert taker.stdout is not None
    child = int(taker.stdout.readline())
    assert taker.wait(timeout=30) == 0  # reaped: its PID is free
    unrelated = _spawn_as(taker.pid, ["sleep", "600"])
    try:
        if unrelated is None:
            pytest.skip(f"PID {taker.pid} was taken by another process first")
        out = lw("kill-holder", str(path), "--yes", "--reason", "test")
        assert out.returncode == 0, out.stderr
        assert f"sent SIGTERM to PID {child}," in out.stdout
        _wait_gone(child)
        assert unrelated.poll() is None
    finally:
        assert taker.stdin is not None
        taker.stdin.close()
        for pid in (child,):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if unrelated is not None:
            unrelated.kill()
            unrelated.wait()
