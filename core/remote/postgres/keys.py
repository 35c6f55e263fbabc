"""Keys and tokens of PostgreSQL locks, for :mod:`core.remote.postgres.backend` (pure functions, no
driver): the text of an advisory key in a lock's URL and back, the holder token of an advisory
lock, the Liquibase token and the address in its LOCKEDBY. Rules: docs/remote.md, "PostgreSQL";
key decoding: docs/specs/distributed-locks.md, "PostgreSQL advisory locks"."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

_INT4 = 2**31
_LOCKEDBY_IP = re.compile(r"\(([0-9A-Fa-f:.]+)\)\s*$")


# -- keys and tokens ----------------------------------------------------------------------


def advisory_key(classid: int, objid: int, objsubid: int) -> str:
    """The key part of an advisory lock's URL: ``advisory/<bigint>`` for ``objsubid = 1``
    (``(classid << 32) | objid``, negative keys included), ``advisory/<k1>:<k2>`` (signed
    int4) for the two-key form."""
    if objsubid == 1:
        value = (classid << 32) | objid
        return f"advisory/{value - 2**64 if value >= 2**63 else value}"
    return f"advisory/{_signed4(classid)}:{_signed4(objid)}"


FLYWAY_BASE = 0x466C79776179
"""Flyway's advisory lock keys are this ("Flyway" in ASCII, 77431708279161) plus the Java
``hashCode()`` of its schema-history table's name (docs/specs/distributed-locks.md, "Flyway")."""

RAILS_MIGRATOR_SALT = 2053462845
"""ActiveRecord's migration lock key is this times the CRC-32 of the database name
(docs/specs/distributed-locks.md, "Rails": ``MIGRATOR_SALT``)."""


def known_user(classid: int, objid: int, objsubid: int, database: str) -> str | None:
    """The tool that takes this advisory lock, from its key alone: ``"flyway"`` (a key within
    2**31 of :data:`FLYWAY_BASE`), ``"rails"`` (:data:`RAILS_MIGRATOR_SALT` times the CRC-32
    of ``database``), else None. Only the single-bigint form (``objsubid = 1``) is theirs."""
    import zlib

    if objsubid != 1:
        return None
    value = (classid << 32) | objid
    value = value - 2**64 if value >= 2**63 else value
    if abs(value - FLYWAY_BASE) < 2**31:
        return "flyway"
    if value == RAILS_MIGRATOR_SALT * zlib.crc32(database.encode("utf-8")):
        return "rails"
    return None


def parse_advisory_key(key: str) -> tuple[int, int, int] | None:
    """``(classid, objid, objsubid)`` as ``pg_locks`` stores them, from
    :func:`advisory_key`'s text; None when ``key`` is not one."""
    if not key.startswith("advisory/"):
        return None
    body = key[len("advisory/"):]
    try:
        if ":" in body:
            a, b = (int(x) for x in body.split(":", 1))
            if not all(-_INT4 <= v < _INT4 for v in (a, b)):
                return None
            return a % 2**32, b % 2**32, 2
        v = int(body)
    except ValueError:
        return None
    if not -(2**63) <= v < 2**63:
        return None
    v %= 2**64
    return v >> 32, v & 0xFFFFFFFF, 1


def parse_holders(token: str) -> list[tuple[int, datetime]] | None:
    """The ``(pid, backend_start)`` pairs of an advisory lock token, sorted; None when
    ``token`` is not one."""
    out: list[tuple[int, datetime]] = []
    try:
        for part in token.split(","):
            pid, start = part.split("@", 1)
            out.append((int(pid), datetime.fromisoformat(start)))
    except ValueError:
        return None
    return sorted(out)


def liquibase_token(granted: datetime | None, lockedby: str | None) -> str:
    """``<lockgranted ISO 8601>|<lockedby>`` (empty parts for NULL)."""
    return f"{granted.isoformat() if granted else ''}|{lockedby or ''}"


def _signed4(v: int) -> int:
    return v - 2**32 if v >= _INT4 else v


def holder_info(row: tuple[Any, ...]) -> dict[str, Any]:
    """One holder row of the listing query as JSON-ready data (``record.metadata["holders"]``)."""
    start: datetime | None = row[10]
    return {"pid": row[5], "user": row[6], "app": row[7], "client_addr": row[8],
            "client_port": row[9], "backend_start": start.isoformat() if start else None,
            "xact_start": row[11].isoformat() if row[11] else None,
            "state_change": row[12].isoformat() if row[12] else None, "state": row[13]}


def lockedby_ip(lockedby: str | None) -> str | None:
    """The IP address in Liquibase's ``host (ip)`` LOCKEDBY, or None."""
    m = _LOCKEDBY_IP.search(lockedby or "")
    return m.group(1) if m else None


def as_utc(value: datetime | None, server_now: datetime) -> datetime | None:
    """LOCKGRANTED is a ``timestamp`` without time zone set from the server's clock: read it
    in the server's zone (that of its ``now()``), as UTC."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=server_now.tzinfo)
    return value.astimezone(UTC)
