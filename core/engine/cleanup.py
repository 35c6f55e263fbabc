"""Removing the temp files the engine itself left behind (``lockwarden clean DIR``).

Only names with the full shape of the engine's temp files (:func:`core.tempfiles.parse_temp`:
``.<lock>.<pid>.<32 hex>.lw(tmp|swap|rel)``) are candidates -- a shape no lock name has, and
one the engine refuses as a lock path -- so another tool's files, and locks, are never touched.
A candidate is removed only when :func:`core.tempfiles.leftover_removable` says so: a regular
file (not a symlink) with a single link (a temp still hard-linked as the lock itself is a held
lock's file), not the inode of the lock it names, older than ``min_age`` seconds and never
younger than the writing grace, and whose writer (the PID in its name) is gone. It is
re-checked (still a single-link regular file) and the gate asked
(:func:`core.engine.gate.ask_clean`) just before the unlink (docs/engine.md, "Crashes and
leftovers"). The unlink lives here because only the engine room removes files
in a lock directory (docs/architecture.md).
"""

from __future__ import annotations

import os
import stat
import time
from typing import NamedTuple

from core import seam
from core.engine import gate
from core.engine.gate import Act
from core.engine.trash import Kept, put_aside
from core.errors import NotKept, UnreadableError
from core.fsutil import read_lock_file
from core.tempfiles import leftover_removable, parse_temp
from core.verdicts.inspect import inspect_bytes


def leftovers(directory: str, *, min_age: float, now: float | None = None) -> list[str]:
    """Paths of the engine's leftover temp files in ``directory`` that may be removed (not
    recursive; :func:`core.tempfiles.leftover_removable`).

    ``min_age`` in seconds; ``now`` Unix seconds (default: the current time).

    Raises:
        OSError: the directory cannot be listed.
    """
    now = time.time() if now is None else now
    seam.step("list", directory)
    with os.scandir(directory) as it:
        names = [e.path for e in it if parse_temp(e.name) is not None]
    return sorted(p for p in names if leftover_removable(p, min_age=min_age, now=now))


class Cleaned(NamedTuple):
    """What :func:`remove_leftover` did: ``removed`` (unlinked, or kept in the trash or
    quarantine: ``kept``), else ``why`` not, in words (``None``: it vanished or changed)."""

    removed: bool
    kept: Kept | None = None
    why: str | None = None


def remove_leftover(path: str) -> Cleaned:
    """Remove one path that :func:`leftovers` returned, as the gate says
    (:func:`core.engine.gate.ask_clean`): after checking again that it is still a regular file
    with a single link, unlink it -- or, when it holds foreign content (a forced removal was
    interrupted before the trash took the file), keep it in the trash or quarantine, never
    simply unlinked; a leftover a kernel lock holds, or that stands for unsaved work, stays.

    Returns:
        :class:`Cleaned`.

    Raises:
        OSError: it could not be removed (permission, read-only file system...).
    """
    try:
        before = os.lstat(path)
        if before.st_nlink != 1 or not stat.S_ISREG(before.st_mode):
            return Cleaned(False)
        data, info = read_lock_file(path)
    except (FileNotFoundError, UnreadableError):
        return Cleaned(False)
    parsed = parse_temp(os.path.basename(path))
    status = inspect_bytes(path, data, info)
    answer = gate.ask_clean(path, status, leftover_removable(path, min_age=0.0),
                            parsed.pid if parsed else None, parsed.kind if parsed else None)
    if answer.act is not Act.REMOVE:
        return Cleaned(False, why=answer.words() if answer.act is Act.REFUSE else None)
    try:
        if answer.keep:
            return Cleaned(True, put_aside(path, os.path.join(
                os.path.dirname(path), parsed.lock_name if parsed else os.path.basename(path))))
        seam.step("unlink", path)
        os.unlink(path)
    except FileNotFoundError:
        return Cleaned(False)
    except NotKept as exc:
        return Cleaned(False, why=str(exc))
    return Cleaned(True)
