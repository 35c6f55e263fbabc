"""Safety properties of the stale policy over generated records (hypothesis): a verdict never
calls a lock stale that the policy says must stand, and never comes without a reason."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.codes import Code
from core.reasons import Reason, texts
from core.record import FileInfo, Liveness, LockRecord, State
from core.stale_policy import StalePolicy
from core.verdicts.inspect import inspect_bytes
from core.verdicts.judge import judge, taskmcp_decision

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
EXAMPLES = int(os.environ.get("LOCKWARDEN_POLICY_EXAMPLES", "300"))

ages = st.one_of(st.none(), st.floats(-1e6, 1e9, allow_nan=False))
records = st.builds(
    lambda fmt, pid, age, ttl, ours, exp: LockRecord(
        path="/l/x.lock" if fmt != "af-claim" else "/p/ledger#1",
        format=fmt,
        pid=pid,
        acquired_at=None if age is None else NOW - timedelta(seconds=age),
        ttl=ttl,
        expires_at=None if exp is None else NOW + timedelta(seconds=exp),
        token="ab" * 16 if ours else None,
        host="here" if ours else None,
    ),
    st.sampled_from(["sema", "task-mcp", "af-claim", "af-ledger", "pidfile"]),
    st.one_of(st.none(), st.integers(1, 2**22)),
    ages,
    st.one_of(st.none(), st.floats(0, 1e8, allow_nan=False)),
    st.booleans(),
    st.one_of(st.none(), st.floats(-1e8, 1e8, allow_nan=False)),
)
policies = st.builds(
    StalePolicy,
    stale_after=st.floats(1, 1e6, allow_nan=False),
    writing_grace=st.floats(0, 10, allow_nan=False),
    allow_higher_privilege=st.booleans(),
    allow_emergency=st.booleans(),
)


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None)
@given(
    rec=records,
    live=st.sampled_from(list(Liveness)),
    policy=policies,
    mtime_age=st.one_of(st.none(), st.floats(-1e6, 1e9, allow_nan=False)),
)
def test_judge_safety(
    rec: LockRecord, live: Liveness, policy: StalePolicy, mtime_age: float | None
) -> None:
    mtime = None if mtime_age is None else NOW.timestamp() - mtime_age
    s = judge(
        rec.path,
        rec,
        file=None,
        liveness=live,
        liveness_reasons=[Reason.of(Code.LIVENESS_UNCHECKED, detail=f"liveness {live}")],
        policy=policy,
        now=NOW,
        mtime=mtime,
    )
    assert s.state in (State.HELD, State.STALE, State.EXPIRED)
    assert texts(s.reasons) and all(isinstance(r, str) and r for r in texts(s.reasons))
    assert s.record is rec and s.liveness is live and s.stale_after == policy.limit_for(rec.format)
    if s.state is State.STALE:
        # a live holder's lock is never stale; af claims never are (af reaps them)
        assert live is not Liveness.ALIVE
        assert rec.format != "af-claim"
        expiry = rec.effective_expiry()
        dead = live in (Liveness.DEAD, Liveness.REUSED)
        if expiry is not None and expiry > NOW:
            # within its lease only a proven death makes a lock stale
            assert dead
        if not dead and (expiry is None or expiry > NOW):
            # not proven dead and no lapsed lease: only age past the limit makes it stale
            age = (
                NOW.timestamp() - rec.acquired_at.timestamp()
                if rec.acquired_at is not None
                else None
                if mtime is None
                else NOW.timestamp() - mtime
            )
            assert age is not None and age > policy.limit_for(rec.format)
        if not rec.written_by_lockwarden and rec.format != "task-mcp" and expiry is None:
            age = (
                NOW.timestamp() - rec.acquired_at.timestamp()
                if rec.acquired_at is not None
                else None
                if mtime is None
                else NOW.timestamp() - mtime
            )
            # other tools' locks: not alive AND older than stale_after
            assert age is not None and age > policy.limit_for(rec.format)
    decision = taskmcp_decision(s, requester_user="nobody-here", policy=policy)
    assert decision[1] in (
        "LOCK_EXPIRED",
        "HOLDER_DEAD",
        "SAME_USER",
        "HIGHER_PRIVILEGE",
        "EMERGENCY_OVERRIDE",
        "LOCK_HELD",
    )
    assert decision[0] is (decision[1] != "LOCK_HELD")


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None)
@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.sampled_from([b"pid=", b"pid=1\ntimestamp=", b'{"owner":', b"  4242", b"\n"]).flatmap(
            lambda head: st.binary(max_size=40).map(lambda tail: head + tail)
        ),
    ),
    mtime_age=st.floats(-1e6, 1e9, allow_nan=False),
    size=st.integers(0, 70000),
)
def test_inspect_bytes_never_raises(data: bytes, mtime_age: float, size: int) -> None:
    info = FileInfo(ino=1, dev=1, size=size, mtime_ns=int((NOW.timestamp() - mtime_age) * 1e9))
    s = inspect_bytes("/l/x.lock", data, info, now=NOW)
    # free only for an empty file nobody holds or has open (docs/verdicts.md, "Empty files")
    assert s.state is not State.FREE or (not data.strip() and s.empty_free)
    assert texts(s.reasons) and all(isinstance(r, str) and r for r in texts(s.reasons))
    if s.record is None:
        assert s.state in (State.FREE, State.WRITING, State.UNREADABLE, State.STALE)
        if s.state is State.STALE:  # only an empty file older than the stale limit
            assert not data.strip() and mtime_age > s.stale_after
