"""The engine's scheduling points: every step another process can observe or race -- a link
or rename or exchange at a lock's path, an unlink, reading a lock file or rewriting it in place,
a kernel lock taken or
tried, a holder's liveness looked up, an audit entry appended -- is announced here first with
:func:`step` (docs/engine.md, "Every interleaving checked").

In a normal run nothing is installed and :func:`step` returns at once (one global look-up and
a comparison; ``tests/benchmarks/bench_seam.py`` measures it against an acquire+release). The
interleaving checker (``tests/verify/``) installs a hook in each process it runs: the process
then stops at every step until the checker's scheduler lets it go on, or kills it there (a
crash at that step). The steps in between run alone, so the checker decides the order of
every observable step of the real engine code on a real file system.
"""

from __future__ import annotations

from collections.abc import Callable

Hook = Callable[[str, str], None]
"""``hook(kind, subject)``: ``kind`` one of :data:`KINDS`, ``subject`` the path (or PID) the
step is about."""

KINDS: tuple[str, ...] = (
    "link",  # link(2) of a complete file to a lock's path
    "rename",  # rename(2) at or out of a lock's path (also a put-back)
    "exchange",  # renameat2(RENAME_EXCHANGE) / the platform's atomic exchange
    "unlink",  # unlink(2) of a lock or of a file taken out of one
    "read",  # a lock file read (lstat, open, fstat, read)
    "write",  # a lock file rewritten in place (its inode kept)
    "lock",  # one attempt at a kernel lock (flock, a guard, the audit log's lock)
    "wait",  # a kernel lock was busy: the attempt will be made again
    "liveness",  # a holder PID looked up in the process table
    "audit",  # an audit entry appended
    "list",  # a directory listed (clean)
)

_hook: Hook | None = None


def step(kind: str, subject: str) -> None:
    """Announce a step of kind ``kind`` (one of :data:`KINDS`) about ``subject``; returns when
    the installed hook lets the process go on (at once without one). Never raises on its
    own; a hook may end the process."""
    if _hook is not None:
        _hook(kind, subject)


def install(hook: Hook | None) -> None:
    """Install ``hook`` for this process (``None``: remove it). Test-only: the interleaving
    checker calls it in the processes it starts."""
    global _hook
    _hook = hook


__all__ = ["KINDS", "Hook", "install", "step"]
