"""core.watch.inventory: the watcher's pure inventory, without threads, sleeps or observers.

Statuses are real verdicts on real lock files written to ``tmp_path`` (read with
:func:`core.watch.scan.read_entry`, judged with :func:`core.watch.scan.judge_read` at a chosen
``now`` against a process snapshot built here), so time and processes are whatever the test says.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pytest

from core.kernel.openfiles import KernelView, OpenFiles
from core.record import Liveness, LockRecord, LockStatus, State
from core.stale_policy import StalePolicy
from core.verdicts.liveness import ProcessSnapshot, ProcInfo
from core.watch import scan
from core.watch.inventory import (
    ChangeSet,
    Entry,
    Inventory,
    deadline_of,
    file_sig,
    proc_key,
    same_verdict,
)

POLICY = StalePolicy(stale_after=3600.0)
DEAD_PID = 4_194_304 + 4321  # above Linux's largest pid_max: never a running process
ME = os.getpid()
MY_START = psutil.Process(ME).create_time()


class Dir:
    """An owner: the inventory compares owners by identity only."""


def snap(taken_at: float, **starts: float | None) -> ProcessSnapshot:
    """A snapshot holding this process (``me=`` its start time; absent: not in it)."""
    procs: dict[int, ProcInfo] = {}
    if "me" in starts:
        procs[ME] = ProcInfo(starts["me"], "running", "python")
    return ProcessSnapshot(procs=procs, taken_at=taken_at)


Judge = Callable[..., LockStatus]


@pytest.fixture
def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def judge(lockdir: Path, now: datetime) -> Judge:
    """``judge(name, pid=..., ago=..., ttl=..., at=now, procs=...)``: write a sema lock taken
    ``ago`` seconds before ``now`` (unless the file already says that) and judge it at ``at``.
    This process's locks are taken ``now`` by default (an older one would look reused)."""

    def make(name: str, *, pid: int = ME, ago: float = 0.0, ttl: float | None = None,
             at: datetime | None = None, procs: ProcessSnapshot | None = None,
             tag: str = "t") -> LockStatus:
        path = lockdir / name
        ts = int((now - timedelta(seconds=ago)).timestamp())
        text = f"pid={pid}\ntimestamp={ts}\ntag={tag}\n" + (f"ttl={ttl:g}\n" if ttl else "")
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        read = scan.read_entry(str(path))
        assert read is not None
        at = at or now
        procs = procs if procs is not None else snap(at.timestamp(), me=MY_START)
        return scan.judge_read(read, policy=POLICY, procs=procs, now=at)

    return make


def entry(status: LockStatus, owner: object, *, with_read: bool = True) -> Entry:
    read = scan.read_entry(status.path) if with_read else None
    sig = file_sig(os.lstat(status.path)) if with_read else None
    return Entry(status, owner, POLICY, read, sig)


# -- change sets ---------------------------------------------------------------------------


def test_put_flush_added_then_nothing(judge: Judge, now: datetime) -> None:
    inv, d = Inventory(), Dir()
    b, a = judge("b.lock"), judge("a.lock")
    for s in (b, a):
        inv.put(s.path, entry(s, d), now_ts=now.timestamp(), procs=None)
    assert inv.has_changes and len(inv) == 2
    cs = inv.flush()
    assert [s.path for s in cs.added] == [a.path, b.path]  # sorted by path
    assert not cs.changed and not cs.removed and len(cs) == 2
    assert [kind for kind, _ in cs.events()] == ["added", "added"]
    assert not inv.has_changes and not inv.flush()
    assert inv.snapshot() == [a, b]


def test_growing_age_is_no_change_but_a_state_flip_is(judge: Judge, now: datetime) -> None:
    inv, d = Inventory(), Dir()
    s = judge("x.lock", pid=DEAD_PID, ago=10)
    assert s.state is State.HELD and s.liveness is Liveness.DEAD  # dead, but young
    inv.put(s.path, entry(s, d), now_ts=now.timestamp(), procs=None)
    inv.forget_changes()  # the initial inventory is not a change

    later = judge("x.lock", pid=DEAD_PID, ago=10, at=now + timedelta(seconds=60))
    assert later.state is State.HELD and later.reasons != s.reasons
    assert same_verdict(s, later)
    inv.put(s.path, entry(later, d), now_ts=now.timestamp() + 60, procs=None)
    assert inv.has_changes and not inv.flush()  # touched, but nothing new

    stale = judge("x.lock", pid=DEAD_PID, ago=10, at=now + timedelta(seconds=3700))
    assert stale.state is State.STALE
    inv.put(s.path, entry(stale, d), now_ts=now.timestamp() + 3700, procs=None)
    cs = inv.flush()
    assert cs.changed == [stale] and not cs.added and not cs.removed


def test_removed_holds_the_last_status_and_a_brief_entry_is_nothing(
        judge: Judge, now: datetime) -> None:
    inv, d = Inventory(), Dir()
    s = judge("r.lock")
    inv.put(s.path, entry(s, d), now_ts=now.timestamp(), procs=None)
    inv.forget_changes()
    newer = judge("r.lock", tag="two")
    inv.put(s.path, entry(newer, d), now_ts=now.timestamp(), procs=None)
    inv.drop(d, s.path)
    assert inv.flush() == ChangeSet(removed=[s])  # the status before the round, not `newer`
    brief = judge("brief.lock")
    inv.put(brief.path, entry(brief, d), now_ts=now.timestamp(), procs=None)
    inv.drop(d, brief.path)
    assert inv.has_changes and not inv.flush() and len(inv) == 0


def test_owners(judge: Judge, now: datetime) -> None:
    inv, a, b = Inventory(), Dir(), Dir()
    s = judge("o.lock")
    inv.put(s.path, entry(s, a), now_ts=now.timestamp(), procs=None)
    inv.drop(b, s.path)  # not b's: kept
    assert inv.get(s.path) is not None and set(inv.paths_of(a)) == {s.path}
    inv.put(s.path, entry(s, b), now_ts=now.timestamp(), procs=None)  # b takes it over
    assert not inv.paths_of(a) and set(inv.paths_of(b)) == {s.path}
    inv.drop(a, s.path)
    assert inv.get(s.path) is not None
    t = judge("t.lock")
    inv.put(t.path, entry(t, b), now_ts=now.timestamp(), procs=None)
    assert sorted(inv.statuses_in(b, os.path.dirname(t.path)), key=lambda x: x.path) == [s, t]
    assert inv.statuses_in(b, "/elsewhere") == [] and inv.statuses_in(a, "/") == []
    inv.drop_all(b)
    assert len(inv) == 0 and not inv.paths_of(b)


def test_rescan_diff(judge: Judge, lockdir: Path, now: datetime) -> None:
    inv, d, other = Inventory(), Dir(), Dir()
    s = judge("k.lock")
    e = entry(s, d)
    inv.put(s.path, e, now_ts=now.timestamp(), procs=None)
    sig = file_sig(os.lstat(s.path))
    assert sig is not None and sig == e.sig
    assert inv.is_current(s.path, d, sig)
    assert not inv.is_current(s.path, other, sig)  # another owner's
    assert not inv.is_current(s.path, d, None)  # identity unknown
    assert not inv.is_current(str(lockdir / "new.lock"), d, sig)
    (lockdir / "k.lock").write_text("pid=1\ntimestamp=1\ntag=other and longer\n")
    assert not inv.is_current(s.path, d, file_sig(os.lstat(s.path)))

    (lockdir / "w.lock").write_bytes(b"pid=1\n")  # partial: `writing`, always re-read
    read = scan.read_entry(str(lockdir / "w.lock"))
    assert read is not None
    w = scan.judge_read(read, policy=POLICY, procs=None, now=datetime.now(UTC))
    assert w.state is State.WRITING
    wsig = file_sig(os.lstat(w.path))
    inv.put(w.path, Entry(w, d, POLICY, read, wsig), now_ts=now.timestamp(), procs=None)
    assert not inv.is_current(w.path, d, wsig)

    inv.forget_changes()
    inv.drop_unlisted(d, {s.path}, {"claim"})
    assert inv.flush() == ChangeSet(removed=[w])
    inv.drop_unlisted(d, set(), {s.path})  # a claim path is kept like a listed one
    assert inv.get(s.path) is not None
    assert file_sig(None) is None


# -- time ----------------------------------------------------------------------------------


def test_deadlines(judge: Judge, now: datetime) -> None:
    inv, d = Inventory(), Dir()
    t0 = now.timestamp()
    ttl = judge("ttl.lock", pid=DEAD_PID, ttl=60, ago=10)
    assert ttl.state is State.HELD
    acquired = t0 - 10
    inv.put(ttl.path, entry(ttl, d), now_ts=t0, procs=None)
    e = inv.get(ttl.path)
    assert e is not None and e.deadline == pytest.approx(acquired + 60 + 0.005)
    assert inv.next_deadline == e.deadline
    assert inv.pop_due(e.deadline - 0.01) is None
    assert inv.pop_due(e.deadline) == (ttl.path, e)
    assert inv.pop_due(e.deadline) is None and inv.next_deadline == math.inf

    # past the TTL: the next instant is stale_after (from acquired_at)
    assert deadline_of(e, acquired + 61) == pytest.approx(acquired + 3600 + 0.005)
    assert deadline_of(e, acquired + 3601) == math.inf

    # a superseded deadline is skipped
    plain = judge("plain.lock", pid=DEAD_PID, ago=10)
    inv.put(plain.path, entry(plain, d), now_ts=t0, procs=None)
    first = inv.get(plain.path)
    assert first is not None and first.deadline == pytest.approx(acquired + 3600.005)
    again = judge("plain.lock", pid=DEAD_PID, ago=5)  # re-written: a later deadline
    inv.put(plain.path, entry(again, d), now_ts=t0, procs=None)
    second = inv.get(plain.path)
    assert second is not None and second.deadline > first.deadline
    assert inv.next_deadline == first.deadline  # still queued ...
    assert inv.pop_due(first.deadline) is None  # ... but skipped
    assert inv.pop_due(second.deadline) == (plain.path, second)
    inv.drop(d, plain.path)


def test_deadline_of_an_empty_file(lockdir: Path) -> None:
    p = lockdir / "e.lock"
    p.write_bytes(b"")
    read = scan.read_entry(str(p))
    assert read is not None and read.file is not None
    mtime = read.file.mtime_ns / 1e9
    # a walk of the open descriptors older than the file cannot say who has it open: writing
    # until the grace ends, then judged again (docs/watching.md, "Empty files")
    old_walk = KernelView(open_files=OpenFiles(taken_at=mtime - 1))
    s = scan.judge_read(read, policy=POLICY, procs=None, now=datetime.now(UTC),
                        kernel=old_walk)
    assert s.state is State.WRITING
    e = Entry(s, Dir(), POLICY, read, None)
    assert deadline_of(e, mtime) == pytest.approx(mtime + POLICY.writing_grace + 0.005)
    assert deadline_of(e, mtime + POLICY.writing_grace) == pytest.approx(mtime + 3600.005)
    assert deadline_of(Entry(s, Dir(), POLICY), mtime) == math.inf  # no read: no mtime
    free = scan.judge_read(read, policy=POLICY, procs=None, now=datetime.now(UTC))
    assert free.state is State.FREE  # a fresh walk: nobody has it open
    assert deadline_of(Entry(free, Dir(), POLICY, read, None), mtime) == math.inf


def test_holders_changed(judge: Judge, now: datetime) -> None:
    inv, d = Inventory(), Dir()
    t0 = now.timestamp()
    prev = snap(t0, me=MY_START)
    mine = judge("mine.lock", procs=prev)
    dead = judge("dead.lock", pid=DEAD_PID, procs=prev)
    assert mine.liveness is Liveness.ALIVE and dead.liveness is Liveness.DEAD
    for s in (mine, dead):
        inv.put(s.path, entry(s, d), now_ts=t0, procs=prev)
    assert inv.has_holders
    assert inv.holders_changed(prev, snap(t0 + 2, me=MY_START)) == set()
    assert inv.holders_changed(prev, snap(t0 + 2, me=MY_START + 5)) == {mine.path}  # reused
    assert inv.holders_changed(prev, snap(t0 + 2)) == {mine.path}  # exited
    zombie = ProcessSnapshot(procs={ME: ProcInfo(MY_START, "zombie", "python")}, taken_at=t0)
    assert inv.holders_changed(prev, zombie) == {mine.path}
    sleeping = ProcessSnapshot(procs={ME: ProcInfo(MY_START, "sleeping", "python")},
                               taken_at=t0)
    assert inv.holders_changed(prev, sleeping) == set()  # status flips alone do not count
    assert inv.holders_changed(None, prev) == {mine.path, dead.path}
    assert inv.holders_changed(prev, None) == {mine.path, dead.path}

    # judged alive by a direct look-up (not in the snapshot): re-judged at the next pass
    direct = judge("direct.lock", procs=snap(t0))
    assert direct.liveness is Liveness.ALIVE
    inv.put(direct.path, entry(direct, d), now_ts=t0, procs=snap(t0))
    assert inv.holders_changed(prev, prev) == {direct.path}
    inv.put(direct.path, entry(direct, d), now_ts=t0, procs=prev)  # now in the snapshot
    assert inv.holders_changed(prev, prev) == set()
    for p in (mine.path, dead.path, direct.path):
        inv.drop(d, p)
    assert not inv.has_holders


def test_proc_key() -> None:
    assert proc_key(None) is None
    assert proc_key(ProcInfo(1.5, "running")) == proc_key(ProcInfo(1.5, "sleeping"))
    assert proc_key(ProcInfo(1.5, "zombie")) != proc_key(ProcInfo(1.5, "running"))


# -- af claims -----------------------------------------------------------------------------


def claim(proof: str, node: str, owner: str, state: State = State.HELD) -> LockStatus:
    path = scan.claim_path(proof, node)
    rec = LockRecord(path=path, format="af-claim", holder=owner, tag=node,
                     metadata={"node_id": node})
    return LockStatus(path, state, record=rec, read_only=True, policy=POLICY)


def test_put_claims(tmp_path: Path, now: datetime) -> None:
    inv, d = Inventory(), Dir()
    proof = str(tmp_path / "proof")
    a, b = claim(proof, "n1", "alice"), claim(proof, "n2", "bob")
    paths = inv.put_claims(d, POLICY, set(), [a, b], now_ts=now.timestamp(), procs=None)
    assert paths == {a.path, b.path}
    assert inv.flush() == ChangeSet(added=[a, b])
    same = claim(proof, "n1", "alice")  # an equal verdict: not stored again
    kept = inv.get(a.path)
    paths = inv.put_claims(d, POLICY, paths, [same], now_ts=now.timestamp(), procs=None)
    assert paths == {a.path} and inv.get(a.path) is kept
    assert inv.flush() == ChangeSet(removed=[b])
    expired = claim(proof, "n1", "alice", State.EXPIRED)
    inv.put_claims(d, POLICY, paths, [expired], now_ts=now.timestamp(), procs=None)
    assert inv.flush() == ChangeSet(changed=[expired])
    e = inv.get(a.path)
    assert e is not None and e.read is None and e.sig is None and e.owner is d


def test_deadline_uses_the_limit_of_the_records_format(lockdir: Path, now: datetime) -> None:
    """An af ledger lock of a dead holder is re-judged when its format's limit (30 s by default)
    passes, not the directory's 3600 s (docs/verdicts.md)."""
    p = lockdir / "ledger.lock"
    at = now - timedelta(seconds=5)
    p.write_text(f'{{"agent_id": "a1", "acquired_at": "{at.strftime("%Y-%m-%dT%H:%M:%SZ")}"}}')
    read = scan.read_entry(str(p))
    assert read is not None
    status = scan.judge_read(read, policy=POLICY, procs=snap(now.timestamp()), now=now)
    assert status.record is not None and status.record.format == "af-ledger"
    e = Entry(status, Dir(), POLICY, read, None)
    limit = POLICY.limit_for("af-ledger")
    assert limit == 30.0
    assert deadline_of(e, now.timestamp()) == pytest.approx(at.timestamp() + limit + 0.005)
