"""Fixtures of tests/remote: one private redis-server, one etcd and one PostgreSQL cluster
per session (tests/support/servers.py), and an audit log of the test's own (XDG_STATE_HOME in
a temp dir)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import (
    EtcdServer,
    PgServer,
    RedisServer,
    start_etcd,
    start_pg,
    start_redis,
)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = start_redis(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    server = start_pg()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    server = start_etcd(tmp_path_factory.mktemp("etcd"))
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def own_audit_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The per-user audit log goes to the test's temp dir: returns the log's path."""
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state / "lockwarden" / "log" / "audit.log"
