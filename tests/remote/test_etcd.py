"""The etcd backend against a real etcd, with locks taken by the real ``etcdctl lock``: listing
holder, lease TTL and waiters, a killed holder's lock ending with its lease, force release
(LeaseRevoke) waking a waiting ``etcdctl lock``, acquire compatible with it, errors as data
(docs/remote.md, "etcd")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("etcd3gw", reason="etcd3gw is not installed (pip install 'lockwarden[etcd]')")

from core import audit
from core.codes import Code
from core.record import Liveness, State
from core.remote import RemoteError, RemoteErrorKind
from core.remote.etcd.backend import EtcdSource
from tests.support.servers import EtcdServer, free_port, start_etcd

pytestmark = pytest.mark.slow  # real lock servers (started once a session) and processes

ROOT = Path(__file__).resolve().parents[2]


class Etcdctl:
    """A real ``etcdctl lock NAME [--ttl] -- sh -c 'echo <word>; exec sleep 100'`` (or, with
    ``word`` None, ``etcdctl lock NAME``, which prints its key when it holds the lock) in its
    own process group; :meth:`line` reads what it prints (the event that it holds the lock)."""

    def __init__(self, server: EtcdServer, name: str, *, ttl: int | None = None,
                 word: str | None = "held") -> None:
        # word None: no command; etcdctl itself prints its key once it holds the lock
        command = ["--", "sh", "-c", f"echo {word}; exec sleep 100"] if word else []
        args = ["lock", *([f"--ttl={ttl}"] if ttl else []), name, *command]
        self.proc = subprocess.Popen(server.etcdctl(*args), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)

    def line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()


@pytest.fixture
def src(etcd_server: EtcdServer) -> Iterator[EtcdSource]:
    s = EtcdSource([etcd_server.endpoint], prefix="locks/")
    yield s
    s.close()


@pytest.fixture
def procs() -> Iterator[list[Etcdctl]]:
    started: list[Etcdctl] = []
    yield started
    for p in started:
        p.kill()


def by_path(source: EtcdSource) -> dict[str, Any]:
    return {s.path: s for s in source.list_locks()}


def _wait_for_waiters(src: EtcdSource, name: str, count: int) -> Any:
    """The status of ``name`` once ``count`` contenders wait (a waiting etcdctl prints
    nothing: its key appearing is the only sign)."""
    deadline = time.monotonic() + 10
    while True:
        st: Any = src.status(name)
        if st is not None and len(st.record.metadata["waiters"]) == count:
            return st
        assert time.monotonic() < deadline, f"{count} waiter(s) on {name} never appeared"
        time.sleep(0.01)


def test_etcdctl_lock_is_listed_with_holder_ttl_and_waiter(src, etcd_server, procs) -> None:
    holder = Etcdctl(etcd_server, "locks/deploy", ttl=7)
    procs.append(holder)
    assert holder.line() == "held"
    waiter = Etcdctl(etcd_server, "locks/deploy", word="got")
    procs.append(waiter)
    st = _wait_for_waiters(src, "locks/deploy", 1)
    assert st.path == f"{src.base_url}#locks/deploy"
    listed = by_path(src)
    # one lock, whose waiter's key is no second lock (other tests' locks may be listed too)
    assert [p for p in listed if p.startswith(st.path)] == [st.path]
    st = listed[st.path]
    assert st.state is State.HELD and st.record.format == "etcd-mutex"
    lease = st.record.metadata["lease"]
    assert st.record.holder == f"lease {lease}"
    assert st.record.token == f"{lease}@{st.record.metadata['create_revision']}"
    assert st.record.metadata["key"] == f"locks/deploy/{lease}"
    assert st.record.ttl == 7.0
    lease = next(r for r in st.reasons if r.code is Code.LEASE)
    assert lease.get("granted_s") == 7.0 and 0 < float(lease.get("left_s") or 0) <= 7
    assert any(r.code is Code.WAITERS and r.get("count") == 1 for r in st.reasons)
    assert st.record.expires_at is not None
    print(f"\netcd lock: {st.record.holder}, {lease.get('left_s')} s left of 7, 1 waiter")


def test_a_killed_holder_lock_ends_with_its_lease(src, etcd_server, procs, capsys) -> None:
    holder = Etcdctl(etcd_server, "locks/killed", ttl=2)
    procs.append(holder)
    assert holder.line() == "held"
    st = src.status("locks/killed")
    assert st is not None
    # from the key's revision on: a DELETE is replayed even if it comes before the watch starts
    rev = st.record.metadata["create_revision"] + 1
    watch = subprocess.Popen(etcd_server.etcdctl("watch", f"--rev={rev}", "--prefix",
                                                 "locks/killed/"),
                             stdout=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        holder.kill()
        assert watch.stdout is not None
        assert watch.stdout.readline().strip() == "DELETE"  # the lease ended, the key went
        took = time.monotonic() - t0
    finally:
        watch.kill()
        watch.wait()
        if watch.stdout is not None:
            watch.stdout.close()
    assert src.status("locks/killed") is None
    assert took < 2 + 2  # <= TTL, plus etcd's expiry sweep
    with capsys.disabled():
        print(f"\netcd: SIGKILL of an etcdctl lock holder (--ttl=2) -> key deleted after "
              f"{took:.2f} s")


def test_force_release_wakes_a_waiting_etcdctl(src, etcd_server, procs, own_audit_log,
                                                capsys) -> None:
    holder = Etcdctl(etcd_server, "locks/force")
    procs.append(holder)
    assert holder.line() == "held"
    waiter = Etcdctl(etcd_server, "locks/force", word=None)
    procs.append(waiter)
    st = _wait_for_waiters(src, "locks/force", 1)
    waiter_key = st.record.metadata["waiters"][0]["key"]
    with pytest.raises(RemoteError) as err:  # held, not stale: not without force
        src.release(st.path, st.record.token)
    assert err.value.kind is RemoteErrorKind.REFUSED
    t0 = time.monotonic()
    out = src.release(st.path, st.record.token, force=True, reason="test")
    returned = time.monotonic() - t0
    assert waiter.line() == waiter_key  # etcdctl prints its key once it holds the lock
    took = time.monotonic() - t0
    assert out.released and out.action == "revoked"
    assert out.details["lease_keys"] == [st.record.metadata["key"]]
    now = src.status("locks/force")
    assert now is not None and now.record.token != st.record.token  # the waiter holds it
    entries = audit.read(str(own_audit_log))
    assert [(e.operation, e.result) for e in entries] == [
        ("release_refused", "refused"), ("force_release", "ok")]
    with capsys.disabled():
        print(f"\netcd force release -> waiting etcdctl lock acquired {took * 1e3:.2f} ms after"
              f" release() was called (release() returned after {returned * 1e3:.2f} ms, its"
              f" LeaseRevoke {out.seconds * 1e3:.2f} ms)")


def test_acquire_is_compatible_with_etcdctl_lock(src, etcd_server, procs) -> None:
    path, token = src.acquire("locks/ours", ttl=30, tag="deploy")
    st = src.status(path)
    assert st is not None and st.record.token == token
    assert st.record.holder.endswith(f"PID {os.getpid()}") and st.record.tag == "deploy"
    assert st.liveness is Liveness.ALIVE and st.record.acquired_at is not None
    waiter = Etcdctl(etcd_server, "locks/ours", word="got")
    procs.append(waiter)
    _wait_for_waiters(src, "locks/ours", 1)
    out = src.release(path, token)  # ours: no force needed
    assert out.released
    assert waiter.line() == "got"
    with pytest.raises(RemoteError) as err:  # etcdctl holds it now
        src.acquire("locks/ours", ttl=5)
    assert err.value.kind is RemoteErrorKind.HELD
    assert err.value.status is not None and err.value.status.record is not None
    after = src.status("locks/ours")
    assert after is not None and after.record.metadata["waiters"] == []  # our key is gone


def test_release_with_an_old_lease_never_removes_the_new_lock(src) -> None:
    path, first = src.acquire("locks/again", ttl=30)
    assert src.release(path, first).released
    _, second = src.acquire("locks/again", ttl=30)
    with pytest.raises(RemoteError) as err:
        src.release(path, first, force=True)
    assert err.value.kind is RemoteErrorKind.CHANGED
    assert err.value.status is not None and err.value.status.record is not None
    assert err.value.status.record.token == second
    assert src.release(path, second).released
    gone = src.release(path, second, force=True)
    assert gone.action == "gone" and not gone.released


def test_our_lock_whose_holder_died_is_stale_and_released_without_force(src, etcd_server
                                                                        ) -> None:
    code = ("from core.remote.etcd.backend import EtcdSource\n"
            f"print(EtcdSource(['{etcd_server.endpoint}']).acquire('locks/dead', ttl=60)[1])\n")
    token = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.strip()
    st = src.status("locks/dead")
    assert st is not None and st.record.token == token
    assert st.state is State.STALE and st.liveness is Liveness.DEAD
    assert src.release(st.path, token).released  # stale: no force needed


def test_unreachable_endpoint_is_a_clear_error() -> None:
    s = EtcdSource([f"http://127.0.0.1:{free_port()}"], timeout=2)
    with pytest.raises(RemoteError) as err:
        s.list_locks()
    assert err.value.kind is RemoteErrorKind.UNREACHABLE


def test_a_second_endpoint_serves_when_the_first_is_down(etcd_server) -> None:
    s = EtcdSource([f"http://127.0.0.1:{free_port()}", etcd_server.endpoint], timeout=2)
    assert isinstance(s.list_locks(), list)


def test_a_bad_token_or_another_servers_url_is_bad_key(src) -> None:
    for key, token in (("locks/x", "not-hex"), ("etcd://elsewhere:2379#locks/x", "1")):
        with pytest.raises(RemoteError) as err:
            src.release(key, token, force=True)
        assert err.value.kind is RemoteErrorKind.BAD_KEY


def test_auth_a_read_role_lists_but_may_not_revoke(tmp_path: Path) -> None:
    """Its own etcd with auth on (docs/specs/distributed-locks.md, "Auth (tested)"): user
    ``mon`` with role ``read`` on ``locks/`` lists the lock ``root`` holds, a revoke is
    ``permission_denied``; a wrong password is ``auth_failed``."""
    server = start_etcd(tmp_path / "etcd-auth")
    holder = None
    try:
        for args in (("user", "add", "root:rootpw", "--interactive=false"),
                     ("role", "add", "reader"),
                     ("role", "grant-permission", "reader", "--prefix=true", "read", "locks/"),
                     ("user", "add", "mon:monpw", "--interactive=false"),
                     ("user", "grant-role", "mon", "reader"), ("auth", "enable")):
            subprocess.run(server.etcdctl(*args), capture_output=True, check=True)
        holder = subprocess.Popen(server.etcdctl("--user=root:rootpw", "lock", "locks/a"),
                                  stdout=subprocess.PIPE, text=True)
        assert holder.stdout is not None and holder.stdout.readline().startswith("locks/a/")
        with EtcdSource([server.endpoint], prefix="locks/", username="mon",
                        password="monpw") as mon:
            (st,) = mon.list_locks()
            assert st.state is State.HELD and st.record is not None
            with pytest.raises(RemoteError) as err:
                mon.release(st.path, st.record.token or "", force=True)
            assert err.value.kind is RemoteErrorKind.PERMISSION_DENIED
            assert err.value.code == "7"
        with pytest.raises(RemoteError) as err:
            EtcdSource([server.endpoint], username="mon", password="wrong").list_locks()
        assert err.value.kind is RemoteErrorKind.AUTH_FAILED
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
            if holder.stdout is not None:
                holder.stdout.close()
        server.stop()


def test_follow_reports_a_real_etcdctl_lock_as_it_happens(src, etcd_server, procs) -> None:
    """The prefix watch (EtcdSource.follow) calls back when a real ``etcdctl lock`` takes a key
    under the prefix and when it lets go; ``stop`` ends it."""
    import threading

    stop = threading.Event()
    changed = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            src.follow(stop, changed.set)
        except BaseException as exc:  # reported by the test below
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        # the gateway sets the watch up asynchronously: a probe key under the prefix is put
        # until its event arrives, so the watch is known to be live
        deadline = time.monotonic() + 20
        while not changed.is_set():
            assert time.monotonic() < deadline, "the watch never reported the probe key"
            subprocess.run(etcd_server.etcdctl("put", "locks/probe", "x"), check=True,
                           capture_output=True, timeout=30)
            changed.wait(0.2)
        changed.clear()
        holder = Etcdctl(etcd_server, "locks/w", ttl=2, word="held")
        procs.append(holder)
        assert holder.line() == "held"
        assert changed.wait(10), "no watch event for the new lock key"
        changed.clear()
        holder.kill()  # its 2 s lease lapses and etcd deletes the key
        assert changed.wait(30), "no watch event for the key's removal"
    finally:
        stop.set()
        t.join(10)
    assert not t.is_alive() and errors == []
