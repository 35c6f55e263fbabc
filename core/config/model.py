"""The configuration's values: watched directories, notifications, UI choices, and the
platform's default lock directories and configuration path.

Loading and validating the TOML file is :mod:`core.config.load`; :mod:`core.config` is the
facade that also saves it. The file's layout is described in :mod:`core.config`.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass, field

from core.config.history import HistorySettings
from core.defaults import DEFAULT_STALE_AFTER, FORMAT_STALE_AFTER
from core.stale_policy import StalePolicy

__all__ = [
    "CONFIG_ENV",
    "CONFIG_NAME",
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
    "default_anchor_watches",
    "default_config",
    "default_config_path",
    "default_watch_dirs",
    "default_watches",
    "describe_value",
    "expand_path",
]

CONFIG_ENV = "LOCKWARDEN_CONFIG"
"""Environment variable naming the configuration file (overrides the platformdirs location)."""

CONFIG_NAME = "config.toml"

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
skipped as well (:func:`core.watch.scope.skips_dir`); ``docs/watching.md``, "Projects"."""

POLLING_CHOICES: tuple[str, ...] = ("auto", "on", "off")
THEME_CHOICES: tuple[str, ...] = ("auto", "light", "dark")

DEFAULT_RESCAN_INTERVAL = 30.0
"""Seconds between full rescans that heal missed file-system events (docs/DESIGN.md, "Watching")."""


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
            (:func:`core.watch.scope.wanted_file`), and on Linux each walked directory is watched on
            its own so skipped trees cost no inotify watch (:mod:`core.watch.tree`).
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
    tray), ``rescan_interval`` (seconds between full rescans, > 0)."""

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
    """

    dsn: str
    password_env: str | None = None
    keyring: bool = False
    host: str = ""
    interval: float = DEFAULT_INTERVAL
    silent_after: float = DEFAULT_SILENT_AFTER

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


def default_config_path() -> str:
    """The configuration file: ``$LOCKWARDEN_CONFIG`` if set and non-empty, else
    ``platformdirs.user_config_dir("lockwarden")/config.toml``."""
    env = os.environ.get(CONFIG_ENV, "").strip()
    if env:
        return expand_path(env)
    import platformdirs  # here: it imports tempfile and shutil, which status does not need

    return os.path.join(platformdirs.user_config_dir("lockwarden", appauthor=False), CONFIG_NAME)


def default_watch_dirs(
    *, system: str | None = None, environ: dict[str, str] | None = None
) -> list[str]:
    """The platform's usual lock directories, watched when no ``[[watch]]`` is configured.

    - Linux (and other Unix): ``/tmp``, ``/run/lock``, ``/var/lock``, ``$XDG_RUNTIME_DIR``
      (when set). ``/var/lock`` is usually a symlink to ``/run/lock``: directories are
      deduplicated by their real path, keeping the first name.
    - macOS: ``/tmp``, ``/private/var/run``.
    - Windows: ``%TEMP%`` (else ``%TMP%``, else :func:`tempfile.gettempdir`).

    Args:
        system: ``sys.platform``-style name (``"linux"``, ``"darwin"``, ``"win32"``); default
            this machine's. For another platform nothing is checked on disk.
        environ: environment to read (default ``os.environ``).

    Returns:
        Absolute paths. On this machine's own platform, directories that do not exist are left
        out (except the first one, so the list is never empty).
    """
    env = os.environ if environ is None else environ
    native = system is None
    plat = sys.platform if system is None else system
    if plat.startswith("win"):
        import tempfile  # here: it imports shutil, which the command line's status does not need

        temp = env.get("TEMP") or env.get("TMP") or (tempfile.gettempdir() if native else "")
        candidates = [temp] if temp else []
    elif plat == "darwin":
        candidates = ["/tmp", "/private/var/run"]
    else:
        candidates = ["/tmp", "/run/lock", "/var/lock"]
        xdg = env.get("XDG_RUNTIME_DIR", "").strip()
        if xdg:
            candidates.append(xdg)
    out: list[str] = []
    seen: set[str] = set()
    for i, d in enumerate(candidates):
        key = os.path.realpath(d) if native else d
        if key in seen:
            continue
        if native and i > 0 and not os.path.isdir(d):
            continue
        seen.add(key)
        out.append(d)
    return out


def default_anchor_watches(
    *, system: str | None = None, environ: dict[str, str] | None = None
) -> list[WatchSpec]:
    """The kernel-lock anchors of dpkg/apt, cargo and uv as watches with narrow patterns,
    watched besides :func:`default_watch_dirs` when no ``[[watch]]`` is configured
    (docs/watching.md, "Configuration"). Their files are judged ``held`` or ``free``, never
    stale (:func:`core.kernel.anchors.anchor_tool`; docs/specs/devtool-locks.md §0 and §1, rows
    dpkg/apt, cargo, uv). Linux and other Unix only; nothing on Windows.

    - ``/var/lib/dpkg``: ``lock``, ``lock-frontend``; ``/var/cache/apt/archives`` and
      ``/var/lib/apt/lists``: ``lock`` (Linux-like systems only, not macOS);
    - the cargo home (``$CARGO_HOME``, else ``$HOME/.cargo``): ``.package-cache``,
      ``.package-cache-mutate``;
    - uv's cache (``$UV_CACHE_DIR``, else ``$XDG_CACHE_HOME/uv``, else ``$HOME/.cache/uv``:
      uv's own rule, platformdirs' user cache dir for "uv" on Linux): ``.lock`` -- only when
      the directory is named ``uv``, the only place :func:`core.kernel.anchors.anchor_tool` knows a
      ``.lock`` as uv's (elsewhere an unheld one would be judged an empty file left by a crash).

    Each directory is its own :class:`WatchSpec`, not recursive, so dpkg's ``status`` and the
    rest of these directories are never listed.

    Args:
        system: ``sys.platform``-style name; default this machine's. For another platform
            nothing is checked on disk.
        environ: environment to read (``HOME``, ``CARGO_HOME``, ``UV_CACHE_DIR``,
            ``XDG_CACHE_HOME``; default ``os.environ``).

    Returns:
        The watches, in the order above; on this machine's own platform only those whose
        directory exists.
    """
    env = os.environ if environ is None else environ
    native = system is None
    plat = sys.platform if system is None else system
    if plat.startswith("win"):
        return []
    home = env.get("HOME", "").strip() or (os.path.expanduser("~") if environ is None else "")
    candidates: list[tuple[str, list[str]]] = []
    if plat != "darwin":
        candidates += [("/var/lib/dpkg", ["lock", "lock-frontend"]),
                       ("/var/cache/apt/archives", ["lock"]),
                       ("/var/lib/apt/lists", ["lock"])]
    cargo = env.get("CARGO_HOME", "").strip() or (os.path.join(home, ".cargo") if home else "")
    if os.path.isabs(cargo):
        candidates.append((cargo, [".package-cache", ".package-cache-mutate"]))
    xdg = env.get("XDG_CACHE_HOME", "").strip()
    cache = xdg if os.path.isabs(xdg) else (os.path.join(home, ".cache") if home else "")
    uv = env.get("UV_CACHE_DIR", "").strip() or (os.path.join(cache, "uv") if cache else "")
    if os.path.isabs(uv) and os.path.basename(os.path.normpath(uv)) == "uv":
        candidates.append((os.path.normpath(uv), [".lock"]))
    return [WatchSpec(d, patterns=patterns) for d, patterns in candidates
            if not native or os.path.isdir(d)]


def default_watches(
    *, system: str | None = None, environ: dict[str, str] | None = None
) -> list[WatchSpec]:
    """Every watch of the default configuration: :func:`default_watch_dirs` with the default
    patterns, then :func:`default_anchor_watches` (arguments as theirs)."""
    return ([WatchSpec(d) for d in default_watch_dirs(system=system, environ=environ)]
            + default_anchor_watches(system=system, environ=environ))


def default_config() -> Config:
    """The configuration used when there is no file: :func:`default_watches` --
    :func:`default_watch_dirs` not recursive with default patterns, and the kernel-lock anchors
    of dpkg/apt, cargo and uv (:func:`default_anchor_watches`); default notifications and
    UI."""
    return Config(
        watches=default_watches(),
        watches_are_default=True,
    )


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
