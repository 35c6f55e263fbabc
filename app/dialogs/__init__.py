"""Dialogs, one module each: acquire a lock (:mod:`app.dialogs.acquire`), confirm a reclaim or
a forced release (:mod:`app.dialogs.confirm`), settings (:mod:`app.dialogs.settings`), audit
log (:mod:`app.dialogs.audit`).

Dialogs never run their own blocking ``exec()`` from the app's code paths: the app opens them
with ``open()`` (window-modal, non-blocking) and acts on ``accepted``, so tests drive them by
setting fields and calling ``accept()`` (docs/gui.md "Dialogs").
"""

from __future__ import annotations

from app.dialogs.acquire import AcquireDialog, AcquireRequest
from app.dialogs.audit import AuditDialog
from app.dialogs.confirm import (
    ConfirmDialog,
    UnsavedDialog,
    end_holder_dialog,
    force_dialog,
    reclaim_dialog,
    unsaved_dialog,
)
from app.dialogs.settings import SettingsDialog

__all__ = [
    "AcquireDialog",
    "AcquireRequest",
    "AuditDialog",
    "ConfirmDialog",
    "SettingsDialog",
    "UnsavedDialog",
    "end_holder_dialog",
    "force_dialog",
    "reclaim_dialog",
    "unsaved_dialog",
]
