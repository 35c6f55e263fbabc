"""A watcher follows the holder's pin (core/kernel/pin.py): the lock of a holder in another
PID namespace is shown held while its pin is, and turns stale when that holder exits -- its
recorded PID (2 here, another process out here) never changes, so the watcher's liveness pass
must also watch the process the kernel names for the pin (core/watch/inventory.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.codes import Code
from core.config import WatchSpec
from core.record import State

ROOT = Path(__file__).resolve().parents[3]

HOLD = r"""
import os, sys
sys.path.insert(0, sys.argv[2])
from core.engine.lock import Lock
Lock(sys.argv[1]).acquire(timeout=5)
print(os.getpid(), flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0,
                    reason="needs unshare(1) as root (a PID namespace)")
def test_a_watched_pinned_lock_turns_stale_when_its_holder_exits(
        watch: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "shared.lock")
    _w, rec = watch([WatchSpec(str(tmp_path))], rescan_interval=3600, liveness_interval=0.3)
    holder = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
         f'"{sys.executable}" -c "$0" "$1" "$2"; :', HOLD, path, str(ROOT)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdin is not None
        if not holder.stdout.readline().strip():
            pytest.skip("unshare could not make a PID namespace here")
        rec.until(lambda m: path in m and m[path].state is State.HELD, what="held by its pin")
        assert rec.model[path].reasons[0].code is Code.HOLDER_PINNED
        holder.stdin.close()  # the holder exits: its pin goes with it
        holder.wait(timeout=30)
        rec.until(lambda m: m[path].state is State.STALE, timeout=5,
                  what="stale once the pinned holder exited")
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
