"""A lock server that drips its answers one byte every 2 s (a proxy on 127.0.0.1 in front of
the real servers of tests/support/servers.py) cannot hang ``list``, ``status`` or ``release``:
every remote operation has an overall deadline (docs/remote.md, "Deadline"; ``--deadline``,
a server table's ``deadline``), and the error names the server and the deadline. Human
``list`` does not say "(no locks)" for a server that failed."""

from __future__ import annotations

import json
import subprocess

import pytest

from core.config.model import Config, ServerSpec
from core.remote.base import RemoteError, RemoteErrorKind
from core.remote.sources import sources_from_config
from tests.support.cli import cli_env, lw
from tests.support.drip import DripProxy
from tests.support.servers import PG_PASSWORD, EtcdServer, PgServer, RedisServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("own_audit_log"),  # each test writes its own audit log
]

DEADLINE = "3"
"""Seconds: the ``--deadline`` of every operation here (``lw``'s 60 s cap only stops a hang)."""


def assert_timed_out(r: subprocess.CompletedProcess[str], what: str, server: str) -> None:
    assert r.returncode == 3, r.stderr
    assert r.stderr.strip() == (f"lockwarden: {what} {server}: no complete answer within 3 s "
                                "(the operation's deadline): the connection was cut")
    assert "(no locks)" not in r.stdout


def test_redis_list_status_release_end_at_the_deadline(redis_server: RedisServer) -> None:
    with DripProxy(redis_server.port) as proxy:
        server = f"redis://127.0.0.1:{proxy.port}/0"
        assert_timed_out(lw("list", server, "--deadline", DEADLINE), "list", server)
        assert_timed_out(lw("status", f"{server}#lock:x", "--deadline", DEADLINE), "status",
                         server)
        assert_timed_out(lw("release", f"{server}#lock:x", "--force", "--deadline", DEADLINE),
                         "release", server)
        js = lw("list", server, "--deadline", DEADLINE, "--json")
        assert json.loads(js.stdout) == [{
            "kind": "error", "path": server, "error_kind": "timed_out",
            "error": f"list {server}: no complete answer within 3 s (the operation's "
                     "deadline): the connection was cut"}]


def test_postgres_list_ends_at_the_deadline_when_the_query_drips(pg_server: PgServer) -> None:
    with DripProxy(pg_server.port, drip_after=b"pg_locks") as proxy:
        server = f"postgres://127.0.0.1:{proxy.port}/postgres"
        r = lw("list", f"postgres://lw@127.0.0.1:{proxy.port}/postgres", "--deadline",
               DEADLINE, "--password-env", "LOCKWARDEN_PG_PW",
               env=cli_env(LOCKWARDEN_PG_PW=PG_PASSWORD))
        assert_timed_out(r, "list", server)


def test_etcd_list_status_release_end_at_the_deadline(etcd_server: EtcdServer) -> None:
    with DripProxy(etcd_server.port) as proxy:
        server = f"etcd://127.0.0.1:{proxy.port}"
        assert_timed_out(lw("list", server, "--deadline", DEADLINE), "list", server)
        assert_timed_out(lw("status", f"{server}#locks/x", "--deadline", DEADLINE), "status",
                         server)
        assert_timed_out(lw("release", f"{server}#locks/x", "--force", "--deadline",
                            DEADLINE), "release", server)


def test_a_server_tables_deadline_bounds_the_app_s_listing(redis_server: RedisServer) -> None:
    with DripProxy(redis_server.port) as proxy:
        spec = ServerSpec(kind="redis", url=f"redis://127.0.0.1:{proxy.port}/0", deadline=2)
        (source,), problems = sources_from_config(Config(servers=[spec]))
        assert problems == []
        with source, pytest.raises(RemoteError) as err:
            source.list_locks()
        assert err.value.kind is RemoteErrorKind.TIMED_OUT
        assert "within 2 s" in str(err.value)


def test_a_deadline_out_of_bounds_is_a_usage_error() -> None:
    r = lw("list", "redis://127.0.0.1:1/0", "--deadline", "0")
    assert r.returncode == 2 and "--deadline" in r.stderr
