"""What the CLI says about lock servers is true: a PostgreSQL database that does not exist is
``no_database``, not ``unreachable`` nor ``auth_failed``; a Redis lock whose holder cannot be
checked does not say "its holder is alive"; ``list`` does not say "(no locks)" for a server
that failed. Real servers (tests/support/servers.py), real CLI."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest

from tests.support.cli import cli_env, lw
from tests.support.servers import PG_PASSWORD, PgServer, RedisServer, free_port

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("own_audit_log"),  # each test writes its own audit log
]


def test_a_missing_postgres_database_is_no_database(pg_server: PgServer) -> None:
    for host in ("127.0.0.1", quote(pg_server.sockdir, safe="")):  # password; trusted socket
        url = f"postgres://lw@{host}:{pg_server.port}/no_such_db"
        r = lw("list", url, "--json", "--password-env", "LOCKWARDEN_PG_PW",
               env=cli_env(LOCKWARDEN_PG_PW=PG_PASSWORD))
        assert r.returncode == 3
        (item,) = json.loads(r.stdout)
        assert item["error_kind"] == "no_database", item
        assert "the server has no database 'no_such_db'" in item["error"]
    ok = lw("list", f"postgres://lw@127.0.0.1:{pg_server.port}/postgres", "--json",
            "--password-env", "LOCKWARDEN_PG_PW", env=cli_env(LOCKWARDEN_PG_PW=PG_PASSWORD))
    assert ok.returncode == 0, ok.stderr


def test_a_foreign_redis_lock_does_not_claim_a_live_holder(redis_server: RedisServer) -> None:
    redis = pytest.importorskip("redis", reason="redis-py is not installed")
    client: Any = redis.Redis(port=redis_server.port)
    client.flushdb()
    client.set("lock:job", "opaque-token", px=600_000)
    try:
        r = lw("status", f"redis://127.0.0.1:{redis_server.port}/0#lock:job")
        assert r.returncode == 1
        assert "liveness: unknown" in r.stdout
        assert "safe action: wait: its holder is alive" not in r.stdout
        assert ("safe action: wait: its holder cannot be checked from here; its lease ends by "
                "itself unless the holder renews it") in r.stdout
    finally:
        client.close()


def test_list_says_no_locks_only_for_servers_that_answered(redis_server: RedisServer) -> None:
    redis = pytest.importorskip("redis", reason="redis-py is not installed")
    client: Any = redis.Redis(port=redis_server.port)
    client.flushdb()
    client.close()
    good = f"redis://127.0.0.1:{redis_server.port}/0"
    dead = f"redis://127.0.0.1:{free_port()}/0"
    alone = lw("list", dead)
    assert alone.returncode == 3 and alone.stdout == ""
    both = lw("list", good, dead)
    assert both.returncode == 3
    assert both.stdout == "(no locks on the 1 server that answered)\n"
    assert lw("list", good).stdout == "(no locks)\n"
