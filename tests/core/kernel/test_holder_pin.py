"""The holder's pin (core/kernel/pin.py, docs/engine.md "The holder's pin"): a Lockwarden
holder keeps a shared flock on its own lock file, so a holder whose PID means nothing here -- a
real process in its own PID namespace (``unshare``), recording PID 2 -- is still judged alive,
its lock is not reclaimed, and it turns stale the moment that process dies. The pin follows
refreshes, is closed on release (no descriptor leaks) and never stops a force release."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from core.codes import Code
from core.engine.lock import Lock
from core.engine.reclaiming import reclaim
from core.errors import NotStale
from core.kernel.pin import pinned_by
from core.record import Liveness, State
from core.verdicts.inspect import inspect

ROOT = Path(__file__).resolve().parents[3]
linux = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs /proc/locks")

HOLD = r"""
import os, sys
sys.path.insert(0, sys.argv[2])
from core.engine.lock import Lock
lk = Lock(sys.argv[1], tag="in a container")
lk.acquire(timeout=5)
print(os.getpid(), flush=True)
sys.stdin.read()
"""


def _fds() -> int:
    """Descriptors open in this process, the audit logs it keeps open between appends
    (core/audit/appender.py) closed first."""
    from core import audit

    audit.close_logs()
    return len(os.listdir("/proc/self/fd"))


@linux
def test_pin_follows_the_lock_and_closes_with_it(tmp_path: Path) -> None:
    path = str(tmp_path / "a.lock")
    before = _fds()
    lk = Lock(path, ttl=60).acquire()
    assert pinned_by(path, os.getpid(), lk.token) == (True, os.getpid())
    lk.refresh()  # a new file: pinned again, the old pin closed
    assert pinned_by(path, os.getpid(), lk.token) == (True, os.getpid())
    assert _fds() == before + 1
    lk.release()
    assert _fds() == before and not os.path.exists(path)
    other = Lock(path, holder_pid=1).acquire()  # recorded for another process: no pin
    assert pinned_by(path, 1, other.token) == (False, None)
    other.release()


@linux
@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0,
                    reason="needs unshare(1) as root (a PID namespace)")
def test_holder_in_another_pid_namespace_is_alive_by_its_pin(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.lock")
    # sh is PID 1 of the new namespace, python PID 2 ("; :" keeps sh from exec'ing it)
    holder = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
         f'"{sys.executable}" -c "$0" "$1" "$2"; :', HOLD, path, str(ROOT)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdin is not None
        line = holder.stdout.readline()
        if not line.strip():
            pytest.skip("unshare could not make a PID namespace here")
        assert int(line) == 2  # what the lock records
        st = inspect(path)
        assert st.record is not None and st.record.pid == 2
        assert st.state is State.HELD and st.liveness is Liveness.ALIVE
        assert st.reasons[0].code is Code.HOLDER_PINNED
        real = st.reasons[0].get("pid")
        assert isinstance(real, int) and real not in (2, os.getpid())
        # the PID check alone says the recorded PID 2 is another process (kthreadd) here
        assert any(r.code in (Code.PID_REUSED, Code.HOLDER_DEAD) for r in st.reasons[1:])
        with pytest.raises(NotStale):
            reclaim(path)
        assert inspect(path).record == st.record  # untouched
        holder.stdin.close()  # the holder exits: its pin goes with it
        holder.wait(timeout=30)
        after = inspect(path)
        assert after.state is State.STALE and after.liveness is not Liveness.ALIVE
        reclaim(path).release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


@linux
def test_a_pinned_lock_may_still_be_force_released(tmp_path: Path) -> None:
    path = str(tmp_path / "hung.lock")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, path, str(ROOT)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdin is not None
        pid = int(holder.stdout.readline())
        assert pinned_by(path, pid) == (True, pid)
        out = subprocess.run([sys.executable, "-m", "core", "release", path, "--force",
                              "--reason", "hung"], capture_output=True, text=True, cwd=ROOT,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        assert not os.path.exists(path)
    finally:
        holder.kill()
        holder.wait()


@linux
def test_another_users_flock_is_not_a_pin(tmp_path: Path) -> None:
    """The second account takes a shared flock on a dead holder's lock file in a shared
    directory: that is not the holder's pin, so the lock stays stale and reclaimable."""
    from tests.support.second_user import second_user

    uid, gid = second_user()
    if shutil.which("flock") is None:
        pytest.skip("flock(1) (util-linux) is needed")
    base = Path(tempfile.mkdtemp(prefix="lockwarden-pin-"))  # reachable by the 2nd account
    shared = base / "shared"
    shared.mkdir()
    os.chmod(base, 0o755)
    os.chmod(shared, 0o1777)
    path = str(shared / "job.lock")
    dead = subprocess.Popen([sys.executable, "-c", HOLD, path, str(ROOT)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert dead.stdout is not None
    dead.stdout.readline()
    dead.kill()  # the holder dies; its lock stays
    dead.wait()
    os.chmod(path, 0o644)  # readable by everyone, as a lock file in /tmp usually is
    spoof = subprocess.Popen(["flock", "-s", path, "sh", "-c", "echo ready; exec cat"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             user=uid, group=gid, extra_groups=[])
    try:
        assert spoof.stdout is not None and spoof.stdout.readline() == "ready\n"
        st = inspect(path)
        assert st.state is State.STALE and Code.HOLDER_PINNED not in {r.code for r in st.reasons}
        reclaim(path).release()
    finally:
        spoof.kill()
        spoof.wait()
        shutil.rmtree(base, ignore_errors=True)


@linux
def test_a_neighbours_flock_is_not_a_pin_even_of_the_same_user(tmp_path: Path) -> None:
    """A process of the same user takes ``flock -s`` on a dead holder's lock file: the kernel
    shows the neighbour's PID as the one that took that lock, not the recorded holder's, so it
    is not the holder's pin (docs/engine.md, "The holder's pin"): the lock stays stale and
    reclaimable while the neighbour holds its flock."""
    if shutil.which("flock") is None:
        pytest.skip("flock(1) (util-linux) is needed")
    path = str(tmp_path / "job.lock")
    dead = subprocess.Popen([sys.executable, "-c", HOLD, path, str(ROOT)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert dead.stdout is not None
    dead_pid = int(dead.stdout.readline())
    dead.kill()  # the holder dies; its lock stays
    dead.wait()
    spoof = subprocess.Popen(["flock", "-s", path, "sh", "-c", "echo ready; exec cat"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert spoof.stdout is not None and spoof.stdout.readline() == "ready\n"
        held = Path("/proc/locks").read_text()
        assert f" {spoof.pid} " in held  # the neighbour's flock is there, under its PID
        st = inspect(path)
        assert st.record is not None and st.record.pid == dead_pid
        assert st.state is State.STALE, st.reasons
        assert Code.HOLDER_PINNED not in {r.code for r in st.reasons}
        reclaim(path).release()
    finally:
        spoof.kill()
        spoof.wait()


@linux
def test_pin_is_found_when_the_lock_table_is_cut_off(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A /proc/locks read cut off at its byte bound (core/kernel/table.py: another user can
    fill the table) still finds the holder's pin on the lock file itself, through fdinfo; a
    lock recorded for another PID still has none."""
    from core.kernel import table

    monkeypatch.setattr(table, "TABLE_MAX_BYTES", 0)
    path = str(tmp_path / "a.lock")
    lk = Lock(path, ttl=60).acquire()
    assert not table.read_table().complete  # the pin's own line is in the table: cut
    assert pinned_by(path, os.getpid(), lk.token) == (True, os.getpid())
    lk.release()
    other = Lock(path, holder_pid=1).acquire()
    assert pinned_by(path, 1, other.token) == (False, None)
    other.release()
