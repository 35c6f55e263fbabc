"""The ``lockwarden`` command line: the parser, the dispatch, the one-line report of an
unexpected error, and the extension point (``extra_verbs``) through which the app adds its
``gui`` verb (``python -m core`` has every verb but ``gui``).

A thin layer over the engine: every lock file is created, rewritten or removed by
:mod:`core.engine.lock`. The built-in verbs are :mod:`core.cli.verbs`; each verb's module is
imported only when it runs; the CLI's modules and their arrows: docs/architecture.md, "Rooms".
``core`` never imports :mod:`app`: ``app.console`` passes the ``gui`` :class:`Verb` to
:func:`main`.

Rules: the verbs, options and exit codes (a superset of ``sema``'s, docs/specs/semats.txt,
"Compatibility"): docs/cli.md, "Verbs" and "Exit codes"; what this module may import at load
time (the standard library and a few stdlib-only modules; never Qt or watchdog on the
``status``/``try``/``release`` paths): docs/cli.md, "Start-up time".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

import core
from core.cli.common import (
    EXIT_INTERNAL,
    EXIT_IO,
    EXIT_NO,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    CliError,
    Handler,
    Out,
    Verb,
    forget_reported_problems,
    nul_argument,
    one_line,
    silence_stdout,
)
from core.cli.verbs import BUILTIN_VERBS

__all__ = [
    "BUILTIN_VERBS", "EXIT_INTERNAL", "EXIT_IO", "EXIT_NO", "EXIT_OK", "EXIT_USAGE", "PROG",
    "CliError", "Handler", "Out", "Verb", "build_parser", "main",
]

# --------------------------------------------------------------------------------------------
# parser
# --------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are one line on stderr, exit code 2."""

    def error(self, message: str) -> NoReturn:
        """Exit 2 with one escaped line (the message may quote the user's words: an unknown
        option holding a terminal escape must not reach the terminal as one)."""
        self.exit(EXIT_USAGE,
                  f"{self.prog}: error: {one_line(message)} (see '{self.prog} --help')\n")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's raw-description help formatter, sized from the terminal without importing
    ``shutil``: argparse makes one for every argument it adds, and ``shutil`` pulls in ``bz2``
    and ``lzma`` (docs/cli.md, "Start-up time")."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         _terminal_columns() - 2 if width is None else width)


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``: ``$COLUMNS`` when a positive integer, else the
    width of the terminal on standard output, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


_FORMATTER = _Formatter


def _add_common(p: argparse.ArgumentParser, *, json_opt: bool = True) -> None:
    """Options every verb accepts (-q, --debug, --json), also accepted before the verb."""
    p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                   help="print nothing on success (errors still go to stderr)")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show a traceback on errors")
    if json_opt:
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                       help="machine-readable output (JSON)")


def _all_verbs(extra_verbs: Sequence[Verb]) -> dict[str, Verb]:
    """Built-in and extra verbs by name (aliases included).

    Raises:
        ValueError: two verbs share a name or alias (a programming error).
    """
    found: dict[str, Verb] = {}
    for verb in (*BUILTIN_VERBS, *extra_verbs):
        for word in (verb.name, *verb.aliases):
            if word in found:
                raise ValueError(f"the verb {word!r} is defined twice")
            found[word] = verb
    return found


def build_parser(extra_verbs: Sequence[Verb] = ()) -> argparse.ArgumentParser:
    """The complete argparse parser of ``lockwarden``: every built-in verb and
    ``extra_verbs``, each with ``-q``/``--debug``/``--json`` and an example.

    Raises:
        ValueError: a verb name or alias is used twice.
    """
    _all_verbs(extra_verbs)
    parser = _Parser(
        prog=PROG,
        formatter_class=_FORMATTER,
        description="Inspect, acquire, release and reclaim lock files "
        "(sema/semats, af, Task MCP, pidfiles) through Lockwarden's engine.",
        epilog="exit codes: 0 ok, 1 held/timeout/refused, 2 usage error, 3 I/O error or "
        "bad lock file, 4 internal error.\nRun 'lockwarden VERB --help' for a verb's "
        "options and an example. --config FILE may come before the verb or after it.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {core.__version__}")
    _add_common(parser)
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True
    for verb in (*BUILTIN_VERBS, *extra_verbs):
        p = sub.add_parser(verb.name, aliases=list(verb.aliases), help=verb.help,
                           description=verb.help, epilog=verb.example,
                           formatter_class=_FORMATTER)
        p.set_defaults(verb=verb.name)
        verb.add_arguments(p)
        _add_common(p, json_opt=verb.json)
    return parser


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------


def _verb_index(argv: Sequence[str]) -> int | None:
    """Where the verb is: the first word that is not an option, nor the ``FILE`` of a
    ``--config FILE`` before it (the only option before the verb that takes a value)."""
    i = 0
    while i < len(argv):
        if argv[i] == "--config":
            i += 2
        elif argv[i].startswith("-"):
            i += 1
        else:
            return i
    return None


def _verb_of(argv: Sequence[str]) -> str | None:
    """The verb (:func:`_verb_index`), or None."""
    i = _verb_index(argv)
    return None if i is None else argv[i]


def _config_after_verb(argv: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """``argv`` with each ``--config FILE`` (or ``--config=FILE``) given before the verb moved
    to just after it, where the verb's parser reads it: ``lockwarden --config F list D`` is
    ``lockwarden list --config F D`` (docs/cli.md, "Configuration problems").

    Raises:
        CliError: the verb reads no configuration file (exit :data:`EXIT_USAGE`).
    """
    verb = _verb_index(argv)
    end = len(argv) if verb is None else verb
    before: list[str] = []
    moved: list[str] = []
    i = 0
    while i < end:
        if argv[i] == "--config":
            moved += argv[i:i + 2]
            i += 2
        else:
            (moved if argv[i].startswith("--config=") else before).append(argv[i])
            i += 1
    if not moved or verb is None:  # no verb: argparse says a VERB is required
        return argv if not moved else before
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    choices: dict[str, argparse.ArgumentParser] = sub.choices if sub is not None else {}
    verb_parser = choices.get(argv[verb])
    if verb_parser is not None and "--config" not in verb_parser._option_string_actions:
        takers = [name for name, p in choices.items()
                  if "--config" in p._option_string_actions and p.prog.endswith(f" {name}")]
        raise CliError(f"error: {argv[verb]} takes no --config; the verbs that do: "
                       f"{', '.join(dict.fromkeys(takers))} (see '{PROG} {argv[verb]} --help')",
                       EXIT_USAGE)
    return [*before, argv[verb], *moved, *argv[verb + 1:]]


def _split_run_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """For ``run``, split argv at the first ``--``: everything after it is the command, even
    words that look like options. Other verbs keep ``--`` (it lets a path start with ``-``)."""
    if _verb_of(argv) != "run" or "--" not in argv:
        return argv, None
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def main(argv: Sequence[str] | None = None, *, extra_verbs: Sequence[Verb] = ()) -> int:
    """Run ``lockwarden`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    Args:
        argv: the arguments, without the program name.
        extra_verbs: verbs added to :data:`BUILTIN_VERBS` (the app's ``gui``: ``app/console.py``).

    Never raises for bad input or a failed operation (``SystemExit`` from ``--help``,
    ``--version`` and usage errors becomes its code); errors are one line on stderr, with a
    traceback only under ``--debug``. A word holding a NUL byte is refused before parsing
    (exit 2: :func:`core.cli.common.nul_argument`). Raises ValueError when ``extra_verbs``
    reuse a name.
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    forget_reported_problems()
    verbs = _all_verbs(extra_verbs)
    debug = "--debug" in args_list
    bad = nul_argument(args_list)
    if bad is not None:
        print(f"{PROG}: error: argument {one_line(repr(bad))} contains a NUL byte: no path, "
              f"option or command word can hold one (see '{PROG} --help')",
              file=sys.stderr, flush=True)
        return EXIT_USAGE
    try:
        head, run_cmd = _split_run_command(args_list)
        parser = build_parser(extra_verbs)
        try:
            args = parser.parse_args(_config_after_verb(head, parser))
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        if run_cmd is not None:
            args.cmd = [*getattr(args, "cmd", []), *run_cmd]
        debug = bool(getattr(args, "debug", False))
        verb = verbs[args.verb]
        if verb.via is not None:
            from core import audit
            from core.audit.write import add_lost_listener

            audit.set_via(verb.via)
            add_lost_listener(_say_lost)  # an entry written nowhere is said, not only logged
        return verb.run(args, Out(args))
    except CliError as exc:
        if debug:
            import traceback

            traceback.print_exc()
        print(f"{PROG}: {one_line(str(exc))}", file=sys.stderr, flush=True)
        return exc.code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr, flush=True)
        return 130
    except BrokenPipeError:
        silence_stdout()
        return 141
    except Exception as exc:  # one clear line, never a traceback unless --debug
        if debug:
            import traceback

            traceback.print_exc()
        return _report_exception(exc)


def _say_lost(lock_path: str, operation: str, error: str) -> None:
    """One stderr line for an audit entry that could be written nowhere (docs/audit.md, "When
    an entry cannot be written"): the operation itself was done."""
    text = (f"{operation} of {lock_path} was done, but its audit entry could not be written "
            f"anywhere: {error}")
    print(f"{PROG}: {one_line(text)}", file=sys.stderr, flush=True)


def _report_exception(exc: BaseException) -> int:
    """Print one line for an exception no verb handled and return its exit code: the
    engine's "no" answers 1 (a refused reclaim of an af claim too, unsaved work the gate
    keeps), unreadable/I-O and "not a lock file" 3, anything else 4 (a bug: NUL bytes, the one
    bad input the system calls would refuse with ValueError, never get this far)."""
    from core.codes import ReadOnlyKind
    from core.errors import (
        LockError,
        LockHeld,
        LockLost,
        LockTimeout,
        NotStale,
        ParseError,
        ReadOnlyLock,
        UnreadableError,
        UnsavedChanges,
    )

    if isinstance(exc, UnreadableError | ParseError):
        msg, code = str(exc), EXIT_IO
    elif isinstance(exc, ReadOnlyLock):
        msg, code = str(exc), EXIT_IO if exc.kind is ReadOnlyKind.NOT_A_LOCK else EXIT_NO
        # (kernel_lock, not_writable, ledger_claim: the answer is "no", exit 1)
    elif isinstance(exc, LockHeld | LockTimeout | LockLost | NotStale | UnsavedChanges):
        msg, code = str(exc), EXIT_NO  # a "no" answer the verb did not expect
    elif isinstance(exc, LockError):  # the engine could not do it: I/O, vanished holder...
        msg, code = str(exc), EXIT_IO
    elif isinstance(exc, OSError):
        msg, code = _os_error_text(exc), EXIT_IO
    else:
        msg = (f"internal error: {type(exc).__name__}: {exc} "
               "(run again with --debug for the traceback and report it)")
        code = EXIT_INTERNAL
    try:
        print(f"{PROG}: {one_line(msg)}", file=sys.stderr, flush=True)
    except OSError:
        pass
    return code


def _os_error_text(exc: OSError) -> str:
    """``"PATH: reason"``; an error on one of the engine's temp files names the lock instead
    (``/tmp/x.lock: cannot write in /tmp: Permission denied``). A lock of another user in a
    sticky directory (``/tmp``) that cannot be removed or replaced says whose it is and who
    may (:func:`core.fsutil.sticky_owner`), not only "Operation not permitted"."""
    import errno

    from core.fsutil import sticky_owner
    from core.tempfiles import parse_temp_name

    name = exc.filename
    reason = exc.strerror or str(exc)
    if not isinstance(name, str) or not name:
        return reason
    head, base = os.path.split(name)
    parsed = parse_temp_name(base)
    lock = os.path.join(head, parsed[0]) if parsed is not None else name
    owner = sticky_owner(lock) if exc.errno in (errno.EPERM, errno.EACCES) else None
    if owner is not None:
        return (f"{lock}: owned by {owner}: in the sticky directory {head or '.'} only "
                f"{owner} or root can remove or replace it")
    if parsed is not None:
        return f"{lock}: cannot write in {head or '.'}: {reason}"
    return f"{name}: {reason}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
