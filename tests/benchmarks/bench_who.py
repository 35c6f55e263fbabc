"""``lockwarden who`` (core.kernel.usage) beside ``lsof PATH`` and ``fuser PATH`` of the same run:
N processes (default 1,000) each holding F open descriptors (default 50: 50,000 in all) on a
set of files; the file asked about is open in one more process (the usual case: every
descriptor of the host is looked at, one matches); then the same with the file open in all N
(each user described: name, user, command line, start), and a folder of 10,000 files, one of
them open.
Prints median and worst wall times over the rounds; asserts nothing about speed
(docs/DESIGN.md "Testing"). Linux only.

    .venv/bin/python tests/benchmarks/bench_who.py [--procs 1000] [--fds 50] [--rounds 5]

Anchors measured in the same run: ``lsof PATH`` and ``fuser PATH`` (Debian's lsof and psmisc;
skipped when missing), and the bare walk (readlink of every ``/proc/*/fd/*``, nothing else).
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

from core.kernel.usage import who_uses  # noqa: E402


def _spawn(n: int, files: list[str]) -> list[subprocess.Popen[bytes]]:
    """``n`` ``sleep`` processes, each inheriting one descriptor per file."""
    fds = [os.open(f, os.O_RDONLY) for f in files]
    try:
        procs = [subprocess.Popen(["sleep", "600"], pass_fds=fds, stdin=subprocess.DEVNULL)
                 for _ in range(n)]
    finally:
        for fd in fds:
            os.close(fd)
    return procs


def _walk_floor() -> None:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    pass
        except OSError:
            pass


def _time(fn: Callable[[], object], rounds: int) -> tuple[float, float]:
    runs = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) * 1000)
    return statistics.median(runs), max(runs)


def _cmd(argv: list[str]) -> Callable[[], object]:
    return lambda: subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  check=False)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=1000)
    ap.add_argument("--fds", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    if not sys.platform.startswith("linux"):
        print("Linux only")
        return 0
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory(prefix="bench-who-") as d:
        files = []
        for i in range(a.fds):
            f = Path(d) / f"f{i}.dat"
            f.write_bytes(b"x")
            files.append(str(f))
        target = str(Path(d) / "asked.dat")
        Path(target).write_bytes(b"x")
        procs = _spawn(a.procs, files) + _spawn(1, [target])
        try:
            who_py = [sys.executable, "-m", "core", "who", target]
            env_ok = {**os.environ, "PYTHONPATH": str(ROOT)}
            found = who_uses([target])
            print(f"{a.procs} processes x {a.fds} descriptors = {a.procs * a.fds:,} "
                  f"(found {len(found.uses)} users of the file)")
            rows = [("who_uses(FILE) in process", lambda: who_uses([target])),
                    ("lockwarden who FILE (command)", lambda: subprocess.run(
                        who_py, env=env_ok, stdout=subprocess.DEVNULL, check=False)),
                    ("floor: readlink of every /proc/*/fd/*", _walk_floor)]
            for tool in ("lsof", "fuser"):
                if shutil.which(tool):
                    rows.append((f"{tool} FILE", _cmd([tool, target])))
            for name, fn in rows:
                med, worst = _time(fn, a.rounds)
                print(f"  {name:40s} median {med:8.1f} ms   worst {worst:8.1f} ms")
            med, worst = _time(lambda: who_uses([files[0]]), a.rounds)
            print(f"  {'who_uses(FILE open in all N)':40s} median {med:8.1f} ms   "
                  f"worst {worst:8.1f} ms")
        finally:
            for p in procs:
                p.kill()
            for p in procs:
                p.wait()
        tree = Path(d) / "tree"
        for i in range(100):
            sub = tree / f"d{i}"
            sub.mkdir(parents=True)
            for j in range(100):
                (sub / f"f{j}").write_bytes(b"")
        one = open(tree / "d50" / "f50")  # noqa: SIM115 - held open for the measurement
        try:
            med, worst = _time(lambda: who_uses([str(tree)]), a.rounds)
            print(f"  {'who_uses(FOLDER of 10,000 files)':40s} median {med:8.1f} ms   "
                  f"worst {worst:8.1f} ms")
            if shutil.which("lsof"):
                med, worst = _time(_cmd(["lsof", "+D", str(tree)]), a.rounds)
                print(f"  {'lsof +D FOLDER':40s} median {med:8.1f} ms   worst {worst:8.1f} ms")
        finally:
            one.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
