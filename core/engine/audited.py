"""The engine's audit call (docs/engine.md, "Every operation is audited once"): one entry per
operation, never turning an operation that was done into a failure, and a verdict as the
entry's details."""

from __future__ import annotations

import logging
from typing import Any

from core import audit
from core.audit.write import has_lost_listeners
from core.record import LockStatus

log = logging.getLogger("lockwarden.lock")


def record_audit(
    path: str,
    operation: str,
    *,
    result: str = "ok",
    details: dict[str, Any] | None = None,
    format: str | None = None,
    durable: bool = False,
    user_log: bool = False,
) -> None:
    """Write one audit entry (:func:`core.audit.append`, fsynced when ``durable`` or when the
    operation breaks a lock; docs/engine.md, "Every operation is audited once"). Never raises:
    a failure to audit is logged as a warning, because auditing must never turn an operation
    that was done into a failure. ``user_log``: the per-user log only (``path`` is no lock).
    """
    try:
        w = audit.append(path, operation, result=result, details=details, format=format,
                         durable=durable, user_log=user_log)
    except Exception as exc:
        log.warning("audit entry for %s of %s not written: %s", operation, path, exc)
        return
    if w.error and not has_lost_listeners():  # else a listener has told the user
        log.warning("audit entry for %s of %s not written: %s", operation, path, w.error)


def holder_summary(status: LockStatus) -> dict[str, Any]:
    """A verdict as audit details (``LockStatus.to_dict()``)."""
    return status.to_dict()


__all__ = ["holder_summary", "record_audit"]
