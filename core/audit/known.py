"""The audit logs this user has known: the logs of every directory the app ever watched, kept
in the per-user data directory so the audit viewer still shows a directory's history after it
left the watch list (docs/audit.md, "The viewer's logs"; docs/gui.md, "Dialogs").

Part of :mod:`core.audit`. One absolute path a line in
``platformdirs.user_data_dir("lockwarden")/known_logs.txt``, appended (``O_APPEND``, one
``write`` per call), never rewritten; readers drop duplicates and blank lines.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

KNOWN_LOGS_NAME = "known_logs.txt"
"""File name of the list inside ``platformdirs.user_data_dir("lockwarden")``."""

MAX_KNOWN_BYTES = 1024 * 1024
"""Most bytes of the list read (1 MiB, some ten thousand paths)."""


def known_logs_path() -> str:
    """``platformdirs.user_data_dir("lockwarden")/known_logs.txt`` (Linux:
    ``~/.local/share/lockwarden/known_logs.txt``). Not created here."""
    import platformdirs

    return os.path.join(platformdirs.user_data_dir("lockwarden"), KNOWN_LOGS_NAME)


def known_logs() -> list[str]:
    """The logs remembered so far, oldest first, without duplicates; ``[]`` when there is no
    list or it cannot be read. Never raises."""
    try:
        fd = os.open(known_logs_path(), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ImportError):
        return []
    try:
        data = os.read(fd, MAX_KNOWN_BYTES)
    except OSError:
        return []
    finally:
        os.close(fd)
    lines = data.decode("utf-8", errors="surrogateescape").splitlines()
    return list(dict.fromkeys(line for line in lines if line.startswith(os.sep)))


def remember(logs: Iterable[str]) -> list[str]:
    """Add the audit logs ``logs`` (paths, made absolute) to the list, those not in it yet;
    returns the ones added. The directory is created (0700) when needed.

    Raises:
        OSError: the list cannot be written.
    """
    have = set(known_logs())
    new = [p for p in dict.fromkeys(os.path.abspath(s) for s in logs)
           if p not in have and "\n" not in p]
    if not new:
        return []
    path = known_logs_path()
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        os.write(fd, "".join(p + "\n" for p in new).encode("utf-8", errors="surrogateescape"))
    finally:
        os.close(fd)
    return new


__all__ = ["KNOWN_LOGS_NAME", "known_logs", "known_logs_path", "remember"]
