"""Live view of the watched lock directories (DESIGN.md, "Watching"; issue 4, "Watcher").

A :class:`Watcher` keeps an inventory of every lock in its :class:`core.config.WatchSpec`
directories (built by :mod:`core.scan`) up to date and hands each change to a callback as a
:class:`ChangeSet` (added / changed / removed :class:`~core.record.LockStatus` entries).

How it works:

- **Events are hints.** watchdog reports file-system events (inotify on Linux, FSEvents on
  macOS, ReadDirectoryChangesW on Windows). Each event only names a path: after a per-path
  debounce of :data:`DEBOUNCE` seconds the path is re-read (:func:`core.scan.read_entry`) and
  re-judged, and the verdict is compared with the last one. Events that arrive together are
  delivered together: a burst of 1,000 new files arrives in a few change sets.
- **Patterns are matched on base names** by our own filter (:func:`core.scan.name_matcher`),
  never by watchdog's pattern matching, which in watchdog 7 matches absolute paths.
- **Full rescans** every ``rescan_interval`` seconds (30 s) heal missed events. They list the
  directories and re-read only the files whose ``lstat`` identity (inode, size, mtime, ctime,
  mode) changed, so they are cheap for large directories.
- **Liveness** is re-checked every ``liveness_interval`` seconds (2 s) with one
  :func:`core.liveness.snapshot` for all entries; an entry is re-judged when its holder PID's
  process info changed (it died, or the PID was reused). Verdicts that change with time alone
  (TTL expiry, ``stale_after`` reached, the 2 s writing grace) are re-judged at that instant
  without any file event. A change set is emitted only when a verdict or record changed
  (state, liveness, reasons, record, file identity): growing ages alone never emit (the GUI
  ticks ages itself; ticking reason parameters are ignored when comparing).
- **Polling**: watchdog's ``PollingObserver`` (every :data:`POLL_INTERVAL` s, never following
  symlinks) is used for network file systems, which give no events for other hosts' changes
  (NFS, SMB/CIFS, sshfs, 9p, ... detected from ``psutil.disk_partitions(all=True)``, longest
  mount-point prefix: :func:`filesystem_of`), when inotify runs out of watches or instances
  (``ENOSPC``/``EMFILE`` from watchdog; :class:`DirStatus` says so), and when the spec says
  ``polling = "on"``. ``polling = "off"`` never polls.
- **Missing directories** are reported as ``DirStatus(mode="missing")`` and picked up (scanned
  and watched) when they appear, checked every liveness tick; a directory deleted and
  re-created (or replaced) is re-attached the same way.
- **One inotify instance**: all event-mode directories share one watchdog observer (one inotify
  instance, one watch per directory): Linux allows only 128 inotify instances per user by
  default, so an observer per directory would run out quickly. Directories that poll share one
  ``PollingObserver`` (one polling thread per directory).

Threads: the watcher's own worker thread (a daemon) reads files, judges and calls
``on_change``/``on_dirs``; watchdog's threads only queue hints. All waiting uses queue/Event
timeouts, never sleeps. :meth:`Watcher.close` stops everything within 1 s.
"""

from __future__ import annotations

import errno
import heapq
import itertools
import logging
import math
import os
import queue
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from watchdog.events import (
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileClosedNoWriteEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileOpenedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)

from core import scan as _scan
from core.config import DEFAULT_RESCAN_INTERVAL, WatchSpec, expand_path
from core.reasons import same_reasons
from core.record import Liveness, LockStatus, State

if TYPE_CHECKING:
    from watchdog.observers.api import BaseObserver, ObservedWatch

    from core.liveness import ProcessSnapshot
    from core.policy import StalePolicy

log = logging.getLogger(__name__)

DEBOUNCE = 0.02
"""Seconds between the first event for a path and its re-read (events within it coalesce)."""

POLL_INTERVAL = 1.0
"""Seconds between two snapshots of a polled directory."""

LIVENESS_INTERVAL = 2.0
"""Seconds between liveness passes (DESIGN.md: "liveness is re-checked every 2 s")."""

MAX_BATCH_DELAY = 0.1
"""Seconds a change set may be held back while more events of the same burst are still
being debounced (so a burst arrives in a few change sets, not one per file)."""

DIRECT_LOOKUPS = 64
"""A round of work that judges at most this many files looks their holders up directly
(psutil, one PID at a time); a larger one takes one fresh :func:`core.liveness.snapshot` for
the round. Either way a file that just changed is judged against the processes running now,
never against a snapshot up to 2 s old (a holder started after that snapshot is not in it)."""

CLOSE_TIMEOUT = 1.0
"""Seconds :meth:`Watcher.close` waits for the threads to stop."""

NETWORK_FS_TYPES = frozenset({
    "nfs", "nfs4", "cifs", "smb", "smbfs", "smb2", "smb3", "9p", "sshfs", "fuse.sshfs",
    "afs", "ncpfs", "davfs", "fuse.davfs2", "webdav", "afpfs", "fuse.rclone", "fuse.s3fs",
    "glusterfs", "fuse.glusterfs", "ceph", "fuse.ceph", "lustre", "gpfs", "virtiofs",
    "vboxsf", "vmhgfs", "fuse.vmhgfs-fuse", "fuse.gvfsd-fuse",
})
"""File-system types whose changes made on other hosts produce no local events (Linux
``/proc/mounts`` names and macOS ``statfs`` names). A partition whose options say ``remote``
(Windows network drives) counts too."""

_INOTIFY_LIMIT_ERRNOS = frozenset({errno.ENOSPC, errno.EMFILE, errno.ENFILE})


# --------------------------------------------------------------------------------------------
# public types
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """Changes delivered to ``on_change``: entries that appeared (``added``), whose verdict or
    record changed (``changed``: the new status) and that disappeared (``removed``: the last
    status seen). Each list is sorted by path; a path is in at most one list."""

    added: list[LockStatus] = field(default_factory=list)
    changed: list[LockStatus] = field(default_factory=list)
    removed: list[LockStatus] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def __len__(self) -> int:
        return len(self.added) + len(self.changed) + len(self.removed)

    def events(self) -> Iterator[tuple[str, LockStatus]]:
        """``("added" | "changed" | "removed", status)`` pairs, in that order (one line each
        for ``lockwarden watch``)."""
        for s in self.added:
            yield "added", s
        for s in self.changed:
            yield "changed", s
        for s in self.removed:
            yield "removed", s


@dataclass(frozen=True, slots=True)
class DirStatus:
    """How one watched directory is watched.

    ``path``: the directory (``~`` and variables expanded); ``mode``: ``events`` (file-system
    events), ``polling`` (snapshots every :data:`POLL_INTERVAL` s), ``missing`` (does not
    exist yet; picked up when it appears) or ``error`` (cannot be listed or watched);
    ``message``: why, in plain words (empty for plain ``events``)."""

    path: str
    mode: str
    message: str = ""


class Filesystem(NamedTuple):
    """The mount a path lives on: ``mountpoint``, ``fstype`` and mount ``opts``."""

    mountpoint: str
    fstype: str
    opts: str


def filesystem_of(path: str, partitions: Sequence[Any] | None = None) -> Filesystem | None:
    """The mount holding ``path``: the partition with the longest mount point that is a
    path-prefix of ``path``'s real path (symlinks resolved as far as the path exists).

    Args:
        path: any path.
        partitions: ``psutil.disk_partitions(all=True)``-like records (``mountpoint``,
            ``fstype``, ``opts``); default: read them now.

    Returns ``None`` when no partition matches (or psutil cannot list them)."""
    if partitions is None:
        try:
            import psutil

            partitions = psutil.disk_partitions(all=True)
        except Exception:
            return None
    real = os.path.normcase(os.path.realpath(os.path.abspath(path)))  # resolves what exists
    best: Filesystem | None = None
    best_len = -1
    for part in partitions:
        mp = os.path.normcase(str(part.mountpoint))
        if not mp:
            continue
        mp_norm = mp.rstrip(os.sep) or os.sep
        inside = real == mp_norm or real.startswith(
            mp_norm if mp_norm.endswith(os.sep) else mp_norm + os.sep
        )
        if inside and len(mp_norm) >= best_len:  # later mounts shadow earlier ones
            best = Filesystem(str(part.mountpoint), str(part.fstype), str(part.opts))
            best_len = len(mp_norm)
    return best


def is_network_fs(fs: Filesystem | None) -> bool:
    """True when file-system events cannot be trusted there: a type in
    :data:`NETWORK_FS_TYPES` (or any ``fuse.sshfs``-like ``*sshfs``), or ``remote`` in the
    mount options."""
    if fs is None:
        return False
    t = fs.fstype.lower()
    return t in NETWORK_FS_TYPES or t.endswith("sshfs") or "remote" in fs.opts.split(",")


# --------------------------------------------------------------------------------------------
# internals
# --------------------------------------------------------------------------------------------

def same_verdict(a: LockStatus, b: LockStatus) -> bool:
    """True when ``b`` says nothing new compared with ``a``: same state, liveness, record,
    file identity, error, read-only flag and stale limit, and the same reasons apart from
    their ticking parameters (ages, time left: :func:`core.reasons.same_reasons`)."""
    return (
        a.state is b.state
        and a.liveness is b.liveness
        and a.error == b.error
        and a.read_only == b.read_only
        and a.stale_after == b.stale_after
        and a.file == b.file
        and a.record == b.record
        and same_reasons(a.reasons, b.reasons)
    )


Sig = tuple[int, int, int, int, int, int]


def _sig(st: os.stat_result | None) -> Sig | None:
    if st is None:
        return None
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


class _Entry:
    __slots__ = ("deadline", "dir", "read", "sig", "status")

    def __init__(self, status: LockStatus, d: _Dir, read: _scan.FileRead | None,
                 sig: Sig | None) -> None:
        self.status = status
        self.dir = d
        self.read = read
        self.sig = sig
        self.deadline = math.inf


class _Proof:
    __slots__ = ("paths", "records", "sig")

    def __init__(self) -> None:
        self.sig: tuple[int, int, int] | bool | None = False  # False: never replayed
        self.records: list[Any] = []
        self.paths: set[str] = set()


class _Dir:
    """State of one watched directory (worker thread only)."""

    def __init__(self, spec: WatchSpec) -> None:
        self.spec = WatchSpec(
            path=spec.path, recursive=bool(spec.recursive), patterns=list(spec.patterns),
            stale_after=float(spec.stale_after), polling=str(spec.polling or "auto"),
            allow_higher_privilege=bool(spec.allow_higher_privilege),
            allow_emergency=bool(spec.allow_emergency),
        )
        self.root = expand_path(spec.path)
        self.watch_root = self.root
        self.policy: StalePolicy = _scan.policy_for(self.spec)
        self.match = _scan.name_matcher(self.spec.patterns)
        self.mode = "missing"
        self.message = ""
        self.attached = False
        self.root_id: tuple[int, int] | None = None
        self.watches: dict[str, tuple[BaseObserver, ObservedWatch]] = {}
        self.paths: set[str] = set()
        self.proofs: dict[str, _Proof] = {}
        self.next_rescan = math.inf
        self.overlapped = False
        self.scan_error: str | None = None
        self.problems: list[str] = []  # sub-directories that could not be listed
        self.reattach = False  # the root's watch died: attach again even if the inode is equal

    @property
    def key(self) -> tuple[Any, ...]:
        s = self.spec
        return (self.root, s.recursive, tuple(s.patterns), s.stale_after, s.polling,
                s.allow_higher_privilege, s.allow_emergency)

    def in_scope(self, d: str) -> bool:
        return _scan.dir_in_scope(self.spec, self.root, d)


def _overlaps(a: _Dir, b: _Dir) -> bool:
    return a.root == b.root or a.in_scope(b.root) or b.in_scope(a.root)


_EVENT_FILTER: list[type[FileSystemEvent]] = [
    FileCreatedEvent, FileDeletedEvent, FileModifiedEvent, FileMovedEvent, FileClosedEvent,
    FileAttribEvent, DirCreatedEvent, DirDeletedEvent, DirMovedEvent,
]
"""Events that can change an inventory (opens, reads and directory mtime changes cannot)."""


class _Handler(FileSystemEventHandler):
    """watchdog event handler: turns events into hints on the worker's queue (observer
    thread). Filters on base names; never reads files."""

    def __init__(self, q: queue.SimpleQueue[Any], d: _Dir) -> None:
        self.q = q
        self.d = d

    def dispatch(self, event: FileSystemEvent) -> None:
        if isinstance(event, DirModifiedEvent | DirAttribEvent | FileOpenedEvent
                      | FileClosedNoWriteEvent):
            return
        is_dir = bool(event.is_directory)
        self._hint(os.fsdecode(event.src_path), is_dir)
        dest = getattr(event, "dest_path", "")
        if dest:
            self._hint(os.fsdecode(dest), is_dir)

    def _hint(self, path: str, is_dir: bool) -> None:
        if not path:
            return
        d = self.d
        if d.watch_root != d.root and (path == d.watch_root
                                       or path.startswith(d.watch_root + os.sep)):
            path = d.root + path[len(d.watch_root):]
        name = os.path.basename(path)
        if is_dir:
            wanted = (d.spec.recursive or d.match(name) or path == d.root or path in d.watches
                      or name in (_scan.LEDGER_DIR, _scan.CLAIMS_DIR))
        else:
            wanted = d.match(name) or name.endswith(".lock") or _scan.is_event_file(name)
        if wanted:
            self.q.put((_HINT, d, path, is_dir))


_HINT = "hint"
_REFRESH = "refresh"
_SPECS = "specs"
_RESCAN = "rescan"
_STOP = "stop"
_WAKE = "wake"


class _Batch:
    """Statuses before the first touch of each path in one round of work."""

    def __init__(self) -> None:
        self.before: dict[str, LockStatus | None] = {}


# --------------------------------------------------------------------------------------------
# the watcher
# --------------------------------------------------------------------------------------------


class Watcher:
    """Watches lock directories and reports changes (see the module docstring).

    Args:
        specs: the directories (:class:`core.config.WatchSpec`).
        on_change: called with each non-empty :class:`ChangeSet`, from the watcher's own thread.
            Exceptions it raises are logged and ignored.
        on_dirs: called with the list of :class:`DirStatus` (one per spec, in order) once
            after :meth:`start` and whenever a directory's mode or message changes, from the
            watcher's own thread.
        rescan_interval: seconds between full rescans (> 0; default 30).
        liveness_interval: seconds between liveness passes (> 0; default 2).

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
    ) -> None:
        if rescan_interval <= 0 or liveness_interval <= 0:
            raise ValueError("rescan_interval and liveness_interval must be positive seconds")
        self._specs = list(specs)
        self._on_change = on_change
        self._on_dirs = on_dirs
        self.rescan_interval = float(rescan_interval)
        self.liveness_interval = float(liveness_interval)
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.RLock()  # the inventory (held by the worker while it works)
        self._life = threading.Lock()  # started/closed flags
        self._dirs: list[_Dir] = []
        self._entries: dict[str, _Entry] = {}
        self._pid_of: dict[str, int] = {}  # path -> holder PID
        self._pid_index: dict[int, set[str]] = {}  # holder PID -> paths
        self._unsettled: set[str] = set()  # judged alive by a direct look-up, not the snapshot
        self._deadlines: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._pending: dict[str, tuple[float, _Dir]] = {}
        self._dir_checks: dict[_Dir, float] = {}
        self._proof_due: dict[tuple[_Dir, str], float] = {}
        self._procs: ProcessSnapshot | None = None  # the last liveness pass's snapshot
        self._round_procs: ProcessSnapshot | None = None  # a fresh one for this round
        self._batch = _Batch()
        self._batch_since: float | None = None
        self._events_obs: BaseObserver | None = None
        self._events_error: str | None = None
        self._poll_obs: BaseObserver | None = None
        self._partitions: list[Any] | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._started = False
        self._closed = False
        self._last_dirs: list[DirStatus] | None = None
        self._dirs_dirty = True  # a directory's mode, message or error may have changed
        self._next_tick = math.inf

    # -- public API ----------------------------------------------------------------------

    def start(self) -> None:
        """Scan the directories, start watching them and start the worker thread.

        When this returns, :meth:`snapshot` holds the initial inventory and
        :meth:`dir_status` each directory's mode; later changes arrive through ``on_change``.
        Missing directories are not an error (``mode="missing"``). Calling it twice is a
        no-op. Raises ``RuntimeError`` after :meth:`close`."""
        with self._life:
            if self._closed:
                raise RuntimeError("this Watcher was closed")
            if self._started:
                return
            self._started = True
        with self._lock:
            self._procs = self._round_procs = _snapshot()
            self._apply_specs(self._specs)
            self._batch = _Batch()  # the initial inventory is not a change
            now_m = time.monotonic()
            self._next_tick = now_m + self.liveness_interval
        self._thread = threading.Thread(target=self._run, name="lockwarden-watcher",
                                        daemon=True)
        self._thread.start()

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
        self._q.put((_STOP,))
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(max(0.0, deadline - time.monotonic()) * 0.5)
        observers = [o for o in (self._events_obs, self._poll_obs) if o is not None]
        if not observers:
            return

        def stop_all() -> None:
            for o in observers:
                try:
                    o.stop()
                except Exception:  # pragma: no cover - watchdog internals
                    log.debug("stopping an observer failed", exc_info=True)
            for o in observers:
                try:
                    o.join(max(0.0, deadline - time.monotonic()))
                except RuntimeError:
                    pass

        stopper = threading.Thread(target=stop_all, name="lockwarden-watcher-stop", daemon=True)
        stopper.start()
        stopper.join(max(0.0, deadline - time.monotonic()))

    def snapshot(self) -> list[LockStatus]:
        """The current inventory, sorted by path (thread-safe; a copy)."""
        with self._lock:
            return sorted((e.status for e in self._entries.values()), key=lambda s: s.path)

    def dir_status(self) -> list[DirStatus]:
        """One :class:`DirStatus` per spec, in order (thread-safe)."""
        with self._lock:
            if not self._started:
                return [DirStatus(expand_path(s.path), "missing", "not started")
                        for s in self._specs]
            return self._dir_statuses()

    def rescan(self) -> None:
        """Rescan every directory now, re-reading every file and re-replaying af ledgers,
        and wait for it (up to 120 s). Changes found are delivered through ``on_change``
        (from the worker thread). Before :meth:`start` or after :meth:`close`: no-op."""
        if not self._started or self._closed:
            return
        if threading.current_thread() is self._thread:  # from a callback
            with self._lock:
                self._round_procs = None
                self._rescan_all(force=True)
            self._q.put((_WAKE,))
            return
        done = threading.Event()
        self._q.put((_RESCAN, done))
        done.wait(120.0)

    def covers(self, path: str) -> bool:
        """True when ``path`` lies in a watched directory that is being watched now (matching
        its spec's patterns and recursion). Thread-safe."""
        path = os.path.abspath(path)
        with self._lock:
            return any(d.attached and _scan.covers(d.spec, path, d.root) for d in self._dirs)

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
        self._q.put((_REFRESH, [os.path.abspath(p) for p in paths]))
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
        self._q.put((_SPECS, specs))

    @property
    def specs(self) -> list[WatchSpec]:
        """The specs last given (constructor or :meth:`set_specs`)."""
        return list(self._specs)

    # -- worker --------------------------------------------------------------------------

    def _run(self) -> None:
        first = True
        while not self._stop.is_set():
            timeout = self._next_wake() if not first else 0.0
            items: list[Any] = []
            try:
                items.append(self._q.get(timeout=timeout) if timeout > 0
                             else self._q.get_nowait())
            except queue.Empty:
                pass
            while True:
                try:
                    items.append(self._q.get_nowait())
                except queue.Empty:
                    break
            if self._stop.is_set():
                break
            dones: list[threading.Event] = []
            dirs: list[DirStatus] | None = None
            try:
                with self._lock:
                    self._work(items, dones)
                    changes = self._maybe_flush()
                    if first or self._dirs_dirty:
                        self._dirs_dirty = False
                        dirs = self._dir_statuses()
            except Exception:  # never let one bad round kill the watcher
                log.exception("lockwarden watcher: error while processing changes")
                changes = ChangeSet()
            for ev in dones:
                ev.set()
            if self._stop.is_set():
                break
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
            first = False

    def _next_wake(self) -> float:
        now_m = time.monotonic()
        wake = self._next_tick
        if self._pending:  # in order of arrival, so of due time: the first is the earliest
            wake = min(wake, next(iter(self._pending.values()))[0])
        if self._dir_checks:
            wake = min(wake, min(self._dir_checks.values()))
        if self._proof_due:
            wake = min(wake, min(self._proof_due.values()))
        for d in self._dirs:
            wake = min(wake, d.next_rescan)
        if self._batch_since is not None:
            wake = min(wake, self._batch_since + MAX_BATCH_DELAY)
        timeout = wake - now_m
        if self._deadlines:
            timeout = min(timeout, self._deadlines[0][0] - time.time())
        return max(0.001, min(timeout, 60.0))

    def _work(self, items: list[Any], dones: list[threading.Event]) -> None:
        self._round_procs = None
        now_m = time.monotonic()
        for item in items:
            kind = item[0]
            if kind == _HINT:
                self._hint(item[1], item[2], item[3], now_m)
            elif kind == _REFRESH:
                for p in item[1]:
                    self._pending.pop(p, None)
                    self._refresh_path(p, None, procs=None)
            elif kind == _SPECS:
                self._apply_specs(item[1])
            elif kind == _RESCAN:
                self._rescan_all(force=True)
                dones.append(item[1])
        now_m = time.monotonic()
        if now_m >= self._next_tick:
            self._tick()
            self._next_tick = time.monotonic() + self.liveness_interval
        if self._dir_checks:
            for d, due in list(self._dir_checks.items()):
                if due <= now_m:
                    del self._dir_checks[d]
                    if d in self._dirs:
                        self._check_dir(d)
        if self._pending:
            due_paths: list[tuple[str, _Dir]] = []
            for p, (due, d) in self._pending.items():  # arrival order = due order
                if due > now_m:
                    break
                due_paths.append((p, d))
            for p, _d in due_paths:
                del self._pending[p]
            procs = self._procs_for_reads(len(due_paths))
            for p, d in due_paths:
                self._refresh_path(p, d, procs=procs)
        if self._proof_due:
            for key, due in list(self._proof_due.items()):
                if due <= now_m:
                    del self._proof_due[key]
                    d, proof = key
                    if d in self._dirs and d.attached:
                        self._refresh_proof(d, proof, force=True)
        for d in self._dirs:
            if d.next_rescan <= now_m:
                if d.mode == "error" and d.root not in d.watches:
                    self._detach(d, "error", d.message)  # try to watch it again
                    self._check_dir(d)
                else:
                    self._rescan_dir(d)
        self._run_deadlines()

    def _hint(self, d: _Dir, path: str, is_dir: bool, now_m: float) -> None:
        if d not in self._dirs:
            return
        due = now_m + DEBOUNCE
        if path == d.root:
            # the watched directory itself was deleted or moved: its watch is dead even if a
            # new directory appears at once (possibly with the same inode number)
            d.reattach = True
            self._dir_checks.setdefault(d, due)
            return
        if path in d.watches:  # a proof's ledger/ or locks/ watched on its own
            obs, watch = d.watches.pop(path)
            _unschedule(obs, watch)  # the rescan watches it again if it is (still) there
            d.next_rescan = min(d.next_rescan, due)
            return
        name = os.path.basename(path)
        parent = os.path.dirname(path)
        if is_dir:
            if d.spec.recursive or name in (_scan.LEDGER_DIR, _scan.CLAIMS_DIR):
                d.next_rescan = min(d.next_rescan, due)
            if d.match(name):
                self._pending.setdefault(path, (due, d))
            return
        if _scan.is_event_file(name) and os.path.basename(parent) == _scan.LEDGER_DIR:
            self._proof_due.setdefault((d, os.path.dirname(parent)), due)
            return
        self._pending.setdefault(path, (due, d))

    # -- entries -------------------------------------------------------------------------

    def _owner(self, path: str, hint: _Dir | None) -> _Dir | None:
        if hint is not None and not hint.overlapped and hint in self._dirs:
            return hint if _scan.covers(hint.spec, path, hint.root) else None
        for d in self._dirs:
            if d.attached and _scan.covers(d.spec, path, d.root):
                return d
        return None

    def _put(self, path: str, entry: _Entry) -> None:
        old = self._entries.get(path)
        if path not in self._batch.before:
            self._batch.before[path] = old.status if old is not None else None
        if old is not None and old.dir is not entry.dir:
            old.dir.paths.discard(path)
        self._entries[path] = entry
        entry.dir.paths.add(path)
        old_deadline = old.deadline if old is not None else None
        rec = entry.status.record
        self._unindex(path)
        if rec is not None and rec.pid is not None:
            self._pid_of[path] = rec.pid
            self._pid_index.setdefault(rec.pid, set()).add(path)
            if entry.status.liveness in (Liveness.ALIVE, Liveness.REUSED) and (
                self._procs is None or rec.pid not in self._procs
            ):
                self._unsettled.add(path)
        entry.deadline = _deadline(entry, time.time())
        if entry.deadline < math.inf and entry.deadline != old_deadline:
            heapq.heappush(self._deadlines, (entry.deadline, next(self._seq), path))
            if len(self._deadlines) > 4 * len(self._entries) + 1024:
                self._deadlines = [(e.deadline, next(self._seq), p)
                                   for p, e in self._entries.items() if e.deadline < math.inf]
                heapq.heapify(self._deadlines)

    def _drop(self, d: _Dir, path: str) -> None:
        d.paths.discard(path)
        e = self._entries.get(path)
        if e is None or e.dir is not d:
            return
        if path not in self._batch.before:
            self._batch.before[path] = e.status
        del self._entries[path]
        self._unindex(path)

    def _unindex(self, path: str) -> None:
        pid = self._pid_of.pop(path, None)
        if pid is not None:
            paths = self._pid_index.get(pid)
            if paths is not None:
                paths.discard(path)
                if not paths:
                    del self._pid_index[pid]
        self._unsettled.discard(path)

    def _drop_all(self, d: _Dir) -> None:
        for path in list(d.paths):
            self._drop(d, path)
        d.proofs.clear()

    def _procs_for_reads(self, n: int) -> ProcessSnapshot | None:
        """Processes to judge ``n`` freshly read files with: ``None`` (direct look-ups) for a
        few, one fresh snapshot per round for many (see :data:`DIRECT_LOOKUPS`)."""
        if n <= DIRECT_LOOKUPS:
            return None
        if self._round_procs is None:
            self._round_procs = _snapshot()
        return self._round_procs

    def _refresh_path(self, path: str, hint: _Dir | None, st: os.stat_result | None = None,
                      have_stat: bool = False, *, procs: ProcessSnapshot | None) -> None:
        d = self._owner(path, hint)
        old = self._entries.get(path)
        if d is None:
            if old is not None:
                self._drop(old.dir, path)
            return
        if not have_stat:
            try:
                st = os.lstat(path)
            except OSError:
                st = None
        read = _scan.read_entry(path)
        if read is None:
            if old is not None:
                self._drop(old.dir, path)
            return
        status = _scan.judge_read(read, policy=d.policy, procs=procs, now=datetime.now(UTC))
        self._put(path, _Entry(status, d, read, _sig(st)))
        parent = os.path.dirname(path)
        if os.path.basename(parent) == _scan.CLAIMS_DIR:
            proof = os.path.dirname(parent)
            if proof in d.proofs:
                self._refresh_proof(d, proof, force=False)

    def _rejudge(self, path: str, e: _Entry, procs: ProcessSnapshot | None) -> None:
        """Judge an entry again from the bytes already read (no file I/O)."""
        now = datetime.now(UTC)
        rec = e.status.record
        if procs is not None and rec is not None and rec.pid is not None \
                and rec.pid not in procs:
            procs = None  # not in the snapshot: look the PID up now
        if e.read is not None:
            status = _scan.judge_read(e.read, policy=e.dir.policy, procs=procs, now=now)
        elif rec is not None:
            status = _scan.judge_claim(rec, policy=e.dir.policy, procs=procs, now=now)
        else:
            return
        self._put(path, _Entry(status, e.dir, e.read, e.sig))

    def _refresh_proof(self, d: _Dir, proof: str, *, force: bool) -> None:
        ps = d.proofs.get(proof)
        if ps is None:
            ps = d.proofs[proof] = _Proof()
        sig = _scan.ledger_signature(proof)
        if force or ps.sig is False or ps.sig != sig:
            ps.records = _scan.replay_claims(proof)
            ps.sig = sig
        now = datetime.now(UTC)
        claims = [_scan.judge_claim(r, policy=d.policy, procs=self._procs, now=now)
                  for r in ps.records]
        locks_dir = os.path.join(proof, _scan.CLAIMS_DIR)
        files = [self._entries[p].status for p in d.paths
                 if os.path.dirname(p) == locks_dir and p in self._entries]
        claims = _scan.dedupe_claims(claims, files, proof)
        new_paths = {s.path for s in claims}
        for p in ps.paths - new_paths:
            self._drop(d, p)
        for s in claims:
            old = self._entries.get(s.path)
            if old is not None and old.dir is d and old.status.record == s.record \
                    and same_verdict(old.status, s):
                continue
            self._put(s.path, _Entry(s, d, None, None))
        ps.paths = new_paths

    def _drop_proof(self, d: _Dir, proof: str) -> None:
        ps = d.proofs.pop(proof, None)
        if ps is not None:
            for p in ps.paths:
                self._drop(d, p)

    # -- directories ---------------------------------------------------------------------

    def _apply_specs(self, specs: list[WatchSpec]) -> None:
        self._partitions = None
        pool: dict[tuple[Any, ...], list[_Dir]] = {}
        for d in self._dirs:
            pool.setdefault(d.key, []).append(d)
        new: list[_Dir] = []
        fresh: list[_Dir] = []
        for spec in specs:
            cand = _Dir(spec)
            reuse = pool.get(cand.key)
            if reuse:
                new.append(reuse.pop(0))
            else:
                new.append(cand)
                fresh.append(cand)
        for leftovers in pool.values():
            for d in leftovers:
                self._detach(d, "missing", "no longer watched")
        self._dirs = new
        self._dirs_dirty = True
        for i, d in enumerate(new):
            d.overlapped = any(_overlaps(d, e) for e in new[:i])
        for d in new:
            if d in fresh:
                self._check_dir(d)
            elif d.attached:
                self._rescan_dir(d)

    def _check_dir(self, d: _Dir) -> None:
        """Attach a directory that appeared, detach one that vanished, re-attach one that was
        replaced (its device/inode changed)."""
        try:
            st = os.stat(d.root)
        except (OSError, ValueError):  # ValueError: a NUL in the path
            st = None
        if st is None or not stat.S_ISDIR(st.st_mode):
            if d.attached or d.mode != "missing":
                what = "is not a directory" if st is not None else "does not exist"
                self._detach(d, "missing", f"{what}; it will be watched when it appears")
            elif not d.message:
                d.message = "does not exist; it will be watched when it appears"
                self._dirs_dirty = True
            return
        ident = (st.st_dev, st.st_ino)
        if d.attached and d.root_id == ident and not d.reattach:
            return
        if d.attached:
            self._detach(d, "missing", "was replaced")
        d.reattach = False
        try:
            self._attach(d, ident)
        except Exception as exc:  # one odd directory must not stop the others
            log.exception("lockwarden watcher: cannot watch %s", d.root)
            d.attached = True
            d.mode, d.message = "error", f"cannot be watched: {exc}"
            d.next_rescan = time.monotonic() + self.rescan_interval
            self._dirs_dirty = True

    def _filesystem(self, path: str) -> Filesystem | None:
        if self._partitions is None:
            try:
                import psutil

                self._partitions = list(psutil.disk_partitions(all=True))
            except Exception:
                self._partitions = []
        return filesystem_of(path, self._partitions)

    def _attach(self, d: _Dir, ident: tuple[int, int]) -> None:
        d.root_id = ident
        d.watch_root = os.path.realpath(d.root)
        mode, message = self._choose_mode(d)
        d.watches = {}
        d.attached = True
        if mode == "events":
            try:
                d.watches[d.root] = self._schedule(d, d.root, polling=False)
            except OSError as exc:
                if isinstance(exc, FileNotFoundError | NotADirectoryError):
                    self._detach(d, "missing", "does not exist; it will be watched when it appears")
                    return
                if d.spec.polling == "off":
                    mode = "error"
                    message = (f"file-system events unavailable ({exc.strerror or exc}) and "
                               'polling = "off" in the settings')
                else:
                    mode = "polling"
                    message = _fallback_message(exc)
        if mode == "polling":
            try:
                d.watches[d.root] = self._schedule(d, d.root, polling=True)
            except OSError as exc:
                if isinstance(exc, FileNotFoundError | NotADirectoryError):
                    self._detach(d, "missing", "does not exist; it will be watched when it appears")
                    return
                mode = "error"
                message = f"cannot be watched: {exc.strerror or exc}"
        d.mode, d.message = mode, message
        self._dirs_dirty = True
        self._rescan_dir(d)

    def _choose_mode(self, d: _Dir) -> tuple[str, str]:
        polling = d.spec.polling
        if polling == "on":
            return "polling", f'polling every {POLL_INTERVAL:g} s (polling = "on" in the settings)'
        if self._events_error is not None and polling != "off":
            return "polling", self._events_error
        if polling == "off":
            return "events", ""
        fs = self._filesystem(d.root)
        if is_network_fs(fs):
            assert fs is not None
            return "polling", (f"network file system ({fs.fstype} at {fs.mountpoint}): "
                               f"polling every {POLL_INTERVAL:g} s, as other hosts' changes "
                               "give no events")
        return "events", ""

    def _observer(self, polling: bool) -> BaseObserver:
        if polling:
            if self._poll_obs is None:
                from watchdog.observers.polling import PollingObserverVFS

                obs: BaseObserver = PollingObserverVFS(os.lstat, os.scandir,
                                                       polling_interval=POLL_INTERVAL)
                obs.daemon = True
                obs.start()
                self._poll_obs = obs
            return self._poll_obs
        if self._events_obs is None:
            from watchdog.observers import Observer

            try:
                obs = Observer()
            except OSError as exc:
                if exc.errno in _INOTIFY_LIMIT_ERRNOS:
                    self._events_error = _fallback_message(exc)
                raise
            obs.daemon = True
            obs.start()
            self._events_obs = obs
        return self._events_obs

    def _schedule(self, d: _Dir, path: str, *, polling: bool) -> tuple[BaseObserver,
                                                                        ObservedWatch]:
        obs = self._observer(polling)
        real = os.path.realpath(path)
        recursive = d.spec.recursive if path == d.root else False
        watch = obs.schedule(_Handler(self._q, d), real, recursive=recursive,
                             event_filter=_EVENT_FILTER)
        return obs, watch

    def _detach(self, d: _Dir, mode: str, message: str) -> None:
        for obs, watch in d.watches.values():
            _unschedule(obs, watch)
        d.watches = {}
        d.attached = False
        d.root_id = None
        d.mode, d.message = mode, message
        self._dirs_dirty = True
        d.next_rescan = math.inf
        self._drop_all(d)
        for p in [p for p, (_, hd) in self._pending.items() if hd is d]:
            del self._pending[p]

    def _rescan_all(self, *, force: bool) -> None:
        for d in self._dirs:
            if not d.attached:
                self._check_dir(d)
            else:
                self._rescan_dir(d, force=force)

    def _rescan_dir(self, d: _Dir, *, force: bool = False) -> None:
        d.next_rescan = time.monotonic() + self.rescan_interval
        if not d.attached:
            return
        try:
            listing = _scan.list_dir(d.spec, with_stat=True)
        except (FileNotFoundError, NotADirectoryError):
            self._detach(d, "missing", "does not exist; it will be watched when it appears")
            return
        except OSError as exc:
            d.scan_error = f"cannot be listed: {exc.strerror or exc}"
            self._dirs_dirty = True
            for path in list(d.paths):
                self._drop(d, path)
            d.proofs.clear()
            return
        if d.scan_error is not None or d.problems != listing.problems:
            d.scan_error = None
            d.problems = listing.problems
            self._dirs_dirty = True
        seen: set[str] = set()
        todo: list[tuple[str, os.stat_result | None]] = []
        for path, st in listing.files.items():
            if d.overlapped and self._owner(path, None) is not d:
                continue
            seen.add(path)
            e = self._entries.get(path)
            sig = _sig(st)
            if (not force and e is not None and e.dir is d and sig is not None and e.sig == sig
                    and e.status.state not in (State.UNREADABLE, State.WRITING)):
                continue
            todo.append((path, st))
        procs = self._procs_for_reads(len(todo))
        for path, st in todo:
            self._refresh_path(path, d, st, have_stat=True, procs=procs)
        claim_paths: set[str] = set()
        for ps in d.proofs.values():
            claim_paths |= ps.paths
        for path in list(d.paths):
            if path not in seen and path not in claim_paths:
                self._drop(d, path)
        for proof in list(d.proofs):
            if proof not in listing.proofs:
                self._drop_proof(d, proof)
        for proof in listing.proofs:
            self._refresh_proof(d, proof, force=force)
        if not d.spec.recursive and d.root in listing.proofs:
            self._watch_proof_parts(d)

    def _watch_proof_parts(self, d: _Dir) -> None:
        """A non-recursive watch of a proof directory also watches its ``ledger/`` and
        ``locks/`` sub-directories (ledger events and claim locks live there)."""
        polling = d.mode == "polling"
        for sub in (_scan.LEDGER_DIR, _scan.CLAIMS_DIR):
            path = os.path.join(d.root, sub)
            if path in d.watches or not os.path.isdir(path):
                continue
            try:
                d.watches[path] = self._schedule(d, path, polling=polling)
            except OSError:
                pass  # the periodic rescan still sees it

    def _dir_statuses(self) -> list[DirStatus]:
        out = []
        for d in self._dirs:
            if d.attached and d.scan_error:
                out.append(DirStatus(d.root, "error", d.scan_error))
                continue
            message = d.message
            if d.attached and d.problems:
                n = len(d.problems)
                more = (f"{n} sub-directories cannot be listed, e.g. {d.problems[0]}" if n > 1
                        else d.problems[0])
                message = f"{message}; {more}" if message else more
            out.append(DirStatus(d.root, d.mode, message))
        return out

    # -- time ----------------------------------------------------------------------------

    def _tick(self) -> None:
        for d in self._dirs:
            self._check_dir(d)
            # a watch on a proof's ledger/ or locks/ may have gone with its directory
            for path in [p for p in d.watches if p != d.root]:
                if not os.path.isdir(path):
                    obs, watch = d.watches.pop(path)
                    _unschedule(obs, watch)
        if not self._pid_of:
            return
        prev, new = self._procs, _snapshot()
        self._procs = new
        # re-judge only the entries whose holder's process info changed between the two
        # snapshots (it exited, or its PID now names another process), and those judged
        # alive by a direct look-up because the PID was missing from the older snapshot
        if new is None or prev is None:
            todo = set(self._pid_of)
        else:
            todo = set(self._unsettled)
            index = self._pid_index
            for pid, info in new.items():
                if pid in index and _proc_key(prev.get(pid)) != _proc_key(info):
                    todo |= index[pid]
            for pid in prev:
                if pid in index and pid not in new:
                    todo |= index[pid]
        for path in todo:
            e = self._entries.get(path)
            if e is not None:
                self._rejudge(path, e, new)

    def _run_deadlines(self) -> None:
        now_ts = time.time()
        while self._deadlines and self._deadlines[0][0] <= now_ts:
            dl, _seq, path = heapq.heappop(self._deadlines)
            e = self._entries.get(path)
            if e is not None and e.deadline == dl:
                self._rejudge(path, e, self._procs)

    def _maybe_flush(self) -> ChangeSet:
        """The changes so far, unless more events of a burst are still being debounced and
        the oldest held change is younger than :data:`MAX_BATCH_DELAY`."""
        if not self._batch.before:
            self._batch_since = None
            return ChangeSet()
        now_m = time.monotonic()
        if self._batch_since is None:
            self._batch_since = now_m
        if self._pending and now_m - self._batch_since < MAX_BATCH_DELAY:
            return ChangeSet()
        self._batch_since = None
        return self._flush()

    def _flush(self) -> ChangeSet:
        before = self._batch.before
        self._batch = _Batch()
        added: list[LockStatus] = []
        changed: list[LockStatus] = []
        removed: list[LockStatus] = []
        for path, old in before.items():
            e = self._entries.get(path)
            new = e.status if e is not None else None
            if old is None and new is not None:
                added.append(new)
            elif old is not None and new is None:
                removed.append(old)
            elif old is not None and new is not None and not same_verdict(old, new):
                changed.append(new)
        key = _path_key
        return ChangeSet(sorted(added, key=key), sorted(changed, key=key),
                         sorted(removed, key=key))


def _unschedule(obs: BaseObserver, watch: ObservedWatch) -> None:
    try:
        obs.unschedule(watch)
    except (KeyError, RuntimeError, OSError):
        pass  # already gone with its directory


def _proc_key(info: Any) -> tuple[Any, ...] | None:
    """What of a snapshot's process info can change a liveness verdict: its start time and
    whether it is a zombie (not its running/sleeping status, which flips all the time)."""
    if info is None:
        return None
    return (info.create_time, info.status == "zombie")


def _path_key(s: LockStatus) -> str:
    return s.path


def _fallback_message(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        what = "inotify watch limit reached (fs.inotify.max_user_watches)"
    elif exc.errno in (errno.EMFILE, errno.ENFILE):
        what = "inotify instance or file limit reached (fs.inotify.max_user_instances)"
    else:
        what = f"file-system events unavailable ({exc.strerror or exc})"
    return f"{what}: polling every {POLL_INTERVAL:g} s instead"


def _snapshot() -> ProcessSnapshot | None:
    from core.liveness import snapshot

    try:
        return snapshot()
    except Exception:
        log.debug("liveness snapshot failed", exc_info=True)
        return None


def _deadline(e: _Entry, now_ts: float) -> float:
    """The next instant (Unix s) at which ``e``'s verdict may change with time alone: TTL or
    ``expires_at`` passing, ``stale_after`` reached, the writing grace ending."""
    st = e.status
    policy = e.dir.policy
    rec = st.record
    mtime = e.read.file.mtime_ns / 1e9 if e.read is not None and e.read.file is not None \
        else None
    cands: list[float] = []
    if rec is not None:
        exp = rec.effective_expiry()
        if exp is not None:
            try:
                cands.append(exp.timestamp())
            except (OverflowError, OSError, ValueError):
                pass
        base = None
        if rec.acquired_at is not None:
            try:
                base = rec.acquired_at.timestamp()
            except (OverflowError, OSError, ValueError):
                base = None
        elif mtime is not None:
            base = mtime
        if base is not None:
            cands.append(base + policy.stale_after)
    elif mtime is not None and st.state in (State.WRITING, State.UNREADABLE, State.STALE):
        cands.append(mtime + policy.writing_grace)
        cands.append(mtime + policy.stale_after)
    future = [c for c in cands if c > now_ts]
    return min(future) + 0.005 if future else math.inf
