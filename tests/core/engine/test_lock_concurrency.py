"""Engine behaviour across real OS processes: racing reclaimers, waiters woken by a release,
and waiters taking over from a SIGKILLed holder (no file event: the pidfd wakes them)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from core import audit
from core.engine.lock import Lock
from core.engine.reclaiming import reclaim
from core.errors import LockHeld, NotStale
from core.formats import parse
from core.record import State
from core.verdicts.inspect import inspect

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses fork (Linux)")
CTX: Any = multiprocessing.get_context("fork") if sys.platform == "linux" else None

RECLAIMERS = 8
ROUNDS = 4


def _die_holding(path: str) -> None:
    Lock(path).acquire(blocking=False)
    os._exit(0)


def _make_stale(path: Path) -> None:
    p = CTX.Process(target=_die_holding, args=(str(path),))
    p.start()
    p.join(30)
    assert p.exitcode == 0
    assert inspect(str(path)).state is State.STALE


def _put(results: Any, item: tuple[Any, ...]) -> None:
    """Put and flush (``os._exit`` would kill the queue's feeder thread first)."""
    results.put(item)
    results.close()
    results.join_thread()


def _reclaimer(path: str, how: str, barrier: Any, results: Any, done: Any) -> None:
    try:
        barrier.wait(30)
        lk = reclaim(path) if how == "reclaim" else Lock(path).acquire(blocking=False)
    except (NotStale, LockHeld) as exc:
        _put(results, ("refused", type(exc).__name__, os.getpid()))
        os._exit(0)
    _put(results, ("won", lk.token, os.getpid()))
    done.wait(60)
    lk.release()
    os._exit(0)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["exchange", "rename-out"])
def test_concurrent_reclaimers_exactly_one_wins(
    lockdir: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """8 processes released together all break the same stale lock; with the exchange
    primitive and with the fallback used where there is none (guarded rename-out)."""
    if mode == "rename-out":
        import core.engine.exchange as ex
        import core.engine.publish as engine

        def refuse(a: str, b: str) -> None:
            raise ex.ExchangeUnsupported(95, "no exchange here (test)")

        monkeypatch.setattr(ex, "exchange", refuse)  # inherited by the forked reclaimers
        monkeypatch.setattr(engine, "_no_exchange_devs", set())
    path = lockdir / "stale.lock"
    for rnd in range(ROUNDS):
        _make_stale(path)
        barrier = CTX.Barrier(RECLAIMERS)
        results = CTX.Queue()
        done = CTX.Event()
        procs = [
            CTX.Process(target=_reclaimer,
                        args=(str(path), "reclaim" if i % 2 else "acquire", barrier,
                              results, done))
            for i in range(RECLAIMERS)
        ]
        for p in procs:
            p.start()
        got = [results.get(timeout=60) for _ in procs]
        winners = [g for g in got if g[0] == "won"]
        assert len(winners) == 1, f"round {rnd}: {got}"
        # the winner still holds: its fresh lock is at the path, nobody removed it
        assert parse(path.read_bytes()).token == winners[0][1]
        assert inspect(str(path)).state is State.HELD
        refused = {g[1] for g in got if g[0] == "refused"}
        assert refused <= {"NotStale", "LockHeld"}
        done.set()
        for p in procs:
            p.join(30)
            assert p.exitcode == 0
        assert not path.exists()
    entries = audit.read(str(lockdir))
    taken = [e for e in entries if e.operation in ("acquire", "reclaim") and e.result == "ok"]
    assert len(taken) == 2 * ROUNDS  # the dying holder, then exactly one winner, per round
    if mode == "exchange":  # the path is never empty: the winner is always a reclaimer
        assert sum(e.operation == "reclaim" and e.result == "ok" for e in entries) == ROUNDS
    assert audit.verify(str(lockdir)).ok


def _blocked_acquirer(path: str, started: Any, results: Any) -> None:
    lk = Lock(path)
    started.set()
    lk.acquire(timeout=60)
    _put(results, (time.time(), lk.reclaimed_from is not None))
    lk.release()
    os._exit(0)


def _holder(path: str, ready: Any) -> None:
    Lock(path, tag="victim").acquire()
    ready.set()
    time.sleep(120)
    os._exit(0)  # pragma: no cover


def test_waiter_in_other_process_returns_after_release(lockdir: Path) -> None:
    path = lockdir / "handoff.lock"
    holder = Lock(path).acquire()
    started, results = CTX.Event(), CTX.Queue()
    p = CTX.Process(target=_blocked_acquirer, args=(str(path), started, results))
    p.start()
    assert started.wait(30)
    time.sleep(0.3)  # let it block (it cannot get the lock before we release in any case)
    assert results.empty()
    released_at = time.time()
    holder.release()
    got_at, reclaimed = results.get(timeout=30)
    assert got_at >= released_at and not reclaimed
    p.join(30)
    assert p.exitcode == 0


def test_waiter_takes_over_from_sigkilled_holder(lockdir: Path) -> None:
    path = lockdir / "takeover.lock"
    ready, started, results = CTX.Event(), CTX.Event(), CTX.Queue()
    h = CTX.Process(target=_holder, args=(str(path), ready))
    h.start()
    assert ready.wait(30)
    w = CTX.Process(target=_blocked_acquirer, args=(str(path), started, results))
    w.start()
    assert started.wait(30)
    time.sleep(0.3)  # let it block on the live holder
    assert results.empty()
    killed_at = time.time()
    os.kill(h.pid, signal.SIGKILL)
    got_at, reclaimed = results.get(timeout=30)
    h.join(30)
    w.join(30)
    assert reclaimed
    # generous bound for a loaded CI box; the figure itself is in bench_engine_takeover.py
    assert got_at - killed_at < 2.0
    assert w.exitcode == 0


def test_portable_fallbacks_wake_the_waiter(lockdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The code path of platforms without inotify and pidfds (macOS, Windows): watchdog's
    Observer for directory events and a psutil helper thread for the holder's exit."""
    import core.engine.waiting as waiter_mod

    monkeypatch.setattr(waiter_mod, "_inotify_watch", lambda _d: None)
    monkeypatch.delattr(os, "pidfd_open", raising=False)
    pokes: list[str] = []
    real_poke = waiter_mod.Waiter._poke
    real_pid_thread = waiter_mod.Waiter._start_pid_thread

    def poke(self: waiter_mod.Waiter) -> None:
        pokes.append("observer" if self._observer is not None else "?")
        real_poke(self)

    def pid_thread(self: waiter_mod.Waiter, pid: int) -> None:
        pokes.append(f"watching {pid}")
        real_pid_thread(self, pid)

    monkeypatch.setattr(waiter_mod.Waiter, "_poke", poke)
    monkeypatch.setattr(waiter_mod.Waiter, "_start_pid_thread", pid_thread)
    path = lockdir / "portable.lock"
    # 1. a release (directory event through watchdog)
    holder = Lock(path).acquire()
    got: list[Lock] = []
    t = threading.Thread(target=lambda: got.append(Lock(path).acquire(timeout=30)))
    t.start()
    time.sleep(0.3)
    holder.release()
    t.join(30)
    assert got and got[0].is_held and got[0].reclaimed_from is None
    assert "observer" in pokes  # woken by a watchdog event
    got[0].release()
    # 2. the holder is SIGKILLed (no file event; the psutil helper sees the exit)
    ready = CTX.Event()
    h = CTX.Process(target=_holder, args=(str(path), ready))
    h.start()
    assert ready.wait(30)
    got.clear()
    t = threading.Thread(target=lambda: got.append(Lock(path).acquire(timeout=30)))
    t.start()
    time.sleep(0.3)
    os.kill(h.pid, signal.SIGKILL)
    h.join(30)
    t.join(30)
    assert got and got[0].reclaimed_from is not None
    assert f"watching {h.pid}" in pokes
    got[0].release()
