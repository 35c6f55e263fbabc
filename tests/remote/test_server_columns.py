"""Locks on real servers in the app (docs/gui.md, "Window"; docs/remote.md, "Paths"): the lock
-- the Redis key, the etcd lock's name, the PostgreSQL lock id -- is the Lock, the server's URL
the Directory (the URL's ``/`` and ``#`` never split them elsewhere); an age counted from when
the lock was first seen is shown as a lower bound; the detail pane shows the server's record,
not a file. Real redis-server, etcd (with a real ``etcdctl lock``) and PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any

import pytest

from app.table.columns import Col, display, static_text
from tests.support.servers import EtcdServer, PgServer, RedisServer

pytestmark = pytest.mark.slow  # real lock servers (started once a session) and processes


def cells(st: Any) -> tuple[str, str]:
    return static_text(st, Col.LOCK, "here"), static_text(st, Col.DIRECTORY, "here")


def test_a_redis_key_is_the_lock_and_the_database_url_the_directory(
        redis_server: RedisServer) -> None:
    redis = pytest.importorskip("redis")
    from core.remote.redis.backend import RedisSource, redis_py_profile

    client = redis.Redis(port=redis_server.port)
    client.set("deploy:nc", "token-1", px=60_000)
    try:
        with RedisSource("127.0.0.1", redis_server.port,
                         profiles=(redis_py_profile("deploy:*"),)) as src:
            [st] = [s for s in src.list_locks() if s.path.endswith("#deploy:nc")]
        assert cells(st) == ("deploy:nc", f"redis://127.0.0.1:{redis_server.port}/0")
    finally:
        client.delete("deploy:nc")
        client.close()


def test_an_etcd_lock_name_is_the_lock_and_the_server_url_the_directory(
        etcd_server: EtcdServer) -> None:
    pytest.importorskip("etcd3gw")
    from core.remote.etcd.backend import EtcdSource

    holder = subprocess.Popen(etcd_server.etcdctl("lock", "locks/deploy", "--", "sh", "-c",
                                                  "echo held; exec sleep 100"),
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        src = EtcdSource([etcd_server.endpoint], prefix="locks/")
        try:
            [st] = [s for s in src.list_locks() if s.path.endswith("deploy")]
        finally:
            src.close()
        lock, directory = cells(st)
        assert lock == "locks/deploy"
        assert directory == st.path.split("#")[0] and "#" not in directory
        assert directory.startswith("etcd://")
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_a_postgres_lock_id_is_the_lock_and_the_database_url_the_directory(
        pg_server: PgServer) -> None:
    psycopg = pytest.importorskip("psycopg")
    from core.remote.postgres.backend import PostgresSource

    conn = psycopg.connect(**pg_server.conninfo(application_name="flyway"), autocommit=True)
    try:
        conn.execute("SELECT pg_advisory_lock(42)")
        src = PostgresSource(pg_server.sockdir, pg_server.port, "postgres", user="lw")
        try:
            [st] = [s for s in src.list_locks() if s.path.endswith("#advisory/42")]
        finally:
            src.close()
        lock, directory = cells(st)
        assert lock == "advisory/42"
        assert directory == st.path.split("#")[0] and directory.endswith("/postgres")
    finally:
        conn.close()


def test_an_etcd_locks_age_is_never_a_made_up_zero(etcd_server: EtcdServer) -> None:
    """etcd records no time: a lock's age is only "at least since first seen". A command that
    looks once says the age is unknown, never "0s" for a lock held for minutes; the app's
    table says "≥" the time it has watched it."""
    pytest.importorskip("etcd3gw")
    from datetime import timedelta

    from core.cli.output import status_text, table_row
    from core.remote.etcd.backend import EtcdSource

    holder = subprocess.Popen(etcd_server.etcdctl("lock", "locks/age", "--", "sh", "-c",
                                                  "echo held; exec sleep 100"),
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        src = EtcdSource([etcd_server.endpoint], prefix="locks/")
        try:
            [st] = [s for s in src.list_locks() if s.path.endswith("#locks/age")]
        finally:
            src.close()
        assert "age: unknown (first seen now)" in status_text(st).splitlines()
        assert table_row(st)[1] == "?"
        later = st.checked_at + timedelta(seconds=200)
        assert display(st, Col.AGE, later, "here") == "≥ 3m 20s"
        assert display(st, Col.AGE, st.checked_at, "here") == "?"
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_the_detail_pane_shows_a_server_locks_record_not_a_file(
        qtbot: Any, redis_server: RedisServer, lockdir: Any) -> None:
    """A lock on a server has no file: the detail pane's raw pane is its record, so titled,
    and the table's search finds it by its Lock and Directory texts."""
    redis = pytest.importorskip("redis")
    from app.table.columns import SEARCHED, searched_texts
    from app.table.detail import DetailPane
    from core.remote.redis.backend import RedisSource, redis_py_profile
    from core.verdicts.inspect import inspect

    client = redis.Redis(port=redis_server.port)
    client.set("deploy:raw", "token-2", px=60_000)
    try:
        with RedisSource("127.0.0.1", redis_server.port,
                         profiles=(redis_py_profile("deploy:*"),)) as src:
            [st] = [s for s in src.list_locks() if s.path.endswith("#deploy:raw")]
    finally:
        client.delete("deploy:raw")
        client.close()
    pane = DetailPane()
    qtbot.addWidget(pane)
    pane.show_status(st)
    assert pane.raw_title.text() == "<b>Raw record</b>"
    assert pane.raw.accessibleName() == "The lock's record on its server"
    texts = dict(zip(SEARCHED, searched_texts(st, "here"), strict=True))
    assert texts[Col.LOCK] == "deploy:raw" and texts[Col.DIRECTORY] == cells(st)[1]
    (lockdir / "a.lock").write_text("")
    pane.show_status(inspect(str(lockdir / "a.lock")))
    assert pane.raw_title.text() == "<b>Raw file</b>"
    assert pane.raw.placeholderText() == "(file content)"
