"""The protocol of the tools that lock files with ``flock``/``lockf`` (docs/engine.md, "Peers'
kernel locks"; core/engine/unheld.py), step by step with real processes: a file taken out of
its path is unlinked, never kept under another name; a process whose ``open`` waits on the
engine's lease at the moment of the move finds the file put back at the path; a lock that
such tools hold or wait for is released by emptying it in place. Linux (leases, /proc)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.engine import exchange as ex
from core.engine import publish
from core.engine.lock import Lock
from core.engine.operations import force_release
from core.errors import LockHeld
from tests.support.kernel_holders import hold
from tests.support.protected import OLD

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="leases and /proc/<pid>/wchan are Linux's")

OPENER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)  # as portalocker, fasteners open it
st = os.fstat(fd)
print(st.st_ino, st.st_nlink, flush=True)
sys.stdin.read()
"""
"""A blocking ``open`` of PATH, as portalocker's and fasteners' (they keep the descriptor and
lock it later): prints the inode it got and its link count."""


def _waiting_on_lease(pid: int) -> bool:
    with open(f"/proc/{pid}/wchan") as f:
        return "break_lease" in f.read()


@pytest.fixture
def opener() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        p.kill()
        p.wait()


def _open_during(path: Path, started: list[subprocess.Popen[str]]) -> None:
    """Start a blocking opener of ``path`` and return once its ``open`` waits on the engine's
    lease (the kernel shows it in ``__break_lease``)."""
    p = subprocess.Popen([sys.executable, "-c", OPENER, str(path)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    started.append(p)
    deadline = time.monotonic() + 30
    while not _waiting_on_lease(p.pid):  # no event tells it: look at the kernel's wait
        assert time.monotonic() < deadline and p.poll() is None, "the open never waited"
        time.sleep(0.005)


def _got(p: subprocess.Popen[str]) -> tuple[int, int]:
    assert p.stdout is not None
    ino, nlink = p.stdout.readline().split()
    return int(ino), int(nlink)


def test_an_open_waiting_at_the_move_finds_the_file_put_back(
        lockdir: Path, monkeypatch: pytest.MonkeyPatch,
        opener: list[subprocess.Popen[str]]) -> None:
    path = lockdir / "cache.lock"
    path.write_bytes(b"")
    os.utime(path, (OLD, OLD))
    ino = path.stat().st_ino
    real_rename = os.rename

    def racing_rename(src: Any, dst: Any, *a: Any, **kw: Any) -> None:
        if str(src) == str(path) and not opener:
            _open_during(path, opener)
        real_rename(src, dst, *a, **kw)

    monkeypatch.setattr(publish.os, "rename", racing_rename)
    with pytest.raises(LockHeld, match="opened it meanwhile"):
        force_release(str(path), reason="cleaning")
    monkeypatch.undo()
    got, _nlink = _got(opener[0])
    assert got == ino  # its file is the one at the path
    # linked there only once the put-back is done: the lease goes back (Hold.retake) before
    # the moved-out name is unlinked, so the opener's own fstat may still count both links
    assert (path.stat().st_ino, path.stat().st_nlink) == (ino, 1)
    assert not [n for n in os.listdir(lockdir) if n.endswith(".lwrel")]


@pytest.mark.skipif(not ex.exchange_available(), reason="no atomic exchange here")
def test_an_open_waiting_at_the_exchange_finds_the_file_exchanged_back(
        lockdir: Path, monkeypatch: pytest.MonkeyPatch,
        opener: list[subprocess.Popen[str]]) -> None:
    path = lockdir / "job.lock"
    path.write_bytes(b"")
    os.utime(path, (OLD, OLD))
    ino = path.stat().st_ino
    real_exchange = ex.exchange

    def racing_exchange(a: str, b: str) -> None:
        if not opener:
            _open_during(path, opener)
        real_exchange(a, b)

    monkeypatch.setattr(ex, "exchange", racing_exchange)
    with pytest.raises(LockHeld):
        Lock(path, tag="mine").acquire(blocking=False)
    monkeypatch.undo()
    assert _got(opener[0]) == (ino, 1)
    assert path.stat().st_ino == ino and path.read_bytes() == b""
    assert not [n for n in os.listdir(lockdir) if n.endswith((".lwtmp", ".lwrel"))]


@pytest.mark.parametrize("peer", ["flock", "posix"])
def test_a_lock_its_peers_hold_is_released_by_emptying_it_in_place(
        lockdir: Path, peer: str, procs: list[subprocess.Popen[str]]) -> None:
    """Lockwarden published its lock where a flock-style tool then locked it (flock EX, as
    filelock and portalocker; POSIX lockf, as fasteners): the release leaves the inode at the
    path, emptied, for them."""
    path = lockdir / "shared.lock"
    lk = Lock(path, tag="ours").acquire(blocking=False)
    ino = path.stat().st_ino
    assert lk._held is not None
    from core.kernel import pin

    pin.unpin(lk._held.pin)  # let the peer's exclusive lock in, as before our pin was taken
    lk._held = lk._held._replace(pin=None)
    locker = hold(procs, peer, path)
    lk.release()
    assert path.stat().st_ino == ino and path.read_bytes() == b""
    assert locker.poll() is None


FILELOCK_TRY = r"""
import sys, filelock
try:
    filelock.FileLock(sys.argv[1], timeout=0).acquire()
except filelock.Timeout:
    sys.exit(3)
"""
"""A real filelock user trying the lock once: exit 3 when a kernel lock keeps it out."""


def test_our_lock_reaches_the_path_already_pinned(lockdir: Path) -> None:
    """An acquire that takes over filelock's empty file: a filelock user that opens the path
    the moment after the exchange, before anything else of ours runs, meets our pin (its
    ``flock`` fails: Timeout). The pin used to be taken after the exchange, and in that gap
    the user's exclusive ``flock`` got our file: two holders (the interleaving checker's
    unbounded pass found it; docs/engine.md, "Every interleaving checked")."""
    from core import seam

    path = lockdir / "job.lock"
    path.write_bytes(b"")
    os.utime(path, (OLD, OLD))
    tries: list[int] = []
    exchanged = False

    def hook(kind: str, subject: str) -> None:
        nonlocal exchanged
        if kind == "exchange" and subject == str(path):
            exchanged = True
        elif exchanged and not tries:  # the first step after the exchange
            tries.append(subprocess.run([sys.executable, "-c", FILELOCK_TRY, str(path)],
                                        timeout=60).returncode)

    lk = Lock(str(path))
    seam.install(hook)
    try:
        lk.acquire(blocking=False)
    finally:
        seam.install(None)
    try:
        assert tries == [3], "the filelock user got the lock we were taking"
    finally:
        lk.release()


def _in_flock_wait(pid: int) -> bool:
    """flock(1) (PID ``pid``) is blocked in ``flock`` (the kernel's wait channel)."""
    with open(f"/proc/{pid}/wchan") as f:
        return "lock_inode_wait" in f.read()


def _flock1_file(pid: int, path: Path) -> str:
    """What flock(1) (PID ``pid``) has open for ``path``: the link's text, ``… (deleted)``
    once the file it opened has no name left."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
        if target.startswith(str(path)):
            return target
    raise AssertionError(f"flock(1) has nothing open for {path}")


def test_a_refresh_keeps_the_file_flock1_waits_on(
        lockdir: Path, procs: list[subprocess.Popen[str]]) -> None:
    """An acquire took over flock-style tools' empty file; a real flock(1) opens the path
    and waits on our pin. A refresh rewrites the lock in place: flock(1) keeps waiting on the
    file at the path, and gets it once we release. It used to exchange a renewed file in,
    leaving flock(1) the old inode, nameless, to lock while we held the new one: two holders
    (the interleaving checker's unbounded pass found it; docs/engine.md, "Refresh")."""
    path = lockdir / "job.lock"
    path.write_bytes(b"")
    os.utime(path, (OLD, OLD))
    lk = Lock(str(path), ttl=600).acquire(blocking=False)
    ino = path.stat().st_ino
    waiter = subprocess.Popen(["flock", str(path), "-c", "true"], text=True)
    procs.append(waiter)
    deadline = time.monotonic() + 30
    while not _in_flock_wait(waiter.pid):  # no event tells it: look at the kernel's wait
        assert time.monotonic() < deadline and waiter.poll() is None, "flock(1) never waited"
        time.sleep(0.005)
    lk.refresh()
    assert lk.token is not None
    assert path.stat().st_ino == ino and lk.token.encode() in path.read_bytes()  # same file
    assert _flock1_file(waiter.pid, path) == str(path)  # flock(1) still waits on it
    assert _in_flock_wait(waiter.pid)
    lk.release()
    assert waiter.wait(timeout=30) == 0
    assert path.stat().st_ino == ino and path.read_bytes() == b""


FILELOCK3_TRY = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC)  # filelock 3.x's open
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    sys.exit(3)
"""
"""filelock 3.x's try (``UnixFileLock._acquire``: ``O_TRUNC``, then ``flock``): exit 3 when a
kernel lock keeps it out; its open has emptied the file either way."""


def test_a_truncating_open_does_not_lose_our_lock_on_the_empty_file(lockdir: Path) -> None:
    """filelock 3.x empties whatever file it opens before it tries its ``flock``. On the empty
    file an acquire took over, our pin keeps it out -- and our record is gone: the refresh
    writes it again and the release empties the file as it would have, instead of saying
    the lock was lost."""
    path = lockdir / "job.lock"
    path.write_bytes(b"")
    os.utime(path, (OLD, OLD))
    lk = Lock(str(path), ttl=600).acquire(blocking=False)
    ino = path.stat().st_ino
    for _ in range(2):
        tried = subprocess.run([sys.executable, "-c", FILELOCK3_TRY, str(path)], timeout=60)
        assert tried.returncode == 3 and path.read_bytes() == b""  # kept out, record gone
        lk.refresh()
        assert lk.token is not None and lk.token.encode() in path.read_bytes()
        assert path.stat().st_ino == ino
    subprocess.run([sys.executable, "-c", FILELOCK3_TRY, str(path)], timeout=60)
    lk.release()
    assert not lk.lost.is_set()
    assert path.stat().st_ino == ino and path.read_bytes() == b""
    assert path.stat().st_mtime == OLD


def test_a_release_that_emptied_our_lock_is_not_taken_for_a_truncating_open(
        lockdir: Path) -> None:
    """A forced release empties our lock on the empty file in place and gives it back the
    replaced file's modification time: the holder's refresh then finds it lost -- it does not
    write its record back as after filelock 3.x's truncating open -- and so does its release."""
    from core.errors import LockLost

    path = lockdir / "job.lock"
    path.write_bytes(b"")
    os.utime(path, (OLD, OLD))
    lk = Lock(str(path), ttl=600).acquire(blocking=False)
    force_release(str(path), reason="taken back")
    assert path.read_bytes() == b"" and path.stat().st_mtime == OLD
    with pytest.raises(LockLost):
        lk.refresh()
    assert lk.lost.is_set() and path.read_bytes() == b""
    lk = Lock(str(path), ttl=600).acquire(blocking=False)
    force_release(str(path), reason="taken back")
    with pytest.raises(LockLost):
        lk.release()
    assert path.read_bytes() == b""


def test_an_in_place_refresh_never_cuts_the_record(lockdir: Path) -> None:
    """A renewed record shorter than the one it replaces is padded with newlines, which every
    format ignores, so the file is never cut: a process killed in the write leaves one whole
    record, not the new one followed by the old one's tail."""
    from core.formats import parse

    path = lockdir / "job.lock"
    path.write_bytes(b"")
    os.utime(path, (OLD, OLD))
    lk = Lock(str(path), ttl=100_000).acquire(blocking=False)
    before = path.read_bytes()
    lk.ttl = 60  # "ttl=60" is shorter than "ttl=100000"
    lk.refresh()
    after = path.read_bytes()
    assert len(after) == len(before) and after.endswith(b"\n\n")
    record = parse(after, str(path))
    assert record.token == lk.token and record.ttl == 60
    lk.release()
    assert path.read_bytes() == b""
