"""Liveness with real processes: dead, alive, reused, zombie, remote (docs/DESIGN.md, "Liveness and
verdicts")."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pytest

from core.codes import Code
from core.reasons import Reason, texts
from core.record import Liveness, LockRecord
from core.verdicts import liveness
from core.verdicts.liveness import ProcessSnapshot, ProcInfo, check, same_host

AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A live child process, killed and reaped at teardown."""
    proc = subprocess.Popen(SLEEPER)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _start(pid: int) -> float:
    return psutil.Process(pid).create_time()


def _rec(pid: int | None, **kw: object) -> LockRecord:
    return LockRecord(path="/locks/x.lock", format="sema", pid=pid, **kw)  # type: ignore[arg-type]


def test_reaped_child_is_dead() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=30)
    state, reasons = check(_rec(proc.pid, acquired_at=datetime.now(UTC)))
    assert state is Liveness.DEAD
    assert texts(reasons) == [f"PID {proc.pid} exited"]
    assert liveness.process_start_time(proc.pid) is None


def test_live_child_is_alive(child: subprocess.Popen[bytes]) -> None:
    rec = _rec(child.pid, acquired_at=datetime.now(UTC))
    state, reasons = check(rec)
    assert state is Liveness.ALIVE
    first = texts(reasons)[0]
    assert first.startswith(f"PID {child.pid}") and first.endswith("is alive")
    # the same through a snapshot
    snap = liveness.snapshot()
    assert child.pid in snap
    assert check(rec, procs=snap)[0] is Liveness.ALIVE


def test_lock_written_before_process_started_is_reused(child: subprocess.Popen[bytes]) -> None:
    started = _start(child.pid)
    rec = _rec(child.pid, acquired_at=datetime.fromtimestamp(started - 300, UTC))
    state, reasons = check(rec)
    assert state is Liveness.REUSED
    assert texts(reasons) == [
        f"PID {child.pid} now belongs to a process started 5m 0s after the lock was written"
    ]


def test_whole_second_timestamp_of_same_process_is_alive(child: subprocess.Popen[bytes]) -> None:
    """sema's ``timestamp`` is the floor of the write time: up to 1 s before the start."""
    started = _start(child.pid)
    rec = _rec(child.pid, acquired_at=datetime.fromtimestamp(int(started) - 1, UTC))
    assert check(rec)[0] is Liveness.ALIVE


def test_pidfile_start_check_uses_file_mtime(child: subprocess.Popen[bytes]) -> None:
    rec = LockRecord(path="/run/d.pid", format="pidfile", pid=child.pid)
    started = _start(child.pid)
    assert check(rec)[0] is Liveness.ALIVE  # no time at all: no start check
    assert check(rec, written_at=time.time())[0] is Liveness.ALIVE
    state, reasons = check(rec, written_at=started - 3 * 3600)
    assert state is Liveness.REUSED and "3h 0m after the lock was written" in texts(reasons)[0]


def test_start_mismatch_is_reused(child: subprocess.Popen[bytes]) -> None:
    started = _start(child.pid)
    # acquired_at says nothing wrong: only start= tells the process apart
    rec = _rec(child.pid, acquired_at=datetime.now(UTC), start=started - 42.5)
    state, reasons = check(rec)
    assert state is Liveness.REUSED
    assert texts(reasons) == [
        f"PID {child.pid} now belongs to another process, started 42s after the lock's holder"
    ]
    assert check(_rec(child.pid, start=started + 7))[0] is Liveness.REUSED


def test_start_match_is_alive(child: subprocess.Popen[bytes]) -> None:
    started = _start(child.pid)
    assert check(_rec(child.pid, start=started + 0.05))[0] is Liveness.ALIVE
    # a one-second move of /proc/stat's whole-second boot time is the same process
    assert check(_rec(child.pid, start=started - 1.0))[0] is Liveness.ALIVE
    assert check(_rec(child.pid, start=started - 0.5))[0] is Liveness.REUSED


@pytest.mark.skipif(not hasattr(os, "waitid"), reason="needs os.waitid(WNOWAIT) to keep a zombie")
def test_killed_unreaped_child_is_dead_zombie() -> None:
    proc = subprocess.Popen(SLEEPER)
    try:
        proc.send_signal(signal.SIGKILL)
        # wait for the exit without reaping it: the child stays a zombie
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        assert psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE
        rec = _rec(proc.pid, acquired_at=datetime.now(UTC))
        state, reasons = check(rec)
        assert state is Liveness.DEAD
        assert "zombie" in texts(reasons)[0]
        assert check(rec, procs=liveness.snapshot())[0] is Liveness.DEAD
        assert liveness.process_start_time(proc.pid) is None
    finally:
        proc.wait(timeout=30)


def test_other_host_is_remote(child: subprocess.Popen[bytes]) -> None:
    rec = _rec(child.pid, host="build-server-17.example.net", acquired_at=datetime.now(UTC))
    state, reasons = check(rec)
    assert state is Liveness.REMOTE
    assert "build-server-17.example.net" in texts(reasons)[0]


def test_this_host_in_other_spellings_is_local(child: subprocess.Popen[bytes]) -> None:
    here = socket.gethostname()
    for spelling in (here, here.upper(), here.split(".")[0] + ".example.org"):
        rec = _rec(child.pid, host=spelling, acquired_at=datetime.now(UTC))
        assert check(rec)[0] is Liveness.ALIVE, spelling


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("devbox", "devbox", True),
        ("DevBox", "devbox", True),
        ("devbox.example.org", "devbox", True),
        ("devbox", "devbox.example.org.", True),
        ("devbox.a.org", "devbox.b.org", False),
        ("devbox2", "devbox", False),
        ("", "devbox", False),
    ],
)
def test_same_host(a: str, b: str, same: bool) -> None:
    assert same_host(a, b) is same


def test_no_pid_is_unknown() -> None:
    rec = LockRecord(path="/p/locks/1.lock", format="af-claim", holder="agent-1")
    assert check(rec) == (Liveness.UNKNOWN, [Reason.of(Code.NO_PID)])
    assert texts(check(rec)[1]) == ["the lock records no process ID"]
    assert check(_rec(0))[0] is Liveness.UNKNOWN
    assert check(_rec(-5))[0] is Liveness.UNKNOWN


def test_snapshot_missing_pid_is_confirmed_directly(child: subprocess.Popen[bytes]) -> None:
    """A process started after the snapshot is not called dead."""
    empty = ProcessSnapshot(procs={}, taken_at=time.time() - 10)
    assert check(_rec(child.pid, acquired_at=datetime.now(UTC)), procs=empty)[0] is (Liveness.ALIVE)


def test_snapshot_taken_after_the_lock_is_trusted() -> None:
    """A lock written before the snapshot whose PID is not in it: dead, without a look-up."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=30)
    snap = liveness.snapshot()
    assert proc.pid not in snap
    rec = _rec(proc.pid, acquired_at=datetime.now(UTC) - timedelta(minutes=1))
    assert check(rec, procs=snap) == (Liveness.DEAD, [Reason.of(Code.HOLDER_DEAD, pid=proc.pid)])
    started = _rec(proc.pid, start=time.time() - 60)
    assert check(started, procs=snap)[0] is Liveness.DEAD


def test_unreadable_start_time_counts_as_alive() -> None:
    """psutil gives ``None`` for fields it is denied: the process exists, so alive."""
    snap = ProcessSnapshot(procs={4242: ProcInfo(None, None)})
    state, reasons = check(_rec(4242, acquired_at=datetime(2020, 1, 1, tzinfo=UTC)), procs=snap)
    assert state is Liveness.ALIVE
    assert "not readable" in texts(reasons)[0]


def test_snapshot_matches_psutil(child: subprocess.Popen[bytes]) -> None:
    snap = liveness.snapshot()
    assert len(snap) > 1 and os.getpid() in snap
    info = snap[child.pid]
    assert info.create_time == pytest.approx(_start(child.pid), abs=0.02)
    assert snap.get(-1) is None
    assert snap.taken_at == pytest.approx(time.time(), abs=60)


def test_process_start_time_and_hostname() -> None:
    me = psutil.Process()
    assert liveness.process_start_time(os.getpid()) == pytest.approx(me.create_time(), abs=0.02)
    assert liveness.process_start_time(0) is None
    assert liveness.hostname() == socket.gethostname()
    assert liveness.hostname() is liveness.hostname()


@pytest.mark.skipif(
    getattr(os, "geteuid", lambda: -1)() != 0, reason="needs root to run a check as user nobody"
)
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) not installed")
def test_process_of_another_user_is_alive(child: subprocess.Popen[bytes]) -> None:
    """semats calls a live process of another user dead (EPERM from kill(pid, 0)); we don't.

    The check runs as ``nobody`` against our root-owned child."""
    script = (
        "import sys; from datetime import datetime, UTC\n"
        "from core.verdicts.liveness import check\nfrom core.record import LockRecord\n"
        f"r = LockRecord(path='x', format='sema', pid={child.pid}, "
        "acquired_at=datetime.now(UTC))\nprint(check(r)[0].value)\n"
    )
    root = str(Path(__file__).resolve().parents[3])
    out = subprocess.run(
        [*AS_NOBODY, sys.executable, "-c", script],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": root},
    )
    if out.returncode != 0 and "Permission denied" in out.stderr:
        pytest.skip(f"nobody cannot run the project's Python here: {out.stderr.strip()[-200:]}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "alive"
    # what semats sees for the same process: EPERM from kill(pid, 0)
    semats_view = subprocess.run(
        [*AS_NOBODY, sys.executable, "-c", f"import os; os.kill({child.pid}, 0)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "PermissionError" in semats_view.stderr


def test_aware_naive_and_far_timestamps_do_not_raise(child: subprocess.Popen[bytes]) -> None:
    far = datetime(9999, 12, 31, tzinfo=UTC)
    assert check(_rec(child.pid, acquired_at=far))[0] is Liveness.ALIVE
    old = datetime.now(UTC) - timedelta(days=365 * 30)
    assert check(_rec(child.pid, acquired_at=old))[0] is Liveness.REUSED


def test_init_as_holder_proves_nothing() -> None:
    """A lock whose recorded holder is PID 1 (the caller's shell was gone, so init adopted the
    CLI) is never judged alive: liveness unknown, judged by TTL and age."""
    rec = _rec(1, acquired_at=datetime.now(UTC) - timedelta(hours=2))
    live, reasons = check(rec)
    assert live is Liveness.UNKNOWN and [r.code for r in reasons] == [Code.INIT_HOLDER]
    assert "init process" in texts(reasons)[0]


def test_the_owner_of_a_live_holder_is_looked_up_once_per_snapshot(tmp_path: Path) -> None:
    """Many locks of one live holder judged against one snapshot share one owner look-up
    (core/verdicts/liveness.py ``evidence``): the snapshot keeps it, by PID and start time;
    each verdict still names the owner."""
    import getpass

    from core.verdicts.inspect import inspect

    paths = []
    for i in range(50):
        p = tmp_path / f"l{i}.lock"
        p.write_text(f"pid={os.getpid()}\ntimestamp={int(time.time())}\ntag=t{i}\n")
        paths.append(str(p))
    snap = liveness.snapshot()
    statuses = [inspect(p, procs=snap) for p in paths]
    assert {s.evidence.process_user for s in statuses if s.evidence} == {getpass.getuser()}
    assert list(snap.owners) == [(os.getpid(), snap[os.getpid()].create_time)]


def test_locks_of_one_pid_share_their_evidence_within_a_snapshot() -> None:
    """Against one snapshot, locks naming the same PID (alive or dead) get one evidence object,
    equal to the one judged without a snapshot; another snapshot makes its own."""
    now = datetime.now(UTC)  # after this process started: its own PID is the holder, alive
    snap = liveness.snapshot()
    dead = 4_000_077
    for pid in (os.getpid(), dead):
        recs = [LockRecord(path=f"/x/{i}.lock", format="sema", pid=pid, acquired_at=now)
                for i in range(3)]
        got = [liveness.evidence(r, check(r, procs=snap)[1], snap) for r in recs]
        assert got[0] is got[1] is got[2]
        alone = liveness.evidence(recs[0], check(recs[0])[1], None)
        assert got[0] == alone and got[0] is not alone
        assert (got[0].process_user is not None) == (pid != dead)
        other = liveness.snapshot()
        assert liveness.evidence(recs[0], check(recs[0], procs=other)[1], other) is not got[0]
