"""The wire of etcd's HTTP/JSON gateway, for :mod:`core.remote.etcd.backend`: endpoints, a session
whose sockets the deadline can cut (core.remote.deadline), concurrency-API keys grouped by lock,
tokens, JSON values and the gateway's error bodies.

Rules: docs/specs/distributed-locks.md, "etcd v3"; docs/remote.md, "etcd".
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from core.remote.base import RemoteError, RemoteErrorKind
from core.remote.deadline import SocketRegistry

try:
    from etcd3gw.utils import _decode
except ImportError:  # pragma: no cover - exercised only without the extra
    _decode = None  # type: ignore[assignment]


def tracked_session(registry: SocketRegistry) -> Any:
    """A ``requests.Session`` whose connections register their sockets in ``registry`` (for
    the deadline to cut, core.remote.deadline): urllib3's connection classes with
    ``_new_conn`` recording the socket, mounted for http and https."""
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    class Conn(HTTPConnection):
        def _new_conn(self) -> Any:
            sock = super()._new_conn()
            registry.add(sock)
            return sock

    class TLSConn(HTTPSConnection):
        def _new_conn(self) -> Any:
            sock = super()._new_conn()
            registry.add(sock)
            return sock

    class Pool(HTTPConnectionPool):
        ConnectionCls = Conn

    class TLSPool(HTTPSConnectionPool):
        ConnectionCls = TLSConn

    class Adapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": Pool, "https": TLSPool}

    session = requests.Session()
    for scheme in ("http://", "https://"):
        session.mount(scheme, Adapter())
    return session


def split_endpoint(endpoint: str) -> tuple[str, str, int]:
    """``(protocol, host, port)`` of ``http://host:port``, ``https://...``, ``etcd://...``
    (= http) or ``host:port``; the port defaults to 2379.

    Raises:
        ValueError: another scheme or a bad port."""
    parts = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    if parts.scheme not in ("http", "https", "etcd"):
        raise ValueError(f"etcd endpoint {endpoint!r}: http://, https:// or etcd:// expected")
    return ("https" if parts.scheme == "https" else "http", parts.hostname or "127.0.0.1",
            parts.port or 2379)


def group_keys(kvs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Concurrency-API keys by lock name, each list by ascending ``create_revision`` (the
    holder first): a key counts when its last segment is the hex of its own lease."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for kv in kvs:
        lease = int(kv.get("lease", 0))
        if not lease:
            continue
        name, sep, suffix = key_text(_decode(kv["key"])).rpartition("/")
        if sep and name and suffix == f"{lease:x}":
            groups.setdefault(name, []).append(kv)
    for members in groups.values():
        members.sort(key=lambda kv: int(kv["create_revision"]))
    return groups


def lease_of(token: str, url: str) -> int:
    """The lease ID of a token (``<lease hex>@<create revision>`` or ``<lease hex>``).

    Raises:
        RemoteError: ``bad_key`` when it is neither."""
    lease, _, revision = token.partition("@")
    try:
        if revision and not revision.isdigit():
            raise ValueError(revision)
        return int(lease, 16)
    except ValueError:
        raise RemoteError(f"{url}: {token!r} is not a lease ID in hex",
                          kind=RemoteErrorKind.BAD_KEY, url=url) from None


def metadata(value: str) -> dict[str, Any]:
    """The JSON object in a key's value, {} for an empty or non-JSON value."""
    if not value.startswith("{"):
        return {}
    try:
        meta = json.loads(value)
    except ValueError:
        return {}
    return meta if isinstance(meta, dict) else {}


def parse_when(text: object) -> datetime | None:
    """An ISO 8601 time of a JSON value as an aware datetime (naive = UTC), else None."""
    if not isinstance(text, str):
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def grpc_code(body: str | None) -> int | None:
    """The gRPC status ``code`` of the gateway's JSON error body, or None."""
    try:
        code = json.loads(body or "").get("code")
    except (ValueError, AttributeError):
        return None
    return code if isinstance(code, int) else None


def error_message(body: str | None) -> str:
    """The ``message`` of the gateway's JSON error body, else the body itself."""
    try:
        return str(json.loads(body or "").get("message", body))
    except (ValueError, AttributeError):
        return str(body)


def error_detail(exc: Exception | None) -> str:
    """The words of an etcd3gw exception (it keeps them in ``detail_text``, not ``args``)."""
    text = getattr(exc, "detail_text", None) or str(exc or "")
    return str(text) or type(exc).__name__


def key_text(raw: bytes) -> str:
    """A key or value as text; bytes that are not UTF-8 kept as surrogate escapes."""
    return raw.decode("utf-8", "surrogateescape")


__all__ = ["error_detail", "error_message", "group_keys", "grpc_code", "key_text", "lease_of",
           "metadata", "parse_when", "split_endpoint", "tracked_session"]
