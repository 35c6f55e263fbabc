"""Which kernel locks hold a few files (:func:`look_up` -> :class:`Lookup`): each file is asked
first (``F_GETLK``, ``F_OFD_GETLK``), ``/proc/locks`` is read within bounds, an ``flock`` beyond
a cut is named through fdinfo, and a file on which nothing is seen after a cut is
:attr:`Lookup.unknown`, never "no lock".

The four steps, and why no ``flock(LOCK_EX|LOCK_NB)`` probe is made: docs/verdicts.md, "When
the kernel's lock table is too large"; docs/specs/devtool-locks.md, "The
``flock(LOCK_EX|LOCK_NB)`` probe: risks". Each file asked is opened read-only and closed (see
:mod:`core.kernel.getlk`). Linux only (``/proc``); elsewhere use
:func:`core.kernel.locks.kernel_holders`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from core.kernel.locks import (
    FileKey,
    Holding,
    KernelLock,
    _getlk_holders,
    _regular_files,
    fdinfo_locks,
    held_in_text,
    key_text,
)
from core.kernel.table import Table, read_table

__all__ = ["Lookup", "look_up"]

_Files = Mapping[FileKey, list[tuple[str, os.stat_result]]]


@dataclass(frozen=True, slots=True)
class Lookup:
    """What :func:`look_up` found.

    Attributes:
        held: ``path -> [Holding, ...]`` for the files a kernel lock holds (blocked waiters
            left out).
        unknown: ``path -> Table`` for the files on which nothing was found while the table
            was cut off (:attr:`core.kernel.table.Table.complete` false): "cannot tell",
            never "no lock". Empty when the table was read to its end.
        table: the table read (or given).
    A regular file in neither mapping has no kernel lock.
    """

    held: dict[str, list[Holding]] = field(default_factory=dict)
    unknown: dict[str, Table] = field(default_factory=dict)
    table: Table | None = None


def look_up(paths: Iterable[str], *, table: Table | None = None, proc: str = "/proc",
            openers: Callable[[os.stat_result], Iterable[int] | None] | None = None,
            index: Mapping[str, list[str]] | None = None) -> Lookup:
    """The kernel locks on each of ``paths``, asking each file first (see the module
    docstring).

    Args:
        paths: files to look up (``lstat``: a symlink is never followed; paths that cannot be
            ``lstat``-ed or are not regular files are left out of the answer).
        table: a bounded read of ``/proc/locks`` already made for a batch of verdicts
            (:class:`core.kernel.openfiles.KernelView`); default read it now
            (:func:`core.kernel.table.read_table`), only when a path is a regular file.
        proc: the proc mount (tests).
        index: ``table``'s lines by file (:func:`core.kernel.table.lines_by_file`), built
            once for a batch; default scan ``table``'s text.
        openers: for step 3, the processes that have a file (its ``stat``) open, from an
            index already built (:meth:`core.kernel.openfiles.KernelView.openers`), or ``None``
            for "walk them all"; default walk every process once.

    Raises:
        OSError: ``table`` is not given and ``/proc/locks`` cannot be read (not Linux, a
            restricted container view): the caller falls back to ``F_GETLK`` alone
            (:func:`core.kernel.locks.kernel_holders`).
    """
    stats = _regular_files(paths)
    if not stats:
        return Lookup(table=table)
    asked = _getlk_holders(stats, proc, strict=False)
    if table is None:
        table = read_table(os.path.join(proc, "locks"))
    text = table.text if index is None else "\n".join(
        line for key in stats for line in index.get(key_text(key), ()))
    held = held_in_text(text, stats, proc)
    for path, h in asked.items():
        held.setdefault(path, h)  # taken after the table passed it, or beyond a cut
    if table.complete:
        return Lookup(held, {}, table)
    rest = {key: left for key, entries in stats.items()
            if (left := [(p, st) for p, st in entries if p not in held])}
    held.update(_held_by_fdinfo(rest, proc, _openers_of(rest, openers)))
    unknown = {p: table for entries in rest.values() for p, _ in entries if p not in held}
    return Lookup(held, unknown, table)


def _openers_of(stats: _Files,
                openers: Callable[[os.stat_result], Iterable[int] | None] | None
                ) -> set[int] | None:
    """The processes that have one of ``stats``' files open, by ``openers``; ``None`` (walk
    every process) when there is no ``openers`` or it cannot tell for one file."""
    if openers is None:
        return None
    pids: set[int] = set()
    for entries in stats.values():
        some = openers(entries[0][1])
        if some is None:
            return None
        pids.update(some)
    return pids


def _held_by_fdinfo(stats: _Files, proc: str, pids: set[int] | None
                    ) -> dict[str, list[Holding]]:
    """Step 3: one walk of ``/proc/<pid>/fd`` (of ``pids``, default every process); for each
    descriptor open on one of ``stats``' files (same ``st_dev`` and ``st_ino``), the locks its
    fdinfo lists, with the processes that carry each. Only processes this user may inspect
    are seen. Never raises."""
    want: dict[tuple[int, int], list[str]] = {}
    for entries in stats.values():
        for path, st in entries:
            want.setdefault((st.st_dev, st.st_ino), []).append(path)
    if not want:
        return {}
    found: dict[tuple[int, int], dict[KernelLock, set[int]]] = {}
    try:
        names = os.listdir(proc) if pids is None else [str(p) for p in sorted(pids)]
    except OSError:
        return {}
    for name in names:
        if not name.isdigit():
            continue
        base = f"{proc}/{name}"
        try:
            fds = os.listdir(f"{base}/fd")
        except OSError:
            continue  # another user's process, or gone
        for fd in fds:
            try:
                fst = os.stat(f"{base}/fd/{fd}")
            except OSError:
                continue
            ident = (fst.st_dev, fst.st_ino)
            if ident not in want:
                continue
            try:
                with open(f"{base}/fdinfo/{fd}", encoding="ascii", errors="replace") as f:
                    locks = fdinfo_locks(f.read(1 << 20))
            except OSError:
                continue
            for lock in locks:
                if not lock.waiter:
                    found.setdefault(ident, {}).setdefault(
                        lock._replace(ordinal=0), set()).add(int(name))
    out: dict[str, list[Holding]] = {}
    for ident, locks_by in found.items():
        for path in want[ident]:
            out[path] = [Holding(path, lock, tuple(sorted(pids)), "fdinfo")
                         for lock, pids in locks_by.items()]
    return out
