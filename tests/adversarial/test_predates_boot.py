"""Locks of this host taken before its last boot are stale whatever their PID says: PIDs
restart at boot (core/verdicts/judge.py, ``judge``; docs/verdicts.md)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil

from core.codes import Code
from core.reasons import Reason
from core.record import Evidence, Liveness, LockRecord, State
from core.stale_policy import DEFAULT_POLICY
from core.verdicts.inspect import inspect
from core.verdicts.judge import judge
from core.verdicts.liveness import hostname


def test_real_lock_written_before_boot_is_stale(tmp_path: Path) -> None:
    boot = psutil.boot_time()
    lock = tmp_path / "before-boot.lock"
    # our own live PID, but a timestamp from before the boot
    lock.write_text(f"pid={os.getpid()}\ntimestamp={int(boot - 600)}\nhost={hostname()}\n")
    st = inspect(str(lock))
    assert st.state is State.STALE
    assert st.reasons[-1].code is Code.PREDATES_BOOT
    assert st.evidence.boot_time == boot


def test_boot_rule_beats_a_live_pid_but_not_a_remote_host() -> None:
    boot = datetime(2026, 11, 25, 2, 0, tzinfo=UTC)
    now = boot + timedelta(minutes=30)
    rec = LockRecord(path="/l/x.lock", format="sema", pid=4242, acquired_at=boot - timedelta(
        minutes=5))
    alive = [Reason.of(Code.HOLDER_ALIVE, pid=4242)]
    ev = Evidence(pid=4242, boot_time=boot.timestamp())
    st = judge(rec.path, rec, liveness=Liveness.ALIVE, liveness_reasons=alive,
               policy=DEFAULT_POLICY, now=now, evidence=ev)
    assert st.state is State.STALE and st.reasons[-1].code is Code.PREDATES_BOOT
    remote = judge(rec.path, rec, liveness=Liveness.REMOTE, liveness_reasons=[],
                   policy=DEFAULT_POLICY, now=now, evidence=ev)
    assert remote.state is State.HELD
    # after the boot: the ordinary rules
    later = LockRecord(path="/l/x.lock", format="sema", pid=4242, acquired_at=boot + timedelta(
        minutes=5))
    fresh = judge(later.path, later, liveness=Liveness.ALIVE, liveness_reasons=alive,
                  policy=DEFAULT_POLICY, now=now, evidence=ev)
    assert fresh.state is State.HELD
