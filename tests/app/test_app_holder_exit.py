"""A holder's death reaches the table without waiting for the liveness pass (docs/watching.md,
"Holders' exits"; docs/gui.md, "Window"): the watcher follows the live holder through a pidfd,
so a SIGKILL turns its row stale in :class:`app.table.model.LockTableModel`, fed by
:class:`app.bridges.watch_bridge.WatchBridge`, with the pass (and the rescan) an hour apart.
Real processes, real files, a real watcher, real Qt (offscreen)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from app.bridges.watch_bridge import WatchBridge
from app.table.model import LockTableModel
from core.config import WatchSpec
from core.record import Liveness, State
from tests.support.exit_holders import WAIT, holders, sleeper, write_lock  # noqa: F401

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs pidfds (Linux)")

HOUR = 3600.0


def test_sigkill_turns_the_row_stale_without_the_pass(
        qtbot: Any, lockdir: Path, holders: list[subprocess.Popen[bytes]]) -> None:  # noqa: F811
    holders.append(sleeper())
    held = lockdir / "held.lock"
    write_lock(held, holders[0].pid)
    model = LockTableModel(tick_ms=0)
    bridge = WatchBridge()
    bridge.rescan_interval = HOUR
    bridge.liveness_interval = HOUR  # the pass never comes during the test
    bridge.updated.connect(model.apply)
    bridge.start([WatchSpec(str(lockdir))])
    try:
        qtbot.waitUntil(lambda: bridge.initial_done, timeout=int(WAIT * 1000))
        watcher = bridge.watcher
        assert watcher is not None and watcher.liveness_interval == HOUR
        st = model.status_of(str(held))
        assert st is not None and (st.state, st.liveness) == (State.HELD, Liveness.ALIVE)
        assert watcher.exit_stats().followed == 1  # by the kernel, not the pass

        holders[0].kill()  # SIGKILL
        holders[0].wait()
        qtbot.waitUntil(lambda: (s := model.status_of(str(held))) is not None
                        and s.state is State.STALE, timeout=int(WAIT * 1000))
        st = model.status_of(str(held))
        assert st is not None
        assert st.liveness is Liveness.DEAD, st.reasons
        assert model.counts()[State.STALE] == 1 and model.rowCount() == 1
    finally:
        bridge.close()
