"""Unit tests of the engine's lock operations (core.engine.lock) on real files and processes."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

import core
from core import audit
from core.engine.exchange import DirGuard, GuardTimeout, exchange, exchange_available
from core.engine.lock import Lock
from core.engine.operations import force_release, release_path
from core.engine.reclaiming import reclaim
from core.engine.waiting import wait
from core.errors import LockError, LockHeld, LockLost, LockTimeout, NotStale, UnreadableError
from core.formats import parse
from core.formats.taskmcp import ALLOWED_METADATA, FILE_MODE
from core.record import Liveness, State
from core.tempfiles import parse_temp_name
from core.verdicts.inspect import inspect
from tests.support.cli import dead_pid
from tests.support.kernel_holders import HOLDER

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="uses fork (Linux)")
CTX = multiprocessing.get_context("fork") if sys.platform == "linux" else None


def _ops(lockdir: Path) -> list[str]:
    return [str(e.operation) for e in audit.read(str(lockdir))]


def _entries(lockdir: Path, op: str) -> list[audit.AuditEntry]:
    return [e for e in audit.read(str(lockdir)) if e.operation == op]


def _leftovers(lockdir: Path) -> list[str]:
    return sorted(n for n in os.listdir(lockdir) if n != ".lock_audit.log")


def _die_holding(path: str, fmt: str = "sema", ttl: float | None = None) -> None:
    Lock(path, format=fmt, ttl=ttl).acquire(blocking=False)
    os._exit(0)


def make_stale(path: Path, fmt: str = "sema", ttl: float | None = None) -> None:
    """A Lockwarden lock whose holder (a forked child) exited without releasing."""
    assert CTX is not None
    p = CTX.Process(target=_die_holding, args=(str(path), fmt, ttl))
    p.start()
    p.join(30)
    assert p.exitcode == 0
    assert path.exists()


def _hold(path: str, ready: object, done: object) -> None:
    with Lock(path, tag="child"):
        ready.set()  # type: ignore[attr-defined]
        done.wait(30)  # type: ignore[attr-defined]
    os._exit(0)


# -- acquire / release --------------------------------------------------------------------


def test_acquire_writes_complete_lock_and_release_removes_it(lockdir: Path) -> None:
    path = lockdir / "a.lock"
    lk = Lock(path, tag="deploy\nv1", ttl=60)
    assert lk.acquire() is lk
    assert lk.is_held and lk.token is not None and len(lk.token) == 32
    data = path.read_bytes()
    rec = parse(data, str(path))
    assert rec.format == "sema"
    assert rec.pid == os.getpid()
    assert rec.tag == "deploy v1"  # control characters become spaces: no injected line
    assert rec.token == lk.token
    assert rec.host == socket.gethostname()
    assert rec.ttl == 60
    assert rec.start is not None
    assert data.startswith(b"pid=")
    assert stat.S_IMODE(path.stat().st_mode) & 0o644 == stat.S_IMODE(path.stat().st_mode)
    assert _leftovers(lockdir) == ["a.lock"]  # the temp name is gone
    st = inspect(str(path))
    assert st.state is State.HELD and st.liveness is Liveness.ALIVE
    lk.release()
    assert not lk.is_held
    assert not path.exists()
    assert _leftovers(lockdir) == []
    assert _ops(lockdir) == ["acquire", "release"]
    assert _entries(lockdir, "acquire")[0].details["token"] == rec.token


def test_context_manager_and_reacquire_same_object(lockdir: Path) -> None:
    lk = Lock(lockdir / "b.lock")
    with lk as held:
        assert held is lk and lk.is_held
        first = lk.token
    assert not lk.is_held and not (lockdir / "b.lock").exists()
    with lk:
        assert lk.token != first
    lk.acquire(blocking=False)
    with pytest.raises(LockError):
        lk.acquire(blocking=False)  # not re-entrant
    lk.release()
    with pytest.raises(LockError):
        lk.release()  # not held


@pytest.mark.parametrize("fmt", ["task-mcp", "af-ledger"])
def test_other_writable_formats(lockdir: Path, fmt: str) -> None:
    path = lockdir / "c.lock"
    with Lock(path, format=fmt, tag="t") as lk:
        rec = parse(path.read_bytes(), str(path))
        assert rec.format == fmt
        assert rec.token == lk.token
        assert rec.pid == os.getpid()
        if fmt == "task-mcp":
            assert rec.holder == f"pid-{os.getpid()}@{socket.gethostname()}"
            assert rec.ttl == 3600  # spec 004 default: local / interactive
            assert rec.metadata["user_identity"]
            assert rec.metadata["environment"] == "local"
        assert inspect(str(path)).state is State.HELD
    assert not path.exists()


def test_lockheld_carries_holder_status(lockdir: Path) -> None:
    path = lockdir / "d.lock"
    with Lock(path, tag="first"):
        with pytest.raises(LockHeld) as ei:
            Lock(path).acquire(blocking=False)
        st = ei.value.status
        assert st is not None and st.state is State.HELD
        assert st.record is not None and st.record.pid == os.getpid()
        assert st.record.tag == "first"
    assert "acquire_refused" in _ops(lockdir)


def test_timeout(lockdir: Path) -> None:
    path = lockdir / "e.lock"
    with Lock(path):
        t0 = time.monotonic()
        with pytest.raises(LockTimeout) as ei:
            Lock(path).acquire(timeout=0.3)
        assert time.monotonic() - t0 >= 0.3
        assert ei.value.status is not None and ei.value.status.state is State.HELD
        with pytest.raises(LockTimeout):
            wait(path, timeout=0.05)


def test_timeout_message_names_the_path_then_the_verdict(lockdir: Path) -> None:
    """The message is the one renderer's text (core/engine/waiting.py): "waiting for PATH:
    held by ...", never "waiting for PATH is held by"."""
    path = lockdir / "msg.lock"
    with Lock(path), pytest.raises(LockTimeout) as ei:
        Lock(path).acquire(timeout=0.05)
    assert str(ei.value).startswith(f"timed out after 0.05 s waiting for {path}: held by PID ")


def test_lock_lost_when_file_replaced_and_foreign_file_kept(lockdir: Path) -> None:
    path = lockdir / "f.lock"
    lk = Lock(path).acquire()
    foreign = b"pid=1\ntimestamp=1700000000\ntag=someone else\n"
    (lockdir / "other").write_bytes(foreign)
    os.replace(lockdir / "other", path)  # a buggy tool renames over our lock
    with pytest.raises(LockLost):
        lk.release()
    assert path.read_bytes() == foreign  # never deleted
    assert not lk.is_held and lk.lost.is_set()
    assert _entries(lockdir, "release_refused")[-1].result == "lost"
    with pytest.raises(LockLost):
        lk.release()


def test_release_never_deletes_a_successor(lockdir: Path) -> None:
    path = lockdir / "g.lock"
    a = Lock(path).acquire()
    os.unlink(path)  # someone broke A's lock ...
    b = Lock(path).acquire(blocking=False)  # ... and B took it
    with pytest.raises(LockLost):
        a.release()
    assert parse(path.read_bytes()).token == b.token
    b.release()
    assert not path.exists()


@pytest.mark.parametrize("kind", ["symlink", "dangling", "fifo", "dir"])
def test_non_regular_lock_paths_refused_nothing_written(lockdir: Path, tmp_path: Path,
                                                        kind: str) -> None:
    path = lockdir / "h.lock"
    target = tmp_path / "target"
    if kind == "symlink":
        target.write_text("precious")
        path.symlink_to(target)
    elif kind == "dangling":
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    before = sorted(os.listdir(lockdir))
    for call in (
        lambda: Lock(path).acquire(blocking=False),
        lambda: Lock(path).acquire(timeout=1),
        lambda: reclaim(path, force=True),
        lambda: force_release(path),
        lambda: release_path(path, pid=os.getpid(), force=True),
        lambda: wait(path, timeout=1),
    ):
        with pytest.raises(UnreadableError):
            call()
    assert sorted(os.listdir(lockdir)) == before
    if kind == "symlink":
        assert target.read_text() == "precious"
    if kind == "dangling":
        assert not target.exists()


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UnreadableError, match="does not exist"):
        Lock(tmp_path / "nope" / "x.lock").acquire()
    (tmp_path / "file").write_text("")
    with pytest.raises(UnreadableError, match="not a directory"):
        Lock(tmp_path / "file" / "x.lock").acquire()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        Lock("/tmp/x.lock", format="pidfile")
    with pytest.raises(ValueError):
        Lock("/tmp/x.lock", ttl=-1)
    with pytest.raises(ValueError):
        Lock("/tmp/x.lock", auto_refresh=True)


def test_core_exports() -> None:
    assert core.Lock is Lock and core.reclaim is reclaim and core.wait is wait
    assert core.force_release is force_release and core.release_path is release_path


# -- refresh ------------------------------------------------------------------------------


def test_refresh_keeps_file_present_and_detects_loss(lockdir: Path) -> None:
    path = lockdir / "r.lock"
    lk = Lock(path, format="task-mcp", ttl=30).acquire()
    seen: list[State] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            st = inspect(str(path))
            if st.state is State.UNREADABLE and "changed while being read" in (st.error or ""):
                continue  # the reader's own lstat/open race with the exchange: a retry
            seen.append(st.state)

    t = threading.Thread(target=reader)
    t.start()
    try:
        first = lk.record
        for _ in range(30):
            lk.refresh()
    finally:
        stop.set()
        t.join()
    assert seen and set(seen) == {State.HELD}  # never free, never partial
    assert lk.record is not None and first is not None
    assert lk.record.acquired_at is not None and first.acquired_at is not None
    assert lk.record.acquired_at >= first.acquired_at
    assert parse(path.read_bytes()).token == lk.token
    assert _leftovers(lockdir) == ["r.lock"]
    # someone replaces the file: refresh detects it and never overwrites the new file
    os.unlink(path)
    other = Lock(path).acquire()
    with pytest.raises(LockLost):
        lk.refresh()
    assert lk.lost.is_set() and not lk.is_held
    assert parse(path.read_bytes()).token == other.token
    assert _entries(lockdir, "lost")
    other.release()


def test_auto_refresh_renews_and_reports_loss(lockdir: Path) -> None:
    path = lockdir / "ar.lock"
    lk = Lock(path, format="task-mcp", ttl=0.4, auto_refresh=True).acquire()
    assert lk.record is not None and lk.record.acquired_at is not None
    first = lk.record.acquired_at
    deadline = time.monotonic() + 10
    while len(_entries(lockdir, "refresh")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_entries(lockdir, "refresh")) >= 2
    assert lk.is_held and not lk.lost.is_set()
    renewed = parse(path.read_bytes())
    assert renewed.token == lk.token
    # the lease moved, the age did not (docs/formats.md, "Refresh: age and expiry")
    assert renewed.acquired_at == first
    expiry = renewed.effective_expiry()
    assert expiry is not None and lk.ttl is not None
    assert expiry > first + timedelta(seconds=lk.ttl)
    os.unlink(path)
    (lockdir / "ar.lock").write_text("pid=1\ntimestamp=1\n")
    assert lk.lost.wait(10)
    assert not lk.is_held
    assert path.read_text() == "pid=1\ntimestamp=1\n"  # not re-taken, not overwritten
    assert _entries(lockdir, "lost")
    with pytest.raises(LockLost):
        lk.release()


# -- release_path / force_release -----------------------------------------------------------


def test_release_path_checks_pid(lockdir: Path) -> None:
    path = lockdir / "rp.lock"
    lk = Lock(path, holder_pid=os.getppid()).acquire()
    with pytest.raises(LockLost):
        release_path(path, pid=os.getpid())
    assert path.exists()
    st = release_path(path, pid=os.getppid())
    assert st.record is not None and st.record.token == lk.token
    assert not path.exists()
    with pytest.raises(LockLost):
        release_path(path, pid=os.getppid())
    Lock(path).acquire()
    st = release_path(path, pid=1, force=True, reason="cleanup")
    assert not path.exists()
    entry = _entries(lockdir, "force_release")[-1]
    assert entry.details["reason"] == "cleanup"
    assert entry.details["displaced"]["pid"] == os.getpid()


def test_force_release_records_displaced_holder(lockdir: Path) -> None:
    path = lockdir / "fr.lock"
    held = Lock(path, tag="victim").acquire()
    st = force_release(path, reason="stuck deploy")
    assert st.record is not None and st.record.tag == "victim"
    assert not path.exists()
    e = _entries(lockdir, "force_release")[-1]
    assert e.details["displaced"]["tag"] == "victim" and e.details["reason"] == "stuck deploy"
    with pytest.raises(LockLost):
        held.release()
    assert force_release(path).state is State.FREE


# -- reclaim ------------------------------------------------------------------------------


@linux_only
def test_reclaim_stale_and_refuse_live(lockdir: Path) -> None:
    path = lockdir / "s.lock"
    with Lock(path):
        with pytest.raises(NotStale) as ei:
            reclaim(path)
        assert ei.value.status is not None and ei.value.status.state is State.HELD
    make_stale(path)
    assert inspect(str(path)).state is State.STALE
    lk = reclaim(path, reason="holder crashed")
    assert lk.is_held and lk.reclaimed_from is not None
    assert lk.reclaimed_from.state is State.STALE
    assert parse(path.read_bytes()).token == lk.token
    e = _entries(lockdir, "reclaim")[-1]
    assert e.details["reason"] == "holder crashed"
    assert e.details["displaced"]["liveness"] in ("dead", "reused")
    assert _leftovers(lockdir) == ["s.lock"]
    lk.release()
    # a blocking acquire that finds a stale lock reclaims it by the same path
    make_stale(path)
    lk2 = Lock(path).acquire(timeout=5)
    assert lk2.reclaimed_from is not None
    lk2.release()
    # force reclaim of a live lock
    victim = Lock(path).acquire()
    lk3 = reclaim(path, force=True, reason="operator")
    assert lk3.is_held
    with pytest.raises(LockLost):
        victim.release()
    lk3.release()
    assert "reclaim_refused" in _ops(lockdir)


def _taskmcp_lock(path: Path, *, owner: str, since_ms: int, ttl: float,
                  metadata: dict[str, object] | None = None) -> None:
    obj: dict[str, object] = {"owner": owner, "since": since_ms, "ttl": ttl}
    if metadata is not None:
        obj["metadata"] = metadata
    path.write_text(json.dumps(obj))


def test_taskmcp_reclaim_matrix(lockdir: Path) -> None:
    """spec 004 "Stale Lock Reclaim Algorithm", end to end through core.reclaim."""
    from core.formats.taskmcp import current_user

    path = lockdir / "t.lock"
    now_ms = int(time.time() * 1000)

    def new_meta() -> dict[str, object]:
        """The reclaim note: top-level keys (metadata holds only Task MCP's allowed fields)."""
        obj = json.loads(path.read_bytes())
        assert set(obj["metadata"]) <= set(ALLOWED_METADATA)
        return {k: obj.get(k) for k in ("reclaimed_from", "reclaimed_reason")}

    # LOCK_EXPIRED: TTL passed (the holder may be anywhere)
    _taskmcp_lock(path, owner="ci-pipeline-gh-456", since_ms=now_ms - 120_000, ttl=60)
    lk = reclaim(path)
    assert new_meta()["reclaimed_from"] == "ci-pipeline-gh-456"
    assert new_meta()["reclaimed_reason"] == "LOCK_EXPIRED"
    assert _entries(lockdir, "reclaim")[-1].details["decision"] == "LOCK_EXPIRED"
    lk.release()

    # SAME_USER: not expired, same real OS user
    _taskmcp_lock(path, owner="user-x@session-1", since_ms=now_ms, ttl=3600,
                  metadata={"user_identity": current_user(), "environment": "local"})
    lk = reclaim(path)
    assert new_meta()["reclaimed_reason"] == "SAME_USER"
    lk.release()

    # another user, not expired: LOCK_HELD (HIGHER_PRIVILEGE / EMERGENCY_OVERRIDE are off by
    # default: they rest on self-declared fields)
    theirs: dict[str, object] = {
        "user_identity": "someone-else@example.org", "environment": "cloud",
        "purpose": "interactive",
    }
    _taskmcp_lock(path, owner="user-someone@session-2", since_ms=now_ms, ttl=3600,
                  metadata=theirs)
    before = path.read_bytes()
    with pytest.raises(NotStale) as ei:
        reclaim(path)
    assert ei.value.decision == "LOCK_HELD"
    assert path.read_bytes() == before
    assert _entries(lockdir, "reclaim_refused")[-1].details["decision"] == "LOCK_HELD"

    # an explicit force takes it, and says so
    lk = reclaim(path, force=True, reason="operator override")
    assert new_meta()["reclaimed_from"] == "user-someone@session-2"
    assert new_meta()["reclaimed_reason"] == "FORCE"
    e = _entries(lockdir, "reclaim")[-1]
    assert e.details["matrix"] == "LOCK_HELD" and e.details["reason"] == "operator override"
    lk.release()


@linux_only
def test_taskmcp_holder_dead(lockdir: Path) -> None:
    path = lockdir / "td.lock"
    make_stale(path, fmt="task-mcp", ttl=3600)
    lk = reclaim(path)
    obj = json.loads(path.read_bytes())
    assert obj["reclaimed_reason"] == "HOLDER_DEAD"
    assert "reclaimed_reason" not in obj["metadata"]
    assert stat.S_IMODE(path.stat().st_mode) == FILE_MODE
    lk.release()


# -- wait ---------------------------------------------------------------------------------


def test_wait_returns_when_released(lockdir: Path) -> None:
    path = lockdir / "w.lock"
    assert wait(path).state is State.FREE
    lk = Lock(path).acquire()
    threading.Timer(0.2, lk.release).start()
    assert wait(path, timeout=10).state is State.FREE


def test_blocking_acquire_in_thread_wakes_on_release(lockdir: Path) -> None:
    path = lockdir / "bt.lock"
    holder = Lock(path).acquire()
    got = threading.Event()

    def waiter() -> None:
        with Lock(path).acquire(timeout=20):
            got.set()

    t = threading.Thread(target=waiter)
    t.start()
    assert not got.wait(0.2)
    holder.release()
    t.join(20)
    assert got.is_set()


# -- primitives ---------------------------------------------------------------------------


@pytest.mark.skipif(not exchange_available(), reason="no atomic exchange on this platform")
def test_exchange_swaps_two_names(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("A")
    b.write_text("B")
    exchange(str(a), str(b))
    assert a.read_text() == "B" and b.read_text() == "A"
    with pytest.raises(FileNotFoundError):
        exchange(str(a), str(tmp_path / "missing"))


def _guard_holder(d: str, ready: object, done: object) -> None:
    with DirGuard(d):
        ready.set()  # type: ignore[attr-defined]
        done.wait(30)  # type: ignore[attr-defined]
    os._exit(0)


@linux_only
def test_dir_guard_excludes_other_processes_with_bounded_wait(lockdir: Path) -> None:
    assert CTX is not None
    ready, done = CTX.Event(), CTX.Event()
    p = CTX.Process(target=_guard_holder, args=(str(lockdir), ready, done))
    p.start()
    try:
        assert ready.wait(30)
        with pytest.raises(GuardTimeout), DirGuard(str(lockdir), timeout=0.2):
            pass  # pragma: no cover
    finally:
        done.set()
        p.join(30)
    with DirGuard(str(lockdir)) as g:
        assert g.held


@linux_only
def test_held_by_other_process_then_free(lockdir: Path) -> None:
    assert CTX is not None
    path = lockdir / "o.lock"
    ready, done = CTX.Event(), CTX.Event()
    p = CTX.Process(target=_hold, args=(str(path), ready, done))
    p.start()
    try:
        assert ready.wait(30)
        with pytest.raises(LockHeld) as ei:
            Lock(path).acquire(blocking=False)
        assert ei.value.status is not None and ei.value.status.record is not None
        assert ei.value.status.record.pid == p.pid
        with pytest.raises(NotStale):
            reclaim(path)
    finally:
        done.set()
        p.join(30)
    with Lock(path).acquire(timeout=10) as lk:
        assert lk.reclaimed_from is None
    assert all(parse_temp_name(n) is None for n in _leftovers(lockdir))


# -- other tools' locks ---------------------------------------------------------------------


def test_foreign_sema_lock_policy(lockdir: Path) -> None:
    """Another tool's lock (no token): held while young even if its PID is gone (sema records
    its short-lived CLI's PID); stale -- and reclaimed by acquire -- once older than
    stale_after (docs/DESIGN.md default stale policy)."""
    path = lockdir / "sema.lock"
    dead = dead_pid()
    path.write_text(f"pid={dead}\ntimestamp={int(time.time())}\ntag=sema-cli\n")
    with pytest.raises(LockHeld) as ei:
        Lock(path).acquire(blocking=False)
    assert ei.value.status is not None and ei.value.status.state is State.HELD
    with pytest.raises(LockTimeout):
        wait(path, timeout=0.05)
    path.write_text(f"pid={dead}\ntimestamp={int(time.time()) - 7200}\ntag=sema-cli\n")
    assert wait(path, timeout=5).state is State.STALE  # a stale lock can be taken: no wait
    lk = Lock(path).acquire(blocking=False)
    assert lk.reclaimed_from is not None and lk.reclaimed_from.record is not None
    assert lk.reclaimed_from.record.tag == "sema-cli"
    lk.release()


def test_empty_file_of_a_writer_is_waited_for(lockdir: Path) -> None:
    """An empty file a process has open is being written (docs/DESIGN.md, "Two kinds of
    locks"): refused while the writer has it open; taken once the writer is gone and the
    empty file is free (replaced holding its flock, core/engine/unheld.py)."""
    path = lockdir / "writing.lock"
    # a sema peer created it with O_EXCL and is still writing: it keeps the file open
    writer = subprocess.Popen([sys.executable, "-c", HOLDER, "open", str(path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
        with pytest.raises(LockHeld) as ei:
            Lock(path).acquire(blocking=False)
        assert ei.value.status is not None and ei.value.status.state is State.WRITING
        assert ei.value.status.evidence.pid == writer.pid
        assert path.read_bytes() == b""
        assert writer.stdin is not None
        threading.Timer(0.2, writer.stdin.close).start()  # the writer goes away, writing nothing
        lk = Lock(path).acquire(timeout=10)
        assert lk.reclaimed_from is not None and lk.reclaimed_from.empty_free
        lk.release()
    finally:
        writer.kill()
        writer.wait()


def test_guard_timeout_is_a_lock_error() -> None:
    assert issubclass(GuardTimeout, LockError) and issubclass(GuardTimeout, OSError)


@linux_only
@pytest.mark.skipif(not exchange_available(), reason="no atomic exchange on this platform")
def test_reclaim_swaps_back_a_file_replaced_after_the_check(
    lockdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A foreign tool (semats renames over the path) replaces the judged stale lock between
    the reclaimer's check and its exchange: the exchange brings out a file that is not the
    judged one, so it is swapped back and the foreign lock survives intact."""
    import core.engine.exchange as ex

    path = lockdir / "swap.lock"
    make_stale(path)
    foreign = f"pid={os.getpid()}\ntimestamp={int(time.time())}\ntag=semats\n".encode()
    real = ex.exchange
    calls: list[tuple[str, str]] = []

    def racing_exchange(a: str, b: str) -> None:
        if not calls:
            (lockdir / "semats.tmp").write_bytes(foreign)
            os.replace(lockdir / "semats.tmp", path)  # the foreign acquire lands now
        calls.append((a, b))
        real(a, b)

    monkeypatch.setattr(ex, "exchange", racing_exchange)
    with pytest.raises(LockHeld) as ei:
        Lock(path).acquire(blocking=False)
    assert len(calls) == 2  # exchanged, saw a stranger, swapped back
    assert path.read_bytes() == foreign
    assert ei.value.status is not None and ei.value.status.state is State.HELD
    assert _leftovers(lockdir) == ["swap.lock"]


def test_blocking_acquire_takes_over_when_stale_after_passes(lockdir: Path) -> None:
    """No file event and no process exit: the waiter wakes when ``stale_after`` passes
    (another tool's lock whose holder is gone becomes stale only by age)."""
    path = lockdir / "aging.lock"
    path.write_text(f"pid={dead_pid()}\ntimestamp={int(time.time())}\ntag=old-tool\n")
    lk = Lock(path, stale_after=1.0)
    with pytest.raises(LockHeld):
        lk.acquire(blocking=False)
    lk.acquire(timeout=20)
    assert lk.reclaimed_from is not None and lk.reclaimed_from.state is State.STALE
    lk.release()


@pytest.mark.slow
def test_waiting_is_not_a_polling_loop(lockdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a live holder keeps the lock and nothing happens, a waiter sleeps in the slow
    fallback poll (1 s), not in a 100 ms loop."""
    import core.engine.waiting as waiter_mod

    calls: list[float | None] = []
    real_wait = waiter_mod.Waiter.wait

    def counting_wait(self: waiter_mod.Waiter, timeout: float | None) -> str:
        calls.append(timeout)
        return real_wait(self, timeout)

    monkeypatch.setattr(waiter_mod.Waiter, "wait", counting_wait)
    path = lockdir / "quiet.lock"
    with Lock(path), pytest.raises(LockTimeout):
        Lock(path).acquire(timeout=2.5)
    assert 2 <= len(calls) <= 6, calls
    assert max(c for c in calls if c is not None) >= 0.9


# -- fallbacks for file systems / platforms without exchange or hard links -------------------


@pytest.fixture
def no_exchange(monkeypatch: pytest.MonkeyPatch) -> None:
    import core.engine.exchange as ex
    import core.engine.publish as engine

    def refuse(a: str, b: str) -> None:
        raise ex.ExchangeUnsupported(95, "no exchange here (test)")

    monkeypatch.setattr(ex, "exchange", refuse)
    monkeypatch.setattr(engine, "_no_exchange_devs", set())


@pytest.fixture
def no_links(monkeypatch: pytest.MonkeyPatch) -> None:
    import errno as errno_mod

    import core.engine.publish as engine

    def refuse(src: str, dst: str) -> None:
        raise PermissionError(errno_mod.EPERM, "hard links not supported (test)")

    monkeypatch.setattr(engine, "link_nofollow", refuse)
    monkeypatch.setattr(engine, "_no_link_devs", set())


@linux_only
@pytest.mark.usefixtures("no_exchange")
def test_reclaim_and_refresh_without_exchange(lockdir: Path) -> None:
    path = lockdir / "nx.lock"
    make_stale(path)
    lk = reclaim(path)
    assert lk.reclaimed_from is not None
    assert parse(path.read_bytes()).token == lk.token
    lk.release()
    lk = Lock(path, format="task-mcp", ttl=60).acquire()
    lk.refresh()
    assert parse(path.read_bytes()).token == lk.token
    os.unlink(path)
    other = Lock(path).acquire()
    with pytest.raises(LockLost):
        lk.refresh()
    assert parse(path.read_bytes()).token == other.token
    other.release()
    assert _leftovers(lockdir) == []


@linux_only
@pytest.mark.usefixtures("no_links")
def test_acquire_release_reclaim_without_hard_links(lockdir: Path) -> None:
    path = lockdir / "nl.lock"
    with Lock(path, tag="excl") as lk:
        assert parse(path.read_bytes()).token == lk.token
        with pytest.raises(LockHeld):
            Lock(path).acquire(blocking=False)
    assert not path.exists()
    make_stale(path)
    lk = Lock(path).acquire(timeout=5)
    assert lk.reclaimed_from is not None
    lk.release()
    assert _leftovers(lockdir) == []


def test_release_puts_back_a_file_replaced_after_the_check(
    lockdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A foreign tool replaces our lock between release's check and its move-out: what was
    moved out is checked again, found foreign, and put back; nothing is deleted."""
    path = lockdir / "rb.lock"
    lk = Lock(path).acquire()
    foreign = b"pid=1\ntimestamp=1700000000\ntag=renamed over us\n"
    real_rename = os.rename

    def racing_rename(src: str, dst: str) -> None:
        if src == str(path) and dst.endswith(".lwrel"):
            (lockdir / "foreign.tmp").write_bytes(foreign)
            real_rename(str(lockdir / "foreign.tmp"), str(path))
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", racing_rename)
    with pytest.raises(LockLost):
        lk.release()
    monkeypatch.undo()
    assert path.read_bytes() == foreign
    assert _leftovers(lockdir) == ["rb.lock"]
