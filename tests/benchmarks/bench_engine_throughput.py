"""Uncontended acquire+release cycles/s of the engine beside, in the same run, the specs' raw
protocol floor and two popular Python lock libraries. Prints figures; asserts nothing.

    .venv/bin/python tests/benchmarks/bench_engine_throughput.py [--cycles 300] [--rounds 5]

Contenders (one process, one lock, no contention; rounds interleaved, median of rounds):

- ``raw floor``: ``open(O_CREAT|O_EXCL)`` + write + fsync + close + unlink, the specs'
  protocol (specs/000 "Platform Implementation") with nothing else.
- ``raw floor + dir fsync``: the same plus an fsync of the directory, so that the creation
  itself is durable: the durability Lockwarden's acquire gives (temp + fsync + link + dir
  fsync).
- ``bare link protocol``: docs/DESIGN.md's publish protocol alone (temp + fsync, link, unlink temp,
  directory fsync; release = unlink). The directory fsync after the temp file's fsync makes a
  second journal commit (link and unlink happened after the first); in the specs' protocol the
  directory fsync right after the file's fsync finds nothing left to commit.
- ``link protocol without fsync``: temp + write, link, unlink temp; release = unlink: what
  Lockwarden's default writes (docs/architecture.md, "Durability").
- ``lockwarden``: ``Lock.acquire(blocking=False)`` + ``release()``, everything included: the
  record (psutil start time, hostname, token), temp file + link (no fsync by default), the
  guarded verified release, and two audit entries (one write each; no fsync).
- ``lockwarden, audit off``: the same with :func:`core.audit.append` replaced by a no-op, to
  show the engine's own cost (audit is not optional in the product).
- ``lockwarden, durable=True``: temp + fsync + link + dir fsync, audit entries fsynced.
- ``filelock.FileLock``: ``flock`` on a file that stays; no fsync, no content.
- ``flufl.lock``: link-based, writes a claim file; no fsync.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import core.engine.lock as engine  # noqa: E402

DATA = b"pid=12345\ntimestamp=1703520000\ntag=bench\n"


def raw_floor(d: Path, n: int, dir_fsync: bool = False) -> float:
    p = str(d / "raw.lock")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    t0 = time.perf_counter()
    for _ in range(n):
        fd = os.open(p, flags, 0o644)
        os.write(fd, DATA)
        os.fsync(fd)
        os.close(fd)
        if dir_fsync:
            dfd = os.open(str(d), os.O_RDONLY)
            os.fsync(dfd)
            os.close(dfd)
        os.unlink(p)
    return n / (time.perf_counter() - t0)


def link_floor(d: Path, n: int) -> float:
    """The bare publish protocol of docs/DESIGN.md with nothing else: temp file + write + fsync,
    link, unlink temp, directory fsync; release = unlink."""
    p = str(d / "link.lock")
    tmp = str(d / ".link.lock.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    t0 = time.perf_counter()
    for _ in range(n):
        fd = os.open(tmp, flags, 0o644)
        os.write(fd, DATA)
        os.fsync(fd)
        os.close(fd)
        os.link(tmp, p)
        os.unlink(tmp)
        dfd = os.open(str(d), os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
        os.unlink(p)
    return n / (time.perf_counter() - t0)


def nosync_floor(d: Path, n: int) -> float:
    """The publish protocol without fsyncs: temp file + write, link, unlink temp; release =
    unlink (what Lockwarden's default does on disk)."""
    p = str(d / "nosync.lock")
    tmp = str(d / ".nosync.lock.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    t0 = time.perf_counter()
    for _ in range(n):
        fd = os.open(tmp, flags, 0o644)
        os.write(fd, DATA)
        os.close(fd)
        os.link(tmp, p)
        os.unlink(tmp)
        os.unlink(p)
    return n / (time.perf_counter() - t0)


def lockwarden(d: Path, n: int, audit: bool = True, durable: bool = False) -> float:
    original = engine._audit
    if not audit:
        engine._audit = lambda *a, **k: None
    try:
        name = f"lw-{int(audit)}{int(durable)}.lock"
        lk = engine.Lock(d / name, tag="bench", durable=durable)
        t0 = time.perf_counter()
        for _ in range(n):
            lk.acquire(blocking=False)
            lk.release()
        return n / (time.perf_counter() - t0)
    finally:
        engine._audit = original


def filelock_cycles(d: Path, n: int) -> float:
    import filelock

    lk = filelock.FileLock(str(d / "fl.lock"))
    t0 = time.perf_counter()
    for _ in range(n):
        lk.acquire()
        lk.release()
    return n / (time.perf_counter() - t0)


def flufl_cycles(d: Path, n: int) -> float:
    from flufl.lock import Lock as FluflLock

    lk = FluflLock(str(d / "flufl.lock"), lifetime=timedelta(seconds=60))
    t0 = time.perf_counter()
    for _ in range(n):
        lk.lock()
        lk.unlock()
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cycles", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    contenders: list[tuple[str, Callable[[Path, int], float]]] = [
        ("raw floor (O_EXCL+write+fsync+close+unlink)", raw_floor),
        ("raw floor + dir fsync (same durability)", lambda d, n: raw_floor(d, n, True)),
        ("bare link protocol (temp+fsync+link+dir fsync)", link_floor),
        ("link protocol without fsync (temp+link)", nosync_floor),
        ("lockwarden Lock (default: audit on)", lockwarden),
        ("lockwarden Lock (audit off)", lambda d, n: lockwarden(d, n, False)),
        ("lockwarden Lock (durable=True, audited)", lambda d, n: lockwarden(d, n, True, True)),
        ("filelock.FileLock (flock, no fsync)", filelock_cycles),
        ("flufl.lock (link, no fsync)", flufl_cycles),
    ]
    results: dict[str, list[float]] = {name: [] for name, _ in contenders}
    with tempfile.TemporaryDirectory(prefix="lw-bench-") as tmp:
        d = Path(tmp)
        for fn in (c[1] for c in contenders):
            fn(d, 20)  # warm-up: imports, page cache
        for _ in range(args.rounds):
            for name, fn in contenders:
                results[name].append(fn(d, args.cycles))
    floor = statistics.median(results[contenders[0][0]])
    floor_dir = statistics.median(results[contenders[1][0]])
    floor_link = statistics.median(results[contenders[2][0]])
    print(f"uncontended acquire+release, {args.cycles} cycles x {args.rounds} rounds "
          f"(median), load {os.getloadavg()[0]:.2f}")
    for name, _ in contenders:
        med = statistics.median(results[name])
        print(f"  {name:48s} {med:7.0f} cycles/s  time: {floor / med:5.2f}x raw floor  "
              f"{floor_dir / med:5.2f}x raw+dir fsync  {floor_link / med:5.2f}x link protocol")


if __name__ == "__main__":
    main()
