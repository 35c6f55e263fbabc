"""Every host's published locks for ``lockwarden list --fleet`` (docs/fleet.md, "Bounds"):
cheap to import (no verdict machinery, psycopg only through the caller's connection) and
cheap to run on 50 hosts x 1,000 locks.

- :func:`write_locks_json` streams the JSON array that ``list --fleet --json`` prints, from
  each host's pre-encoded ``locks_json`` (:data:`core.fleet.schema.LOCKS_JSON`), sent as raw
  bytes with the text of the host's fields, which replaces each placeholder
  (``bytes.replace``: a few times faster than the database's ``replace()``); Python never
  parses nor encodes one verdict.
- :func:`lock_rows` gives the columns of the human table, without the verdicts.
"""

from __future__ import annotations

from typing import Any, BinaryIO

from core.fleet.schema import PLACEHOLDER

# the silence bound of core.fleet.judge.silence_bound, in SQL: silent_after, and never less
# than three of the host's heartbeat intervals
_SILENT = "extract(epoch FROM now() - h.heartbeat_at) > greatest(%s, 3 * h.interval_s)"

_HOSTS_JSON = (  # each host's pre-encoded locks, and the text that replaces its placeholders
    "SELECT h.locks_json, format("
    "', \"host_published\": %%s, \"host_silent\": %%s, \"heartbeat_age_s\": %%s}',"
    " to_json(h.host), to_json(" + _SILENT + "),"
    " round(extract(epoch FROM now() - h.heartbeat_at)::numeric, 3))"
    " FROM lockwarden_hosts h WHERE h.locks_json <> '' ORDER BY h.host COLLATE \"C\"")


def write_locks_json(conn: Any, out: BinaryIO, *, silent_after: float) -> int:
    """Write every published lock to ``out`` as one JSON array (UTF-8, then a newline): each
    verdict as its host published it plus ``host_published``, ``host_silent`` (no heartbeat
    for ``silent_after`` s and three of its intervals, as
    :func:`core.fleet.judge.silence_bound`) and ``heartbeat_age_s`` (the database's clock),
    sorted by host then path (byte order). One row per host, fetched as raw bytes. Returns
    the number of bytes written. A database where no host has published yet (no tables) is
    an empty array.

    Raises:
        psycopg.Error: the database failed (nothing was written then).
        OSError: ``out`` failed (a closed pipe: ``BrokenPipeError``).
    """
    from psycopg.errors import UndefinedTable
    from psycopg.types.string import ByteaBinaryLoader

    rows: list[tuple[bytes, bytes]] = []
    with conn.cursor(binary=True) as cur:
        cur.adapters.register_loader("text", ByteaBinaryLoader)  # bytes as sent: no decoding
        try:
            cur.execute(_HOSTS_JSON, (silent_after,))
            rows = cur.fetchall()
        except UndefinedTable:  # no host has published yet: the first one creates the tables
            pass
    placeholder = PLACEHOLDER.encode()
    written = out.write(b"[")
    for i, (locks, fields) in enumerate(rows):  # 50 hosts: 50 writes, no 25 MB copy
        if i:
            written += out.write(b",")
        written += out.write(locks.replace(placeholder, fields))  # C speed: ~1 ms a MB
    written += out.write(b"]\n")
    out.flush()
    return written


def lock_rows(conn: Any, *, silent_after: float
              ) -> tuple[int, list[tuple[str, bool, str, int | None, str, str | None, str]]]:
    """``(hosts, rows)``: how many hosts ever published, and one row per published lock:
    ``(host, host_silent, state, pid, liveness, holder, path)`` sorted by host then path (byte
    order), ``host_silent`` as in :func:`write_locks_json`; ``(0, [])`` before any host has
    published (no tables).

    Raises:
        psycopg.Error: the database failed.
    """
    from psycopg.errors import UndefinedTable

    with conn.cursor() as cur:
        try:
            cur.execute("SELECT count(*) FROM lockwarden_hosts")
        except UndefinedTable:  # no host has published yet: the first one creates the tables
            return 0, []
        row = cur.fetchone()
        hosts = int(row[0]) if row else 0
        cur.execute("SELECT l.host, " + _SILENT + ", l.state, l.pid, l.liveness, l.holder,"
                    " l.path FROM lockwarden_locks l JOIN lockwarden_hosts h USING (host)"
                    " ORDER BY l.host COLLATE \"C\", l.path COLLATE \"C\"", (silent_after,))
        return hosts, list(cur.fetchall())
