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
    readable_lock_files = false      # true: other users may read lock files written here

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
name the key and the line, and defaults for what was bad (a file that does not parse at all:
the defaults and :attr:`Config.load_error`). :func:`load_strict` raises
:class:`core.errors.ConfigError` instead. :func:`save` edits the file in place, atomically,
keeping comments and the tables it does not change, and never overwrites a file that does not
parse (:mod:`core.config.edit`).

Each ``[[watch]]`` gives one :class:`~core.stale_policy.StalePolicy` (``WatchSpec.policy``)
that the scanner, the watcher and the GUI's dialogs judge its locks under.

This module is the facade: the values are in :mod:`core.config.model`, the platform's defaults
in :mod:`core.config.platform_defaults`, loading is :mod:`core.config.load` (the file's bytes
:mod:`core.config.read`), editing the file is :mod:`core.config.edit` (imported only to save).
"""

from __future__ import annotations

from typing import Any

from core.config.load import load, load_strict, loads
from core.config.model import (
    DEFAULT_PATTERNS,
    DEFAULT_RESCAN_INTERVAL,
    DEFAULT_STALE_AFTER,
    POLLING_CHOICES,
    SERVER_KINDS,
    THEME_CHOICES,
    Config,
    LoadError,
    NotificationSettings,
    UISettings,
    WatchSpec,
    expand_path,
)
from core.config.platform_defaults import (
    CONFIG_ENV,
    CONFIG_NAME,
    default_config,
    default_config_path,
    default_watch_dirs,
)
from core.config.policies import PolicyResolver
from core.config.read import MAX_CONFIG_BYTES, read_config_bytes
from core.config.servers import server_to_dict

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
    "LoadError",
    "NotificationSettings",
    "PolicyResolver",
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
    """The TOML document for ``config`` as a dict: every table and key :func:`save` would
    write into an empty file (it edits a file that exists: :mod:`core.config.edit`)."""
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
                **({"readable_lock_files": True} if w.readable_lock_files else {}),
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
        **({"fleet": {
            "dsn": config.fleet.dsn, "host": config.fleet.host,
            "interval": float(config.fleet.interval),
            "silent_after": float(config.fleet.silent_after),
            **({"password_env": config.fleet.password_env} if config.fleet.password_env
               else {}),
            **({"keyring": True} if config.fleet.keyring else {}),
        }} if config.fleet is not None else {}),
    }


def save(config: Config, path: str | None = None, *, base: Config | None = None,
         prefer_mine: bool = False) -> str:
    """Write ``config`` into its TOML file by editing the file that is there, and return the
    path written (docs/DESIGN.md, "Nothing lost"; :mod:`core.config.edit`).

    The file goes to ``path``, else ``config.path``, else :func:`default_config_path`; missing
    parent directories are created. It is read again first and only what changed is edited:
    from ``base`` (the configuration the caller started from, as loaded) to ``config``, merged
    into what the file says now; with ``base`` None the file's own content is the base.
    Comments, unknown keys and tables ``config`` does not change are kept. An empty
    ``watches`` list is written as ``watch = []`` (watch nothing), distinct from a missing key
    (watch the defaults). The write is atomic (temp file, fsync, ``os.replace``, directory
    fsync).

    Raises:
        core.config.edit.ConfigUnparsable: the file does not parse (TOML syntax, not UTF-8):
            it is never overwritten; ``line`` and ``column`` say where.
        core.config.edit.ConfigConflict: the file changed on disk since ``base`` and both
            changed the same key (``prefer_mine`` False): nothing is written.
        OSError: the file cannot be read (not a regular file, unreadable, over 1 MiB) or the
            directory cannot be created or written.
    """
    from core.config.edit import write  # only when saving: readers never import tomlkit

    target = expand_path(path or config.path or default_config_path())
    write(config, target, base=base, prefer_mine=prefer_mine)
    config.path = target
    return target
