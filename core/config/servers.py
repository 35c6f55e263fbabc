"""Loading the server tables of the configuration: ``[[postgres]]``, ``[[redis]]`` and
``[[etcd]]`` (docs/remote.md, "Configuration"), each to a
:class:`~core.config.model.ServerSpec`.

Passwords are never in the file: a URL holding one is refused (the table is ignored, with a
warning naming the line); the password comes from an environment variable (``password_env``)
or the OS keychain (``keyring = true``), read only when the sources are built
(:func:`core.remote.sources.sources_from_config`).

Problems are reported through the loader's collector (:class:`Problems`): a warning and the
default for that key, or :class:`core.errors.ConfigError` in strict mode.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

from core.config.model import SERVER_DEADLINE_S, SERVER_KINDS, ServerSpec
from core.config.model import describe_value as _describe
from core.config.problems import unknown_key_fallback

REDIS_PROFILES: tuple[str, ...] = ("python-redis-lock", "redis-py")
"""Profile names a ``[[redis]]`` table may list (:mod:`core.remote.redis.backend`)."""

MAX_DEADLINE_S = 3600.0
"""The largest ``deadline`` a server table may set (s): one hour."""

_URL_SCHEMES = {"postgres": ("postgres", "postgresql"), "redis": ("redis",)}
_ENV_NAME = re.compile(r"^LOCKWARDEN_[A-Za-z0-9_]+$")
"""What ``password_env`` in a configuration file may name: only ``LOCKWARDEN_*`` variables, so
that a configuration someone else wrote cannot send any secret of the environment (say
``AWS_SECRET_ACCESS_KEY``) to a server of its choosing (docs/remote.md, "Configuration"). The
command line's ``--password-env NAME`` is the user's own choice and takes any name."""


class Credentials(Protocol):
    """A table that names where its password comes from: a server table
    (:class:`~core.config.model.ServerSpec`) or ``[fleet]``
    (:class:`~core.config.model.FleetSpec`)."""

    password_env: str | None
    keyring: bool


def set_credential(spec: Credentials, name: str, value: object,
                   bad: Callable[[str, object], None]) -> None:
    """Set ``password_env`` or ``keyring`` (``name``) of ``spec`` from the file's ``value``; a
    value that cannot be one goes to ``bad(message, default)`` and leaves ``spec`` as it is.
    The one place both keys are checked, for server tables and ``[fleet]`` alike."""
    if name == "keyring":
        if isinstance(value, bool):
            spec.keyring = value
        else:
            bad(f"must be true or false, not {_describe(value)}", False)
        return
    why = check_password_env(value)
    if why is None:
        assert isinstance(value, str)
        spec.password_env = value
    else:
        bad(why, None)


def check_password_env(value: object) -> str | None:
    """Why ``value`` cannot be a configuration file's ``password_env`` (:data:`_ENV_NAME`), or
    None when it can."""
    if isinstance(value, str) and _ENV_NAME.match(value):
        return None
    return ("must name a LOCKWARDEN_* environment variable (a configuration file may not send "
            f"any other variable to a server), not {_describe(value)}")


class Problems(Protocol):
    """What :mod:`core.config.load` collects problems with."""

    def add(self, key: str, message: str, *, section: tuple[str, int] | None, name: str,
            fallback: str | None) -> None: ...



_URL_IN_TEXT = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<rest>[^\s'\"#?<>]*)")
_DSN_PASSWORD = re.compile(r"(?i)\b((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s'\"]+)")
REDACTED = "***"
"""What a password is shown as."""


def redact_url(text: str) -> str:
    """``text`` with the password of every URL in it replaced by :data:`REDACTED`
    (``redis://:secret@h`` -> ``redis://:***@h``, ``postgres://u:p@h/db`` ->
    ``postgres://u:***@h/db``), and libpq's ``password=...`` too. The one function every
    place that shows or logs a server URL or DSN goes through (docs/remote.md, "Passwords
    shown nowhere"): error messages, JSON items, the watcher's lines, configuration warnings.

    The user information is everything before the last ``@`` ahead of the first ``#``, ``?``
    or blank, so a password holding ``/`` or ``@`` is hidden whole; the user name stays."""
    def url(m: re.Match[str]) -> str:
        rest = m["rest"]
        userinfo, at, after = rest.rpartition("@")
        if not at or ":" not in userinfo:
            return m[0]
        return f"{m['scheme']}{userinfo.split(':', 1)[0]}:{REDACTED}@{after}"

    return _DSN_PASSWORD.sub(lambda m: m[1] + REDACTED, _URL_IN_TEXT.sub(url, text))


def _strings(v: object) -> list[str] | None:
    """A non-empty string or a list of them, as a list; else None."""
    if isinstance(v, str) and v.strip():
        return [v.strip()]
    if isinstance(v, list) and all(isinstance(x, str) and x.strip() for x in v):
        return [x.strip() for x in v]
    return None


_QUERY_SECRETS = frozenset({"password", "sslpassword"})
"""Query parameters of a URL that hold a secret: libpq takes ``?password=`` (and the TLS key's
``?sslpassword=``) as it takes a password in the user part (docs/remote.md, "Configuration")."""


def _query_secret(query: str) -> bool:
    """True when the URL query ``query`` names a parameter of :data:`_QUERY_SECRETS` (its name
    percent-decoded, as libpq decodes it; any case, any value, even empty)."""
    from urllib.parse import unquote

    for item in query.split("&"):
        name = unquote(item.partition("=")[0]).strip().lower()
        if name in _QUERY_SECRETS:
            return True
    return False


def check_url(kind: str, url: str) -> str | None:
    """Why ``url`` cannot name a ``kind`` server in the file (wrong scheme, a password, no
    host), or None when it can."""
    try:
        parts = urlsplit(url)
        if parts.port is not None and not 0 < parts.port < 65536:
            return f"has port {parts.port}, not 1 to 65535"
    except ValueError:  # urlsplit checks the port only when it is read; its words may
        return "is not a URL (its port is not a number)"  # quote part of a password
    schemes = _URL_SCHEMES.get(kind, ("http", "https"))
    if parts.scheme not in schemes:
        return (f"must start with {' or '.join(s + '://' for s in schemes)}, not "
                f"{redact_url(url)!r}")
    if parts.password is not None or _query_secret(parts.query):
        return ("must not hold a password (passwords never go in the file: use "
                "password_env = \"NAME\" or keyring = true)")
    if not parts.hostname:
        return "names no host"
    return None


def parse_server(kind: str, raw: object, idx: int, problems: Problems) -> ServerSpec | None:
    """One ``[[kind]]`` table as a :class:`ServerSpec`, or None when it is unusable (no
    server, a password in the URL): every problem goes to ``problems``."""
    assert kind in SERVER_KINDS
    sect = (kind, idx)
    key0 = f"{kind}[{idx + 1}]"
    if not isinstance(raw, dict):
        problems.add(key0, f"must be a table, not {_describe(raw)}", section=None, name=kind,
                     fallback="ignored")
        return None
    spec = ServerSpec(kind=kind, profiles=[] if kind != "redis" else ["python-redis-lock"])
    main = {"postgres": "dsn", "redis": "url", "etcd": "endpoints"}[kind]
    known = [main, *sorted(_allowed(kind))]
    if not _server(spec, main, raw.get(main), key0, sect, problems):
        for name in raw:  # a misspelled server key is why it is missing: name it, suggest
            if name not in known:
                problems.add(f"{key0}.{name}", "unknown key", section=sect, name=name,
                             fallback=unknown_key_fallback(name, known))
        return None
    for name, value in raw.items():
        if name == main:
            continue
        if not _option(spec, name, value, key0, sect, problems):
            problems.add(f"{key0}.{name}", "unknown key", section=sect, name=name,
                         fallback=unknown_key_fallback(name, known))
    if kind == "redis" and "redis-py" in spec.profiles and not spec.patterns:
        problems.add(f"{key0}.patterns", "profile redis-py needs patterns (its keys have no "
                     "prefix)", section=sect, name="profiles", fallback="redis-py not looked for")
        spec.profiles.remove("redis-py")
    return spec


def _server(spec: ServerSpec, main: str, value: object, key0: str, sect: tuple[str, int],
            problems: Problems) -> bool:
    """Set the server (``dsn``, ``url``, ``endpoints``); False when the table is unusable."""
    urls = _strings(value) if main == "endpoints" else (
        [value.strip()] if isinstance(value, str) and value.strip() else None)
    if urls is None:
        what = "is missing" if value is None else f"must be a URL, not {_describe(value)}"
        problems.add(f"{key0}.{main}", what, section=sect, name=main,
                     fallback=f"this [[{spec.kind}]] entry is ignored")
        return False
    for url in urls:
        why = check_url(spec.kind, url if "://" in url or spec.kind != "etcd" else "http://" + url)
        if why:
            problems.add(f"{key0}.{main}", why, section=sect, name=main,
                         fallback=f"this [[{spec.kind}]] entry is ignored")
            return False
    spec.url = urls[0]
    spec.endpoints = urls if spec.kind == "etcd" else []
    return True


def _allowed(kind: str) -> set[str]:
    """The optional keys of a ``[[kind]]`` table (its server key aside)."""
    return {"password_env", "keyring", "stale_after", "deadline"} | {
        "redis": {"profiles", "patterns", "notifications"},
        "etcd": {"prefix", "username"}}.get(kind, set())


def _option(spec: ServerSpec, name: str, value: Any, key0: str, sect: tuple[str, int],
            problems: Problems) -> bool:
    """Set one optional key; False for a key this kind does not have."""
    def bad(message: str, default: object) -> None:
        problems.add(f"{key0}.{name}", message, section=sect, name=name,
                     fallback=f"using {_describe(default)}")

    if name not in _allowed(spec.kind):
        return False
    if name == "stale_after":
        if isinstance(value, int | float) and not isinstance(value, bool) \
                and math.isfinite(value) and value > 0:
            spec.stale_after = float(value)
        else:
            bad(f"must be a finite positive number of seconds, not {_describe(value)}",
                spec.stale_after)
    elif name == "deadline":
        if isinstance(value, int | float) and not isinstance(value, bool) \
                and math.isfinite(value) and 0 < value <= MAX_DEADLINE_S:
            spec.deadline = float(value)
        else:
            bad(f"must be a number of seconds, more than 0 and at most {MAX_DEADLINE_S:g}, "
                f"not {_describe(value)}", spec.deadline)
    elif name == "notifications":
        if isinstance(value, bool):
            spec.notifications = value
        else:
            bad(f"must be true or false, not {_describe(value)}", False)
    elif name in ("keyring", "password_env"):
        set_credential(spec, name, value, bad)
    elif name in ("prefix", "username"):
        if isinstance(value, str):
            setattr(spec, name, value or (None if name == "username" else ""))
        else:
            bad(f"must be a string, not {_describe(value)}", getattr(spec, name))
    elif name == "profiles":
        names = _strings(value)
        if names is not None and all(n in REDIS_PROFILES for n in names):
            spec.profiles = list(dict.fromkeys(names))
        else:
            bad(f"must be a list of {', '.join(REDIS_PROFILES)}, not {_describe(value)}",
                spec.profiles)
    elif name == "patterns":
        pats = _strings(value)
        if pats is not None:
            spec.patterns = pats
        else:
            bad(f"must be a list of SCAN patterns, not {_describe(value)}", spec.patterns)
    return True


def server_to_dict(spec: ServerSpec) -> dict[str, Any]:
    """The TOML table of ``spec`` (what :func:`core.config.save` writes)."""
    out: dict[str, Any] = {}
    if spec.kind == "postgres":
        out["dsn"] = spec.url
    elif spec.kind == "redis":
        out.update(url=spec.url, profiles=list(spec.profiles), patterns=list(spec.patterns))
        if spec.notifications:
            out["notifications"] = True
    else:
        out.update(endpoints=list(spec.endpoints), prefix=spec.prefix)
        if spec.username:
            out["username"] = spec.username
    if spec.password_env:
        out["password_env"] = spec.password_env
    if spec.keyring:
        out["keyring"] = True
    out["stale_after"] = float(spec.stale_after)
    if spec.deadline != SERVER_DEADLINE_S:
        out["deadline"] = float(spec.deadline)
    return out
