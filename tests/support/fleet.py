"""The fleet (docs/fleet.md) as the tests run it: its tables on the test servers, dropped
around a test and set up as the database's owner does it (``lockwarden fleet init``:
:func:`core.fleet.setup.init`) with host names bound to roles; and hosts that are processes in
UTS namespaces of their own (``unshare -u``, their own host names) publishing to the session's
PostgreSQL (tests/support/servers.py; the ``fresh_db`` and ``fleet_procs`` fixtures of
tests/remote/conftest.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from core.fleet.schema import TABLES
from core.fleet.setup import InitResult, init
from tests.support.cli import cli_env
from tests.support.servers import PG_PASSWORD, PgServer

__all__ = ["FLEET_ENV", "HOLDER", "HOSTS", "Procs", "drop_fleet", "dsn", "fleet_config",
           "fresh_fleet", "init_fleet", "make_role", "on_host", "pg_ctl"]

FLEET_ENV = cli_env(LOCKWARDEN_FLEET_PW=PG_PASSWORD)
"""The environment of a fleet process: this checkout on ``PYTHONPATH`` and the password the
configurations name (``password_env = "LOCKWARDEN_FLEET_PW"``)."""

HOLDER = ("import core, sys, time; core.Lock(sys.argv[1], tag='on b').acquire(); "
          "print('held', flush=True); time.sleep(600)")
"""``python -c HOLDER PATH``: takes the lock at PATH, prints ``held`` and sleeps."""

HOSTS = {"fleet-a": "lw", "fleet-b": "lw"}
"""The host names of the fleet tests, bound to the session server's superuser (docs/fleet.md,
"Set-up")."""


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


def fresh_fleet(pg: PgServer) -> None:
    """Drop ``pg``'s fleet and set it up afresh as its owner, :data:`HOSTS` bound."""
    import psycopg

    with psycopg.connect(**pg.conninfo(), autocommit=True) as conn:
        drop_fleet(conn)
        init_fleet(conn, HOSTS)


def dsn(pg: PgServer, user: str = "lw") -> str:
    """The URL of ``pg``'s ``postgres`` database over TCP as ``user`` (password apart)."""
    return f"postgresql://{user}@127.0.0.1:{pg.port}/postgres"


def fleet_config(path: Path, pg: PgServer, watched: Path, *, silent_after: float = 3.0) -> Path:
    """Write at ``path`` a configuration watching ``watched`` and publishing to ``pg`` every
    0.5 s (a host is silent after ``silent_after`` seconds); returns ``path``."""
    path.write_text(f'[[watch]]\npath = "{watched}"\n\n[fleet]\ndsn = "{dsn(pg)}"\n'
                    f'password_env = "LOCKWARDEN_FLEET_PW"\ninterval = 0.5\n'
                    f"silent_after = {silent_after}\n")
    return path


def on_host(host: str, *argv: str) -> list[str]:
    """The argv that runs ``argv`` in a UTS namespace of its own whose host name is ``host``."""
    return ["unshare", "-u", "sh", "-c", 'hostname "$0" && exec "$@"', host, *argv]


def make_role(conn: Any, name: str) -> None:
    """A login role ``name`` (password :data:`PG_PASSWORD`), created afresh; ``fleet init``
    grants it."""
    if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
        conn.execute(f"DROP OWNED BY {name}")
    conn.execute(f"DROP ROLE IF EXISTS {name}")
    conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{PG_PASSWORD}'")


def pg_ctl(pg: PgServer, *args: str) -> None:
    """Run ``pg_ctl -D DATA ARGS`` on ``pg``'s cluster (stop, start) as its owner."""
    subprocess.run([*pg.runas, pg.pg_ctl, "-D", pg.data, *args], capture_output=True,
                   timeout=120, check=True)


class Procs:
    """Processes started by a test (environment :data:`FLEET_ENV`), SIGKILLed at its end."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, argv: list[str]) -> subprocess.Popen[str]:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=FLEET_ENV)
        self.procs.append(p)
        return p

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate(timeout=30)
