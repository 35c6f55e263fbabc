"""Lockwarden's settings: which directories to watch and how, notifications, UI choices.

Stored as TOML (docs/DESIGN.md, "GUI": Settings) at
``platformdirs.user_config_dir("lockwarden")/config.toml``, overridable by an explicit path
(``--config PATH``) and the ``LOCKWARDEN_CONFIG`` environment variable::

    [[watch]]
    path = "~/projects/build"        # "~" and $VARS are expanded
    recursive = true
    patterns = ["*.lock", "*.pid", "*-lock"]
    stale_after = 3600               # seconds
    polling = "auto"                 # auto | on | off
    allow_higher_privilege = false   # Task MCP reclaim policy flags
    allow_emergency = false          # (docs/specs/task-mcp.txt)
    format_stale_after = { "af-ledger" = 30 }   # per-format stale limits (s)

    [[projects]]                     # a tree of repositories: developer tools' locks
    path = "~/src"                   # (git, Vim, Emacs, LibreOffice, Terraform), recursively,
    skip = ["node_modules", ".venv", "target", "build"]   # never entering these directories
    stale_after = 3600

    [[postgres]]                     # lock servers (docs/remote.md, "Configuration")
    dsn = "postgres://monitor@db.internal:5432/shop"
    password_env = "LOCKWARDEN_PG_PASSWORD"    # or keyring = true; never a password here
    stale_after = 3600

    [[redis]]
    url = "redis://cache.internal:6379/0"
    profiles = ["python-redis-lock", "redis-py"]
    patterns = ["deploy:*"]          # redis-py's keys have no prefix

    [[etcd]]
    endpoints = ["http://etcd1:2379", "http://etcd2:2379"]
    prefix = "locks/"

    [notifications]
    on_stale = true
    on_expired = true
    on_acquire = false
    on_release = false
    paused = false

    [ui]
    theme = "auto"                   # auto | light | dark
    start_minimized = false
    rescan_interval = 30             # seconds between full rescans of watched directories

    [history]                        # what the watcher saw (docs/history.md)
    enabled = true
    keep = "30d"                     # retention: s, m, h, d, w
    max_mb = 200

With no file (or no ``[[watch]]`` table in it) the platform's usual lock directories are
watched (:func:`default_watch_dirs`). :func:`load` never raises: a bad file gives warnings that
name the key and the line, and defaults for what was bad. :func:`load_strict` raises
:class:`core.errors.ConfigError` instead. :func:`save` writes atomically.

Each ``[[watch]]`` gives one :class:`~core.stale_policy.StalePolicy` (``WatchSpec.policy``)
that the scanner, the watcher and the GUI's dialogs judge its locks under.

This module is the facade: the values are in :mod:`core.config.model`, loading is
:mod:`core.config.load`; saving is here.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from core.config.load import MAX_CONFIG_BYTES, load, load_strict, loads, read_config_bytes
from core.config.model import (
    CONFIG_ENV,
    CONFIG_NAME,
    DEFAULT_PATTERNS,
    DEFAULT_RESCAN_INTERVAL,
    DEFAULT_STALE_AFTER,
    POLLING_CHOICES,
    SERVER_KINDS,
    THEME_CHOICES,
    Config,
    NotificationSettings,
    UISettings,
    WatchSpec,
    default_config,
    default_config_path,
    default_watch_dirs,
    expand_path,
)
from core.config.servers import server_to_dict
from core.fsutil import fsync_dir

__all__ = [
    "CONFIG_ENV",
    "CONFIG_NAME",
    "DEFAULT_PATTERNS",
    "DEFAULT_RESCAN_INTERVAL",
    "DEFAULT_STALE_AFTER",
    "MAX_CONFIG_BYTES",
    "POLLING_CHOICES",
    "THEME_CHOICES",
    "Config",
    "NotificationSettings",
    "UISettings",
    "WatchSpec",
    "default_config",
    "default_config_path",
    "default_watch_dirs",
    "expand_path",
    "load",
    "load_strict",
    "loads",
    "read_config_bytes",
    "save",
    "to_dict",
]


def to_dict(config: Config) -> dict[str, Any]:
    """The TOML document for ``config`` as a dict (what :func:`save` writes)."""
    return {
        "watch": [
            {
                "path": w.path,
                "recursive": bool(w.recursive),
                "patterns": list(w.patterns),
                "stale_after": float(w.stale_after),
                "polling": w.polling,
                "allow_higher_privilege": bool(w.allow_higher_privilege),
                "allow_emergency": bool(w.allow_emergency),
                **({"format_stale_after": dict(sorted(w.format_stale_after.items()))}
                   if w.format_stale_after else {}),
            }
            for w in config.watches
        ],
        **({"projects": [
            {"path": p.path, "skip": list(p.skip), "stale_after": float(p.stale_after),
             "polling": p.polling}
            for p in config.projects
        ]} if config.projects else {}),
        **{kind: [server_to_dict(s) for s in config.servers if s.kind == kind]
           for kind in SERVER_KINDS if any(s.kind == kind for s in config.servers)},
        "notifications": {
            "on_stale": config.notifications.on_stale,
            "on_expired": config.notifications.on_expired,
            "on_acquire": config.notifications.on_acquire,
            "on_release": config.notifications.on_release,
            "paused": config.notifications.paused,
        },
        "ui": {
            "theme": config.ui.theme,
            "start_minimized": config.ui.start_minimized,
            "rescan_interval": float(config.ui.rescan_interval),
        },
        "history": config.history.to_dict(),
    }


_HEADER = (
    "# Lockwarden configuration (written by Lockwarden; comments are not preserved).\n"
    "# [[watch]]: path, recursive, patterns, stale_after (s), polling (auto|on|off),\n"
    "#            allow_higher_privilege, allow_emergency,\n"
    "#            format_stale_after = { format = seconds }\n"
    "# [[projects]]: path, skip (directory names), stale_after (s), polling\n"
    "# [[postgres]] dsn, [[redis]] url/profiles/patterns, [[etcd]] endpoints/prefix/username:\n"
    "#            password_env or keyring (never a password), stale_after (s)\n\n"
)


def save(config: Config, path: str | None = None) -> str:
    """Write ``config`` as TOML, atomically, and return the path written.

    The file goes to ``path``, else ``config.path``, else :func:`default_config_path`; missing
    parent directories are created. Written to a temp file in the same directory, fsynced, then
    ``os.replace``-d over the old file and the directory fsynced, so a crash leaves either the
    old or the new file (this is a settings file, not a lock: replacing is what we want here).
    Comments of a hand-edited file are not preserved. An empty ``watches`` list is written as
    ``watch = []`` (watch nothing), distinct from a missing key (watch the defaults).

    Raises:
        OSError: the directory cannot be created or written.
    """
    target = expand_path(path or config.path or default_config_path())
    directory = os.path.dirname(target)
    os.makedirs(directory, exist_ok=True)
    import tomli_w  # only when saving: readers (watch, the GUI's start) never need it

    body = _HEADER + tomli_w.dumps(to_dict(config))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(target):
            try:
                os.chmod(tmp, os.stat(target).st_mode & 0o7777)
            except OSError:
                pass
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        fsync_dir(directory)
    except OSError:
        pass
    config.path = target
    return target
