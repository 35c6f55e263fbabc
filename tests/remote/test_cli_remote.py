"""``lockwarden list/status/release/reclaim`` with ``redis://``, ``postgres://`` and
``etcd://`` URLs: the real CLI (``python -m core``) against the real servers of the fixtures,
locks taken by the real libraries and ``etcdctl lock`` (docs/cli.md, "Locks on servers")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import ROOT, cli_env, lw
from tests.support.servers import EtcdServer, PgServer, RedisServer, free_port

pytestmark = pytest.mark.slow  # real lock servers (started once a session) and processes


def data(proc: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(proc.stdout)


@pytest.fixture
def rclient(redis_server: RedisServer) -> Any:
    redis = pytest.importorskip("redis", reason="redis-py is not installed")
    client = redis.Redis(port=redis_server.port)
    client.flushdb()
    yield client
    client.close()


def test_list_status_and_force_release_of_a_python_redis_lock(rclient, redis_server) -> None:
    redis_lock = pytest.importorskip("redis_lock", reason="python-redis-lock is not installed")
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    lock = redis_lock.Lock(rclient, "deploy", expire=60)
    assert lock.acquire(blocking=False)
    listed = lw("list", url, "--profile", "python-redis-lock", "--json")
    assert listed.returncode == 0, listed.stderr
    (item,) = data(listed)
    assert item["path"] == f"{url}#lock:deploy" and item["state"] == "held"
    text = lw("list", url)
    assert f"{url}#lock:deploy" in text.stdout and text.returncode == 0
    st = lw("status", f"{url}#lock:deploy", "--json")
    assert st.returncode == 1 and data(st)["state"] == "held"
    assert lw("status", f"{url}#lock:nothing").returncode == 0  # free
    refused = lw("release", f"{url}#lock:deploy")
    assert refused.returncode == 1 and refused.stderr.startswith("lockwarden: refused:")
    assert rclient.exists("lock:deploy")
    done = lw("release", f"{url}#lock:deploy", "--force", "--reason", "hung deploy")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"force-released {url}#lock:deploy (deleted; was held")
    assert not rclient.exists("lock:deploy")
    assert lw("release", f"{url}#lock:deploy", "--force").returncode == 1  # not held


def test_redis_py_keys_need_their_patterns(rclient, redis_server) -> None:
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    assert rclient.lock("deploy:web", timeout=30).acquire(blocking=False)
    assert data(lw("list", url, "--json")) == []  # python-redis-lock only by default
    (item,) = data(lw("list", url, "--pattern", "deploy:*", "--json"))
    assert item["format"] == "redis-py"
    st = lw("status", f"{url}#deploy:web", "--json")  # one key: its own pattern
    assert st.returncode == 1 and data(st)["format"] == "redis-py"


def test_reclaim_of_a_stale_redis_lock_takes_it_for_the_calling_shell(rclient, redis_server
                                                                      ) -> None:
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    rclient.set("lock:job", f"lockwarden:{os.uname().nodename}:{dead.pid}:"
                "8b11caeae77311f1bf4002fc00000001")
    st = data(lw("status", f"{url}#lock:job", "--json"))
    assert st["state"] == "stale"
    out = subprocess.run(["sh", "-c", f'{sys.executable} -m core reclaim "{url}#lock:job" '
                          '--ttl 30 --json; echo "shell=$$"'], capture_output=True, text=True,
                         cwd=ROOT, env=cli_env(), check=True)
    doc_line, shell_line = out.stdout.strip().splitlines()
    doc = json.loads(doc_line)
    assert doc["reclaimed_from"]["state"] == "stale"
    assert doc["pid"] == int(shell_line.removeprefix("shell=")) and doc["state"] == "held"
    assert 0 < rclient.pttl("lock:job") <= 30_000
    after = data(lw("status", f"{url}#lock:job", "--json"))  # the shell has exited since
    assert after["pid"] == doc["pid"] and after["state"] == "stale"


def test_reclaim_of_a_postgres_lock_is_a_usage_error(pg_server: PgServer) -> None:
    r = lw("reclaim", f"postgres://lw@127.0.0.1:{pg_server.port}/postgres#advisory/1")
    assert r.returncode == 2 and "release --force" in r.stderr


def test_postgres_advisory_lock_list_and_force_release(pg_server: PgServer) -> None:
    psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed")
    holder = psycopg.connect(**pg_server.conninfo(), autocommit=True)
    try:
        holder.execute("SELECT pg_advisory_lock(4242)")
        url = f"postgres://lw@127.0.0.1:{pg_server.port}/postgres"
        env = cli_env(LW_PG_PW="lw-secret")
        listed = lw("list", url, "--password-env", "LW_PG_PW", "--json", env=env)
        assert listed.returncode == 0, listed.stderr
        paths = [i["path"] for i in data(listed)]
        assert f"postgres://127.0.0.1:{pg_server.port}/postgres#advisory/4242" in paths
        refused = lw("release", f"{url}#advisory/4242", "--password-env", "LW_PG_PW", env=env)
        assert refused.returncode == 1
        done = lw("release", f"{url}#advisory/4242", "--force", "--password-env", "LW_PG_PW",
                  env=env)
        assert done.returncode == 0, done.stderr
        assert "(terminated;" in done.stdout
        assert holder.closed or holder.broken or _fails(holder)
    finally:
        holder.close()


def _fails(conn: Any) -> bool:
    try:
        conn.execute("SELECT 1")
    except Exception:
        return True
    return False


def test_wrong_password_and_unreachable_are_exit_3(pg_server: PgServer) -> None:
    url = f"postgres://lw@127.0.0.1:{pg_server.port}/postgres"
    bad = lw("list", url, "--password-env", "LW_PG_PW", env=cli_env(LW_PG_PW="wrong"))
    assert bad.returncode == 3 and len(bad.stderr.strip().splitlines()) == 1
    assert "password" in bad.stderr.lower() or "credentials" in bad.stderr.lower()
    assert "wrong" not in bad.stderr
    gone = lw("status", f"redis://127.0.0.1:{free_port()}/0#lock:x")
    assert gone.returncode == 3 and gone.stderr.startswith("lockwarden: ")
    assert len(gone.stderr.strip().splitlines()) == 1
    unset = lw("list", url, "--password-env", "LW_NOT_SET_ANYWHERE")
    assert unset.returncode == 2
    nokey = lw("status", url)
    assert nokey.returncode == 2 and "#KEY" in nokey.stderr
    mixed = lw("list", url, "/tmp")
    assert mixed.returncode == 2


def test_etcd_list_status_and_force_release(etcd_server: EtcdServer) -> None:
    pytest.importorskip("etcd3gw", reason="etcd3gw is not installed")
    holder = subprocess.Popen(etcd_server.etcdctl("lock", "--ttl=10", "clitest/lock", "--", "sh",
                                                  "-c", "echo held; exec sleep 100"),
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        url = f"etcd://127.0.0.1:{etcd_server.port}"
        (item,) = data(lw("list", f"{url}/clitest/", "--json"))
        assert item["path"] == f"{url}#clitest/lock" and item["state"] == "held"
        st = lw("status", f"{url}#clitest/lock")
        assert st.returncode == 1 and "etcd lease" in st.stdout
        assert lw("release", f"{url}#clitest/lock").returncode == 1
        done = lw("release", f"{url}#clitest/lock", "--force", "--reason", "test", "--json")
        assert done.returncode == 0 and data(done)["action"] == "revoked"
        assert lw("status", f"{url}#clitest/lock").returncode == 0
        taken = lw("reclaim", f"{url}#clitest/lock", "--ttl", "5", "--json")
        assert taken.returncode == 0 and data(taken)["reclaimed_from"] is None
        assert lw("release", f"{url}#clitest/lock", "--force").returncode == 0
    finally:
        os.killpg(holder.pid, 9)
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_the_cli_imports_no_driver_for_lock_files(tmp_path: Path) -> None:
    code = ("import sys, runpy\n"
            f"sys.argv = ['lockwarden', 'status', {str(tmp_path / 'a.lock')!r}]\n"
            "try:\n    runpy.run_module('core', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "bad = [m for m in ('psycopg', 'redis', 'etcd3gw', 'core.remote.sources',"
            " 'core.cli.remote') if m in sys.modules]\n"
            "print(bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.strip().splitlines()
    assert out[-1] == "[]"


def test_watch_a_redis_server_prints_initial_added_and_removed(redis_server: Any) -> None:
    """``watch URL --json``: the locks present (initial), then ready, then one line per change,
    from a real CLI process against the real server; SIGINT ends it with exit 0."""
    import json as _json
    import signal as _signal
    import subprocess as _subprocess

    import redis as _redis
    import redis_lock as _redis_lock

    client = _redis.Redis(port=redis_server.port)
    client.flushdb()
    first = _redis_lock.Lock(client, "w1", expire=60)
    assert first.acquire(blocking=False)
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    proc = _subprocess.Popen([sys.executable, "-m", "core", "watch", url, "--json"],
                             env=cli_env(),
                             stdout=_subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        events = [_json.loads(proc.stdout.readline()) for _ in range(2)]
        assert [(e["event"], e.get("path")) for e in events] == [
            ("initial", f"{url}#lock:w1"), ("ready", None)]
        second = _redis_lock.Lock(client, "w2", expire=60)
        assert second.acquire(blocking=False)
        first.release()
        got = {(e["event"], e["path"]) for e in
               (_json.loads(proc.stdout.readline()) for _ in range(2))}
        assert got == {("added", f"{url}#lock:w2"), ("removed", f"{url}#lock:w1")}
        second.release()
        proc.send_signal(_signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_an_etcd_lease_nothing_renews_is_not_said_to_be_renewed(etcd_server: EtcdServer) -> None:
    """``reclaim`` takes an etcd lock on a lease nobody keeps alive (it lapses after --ttl):
    ``status`` then says when the lease ends unless renewed, never that a keepalive renews
    it (etcd cannot tell whether one does)."""
    pytest.importorskip("etcd3gw", reason="etcd3gw is not installed")
    url = f"etcd://127.0.0.1:{etcd_server.port}#clitest/renewed"
    try:
        assert lw("reclaim", url, "--ttl", "30").returncode == 0
        out = lw("status", url).stdout
        [lease] = [line for line in out.splitlines() if line.startswith("reason: etcd lease")]
        assert "keepalive" not in lease, lease
        assert "left of 30s; it ends then unless its holder renews it" in lease, lease
    finally:
        lw("release", url, "--force")
