"""The fleet's tables on the test servers (docs/fleet.md, "Set-up"): dropped around a test, and
set up as the database's owner does it (``lockwarden fleet init``: :func:`core.fleet.setup.init`)
with host names bound to roles."""

from __future__ import annotations

from typing import Any

from core.fleet.schema import TABLES
from core.fleet.setup import InitResult, init

__all__ = ["drop_fleet", "init_fleet"]


def drop_fleet(conn: Any) -> None:
    """Drop every fleet table (and the schema's trigger function) through ``conn`` (an
    autocommit psycopg connection of the tables' owner or a superuser)."""
    conn.execute("DROP TABLE IF EXISTS " + ", ".join(TABLES) + " CASCADE")
    conn.execute("DROP FUNCTION IF EXISTS lockwarden_locks_json()")


def init_fleet(conn: Any, bind: dict[str, str] | None = None, viewers: tuple[str, ...] = ()
               ) -> InitResult:
    """``lockwarden fleet init`` through ``conn`` (the tables' owner): tables, grants, and
    ``bind`` (``{host: role}``)."""
    return init(conn, bind=bind or {}, viewers=viewers)
