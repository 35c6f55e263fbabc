"""Every host's published locks for ``lockwarden list --fleet`` (docs/fleet.md, "Bounds" and
"Trust"): cheap to import (no verdict machinery, psycopg only through the caller's connection),
cheap to run on 50 hosts x 1,000 locks, and never fooled by what one host published.

- :func:`read_locks_json` gathers the JSON array that ``list --fleet --json`` prints, from each
  trusted host's pre-encoded ``locks_json`` (:data:`core.fleet.schema.LOCKS_JSON`), fetched as
  raw bytes in one query, with the text of the host's fields replacing each placeholder
  (``bytes.replace``). A host whose rows its bound role did not write, or that publishes more
  than :data:`HOST_CAP_BYTES`, is one problem line and its part is never sent. The database vouches
  for each part while its trigger (schema 3) builds it from the verdicts its policies checked;
  when that trigger is missing or disabled, or the database is not UTF-8, each part is checked
  as it will be printed (:func:`check_host_json`) and a bad one is a problem line: the output
  is always valid JSON, and memory stays within the parts printed (each at most the cap).
- :func:`read_lock_rows` gives the columns of the human table, without the verdicts, with
  the same cap and trust.

Both show a lock several hosts publish (a shared directory) once, with the verdict of the
host its record names (:func:`core.fleet.shared.fold`; docs/fleet.md, "Shared locks").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from core.fleet.schema import BINDINGS, PLACEHOLDER

HOST_CAP_BYTES = 8 * 1024 * 1024
"""Most bytes of published locks taken from one host (its ``locks_json``; for the table, its
rows' text): about 16,000 verdicts. A host over it is one problem line, never read."""

STATES = frozenset({"free", "held", "stale", "expired", "writing", "unreadable"})
"""The states a published verdict may have (:class:`core.record.State`; not imported here:
``list --fleet`` imports no verdict machinery)."""

LIVENESS = frozenset({"alive", "dead", "reused", "remote", "unknown"})
"""The liveness values a published verdict may have (:class:`core.record.Liveness`)."""

# the silence bound of core.fleet.judge.silence_bound, in SQL: silent_after, and never less
# than three of the host's heartbeat intervals
_SILENT = "extract(epoch FROM now() - h.heartbeat_at) > greatest(%s, 3 * h.interval_s)"

_TRUST = ("CASE WHEN b.role IS NULL THEN 'no role is bound to this host name'"
          " WHEN b.role <> h.owner THEN 'its rows were written by role ' || quote_ident(h.owner)"
          " || ', not by ' || quote_ident(b.role) || ', the role bound to it'"
          " WHEN h.heartbeat_at > now() + interval '5 seconds'"
          " THEN 'its heartbeat is in the future' END")
"""SQL: why the host row ``h`` (joined to its binding ``b``) is not trusted, or NULL."""

_VOUCHED = (
    "(SELECT coalesce(bool_and(t.tgenabled IN ('O', 'A')), false) FROM pg_trigger t"
    " WHERE t.tgrelid = 'lockwarden_hosts'::regclass AND t.tgname = 'lockwarden_locks_json')"
    " AND current_setting('server_encoding') = 'UTF8'")
"""SQL: the database vouches for every ``locks_json``: the trigger of schema 3 builds it from
verdicts its policies checked (core.fleet.schema), and its text is UTF-8."""

_HOSTS_JSON = (  # each host: trust, size, its part (trusted and within the cap), and the
    # text that replaces its placeholders -- one query, one round trip
    "SELECT h.host, " + _TRUST + " AS why, octet_length(h.locks_json) AS size, " + _VOUCHED
    + ", CASE WHEN " + _TRUST + " IS NULL AND octet_length(h.locks_json) <= %s"
    " THEN h.locks_json END, format("
    "', \"host_published\": %%s, \"host_silent\": %%s, \"heartbeat_age_s\": %%s}',"
    " to_json(h.host), to_json(" + _SILENT + "),"
    " round(extract(epoch FROM now() - h.heartbeat_at)::numeric, 3))"
    f" FROM lockwarden_hosts h LEFT JOIN {BINDINGS} b ON b.host = h.host"
    " WHERE h.locks_json <> '' ORDER BY h.host COLLATE \"C\"")

REMOTE_MARK = b'"liveness": "remote"'
"""How a verdict with liveness ``remote`` reads in ``locks_json`` (jsonb's text: a string value
holding it would have its quotes escaped). A lock two hosts publish is ``remote`` on at least
one of them (the one its record does not name), so a fleet none of whose parts holds it has no
lock to fold, and :data:`_SHARED` is not even sent."""

_SHARED = (
    "WITH cand AS MATERIALIZED (SELECT DISTINCT r.path FROM lockwarden_locks r"
    " WHERE r.liveness = 'remote' AND r.record_host IS NOT NULL),"
    " hit AS (SELECT l.host, l.path, l.format, l.record_host, l.pid,"
    " l.verdict ->> 'timestamp' AS ts, l.holder, left(l.verdict::text, -1) AS t,"
    " count(*) OVER (PARTITION BY l.path) AS n FROM cand c JOIN lockwarden_locks l"
    " ON l.path = c.path WHERE l.record_host IS NOT NULL)"
    " SELECT host, json_agg(json_build_array(path, format, record_host, pid, ts, holder, t))"
    " FROM hit WHERE n > 1 GROUP BY host")
"""SQL: each host's locks whose path another host publishes too (at the path of a ``remote``
row), with what identifies them (:func:`core.fleet.shared.lock_identity`) and their verdict's
text as in ``locks_json`` (without the closing brace): the candidates of
:func:`core.fleet.shared.fold`. Read in the snapshot of :data:`_HOSTS_JSON` (one repeatable-read
transaction), so its texts are those of the parts."""


@dataclass
class Listing:
    """What :func:`read_locks_json` gathered.

    Attributes:
        parts: each good host's checked JSON array elements (UTF-8, comma-separated), by host
            name in byte order.
        problems: one line per host left out, naming it and why.
    """

    parts: list[bytes] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


_ADDED = tuple(re.compile(rb'"' + key + rb'"\s*:') for key in (
    b"host_published", b"host_silent", b"heartbeat_age_s"))
"""The keys :func:`read_locks_json` adds to each verdict, as they appear in JSON text (a
string value can never hold them so: its quotes would be escaped)."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def check_host_json(host: str, part: bytes) -> str | None:
    """Why ``part`` (one host's published locks with its fields, as :func:`read_locks_json`
    prints them: JSON objects separated by commas) cannot be printed, or None when it can:
    valid UTF-8 JSON without ``NaN`` or ``Infinity``, each element an object with a string
    ``path``, a known ``state`` (and ``liveness``, if any), ``host_published`` equal to
    ``host``, and each added key once an element (a parser that keeps the first of two equal
    keys would read the publisher's). One ``json.loads``: about 20 ms a MB. Never raises."""
    try:
        items = json.loads(b"[" + part + b"]", parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        return f"its published locks are not valid JSON ({str(exc)[:120]})"
    if not isinstance(items, list):
        return "its published locks are not a list"
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("path"), str):
            return "a published lock has no path"
        if item.get("state") not in STATES or item.get("liveness", "unknown") not in LIVENESS:
            return f"lock {item['path']!r} has an unknown state or liveness"
        if item.get("host_published") != host:
            return f"lock {item['path']!r} claims another host as its publisher"
    if any(len(key.findall(part)) != len(items) for key in _ADDED):
        return "a published lock holds a field that the listing adds"
    return None


def read_locks_json(conn: Any, *, silent_after: float, cap: int = HOST_CAP_BYTES) -> Listing:
    """Every trusted host's published locks (see the module docstring; each part checked only
    when the database cannot vouch for it): each verdict as its
    host published it plus ``host_published``, ``host_silent`` (no heartbeat for
    ``silent_after`` s and three of its intervals, as :func:`core.fleet.judge.silence_bound`)
    and ``heartbeat_age_s`` (the database's clock), sorted by host then path (byte order).
    ``cap``: most bytes taken from one host. A database where nothing was set up yet (no
    tables) is an empty listing. Run it inside :meth:`core.fleet.link.Link.run` (bounded).

    Raises:
        FleetError: ``no_schema``: tables older than this Lockwarden reads.
        psycopg.Error: the database failed.
    """
    from psycopg.errors import UndefinedTable

    from core.fleet.schema import check_schema

    out = Listing()
    placeholder = PLACEHOLDER.encode()
    try:
        good, shared = _read_parts(conn, out, cap, silent_after, snapshot=False)
        edits = _shared_edits(shared)
        edited = _edit_parts(good, edits)
        if edited is None:  # a publication came between the two reads: again, in one snapshot
            out.problems.clear()
            good, shared = _read_parts(conn, out, cap, silent_after, snapshot=True)
            edited = _edit_parts(good, _shared_edits(shared)) or {}
    except UndefinedTable:  # nothing set up yet, or an older schema
        check_schema(conn, missing_ok=True)
        return out
    for host, locks, fields, vouched in good:
        if host in edited:  # a lock another host publishes too: one row (core.fleet.shared)
            locks = edited[host]
            if not locks:
                continue
        part = locks.replace(placeholder, fields)  # C speed: ~1 ms a MB
        why_bad = None if vouched else check_host_json(host, part)  # ~20 ms a MB
        if why_bad is not None:
            out.problems.append(f"host {host!r} left out: {why_bad}")
            continue
        out.parts.append(part)
    return out


Part = tuple[str, bytes, bytes, bool]
"""One trusted host's part as read: ``(host, locks_json, fields, vouched)``."""


def _read_parts(conn: Any, out: Listing, cap: int, silent_after: float, *, snapshot: bool
                ) -> tuple[list[Part], list[tuple[str, list[Any]]]]:
    """The trusted hosts' parts within ``cap`` (the others are problems in ``out``) and, when
    a part holds a ``remote`` verdict (:data:`REMOTE_MARK`), the shared locks
    (:data:`_SHARED`) of those hosts; ``snapshot``: both read in one repeatable-read
    transaction (else each in its own: one round trip less)."""
    from contextlib import nullcontext

    from psycopg.types.string import ByteaBinaryLoader

    good: list[Part] = []
    shared: list[tuple[str, list[Any]]] = []
    with conn.transaction() if snapshot else nullcontext(), conn.cursor(binary=True) as cur:
        if snapshot:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.adapters.register_loader("text", ByteaBinaryLoader)  # bytes as sent: no decoding
        cur.execute(_HOSTS_JSON, (cap, silent_after))
        for raw_host, why, size, vouched, locks, fields in cur:  # one host's part at a time
            host = raw_host.decode("utf-8", errors="replace")
            if why is not None:
                out.problems.append(f"host {host!r} left out: {why.decode(errors='replace')}")
                continue
            if size > cap or locks is None:
                out.problems.append(f"host {host!r} left out: it publishes {size:,} bytes of "
                                    f"locks, more than the {cap:,} a host may")
                continue
            good.append((host, bytes(locks), fields, bool(vouched)))
        if any(REMOTE_MARK in locks for _h, locks, _f, _v in good):  # ~3 GB/s
            cur.execute(_SHARED)
            trusted = {host for host, *_ in good}
            for raw_host, rows in cur:
                host = raw_host.decode("utf-8", errors="replace")
                if host in trusted:
                    shared += [(host, row) for row in rows]
    return good, shared


def _edit_parts(good: list[Part], edits: dict[str, tuple[set[bytes], dict[bytes, bytes]]]
                ) -> dict[str, bytes] | None:
    """``{host: its locks_json edited}`` (:func:`_edit_part`) for the hosts in ``edits``;
    None when an element to edit is not in its host's part (the parts and the shared locks
    were read in two snapshots, and a publication came between them)."""
    out: dict[str, bytes] = {}
    for host, locks, _fields, _vouched in good:
        if host in edits:
            edited = _edit_part(locks, *edits[host])
            if edited is None:
                return None
            out[host] = edited
    return out


def _shared_edits(shared: list[tuple[str, list[Any]]]
                  ) -> dict[str, tuple[set[bytes], dict[bytes, bytes]]]:
    """``{host: (elements to drop, {element: element with seen_by})}`` for the locks in
    ``shared`` (``(host, [path, format, record_host, pid, timestamp, holder, text])``, from
    :data:`_SHARED`) that :func:`core.fleet.shared.fold` folds; elements are verdict texts
    without their closing brace, as in ``locks_json``."""
    edits: dict[str, tuple[set[bytes], dict[bytes, bytes]]] = {}
    if not shared:
        return edits
    from core.fleet.shared import fold, lock_identity

    for row in fold(shared, lambda s: (s[0], lock_identity(*s[1][:6]))):
        if not row.folded:
            continue
        for host, r in row.folded:
            edits.setdefault(host, (set(), {}))[0].add(str(r[6]).encode())
        host, r = row.item
        text = str(r[6])
        if '"seen_by"' in text:  # the publisher's own key of that name: ours only
            verdict = json.loads(text + "}")
            verdict.pop("seen_by", None)
            text = json.dumps(verdict, ensure_ascii=False)[:-1]
        edits.setdefault(host, (set(), {}))[1][str(r[6]).encode()] = (
            text + ', "seen_by": ' + json.dumps(list(row.seen_by), ensure_ascii=False)).encode()
    return edits


def _edit_part(locks: bytes, drop: set[bytes], change: dict[bytes, bytes]) -> bytes | None:
    """``locks`` (one host's ``locks_json``: elements each ended by the placeholder, joined by
    commas) without the elements in ``drop`` and with those in ``change`` replaced; None when
    one of them is not there."""
    end = PLACEHOLDER.encode() + b","
    elements = locks[:-1].split(end)  # the placeholder is never in JSON text
    if not (drop | change.keys()) <= set(elements):
        return None
    kept = [change.get(e, e) for e in elements if e not in drop]
    return end.join(kept) + PLACEHOLDER.encode() if kept else b""


def write_listing(listing: Listing, out: BinaryIO) -> int:
    """Write ``listing``'s parts to ``out`` as one JSON array (then a newline); returns the
    bytes written.

    Raises:
        OSError: ``out`` failed (a closed pipe: ``BrokenPipeError``).
    """
    written = out.write(b"[")
    for i, part in enumerate(listing.parts):  # 50 hosts: 50 writes, no 25 MB copy
        if i:
            written += out.write(b",")
        written += out.write(part)
    written += out.write(b"]\n")
    out.flush()
    return written


Row = tuple[str, bool, str, int | None, str, str | None, str]
"""One line of the human table: ``(host, host_silent, state, pid, liveness, holder, path)``."""


@dataclass
class LockRows:
    """What :func:`read_lock_rows` gathered.

    Attributes:
        hosts: how many hosts ever published.
        rows: the table's lines, by host then path (byte order).
        problems: one line per host left out, naming it and why.
        seen_by: ``{(host, path): every host that publishes that lock}`` for the rows into
            which other hosts' rows of the same lock were folded (:func:`core.fleet.shared.fold`).
    """

    hosts: int = 0
    rows: list[Row] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seen_by: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)


def read_lock_rows(conn: Any, *, silent_after: float, cap: int = HOST_CAP_BYTES) -> LockRows:
    """One row per published lock of each trusted host whose rows' text is within ``cap``
    bytes (a lock several hosts publish is one row: :func:`core.fleet.shared.fold`), sorted by
    host then path (byte order; ``host_silent`` as in :func:`read_locks_json`), and one
    problem line per host left out; nothing before anything was set up (no tables). Read in
    one repeatable-read transaction. Run it inside :meth:`core.fleet.link.Link.run`.

    Raises:
        FleetError: ``no_schema``: tables older than this Lockwarden reads.
        psycopg.Error: the database failed.
    """
    from psycopg.errors import UndefinedTable

    from core.fleet.schema import check_schema

    out = LockRows()
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            _read_rows(cur, out, cap, silent_after)
    except UndefinedTable:  # nothing set up yet, or an older schema
        check_schema(conn, missing_ok=True)
        return LockRows()
    return out


def _read_rows(cur: Any, out: LockRows, cap: int, silent_after: float) -> None:
    """:func:`read_lock_rows`'s reads through ``cur``, into ``out``."""
    cur.execute(
        "SELECT h.host, " + _TRUST + ", (SELECT coalesce(sum(octet_length(l.path)"
        " + coalesce(octet_length(l.holder), 0) + octet_length(l.state)"
        " + octet_length(l.liveness) + 16), 0) FROM lockwarden_locks l"
        f" WHERE l.host = h.host) FROM lockwarden_hosts h LEFT JOIN {BINDINGS} b"
        " ON b.host = h.host ORDER BY h.host COLLATE \"C\"")
    hosts = cur.fetchall()
    out.hosts = len(hosts)
    good = []
    for host, why, size in hosts:
        if why is not None:
            out.problems.append(f"host {host!r} left out: {why}")
        elif size > cap:
            out.problems.append(f"host {host!r} left out: it publishes {size:,} bytes of "
                                f"locks, more than the {cap:,} a host may")
        else:
            good.append(host)
    cur.execute("SELECT l.host, " + _SILENT + ", l.state, l.pid, l.liveness, l.holder,"
                " l.path FROM lockwarden_locks l JOIN lockwarden_hosts h USING (host)"
                " WHERE l.host = ANY(%s) AND l.owner = h.owner"
                " ORDER BY l.host COLLATE \"C\", l.path COLLATE \"C\"", (silent_after, good))
    rows: list[Row] = []
    bad: set[str] = set()
    for row in cur.fetchall():
        if row[2] not in STATES or row[4] not in LIVENESS:
            if row[0] not in bad:
                bad.add(row[0])
                out.problems.append(f"host {row[0]!r} left out: lock {row[6]!r} has an "
                                    "unknown state or liveness")
            continue
        rows.append(row)
    if bad:
        rows = [r for r in rows if r[0] not in bad]
    paths = [r[6] for r in rows]
    if len(set(paths)) < len(paths):  # a path several hosts publish: the same lock?
        _fold_rows(cur, out, rows, good)
    else:
        out.rows = rows


def _fold_rows(cur: Any, out: LockRows, rows: list[Row], good: list[str]) -> None:
    """``rows`` into ``out`` with each lock several hosts publish folded into one
    (:func:`core.fleet.shared.fold`): what identifies a lock is read (through ``cur``, in the
    same snapshot) for the paths listed more than once only."""
    from collections import Counter

    from core.fleet.shared import fold, lock_identity

    twice = [path for path, n in Counter(r[6] for r in rows).items() if n > 1]
    cur.execute("SELECT l.host, l.path, l.format, l.record_host, l.verdict ->> 'timestamp'"
                " FROM lockwarden_locks l WHERE l.path = ANY(%s) AND l.host = ANY(%s)",
                (twice, good))
    ident = {(host, path): (fmt, record_host, ts) for host, path, fmt, record_host, ts
             in cur.fetchall()}

    def key(r: Row) -> tuple[str, Any]:
        got = ident.get((r[0], r[6]))
        return r[0], None if got is None else lock_identity(r[6], got[0], got[1], r[3],
                                                            got[2], r[5])

    for f in fold(rows, key):
        out.rows.append(f.item)
        if f.folded:
            out.seen_by[(f.item[0], f.item[6])] = f.seen_by
