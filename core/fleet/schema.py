"""The fleet database's schema and its versioned migrations (docs/fleet.md, "Set-up").

Three tables, one row per host, per (host, lock path) and per (host, PID):

- ``lockwarden_hosts``: ``host``, ``boot_id``, ``heartbeat_at`` (the database's clock),
  ``interval_s``, ``owner`` (the role that publishes it).
- ``lockwarden_locks``: the verdict of each lock a host watches (state, liveness, holder, PID,
  the record's host, tag, format, reason codes as JSON, the whole verdict as JSON).
- ``lockwarden_pids``: for each PID that a host's locks name on that host: alive or not, its
  start time (Unix s), when it was checked.

Version 2 adds ``lockwarden_hosts.locks_json``: the host's locks pre-encoded for readers
(:data:`LOCKS_JSON`), rebuilt by the publisher in the transaction that changes them, so that
``list --fleet --json`` costs the bytes it sends (docs/fleet.md, "Bounds").

Row-level security lets a publishing role write only the rows of the hosts it owns; reading
needs only ``SELECT``. :data:`MIGRATIONS` are applied in order, each in its own transaction,
under an advisory lock so that two hosts starting at once do not migrate twice; the version
is kept in ``lockwarden_schema``.
"""

from __future__ import annotations

from typing import Any

SCHEMA_LOCK = 0x4C57_464C  # "LWFL": pg_advisory_xact_lock key of the migration
"""Advisory lock key held while migrating (a transaction lock: released at commit)."""

PLACEHOLDER = "\x01"
"""Stands for the per-host fields at the end of each verdict in ``locks_json`` (a reader
replaces it: :func:`core.fleet.listing.write_locks_json`). JSON text never holds a raw
control character (it is escaped as ``\\u0001``), so it can only be a placeholder."""

LOCKS_JSON = (
    "(SELECT string_agg(left(l.verdict::text, -1) || chr(1), ','"
    " ORDER BY l.path COLLATE \"C\") FROM lockwarden_locks l WHERE l.host = lockwarden_hosts.host)")
"""SQL expression: the locks of the ``lockwarden_hosts`` row at hand as the elements of a JSON
array (comma-separated, by path in byte order), each verdict without its closing brace and
followed by :data:`PLACEHOLDER`; NULL for a host without locks."""

CHANNEL = "lockwarden_fleet"
"""LISTEN/NOTIFY channel; the payload is the host whose rows changed."""

MIGRATIONS: tuple[str, ...] = (
    # 1: the three tables, row-level security by owner
    """
    CREATE TABLE lockwarden_hosts (
        host text PRIMARY KEY,
        boot_id text,
        heartbeat_at timestamptz NOT NULL DEFAULT now(),
        interval_s double precision NOT NULL,
        version text,
        owner name NOT NULL DEFAULT current_user
    );
    CREATE TABLE lockwarden_locks (
        host text NOT NULL REFERENCES lockwarden_hosts ON DELETE CASCADE,
        path text NOT NULL,
        state text NOT NULL,
        liveness text NOT NULL,
        record_host text,
        pid integer,
        holder text,
        tag text,
        format text,
        reasons jsonb NOT NULL,
        verdict jsonb NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (host, path)
    );
    CREATE TABLE lockwarden_pids (
        host text NOT NULL REFERENCES lockwarden_hosts ON DELETE CASCADE,
        pid integer NOT NULL,
        alive boolean NOT NULL,
        liveness text NOT NULL,
        start double precision,
        checked_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (host, pid)
    );
    ALTER TABLE lockwarden_hosts ENABLE ROW LEVEL SECURITY;
    ALTER TABLE lockwarden_locks ENABLE ROW LEVEL SECURITY;
    ALTER TABLE lockwarden_pids ENABLE ROW LEVEL SECURITY;
    CREATE POLICY lw_read ON lockwarden_hosts FOR SELECT USING (true);
    CREATE POLICY lw_write ON lockwarden_hosts FOR ALL
        USING (owner = current_user) WITH CHECK (owner = current_user);
    CREATE POLICY lw_read ON lockwarden_locks FOR SELECT USING (true);
    CREATE POLICY lw_write ON lockwarden_locks FOR ALL
        USING (EXISTS (SELECT 1 FROM lockwarden_hosts h
                       WHERE h.host = lockwarden_locks.host AND h.owner = current_user))
        WITH CHECK (EXISTS (SELECT 1 FROM lockwarden_hosts h
                            WHERE h.host = lockwarden_locks.host AND h.owner = current_user));
    CREATE POLICY lw_read ON lockwarden_pids FOR SELECT USING (true);
    CREATE POLICY lw_write ON lockwarden_pids FOR ALL
        USING (EXISTS (SELECT 1 FROM lockwarden_hosts h
                       WHERE h.host = lockwarden_pids.host AND h.owner = current_user))
        WITH CHECK (EXISTS (SELECT 1 FROM lockwarden_hosts h
                            WHERE h.host = lockwarden_pids.host AND h.owner = current_user));
    """,
    # 2: each host's locks pre-encoded for `list --fleet --json`; stored uncompressed out of
    # line (a heartbeat's UPDATE keeps the same value without copying it)
    f"""
    ALTER TABLE lockwarden_hosts ADD COLUMN locks_json text;
    ALTER TABLE lockwarden_hosts ALTER COLUMN locks_json SET STORAGE EXTERNAL;
    UPDATE lockwarden_hosts SET locks_json = {LOCKS_JSON};
    """,
)


def schema_version(cur: Any) -> int:
    """The applied version (0: none), read with cursor ``cur``; creates the version table."""
    cur.execute("CREATE TABLE IF NOT EXISTS lockwarden_schema (version integer NOT NULL)")
    cur.execute("SELECT max(version) FROM lockwarden_schema")
    row = cur.fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def migrate(conn: Any) -> int:
    """Bring the database at ``conn`` (a psycopg connection, autocommit or not) to the newest
    version; returns it. Run by the role that owns the tables (docs/fleet.md, "Set-up"), or
    by a publisher where the database is its own.

    Raises:
        psycopg.Error: the database refused (a reader or publisher role cannot create tables:
            ``InsufficientPrivilege``).
    """
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        have = schema_version(cur)
        for version, sql in enumerate(MIGRATIONS, start=1):
            if version <= have:
                continue
            cur.execute(sql)
            cur.execute("INSERT INTO lockwarden_schema VALUES (%s)", (version,))
            have = version
    return have
