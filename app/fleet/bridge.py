"""The app's part of the fleet: with a ``[fleet]`` table in the configuration the app does what
``lockwarden agent`` does and reads what the other hosts publish, all in one worker thread with
its own connections -- the GUI thread never waits on the database (:class:`FleetBridge`).

Each turn (every ``[fleet] interval`` seconds, at once after a local change or a ``NOTIFY``
from another host) publishes this host's locks (:class:`core.fleet.store.Publisher`), reads
every host's reports (:func:`core.fleet.store.read_snapshot`, :mod:`core.fleet.hosts`),
re-judges this host's rows of locks recorded on another host
(:func:`core.fleet.judge.judge_with_fleet`, through
:attr:`app.bridges.watch_bridge.WatchBridge.judge`) and puts the other hosts' locks in the table
(:mod:`app.table.fleet_rows`). A database that is down, slow or refuses is a problem
(:attr:`FleetBridge.problemsChanged`); nothing is lost. Every publication, read and wait ends
within the fleet's deadline (``[fleet] deadline``, :class:`core.fleet.link.Link`), and
:meth:`FleetBridge.close` cuts the one under way, so the worker stops at once whatever the
database does. Rules: docs/fleet.md, "The app";
docs/gui.md, "Fleet". Nothing of the fleet (nor psycopg) is imported until a ``[fleet]`` table
is configured.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal

from app.bridges.watch_bridge import WatchBridge
from app.table.fleet_rows import (
    Safety,
    action_safety,
    fleet_key,
    fleet_origin,
    published_status,
    real_path,
)
from app.table.lockinfo import Update
from core.config import Config
from core.record import Liveness, LockStatus

if TYPE_CHECKING:
    from core.config.model import FleetSpec
    from core.fleet.hosts import HostSummary
    from core.fleet.store import FleetSnapshot

WAIT_STEP_S = 0.25
"""Longest single wait of the worker, in seconds: how soon it sees a stop or a local change."""

STALL_S = 10.0
"""Seconds without an answer of the database to the worker -- a publication or a read that
came back, well or not -- (and at least three intervals) after which the database counts as
hung: a problem says so and the other hosts' reports are no longer
used. A server that stops answering on an open connection holds a client until the operating
system gives up on it (``statement_timeout`` is the server's own clock); this is the app's."""


def _same(a: LockStatus, b: LockStatus) -> bool:
    """Two verdicts a table shows alike (ticking reason parameters aside)."""
    return (a.state, a.liveness, a.record, a.error, [r.stable() for r in a.reasons]) == \
        (b.state, b.liveness, b.record, b.error, [r.stable() for r in b.reasons])


def _shown_of(path: str, rows: dict[str, dict[str, tuple[dict[str, Any], LockStatus]]]
              ) -> dict[str, LockStatus]:
    """The rows shown for the locks the hosts of ``rows`` publish at ``path``: one a lock,
    folded by :func:`core.fleet.shared.fold` (the verdict of the holder's host), a folded
    row with ``fleet_seen_by`` (docs/fleet.md, "Shared locks")."""
    from dataclasses import replace

    from core.codes import Code
    from core.fleet.shared import fold, lock_identity
    from core.reasons import Reason

    group = [(host, key, *by_key[key]) for host, by_key in rows.items()
             if (key := fleet_key(host, path)) in by_key]
    if len(group) < 2:
        return {key: st for _host, key, _v, st in group}

    def ident(g: tuple[str, str, dict[str, Any], LockStatus]) -> tuple[str, Any]:
        v = g[2]
        pid = v.get("pid")
        return g[0], lock_identity(
            path, v.get("format") if isinstance(v.get("format"), str) else None,
            v.get("host") if isinstance(v.get("host"), str) else None,
            pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
            v.get("timestamp"), v.get("holder") if isinstance(v.get("holder"), str) else None)

    out: dict[str, LockStatus] = {}
    for f in fold(group, ident):
        host, key, _v, st = f.item
        if f.folded:
            st = replace(st, reasons=(*st.reasons, Reason.of(
                Code.FLEET_SEEN_BY, hosts=", ".join(f.seen_by), judged_by=host)))
        out[key] = st
    return out


class FleetBridge(QObject):
    """Publishes and reads the fleet in a worker thread (module docstring).

    Attributes (GUI thread): ``hosts`` (the last :class:`core.fleet.hosts.HostSummary` list),
    ``hosts_current`` (False while the database cannot be read), ``problems`` (one line per
    failing part), ``active`` (a ``[fleet]`` table is configured), ``spec``.

    Signals (GUI thread):
        problemsChanged(list[str]): the fleet's problems (empty when all is well).
        hostsChanged(list[HostSummary]): the hosts' summaries after each read, or the last
            ones again (``hosts_current`` False) when the read failed.
    """

    problemsChanged = Signal(object)
    hostsChanged = Signal(object)
    _result = Signal(object)

    def __init__(self, inventory: WatchBridge, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._inventory = inventory
        self._gen = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._links: tuple[Any, ...] = ()  # the worker's publisher and reader (abort())
        self._snap: FleetSnapshot | None = None
        self._silent_after = 15.0
        self.spec: FleetSpec | None = None
        self.hosts: list[HostSummary] = []
        self.hosts_current = False
        self.problems: list[str] = []
        self._safety: dict[str, Safety] = {}
        self._shown: set[str] = set()  # fleet rows in the table (GUI thread's view)
        self._last_answer = time.monotonic()
        self._stalled = False
        inventory.judge = self.judged
        inventory.change_listeners.append(lambda _changes: self._wake.set())
        self._result.connect(self._apply)
        self._watchdog = QTimer(self)
        self._watchdog.setInterval(1000)
        self._watchdog.timeout.connect(self._check_stall)

    @property
    def active(self) -> bool:
        """True while a ``[fleet]`` table is configured."""
        return self.spec is not None

    # -- any thread ---------------------------------------------------------------------------

    def judged(self, st: LockStatus) -> LockStatus:
        """``st`` re-judged by the report of the host its record names, with the last snapshot
        read (:func:`core.fleet.judge.judge_with_fleet`); ``st`` itself without a current
        snapshot, for a lock this host can judge, and for a fleet row. Any thread."""
        snap = self._snap
        if snap is None or st.liveness is not Liveness.REMOTE or fleet_origin(st.path):
            return st
        from core.fleet.judge import judge_with_fleet

        return judge_with_fleet(st, snap, silent_after=self._silent_after)

    def safety(self, key: str) -> Safety | None:
        """Whether actions on the fleet row ``key`` are safe here (:func:`app.table.fleet_rows.
        action_safety`), or None when ``key`` is no fleet row (or not checked yet)."""
        return self._safety.get(key)

    # -- GUI thread ---------------------------------------------------------------------------

    def set_config(self, config: Config) -> None:
        """Follow ``config``'s ``[fleet]`` table: stop the old worker; without one, the fleet
        rows leave the table and nothing more is done."""
        self.close()
        spec = config.fleet
        self.spec = spec
        if spec is None:
            self.hosts, self.hosts_current = [], False
            self.hostsChanged.emit([])
            self._set_problems([])
            return
        self._silent_after = spec.silent_after
        self._last_answer = time.monotonic()
        self._stalled = False
        self._watchdog.start()
        self._stop, self._wake = threading.Event(), threading.Event()
        gen = self._gen
        from core.fleet.store import Publisher

        publisher, reader = Publisher(spec), self._reader(spec)
        self._links = (publisher, reader)
        self._thread = threading.Thread(target=self._run, args=(spec, self._stop, self._wake,
                                                                 gen, publisher, reader),
                                        name="lockwarden-fleet", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 2.0) -> None:
        """Stop the worker (it closes its connections; this host's rows stay and turn silent),
        take the fleet rows out of the table and judge this host's rows by the local rules
        again. Waits up to ``timeout`` s for the worker."""
        self._gen += 1
        self._watchdog.stop()
        self._stop.set()
        self._wake.set()
        for link in self._links:  # a publication or read under way ends at once
            link.abort()
        self._links = ()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
        had, self._snap = self._snap, None
        gone: list[Update] = [(key, None) for key in self._shown]
        self._shown.clear()
        self._safety.clear()
        w = self._inventory.watcher
        if had is not None and w is not None:  # rows judged by the fleet: by the local rules
            gone += [(st.path, st) for st in w.snapshot() if st.liveness is Liveness.REMOTE]
        if gone:
            self._inventory.push(gone)

    def _set_problems(self, problems: list[str]) -> None:
        if problems != self.problems:
            self.problems = problems
            self.problemsChanged.emit(list(problems))

    def _apply(self, result: tuple[int, list[HostSummary] | None, list[str],
                                   dict[str, Safety], set[str] | None]) -> None:
        gen, hosts, problems, safety, shown = result
        if gen != self._gen:  # a worker of an older configuration
            return
        self._stalled = False
        self._safety = safety
        if shown is not None:  # None: the same rows as before
            self._shown = shown
        self.hosts_current = hosts is not None
        if hosts is not None:
            self.hosts = hosts
        self.hostsChanged.emit(list(self.hosts))
        self._set_problems(problems)

    def _check_stall(self) -> None:
        """Each second: a worker whose database has not answered for :data:`STALL_S` (and
        three intervals) waits on a hung database: say so, and judge by the local rules."""
        spec = self.spec
        quiet = time.monotonic() - self._last_answer
        if spec is None or self._stalled or quiet <= max(STALL_S, 3 * spec.interval):
            return
        from core.config.servers import redact_url

        self._stalled = True
        self._snap = None  # no current report: the watcher's next updates by the local rules
        self.hosts_current = False
        self.hostsChanged.emit(list(self.hosts))
        self._set_problems([*self.problems, (
            f"fleet database {redact_url(spec.dsn)}: no answer for {quiet:.0f} s (slow or hung): "
            "the other hosts' reports are not used; the local table goes on unchanged")])

    # -- worker thread ------------------------------------------------------------------------

    def _run(self, spec: FleetSpec, stop: threading.Event, wake: threading.Event,
             gen: int, publisher: Any, reader: Any) -> None:
        from core.fleet.store import FleetError

        rows: dict[str, dict[str, tuple[dict[str, Any], LockStatus]]] = {}  # host: key: row
        shown_rows: dict[str, dict[str, LockStatus]] = {}  # path: key: row in the table
        safety: dict[str, Safety] = {}
        judged: dict[str, LockStatus] = {}
        need: set[str] | None = None  # hosts whose locks to read; None: every host
        heard: set[str] = set()  # NOTIFY payloads (hosts) heard while waiting
        try:
            while not stop.is_set():
                pub_problem: str | None = None
                w = self._inventory.watcher
                mine = w.snapshot() if w is not None else []  # one copy per turn
                if w is not None and self._inventory.initial_done:
                    try:
                        publisher.publish(mine)
                    except FleetError as exc:
                        pub_problem = str(exc)
                    except Exception as exc:  # a driver's own error: said, never a crash
                        pub_problem = f"fleet: {type(exc).__name__}: {exc}"
                    self._last_answer = time.monotonic()  # any thread reads it (a float)
                asked = need
                if not reader.connected:  # a new connection: NOTIFYs may have been missed
                    heard.clear()
                    asked = None
                try:
                    read = reader.run("read", lambda conn, asked=asked: self._read(
                        conn, spec, asked))
                    need = set()
                    read_problem = None
                except Exception as exc:  # FleetError; the reader reconnects next turn
                    read_problem = str(exc)
                    read, need = None, None
                self._last_answer = time.monotonic()
                if stop.is_set():
                    return
                self._snap = None if read is None else read[0]
                updates = self._rejudge(mine, judged)
                if read is not None and read[2] is not None:
                    updates += self._fleet_rows(w, read[2], asked, rows, safety, shown_rows)
                if updates:
                    self._inventory.push(updates)
                problems = self._problems(spec, pub_problem, read_problem)
                shown = ({k for by_key in shown_rows.values() for k in by_key}
                         if any(st is None or fleet_origin(path) for path, st in updates)
                         else None)
                try:
                    self._result.emit((gen, None if read is None else read[1], problems,
                                       dict(safety), shown))
                except RuntimeError:  # the app is gone
                    return
                notified = self._wait(reader, spec, stop, wake, heard)
                if notified is None or need is None:
                    need = None
                else:
                    need |= notified
        finally:
            publisher.close()
            reader.close()

    @staticmethod
    def _reader(spec: FleetSpec) -> Any:
        """The reader's :class:`core.fleet.link.Link`: its connections LISTEN. A NOTIFY that
        arrives while another query runs is kept by psycopg (3.2.4+) and given first by the
        next ``notifies()``."""
        from core.fleet.link import Link
        from core.fleet.schema import CHANNEL

        return Link(spec, name="lockwarden-fleet-read",
                    setup=lambda conn: conn.execute(f"LISTEN {CHANNEL}"))

    @staticmethod
    def _read(conn: Any, spec: FleetSpec, hosts: set[str] | None) -> tuple[Any, Any, Any]:
        """``(snapshot, host summaries, published locks)`` through ``conn``; the locks of
        ``hosts`` only (None: of every host; an empty set: none read, None returned)."""
        from core.config.servers import redact_url
        from core.fleet.hosts import host_summaries, published_locks
        from core.fleet.store import read_snapshot

        snap = read_snapshot(conn, where=redact_url(spec.dsn))
        summaries = host_summaries(conn, silent_after=spec.silent_after)
        published = None if hosts is not None and not hosts else published_locks(
            conn, except_host=spec.host, hosts=None if hosts is None else sorted(hosts))
        return snap, summaries, published

    def _rejudge(self, mine: list[LockStatus], judged: dict[str, LockStatus]) -> list[Update]:
        """This host's rows (``mine``, the watcher's inventory) whose record names another
        host, judged again with the snapshot just read (or by the local rules without one),
        where the verdict shown changes."""
        out: list[Update] = []
        now: dict[str, LockStatus] = {}
        for st in mine:
            if st.liveness is not Liveness.REMOTE:
                continue
            new = self.judged(st)
            now[st.path] = new
            old = judged.get(st.path)
            if old is None and new is st:
                continue  # never re-judged, still not: the table has it already
            if old is None or not _same(old, new):
                out.append((st.path, new))
        judged.clear()
        judged.update(now)
        return out

    @staticmethod
    def _fleet_rows(w: Any, published: list[Any], asked: set[str] | None,
                    rows: dict[str, dict[str, tuple[dict[str, Any], LockStatus]]],
                    safety: dict[str, Safety],
                    shown: dict[str, dict[str, LockStatus]]) -> list[Update]:
        """The published locks of the hosts ``asked`` (None: every host) as fleet rows, in
        ``rows`` (host: key: (verdict, status)); a lock several hosts publish is one row
        (:func:`core.fleet.shared.fold`, :func:`_shown_of`; ``shown``: path: key: the row in
        the table); only the rows shown that changed are updates. Those a watched directory
        of this host covers are this host's own rows already. Each new or changed row's
        actions' safety is checked here."""
        from core.verdicts.inspect import inspect

        seen: dict[str, set[str]] = {}
        touched: set[str] = set()  # paths whose published rows changed
        for pl in published:
            if w is not None and w.covers(pl.path):
                continue
            key = fleet_key(pl.host, pl.path)
            seen.setdefault(pl.host, set()).add(key)
            by_key = rows.setdefault(pl.host, {})
            old = by_key.get(key)
            if old is not None and old[0] == pl.verdict:
                continue
            st = published_status(pl.host, pl.path, pl.verdict)
            by_key[key] = (pl.verdict, st)
            touched.add(real_path(key))  # as its key gives it back (a leading "/")
            try:  # the same engine reads the file here, if there is one
                here = inspect(pl.path) if os.path.lexists(pl.path) else None
            except Exception:  # unreadable here: no action from here
                here = None
            safety[key] = action_safety(pl.host, pl.path, st, here)
        for host in list(rows) if asked is None else sorted(asked & set(rows)):
            keep = seen.get(host, set())
            for key in [k for k in rows[host] if k not in keep]:
                del rows[host][key]
                safety.pop(key, None)
                touched.add(real_path(key))
            if not rows[host]:
                del rows[host]
        out: list[Update] = []
        for path in sorted(touched):
            now = _shown_of(path, rows)
            was = shown.pop(path, {})
            out += [(key, None) for key in was if key not in now]
            out += [(key, st) for key, st in now.items()
                    if key not in was or not _same(was[key], st)]
            if now:
                shown[path] = now
        return out

    @staticmethod
    def _problems(spec: FleetSpec, pub: str | None, read: str | None) -> list[str]:
        every = f"tried again every {spec.interval:g} s; the local table goes on unchanged"
        if pub and read and pub == read:
            return [f"{pub}: not publishing as {spec.host} and not using the other hosts' "
                    f"reports; {every}"]
        out = []
        if pub:
            out.append(f"{pub}: not publishing as {spec.host}; {every}")
        if read:
            out.append(f"{read}: the other hosts' reports and locks are not current; {every}")
        return out

    @staticmethod
    def _wait(reader: Any, spec: FleetSpec, stop: threading.Event, wake: threading.Event,
              heard: set[str]) -> set[str] | None:
        """Wait for the next turn: the interval, a local change (``wake``), a stop, or a
        ``NOTIFY`` from another host (its payload, the host, is added to ``heard``).
        Returns the hosts that notified (read their locks again), or None when the connection
        broke (read everything after reconnecting)."""
        deadline = time.monotonic() + spec.interval
        while not stop.is_set() and not wake.is_set() and not heard - {spec.host}:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not reader.connected:
                wake.wait(min(left, WAIT_STEP_S))
                continue
            step = min(left, WAIT_STEP_S)
            try:
                heard.update(reader.run("wait", lambda conn, step=step: [
                    n.payload for n in conn.notifies(timeout=step, stop_after=1)],
                    seconds=step + spec.deadline))
            except Exception:  # a broken connection: the next read says so and reconnects
                heard.clear()
                return None
        wake.clear()
        notified = heard - {spec.host}
        heard.clear()
        return notified
