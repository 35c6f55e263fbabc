"""core.kernel.locks: /proc/locks parsed from the captures in tests/data/devtools/kernel/ (copied
from the research of docs/specs/devtool-locks.md), and real locks taken by real processes
(flock(1), Python fcntl.flock / lockf / OFD) found with their holder, kind and mode."""

from __future__ import annotations

import os
import select
import signal
import subprocess
from pathlib import Path

import pytest

from core.errors import ParseError
from core.kernel.locks import (
    Access,
    LockKind,
    fd_holders,
    file_key,
    kernel_holders,
    key_text,
    locks_on,
    parse_line,
    parse_proc_locks,
)
from tests.support.kernel_holders import hold as _hold

DATA = Path(__file__).parents[2] / "data" / "devtools"
linux = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux /proc/locks")


def _capture(name: str) -> str:
    """The /proc/locks lines of a capture file (comments and lslocks output dropped)."""
    text = (DATA / name).read_text()
    return "\n".join(line.strip() for line in text.splitlines()
                     if line.strip()[:1].isdigit() and ": " in line)


def test_apt_capture() -> None:
    locks = parse_proc_locks(_capture("kernel/apt-dpkg-proc-locks.txt"))
    assert [(lk.kind, lk.access, lk.pid, lk.key) for lk in locks] == [
        (LockKind.POSIX, Access.WRITE, 9519, (0xFE, 0x00, 402116)),
        (LockKind.POSIX, Access.WRITE, 9010, (0xFE, 0x00, 402117)),
        (LockKind.POSIX, Access.WRITE, 9010, (0xFE, 0x00, 398611)),
    ]
    assert all(lk.whole_file and lk.mode == "ADVISORY" and not lk.waiter for lk in locks)


def test_demo_capture_every_kind() -> None:
    locks = {lk.key[2]: lk for lk in parse_proc_locks(_capture("kernel/demo-output.txt"))
             if lk.key is not None}
    assert locks[2326799].kind is LockKind.FLOCK and locks[2326799].pid == 22204
    assert locks[2326680].kind is LockKind.OFDLCK and locks[2326680].pid is None
    rng = locks[2326681]
    assert (rng.kind, rng.access, rng.start, rng.end) == (LockKind.POSIX, Access.READ, 0, 99)
    assert not rng.whole_file and not rng.exclusive
    assert locks[2326677].kind is LockKind.POSIX and locks[2326677].exclusive


def test_cargo_uv_terraform_java_captures() -> None:
    cargo = parse_proc_locks(_capture("cargo/cargo-build-locks.txt"))
    assert [(lk.kind, lk.access, lk.pid) for lk in cargo] == [
        (LockKind.FLOCK, Access.WRITE, 26713), (LockKind.FLOCK, Access.READ, 26713)]
    (uv,) = parse_proc_locks(_capture("uv/cache-lock.txt"))
    assert (uv.kind, uv.access, uv.key) == (LockKind.FLOCK, Access.READ, (0xFE, 0, 2343219))
    (tf,) = parse_proc_locks(_capture("terraform/proc-locks-while-apply.txt"))
    assert (tf.kind, tf.access, tf.pid, tf.key) == (
        LockKind.POSIX, Access.WRITE, 20892, (0xFE, 0, 2270562))
    (jvm,) = parse_proc_locks(_capture("java/filechannel-lock.txt"))
    assert (jvm.kind, jvm.pid) == (LockKind.POSIX, 26902)


def test_waiters_leases_and_odd_lines() -> None:
    text = (
        "1: POSIX  ADVISORY  WRITE 10 08:01:100 0 EOF\n"
        "1: -> POSIX  ADVISORY  WRITE 11 08:01:100 0 EOF\n"
        "1:  -> POSIX  ADVISORY  WRITE 12 08:01:100 0 EOF\n"
        "2: LEASE  ACTIVE    READ 13 08:01:200 0 EOF\n"
        "3: DELEG  ACTIVE    READ 14 <none>:0 0 EOF\n"
        "4: FLOCK  MSNFS     WRITE 15 103:02:7 0 EOF\n"
        "5: NEWTYPE ADVISORY WRITE 16 08:01:9 0 EOF\n"
        "garbage\n\n"
        "6: POSIX  ADVISORY  WRITE x 08:01:9 0 EOF\n"
    )
    holders = parse_proc_locks(text)
    assert [lk.pid for lk in holders] == [10, 13, 14, 15]
    everything = parse_proc_locks(text, waiters=True)
    assert [lk.pid for lk in everything if lk.waiter] == [11, 12]
    assert everything[4].key is None
    assert everything[5].key == (0x103, 2, 7)
    assert key_text((0x103, 2, 7)) == "103:02:7"
    with pytest.raises(ParseError):
        parse_line("5: NEWTYPE ADVISORY WRITE 16 08:01:9 0 EOF")
    with pytest.raises(ParseError):
        parse_line("1: POSIX ADVISORY WRITE 1 08:zz:9 0 EOF")
    with pytest.raises(ParseError):
        parse_line("1: POSIX ADVISORY WRITE 1 08:01:9 -1 EOF")


def test_filter_first_matches_full_parse() -> None:
    text = _capture("kernel/demo-output.txt") + "\n1: -> FLOCK ADVISORY WRITE 9 fe:00:2326676 0 EOF"
    keys = [(0xFE, 0, 2326676), (0xFE, 0, 2326680), (0xFE, 0, 1)]
    found = locks_on(text, keys)
    assert set(found) == {(0xFE, 0, 2326676), (0xFE, 0, 2326680)}
    assert [lk.pid for lk in found[(0xFE, 0, 2326676)]] == [21994]
    assert len(locks_on(text, keys, waiters=True)[(0xFE, 0, 2326676)]) == 2


# -- real locks, real processes ----------------------------------------------------------------

@linux
def test_real_python_locks_found(tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    expected = {
        "flock": (LockKind.FLOCK, Access.WRITE, None),
        "flock-sh": (LockKind.FLOCK, Access.READ, None),
        "posix": (LockKind.POSIX, Access.WRITE, None),
        "posix-range": (LockKind.POSIX, Access.READ, 99),
        "ofd": (LockKind.OFDLCK, Access.WRITE, None),
    }
    pids = {k: _hold(procs, k, tmp_path / f"{k}.lock").pid for k in expected}
    free = tmp_path / "free.lock"
    free.write_text("")
    paths = [str(tmp_path / f"{k}.lock") for k in expected] + [str(free)]
    found = kernel_holders(paths)
    assert str(free) not in found
    for k, (kind, access, end) in expected.items():
        (h,) = found[str(tmp_path / f"{k}.lock")]
        assert (h.lock.kind, h.lock.access, h.lock.end) == (kind, access, end), k
        assert h.lock.mode == "ADVISORY" and not h.lock.waiter, k
        assert h.pids == (pids[k],), k
        if k == "ofd":  # /proc/locks shows -1: named through fdinfo
            assert h.lock.pid is None and h.confirmed_by == "fdinfo"
        else:
            assert h.lock.pid == pids[k] and h.confirmed_by == "proc_locks"


def _kill_and_await(pid: int) -> None:
    """SIGKILL a process that is not our child and wait for its exit (pidfd: an event)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        os.kill(pid, signal.SIGKILL)
        select.select([pidfd], [], [], 10)
    finally:
        os.close(pidfd)


@linux
def test_real_flock1_and_inherited_descriptor(tmp_path: Path) -> None:
    """flock(1) takes the lock, its child keeps the descriptor; once flock(1) is SIGKILLed and
    reaped, /proc/locks still names its dead PID and fdinfo names the real holder (spec §2.6,
    "The PID can be stale")."""
    lock = tmp_path / "cli.lock"
    flock = subprocess.Popen(["flock", str(lock), "sh", "-c", "echo $$; exec cat"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        assert flock.stdout is not None
        child = int(flock.stdout.readline())
        (h,) = kernel_holders([str(lock)])[str(lock)]
        assert (h.lock.kind, h.lock.access, h.lock.pid) == (LockKind.FLOCK, Access.WRITE,
                                                              flock.pid)
        assert h.pids == (flock.pid,) and h.confirmed_by == "proc_locks"

        flock.send_signal(signal.SIGKILL)
        flock.wait()
        (h,) = kernel_holders([str(lock)])[str(lock)]
        assert h.lock.pid == flock.pid  # the dead PID is still shown
        assert h.pids == (child,) and h.confirmed_by == "fdinfo"
        (fh,) = fd_holders(os.stat(lock))
        assert fh.pid == child and fh.locks[0].kind is LockKind.FLOCK
    finally:
        if flock.poll() is None:
            flock.kill()
        flock.wait()
        if child:
            _kill_and_await(child)
    assert str(lock) not in kernel_holders([str(lock)])


TAKER_FORKS = r"""
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
child = os.fork()
if child == 0:
    sys.stdin.read()
    os._exit(0)
os.close(fd)  # the taker lives on without the lock; its child holds it
print(child, flush=True)
sys.stdin.read()
os.waitpid(child, 0)
"""


@linux
def test_a_taker_that_closed_its_copy_is_not_named_the_holder(tmp_path: Path) -> None:
    """/proc/locks names the process that took an flock even while it lives on without it (it
    forked a child that keeps the descriptor and closed its own copy): the holder named is
    the child, found through fdinfo, never the taker (core/kernel/locks.py)."""
    import sys

    lock = tmp_path / "forked.lock"
    taker = subprocess.Popen([sys.executable, "-c", TAKER_FORKS, str(lock)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert taker.stdout is not None
        child = int(taker.stdout.readline())  # printed once the taker closed its copy
        (h,) = kernel_holders([str(lock)])[str(lock)]
        assert h.lock.pid == taker.pid and taker.poll() is None  # listed, and alive
        assert h.pids == (child,) and h.confirmed_by == "fdinfo"
    finally:
        if taker.stdin is not None:
            taker.stdin.close()
        taker.wait(timeout=30)


@linux
def test_symlink_and_missing_paths_never_match(tmp_path: Path,
                                               procs: list[subprocess.Popen[str]]) -> None:
    target = tmp_path / "t.lock"
    _hold(procs, "flock", target)
    link = tmp_path / "link.lock"
    link.symlink_to(target)
    found = kernel_holders([str(link), str(tmp_path / "missing"), str(tmp_path)])
    assert found == {}
    assert file_key(os.stat(target))[2] == os.stat(target).st_ino


# -- any text: only ParseError from parse_line, nothing from the others ------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.support.fuzz import FAST  # noqa: E402

WORDS = st.sampled_from(["1:", "->", "FLOCK", "POSIX", "OFDLCK", "LEASE", "ADVISORY", "READ",
                         "WRITE", "UNLCK", "-1", "0", "EOF", "fe:00:12", "<none>:0", "zz:00:1",
                         "99999999999999999999999", "-", "٣", "1:2:3:4", ""])


@pytest.mark.slow
@settings(FAST, max_examples=1_500)
@given(st.one_of(st.text(max_size=80),
                 st.lists(WORDS, max_size=10).map(" ".join)))
def test_any_line_only_parse_error(line: str) -> None:
    try:
        lock = parse_line(line)
    except ParseError:
        pass
    else:
        assert lock.start >= 0 and (lock.pid is None or lock.pid > 0)
    text = f"{line}\n{line}"
    assert len(parse_proc_locks(text, waiters=True)) in (0, 2)
    locks_on(text, [(0xFE, 0, 12)], waiters=True)


@linux
def test_real_blocked_waiter_is_not_a_holder(tmp_path: Path,
                                             procs: list[subprocess.Popen[str]]) -> None:
    """A second flock(1) blocked on a held file shows as a ``->`` line: a waiter, never a
    holder. No event says "now blocked in flock()", so /proc/locks is polled (5 ms)."""
    import time

    lock = tmp_path / "w.lock"
    holder = _hold(procs, "flock", lock)
    waiter = subprocess.Popen(["flock", str(lock), "true"])
    try:
        key = file_key(os.stat(lock))
        deadline = time.monotonic() + 10
        while True:
            with open("/proc/locks") as f:
                found = locks_on(f.read(), [key], waiters=True).get(key, [])
            if any(lk.waiter for lk in found) or time.monotonic() > deadline:
                break
            time.sleep(0.005)
        assert [(lk.pid, lk.waiter) for lk in found] == [(holder.pid, False), (waiter.pid, True)]
        (h,) = kernel_holders([str(lock)])[str(lock)]
        assert h.pids == (holder.pid,)
    finally:
        holder.kill()
        holder.wait()
        assert waiter.wait(timeout=10) == 0  # it got the lock once the holder died
