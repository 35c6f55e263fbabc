"""Fixtures of tests/remote: every test has an audit log of its own (``own_audit_log`` of
tests/conftest.py, which also holds the session's redis-server, etcd and PostgreSQL), a fresh
fleet database and the fleet's processes (tests/support/fleet.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fleet import Procs, drop_fleet, fresh_fleet
from tests.support.servers import PgServer


@pytest.fixture(autouse=True)
def _own_audit_log(own_audit_log: Path) -> Path:
    """Every test of tests/remote writes its audit entries to its own log."""
    return own_audit_log


@pytest.fixture
def fresh_db(pg_server: PgServer) -> Iterator[PgServer]:
    """The session's server with the fleet set up afresh (``fleet init``,
    :data:`tests.support.fleet.HOSTS` bound) and dropped after the test."""
    import psycopg

    fresh_fleet(pg_server)
    yield pg_server
    with psycopg.connect(**pg_server.conninfo(), autocommit=True) as conn:
        drop_fleet(conn)


@pytest.fixture
def fleet_procs() -> Iterator[Procs]:
    """The fleet processes a test starts (:class:`tests.support.fleet.Procs`), SIGKILLed and
    reaped after it."""
    p = Procs()
    yield p
    p.close()
