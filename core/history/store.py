"""The observation store: one SQLite database per user,
``platformdirs.user_data_dir("lockwarden")/history.sqlite3``, looked up like the audit log's
per-user files (:mod:`core.audit.model`: from ``XDG_*`` and ``HOME``).

:class:`HistoryStore` writes one row per transition (WAL mode, ``synchronous=NORMAL``; two
recorders never write the same one twice), migrates an older file up to
:data:`SCHEMA_VERSION` in place (:data:`MIGRATIONS`), and prunes by age and size
(:meth:`HistoryStore.prune`). Rules: docs/history.md, "The store". Failures (read-only
directory, disk full, a corrupt or foreign file, a newer schema) raise
:class:`core.history.model.HistoryUnavailable` with the reason in words.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from core.history.model import (
    ACTION_EVENTS,
    SKIPPED_STATES,
    HistoryUnavailable,
    Observation,
    Transition,
    action_event,
    chain_key,
    event_between,
    holder_key,
)

DB_NAME = "history.sqlite3"
"""File name of the store inside the user's data directory."""

SCHEMA_VERSION = 1
"""The schema this code writes (``PRAGMA user_version``)."""

BUSY_TIMEOUT_MS = 5000
"""How long a write waits for another recorder's transaction, in milliseconds."""

AuditLookup = Callable[[str, float, str], "tuple[str, str] | None"]
"""``(lock, t, event) -> (audit entry digest, operation)`` of Lockwarden's action on ``lock``
that caused ``event`` seen at ``t`` (Unix s), or ``None``."""

_TIME_SQL = "strftime('%Y-%m-%dT%H:%M:%fZ', t, 'unixepoch')"

TEXT_LINE_SQL = (
    f"{_TIME_SQL} || '  ' || substr(state || '          ', 1, 10) || ' ' || "
    "substr(event || '              ', 1, 14) || ' ' || "
    "coalesce(nullif(trim(coalesce(holder || ' ', '') || coalesce('pid ' || pid || ' ', '') || "
    "coalesce('(' || process || ') ', '') || coalesce('on ' || host, '')), ''), '-') || "
    "coalesce('  tag ''' || tag || '''', '') || "
    "CASE WHEN reasons != '' THEN '  [' || reasons || ']' ELSE '' END")
"""``lockwarden history``'s text line of a row, built by SQLite (docs/cli.md, "``history``
and ``stats``"): ``TIME  STATE  EVENT  HOLDER [tag '…'] [reason codes]``."""

JSON_LINE_SQL = (
    "json_object('id', transitions.id, 'lock', locks.lock, 't', round(t, 3), "
    f"'time', {_TIME_SQL}, 'state', state, 'event', event, 'holder', holder, 'pid', pid, "
    "'process', process, 'host', host, 'tag', tag, 'reasons', CASE WHEN reasons = '' THEN "
    "json('[]') ELSE json('[\"' || replace(reasons, ',', '\",\"') || '\"]') END, "
    "'audit_id', audit_id)")
"""``lockwarden history --json``'s object of a row (the keys of
:meth:`core.history.model.Transition.to_dict`, and ``id``), built by SQLite."""


_V1 = f"""
CREATE TABLE locks (
    id INTEGER PRIMARY KEY,
    lock TEXT NOT NULL UNIQUE
);
CREATE TABLE transitions (
    id INTEGER PRIMARY KEY,
    lock_id INTEGER NOT NULL REFERENCES locks(id),
    t REAL NOT NULL,
    state TEXT NOT NULL,
    event TEXT NOT NULL,
    holder TEXT,
    pid INTEGER,
    process TEXT,
    host TEXT,
    tag TEXT,
    reasons TEXT NOT NULL DEFAULT '',
    audit_id TEXT,
    ident TEXT NOT NULL DEFAULT '',
    chain TEXT NOT NULL,
    line TEXT GENERATED ALWAYS AS ({TEXT_LINE_SQL}) STORED,
    UNIQUE (lock_id, chain)
);
CREATE INDEX transitions_lock_t ON transitions (lock_id, t);
"""

MIGRATIONS: tuple[str, ...] = (_V1,)
"""``MIGRATIONS[n]`` brings a file from ``user_version`` n to n + 1 (SQL run in one
transaction); the last one ends at :data:`SCHEMA_VERSION`."""

_COLUMNS = ("transitions.id, locks.lock, t, state, event, holder, pid, process, host, tag, "
            "reasons, audit_id")


def default_path() -> str:
    """``platformdirs.user_data_dir("lockwarden")/history.sqlite3``, looked up once per
    environment (``XDG_DATA_HOME``, ``HOME``)."""
    return _default_path(os.environ.get("XDG_DATA_HOME"), os.environ.get("HOME"))


@functools.lru_cache(maxsize=8)
def _default_path(_xdg_data_home: str | None, _home: str | None) -> str:
    import platformdirs

    return os.path.join(platformdirs.user_data_dir("lockwarden"), DB_NAME)


def explain(exc: BaseException, path: str) -> str:
    """Plain words for an error met on the store at ``path`` (sqlite3's result codes)."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary == sqlite3.SQLITE_FULL:
        return f"the disk holding {path} is full"
    if primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM) or (
            isinstance(exc, PermissionError)):
        return f"{path} cannot be written (read-only file or directory)"
    if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return (f"{path} is damaged or not a history database; move it away to start a new "
                "history")
    if primary == sqlite3.SQLITE_CANTOPEN:
        return f"{path} cannot be opened (its directory is missing or read-only)"
    if isinstance(exc, OSError):
        from core.fsutil import os_reason

        return f"{path}: {os_reason(exc)}"
    return f"{path}: {exc}"


def safe_text(text: str | None) -> str | None:
    """``text`` as SQLite can store it: an undecodable byte of a file name (a lone surrogate,
    Python's ``surrogateescape``) becomes ``\\xNN``. Lock paths are stored and looked up
    through this, so both sides agree."""
    if text is None:
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text


def _row(r: tuple[Any, ...]) -> Transition:
    reasons = str(r[10] or "")
    return Transition(
        id=int(r[0]), lock=str(r[1]), t=float(r[2]), state=str(r[3]), event=str(r[4]),
        holder=r[5], pid=r[6], process=r[7], host=r[8], tag=r[9],
        reasons=tuple(reasons.split(",")) if reasons else (), audit_id=r[11])


class HistoryStore:
    """One connection to the store (not thread-safe: one per thread).

    Args:
        path: the database file (default :func:`default_path`).
        readonly: open for reading only (``lockwarden history``): never creates or migrates.

    Raises (from the constructor and every method):
        HistoryUnavailable: the file cannot be created, opened, migrated, written or read;
            ``reason`` says why. For ``readonly``, also when there is no history yet.
    """

    def __init__(self, path: str | None = None, *, readonly: bool = False) -> None:
        self.path = os.path.abspath(path or default_path())
        self.readonly = readonly
        self._lock_ids: dict[str, int] = {}
        # each lock's last row as this connection wrote or read it: (t, state, ident, chain),
        # valid while no other connection committed (PRAGMA data_version unchanged)
        self._last: dict[int, tuple[float, str, str, str]] = {}
        self._data_version = -1
        try:
            self._db = self._connect()
        except (sqlite3.Error, OSError) as exc:
            raise HistoryUnavailable(explain(exc, self.path)) from exc

    def _connect(self) -> sqlite3.Connection:
        if self.readonly:
            if not os.path.exists(self.path):
                raise HistoryUnavailable(f"no history recorded yet ({self.path} does not exist)")
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, isolation_level=None,
                                 check_same_thread=False)
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                db.close()
                raise HistoryUnavailable(f"{self.path} was written by a newer Lockwarden "
                                         f"(schema {version}, this one reads {SCHEMA_VERSION})")
            return db
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        db = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000,
                             check_same_thread=False)
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if db.execute("PRAGMA user_version").fetchone()[0] == 0:
                db.execute("PRAGMA auto_vacuum = INCREMENTAL")  # before the first table
            mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise HistoryUnavailable(f"{self.path}: WAL mode unavailable ({mode})")
            db.execute("PRAGMA synchronous = NORMAL")
            self._migrate(db)
        except BaseException:
            db.close()
            raise
        return db

    def _migrate(self, db: sqlite3.Connection) -> None:
        """Bring the file to :data:`SCHEMA_VERSION` in place (one transaction)."""
        db.execute("BEGIN IMMEDIATE")
        try:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise HistoryUnavailable(
                    f"{self.path} was written by a newer Lockwarden (schema {version}, this "
                    f"one writes {SCHEMA_VERSION}); history is paused")
            for step in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[step].split(";"):
                    if statement.strip():
                        db.execute(statement)
            if version != SCHEMA_VERSION:
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._db.close()

    @contextmanager
    def _failures(self) -> Iterator[None]:
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            raise HistoryUnavailable(explain(exc, self.path)) from exc

    def _lock_id(self, lock: str) -> int:
        found = self._lock_ids.get(lock)
        if found is not None:
            return found
        self._db.execute("INSERT OR IGNORE INTO locks (lock) VALUES (?)", (lock,))
        row = self._db.execute("SELECT id FROM locks WHERE lock = ?", (lock,)).fetchone()
        self._lock_ids[lock] = int(row[0])
        return int(row[0])

    def record(self, observations: Iterable[Observation],
               audit: AuditLookup | None = None) -> list[Transition]:
        """Write the transitions among ``observations`` in one transaction and return them.

        An observation is skipped when its state is not recorded (``writing``), when it says
        the same as its lock's last row (state and holder: :func:`holder_key`; another
        recorder may have written it), when it is older than that row, or when it is ``free``
        for a lock never recorded. ``audit`` names Lockwarden's action behind a change
        (:data:`core.history.model.ACTION_EVENTS`), and the event becomes what that action
        makes of it (:func:`core.history.model.action_event`).

        Raises:
            HistoryUnavailable: the write failed (nothing of the batch was written).
        """
        written: list[Transition] = []
        with self._failures():
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                version = db.execute("PRAGMA data_version").fetchone()[0]
                if version != self._data_version:  # another recorder wrote: re-read last rows
                    self._last.clear()
                    self._data_version = version
                for obs in sorted(observations, key=lambda o: o.t):
                    if obs.state in SKIPPED_STATES:
                        continue
                    row = self._write_one(obs, audit)
                    if row is not None:
                        written.append(row)
                db.execute("COMMIT")
            except BaseException:
                self._last.clear()  # it may name rows that were not committed
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        return written

    def _write_one(self, obs: Observation, audit: AuditLookup | None) -> Transition | None:
        lock_id = self._lock_id(safe_text(obs.lock) or "")
        last = self._last.get(lock_id)
        if last is None:
            last = self._db.execute(
                "SELECT t, state, ident, chain FROM transitions WHERE lock_id = ? "
                "ORDER BY t DESC, id DESC LIMIT 1", (lock_id,)).fetchone()
        key = holder_key(obs.state, obs.ident)
        if last is None:
            if obs.state == "free":
                return None
            prev_state, prev_ident, prev_chain = None, None, ""
        else:
            prev_t, prev_state, prev_ident, prev_chain = last
            if holder_key(prev_state, prev_ident) == key or obs.t < prev_t:
                return None
        event = obs.event or event_between(prev_state, prev_ident, obs)
        audit_id = None
        if audit is not None and event in ACTION_EVENTS:
            found = audit(obs.lock, obs.t, event)
            if found is not None:
                audit_id, operation = found
                event = action_event(event, operation)
        chain = chain_key(prev_chain, key)
        cur = self._db.execute(
            "INSERT OR IGNORE INTO transitions (lock_id, t, state, event, holder, pid, "
            "process, host, tag, reasons, audit_id, ident, chain) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (lock_id, obs.t, obs.state, event, safe_text(obs.holder), obs.pid,
             safe_text(obs.process), safe_text(obs.host), safe_text(obs.tag),
             ",".join(obs.reasons), audit_id, obs.ident, chain))
        if cur.rowcount != 1:
            self._last.pop(lock_id, None)
            return None
        self._last[lock_id] = (obs.t, obs.state, obs.ident, chain)
        return Transition(id=int(cur.lastrowid or 0), lock=obs.lock, t=obs.t, state=obs.state,
                          event=event, holder=obs.holder, pid=obs.pid, process=obs.process,
                          host=obs.host, tag=obs.tag, reasons=obs.reasons, audit_id=audit_id)

    def annotate(self, row_id: int, audit_id: str, operation: str) -> None:
        """Name the audit entry behind row ``row_id`` when it was appended after the recorder
        wrote the row (the engine logs an action after the change is made); the event becomes
        what the action makes of it (:func:`core.history.model.action_event`).

        Raises:
            HistoryUnavailable: the file cannot be written.
        """
        with self._failures():
            row = self._db.execute("SELECT event FROM transitions WHERE id = ?",
                                   (row_id,)).fetchone()
            if row is None:
                return
            self._db.execute("UPDATE transitions SET audit_id = ?, event = ? WHERE id = ?",
                             (audit_id, action_event(str(row[0]), operation), row_id))

    def present(self, under: Iterable[str] = ()) -> dict[str, str]:
        """Locks whose last row is not ``free``, with that row's state: the locks a recorder
        starting now must find again (:meth:`core.history.recorder.Recorder.start`).
        ``under``: only locks in these directories (or trees); empty: all."""
        prefixes = [p.rstrip(os.sep) + os.sep for p in under]
        with self._failures():
            rows = self._db.execute(
                "SELECT locks.lock, tr.state FROM locks JOIN transitions tr ON tr.id = "
                "(SELECT id FROM transitions WHERE lock_id = locks.id "
                "ORDER BY t DESC, id DESC LIMIT 1) WHERE tr.state != 'free'").fetchall()
        return {str(lock): str(state) for lock, state in rows
                if not prefixes or any(str(lock).startswith(p) for p in prefixes)}

    def transitions(self, lock: str | None = None, *, under: str | None = None,
                    since: float | None = None, until: float | None = None) -> list[Transition]:
        """Rows oldest first: of one ``lock`` (path or URL), or of every lock whose path starts
        with directory ``under``, or all; only those seen at or after ``since`` and before
        ``until`` (Unix s)."""
        return [_row(r) for r in self.rows(lock, under=under, since=since, until=until)]

    def rows(self, lock: str | None = None, *, under: str | None = None,
             since: float | None = None, until: float | None = None) -> list[tuple[Any, ...]]:
        """As :meth:`transitions`, as plain tuples in the order of :class:`Transition`'s
        fields (``reasons`` comma-separated): for a caller that formats 100,000 rows."""
        where, args = self._where(lock, under, since, until)
        with self._failures():
            return self._db.execute(
                f"SELECT {_COLUMNS} FROM transitions JOIN locks ON locks.id = lock_id "
                f"WHERE {where} ORDER BY t, transitions.id", args).fetchall()

    def lines(self, lock: str | None = None, *, under: str | None = None,
              since: float | None = None, as_json: bool = False) -> list[str]:
        """As :meth:`transitions`, each row already formatted by SQLite: the text line
        (the stored column ``line``, :data:`TEXT_LINE_SQL`, computed once when the row is
        written; after the lock's path when ``under`` is given) or the JSON object
        (:data:`JSON_LINE_SQL`). For ``lockwarden history`` on 100,000 rows: Python only joins
        the strings."""
        where, args = self._where(lock, under, since, None)
        expr = JSON_LINE_SQL if as_json else (
            "locks.lock || '  ' || line" if under is not None else "line")
        with self._failures():
            return [r[0] for r in self._db.execute(
                f"SELECT {expr} FROM transitions JOIN locks ON locks.id = lock_id "
                f"WHERE {where} ORDER BY t, transitions.id", args)]

    def before(self, lock: str | None = None, *, under: str | None = None,
               at: float) -> list[Transition]:
        """Each lock's last row before ``at`` (Unix s): its state when a window starts."""
        where, args = self._where(lock, under, None, at)
        with self._failures():
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM transitions JOIN locks ON locks.id = lock_id "
                f"WHERE {where} AND transitions.id = (SELECT id FROM transitions t2 WHERE "
                "t2.lock_id = transitions.lock_id AND t2.t < ? ORDER BY t2.t DESC, t2.id DESC "
                "LIMIT 1) ORDER BY locks.lock", [*args, at]).fetchall()
        return [_row(r) for r in rows]

    @staticmethod
    def _where(lock: str | None, under: str | None, since: float | None,
               until: float | None) -> tuple[str, list[object]]:
        clauses: list[str] = ["1"]
        args: list[object] = []
        if lock is not None:
            clauses.append("locks.lock = ?")
            args.append(safe_text(lock))
        if under is not None:
            prefix = (safe_text(under) or "").rstrip(os.sep) + os.sep
            clauses.append("locks.lock >= ? AND locks.lock < ?")  # the index's range
            args += [prefix, prefix[:-1] + chr(ord(os.sep) + 1)]
        if since is not None:
            clauses.append("t >= ?")
            args.append(since)
        if until is not None:
            clauses.append("t < ?")
            args.append(until)
        return " AND ".join(clauses), args

    def count(self) -> int:
        """Number of rows."""
        with self._failures():
            return int(self._db.execute("SELECT count(*) FROM transitions").fetchone()[0])

    def size_bytes(self) -> int:
        """Bytes the rows use in the file (pages in use times the page size; not the WAL)."""
        with self._failures():
            pages = self._db.execute("PRAGMA page_count").fetchone()[0]
            free = self._db.execute("PRAGMA freelist_count").fetchone()[0]
            page = self._db.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * page)

    def prune(self, now: float, keep_s: float | None, max_bytes: int | None) -> int:
        """Drop rows seen before ``now - keep_s`` (Unix s), then the first written rows (a tenth
        at a time) while :meth:`size_bytes` exceeds ``max_bytes``; give the pages back to the file
        system. ``None`` disables either bound. Returns the number of rows dropped.

        Raises:
            HistoryUnavailable: the file cannot be written.
        """
        dropped = 0
        with self._failures():
            db = self._db
            if keep_s is not None:
                dropped += db.execute("DELETE FROM transitions WHERE t < ?",
                                      (now - keep_s,)).rowcount
            while max_bytes is not None and self.size_bytes() > max_bytes:
                n = max(1, self.count() // 10)
                gone = db.execute("DELETE FROM transitions WHERE id IN (SELECT id FROM "
                                  "transitions ORDER BY id LIMIT ?)", (n,)).rowcount
                dropped += gone
                db.execute("PRAGMA incremental_vacuum")
                if gone == 0:
                    break
            if dropped:
                db.execute("PRAGMA incremental_vacuum")
        return dropped
