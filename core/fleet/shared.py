"""One lock published by several hosts, shown once (docs/fleet.md, "Shared locks").

Two hosts that watch one shared directory (NFS, a cluster file system) both publish its locks.
Only the holder's own host can check the holder's PID: the other host publishes the same lock
as ``held`` with liveness ``remote`` while the holder's host may already publish it ``stale``
(holder ``dead``). :func:`fold` is the one rule that every fleet listing applies
(``list --fleet``, :mod:`core.fleet.listing`; the app's fleet rows, ``app/fleet/bridge.py``):

- the same lock is the same path with the same record: format, the host and PID it names, its
  acquisition time (``timestamp``) and holder, as each publisher read them from the file
  (:func:`lock_identity`); a lock whose record names no host is never folded (which host
  could judge it is unknown, so each host's verdict is shown);
- such a lock published by several hosts is one row: the verdict of the host its record names
  (matched as :func:`core.verdicts.liveness.same_host` does: case-insensitive, a short name
  matches its fully qualified one) -- the only host where that PID's liveness is known --,
  else (the holder's host does not publish it) the first publisher's in byte order;
- that row lists every publisher (``seen_by``, sorted in byte order); the others' rows are
  folded into it (not shown).

Cheap to import: no verdict machinery (``list --fleet`` imports none).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from core.text import same_host_name

T = TypeVar("T")

Identity = tuple[str, str, str, int | None, str | None, str | None]
"""``(path, format, record host lower-cased, pid, timestamp, holder)``: what two hosts that read
one lock file publish alike (:func:`lock_identity`)."""


def lock_identity(path: str, fmt: str | None, record_host: str | None, pid: int | None,
                  timestamp: object, holder: str | None) -> Identity | None:
    """The identity of a published lock (see the module docstring), or None when it cannot
    be folded: no record (``fmt`` None) or no host named in it. ``timestamp`` is compared
    as text (``str``), so pass it in one form for all the rows compared."""
    if not fmt or not record_host or not record_host.strip():
        return None
    return (path, fmt, record_host.strip().rstrip(".").lower(), pid,
            None if timestamp is None else str(timestamp), holder)


def names_host(name: str, host: str) -> bool:
    """True when the host ``name`` a lock records is the publishing host ``host``
    (:func:`core.text.same_host_name`, the rule :func:`core.verdicts.liveness.same_host`
    applies too; imported from the vocabulary so that ``list --fleet`` loads no verdicts)."""
    return same_host_name(name, host)


@dataclass(frozen=True, slots=True)
class Folded(Generic[T]):
    """One row as shown: ``item`` (the verdict that wins), ``seen_by`` (every host that
    published the lock, byte order; one host for a lock only it publishes) and ``folded``
    (the other hosts' rows of the same lock, not shown)."""

    item: T
    seen_by: tuple[str, ...]
    folded: tuple[T, ...] = ()


def fold(items: Iterable[T], key: Callable[[T], tuple[str, Identity | None]]) -> list[Folded[T]]:
    """``items`` (published locks, any type) with each lock published by several hosts folded
    into one row (the rule: module docstring). ``key(item)`` gives ``(publishing host,
    identity)`` (:func:`lock_identity`). The rows keep the order of ``items``: a folded
    lock takes the place of its winning row. Never raises (but what ``key`` raises)."""
    rows = list(items)
    keys = [key(item) for item in rows]
    groups: dict[Identity, list[int]] = {}
    for i, (_host, ident) in enumerate(keys):
        if ident is not None:
            groups.setdefault(ident, []).append(i)
    winner: dict[int, tuple[str, ...]] = {}
    folded: dict[int, list[int]] = {}
    hidden: set[int] = set()
    for ident, members in groups.items():
        if len(members) < 2:
            continue
        hosts = sorted((keys[i][0] for i in members), key=lambda h: h.encode())
        judges = [i for i in members if names_host(ident[2], keys[i][0])]
        best = judges[0] if judges else min(members, key=lambda i: keys[i][0].encode())
        winner[best] = tuple(dict.fromkeys(hosts))
        folded[best] = [i for i in members if i != best]
        hidden.update(folded[best])
    return [Folded(item, winner.get(i, (keys[i][0],)),
                   tuple(rows[j] for j in folded.get(i, ())))
            for i, item in enumerate(rows) if i not in hidden]
