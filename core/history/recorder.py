"""The recorder: the watcher's change sets into the store, on a thread of its own
(docs/history.md, "Recording").

``lockwarden watch`` and the app each run one :class:`Recorder`: :meth:`Recorder.on_change`
(called on the watcher's thread) only queues; the recorder's thread writes everything queued
meanwhile in one transaction (:meth:`core.history.store.HistoryStore.record`). When the store
fails (read-only data directory, disk full, a damaged file), history is *paused*:
:attr:`Recorder.paused` says why, ``on_status`` is told, the observations are kept (at most
:data:`MAX_PENDING`) and the write is tried again every :data:`RETRY_S` seconds. The monitor
never waits for history and never stops because of it.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from core.audit.model import logs_for
from core.history.model import (
    ACTION_EVENTS,
    ACTION_OPERATIONS,
    HistoryUnavailable,
    Observation,
    Transition,
    gone,
    observation_of,
)
from core.history.store import HistoryStore, safe_text

if TYPE_CHECKING:
    from core.audit import AuditEntry
    from core.record import LockStatus
    from core.watch.inventory import ChangeSet

log = logging.getLogger(__name__)

RETRY_S = 10.0
"""Seconds between attempts to write while history is paused."""

PRUNE_INTERVAL_S = 3600.0
"""Seconds between retention passes by age (also one at start)."""

SIZE_CHECK_ROWS = 500
"""Transitions written between two checks of the store's size against ``max_bytes`` (three
``PRAGMA`` reads: microseconds): at about 600 bytes a transition, the rows outgrow the bound by
at most ~300 KB before the oldest go, however fast a neighbour churns locks in a watched
directory (docs/history.md, "The store")."""

MAX_PENDING = 100_000
"""Most observations kept while history is paused; older ones are dropped first."""

BATCH_S = 0.1
"""Least time between two transactions, in seconds: changes arriving meanwhile wait and go
into the next one (a busy directory costs ten commits a second, not a hundred)."""

AUDIT_LATE_S = 3.0
"""How long after writing a transition of an action (:data:`core.history.model.ACTION_EVENTS`)
the recorder still looks for its audit entry: the engine appends the entry after the change,
so the watcher may see the change first."""

AUDIT_POLL_S = 0.25
"""Seconds between looks for such late audit entries."""

AUDIT_WINDOW_S = 10.0
"""An audit entry names the action behind a transition when it was written at most this many
seconds before the transition was seen (the watcher sees a change within its 2 s liveness
tick; docs/watching.md)."""

StatusCallback = Callable[[str | None], None]


class Recorder:
    """Records what a watcher sees (see the module docstring).

    Args:
        path: the store (default :func:`core.history.store.default_path`).
        keep_s: retention in seconds (``[history] keep``), ``None`` for no limit.
        max_bytes: size bound of the rows in bytes (``[history] max_mb``), ``None``: none.
        on_status: called from the recorder's thread with the reason history is paused, and
            with ``None`` when it records again.
    """

    def __init__(self, path: str | None = None, *, keep_s: float | None = 30 * 86400.0,
                 max_bytes: int | None = None,
                 on_status: StatusCallback | None = None) -> None:
        self.path = path
        self.keep_s = keep_s
        self.max_bytes = max_bytes
        self.on_status = on_status
        self.paused: str | None = None
        """Why history is paused (plain words), or ``None`` while it records."""
        self.written = 0
        """Transitions written so far."""
        self._q: queue.SimpleQueue[list[Observation] | None] = queue.SimpleQueue()
        self._pending: list[Observation] = []
        self._store: HistoryStore | None = None
        self._thread: threading.Thread | None = None
        self._idle = threading.Condition()
        self._queued = 0
        self._done = 0
        self._next_prune = 0.0
        self._since_size_check = 0  # transitions written since the size was last checked
        self._stop = threading.Event()
        self._audit_cache: dict[str, list[AuditEntry]] = {}
        # rows of actions still without their audit entry, by audit log: (give up at, row)
        self._unmatched: dict[str, list[tuple[float, Transition]]] = {}
        self._next_match = 0.0

    # -- any thread ---------------------------------------------------------------------------

    def start(self, initial: Sequence[LockStatus] = (), dirs: Sequence[str] = ()) -> None:
        """Start the thread and record the inventory a watcher starts with: each lock as it
        was judged, and ``vanished`` for each lock in ``dirs`` recorded as present that is not
        in ``initial`` and not on disk (it went away while nothing recorded). Changes queued
        before this call are kept (each observation is written in time order). Returns at
        once; a second call does nothing."""
        if self._thread is not None:
            return
        now = time.time()
        batch = [observation_of(s, s.checked_at.timestamp()) for s in initial if s.present]
        self._thread = threading.Thread(target=self._run, args=(list(dirs), now),
                                        name="lockwarden-history", daemon=True)
        self._put(batch)
        self._thread.start()

    def on_change(self, changes: ChangeSet) -> None:
        """The watcher's ``on_change``: queue the changes (never blocks on the store; a removed
        lock whose file is still there, as when its directory is no longer watched, is not a
        transition)."""
        now = time.time()
        batch = [observation_of(s, s.checked_at.timestamp()) for s in changes.added]
        batch += [observation_of(s, s.checked_at.timestamp()) if s.present else gone(s.path, now)
                  for s in changes.changed]
        # a watcher also reports "removed" the locks of a directory it stops watching: only a
        # lock that is gone (or an af claim, which has no file) went away
        batch += [gone(s.path, now) for s in changes.removed
                  if s.file is None or not os.path.lexists(s.path)]
        self._put(batch)

    def observe(self, statuses: Iterable[LockStatus], removed: Iterable[str] = ()) -> None:
        """Queue verdicts from another source (a lock server's poll) and locks gone."""
        now = time.time()
        batch = [observation_of(s, now) if s.present else gone(s.path, now) for s in statuses]
        batch += [gone(p, now) for p in removed]
        self._put(batch)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything queued so far was written (or history paused); True when
        done within ``timeout`` seconds."""
        with self._idle:
            target = self._queued
            return self._idle.wait_for(lambda: self._done >= target, timeout)

    def close(self, timeout: float = 2.0) -> None:
        """Write what is queued (within ``timeout`` s), stop the thread, close the store."""
        t = self._thread
        if t is None:
            return
        self._stop.set()
        self._q.put(None)
        t.join(timeout)
        self._thread = None

    def _put(self, batch: list[Observation]) -> None:
        with self._idle:
            self._queued += 1
        self._q.put(batch)

    # -- the recorder's thread ----------------------------------------------------------------

    def _run(self, dirs: list[str], started: float) -> None:
        self._open()
        if self._store is not None and dirs:
            self._vanished(dirs, started)
        stop = False
        while not stop:
            timeout = RETRY_S if self.paused else max(0.1, self._next_prune - time.time())
            if self._unmatched:
                timeout = min(timeout, AUDIT_POLL_S)
            items: list[list[Observation] | None] = []
            try:
                items.append(self._q.get(timeout=timeout))
            except queue.Empty:
                pass
            while True:
                try:
                    items.append(self._q.get_nowait())
                except queue.Empty:
                    break
            stop = any(i is None for i in items)
            self._write([o for i in items if i is not None for o in i])
            self._match_late(force=stop)
            with self._idle:
                self._done += sum(1 for i in items if i is not None)
                self._idle.notify_all()
            if not stop and items:
                self._stop.wait(BATCH_S)  # gather what comes meanwhile (close() ends it)
        if self._store is not None:
            self._store.close()
            self._store = None

    def _vanished(self, dirs: list[str], now: float) -> None:
        """Write what is queued so far (the inventory and changes before :meth:`start`) with
        ``vanished`` for locks recorded as present in ``dirs`` but gone now."""
        assert self._store is not None
        try:
            present = self._store.present(dirs)
        except HistoryUnavailable as exc:
            self._pause(exc.reason)
            return
        batch: list[Observation] = []
        taken, stop = 0, False
        while True:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                break
            taken += 1
            if item is None:
                stop = True
                break
            batch += item
        seen = {safe_text(o.lock) for o in batch}
        batch += [gone(lock, now, event="vanished") for lock in present if lock not in seen
                  and not os.path.lexists(lock)]
        self._write(batch)
        with self._idle:
            self._done += taken - (1 if stop else 0)
            self._idle.notify_all()
        if stop:
            self._q.put(None)

    def _open(self) -> None:
        try:
            self._store = HistoryStore(self.path)
        except HistoryUnavailable as exc:
            self._store = None
            self._pause(exc.reason)

    def _write(self, batch: list[Observation]) -> None:
        self._pending += batch
        if len(self._pending) > MAX_PENDING:
            del self._pending[: len(self._pending) - MAX_PENDING]
        if self._store is None:
            self._open()
            if self._store is None:
                return
        self._audit_cache.clear()
        try:
            if self._pending:
                rows = self._store.record(self._pending, self._audit)
                self.written += len(rows)
                self._since_size_check += len(rows)
                late = time.time() + AUDIT_LATE_S
                for r in rows:
                    if r.audit_id is None and r.event in ACTION_EVENTS and "://" not in r.lock:
                        self._unmatched.setdefault(logs_for(r.lock)[0], []).append((late, r))
            self._pending = []
            now = time.time()
            if now >= self._next_prune:
                self._next_prune = now + PRUNE_INTERVAL_S
                self._since_size_check = 0
                self._store.prune(now, self.keep_s, self.max_bytes)
            elif self.max_bytes is not None and self._since_size_check >= SIZE_CHECK_ROWS:
                self._since_size_check = 0  # the size as it grows, not once an hour
                if self._store.size_bytes() > self.max_bytes:
                    self._store.prune(now, None, self.max_bytes)
        except HistoryUnavailable as exc:
            self._store.close()
            self._store = None
            self._pause(exc.reason)
            return
        except Exception:  # a bug: never let it end recording; this batch is logged and dropped
            log.exception("lockwarden: history could not record %d observations",
                          len(self._pending))
            self._pending = []
            return
        if self.paused is not None:
            self._resume()

    def _match_late(self, *, force: bool = False) -> None:
        """Look again, at most every :data:`AUDIT_POLL_S`, for the audit entries of recent
        actions (see :data:`AUDIT_LATE_S`): one ``stat`` per audit log, read only when it
        changed since the oldest row waiting for it."""
        now = time.time()
        if not self._unmatched or self._store is None or (now < self._next_match and not force):
            return
        self._next_match = now + AUDIT_POLL_S
        self._audit_cache.clear()
        try:
            for log, waiting in list(self._unmatched.items()):
                changed = False
                for where in logs_for(waiting[0][1].lock):  # where its entry may have gone
                    try:
                        changed = changed or (os.stat(where).st_mtime
                                              >= waiting[0][1].t - AUDIT_WINDOW_S)
                    except OSError:
                        pass
                keep: list[tuple[float, Transition]] = []
                for until, row in waiting:
                    found = self._audit(row.lock, row.t, row.event) if changed else None
                    if found is not None:
                        self._store.annotate(row.id, *found)
                    elif until > now:
                        keep.append((until, row))
                if keep:
                    self._unmatched[log] = keep
                else:
                    del self._unmatched[log]
        except HistoryUnavailable as exc:
            self._store.close()
            self._store = None
            self._pause(exc.reason)
            self._unmatched = {}

    def _pause(self, reason: str) -> None:
        if self.paused != reason:
            log.info("lockwarden: history paused: %s", reason)  # the callback shows it
            self.paused = reason
            self._tell(reason)

    def _resume(self) -> None:
        self.paused = None
        self._tell(None)

    def _tell(self, reason: str | None) -> None:
        if self.on_status is not None:
            try:
                self.on_status(reason)
            except Exception:
                log.exception("lockwarden: history status callback failed")

    def _audit(self, lock: str, t: float, event: str) -> tuple[str, str] | None:
        """The audit entry of Lockwarden's action on ``lock`` that caused ``event`` seen at
        ``t``: the last entry naming it with an operation that causes ``event``
        (:data:`core.history.model.ACTION_OPERATIONS`), written at most
        :data:`AUDIT_WINDOW_S` before ``t``, in the lock's directory log or this user's own
        log, where entries about a lock in a git repository go
        (:func:`core.audit.logs_for`)."""
        ops = ACTION_OPERATIONS.get(event)
        if "://" in lock or not ops:
            return None
        from core.audit import tail

        for path in logs_for(lock):  # the directory's log, or this user's (a git repository)
            entries = self._audit_cache.get(path)
            if entries is None:
                try:
                    recent = os.stat(path).st_mtime >= t - AUDIT_WINDOW_S
                except OSError:
                    recent = False
                entries = tail(path, 64) if recent else []
                self._audit_cache[path] = entries
            for e in reversed(entries):
                if (e.lock_path and os.path.abspath(e.lock_path) == lock and e.digest
                        and e.timestamp is not None and e.operation in ops
                        and t - AUDIT_WINDOW_S <= e.timestamp.timestamp() <= t + 1.0):
                    return e.digest, e.operation
        return None
