"""The fleet part of ``lockwarden watch`` (docs/fleet.md, "Watching"; docs/cli.md): with
``[fleet]`` in the configuration, a lock whose record names another host is shown as that
host's report judges it (:func:`core.fleet.judge.judge_with_fleet`), and follows the reports
as they change.

:class:`FleetFollower` sits between the watcher and the printer: every change set of the
watcher is re-judged with the last fleet snapshot before it is printed, and its own thread
LISTENs on the publishers' channel (:data:`core.fleet.schema.CHANNEL`): after each NOTIFY,
and at every heartbeat interval (a host turns silent by time passing), it reads the reports
again and prints a ``changed`` line for each lock of another host whose verdict (state,
liveness or reason codes) moved. The database failing is one ``fleet`` line (``--json``:
``{"event": "fleet", "state": "unavailable", "message": ...}``) and the locks of other hosts
are judged locally again (as for a silent host) until it is back (``"state": "ok"``): the
local monitor never waits for it. Every read and wait on the database ends within the fleet's
deadline (:class:`core.fleet.link.Link`), and :meth:`FleetFollower.abort` (a signal handler
may call it) ends one under way at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from core.record import Liveness, LockStatus
from core.watch.inventory import ChangeSet

if TYPE_CHECKING:
    from core.config.model import FleetSpec
    from core.fleet.store import FleetSnapshot

Key = tuple[str, str, tuple[str, ...]]


def _key(s: LockStatus) -> Key:
    """What makes two verdicts of a lock different for the reader: state, liveness and the
    reason codes (never their text, nor ticking parameters such as an age)."""
    return (s.state.value, s.liveness.value, tuple(r.code.value for r in s.reasons))


class FleetFollower:
    """Re-judges the watcher's locks of other hosts by the fleet (see the module docstring).

    Args:
        spec: the ``[fleet]`` table.
        inventory: the watcher's current verdicts (:meth:`core.watch.watcher.Watcher.snapshot`).
        emit: prints (and records) a change set; called with this object's lock held, from
            the watcher's thread or this object's thread.
        note: prints a ``fleet`` line: ``(state, message)`` with state ``unavailable`` or
            ``ok``.
    """

    def __init__(self, spec: FleetSpec, inventory: Callable[[], list[LockStatus]],
                 emit: Callable[[ChangeSet], None], note: Callable[[str, str], None]) -> None:
        self.spec = spec
        self._inventory = inventory
        self._emit = emit
        self._note = note
        self._lock = threading.Lock()
        self._snap: FleetSnapshot | None = None
        self._shown: dict[str, Key] = {}
        self._problem: str | None = None
        self._link = _listening_link(spec)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pending: list[tuple[str, str]] | None = []  # notes held until the inventory

    # -- judging ---------------------------------------------------------------------------

    def judge(self, s: LockStatus) -> LockStatus:
        """``s`` as the last fleet snapshot judges it (``s`` itself without one)."""
        if self._snap is None or s.liveness is not Liveness.REMOTE:
            return s
        from core.fleet.judge import judge_with_fleet

        return judge_with_fleet(s, self._snap, silent_after=self.spec.silent_after)

    def prime(self) -> None:
        """Connect before the watcher starts (a database that does not answer costs at most
        its connect timeout, 5 s, and one ``fleet`` line)."""
        self._refresh([])

    def initial(self, statuses: list[LockStatus]) -> list[LockStatus]:
        """The inventory to print first, judged by the reports on its locks of other hosts
        (read now when :meth:`prime` connected). Takes no lock: it runs while the printer's
        lock is held, which the watcher's thread may be waiting for with this object's
        lock."""
        if self._link.connected:
            self._refresh(statuses)
        out = [self.judge(s) for s in statuses]
        for s in out:
            self._shown.setdefault(s.path, _key(s))
        return out

    def on_change(self, changes: ChangeSet) -> None:
        """The watcher's change set, re-judged, to ``emit``."""
        with self._lock:
            judged = ChangeSet([self.judge(s) for s in changes.added],
                               [self.judge(s) for s in changes.changed], list(changes.removed))
            for s in (*judged.added, *judged.changed):
                self._shown[s.path] = _key(s)
            for s in judged.removed:
                self._shown.pop(s.path, None)
            self._emit(judged)

    def _rejudge(self) -> None:
        """Print what the current snapshot changes in the inventory's locks of other hosts."""
        with self._lock:
            changed = []
            for s in self._inventory():
                if s.liveness is not Liveness.REMOTE:
                    continue
                judged = self.judge(s)
                key = _key(judged)
                if self._shown.get(s.path) not in (None, key):
                    changed.append(judged)
                self._shown[s.path] = key
            if changed:
                self._emit(ChangeSet(changed=sorted(changed, key=lambda s: s.path)))

    # -- the database ----------------------------------------------------------------------

    def _refresh(self, statuses: list[LockStatus] | None = None) -> bool:
        """Read the hosts' heartbeats and their reports on the PIDs that ``statuses`` (default:
        the inventory) name on other hosts -- not every PID of the fleet -- connecting and
        LISTENing first when needed, within the fleet's deadline; on failure say so once and
        judge locally. Returns whether the database answered."""
        from core.config.servers import redact_url
        from core.fleet.store import FleetError, read_snapshot

        pids = {s.record.pid for s in (self._inventory() if statuses is None else statuses)
                if s.liveness is Liveness.REMOTE and s.record is not None
                and s.record.pid is not None}
        where = redact_url(self.spec.dsn)
        try:
            snap = self._link.run("read", lambda conn: read_snapshot(conn, pids=pids,
                                                                     where=where))
        except FleetError as exc:
            if exc.kind == "stopped":
                return False
            message = str(exc)
            self._snap = None  # one reference: the judging threads see the old or the new
            if self._problem is None:
                self._say("unavailable", f"{message.strip().splitlines()[0]}; other hosts' "
                           "locks judged locally")
            self._problem = message
            return False
        self._snap = snap
        if self._problem is not None:
            self._problem = None
            self._say("ok", f"fleet database {where} is back: other hosts' "
                       "locks judged by their reports")
        return True

    def _say(self, state: str, message: str) -> None:
        if self._pending is not None:
            self._pending.append((state, message))
        else:
            self._note(state, message)

    def start(self) -> None:
        """Say what :meth:`prime` found (after the inventory), then follow the reports on a
        thread of its own until :meth:`close`."""
        pending, self._pending = self._pending or [], None
        for state, message in pending:
            self._note(state, message)
        self._thread = threading.Thread(target=self._run, name="lockwarden-fleet-watch",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        tick = min(self.spec.interval, 1.0)  # also how soon close() is noticed
        while not self._stop.is_set():
            answered = self._refresh()
            self._rejudge()  # by the reports, or locally again while the database is away
            if not answered:
                self._stop.wait(self.spec.interval)
                continue
            deadline = time.monotonic() + self.spec.interval
            try:  # a NOTIFY, or the interval: silence is time passing
                while not self._stop.is_set() and time.monotonic() < deadline:
                    if self._link.run("wait", _notified(tick), seconds=tick + self.spec.deadline):
                        break
            except Exception:  # FleetError: the next _refresh says so, reconnects
                pass

    def abort(self) -> None:
        """End the database operation under way at once, and every later one: the program is
        stopping. Takes no lock: safe in a signal handler."""
        self._link.abort()

    def close(self) -> None:
        """Stop following and close the connection (within about a second, whatever the
        database does)."""
        self._stop.set()
        self._link.abort()
        if self._thread is not None:
            self._thread.join(1.0)
        self._link.close()


def _notified(tick: float) -> Callable[[Any], bool]:
    """An operation of :meth:`core.fleet.link.Link.run`: whether a NOTIFY arrives within
    ``tick`` seconds."""
    def wait(conn: Any) -> bool:
        return any(True for _n in conn.notifies(timeout=tick, stop_after=1))
    return wait


def _listening_link(spec: FleetSpec) -> Any:
    """A :class:`core.fleet.link.Link` whose connections LISTEN on the publishers' channel."""
    from core.fleet.link import Link
    from core.fleet.schema import CHANNEL

    return Link(spec, name="lockwarden-fleet-watch",
                setup=lambda conn: conn.execute(f"LISTEN {CHANNEL}"))
