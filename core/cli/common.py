"""What every verb of the ``lockwarden`` command line shares: exit codes, the one-line error
(:class:`CliError`), where output goes (:class:`Out`), what a verb is (:class:`Verb`), the
checks a path passes before the engine sees it, the one stale policy built from the flags,
and the configured directories' policies that ``status``, ``wait``, ``list`` and ``watch``
judge with (:func:`cli_policies`). The holder PID a lock records is :mod:`core.cli.caller`.

The bottom of the CLI's modules: it imports only the standard library at load time (engine
modules inside the functions that need them), and no other ``core.cli.main*`` module, so every
verb module (:mod:`core.cli.locks`, :mod:`core.cli.status`, :mod:`core.cli.run`, ...) and
:mod:`core.cli.main` itself import it without a circle (docs/DESIGN.md, "Layout": arrows point
down). Exit codes and the one-line error rule are documented in docs/cli.md, "Exit codes".
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from core.config import Config, PolicyResolver, WatchSpec
    from core.record import LockStatus
    from core.stale_policy import StalePolicy

from core.text import printable

PROG = "lockwarden"
"""The program name in every message (``lockwarden: PATH: reason``)."""

EXIT_OK = 0
"""Success: acquired, released, free, chain intact."""
EXIT_NO = 1
"""The answer is "no": held, timed out, not yours, refused, chain broken."""
EXIT_USAGE = 2
"""Bad command line: unknown option, a number out of bounds, NUL in a path."""
EXIT_IO = 3
"""I/O error or bad input file."""
EXIT_INTERNAL = 4
"""A bug in Lockwarden (traceback with ``--debug``)."""


class CliError(Exception):
    """An outcome the CLI reports as one line on stderr (``lockwarden: <message>``) and exits
    with ``code`` (int, one of the ``EXIT_*`` codes; default :data:`EXIT_IO`)."""

    def __init__(self, message: str, code: int = EXIT_IO) -> None:
        self.code = code
        super().__init__(message)


def one_line(text: object) -> str:
    """``str(text)`` on one line, escaped with :func:`printable` (docs/cli.md: errors are
    always one line on stderr, and no path or tag in them can move the cursor)."""
    return printable(str(text))


_SURROGATE = re.compile("[\ud800-\udfff]")
_ENCODE: Callable[[object], str] | None = None
"""The encoder :func:`json_text` uses (made at its first call: ``json`` is not imported at
start-up)."""


def json_text(obj: object) -> str:
    """``obj`` as one line of JSON (UTF-8 text, non-ASCII kept). A lone surrogate (an
    undecodable byte of a file name) is written as its ``\\udcNN`` escape, so the line
    always encodes as UTF-8; Python's :func:`json.loads` gives the same string back and
    :func:`os.fsencode` the original bytes.

    Raises:
        TypeError: ``obj`` holds something JSON cannot represent (a bug).
    """
    global _ENCODE
    if _ENCODE is None:
        import json

        _ENCODE = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps's text, one encoder
    text = _ENCODE(obj)
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class Out:
    """Where a verb prints: stdout for results and JSON, stderr for one-line diagnostics.

    Attributes:
        quiet: ``-q``: no result lines and no notes (JSON asked for is still printed).
        json: ``--json``: results as JSON documents.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.quiet: bool = bool(getattr(args, "quiet", False))
        self.json: bool = bool(getattr(args, "json", False))

    def result(self, text: str) -> None:
        """A human result line on stdout, escaped (:func:`printable`); suppressed by ``-q``."""
        if not self.quiet:
            print(printable(text), flush=True)

    def data(self, obj: object) -> None:
        """A JSON document on stdout, one line (:func:`json_text`); not suppressed by ``-q``:
        it was asked for.

        Raises:
            TypeError: ``obj`` holds something JSON cannot represent (a bug).
        """
        print(json_text(obj), flush=True)

    def note(self, text: str) -> None:
        """A one-line message on stderr, ``lockwarden: <text>`` (suppressed by ``-q``)."""
        if not self.quiet:
            print(f"{PROG}: {one_line(text)}", file=sys.stderr, flush=True)


Handler = Callable[[argparse.Namespace, Out], int]
"""A verb's implementation: the parsed arguments and where to print -> the exit code. Raises
:class:`CliError` for an outcome reported as one line."""


class Verb(NamedTuple):
    """One verb of the command line: its parser options and its handler (immutable; a
    NamedTuple rather than a dataclass: importing :mod:`dataclasses` costs milliseconds of
    start-up).

    The built-in verbs are :data:`core.cli.verbs.BUILTIN_VERBS`; a caller adds more with
    ``core.cli.main.main(argv, extra_verbs=[...])`` (the app's ``gui`` verb, ``app/console.py``).

    Attributes:
        name: the word on the command line (``"status"``).
        help: one line for ``lockwarden --help``, also the verb's description.
        example: the epilog of ``lockwarden VERB --help`` (every verb shows one).
        add_arguments: adds the verb's own positionals and options to its parser; ``-q``,
            ``--debug`` (and ``--json`` unless ``json`` is False) are added for every verb.
            Must import nothing heavy: it runs at every start-up.
        run: the handler; it imports what it needs when it runs.
        aliases: other words for the verb (``try-acquire``).
        json: the verb accepts ``--json``.
        via: value of the audit log's ``via`` field set (:func:`core.audit.set_via`) before
            ``run``; None leaves it alone.
    """

    name: str
    help: str
    example: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Handler
    aliases: tuple[str, ...] = ()
    json: bool = True
    via: str | None = None


def nul_argument(argv: list[str]) -> str | None:
    """The first word of ``argv`` holding a NUL byte, or None. No path, option value or
    command word can hold one (every system call would refuse it), so such a word is a usage
    error before anything is parsed (exit :data:`EXIT_USAGE`). A process's real argv never
    holds one; :func:`core.cli.main.main` can be called with any list."""
    return next((a for a in argv if "\x00" in a), None)


def silence_stdout() -> None:
    """After EPIPE on stdout (``lockwarden list | head -1``), point stdout at /dev/null so the
    interpreter's final flush is quiet. Never raises."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def refuse_unreadable(status: LockStatus) -> int:
    """For a refusal whose verdict is ``unreadable`` (garbage, permission denied...), raise
    :class:`CliError` (exit 3: bad input file) instead of answering "held" (exit 1); else
    return :data:`EXIT_NO`.

    Raises:
        CliError: ``status.state`` is ``unreadable`` (exit :data:`EXIT_IO`).
    """
    from core.record import State

    if status.state is State.UNREADABLE:
        raise CliError(f"{status.path}: cannot be read as a lock: {status.error or 'unreadable'}")
    return EXIT_NO



def check_lock_path(path: str, *, must_be_file: bool) -> None:
    """Validate a lock path before the engine sees it.

    Args:
        path: the lock file's path.
        must_be_file: also refuse anything but a regular file (or nothing) at ``path``.

    Raises:
        CliError: (exit :data:`EXIT_IO`) the containing directory is missing, unreachable or
            not a directory; with ``must_be_file``, a directory, FIFO, socket, device or
            symbolic link sits at ``path`` (no lock verb may touch those).
    """
    from core.fsutil import describe_mode

    parent = os.path.dirname(path) or "."
    try:
        pst = os.stat(parent)
    except FileNotFoundError:
        raise CliError(f"{path}: directory {parent!r} does not exist") from None
    except OSError as exc:
        raise CliError(f"{path}: cannot reach directory {parent!r}: {exc.strerror}") from None
    if not stat.S_ISDIR(pst.st_mode):
        raise CliError(f"{path}: {parent!r} is not a directory")
    if not must_be_file:
        return
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror}") from None
    kind = describe_mode(st.st_mode)
    if kind is not None:
        raise CliError(f"{path}: is {kind}, not a lock file; nothing was changed")


def check_dir(path: str) -> None:
    """Raise :class:`CliError` (exit :data:`EXIT_IO`) unless ``path`` is an existing
    directory."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise CliError(f"{path}: no such directory") from None
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise CliError(f"{path}: not a directory")


def stale_policy(args: argparse.Namespace) -> StalePolicy:
    """The one :class:`core.stale_policy.StalePolicy` of this command, built from its flags
    (``--stale-after S``, seconds; already bounded by :data:`core.cli.args.STALE_AFTER`; left
    out: :data:`core.defaults.DEFAULT_STALE_AFTER`). A verb builds it once and hands it to
    every operation that judges (docs/DESIGN.md, "Liveness and verdicts": the stale policy is
    one object carried to every place that judges). ``status``, ``wait``, ``list`` and
    ``watch`` use the configured directory's policy instead (:func:`cli_policies`).

    Raises:
        CliError: the policy refuses the limit (exit :data:`EXIT_USAGE`; cannot happen for a
            value that passed the argument parser).
    """
    from core.defaults import DEFAULT_STALE_AFTER
    from core.stale_policy import StalePolicy

    value = getattr(args, "stale_after", None)
    try:
        return StalePolicy(stale_after=float(DEFAULT_STALE_AFTER if value is None else value))
    except ValueError as exc:
        raise CliError(f"--stale-after: {exc}", EXIT_USAGE) from None


class PolicyChoice(NamedTuple):
    """The stale policy a path is judged under on the command line, and where it came from
    (docs/cli.md, "One verdict: the configured directory's policy").

    Attributes:
        policy: the policy.
        source: ``"config"`` (the configured directory's), ``"option"`` (``--stale-after``)
            or ``"default"`` (:data:`core.stale_policy.DEFAULT_POLICY`).
        directory: the configured directory (``source == "config"``), else None.
        config: the configuration file read, or None (none exists, or ``--stale-after``).
        why: for ``"default"``, why in words (no configuration file; not in a configured
            directory; the file cannot be used); else "".
    """

    policy: StalePolicy
    source: str
    directory: str | None = None
    config: str | None = None
    why: str = ""

    def to_dict(self) -> dict[str, object]:
        """The ``policy`` field of ``--json``: ``{"source", "stale_after" (s), "directory",
        "config"}``."""
        return {"source": self.source, "stale_after": self.policy.stale_after,
                "directory": self.directory, "config": self.config}

    @property
    def needs_note(self) -> bool:
        """True when the defaults are used although a configuration file exists (or was
        named): the command says so on stderr. With no file at all nothing is configured
        that could disagree, and only ``--json`` says ``"source": "default"``."""
        return self.source == "default" and self.config is not None

    def note(self, what: str) -> str:
        """The stderr note for a ``"default"`` choice: ``WHAT: judged with the default stale
        policy (stale after 3600 s): why``."""
        return (f"{what}: judged with the default stale policy (stale after "
                f"{self.policy.stale_after:g} s): {self.why}")


class CliPolicies:
    """The stale policies of one command: ``--stale-after`` when given, else the policy of
    the configured directory a path is in (the ``[[watch]]`` and ``[[projects]]`` of the
    configuration: ``--config PATH``, else ``$LOCKWARDEN_CONFIG``, else the platformdirs
    location), judged as the app judges it: the first configured directory whose scope holds
    the path's directory (recursive ones their sub-directories too; af ledger and claim locks
    by their proof directory), patterns aside. Else the defaults, said so.

    Args:
        option: the ``--stale-after`` policy, or None.
        config_path: the configuration file, or None with ``option``.
        specs: the watched directories (:meth:`core.config.Config.all_watches`: the platform
            defaults a file without ``[[watch]]`` gets are watched too, under the default
            policy).
        problem: why the file cannot be used (:meth:`core.config.LoadError.text`), or "".
    """

    def __init__(self, *, option: StalePolicy | None, config_path: str | None,
                 specs: list[WatchSpec], problem: str = "", exists: bool = True) -> None:
        self.option = option
        self.config_path = config_path
        self.specs = specs
        self.problem = problem
        self.exists = exists
        self._resolver: PolicyResolver | None = None

    def _owner(self, path: str) -> WatchSpec | None:
        from core.config.policies import PolicyResolver

        if self._resolver is None:
            self._resolver = PolicyResolver(self.specs)
        return self._resolver.spec_for(path)

    def for_writer(self, path: str, limits: StalePolicy) -> StalePolicy:
        """The policy of a verb that writes a lock at ``path``
        (:meth:`core.config.policies.PolicyResolver.writer_policy`)."""
        from core.config.policies import PolicyResolver

        if self._resolver is None:
            self._resolver = PolicyResolver(self.specs)
        return self._resolver.writer_policy(path, limits)

    def for_path(self, path: str) -> PolicyChoice:
        """The policy a lock at ``path`` (absolute, or relative to the working directory)
        is judged under."""
        from core.stale_policy import DEFAULT_POLICY

        if self.option is not None:
            return PolicyChoice(self.option, "option")
        absolute = os.path.normpath(os.path.abspath(path))
        spec = self._owner(absolute) if self.specs else None
        if spec is not None:
            return PolicyChoice(spec.policy, "config", spec.path, self.config_path)
        if not self.exists:
            why = f"there is no configuration file ({self.config_path})"
        elif self.problem:
            why = f"the configuration file cannot be used: {self.problem}"
        else:
            why = f"not in a directory watched by {self.config_path}"
        return PolicyChoice(DEFAULT_POLICY, "default", None,
                            self.config_path if self.exists else None, why)

    def for_dir(self, directory: str) -> PolicyChoice:
        """The policy of the locks directly in ``directory``."""
        return self.for_path(os.path.join(directory, "lock"))


def config_path() -> str:
    """:func:`core.config.default_config_path` without importing platformdirs (which
    imports ``tempfile``, ``shutil``, ``bz2`` and ``lzma``: docs/cli.md, "Start-up time") on
    Linux and the other Unix platformdirs treats alike: ``$LOCKWARDEN_CONFIG``, else
    ``$XDG_CONFIG_HOME`` (when absolute) or ``~/.config``, then ``lockwarden/config.toml``.
    macOS, Windows and a relative ``$HOME`` ask platformdirs itself. A test holds the two
    equal (tests/core/config/test_config_edit.py)."""
    env = os.environ.get("LOCKWARDEN_CONFIG", "").strip()
    if env:
        return os.path.normpath(os.path.abspath(os.path.expandvars(os.path.expanduser(env))))
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    home = os.environ.get("HOME", "")
    if sys.platform in ("darwin", "win32", "cygwin") or not (
            os.path.isabs(xdg) or os.path.isabs(home)):
        from core.config import default_config_path

        return default_config_path()
    base = xdg if os.path.isabs(xdg) else os.path.join(home, ".config")
    return os.path.join(base, "lockwarden", "config.toml")


_REPORTED: set[str] = set()
"""The configuration problems this command has printed (:func:`load_config`)."""


def load_config(path: str | None) -> Config:
    """The configuration at ``path`` (None: ``$LOCKWARDEN_CONFIG``, else the per-user file),
    as :func:`core.config.load` reads it (never raises), each of its problems printed on
    stderr once per command in the words of the app's Problems panel
    (:func:`core.config.problems.problem_line`; docs/cli.md, "Configuration problems")."""
    from core.config import load
    from core.config.problems import problem_line

    cfg = load(path)
    for problem in cfg.warnings:
        if problem not in _REPORTED:
            _REPORTED.add(problem)
            print(problem_line(problem), file=sys.stderr, flush=True)
    return cfg


def forget_reported_problems() -> None:
    """Start a new command: :func:`load_config` prints every problem again."""
    _REPORTED.clear()


def cli_policies(args: argparse.Namespace) -> CliPolicies:
    """The policies of this command (:class:`CliPolicies`): ``--stale-after`` wins; else the
    configuration file is read (``--config PATH``, ``$LOCKWARDEN_CONFIG``, the platformdirs
    location; docs/cli.md, "One verdict: the configured directory's policy"). A missing
    default file means the defaults; the configuration module is imported only when a file
    is there.

    Raises:
        CliError: ``--config PATH`` names no file, or a directory (exit :data:`EXIT_IO`).
    """
    if getattr(args, "stale_after", None) is not None:
        return CliPolicies(option=stale_policy(args), config_path=None, specs=[])
    given: str | None = getattr(args, "config", None)
    if given is not None:
        path = os.path.normpath(os.path.abspath(os.path.expanduser(given)))
        if not os.path.isfile(path):
            what = "is not a file" if os.path.exists(path) else "no such file"
            raise CliError(f"--config {given}: {what}")
    else:
        path = config_path()
    if given is None and not os.path.lexists(path):
        return CliPolicies(option=None, config_path=path, specs=[], exists=False)
    cfg = load_config(path)
    # a file without [[watch]] watches the default directories (with [[projects]] or not), as
    # the app does: a lock in one of them is in a watched directory. A file that cannot be
    # used configures nothing: every lock gets the defaults, with the reason.
    specs = cfg.all_watches() if cfg.load_error is None else []
    problem = cfg.load_error.text() if cfg.load_error is not None else ""
    return CliPolicies(option=None, config_path=path, specs=specs, problem=problem)


def watch_specs(args: argparse.Namespace, policies: CliPolicies) -> list[WatchSpec]:
    """The directories of ``watch`` (``DIR...``, ``--recursive``, ``--pattern``,
    ``--project``: :meth:`core.config.model.ProjectSpec.watch_spec`) as
    :class:`core.config.WatchSpec` values, each judged under the policy of the configured
    directory it is in (``policies.for_dir``: its ``stale_after``, Task MCP flags and
    per-format limits), else ``--stale-after`` or the defaults.

    A spec's path is expanded again by the watcher (``~``, ``$VAR``:
    :func:`core.config.expand_path`), which would watch another directory than the one named
    (the shell has already expanded what it meant to): a directory whose absolute path that
    expansion changes is refused.

    Raises:
        CliError: a directory is missing or not a directory, or expansion would change its
            path (exit :data:`EXIT_IO`).
    """
    from core.config import WatchSpec, expand_path
    from core.config.model import ProjectSpec

    dirs: list[str] = list(args.dirs)
    patterns: list[str] | None = list(args.pattern) if args.pattern else None
    specs: list[WatchSpec] = []
    for d in dirs:
        check_dir(d)
        literal = os.path.normpath(os.path.abspath(d))
        if expand_path(literal) != literal:
            raise CliError(f"{d}: cannot be watched: the watcher would expand '~' or '$' in "
                           f"its name and watch {expand_path(literal)!r} instead")
        policy = policies.for_dir(literal).policy
        limits = dict(policy.format_stale_after)
        spec = WatchSpec(literal, recursive=bool(args.recursive),
                         stale_after=policy.stale_after,
                         allow_higher_privilege=policy.allow_higher_privilege,
                         allow_emergency=policy.allow_emergency, format_stale_after=limits,
                         readable_lock_files=policy.readable_lock_files)
        if getattr(args, "project", False):  # --project: as a [[projects]] root
            spec = ProjectSpec(literal, stale_after=policy.stale_after).watch_spec()
            spec.format_stale_after = limits
        if patterns is not None:
            spec.patterns = list(patterns)
        specs.append(spec)
    return specs
