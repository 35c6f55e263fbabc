"""From transitions to spans of time and contention figures (docs/history.md, "Statistics").

Pure: rows in, values out; no clock reads (the caller passes the window, Unix seconds UTC).
A *span* is the time between a lock's transition and its next one (or the window's end) in
one state with one holder. The app's timeline draws them; ``lockwarden stats`` sums them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.history.model import Transition


@dataclass(frozen=True, slots=True)
class Span:
    """One lock in one state with one holder from ``start`` to ``end`` (Unix s, UTC).

    ``holder``: :func:`holder_label` of the transition that began it ("" when free);
    ``who``: its :func:`holder_key` (the timeline's colour, the distinct holders)."""

    lock: str
    start: float
    end: float
    state: str
    holder: str
    who: str = ""

    @property
    def length(self) -> float:
        """``end - start`` in seconds."""
        return self.end - self.start


def holder_label(t: Transition) -> str:
    """Who held the lock, in a few words: ``"agent-7 pid 4242 on build-7"``, ``"pid 4242"``;
    ``""`` when the row names nobody."""
    parts = [p for p in (t.holder, f"pid {t.pid}" if t.pid is not None else None,
                         f"on {t.host}" if t.host else None) if p]
    return " ".join(parts)


def holder_key(t: Transition, my_host: str | None = None) -> str:
    """Who a holder is, across its holds: its name (with the host the lock names) when the
    lock names one (``"ci-runner-1 on build-7"``: one agent, many processes), else the PID and
    host. A process's row that names no host is ``my_host``'s, the host that recorded it (a
    lock file without a ``host`` is this host's): ``pid 1352`` and ``pid 1352 on vm`` are one
    holder on vm."""
    if t.holder:
        return f"{t.holder} on {t.host}" if t.host else t.holder
    if not t.host and my_host:
        return holder_label(t._replace(host=my_host)) if t.pid is not None else ""
    return holder_label(t)


def spans_of(rows: Iterable[Transition], since: float, until: float,
             before: Iterable[Transition] = (), my_host: str | None = None
             ) -> dict[str, list[Span]]:
    """Each lock's spans inside ``[since, until)`` (Unix s), oldest first.

    ``rows``: the transitions seen in the window, oldest first; ``before``: each lock's last
    transition before ``since`` (its state when the window opens,
    :meth:`core.history.store.HistoryStore.before`); ``my_host``: the host that recorded
    them (:func:`holder_key`). ``free`` spans are included."""
    current: dict[str, Transition] = {t.lock: t for t in before}
    out: dict[str, list[Span]] = {}
    starts: dict[str, float] = {lock: since for lock in current}

    def close(lock: str, end: float) -> None:
        t = current[lock]
        start = starts[lock]
        if end > start:
            out.setdefault(lock, []).append(
                Span(lock, start, end, t.state, holder_label(t), holder_key(t, my_host)))

    for t in rows:
        if t.t >= until:
            break
        if t.lock in current:
            close(t.lock, max(since, t.t))
        current[t.lock] = t
        starts[t.lock] = max(since, t.t)
    for lock in current:
        close(lock, until)
    return out


@dataclass(frozen=True)
class Stats:
    """Contention figures of one lock or of the locks of a directory over a window.

    Attributes:
        since, until: the window (Unix s, UTC).
        locks: locks seen.
        transitions: transitions in the window.
        held_s: seconds some holder held a lock (summed over the locks).
        longest_hold_s: the longest time one holder held one lock without a break.
        longest_hold: ``(lock, holder)`` of that hold, or ``None``.
        holders: distinct holders (:func:`holder_key`: a named holder counts once
            whatever its PIDs).
        stale_s, expired_s: seconds locks were stale / expired.
        reclaimed: transitions whose event is ``reclaimed``.
        released, force_released, handovers: ``released``; ``force_released``; a held lock
            passing straight to another holder (``holder_changed``) or reclaimed.
    """

    since: float
    until: float
    locks: int = 0
    transitions: int = 0
    held_s: float = 0.0
    longest_hold_s: float = 0.0
    longest_hold: tuple[str, str] | None = None
    holders: list[str] = field(default_factory=list)
    stale_s: float = 0.0
    expired_s: float = 0.0
    reclaimed: int = 0
    released: int = 0
    force_released: int = 0
    handovers: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the fields (``holders`` as a list, times in seconds)."""
        return {"since": self.since, "until": self.until, "locks": self.locks,
                "transitions": self.transitions, "held_s": round(self.held_s, 3),
                "longest_hold_s": round(self.longest_hold_s, 3),
                "longest_hold": ({"lock": self.longest_hold[0], "holder": self.longest_hold[1]}
                                 if self.longest_hold else None),
                "distinct_holders": len(self.holders), "holders": self.holders,
                "stale_s": round(self.stale_s, 3), "expired_s": round(self.expired_s, 3),
                "reclaimed": self.reclaimed, "released": self.released,
                "force_released": self.force_released, "handovers": self.handovers}


def stats_of(rows: Sequence[Transition], since: float, until: float,
             before: Iterable[Transition] = (), my_host: str | None = None) -> Stats:
    """The :class:`Stats` of ``rows`` (oldest first) in ``[since, until)``; ``before`` and
    ``my_host`` as :func:`spans_of`. A hold is a run of ``held`` spans of one holder; spans of
    other states end it."""
    before = list(before)
    spans = spans_of(rows, since, until, before, my_host)
    held = stale = expired = 0.0
    longest = 0.0
    longest_of: tuple[str, str] | None = None
    holders: dict[str, None] = {}
    for lock, lock_spans in spans.items():
        run_holder, run = "", 0.0
        for s in lock_spans:
            if s.state == "held":
                held += s.length
                holders.setdefault(s.who or "(unnamed)")
                run = run + s.length if s.holder == run_holder else s.length
                run_holder = s.holder
                if run > longest:
                    longest, longest_of = run, (lock, s.holder)
            else:
                run_holder, run = "", 0.0
                if s.state == "stale":
                    stale += s.length
                elif s.state == "expired":
                    expired += s.length
    in_window = [t for t in rows if since <= t.t < until]
    events = [t.event for t in in_window]
    return Stats(
        since=since, until=until,
        locks=len({t.lock for t in in_window} | {t.lock for t in before if t.state != "free"}),
        transitions=len(in_window), held_s=held, longest_hold_s=longest,
        longest_hold=longest_of, holders=list(holders), stale_s=stale, expired_s=expired,
        reclaimed=events.count("reclaimed"), released=events.count("released"),
        force_released=events.count("force_released"),
        handovers=events.count("holder_changed") + events.count("reclaimed"))
