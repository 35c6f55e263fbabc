"""The configuration's values: watched directories, project roots, lock servers, the fleet,
notifications and UI choices.

The platform's default lock directories and configuration path are
:mod:`core.config.platform_defaults`. Loading and validating the TOML file is
:mod:`core.config.load`; :mod:`core.config` is the facade that also saves it. The file's
layout is described in :mod:`core.config`.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from core.config.history import HistorySettings
from core.defaults import DEFAULT_STALE_AFTER, FORMAT_STALE_AFTER
from core.stale_policy import StalePolicy

__all__ = [
    "DEFAULT_PATTERNS",
    "DEFAULT_RESCAN_INTERVAL",
    "DEFAULT_STALE_AFTER",
    "POLLING_CHOICES",
    "PROJECT_SKIP_DIRS",
    "SERVER_KINDS",
    "THEME_CHOICES",
    "Config",
    "HistorySettings",
    "LoadError",
    "NotificationSettings",
    "ProjectSpec",
    "ServerSpec",
    "UISettings",
    "WatchSpec",
    "build_policy",
    "describe_value",
    "expand_path",
]

DEFAULT_PATTERNS: tuple[str, ...] = ("*.lock", "*.pid", "*-lock")
"""File-name patterns (fnmatch, matched against the base name) watched by default."""

DEVTOOL_PATTERNS: tuple[str, ...] = (
    "*.lock", "gc.pid", ".*.sw[a-p]", ".#*", ".~lock.*#", "*.lock.info",
)
"""Patterns for developer tools' locks (``docs/formats.md``, "Developer tools' marker locks
(read-only)"): git's ``*.lock`` and ``gc.pid``, Vim swaps, Emacs ``.#name``, LibreOffice
``.~lock.NAME#``, Terraform's ``.lock.info``. Not watched by default: a ``[[watch]]`` table
opts in with ``patterns``."""

PROJECT_SKIP_DIRS: tuple[str, ...] = (
    "node_modules", ".venv", "venv", "target", "build", "dist", "out", "__pycache__", ".tox",
    ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".terraform", ".gradle", ".next",
    ".cache",
)
"""Directory names (fnmatch patterns) a project scan never descends into: dependency trees
(``node_modules``, virtual environments), build outputs (cargo's ``target``, ``build``,
``dist``, ``out``) and caches. Inside a git directory the object store, logs and hooks are
skipped as well (:func:`core.config.scope.skips_dir`); ``docs/watching.md``, "Projects"."""

POLLING_CHOICES: tuple[str, ...] = ("auto", "on", "off")
THEME_CHOICES: tuple[str, ...] = ("auto", "light", "dark")

DEFAULT_RESCAN_INTERVAL = 30.0
"""Seconds between rescans that heal missed file-system events (docs/DESIGN.md, "Watching";
an unchanged directory is not always listed: docs/watching.md, "Rescans")."""


def _default_patterns() -> list[str]:
    return list(DEFAULT_PATTERNS)


def build_policy(stale_after: float, *, allow_higher_privilege: bool = False,
                 allow_emergency: bool = False,
                 format_stale_after: dict[str, float] | None = None,
                 readable_lock_files: bool = False) -> StalePolicy:
    """The :class:`~core.stale_policy.StalePolicy` of a ``[[watch]]`` or a server table:
    ``stale_after`` (s), the Task MCP flags, the per-format limits (the defaults of
    :data:`core.defaults.FORMAT_STALE_AFTER` overridden by ``format_stale_after``) and
    whether lock files written there are readable by other users (``readable_lock_files``).

    Raises:
        ValueError: a limit that is not a finite number of seconds > 0.
    """
    limits = {**FORMAT_STALE_AFTER, **(format_stale_after or {})}
    return StalePolicy(
        stale_after=float(stale_after),
        allow_higher_privilege=bool(allow_higher_privilege),
        allow_emergency=bool(allow_emergency),
        format_stale_after=tuple(sorted((k, float(v)) for k, v in limits.items())),
        readable_lock_files=bool(readable_lock_files),
    )


@dataclass
class WatchSpec:
    """One watched directory (a ``[[watch]]`` table).

    Attributes:
        path: the directory. :func:`load` expands ``~`` and environment variables; the scanner
            and watcher expand again (:func:`expand_path`), so a spec made by hand may hold
            ``"~/locks"``.
        recursive: also watch sub-directories.
        patterns: fnmatch patterns matched against each file's base name (never against the
            absolute path: watchdog 7 would, docs/DESIGN.md "Watching").
        stale_after: seconds; a lock of another tool whose holder is not alive is stale when
            older than this (docs/DESIGN.md, "Default stale policy").
        polling: ``"auto"`` (poll only on network file systems or when inotify runs out of
            watches), ``"on"`` (always poll), ``"off"`` (never poll).
        allow_higher_privilege, allow_emergency: Task MCP reclaim policy flags
            (``docs/specs/task-mcp.txt``, reclaim decisions); default false.
        format_stale_after: per-format stale limits in seconds (format name -> seconds) that
            replace ``stale_after`` for locks of that format; formats not named keep the
            defaults of :data:`core.defaults.FORMAT_STALE_AFTER` (af's ledger lock: 30 s).
        skip: directory base names (fnmatch) a recursive walk never descends into.
        readable_lock_files: lock files Lockwarden writes here keep their format's mode
            (0644: other users read who holds them) instead of 0600; default false
            (docs/engine.md, "Who can read a lock file").
        project: a project root (:class:`ProjectSpec`): only developer tools' locks are
            listed, git's ``*.lock`` and ``gc.pid`` only inside a git directory
            (:func:`core.config.scope.wanted_file`), and on Linux each walked directory is
            watched on its own so skipped trees cost no inotify watch (:mod:`core.watch.tree`).
        table_index: the index of the ``[[watch]]`` table it was read from (0-based, counting
            every table of the array, unusable ones too), or ``None`` for a spec not read
            from a file. Not compared. :mod:`core.config.edit` edits that very table.
    """

    path: str
    recursive: bool = False
    patterns: list[str] = field(default_factory=_default_patterns)
    stale_after: float = DEFAULT_STALE_AFTER
    polling: str = "auto"
    allow_higher_privilege: bool = False
    allow_emergency: bool = False
    format_stale_after: dict[str, float] = field(default_factory=dict)
    skip: list[str] = field(default_factory=list)
    project: bool = False
    table_index: int | None = field(default=None, compare=False, repr=False)
    readable_lock_files: bool = False

    @property
    def policy(self) -> StalePolicy:
        """The one :class:`~core.stale_policy.StalePolicy` this directory's locks are judged
        under: ``stale_after``, the Task MCP flags, and the per-format limits (the defaults of
        :data:`core.defaults.FORMAT_STALE_AFTER` overridden by ``format_stale_after``).

        Raises:
            ValueError: a limit that is not a finite number of seconds > 0 (only for a spec
                built by hand: :func:`core.config.load` validates them).
        """
        return build_policy(self.stale_after,
                            allow_higher_privilege=self.allow_higher_privilege,
                            allow_emergency=self.allow_emergency,
                            format_stale_after=self.format_stale_after,
                            readable_lock_files=self.readable_lock_files)

    @property
    def expanded_path(self) -> str:
        """:attr:`path` with ``~`` and environment variables expanded, made absolute and
        normalised (no trailing separator)."""
        return expand_path(self.path)


def _project_skips() -> list[str]:
    return list(PROJECT_SKIP_DIRS)


@dataclass
class ProjectSpec:
    """One project root (a ``[[projects]]`` table): a directory tree of the user's
    repositories scanned recursively for the locks developer tools leave -- git's
    ``index.lock``, ``HEAD.lock``, ``refs/**/*.lock``, ``gc.pid``; Vim swap files; Emacs
    ``.#name``; LibreOffice ``.~lock.NAME#``; Terraform's ``.terraform.tfstate.lock.info``
    (``docs/specs/devtool-locks.md`` §1) -- without descending into :attr:`skip`.

    Attributes:
        path: the root (``~`` and variables expanded on load).
        skip: directory base names (fnmatch) never descended into; default
            :data:`PROJECT_SKIP_DIRS`.
        stale_after: seconds, as ``[[watch]]`` ``stale_after`` (developer tools' own limits
            in :data:`core.defaults.FORMAT_STALE_AFTER` still apply: git locks 10 s).
        polling: as ``[[watch]]`` ``polling``.
        table_index: as :attr:`WatchSpec.table_index`, in the ``[[projects]]`` array.
    """

    path: str
    skip: list[str] = field(default_factory=_project_skips)
    stale_after: float = DEFAULT_STALE_AFTER
    polling: str = "auto"
    table_index: int | None = field(default=None, compare=False, repr=False)

    def watch_spec(self) -> WatchSpec:
        """The recursive :class:`WatchSpec` the scanner and watcher walk for this project:
        developer tools' patterns (:data:`DEVTOOL_PATTERNS`), :attr:`skip`, ``project`` set."""
        return WatchSpec(path=self.path, recursive=True, patterns=list(DEVTOOL_PATTERNS),
                         stale_after=self.stale_after, polling=self.polling,
                         skip=list(self.skip), project=True)

    @property
    def expanded_path(self) -> str:
        """:attr:`path` expanded, absolute and normalised (:func:`expand_path`)."""
        return expand_path(self.path)


SERVER_KINDS: tuple[str, ...] = ("postgres", "redis", "etcd")
SERVER_DEADLINE_S = 10.0
"""Default ``deadline`` of a server table (s): what one operation on it may take in all
(core.remote.deadline.DEFAULT_DEADLINE_S, the same number; docs/remote.md, "Deadline")."""
"""The lock servers a configuration can name, one TOML array of tables each
(``[[postgres]]``, ``[[redis]]``, ``[[etcd]]``; docs/remote.md, "Configuration")."""


@dataclass
class ServerSpec:
    """One lock server to list (a ``[[postgres]]``, ``[[redis]]`` or ``[[etcd]]`` table).

    Attributes:
        kind: one of :data:`SERVER_KINDS`.
        url: the server: ``postgres://user@host:5432/db`` (``dsn``) or
            ``redis://[user@]host:6379/0`` (``url``); never a password (refused on load).
            For etcd the first endpoint.
        endpoints: etcd client URLs (``http://host:2379``), tried in order.
        prefix: etcd: only keys under this prefix are read ("" = all).
        username: etcd user (PostgreSQL and Redis take it from the URL).
        profiles: Redis: the libraries looked for (``python-redis-lock``, ``redis-py``).
        patterns: Redis: SCAN patterns of redis-py's keys (it writes no prefix).
        password_env: name of the environment variable holding the password, or None.
        notifications: Redis: turn on keyspace notifications on the server
            (``CONFIG SET notify-keyspace-events Kg$x``, a server-wide change that needs CONFIG
            rights) and follow them, instead of only polling (docs/remote.md, "Change feed").
            Off by default: an explicit opt-in.
        keyring: True: the password is in the OS keychain (``keyring``), service
            ``lockwarden``, user name :attr:`url`.
        stale_after: seconds; as ``[[watch]]`` ``stale_after``.
        deadline: seconds one operation on the server may take in all (docs/remote.md,
            "Deadline"); the default is :data:`SERVER_DEADLINE_S`.
        table_index: as :attr:`WatchSpec.table_index`, in the array of its kind.
    """

    kind: str
    url: str = ""
    endpoints: list[str] = field(default_factory=list)
    prefix: str = ""
    username: str | None = None
    profiles: list[str] = field(default_factory=lambda: ["python-redis-lock"])
    patterns: list[str] = field(default_factory=list)
    notifications: bool = False
    password_env: str | None = None
    keyring: bool = False
    stale_after: float = DEFAULT_STALE_AFTER
    deadline: float = SERVER_DEADLINE_S
    table_index: int | None = field(default=None, compare=False, repr=False)

    @property
    def policy(self) -> StalePolicy:
        """The stale policy its locks are judged under (:func:`build_policy`)."""
        return build_policy(self.stale_after)


@dataclass
class NotificationSettings:
    """``[notifications]``: which lock events raise a desktop notification.

    ``on_stale``/``on_expired``: a lock becomes stale/expired; ``on_acquire``/``on_release``:
    a lock appears/disappears in a watched directory; ``paused``: "Pause notifications"."""

    on_stale: bool = True
    on_expired: bool = True
    on_acquire: bool = False
    on_release: bool = False
    paused: bool = False


@dataclass
class UISettings:
    """``[ui]``: ``theme`` (``auto``/``light``/``dark``), ``start_minimized`` (start in the
    tray), ``rescan_interval`` (seconds between rescans, > 0)."""

    theme: str = "auto"
    start_minimized: bool = False
    rescan_interval: float = DEFAULT_RESCAN_INTERVAL


@dataclass(frozen=True)
class LoadError:
    """Why the configuration file could not be used as a whole: it does not parse as TOML
    (``line`` and ``column``, 1-based, as the parser says), is not UTF-8 text, cannot be read
    or is not a regular file (``line``/``column`` None). Such a file is never overwritten
    (docs/DESIGN.md, "Nothing lost"): :func:`core.config.save` refuses it.

    Attributes:
        path: the file.
        message: the problem in words, without the path (``"invalid TOML: Expected '=' after
            a key in a key/value pair"``).
        line, column: where, 1-based, or None.
    """

    path: str
    message: str
    line: int | None = None
    column: int | None = None

    def text(self) -> str:
        """``config.toml line 3, column 7: invalid TOML: ...`` (the file's base name); control
        characters from the file escaped (:func:`core.text.printable`)."""
        where = os.path.basename(self.path) or self.path
        if self.line is not None:
            where += f" line {self.line}"
            if self.column is not None:
                where += f", column {self.column}"
        from core.text import printable

        return printable(f"{where}: {self.message}")


DEFAULT_INTERVAL = 2.0
"""Seconds between two heartbeats of a publishing host."""

DEFAULT_SILENT_AFTER = 15.0
"""Seconds without a heartbeat after which a host is *silent*: its reports no longer judge
its locks (docs/fleet.md, "Verdicts")."""

FLEET_DEADLINE_S = 10.0
"""Seconds one read or write of the fleet database may take in all, connection included
(docs/fleet.md, "Deadline"), unless ``[fleet] deadline`` says otherwise."""


@dataclass
class FleetSpec:
    """The ``[fleet]`` table (parsed by :mod:`core.config.fleet`; docs/fleet.md).

    Attributes:
        dsn: the PostgreSQL database (``postgresql://user@host:5432/db``); never a password.
        password_env: environment variable holding the password, or None.
        keyring: True: the password is in the OS keychain (service ``lockwarden``, user
            :attr:`dsn`).
        host: the name this host publishes under (default: :func:`socket.gethostname`).
        interval: seconds between heartbeats.
        silent_after: seconds after the last heartbeat at which a host counts as silent.
        deadline: seconds one read or write of the database may take in all, connection
            included (docs/fleet.md, "Deadline").
    """

    dsn: str
    password_env: str | None = None
    keyring: bool = False
    host: str = ""
    interval: float = DEFAULT_INTERVAL
    silent_after: float = DEFAULT_SILENT_AFTER
    deadline: float = FLEET_DEADLINE_S

    def __post_init__(self) -> None:
        if not self.host:
            self.host = socket.gethostname()


@dataclass
class Config:
    """The whole configuration.

    Attributes:
        watches: watched directories.
        projects: project roots (``[[projects]]``; default none), watched as
            :meth:`ProjectSpec.watch_spec` after :attr:`watches` (:meth:`all_watches`).
        servers: lock servers to list (``[[postgres]]``, ``[[redis]]``, ``[[etcd]]``).
        notifications, ui: see :class:`NotificationSettings`, :class:`UISettings`.
        fleet: the ``[fleet]`` table (:class:`core.config.fleet.FleetSpec`), or None.
        history: ``[history]`` (:class:`core.config.history.HistorySettings`).
        path: the file it was loaded from / will be saved to (``None``: the default path).
        warnings: problems found while loading, each naming the key and the line
            (``"config.toml line 7: watch[1].stale_after must be a number of seconds, not
            'soon'; using 3600"``). Empty when the file was fine or absent.
        watches_are_default: True when ``watches`` are the platform defaults (no ``[[watch]]``
            table in the file, or no file).
        load_error: why the file could not be used (:class:`LoadError`: a TOML syntax error,
            not UTF-8, unreadable), else None; the rest is then the default configuration and
            :func:`core.config.save` refuses to write over the file. Not compared.
    """

    watches: list[WatchSpec] = field(default_factory=list)
    projects: list[ProjectSpec] = field(default_factory=list)
    servers: list[ServerSpec] = field(default_factory=list)
    notifications: NotificationSettings = field(default_factory=NotificationSettings)
    ui: UISettings = field(default_factory=UISettings)
    fleet: FleetSpec | None = None
    history: HistorySettings = field(default_factory=HistorySettings)
    path: str | None = None
    warnings: list[str] = field(default_factory=list)
    watches_are_default: bool = False
    load_error: LoadError | None = field(default=None, compare=False)

    def all_watches(self) -> list[WatchSpec]:
        """What the scanner and watcher walk: :attr:`watches`, then one recursive spec per
        project root (:meth:`ProjectSpec.watch_spec`)."""
        return [*self.watches, *(p.watch_spec() for p in self.projects)]


def expand_path(path: str) -> str:
    """Expand ``~`` and environment variables (``$HOME``, ``${XDG_RUNTIME_DIR}``, ``%TEMP%`` on
    Windows) in ``path``, then make it absolute and normalised."""
    return os.path.normpath(os.path.abspath(os.path.expandvars(os.path.expanduser(path))))



def describe_value(v: object) -> str:
    """A TOML value as a configuration warning names it: ``true``/``false``, "a table",
    "a list", else its ``repr`` (``'soon'``, ``3.5``)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list):
        return "a list"
    return repr(v)
