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
replaces it: :func:`core.fleet.listing.read_locks_json`). JSON text never holds a raw
control character (it is escaped as ``\\u0001``), so it can only be a placeholder."""

LOCKS_JSON = (
    "(SELECT string_agg(left(l.verdict::text, -1) || chr(1), ','"
    " ORDER BY l.path COLLATE \"C\") FROM lockwarden_locks l WHERE l.host = lockwarden_hosts.host)")
"""SQL expression: the locks of the ``lockwarden_hosts`` row at hand as the elements of a JSON
array (comma-separated, by path in byte order), each verdict without its closing brace and
followed by :data:`PLACEHOLDER`; NULL for a host without locks."""

CHANNEL = "lockwarden_fleet"
"""LISTEN/NOTIFY channel; the payload is the host whose rows changed."""

BINDINGS = "lockwarden_host_roles"
"""The table binding each host name to the one role that may publish it (``host``, ``role``):
written by the database's owner only (``lockwarden fleet init --bind HOST=ROLE``,
:mod:`core.fleet.setup`), read by every role."""


VERDICT_MAX_BYTES = 256 * 1024
"""Most bytes of one published verdict's JSON (a tag is at most 4 KiB; a verdict about 1 KiB)."""

_VERDICT_OK = (
    "jsonb_typeof(verdict) = 'object' AND verdict ->> 'path' = path"
    " AND verdict ->> 'state' = state AND verdict ->> 'liveness' = liveness"
    " AND NOT verdict ?| array['host_published', 'host_silent', 'heartbeat_age_s']"
    f" AND jsonb_typeof(reasons) = 'array' AND octet_length(verdict::text) <= {VERDICT_MAX_BYTES}")
"""SQL: the ``lockwarden_locks`` row at hand holds a verdict a reader can print: an object
that agrees with its row and lacks the fields :mod:`core.fleet.listing` adds."""

_AGGREGATE = ("SELECT string_agg(left(l.verdict::text, -1) || chr(1), ',' ORDER BY l.path"
              " COLLATE \"C\") FROM %I.lockwarden_locks l WHERE l.host = $1")
"""SQL for ``format()`` with the schema: :data:`LOCKS_JSON` of the host ``$1``, as the
trigger of schema 3 computes it."""

_AGGREGATE_SQL = "'" + _AGGREGATE.replace("'", "''") + "'"
""":data:`_AGGREGATE` as an SQL string literal."""


def _bound(table: str) -> str:
    """SQL: the row of ``table`` at hand belongs to a host bound to the current role."""
    return (f"EXISTS (SELECT 1 FROM {BINDINGS} b WHERE b.host = {table}.host"
            " AND b.role = current_user)")


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
    # 3: a host name is bound to the role that may publish it (written by the owner only);
    # every row records the role that wrote it; FORCE: the owner too is held to the policies;
    # what a role writes is checked (no heartbeat in the future, verdicts that are objects
    # agreeing with their row, without the fields a reader adds); locks_json is the
    # database's own work (a trigger), never a publisher's text
    f"""
    CREATE TABLE {BINDINGS} (
        host text PRIMARY KEY,
        role name NOT NULL
    );
    ALTER TABLE lockwarden_locks ADD COLUMN owner name NOT NULL DEFAULT current_user;
    ALTER TABLE lockwarden_pids ADD COLUMN owner name NOT NULL DEFAULT current_user;
    UPDATE lockwarden_locks l SET owner = h.owner FROM lockwarden_hosts h WHERE h.host = l.host;
    UPDATE lockwarden_pids p SET owner = h.owner FROM lockwarden_hosts h WHERE h.host = p.host;
    DELETE FROM lockwarden_locks WHERE NOT ({_VERDICT_OK});
    DROP POLICY lw_write ON lockwarden_hosts;
    DROP POLICY lw_write ON lockwarden_locks;
    DROP POLICY lw_write ON lockwarden_pids;
    CREATE POLICY lw_write ON lockwarden_hosts FOR ALL USING ({_bound("lockwarden_hosts")})
        WITH CHECK (owner = current_user AND {_bound("lockwarden_hosts")}
                    AND heartbeat_at <= now() AND interval_s > 0 AND interval_s <= 3600);
    CREATE POLICY lw_write ON lockwarden_locks FOR ALL USING ({_bound("lockwarden_locks")})
        WITH CHECK (owner = current_user AND {_bound("lockwarden_locks")} AND {_VERDICT_OK});
    CREATE POLICY lw_write ON lockwarden_pids FOR ALL USING ({_bound("lockwarden_pids")})
        WITH CHECK (owner = current_user AND {_bound("lockwarden_pids")}
                    AND checked_at <= now());
    CREATE OR REPLACE FUNCTION lockwarden_locks_json() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN  -- the table named with its schema: no temporary table of the caller's stands in
        EXECUTE format({_AGGREGATE_SQL}, TG_TABLE_SCHEMA) INTO NEW.locks_json USING NEW.host;
        RETURN NEW;
    END $fn$;
    CREATE TRIGGER lockwarden_locks_json BEFORE INSERT OR UPDATE OF locks_json
        ON lockwarden_hosts FOR EACH ROW EXECUTE FUNCTION lockwarden_locks_json();
    UPDATE lockwarden_hosts SET locks_json = NULL;
    ALTER TABLE lockwarden_hosts FORCE ROW LEVEL SECURITY;
    ALTER TABLE lockwarden_locks FORCE ROW LEVEL SECURITY;
    ALTER TABLE lockwarden_pids FORCE ROW LEVEL SECURITY;
    """,
)


TABLES = ("lockwarden_hosts", "lockwarden_locks", "lockwarden_pids", "lockwarden_schema",
          BINDINGS)
"""Every table of the fleet (the newest schema)."""

VERSION = len(MIGRATIONS)
"""The schema version this Lockwarden writes and reads."""


def schema_version(cur: Any) -> int:
    """The applied version (0: none), read with cursor ``cur``; creates nothing (a role
    without ``CREATE`` on the schema reads it too)."""
    cur.execute("SELECT to_regclass('lockwarden_schema') IS NOT NULL")
    row = cur.fetchone()
    if not row or not row[0]:
        return 0
    cur.execute("SELECT max(version) FROM lockwarden_schema")
    row = cur.fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def migrate(conn: Any) -> int:
    """Bring the database at ``conn`` (a psycopg connection, autocommit or not) to the newest
    version; returns it. Run by the database's owner (``lockwarden fleet init``,
    :mod:`core.fleet.setup`; docs/fleet.md, "Set-up"): the tables belong to the role that
    creates them, and no publishing role may own one.

    Raises:
        psycopg.Error: the database refused (a role without ``CREATE`` on the schema:
            ``InsufficientPrivilege``).
    """
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        have = schema_version(cur)
        if have == 0:
            cur.execute("CREATE TABLE IF NOT EXISTS lockwarden_schema (version integer NOT NULL)")
        for version, sql in enumerate(MIGRATIONS, start=1):
            if version <= have:
                continue
            cur.execute(sql)
            cur.execute("INSERT INTO lockwarden_schema VALUES (%s)", (version,))
            have = version
    return have


def check_schema(conn: Any, where: str = "", *, missing_ok: bool = False) -> None:
    """Raise unless the tables at ``conn`` are at :data:`VERSION` or newer (a publisher's
    and a reader's check; creates nothing). ``where`` names the database in the message
    (without its password); ``missing_ok``: no tables at all is fine (a reader's empty fleet).

    Raises:
        core.fleet.errors.FleetError: ``no_schema``: missing or older tables (the database's
            owner runs ``lockwarden fleet init``).
        psycopg.Error: the database failed.
    """
    with conn.cursor() as cur:
        have = schema_version(cur)
        if have == 0 and missing_ok:
            cur.execute("SELECT to_regclass('lockwarden_hosts') IS NULL")
            row = cur.fetchone()
            if row and row[0]:
                return
    if have < VERSION:
        from core.fleet.errors import FleetError

        what = "has no fleet tables" if have == 0 else f"has the fleet's tables at version {have}"
        raise FleetError("no_schema", f"fleet database {where + ' ' if where else ''}{what}; "
                         f"this Lockwarden needs version {VERSION}: the database's owner runs "
                         "`lockwarden fleet init` (docs/fleet.md, \"Set-up\")")
