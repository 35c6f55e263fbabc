"""A viewer's reads of the fleet database for a table of every host's locks (docs/fleet.md,
"The app"): one summary per host (its heartbeat's age, how many locks it publishes, how many
of those need attention, whether it is silent) and the published locks themselves with their
reason codes, ready to be shown beside this host's own.

Both are plain ``SELECT`` statements: a read-only role (docs/fleet.md, "Set-up") is enough.
Ages are the database's clock (``now() - heartbeat_at``), so the hosts' clocks do not matter.
Only rows written by the role bound to their host are taken (docs/fleet.md, "Trust"); a host
whose rows are not is a summary marked ``untrusted`` with no locks, and a host publishing more
than :data:`core.fleet.listing.HOST_CAP_BYTES` of verdicts has none read. Run them inside
:meth:`core.fleet.link.Link.run`, which bounds them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.fleet.listing import HOST_CAP_BYTES
from core.fleet.schema import BINDINGS

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
        untrusted: why its rows are not trusted (docs/fleet.md, "Trust"), or None; an
            untrusted host's ``locks`` and ``attention`` are 0.
    """

    host: str
    age_s: float
    interval_s: float
    silent: bool
    locks: int
    attention: int
    version: str | None = None
    untrusted: str | None = None


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
            " count(l.path), count(l.path) FILTER (WHERE l.state = ANY(%s)), h.version,"
            " CASE WHEN b.role IS NULL THEN 'unbound' WHEN b.role <> h.owner THEN 'other_role'"
            " WHEN h.heartbeat_at > now() + interval '5 seconds' THEN 'future_heartbeat' END"
            f" FROM lockwarden_hosts h LEFT JOIN {BINDINGS} b ON b.host = h.host"
            " LEFT JOIN lockwarden_locks l ON l.host = h.host AND l.owner = h.owner"
            " GROUP BY h.host, b.role ORDER BY h.host", (silent_after, states))
        return [HostSummary(str(host), max(0.0, float(age)), float(interval), bool(silent),
                            0 if why else int(locks), 0 if why else int(attention), version,
                            why)
                for host, age, interval, silent, locks, attention, version, why
                in cur.fetchall()]


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
            "WITH good AS (SELECT h.host, h.owner FROM lockwarden_hosts h"
            f" JOIN {BINDINGS} b ON b.host = h.host AND b.role = h.owner"
            " WHERE (%s::text IS NULL OR h.host <> %s)"
            " AND (%s::text[] IS NULL OR h.host = ANY(%s))"
            " AND h.heartbeat_at <= now() + interval '5 seconds'"
            " AND (SELECT coalesce(sum(octet_length(x.verdict::text)), 0)"
            "      FROM lockwarden_locks x WHERE x.host = h.host) <= %s)"
            " SELECT l.host, l.path,"
            " (l.verdict || jsonb_build_object('reasons', l.reasons))::text"
            " FROM lockwarden_locks l JOIN good g ON g.host = l.host AND g.owner = l.owner"
            " ORDER BY l.host, l.path",
            (except_host, except_host, None if hosts is None else list(hosts),
             None if hosts is None else list(hosts), HOST_CAP_BYTES))
        out = []
        for host, path, verdict in cur.fetchall():
            try:
                value = json.loads(verdict)
            except ValueError:  # jsonb always is JSON: a server that is not PostgreSQL
                continue
            if isinstance(value, dict):
                out.append(PublishedLock(str(host), str(path), value))
        return out
