"""``lockwarden clean DIR``: remove temp files that Lockwarden's engine left behind.

Only names matching the engine's temp pattern (:func:`core.fsutil.parse_temp_name`:
``.<lock>.<32 hex>.(tmp|swap|rel)``) are candidates, so another tool's files are never touched.
A candidate is removed only when it is a regular file (not a symlink), older than ``--min-age``
seconds (a live acquisition publishes and unlinks its temp within milliseconds), has a single
link (``st_nlink == 1``: a temp still hard-linked as the lock itself is a held lock's file) and
is not the same inode as the lock it names. It is re-checked (still a single-link regular
file) just before the unlink.
"""

from __future__ import annotations

import argparse
import os
import stat
import time

from core.cli_common import EXIT_OK, CliError, Out, check_dir


def leftovers(directory: str, *, min_age: float, now: float | None = None) -> list[str]:
    """Paths of the engine's leftover temp files in ``directory`` (not recursive).

    ``min_age`` in seconds; ``now`` Unix seconds (default: the current time).
    Raises OSError when the directory cannot be listed."""
    from core.fsutil import parse_temp_name

    now = time.time() if now is None else now
    found = []
    with os.scandir(directory) as it:
        for entry in it:
            parsed = parse_temp_name(entry.name)
            if parsed is None:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                continue
            if now - st.st_mtime < min_age:
                continue
            lock = os.path.join(directory, parsed[0])
            try:
                lst = os.lstat(lock)
                if (lst.st_ino, lst.st_dev) == (st.st_ino, st.st_dev):
                    continue
            except OSError:
                pass
            found.append(entry.path)
    return sorted(found)


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
