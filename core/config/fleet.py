"""The ``[fleet]`` table of the configuration: where this host publishes its locks and reads
every other host's (docs/fleet.md, "Set-up").

::

    [fleet]
    dsn = "postgresql://lw_host_a@db.example/lockwarden"   # never a password in the file
    password_env = "LOCKWARDEN_FLEET_PASSWORD"              # or keyring = true
    host = "build-7"         # default: this host's name
    interval = 2             # seconds between heartbeats (> 0)
    silent_after = 15        # seconds without a heartbeat after which a host is silent
    deadline = 10            # seconds one read or write of the database may take in all

Loaded by :mod:`core.config.load`; problems are warnings naming the key, as for every table.
"""

from __future__ import annotations

import math
from typing import Any

from core.config.model import FleetSpec
from core.config.model import describe_value as _describe
from core.config.problems import unknown_key_fallback
from core.config.servers import MAX_DEADLINE_S, Problems, check_url, set_credential

_KEYS = ("dsn", "password_env", "keyring", "host", "interval", "silent_after", "deadline")
"""The keys of ``[fleet]``."""


def _seconds(v: object) -> float | None:
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
        return float(v)
    return None


def parse_fleet(raw: object, problems: Problems) -> FleetSpec | None:
    """The ``[fleet]`` table as a :class:`~core.config.model.FleetSpec`; None when it is
    unusable (no ``dsn``, a password in it). Every problem goes to ``problems``."""
    sect = ("fleet", 0)
    if not isinstance(raw, dict):
        problems.add("fleet", f"must be a table, not {_describe(raw)}", section=None,
                     name="fleet", fallback="ignored")
        return None
    dsn = raw.get("dsn")
    why = (check_url("postgres", dsn.strip()) if isinstance(dsn, str) and dsn.strip()
           else "is missing" if dsn is None else f"must be a URL, not {_describe(dsn)}")
    if why:
        problems.add("fleet.dsn", why, section=sect, name="dsn",
                     fallback="this host does not publish to a fleet")
        for name in raw:  # a misspelled dsn is why it is missing: name it, suggest
            if name not in _KEYS:
                problems.add(f"fleet.{name}", "unknown key", section=sect, name=name,
                             fallback=unknown_key_fallback(name, _KEYS))
        return None
    assert isinstance(dsn, str)
    spec = FleetSpec(dsn=dsn.strip())
    for name, value in raw.items():
        def bad(message: str, default: Any, name: str = name) -> None:
            problems.add(f"fleet.{name}", message, section=sect, name=name,
                         fallback=f"using {_describe(default)}")

        if name == "dsn":
            continue
        if name in ("password_env", "keyring"):
            set_credential(spec, name, value, bad)
        elif name == "host":
            if isinstance(value, str) and value.strip() and value.isprintable():
                spec.host = value.strip()
            else:
                bad(f"must be a host name, not {_describe(value)}", spec.host)
        elif name in ("interval", "silent_after"):
            seconds = _seconds(value)
            if seconds is None:
                bad(f"must be a finite positive number of seconds, not {_describe(value)}",
                    getattr(spec, name))
            else:
                setattr(spec, name, seconds)
        elif name == "deadline":  # as a lock server's (core.config.servers)
            seconds = _seconds(value)
            if seconds is None or seconds > MAX_DEADLINE_S:
                bad(f"must be a number of seconds, more than 0 and at most "
                    f"{MAX_DEADLINE_S:g}, not {_describe(value)}", spec.deadline)
            else:
                spec.deadline = seconds
        else:
            problems.add(f"fleet.{name}", "unknown key", section=sect, name=name,
                         fallback=unknown_key_fallback(name, _KEYS))
    return spec
