"""``lockwarden run L -- CMD`` whose wrapper is SIGKILLed: CMD must die with it (Linux
``PR_SET_PDEATHSIG``; core/cli/run.py, docs/cli.md "``run``"), or it would work on while the
lock -- naming the dead wrapper, so stale at once -- is taken by the next holder.

Real processes only. The test process makes itself a *child subreaper* for the duration of a
test, so an orphaned CMD is re-parented to it: ``waitpid`` on CMD then says, without polling,
that it ended and by which signal.

The race: several racers (real processes using :class:`core.engine.lock.Lock`) take the same lock
in a loop while wrappers are SIGKILLed with their CMD inside the critical section. Every
holder enters through a marker file created with ``O_EXCL`` holding its PID and start time; a
holder that finds the marker of a process still running (not a zombie, same start time) counts
an overlap.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_cli import ENV, LW, status_json

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and subreapers are Linux's"
)

PR_SET_CHILD_SUBREAPER = 36
ITERATIONS = 80
"""Wrappers SIGKILLed in the race test (fewer only if the time budget runs out)."""
MIN_ITERATIONS = 30
BUDGET_S = 16.0
"""Time budget of the kill loop (the whole test stays under 20 s)."""
RACERS = 3

# One script for both roles, run as a real process. "cmd": the command under `run` (plain
# Python, -I -S: fast start): enter the critical section, say "in <pid>", hold it until stdin
# closes (never, unless killed), leave. "racer": loop taking the lock with core.engine.lock.Lock.
# The racers' hold and pause times are the workload of the race (how long a holder works,
# how long it waits before taking the lock again), not waits for an event.
PROTOCOL = r'''
import os, random, sys, time

MARKER, LOG = sys.argv[2], sys.argv[3]
ME = os.getpid()


SIGKILL_BIT = 1 << (9 - 1)
PF_EXITING = 0x4


def start_of(pid):
    """The start time of ``pid`` (clock ticks since boot, /proc/PID/stat field 22)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[19]


def running(pid, start):
    """None while ``pid`` (started at ``start``) can still execute code of its own: it exists,
    is not a zombie, is not exiting (PF_EXITING) and has no SIGKILL pending. A process with a
    SIGKILL pending never returns to user space again (the kernel acts on it first); the
    pending signals are read before the flags because a process goes from "SIGKILL pending"
    to "exiting" and not back. Otherwise the word for why not (``gone``, ``reused``,
    ``zombie``, ``exiting``, ``sigkill-pending``)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, ValueError):
        return "gone"                             # exited and reaped
    pending = int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)
    why = None
    if fields[19] != start:
        why = "reused"
    elif fields[0] in ("Z", "X"):
        why = "zombie"
    elif int(fields[6]) & PF_EXITING:
        why = "exiting"
    elif pending & SIGKILL_BIT:
        why = "sigkill-pending"
    return why


MY_START = start_of(ME)


def note(text):
    fd = os.open(LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(fd, f"{ME} {text}\n".encode())
    os.close(fd)


def enter():
    while True:
        try:
            fd = os.open(MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                with open(MARKER) as f:
                    other = f.read().split()
            except FileNotFoundError:
                continue
            if len(other) == 2:
                why = running(int(other[0]), other[1])
                if why is None:
                    note(f"overlap {other[0]}")   # its holder still runs: two inside
                note(f"found {other[0]} {why}")
            try:
                os.unlink(MARKER)                 # left by a dead holder (or counted above)
            except FileNotFoundError:
                pass
            continue
        os.write(fd, f"{ME} {MY_START}".encode())
        os.close(fd)
        note("enter")
        return


def leave():
    os.unlink(MARKER)
    note("leave")


if sys.argv[1] == "cmd":
    enter()
    print("in", ME, flush=True)
    sys.stdin.read()                              # until killed (or stdin closes)
    leave()
else:
    from core.errors import LockTimeout
    from core.engine.lock import Lock

    stop = sys.argv[4]
    rnd = random.Random(ME)
    while not os.path.exists(stop):
        lk = Lock(sys.argv[5], tag="racer")
        try:
            lk.acquire(timeout=2)
        except LockTimeout:
            continue
        enter()
        time.sleep(rnd.uniform(0.001, 0.004))     # work inside the critical section
        leave()
        lk.release()
        time.sleep(rnd.uniform(0.0, 0.01))        # work outside it
'''


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0),
                  ctypes.c_ulong(0)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@pytest.fixture
def subreaper() -> Iterator[list[int]]:
    """Make this process the child subreaper while the test runs; yields a list where the
    test records the PIDs it expects to adopt, which are killed and reaped afterwards if the
    test left any."""
    adopted: list[int] = []
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    try:
        yield adopted
    finally:
        _prctl(PR_SET_CHILD_SUBREAPER, 0)
        for pid in adopted:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def reap_adopted(pid: int, adopted: list[int], timeout: float = 30) -> int:
    """Wait (pidfd, no polling) until ``pid`` -- an orphan re-parented to this subreaper --
    ends, reap it and return its wait status. Fails if it is still running after
    ``timeout`` seconds: it outlived its wrapper."""
    adopted.append(pid)
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:  # pragma: no cover - ended and reaped by someone else
        pytest.fail(f"{pid} was not re-parented to the test's subreaper")
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    assert ready, f"the command {pid} outlived its SIGKILLed wrapper by {timeout} s"
    got, status = os.waitpid(pid, 0)
    assert got == pid
    adopted.remove(pid)
    return status


def start_wrapper(lock: Path, cmd: list[str], *extra: str) -> tuple[subprocess.Popen[str], int]:
    """``lockwarden run LOCK [extra] -- CMD`` where CMD prints ``in <pid>`` once it holds the
    critical section; returns the wrapper and CMD's PID (CMD is running by then)."""
    w = subprocess.Popen([*LW, "run", str(lock), *extra, "--", *cmd], env=ENV, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert w.stdout is not None
    line = w.stdout.readline()
    if not line.startswith("in "):
        w.kill()
        _, err = w.communicate()
        pytest.fail(f"the command never started: {line!r} {err[-500:]!r}")
    return w, int(line.split()[1])


def kill_wrapper(w: subprocess.Popen[str]) -> None:
    """SIGKILL the wrapper and reap it (it is our child)."""
    w.send_signal(signal.SIGKILL)
    assert w.wait(timeout=30) == -signal.SIGKILL
    for stream in (w.stdin, w.stdout, w.stderr):
        if stream is not None:
            with contextlib.suppress(BrokenPipeError):
                stream.close()


@pytest.fixture
def protocol(tmp_path: Path) -> Path:
    script = tmp_path / "protocol.py"
    script.write_text(PROTOCOL)
    return script


def cmd_of(script: Path, marker: Path, log: Path) -> list[str]:
    return [sys.executable, "-I", "-S", str(script), "cmd", str(marker), str(log)]


@pytest.mark.parametrize("extra", [[], ["--ttl", "5"]], ids=["plain", "ttl-refresher"])
def test_sigkilled_wrapper_takes_its_command_along(
    lockdir: Path, tmp_path: Path, protocol: Path, subreaper: list[int], extra: list[str]
) -> None:
    """The direct case: SIGKILL the wrapper while CMD runs; CMD ends, killed by SIGKILL (the
    parent-death signal), and the lock is then stale and taken by the next ``try``. With
    ``--ttl`` the wrapper runs a refresher thread once CMD is started."""
    lock = lockdir / "job.lock"
    w, cmd_pid = start_wrapper(lock, cmd_of(protocol, tmp_path / "m", tmp_path / "log"), *extra)
    assert status_json(lock)["pid"] == w.pid
    kill_wrapper(w)
    status = reap_adopted(cmd_pid, subreaper)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
    assert status_json(lock)["state"] == "stale"
    out = subprocess.run([*LW, "try", str(lock), "--pid", "1", "-q"], env=ENV, timeout=60,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert status_json(lock)["pid"] == 1


def test_child_whose_wrapper_died_before_prctl_does_not_run(tmp_path: Path) -> None:
    """The race check of core.cli.run.die_with_parent: a child whose parent is no longer the
    PID it was spawned for (here: never was) exits at once, before ``exec``, and CMD never
    runs."""
    from core.cli.run import ORPHANED_EXIT, die_with_parent

    preexec = die_with_parent(os.getpid() + 1_000_000)  # a parent PID that is not ours
    assert preexec is not None
    ran = tmp_path / "ran"
    proc = subprocess.Popen(["touch", str(ran)], preexec_fn=preexec)
    assert proc.wait(timeout=60) == ORPHANED_EXIT
    assert not ran.exists()

    preexec = die_with_parent(os.getpid())  # the real parent: CMD runs
    assert preexec is not None
    assert subprocess.Popen(["touch", str(ran)], preexec_fn=preexec).wait(timeout=60) == 0
    assert ran.exists()


def test_no_overlap_when_wrappers_are_sigkilled_amid_racers(
    lockdir: Path, tmp_path: Path, protocol: Path, subreaper: list[int]
) -> None:
    """SIGKILL a wrapper whose CMD is inside the critical section, again and again, while
    racers wait for the same lock: the racer that takes the (stale) lock must never find
    CMD still running. Before the fix: 7 overlaps in 155 runs."""
    lock = lockdir / "race.lock"
    marker, log, stop = tmp_path / "marker", tmp_path / "events.log", tmp_path / "stop"
    racer_env = {**ENV, "PYTHONDONTWRITEBYTECODE": "1"}
    racers = [
        subprocess.Popen([sys.executable, str(protocol), "racer", str(marker), str(log),
                          str(stop), str(lock)], env=racer_env)
        for _ in range(RACERS)
    ]
    killed = 0
    survivors: list[int] = []
    started = time.monotonic()
    try:
        while killed < ITERATIONS and time.monotonic() - started < BUDGET_S:
            w, cmd_pid = start_wrapper(lock, cmd_of(protocol, marker, log))
            kill_wrapper(w)
            killed += 1
            status = reap_adopted(cmd_pid, subreaper)
            if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
                survivors.append(cmd_pid)  # pragma: no cover - the failure reported below
    finally:
        stop.touch()
        for r in racers:
            try:
                r.wait(timeout=30)
            except subprocess.TimeoutExpired:  # pragma: no cover - never leave children
                r.kill()
                r.wait()
    elapsed = time.monotonic() - started
    events = [line.split(" ", 1)[1] for line in log.read_text().splitlines()]
    overlaps = [e for e in events if e.startswith("overlap")]
    entries = sum(e == "enter" for e in events)
    print(f"\nrun wrapper SIGKILLed {killed} times in {elapsed:.1f} s amid {RACERS} racers: "
          f"{entries} critical sections, {len(overlaps)} overlaps")
    assert overlaps == []
    assert survivors == []
    assert killed >= MIN_ITERATIONS, f"only {killed} wrappers killed in {BUDGET_S} s"
    assert entries > killed  # the racers did take the lock between the kills
    assert all(r.returncode == 0 for r in racers)
