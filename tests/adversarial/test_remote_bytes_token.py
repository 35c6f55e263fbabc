"""A Redis lock whose value is not UTF-8 can be listed, shown and force-released: the token
round-trips as the exact bytes read (docs/remote.md, "Redis"), and a key that took other
bytes meanwhile is not deleted. Real redis-server (tests/support/servers.py), real CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.remote.base import RemoteError, RemoteErrorKind
from core.remote.sources import source_from_url
from tests.support.cli import lw
from tests.support.servers import RedisServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("own_audit_log"),  # each test writes its own audit log
]

VALUE = b"\xff\xfe\x80tok"


@pytest.fixture
def rclient(redis_server: RedisServer) -> Any:
    redis = pytest.importorskip("redis", reason="redis-py is not installed")
    client = redis.Redis(port=redis_server.port)
    client.flushdb()
    yield client
    client.close()


def test_cli_force_releases_a_lock_whose_value_is_not_utf8(rclient: Any, redis_server: RedisServer,
                                                          own_audit_log: Path) -> None:
    rclient.set(b"lock:bin", VALUE, px=600_000)
    url = f"redis://127.0.0.1:{redis_server.port}/0#lock:bin"
    st = lw("status", url, "--json", text=False)
    assert st.returncode == 1
    item = json.loads(st.stdout.decode("utf-8"))  # strict UTF-8 on stdout
    assert item["state"] == "held" and "\\xff\\xfe\\x80tok" in item["holder"]
    done = lw("release", url, "--force", "--reason", "binary token", text=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode("utf-8").startswith("force-released ")
    assert not rclient.exists(b"lock:bin")
    entry = json.loads(own_audit_log.read_text().splitlines()[-1])
    assert entry["operation"] == "force_release" and entry["result"] == "ok"


def test_api_release_checks_the_exact_bytes(rclient: Any, redis_server: RedisServer) -> None:
    rclient.set(b"lock:bin", VALUE, px=600_000)
    with source_from_url(f"redis://127.0.0.1:{redis_server.port}/0") as source:
        (seen,) = source.list_locks()
        assert seen.record is not None and seen.record.token is not None
        assert seen.record.metadata["token_hex"] == VALUE.hex()
        rclient.set(b"lock:bin", b"\xff\xfe\x81tok", px=600_000)  # taken again: other bytes
        with pytest.raises(RemoteError) as err:
            source.release(seen.path, seen.record.token, force=True)
        assert err.value.kind is RemoteErrorKind.CHANGED
        assert rclient.get(b"lock:bin") == b"\xff\xfe\x81tok"
        (now,) = source.list_locks()
        assert now.record is not None and now.record.token is not None
        assert source.release(now.path, now.record.token, force=True).released
    assert not rclient.exists(b"lock:bin")
