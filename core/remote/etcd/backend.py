"""etcd v3 locks: the keys of etcd's concurrency API (``etcdctl lock``, Go's
``concurrency.Mutex``), read with etcd3gw over etcd's HTTP/JSON gateway (:class:`EtcdSource`).

Rules (the key with the lowest ``create_revision`` holds; the lease is the liveness signal;
etcd stores no times; holder and token; release and force release are ``LeaseRevoke`` of the
lease seen after checking it still holds the lock, which ends the whole lease):
docs/remote.md, "etcd" and "What a release does"; docs/specs/distributed-locks.md, "etcd v3".

Needs the ``etcd`` extra (``pip install 'lockwarden[etcd]'``: etcd3gw, which needs only
``requests``); without it every call raises :class:`RemoteError` ``no_driver``.
"""

from __future__ import annotations

import getpass
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from core.codes import Code
from core.reasons import Reason
from core.record import Liveness, LockRecord, LockStatus
from core.remote.base import (
    ReleaseOutcome,
    RemoteError,
    RemoteErrorKind,
    RemoteSource,
    audit_remote,
    bounded,
    url_host,
)
from core.remote.deadline import DEFAULT_DEADLINE_S
from core.remote.etcd.wire import (
    error_detail,
    error_message,
    group_keys,
    grpc_code,
    key_text,
    lease_of,
    metadata,
    parse_when,
    split_endpoint,
    tracked_session,
)
from core.stale_policy import DEFAULT_POLICY, StalePolicy
from core.verdicts import liveness
from core.verdicts.judge import judge

try:
    import etcd3gw
    from etcd3gw import exceptions as etcd_errors
    from etcd3gw.utils import _decode, _encode, _increment_last_byte
except ImportError:  # pragma: no cover - exercised only without the extra
    etcd3gw = None  # type: ignore[assignment]

FORMAT = "etcd-mutex"
"""``LockRecord.format`` of a concurrency-API lock."""

GRPC_NOT_FOUND = 5
"""gRPC status code the gateway answers for a lease that does not exist (any more)."""
_GRPC_KINDS = {7: RemoteErrorKind.PERMISSION_DENIED, 16: RemoteErrorKind.AUTH_FAILED}


WATCH_RENEW_S = 30.0
"""Seconds one prefix watch lasts before it is set up again (:meth:`EtcdSource.follow`)."""


class EtcdSource(RemoteSource):
    """Concurrency-API locks of one etcd cluster.

    Args:
        endpoints: client URLs (``http://host:2379``, ``https://...``), tried in order; the
            first names the source (``etcd://host:port``).
        prefix: only keys under this prefix are read (``"locks/"``); "" reads the keyspace.
        username, password: etcd user (``/v3/auth/authenticate``), or None when auth is off.
        timeout: seconds to wait for a connection or one read.
        policy: the stale policy.
        deadline: seconds one operation may take in all (docs/remote.md, "Deadline").
    """

    scheme = "etcd"

    def __init__(
        self,
        endpoints: Sequence[str] = ("http://127.0.0.1:2379",),
        *,
        prefix: str = "",
        username: str | None = None,
        password: str | None = None,
        timeout: float = 5.0,
        policy: StalePolicy = DEFAULT_POLICY,
        deadline: float = DEFAULT_DEADLINE_S,
    ) -> None:
        if not endpoints:
            raise ValueError("etcd: at least one endpoint is needed")
        self.endpoints = tuple(split_endpoint(e) for e in endpoints)
        _, host, port = self.endpoints[0]
        super().__init__(f"etcd://{url_host(host)}:{port}", policy=policy, deadline=deadline)
        self.prefix = prefix
        self.timeout = timeout
        self._auth = (username, password) if username else None
        self._client: Any = None
        self._at = 0
        self._first_seen: dict[tuple[str, str], datetime] = {}
        self._acquired: set[tuple[str, str]] = set()
        self.notifications = True  # a watch is read-only: no server change to opt in to

    def follow(self, stop: threading.Event, on_change: Callable[[], None]) -> bool:
        """Watch the keys under :attr:`prefix` (all keys when it is "") until ``stop``, calling
        ``on_change()`` on each event (docs/specs/distributed-locks.md: a lease-expiry DELETE
        arrives 20-470 ms after the deadline; the caller keeps its own expiry clock). A watch
        only reads: it is on whenever the source is followed.

        etcd3gw's watch thread swallows a broken connection and its event stream then never
        ends, so each watch lasts at most :data:`WATCH_RENEW_S` seconds and ``True`` is returned
        for the caller to follow again; the server is checked (one small request) before each
        new watch, so a server that went away is reported instead of watched in silence.

        Raises:
            RemoteError: ``no_driver``, ``unreachable`` (the server is gone or the watch could
                not start).
        """
        self._post("check", "/maintenance/status", {})  # RemoteError when it is gone
        client = self._connect()
        try:
            if self.prefix:
                events, cancel = client.watch_prefix(self.prefix)
            else:  # every key: from "\0" with range_end "\0" (etcd: "all keys >= key")
                events, cancel = client.watch("\0", range_end="\0")
        except etcd_errors.Etcd3Exception as exc:
            raise RemoteError(f"watch {self.base_url}: {error_detail(exc)}",
                              kind=RemoteErrorKind.UNREACHABLE, url=self.base_url,
                              detail=error_detail(exc)) from exc
        renew = threading.Event()

        def closer() -> None:
            if not stop.wait(WATCH_RENEW_S):
                renew.set()
            cancel()

        threading.Thread(target=closer, name=f"lockwarden-etcd-unwatch {self.base_url}",
                         daemon=True).start()
        for _event in events:
            if stop.is_set() or renew.is_set():
                break
            on_change()
        if not stop.is_set() and not renew.is_set():  # the stream ended on its own
            raise RemoteError(f"watch {self.base_url}: the watch stream ended",
                              kind=RemoteErrorKind.UNREACHABLE, url=self.base_url)
        return True

    def describe(self) -> str:
        """``etcd://host:port (etcdctl lock keys under locks/)``."""
        under = f"under {self.prefix}" if self.prefix else "anywhere"
        return f"{self.base_url} (etcdctl lock / concurrency.Mutex keys {under})"

    def close(self) -> None:
        """Close the HTTP session (a later call opens a new one)."""
        if self._client is not None:
            try:
                self._client.session.close()
            finally:
                self._client = None

    # -- connection -----------------------------------------------------------------------

    def _connect(self) -> Any:
        if etcd3gw is None:
            raise RemoteError("etcd3gw is not installed: pip install 'lockwarden[etcd]'",
                              kind=RemoteErrorKind.NO_DRIVER, url=self.base_url)
        if self._client is None:
            proto, host, port = self.endpoints[self._at]
            client = etcd3gw.Etcd3Client(host=host, port=port, protocol=proto,
                                         timeout=self.timeout, api_path=None,
                                         session=tracked_session(self.sockets))
            if self._auth is not None:
                name, password = self._auth
                try:
                    answer = client.post(client.get_url("/auth/authenticate"),
                                         json={"name": name, "password": password or ""})
                except etcd_errors.Etcd3Exception as exc:
                    if isinstance(exc, (etcd_errors.ConnectionFailedError,
                                        etcd_errors.ConnectionTimeoutError)):
                        raise
                    raise RemoteError(f"etcd {self.base_url}: the server refused the "
                                      f"credentials of {name}", kind=RemoteErrorKind.AUTH_FAILED,
                                      url=self.base_url, detail=exc.detail_text) from exc
                client.session.headers["Authorization"] = str(answer.get("token", ""))
            self._client = client
        return self._client

    def _post(self, what: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to the gateway's ``path``, trying each endpoint once when one is
        unreachable; errors become :class:`RemoteError` by exception class and gRPC code
        (never by text). ``code`` of a server error is its gRPC code as a string."""
        last: Exception | None = None
        for _ in self.endpoints:
            try:
                client = self._connect()
                answer: dict[str, Any] = client.post(client.get_url(path), json=body)
                return answer
            except (etcd_errors.ConnectionFailedError,
                    etcd_errors.ConnectionTimeoutError) as exc:
                last = exc
                self.close()
                self._at = (self._at + 1) % len(self.endpoints)
            except etcd_errors.Etcd3Exception as exc:
                grpc = grpc_code(exc.detail_text)
                kind = _GRPC_KINDS.get(grpc or -1, RemoteErrorKind.QUERY_FAILED)
                raise RemoteError(f"{what} {self.base_url}: the server answered an error: "
                                  f"{error_message(exc.detail_text)}", kind=kind, url=self.base_url,
                                  detail=exc.detail_text,
                                  code=str(grpc) if grpc is not None else None) from exc
        why = error_detail(last)
        raise RemoteError(f"{what} {self.base_url}: no connection to "
                          f"{', '.join(self._endpoint_urls())}: {why}",
                          kind=RemoteErrorKind.UNREACHABLE, url=self.base_url, detail=why)

    def _endpoint_urls(self) -> list[str]:
        return [f"{p}://{url_host(h)}:{n}" for p, h, n in self.endpoints]

    # -- listing --------------------------------------------------------------------------

    def _range(self, prefix: str) -> list[dict[str, Any]]:
        """Every key under ``prefix`` ("" = all) by ascending ``create_revision``, as the
        gateway's JSON key-values (key and value base64)."""
        start = prefix.encode() if prefix else b"\0"
        end = _increment_last_byte(start) if prefix else "\0"
        answer = self._post("range on", "/kv/range", {
            "key": _encode(start), "range_end": _encode(end), "sort_order": 1,
            "sort_target": 1})  # ascend, by create revision
        kvs: list[dict[str, Any]] = answer.get("kvs", [])
        return kvs

    def _lease_info(self, lease: int) -> tuple[int, int, list[str]]:
        """``(seconds left, granted seconds, attached keys)`` (LeaseTimeToLive); left is -1
        once the lease is gone."""
        answer = self._post("lease time-to-live on", "/kv/lease/timetolive",
                            {"ID": lease, "keys": True})
        keys = [key_text(_decode(k)) for k in answer.get("keys", [])]
        return int(answer.get("TTL", -1)), int(answer.get("grantedTTL", 0)), keys

    @bounded("list")
    def list_locks(self) -> list[LockStatus]:
        """Every concurrency-API lock under the prefix, judged (see the module docstring).

        Raises:
            RemoteError: ``no_driver``, ``unreachable``, ``auth_failed``,
                ``permission_denied``, ``query_failed``.
        """
        now = datetime.now(UTC)
        groups = group_keys(self._range(self.prefix))
        statuses = [st for name, kvs in groups.items()
                    if (st := self._judge(name, kvs, now)) is not None]
        seen = {(s.path, s.record.token or "") for s in statuses if s.record}
        self._first_seen = {k: v for k, v in self._first_seen.items() if k in seen}
        return statuses

    @bounded("status")
    def status(self, lock_key: str) -> LockStatus | None:
        """The verdict on lock ``lock_key`` (its URL or name) now, None when nobody holds it.

        Raises:
            RemoteError: connection kinds, ``bad_key`` for a URL of another source.
        """
        name = self.key_of(lock_key)
        kvs = group_keys(self._range(name + "/")).get(name, [])
        return self._judge(name, kvs, datetime.now(UTC))

    def _judge(self, name: str, kvs: list[dict[str, Any]], now: datetime) -> LockStatus | None:
        if not kvs:
            return None
        head = kvs[0]
        lease = int(head["lease"])
        left, granted, lease_keys = self._lease_info(lease)
        if left < 0:
            return None  # the lease ended between the range and this read
        path = self.path_of(name)
        lease_hex = f"{lease:x}"
        # the lease and the key's create revision: a lease ID granted again (etcd accepts an
        # explicit ID) with the key written again is another lock (docs/remote.md, "etcd")
        token = f"{lease_hex}@{int(head['create_revision'])}"
        first = self._first_seen.setdefault((path, token), now)
        value = key_text(_decode(head.get("value", "")))
        meta = metadata(value)
        taken = parse_when(meta.get("acquired_at"))
        pid = meta.get("pid") if isinstance(meta.get("pid"), int) else None
        host = meta.get("host") if isinstance(meta.get("host"), str) else None
        waiters = [{"key": key_text(_decode(kv["key"])), "lease": f"{int(kv['lease']):x}",
                    "create_revision": int(kv["create_revision"])} for kv in kvs[1:]]
        reasons = [Reason.of(Code.LEASE, lease=lease_hex, left_s=float(left),
                             granted_s=float(granted))]
        if waiters:
            reasons.append(Reason.of(Code.WAITERS, count=len(waiters)))
        if taken is None:
            reasons.append(Reason.of(Code.AGE_FROM_FIRST_SEEN,
                                     age_s=(now - first).total_seconds()))
        user = meta.get("user") if isinstance(meta.get("user"), str) else None
        holder = (f"{user + '@' if user else ''}{host} PID {pid}" if host and pid is not None
                  else f"lease {lease_hex}")
        record = LockRecord(
            path=path, format=FORMAT, holder=holder, pid=pid, host=host,
            acquired_at=taken or first, expires_at=now + timedelta(seconds=left),
            ttl=float(granted) or None,
            tag=meta.get("tag") if isinstance(meta.get("tag"), str) else name,
            token=token, raw=value,
            metadata={"key": key_text(_decode(head["key"])), "lease": lease_hex,
                      "create_revision": int(head["create_revision"]), "ttl_s": left,
                      "granted_ttl_s": granted, "lease_keys": lease_keys, "waiters": waiters,
                      "value": meta or None, "first_seen": first.isoformat()},
            removal=(Reason.of(Code.REVOKES_LEASE, lease=token, keys=len(lease_keys) or 1,
                               names=", ".join(lease_keys) if len(lease_keys) > 1 else None),))
        live: Liveness = Liveness.UNKNOWN
        live_reasons: list[Reason] = []
        if host and pid is not None:
            live, live_reasons = liveness.check(record)
        return judge(path, record, liveness=live, liveness_reasons=[*live_reasons, *reasons],
                     policy=self.policy, now=now)

    # -- acquire and release --------------------------------------------------------------

    @bounded("acquire")
    def acquire(self, name: str, *, ttl: int = 10, tag: str | None = None,
                holder_pid: int | None = None) -> tuple[str, str]:
        """Take lock ``name`` the way ``etcdctl lock`` does, without waiting: grant a lease of
        ``ttl`` seconds (etcd's minimum is 2), create ``name/<lease hex>`` on it (a transaction
        that succeeds only for a new key) with JSON ``{host, pid, user, tag, acquired_at,
        tool}`` as the value, and hold when that key has the lowest ``create_revision`` under
        ``name/``. ``etcdctl lock name`` then waits for it. The lease is not kept alive: it
        lapses after ``ttl`` unless :meth:`keepalive` renews it. ``holder_pid``: the PID the
        value names (default this process; the CLI passes its calling shell's). Audited.

        Returns ``(path, token)``: the token (``<lease hex>@<create revision>``), for
        :meth:`release` and :meth:`keepalive`.

        Raises:
            RemoteError: ``held`` (with the holder's status; the lease granted is revoked),
                ``bad_key`` (an empty name, ``ttl`` < 1), connection kinds.
        """
        path = self.path_of(name)
        if not name or ttl < 1:
            raise RemoteError(f"{path}: a name and a TTL >= 1 s are needed",
                              kind=RemoteErrorKind.BAD_KEY, url=path)
        lease = int(self._post("lease grant on", "/lease/grant", {"TTL": ttl})["ID"])
        token = f"{lease:x}"
        key = f"{name}/{token}".encode()
        value = json.dumps({"host": liveness.hostname(), "pid": holder_pid or os.getpid(),
                            "user": getpass.getuser(), "tag": tag or name,
                            "acquired_at": datetime.now(UTC).isoformat(),
                            "tool": "lockwarden"}, separators=(",", ":"))
        self._post("txn on", "/kv/txn", {
            "compare": [{"target": "CREATE", "key": _encode(key), "create_revision": "0",
                         "result": "EQUAL"}],
            "success": [{"request_put": {"key": _encode(key), "value": _encode(value.encode()),
                                         "lease": lease}}]})
        current = self.status(name)
        if current is None or current.record is None \
                or current.record.metadata.get("lease") != token:
            self._revoke(lease)
            audit_remote(path, "acquire_refused", result="refused", format=FORMAT,
                         details={"holder": current.to_dict() if current else None})
            raise RemoteError(f"{path} is held", kind=RemoteErrorKind.HELD, url=path,
                              status=current)
        token = current.record.token or token  # <lease hex>@<create revision>
        self._acquired.add((name, token))
        audit_remote(path, "acquire", details={"token": token, "ttl_s": ttl}, format=FORMAT)
        return path, token

    @bounded("keepalive")
    def keepalive(self, token: str) -> int:
        """Renew the lease of ``token`` (``<lease hex>@<revision>``, or the lease in hex) once;
        returns the new TTL (s), -1 when it is gone.

        Raises:
            RemoteError: ``bad_key`` (not hex), connection kinds.
        """
        answer = self._post("lease keepalive on", "/lease/keepalive",
                            {"ID": lease_of(token, self.base_url)})
        return int(answer.get("result", {}).get("TTL", -1))

    def _revoke(self, lease: int) -> bool:
        """``LeaseRevoke``: True when revoked, False when the lease was already gone."""
        try:
            self._post("lease revoke on", "/kv/lease/revoke", {"ID": lease})
        except RemoteError as exc:
            if exc.code == str(GRPC_NOT_FOUND):
                return False
            raise
        return True

    @bounded("release")
    def release(
        self, lock_key: str, seen_token: str, *, force: bool = False, reason: str | None = None
    ) -> ReleaseOutcome:
        """Revoke the lease of ``seen_token`` while it still holds lock ``lock_key`` under the
        same key: the token is ``<lease hex>@<create revision>`` (a bare lease in hex is
        compared by lease only), so a lease ID granted again with its key written again is
        ``changed``, not revoked.
        Without ``force`` only a lock this source acquired, or a stale one, is released.
        Every key on that lease goes with it. Audited (``release`` / ``force_release`` /
        ``release_refused``).

        Raises:
            RemoteError: ``changed`` (another lease holds it now: nothing revoked), ``refused``,
                ``bad_key``, ``permission_denied`` (the user may not revoke), connection kinds.
        """
        name = self.key_of(lock_key)
        path = self.path_of(name)
        lease = lease_of(seen_token, path)
        op = "force_release" if force else "release"
        before = self.status(name)
        details: dict[str, Any] = {"token": seen_token, "reason": reason}
        if before is None or before.record is None:
            audit_remote(path, op, result="gone", format=FORMAT,
                         details={**details, "note": "already released"})
            return ReleaseOutcome(path, seen_token, False, "gone", 0.0, details)
        if before.record.token != seen_token and not (
                "@" not in seen_token and before.record.metadata.get("lease") == seen_token):
            audit_remote(path, op, result="changed", format=FORMAT, details={
                **details, "holder": before.to_dict(),
                "note": "another lease holds it than the one seen: nothing was revoked"})
            raise RemoteError(f"{path} changed hands since it was seen: nothing was revoked",
                              kind=RemoteErrorKind.CHANGED, url=path, status=before)
        if not force and (name, seen_token) not in self._acquired:
            self.refuse_unforced(before)
        details["lease_keys"] = before.record.metadata.get("lease_keys")
        details["displaced"] = before.to_dict()
        t0 = time.monotonic()
        revoked = self._revoke(lease)
        seconds = time.monotonic() - t0
        details["seconds"] = round(seconds, 6)
        self._acquired.discard((name, seen_token))
        if not revoked:
            audit_remote(path, op, result="gone", format=FORMAT,
                         details={**details, "note": "the lease had already ended"})
            return ReleaseOutcome(path, seen_token, False, "gone", seconds, details)
        audit_remote(path, op, details=details, format=FORMAT)
        return ReleaseOutcome(path, seen_token, True, "revoked", seconds, details)


__all__ = ["FORMAT", "EtcdSource"]
