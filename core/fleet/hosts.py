"""A viewer's reads of the fleet database for a table of every host's locks (docs/fleet.md,
"The app"): one summary per host (its heartbeat's age, how many locks it publishes, how many
of those need attention, whether it is silent) and the published locks themselves with their
reason codes, ready to be shown beside this host's own.

Both are plain ``SELECT`` statements: a read-only role (docs/fleet.md, "Set-up") is enough.
Ages are the database's clock (``now() - heartbeat_at``), so the hosts' clocks do not matter.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

ATTENTION_STATES = ("stale", "expired", "unreadable")
"""Published states counted as a host's problems (as the app's "needs attention")."""


@dataclass(frozen=True, slots=True)
class HostSummary:
    """One host of the fleet as a viewer sees it.

    Attributes:
        host: the publishing host's name.
        age_s: seconds since its last heartbeat, by the database's clock.
        interval_s: its heartbeat interval in seconds.
        silent: no heartbeat for the silence bound (:func:`core.fleet.judge.silence_bound`).
        locks: how many locks it publishes.
        attention: how many of those are stale, expired or unreadable
            (:data:`ATTENTION_STATES`).
        version: what it runs (``lockwarden <version> on <host name>``), or None.
    """

    host: str
    age_s: float
    interval_s: float
    silent: bool
    locks: int
    attention: int
    version: str | None = None


@dataclass(frozen=True, slots=True)
class PublishedLock:
    """One lock a host published: the publishing ``host``, the lock's ``path`` on that host,
    and its verdict as published (:meth:`core.record.LockStatus.to_dict` without ``age_s``)
    with ``reasons`` as ``[{"code": ..., **params}]``."""

    host: str
    path: str
    verdict: dict[str, Any]


def host_summaries(conn: Any, *, silent_after: float) -> list[HostSummary]:
    """Every host of the fleet, sorted by name, through ``conn`` (a psycopg connection,
    :func:`core.fleet.store.connect`). ``silent_after`` in seconds (``[fleet] silent_after``).

    Raises:
        psycopg.Error: the database failed (callers report it and go on).
    """
    states = list(ATTENTION_STATES)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT h.host, extract(epoch FROM now() - h.heartbeat_at), h.interval_s,"
            " extract(epoch FROM now() - h.heartbeat_at) > greatest(%s, 3 * h.interval_s),"
            " count(l.path), count(l.path) FILTER (WHERE l.state = ANY(%s)), h.version"
            " FROM lockwarden_hosts h LEFT JOIN lockwarden_locks l ON l.host = h.host"
            " GROUP BY h.host ORDER BY h.host", (silent_after, states))
        return [HostSummary(str(host), max(0.0, float(age)), float(interval), bool(silent),
                            int(locks), int(attention), version)
                for host, age, interval, silent, locks, attention, version in cur.fetchall()]


def published_locks(conn: Any, *, except_host: str | None = None,
                    hosts: Sequence[str] | None = None) -> list[PublishedLock]:
    """The published locks of ``hosts`` (default: every host), but those of ``except_host``
    (this host: its own are shown from its own watcher), sorted by host and path, each with
    its reason codes. A reader that follows ``NOTIFY`` reads only the hosts that notified.

    Raises:
        psycopg.Error: the database failed.
    """
    with conn.cursor() as cur:
        cur.execute(
            "SELECT host, path, (verdict || jsonb_build_object('reasons', reasons))::text"
            " FROM lockwarden_locks WHERE (%s::text IS NULL OR host <> %s)"
            " AND (%s::text[] IS NULL OR host = ANY(%s)) ORDER BY host, path",
            (except_host, except_host, None if hosts is None else list(hosts),
             None if hosts is None else list(hosts)))
        return [PublishedLock(str(host), str(path), dict(json.loads(verdict)))
                for host, path, verdict in cur.fetchall()]
