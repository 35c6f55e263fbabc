"""etcd accepts an explicit lease ID at grant: a new holder that re-grants the old holder's
lease ID and writes the same key holds another lock, and a release with the token seen
before must not revoke it (docs/remote.md, "etcd": the token carries the key's create
revision). Real etcd (tests/support/servers.py), its real HTTP gateway."""

from __future__ import annotations

import base64
import json
import urllib.request
from typing import Any

import pytest

from core.remote.base import RemoteError, RemoteErrorKind
from core.remote.etcd.backend import EtcdSource
from tests.support.servers import EtcdServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("own_audit_log"),  # each test writes its own audit log
]

LEASE = 0x5EED1234


def post(server: EtcdServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(f"{server.endpoint}/v3{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        answer: dict[str, Any] = json.loads(resp.read())
    return answer


def take(server: EtcdServer, name: str) -> None:
    """Grant lease LEASE (an explicit ID) and write ``name/<LEASE hex>`` on it."""
    post(server, "/lease/grant", {"TTL": 60, "ID": LEASE})
    post(server, "/kv/put", {"key": base64.b64encode(f"{name}/{LEASE:x}".encode()).decode(),
                             "value": "", "lease": LEASE})


def test_a_regranted_lease_id_is_not_revoked_with_the_old_token(etcd_server: EtcdServer
                                                                ) -> None:
    pytest.importorskip("etcd3gw", reason="etcd3gw is not installed")
    name = "locks/regrant"
    take(etcd_server, name)  # the first holder
    with EtcdSource([etcd_server.endpoint]) as src:
        seen = src.status(name)
        assert seen is not None and seen.record is not None and seen.record.token
        post(etcd_server, "/kv/lease/revoke", {"ID": LEASE})  # the first holder lets go
        take(etcd_server, name)  # a new holder re-grants the same lease ID
        now = src.status(name)
        assert now is not None and now.record is not None and now.record.token is not None
        assert now.record.metadata["lease"] == seen.record.metadata["lease"]
        with pytest.raises(RemoteError) as err:
            src.release(name, seen.record.token, force=True)
        assert err.value.kind is RemoteErrorKind.CHANGED
        still = src.status(name)
        assert still is not None and still.record is not None
        assert still.record.token == now.record.token  # the new holder's lock is untouched
        assert src.release(name, now.record.token, force=True).released
