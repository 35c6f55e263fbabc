"""The audit log: one JSON object per line in ``.lock_audit.log`` beside the locks,
hash-chained, shared with Task MCP's ``logLockOperation`` (docs/specs/task-mcp.txt, "Audit
logging").

This package's ``__init__`` is the room's public face (:func:`append`, :func:`read`,
:func:`read_many`, :func:`tail`, :func:`verify`, :func:`set_via`, ...); its modules and what
each imports: docs/audit.md, "Code layout".

Rules: docs/audit.md ("Format": the fields, ``prev``, foreign and blank lines; "Guarantees":
concurrent writers, hostile directories, interrupted writes, the fallback log; "Where entries
go": never into a git repository); docs/DESIGN.md, "Audit log".
"""

from __future__ import annotations

from typing import Any

from core.audit import appender
from core.audit import write as audit_write
from core.audit.known import known_logs, remember
from core.audit.model import (
    FALLBACK_LOG_NAME,
    MAX_LINE_BYTES,
    OPERATIONS,
    TAIL_WINDOW,
    VIAS,
    ZERO_HASH,
    AuditEntry,
    AuditWrite,
    VerifyResult,
    fallback_log_path,
    get_via,
    log_path_for,
    logs_for,
    resolve_log_path,
    set_via,
)
from core.audit.placement import repository_of
from core.audit.read import read, read_many, tail
from core.audit.verify import verify
from core.audit.write import add_lost_listener

__all__ = [
    "FALLBACK_LOG_NAME",
    "LOCK_TIMEOUT",
    "MAX_LINE_BYTES",
    "OPERATIONS",
    "TAIL_WINDOW",
    "VIAS",
    "ZERO_HASH",
    "AuditEntry",
    "AuditWrite",
    "VerifyResult",
    "add_lost_listener",
    "append",
    "close_logs",
    "fallback_log_path",
    "get_via",
    "known_logs",
    "log_path_for",
    "logs_for",
    "read",
    "read_many",
    "remember",
    "repository_of",
    "resolve_log_path",
    "set_via",
    "tail",
    "verify",
]

LOCK_TIMEOUT = audit_write.DEFAULT_LOCK_TIMEOUT
"""Seconds an append waits for another writer's lock on the log before it writes to the
per-user fallback log instead. Read at every call, so it may be changed at run time."""


def append(
    lock_path: str,
    operation: str,
    *,
    result: str = "ok",
    details: dict[str, Any] | None = None,
    format: str | None = None,
    durable: bool = False,
    user_log: bool = False,
) -> AuditWrite:
    """Append one entry about ``operation`` on ``lock_path`` to its directory's audit log.

    Args:
        lock_path: the lock the operation was about (made absolute for ``lockPath``).
        operation: ``acquire``, ``release``, ``reclaim``, ``force_release``, ``refresh``,
            ``acquire_refused``, ``release_refused``, ``reclaim_refused``, ``lost``,
            ``end_holder`` (docs/audit.md).
        result: ``ok``, ``refused``, ``lost``, ``error``...
        details: JSON-like data (``holder``/``displaced``, ``reason``, ``decision``, ``token``).
        format: the lock's format name, or None.
        durable: fsync the entry (always done for reclaims, force releases and lost locks:
            :data:`core.audit.write.DURABLE_OPERATIONS`).
        user_log: only the per-user log (the path is no lock: ``end_user``).

    Returns:
        :class:`AuditWrite` (``fallback``, ``reason``, ``error``, ``repaired``); see
        :func:`core.audit.write.append`. Waits at most :data:`LOCK_TIMEOUT` seconds for the
        log's lock. Never raises for I/O errors.
    """
    return audit_write.append(
        lock_path,
        operation,
        result=result,
        details=details,
        format=format,
        lock_timeout=LOCK_TIMEOUT,
        durable=durable,
        user_log=user_log,
    )


def close_logs() -> None:
    """Write the chain heads this process holds back and close the audit logs it keeps open
    (:mod:`core.audit.appender`; an idle log is closed within about
    :data:`core.audit.appender.IDLE_CLOSE` seconds anyway), e.g. before unmounting the file
    system a log is on. The next append opens its log again. Never raises."""
    appender.close_all()
