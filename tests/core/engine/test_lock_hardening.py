"""Engine hardening found in review: clock-independent holder identity, hidden processes,
threads sharing a Lock, attacker-occupied temp names, a locked audit log, reclaim without a
guard or an exchange, and waiters in a busy directory."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

import core.audit as audit
import core.engine.publish as publish_mod
from core.engine.exchange import DirGuard, GuardTimeout
from core.engine.lock import Lock
from core.engine.reclaiming import reclaim
from core.engine.waiting import Waiter
from core.errors import LockError
from core.formats import parse
from core.fsutil import GUARD_FILE_NAME, is_engine_file
from core.reasons import texts
from core.record import Liveness, State
from core.verdicts.inspect import inspect
from core.verdicts.liveness import _hidden_but_running, check, process_identity, process_start_time
from tests.support.clock import age_after_boot

LINUX = sys.platform.startswith("linux")


@pytest.mark.skipif(not LINUX, reason="process identity from /proc is Linux-only")
def test_lock_records_a_clock_independent_identity(lockdir: Path) -> None:
    path = lockdir / "id.lock"
    with Lock(str(path)) as lk:
        rec = parse(path.read_bytes(), str(path))
        assert rec.proc == process_identity(os.getpid())
        assert lk.record is not None and lk.record.proc == rec.proc


@pytest.mark.skipif(not LINUX, reason="process identity from /proc is Linux-only")
def test_wall_clock_step_does_not_make_a_live_holder_look_reused(lockdir: Path) -> None:
    path = lockdir / "id.lock"
    with Lock(str(path)):
        rec = parse(path.read_bytes(), str(path))
    start = process_start_time(os.getpid())
    assert start is not None
    # what another process computes after the clock stepped by 37 s: create_time moved
    stepped = replace(rec, start=start - 37.0)
    assert check(stepped)[0] is Liveness.ALIVE
    # without the identity the step would read as PID reuse: this is what proc prevents
    assert check(replace(stepped, proc=None))[0] is Liveness.REUSED
    # a different start tick (another process with the same PID) is reuse
    boot, ticks = rec.proc.rsplit(":", 1) if rec.proc else ("", "0")
    other = replace(rec, proc=f"{boot}:{int(ticks) + 1}")
    live, reasons = check(other)
    assert live is Liveness.REUSED and "another process" in texts(reasons)[0]
    # a lock written before the last reboot
    live, reasons = check(replace(rec, proc=f"another-boot:{ticks}"))
    assert live is Liveness.REUSED and "reboot" in texts(reasons)[0]


@pytest.mark.skipif(os.name == "nt", reason="kill(pid, 0) probes POSIX processes")
def test_hidden_process_probe() -> None:
    assert _hidden_but_running(os.getpid()) is False  # visible and signalable: not "hidden"
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert _hidden_but_running(child.pid) is False  # gone


def test_threads_sharing_one_lock_object_cannot_both_enter(lockdir: Path) -> None:
    lk = Lock(str(lockdir / "shared.lock"))
    errors: list[BaseException] = []
    with lk:
        def other() -> None:
            try:
                with lk:
                    pass
            except BaseException as exc:
                errors.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join(10)
        assert lk.is_held
    assert len(errors) == 1 and isinstance(errors[0], LockError)
    assert "another thread" in str(errors[0])
    with lk.acquire():  # the acquiring thread itself may enter what it acquired
        assert lk.is_held
    assert not (lockdir / "shared.lock").exists()


def test_release_is_not_blocked_by_a_name_derived_from_the_token(lockdir: Path) -> None:
    path = lockdir / "r.lock"
    lk = Lock(str(path)).acquire()
    assert lk.token is not None
    # anyone who can write here can read the token and occupy ".<name>.<token>.rel"
    (lockdir / f".r.lock.{lk.token}.rel").mkdir()
    lk.release()
    assert not path.exists() and not lk.is_held


@pytest.mark.skipif(os.name == "nt", reason="flock")
def test_audit_append_does_not_hang_on_a_locked_log(lockdir: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit, "LOCK_TIMEOUT", 0.3)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    log = lockdir / ".lock_audit.log"
    log.write_text("")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time\n"
         f"fd = os.open({str(log)!r}, os.O_RDWR)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\n"
         "print('locked', flush=True)\n"
         "time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        res = audit.append(str(lockdir / "x.lock"), "acquire", details={"n": 1})
        assert res.fallback and res.log_path and "state" in res.log_path
        assert audit.read(res.log_path)[-1].operation == "acquire"
    finally:
        holder.kill()
        holder.wait()
    assert fcntl is not None


def test_guard_file_is_not_created_where_the_directory_can_be_locked(lockdir: Path) -> None:
    with DirGuard(str(lockdir)) as g:
        assert g.held
    assert not (lockdir / GUARD_FILE_NAME).exists()
    assert is_engine_file(GUARD_FILE_NAME)


def test_guard_file_serves_where_the_directory_cannot_be_locked(
    lockdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = DirGuard._try_lock

    def no_dir_locks(self: DirGuard, fd: int, *, file_lock: bool) -> bool:
        return real(self, fd, file_lock=file_lock) if file_lock else False  # as on NFS

    monkeypatch.setattr(DirGuard, "_try_lock", no_dir_locks)
    with DirGuard(str(lockdir)) as g:
        assert g.held
        with pytest.raises(GuardTimeout), DirGuard(str(lockdir), timeout=0.2):
            pass
    assert (lockdir / GUARD_FILE_NAME).is_file()


def test_reclaim_refuses_without_guard_and_exchange(lockdir: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = lockdir / "s.lock"
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    path.write_text(f"pid={child.pid}\ntimestamp=1\n")  # another tool's, holder dead, old
    assert inspect(str(path)).state is State.STALE
    monkeypatch.setattr(DirGuard, "_try_lock", lambda self, fd, *, file_lock: False)
    monkeypatch.setattr(publish_mod, "_no_exchange_devs", {path.stat().st_dev})
    with pytest.raises(LockError, match="cannot break"):
        reclaim(str(path))
    assert path.read_text() == f"pid={child.pid}\ntimestamp=1\n"  # untouched


@pytest.mark.skipif(not LINUX, reason="inotify waiter")
def test_waiter_ignores_events_about_other_files(lockdir: Path) -> None:
    stop = threading.Event()

    def churn() -> None:
        i = 0
        while not stop.is_set():
            p = lockdir / f"other-{i % 5}.tmp"
            p.write_text("x")
            p.unlink()
            i += 1

    with Waiter(str(lockdir / "quiet.lock")) as w:
        t = threading.Thread(target=churn, daemon=True)
        t.start()
        try:
            began = time.monotonic()
            result = w.wait(0.5)
            waited = time.monotonic() - began
        finally:
            stop.set()
            t.join(5)
    assert result == "timeout"
    assert waited >= 0.45  # not woken early by the churn of unrelated files


# -- the stale policy as a parameter, and the bounded kernel-lock wait -----------------------


def _old_foreign_lock(path: Path, age: float) -> None:
    """Another tool's lock (no token) whose holder is gone, written ``age`` seconds ago."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    path.write_text(f"pid={child.pid}\ntimestamp={int(time.time() - age) + 1}\ntag=other-tool\n")


def test_operations_take_a_stale_policy(lockdir: Path) -> None:
    """``policy=`` judges like ``stale_after=`` did; ``stale_after`` still replaces the policy's
    limit; the default is DEFAULT_STALE_AFTER (docs/engine.md, the policy paragraph)."""
    from core.defaults import DEFAULT_STALE_AFTER
    from core.engine.waiting import wait
    from core.errors import LockHeld
    from core.stale_policy import DEFAULT_POLICY, StalePolicy

    path = lockdir / "aged.lock"
    age = age_after_boot(120)  # an older lock would predate the boot: stale under any policy
    _old_foreign_lock(path, age=age)
    assert Lock(str(path)).policy == DEFAULT_POLICY
    assert Lock(str(path)).stale_after == DEFAULT_STALE_AFTER
    short = StalePolicy(stale_after=age / 2)
    with pytest.raises(LockHeld):
        Lock(str(path)).acquire(blocking=False)  # 120 s < 3600 s: not stale yet
    with pytest.raises(LockHeld):  # the keyword wins over the policy's limit
        Lock(str(path), policy=short, stale_after=3600.0).acquire(blocking=False)
    assert wait(str(path), policy=short, timeout=0).state is State.STALE
    lk = Lock(str(path), policy=short).acquire(blocking=False)
    assert lk.reclaimed_from is not None and lk.reclaimed_from.state is State.STALE
    lk.release()
    _old_foreign_lock(path, age=age)
    lk = reclaim(str(path), policy=short)
    assert lk.policy == short
    lk.release()


@pytest.mark.skipif(os.name == "nt", reason="flock is POSIX")
def test_lock_within_waits_a_bounded_time(lockdir: Path) -> None:
    """One helper for the directory guard and the audit log's lock (core.fsutil.lock_within):
    False after the timeout while another open file holds the flock, True once it is free."""
    import fcntl

    from core.fsutil import lock_within

    target = lockdir / "held.bin"
    target.write_bytes(b"")
    holder = os.open(target, os.O_RDONLY)
    waiter = os.open(target, os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        began = time.monotonic()
        assert lock_within(waiter, 0.2) is False
        assert time.monotonic() - began >= 0.2
        fcntl.flock(holder, fcntl.LOCK_UN)
        assert lock_within(waiter, 0.2) is True
    finally:
        os.close(holder)
        os.close(waiter)
