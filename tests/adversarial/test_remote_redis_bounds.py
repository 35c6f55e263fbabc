"""Redis reads are bounded (docs/remote.md, "Redis"): a lock's value is read up to 4 KiB
(a longer one is identified by its length and the SHA-1 of its first 4 KiB, and can still be
force-released, never when it changed), and a listing stops at its key bound with a visible
"more than N locks". Real redis-server (tests/support/servers.py), real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from core.remote.base import RemoteError, RemoteErrorKind
from core.remote.redis.backend import MAX_LOCKS, PYTHON_REDIS_LOCK, RedisSource
from tests.support.cli import ROOT, cli_env, lw
from tests.support.servers import RedisServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("own_audit_log"),  # each test writes its own audit log
]

BIG = 100 * 1024 * 1024
MEASURE = ("import resource, subprocess, sys; "
           "p = subprocess.run(sys.argv[1:], capture_output=True); "
           "sys.stdout.buffer.write(p.stdout); "
           "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


@pytest.fixture
def rclient(redis_server: RedisServer) -> Any:
    redis = pytest.importorskip("redis", reason="redis-py is not installed")
    client = redis.Redis(port=redis_server.port)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


def test_a_huge_value_is_listed_in_little_memory_and_released(rclient: Any,
                                                              redis_server: RedisServer) -> None:
    rclient.set("lock:huge", b"t" * BIG, px=600_000)
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    out = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-m", "core", "list",
                          url, "--json"], capture_output=True, text=True, timeout=120,
                         cwd=ROOT, env=cli_env())
    *listing, last = out.stdout.splitlines()
    code, maxrss_kib = (int(x) for x in last.split())
    assert code == 0, out.stderr
    (item,) = json.loads("\n".join(listing))
    assert item["path"] == f"{url}#lock:huge" and item["state"] == "held"
    assert maxrss_kib * 1024 < BIG  # the value was never read whole
    done = lw("release", f"{url}#lock:huge", "--force", "--reason", "huge value", timeout=120)
    assert done.returncode == 0, done.stderr
    assert not rclient.exists("lock:huge")


def test_a_long_value_that_changed_is_not_deleted(rclient: Any,
                                                  redis_server: RedisServer) -> None:
    rclient.set("lock:long", b"a" * 10_000, px=600_000)
    with RedisSource(port=redis_server.port) as source:
        (seen,) = source.list_locks()
        assert seen.record is not None and seen.record.token is not None
        rclient.set("lock:long", b"b" + b"a" * 9_999, px=600_000)  # same length, new head
        with pytest.raises(RemoteError) as err:
            source.release(seen.path, seen.record.token, force=True)
        assert err.value.kind is RemoteErrorKind.CHANGED
        assert rclient.exists("lock:long")


def test_a_listing_stops_at_its_bound_and_says_so(rclient: Any,
                                                  redis_server: RedisServer) -> None:
    pipe = rclient.pipeline(transaction=False)
    for i in range(MAX_LOCKS + 5):
        pipe.set(f"lock:k{i}", f"t{i}", px=600_000)
    pipe.execute()
    with RedisSource(port=redis_server.port, profiles=(PYTHON_REDIS_LOCK,),
                     max_locks=7) as small:
        assert len(small.list_locks()) == 7 and small.more_than == 7
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    text = lw("list", url, timeout=120)
    assert text.returncode == 0
    assert text.stderr == (f"lockwarden: {url}: more than {MAX_LOCKS} locks: only the first "
                           f"{MAX_LOCKS} are listed\n")
    js = json.loads(lw("list", url, "--json", timeout=120).stdout)
    assert [x for x in js if x.get("kind") == "more"] == [{
        "kind": "more", "path": url, "listed": MAX_LOCKS,
        "note": f"more than {MAX_LOCKS} locks: only the first {MAX_LOCKS} are listed"}]
    assert len(js) == MAX_LOCKS + 1
