"""Live view of the watched lock directories: :class:`Watcher` keeps the inventory of its
:class:`core.config.WatchSpec` directories up to date and hands each change to a callback as a
:class:`ChangeSet` (added / changed / removed :class:`~core.record.LockStatus`), and each
directory's mode as :class:`DirStatus`.

This module is the public API (every name it exported before the split below still is) and the
scheduler: the worker thread (a daemon that reads, judges and calls ``on_change``/``on_dirs``),
its queue, the per-path debounce (:data:`DEBOUNCE` s), the timers of rescans, liveness passes
and deadlines. :mod:`core.watch.directories` attaches, rescans and re-judges the directories;
:mod:`core.watch.sources` owns the observers; :mod:`core.watch.inventory` is the pure inventory.

Rules (events are hints, latency, liveness and time, rescans, polling, directories that come
and go, resources, empty files; :meth:`Watcher.close` stops everything within 1 s):
docs/watching.md, "Live updates" and "Empty files"; docs/DESIGN.md, "Watching".

A live holder's exit is told by the kernel (:mod:`core.watch.exits`: a pidfd per holder
process on Linux, read by the inotify reader's thread; kqueue on macOS; process handles on
Windows) and re-judges its locks at once; the liveness pass checks only the holders without
one (docs/watching.md, "Holders' exits").
"""

from __future__ import annotations

import logging
import math
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from core.config import DEFAULT_RESCAN_INTERVAL, WatchSpec, expand_path
from core.record import LockStatus
from core.watch import scan as _scan
from core.watch.directories import DIRECT_LOOKUPS, Directories, DirStatus, WatchedDir, take_snapshot
from core.watch.exits import ExitStats
from core.watch.inventory import ChangeSet, Sig, same_verdict
from core.watch.messages import Exited as _Exited
from core.watch.messages import Hint as _Hint
from core.watch.messages import Message as _Message
from core.watch.messages import Refresh as _Refresh
from core.watch.messages import Rescan as _Rescan
from core.watch.messages import Specs as _Specs
from core.watch.messages import Wake as _Wake
from core.watch.rejudge import follow_exits, holder_exit, liveness_pass, run_deadlines
from core.watch.sources import (
    NETWORK_FS_TYPES,
    POLL_INTERVAL,
    Filesystem,
    filesystem_of,
    is_network_fs,
    unschedule,
)
from core.watch.tree import BUSY_GAP

if TYPE_CHECKING:
    from watchdog.observers.api import BaseObserver

__all__ = [  # the public names, as before the split into modules
    "BUSY_GAP", "CLOSE_TIMEOUT", "DEBOUNCE", "DIRECT_LOOKUPS", "LIVENESS_INTERVAL",
    "MAX_BATCH_DELAY", "NETWORK_FS_TYPES", "POLL_INTERVAL", "ChangeSet", "DirStatus",
    "ExitStats", "Filesystem", "Sig", "Watcher", "filesystem_of", "is_network_fs", "same_verdict",
]

log = logging.getLogger(__name__)

DEBOUNCE = 0.01
"""Seconds between the first event for a path and its re-read (events within it coalesce), for
events after which its writer may still be writing (created, written, attributes changed); a
file closed after writing, deleted or renamed is read in the same round. 10 ms: a premature
read is corrected at once by the writer's close."""

LIVENESS_INTERVAL = 2.0
"""Seconds between liveness passes (docs/DESIGN.md: "liveness is re-checked every 2 s")."""

MAX_BATCH_DELAY = 0.0
"""Seconds a change set is held back for a burst: none (kept for importers; the GUI coalesces)."""

CLOSE_TIMEOUT = 1.0
"""Seconds :meth:`Watcher.close` waits for the threads to stop."""




class Watcher:
    """Watches lock directories and reports changes (see the module docstring).

    Args:
        specs: the directories (:class:`core.config.WatchSpec`).
        on_change: called with each non-empty :class:`ChangeSet`, from the watcher's own thread.
            Exceptions it raises are logged and ignored.
        on_dirs: called with the list of :class:`DirStatus` (one per spec, in order) once
            after :meth:`start` and whenever a directory's mode or message changes, from the
            watcher's own thread.
        rescan_interval: seconds between rescans (> 0; default 30); a plain directory
            unchanged since its last full listing is not listed again until that listing is
            :data:`core.watch.quiet.FULL_RESCAN_INTERVAL` s old (docs/watching.md, "Rescans").
        liveness_interval: seconds between liveness passes (> 0; default 2).
        tree_watch_limit: the most directories of project trees watched with inotify (default:
            half of ``fs.inotify.max_user_watches``, :func:`core.watch.tree.default_limit`);
            beyond it a tree is walked every 5 s and its status says why.
        busy_gap: the most seconds the Linux inotify reader waits between two reads while a
            directory is busy with files no lock has (:data:`core.watch.tree.BUSY_GAP`, what
            the tray app gives: fewer wake-ups, a lock there seen up to that much later); 0,
            the default, reads every event at once (docs/watching.md, "Latency").
        exit_budget: the most holder processes whose exit the kernel follows at once
            (default ``None``: as many as the descriptors allow, keeping
            :data:`core.watch.exits.FD_MARGIN` free); the liveness pass checks the others
            (docs/watching.md, "Holders' exits"). 0 follows none.

    Raises:
        ValueError: an interval that is not > 0.

    Usage::

        w = Watcher(specs, on_change=print)
        w.start()                 # initial scan done when this returns
        inventory = w.snapshot()  # then changes arrive through on_change
        ...
        w.close()                 # <= 1 s

    Callbacks are never called from the thread that calls :meth:`start`, :meth:`set_specs`
    or :meth:`rescan` (it may hold a lock that the callback takes).
    """

    def __init__(
        self,
        specs: list[WatchSpec],
        on_change: Callable[[ChangeSet], None],
        *,
        on_dirs: Callable[[list[DirStatus]], None] | None = None,
        rescan_interval: float = DEFAULT_RESCAN_INTERVAL,
        liveness_interval: float = LIVENESS_INTERVAL,
        tree_watch_limit: int | None = None,
        busy_gap: float = 0.0,
        exit_budget: int | None = None,
    ) -> None:
        if rescan_interval <= 0 or liveness_interval <= 0:
            raise ValueError("rescan_interval and liveness_interval must be positive seconds")
        self._specs = list(specs)
        self._on_change = on_change
        self._on_dirs = on_dirs
        self.liveness_interval = float(liveness_interval)
        self._q: queue.SimpleQueue[_Message] = queue.SimpleQueue()
        self._lock = threading.RLock()  # the inventory (held by the worker while it works)
        self._life = threading.Lock()  # started/closed flags
        self._directories = Directories(self._post_hint, self._forget_pending,
                                  rescan_interval=float(rescan_interval),
                                  tree_watch_limit=tree_watch_limit, busy_gap=busy_gap,
                                  post_exit=self._post_exit,
                                  every_s=self.liveness_interval, exit_budget=exit_budget)
        # timers, in time.monotonic() seconds
        self._pending: dict[str, tuple[float, WatchedDir]] = {}  # debounced paths, due order
        self._urgent: dict[str, WatchedDir] = {}  # paths to read in this round (no debounce)
        self._dir_checks: dict[WatchedDir, float] = {}
        self._proof_due: dict[tuple[WatchedDir, str], float] = {}
        self._next_tick = math.inf
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._started = False
        self._closed = False
        self._last_dirs: list[DirStatus] | None = None

    @property
    def rescan_interval(self) -> float:
        """Seconds between rescans of a directory (an unchanged one is not always listed:
        docs/watching.md, "Rescans")."""
        return self._directories.rescan_interval

    @rescan_interval.setter
    def rescan_interval(self, seconds: float) -> None:
        self._directories.rescan_interval = float(seconds)

    def start(self) -> None:
        """Scan the directories, start watching them and start the worker thread.

        The first scan runs with Python's cyclic garbage collector paused
        (:func:`core.watch.scan.gc_paused`): each of its passes would walk every entry already
        kept, a quarter of the time of a scan of 100,000 locks (docs/performance.md, "Listing
        and watching 100,000 locks").

        When this returns, :meth:`snapshot` holds the initial inventory and
        :meth:`dir_status` each directory's mode; later changes arrive through ``on_change``.
        Missing directories are not an error (``mode="missing"``). Calling it twice is a
        no-op.

        Raises:
            RuntimeError: after :meth:`close`.
        """
        with self._life:
            if self._closed:
                raise RuntimeError("this Watcher was closed")
            if self._started:
                return
            self._started = True
        with self._lock, _scan.gc_paused():
            directories = self._directories
            directories.procs = directories.round_procs = take_snapshot()
            directories.apply_specs(self._specs)
            follow_exits(directories)
            directories.inventory.forget_changes()  # the initial inventory is not a change
            self._next_tick = time.monotonic() + self.liveness_interval
        thread = threading.Thread(target=self._run, name="lockwarden-watcher", daemon=True)
        thread.start()  # before it is published: close() never joins a thread not yet started
        self._thread = thread

    def close(self) -> None:
        """Stop the worker and watchdog threads; returns within about
        :data:`CLOSE_TIMEOUT` (1 s) (threads are daemons: a stuck one cannot keep the
        process alive). No callback is called after it returns (unless called from a
        callback). Idempotent."""
        deadline = time.monotonic() + CLOSE_TIMEOUT
        with self._life:  # never the inventory lock: the worker may hold it for a long scan
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        self._q.put(_Wake("stop"))
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(max(0.0, deadline - time.monotonic()) * 0.5)
        self._directories.sources.stop(deadline)
        if t is None or t is threading.current_thread() or not t.is_alive():
            self._directories.exits.close()  # else the worker may still use them: left to exit

    def snapshot(self) -> list[LockStatus]:
        """The current inventory, sorted by path (thread-safe; a copy)."""
        with self._lock:
            return self._directories.inventory.snapshot()

    def dir_status(self) -> list[DirStatus]:
        """One :class:`DirStatus` per spec, in order (thread-safe)."""
        with self._lock:
            if not self._started:
                return [DirStatus(expand_path(s.path), "missing", "not started")
                        for s in self._specs]
            return self._directories.statuses()

    def exit_stats(self) -> ExitStats:
        """How the live holders' processes are followed now: by the kernel (how many, which
        kind of notification) or by the liveness pass (how many, by why). Thread-safe."""
        with self._lock:
            return self._directories.exits.stats()

    def rescan(self) -> None:
        """Rescan every directory now, re-reading every file and re-replaying af ledgers,
        and wait for it (up to 120 s). Changes found are delivered through ``on_change``
        (from the worker thread). Before :meth:`start` or after :meth:`close`: no-op."""
        if not self._started or self._closed:
            return
        if threading.current_thread() is self._thread:  # from a callback
            with self._lock:
                self._directories.new_round()
                self._directories.rescan_all(force=True)
            self._q.put(_Wake("rescan"))
            return
        done = threading.Event()
        self._q.put(_Rescan(done))
        done.wait(120.0)

    def covers(self, path: str) -> bool:
        """True when ``path`` lies in a watched directory that is being watched now (matching
        its spec's patterns and recursion). Thread-safe."""
        path = os.path.abspath(path)
        with self._lock:
            return self._directories.covers(path)

    def refresh(self, paths: list[str]) -> bool:
        """Re-read ``paths`` now, without the debounce, in the watcher's thread; what changed is
        delivered through ``on_change`` like any file event.

        For callers that have just changed a lock themselves (the GUI after an action): the
        watcher stays the one source of truth, so a lock that lived shorter than the debounce
        still gets its ``added`` and ``removed`` (or neither), never half of it. Paths outside
        every watched directory are ignored. Returns False (and does nothing) before
        :meth:`start` or after :meth:`close`. Asynchronous."""
        if not self._started or self._closed:
            return False
        self._q.put(_Refresh([os.path.abspath(p) for p in paths]))
        return True

    def set_specs(self, specs: list[WatchSpec]) -> None:
        """Watch ``specs`` instead, without restarting: unchanged directories keep their
        entries and watches; removed ones report their entries as ``removed``; new or changed
        ones are scanned (changes through ``on_change``). Asynchronous once started."""
        specs = list(specs)
        with self._lock:
            self._specs = specs
            if not self._started or self._closed:
                return
        self._q.put(_Specs(specs))

    @property
    def specs(self) -> list[WatchSpec]:
        """The specs last given (constructor or :meth:`set_specs`)."""
        return list(self._specs)

    @property
    def _dirs(self) -> list[WatchedDir]:
        return self._directories.dirs

    @property
    def _events_obs(self) -> BaseObserver | None:
        return self._directories.sources.events_obs

    @property
    def _poll_obs(self) -> BaseObserver | None:
        return self._directories.sources.poll_obs

    def _post_hint(self, d: WatchedDir, path: str, is_dir: bool, done: bool) -> None:
        """Queue a hint (called by watchdog's threads)."""
        self._q.put(_Hint(d, path, is_dir, done))

    def _post_exit(self, pid: int, handle: int) -> None:
        """Queue a followed holder's exit (called on the reader's thread)."""
        self._q.put(_Exited(pid, handle))

    def _forget_pending(self, d: WatchedDir) -> None:
        """A directory was detached: its debounced paths must not be read for it."""
        for p in [p for p, (_, hd) in self._pending.items() if hd is d]:
            del self._pending[p]
        for p in [p for p, hd in self._urgent.items() if hd is d]:
            del self._urgent[p]

    def _run(self) -> None:
        first = True
        while not self._stop.is_set():
            items = self._take(self._next_wake() if not first else 0.0)
            if self._stop.is_set():
                break
            dones: list[threading.Event] = []
            dirs: list[DirStatus] | None = None
            try:
                with self._lock:
                    self._work(items, dones)
                    follow_exits(self._directories)
                    changes = self._directories.inventory.flush()
                    if first or self._directories.dirty:
                        self._directories.dirty = False
                        dirs = self._directories.statuses()
            except Exception:  # never let one bad round kill the watcher
                log.exception("lockwarden watcher: error while processing changes")
                changes = ChangeSet()
            for ev in dones:
                ev.set()
            if self._stop.is_set():
                break
            self._deliver(changes, dirs, first)
            first = False

    def _take(self, timeout: float) -> list[_Message]:
        """Wait up to ``timeout`` seconds for a message, then take every queued one."""
        items: list[_Message] = []
        try:
            items.append(self._q.get(timeout=timeout) if timeout > 0 else self._q.get_nowait())
        except queue.Empty:
            pass
        while True:
            try:
                items.append(self._q.get_nowait())
            except queue.Empty:
                return items

    def _deliver(self, changes: ChangeSet, dirs: list[DirStatus] | None, first: bool) -> None:
        """Call the callbacks (outside the lock); their exceptions are logged."""
        if changes:
            try:
                self._on_change(changes)
            except Exception:
                log.exception("lockwarden watcher: on_change callback failed")
        if dirs is not None and (first or dirs != self._last_dirs):
            self._last_dirs = dirs
            if self._on_dirs is not None:
                try:
                    self._on_dirs(list(dirs))
                except Exception:
                    log.exception("lockwarden watcher: on_dirs callback failed")

    def _next_wake(self) -> float:
        """Seconds until the earliest timer (at least 1 ms, at most 60 s)."""
        now_m = time.monotonic()
        wake = self._next_tick
        if self._pending:  # in order of arrival, so of due time: the first is the earliest
            wake = min(wake, next(iter(self._pending.values()))[0])
        if self._dir_checks:
            wake = min(wake, min(self._dir_checks.values()))
        if self._proof_due:
            wake = min(wake, min(self._proof_due.values()))
        for d in self._directories.dirs:
            wake = min(wake, d.next_rescan)
        timeout = wake - now_m
        deadline = self._directories.inventory.next_deadline
        if deadline < math.inf:
            timeout = min(timeout, deadline - time.time())
        return max(0.001, min(timeout, 60.0))

    def _work(self, items: list[_Message], dones: list[threading.Event]) -> None:
        """One round: handle the messages, then whatever timer is due."""
        directories = self._directories
        directories.new_round()
        now_m = time.monotonic()
        for item in items:
            if isinstance(item, _Hint):
                self._hint(item.d, item.path, item.is_dir, now_m, item.done)
            elif isinstance(item, _Exited):
                holder_exit(directories, item.pid, item.handle)
            elif isinstance(item, _Refresh):
                for p in item.paths:
                    self._pending.pop(p, None)
                    self._urgent.pop(p, None)
                    directories.refresh_path(p, None, procs=None)
            elif isinstance(item, _Specs):
                with _scan.gc_paused():  # a directory added may be as large as the first scan
                    directories.apply_specs(item.specs)
            elif isinstance(item, _Rescan):
                directories.rescan_all(force=True)
                dones.append(item.done)
        now_m = time.monotonic()
        if now_m >= self._next_tick:
            liveness_pass(directories)
            self._next_tick = time.monotonic() + self.liveness_interval
        if self._dir_checks:
            for d, due in list(self._dir_checks.items()):
                if due <= now_m:
                    del self._dir_checks[d]
                    if d in directories.dirs:
                        directories.check_dir(d)
        if self._pending or self._urgent:
            self._read_due(now_m)
        if self._proof_due:
            for key, due in list(self._proof_due.items()):
                if due <= now_m:
                    del self._proof_due[key]
                    d, proof = key
                    if d in directories.dirs and d.attached:
                        directories.refresh_proof(d, proof, force=True)
        for d in directories.dirs:
            if d.next_rescan <= now_m:
                if d.mode == "error" and d.root not in d.watches:
                    directories.retry(d)
                else:
                    directories.rescan_dir(d)
        run_deadlines(directories, time.time())

    def _read_due(self, now_m: float) -> None:
        """Re-read the paths of this round and the debounced ones due at ``now_m``
        (monotonic s)."""
        due_paths: list[tuple[str, WatchedDir]] = []
        for p, (due, d) in self._pending.items():  # arrival order = due order
            if due > now_m:
                break
            due_paths.append((p, d))
        for p, _d in due_paths:
            del self._pending[p]
        due_paths += self._urgent.items()
        self._urgent.clear()
        procs = self._directories.procs_for_reads(len(due_paths))
        for p, d in due_paths:
            self._directories.refresh_path(p, d, procs=procs)

    def _hint(self, d: WatchedDir, path: str, is_dir: bool, now_m: float, done: bool) -> None:
        """Debounce a hint: schedule a re-read of ``path``, a check of ``d`` itself, a rescan
        of a new sub-directory, or a replay of an af ledger, :data:`DEBOUNCE` s from ``now_m``
        (monotonic s), or in this round when the event says the file is ``done``."""
        if d not in self._directories.dirs:
            return
        due = now_m if done else now_m + DEBOUNCE
        if path == d.root:
            # the watched directory itself was deleted or moved: its watch is dead even if a
            # new directory appears at once (possibly with the same inode number)
            d.reattach = True
            self._dir_checks.setdefault(d, due)
            return
        if path in d.watches and not d.tree:  # a proof's ledger/ or locks/ watched alone
            unschedule(d.watches.pop(path))  # the rescan watches it again if it is there
            d.next_rescan = min(d.next_rescan, due)
            d.listed = None  # listed in full
            return
        name = os.path.basename(path)
        parent = os.path.dirname(path)
        if is_dir:
            if (d.spec.recursive and d.in_scope(path)) or name in (_scan.LEDGER_DIR,
                                                                    _scan.CLAIMS_DIR):
                d.next_rescan = min(d.next_rescan, due)
                d.listed = None  # listed in full, even if the directory looks unchanged
            if d.match(name):
                self._schedule(path, due, d, done)
            return
        if _scan.is_event_file(name) and os.path.basename(parent) == _scan.LEDGER_DIR:
            self._proof_due.setdefault((d, os.path.dirname(parent)), due)
            return
        self._schedule(path, due, d, done)

    def _schedule(self, path: str, due: float, d: WatchedDir, at_once: bool) -> None:
        """Read ``path`` at ``due`` (monotonic s), or in this round when ``at_once`` (then it
        leaves the debounce queue, which stays in due order for :meth:`_read_due`)."""
        if at_once:
            self._pending.pop(path, None)
            self._urgent[path] = d
        elif path not in self._urgent:
            self._pending.setdefault(path, (due, d))
