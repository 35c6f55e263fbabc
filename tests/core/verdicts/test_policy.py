"""The default stale policy (docs/DESIGN.md, "Liveness and verdicts") and Task MCP's reclaim matrix
(docs/specs/task-mcp.txt, "Stale Lock Reclaim Algorithm"), as tables."""

from __future__ import annotations

import getpass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from core.codes import Code, UnreadableKind
from core.reasons import Reason, texts
from core.record import Evidence, FileInfo, Liveness, LockRecord, LockStatus, State
from core.stale_policy import StalePolicy
from core.text import human_duration
from core.verdicts.judge import (
    free_status,
    judge,
    judge_empty,
    judge_unparsed,
    judge_unreadable,
    taskmcp_decision,
)

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
H = 3600.0
POLICY = StalePolicy()


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def sema(age: float, *, ours: bool = False, **kw: Any) -> LockRecord:
    extra: dict[str, Any] = {"token": "ab" * 16, "host": "here"} if ours else {}
    extra.update(kw)
    return LockRecord(path="/l/x.lock", format="sema", pid=4242, acquired_at=ago(age), **extra)


LIVE_REASON_DATA = {
    Liveness.ALIVE: Reason.of(Code.HOLDER_ALIVE, pid=4242),
    Liveness.DEAD: Reason.of(Code.HOLDER_DEAD, pid=4242),
    Liveness.REUSED: Reason.of(Code.PID_REUSED, pid=4242, how="written", delta_s=300.0),
    Liveness.REMOTE: Reason.of(Code.REMOTE_HOST, pid=4242, host="far", this_host="here"),
    Liveness.UNKNOWN: Reason.of(Code.NO_PID),
}
LIVE_REASONS = {live: texts([r])[0] for live, r in LIVE_REASON_DATA.items()}


def verdict(rec: LockRecord | None, live: Liveness, **kw: Any) -> LockStatus:
    reasons = [LIVE_REASON_DATA[live]]
    kw.setdefault("policy", POLICY)
    assert rec is not None
    return judge(
        rec.path,
        rec,
        file=kw.pop("file", None),
        liveness=live,
        liveness_reasons=reasons,
        now=NOW,
        **kw,
    )


# --- ours vs other tools' locks, young vs old -------------------------------------------------

L = Liveness


@pytest.mark.parametrize(
    ("ours", "age", "live", "state"),
    [
        # Lockwarden's own locks: proof of death is enough
        (True, 10, L.DEAD, State.STALE),
        (True, 10, L.REUSED, State.STALE),
        (True, 10, L.ALIVE, State.HELD),
        (True, 10, L.REMOTE, State.HELD),
        (True, 2 * H, L.REMOTE, State.STALE),
        (True, 2 * H, L.ALIVE, State.HELD),
        # other tools' locks: not alive AND older than stale_after
        (False, 10, L.DEAD, State.HELD),
        (False, 10, L.REUSED, State.HELD),
        (False, 2 * H, L.DEAD, State.STALE),
        (False, 2 * H, L.REUSED, State.STALE),
        (False, 2 * H, L.REMOTE, State.STALE),
        (False, 2 * H, L.UNKNOWN, State.STALE),
        (False, 2 * H, L.ALIVE, State.HELD),
        (False, H - 1, L.DEAD, State.HELD),
    ],
)
def test_stale_policy_table(ours: bool, age: float, live: Liveness, state: State) -> None:
    st = verdict(sema(age, ours=ours), live)
    assert st.state is state
    assert st.liveness is live
    # liveness first
    assert texts(st.reasons)[0] == LIVE_REASONS[live] and len(st.reasons) >= 2
    assert st.checked_at == NOW and st.stale_after == H and st.record is not None


def test_reasons_read_as_sentences() -> None:
    st = verdict(sema(2 * H), L.DEAD)
    assert texts(st.reasons) == [
        "PID 4242 exited", "lock is 2h 0m old, older than the 1h 0m stale limit"]
    assert [r.code for r in st.reasons] == [Code.HOLDER_DEAD, Code.OLDER_THAN_STALE_AFTER]
    assert st.reasons[1].get("limit_s") == H and st.reasons[1].get("age_s") == 2 * H
    young = verdict(sema(192), L.DEAD)
    assert texts(young.reasons)[0] == "PID 4242 exited"
    assert "3m 12s old" in texts(young.reasons)[1] and "short-lived" in texts(young.reasons)[1]
    held = verdict(sema(192), L.ALIVE)
    assert texts(held.reasons) == ["PID 4242 is alive", "held for 3m 12s"]
    ours = verdict(sema(5, ours=True), L.DEAD)
    assert texts(ours.reasons)[0] == "PID 4242 exited" and "Lockwarden" in texts(ours.reasons)[1]


def test_custom_stale_after() -> None:
    pol = StalePolicy(stale_after=60)
    assert verdict(sema(61), L.DEAD, policy=pol).state is State.STALE
    assert verdict(sema(59), L.DEAD, policy=pol).state is State.HELD
    assert verdict(sema(61), L.DEAD, policy=pol).stale_after == 60


def test_pidfile_age_comes_from_mtime() -> None:
    rec = LockRecord(path="/run/d.pid", format="pidfile", pid=4242)
    old = NOW.timestamp() - 3 * H
    assert verdict(rec, L.DEAD, mtime=old).state is State.STALE
    assert verdict(rec, L.DEAD, mtime=NOW.timestamp() - 60).state is State.HELD
    info = FileInfo(ino=1, dev=1, size=5, mtime_ns=int(old * 1e9))
    assert verdict(rec, L.DEAD, file=info).state is State.STALE
    unknown_age = verdict(rec, L.DEAD)
    assert unknown_age.state is State.HELD and "age is unknown" in texts(unknown_age.reasons)[-1]


# --- TTL / expiry -------------------------------------------------------------------------------


def taskmcp(age: float, ttl: float = H, **meta: Any) -> LockRecord:
    return LockRecord(
        path="/l/t.lock",
        format="task-mcp",
        holder="pid-4242@here",
        pid=4242,
        acquired_at=ago(age),
        ttl=ttl,
        metadata=meta,
    )


@pytest.mark.parametrize(
    ("age", "live", "state"),
    [
        (H + 300, L.ALIVE, State.EXPIRED),
        (H + 300, L.UNKNOWN, State.STALE),  # lapsed lease, liveness cannot be known
        (H + 300, L.REMOTE, State.STALE),
        (H + 300, L.DEAD, State.STALE),
        (H + 300, L.REUSED, State.STALE),
        (60, L.ALIVE, State.HELD),
        (60, L.UNKNOWN, State.HELD),
        (60, L.REMOTE, State.HELD),
        (60, L.DEAD, State.HELD),  # another tool's lease stands until it lapses (docs/DESIGN.md)
    ],
)
def test_ttl_table(age: float, live: Liveness, state: State) -> None:
    assert verdict(taskmcp(age), live).state is state


def test_ttl_lease_beats_stale_after_when_liveness_unknown() -> None:
    """A CI lock with a 24 h TTL, 2 h old, owner unknown: the lease stands."""
    st = verdict(taskmcp(2 * H, ttl=86400), L.UNKNOWN)
    assert st.state is State.HELD
    assert "expires in 22h 0m" in texts(st.reasons)


def test_expired_reason_names_ttl() -> None:
    st = verdict(taskmcp(H + 300), L.ALIVE)
    assert texts(st.reasons) == ["PID 4242 is alive", "expired 5m 0s ago (TTL 1h 0m)"]


def test_other_tool_sema_with_ttl_dead_but_young_is_held() -> None:
    rec = sema(60, ttl=H)  # no token: not ours
    assert verdict(rec, L.DEAD).state is State.HELD
    assert verdict(sema(60, ours=True, ttl=H), L.DEAD).state is State.STALE


def claim(path: str, expires_in: float) -> LockRecord:
    return LockRecord(
        path=path,
        format="af-claim",
        holder="agent-1",
        acquired_at=ago(600),
        expires_at=NOW + timedelta(seconds=expires_in),
    )


def test_af_claims() -> None:
    live = verdict(claim("/p/locks/1.lock", 60), L.UNKNOWN)
    assert live.state is State.HELD and not live.read_only
    gone = verdict(claim("/p/locks/1.lock", -300), L.UNKNOWN)
    assert gone.state is State.EXPIRED
    assert texts(gone.reasons)[1].startswith("expired 5m 0s ago (at 2026-11-21 11:55:00 UTC)")
    assert "af" in texts(gone.reasons)[2]
    # expired for days: still expired, never stale (af reaps its own claims)
    assert verdict(claim("/p/locks/1.lock", -9 * 86400), L.UNKNOWN).state is State.EXPIRED
    replayed = verdict(claim("/p/ledger#1.1", -300), L.UNKNOWN)
    assert replayed.state is State.EXPIRED and replayed.read_only
    assert verdict(claim("/p/ledger#1.1", 300), L.UNKNOWN).read_only


# --- empty, partial, garbage, unreadable --------------------------------------------------------


def unparsed(age: float, *, size: int, error: str | None, **kw: Any) -> LockStatus:
    info = FileInfo(ino=1, dev=1, size=size, mtime_ns=int((NOW.timestamp() - age) * 1e9))
    empty = kw.pop("empty", size == 0)
    detail = error or ("the file is empty" if empty else "the file could not be parsed")
    return judge_unparsed("/l/x.lock", empty=empty, detail=detail, file=info, policy=POLICY,
                          now=NOW, **kw)


def test_empty_file_young_is_writing() -> None:
    st = unparsed(0.4, size=0, error=None)
    assert st.state is State.WRITING
    assert texts(st.reasons) == [
        "file is empty, written 0.4s ago: its writer is probably still writing"]


def test_empty_file_nobody_uses_is_free_never_stale_nor_unreadable() -> None:
    """docs/DESIGN.md "Two kinds of locks": an empty file that no kernel lock holds and no
    process has open is free, at any age; a sema that crashed between its create and its write
    leaves exactly that (nobody holds it)."""
    for age in (0.4, 5, 2 * H, 400 * 86400):
        st = empty_verdict(age, openers=())
        assert st.state is State.FREE and st.empty_free and st.present and not st.locked
        assert [r.code for r in st.reasons] == [Code.EMPTY_FREE] and st.error is None
        assert texts(st.reasons)[0].startswith(
            "empty file that no process holds a kernel lock on or has open: free")
    # where nobody can tell who has it open: the writing grace, then free
    assert empty_verdict(0.4, openers=None).state is State.WRITING
    for age in (5, 2 * H):
        st = empty_verdict(age, openers=None)
        assert st.state is State.FREE and st.reasons[0].get("open_seen") is False
    # what judge_unparsed says of empty bytes is the same rule
    assert unparsed(5, size=0, error="the file is empty").state is State.FREE
    assert unparsed(2 * H, size=2, error="no pid", empty=True).state is State.FREE


def test_empty_file_open_by_a_process_is_writing_at_any_age() -> None:
    for age in (0.4, 2 * H):
        st = empty_verdict(age, openers=(4242, 4343),
                           opener=Evidence(pid=4242, process_name="sema", process_user="ann"))
        assert st.state is State.WRITING and st.liveness is L.ALIVE
        assert st.evidence.pid == 4242 and st.evidence.process_user == "ann"
        assert texts(st.reasons) == ["the file is empty and PID 4242 (sema) (and 1 more) has "
                                     "it open: it is being written, or about to be locked"]


def test_empty_file_without_the_kernels_locks_is_held_unknown() -> None:
    assert empty_verdict(0.4, openers=(), kernel_error="no /proc/locks").state is State.WRITING
    st = empty_verdict(5, openers=(), kernel_error="no /proc/locks")
    assert st.state is State.HELD and st.liveness is L.UNKNOWN
    assert [r.code for r in st.reasons] == [Code.EMPTY_UNCHECKED]


def empty_verdict(age: float, **kw: Any) -> LockStatus:
    info = FileInfo(ino=1, dev=1, size=0, mtime_ns=int((NOW.timestamp() - age) * 1e9))
    return judge_empty("/l/x.lock", file=info, policy=POLICY, now=NOW, **kw)


def test_garbage_young_is_writing_old_is_unreadable_forever() -> None:
    assert unparsed(1, size=7, error="no format fits").state is State.WRITING
    for age in (3, 2 * H, 400 * 86400):
        st = unparsed(age, size=7, error="no format fits")
        assert st.state is State.UNREADABLE
        assert texts(st.reasons) == ["no format fits"] and st.error == "no format fits"


def test_future_mtime_is_not_writing_forever() -> None:
    assert unparsed(-1, size=0, error=None).state is State.WRITING
    assert unparsed(-600, size=0, error=None).state is State.FREE
    assert unparsed(-600, size=3, error="x").state is State.UNREADABLE


def test_read_error_is_unreadable() -> None:
    st = judge_unreadable("/l/fifo.lock", kind=UnreadableKind.FIFO,
                          detail="is a FIFO (named pipe), not a lock file", policy=POLICY,
                          now=NOW)
    assert st.reasons[0].code is Code.UNREADABLE and st.reasons[0].get("kind") == "fifo"
    assert st.state is State.UNREADABLE
    assert texts(st.reasons) == ["is a FIFO (named pipe), not a lock file"]


def test_no_record_no_error_is_free() -> None:
    st = free_status("/l/x.lock", policy=POLICY, now=NOW)
    assert [r.code for r in st.reasons] == [Code.NO_LOCK_FILE]
    assert st.state is State.FREE and not st.locked and texts(st.reasons) == ["no lock file"]


# --- human_duration -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.4, "0.4s"),
        (2.0, "2s"),
        (9.96, "10s"),
        (45, "45s"),
        (59.9, "59s"),
        (60, "1m 0s"),
        (192, "3m 12s"),
        (3600, "1h 0m"),
        (7200, "2h 0m"),
        (86399, "23h 59m"),
        (3 * 86400 + 4 * 3600 + 59, "3d 4h"),
        (-300, "-5m 0s"),
        (float("inf"), "forever"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


# --- Task MCP decision matrix (spec 004) --------------------------------------------------------

ME = getpass.getuser()
OFF = StalePolicy()
ON = StalePolicy(allow_higher_privilege=True, allow_emergency=True)


def held(**meta: Any) -> LockStatus:
    st = verdict(taskmcp(60, **meta), L.REMOTE)
    assert st.state is State.HELD
    return st


def test_taskmcp_lock_expired() -> None:
    st = verdict(taskmcp(H + 1), L.REMOTE)
    assert taskmcp_decision(st, policy=OFF) == (True, "LOCK_EXPIRED", "high")
    dead_and_expired = verdict(taskmcp(H + 1), L.DEAD)
    assert dead_and_expired.state is State.STALE
    assert taskmcp_decision(dead_and_expired, policy=OFF) == (True, "LOCK_EXPIRED", "high")


def test_taskmcp_holder_dead_before_expiry() -> None:
    from dataclasses import replace

    # a task-mcp lock written by Lockwarden (token + host prove its holder): stale at death
    ours = replace(taskmcp(60), token="ab" * 16, host="here")
    st = verdict(ours, L.DEAD)
    assert st.state is State.STALE
    assert taskmcp_decision(st, policy=OFF) == (True, "HOLDER_DEAD", "high")
    # another tool's lease stands until it lapses (docs/DESIGN.md: stale "when expired and not
    # alive")
    foreign = verdict(taskmcp(60), L.DEAD)
    assert foreign.state is State.HELD
    assert taskmcp_decision(foreign, policy=OFF) == (False, "LOCK_HELD", "low")


def test_taskmcp_same_user_is_the_real_os_user() -> None:
    st = held(user_identity=ME, environment="local")
    assert taskmcp_decision(st, policy=OFF) == (True, "SAME_USER", "medium")
    # someone else's lock is not ours, whatever we are
    other = held(user_identity=ME + "-not", environment="local")
    assert taskmcp_decision(other, policy=OFF) == (False, "LOCK_HELD", "low")
    # no user_identity on either side: no match
    assert taskmcp_decision(held(), policy=OFF)[1] == "LOCK_HELD"
    assert taskmcp_decision(held(user_identity=""), requester_user="", policy=OFF)[0] is False


def test_taskmcp_higher_privilege_only_when_allowed() -> None:
    st = held(user_identity="alice", environment="local")
    kw: dict[str, Any] = {"requester_user": "bob", "requester_environment": "ci"}
    assert taskmcp_decision(st, policy=OFF, **kw) == (False, "LOCK_HELD", "low")
    assert taskmcp_decision(st, policy=ON, **kw) == (True, "HIGHER_PRIVILEGE", "medium")
    # cloud > local, ci > cloud; equal or lower ranks, or unknown environments: no
    assert (
        taskmcp_decision(st, policy=ON, requester_user="bob", requester_environment="cloud")[1]
        == "HIGHER_PRIVILEGE"
    )
    ci_lock = held(user_identity="alice", environment="ci")
    for env in ("ci", "cloud", "local", "container", None):
        assert taskmcp_decision(
            ci_lock, policy=ON, requester_user="bob", requester_environment=env
        ) == (False, "LOCK_HELD", "low"), env
    container_lock = held(user_identity="alice", environment="container")
    assert (
        taskmcp_decision(
            container_lock, policy=ON, requester_user="bob", requester_environment="ci"
        )[1]
        == "LOCK_HELD"
    )


def test_taskmcp_emergency_only_when_allowed() -> None:
    st = held(user_identity="alice", environment="ci")
    kw: dict[str, Any] = {"requester_user": "bob", "requester_purpose": "emergency"}
    assert taskmcp_decision(st, policy=OFF, **kw) == (False, "LOCK_HELD", "low")
    assert taskmcp_decision(st, policy=ON, **kw) == (True, "EMERGENCY_OVERRIDE", "high")
    only_emergency = StalePolicy(allow_emergency=True)
    assert taskmcp_decision(st, policy=only_emergency, **kw)[1] == "EMERGENCY_OVERRIDE"
    assert (
        taskmcp_decision(st, policy=ON, requester_user="bob", requester_purpose="interactive")[1]
        == "LOCK_HELD"
    )


def test_taskmcp_matrix_order() -> None:
    """Expired beats same user beats privilege beats emergency (spec order)."""
    mine_expired = verdict(taskmcp(H + 1, user_identity=ME, environment="local"), L.REMOTE)
    assert taskmcp_decision(mine_expired, policy=ON)[1] == "LOCK_EXPIRED"
    mine = held(user_identity=ME, environment="local")
    assert (
        taskmcp_decision(
            mine, policy=ON, requester_environment="ci", requester_purpose="emergency"
        )[1]
        == "SAME_USER"
    )
    theirs = held(user_identity="alice", environment="local")
    assert (
        taskmcp_decision(
            theirs,
            policy=ON,
            requester_user="bob",
            requester_environment="ci",
            requester_purpose="emergency",
        )[1]
        == "HIGHER_PRIVILEGE"
    )


def test_taskmcp_unknown_content_is_held() -> None:
    garbage = unparsed(10, size=3, error="not JSON")
    assert taskmcp_decision(garbage, policy=ON, requester_purpose="emergency")[0] is False
    writing = unparsed(0.1, size=0, error=None)
    assert taskmcp_decision(writing, policy=OFF) == (False, "LOCK_HELD", "low")


def test_far_future_expiry_never_raises() -> None:
    rec = LockRecord(
        path="/l/x.lock",
        format="sema",
        pid=4242,
        acquired_at=datetime(9999, 1, 1, tzinfo=UTC),
        ttl=1e12,
        token="ab" * 16,
        host="here",
    )
    st = verdict(rec, L.ALIVE)
    assert st.state is State.HELD
    assert taskmcp_decision(st, policy=OFF) == (False, "LOCK_HELD", "low")
