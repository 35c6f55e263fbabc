"""``lockwarden fleet init``: what the database's owner runs once, and again to bind more hosts
(docs/fleet.md, "Set-up"; docs/cli.md, "``fleet init``").

:func:`init`, on a connection of the role that is to own the fleet's tables (the database's
owner: since PostgreSQL 15 only it may create tables in schema ``public``):

1. creates the tables or migrates them (:func:`core.fleet.schema.migrate`), with row-level
   security forced on the owner too;
2. grants each publishing role ``SELECT, INSERT, UPDATE, DELETE`` on the hosts', locks' and
   PIDs' tables and ``SELECT`` on the schema's and the bindings' tables; each viewer ``SELECT``
   on all of them. No other role gets anything, and none owns a table;
3. binds each host name to the one role that may publish it (``--bind HOST=ROLE``, in
   :data:`core.fleet.schema.BINDINGS`, which only the owner writes) and unbinds others
   (``--unbind HOST``).

Roles are created by the database's administrator beforehand (``CREATE ROLE ... LOGIN``): this
never handles a password.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.fleet.errors import FleetError
from core.fleet.schema import BINDINGS, TABLES, migrate

PUBLISHED = ("lockwarden_hosts", "lockwarden_locks", "lockwarden_pids")
"""The tables a publishing role writes (its own host's rows only: row-level security)."""


@dataclass
class InitResult:
    """What :func:`init` did.

    Attributes:
        version: the schema version now in place.
        owner: the role that owns the tables (the one that ran it).
        bindings: every binding now in place, ``host -> role``, by host.
        publishers: the roles granted to publish (every bound role).
        viewers: the roles granted to read this time.
        warnings: what the owner should know (a bound role that bypasses row-level security).
    """

    version: int
    owner: str
    bindings: dict[str, str] = field(default_factory=dict)
    publishers: list[str] = field(default_factory=list)
    viewers: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """The result as JSON-ready data (``fleet init --json``)."""
        return {"version": self.version, "owner": self.owner, "bindings": self.bindings,
                "publishers": self.publishers, "viewers": self.viewers,
                "warnings": self.warnings}


def init(conn: Any, *, bind: Mapping[str, str] | None = None, unbind: Sequence[str] = (),
         viewers: Sequence[str] = ()) -> InitResult:
    """Set the fleet up on ``conn`` (a psycopg connection, autocommit, of the role that is to
    own the tables; see the module docstring). ``bind``: ``{host: role}``; ``unbind``: host
    names; ``viewers``: read-only roles. Idempotent.

    Raises:
        FleetError: ``refused``: a role does not exist, or the tables belong to another role
            (created by a publisher of an older Lockwarden: reassign them first).
        psycopg.Error: the database refused or failed (no ``CREATE`` on the schema:
            ``InsufficientPrivilege``).
    """
    from psycopg import sql

    bind = dict(bind or {})
    me = _one(conn, "SELECT current_user")
    owners = conn.execute(
        "SELECT c.relname, pg_get_userbyid(c.relowner) FROM pg_class c"
        " WHERE c.relname = ANY(%s) AND c.relnamespace = current_schema()::regnamespace",
        (list(TABLES),)).fetchall()
    foreign = sorted({owner for _t, owner in owners if owner != me})
    if foreign:
        raise FleetError("refused", f"the fleet's tables belong to role(s) {', '.join(foreign)}"
                         f", not to {me}: the tables must belong to the database's owner and "
                         "to no publishing role; as a superuser: REASSIGN OWNED BY "
                         f"{foreign[0]} TO {me} (docs/fleet.md, \"Set-up\")")
    roles = sorted({*bind.values(), *viewers})
    found = {name: (bool(su), bool(bypass)) for name, su, bypass in conn.execute(
        "SELECT rolname, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = ANY(%s)",
        (roles,)).fetchall()}
    missing = [r for r in roles if r not in found]
    if missing:
        raise FleetError("refused", f"no role {', '.join(missing)} in the database: its "
                         "administrator creates each role first (CREATE ROLE name LOGIN ...)")
    version = migrate(conn)
    out = InitResult(version, me)
    with conn.transaction():
        for role in sorted(set(bind.values())):
            ident = sql.Identifier(role)
            conn.execute(sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(
                sql.SQL(", ").join(map(sql.Identifier, PUBLISHED)), ident))
            conn.execute(sql.SQL("GRANT SELECT ON lockwarden_schema, {} TO {}").format(
                sql.Identifier(BINDINGS), ident))
            su, bypass = found[role]
            if su or bypass:
                out.warnings.append(
                    f"role {role} is a superuser or bypasses row-level security: what it "
                    "writes is not checked (viewers still trust only its own host names)")
        for role in sorted(set(viewers)):
            conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(
                sql.SQL(", ").join(map(sql.Identifier, TABLES)), sql.Identifier(role)))
        for host in unbind:
            conn.execute(f"DELETE FROM {BINDINGS} WHERE host = %s", (host,))
        for host, role in sorted(bind.items()):
            conn.execute(f"INSERT INTO {BINDINGS} (host, role) VALUES (%s, %s)"
                         " ON CONFLICT (host) DO UPDATE SET role = EXCLUDED.role", (host, role))
    out.bindings = {str(h): str(r) for h, r in conn.execute(
        f"SELECT host, role FROM {BINDINGS} ORDER BY host COLLATE \"C\"").fetchall()}
    out.publishers = sorted(set(bind.values()))
    out.viewers = sorted(set(viewers))
    return out


def _one(conn: Any, query: str) -> str:
    row = conn.execute(query).fetchone()
    return str(row[0]) if row else ""
