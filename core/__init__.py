"""Lockwarden's engine: lock formats, liveness, verdicts, lock operations, audit, scanning,
watching, configuration and the CLI. Never imports Qt or :mod:`app`.

The public API (resolved lazily, so ``import core`` stays cheap; docs/architecture.md)::

    core.Lock(path, *, tag=None, ttl=None, format="sema", stale_after=3600.0,
              holder_pid=None, auto_refresh=False)
    core.inspect(path) -> LockStatus
    core.reclaim(path, *, force=False, reason=None) -> Lock
    core.force_release(path, *, reason=None, discard_unsaved=False) -> LockStatus
    core.force_release_kept(path, ...) -> Removal(status, kept)   # kept: trash/quarantine
    core.release_path(path, *, pid, force=False, reason=None) -> LockStatus
    core.wait(path, *, timeout=None) -> LockStatus
    exceptions: LockError, LockHeld, LockTimeout, LockLost, NotStale, ParseError, ...
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Lock": "core.engine.lock",
    "reclaim": "core.engine.reclaiming",
    "force_release": "core.engine.operations",
    "force_release_kept": "core.engine.operations",
    "release_path": "core.engine.operations",
    "wait": "core.engine.waiting",
    "inspect": "core.verdicts.inspect",
    "StalePolicy": "core.stale_policy",
    "LockError": "core.errors",
    "LockHeld": "core.errors",
    "LockTimeout": "core.errors",
    "LockLost": "core.errors",
    "NotStale": "core.errors",
    "ParseError": "core.errors",
    "UnreadableError": "core.errors",
    "UnsavedChanges": "core.errors",
    "NotKept": "core.errors",
    "ConfigError": "core.errors",
    "LockRecord": "core.record",
    "LockStatus": "core.record",
    "Liveness": "core.record",
    "State": "core.record",
}

__all__ = [
    "ConfigError",
    "Liveness",
    "Lock",
    "LockError",
    "LockHeld",
    "LockLost",
    "LockRecord",
    "LockStatus",
    "LockTimeout",
    "NotKept",
    "NotStale",
    "ParseError",
    "StalePolicy",
    "State",
    "UnreadableError",
    "UnsavedChanges",
    "__version__",
    "force_release",
    "force_release_kept",
    "inspect",
    "reclaim",
    "release_path",
    "wait",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
