"""``lockwarden clean DIR``: remove temp files that Lockwarden's engine left behind.

Only names with the full shape of the engine's temp files (:func:`core.tempfiles.parse_temp`:
``.<lock>.<pid>.<32 hex>.lw(tmp|swap|rel)``) are candidates -- a shape no lock name has, and
one the engine refuses as a lock path -- so another tool's files, and locks, are never touched.
A candidate is removed only when :func:`core.tempfiles.leftover_removable` says so: a regular
file (not a symlink) with a single link (a temp still hard-linked as the lock itself is a held
lock's file), not the inode of the lock it names, older than ``--min-age`` seconds and never
younger than the writing grace, and whose writer (the PID in its name) is gone. It is
re-checked (still a single-link regular file) just before the unlink (docs/engine.md,
"Crashes and leftovers").
"""

from __future__ import annotations

import argparse
import os
import stat
import time

from core.cli.common import EXIT_OK, CliError, Out, check_dir


def leftovers(directory: str, *, min_age: float, now: float | None = None) -> list[str]:
    """Paths of the engine's leftover temp files in ``directory`` that may be removed (not
    recursive; :func:`core.tempfiles.leftover_removable`).

    ``min_age`` in seconds; ``now`` Unix seconds (default: the current time).

    Raises:
        OSError: the directory cannot be listed.
    """
    from core.tempfiles import leftover_removable, parse_temp

    now = time.time() if now is None else now
    with os.scandir(directory) as it:
        names = [e.path for e in it if parse_temp(e.name) is not None]
    return sorted(p for p in names if leftover_removable(p, min_age=min_age, now=now))


def cmd_clean(args: argparse.Namespace, out: Out) -> int:
    """``clean DIR [--dry-run] [--min-age S]``: print each removed (or, with ``--dry-run``,
    removable) path. A file that vanished or changed identity between the check and the
    unlink is skipped; one that cannot be removed is named on stderr.

    Returns:
        0.

    Raises:
        CliError: ``DIR`` is missing, not a directory or cannot be listed (exit 3).
    """
    directory: str = args.dir
    check_dir(directory)
    try:
        paths = leftovers(directory, min_age=float(args.min_age))
    except OSError as exc:
        raise CliError(f"{directory}: cannot list: {exc.strerror}") from None
    removed = []
    for path in paths:
        if args.dry_run:
            removed.append(path)
            continue
        try:
            before = os.lstat(path)
            if before.st_nlink != 1 or not stat.S_ISREG(before.st_mode):
                continue
            os.unlink(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            out.note(f"{path}: not removed: {exc.strerror}")
            continue
        removed.append(path)
    if out.json:
        out.data({"removed": removed, "dry_run": bool(args.dry_run)})
    else:
        verb = "would remove" if args.dry_run else "removed"
        for path in removed:
            out.result(f"{verb} {path}")
        if not removed:
            out.result(f"nothing to clean in {directory}")
    return EXIT_OK
