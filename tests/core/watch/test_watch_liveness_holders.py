"""The liveness pass looks up the holders' processes only while they are few
(core/watch/rounds.py ``RoundViews.liveness_snapshot``, core/watch/processes.py;
docs/performance.md, "Idle tray"): a pass over every process cost 4-5 ms every 2 s, more than
the idle tray's whole CPU target, for a /tmp that names one or two holders (the X server's
``.X0-lock``). A killed holder still turns stale within a pass, and a PID the snapshot does not
hold is never judged dead from it. Real processes, real files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from core.config import WatchSpec
from core.record import Liveness
from core.watch.processes import holders_snapshot
from tests.support.watch import holder_dies, sema_text, write


def test_a_pass_looks_up_the_few_holders_only(watch: Any, lockdir: Path) -> None:
    mine = lockdir / "mine.lock"
    write(mine, sema_text(os.getpid()))
    # no exit notification (exit_budget=0): the pass checks every holder (with notifications
    # it checks none of these: tests/core/watch/test_watch_exits.py)
    w, rec = watch([WatchSpec(str(lockdir))], liveness_interval=0.2, exit_budget=0)
    dead = holder_dies(rec, str(lockdir / "held.lock"))
    assert rec.model[str(mine)].liveness is Liveness.ALIVE
    with w._lock:
        procs = w._directories.procs
        assert procs is not None
        # this process, and the dead child's PID until its lock's entry names it no more
        assert set(procs) <= {os.getpid(), dead}, sorted(procs)[:20]
        assert os.getpid() in procs


def test_a_pid_the_holders_snapshot_lacks_is_looked_up(watch: Any,
                                                       lockdir: Path) -> None:
    """An entry judged again (its deadline, its holder changed) against a snapshot of the
    other holders only is not called dead for being absent from it."""
    write(lockdir / "a.lock", sema_text(os.getpid()))
    w, _rec = watch([WatchSpec(str(lockdir))], liveness_interval=3600)
    path = str(lockdir / "a.lock")
    with w._lock:
        directories = w._directories
        directories.procs = directories.liveness_snapshot()
        assert directories.procs is not None and os.getpid() in directories.procs
        directories.procs = others = holders_snapshot([])  # this process is not in it
        directories._holders_only = others
        e = directories.inventory.get(path)
        assert e is not None
        directories.rejudge(path, e, directories.procs)
        st = directories.inventory.get(path)
        assert st is not None and st.status.liveness is Liveness.ALIVE, st.status.reasons
        directories.inventory.forget_changes()


def test_holders_snapshot_leaves_out_what_is_gone() -> None:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    gone = int(done.stdout)
    snap = holders_snapshot([os.getpid(), gone, -5])
    assert os.getpid() in snap and gone not in snap and -5 not in snap
    me = snap[os.getpid()]
    assert me.create_time is not None and me.name and me.status
