"""``lockwarden clean DIR``: remove temp files that Lockwarden's engine left behind, through
:mod:`core.engine.cleanup` (which says which files qualify and re-checks each before the
unlink).
"""

from __future__ import annotations

import argparse

from core.cli.common import EXIT_OK, CliError, Out, check_dir
from core.engine.cleanup import leftovers, remove_leftover


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
            done = remove_leftover(path)
        except OSError as exc:
            out.note(f"{path}: not removed: {exc.strerror}")
            continue
        if not done.removed:
            if done.why:
                out.note(f"{path}: not removed: {done.why}")
            continue
        if done.kept is not None:
            out.note(f"{path}: kept in {done.kept.where()}: it held another tool's content")
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
