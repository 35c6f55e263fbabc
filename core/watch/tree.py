"""Per-directory inotify watches for project trees (Linux; ``docs/watching.md``, "Projects").

watchdog's recursive inotify watch adds a watch for *every* sub-directory -- a project's
``node_modules`` or ``target`` can hold tens of thousands -- and its observer opens one
inotify instance per scheduled directory (Linux allows 128 per user by default), so neither a
recursive watch nor one watchdog watch per directory fits a tree that must skip parts of
itself. :class:`TreeWatcher` holds **one** inotify instance (``inotify_simple``) for every
directory of every project tree the scanner walked (:attr:`core.watch.scan.Listing.dirs`, skipped
directories left out by :mod:`core.watch.scope`), read on one daemon thread, and turns its events
into the same hints as watchdog's (:meth:`core.watch.sources.EventHandler.hint`).

A directory created later is hinted like any directory; the watcher's rescan of the tree then
walks it and watches it. An event queue overflow hints every tree so it is rescanned.

Not available (``inotify_simple`` missing, not Linux): :func:`available` is False and the
caller watches the root recursively with watchdog instead (FSEvents and
ReadDirectoryChangesW are recursive by nature and cost no per-directory resource).
"""

from __future__ import annotations

import errno
import logging
import os
import select
import threading
from typing import Any, Protocol

try:
    import inotify_simple  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - not Linux
    inotify_simple = None

__all__ = ["MAX_USER_WATCHES", "TREE_WATCH_SHARE", "ShareReached", "TreeWatcher", "available",
           "default_limit"]

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
    """What a tree watch delivers events to (:class:`core.watch.sources.EventHandler`); each
    watched directory has a handler of its own, ``target`` is the tree they belong to."""

    target: Any

    def hint(self, path: str, is_dir: bool, done: bool) -> None:
        """A change at ``path`` (``done``: its content is final for now)."""


def available() -> bool:
    """True when one inotify instance can watch single directories (Linux with
    ``inotify_simple``)."""
    return inotify_simple is not None


if inotify_simple is not None:
    _F = inotify_simple.flags
    _MASK: int = (_F.MODIFY | _F.ATTRIB | _F.CLOSE_WRITE | _F.MOVED_FROM | _F.MOVED_TO
                  | _F.CREATE | _F.DELETE | _F.ONLYDIR | _F.DONT_FOLLOW | _F.EXCL_UNLINK)
    _DONE: int = _F.CLOSE_WRITE | _F.DELETE | _F.MOVED_FROM | _F.MOVED_TO
    _ISDIR: int = _F.ISDIR
    _OVERFLOW: int = _F.Q_OVERFLOW
    _IGNORED: int = _F.IGNORED


class TreeWatcher:
    """One inotify instance and one reader thread for the directories of all project trees.

    :meth:`schedule` and :meth:`unschedule` are called from the watcher's worker thread; the
    reader thread only calls the handlers' :meth:`Hinted.hint`, which must not block.

    ``limit``: the most directories it watches at once (default :func:`default_limit`; ``None``
    from there means no cap of ours); :meth:`schedule` raises :class:`ShareReached` beyond it.

    Raises:
        OSError: from the constructor when no inotify instance can be had (the caller then
            polls, :func:`core.watch.sources.fallback_message`).
    """

    def __init__(self, limit: int | None = None) -> None:
        if inotify_simple is None:  # pragma: no cover - callers check available()
            raise OSError("inotify is not available here")
        self.limit = default_limit() if limit is None else max(1, int(limit))
        self._ino = inotify_simple.INotify(nonblocking=True)
        self._lock = threading.Lock()
        self._dirs: dict[int, tuple[str, Hinted]] = {}
        self._idents: dict[int, tuple[int, int] | None] = {}  # (st_dev, st_ino) when set
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="lockwarden-tree-watch",
                                        daemon=True)
        self._thread.start()

    def schedule(self, handler: Hinted, path: str, *, follow: bool = False) -> int:
        """Watch directory ``path`` (never following a symlink, unless ``follow``: a tree's
        root may be a link to its directory) for ``handler``; returns the handle for
        :meth:`unschedule`.

        Raises:
            ShareReached: :attr:`limit` directories are watched already.
            OSError: ``path`` is gone or not a directory, or the inotify watch limit
                (``fs.inotify.max_user_watches``, ``ENOSPC``) is reached.
        """
        if self.limit is not None:
            with self._lock:
                if len(self._dirs) >= self.limit:
                    raise ShareReached(self.limit)
        wd: int = self._ino.add_watch(path, _MASK & ~_F.DONT_FOLLOW if follow else _MASK)
        try:
            st = os.lstat(path)
            ident: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            ident = None
        with self._lock:
            # a directory already watched under another path (moved) keeps its descriptor:
            # the watch now belongs to this path (:meth:`current` is False for the old one)
            self._dirs[wd] = (path, handler)
            self._idents[wd] = ident
        return wd

    def current(self, handle: Any, path: str) -> bool:
        """True when ``handle`` still watches the directory now at ``path``: the watch was
        not dropped (the directory deleted), not handed to another path (the directory moved
        and watched there), and ``path`` is still the directory it was set on (not one made
        again at the same path after the old one was deleted or moved away)."""
        with self._lock:
            known = self._dirs.get(handle)
            ident = self._idents.get(handle)
        if known is None or known[0] != path or ident is None:
            return False
        try:
            st = os.lstat(path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == ident

    def unschedule(self, handle: Any, path: str | None = None) -> None:
        """Stop watching one directory; one already gone is not an error. With ``path``, only
        while the watch is still that path's (not handed to the directory's new path)."""
        with self._lock:
            known = self._dirs.get(handle)
            if known is not None and path is not None and known[0] != path:
                return
            self._dirs.pop(handle, None)
            self._idents.pop(handle, None)
        if known is not None:
            try:
                self._ino.rm_watch(handle)
            except OSError:
                pass  # the directory went away: the kernel dropped the watch already

    def watched(self) -> int:
        """How many directories are watched now."""
        with self._lock:
            return len(self._dirs)

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
        fd = self._ino.fileno()
        try:
            while True:
                ready, _, _ = select.select([fd, self._stop_r], [], [])
                if self._stop_r in ready:
                    return
                try:
                    events = self._ino.read(timeout=0)
                except BlockingIOError:
                    continue
                self._deliver(events)
        except Exception:  # pragma: no cover - a bug here must not kill the app silently
            log.exception("lockwarden watcher: the tree watch stopped")
        finally:
            os.close(self._stop_r)
            self._ino.close()

    def _deliver(self, events: list[Any]) -> None:
        """Hand each event to its directory's handler."""
        for ev in events:
            if ev.mask & _OVERFLOW:
                self._rescan_all()
                continue
            with self._lock:
                known = self._dirs.get(ev.wd)
                if known is not None and ev.mask & _IGNORED:
                    del self._dirs[ev.wd]  # the directory itself went away
                    self._idents.pop(ev.wd, None)
            if known is None or not ev.name:
                continue
            path, handler = known
            handler.hint(os.path.join(path, ev.name), bool(ev.mask & _ISDIR),
                         bool(ev.mask & _DONE))

    def _rescan_all(self) -> None:
        """Events were lost: hint one sub-directory of each tree (the watcher rescans the tree
        on a directory hint), or its root when none is watched (a hint of the root itself
        makes the watcher detach and attach the tree again) -- one hint per tree, not one per
        directory. The longest path of a tree's watched directories is below its root
        whenever any sub-directory is watched."""
        with self._lock:
            known = list(self._dirs.values())
        by_tree: dict[int, tuple[str, Hinted]] = {}
        for path, handler in known:
            had = by_tree.get(id(handler.target))
            if had is None or len(path) > len(had[0]):
                by_tree[id(handler.target)] = (path, handler)
        for path, handler in by_tree.values():
            handler.hint(path, True, True)
