"""``list``, ``status``, ``release`` and ``reclaim`` of locks held on servers, named by a
``postgres://``, ``redis://`` or ``etcd://`` URL (docs/cli.md, "Locks on servers";
docs/remote.md for what each backend reads and how it releases).

The verbs of :mod:`core.cli.verbs` hand a URL here; this module is imported only then, and
imports the one backend (and its driver) the URL names (docs/cli.md, "Start-up time").

Every failure is a :class:`core.remote.RemoteError` whose ``kind`` gives the exit code
(:data:`EXIT_FOR_KIND`, never the message's words): no connection, refused credentials, a
missing driver, a role that may not do it, a server error -> 3; a bad URL or key -> 2;
refused (not stale, no ``--force``), changed hands, held -> 1. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import TYPE_CHECKING, Any

from core.cli.caller import checked_holder_pid
from core.cli.common import (
    EXIT_IO,
    EXIT_NO,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    CliError,
    Out,
    one_line,
    stale_policy,
)
from core.config.servers import redact_url
from core.remote.base import RemoteError, RemoteErrorKind
from core.remote.deadline import DEFAULT_DEADLINE_S
from core.remote.sources import is_server_url, parse_url, source_from_url

if TYPE_CHECKING:
    from collections.abc import Callable

    from core.cli.watch import Printer
    from core.record import LockStatus
    from core.remote.base import ReleaseOutcome, RemoteSource

EXIT_FOR_KIND: dict[RemoteErrorKind, int] = {
    RemoteErrorKind.UNREACHABLE: EXIT_IO,
    RemoteErrorKind.AUTH_FAILED: EXIT_IO,
    RemoteErrorKind.PERMISSION_DENIED: EXIT_IO,
    RemoteErrorKind.NO_DRIVER: EXIT_IO,
    RemoteErrorKind.QUERY_FAILED: EXIT_IO,
    RemoteErrorKind.BAD_KEY: EXIT_USAGE,
    RemoteErrorKind.REFUSED: EXIT_NO,
    RemoteErrorKind.CHANGED: EXIT_NO,
    RemoteErrorKind.HELD: EXIT_NO,
    RemoteErrorKind.TIMED_OUT: EXIT_IO,
    RemoteErrorKind.NO_DATABASE: EXIT_IO,
}
"""The exit code of each :class:`RemoteErrorKind` (docs/cli.md, "Exit codes")."""

ETCD_RECLAIM_TTL = 60
"""Lease (s) of an etcd lock ``reclaim`` takes without ``--ttl``: nothing keeps it alive
after the command exits, so it lapses then."""


def is_remote(text: str) -> bool:
    """True when a PATH argument is a server URL (:data:`core.remote.sources.SCHEMES`)."""
    return "://" in text and is_server_url(text)


def _error(exc: RemoteError) -> CliError:
    return CliError(one_line(redact_url(str(exc))), EXIT_FOR_KIND.get(exc.kind, EXIT_IO))


def _source(url: str, args: argparse.Namespace, key: str | None = None) -> RemoteSource:
    """The source of ``url`` with the command's password, profiles and stale policy. For one
    Redis key and no ``--profile``/``--pattern``: python-redis-lock for ``lock:*``, else
    redis-py with the key itself as its pattern."""
    password = None
    env_name: str | None = getattr(args, "password_env", None)
    if env_name:
        password = os.environ.get(env_name)
        if password is None:
            raise CliError(f"--password-env: {env_name} is not set", EXIT_USAGE)
    profiles: list[str] = list(getattr(args, "profile", None) or [])
    patterns: list[str] = list(getattr(args, "pattern", None) or [])
    if key is not None and not profiles and not patterns:
        profiles, patterns = (["python-redis-lock"], []) if key.startswith("lock:") \
            else (["redis-py"], [key])
    deadline: float | None = getattr(args, "deadline", None)
    try:
        return source_from_url(url, password=password, profiles=profiles, patterns=patterns,
                               policy=stale_policy(args),
                               deadline=DEFAULT_DEADLINE_S if deadline is None else deadline)
    except RemoteError as exc:
        raise _error(exc) from None


def _key(url: str, verb: str) -> str:
    try:
        key = parse_url(url).lock
    except RemoteError as exc:
        raise _error(exc) from None
    if not key:
        raise CliError(f"{verb}: name the lock after '#' ({redact_url(url)}#KEY)", EXIT_USAGE)
    return key


def _status(source: RemoteSource, key: str) -> LockStatus | None:
    """The lock's verdict now (the backend's ``status`` when it has one, else its line of
    ``list_locks``), None when nobody holds it."""
    one = getattr(source, "status", None)
    if callable(one):
        found: LockStatus | None = one(key)
        return found
    path = source.path_of(key)
    return next((s for s in source.list_locks() if s.path == path), None)


def _free(source: RemoteSource, key: str) -> LockStatus:
    from core.record import LockStatus, State

    return LockStatus(source.path_of(key), State.FREE, policy=source.policy)


def cmd_remote_list(args: argparse.Namespace, out: Out) -> int:
    """``list URL... [--profile P] [--pattern GLOB] [--json]``: every lock of each server,
    as ``list`` prints lock files. A server that fails is one stderr line (``--json``: an
    item ``{"kind": "error", "path", "error_kind", "error"}``) and the others are still
    listed. A Redis server with more lock keys than its bound (docs/remote.md, "Redis") says
    so: a stderr line "more than N locks" (``--json``: ``{"kind": "more", "path", "listed",
    "note"}``).

    Returns:
        0; the exit code of the first failure's kind (3 unreachable...) when one failed.

    Raises:
        CliError: DIRs and URLs mixed (exit 2).
    """
    urls: list[str] = list(args.dirs)
    if not all(is_remote(u) for u in urls):
        raise CliError("list: give directories or server URLs, not both", EXIT_USAGE)
    statuses: list[LockStatus] = []
    errors: list[tuple[str, RemoteError]] = []
    more: list[tuple[str, int]] = []  # (server, N): it holds more than the N listed
    for url in urls:
        try:
            with _source(url, args) as source:
                statuses.extend(source.list_locks())
                bound: int | None = getattr(source, "more_than", None)
                if bound is not None:
                    more.append((source.base_url, bound))
        except RemoteError as exc:
            errors.append((url, exc))
    if out.json:
        out.data([*(s.to_dict() for s in statuses),
                  *({"kind": "more", "path": u, "listed": n,
                     "note": f"more than {n} locks: only the first {n} are listed"}
                    for u, n in more),
                  *({"kind": "error", "path": redact_url(u), "error_kind": e.kind.value,
                     "error": redact_url(str(e))} for u, e in errors)])
    elif not out.quiet:
        from core.cli.output import table

        if statuses:
            print(table(statuses), flush=True)
        elif not errors:
            print("(no locks)", flush=True)
        elif len(errors) < len(urls):  # an empty answer is not a failed server's silence
            answered = len(urls) - len(errors)
            print(f"(no locks on the {answered} server{'s' if answered > 1 else ''} that "
                  "answered)", flush=True)
    for u, n in more:
        print(f"{PROG}: {u}: more than {n} locks: only the first {n} are listed",
              file=sys.stderr, flush=True)
    for _, err in errors:
        print(f"{PROG}: {one_line(redact_url(str(err)))}", file=sys.stderr, flush=True)
    return EXIT_FOR_KIND.get(errors[0][1].kind, EXIT_IO) if errors else EXIT_OK


def cmd_remote_status(args: argparse.Namespace, out: Out) -> int:
    """``status URL#KEY [--json]``: the lock's verdict, as ``status`` prints a lock file's.

    Returns:
        0 free, 1 held (any state but free).

    Raises:
        CliError: no ``#KEY`` (exit 2), the server failed (:data:`EXIT_FOR_KIND`).
    """
    from core.record import State

    url: str = args.path
    key = _key(url, "status")
    try:
        with _source(url, args, key) as source:
            status = _status(source, key) or _free(source, key)
    except RemoteError as exc:
        raise _error(exc) from None
    if out.json:
        out.data(status.to_dict())
    elif not out.quiet:
        from core.cli.output import status_text

        print(status_text(status), flush=True)
    return EXIT_OK if status.state is State.FREE else EXIT_NO


def _refused(exc: RemoteError, out: Out) -> int:
    """A release or reclaim the server side refused (not stale, changed hands, held)."""
    if exc.kind not in (RemoteErrorKind.REFUSED, RemoteErrorKind.CHANGED,
                        RemoteErrorKind.HELD):
        raise _error(exc) from None
    if out.json and exc.status is not None:
        out.data(exc.status.to_dict())
    out.note(f"refused: {exc}")
    return EXIT_NO


def cmd_remote_release(args: argparse.Namespace, out: Out) -> int:
    """``release URL#KEY [--force] [--reason T]``: release the lock whose holder is shown now,
    checked against its token (docs/remote.md: a lock taken again meanwhile is never
    touched). Without ``--force`` only a stale lock is released.

    Returns:
        0 released; 1 not held, refused (held and no ``--force``) or changed hands.

    Raises:
        CliError: no ``#KEY`` (exit 2), the server failed (:data:`EXIT_FOR_KIND`).
    """
    from core.holder import describe_holder

    url: str = args.path
    key = _key(url, "release")
    try:
        with _source(url, args, key) as source:
            before, done = source.within_deadline(
                "release", lambda: _read_and_release(source, key, args))
    except RemoteError as exc:
        if exc.kind in (RemoteErrorKind.REFUSED, RemoteErrorKind.CHANGED):
            return _refused(exc, out)
        raise _error(exc) from None
    if before is None or done is None:
        out.note(f"not released: {source.path_of(key)} is not held")
        return EXIT_NO
    if not done.released:
        out.note(f"not released: {done.path} is not held")
        return EXIT_NO
    if out.json:
        out.data({"path": done.path, "released": True, "action": done.action,
                  "token": done.token, "seconds": done.seconds, "displaced": before.to_dict()})
    else:
        verb = "force-released" if args.force else "released"
        out.result(f"{verb} {done.path} ({done.action}; was {describe_holder(before)})")
    return EXIT_OK


def _read_and_release(source: RemoteSource, key: str, args: argparse.Namespace
                      ) -> tuple[LockStatus | None, ReleaseOutcome | None]:
    """The lock's verdict now and, when it is held, its release against the token just
    read; ``(None, None)`` when nobody holds it. Run under one deadline by the caller.

    Raises:
        RemoteError: what :meth:`RemoteSource.release` raises."""
    before = _status(source, key)
    if before is None or before.record is None or before.record.token is None:
        return None, None
    return before, source.release(key, before.record.token, force=bool(args.force),
                                  reason=args.reason)


def cmd_remote_reclaim(args: argparse.Namespace, out: Out) -> int:
    """``reclaim URL#KEY [--force] [--reason T] [--ttl S]``: release a stale lock (any with
    ``--force``) and take it for the calling shell (or ``--pid``): Redis ``SET NX`` with
    ``--ttl`` (none: no expiry), etcd a lease of ``--ttl`` (default
    :data:`ETCD_RECLAIM_TTL`; it lapses since nothing renews it). PostgreSQL is refused: an
    advisory lock lives as long as its session, which ends with this command.

    Returns:
        0 reclaimed (or taken because it was free); 1 refused, changed hands, or taken by
        someone else in between.

    Raises:
        CliError: no ``#KEY`` or a PostgreSQL URL (exit 2), ``--pid`` of no process (exit
            2), the server failed (:data:`EXIT_FOR_KIND`).
    """
    from core.holder import describe_holder

    url: str = args.path
    key = _key(url, "reclaim")
    kind = parse_url(url).kind
    if kind == "postgres":
        raise CliError("reclaim: a PostgreSQL advisory lock lives as long as the session that "
                       "takes it, which would end with this command: use release --force",
                       EXIT_USAGE)
    pid = checked_holder_pid(args)
    ttl: float | None = args.ttl
    try:
        with _source(url, args, key) as source:
            def reclaim() -> tuple[LockStatus | None, str, LockStatus | None]:
                before = _status(source, key)
                if before is not None and before.record is not None and before.record.token:
                    source.release(key, before.record.token, force=bool(args.force),
                                   reason=args.reason or "reclaim")
                path, _token = _acquire(source, key, ttl, pid, args.tag)
                return before, path, _status(source, key)
            before, path, now = source.within_deadline("reclaim", reclaim)
    except RemoteError as exc:
        if exc.kind in (RemoteErrorKind.REFUSED, RemoteErrorKind.CHANGED,
                        RemoteErrorKind.HELD):
            return _refused(exc, out)
        raise _error(exc) from None
    if out.json:
        data: dict[str, Any] = now.to_dict() if now is not None else {"path": path}
        data["reclaimed_from"] = before.to_dict() if before is not None else None
        out.data(data)
    elif before is None:
        out.result(f"nothing to reclaim: {path} was free; acquired it for PID {pid}")
    else:
        out.result(f"reclaimed {path} for PID {pid} (was {describe_holder(before)})")
    return EXIT_OK


def _acquire(source: RemoteSource, key: str, ttl: float | None, pid: int,
             tag: str | None) -> tuple[str, str]:
    """Take lock ``key`` for ``pid`` with the backend's own acquire (only that backend's
    module is imported: it is already loaded for ``source``)."""
    if source.scheme == "redis":
        from core.remote.redis.backend import RedisSource

        assert isinstance(source, RedisSource)
        profile = source.profile_of(key)
        return source.acquire(profile.name_of(key), ttl=ttl, profile=profile, holder_pid=pid)
    if source.scheme == "etcd":
        from core.remote.etcd.backend import EtcdSource

        assert isinstance(source, EtcdSource)
        seconds = math.ceil(ttl) if ttl is not None else ETCD_RECLAIM_TTL
        return source.acquire(key, ttl=seconds, tag=tag, holder_pid=pid)
    raise CliError(f"reclaim: {source.describe()} cannot be acquired", EXIT_USAGE)


__all__ = ["ETCD_RECLAIM_TTL", "EXIT_FOR_KIND", "cmd_remote_list", "cmd_remote_reclaim",
           "cmd_remote_release", "cmd_remote_status", "is_remote"]


WATCH_POLL_S = 5.0
"""Seconds between two listings of a watched server (``watch URL``)."""


def cmd_remote_watch(args: argparse.Namespace, out: Out) -> int:
    """``watch URL... [--json]``: every lock of each server, then one line per change
    (``added``, ``changed``, ``removed``: the events of ``watch DIR``, docs/cli.md "``watch``"),
    listing each server every :data:`WATCH_POLL_S` seconds until SIGINT/SIGTERM, recording the
    changes in the history unless ``--no-history`` (docs/history.md). A server that
    fails is one line (``--json``: ``{"event": "error", "path", "error_kind", "error"}``) each
    time its failure changes; the others go on.

    Returns:
        0 after SIGINT/SIGTERM; 141 when the reader of stdout went away.

    Raises:
        CliError: DIRs and URLs mixed (exit 2).
    """
    import signal
    import threading

    from core.cli.common import silence_stdout
    from core.cli.watch import Printer

    urls: list[str] = list(args.dirs)
    if not all(is_remote(u) for u in urls):
        raise CliError("watch: give directories or server URLs, not both", EXIT_USAGE)
    sources = [_source(u, args) for u in urls]
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    printer = Printer(out, stop)

    def emit(event: str, st: LockStatus) -> None:
        if out.json or not out.quiet:
            printer.status(event, st)

    seen: dict[str, LockStatus] = {}
    failing: dict[str, str] = {}
    from core.cli.history import start_recorder

    recorder = start_recorder(out, disabled=bool(getattr(args, "no_history", False)),
                              config_path=getattr(args, "config", None))
    if recorder is not None:
        recorder.start()
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        first = True
        while not stop.is_set():
            now = _poll_servers(urls, sources, seen, failing, printer, out)
            _emit_changes(seen, now, first, emit)
            if recorder is not None:  # the history (docs/history.md); equal verdicts are skipped
                recorder.observe(now.values(), sorted(set(seen) - set(now)))
            if first:
                shown = [redact_url(u) for u in urls]
                printer.obj({"event": "ready", "dirs": shown},
                            f"watching {', '.join(shown)} (Ctrl-C to stop)")
            seen, first = now, False
            stop.wait(WATCH_POLL_S)
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
        for source in sources:
            source.close()
        if recorder is not None:
            recorder.close()
    if printer.broken:  # the reader of stdout went away: as ``watch DIR`` does
        silence_stdout()
        return 141
    return EXIT_OK


def _poll_servers(urls: list[str], sources: list[RemoteSource], seen: dict[str, LockStatus],
                  failing: dict[str, str], printer: Printer, out: Out) -> dict[str, LockStatus]:
    """One listing of every server of ``watch URL``, by path. A server that fails keeps its
    locks of ``seen`` and is reported (one line, or an ``error`` event with ``--json``) when
    its failure differs from the one kept in ``failing`` (URL -> message, updated here)."""
    now: dict[str, LockStatus] = {}
    for url, source in zip(urls, sources, strict=True):
        try:
            statuses = source.list_locks()
        except RemoteError as exc:
            if failing.get(url) != str(exc):
                failing[url] = str(exc)
                if out.json:
                    printer.obj({"event": "error", "path": redact_url(url),
                                 "error_kind": exc.kind.value,
                                 "error": redact_url(str(exc))}, "")
                else:
                    print(f"{PROG}: {one_line(redact_url(str(exc)))}",
                          file=sys.stderr, flush=True)
            base = source.base_url + "#"
            now.update({p: s for p, s in seen.items() if p.startswith(base)})
            continue
        failing.pop(url, None)
        now.update({s.path: s for s in statuses})
    return now


def _emit_changes(seen: dict[str, LockStatus], now: dict[str, LockStatus], first: bool,
                  emit: Callable[[str, LockStatus], None]) -> None:
    """The events between two listings of ``watch URL``, sorted by path: ``initial`` (the
    first listing) or ``added``, ``changed`` (another verdict), then ``removed``."""
    from core.watch.inventory import same_verdict

    for path in sorted(now):
        was = seen.get(path)
        if was is None:
            emit("initial" if first else "added", now[path])
        elif not same_verdict(was, now[path]):
            emit("changed", now[path])
    for path in sorted(set(seen) - set(now)):
        emit("removed", seen[path])
