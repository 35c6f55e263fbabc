"""One watched directory's state, as the watcher keeps it (docs/watching.md, "Live updates"):
:class:`WatchedDir` (its spec, watches, mode, af proofs), :class:`DirStatus` (how it is watched,
for the settings and the status line) and :class:`Proof` (an af proof directory's replayed
ledger). :class:`core.watch.directories.Directories` acts on them; nothing here does I/O.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.config import WatchSpec, expand_path
from core.config.scope import dir_in_scope
from core.stale_policy import StalePolicy
from core.watch import scan as _scan

if TYPE_CHECKING:
    from core.record import LockRecord
    from core.watch.sources import Watch

__all__ = ["DirSig", "DirStatus", "Listed", "Proof", "SpecKey", "WatchedDir"]


@dataclass(frozen=True, slots=True)
class DirStatus:
    """How one watched directory is watched.

    ``path``: the directory (``~`` and variables expanded); ``mode``: ``events`` (file-system
    events), ``polling`` (snapshots every :data:`core.watch.sources.POLL_INTERVAL` s),
    ``missing`` (does not exist yet; picked up when it appears) or ``error`` (cannot be listed
    or watched); ``message``: why, in plain words (empty for plain ``events``)."""

    path: str
    mode: str
    message: str = ""


class Proof:
    """An af proof directory's replayed ledger: its ``ledger/`` signature when replayed, the
    claim records, and the virtual paths of the claims in the inventory."""

    __slots__ = ("paths", "records", "replayed", "sig")

    def __init__(self) -> None:
        self.replayed = False
        self.sig: tuple[int, int, int] | None = None
        self.records: list[LockRecord] = []
        self.paths: set[str] = set()


DirSig = tuple[int, int, int, int, int]
"""``(st_dev, st_ino, st_mtime_ns, st_ctime_ns, st_nlink)`` of a directory
(:func:`core.watch.quiet.dir_sig`)."""


@dataclass(frozen=True, slots=True)
class Listed:
    """What a full listing of a directory saw of the directory itself: its signature read just
    before the listing (:func:`core.watch.quiet.dir_sig`), the inotify reader's overflow count
    then, and when (``time.monotonic()`` s)."""

    sig: DirSig
    overflows: int
    at: float


SpecKey = tuple[str, bool, tuple[str, ...], str, StalePolicy, tuple[str, ...], bool]


class WatchedDir:
    """State of one watched directory (worker thread only; watchdog's threads read ``root``,
    ``watch_root``, ``recursive``, ``match`` and ``watches``).

    Attributes:
        spec: a normalised copy of the :class:`core.config.WatchSpec`.
        root: its path, expanded; ``watch_root``: the real path watchdog reports.
        mode, message: as in :class:`DirStatus`.
        attached: scanned and (being) watched; ``root_id``: ``(st_dev, st_ino)`` then.
        watches: path -> :class:`core.watch.sources.Watch` (the root; for a non-recursive
            af proof also its ``ledger/`` and ``locks/``).
        proofs: af proof directory -> :class:`Proof`.
        next_rescan: ``time.monotonic()`` seconds of the next rescan.
        overlapped: an earlier spec covers part of this one (owners must be looked up).
        scan_error, problems: why the directory / sub-directories cannot be listed.
        reattach: the root's watch died: attach again even if the inode is the same.
        tree: a project tree whose walked directories are watched one by one
            (:class:`core.watch.tree.TreeWatcher`), never its skipped ones.
        listed: what the last full listing saw of the directory itself
            (:class:`Listed`), or ``None``: the next rescan lists it in full
            (docs/watching.md, "Rescans").
    """

    def __init__(self, spec: WatchSpec) -> None:
        self.spec = dataclasses.replace(  # every field kept (the policy's whole), normalised
            spec, recursive=bool(spec.recursive), patterns=list(spec.patterns),
            stale_after=float(spec.stale_after), polling=str(spec.polling or "auto"),
            format_stale_after=dict(spec.format_stale_after), skip=list(spec.skip),
            project=bool(spec.project))
        self.root = expand_path(spec.path)
        self.watch_root = self.root
        self.policy: StalePolicy = self.spec.policy
        self.match = _scan.name_matcher(self.spec.patterns)
        self.mode = "missing"
        self.message = ""
        self.attached = False
        self.root_id: tuple[int, int] | None = None
        self.watches: dict[str, Watch] = {}
        self.proofs: dict[str, Proof] = {}
        self.next_rescan = math.inf
        self.overlapped = False
        self.scan_error: str | None = None
        self.problems: list[str] = []
        self.reattach = False
        self.tree = False  # each walked directory watched on its own (core.watch.tree)
        self.listed: Listed | None = None

    @property
    def recursive(self) -> bool:
        """True when sub-directories are watched too."""
        return self.spec.recursive

    @property
    def key(self) -> SpecKey:
        """What makes two specs the same directory watched the same way."""
        s = self.spec
        return (self.root, s.recursive, tuple(s.patterns), s.polling, self.policy,
                tuple(s.skip), s.project)

    def in_scope(self, d: str) -> bool:
        """True when directory ``d`` is walked by this spec."""
        return dir_in_scope(self.spec, self.root, d)

    def overlaps(self, other: WatchedDir) -> bool:
        """True when the two directories share some sub-tree."""
        return self.root == other.root or self.in_scope(other.root) or other.in_scope(self.root)

    def status(self) -> DirStatus:
        """This directory's :class:`DirStatus` (listing problems appended to the message)."""
        if self.attached and self.scan_error:
            return DirStatus(self.root, "error", self.scan_error)
        message = self.message
        if self.attached and self.problems:
            n = len(self.problems)
            more = (f"{n} sub-directories cannot be listed, e.g. {self.problems[0]}" if n > 1
                    else self.problems[0])
            message = f"{message}; {more}" if message else more
        return DirStatus(self.root, self.mode, message)


