"""Handoff latency: a holder releases in one process, a waiter blocked in another process
returns. Median and p90 in ms, beside the specs' 100 ms polling loop and filelock, in the
same run. Prints figures; asserts nothing.

    .venv/bin/python tests/benchmarks/bench_engine_handoff.py [--rounds 40]

Each round: the parent takes the lock; the waiter process (started once, forked) starts its
blocking acquire; the parent waits 30 ms so the waiter is surely blocked, reads the clock
(``time.monotonic``, system-wide on Linux) and releases; the waiter reads the clock right
after its acquire returns. Latency = the difference.

Contenders:
- ``lockwarden``: ``Lock.acquire()`` (inotify on the directory + pidfd + 1 s fallback poll).
- ``polling 100 ms``: the specs' blocking acquisition (specs/000 "Blocking Acquisition"):
  ``O_CREAT|O_EXCL`` retried every 100 ms.
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
        from core.lock import Lock

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
        c.take()
        t1 = time.monotonic()
        c.give()
        conn.send(t1)
    os._exit(0)


def measure(kind: Callable[[str], Contender], d: Path, rounds: int) -> list[float]:
    ctx = multiprocessing.get_context("fork")
    path = str(d / f"{kind.__name__}.lock")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_waiter, args=(kind, path, child))
    p.start()
    me = kind(path)
    out: list[float] = []
    try:
        for _ in range(rounds):
            me.take()
            parent.send("go")
            time.sleep(SETTLE)
            t0 = time.monotonic()
            me.give()
            t1 = parent.recv()
            out.append((t1 - t0) * 1000)
    finally:
        parent.send("stop")
        p.join(30)
    return out


def p90(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=10)[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args()
    kinds: list[tuple[str, Callable[[str], Contender]]] = [
        ("lockwarden Lock.acquire (inotify + pidfd)", Lockwarden),
        ("polling 100 ms (specs' protocol)", Polling),
        ("filelock.FileLock (50 ms poll)", FileLockC),
    ]
    with tempfile.TemporaryDirectory(prefix="lw-handoff-") as tmp:
        d = Path(tmp)
        print(f"handoff latency, {args.rounds} rounds each, load {os.getloadavg()[0]:.2f}")
        for name, kind in kinds:
            xs = measure(kind, d, args.rounds)
            print(f"  {name:44s} median {statistics.median(xs):7.2f} ms   "
                  f"p90 {p90(xs):7.2f} ms   max {max(xs):7.2f} ms")


if __name__ == "__main__":
    main()
