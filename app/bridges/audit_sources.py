"""Which audit logs the app knows and the viewer reads (docs/audit.md, "The viewer's logs"):
the watched directories' logs remembered in this user's list of known logs, and the viewer's
sources, this user's own log first."""

from __future__ import annotations

import os
from collections.abc import Iterable

from core import audit
from core.fsutil import AUDIT_LOG_NAME


def remember_watched_logs(dirs: Iterable[str]) -> None:
    """Add the audit logs of ``dirs`` (watched directories) to this user's list of known logs
    (:func:`core.audit.remember`), so a directory removed from Settings keeps its history in
    the viewer. An unwritable list is skipped (the viewer still reads the watched
    directories). Never raises ``OSError``."""
    try:
        audit.remember(os.path.join(d, AUDIT_LOG_NAME) for d in dirs)
    except OSError:
        pass


def viewer_logs(dirs: Iterable[str]) -> list[str]:
    """The audit logs the viewer reads, without repeats: this user's own log first (entries
    whose directory could not take them, and every entry about a lock in a git repository),
    then the logs of every directory ever watched (:func:`core.audit.known_logs`), then the
    logs in ``dirs`` (the watched directories and those holding a listed lock)."""
    srcs: list[str] = []
    try:
        srcs.append(audit.fallback_log_path())
    except Exception:
        pass
    for p in [*audit.known_logs(), *(os.path.join(d, AUDIT_LOG_NAME) for d in dirs)]:
        if p not in srcs:
            srcs.append(p)
    return srcs


__all__ = ["remember_watched_logs", "viewer_logs"]
