"""Server locks are spoken of as what they are (docs/remote.md, "What a release does"): the
Force release confirmation and the detail pane of a PostgreSQL advisory lock say that the
holder's session is terminated (its PID, user and application, its transaction rolled back),
of a Redis key that the key is deleted (and its token), of an etcd lock that its lease is
revoked; never "delete the lock file", never "marker (the file is the lock)", never "outside
the watched directories"; a Redis key whose holder cannot be checked is never "alive". The
words come from the record's data (``LockRecord.removal``). Real servers, real clients (psycopg,
python-redis-lock, redis-py, ``etcdctl lock``), real offscreen Qt."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed")
redis = pytest.importorskip("redis", reason="redis-py is not installed")
redis_lock = pytest.importorskip("redis_lock", reason="python-redis-lock is not installed")
pytest.importorskip("etcd3gw", reason="etcd3gw is not installed")

from app.dialogs import force_dialog  # noqa: E402
from app.table.detail import DetailPane  # noqa: E402
from core.reasons import Code  # noqa: E402
from core.record import Liveness, LockStatus, State  # noqa: E402
from core.remote.etcd.backend import EtcdSource  # noqa: E402
from core.remote.postgres.backend import PostgresSource  # noqa: E402
from core.remote.redis.backend import PYTHON_REDIS_LOCK, RedisSource, redis_py_profile  # noqa: E402
from tests.support.servers import EtcdServer, PgServer, RedisServer  # noqa: E402

pytestmark = pytest.mark.slow  # real lock servers (started once a session) and processes

FILE_WORDS = ("lock file", "the file is the lock", "outside the watched directories")


def _pane(qtbot: Any, st: LockStatus) -> DetailPane:
    pane = DetailPane()
    qtbot.addWidget(pane)
    # the app passes outside=True for a path under no watched directory: a URL is under none
    pane.show_status(st, age="", outside=True)
    return pane


def _says_no_file(pane: DetailPane, dialog_text: str) -> None:
    texts = [lab.text() for lab in pane.values.values()] + [dialog_text]
    for text in texts:
        for words in FILE_WORDS:
            assert words not in text, (words, text)


def _wait(cond: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_postgres_advisory_lock_is_a_session_to_terminate(qtbot: Any,
                                                           pg_server: PgServer) -> None:
    holder = psycopg.connect(**pg_server.conninfo(application_name="nightly-report"),
                             autocommit=True)
    try:
        holder.execute("SELECT pg_advisory_lock(4242)")
        pid = holder.info.backend_pid
        with PostgresSource(pg_server.sockdir, pg_server.port, "postgres", user="lw") as src:
            st = next(s for s in src.list_locks() if s.path.endswith("#advisory/4242"))
        assert st.kind == "server" and st.record is not None
        assert [r.code for r in st.record.removal] == [Code.TERMINATES_SESSION]
        assert st.to_dict()["removal"][0]["code"] == "terminates_session"
        words = (f"terminate PostgreSQL session PID {pid} of user 'lw' (application "
                 "'nightly-report', its open transaction rolled back)")
        dlg = force_dialog(st, reclaim=False)
        qtbot.addWidget(dlg)
        text = dlg.label.text()
        assert f"This will {words}." in text
        assert "Force release advisory/4242?" in text
        pane = _pane(qtbot, st)
        assert pane.values["Force release"].text() == words
        assert pane.values["Kind"].text().startswith("PostgreSQL advisory lock")
        _says_no_file(pane, text)
    finally:
        holder.close()


def test_a_redis_key_is_a_key_to_delete_and_its_unknown_holder_is_not_alive(
        qtbot: Any, redis_server: RedisServer) -> None:
    client = redis.Redis(port=redis_server.port)
    client.flushdb()
    held = redis_lock.Lock(client, "deploy", expire=60)
    assert held.acquire(blocking=False)
    # redis-py's own Lock without a timeout: a key whose holder nothing names
    forever = client.lock("jobs:nightly", timeout=None)
    assert forever.acquire(blocking=False)
    try:
        src = RedisSource("127.0.0.1", redis_server.port,
                          profiles=[PYTHON_REDIS_LOCK, redis_py_profile("jobs:*")])
        with src:
            sts = {s.path.split("#", 1)[1]: s for s in src.list_locks()}
        st = sts["lock:deploy"]
        assert st.record is not None
        token = st.record.token
        assert st.kind == "server" and token
        words = (f"delete Redis key 'lock:deploy' (token {token}) and wake its waiters "
                 "(list 'lock-signal:deploy')")
        dlg = force_dialog(st, reclaim=False)
        qtbot.addWidget(dlg)
        assert f"This will {words}." in dlg.label.text()
        pane = _pane(qtbot, st)
        assert pane.values["Force release"].text() == words
        assert pane.values["Kind"].text().startswith("Redis key")
        _says_no_file(pane, dlg.label.text())

        unknown = sts["jobs:nightly"]
        assert unknown.state is State.HELD and unknown.liveness is Liveness.UNKNOWN
        pane = _pane(qtbot, unknown)
        safe = pane.values["Safe action"].text()
        assert "alive" not in safe
        assert safe == ("wait: its holder cannot be checked from here; it turns stale once "
                        "older than the stale limit")
        # with a lease, what ends it
        leased = _pane(qtbot, st)
        assert "its lease ends by itself" in leased.values["Safe action"].text()
    finally:
        held.release()
        forever.release()


@pytest.fixture
def etcdctl_holder(etcd_server: EtcdServer) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(etcd_server.etcdctl("lock", "locks/deploy", "--", "sh", "-c",
                                                "echo held; exec sleep 100"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    yield proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for f in (proc.stdout, proc.stderr):
        if f is not None:
            f.close()


def test_an_etcd_lock_is_a_lease_to_revoke(qtbot: Any, etcd_server: EtcdServer,
                                          etcdctl_holder: subprocess.Popen[str]) -> None:
    assert etcdctl_holder.stdout is not None
    assert etcdctl_holder.stdout.readline().strip() == "held"  # etcdctl holds the lock
    with EtcdSource([etcd_server.endpoint], prefix="locks/") as src:
        st: Any = None

        def found() -> bool:
            nonlocal st
            st = src.status("locks/deploy")
            return st is not None

        _wait(found, "etcdctl's lock never appeared")
    lease = st.record.token
    assert st.kind == "server" and lease
    dlg = force_dialog(st, reclaim=False)
    qtbot.addWidget(dlg)
    assert f"This will revoke etcd lease {lease}." in dlg.label.text()
    pane = _pane(qtbot, st)
    assert pane.values["Force release"].text() == f"revoke etcd lease {lease}"
    assert pane.values["Kind"].text().startswith("etcd key on a lease")
    _says_no_file(pane, dlg.label.text())
