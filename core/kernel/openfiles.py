"""Who has a file open, and what the kernel says about files at one moment, read at most once.

:func:`scan_open_files` walks ``/proc/<pid>/fd`` of every process once and indexes the open
descriptors by ``(st_dev, st_ino)`` (this process's own left out); :class:`KernelView` is one
moment's view for a batch of verdicts (one ``status`` or ``list``, one watcher round):
``/proc/locks`` read at most once, within bounds, each file asked first, the index built at most
once, all lazily -- only when an empty file asks.

Rules, what the walk cannot see, and its cost (linear in the host's open descriptors):
docs/verdicts.md, "Empty files"; docs/DESIGN.md, "Two kinds of locks". Linux only (``/proc``);
elsewhere :func:`scan_open_files` raises ``OSError`` and :meth:`KernelView.open_by` answers
``None`` ("cannot tell"). Nothing here waits or sleeps.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from core.kernel.locks import Holding, kernel_holders
from core.kernel.table import Table, lines_by_file

__all__ = ["Answer", "KernelView", "OpenFiles", "scan_open_files"]

FileId = tuple[int, int]
"""``(st_dev, st_ino)`` of a file, as :func:`os.stat` gives them."""

CLOCK_SLACK = 0.015
"""Seconds by which a file's timestamps may lag the clock: the kernel stamps files with its
coarse clock, one tick (4 ms at 250 Hz, 10 ms at 100 Hz) behind ``time.time()``. A file
changed less than this before a walk started may have been opened after the walk passed it."""


@dataclass(frozen=True, slots=True)
class OpenFiles:
    """The open descriptors of every visible process at one moment, by file.

    Attributes:
        by_file: ``(st_dev, st_ino) -> PIDs`` (sorted, each once) that have the file open.
        taken_at: Unix time (s, UTC) at which the walk **started**: a file changed at or after
            it may have been opened by a process the walk had already passed.
        fds: descriptors examined.
        seconds: how long the walk took (monotonic s).
        hidden: processes whose descriptors could not be read (another user's, or gone).
    """

    by_file: Mapping[FileId, tuple[int, ...]] = field(default_factory=dict)
    taken_at: float = 0.0
    fds: int = 0
    seconds: float = 0.0
    hidden: int = 0

    def open_by(self, dev: int, ino: int) -> tuple[int, ...]:
        """The PIDs that had the file ``(dev, ino)`` open, ``()`` for none."""
        return self.by_file.get((dev, ino), ())


def scan_open_files(proc: str = "/proc", *, exclude: tuple[int, ...] | None = None
                    ) -> OpenFiles:
    """Walk ``/proc/<pid>/fd`` of every process once (see the module docstring).

    Args:
        proc: the proc mount (tests).
        exclude: PIDs whose descriptors are left out; default this process.

    Raises:
        OSError: ``proc`` cannot be listed (not Linux, or no ``/proc``).
    """
    skip = (os.getpid(),) if exclude is None else exclude
    taken_at = time.time()
    t0 = time.monotonic()
    names = os.listdir(proc)
    found: dict[FileId, set[int]] = {}
    fds = hidden = 0
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        if pid in skip:
            continue
        base = f"{proc}/{name}/fd"
        try:
            entries = os.listdir(base)
        except OSError:
            hidden += 1
            continue
        for fd in entries:
            fds += 1
            try:
                st = os.stat(f"{base}/{fd}")
            except OSError:
                continue  # closed meanwhile, or a descriptor of something without a file
            found.setdefault((st.st_dev, st.st_ino), set()).add(pid)
    return OpenFiles({k: tuple(sorted(v)) for k, v in found.items()}, taken_at, fds,
                     time.monotonic() - t0, hidden)


class Answer(NamedTuple):
    """What the kernel says about one file (:meth:`KernelView.answer`).

    Attributes:
        held: the kernel locks on it (``[]``: none found).
        error: why the kernel's locks could not be read at all, or ``None``.
        cut: the bounded read of ``/proc/locks`` (:class:`core.kernel.table.Table`) when it
            was cut off and nothing was found on the file: then it may be held, unseen.
    """

    held: list[Holding]
    error: str | None = None
    cut: Table | None = None


class KernelView:
    """The kernel's locks and the open-file index for a batch of verdicts, each read at most
    once and only when asked (see the module docstring). Not thread-safe: one owner at a time.

    Args:
        proc: the proc mount.
        open_files: an index to reuse (the watcher passes a recent one,
            docs/watching.md "Empty files"); default: built at the first :meth:`open_by`.
    """

    def __init__(self, *, proc: str = "/proc", open_files: OpenFiles | None = None) -> None:
        self._proc = proc
        self._text: Table | None = None
        self._index: dict[str, list[str]] | None = None
        self._text_error: OSError | None = None
        self._text_read = False
        self._open = open_files
        self._open_error = False

    @property
    def can_walk(self) -> bool:
        """True where the open descriptors can be walked at all (a ``/proc`` with
        ``self/fd``: Linux); elsewhere :meth:`open_by` always answers ``None``."""
        return self._open is not None or (
            not self._open_error and os.path.isdir(os.path.join(self._proc, "self", "fd")))

    @property
    def open_files(self) -> OpenFiles | None:
        """The open-file index, when one was built or given (``None`` otherwise)."""
        return self._open

    def _table(self) -> Table | None:
        """``/proc/locks`` read once within bounds (:func:`core.kernel.table.read_table`);
        ``None`` when it cannot be read (the error is kept)."""
        if not self._text_read:
            self._text_read = True
            from core.kernel.table import read_table

            try:
                self._text = read_table(os.path.join(self._proc, "locks"))
            except OSError as exc:
                self._text_error = exc
        return self._text

    def holders(self, path: str) -> tuple[list[Holding], str | None]:
        """:meth:`answer` without the table's cut: the kernel locks on ``path`` (``[]`` when
        none, or when nothing could be found in a table cut off) and ``None``, or ``[]`` and
        why they could not be read. Never raises."""
        found = self.answer(path)
        return found.held, found.error

    def answer(self, path: str) -> Answer:
        """What the kernel says about ``path``: on Linux, the file asked first and
        ``/proc/locks`` read within bounds once per view (:func:`core.kernel.lookup.look_up`);
        where nothing was found but the table was cut off, :attr:`Answer.cut` says so ("cannot
        tell", docs/verdicts.md "When the kernel's lock table is too large"). Without
        ``/proc/locks`` the ``F_GETLK`` fallback cannot see flock locks (docs/formats.md,
        "Where there is no /proc/locks"), so finding none there is "cannot tell" too
        (:attr:`Answer.error`). Never raises."""
        try:
            if not sys.platform.startswith("linux"):
                return Answer(kernel_holders([path]).get(path) or [])
            table = self._table()
            if table is not None:
                from core.kernel.lookup import look_up

                if self._index is None:
                    self._index = lines_by_file(table.text)
                found = look_up([path], table=table, proc=self._proc, openers=self.openers,
                                index=self._index)
                return Answer(found.held.get(path) or [], None, found.unknown.get(path))
            held = kernel_holders([path], source="getlk", proc=self._proc).get(path) or []
            return Answer(held, None if held else "no /proc/locks here, and F_GETLK cannot "
                          "see flock locks")
        except Exception as exc:
            detail = (exc.strerror or str(exc)) if isinstance(exc, OSError) else (
                f"{type(exc).__name__}: {exc}")
            return Answer([], detail)

    def openers(self, st: os.stat_result) -> tuple[int, ...] | None:
        """The other processes that had the file ``st`` describes open at the index's walk
        (built at the first call), or ``None`` where no walk can be made. Never raises."""
        if self._open is None and not self._open_error:
            try:
                self._open = scan_open_files(self._proc)
            except OSError:
                self._open_error = True
        return None if self._open is None else self._open.open_by(st.st_dev, st.st_ino)

    def open_by(self, dev: int, ino: int, changed_at: float | None) -> tuple[int, ...] | None:
        """The other processes that have the file ``(dev, ino)`` open (``()``: none), or
        ``None`` when that cannot be told: no ``/proc`` to walk, or an index built earlier was
        taken before the file last changed (``changed_at``, Unix s, less :data:`CLOCK_SLACK`:
        its writer may have opened it after the walk passed it). Builds the index at the first
        call; a walk made by this call started after the caller read the file, so it speaks
        for that file whatever its timestamps. Never raises."""
        fresh = False
        if self._open is None and not self._open_error:
            try:
                self._open = scan_open_files(self._proc)
                fresh = True
            except OSError:
                self._open_error = True
        if self._open is None:
            return None
        if not fresh and changed_at is not None and (
                changed_at >= self._open.taken_at - CLOCK_SLACK):
            return None
        return self._open.open_by(dev, ino)
