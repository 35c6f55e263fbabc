"""Schedules the checker found violations in, kept as regression tests: each is replayed move
by move (then run to its end) by ``tests/verify/test_verify.py`` and must break nothing
(docs/engine.md, "Every interleaving checked", "Found on the way")."""

from __future__ import annotations

from typing import NamedTuple


class Regression(NamedTuple):
    """A found schedule: what it broke before the fix, the seed, the processes and the
    moves; ``shows`` is a step its trace must hold at least ``times`` times (the replay
    reached the race)."""

    name: str
    broke: str
    seed: str
    ops: tuple[str, ...]
    moves: tuple[tuple[str, int], ...]
    shows: str
    times: int = 2


def _moves(*spec: str) -> tuple[tuple[str, int], ...]:
    """``"g2"`` is ``("go", 2)``, ``"c0"`` is ``("crash", 0)``."""
    return tuple(("go" if s[0] == "g" else "crash", int(s[1:])) for s in spec)


REGRESSIONS: tuple[Regression, ...] = (
    Regression(
        "swap_back_after_a_peer_unlinked_ours",
        "a take-over found the file it moved out was not the one judged (sema had reclaimed "
        "the stale lock meanwhile) and swapped back -- but sema, releasing, had unlinked our "
        "lock from the path: the exchange failed with ENOENT and the reclaim ended in "
        "FileNotFoundError, the peer's file left under our temp name",
        "stale", ("force", "reclaim", "sema", "semats"),
        _moves("g2", "g3", "c0", "g1", "g1", "g2", "g1", "g1", "g1", "g1", "g2", "g2", "g1",
               "g1", "g2", "g2", "g2", "g1"),
        "P1 reclaim: exchange x.lock"),
    Regression(
        "swap_back_after_a_peer_unlinked_ours_2",
        "the same race, the peer reclaiming before the engine's re-read under the guard",
        "stale", ("force", "reclaim", "sema", "semats"),
        _moves("g1", "g3", "g1", "c0", "g1", "g2", "g1", "g1", "g1", "g2", "g2", "g1", "g2",
               "g2", "g2", "g1", "g2", "g1"),
        "P1 reclaim: exchange x.lock"),
    Regression(
        "our_inode_number_given_to_a_peers_file",
        "sema, reclaiming on an old read, unlinked the lock our reclaim had just exchanged in "
        "and created its own; the staged file's descriptor was already closed, so the freed "
        "inode's number went to sema's new file (ext4 gives it again at once) and our holder's "
        "pin and identity named sema's file: two holders. The staged descriptor now stays open "
        "until the lock is pinned",
        "stale", ("reclaim", "clean", "sema"),
        _moves("g0", "g0", "g0", "g0", "g2", "g0", "g1", "g2", "g0", "g0", "g0", "g2", "g2",
               "g0", "g0", "g0", "g0", "g2"),
        "P2 sema: create x.lock"),
    Regression(
        "a_refresh_under_flock1s_waiter",
        "a lock of ours that had taken over flock-style tools' empty file was refreshed by "
        "exchanging a renewed file in; flock(1), which had opened the path before and waited "
        "on our pin, locked the old inode once it was unlinked and its pin let go, and never "
        "looked at the path again: two holders. Such a lock is now renewed in place",
        "empty", ("refresh", "flock1"),
        _moves("g0", "g0", "g0", "g0", "g0", "g0", "g0", "g0", "g1", "g0", "g0", "g0", "g0",
               "g1"),
        "P0 refresh: write x.lock", 1),
)
