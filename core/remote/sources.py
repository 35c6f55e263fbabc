"""Building :class:`~core.remote.base.RemoteSource` objects from URLs (the CLI) and from the
configuration's server tables (``[[postgres]]``, ``[[redis]]``, ``[[etcd]]``).

URL forms (``postgres://``/``postgresql://``, ``redis://``, ``etcd://``/``etcd+https://``; a
``#fragment`` names one lock, not the server): docs/cli.md, "Locks on servers"; docs/remote.md,
"Paths". Passwords come from the URL (the CLI only), else ``password_env``, else the OS keychain
(service :data:`KEYRING_SERVICE`): docs/remote.md, "Configuration". Backend modules, and so their
drivers, are imported only when a source of that kind is built.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from core.config.model import Config, ServerSpec
from core.config.servers import redact_url
from core.remote.base import RemoteError, RemoteErrorKind, RemoteSource
from core.remote.deadline import DEFAULT_DEADLINE_S
from core.stale_policy import DEFAULT_POLICY, StalePolicy

KEYRING_SERVICE = "lockwarden"
"""The keychain service Lockwarden's server passwords are stored under."""

SCHEMES: Mapping[str, str] = {"postgres": "postgres", "postgresql": "postgres",
                              "redis": "redis", "etcd": "etcd", "etcd+https": "etcd",
                              "etcd+http": "etcd"}
"""URL scheme -> backend kind."""


def is_server_url(text: str) -> bool:
    """True when ``text`` names a lock server (a URL of :data:`SCHEMES`), not a file path."""
    scheme, sep, _ = text.partition("://")
    return bool(sep) and scheme.lower() in SCHEMES


@dataclass(frozen=True, slots=True)
class ServerURL:
    """A parsed server URL: ``kind``, the source's constructor arguments, the lock after ``#``
    (or None), and the URL without password or fragment (``public``)."""

    kind: str
    args: dict[str, Any]
    lock: str | None
    public: str


def parse_url(url: str) -> ServerURL:
    """Split a server URL (module docstring).

    Raises:
        RemoteError: ``bad_key`` for a scheme not in :data:`SCHEMES`, a bad port or database.
    """
    server, sep, fragment = url.partition("#")
    shown = redact_url(url)  # error messages never carry the password
    try:
        parts = urlsplit(server)
        port = parts.port
    except ValueError:  # its words quote the port, which may be part of a password
        raise RemoteError(f"{shown}: not a server URL (the port is not a number from 0 to "
                          "65535)", kind=RemoteErrorKind.BAD_KEY,
                          url=redact_url(server)) from None
    kind = SCHEMES.get(parts.scheme.lower())
    if kind is None:
        raise RemoteError(f"{shown}: unknown scheme (known: {', '.join(SCHEMES)})",
                          kind=RemoteErrorKind.BAD_KEY, url=redact_url(server))
    host = unquote(parts.hostname or "") or "localhost"
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    path = unquote(parts.path.lstrip("/"))
    netloc = parts.netloc.rpartition("@")[2]
    public = f"{parts.scheme}://{user + '@' if user else ''}{netloc}{parts.path}"
    args: dict[str, Any] = {}
    if kind == "postgres":
        query = parse_qs(parts.query)
        args = {"host": host, "port": port or 5432, "dbname": path or "postgres",
                "user": user, "password": password,
                "liquibase": query.get("liquibase", ["true"])[-1].lower() != "false"}
    elif kind == "redis":
        if path and not path.isdigit():
            raise RemoteError(f"{shown}: the database must be a number, not {path!r}",
                              kind=RemoteErrorKind.BAD_KEY, url=redact_url(server))
        args = {"host": host, "port": port or 6379, "db": int(path or 0), "username": user,
                "password": password}
    else:
        proto = "https" if parts.scheme.lower() == "etcd+https" else "http"
        args = {"endpoints": [f"{proto}://{netloc.rpartition('@')[2]}"], "prefix": path,
                "username": user, "password": password}
    return ServerURL(kind, args, fragment if sep else None, public)


_EXTRA = {"postgres": "postgres", "redis": "redis", "etcd": "etcd"}


def _backend(kind: str, url: str) -> Any:
    """The backend module of ``kind`` (``core.remote.<kind>.backend``), imported now.

    Raises:
        RemoteError: ``no_driver`` when it cannot be imported here (an install without the
            optional extra, or the packaged app, which leaves the drivers out).
    """
    try:
        return import_module(f"core.remote.{kind}.backend")
    except ImportError as exc:
        raise RemoteError(f"{kind} servers are not supported by this installation ({exc}): "
                          f"pip install 'lockwarden[{_EXTRA.get(kind, kind)}]'",
                          kind=RemoteErrorKind.NO_DRIVER, url=url) from None


def redis_profiles(names: Sequence[str], patterns: Sequence[str]) -> tuple[Any, ...]:
    """The :class:`core.remote.redis.backend.RedisProfile` objects named (``python-redis-lock``,
    ``redis-py`` with ``patterns``); with no names, python-redis-lock, plus redis-py when
    patterns are given.

    Raises:
        ValueError: an unknown profile name, or redis-py without patterns.
        RemoteError: ``no_driver`` when the Redis backend is not installed (a bundle built
            without the drivers).
    """
    backend = _backend("redis", "redis")

    chosen = list(names) or (["python-redis-lock"] + (["redis-py"] if patterns else []))
    out: list[Any] = []
    for name in chosen:
        if name == "python-redis-lock":
            out.append(backend.PYTHON_REDIS_LOCK)
        elif name == "redis-py":
            if not patterns:
                raise ValueError("profile redis-py needs key patterns (its keys have no prefix)")
            out.append(backend.redis_py_profile(*patterns))
        else:
            raise ValueError(f"unknown Redis profile {name!r} (known: python-redis-lock, "
                             "redis-py)")
    return tuple(out)


def source_from_url(
    url: str,
    *,
    password: str | None = None,
    profiles: Sequence[str] = (),
    patterns: Sequence[str] = (),
    policy: StalePolicy = DEFAULT_POLICY,
    deadline: float = DEFAULT_DEADLINE_S,
) -> RemoteSource:
    """The source of the server ``url`` names (its ``#fragment`` ignored); ``password`` is
    used when the URL holds none; ``profiles`` and ``patterns`` are Redis's; ``deadline`` is
    the seconds one operation may take in all (docs/remote.md, "Deadline").

    Raises:
        RemoteError: ``bad_key`` (see :func:`parse_url`; an unknown Redis profile).
    """
    parsed = parse_url(url)
    args = dict(parsed.args)
    if args.get("password") is None:
        args["password"] = password
    if parsed.kind == "redis":
        try:
            args["profiles"] = redis_profiles(profiles, patterns)
        except ValueError as exc:
            raise RemoteError(str(exc), kind=RemoteErrorKind.BAD_KEY, url=parsed.public) \
                from None
    module = _backend(parsed.kind, parsed.public)
    cls = {"postgres": "PostgresSource", "redis": "RedisSource", "etcd": "EtcdSource"}
    source: RemoteSource = getattr(module, cls[parsed.kind])(**args, policy=policy,
                                                             deadline=deadline)
    return source


def password_for(spec: ServerSpec, environ: Mapping[str, str] | None = None
                 ) -> tuple[str | None, str | None]:
    """``(password, problem)`` of a server table: from ``password_env``, else the keychain
    when ``keyring = true``; ``problem`` says why none was found where one was asked for
    (the variable is unset, ``keyring`` is not installed or has no usable backend, no entry)."""
    env = os.environ if environ is None else environ
    label = f"[[{spec.kind}]] {spec.url}"
    if spec.password_env:
        value = env.get(spec.password_env)
        if value is not None:
            return value, None
        if not spec.keyring:
            return None, f"{label}: password_env {spec.password_env} is not set: no password"
    if not spec.keyring:
        return None, None
    try:
        keyring = import_module("keyring")
    except ImportError:
        return None, (f"{label}: keyring = true, but the keyring module is not installed "
                      "(pip install keyring): no password")
    try:
        value = keyring.get_password(KEYRING_SERVICE, spec.url)
    except Exception as exc:  # keyring.errors.KeyringError and backend failures alike
        return None, (f"{label}: the OS keychain is unavailable ({type(exc).__name__}: "
                      f"{exc}): no password")
    if value is None:
        return None, (f"{label}: no password in the keychain for service "
                      f"{KEYRING_SERVICE!r}, user {spec.url!r}")
    return str(value), None


def source_from_spec(spec: ServerSpec, environ: Mapping[str, str] | None = None
                     ) -> tuple[RemoteSource, str | None]:
    """The source of one server table, and a problem with its password (or None).

    Raises:
        RemoteError: ``bad_key`` (a URL the loader let through but no backend accepts).
    """
    password, problem = password_for(spec, environ)
    if spec.kind == "etcd":
        module = _backend("etcd", spec.url or "etcd")
        source: RemoteSource = module.EtcdSource(
            spec.endpoints, prefix=spec.prefix, username=spec.username, password=password,
            policy=spec.policy, deadline=spec.deadline)
        return source, problem
    source = source_from_url(spec.url, password=password, profiles=spec.profiles,
                             patterns=spec.patterns, policy=spec.policy,
                             deadline=spec.deadline)
    source.notifications = spec.notifications
    return source, problem


def sources_from_config(config: Config, environ: Mapping[str, str] | None = None
                        ) -> tuple[list[RemoteSource], list[str]]:
    """Every server of ``config`` as a source (none connects yet), and the problems found
    (a password that could not be read; a table no backend accepts, left out)."""
    sources: list[RemoteSource] = []
    problems: list[str] = []
    for spec in config.servers:
        try:
            source, problem = source_from_spec(spec, environ)
        except (RemoteError, ValueError) as exc:
            problems.append(redact_url(f"[[{spec.kind}]] {spec.url}: {exc}"))
            continue
        sources.append(source)
        if problem:
            problems.append(problem)
    return sources, problems


__all__ = ["KEYRING_SERVICE", "SCHEMES", "ServerURL", "is_server_url", "parse_url",
           "password_for", "redis_profiles", "source_from_spec", "source_from_url",
           "sources_from_config"]
