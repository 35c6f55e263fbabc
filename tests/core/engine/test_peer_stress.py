"""Peers' kernel-lock protocols under load (docs/engine.md, "Peers' kernel locks"): three real
holders of filelock, portalocker or fasteners hammer one empty lock file, each checking a side
file on entry and exit, while a Lockwarden engine process reclaims, force-releases and
acquires (and releases) the same path in a loop. Not once may two of their holders be in at
the same time.

The duration per peer is ``LOCKWARDEN_PEER_STRESS_S`` seconds (default 10: the three peers
fit the default suite's minute; docs/engine.md gives the figures of a 60 s run). The engine
process is ``LOCKWARDEN_PEER_STRESS_ROOT``'s ``core`` when set (to show that an older engine
fails), else this tree's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
SECONDS = float(os.environ.get("LOCKWARDEN_PEER_STRESS_S", "10"))
ENGINE_ROOT = os.environ.get("LOCKWARDEN_PEER_STRESS_ROOT", str(ROOT))
HOLDERS = 3
PAUSE = float(os.environ.get("LOCKWARDEN_PEER_STRESS_PAUSE", "0.05"))
"""Longest pause of a holder between two of its critical sections, seconds (drawn at random):
moments when nobody holds or waits for the file, when the engine gets to act."""

HOLDER = r"""
import json, os, random, sys, time
peer, path, side, until = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
PAUSE = float(sys.argv[5])
if peer == "filelock":
    import filelock
    def locked():
        return filelock.FileLock(path, timeout=-1).acquire(poll_interval=0.002)
elif peer == "portalocker":
    import portalocker
    def locked():
        return portalocker.Lock(path, "a", timeout=3600, check_interval=0.005)
else:
    import fasteners
    def locked():
        return fasteners.InterProcessLock(path)
me = str(os.getpid()).encode()
cycles = overlaps = 0
seen = []
while time.time() < until:
    with locked():
        try:
            fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            overlaps += 1  # another holder is in: its marker is there
            seen.append(time.time())
            mine = False
        else:
            os.write(fd, me)
            os.close(fd)
            mine = True
        time.sleep(random.random() * 0.002)
        if mine:
            with open(side, "rb") as f:
                if f.read() != me:
                    overlaps += 1
                    seen.append(time.time())
            os.unlink(side)
        cycles += 1
    time.sleep(random.random() * PAUSE)
print(json.dumps({"cycles": cycles, "overlaps": overlaps, "at": seen}))
"""
"""One peer holder: take the library's lock on PATH over and over until UNTIL (Unix s),
checking the side file on entry (nobody else's marker) and on exit (still its own)."""

ENGINE = r"""
import json, sys, time
import core
from core.errors import LockError
path, until = sys.argv[1], float(sys.argv[2])
ops = [int(o) for o in sys.argv[3].split(",")]
counts = {"reclaimed": 0, "force_released": 0, "acquired": 0, "refused": 0}
n = 0
while time.time() < until:
    op = ops[n % len(ops)]
    n += 1
    try:
        if op == 0:
            core.reclaim(path, reason="stress").release()
            counts["reclaimed"] += 1
        elif op == 1:
            core.force_release(path, reason="stress")
            counts["force_released"] += 1
        else:
            core.Lock(path).acquire(blocking=False).release()
            counts["acquired"] += 1
    except (LockError, OSError):
        counts["refused"] += 1
print(json.dumps(counts))
"""
"""The engine's loop: reclaim (and release), force release, acquire (and release) PATH."""


def _stress(peer: str, d: Path, seconds: float) -> dict[str, Any]:
    path, side = d / "peer.lock", d / "in-critical-section"
    until = time.time() + seconds
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    peers = [subprocess.Popen([sys.executable, "-c", HOLDER, peer, str(path), str(side),
                               str(until), str(PAUSE)], stdout=subprocess.PIPE, text=True,
                              env=env)
             for _ in range(HOLDERS)]
    engine = subprocess.Popen([sys.executable, "-c", ENGINE, str(path), str(until),
                               os.environ.get("LOCKWARDEN_PEER_STRESS_OPS", "0,1,2")],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              env={**os.environ, "PYTHONPATH": ENGINE_ROOT}, cwd=d)
    results = []
    try:
        for p in peers:
            out, _ = p.communicate(timeout=seconds + 120)
            assert p.returncode == 0, out
            results.append(json.loads(out.strip().splitlines()[-1]))
        out, _ = engine.communicate(timeout=seconds + 120)
        counts = json.loads(out.strip().splitlines()[-1])
    finally:
        for p in [*peers, engine]:
            if p.poll() is None:
                p.kill()
                p.wait()
    start = until - seconds
    return {"peer": peer, "cycles": sum(r["cycles"] for r in results),
            "overlaps": sum(r["overlaps"] for r in results), **counts,
            "overlaps_at_s": sorted(round(t - start, 3) for r in results for t in r["at"])}


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: flock, leases, /proc")
@pytest.mark.parametrize("peer", ["filelock", "portalocker", "fasteners"])
def test_two_peer_holders_are_never_in_at_once(tmp_path: Path, peer: str) -> None:
    figures = _stress(peer, tmp_path, SECONDS)
    print(f"\n{peer}: {json.dumps(figures)}")  # the figures of a run (docs/engine.md)
    assert figures["cycles"] > 0
    assert figures["overlaps"] == 0, figures
