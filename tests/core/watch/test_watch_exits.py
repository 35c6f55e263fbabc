"""Holders' exits delivered by the kernel (core/watch/exits.py, core/watch/exit_backends.py;
docs/watching.md, "Holders' exits"): a holder's death re-judges its locks at once, not at the
next liveness pass. Real processes, real files, a real watcher.

The liveness pass runs every hour in these tests (``liveness_interval=3600``) unless a test is
about the pass itself, so only the exit notification can deliver the stale verdict; waits are
Events with generous timeouts, never sleeps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from core.codes import Code
from core.config import WatchSpec
from core.record import Liveness, LockStatus, State
from core.verdicts.inspect import inspect
from core.watch.exits import ExitFollower
from core.watch.inventory import Entry, Inventory
from core.watch.rejudge import liveness_pass
from core.watch.watcher import Watcher
from tests.support.exit_holders import (  # noqa: F401  (holders: a fixture)
    WAIT,
    Verdicts,
    holders,
    reader,
    sleeper,
    write_lock,
)
from tests.support.second_user import second_user

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs pidfds (Linux)")

HOUR = 3600.0


@pytest.fixture
def watchers() -> Iterator[list[Watcher]]:
    made: list[Watcher] = []
    yield made
    for w in made:
        w.close()


def _start(watchers: list[Watcher], lockdir: Path, **kw: object) -> tuple[Watcher, Verdicts]:
    v = Verdicts()
    w = Watcher([WatchSpec(str(lockdir))], v.on_change, **kw)  # type: ignore[arg-type]
    watchers.append(w)
    w.start()
    return w, v


def _one(w: Watcher, path: Path) -> LockStatus:
    return next(s for s in w.snapshot() if s.path == str(path))


def _stale(st: LockStatus) -> bool:
    return st.state is State.STALE and st.liveness is Liveness.DEAD


def _pidfds() -> int:
    """How many pidfds this process has open."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[pidfd]"
        except OSError:
            pass
    return n


def test_sigkill_is_delivered_by_the_kernel(watchers: list[Watcher], lockdir: Path,
                                            holders: list[subprocess.Popen[bytes]]) -> None:  # noqa: F811
    holder = sleeper()
    holders.append(holder)
    path = lockdir / "held.lock"
    write_lock(path, holder.pid)
    before = _pidfds()
    w, v = _start(watchers, lockdir, liveness_interval=HOUR)
    st = _one(w, path)
    assert (st.state, st.liveness) == (State.HELD, Liveness.ALIVE), st.reasons
    followed = st.evidence.followed
    assert followed is not None and followed.code is Code.LIVENESS_FOLLOWED
    assert followed.get("how") == "pidfd" and followed.get("pid") == holder.pid
    assert w.exit_stats().followed == 1 and w.exit_stats().fallback == 0
    assert _pidfds() == before + 1
    stale = v.expect(str(path), _stale)
    holder.send_signal(signal.SIGKILL)
    assert stale.wait(WAIT), "the pass runs hourly: only the pidfd could have told it"
    after = _one(w, path)
    assert after.reasons[0].code is Code.HOLDER_DEAD
    assert after.evidence.followed is None  # a dead holder is followed no more
    assert w.exit_stats().followed == 0
    assert _pidfds() == before  # released at once


def test_the_pass_looks_up_no_followed_holder(
        watchers: list[Watcher], lockdir: Path,
        holders: list[subprocess.Popen[bytes]]) -> None:  # noqa: F811
    """With every holder followed by the kernel, a liveness pass takes no process snapshot
    at all; a holder left to the pass (here: with no notification budget) is looked up."""
    holders.append(sleeper())
    write_lock(lockdir / "a.lock", holders[-1].pid)
    w, _v = _start(watchers, lockdir, liveness_interval=HOUR)
    with w._lock:
        dirs = w._directories
        before = dirs.procs
        liveness_pass(dirs)
        assert dirs.procs is before
    lean, _lv = _start(watchers, lockdir, liveness_interval=HOUR, exit_budget=0)
    with lean._lock:
        dirs = lean._directories
        liveness_pass(dirs)
        assert dirs.procs is not None and set(dirs.procs) == {holders[-1].pid}


def test_normal_exit(watchers: list[Watcher], lockdir: Path,
                     holders: list[subprocess.Popen[bytes]]) -> None:  # noqa: F811
    holder = reader()
    holders.append(holder)
    path = lockdir / "work.lock"
    write_lock(path, holder.pid)
    w, v = _start(watchers, lockdir, liveness_interval=HOUR)
    assert _one(w, path).liveness is Liveness.ALIVE
    stale = v.expect(str(path), _stale)
    assert holder.stdin is not None
    holder.stdin.close()  # it reads EOF and exits with status 0
    assert stale.wait(WAIT)
    assert holder.wait(WAIT) == 0


def test_one_notification_per_process(watchers: list[Watcher], lockdir: Path,
                                      holders: list[subprocess.Popen[bytes]]) -> None:  # noqa: F811
    """Three locks of one holder share one pidfd; its exit turns all three stale."""
    holder = sleeper()
    holders.append(holder)
    for name in ("a", "b", "c"):
        write_lock(lockdir / f"{name}.lock", holder.pid)
    before = _pidfds()
    w, v = _start(watchers, lockdir, liveness_interval=HOUR)
    assert w.exit_stats().followed == 1 and _pidfds() == before + 1
    last = v.expect(str(lockdir / "c.lock"), _stale)
    holder.kill()
    assert last.wait(WAIT)
    assert all(_stale(s) for s in w.snapshot())


def test_a_holder_appearing_later_is_followed(watchers: list[Watcher], lockdir: Path,
                                              holders: list[subprocess.Popen[bytes]]) -> None:  # noqa: F811
    _w, v = _start(watchers, lockdir, liveness_interval=HOUR)
    holder = sleeper()
    holders.append(holder)
    path = lockdir / "late.lock"
    seen = v.expect(str(path), lambda s: s.evidence.followed is not None)
    write_lock(path, holder.pid)
    assert seen.wait(WAIT)
    stale = v.expect(str(path), _stale)
    holder.kill()
    assert stale.wait(WAIT)


def test_start_time_not_the_holders_is_never_followed(
        watchers: list[Watcher], lockdir: Path,
        holders: list[subprocess.Popen[bytes]]) -> None:  # noqa: F811
    """A lock whose ``start=`` is not its PID's process's start time names a process that
    got the PID later (a reused PID): that process is not the holder. It is judged stale at
    once and no notification follows it."""
    other = sleeper()
    holders.append(other)
    path = lockdir / "reused.lock"
    write_lock(path, other.pid, start=psutil.Process(other.pid).create_time() - 50.0)
    w, _v = _start(watchers, lockdir, liveness_interval=HOUR)
    st = _one(w, path)
    assert (st.state, st.liveness) == (State.STALE, Liveness.REUSED), st.reasons
    assert st.evidence.followed is None
    assert w.exit_stats().followed == 0


def test_opened_then_checked_against_the_verdicts_start(
        lockdir: Path, holders: list[subprocess.Popen[bytes]]) -> None:  # noqa: F811
    """The notification is opened first, then the process's start time is compared with the
    one the verdict saw: a verdict that saw another process under the PID (the holder exited,
    its PID given to this one, before the notification was opened) reads as the holder gone,
    never as this process followed."""
    proc = sleeper()
    holders.append(proc)
    path = lockdir / "a.lock"
    write_lock(path, proc.pid)
    alive = inspect(str(path))
    assert alive.liveness is Liveness.ALIVE and alive.evidence.process_start is not None
    posted: list[tuple[int, int]] = []
    follower = ExitFollower(lambda pid, h: posted.append((pid, h)), lambda: None,
                            every_s=2.0, backend=_PollOnly())
    inv = Inventory()
    earlier = replace(alive, evidence=replace(alive.evidence,
                                              process_start=alive.evidence.process_start - 7))
    inv.put(str(path), Entry(earlier, "d", alive.policy), now_ts=0.0, procs=None)
    assert follower.sync(inv, [str(path)]) == [proc.pid]  # gone: re-judge it now
    assert follower.stats().followed == 0 and _PollOnly.opened == _PollOnly.released
    inv.put(str(path), Entry(alive, "d", alive.policy), now_ts=0.0, procs=None)
    assert follower.sync(inv, [str(path)]) == []  # the verdict's own process: followed
    assert follower.stats().followed == 1
    entry = inv.get(str(path))
    assert entry is not None and entry.status.evidence.followed is not None
    follower.close()
    assert _PollOnly.opened == _PollOnly.released


class _PollOnly:
    """A pidfd :class:`core.watch.exit_backends.Backend` without a reader (the follower's
    bookkeeping alone): opens and closes real pidfds, never waits."""

    kind = "pidfd"
    opened = 0
    released = 0

    def open(self, pid: int) -> int:
        _PollOnly.opened += 1
        return os.pidfd_open(pid)

    def spare(self, handle: int) -> bool:
        return True

    def start_time(self, pid: int) -> float | None:
        return psutil.Process(pid).create_time()

    def exited(self, handle: int) -> bool:
        return False

    def watch(self, handle: int, pid: int) -> None:
        pass

    def rearm(self, handle: int) -> None:
        pass

    def release(self, handle: int) -> None:
        _PollOnly.released += 1
        os.close(handle)

    def close(self) -> None:
        pass


def test_a_holder_left_to_the_pass_is_followed_when_a_descriptor_frees(
        watchers: list[Watcher], lockdir: Path,
        holders: list[subprocess.Popen[bytes]]) -> None:  # noqa: F811
    """With room for one notification, the second holder is left to the pass (counted); when
    the first dies and its pidfd is closed, the second is followed by the kernel."""
    first, second = sleeper(), sleeper()
    holders += [first, second]
    write_lock(lockdir / "a.lock", first.pid)
    w, v = _start(watchers, lockdir, liveness_interval=HOUR, exit_budget=1)
    write_lock(lockdir / "b.lock", second.pid)
    seen = v.expect(str(lockdir / "b.lock"), lambda s: s.liveness is Liveness.ALIVE)
    assert seen.wait(WAIT)
    assert w.exit_stats().followed == 1 and w.exit_stats().polled == {"descriptor_budget": 1}
    gone = v.expect(str(lockdir / "a.lock"), _stale)
    first.kill()
    assert gone.wait(WAIT)
    assert w.exit_stats().followed == 1 and w.exit_stats().fallback == 0
    how = _one(w, lockdir / "b.lock").evidence.followed
    assert how is not None and how.code is Code.LIVENESS_FOLLOWED
    stale = v.expect(str(lockdir / "b.lock"), _stale)
    second.kill()
    assert stale.wait(WAIT), "the pass runs hourly: only its new pidfd could have told it"


@pytest.mark.slow
def test_holder_of_another_user(watchers: list[Watcher], lockdir: Path,
                                holders: list[subprocess.Popen[bytes]]) -> None:  # noqa: F811
    """Root may open another user's process's pidfd: followed by the kernel. With no
    descriptor to spare (a budget of 0) the same holder falls back to the liveness pass, is
    counted there, says so, and still turns stale when it dies."""
    uid, gid = second_user()
    holder = sleeper(user=uid, group=gid, extra_groups=[])
    holders.append(holder)
    path = lockdir / "theirs.lock"
    write_lock(path, holder.pid)
    w, v = _start(watchers, lockdir, liveness_interval=HOUR)
    st = _one(w, path)
    assert st.evidence.process_uid == uid
    assert st.evidence.followed is not None
    assert st.evidence.followed.code is Code.LIVENESS_FOLLOWED

    lean, lv = _start(watchers, lockdir, liveness_interval=0.2, exit_budget=0)
    st = _one(lean, path)
    how = st.evidence.followed
    assert how is not None and how.code is Code.LIVENESS_POLLED
    assert how.get("why") == "descriptor_budget" and how.get("every_s") == 0.2
    assert lean.exit_stats().followed == 0
    assert lean.exit_stats().polled == {"descriptor_budget": 1}
    by_kernel = v.expect(str(path), _stale)
    by_pass = lv.expect(str(path), _stale)
    holder.kill()
    assert by_kernel.wait(WAIT) and by_pass.wait(WAIT)
    assert lean.exit_stats().fallback == 0  # nothing left to check


DESCRIPTOR_LIMIT = r"""
import json, os, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (320, 320))  # 64 above the margin
from core.config import WatchSpec
from core.watch.watcher import Watcher
w = Watcher([WatchSpec(sys.argv[1])], lambda cs: None, liveness_interval=3600)
w.start()
stats = w.exit_stats()
open_fds = len(os.listdir("/proc/self/fd")) - 1  # not the listing's own
print(json.dumps({"followed": stats.followed, "polled": stats.polled, "open_fds": open_fds,
                  "whys": sorted({s.evidence.followed.get("why") or "-"
                                  for s in w.snapshot() if s.evidence.followed})}))
w.close()
"""


@pytest.mark.slow
def test_descriptor_limit_keeps_a_margin(lockdir: Path,
                                         holders: list[subprocess.Popen[bytes]]) -> None:  # noqa: F811
    """With the descriptor limit at 320 (hard and soft), 100 holders: no pidfd is kept within
    256 descriptors of the limit; the rest are checked by the pass, counted and said."""
    for i in range(100):
        holders.append(sleeper())
        write_lock(lockdir / f"h{i}.lock", holders[-1].pid)
    root = str(Path(__file__).resolve().parents[3])
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(DESCRIPTOR_LIMIT), str(lockdir)],
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=root), check=True)
    got = __import__("json").loads(out.stdout)
    assert 0 < got["followed"] < 64, got
    assert got["polled"] == {"descriptor_budget": 100 - got["followed"]}, got
    assert got["open_fds"] <= 320 - 256, got
    assert "descriptor_budget" in got["whys"], got
