"""Listing at scale: 100,000 sema lock files in 1,000 directories (docs/specs/sema.txt, "Lock
File Format"), listed by ``lockwarden list -r --json`` and loaded by ``Watcher.start`` (one
recursive spec), beside the floor loop of the same run: ``os.walk`` + ``lstat`` + one
``open``/``read`` of every file, in Python. Each measure runs in a child process of its own
(``python -m core list ...``; a small script for the watcher), so its wall time, CPU time
(``os.wait4``) and peak RSS (``VmHWM`` of ``/proc/self/status``, read by the child at its
end: ``ru_maxrss`` would count the pages of this process it was forked from) are its own.
Linux only.

With ``--before REV`` (default ``main``), the same measures run first on an export of that
revision (``git archive``), so before and after come from one run with the same tree and
the same floor. Targets (docs/performance.md, "Listing and watching 100,000 locks"):
``list -r --json`` <= 2.2x the floor and <= 250 MB; ``Watcher.start`` <= 2 s and <= 250 MB.
Asserts nothing (docs/DESIGN.md "Testing").

    .venv/bin/python tests/benchmarks/bench_list_scale.py [--dirs 1000] [--per-dir 100]
        [--before main | --before ''] [--rounds 1] [--dir DIR]

A third of the locks name this process (alive), the rest PIDs that do not exist (dead).
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LIST_CHILD = r"""
import runpy, sys
sys.argv = ["lockwarden", *sys.argv[1:]]
try:
    runpy.run_module("core", run_name="__main__")
finally:
    sys.stderr.write(open("/proc/self/status").read())
"""

WATCH_CHILD = r"""
import sys, time
from core.config import WatchSpec
from core.watch.watcher import Watcher
w = Watcher([WatchSpec(sys.argv[1], recursive=True)], lambda changes: None)
t0, c0 = time.perf_counter(), time.process_time()
w.start()
t, cpu = time.perf_counter() - t0, time.process_time() - c0
n = len(w.snapshot())
rss = next(int(line.split()[1]) for line in open("/proc/self/status")
           if line.startswith("VmHWM:"))
w.close()
print(f"{t:.6f} {n} {rss} {cpu:.6f}")
"""


def build(root: Path, dirs: int, per_dir: int) -> None:
    """``dirs`` directories of ``per_dir`` sema lock files each, under ``root``."""
    now = int(time.time())
    me = os.getpid()
    for i in range(dirs):
        d = root / f"d{i:04d}"
        d.mkdir()
        for j in range(per_dir):
            pid = me if j % 3 == 0 else 4_000_000 + j
            (d / f"l{j:04d}.lock").write_bytes(
                f"pid={pid}\ntimestamp={now}\ntag=build {i}/{j}\n".encode())


def floor(root: Path) -> tuple[float, int]:
    """Seconds for ``os.walk`` + ``lstat`` + open/read/close of every ``*.lock``, and the count."""
    t0 = time.perf_counter()
    n = 0
    for d, _subdirs, files in os.walk(root):
        for name in files:
            if name.endswith(".lock"):
                p = os.path.join(d, name)
                os.lstat(p)
                fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                try:
                    os.read(fd, 65536)
                finally:
                    os.close(fd)
                n += 1
    return time.perf_counter() - t0, n


def floor_cpu(tree: Path) -> float:
    """CPU seconds (user + system) of one :func:`floor` loop."""
    c0 = time.process_time()
    floor(tree)
    return time.process_time() - c0


def child(argv: list[str], cwd: Path) -> tuple[float, float, int, bytes]:
    """Run ``argv`` in ``cwd``; its wall seconds, its CPU seconds (user + system), its peak
    RSS (KiB, the ``VmHWM`` it wrote on stderr; 0 when none) and its stdout."""
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err, env=env)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        data = out.read()
        err.seek(0)
        hwm = [int(line.split()[1]) for line in err.read().decode(errors="replace").splitlines()
               if line.startswith("VmHWM:")]
    if proc.returncode != 0:
        raise SystemExit(f"{argv}: exit {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, hwm[-1] if hwm else 0, data


def measure(code: Path, tree: Path, total: int) -> dict[str, tuple[float, float, float]]:
    """``list -r --json`` and ``Watcher.start`` with the code in ``code``: (wall s, CPU s, max
    RSS MiB) each. The list's CPU is the whole child's (start-up included); the watcher's
    is the process's CPU during ``start()`` (all threads)."""
    wall, cpu, rss, data = child(
        [sys.executable, "-c", LIST_CHILD, "list", "-r", "--json", str(tree)], code)
    rows = data.count(b'"path"')
    if rows != total:
        print(f"  ({code.name}: list printed {rows} rows, expected {total})")
    _w, _c, _rss, data = child([sys.executable, "-c", WATCH_CHILD, str(tree)], code)
    t, n, wrss, wcpu = data.split()
    if int(n) != total:
        print(f"  ({code.name}: watcher holds {int(n)} entries, expected {total})")
    return {"list": (wall, cpu, rss / 1024), "watch": (float(t), float(wcpu), int(wrss) / 1024)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dirs", type=int, default=1000)
    ap.add_argument("--per-dir", type=int, default=100)
    ap.add_argument("--before", default="main", help="git revision to compare with ('' none)")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of each measure (median)")
    ap.add_argument("--dir", help="parent directory for the temp tree")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lw-bench-list-", dir=args.dir))
    try:
        tree = work / "tree"
        os.environ["LOCKWARDEN_CONFIG"] = str(work / "none.toml")  # the defaults, no file
        tree.mkdir()
        build(tree, args.dirs, args.per_dir)
        total = args.dirs * args.per_dir
        versions = {"after": ROOT}
        if args.before:
            export = work / "before"
            export.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before, "core"],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(export)], input=archive, check=True)
            versions = {f"before ({args.before})": export, **versions}
        floor(tree)  # warm the page cache: every measure reads cached files
        floors: list[float] = []
        results: dict[str, list[dict[str, tuple[float, float, float]]]] = {k: [] for k in versions}
        for _ in range(args.rounds):
            for name, code in versions.items():
                floors.append(floor(tree)[0])
                results[name].append(measure(code, tree, total))
        fl = statistics.median(floors)
        cpu_floor = floor_cpu(tree)
        print(f"{total} sema locks in {args.dirs} directories ({tree.parent}), "
              f"median of {args.rounds} round(s), load {os.getloadavg()[0]:.2f} "
              f"on {os.cpu_count()} CPUs")
        print(f"floor (os.walk + lstat + open/read/close of every file): {fl:.2f} s "
              f"(min {min(floors):.2f}, max {max(floors):.2f}; CPU {cpu_floor:.2f} s)")
        print(f"{'code':<16} {'list -r --json':>15} {'CPU':>7} {'x floor':>8} {'max RSS':>9}"
              f"   {'Watcher.start':>13} {'CPU':>7} {'max RSS':>9}")
        for name, runs in results.items():
            lw, lc, lr = (statistics.median(r["list"][i] for r in runs) for i in range(3))
            ww, wc, wr = (statistics.median(r["watch"][i] for r in runs) for i in range(3))
            print(f"{name:<16} {lw:>13.2f} s {lc:>5.2f} s {lw / fl:>7.2f}x {lr:>5.0f} MiB"
                  f"   {ww:>11.2f} s {wc:>5.2f} s {wr:>5.0f} MiB")
        print("targets: list <= 2.2x the floor and <= 250 MB; Watcher.start <= 2 s and "
              "<= 250 MB")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
