"""Bridge between :class:`core.watch.watcher.Watcher` (its own threads) and the GUI thread.

The watcher calls ``on_change``/``on_dirs`` from its threads. Those callbacks only append to a
locked buffer and emit a Qt signal of :class:`WatchBridge`, a QObject living in the GUI thread;
Qt queues the signal to the GUI thread, where :meth:`WatchBridge._drain` merges everything that
arrived meanwhile (latest status per path wins) and hands one batch to the model, at most once
every :data:`PAINT_MS` (the first change at once, later ones gathered until the interval ends:
qutebrowser's ``misc/throttle.py``). The core's change stream is not throttled (docs/watching.md,
"Latency"): painting is the GUI's business, so a burst of 1,000 change sets costs a few model
updates, not 1,000. A big batch (a first scan of 100,000 locks) goes to the model in chunks
sized to a time budget (:data:`CHUNK_BUDGET_S`), one per event-loop turn.
``QTimer.singleShot`` is never used from the watcher thread: it would silently never fire
(docs/DESIGN.md "Watching").
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from itertools import islice

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.table.lockinfo import Update
from core.config import WatchSpec
from core.record import LockStatus
from core.verdicts.inspect import inspect
from core.watch.watcher import BUSY_GAP, LIVENESS_INTERVAL, ChangeSet, DirStatus, Watcher

KEPT_CHECK_MS = 3000
"""Kept paths (locks this app holds) outside every watched directory are re-inspected this
often (ms): the watcher does not see them, and someone may still remove them."""

PAINT_MS = 50
"""Longest wait, in milliseconds, before changes that arrive right after a batch are handed to
the model (they are gathered meanwhile)."""

CHUNK_BUDGET_S = 0.008
"""Time one chunk of a big batch may take in the GUI thread, in seconds: a first scan of
100,000 locks reaches the model in chunks, one per event-loop turn, each sized from the cost per
update of the one before (between :data:`MIN_CHUNK` and :data:`MAX_CHUNK` updates), so that
the window repaints and its timers run between two chunks (docs/performance.md "GUI under
load")."""

FIRST_CHUNK = 500
"""Updates in the first chunk, before any was timed."""
MIN_CHUNK = 50
"""Fewest updates per chunk (a slow machine still fills in a bounded number of turns)."""
MAX_CHUNK = 5000
"""Most updates per chunk."""


class WatchBridge(QObject):
    """Owns the watcher and delivers its results in the GUI thread.

    Args:
        parent: Qt parent.
        clock: seconds (default ``time.perf_counter``), timing each chunk of a big batch
            (:data:`CHUNK_BUDGET_S`).

    Signals (all emitted in the GUI thread):
        updated(list[tuple[str, LockStatus | None]]): merged lock updates, ``None`` = gone;
            a big batch (a first scan) in chunks, one per event-loop turn, each taking about
            :data:`CHUNK_BUDGET_S` in its slots.
        dirsChanged(list[core.watch.watcher.DirStatus]): watched directories and their mode.
        ready(): the first scan's inventory has been delivered (after its last
            :attr:`updated`); :attr:`initial_done` is then True. Changes before it are what
            was there at start, not events (the tray does not notify about them).

    ``_wake`` is the cross-thread signal: emitted from any thread, delivered queued.
    """

    updated = Signal(object)
    dirsChanged = Signal(object)
    ready = Signal()
    _wake = Signal()

    def __init__(self, parent: QObject | None = None, *,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        super().__init__(parent)
        self._clock = clock  # seconds, times the chunks of a big batch (tests pass their own)
        self._lock = threading.Lock()
        self._specs_lock = threading.Lock()
        self._specs_gen = 0
        self._pending: dict[str, LockStatus | None] = {}
        self._pending_dirs: list[DirStatus] | None = None
        self._pending_ready = False
        self.initial_done = False
        self._signalled = False
        self._watcher: Watcher | None = None
        self.dirs: list[DirStatus] = []
        """The watched directories and their mode, as last reported (GUI thread)."""
        self._big_batch = False
        self._chunk = FIRST_CHUNK  # updates in the next chunk of a big batch
        self._chunk_timer = QTimer(self)  # the next chunk: a zero timer, not a posted call,
        self._chunk_timer.setSingleShot(True)  # so that due timers run between two chunks
        self._chunk_timer.setInterval(0)
        self._chunk_timer.timeout.connect(self._drain)
        self.rescan_interval = 30.0  # seconds between rescans ([ui] rescan_interval)
        self.liveness_interval = LIVENESS_INTERVAL
        """Seconds between two liveness passes of the watchers started from now on: the holders
        no pidfd follows are checked that often (docs/watching.md, "Holders' exits")."""
        self.kept: Callable[[], list[str]] = list
        """Paths that stay listed whatever the watched directories (the app connects the
        locks it holds and those it kept at its last quit,
        :meth:`app.bridges.lock_actions.LockActions.kept_paths`). Thread-safe callable."""
        self._wake.connect(self._on_wake)
        self._last_drain = 0.0
        self._paint_timer = QTimer(self)
        self._paint_timer.setSingleShot(True)
        self._paint_timer.timeout.connect(self._drain)
        self._kept_timer = QTimer(self)
        self._kept_timer.setInterval(KEPT_CHECK_MS)
        self._kept_timer.timeout.connect(self.check_kept)
        self.change_listeners: list[Callable[[ChangeSet], None]] = []
        """Also called with each change set, on the watcher's thread, before the GUI gets
        it (the history recorder, :mod:`app.history.recorder`). Must only queue."""
        self.start_listeners: list[Callable[[list[LockStatus], list[str]], None]] = []
        """Called once per started watcher with its first inventory and the watched
        directories, on a worker thread."""
        self.judge: Callable[[LockStatus], LockStatus] | None = None
        """Applied to every status :meth:`push` queues, in the pushing thread (the fleet's
        re-judging of locks recorded on other hosts, :mod:`app.fleet.bridge`). Thread-safe."""

    # -- called from any thread ---------------------------------------------------------------

    def push(self, updates: Iterable[Update], *, dirs: Sequence[DirStatus] | None = None
             ) -> None:
        """Queue lock updates from any thread (the watcher's callback path); with ``dirs``,
        the directories' statuses too, delivered in the same batch and before the updates
        (:attr:`dirsChanged` first)."""
        judge = self.judge
        if judge is not None:
            updates = [(path, st if st is None else judge(st)) for path, st in updates]
        with self._lock:
            if dirs is not None:
                self._pending_dirs = list(dirs)
            for path, st in updates:
                self._pending[path] = st
            signal = not self._signalled
            self._signalled = True
        if signal:
            self._emit_wake()

    def push_changeset(self, changes: ChangeSet) -> None:
        """``on_change`` callback for :class:`core.watch.watcher.Watcher` (its thread): queue the
        changes, a removed lock as ``None``.

        A removed path that is :attr:`kept` (a lock this app holds) is re-inspected instead:
        the watcher also reports removed the entries of a directory it stops watching
        (Settings), which says nothing about the file. The engine's inspection decides
        whether it is gone (docs/gui.md "Watched directories and the locks the app holds").

        Removals come with the directories' statuses of that moment, in the same batch: when a
        watched directory vanishes its locks are removed, and the GUI must know that the
        directory went (one notice for it), not take each lock for released."""
        for listener in self.change_listeners:
            listener(changes)
        kept = set(self.kept()) if changes.removed else set()
        recheck = [s.path for s in changes.removed if s.path in kept]
        ups: list[Update] = [(s.path, None) for s in changes.removed if s.path not in kept]
        ups += [(s.path, s) for s in changes.added]
        ups += [(s.path, s) for s in changes.changed]
        dirs: list[DirStatus] | None = None
        w = self._watcher
        if changes.removed and w is not None:
            try:
                dirs = w.dir_status()
            except RuntimeError:  # closed meanwhile
                dirs = None
        if ups or dirs is not None:
            self.push(ups, dirs=dirs)
        if recheck:
            self.inspect_paths(recheck)

    def inspect_paths(self, paths: Sequence[str]) -> None:
        """Inspect ``paths`` with the engine (:func:`core.verdicts.inspect.inspect`) in this thread
        and queue the results (``None`` when free). Any thread; blocks on file I/O. A path that
        cannot be inspected is left as it is (the next check heals it)."""
        ups: list[Update] = []
        for path in paths:
            try:
                st = inspect(path)
            except Exception as exc:  # never crash a watcher thread
                print(f"lockwarden: cannot re-inspect {path}: {exc}", flush=True)
                continue
            ups.append((path, st if st.present else None))
        if ups:
            self.push(ups)

    def check_kept(self) -> None:
        """Re-inspect, in a worker thread, the kept paths no watched directory covers (GUI
        thread; every :data:`KEPT_CHECK_MS`)."""
        w = self._watcher
        paths = [p for p in self.kept() if w is None or not w.covers(p)]
        if paths:
            threading.Thread(target=lambda: self.inspect_paths(paths),
                             name="lockwarden-kept", daemon=True).start()

    def push_initial(self, statuses: Iterable[LockStatus]) -> None:
        """Queue the first scan's result; once it is delivered :attr:`initial_done` is True and
        :attr:`ready` is emitted. Any thread."""
        self.push((s.path, s) for s in statuses)
        with self._lock:
            self._pending_ready = True
            signal = not self._signalled
            self._signalled = True
        if signal:
            self._emit_wake()

    def push_dirs(self, dirs: Sequence[DirStatus]) -> None:
        """``on_dirs`` callback for :class:`core.watch.watcher.Watcher`: queue directory
        statuses."""
        with self._lock:
            self._pending_dirs = list(dirs)
            signal = not self._signalled
            self._signalled = True
        if signal:
            self._emit_wake()

    def _emit_wake(self) -> None:
        try:
            self._wake.emit()
        except RuntimeError:  # the app was torn down while a watcher thread still reported
            pass

    # -- GUI thread ---------------------------------------------------------------------------

    @Slot()
    def _on_wake(self) -> None:
        """Changes arrived: drain now, or when :data:`PAINT_MS` since the last batch ends."""
        wait_ms = PAINT_MS - (time.monotonic() - self._last_drain) * 1000
        if wait_ms <= 0:
            self._drain()
        elif not self._paint_timer.isActive():
            self._paint_timer.start(int(wait_ms) + 1)

    @Slot()
    def _drain(self) -> None:
        self._last_drain = time.monotonic()
        more = False
        with self._lock:
            if len(self._pending) > self._chunk:  # the oldest paths, without copying the rest
                rest = self._pending
                pending = {path: rest.pop(path) for path in list(islice(rest, self._chunk))}
                more = True
            else:
                pending, self._pending = self._pending, {}
                self._signalled = False
            dirs, self._pending_dirs = self._pending_dirs, None
            now_ready = self._pending_ready and not more
            if now_ready:
                self._pending_ready = False
        if more:
            # A big inventory is arriving: move what arrived out of the cyclic GC's
            # generations at once, so that no collection walks it while the rest lands
            # (gen-2 collections took 75 ms in the middle of 100,000 locks). Statuses hold no
            # reference cycles; refcounting still frees them.
            self._big_batch = True
            gc.freeze()
        elif self._big_batch:
            # The big inventory's last chunk: frozen like the others, so that full
            # collections (70+ ms with 10,000 locks) stop stalling the GUI. No collection
            # first: with 100,000 locks that alone stalled the window for ~300 ms.
            self._big_batch = False
            gc.freeze()
        if dirs is not None:
            self.dirs = dirs
            self.dirsChanged.emit(dirs)
        if pending:
            started = self._clock()
            self.updated.emit(list(pending.items()))
            if more:  # size the next chunk to the budget, from this one's cost per update
                per_update = max(self._clock() - started, 1e-9) / len(pending)
                self._chunk = max(MIN_CHUNK, min(MAX_CHUNK, int(CHUNK_BUDGET_S / per_update)))
        if more:
            # The rest on the next turns, after what this chunk started: timers are run in the
            # order they fall due, so a timer started by the chunk's work (the view's delayed
            # layout) and any timer already due run before the next chunk; a posted call would
            # run two chunks back to back first.
            self._chunk_timer.start()
        if now_ready and not self.initial_done:
            self.initial_done = True
            self.ready.emit()

    def flush(self) -> None:
        """Deliver everything queued now (GUI thread; used after an action and in tests)."""
        self._drain()
        while True:
            with self._lock:
                if not self._pending:
                    return
            self._drain()

    def start(self, specs: Sequence[WatchSpec]) -> None:
        """Start a :class:`core.watch.watcher.Watcher` on ``specs``.

        ``Watcher.start`` runs the initial scan and a psutil pass, so it is called from a
        worker thread, never the GUI thread; its inventory and directory modes then arrive
        through :attr:`updated` and :attr:`dirsChanged`. A missing directory is reported as a
        ``DirStatus`` with mode ``missing``, not an error."""
        self.close()
        self._kept_timer.start()
        w = Watcher(list(specs), self.push_changeset, on_dirs=self.push_dirs,
                    rescan_interval=self.rescan_interval,
                    liveness_interval=self.liveness_interval, busy_gap=BUSY_GAP)  # idle tray
        self._watcher = w

        def run() -> None:
            try:
                w.start()
                if self._watcher is not w:  # closed or replaced meanwhile
                    return
                initial = w.snapshot()
                for listener in self.start_listeners:
                    listener(initial, [s.expanded_path for s in specs])
                # the kept locks no watched directory covers are listed from the start
                self.inspect_paths([p for p in self.kept() if not w.covers(p)])
                self.push_initial(initial)
                self.push_dirs(w.dir_status())
            except RuntimeError:  # closed before it started, or the app is gone
                return

        threading.Thread(target=run, name="lockwarden-watcher-start", daemon=True).start()

    @property
    def watcher(self) -> Watcher | None:
        """The running :class:`core.watch.watcher.Watcher`, or ``None``."""
        return self._watcher

    def set_specs(self, specs: Sequence[WatchSpec]) -> None:
        """Change the watched directories without restart (``Watcher.set_specs``).

        ``Watcher.set_specs`` scans the new directories and ``dir_status`` may wait on a
        network filesystem, so both run in a worker thread (one change at a time; when changes
        pile up, only the last one asked is applied); the results arrive through
        :attr:`updated` and :attr:`dirsChanged`."""
        w = self._watcher
        if w is None:
            self.start(specs)
            return
        new_specs = list(specs)

        self._specs_gen += 1
        gen = self._specs_gen

        def run() -> None:
            with self._specs_lock:
                if self._watcher is not w or gen != self._specs_gen:
                    return  # closed or replaced meanwhile, or a newer change follows
                try:
                    w.set_specs(new_specs)
                    self.push_dirs(w.dir_status())
                except RuntimeError:  # closed meanwhile, or the app is gone
                    return

        threading.Thread(target=run, name="lockwarden-set-specs", daemon=True).start()

    def rescan(self) -> None:
        """Ask the watcher for a full rescan in a worker thread (results arrive via
        :attr:`updated`)."""
        w = self._watcher
        if w is not None:
            threading.Thread(target=w.rescan, name="lockwarden-rescan", daemon=True).start()

    def refresh_path(self, path: str) -> None:
        """Re-read one lock path at once (after an action of ours). In a watched directory the
        watcher re-reads it (:meth:`core.watch.watcher.Watcher.refresh`), so the table and the
        watcher never disagree about a lock that lived shorter than the watcher's debounce;
        elsewhere the path is inspected here and the result queued. Blocks on file I/O: call it from
        a worker thread. Raises ``OSError`` from the inspection."""
        w = self._watcher
        if w is not None and w.covers(path) and w.refresh([path]):
            return
        st: LockStatus = inspect(path)
        self.push([(path, st if st.present else None)])

    def reinspect(self, path: str) -> None:
        """Re-read ``path`` in a worker thread (:meth:`refresh_path`), after an operation of
        ours changed it; the result arrives through :attr:`updated` like the watcher's (whose
        own event then changes nothing). A failure is printed, never raised: the watcher's
        rescans heal it."""

        def work() -> None:
            try:
                self.refresh_path(path)
            except Exception as exc:  # the watcher heals it; never crash here
                print(f"lockwarden: cannot re-inspect {path}: {exc}", flush=True)

        threading.Thread(target=work, name="lockwarden-inspect", daemon=True).start()

    def close(self) -> None:
        """Stop the watcher (<= 1 s)."""
        self._kept_timer.stop()
        w, self._watcher = self._watcher, None
        if w is not None:
            w.close()
