"""The Redis backend against a real redis-server, with locks taken by the real libraries
(redis-py ``Lock``, python-redis-lock): listing, TTL, stale without TTL, compare-and-delete
release, waking python-redis-lock's waiters, errors as data (docs/remote.md, "Redis")."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

redis = pytest.importorskip("redis", reason="redis-py is not installed (pip install redis)")

from core import audit  # noqa: E402
from core.reasons import Code  # noqa: E402
from core.record import Liveness, State  # noqa: E402
from core.remote import RemoteError, RemoteErrorKind  # noqa: E402
from core.remote.redis.backend import (  # noqa: E402
    PYTHON_REDIS_LOCK,
    RedisSource,
    parse_own_token,
    redis_py_profile,
    uuid1_time,
)
from core.stale_policy import StalePolicy  # noqa: E402
from tests.support.servers import RedisServer, free_port, start_redis  # noqa: E402

pytestmark = pytest.mark.slow  # real lock servers (started once a session) and processes

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def r(redis_server: RedisServer) -> Any:
    client = redis.Redis(port=redis_server.port)
    client.flushdb()
    return client


@pytest.fixture
def src(redis_server: RedisServer) -> Iterator[RedisSource]:
    s = RedisSource("127.0.0.1", redis_server.port,
                    profiles=(PYTHON_REDIS_LOCK, redis_py_profile("deploy:*")))
    yield s
    s.close()


def by_path(source: RedisSource) -> dict[str, Any]:
    """Verdicts by path (``Any``: the tests read ``record`` without narrowing it)."""
    return {s.path: s for s in source.list_locks()}


def _codes(status) -> list[Code]:
    return [x.code for x in status.reasons]


def _status(err: pytest.ExceptionInfo[RemoteError]) -> Any:
    return err.value.status


def uuid1_at(when: datetime) -> str:
    """A uuid1 hex token whose time field is ``when`` (as redis-py's default token holds)."""
    ticks = int((when - datetime(1582, 10, 15, tzinfo=UTC)).total_seconds() * 10_000_000)
    u = uuid.uuid1()
    return uuid.UUID(fields=(ticks & 0xFFFFFFFF, (ticks >> 32) & 0xFFFF,
                             ((ticks >> 48) & 0x0FFF) | 0x1000, u.clock_seq_hi_variant,
                             u.clock_seq_low, u.node)).hex


def test_redis_py_lock_is_listed_with_its_token_ttl_and_age(r, src) -> None:
    lock = r.lock("deploy:prod", timeout=30)
    assert lock.acquire(blocking=False)
    st = by_path(src)[src.path_of("deploy:prod")]
    assert st.state is State.HELD and st.record.format == "redis-py"
    assert st.record.token == lock.local.token.decode()
    assert st.record.holder == f"uuid1 node {uuid.getnode():012x}"
    assert 25 < (st.record.expires_at - st.checked_at).total_seconds() <= 30
    assert abs((st.record.acquired_at - datetime.now(UTC)).total_seconds()) < 5
    assert _codes(st)[-2:] == [Code.HELD_FOR, Code.EXPIRES_IN]
    assert src.path_of("deploy:prod") == f"redis://127.0.0.1:{src._kwargs['port']}/0#deploy:prod"


def test_python_redis_lock_with_and_without_expiry(r, src) -> None:
    redis_lock = pytest.importorskip("redis_lock", reason="python-redis-lock is not installed")
    timed = redis_lock.Lock(r, "timed", expire=10)
    forever = redis_lock.Lock(r, "forever")
    assert timed.acquire(blocking=False) and forever.acquire(blocking=False)
    locks = by_path(src)
    t, f = locks[src.path_of("lock:timed")], locks[src.path_of("lock:forever")]
    assert t.state is State.HELD and t.record.tag == "timed"
    assert t.record.token == timed.id.decode() if isinstance(timed.id, bytes) else timed.id
    assert 0 < t.record.metadata["pttl_ms"] <= 10_000
    assert f.state is State.HELD and f.record.expires_at is None
    assert Code.NO_TTL in _codes(f) and Code.AGE_FROM_FIRST_SEEN in _codes(f)
    assert f.record.metadata["signal"] == "lock-signal:forever"
    assert not any("signal" in p for p in locks)  # the signal lists are no locks


def test_a_lock_without_ttl_turns_stale_past_the_policy(r, redis_server) -> None:
    old = uuid1_at(datetime.now(UTC) - timedelta(hours=2))
    assert r.lock("deploy:old").acquire(blocking=False, token=old)
    young = r.lock("deploy:young")
    assert young.acquire(blocking=False)
    with RedisSource("127.0.0.1", redis_server.port, profiles=(redis_py_profile("deploy:*"),),
                     policy=StalePolicy(stale_after=3600)) as s:
        locks = by_path(s)
    o, y = locks[s.path_of("deploy:old")], locks[s.path_of("deploy:young")]
    assert o.state is State.STALE and _codes(o)[-1] is Code.OLDER_THAN_STALE_AFTER
    assert 7100 < o.age_s < 7300
    assert y.state is State.HELD and _codes(y)[-1] is Code.YOUNGER_THAN_STALE_AFTER


def test_a_lapsed_ttl_makes_the_lock_disappear(r, src) -> None:
    lock = r.lock("deploy:short", timeout=0.3)
    assert lock.acquire(blocking=False)
    assert by_path(src)[src.path_of("deploy:short")].state is State.HELD
    deadline = time.monotonic() + 5
    while src.path_of("deploy:short") in by_path(src):
        assert time.monotonic() < deadline, "the key outlived its TTL"
        time.sleep(0.02)


def test_our_lock_whose_holder_was_killed_is_stale_at_once(r, redis_server) -> None:
    code = ("import sys; from core.remote.redis.backend import RedisSource, PYTHON_REDIS_LOCK\n"
            f"s = RedisSource('127.0.0.1', {redis_server.port})\n"
            "print(s.acquire('killed', ttl=None)[1], flush=True); sys.stdin.read()\n")
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdin is not None
    token = child.stdout.readline().strip()
    parsed = parse_own_token(token)
    assert parsed is not None
    pid = parsed[1]
    with RedisSource("127.0.0.1", redis_server.port) as s:
        alive = by_path(s)[s.path_of("lock:killed")]
        assert alive.state is State.HELD and alive.liveness is Liveness.ALIVE
        assert alive.record.pid == pid == child.pid
        child.kill()
        child.wait()
        child.stdout.close()
        child.stdin.close()
        dead = by_path(s)[s.path_of("lock:killed")]
    assert dead.state is State.STALE and dead.liveness is Liveness.DEAD
    assert _codes(dead)[-1] is Code.OURS_HOLDER_DEAD


def test_release_with_an_old_token_never_removes_the_new_lock(r, src) -> None:
    first = r.lock("deploy:x", timeout=10)
    assert first.acquire(blocking=False)
    seen = by_path(src)[src.path_of("deploy:x")].record.token
    r.delete("deploy:x")  # the first lease is over (as when its TTL lapses)
    second = r.lock("deploy:x", timeout=10)
    assert second.acquire(blocking=False)
    with pytest.raises(RemoteError) as err:
        src.release(src.path_of("deploy:x"), seen, force=True, reason="test")
    assert err.value.kind is RemoteErrorKind.CHANGED
    assert _status(err).record.token == second.local.token.decode()
    assert r.get("deploy:x") == second.local.token
    second.release()  # the library still owns it
    out = src.release("deploy:x", seen, force=True)
    assert out.released is False and out.action == "gone"


def test_force_release_wakes_a_python_redis_lock_waiter(r, src, redis_server, capsys) -> None:
    redis_lock = pytest.importorskip("redis_lock", reason="python-redis-lock is not installed")
    holder = redis_lock.Lock(r, "rep")  # no expire: its waiters BLPOP with no timeout
    assert holder.acquire(blocking=False)
    woke = threading.Event()
    woke_at: list[float] = []
    waiter_conn = redis.Redis(port=redis_server.port, socket_timeout=None)

    def wait() -> None:
        redis_lock.Lock(waiter_conn, "rep").acquire()
        woke_at.append(time.monotonic())
        woke.set()

    th = threading.Thread(target=wait, daemon=True)
    th.start()
    deadline = time.monotonic() + 5
    while not any(c.get("cmd") == "blpop" for c in r.client_list()):  # the waiter is blocked
        assert time.monotonic() < deadline
        time.sleep(0.002)
    st = by_path(src)[src.path_of("lock:rep")]
    with pytest.raises(RemoteError) as err:  # not stale, not ours: needs force
        src.release(st.path, st.record.token)
    assert err.value.kind is RemoteErrorKind.REFUSED
    t0 = time.monotonic()
    out = src.release(st.path, st.record.token, force=True, reason="stuck deploy")
    assert woke.wait(5), "the waiter never woke"
    took = woke_at[0] - t0
    th.join(5)
    assert out.released and out.details["signal"] == "lock-signal:rep"
    assert r.get("lock:rep") not in (None, st.record.token.encode())  # the waiter holds it now
    with capsys.disabled():
        print(f"\nredis force release -> python-redis-lock waiter acquired {took * 1e3:.2f} ms"
              " after release() was called"
              f" (compare-and-delete {out.seconds * 1e3:.2f} ms)")


def test_acquire_release_and_audit(src, own_audit_log) -> None:
    path, token = src.acquire("job", ttl=5)
    assert path == src.path_of("lock:job") and parse_own_token(token) is not None
    assert uuid1_time(token.rsplit(":", 1)[1]) is not None
    with pytest.raises(RemoteError) as err:
        src.acquire("job", ttl=5)
    assert err.value.kind is RemoteErrorKind.HELD and _status(err).record.token == token
    with pytest.raises(RemoteError) as err:
        src.acquire("other", ttl=0)
    assert err.value.kind is RemoteErrorKind.BAD_KEY
    with pytest.raises(RemoteError) as err:  # matches no pattern: could never be listed
        src.acquire("elsewhere", ttl=5, profile=redis_py_profile("deploy:*"))
    assert err.value.kind is RemoteErrorKind.BAD_KEY
    p2, t2 = src.acquire("deploy:ours", ttl=None, profile=src.profiles[1])
    assert p2 == src.path_of("deploy:ours")
    assert by_path(src)[p2].record.format == "redis-py"
    assert src.release(p2, t2).released
    out = src.release(path, token)  # ours: no force needed
    assert out.released and out.action == "deleted"
    entries = audit.read(str(own_audit_log))
    assert [(e.operation, e.result, e.lock_path) for e in entries] == [
        ("acquire", "ok", path), ("acquire_refused", "refused", path),
        ("acquire", "ok", p2), ("release", "ok", p2), ("release", "ok", path)]
    assert audit.verify(str(own_audit_log)).ok


def test_a_url_of_another_server_is_refused(src) -> None:
    with pytest.raises(RemoteError) as err:
        src.release("redis://elsewhere:6379/0#lock:job", "t", force=True)
    assert err.value.kind is RemoteErrorKind.BAD_KEY


def test_unreachable_server_is_a_clear_error() -> None:
    s = RedisSource("127.0.0.1", free_port(), socket_timeout=2)
    with pytest.raises(RemoteError) as err:
        s.list_locks()
    assert err.value.kind is RemoteErrorKind.UNREACHABLE
    assert err.value.url == s.base_url and err.value.detail


def test_wrong_password_is_a_clear_error(tmp_path: Path) -> None:
    server = start_redis(tmp_path / "auth", password="right")
    try:
        for password in ("wrong", None):
            with pytest.raises(RemoteError) as err:
                RedisSource("127.0.0.1", server.port, password=password).list_locks()
            assert err.value.kind is RemoteErrorKind.AUTH_FAILED, password
        assert RedisSource("127.0.0.1", server.port, password="right").list_locks() == []
    finally:
        server.stop()
