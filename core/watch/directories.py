"""The watched directories and what the watcher does to them (docs/DESIGN.md, "Watching";
docs/watching.md, "Live updates").

:class:`Directories` holds one :class:`WatchedDir` per :class:`core.config.WatchSpec` and the
:class:`core.watch.inventory.Inventory` of their locks. It attaches a directory when it appears
(watching it through :class:`core.watch.sources.Sources`), detaches it when it vanishes,
rescans it (re-reading only files whose ``lstat`` identity changed), re-reads single paths,
replays af ledgers, and re-judges entries (:mod:`core.watch.rejudge` re-judges them when
their holder's process changed or a deadline passed). It decides nothing about *when*:
:class:`core.watch.watcher.Watcher` (its thread, queue, debounce and timers) calls it, holding
the watcher's lock. Reads files and clocks; starts no
thread of its own.
"""

from __future__ import annotations

import logging
import math
import os
import stat
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from core.config import WatchSpec
from core.watch import quiet as _quiet
from core.watch import scan as _scan
from core.watch.exits import ExitFollower
from core.watch.inventory import Entry, Inventory, file_sig
from core.watch.processes import DIRECT_LOOKUPS, take_snapshot
from core.watch.rounds import RoundViews
from core.watch.sources import EventHandler, Sources, Watch, fallback_message, unschedule
from core.watch.watched_dir import DirStatus, Proof, SpecKey, WatchedDir

__all__ = ["DIRECT_LOOKUPS", "DirStatus", "Directories", "WatchedDir", "take_snapshot"]

if TYPE_CHECKING:
    from core.verdicts.liveness import ProcessSnapshot

log = logging.getLogger("core.watch.watcher")  # one logger for everything the watcher does

_APPEARS = "does not exist; it will be watched when it appears"

PROJECT_POLL_INTERVAL = 5.0
"""Seconds between rescans of a project tree that is polled (a network file system, or no
inotify left): watchdog's polling observer would snapshot the skipped directories too, so
the tree's own walk (:func:`core.watch.scan.list_dir`) is repeated instead (docs/watching.md,
"Projects")."""

_UNWATCHED = " (for sub-directories not watched)"
"""The end of a project tree's message while some of its directories could not be watched."""

REWALK_DELAY = 0.05
"""Seconds after which a project tree is walked again when a rescan started watching a new
sub-directory: files created in it before its watch existed are found then."""


def _ignore_exit(pid: int, handle: int) -> None:
    """The default ``post_exit``: nobody listens."""


def _blank(read: _scan.FileRead) -> bool:
    """True when the file read was empty or only whitespace: only such a file needs the
    kernel's view (:meth:`RoundViews.kernel_view`)."""
    return read.data is not None and not read.data.strip()


class Directories(RoundViews):
    """The watched directories and their inventory (see the module docstring).

    Args:
        emit: where :class:`core.watch.sources.EventHandler` sends hints (watchdog threads).
        on_detach: called with a directory when it is detached (its debounced paths must be
            forgotten).
        rescan_interval: seconds between two rescans of a directory (> 0).
        tree_watch_limit: the most directories of project trees watched with inotify
            (default: :func:`core.watch.tree.default_limit`, half the user's watches); beyond
            it a tree is walked every 5 s.
        busy_gap: seconds (:data:`core.watch.tree.BUSY_GAP`; 0: never wait).
        post_exit: where a followed holder's exit is sent (``(pid, handle)``, from the
            reader's thread: :class:`core.watch.exits.ExitFollower`).
        every_s: the liveness pass's interval (seconds), said in the statuses of holders it
            checks; ``exit_budget``: the most holder processes followed by the kernel.
    """

    def __init__(self, emit: Callable[[WatchedDir, str, bool, bool], None],
                 on_detach: Callable[[WatchedDir], None], *, rescan_interval: float,
                 tree_watch_limit: int | None = None, busy_gap: float = 0.0,
                 post_exit: Callable[[int, int], None] | None = None, every_s: float = 2.0,
                 exit_budget: int | None = None) -> None:
        self.dirs: list[WatchedDir] = []
        super().__init__(Inventory())
        self.sources = Sources(tree_watch_limit=tree_watch_limit, busy_gap=busy_gap)
        self.exits = ExitFollower(post_exit or _ignore_exit, self.sources.tree,
                                  every_s=every_s, budget=exit_budget)
        self.exited: set[int] = set()  # PIDs whose exit came after self.procs was taken
        self.dirty = True  # a directory's mode, message or error may have changed
        self.skipped = 0  # rescans that skipped an unchanged directory's listing (core.watch.quiet)
        self.rescan_interval = rescan_interval
        self._emit = emit
        self._on_detach = on_detach

    def statuses(self) -> list[DirStatus]:
        """One :class:`DirStatus` per directory, in spec order."""
        return [d.status() for d in self.dirs]

    def covers(self, path: str) -> bool:
        """True when an attached directory's spec covers ``path`` (absolute)."""
        return any(d.attached and _scan.covers(d.spec, path, d.root) for d in self.dirs)

    # -- entries ----------------------------------------------------------------------------

    def owner(self, path: str, hint: WatchedDir | None) -> WatchedDir | None:
        """The directory whose entry ``path`` is: ``hint`` when it is the only candidate,
        else the first attached directory covering it; ``None`` when none does."""
        if hint is not None and not hint.overlapped and hint in self.dirs:
            return hint if _scan.covers(hint.spec, path, hint.root) else None
        for d in self.dirs:
            if d.attached and _scan.covers(d.spec, path, d.root):
                return d
        return None

    def _put(self, path: str, entry: Entry) -> None:
        self.inventory.put(path, entry, now_ts=time.time(), procs=self.procs)

    def refresh_path(self, path: str, hint: WatchedDir | None,
                     st: os.stat_result | None = None, have_stat: bool = False, *,
                     procs: ProcessSnapshot | None) -> None:
        """Read ``path`` again and judge it (``st``: its ``lstat`` when ``have_stat``); a path
        that vanished or that no directory covers is dropped."""
        d = self.owner(path, hint)
        if d is None:
            old = self.inventory.get(path)
            if old is not None:
                self.inventory.drop(old.owner, path)
            return
        self.refresh_in(d, path, st, have_stat, procs=procs)

    def refresh_in(self, d: WatchedDir, path: str, st: os.stat_result | None = None,
                   have_stat: bool = False, *, regular: bool = False,
                   procs: ProcessSnapshot | None, now: datetime | None = None) -> None:
        """:meth:`refresh_path` of a path ``d`` owns (its rescan listed it). Without
        ``have_stat`` the file's identity is the read's own ``fstat``
        (:func:`core.watch.scan.read_with_stat`: no ``lstat`` of a file about to be read);
        ``regular``: the listing called it a regular file (no ``lstat`` before the read);
        ``now``: the moment of the verdict (aware UTC; default now: a rescan judges its files
        at one moment)."""
        if have_stat:
            read = _scan.read_entry(path, regular=regular)
        else:
            read, st = _scan.read_with_stat(path, regular=regular)
        if read is None:
            old = self.inventory.get(path)
            if old is not None:
                self.inventory.drop(old.owner, path)
            return
        status = _scan.judge_read(read, policy=d.policy, procs=procs,
                                  now=now or datetime.now(UTC),
                                  kernel=self.kernel_view() if _blank(read) else None)
        self._put(path, Entry(status, d, d.policy, read, file_sig(st)))
        parent = os.path.dirname(path)
        if os.path.basename(parent) == _scan.CLAIMS_DIR:
            proof = os.path.dirname(parent)
            if proof in d.proofs:
                self.refresh_proof(d, proof, force=False)

    def rejudge(self, path: str, e: Entry, procs: ProcessSnapshot | None) -> None:
        """Judge an entry again from the bytes already read (no file I/O)."""
        now = datetime.now(UTC)
        procs = self._whole(procs)
        rec = e.status.record
        if procs is not None and ((rec is not None and rec.pid is not None
                                   and rec.pid not in procs)
                                  or self.inventory.pid_of(path) in self.exited):
            procs = None  # not in the snapshot, or exited since: look the PID up now
        if e.read is not None:
            status = _scan.judge_read(e.read, policy=e.policy, procs=procs, now=now,
                                      kernel=self.kernel_view() if _blank(e.read) else None)
        elif rec is not None:
            status = _scan.judge_claim(rec, policy=e.policy, procs=procs, now=now)
        else:
            return
        self._put(path, Entry(status, e.owner, e.policy, e.read, e.sig))

    def refresh_proof(self, d: WatchedDir, proof: str, *, force: bool) -> None:
        """Replay ``proof``'s ledger when it changed (always when ``force``) and update its
        claims, leaving out those a claim lock file shows
        (:func:`core.watch.scan.dedupe_claims`)."""
        ps = d.proofs.get(proof)
        if ps is None:
            ps = d.proofs[proof] = Proof()
        sig = _scan.ledger_signature(proof)
        if force or not ps.replayed or ps.sig != sig:
            ps.records = _scan.replay_claims(proof)
            ps.sig = sig
            ps.replayed = True
        now = datetime.now(UTC)
        procs = self._whole(self.procs)
        claims = [_scan.judge_claim(r, policy=d.policy, procs=procs, now=now)
                  for r in ps.records]
        files = self.inventory.statuses_in(d, os.path.join(proof, _scan.CLAIMS_DIR))
        claims = _scan.dedupe_claims(claims, files, proof)
        ps.paths = self.inventory.put_claims(d, d.policy, ps.paths, claims,
                                             now_ts=time.time(), procs=self.procs)

    def _drop_proof(self, d: WatchedDir, proof: str) -> None:
        ps = d.proofs.pop(proof, None)
        if ps is not None:
            for p in ps.paths:
                self.inventory.drop(d, p)

    # -- directories ------------------------------------------------------------------------

    def apply_specs(self, specs: list[WatchSpec]) -> None:
        """Watch ``specs``: directories whose spec is unchanged keep their entries and
        watches (and are rescanned), others are detached (entries removed), new ones
        attached."""
        self.sources.forget_mounts()
        pool: dict[SpecKey, list[WatchedDir]] = {}
        for d in self.dirs:
            pool.setdefault(d.key, []).append(d)
        new: list[WatchedDir] = []
        fresh: list[WatchedDir] = []
        for spec in specs:
            cand = WatchedDir(spec)
            reuse = pool.get(cand.key)
            if reuse:
                new.append(reuse.pop(0))
            else:
                new.append(cand)
                fresh.append(cand)
        for leftovers in pool.values():
            for d in leftovers:
                self.detach(d, "missing", "no longer watched")
        self.dirs = new
        self.dirty = True
        for i, d in enumerate(new):
            d.overlapped = any(d.overlaps(e) for e in new[:i])
            d.listed = None  # entries of a spec dropped may now be another's: list in full
        for d in new:
            if d in fresh:
                self.check_dir(d)
            elif d.attached:
                self.rescan_dir(d)

    def check_dir(self, d: WatchedDir) -> None:
        """Attach a directory that appeared, detach one that vanished, re-attach one that was
        replaced (its device/inode changed)."""
        try:
            st = os.stat(d.root)
        except (OSError, ValueError):  # ValueError: a NUL in the path
            st = None
        if st is None or not stat.S_ISDIR(st.st_mode):
            if d.attached or d.mode != "missing":
                what = "is not a directory" if st is not None else "does not exist"
                self.detach(d, "missing", f"{what}; it will be watched when it appears")
            elif not d.message:
                d.message = _APPEARS
                self.dirty = True
            return
        ident = (st.st_dev, st.st_ino)
        if d.attached and d.root_id == ident and not d.reattach:
            return
        if d.attached:
            self.detach(d, "missing", "was replaced")
        d.reattach = False
        try:
            self._attach(d, ident)
        except Exception as exc:  # one odd directory must not stop the others
            log.exception("lockwarden watcher: cannot watch %s", d.root)
            d.attached = True
            d.mode, d.message = "error", f"cannot be watched: {exc}"
            d.next_rescan = time.monotonic() + self.rescan_interval
            self.dirty = True

    def retry(self, d: WatchedDir) -> None:
        """Try again to watch a directory in ``error`` mode whose watch could not be set."""
        self.detach(d, "error", d.message)
        self.check_dir(d)

    def _schedule(self, d: WatchedDir, path: str, *, polling: bool) -> Watch:
        return self.sources.schedule(EventHandler(d, self._emit), path,
                                     recursive=d.spec.recursive if path == d.root else False,
                                     polling=polling)

    def _attach(self, d: WatchedDir, ident: tuple[int, int]) -> None:
        d.root_id = ident
        d.watch_root = os.path.realpath(d.root)
        tree_poll = (f"the tree walked every {PROJECT_POLL_INTERVAL:g} s" if d.spec.project
                     else None)
        mode, message = self.sources.choose_mode(d.root, d.spec.polling, instead=tree_poll)
        d.watches = {}
        d.attached = True
        d.tree = False
        if mode == "events" and d.spec.project:
            try:
                watch = self.sources.schedule_dir(EventHandler(d, self._emit), d.root,
                                                  follow=True)
            except OSError as exc:
                if isinstance(exc, FileNotFoundError | NotADirectoryError):
                    self.detach(d, "missing", _APPEARS)
                    return
                mode, message = "polling", fallback_message(exc, instead=tree_poll)
            else:
                if watch is not None:
                    d.watches[d.root], d.tree = watch, True
        if mode == "events" and not d.tree:
            try:
                d.watches[d.root] = self._schedule(d, d.root, polling=False)
            except OSError as exc:
                if isinstance(exc, FileNotFoundError | NotADirectoryError):
                    self.detach(d, "missing", _APPEARS)
                    return
                if d.spec.polling == "off":
                    mode = "error"
                    message = (f"file-system events unavailable ({exc.strerror or exc}) and "
                               'polling = "off" in the settings')
                else:
                    mode = "polling"
                    message = fallback_message(exc, instead=tree_poll)
        if mode == "polling" and not d.spec.project:  # a polled tree is only re-walked
            try:
                d.watches[d.root] = self._schedule(d, d.root, polling=True)
            except OSError as exc:
                if isinstance(exc, FileNotFoundError | NotADirectoryError):
                    self.detach(d, "missing", _APPEARS)
                    return
                mode = "error"
                message = f"cannot be watched: {exc.strerror or exc}"
        d.mode, d.message = mode, message
        self.dirty = True
        self.rescan_dir(d)

    def detach(self, d: WatchedDir, mode: str, message: str) -> None:
        """Stop watching ``d``, report its entries removed, set its ``mode``/``message``."""
        for watch in d.watches.values():
            unschedule(watch)
        d.watches = {}
        d.attached = False
        d.listed = None
        d.root_id = None
        d.mode, d.message = mode, message
        self.dirty = True
        d.next_rescan = math.inf
        self.inventory.drop_all(d)
        d.proofs.clear()
        self._on_detach(d)

    def rescan_all(self, *, force: bool) -> None:
        """Check every directory that is not attached; rescan every one that is."""
        for d in self.dirs:
            if not d.attached:
                self.check_dir(d)
            else:
                self.rescan_dir(d, force=force)

    def rescan_dir(self, d: WatchedDir, *, force: bool = False) -> None:
        """List ``d`` and re-read the files whose ``lstat`` identity changed (every file when
        ``force``), drop those gone, replay its af ledgers; schedule the next rescan. Without
        ``force``, a directory unchanged since its last full listing is not listed
        (:func:`core.watch.quiet.unchanged`; docs/watching.md, "Rescans")."""
        polled_tree = d.spec.project and d.mode == "polling"
        now_m = time.monotonic()
        d.next_rescan = now_m + (min(self.rescan_interval, PROJECT_POLL_INTERVAL)
                                 if polled_tree else self.rescan_interval)
        if not d.attached:
            return
        inventory = self.inventory
        if not force and _quiet.unchanged(d, inventory, now_m):
            self.skipped += 1
            return
        d.listed = None
        mark = _quiet.listed_mark(d)  # before the listing: a change during it is seen next time
        try:  # lstat only the files known: a new one is read anyway (its fstat is its identity)
            listing = _scan.list_dir(d.spec, with_stat=inventory.__contains__)
        except (FileNotFoundError, NotADirectoryError):
            self.detach(d, "missing", _APPEARS)
            return
        except OSError as exc:
            d.scan_error = f"cannot be listed: {exc.strerror or exc}"
            self.dirty = True
            self.inventory.drop_all(d)
            d.proofs.clear()
            return
        if d.tree:
            self._sync_tree(d, listing.dirs)
        if d.scan_error is not None or d.problems != listing.problems:
            d.scan_error = None
            d.problems = listing.problems
            self.dirty = True
        seen: set[str] = set()
        todo: list[tuple[str, os.stat_result | None]] = []
        for path, st in listing.files.items():
            if d.overlapped and self.owner(path, None) is not d:
                continue
            seen.add(path)
            if not force and st is not None and inventory.is_current(path, d, file_sig(st)):
                continue
            todo.append((path, st))
        procs = self.procs_for_reads(len(todo))
        regular = listing.regular
        listing.files.clear()  # not kept while the files are read
        now = datetime.now(UTC)
        for path, st in todo:
            self.refresh_in(d, path, st, st is not None, regular=path in regular, procs=procs,
                            now=now)
        claim_paths: set[str] = set()
        for ps in d.proofs.values():
            claim_paths |= ps.paths
        inventory.drop_unlisted(d, seen, claim_paths)
        for proof in list(d.proofs):
            if proof not in listing.proofs:
                self._drop_proof(d, proof)
        for proof in listing.proofs:
            self.refresh_proof(d, proof, force=force)
        if not d.spec.recursive and d.root in listing.proofs:
            self._watch_proof_parts(d)
        d.listed = mark if mark is not None and not d.proofs else None

    def _sync_tree(self, d: WatchedDir, dirs: list[str]) -> None:
        """Watch each directory of project tree ``d`` the walk reached, stop watching those it
        no longer reaches; a directory watched only now is listed again soon, so a file made in
        it before its watch existed is not missed until the next rescan."""
        wanted = set(dirs)
        tree = self.sources.tree_obs
        for path in [p for p in d.watches if p not in wanted]:
            gone = d.watches.pop(path)
            if tree is not None:
                tree.unschedule(gone.handle, path)  # not if the watch moved to a new path
        added = False
        for path in dirs:
            old = d.watches.get(path)
            if old is not None:
                if tree is None or tree.current(old.handle, path):
                    continue
                # deleted or moved away and made again at this path: a new directory
                del d.watches[path]
                tree.unschedule(old.handle, path)
            try:
                watch = self.sources.schedule_dir(EventHandler(d, self._emit), path,
                                                  follow=path == d.root)
            except OSError as exc:
                if not isinstance(exc, FileNotFoundError | NotADirectoryError):
                    d.message = fallback_message(
                        exc, instead=f"the tree walked every {PROJECT_POLL_INTERVAL:g} s"
                    ) + _UNWATCHED
                    self.dirty = True
                    d.next_rescan = time.monotonic() + PROJECT_POLL_INTERVAL
                    return
                continue
            if watch is not None:
                d.watches[path] = watch
                added = added or path != d.root
        if added:
            d.next_rescan = min(d.next_rescan, time.monotonic() + REWALK_DELAY)
        if d.message.endswith(_UNWATCHED):  # every directory walked is watched again
            d.message = ""
            self.dirty = True

    def _watch_proof_parts(self, d: WatchedDir) -> None:
        """A non-recursive watch of a proof directory also watches its ``ledger/`` and
        ``locks/`` sub-directories (ledger events and claim locks live there)."""
        polling = d.mode == "polling"
        for sub in (_scan.LEDGER_DIR, _scan.CLAIMS_DIR):
            path = os.path.join(d.root, sub)
            if path in d.watches or not os.path.isdir(path):
                continue
            try:
                d.watches[path] = self._schedule(d, path, polling=polling)
            except OSError:
                pass  # the periodic rescan still sees it
