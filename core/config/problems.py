"""How a problem of the configuration file is worded: an unknown key or table with the
known name it is closest to (:func:`unknown_hint`), and the one line on stderr that the
command line and the app print for each problem (:func:`problem_line`; docs/cli.md,
"Configuration problems").

Imports only :mod:`core.text` at load time (``difflib`` when a name is unknown).
"""

from __future__ import annotations

from collections.abc import Iterable

from core.text import printable

TOP_LEVEL_TABLES: tuple[str, ...] = (
    "watch", "projects", "postgres", "redis", "etcd", "fleet", "notifications", "ui",
    "history")
"""The tables a configuration file may hold (docs/watching.md, "Configuration")."""

WATCH_KEYS: tuple[str, ...] = (
    "path", "recursive", "patterns", "stale_after", "format_stale_after", "polling",
    "allow_higher_privilege", "allow_emergency", "readable_lock_files")
"""The keys of a ``[[watch]]`` table."""

PROJECT_KEYS: tuple[str, ...] = ("path", "skip", "stale_after", "polling")
"""The keys of a ``[[projects]]`` table."""


def unknown_hint(name: str, known: Iterable[str]) -> str:
    """``"did you mean `watch`?"`` for the known name closest to ``name``
    (:func:`difflib.get_close_matches`, ratio at least 0.6), else ``""``."""
    import difflib  # only for a file with an unknown name: start-up imports stay few

    guess = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean `{guess[0]}`?" if guess else ""


def unknown_key_fallback(name: str, known: Iterable[str]) -> str:
    """What an unknown key's warning ends with: ``"ignored"``, or ``"ignored (did you mean
    `stale_after`?)"`` when a known key is close to ``name``. The key stays in the file
    (saving edits the file: :mod:`core.config.edit`)."""
    hint = unknown_hint(name, known)
    return f"ignored ({hint})" if hint else "ignored"


def problem_line(problem: str) -> str:
    """The line printed on stderr for one configuration problem (an item of
    :attr:`core.config.Config.warnings`, as the app's Problems panel lists it):
    ``lockwarden: config: <problem>``, control characters escaped, on one line."""
    return f"lockwarden: config: {printable(problem)}"
