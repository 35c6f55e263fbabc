"""When a periodic rescan may skip listing a watched directory (docs/watching.md, "Rescans"):
a plain directory watched by the inotify reader (:class:`core.watch.tree.TreeWatcher`) whose
own times and link count are those of its last full listing, with no queue overflow since,
no entry that a rescan re-reads anyway, and a full listing less than
:data:`FULL_RESCAN_INTERVAL` s ago.

Why it is safe: a file created, removed or renamed in a directory changes the directory's
``st_mtime_ns`` and ``st_ctime_ns`` (a sub-directory also its ``st_nlink``), whether or not
its inotify event arrived; a lock rewritten in place (same name, same inode) changes only the
file, and is seen by its ``IN_MODIFY``/``IN_CLOSE_WRITE``, unless events were lost: an
overflow of the reader's queue (:attr:`core.watch.tree.TreeWatcher.overflows`) makes the next
rescan full, and so does the full rescan every :data:`FULL_RESCAN_INTERVAL` s for what no
event and no time of the directory shows (a write through ``mmap`` makes no inotify event).
Reads files' metadata only (one ``stat`` and one ``lstat`` of the directory); no thread.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from core.watch import tree as _tree
from core.watch.watched_dir import DirSig, Listed

if TYPE_CHECKING:
    from core.watch.inventory import Inventory
    from core.watch.watched_dir import WatchedDir

__all__ = ["FULL_RESCAN_INTERVAL", "SETTLE", "DirSig", "Listed", "dir_sig", "listed_mark",
           "unchanged"]

FULL_RESCAN_INTERVAL = 300.0
"""Seconds after which a rescan lists a directory in full even when it looks unchanged (every
10th rescan at the default interval of 30 s; every rescan when the interval is longer)."""

SETTLE = 2.0
"""Seconds a directory's ``st_mtime``/``st_ctime`` must lie in the past for its signature to
be trusted: a change made after the signature was read but within the same timestamp tick
(a jiffy on Linux without multigrain timestamps, 2 s on FAT) would leave it equal. A directory
changed more recently is listed in full at its next rescan, as before."""


def dir_sig(path: str, *, now_ns: int | None = None) -> DirSig | None:
    """The signature of directory ``path`` (following a symlink, as the listing does), or
    ``None`` when it cannot be read or changed less than :data:`SETTLE` s before ``now_ns``
    (``time.time_ns()``, Unix ns, by default; a time in the future counts as recent). Never
    raises."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    now = time.time_ns() if now_ns is None else now_ns
    if now - max(st.st_mtime_ns, st.st_ctime_ns) < SETTLE * 1e9:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink)


def _reader(d: WatchedDir) -> _tree.TreeWatcher | None:
    """The inotify reader that watches ``d``'s root with a live watch, if ``d`` may ever be
    skipped: a plain (non-recursive, not a project tree) directory with events, no af proof,
    no overlap with an earlier spec, listed without a problem; else ``None``."""
    if (d.spec.recursive or d.spec.project or d.tree or d.mode != "events" or d.proofs
            or d.overlapped or d.reattach or d.scan_error is not None or d.problems):
        return None
    watch = d.watches.get(d.root)
    if watch is None:
        return None
    reader, handle = watch.observer, watch.handle
    if not isinstance(reader, _tree.TreeWatcher) or not isinstance(handle, int):
        return None
    return reader if reader.current(handle, d.watch_root) else None


def listed_mark(d: WatchedDir) -> Listed | None:
    """What to keep of ``d`` before a full listing starts (:attr:`WatchedDir.listed` once the
    listing succeeded), or ``None`` when ``d`` may not be skipped later (see the module
    docstring)."""
    reader = _reader(d)
    if reader is None:
        return None
    overflows = reader.overflows  # read before the signature: an overflow between is seen
    sig = dir_sig(d.root)
    return Listed(sig, overflows, time.monotonic()) if sig is not None else None


def unchanged(d: WatchedDir, inventory: Inventory, now_m: float) -> bool:
    """True when the periodic rescan of ``d`` may skip its listing at ``now_m``
    (``time.monotonic()`` s): see the module docstring. Never raises."""
    listed = d.listed
    if listed is None or now_m - listed.at >= FULL_RESCAN_INTERVAL:
        return False
    reader = _reader(d)
    if reader is None or reader.overflows != listed.overflows or inventory.rereads(d):
        return False
    return dir_sig(d.root) == listed.sig
