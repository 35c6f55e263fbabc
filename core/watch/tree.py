"""Single-directory inotify watches on one reader thread (Linux; docs/watching.md, "Projects"
and "Resources").

:class:`TreeWatcher` holds **one** inotify instance (``inotify_simple``) for every directory of
every project tree the scanner walked (:attr:`core.watch.scan.Listing.dirs`, skipped directories
left out by :mod:`core.config.scope`) and for every plain (non-recursive) watched directory,
read on one daemon thread that drops the names no lock has before any path is built, and turns
its events into the same hints as watchdog's (:meth:`core.watch.sources.EventHandler.hint`). A
new directory, the watched directory's own deletion or move, and a queue overflow are hinted so
the watcher walks again. Why not watchdog here: docs/watching.md, "Projects" (a recursive watch
per sub-directory, an instance per directory) and docs/performance.md, "Idle tray" (three
threads woken per event). Not available (``inotify_simple`` missing, not Linux):
:func:`available` is False and the caller watches with watchdog instead.

The same reader waits for the watched holders' exits (docs/watching.md, "Holders' exits"):
:meth:`TreeWatcher.follow` adds a descriptor -- a pidfd of :mod:`core.watch.exits` -- to the one
``epoll`` the reader waits on with the inotify descriptor, so a holder's exit wakes the reader
at once and no second thread is needed. It is armed for one event (``EPOLLONESHOT``): a pidfd
stays readable once its process exited.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import select
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, Protocol

try:
    import inotify_simple  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - not Linux
    inotify_simple = None

__all__ = ["BUSY_GAP", "BUSY_GAP_FIRST", "BUSY_READS", "MAX_USER_WATCHES", "TREE_WATCH_SHARE",
           "ShareReached", "TreeWatcher", "available", "default_limit", "parse"]

MAX_USER_WATCHES = "/proc/sys/fs/inotify/max_user_watches"
"""Where Linux keeps the per-user limit of inotify watches (``fs.inotify.max_user_watches``)."""

TREE_WATCH_SHARE = 0.5
"""The share of the user's inotify watches that project trees may take (docs/watching.md,
"Projects"): the rest stays for the user's editors, IDEs and build tools; directories beyond
it are walked every 5 s instead of watched."""


class ShareReached(OSError):
    """Lockwarden's share of inotify watches (:data:`TREE_WATCH_SHARE` of the user's limit, or
    the limit given) is taken: ``errno`` is ``ENOSPC`` (what the kernel says at its own limit),
    ``limit`` how many watches the share allows."""

    def __init__(self, limit: int) -> None:
        super().__init__(errno.ENOSPC, f"Lockwarden's share of inotify watches ({limit}) is taken")
        self.limit = limit


def default_limit(share: float = TREE_WATCH_SHARE, path: str = MAX_USER_WATCHES) -> int | None:
    """How many directories project trees may watch: ``share`` (0 < share <= 1) of the
    user's inotify watch limit read from ``path``; ``None`` when it cannot be read (no cap of
    ours: the kernel's own ENOSPC still applies)."""
    try:
        with open(path, encoding="ascii") as f:
            total = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return max(1, int(total * share))

log = logging.getLogger("core.watch.watcher")


class Hinted(Protocol):
    """What a watch delivers events to (:class:`core.watch.sources.EventHandler`); each
    watched directory has a handler of its own, ``target`` is the watched directory (or tree)
    it belongs to."""

    target: Any

    def wants(self, name: str) -> bool:
        """True when a file named ``name`` may matter (checked on the reader thread before
        any path is built: a name no lock can have is dropped here)."""

    def hint(self, path: str, is_dir: bool, done: bool) -> None:
        """A change at ``path`` (``done``: its content is final for now)."""


def available() -> bool:
    """True when one inotify instance can watch single directories (Linux with
    ``inotify_simple``)."""
    return inotify_simple is not None


_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)
_READ_SIZE = 64 * 1024
"""Bytes read from the inotify descriptor at once (an event is at most 16 + 256 bytes)."""

if inotify_simple is not None:
    _F = inotify_simple.flags
    _MASK: int = (_F.MODIFY | _F.ATTRIB | _F.CLOSE_WRITE | _F.MOVED_FROM | _F.MOVED_TO
                  | _F.CREATE | _F.DELETE | _F.DELETE_SELF | _F.MOVE_SELF | _F.ONLYDIR
                  | _F.DONT_FOLLOW | _F.EXCL_UNLINK)
    """What is asked of the kernel: the kinds docs/watching.md ("Latency") reads a path after
    (opens, reads and closes without writing are never asked for), and the directory's own
    deletion or move."""
    _DONE: int = _F.CLOSE_WRITE | _F.DELETE | _F.MOVED_FROM | _F.MOVED_TO
    _ISDIR: int = _F.ISDIR
    _OVERFLOW: int = _F.Q_OVERFLOW
    _IGNORED: int = _F.IGNORED
    _SELF: int = _F.DELETE_SELF | _F.MOVE_SELF | _F.UNMOUNT

_epoll: Callable[[], Any] | None = None
if sys.platform == "linux":  # the reader's one epoll (inotify_simple is Linux's too)
    _epoll = select.epoll
_EPOLLIN = getattr(select, "EPOLLIN", 1)
_ONCE = _EPOLLIN | getattr(select, "EPOLLONESHOT", 1 << 30)
"""How a followed descriptor (:meth:`TreeWatcher.follow`) is armed: readable, one event."""


BUSY_READS = 8
"""Reads in a row in which the reader dropped every event (by name) that make a directory
*busy* (see :data:`BUSY_GAP`). Lockwarden's own publish (a temp file written, linked to the
lock's name, removed) and other tools' write-then-rename make fewer than this between two
events that hint a lock, so they are never slowed; a build's ``/tmp`` makes three a file."""

BUSY_GAP = 0.5
"""The most seconds the reader of the tray app waits before
reading again while a directory is busy with files no lock has (a build's ``/tmp``;
docs/performance.md, "Idle tray"; docs/watching.md, "Latency"): the ``busy_gap`` they give
:class:`TreeWatcher`, whose default, 0, never waits (``lockwarden watch``, the API). After
:data:`BUSY_READS` reads in a row whose every event it dropped by name the reader waits
:data:`BUSY_GAP_FIRST`, and twice as long after each further such read, up to this: a busy
directory wakes it at most twice a second however many files are written there, instead
of once or more per file (each wake-up of the reader costs ~0.2 ms of CPU with cold caches,
measured: the idle tray's target, 0.2 % of a core, is 2 ms a second). A read that hints
anything (a lock among them) or finds nothing ends it: events are read at once again. While
the reader waits, every directory it watches waits: a lock written anywhere meanwhile is seen
when it reads."""

BUSY_GAP_FIRST = 0.025
"""Seconds of the first wait once a directory is busy (see :data:`BUSY_GAP`)."""

_GAP_FIRST_MS = round(BUSY_GAP_FIRST * 1000)


class _Reg(NamedTuple):
    """One scheduled watch: a directory's path for one handler, on inotify watch ``wd``
    (several handlers may share a directory, hence a watch descriptor); ``ident`` the
    directory's ``(st_dev, st_ino)`` when scheduled (None: it could not be read)."""

    token: int
    wd: int
    path: str
    handler: Hinted
    capped: bool
    ident: tuple[int, int] | None


def parse(data: bytes) -> list[tuple[int, int, int, str]]:
    """The events in ``data`` read from an inotify descriptor: ``(wd, mask, cookie, name)``,
    the name decoded as file names are (``os.fsdecode``; empty for the directory itself)."""
    out: list[tuple[int, int, int, str]] = []
    pos, end = 0, len(data)
    unpack = _EVENT.unpack_from
    while pos < end:
        wd, mask, cookie, size = unpack(data, pos)
        pos += 16 + size
        name = os.fsdecode(data[pos - size:pos].split(b"\0", 1)[0]) if size else ""
        out.append((wd, mask, cookie, name))
    return out


class TreeWatcher:
    """One inotify instance and one reader thread for single directories: every directory
    of the project trees, and the plain watched directories (and their af proofs' ``ledger/``
    and ``locks/``) on Linux.

    :meth:`schedule` and :meth:`unschedule` are called from the watcher's worker thread; the
    reader thread only calls the handlers' :meth:`Hinted.wants` and :meth:`Hinted.hint`,
    which must not block. A file event whose name the handler does not want is dropped on the
    reader thread before any path is built (docs/performance.md, "Idle tray"); the deletion or
    move of a watched directory itself is hinted as its own path (the watcher then checks it).

    ``limit``: the most directories of project trees (``capped`` watches) it watches at once
    (default :func:`default_limit`; ``None`` from there means no cap of ours);
    :meth:`schedule` raises :class:`ShareReached` beyond it. Plain directories are not
    counted: the kernel's own limit (``ENOSPC``) applies to them, as it did under watchdog.
    ``busy_gap``: the most seconds the reader waits between two reads while a directory is
    busy with files no lock has (:data:`BUSY_GAP`); 0, the default, reads every event at once.

    Raises:
        OSError: from the constructor when no inotify instance can be had (the caller then
            polls, :func:`core.watch.sources.fallback_message`).
    """

    def __init__(self, limit: int | None = None, *, busy_gap: float = 0.0) -> None:
        if inotify_simple is None:  # pragma: no cover - callers check available()
            raise OSError("inotify is not available here")
        self.limit = default_limit() if limit is None else max(1, int(limit))
        self._gap_max_ms = max(0, round(busy_gap * 1000))
        self.busy_waits = 0  # how many times the reader waited (BUSY_GAP): for tests
        self.overflows = 0  # queue overflows read (IN_Q_OVERFLOW): events were lost then
        if _epoll is None:  # pragma: no cover - inotify_simple is Linux's, and so is epoll
            raise OSError("epoll is not available here")
        self._ino = inotify_simple.INotify(nonblocking=True)
        try:
            self._ep: Any = _epoll()  # the inotify descriptor, the stop pipe, followed ones
        except OSError:
            self._ino.close()
            raise
        self._lock = threading.Lock()
        self._followed: dict[int, Callable[[int], None]] = {}  # fd -> on_ready (follow)
        self._regs: dict[int, _Reg] = {}  # token -> registration
        self._by_wd: dict[int, tuple[_Reg, ...]] = {}  # replaced, never changed in place
        self._capped = 0
        self._tokens = itertools.count(1)
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="lockwarden-tree-watch",
                                        daemon=True)
        self._thread.start()

    def schedule(self, handler: Hinted, path: str, *, follow: bool = False,
                 capped: bool = True) -> int:
        """Watch directory ``path`` (never following a symlink, unless ``follow``: a watched
        root may be a link to its directory) for ``handler``; returns the handle for
        :meth:`unschedule`. ``capped``: a project tree's directory, counted against
        :attr:`limit`.

        Raises:
            ShareReached: :attr:`limit` directories of project trees are watched already.
            OSError: ``path`` is gone or not a directory, or the inotify watch limit
                (``fs.inotify.max_user_watches``, ``ENOSPC``) is reached.
        """
        if capped and self.limit is not None:
            with self._lock:
                if self._capped >= self.limit:
                    raise ShareReached(self.limit)
        wd: int = self._ino.add_watch(path, _MASK & ~_F.DONT_FOLLOW if follow else _MASK)
        try:
            st = os.lstat(path)
            ident: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            ident = None
        reg = _Reg(next(self._tokens), wd, path, handler, capped, ident)
        with self._lock:
            # a directory already watched for this handler's directory under another path
            # (moved) is the same watch descriptor: the watch now belongs to this path
            # (:meth:`current` is False for the old one)
            kept = []
            for old in self._by_wd.get(wd, ()):
                if old.handler.target is handler.target:
                    self._forget(old)
                else:
                    kept.append(old)
            self._by_wd[wd] = (*kept, reg)
            self._regs[reg.token] = reg
            self._capped += capped
        return reg.token

    def _forget(self, reg: _Reg) -> None:
        """Drop one registration's book-keeping (under the lock; ``_by_wd`` left to the
        caller)."""
        self._regs.pop(reg.token, None)
        self._capped -= reg.capped

    def current(self, handle: Any, path: str) -> bool:
        """True when ``handle`` still watches the directory now at ``path``: the watch was
        not dropped (the directory deleted), not handed to another path (the directory moved
        and watched there), and ``path`` is still the directory it was set on (not one made
        again at the same path after the old one was deleted or moved away)."""
        with self._lock:
            known = self._regs.get(handle)
        if known is None or known.path != path or known.ident is None:
            return False
        try:
            st = os.lstat(path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == known.ident

    def unschedule(self, handle: Any, path: str | None = None) -> None:
        """Stop watching one directory for its handler; one already gone is not an error.
        With ``path``, only while the watch is still that path's (not handed to the
        directory's new path). The kernel's watch goes with its last handler."""
        with self._lock:
            known = self._regs.get(handle)
            if known is None or (path is not None and known.path != path):
                return
            self._forget(known)
            rest = tuple(r for r in self._by_wd.get(known.wd, ()) if r.token != handle)
            if rest:
                self._by_wd[known.wd] = rest
            else:
                self._by_wd.pop(known.wd, None)
        if not rest:
            try:
                self._ino.rm_watch(known.wd)
            except OSError:
                pass  # the directory went away: the kernel dropped the watch already

    def watched(self) -> int:
        """How many directories are watched now."""
        with self._lock:
            return len(self._by_wd)

    def follow(self, fd: int, on_ready: Callable[[int], None]) -> None:
        """Wait for descriptor ``fd`` (a pidfd) to become readable on the reader thread, in
        the same ``epoll`` as the inotify descriptor, and then call ``on_ready(fd)`` there
        once (it must not block); :meth:`rearm` waits again. The caller keeps ``fd`` open
        until :meth:`unfollow`.

        Raises:
            OSError: ``fd`` cannot be added (``ENOMEM``, ``ENOSPC``: ``max_user_watches`` of
                epoll), or the reader has stopped (``EBADF``).
        """
        with self._lock:
            if self._ep.closed:
                raise OSError(errno.EBADF, "the reader has stopped")
            self._ep.register(fd, _ONCE)
            self._followed[fd] = on_ready

    def rearm(self, fd: int) -> None:
        """Wait again for a followed ``fd`` whose event was not the one awaited (an event of
        a descriptor closed and reopened under the same number). Never raises."""
        with self._lock:
            if fd in self._followed and not self._ep.closed:
                try:
                    self._ep.modify(fd, _ONCE)
                except OSError:
                    pass

    def unfollow(self, fd: int) -> None:
        """Stop waiting for ``fd`` (before the caller closes it). Never raises."""
        with self._lock:
            if self._followed.pop(fd, None) is not None and not self._ep.closed:
                try:
                    self._ep.unregister(fd)
                except OSError:
                    pass

    def followed(self) -> int:
        """How many descriptors :meth:`follow` waits for now."""
        with self._lock:
            return len(self._followed)

    def stop(self) -> None:
        """Stop the reader thread and close the inotify instance (idempotent)."""
        if self._stop_w >= 0:
            try:
                os.write(self._stop_w, b"x")
            except OSError:  # the reader already ended (its end of the pipe is closed)
                pass
            self._thread.join(2.0)
            os.close(self._stop_w)
            self._stop_w = -1

    # -- reader thread ----------------------------------------------------------------------

    def _run(self) -> None:
        if sys.platform == "win32":  # pragma: no cover - no inotify (nor select.poll) there
            return
        fd = self._ino.fileno()
        ep = self._ep
        ep.register(fd, _EPOLLIN)
        ep.register(self._stop_r, _EPOLLIN)
        stop_r = self._stop_r
        armed = True  # the inotify descriptor is waited for (not during a busy gap)
        gap_ms = 0
        dropped = 0  # reads in a row whose every event was dropped
        try:
            while True:
                if gap_ms:  # a busy directory: wait, reading only the followed descriptors
                    if armed:
                        ep.modify(fd, 0)
                        armed = False
                    end = time.monotonic() + gap_ms / 1000
                    while (left := end - time.monotonic()) > 0:
                        if self._others(ep.poll(left), stop_r):
                            return
                    ep.modify(fd, _EPOLLIN)
                    armed = True
                else:
                    ready = ep.poll()
                    if self._others(ready, stop_r):
                        return
                    if not any(f == fd for f, _ in ready):
                        continue  # only a followed descriptor
                try:
                    data = os.read(fd, _READ_SIZE)
                except BlockingIOError:  # quiet: wait for the next event
                    gap_ms = dropped = 0
                    continue
                dropped = 0 if self._deliver(parse(data)) else dropped + 1
                if (dropped < BUSY_READS or len(data) > _READ_SIZE // 2
                        or not self._gap_max_ms):
                    gap_ms = 0  # a lock among them, not busy, more waiting, or never wait
                else:  # a directory busy with other files: read less often, up to busy_gap
                    gap_ms = min(gap_ms * 2 if gap_ms else _GAP_FIRST_MS, self._gap_max_ms)
                    self.busy_waits += 1
        except Exception:  # pragma: no cover - a bug here must not kill the app silently
            log.exception("lockwarden watcher: the directory watch stopped")
        finally:
            with self._lock:
                self._followed.clear()
                ep.close()
            os.close(self._stop_r)
            self._ino.close()

    def _others(self, ready: list[tuple[int, int]], stop_r: int) -> bool:
        """Hand the followed descriptors among ``ready`` to their callbacks; True when the
        stop pipe is among them."""
        for f, _ev in ready:
            if f == stop_r:
                return True
            on_ready = self._followed.get(f)
            if on_ready is not None:
                try:
                    on_ready(f)
                except Exception:  # pragma: no cover - a callback's bug must not stop reading
                    log.exception("lockwarden watcher: a followed descriptor's callback failed")
        return False

    def _deliver(self, events: Iterable[tuple[int, int, int, str]]) -> bool:
        """Hand each event to its directory's handlers: a file's name only if the handler
        wants it, a directory's always, the directory's own deletion or move as its path.
        Returns False when every event was dropped (by name, or its watch is gone)."""
        by_wd = self._by_wd
        join = os.path.join
        hinted = False
        for wd, mask, _cookie, name in events:
            if mask & _OVERFLOW:
                self.overflows += 1  # before the hints: a rescan they cause lists in full
                self._rescan_all()
                hinted = True
                continue
            regs = by_wd.get(wd)
            if regs is None:
                continue
            if mask & _IGNORED:  # the directory itself went away
                with self._lock:
                    gone = self._by_wd.pop(wd, ())
                    for reg in gone:
                        self._forget(reg)
                continue
            if not name:
                if mask & _SELF:
                    hinted = True
                    for reg in regs:
                        reg.handler.hint(reg.path, True, True)
                continue
            if mask & _ISDIR:
                hinted = True
                for reg in regs:
                    reg.handler.hint(join(reg.path, name), True, bool(mask & _DONE))
                continue
            for reg in regs:
                if reg.handler.wants(name):
                    hinted = True
                    reg.handler.hint(join(reg.path, name), False, bool(mask & _DONE))
        return hinted

    def _rescan_all(self) -> None:
        """Events were lost: hint one sub-directory of each watched directory or tree (the
        watcher rescans a tree on a directory hint), or its root when none is watched (a hint
        of the root itself makes the watcher check it, detach and attach it again: a full
        rescan) -- one hint per watched directory, not one per inotify watch. The longest
        path of a tree's watched directories is below its root whenever any sub-directory is
        watched."""
        with self._lock:
            known = list(self._regs.values())
        by_target: dict[int, _Reg] = {}
        for reg in known:
            had = by_target.get(id(reg.handler.target))
            if had is None or len(reg.path) > len(had.path):
                by_target[id(reg.handler.target)] = reg
        for reg in by_target.values():
            reg.handler.hint(reg.path, True, True)
