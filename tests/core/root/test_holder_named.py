"""A lock's holder is named wherever it is known (docs/gui.md, "Holder"; docs/cli.md, "status and
list output"): for a file held by a real flock(1), filelock or portalocker, ``status --json``
carries the holder's PID in ``pid`` (sema's schema) and its process name in ``holder``, the
evidence its user; ``status`` and ``list`` name process, user and PID -- for sema locks and
pidfiles of live processes too. Ending the holder names it and goes SIGTERM first, SIGKILL only
when asked again (core/engine/end_holder.py)."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.engine.end_holder import (
    KILL_SIGNAL,
    NotKernelHeld,
    end_holder,
    holder_process,
    wait_for_exit,
)
from core.holder import process_label
from core.verdicts.inspect import inspect
from tests.support.cli import lw
from tests.support.kernel_holders import hold

linux = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux /proc")
ME = getpass.getuser()

STUBBORN = r"""
import fcntl, os, signal, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a hung holder: SIGTERM does not end it
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("ready", flush=True)
sys.stdin.read()
"""


def _flock_holder(path: Path) -> subprocess.Popen[str]:
    if shutil.which("flock") is None:
        pytest.skip("flock(1) (util-linux) is needed")
    p = subprocess.Popen(["flock", str(path), "sh", "-c", "echo ready; exec cat"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline() == "ready\n"
    return p


@linux
def test_status_names_the_flock_holder(lockdir: Path) -> None:
    path = lockdir / "job.lock"
    p = _flock_holder(path)
    try:
        out = lw("status", str(path), "--json")
        st = json.loads(out.stdout)
        assert out.returncode == 1 and st["state"] == "held"
        assert st["pid"] == p.pid  # sema's schema: the holder's PID
        assert st["holder"] == "flock" and st["evidence"]["process_name"] == "flock"
        assert st["evidence"]["process_user"] == ME
        assert st["evidence"]["process_uid"] == os.getuid()
        text = lw("status", str(path)).stdout
        assert f"pid: {p.pid}" in text
        assert f"process: flock (PID {p.pid}, user {ME})" in text
        row = next(r for r in lw("list", str(lockdir)).stdout.splitlines()
                   if r.endswith(str(path)))
        assert row.split()[2] == str(p.pid) and f"flock (user {ME})" in row
    finally:
        p.kill()
        p.wait()


@linux
@pytest.mark.parametrize("kind", ["portalocker", "fasteners", "flock"])
def test_library_holders_are_named(lockdir: Path, procs: list[subprocess.Popen[str]],
                                   kind: str) -> None:
    path = lockdir / f"{kind}.lock"
    p = hold(procs, kind, path)
    st = inspect(str(path))
    assert st.holder_pid == p.pid and st.to_dict()["pid"] == p.pid
    assert st.evidence.process_name is not None and st.evidence.process_user == ME
    assert process_label(st) == f"{st.evidence.process_name} (PID {p.pid}, user {ME})"


@linux
def test_sema_locks_and_pidfiles_of_live_processes_are_named(lockdir: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        sema = lockdir / "deploy.lock"
        out = lw("try", str(sema), "--pid", str(sleeper.pid), "--tag", "deploy")
        assert out.returncode == 0, out.stderr
        pidfile = lockdir / "daemon.pid"
        pidfile.write_text(f"{sleeper.pid}\n")
        for path in (sema, pidfile):
            st = inspect(str(path))
            assert process_label(st) == f"sleep (PID {sleeper.pid}, user {ME})", path
            text = lw("status", str(path)).stdout
            assert f"process: sleep (PID {sleeper.pid}, user {ME})" in text
    finally:
        sleeper.kill()
        sleeper.wait()
    assert process_label(inspect(str(sema))) == ""  # a dead holder is named by PID only


@linux
def test_end_holder_is_graceful_first_and_kills_only_when_asked(lockdir: Path) -> None:
    path = lockdir / "hung.lock"
    p = subprocess.Popen([sys.executable, "-c", STUBBORN, str(path)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        facts = holder_process(str(path))
        assert facts is not None and facts.pid == p.pid and facts.user == ME
        assert facts.cmdline[:2] == (sys.executable, "-c")
        with pytest.raises(NotKernelHeld):  # another process than the one confirmed
            end_holder(str(path), reason="t", expected_pid=p.pid,
                       expected_start=facts.start - 100)
        assert end_holder(str(path), reason="hung", expected_pid=p.pid,
                          expected_start=facts.start) == p.pid
        assert not wait_for_exit(p.pid, facts.start, 0.3)  # SIGTERM ignored: still there
        assert p.poll() is None and inspect(str(path)).kernel_pid == p.pid
        end_holder(str(path), reason="hung", expected_pid=p.pid, expected_start=facts.start,
                   sig=KILL_SIGNAL)
        assert wait_for_exit(p.pid, facts.start, 30)
        assert p.wait(timeout=30) == -signal.SIGKILL
    finally:
        p.kill()
        p.wait()
    entries = [json.loads(x) for x in (lockdir / ".lock_audit.log").read_text().splitlines()]
    ends = [e["details"] for e in entries if e["operation"] == "end_holder"]
    assert [d["signal"] for d in ends] == ["SIGTERM", "SIGKILL"]
    assert all(d["process_user"] == ME and d["cmdline"][1] == "-c" for d in ends)
