"""``/proc/locks`` at scale: ``status PATH`` and a watcher pass while a helper process holds
200,000 POSIX byte-range locks (``fcntl`` locks on every other byte of 1,000 files, so the
kernel cannot merge them: 200,000 lines in ``/proc/locks``), next to the same measures
without them, in one run. Any local user can do this (docs/specs/devtool-locks.md §2.6,
"Cost of polling").

Measured (median of ``--rounds``):

- ``lockwarden status PATH`` (a fresh ``python -m core`` each time) on an empty ``.lock`` file
  held by ``flock(1)`` and on a free one (the kernel decides both: docs/verdicts.md, "When the
  kernel's lock table is too large"), and on a Lockwarden (sema) lock held by a live process;
- a watcher pass: ``Watcher.start()`` (initial scan) and ``Watcher.rescan()`` of a directory
  of 100 lock files, 10 of them flock-held, 40 sema locks held;
- anchors: one whole ``open``+``read`` of ``/proc/locks`` (once: with 200,000 entries it takes
  about a minute), a bare ``F_GETLK`` on one file (``core.kernel.getlk.getlk``), and
  ``python -c pass``;
- with ``--before REV``: the two kernel-decided ``status`` figures again with the ``core`` of
  git revision ``REV`` (extracted with ``git archive`` into a temporary directory), one round
  each (they read the whole table).

Target (docs/performance.md "/proc/locks at scale"): ``status`` and a watcher pass <= 1 s
with 200,000 entries. Asserts nothing (docs/DESIGN.md "Testing"). Linux only.

    .venv/bin/python tests/benchmarks/bench_proc_locks_scale.py [--entries 200000] [--rounds 5]
        [--before fe87ffb]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.config import WatchSpec  # noqa: E402
from core.kernel.getlk import getlk  # noqa: E402
from core.watch.watcher import Watcher  # noqa: E402

MANY_LOCKS = r"""
import fcntl, os, resource, sys
base, n, per_file = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
files = -(-n // per_file)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, files + 64)), hard))
fds = []
for f in range(files):
    fd = os.open(f"{base}-{f:05d}", os.O_RDWR | os.O_CREAT, 0o600)
    fds.append(fd)
    for i in range(min(per_file, n - f * per_file)):
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 2 * i, os.SEEK_SET)
print("ready", flush=True)
sys.stdin.read()
"""

PER_FILE = 200
"""Byte-range locks per file: the kernel keeps one list of POSIX locks per inode and walks it
for every new lock, so 200,000 locks on one file take minutes; 1,000 files of 200 take ~1 s."""

SEMA_HOLDER = r"""
import sys, core
locks = [core.Lock(p, tag="bench") for p in sys.argv[1:]]
for lock in locks:
    lock.acquire(blocking=False)
print("ready", flush=True)
sys.stdin.read()
"""


def median_ms(fn: Callable[[], object], rounds: int) -> float:
    """Median wall time of ``fn`` in milliseconds."""
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def proc_locks_lines() -> int:
    """Lines in /proc/locks now (a whole read: slow with many entries)."""
    with open("/proc/locks", "rb") as f:
        return f.read().count(b"\n")


def read_proc_locks() -> bytes:
    """One open + read of /proc/locks (the floor of any lookup through it)."""
    with open("/proc/locks", "rb") as f:
        return f.read()


def cli_status(path: str, tree: Path = ROOT) -> int:
    """``python -m core status PATH`` in a fresh process (``core`` from ``tree``); its exit
    code."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    return subprocess.run([sys.executable, "-m", "core", "status", path], env=env, cwd=str(tree),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode


def timed_status(path: str, rounds: int, tree: Path = ROOT) -> tuple[float, int]:
    """(median ms, last exit code) of :func:`cli_status`."""
    codes: list[int] = []
    ms = median_ms(lambda: codes.append(cli_status(path, tree)), rounds)
    return ms, codes[-1]


def watcher_pass(d: str) -> tuple[float, float, int]:
    """(ms for Watcher.start, ms for one Watcher.rescan, locks found)."""
    w = Watcher([WatchSpec(path=d)], lambda _c: None)
    try:
        t0 = time.perf_counter()
        w.start()
        t1 = time.perf_counter()
        w.rescan()
        t2 = time.perf_counter()
        return (t1 - t0) * 1000, (t2 - t1) * 1000, len(w.snapshot())
    finally:
        w.close()


def measure(d: Path, flocked: str, free: str, sema: str, rounds: int,
            before: Path | None) -> dict[str, float]:
    """Every figure (medians of ``rounds``; the whole read and ``before`` once)."""
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    out["lines"] = proc_locks_lines()
    out["read"] = (time.perf_counter() - t0) * 1000
    out["getlk"] = median_ms(lambda: getlk(flocked), max(rounds, 50))
    out["status_flock"], out["code_flock"] = timed_status(flocked, rounds)
    out["status_free"], out["code_free"] = timed_status(free, rounds)
    out["status_sema"], out["code_sema"] = timed_status(sema, rounds)
    passes = [watcher_pass(str(d)) for _ in range(rounds)]
    out["start"] = statistics.median(p[0] for p in passes)
    out["rescan"] = statistics.median(p[1] for p in passes)
    out["found"] = passes[0][2]
    if before is not None:
        out["before_flock"], out["before_code_flock"] = timed_status(flocked, 1, before)
        out["before_free"], out["before_code_free"] = timed_status(free, 1, before)
    return out


def old_tree(rev: str, into: Path) -> Path:
    """The ``core`` package of git revision ``rev`` extracted under ``into``."""
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "core"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> int:
    if not os.path.exists("/proc/locks"):
        sys.exit("Linux only: no /proc/locks here")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=200_000, help="POSIX locks held (200000)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per figure (5)")
    ap.add_argument("--before", metavar="REV", help="also time status with this revision's core")
    args = ap.parse_args()
    flock = shutil.which("flock")
    if flock is None:
        sys.exit("flock(1) is needed (util-linux)")
    tmp = Path(tempfile.mkdtemp(prefix="lockwarden-bench-proclocks-"))
    procs: list[subprocess.Popen[str]] = []
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        before = old_tree(args.before, tmp / "before") if args.before else None
        d = tmp / "locks"
        d.mkdir()
        flocked = [d / f"k{i:02d}.lock" for i in range(10)]
        semas = [str(d / f"s{i:02d}.lock") for i in range(40)]
        for p in flocked:
            p.write_bytes(b"")
        for i in range(50):
            (d / f"free{i:02d}.lock").write_bytes(b"")
        old = time.time() - 7200
        os.utime(d / "free00.lock", (old, old))
        for p in flocked:  # flock(1) holding each until its stdin closes
            procs.append(subprocess.Popen([flock, "-x", str(p), "cat"], stdin=subprocess.PIPE,
                                          stdout=subprocess.DEVNULL, text=True))
        holder = subprocess.Popen([sys.executable, "-c", SEMA_HOLDER, *semas], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(holder)
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # the flock(1)s have taken their locks
        t0 = time.perf_counter()
        py = median_ms(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
                       args.rounds)
        files = (str(flocked[0]), str(d / "free00.lock"), semas[0])
        without = measure(d, *files, args.rounds, before)
        many = subprocess.Popen([sys.executable, "-c", MANY_LOCKS, str(tmp / "ranges"),
                                 str(args.entries), str(PER_FILE)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        procs.append(many)
        t1 = time.perf_counter()
        assert many.stdout is not None and many.stdout.readline().strip() == "ready"
        take = time.perf_counter() - t1
        with_many = measure(d, *files, args.rounds, before)
        total = time.perf_counter() - t0
    finally:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.terminate()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"/proc/locks at scale; {args.rounds} rounds, medians; load average "
          f"{os.getloadavg()[0]:.2f}; {total:.0f} s in all; taking {args.entries} POSIX "
          f"locks took {take:.1f} s")
    print(f"{'':52} {'without':>10} {'with':>10}")
    rows = [
        ("lines in /proc/locks", "lines", "{:10.0f}"),
        ("anchor: one whole open+read of /proc/locks (ms)", "read", "{:10.1f}"),
        ("anchor: a bare F_GETLK on one file (ms)", "getlk", "{:10.3f}"),
        ("status PATH, flock(1)-held empty file (ms)", "status_flock", "{:10.1f}"),
        ("  its exit code (1 = held)", "code_flock", "{:10.0f}"),
        ("status PATH, free empty file, 2 h old (ms)", "status_free", "{:10.1f}"),
        ("  its exit code (0 = free, 1 = held)", "code_free", "{:10.0f}"),
        ("status PATH, held sema lock (ms)", "status_sema", "{:10.1f}"),
        ("watcher: Watcher.start, 100 locks (ms)", "start", "{:10.1f}"),
        ("watcher: Watcher.rescan (ms)", "rescan", "{:10.1f}"),
        ("locks the watcher lists", "found", "{:10.0f}"),
    ]
    if args.before:
        rows += [
            (f"before ({args.before}): status, flock-held (ms)", "before_flock", "{:10.1f}"),
            ("  its exit code", "before_code_flock", "{:10.0f}"),
            (f"before ({args.before}): status, free empty (ms)", "before_free", "{:10.1f}"),
            ("  its exit code", "before_code_free", "{:10.0f}"),
        ]
    for label, key, fmt in rows:
        print(f"{label:<52} {fmt.format(without[key])} {fmt.format(with_many[key])}")
    print(f"anchor: python -c pass {py:.1f} ms; target: status and a watcher pass <= 1000 ms "
          "with 200,000 entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
