"""``lockwarden run PATH -- CMD``: the lock is held while CMD runs and released on every exit
path; the exit code is CMD's (docs/cli.md, "``run``: hold a lock while a command runs"). Real
processes and signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.support.cli import ENV, LW, lw, one_line, status_json, waiting


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# CMD for the tests: prints "started <pid>" and then waits for a line on stdin (or a signal).
WAITER = [
    sys.executable, "-c",
    "import os, sys; print('started', os.getpid(), flush=True); "
    "line = sys.stdin.readline(); sys.exit(int(line or 0))",
]


def start_run(lock: Path, *extra: str, cmd: list[str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*LW, "run", str(lock), *extra, "--", *(cmd or WAITER)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=ENV,
    )


def child_pid(proc: subprocess.Popen[str]) -> int:
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until CMD has started (the lock is held by then)
    assert line.startswith("started "), (line, proc.stderr.read() if proc.stderr else "")
    return int(line.split()[1])


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, err


@pytest.mark.slow
def test_lock_held_while_cmd_runs_then_released_exit_code_is_cmds(lockdir: Path) -> None:
    lock = lockdir / "job.lock"
    proc = start_run(lock, "--tag", "nightly")
    child_pid(proc)
    st = status_json(lock)
    assert st["pid"] == proc.pid and st["liveness"] == "alive" and st["tag"] == "nightly"
    out = lw("try", str(lock))
    assert out.returncode == 1 and "held" in one_line(out.stderr)
    assert proc.stdin is not None
    proc.stdin.write("0\n")
    proc.stdin.flush()
    code, err = finish(proc)
    assert code == 0, err
    assert not lock.exists()


@pytest.mark.slow
def test_failing_cmd_exit_code_and_release(lockdir: Path) -> None:
    lock = lockdir / "job.lock"
    out = lw("run", str(lock), "--", "sh", "-c", 'test -e "$0" && exit 7', str(lock))
    assert out.returncode == 7
    assert not lock.exists()

    out = lw("run", str(lock), "--", "no-such-command-lockwarden")
    assert out.returncode == 127 and "command not found" in one_line(out.stderr)
    assert not lock.exists()

    out = lw("run", str(lock))
    assert out.returncode == 2 and "no command" in one_line(out.stderr)


def test_sigterm_to_wrapper_is_forwarded_and_lock_released(lockdir: Path) -> None:
    lock = lockdir / "job.lock"
    cmd = [sys.executable, "-c",
           "import os, signal, sys, time\n"
           "signal.signal(signal.SIGTERM, lambda *a: sys.exit(5))\n"
           "print('started', os.getpid(), flush=True)\n"
           "while True: time.sleep(0.05)\n"]
    proc = start_run(lock, cmd=cmd)
    child_pid(proc)
    assert lock.exists()
    proc.send_signal(signal.SIGTERM)
    code, err = finish(proc)
    assert code == 5, err  # CMD got the SIGTERM and chose its exit code
    assert not lock.exists()


def test_sigkill_of_cmd_releases_and_reports_128_plus_9(lockdir: Path) -> None:
    lock = lockdir / "job.lock"
    proc = start_run(lock)
    pid = child_pid(proc)
    os.kill(pid, signal.SIGKILL)
    code, err = finish(proc)
    assert code == 128 + signal.SIGKILL, err
    assert not lock.exists()


@pytest.mark.slow
def test_lock_not_had_exits_1_without_running_cmd(lockdir: Path, tmp_path: Path) -> None:
    lock = lockdir / "job.lock"
    assert lw("try", str(lock), "--pid", "1", "-q").returncode == 0
    marker = tmp_path / "ran"
    out = lw("run", str(lock), "--timeout", "0", "--", "touch", str(marker))
    assert out.returncode == 1 and "command not run" in one_line(out.stderr)
    out = lw("run", str(lock), "--timeout", "0.3", "--", "touch", str(marker))
    assert out.returncode == 1 and "timed out" in one_line(out.stderr)
    assert not marker.exists()
    assert status_json(lock)["pid"] == 1


def test_sigterm_while_waiting_for_the_lock(lockdir: Path, tmp_path: Path) -> None:
    lock = lockdir / "job.lock"
    assert lw("try", str(lock), "--pid", "1", "-q").returncode == 0
    before = lock.read_bytes()
    marker = tmp_path / "ran"
    proc = subprocess.Popen([*LW, "run", str(lock), "--", "touch", str(marker)], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    waiting(proc)  # blocked in the engine's waiter
    proc.send_signal(signal.SIGTERM)
    code, err = finish(proc)
    assert code == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert not marker.exists()
    assert lock.read_bytes() == before


@pytest.mark.slow
def test_ttl_is_refreshed_while_cmd_runs(lockdir: Path) -> None:
    lock = lockdir / "lease.lock"
    proc = start_run(lock, "--ttl", "1")
    child_pid(proc)
    first = json.loads(lw("status", str(lock), "--json").stdout)
    assert first["ttl"] == 1
    deadline = time.monotonic() + 30
    latest = first
    while time.monotonic() < deadline and latest["expires_at"] == first["expires_at"]:
        time.sleep(0.2)
        latest = status_json(lock)
    assert _utc(latest["expires_at"]) > _utc(first["expires_at"]), "TTL never refreshed"
    assert latest["pid"] == proc.pid
    assert proc.stdin is not None
    proc.stdin.write("3\n")
    proc.stdin.flush()
    code, err = finish(proc)
    assert code == 3, err
    assert not lock.exists()


@pytest.mark.slow
def test_lock_forced_away_while_cmd_runs_is_reported(lockdir: Path) -> None:
    lock = lockdir / "lease.lock"
    proc = start_run(lock, "--ttl", "1")
    child_pid(proc)
    out = lw("release", str(lock), "--force", "--reason", "test")
    assert out.returncode == 0, out.stderr
    assert lw("try", str(lock), "--pid", "1", "-q").returncode == 0  # a successor
    assert proc.stdin is not None
    proc.stdin.write("0\n")
    proc.stdin.flush()
    code, err = finish(proc)
    assert code == 0  # CMD's code
    assert "was lost while the command ran" in one_line(err)
    assert status_json(lock)["pid"] == 1  # the successor's lock was not touched
