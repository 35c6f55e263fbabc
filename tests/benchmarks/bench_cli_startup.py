"""Benchmark: cold start-up of ``lockwarden status PATH`` beside bare ``python -c pass``.

Target (docs/cli.md, "Start-up time"; docs/performance.md): the median of 20 runs of
``lockwarden status PATH`` is at most 60 ms more than the interpreter's own start-up (import
lazily: no Qt, no watchdog on this path). Each run is a new process (the OS page cache stays
warm: "cold" means a fresh
interpreter). Also shows
``try`` and ``release`` (they import the lock engine) and which heavy modules were imported.

Run: ``.venv/bin/python tests/benchmarks/bench_cli_startup.py [--runs N] [--script]``. By default
it runs ``python -m core`` from this checkout (``PYTHONPATH`` and working directory set to it), so
a worktree measures its own code; ``--script`` runs the installed console script instead (which
imports whatever checkout the virtual environment was installed from). Prints figures; asserts
nothing about speed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "lockwarden"


def lockwarden_cmd(script: bool) -> list[str]:
    """The installed console script when ``script`` and there is one, else ``python -m core``
    (this checkout's code: :data:`ENV` and the working directory point at it)."""
    if script and SCRIPT.exists():
        return [str(SCRIPT)]
    return [sys.executable, "-m", "core"]


ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def timed(cmd: list[str], ok: tuple[int, ...] = (0, 1)) -> float:
    """Wall time of one run of ``cmd`` in ms."""
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                        check=False, env=ENV, cwd=ROOT).returncode
    elapsed = (time.perf_counter() - t0) * 1000
    if rc not in ok:
        raise SystemExit(f"{cmd!r} exited {rc}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--no-bytecode", action="store_true",
                    help="measure with PYTHONDONTWRITEBYTECODE=1 (every module compiled from "
                    "source at each start, as in a checkout with bytecode writing disabled)")
    ap.add_argument("--script", action="store_true",
                    help="run the installed console script instead of this checkout's code")
    opts = ap.parse_args()
    n = opts.runs
    lw = lockwarden_cmd(opts.script)
    with tempfile.TemporaryDirectory(prefix="lockwarden-bench-") as d:
        # An installed package has .pyc files. Let the interpreter cache bytecode, but in the
        # temp dir (PYTHONPYCACHEPREFIX) so the checkout is not written to.
        if opts.no_bytecode:
            ENV["PYTHONDONTWRITEBYTECODE"] = "1"
        else:
            ENV.pop("PYTHONDONTWRITEBYTECODE", None)
            ENV["PYTHONPYCACHEPREFIX"] = os.path.join(d, "pycache")
        lock = os.path.join(d, "bench.lock")
        with open(lock, "w") as f:
            f.write(f"pid={os.getpid()}\ntimestamp={int(time.time())}\ntag=bench\n")
        free = os.path.join(d, "free.lock")
        for _ in range(2):  # warm the page cache and __pycache__
            timed([sys.executable, "-c", "pass"])
            timed([*lw, "status", lock])
        bare, status, status_free, cycle = [], [], [], []
        for _ in range(n):  # interleaved, so load changes hit all series alike
            bare.append(timed([sys.executable, "-c", "pass"]))
            status.append(timed([*lw, "status", lock]))
            status_free.append(timed([*lw, "status", free]))
            t0 = time.perf_counter()
            subprocess.run([*lw, "try", free, "-q"], check=True, env=ENV, cwd=ROOT)
            subprocess.run([*lw, "release", free, "-q"], check=True, env=ENV, cwd=ROOT)
            cycle.append((time.perf_counter() - t0) * 1000 / 2)
        probe = subprocess.run(
            [sys.executable, "-c",
             "import sys, runpy; sys.argv = ['lockwarden', 'status', sys.argv[1]]\n"
             "from core.cli.main import main\nmain()\n"
             "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
             "{'PySide6', 'watchdog', 'app', 'platformdirs', 'tomllib', 'tomli_w'})\n"
             "print('HEAVY', ','.join(heavy) or 'none')", lock],
            capture_output=True, text=True, check=False, cwd=ROOT, env=ENV,
        )
        heavy = next((ln.split(" ", 1)[1] for ln in probe.stdout.splitlines()
                      if ln.startswith("HEAVY ")), "?")

    med = statistics.median
    mode = "no bytecode cache" if opts.no_bytecode else "bytecode cached (as installed)"
    print(f"runs: {n} each; command: {' '.join(os.path.basename(c) for c in lw)}; {mode}")
    print(f"python -c pass                 median {med(bare):6.1f} ms")
    print(f"lockwarden status PATH (held)  median {med(status):6.1f} ms  "
          f"(+{med(status) - med(bare):.1f} ms over bare python; target <= +60 ms)")
    print(f"lockwarden status PATH (free)  median {med(status_free):6.1f} ms  "
          f"(+{med(status_free) - med(bare):.1f} ms)")
    print(f"lockwarden try / release       median {med(cycle):6.1f} ms per command  "
          f"(+{med(cycle) - med(bare):.1f} ms)")
    print(f"heavy modules imported by status: {heavy}")


if __name__ == "__main__":
    main()
