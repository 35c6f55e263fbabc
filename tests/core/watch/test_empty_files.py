"""An empty lock file that nobody holds is free (docs/DESIGN.md, "Two kinds of locks";
docs/verdicts.md, "Empty files"; docs/engine.md, "Empty files"): what real filelock,
portalocker, fasteners and flock(1) leave when they release is ``free`` (exit 0, safe action
"leave it"), never "writing" an hour long, never "unreadable", never "stale"; a file a process
has open is being written; removing or replacing one holds its flock while the name goes; the
watcher walks ``/proc`` once per round for all empty files."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.codes import Code
from core.config import WatchSpec
from core.engine import exchange as ex
from core.engine import publish
from core.engine.lock import Lock
from core.engine.operations import force_release
from core.errors import LockHeld
from core.kernel import openfiles
from core.record import LockStatus, State
from core.tools import safe_action
from core.verdicts.inspect import inspect
from core.watch.rounds import OPEN_SCAN_GAP
from core.watch.watcher import ChangeSet, Watcher
from tests.support.cli import lw, one_line
from tests.support.kernel_holders import hold

linux = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux /proc")

LOCK_AND_RELEASE = r"""
import sys
kind, path = sys.argv[1], sys.argv[2]
if kind == "filelock":
    import filelock
    with filelock.FileLock(path):
        pass
elif kind == "portalocker":
    import portalocker
    with portalocker.Lock(path, "a"):
        pass
elif kind == "fasteners":
    import fasteners
    lock = fasteners.InterProcessLock(path)
    assert lock.acquire()
    lock.release()
"""
"""Take the library's lock on PATH and release it, the way a script using it does."""

CREATE_THEN_WAIT = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
print("ready", flush=True)
sys.stdin.read()
os.write(fd, b"pid=%d\ntimestamp=1\ntag=late\n" % os.getpid())
"""
"""sema's acquire: create with O_EXCL, then write (docs/specs/sema.txt); it stops in between."""

FILELOCK_TRY = r"""
import sys, filelock
try:
    filelock.FileLock(sys.argv[1], timeout=0).acquire()
except filelock.Timeout:
    sys.exit(3)
"""
"""A filelock user trying to take the lock once, at the moment the engine removes the file
(its ``open``, ``O_NONBLOCK``, gives up on the engine's lease and keeps no descriptor)."""


def _aged(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def _left_by(tool: str, path: Path) -> None:
    """Let a real ``tool`` lock ``path`` and release it (the process exits afterwards)."""
    if tool == "flock":
        if shutil.which("flock") is None:
            pytest.skip("flock(1) (util-linux) is needed")
        cmd = ["flock", str(path), "true"]
    else:
        cmd = [sys.executable, "-c", LOCK_AND_RELEASE, tool, str(path)]
    subprocess.run(cmd, check=True, timeout=60)
    assert path.exists() and path.stat().st_size == 0


@pytest.mark.slow
@linux
@pytest.mark.parametrize("tool", ["filelock", "portalocker", "fasteners", "flock"])
@pytest.mark.parametrize("age", [0.0, 7200.0])
def test_what_real_lockers_leave_is_free(lockdir: Path, tool: str, age: float) -> None:
    path = lockdir / "job.lock"
    _left_by(tool, path)
    _aged(path, age)
    out = lw("status", str(path), "--json")
    assert out.returncode == 0, out.stdout + out.stderr  # free: sema's exit code 0
    st = json.loads(out.stdout)
    assert (st["state"], st["locked"]) == ("free", False)
    assert [r["code"] for r in st["reasons"]] == ["empty_free"] and st["error"] is None
    text = lw("status", str(path))
    assert text.returncode == 0 and "state: free" in text.stdout
    assert "safe action: leave it" in text.stdout and "unreadable" not in text.stdout
    rows = json.loads(lw("list", str(lockdir), "--json").stdout)
    assert [(r["path"], r["state"]) for r in rows] == [(str(path), "free")]
    verdict = inspect(str(path))
    assert verdict.empty_free and verdict.present and safe_action(verdict).startswith("leave it")


@linux
def test_an_empty_file_a_process_has_open_is_being_written_then_free(
        lockdir: Path, procs: list[subprocess.Popen[str]]) -> None:
    path = lockdir / "w.lock"
    opener = hold(procs, "open", path)  # opens it, locks nothing
    for age in (0.0, 7200.0):  # whatever its age: its writer has it open
        _aged(path, age)
        st = inspect(str(path))
        assert st.state is State.WRITING and [r.code for r in st.reasons] == [Code.EMPTY_OPEN]
        assert st.evidence.pid == opener.pid and st.reasons[0].get("pid") == opener.pid
        assert st.evidence.process_name is not None and st.liveness.value == "alive"
    assert lw("status", str(path)).returncode == 1
    assert opener.stdin is not None
    opener.stdin.close()
    opener.wait(timeout=30)
    assert inspect(str(path)).state is State.FREE


@pytest.mark.slow
@linux
def test_a_sema_that_crashed_between_create_and_write_leaves_a_free_file(
        lockdir: Path) -> None:
    """docs/verdicts.md, "Empty files": nobody holds what it leaves, so it is free at once
    (not stale an hour later), and the next acquire takes it over."""
    path = lockdir / "sema.lock"
    creator = subprocess.Popen([sys.executable, "-c", CREATE_THEN_WAIT, str(path)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert creator.stdout is not None and creator.stdout.readline() == "ready\n"
        out = lw("try", str(path))
        assert out.returncode == 1 and path.read_bytes() == b""  # its writer is writing
        assert inspect(str(path)).state is State.WRITING
        creator.send_signal(signal.SIGKILL)
        creator.wait(timeout=30)
    finally:
        creator.kill()
        creator.wait()
    st = inspect(str(path))
    assert st.state is State.FREE and st.empty_free
    assert lw("status", str(path)).returncode == 0
    out = lw("try", str(path), "--tag", "after the crash")
    assert out.returncode == 0, out.stderr
    assert b"tag=after the crash" in path.read_bytes()
    assert lw("release", str(path)).returncode == 0


@linux
def test_removing_an_empty_file_holds_its_flock_until_it_is_gone(
        lockdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A filelock user that opens the file while the engine removes it cannot lock the inode
    that is losing its name: the engine holds the file's flock (core/engine/unheld.py) until
    the unlink. Without that flock the user would lock a dead inode while the next locker
    creates a new file: two holders."""
    path = lockdir / "cache.lock"
    _left_by("filelock", path)
    # old, so that its verdict does not hang on when the walk of /proc ran (a file changed
    # after the last walk, and younger than the writing grace, is "writing": 1 run in ~10
    # under load)
    _aged(path, 7200.0)
    tries: list[int] = []
    real_rename = os.rename

    def racing_rename(src: Any, dst: Any, *a: Any, **kw: Any) -> None:
        if str(src) == str(path) and not tries:  # the moment before the name goes
            tries.append(subprocess.run([sys.executable, "-c", FILELOCK_TRY, str(path)],
                                        timeout=60).returncode)
        real_rename(src, dst, *a, **kw)

    monkeypatch.setattr(publish.os, "rename", racing_rename)
    removed = force_release(str(path), reason="cleaning the cache")
    monkeypatch.undo()
    # filelock.Timeout: the engine held the flock. Its open broke the engine's lease for a
    # moment; it holds no descriptor (O_NONBLOCK, it gave up), so the engine took the lease
    # again and went on (core/engine/unheld.py)
    assert tries == [3]
    assert removed.empty_free and not path.exists()
    assert not [n for n in os.listdir(lockdir) if n.endswith((".lwrel", ".lwtmp"))]
    entries = [json.loads(x) for x in (lockdir / ".lock_audit.log").read_text().splitlines()]
    assert entries[-1]["operation"] == "force_release"


@linux
def test_taking_over_an_empty_file_holds_its_flock(lockdir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = lockdir / "take.lock"
    _left_by("portalocker", path)
    tries: list[int] = []
    real_exchange = ex.exchange

    def racing_exchange(a: str, b: str) -> None:
        if not tries:
            tries.append(subprocess.run([sys.executable, "-c", FILELOCK_TRY, str(path)],
                                        timeout=60).returncode)
        real_exchange(a, b)

    mode, mtime = path.stat().st_mode, path.stat().st_mtime_ns
    monkeypatch.setattr(ex, "exchange", racing_exchange)
    lk = Lock(path, tag="mine now").acquire(blocking=False)
    monkeypatch.undo()
    try:
        if ex.exchange_available():
            assert tries == [3]
        assert lk.reclaimed_from is not None and lk.reclaimed_from.empty_free
        assert b"tag=mine now" in path.read_bytes()
    finally:
        lk.release()
    # put back as it was: empty, its mode and time (docs/engine.md, "Empty files")
    st = path.stat()
    assert path.read_bytes() == b"" and (st.st_mode, st.st_mtime_ns) == (mode, mtime)


@pytest.mark.slow
@linux
def test_an_empty_file_someone_has_open_or_locked_is_never_removed(
        lockdir: Path, procs: list[subprocess.Popen[str]]) -> None:
    path = lockdir / "busy.lock"
    opener = hold(procs, "open", path)
    _aged(path, 7200)
    out = lw("release", "--force", "--reason", "old", str(path))
    assert out.returncode == 1 and "has it open" in one_line(out.stderr)
    with pytest.raises(LockHeld):
        Lock(path).acquire(blocking=False)
    assert path.exists() and path.read_bytes() == b""
    assert opener.stdin is not None
    opener.stdin.close()
    opener.wait(timeout=30)
    locker = hold(procs, "flock", path)
    out = lw("release", "--force", "--reason", "old", str(path))
    assert out.returncode == 1 and "kernel lock" in one_line(out.stderr)
    assert path.exists()
    assert locker.stdin is not None
    locker.stdin.close()
    locker.wait(timeout=30)
    out = lw("release", "--force", "--reason", "old", str(path))
    assert out.returncode == 0 and "removed" in out.stdout and not path.exists()


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[openfiles.OpenFiles]]:
    """Every walk of the open descriptors made meanwhile (the real walk, recorded)."""
    made: list[openfiles.OpenFiles] = []
    real = openfiles.scan_open_files

    def counted(*a: Any, **kw: Any) -> openfiles.OpenFiles:
        made.append(real(*a, **kw))
        return made[-1]

    monkeypatch.setattr(openfiles, "scan_open_files", counted)
    yield made


@linux
def test_watcher_walks_proc_once_for_all_empty_files_and_follows_their_holders(
        lockdir: Path, procs: list[subprocess.Popen[str]],
        walks: list[openfiles.OpenFiles]) -> None:
    import threading

    _left_by("filelock", lockdir / "000.lock")
    for i in range(1, 200):
        (lockdir / f"{i:03}.lock").write_bytes(b"")
    held, opened = lockdir / "held.lock", lockdir / "opened.lock"
    locker = hold(procs, "flock", held)
    opener = hold(procs, "open", opened)
    model: dict[str, LockStatus] = {}
    cond = threading.Condition()

    def on_change(cs: ChangeSet) -> None:
        with cond:
            model.update({s.path: s for s in (*cs.added, *cs.changed)})
            cond.notify_all()

    def until(path: Path, state: State) -> None:
        with cond:
            assert cond.wait_for(lambda: model[str(path)].state is state, timeout=30), state

    w = Watcher([WatchSpec(str(lockdir))], on_change=on_change, liveness_interval=0.2)
    w.start()
    try:
        model.update({s.path: s for s in w.snapshot()})
        assert len(walks) == 1  # one walk of /proc for the 202 empty files of the first scan
        free = [s for s in model.values() if s.state is State.FREE]
        assert len(free) == 200 and all(s.empty_free and s.present for s in free)
        assert model[str(held)].state is State.HELD
        assert model[str(held)].kernel_pid == locker.pid
        assert model[str(opened)].state is State.WRITING
        # the opener is named by a walk that began after the file was made: a file made within
        # CLOCK_SLACK of the first scan's walk is "writing" by its age until the next pass's
        # walk names it (docs/watching.md, "Empty files")
        with cond:
            assert cond.wait_for(lambda: model[str(opened)].evidence.pid == opener.pid,
                                 timeout=30), model[str(opened)]
        assert model[str(opened)].state is State.WRITING
        assert not any(s.state in (State.UNREADABLE, State.STALE) for s in model.values())
        for p in (locker, opener):
            assert p.stdin is not None
            p.stdin.close()
            p.wait(timeout=30)
        until(held, State.FREE)  # no file event: the liveness pass looks at the kernel
        until(opened, State.FREE)
        # bounded: one walk serves every round for OPEN_SCAN_GAP seconds
        assert all(b.taken_at - a.taken_at >= OPEN_SCAN_GAP
                   for a, b in itertools.pairwise(walks))
    finally:
        w.close()
