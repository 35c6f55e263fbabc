"""Redis locks: keys written by redis-py's ``Lock`` and by python-redis-lock, read with redis-py
(:class:`RedisSource`; each library a :class:`RedisProfile`).

Rules (discovery by ``SCAN``, never ``KEYS``, stopping past :data:`MAX_LOCKS` keys; bounded
value reads; ``PTTL`` as the lease, a key without TTL judged like another tool's lock; the
tokens Lockwarden writes; release and force release a Lua compare-and-delete against the token
seen, waking python-redis-lock's waiters): docs/remote.md, "Redis" and "What a release does";
docs/specs/distributed-locks.md, "Redis".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from core.codes import Code
from core.reasons import Reason
from core.record import Liveness, LockRecord, LockStatus, State
from core.remote.base import (
    ReleaseOutcome,
    RemoteError,
    RemoteErrorKind,
    RemoteSource,
    audit_remote,
    bounded,
    url_host,
)
from core.remote.deadline import DEFAULT_DEADLINE_S, SocketRegistry
from core.remote.redis.profiles import (
    COMPARE_AND_DELETE,
    PYTHON_REDIS_LOCK,
    RedisProfile,
    redis_py_profile,
)
from core.remote.redis.tokens import (
    MAX_VALUE_BYTES,
    holder_of,
    is_utf8,
    own_token,
    parse_long_token,
    parse_own_token,
    raw_of,
    text_of,
    token_of,
    uuid1_time,
)
from core.stale_policy import DEFAULT_POLICY, StalePolicy
from core.verdicts import liveness
from core.verdicts.judge import judge

try:
    import redis as redis_py
    from redis import exceptions as redis_errors
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError:  # pragma: no cover - exercised only without the extra
    redis_py = None  # type: ignore[assignment]

SCAN_COUNT = 1000
"""``COUNT`` hint per SCAN call: the spec's measured sweet spot (each call blocks the server a
few ms at 1M keys)."""
PIPELINE_CHUNK = 500
"""Keys read per pipelined round trip of GET + PTTL."""
MAX_LOCKS = 10_000
"""Lock keys one listing reads at most; past it the listing stops and says "more than N
locks" (:attr:`RedisSource.more_than`)."""
SIGNAL_EXPIRE_MS = 1000
"""How long python-redis-lock's signal list lingers after a release (ms), as the library does."""


class RedisSource(RemoteSource):
    """Lock keys of one Redis database.

    Args:
        host, port, db: the server and database number.
        username, password: ACL user and password (``AUTH``), or None.
        profiles: the libraries to look for, in order (a key matched by several belongs to the
            first); default python-redis-lock only, since redis-py's keys have no prefix.
        socket_timeout: seconds to wait for a connection or one read.
        policy: the stale policy (the limit for keys without a TTL).
        deadline: seconds one operation may take in all (docs/remote.md, "Deadline").
        max_locks: lock keys one listing reads at most (:data:`MAX_LOCKS`).
    """

    scheme = "redis"

    def __init__(
        self,
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        *,
        username: str | None = None,
        password: str | None = None,
        profiles: Iterable[RedisProfile] = (PYTHON_REDIS_LOCK,),
        socket_timeout: float = 5.0,
        policy: StalePolicy = DEFAULT_POLICY,
        deadline: float = DEFAULT_DEADLINE_S,
        max_locks: int = MAX_LOCKS,
    ) -> None:
        super().__init__(f"redis://{url_host(host)}:{port}/{db}", policy=policy,
                         deadline=deadline)
        self.profiles = tuple(profiles)
        self.max_locks = max_locks
        self.more_than: int | None = None
        """After :meth:`list_locks`: N when the listing stopped at N lock keys (there are
        more), else None."""
        self._kwargs: dict[str, Any] = {
            "host": host, "port": port, "db": db, "username": username, "password": password,
            "socket_timeout": socket_timeout, "socket_connect_timeout": socket_timeout,
        }
        self._client: Any = None
        self._first_seen: dict[tuple[str, str], datetime] = {}
        self._acquired: set[tuple[str, str]] = set()

    def describe(self) -> str:
        """``redis://host:port/db (python-redis-lock lock:*; redis-py deploy:*)``."""
        what = "; ".join(f"{p.format} {' '.join(p.patterns) or '(no patterns)'}"
                         for p in self.profiles)
        return f"{self.base_url} ({what})"

    def close(self) -> None:
        """Close the connection pool (a later call opens a new one)."""
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None

    # -- connection -----------------------------------------------------------------------

    def _redis(self) -> Any:
        if redis_py is None:
            raise RemoteError("redis is not installed: pip install 'lockwarden[redis]'",
                              kind=RemoteErrorKind.NO_DRIVER, url=self.base_url)
        if self._client is None:
            # no silent retries: a compare-and-delete whose reply was lost is re-read instead
            self._client = redis_py.Redis(retry=Retry(NoBackoff(), 0), **self._kwargs)
            # its sockets, for the deadline to cut (core.remote.deadline)
            self._client.connection_pool.connection_class = _tracked(self.sockets)
        return self._client

    def _call(self, what: str, fn: Callable[[Any], Any]) -> Any:
        """``fn(client)``, with redis-py's exceptions turned into :class:`RemoteError` by
        their class (never by their text)."""
        client = self._redis()
        try:
            return fn(client)
        except redis_errors.AuthenticationError as exc:
            kind, words = RemoteErrorKind.AUTH_FAILED, "the server refused the credentials"
            err: Exception = exc
        except (redis_errors.AuthorizationError, redis_errors.NoPermissionError) as exc:
            kind, words, err = RemoteErrorKind.PERMISSION_DENIED, "permission denied", exc
        except (redis_errors.ConnectionError, redis_errors.TimeoutError) as exc:
            kind, words, err = RemoteErrorKind.UNREACHABLE, "no connection", exc
        except redis_errors.RedisError as exc:
            kind, words, err = RemoteErrorKind.QUERY_FAILED, "the server answered an error", exc
        if kind is not RemoteErrorKind.QUERY_FAILED:
            self.close()
        detail = str(err)
        code = detail.split(" ", 1)[0] if isinstance(err, redis_errors.ResponseError) else None
        raise RemoteError(f"{what} {self.base_url}: {words}: {detail}", kind=kind,
                          url=self.base_url, detail=detail, code=code) from err

    # -- change feed ------------------------------------------------------------------------

    KEYSPACE_EVENTS = "Kg$x"
    """What :meth:`follow` turns on: keyspace events (``K``) for generic commands (``g``: DEL,
    EXPIRE), strings (``$``: SET) and expiry (``x``) -- docs/specs/distributed-locks.md,
    "Liveness, renewal and change feed"."""

    def follow(self, stop: threading.Event, on_change: Callable[[], None]) -> bool:
        """Keyspace notifications of this source's key patterns (``PSUBSCRIBE
        __keyspace@<db>__:<pattern>``), after turning them on when the opt-in
        :attr:`notifications` is set and the server has them off (``CONFIG SET
        notify-keyspace-events Kg$x``, merged with what is on). ``expired`` events can arrive
        late (the spec measured tens of seconds): the caller keeps its own expiry clock.

        Raises:
            RemoteError: the server refused CONFIG (``permission_denied``) or the connection.
        """
        if not self.notifications:
            return False
        db = int(self._kwargs["db"])

        def enable(r: Any) -> None:
            current = str(r.config_get("notify-keyspace-events").get(
                "notify-keyspace-events", ""))
            wanted = set(self.KEYSPACE_EVENTS)
            have = set(current.replace("A", "g$lshzxet"))
            if not (wanted <= have or ("K" in have and "A" in current)):
                r.config_set("notify-keyspace-events", "".join(sorted(set(current) | wanted)))

        self._call("enable keyspace notifications on", enable)
        patterns = [f"__keyspace@{db}__:{p}" for prof in self.profiles for p in prof.patterns]
        if not patterns:
            return False

        def listen(r: Any) -> None:
            pubsub = r.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.psubscribe(*patterns)
                while not stop.is_set():
                    try:
                        msg = pubsub.get_message(timeout=0.5)
                    except (redis_errors.RedisError, OSError, ValueError):
                        if stop.is_set():  # the source was closed under us: done
                            return
                        raise
                    if msg is not None and msg.get("type") == "pmessage":
                        on_change()
            finally:
                pubsub.close()

        self._call("follow keyspace notifications of", listen)
        return True

    # -- listing --------------------------------------------------------------------------

    @bounded("list")
    def scan_keys(self) -> dict[str, RedisProfile]:
        """Every string key matching a profile's patterns (SCAN, COUNT :data:`SCAN_COUNT`),
        with the profile it belongs to; at most :attr:`max_locks` + 1 (the scan stops there).

        Raises:
            RemoteError: connection kinds.
        """
        def scan(r: Any) -> dict[str, RedisProfile]:
            found: dict[str, RedisProfile] = {}
            for profile in self.profiles:
                for pattern in profile.patterns:
                    for raw in r.scan_iter(match=pattern, count=SCAN_COUNT, _type="string"):
                        found.setdefault(text_of(raw), profile)
                        if len(found) > self.max_locks:  # one more than the bound: "more"
                            return found
            return found
        result: dict[str, RedisProfile] = self._call("SCAN on", scan)
        return result

    @bounded("list")
    def list_locks(self) -> list[LockStatus]:
        """Every lock key of the profiles, judged (see the module docstring).

        Raises:
            RemoteError: ``no_driver``, ``unreachable``, ``auth_failed``, ``query_failed``.
        """
        keys = self.scan_keys()
        names = list(keys)
        self.more_than = self.max_locks if len(names) > self.max_locks else None
        names = names[:self.max_locks]
        now = datetime.now(UTC)
        seen: set[tuple[str, str]] = set()
        statuses: list[LockStatus] = []

        def read(r: Any) -> None:
            # chunk by chunk, each judged before the next is read: no value list held whole
            for i in range(0, len(names), PIPELINE_CHUNK):
                chunk = names[i:i + PIPELINE_CHUNK]
                pipe = r.pipeline(transaction=False)
                for k in chunk:
                    pipe.strlen(raw_of(k))
                    pipe.getrange(raw_of(k), 0, MAX_VALUE_BYTES - 1)
                    pipe.pttl(raw_of(k))
                got = pipe.execute(raise_on_error=False)
                for j, key in enumerate(chunk):
                    token = token_of(*got[3 * j:3 * j + 2])
                    pttl = got[3 * j + 2]
                    if token is None or not isinstance(pttl, int) or pttl == -2:
                        continue  # gone between SCAN and the read, or not a string any more
                    seen.add((key, token))
                    statuses.append(self._judge(key, keys[key], token, pttl, now))
        self._call("STRLEN/GETRANGE/PTTL on", read)
        self._first_seen = {k: v for k, v in self._first_seen.items() if k in seen}
        return statuses

    def _judge(self, key: str, profile: RedisProfile, token: str, pttl: int,
               now: datetime) -> LockStatus:
        path = self.path_of(key)
        first = self._first_seen.setdefault((key, token), now)
        ours = parse_own_token(token)
        taken = ours[2] if ours else uuid1_time(token)
        reasons: list[Reason] = []
        if pttl < 0:
            reasons.append(Reason.of(Code.NO_TTL))
            if taken is None:
                reasons.append(Reason.of(Code.AGE_FROM_FIRST_SEEN,
                                         age_s=(now - first).total_seconds()))
        record = LockRecord(
            path=path, format=profile.format,
            holder=(f"{ours[0]} PID {ours[1]}" if ours else holder_of(token)),
            pid=ours[1] if ours else None, host=ours[0] if ours else None,
            acquired_at=taken or (first if pttl < 0 else None),
            expires_at=now + timedelta(milliseconds=pttl) if pttl >= 0 else None,
            tag=profile.name_of(key), token=token, raw=token,
            metadata={"key": key, "pttl_ms": pttl, "signal": profile.signal_key(key) or None,
                      "first_seen": first.isoformat(),
                      # a value that is not UTF-8: its exact bytes (the token keeps them)
                      "token_hex": None if token.isprintable() or is_utf8(token) else
                      raw_of(token).hex()},
            removal=(Reason.of(Code.DELETES_KEY, key=key, token=token,
                               signal=profile.signal_key(key) or None),))
        live: Liveness = Liveness.UNKNOWN
        live_reasons: list[Reason] = []
        if ours:
            live, live_reasons = liveness.check(record)
        return judge(path, record, liveness=live, liveness_reasons=[*live_reasons, *reasons],
                     policy=self.policy, now=now)

    @bounded("status")
    def status(self, lock_key: str) -> LockStatus | None:
        """The verdict on one key now (None when it does not exist or is not a lock string).

        Raises:
            RemoteError: ``bad_key`` for a key no profile matches, connection kinds.
        """
        key = self.key_of(lock_key)
        profile = self._profile_of(key)
        length, head, pttl = self._call(
            "STRLEN/GETRANGE/PTTL on", lambda r: r.pipeline(transaction=False)
            .strlen(raw_of(key)).getrange(raw_of(key), 0, MAX_VALUE_BYTES - 1).pttl(raw_of(key))
            .execute(raise_on_error=False))
        token = token_of(length, head)
        if token is None or not isinstance(pttl, int) or pttl == -2:
            return None
        return self._judge(key, profile, token, pttl, datetime.now(UTC))

    def profile_of(self, key: str) -> RedisProfile:
        """The profile lock key ``key`` belongs to (the first whose patterns match it).

        Raises:
            RemoteError: ``bad_key`` when none does.
        """
        return self._profile_of(key)

    def _profile_of(self, key: str) -> RedisProfile:
        import fnmatch

        for profile in self.profiles:
            if any(fnmatch.fnmatchcase(key, p) for p in profile.patterns):
                return profile
        raise RemoteError(f"{self.path_of(key)}: no profile of {self.base_url} matches it",
                          kind=RemoteErrorKind.BAD_KEY, url=self.path_of(key))

    # -- acquire and release --------------------------------------------------------------

    @bounded("acquire")
    def acquire(self, name: str, *, ttl: float | None, profile: RedisProfile | None = None,
                holder_pid: int | None = None) -> tuple[str, str]:
        """Take lock ``name`` with ``SET key token NX PX ttl`` (``ttl`` None: no expiry, which
        redis-py and python-redis-lock also allow) and a self-describing token
        (:func:`own_token`); ``profile`` (default the first) gives the key prefix, so the
        library's own clients see the lock. ``holder_pid``: the PID the token names (default
        this process; the CLI passes its calling shell's, docs/cli.md). Audited (``acquire`` /
        ``acquire_refused``).

        Returns ``(path, token)``: pass both to :meth:`release`.

        Raises:
            RemoteError: ``held`` (status of the holder), ``bad_key`` (TTL not > 0, or a key
                none of the profiles' patterns match: it could not be listed or released),
                connection kinds.
        """
        prof = profile or self.profiles[0]
        key = prof.prefix + name
        path = self.path_of(key)
        if self._profile_of(key) is not prof:  # BAD_KEY when no profile matches at all
            raise RemoteError(f"{path}: listed under another profile than {prof.format}",
                              kind=RemoteErrorKind.BAD_KEY, url=path)
        if ttl is not None and not ttl > 0:
            raise RemoteError(f"{path}: TTL must be > 0 seconds, not {ttl!r}",
                              kind=RemoteErrorKind.BAD_KEY, url=path)
        token = own_token(holder_pid)
        px = max(1, round(ttl * 1000)) if ttl is not None else None
        ok = self._call("SET on", lambda r: r.set(raw_of(key), token, nx=True, px=px))
        if not ok:
            current = self.status(key)
            audit_remote(path, "acquire_refused", result="refused", format=prof.format,
                         details={"holder": current.to_dict() if current else None})
            raise RemoteError(f"{path} is held", kind=RemoteErrorKind.HELD, url=path,
                              status=current)
        self._acquired.add((key, token))
        audit_remote(path, "acquire", details={"token": token, "ttl_s": ttl},
                     format=prof.format)
        return path, token

    @bounded("release")
    def release(
        self, lock_key: str, seen_token: str, *, force: bool = False, reason: str | None = None
    ) -> ReleaseOutcome:
        """Delete lock ``lock_key`` only while it holds ``seen_token`` (Lua compare-and-delete;
        python-redis-lock's waiters are signalled). Without ``force`` only a lock this source
        acquired, or a stale one, is released. Audited (``release`` / ``force_release`` /
        ``release_refused``).

        Raises:
            RemoteError: ``changed`` (another token now: nothing deleted), ``refused``,
                ``bad_key``, connection kinds.
        """
        key = self.key_of(lock_key)
        path = self.path_of(key)
        profile = self._profile_of(key)
        op = "force_release" if force else "release"
        before = self.status(key)
        mine = (key, seen_token) in self._acquired
        if before is not None and not force and not mine and before.record is not None \
                and before.record.token == seen_token:
            self.refuse_unforced(before)
        signal = profile.signal_key(key)
        t0 = time.monotonic()
        # the token as the bytes it was read as: a value that is not UTF-8 round-trips
        long = parse_long_token(seen_token)
        digest, length = (long[1], str(long[0])) if long else (raw_of(seen_token), "")
        deleted = self._call("EVAL on", lambda r: r.eval(
            COMPARE_AND_DELETE, 2, raw_of(key), raw_of(signal), digest, SIGNAL_EXPIRE_MS, length,
            MAX_VALUE_BYTES))
        seconds = time.monotonic() - t0
        self._acquired.discard((key, seen_token))
        details: dict[str, Any] = {"token": seen_token, "reason": reason, "signal": signal or None,
                                   "seconds": round(seconds, 6)}
        if before is not None and before.record is not None \
                and before.record.token == seen_token:
            details["displaced"] = before.to_dict()
        if deleted:
            audit_remote(path, op, details=details, format=profile.format)
            return ReleaseOutcome(path, seen_token, True, "deleted", seconds, details)
        after = self.status(key)  # on 0, read again: gone is done, another token is not ours
        if after is None:
            audit_remote(path, op, result="gone", format=profile.format,
                         details={**details, "note": "already released"})
            return ReleaseOutcome(path, seen_token, False, "gone", seconds, details)
        audit_remote(path, op, result="changed", format=profile.format, details={
            **details, "holder": after.to_dict(),
            "note": "the key holds another token than the one seen: nothing was deleted"})
        raise RemoteError(f"{path} changed hands since it was seen: nothing was deleted",
                          kind=RemoteErrorKind.CHANGED, url=path, status=after)


def _tracked(registry: SocketRegistry) -> type:
    """redis-py's ``Connection`` registering each socket it opens in ``registry``."""
    class TrackedConnection(redis_py.Connection):
        def _connect(self) -> Any:
            connect: Callable[[], Any] = super()._connect
            sock = connect()
            registry.add(sock)
            return sock
    return TrackedConnection


__all__ = ["MAX_LOCKS", "PYTHON_REDIS_LOCK", "RedisProfile", "RedisSource", "State", "own_token",
           "parse_own_token", "redis_py_profile", "uuid1_time"]
