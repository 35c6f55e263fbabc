"""A forked child must not keep its parent's holder's pin (core/kernel/pin.py): the pin is
evidence that the *holder* is alive, so once the holder dies its lock is stale even while a
child it forked (multiprocessing's fork, os.fork without exec) lives on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.codes import Code
from core.kernel.pin import pinned_by
from core.record import State
from core.verdicts.inspect import inspect

ROOT = Path(__file__).resolve().parents[3]
linux = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs /proc/locks")

FORKER = r"""
import os, sys, time
sys.path.insert(0, sys.argv[2])
from core.engine.lock import Lock
Lock(sys.argv[1]).acquire(timeout=5)
child = os.fork()
if child == 0:
    time.sleep(60)
    os._exit(0)
print(child, flush=True)
sys.stdin.read()
"""


@linux
def test_a_forked_child_does_not_keep_the_pin(tmp_path: Path) -> None:
    path = str(tmp_path / "a.lock")
    proc = subprocess.Popen([sys.executable, "-c", FORKER, path, str(ROOT)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    try:
        assert pinned_by(path, proc.pid)[0]
        proc.kill()
        proc.wait()
        time.sleep(0.1)
        st = inspect(path)
        assert Code.HOLDER_PINNED not in {r.code for r in st.reasons}
        assert st.state is State.STALE
    finally:
        os.kill(child, signal.SIGKILL)
