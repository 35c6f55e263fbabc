"""core.audit under concurrency: several OS processes (and threads) append to one log at once;
every line must be present exactly once, whole, and the hash chain must hold (docs/DESIGN.md "Audit
log": appends serialised by a kernel lock, one write() and an fsync per entry)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from core import audit
from core.fsutil import AUDIT_LOG_NAME

ROOT = Path(__file__).resolve().parents[3]

WRITER = r"""
import sys
from core import audit
lock, who, n, via = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
audit.set_via(via)
print("ready", flush=True)
sys.stdin.readline()          # all writers start together
for i in range(n):
    w = audit.append(lock, "acquire" if i % 2 == 0 else "release",
                     details={"writer": who, "seq": i, "pad": "é" * (i % 50)}, format="sema")
    if w.fallback or w.error:
        print("FAILED", w, flush=True)
        sys.exit(1)
print("done", flush=True)
"""

PROCS = 5
PER_PROC = 150


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_processes_append_concurrently(lockdir: Path) -> None:
    lock = str(lockdir / "shared.lock")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, lock, f"w{k}", str(PER_PROC), "cli" if k % 2 else "api"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=str(lockdir),
        )
        for k in range(PROCS)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "ready"
        for p in procs:  # release them all at once
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [p.communicate(timeout=100)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0] * PROCS, outs

    log = lockdir / AUDIT_LOG_NAME
    raw_lines = log.read_bytes().split(b"\n")
    assert raw_lines[-1] == b""  # file ends with a newline
    objs = [json.loads(line) for line in raw_lines[:-1]]  # every line whole JSON
    assert len(objs) == PROCS * PER_PROC
    seen = Counter((o["details"]["writer"], o["details"]["seq"]) for o in objs)
    assert set(seen.values()) == {1}  # each exactly once
    assert set(seen) == {(f"w{k}", i) for k in range(PROCS) for i in range(PER_PROC)}
    # each writer's own entries stay in its order
    for k in range(PROCS):
        seqs = [o["details"]["seq"] for o in objs if o["details"]["writer"] == f"w{k}"]
        assert seqs == list(range(PER_PROC))
    assert {o["via"] for o in objs} == {"api", "cli"}
    assert len({o["pid"] for o in objs}) == PROCS

    res = audit.verify(str(log))
    assert res.ok, res.reason
    assert (res.entries, res.foreign, res.bad_line) == (PROCS * PER_PROC, 0, None)


def test_threads_append_concurrently(lockdir: Path) -> None:
    """Threads of one process take turns on its open log (a per-log mutex: one file
    description, so flock alone would not exclude them)."""
    lock = str(lockdir / "t.lock")
    barrier = threading.Barrier(4)
    errors: list[str] = []

    def work(k: int) -> None:
        barrier.wait()
        for i in range(40):
            w = audit.append(lock, "refresh", details={"t": k, "i": i})
            if w.fallback:
                errors.append(str(w))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    res = audit.verify(lock)
    assert (res.ok, res.entries) == (True, 160), res.reason


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs Linux /proc to see open fds")
@pytest.mark.timeout(60)
def test_log_rotated_while_waiting_for_the_lock(lockdir: Path) -> None:
    """A writer that opened the log and then waited for the kernel lock must not write into a
    file that was renamed away meanwhile: it re-opens the path and starts a new chain."""
    import fcntl
    import time

    log = lockdir / AUDIT_LOG_NAME
    audit.append(str(lockdir / "a.lock"), "acquire")
    before = log.read_bytes()
    ino = os.stat(log).st_ino

    def fds_on_log() -> int:
        n = 0
        for name in os.listdir("/proc/self/fd"):
            try:
                if os.stat(f"/proc/self/fd/{name}").st_ino == ino:
                    n += 1
            except OSError:
                pass
        return n

    holder = os.open(log, os.O_RDONLY)
    result: list[audit.AuditWrite] = []
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        t = threading.Thread(
            target=lambda: result.append(audit.append(str(lockdir / "a.lock"), "release"))
        )
        t.start()
        deadline = time.monotonic() + 30
        while fds_on_log() < 2:  # no event tells us the writer has opened the file
            assert time.monotonic() < deadline, "writer never opened the log"
            time.sleep(0.005)
        os.rename(log, lockdir / "rotated.log")
    finally:
        os.close(holder)  # drops our flock
    t.join(timeout=30)
    assert result and result[0].fallback is False
    assert (lockdir / "rotated.log").read_bytes() == before
    (e,) = audit.read(str(log))
    assert e.operation == "release" and e.prev == audit.ZERO_HASH
