"""Lockwarden's settings, read from TOML: which directories to watch and how (``[[watch]]``,
``[[projects]]``), lock servers, the fleet, notifications, UI and history choices.

Rules: docs/watching.md, "Configuration" (where the file is, ``--config`` and
``LOCKWARDEN_CONFIG``, every table, the platform's default watches, what a bad file gives, how
saving edits it); docs/verdicts.md, "The policy object" (each ``[[watch]]``'s
:class:`~core.stale_policy.StalePolicy`). :func:`load` never raises: warnings naming the key and
the line, and defaults for what was bad (:attr:`Config.load_error` for a file that does not
parse); :func:`load_strict` raises :class:`core.errors.ConfigError`; :func:`save` edits the file
in place, atomically, and never overwrites one that does not parse.

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
    FLEET_DEADLINE_S,
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
            **({"deadline": float(config.fleet.deadline)}
               if config.fleet.deadline != FLEET_DEADLINE_S else {}),
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
