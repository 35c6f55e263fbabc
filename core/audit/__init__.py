"""The audit log: one JSON object per line in ``.lock_audit.log`` beside the locks, hash-chained.

This package's ``__init__`` is the room's public face; the work is done in (arrows point one way, no
cycles)::

    model    constants, AuditEntry / AuditWrite / VerifyResult, via, log paths
    parse    one line of bytes -> AuditEntry                       (model)
    read     read, read_many, tail; forward and backward readers   (model, parse)
    heads    this user's chain head of each log it appended to     (model)
    appender the logs this process keeps open, its chain heads     (model, heads)
             written in batches
    verify   verify                                                (model, parse, read, heads)
    entry    the fields and JSON encoding of a new line            (model)
    placement  whether a directory lies in a git repository (its entries then go to the
               per-user log)
    known    the logs of every directory ever watched (a per-user list)
    write    append: kernel lock, bounded tail read, repair        (model, parse, read,
             of an interrupted write, fallback log                  heads, entry, placement)

Rules and where they come from (docs/DESIGN.md "Audit log", docs/audit.md):

* File name, place and the first six fields (``timestamp``, ``operation``, ``lockPath``,
  ``details``, ``user``, ``pid``) are Task MCP's (docs/specs/task-mcp.txt, "Audit
  logging", ``logLockOperation``): the log is ``path.join(path.dirname(lockPath),
  '.lock_audit.log')`` and ``timestamp`` is JavaScript's ``toISOString()``. Task MCP appends to
  the same file, so its lines (none of Lockwarden's keys) are accepted as *foreign* entries.
* Lockwarden adds ``host``, ``via`` (``api``, ``cli``, ``gui``), ``format``, ``result`` and
  ``prev``: the SHA-256 (lower-case hex) of the bytes of the previous non-blank line without its
  ``\\n`` (a ``\\r`` before it is part of the line); 64 zeros on the first line. Blank lines
  (only spaces, tabs, ``\\r``) are skipped by writer and reader alike. Editing, deleting,
  inserting or swapping lines breaks the chain at the first of our lines after the change;
  removing ``prev`` from our lines is itself reported; this user's chain head catches a log
  rewritten from scratch or cut short after their last append (:mod:`core.audit.heads`).
* Appends are serialised with a kernel lock on the log, chain onto the log's last line (read
  back from this process's own last append, else at most 64 KiB from the end) and are written
  with one ``write()`` (:mod:`core.audit.write`), through a descriptor the process keeps open
  (its identity re-checked under the lock) and with this user's chain head written in batches
  (:mod:`core.audit.appender`; docs/audit.md, "Chain heads written in batches"); only the
  entries that break or lose someone's lock (``DURABLE_OPERATIONS``), and those a caller asks
  to be durable, are fsynced. A log that
  is not a regular file of this user with one link, or that cannot be written, or that lies in
  a git working tree or git directory (:mod:`core.audit.placement`), sends the entry to the
  per-user fallback log, and :func:`append` says so. A torn last line (disk full, crash)
  is an interrupted write: :func:`verify` reports it as such and the next append repairs it.
* ``user`` is the real OS user of the process (the name of the real uid), never an environment
  variable a caller could set: Task MCP's ``process.env.USER`` can lie.
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
    )


def close_logs() -> None:
    """Write the chain heads this process holds back and close the audit logs it keeps open
    (:mod:`core.audit.appender`; an idle log is closed within about
    :data:`core.audit.appender.IDLE_CLOSE` seconds anyway), e.g. before unmounting the file
    system a log is on. The next append opens its log again. Never raises."""
    appender.close_all()
