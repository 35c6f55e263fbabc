"""Locks on servers in the same table as lock files (docs/remote.md, "In the app"): the
configured PostgreSQL, Redis and etcd sources (``[[postgres]]``, ``[[redis]]``, ``[[etcd]]``;
:func:`core.remote.sources.sources_from_config`) are polled in a worker thread, never in the GUI
thread, and their verdicts go to the inventory like a watcher's (paths are the locks' URLs).

Each source is polled every :data:`POLL_S` seconds, and again at the earliest expiry among its
locks (our own expiry clock: a server's "expired" events can be late). A source opted in to
its change feed (Redis ``notifications = true``: :meth:`core.remote.base.RemoteSource.follow`)
is followed in its own thread and polled at once on each change. One that fails (unreachable, wrong
password, missing privilege) is retried with a doubling delay up to :data:`MAX_BACKOFF_S`, and
its problem is shown in the status line (:attr:`RemotePoller.problemsChanged`) while the rest of
the app keeps working. A release or force release of a server lock goes to its source, checked
against the token the user saw (:meth:`RemotePoller.release`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal

from app.bridges.watch_bridge import WatchBridge
from core.config import Config
from core.record import LockStatus

if TYPE_CHECKING:  # the backends are imported only when servers are configured
    from core.remote.base import RemoteSource

POLL_S = 5.0
"""Seconds between two polls of a working source (a server has no change feed we use yet)."""
MAX_BACKOFF_S = 60.0
"""Longest delay, in seconds, before a failing source is tried again."""


class RemotePoller(QObject):
    """Polls the configured lock servers and feeds the inventory (module docstring).

    Signals: ``problemsChanged(list[str])``: one line per source that failed its last poll or
    whose configuration could not be used (empty when all is well)."""

    problemsChanged = Signal(object)
    _polled = Signal(object)
    _changed = Signal(str)
    _feedFailed = Signal(str, str)

    def __init__(self, inventory: WatchBridge, parent: QObject | None = None, *,
                 poll_s: float = POLL_S) -> None:
        """``poll_s``: seconds between two polls of a working source."""
        super().__init__(parent)
        self._inventory = inventory
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._sources: list[RemoteSource] = []
        self._seen: dict[str, set[str]] = {}
        self._due: dict[str, float] = {}
        self._delay: dict[str, float] = {}
        self._failing: dict[str, str] = {}
        self._feed_failing: dict[str, str] = {}
        self._config_problems: list[str] = []
        self._busy = False
        self._again = False
        self.problems: list[str] = []
        self.poll_listeners: list[Callable[[list[LockStatus], list[str]], None]] = []
        """Called in the GUI thread after each successful poll of a source with its locks and
        the URLs of those gone since the last poll (the history recorder,
        :mod:`app.history_setup`). Not called when polling stops."""
        self._timer = QTimer(self)
        self._timer.setInterval(500)
        self._timer.timeout.connect(self.poll)
        self._polled.connect(self._apply)
        self._changed.connect(self._on_change)
        self._feedFailed.connect(self._on_feed_failed)

    @property
    def sources(self) -> Sequence[RemoteSource]:
        """The current :class:`core.remote.base.RemoteSource` objects."""
        return tuple(self._sources)

    def set_config(self, config: Config) -> None:
        """Use the servers of ``config`` (GUI thread): the old sources' rows go, the new ones
        are polled at once. Without servers nothing is imported or polled."""
        self.close()
        self._failing.clear()
        self._feed_failing.clear()
        if not config.servers:
            self._config_problems = []
            self._emit_problems()
            return
        from core.remote.sources import sources_from_config

        sources, problems = sources_from_config(config)
        self._sources = list(sources)
        self._config_problems = problems
        now = time.monotonic()
        self._stop = threading.Event()
        for s in sources:
            self._due[s.base_url] = now
            self._delay[s.base_url] = self._poll_s
            if s.notifications:
                self._follow(s, self._stop)
        self._emit_problems()
        self._timer.start()
        self.poll()

    def _follow(self, source: RemoteSource, stop: threading.Event) -> None:
        """Follow ``source``'s change feed in a daemon thread until ``stop``; a broken feed is
        a problem in the status line and is set up again after the backoff delay."""
        def run() -> None:
            delay = self._poll_s
            while not stop.is_set():
                try:
                    if not source.follow(stop, lambda: self._changed.emit(source.base_url)):
                        return
                    delay = self._poll_s
                except RuntimeError:  # the app is gone
                    return
                except Exception as exc:  # RemoteError, or a driver's own: said, retried
                    if stop.is_set():
                        return
                    self._feedFailed.emit(source.base_url,
                                          f"{source.describe()}: change feed: {exc}")
                    stop.wait(delay)
                    delay = min(MAX_BACKOFF_S, delay * 2)

        threading.Thread(target=run, name=f"lockwarden-feed {source.base_url}",
                         daemon=True).start()

    def _on_feed_failed(self, base: str, problem: str) -> None:
        """``base``'s change feed broke: a problem in the status line until it works again."""
        self._feed_failing[base] = problem
        self._emit_problems()

    def _on_change(self, base: str) -> None:
        """``base``'s change feed said a lock key changed: poll it now."""
        if self._feed_failing.pop(base, None) is not None:
            self._emit_problems()
        if base in self._due:
            self._due[base] = 0.0
            self.poll()

    def poll(self) -> None:
        """Poll the sources that are due, in a worker thread (one at a time)."""
        if self._busy or not self._sources:
            if self._busy:
                self._again = True
            return
        now = time.monotonic()
        due = [s for s in self._sources if self._due.get(s.base_url, 0.0) <= now]
        if not due:
            return
        self._busy = True

        def work() -> None:
            from core.remote.base import RemoteError

            results: list[tuple[str, list[LockStatus] | None, str | None]] = []
            for s in due:
                try:
                    results.append((s.base_url, list(s.list_locks()), None))
                except RemoteError as exc:
                    results.append((s.base_url, None, f"{s.describe()}: {exc}"))
                except Exception as exc:  # a driver's own error: shown, never a crash
                    results.append((s.base_url, None, f"{s.base_url}: {type(exc).__name__}: {exc}"))
            try:
                self._polled.emit(results)
            except RuntimeError:  # the app is gone
                pass

        threading.Thread(target=work, name="lockwarden-remote-poll", daemon=True).start()

    def _apply(self, results: list[tuple[str, list[LockStatus] | None, str | None]]) -> None:
        self._busy = False
        again, self._again = self._again, False
        now = time.monotonic()
        for base, statuses, problem in results:
            if base not in self._due:  # a source of an older configuration
                continue
            if statuses is None:
                self._failing[base] = problem or base
                self._delay[base] = min(MAX_BACKOFF_S,
                                        self._delay.get(base, self._poll_s) * 2)
                self._due[base] = now + self._delay[base]
                continue
            self._failing.pop(base, None)
            self._delay[base] = self._poll_s
            self._due[base] = now + min([self._poll_s, *_until_expiry(statuses)])
            paths = {st.path for st in statuses}
            gone = self._seen.get(base, set()) - paths
            self._seen[base] = paths
            self._inventory.push([*((st.path, st) for st in statuses), *((p, None) for p in gone)])
            for listener in self.poll_listeners:
                listener(statuses, sorted(gone))
        self._emit_problems()
        if again:  # a change arrived while this poll ran
            self.poll()

    def _emit_problems(self) -> None:
        problems = [*self._config_problems, *self._failing.values(),
                    *self._feed_failing.values()]
        if problems != self.problems:
            self.problems = problems
            self.problemsChanged.emit(list(problems))

    def source_of(self, path: str) -> RemoteSource | None:
        """The source whose lock ``path`` (a URL) is, or None."""
        for s in self._sources:
            if path.startswith(s.base_url + "#"):
                return s
        return None

    def release(self, path: str, token: str, *, force: bool, reason: str | None) -> None:
        """Release the server lock ``path`` while it still carries ``token`` (any thread; blocks
        on the network); the source audits it.

        Raises:
            LockError: :class:`core.remote.base.RemoteError` (``changed``, ``refused``,
                ``permission_denied``, connection kinds) or no source for ``path``.
        """
        from core.errors import LockError

        source = self.source_of(path)
        if source is None:
            raise LockError(f"{path}: no configured server holds this lock any more")
        source.release(path, token, force=force, reason=reason)
        self._changed.emit(source.base_url)  # look again at once (GUI thread; if still ours)

    def close(self) -> None:
        """Stop polling and following; the sources' rows leave the table; connections are
        closed."""
        self._timer.stop()
        self._stop.set()
        stale = [p for paths in self._seen.values() for p in paths]
        if stale:
            self._inventory.push([(p, None) for p in stale])
        sources, self._sources = self._sources, []
        self._seen.clear()
        self._due.clear()
        self._delay.clear()
        for s in sources:
            try:
                s.close()
            except Exception:  # closing a broken connection: nothing to do
                pass


def _until_expiry(statuses: list[LockStatus]) -> list[float]:
    """Seconds until each lock's expiry that lies ahead (plus 50 ms: the server deletes the key
    at its deadline), for the poller's own expiry clock."""
    now = time.time()
    out = []
    for st in statuses:
        exp = st.record.effective_expiry() if st.record is not None else None
        if exp is not None and exp.timestamp() > now:
            out.append(exp.timestamp() - now + 0.05)
    return out
