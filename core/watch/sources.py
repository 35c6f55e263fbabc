"""Where the watcher's hints come from: the inotify reader of :mod:`core.watch.tree` and
watchdog's observers.

:class:`Sources` owns the watchers every watched directory shares, each created on first use
(the :class:`core.watch.tree.TreeWatcher` on Linux, one watchdog event observer, one polling
observer every :data:`POLL_INTERVAL` s), and picks a directory's mode
(:meth:`Sources.choose_mode`; network file systems: :func:`filesystem_of`,
:func:`is_network_fs`). :class:`EventHandler` turns events into hints ``(directory, path,
is_dir)`` on the watchers' threads, matching patterns on base names itself, and never reads a
file. Nothing here judges a lock: :class:`core.watch.watcher.Watcher` decides what a hint means.

Rules: docs/watching.md, "Live updates" ("Polling", "Resources"); docs/DESIGN.md, "Watching".
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Container, Sequence
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

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

from core.watch import scan as _scan
from core.watch import tree as _tree

if TYPE_CHECKING:
    from watchdog.observers.api import BaseObserver, ObservedWatch

log = logging.getLogger("core.watch.watcher")  # one logger for everything the watcher does

POLL_INTERVAL = 1.0
"""Seconds between two snapshots of a polled directory."""

NETWORK_FS_TYPES = frozenset({
    "nfs", "nfs4", "cifs", "smb", "smbfs", "smb2", "smb3", "9p", "sshfs", "fuse.sshfs",
    "afs", "ncpfs", "davfs", "fuse.davfs2", "webdav", "afpfs", "fuse.rclone", "fuse.s3fs",
    "glusterfs", "fuse.glusterfs", "ceph", "fuse.ceph", "lustre", "gpfs", "virtiofs",
    "vboxsf", "vmhgfs", "fuse.vmhgfs-fuse", "fuse.gvfsd-fuse",
})
"""File-system types whose changes made on other hosts produce no local events (Linux
``/proc/mounts`` names and macOS ``statfs`` names). A partition whose options say ``remote``
(Windows network drives) counts too."""

INOTIFY_LIMIT_ERRNOS = frozenset({errno.ENOSPC, errno.EMFILE, errno.ENFILE})
"""``errno`` values of an inotify instance or watch limit reached: fall back to polling."""

# --------------------------------------------------------------------------------------------
# file systems
# --------------------------------------------------------------------------------------------


class Partition(Protocol):
    """What :func:`filesystem_of` reads of a ``psutil.disk_partitions()`` record."""

    @property
    def mountpoint(self) -> str:
        """Where the file system is mounted."""
    @property
    def fstype(self) -> str:
        """Its type (``ext4``, ``nfs4``, ``fuse.sshfs``, ``NTFS`` ...)."""
    @property
    def opts(self) -> str:
        """Mount options, comma-separated (``rw,remote``)."""


class Filesystem(NamedTuple):
    """The mount a path lives on: ``mountpoint``, ``fstype`` and mount ``opts``."""

    mountpoint: str
    fstype: str
    opts: str


def _partitions() -> list[Partition] | None:
    try:
        import psutil

        return list(psutil.disk_partitions(all=True))
    except Exception:  # psutil cannot read the mount table here
        return None


def filesystem_of(path: str, partitions: Sequence[Partition] | None = None) -> Filesystem | None:
    """The mount holding ``path``: the partition with the longest mount point that is a
    path-prefix of ``path``'s real path (symlinks resolved as far as the path exists).

    Args:
        path: any path.
        partitions: ``psutil.disk_partitions(all=True)``-like records (``mountpoint``,
            ``fstype``, ``opts``); default: read them now.

    Returns ``None`` when no partition matches (or psutil cannot list them). Never raises for
    a path that does not exist."""
    if partitions is None:
        partitions = _partitions()
        if partitions is None:
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
    mount options. docs/watching.md, "Polling"."""
    if fs is None:
        return False
    t = fs.fstype.lower()
    return t in NETWORK_FS_TYPES or t.endswith("sshfs") or "remote" in fs.opts.split(",")


def fallback_message(exc: OSError, *, instead: str | None = None) -> str:
    """The :class:`core.watch.watcher.DirStatus` message of a directory that polls because
    watchdog's event observer failed with ``exc`` (inotify limits named with their ``sysctl``);
    ``instead``: what is done instead (default "polling every 1 s")."""
    if isinstance(exc, _tree.ShareReached):
        what = (f"Lockwarden's share of inotify watches reached ({exc.limit} directories; "
                f"'watch --max-watches N' sets it)")
    elif exc.errno == errno.ENOSPC:
        what = "inotify watch limit reached (fs.inotify.max_user_watches)"
    elif exc.errno in (errno.EMFILE, errno.ENFILE):
        what = "inotify instance or file limit reached (fs.inotify.max_user_instances)"
    else:
        what = f"file-system events unavailable ({exc.strerror or exc})"
    return f"{what}: {instead or f'polling every {POLL_INTERVAL:g} s'} instead"


# --------------------------------------------------------------------------------------------
# events -> hints
# --------------------------------------------------------------------------------------------

EVENT_FILTER: list[type[FileSystemEvent]] = [
    FileCreatedEvent, FileDeletedEvent, FileModifiedEvent, FileMovedEvent, FileClosedEvent,
    FileAttribEvent, DirCreatedEvent, DirDeletedEvent, DirMovedEvent,
]
"""Events that can change an inventory (opens, reads and directory mtime changes cannot)."""

_IGNORED = DirModifiedEvent | DirAttribEvent | FileOpenedEvent | FileClosedNoWriteEvent
_DONE = FileClosedEvent | FileDeletedEvent | FileMovedEvent | DirDeletedEvent | DirMovedEvent


class HintTarget(Protocol):
    """What :class:`EventHandler` reads of a watched directory (read on watchdog's thread)."""

    @property
    def root(self) -> str:
        """The directory as configured (``~`` and variables expanded)."""
    @property
    def watch_root(self) -> str:
        """Its real path, which watchdog reports events under."""
    @property
    def recursive(self) -> bool:
        """True when sub-directories are watched too."""
    @property
    def watches(self) -> Container[str]:
        """Paths watched on their own (the root, an af proof's ``ledger/`` and ``locks/``)."""
    @property
    def match(self) -> Callable[[str], bool]:
        """The spec's pattern filter on base names (:func:`core.watch.scan.name_matcher`)."""


T = TypeVar("T", bound=HintTarget)


class EventHandler(FileSystemEventHandler, Generic[T]):
    """watchdog event handler for one watched directory: calls
    ``emit(target, path, is_dir, done)`` for each event path that may matter (observer thread).
    Filters on base names; never reads files.

    ``done`` is True for the events after which the path's content is final for now: a file
    closed after writing (``IN_CLOSE_WRITE``), deleted, or moved away or in (a rename is
    atomic). The watcher reads those at once; a creation, a write or an attribute change may be
    followed by more of the same writer, so those wait for the debounce
    (:data:`core.watch.watcher.DEBOUNCE`; docs/watching.md, "Latency").

    Args:
        target: the watched directory (:class:`HintTarget`).
        emit: called with ``target``, the path (under ``target.root``, even when watchdog
            reports it under the real path), whether it is a directory and ``done``; must not
            block.
    """

    def __init__(self, target: T, emit: Callable[[T, str, bool, bool], None]) -> None:
        self.target = target
        self.emit = emit

    def dispatch(self, event: FileSystemEvent) -> None:
        """Hint the event's path (and the destination of a move)."""
        if isinstance(event, _IGNORED):
            return
        is_dir = bool(event.is_directory)
        done = isinstance(event, _DONE)
        self._hint(os.fsdecode(event.src_path), is_dir, done)
        dest = getattr(event, "dest_path", "")
        if dest:
            self._hint(os.fsdecode(dest), is_dir, done)

    def hint(self, path: str, is_dir: bool, done: bool) -> None:
        """Emit a hint for ``path`` if it may matter (also called by
        :class:`core.watch.tree.TreeWatcher` for its inotify events)."""
        self._hint(path, is_dir, done)

    def wants(self, name: str) -> bool:
        """True when a file named ``name`` may matter: the spec's patterns, any ``*.lock``
        (af's claim and ledger locks), an af ledger event file. The file rule of
        :meth:`hint`, asked by :class:`core.watch.tree.TreeWatcher` before it builds a path."""
        return self.target.match(name) or name.endswith(".lock") or _scan.is_event_file(name)

    def _hint(self, path: str, is_dir: bool, done: bool) -> None:
        if not path:
            return
        d = self.target
        if d.watch_root != d.root and (path == d.watch_root
                                       or path.startswith(d.watch_root + os.sep)):
            path = d.root + path[len(d.watch_root):]
        name = os.path.basename(path)
        if is_dir:
            wanted = (d.recursive or d.match(name) or path == d.root or path in d.watches
                      or name in (_scan.LEDGER_DIR, _scan.CLAIMS_DIR))
        else:
            wanted = self.wants(name)
        if wanted:
            self.emit(d, path, is_dir, done)


# --------------------------------------------------------------------------------------------
# observers
# --------------------------------------------------------------------------------------------


class Unscheduler(Protocol):
    """What :func:`unschedule` calls: a watchdog observer, or a
    :class:`core.watch.tree.TreeWatcher`."""

    def unschedule(self, handle: Any) -> None:
        """Stop the watch ``handle``."""


class Watch(NamedTuple):
    """One scheduled watch: the observer (or tree watcher) and its handle for it
    (watchdog's ``ObservedWatch``, or an inotify watch descriptor)."""

    observer: Unscheduler
    handle: ObservedWatch | int


def unschedule(watch: Watch) -> None:
    """Stop one watch; a watch already gone with its directory is not an error."""
    try:
        watch.observer.unschedule(watch.handle)
    except (KeyError, RuntimeError, OSError):
        pass  # already gone with its directory


class Sources:
    """The shared event observer and polling observer, created on first use, and the mount
    table (read once per :meth:`forget_mounts`). Used from the watcher's worker thread;
    :meth:`stop` from any thread."""

    def __init__(self, *, tree_watch_limit: int | None = None, busy_gap: float = 0.0) -> None:
        self.tree_watch_limit = tree_watch_limit  # None: core.watch.tree.default_limit()
        self.busy_gap = busy_gap  # seconds: core.watch.tree.BUSY_GAP
        self.events_obs: BaseObserver | None = None
        self.poll_obs: BaseObserver | None = None
        self.events_error: str | None = None  # why the event observer cannot be had
        self.tree_obs: _tree.TreeWatcher | None = None
        self._partitions: list[Partition] | None = None

    def forget_mounts(self) -> None:
        """Read the mount table again at the next :meth:`choose_mode` (new settings)."""
        self._partitions = None

    def filesystem(self, path: str) -> Filesystem | None:
        """:func:`filesystem_of` ``path`` with the cached mount table."""
        if self._partitions is None:
            self._partitions = _partitions() or []
        return filesystem_of(path, self._partitions)

    def choose_mode(self, root: str, polling: str, *, instead: str | None = None
                    ) -> tuple[str, str]:
        """``("events" | "polling", message)`` for directory ``root`` whose settings say
        ``polling`` (``auto`` | ``on`` | ``off``). Rules of docs/watching.md, "Polling":
        ``on`` always polls, ``off`` never does; ``auto`` polls after inotify ran out and on
        network file systems. ``instead``: how the directory is polled, in words (default
        "polling every 1 s"; a project tree is re-walked instead)."""
        how = instead or f"polling every {POLL_INTERVAL:g} s"
        if polling == "on":
            return "polling", f'{how} (polling = "on" in the settings)'
        if self.events_error is not None and polling != "off":
            return "polling", self.events_error
        if polling == "off":
            return "events", ""
        fs = self.filesystem(root)
        if fs is not None and is_network_fs(fs):
            return "polling", (f"network file system ({fs.fstype} at {fs.mountpoint}): "
                               f"{how}, as other hosts' changes give no events")
        return "events", ""

    def observer(self, polling: bool) -> BaseObserver:
        """The shared polling or event observer, started on first use.

        Raises:
            OSError: the event observer cannot be created (an inotify limit reached is
                remembered in :attr:`events_error`, so later directories poll at once).
        """
        if polling:
            if self.poll_obs is None:
                from watchdog.observers.polling import PollingObserverVFS

                obs: BaseObserver = PollingObserverVFS(os.lstat, os.scandir,
                                                       polling_interval=POLL_INTERVAL)
                obs.daemon = True
                obs.start()
                self.poll_obs = obs
            return self.poll_obs
        if self.events_obs is None:
            from watchdog.observers import Observer

            try:
                obs = Observer()
            except OSError as exc:
                if exc.errno in INOTIFY_LIMIT_ERRNOS:
                    self.events_error = fallback_message(exc)
                raise
            obs.daemon = True
            obs.start()
            self.events_obs = obs
        return self.events_obs

    def schedule(self, handler: EventHandler[Any], path: str, *, recursive: bool,
                 polling: bool) -> Watch:
        """Watch ``path`` (its real path) with ``handler``: a single directory with events on
        Linux on the shared :class:`core.watch.tree.TreeWatcher` (one thread, names filtered
        before anything is built: docs/performance.md, "Idle tray"), else on the shared
        watchdog observer (polling, a recursive watch, not Linux).

        Raises:
            OSError: from :meth:`observer` or :meth:`tree`, or the path cannot be watched
                (gone, not a directory, inotify limits).
        """
        real = os.path.realpath(path)
        if not polling and not recursive:
            tree = self.tree()
            if tree is not None:
                return Watch(tree, tree.schedule(handler, real, follow=True, capped=False))
        obs = self.observer(polling)
        return Watch(obs, obs.schedule(handler, real, recursive=recursive,
                                       event_filter=EVENT_FILTER))

    def tree(self) -> _tree.TreeWatcher | None:
        """The shared per-directory inotify watcher of project trees, started on first use;
        ``None`` where there is none (not Linux: the caller watches the root recursively).

        Raises:
            OSError: no inotify instance can be had (a limit reached is remembered in
                :attr:`events_error`, so later directories poll at once).
        """
        if not _tree.available():
            return None
        if self.tree_obs is None:
            try:
                self.tree_obs = _tree.TreeWatcher(self.tree_watch_limit,
                                                  busy_gap=self.busy_gap)
            except OSError as exc:
                if exc.errno in INOTIFY_LIMIT_ERRNOS:
                    self.events_error = fallback_message(exc)
                raise
        return self.tree_obs

    def schedule_dir(self, handler: EventHandler[Any], path: str, *,
                     follow: bool = False) -> Watch | None:
        """Watch the single directory ``path`` of a project tree with ``handler`` on the tree
        watcher; ``None`` where there is no tree watcher (:meth:`tree`).

        Raises:
            OSError: as :meth:`tree`, or ``path`` cannot be watched (gone, the inotify watch
                limit reached).
        """
        tree = self.tree()
        if tree is None:
            return None
        return Watch(tree, tree.schedule(handler, path, follow=follow))

    def stop(self, deadline: float) -> None:
        """Stop both observers and wait for them until ``deadline`` (``time.monotonic()``
        seconds) at most, from a helper daemon thread (a stuck observer cannot hold the
        caller longer)."""
        if self.tree_obs is not None:
            self.tree_obs.stop()
        observers = [o for o in (self.events_obs, self.poll_obs) if o is not None]
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
