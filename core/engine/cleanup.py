"""Removing the temp files the engine itself left behind (``lockwarden clean DIR``).

Only names with the full shape of the engine's temp files (:func:`core.tempfiles.parse_temp`:
``.<lock>.<pid>.<32 hex>.lw(tmp|swap|rel)``) are candidates -- a shape no lock name has, and
one the engine refuses as a lock path -- so another tool's files, and locks, are never touched.
A candidate is removed only when :func:`core.tempfiles.leftover_removable` says so: a regular
file (not a symlink) with a single link (a temp still hard-linked as the lock itself is a held
lock's file), not the inode of the lock it names, older than ``min_age`` seconds and never
younger than the writing grace, and whose writer (the PID in its name) is gone. It is
re-checked (still a single-link regular file) just before the unlink (docs/engine.md,
"Crashes and leftovers"). The unlink lives here because only the engine room removes files
in a lock directory (docs/architecture.md).
"""

from __future__ import annotations

import os
import stat
import time

from core.tempfiles import leftover_removable, parse_temp


def leftovers(directory: str, *, min_age: float, now: float | None = None) -> list[str]:
    """Paths of the engine's leftover temp files in ``directory`` that may be removed (not
    recursive; :func:`core.tempfiles.leftover_removable`).

    ``min_age`` in seconds; ``now`` Unix seconds (default: the current time).

    Raises:
        OSError: the directory cannot be listed.
    """
    now = time.time() if now is None else now
    with os.scandir(directory) as it:
        names = [e.path for e in it if parse_temp(e.name) is not None]
    return sorted(p for p in names if leftover_removable(p, min_age=min_age, now=now))


def remove_leftover(path: str) -> bool:
    """Unlink one path that :func:`leftovers` returned, after checking again that it is still a
    regular file with a single link.

    Returns:
        True when it was removed; False when it vanished or is no longer a single-link
        regular file (left alone).

    Raises:
        OSError: it could not be removed (permission, read-only file system...).
    """
    try:
        before = os.lstat(path)
        if before.st_nlink != 1 or not stat.S_ISREG(before.st_mode):
            return False
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True
