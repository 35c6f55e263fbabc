"""Handoff latency: a holder releases in one process, a waiter blocked in another process
returns. With 1, 4 and 16 waiters: p50 and p99 in ms beside filelock (and the specs' 100 ms
polling loop) in the same run, and which waiter wins. Prints figures; asserts nothing.
Target (docs/performance.md): median <= 1 ms, p99 <= 5 ms with 1, 4 and 16 waiters.

    .venv/bin/python tests/benchmarks/bench_engine_handoff.py [--rounds 30] [--waiters 1,4,16]

Each round: the parent takes the lock; every waiter process (forked once per series) starts its
blocking acquire; the parent waits until they are surely blocked (30 ms + 3 ms per waiter),
reads the clock (``time.monotonic``, system-wide on Linux) and releases. Each waiter, once its
acquire returns, reads the clock, releases at once and reads the clock again; the parent sorts
the acquisitions of the round by time. Each handoff's latency = an acquisition minus the
release before it (the parent's for the first, the previous winner's for the next ones), so a
round with k waiters gives k handoffs, the first among k contenders, the last among one.
"Wins first" says how often the waiter that started waiting first took the parent's release.

Contenders:
- ``lockwarden``: ``Lock.acquire()`` (inotify on the directory + pidfd + 1 s fallback poll).
- ``polling 100 ms``: the specs' blocking acquisition (specs/000 "Blocking Acquisition"):
  ``O_CREAT|O_EXCL`` retried every 100 ms (1 waiter only: it is the specs' baseline).
- ``filelock.FileLock``: ``flock`` retried every ``poll_interval`` (its default, 50 ms).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SETTLE = 0.03


class Contender:
    """take() blocks until held; give() releases."""

    def __init__(self, path: str) -> None:
        self.path = path

    def take(self) -> None:
        raise NotImplementedError

    def give(self) -> None:
        raise NotImplementedError


class Lockwarden(Contender):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        from core.engine.lock import Lock

        self.lk = Lock(path)

    def take(self) -> None:
        self.lk.acquire()

    def give(self) -> None:
        self.lk.release()


class Polling(Contender):
    def take(self) -> None:
        while True:
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                time.sleep(0.1)
                continue
            os.write(fd, f"pid={os.getpid()}\ntimestamp={int(time.time())}\n".encode())
            os.fsync(fd)
            os.close(fd)
            return

    def give(self) -> None:
        os.unlink(self.path)


class FileLockC(Contender):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        import filelock

        self.lk = filelock.FileLock(path)

    def take(self) -> None:
        self.lk.acquire()

    def give(self) -> None:
        self.lk.release()


def _waiter(kind: Callable[[str], Contender], path: str, conn: Any) -> None:
    c = kind(path)
    while True:
        msg = conn.recv()
        if msg == "stop":
            break
        conn.send(("waiting", time.monotonic()))
        c.take()
        t1 = time.monotonic()
        c.give()
        conn.send(("took", t1, time.monotonic()))
    os._exit(0)


def measure(kind: Callable[[str], Contender], d: Path, rounds: int,
            waiters: int) -> tuple[list[float], int]:
    """Handoff latencies in ms, and how many rounds the first waiter to wait won."""
    ctx = multiprocessing.get_context("fork")
    path = str(d / f"{kind.__name__}-{waiters}.lock")
    pipes, procs = [], []
    for _ in range(waiters):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_waiter, args=(kind, path, child))
        p.start()
        pipes.append(parent)
        procs.append(p)
    me = kind(path)
    out: list[float] = []
    fifo = 0
    try:
        for _ in range(rounds):
            me.take()
            for conn in pipes:
                conn.send("go")
            started = [conn.recv()[1] for conn in pipes]
            time.sleep(SETTLE + 0.003 * waiters)
            t0 = time.monotonic()
            me.give()
            took = sorted((conn.recv()[1:], i) for i, conn in enumerate(pipes))
            before = t0
            for (t_acq, t_rel), _i in took:
                out.append((t_acq - before) * 1000)
                before = t_rel
            fifo += took[0][1] == min(range(waiters), key=started.__getitem__)
    finally:
        for conn in pipes:
            conn.send("stop")
        for p in procs:
            p.join(30)
    return out, fifo


def pct(xs: list[float], q: int) -> float:
    """The ``q``-th percentile of ``xs`` (inclusive method)."""
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--waiters", default="1,4,16", help="comma-separated waiter counts")
    args = ap.parse_args()
    kinds: list[tuple[str, Callable[[str], Contender], bool]] = [
        ("lockwarden Lock.acquire (inotify + pidfd)", Lockwarden, True),
        ("filelock.FileLock (50 ms poll)", FileLockC, True),
        ("polling 100 ms (specs' protocol)", Polling, False),
    ]
    with tempfile.TemporaryDirectory(prefix="lw-handoff-") as tmp:
        d = Path(tmp)
        print(f"handoff latency, {args.rounds} rounds per series, load "
              f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        for k in (int(x) for x in args.waiters.split(",")):
            for name, kind, many in kinds:
                if k > 1 and not many:
                    continue
                xs, fifo = measure(kind, d, args.rounds, k)
                print(f"  {k:2d} waiter(s)  {name:42s} p50 {statistics.median(xs):7.2f} ms   "
                      f"p99 {pct(xs, 99):7.2f} ms   max {max(xs):7.2f} ms   "
                      f"(n={len(xs)}; first waiter wins first {fifo}/{args.rounds})")
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
