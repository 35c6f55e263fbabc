"""The ``lockwarden`` command-line tool (console script ``lockwarden = core.cli:main``; also
``python -m core``).

A thin layer over the engine (DESIGN.md, "one engine"): every lock file is created, rewritten
or removed by :mod:`core.lock`; this module parses arguments, picks the holder PID, prints
results and maps outcomes to exit codes. The verbs and exit codes are a superset of the ``sema``
tool's (``specs/000_f378b7650aba3ec0.txt``, ``specs/002_07b9edc2912ee812.txt``, "Compatibility").

Exit codes (documented in ``docs/cli.md``):

- ``0`` success (acquired, released, free, ...);
- ``1`` the answer is "no": held, timed out, not yours, refused, verification failed;
- ``2`` usage error (unknown option, non-numeric time, NUL in a path);
- ``3`` I/O error or bad input file (missing directory, path is a directory/FIFO/symlink,
  permission denied, garbage in the lock file; any engine ``LockError`` that is not a "no"
  answer);
- ``4`` internal error (a bug: run again with ``--debug`` for the traceback);
- ``run`` exits with its command's code (``128 + N`` when the command died of signal ``N``).

Start-up cost matters (``status``/``try``/``release`` run in shell loops): this module imports
only the standard library at load time; engine modules are imported inside the verb that needs
them, and Qt/watchdog never on the ``status``/``try``/``release`` paths.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import core

if TYPE_CHECKING:
    from core.record import LockStatus

EXIT_OK = 0
"""Success."""
EXIT_NO = 1
"""Held, timed out, not yours, refused, verification failed."""
EXIT_USAGE = 2
"""Bad command line."""
EXIT_IO = 3
"""I/O error or bad input file."""
EXIT_INTERNAL = 4
"""A bug in Lockwarden (traceback with ``--debug``)."""

PROG = "lockwarden"


class CliError(Exception):
    """An outcome the CLI reports as one line on stderr with exit code ``code``."""

    def __init__(self, message: str, code: int = EXIT_IO) -> None:
        self.code = code
        super().__init__(message)


# --------------------------------------------------------------------------------------------
# argument types
# --------------------------------------------------------------------------------------------


def _seconds(text: str) -> float:
    """argparse type: a non-negative, finite number of seconds (float allowed)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"not a finite number of seconds: {text!r}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    """argparse type: seconds > 0 (a TTL or stale limit of 0 makes no sense)."""
    value = _seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {text!r}")
    return value


def _pid(text: str) -> int:
    """argparse type: a process ID (integer > 0)."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a process ID: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a process ID is > 0: {text!r}")
    return value


def _count(text: str) -> int:
    """argparse type: a count >= 0."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def _path(text: str) -> str:
    """argparse type: a non-empty path without NUL bytes."""
    if not text:
        raise argparse.ArgumentTypeError("empty path")
    if "\x00" in text:
        raise argparse.ArgumentTypeError(f"path contains a NUL byte: {text!r}")
    return text


# --------------------------------------------------------------------------------------------
# parser
# --------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are one line on stderr, exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


_FORMATTER = argparse.RawDescriptionHelpFormatter

_EXAMPLES: dict[str, str] = {
    "try": """example:
  lockwarden try build.lock --tag nightly && make && lockwarden release build.lock
  (exit 0 acquired, 1 held; the lock records the calling shell's PID)""",
    "acquire": """example:
  lockwarden acquire /tmp/deploy.lock --timeout 30 --tag deploy || exit 1
  ./deploy.sh; lockwarden release /tmp/deploy.lock""",
    "release": """examples:
  lockwarden release build.lock                 # only the holder that took it
  lockwarden release build.lock --force --reason "holder hung"   # anyone's, audited""",
    "status": """examples:
  lockwarden status /tmp/deploy.lock            # exit 0 free, 1 held
  lockwarden status /tmp/deploy.lock --json | jq .pid""",
    "wait": """example:
  lockwarden wait /tmp/deploy.lock --timeout 60 && echo "deploy finished\"""",
    "list": """examples:
  lockwarden list /tmp /run/lock
  lockwarden list ~/proj --recursive --json | jq '.[] | select(.state == "stale")'""",
    "reclaim": """examples:
  lockwarden reclaim /tmp/deploy.lock           # only if its holder is dead (stale)
  lockwarden reclaim /tmp/deploy.lock --force --reason "operator decision\"""",
    "run": """examples:
  lockwarden run /tmp/backup.lock -- rsync -a src/ dst/
  lockwarden run /tmp/backup.lock --timeout 0 --ttl 60 -- ./nightly.sh
  (exit code is the command's; 1 if the lock could not be had)""",
    "audit": """examples:
  lockwarden audit /tmp --tail 20
  lockwarden audit /tmp/deploy.lock --json
  lockwarden audit /tmp --verify                # exit 1 if the chain is broken""",
    "clean": """example:
  lockwarden clean /tmp --dry-run               # list Lockwarden's leftover temp files
  lockwarden clean /tmp""",
    "watch": """examples:
  lockwarden watch /tmp /run/lock
  lockwarden watch ~/proj --recursive --json | while read -r line; do ...; done""",
    "gui": """examples:
  lockwarden gui
  lockwarden gui --config ~/lockwarden-test.toml   # options of lockwarden-gui pass through""",
}


def _add_common(p: argparse.ArgumentParser, *, json_opt: bool = True) -> None:
    """Options every verb accepts (-q, --debug, --json), also accepted before the verb."""
    p.add_argument(
        "-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
        help="print nothing on success (errors still go to stderr)",
    )
    p.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS,
        help="show a traceback on errors",
    )
    if json_opt:
        p.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS,
            help="machine-readable output (JSON)",
        )


def _add_timeout(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=_seconds, metavar="S",
                   help="give up after S seconds (exit 1); default: wait forever")


def _add_stale_after(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--stale-after", type=_positive_seconds, default=3600.0, metavar="S",
        help="age in seconds after which another tool's lock with a dead holder is stale "
        "(default 3600, as in the sema spec)",
    )


def _add_lock_opts(p: argparse.ArgumentParser, *, pid: bool = True) -> None:
    """Options of verbs that write a lock: --tag, --ttl, --format, --pid, --stale-after."""
    p.add_argument("--tag", metavar="T", help="human description stored in the lock")
    p.add_argument(
        "--ttl", type=_positive_seconds, metavar="S",
        help="lease length in seconds (the lock expires after it unless refreshed)",
    )
    p.add_argument(
        "--format", choices=("sema", "task-mcp", "af-ledger"), default="sema",
        help="lock file format to write (default sema)",
    )
    if pid:
        p.add_argument(
            "--pid", type=_pid, metavar="N",
            help="holder PID to record (default: the calling process, i.e. the shell)",
        )
    _add_stale_after(p)


def build_parser() -> argparse.ArgumentParser:
    """The complete argparse parser of ``lockwarden`` (every verb, with examples)."""
    parser = _Parser(
        prog=PROG,
        formatter_class=_FORMATTER,
        description="Inspect, acquire, release and reclaim lock files "
        "(sema/semats, af, Task MCP, pidfiles) through Lockwarden's engine.",
        epilog="exit codes: 0 ok, 1 held/timeout/refused, 2 usage error, 3 I/O error or "
        "bad lock file, 4 internal error.\nRun 'lockwarden VERB --help' for a verb's "
        "options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {core.__version__}")
    _add_common(parser)
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True

    def verb(name: str, help_text: str, aliases: Sequence[str] = ()) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name, aliases=list(aliases), help=help_text, description=help_text,
            epilog=_EXAMPLES.get(name), formatter_class=_FORMATTER,
        )
        p.set_defaults(verb=name)
        return p

    p = verb("try", "acquire a lock without waiting (reclaims a stale one)", ["try-acquire"])
    p.add_argument("path", type=_path, metavar="PATH")
    _add_lock_opts(p)
    _add_common(p)

    p = verb("acquire", "wait until the lock is acquired")
    p.add_argument("path", type=_path, metavar="PATH")
    _add_timeout(p)
    _add_lock_opts(p)
    _add_common(p)

    p = verb("release", "release a lock (only the holder's, unless --force)")
    p.add_argument("path", type=_path, metavar="PATH")
    p.add_argument("--force", action="store_true",
                   help="remove the lock whoever holds it (recorded in the audit log)")
    p.add_argument("--reason", metavar="T", help="why (recorded in the audit log)")
    p.add_argument("--pid", type=_pid, metavar="N",
                   help="holder PID to release for (default: the calling process)")
    _add_common(p)

    p = verb("status", "show who holds a lock (exit 0 free, 1 held)")
    p.add_argument("path", type=_path, metavar="PATH")
    _add_stale_after(p)
    _add_common(p)

    p = verb("wait", "wait until a lock is free")
    p.add_argument("path", type=_path, metavar="PATH")
    _add_timeout(p)
    _add_stale_after(p)
    _add_common(p)

    p = verb("list", "list every lock file in directories, with its verdict")
    p.add_argument("dirs", type=_path, nargs="+", metavar="DIR")
    p.add_argument("-r", "--recursive", action="store_true", help="descend into subdirectories")
    p.add_argument("--pattern", action="append", metavar="GLOB",
                   help="file name pattern (repeatable; default *.lock *.pid *-lock)")
    _add_stale_after(p)
    _add_common(p)

    p = verb("reclaim", "break a stale lock and take it (a live one only with --force)")
    p.add_argument("path", type=_path, metavar="PATH")
    p.add_argument("--force", action="store_true",
                   help="take the lock even if its holder is alive (recorded in the audit log)")
    p.add_argument("--reason", metavar="T", help="why (recorded in the audit log)")
    _add_lock_opts(p)
    _add_common(p)

    p = verb("run", "hold a lock while a command runs (like flock(1))")
    p.add_argument("path", type=_path, metavar="PATH")
    p.add_argument("--timeout", type=_seconds, metavar="S",
                   help="wait at most S seconds for the lock (0: do not wait); default: forever")
    p.add_argument("--tag", metavar="T", help="human description stored in the lock")
    p.add_argument("--ttl", type=_positive_seconds, metavar="S",
                   help="lease length in seconds; refreshed automatically while CMD runs")
    p.add_argument("--format", choices=("sema", "task-mcp", "af-ledger"), default="sema",
                   help="lock file format to write (default sema)")
    _add_stale_after(p)
    p.add_argument("cmd", nargs="*", metavar="CMD", help="command and arguments, after --")
    _add_common(p, json_opt=False)

    p = verb("audit", "show the audit log of a directory or lock; --verify checks the chain")
    p.add_argument("path", type=_path, nargs="?", default=".", metavar="PATH|DIR",
                   help="log file, lock file or directory (default: current directory)")
    p.add_argument("--tail", type=_count, metavar="N", help="only the last N entries")
    p.add_argument("--verify", action="store_true",
                   help="check the hash chain (exit 1 if a line was edited, removed or moved)")
    _add_common(p)

    p = verb("clean", "remove temp files Lockwarden's engine left behind (never others')")
    p.add_argument("dir", type=_path, metavar="DIR")
    p.add_argument("--dry-run", action="store_true", help="only print what would be removed")
    p.add_argument("--min-age", type=_seconds, default=10.0, metavar="S",
                   help="leave temp files younger than S seconds alone (default 10)")
    _add_common(p)

    p = verb("watch", "print the locks in directories, then every change, until interrupted")
    p.add_argument("dirs", type=_path, nargs="+", metavar="DIR")
    p.add_argument("-r", "--recursive", action="store_true", help="descend into subdirectories")
    p.add_argument("--pattern", action="append", metavar="GLOB",
                   help="file name pattern (repeatable; default *.lock *.pid *-lock)")
    _add_stale_after(p)
    _add_common(p)

    p = verb("gui", "start the desktop app (tray icon and window); other options are passed "
             "to the app (see 'lockwarden-gui --help')")
    _add_common(p, json_opt=False)

    return parser


# --------------------------------------------------------------------------------------------
# helpers shared by the verbs
# --------------------------------------------------------------------------------------------


class Out:
    """Where a verb prints: stdout for results, stderr for the one-line diagnostics."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.quiet: bool = bool(getattr(args, "quiet", False))
        self.json: bool = bool(getattr(args, "json", False))

    def result(self, text: str) -> None:
        """A human result line on stdout (suppressed by -q)."""
        if not self.quiet:
            print(text, flush=True)

    def data(self, obj: Any) -> None:
        """A JSON document on stdout (not suppressed by -q: it was asked for)."""
        import json

        print(json.dumps(obj, ensure_ascii=False), flush=True)

    def note(self, text: str) -> None:
        """A one-line message on stderr (suppressed by -q)."""
        if not self.quiet:
            print(f"{PROG}: {_one_line(text)}", file=sys.stderr, flush=True)


def _one_line(text: str) -> str:
    return " ".join(str(text).split("\n")).replace("\r", " ")


def holder_pid(args: argparse.Namespace) -> int:
    """The PID a lock taken by this command records: ``--pid`` or the caller (parent) process.

    The ``sema`` CLI records its own PID, which is dead once the command returns; recording the
    calling shell keeps the lock alive while the script that took it runs (issue 3)."""
    pid = getattr(args, "pid", None)
    return int(pid) if pid is not None else os.getppid()


def checked_holder_pid(args: argparse.Namespace) -> int:
    """:func:`holder_pid`, refusing (exit 2) a ``--pid`` that names no running process: a
    lock recorded for it would be stale at once."""
    pid = holder_pid(args)
    if getattr(args, "pid", None) is not None:
        from core.liveness import process_start_time

        if process_start_time(pid) is None:
            raise CliError(f"--pid {pid}: no such process", EXIT_USAGE)
    return pid


def check_lock_path(path: str, *, must_be_file: bool) -> None:
    """Validate a lock path before the engine sees it.

    Raises :class:`CliError` (exit 3) when the containing directory is missing or not a
    directory, or, with ``must_be_file``, when something other than a regular file (directory,
    FIFO, socket, device, symbolic link) sits at ``path``: no lock verb may touch those.
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
    """Raise :class:`CliError` (exit 3) unless ``path`` is an existing directory."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise CliError(f"{path}: no such directory") from None
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise CliError(f"{path}: not a directory")


def _policy(args: argparse.Namespace) -> Any:
    from core.policy import StalePolicy

    return StalePolicy(stale_after=float(args.stale_after))


def refuse_unreadable(status: LockStatus) -> int:
    """For a refusal whose verdict is ``unreadable`` (garbage, permission...): raise
    :class:`CliError` (exit 3: bad input file) instead of answering "held" (exit 1)."""
    from core.record import State

    if status.state is State.UNREADABLE:
        raise CliError(f"{status.path}: cannot be read as a lock: {status.error or 'unreadable'}")
    return EXIT_NO


# --------------------------------------------------------------------------------------------
# verbs
# --------------------------------------------------------------------------------------------


def cmd_try(args: argparse.Namespace, out: Out) -> int:
    """``try PATH``: acquire without waiting; exit 0 acquired, 1 held (holder printed)."""
    return _acquire(args, out, blocking=False, timeout=None)


def cmd_acquire(args: argparse.Namespace, out: Out) -> int:
    """``acquire PATH [--timeout S]``: wait (event-driven, in the engine) until acquired."""
    return _acquire(args, out, blocking=True, timeout=args.timeout)


def _acquire(args: argparse.Namespace, out: Out, *, blocking: bool, timeout: float | None) -> int:
    from core.errors import LockHeld, LockTimeout
    from core.lock import Lock

    check_lock_path(args.path, must_be_file=True)
    pid = checked_holder_pid(args)
    lock = Lock(
        args.path, tag=args.tag, ttl=args.ttl, format=args.format,
        stale_after=float(args.stale_after), holder_pid=pid,
    )
    try:
        lock.acquire(timeout=timeout, blocking=blocking)
    except (LockHeld, LockTimeout) as exc:
        status = exc.status
        if status is not None:
            refuse_unreadable(status)
        if out.json:
            out.data(status.to_dict() if status is not None else {"path": args.path})
        what = "timed out waiting for " if isinstance(exc, LockTimeout) else ""
        detail = describe_holder(status) if status else "held"
        out.note(f"{what}{args.path}: {detail}")
        return EXIT_NO
    if out.json:
        from core.inspect import inspect

        out.data(inspect(args.path, policy=_policy(args)).to_dict())
    else:
        out.result(f"acquired {args.path} (pid {pid})")
    return EXIT_OK


def cmd_release(args: argparse.Namespace, out: Out) -> int:
    """``release PATH [--force] [--reason T]``: owner-checked release via
    :func:`core.release_path` (holder = caller's PID or ``--pid``); ``--force`` removes
    anyone's lock (audited by the engine)."""
    from core.errors import LockLost
    from core.lock import release_path
    from core.record import State

    check_lock_path(args.path, must_be_file=True)
    pid = holder_pid(args)
    try:
        status = release_path(args.path, pid=pid, force=args.force, reason=args.reason)
    except LockLost as exc:
        msg = str(exc)
        out.note(msg if "not released" in msg else f"not released: {msg}")
        return EXIT_NO
    if status.state is State.FREE:
        out.note(f"not released: {args.path} is not held")
        return EXIT_NO
    if out.json:
        out.data(status.to_dict())
    else:
        extra = f" (was {describe_holder(status)})" if args.force else ""
        out.result(f"released {args.path}{extra}")
    return EXIT_OK


def cmd_status(args: argparse.Namespace, out: Out) -> int:
    """``status PATH [--json]``: the verdict of :func:`core.inspect.inspect`; exit 0 free,
    1 held (any state but free, as sema), 3 unreadable (the status is still printed)."""
    from core.inspect import inspect
    from core.record import State

    check_lock_path(args.path, must_be_file=False)
    status = inspect(args.path, policy=_policy(args))
    if out.json:
        out.data(status.to_dict())
    elif not out.quiet:
        from core._cli_format import status_text

        print(status_text(status), flush=True)
    if status.state is State.UNREADABLE:
        raise CliError(f"{args.path}: cannot be read as a lock: {status.error or 'unreadable'}")
    return EXIT_OK if status.state is State.FREE else EXIT_NO


def cmd_wait(args: argparse.Namespace, out: Out) -> int:
    """``wait PATH [--timeout S]``: until free (:func:`core.wait`); 1 on timeout."""
    from core.errors import LockTimeout
    from core.lock import wait

    check_lock_path(args.path, must_be_file=True)
    try:
        status = wait(args.path, timeout=args.timeout, stale_after=float(args.stale_after))
    except LockTimeout as exc:
        if exc.status is not None and out.json:
            out.data(exc.status.to_dict())
        detail = f": {describe_holder(exc.status)}" if exc.status else ""
        out.note(f"timed out waiting for {args.path}{detail}")
        return EXIT_NO
    if out.json:
        out.data(status.to_dict())
    elif status.state.value == "stale":
        out.result(f"{args.path} is stale (its holder is gone): it can be taken")
    else:
        out.result(f"{args.path} is free")
    return EXIT_OK


def _specs(args: argparse.Namespace) -> list[Any]:
    from core.config import WatchSpec

    specs = []
    for d in args.dirs:
        check_dir(d)
        kw: dict[str, Any] = {"recursive": bool(args.recursive),
                              "stale_after": float(args.stale_after)}
        if args.pattern:
            kw["patterns"] = list(args.pattern)
        specs.append(WatchSpec(os.path.abspath(d), **kw))
    return specs


def cmd_list(args: argparse.Namespace, out: Out) -> int:
    """``list DIR... [--recursive] [--json]``: every lock file with its verdict
    (:func:`core.scan.scan`); unreadable files included with their reason. Exit 0."""
    from core.scan import scan

    statuses = scan(_specs(args))
    if out.json:
        out.data([s.to_dict() for s in statuses])
    elif not out.quiet:
        from core._cli_format import table

        print(table(statuses), flush=True)
    return EXIT_OK


def cmd_reclaim(args: argparse.Namespace, out: Out) -> int:
    """``reclaim PATH [--force] [--reason T]``: break a stale lock and take it
    (:func:`core.reclaim`); exit 1 when refused (the holder is alive and no ``--force``)."""
    from core.errors import LockHeld, NotStale
    from core.lock import reclaim

    check_lock_path(args.path, must_be_file=True)
    pid = checked_holder_pid(args)
    try:
        reclaim(
            args.path, force=args.force, reason=args.reason, holder_pid=pid, tag=args.tag,
            ttl=args.ttl, stale_after=float(args.stale_after),
        )
    except (NotStale, LockHeld) as exc:
        status = exc.status
        if status is not None:
            refuse_unreadable(status)
            if out.json:
                out.data(status.to_dict())
        out.note(f"refused: {exc}")
        return EXIT_NO
    if out.json:
        from core.inspect import inspect

        out.data(inspect(args.path, policy=_policy(args)).to_dict())
    else:
        out.result(f"reclaimed {args.path} (pid {pid})")
    return EXIT_OK


def cmd_run(args: argparse.Namespace, out: Out) -> int:
    """``run PATH [--timeout S] [--ttl S] -- CMD ARGS...``: see :mod:`core._cli_run`."""
    from core._cli_run import run

    check_lock_path(args.path, must_be_file=True)
    if not args.cmd:
        raise CliError("run: no command given (usage: lockwarden run PATH -- CMD ARGS...)",
                       EXIT_USAGE)
    return run(args, out)


def cmd_audit(args: argparse.Namespace, out: Out) -> int:
    """``audit [PATH|DIR] [--tail N] [--json] [--verify]``: print the audit log
    (:func:`core.audit.read`; PATH is a log, a lock file or a directory) or check its hash
    chain (:func:`core.audit.verify`): exit 1 when the chain is broken or there is no log, 3
    when the log cannot be read. ``--tail N`` reads from the end (:func:`core.audit.tail`)."""
    from core import audit

    if not os.path.lexists(args.path) and not os.path.isdir(os.path.dirname(args.path) or "."):
        raise CliError(f"{args.path}: no such file or directory")
    if args.verify:
        result = audit.verify(args.path)
        if result.missing:
            raise CliError(f"no audit log at {result.log_path}", EXIT_NO)
        if not result.ok and result.bad_line is None:
            raise CliError(f"audit log cannot be read: {result.reason}")
        if out.json:
            out.data({"ok": result.ok, "entries": result.entries, "foreign": result.foreign,
                      "bad_line": result.bad_line, "reason": result.reason,
                      "log_path": result.log_path, "torn_tail": result.torn_tail})
        elif result.ok:
            out.result(f"{result.log_path}: chain intact ({result.entries} entries, "
                       f"{result.foreign} from other tools)"
                       + (f"; {_one_line(result.reason)}" if result.reason else ""))
        else:
            print(f"{PROG}: {result.log_path}: chain BROKEN: {_one_line(result.reason or '')}",
                  file=sys.stderr, flush=True)
        return EXIT_OK if result.ok else EXIT_NO
    got = audit.read(args.path) if args.tail is None else audit.tail(args.path, args.tail)
    entries = [_audit_dict(e) for e in got]
    if out.json:
        out.data(entries)
    elif not out.quiet:
        from core._cli_format import audit_table

        print(audit_table(entries), flush=True)
    return EXIT_OK


def _audit_dict(e: Any) -> dict[str, Any]:
    """An :class:`core.audit.AuditEntry` as JSON: Task MCP's field names (``lockPath``) plus
    ours, the physical ``line`` and ``error`` for a line that is not a JSON object."""
    ts = (e.timestamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")
          if e.timestamp else None)
    return {
        "line": e.line, "timestamp": ts, "operation": e.operation, "lockPath": e.lock_path,
        "details": e.details, "user": e.user, "pid": e.pid, "host": e.host, "via": e.via,
        "format": e.format, "result": e.result, "foreign": e.foreign, "error": e.error,
    }


def cmd_clean(args: argparse.Namespace, out: Out) -> int:
    """``clean DIR``: remove the engine's leftover temp files; see :mod:`core._cli_clean`."""
    from core._cli_clean import clean

    check_dir(args.dir)
    return clean(args, out)


def cmd_watch(args: argparse.Namespace, out: Out) -> int:
    """``watch DIR...``: see :mod:`core._cli_watch`."""
    from core._cli_watch import watch

    return watch(_specs(args), out)


def cmd_gui(args: argparse.Namespace, out: Out) -> int:
    """``gui``: start the desktop app (``app.main:main``, imported only here)."""
    import importlib

    try:  # the GUI is optional for the CLI: imported dynamically, never at module level
        gui_main = importlib.import_module("app.main").main
    except ImportError as exc:
        raise CliError(f"gui: the desktop app is not available ({exc})") from None
    try:
        return int(gui_main(list(args.gui_args)) or 0)
    except ImportError as exc:  # PySide6 is imported inside app.main.main
        raise CliError(f"gui: the desktop app cannot start: {exc}") from None


def describe_holder(status: LockStatus) -> str:
    """One phrase about a lock's holder: ``"pid 4242 alive, held 3m 12s, tag 'deploy'"``."""
    from core._cli_format import holder_phrase

    return holder_phrase(status)


_VERBS: dict[str, Callable[[argparse.Namespace, Out], int]] = {
    "try": cmd_try,
    "acquire": cmd_acquire,
    "release": cmd_release,
    "status": cmd_status,
    "wait": cmd_wait,
    "list": cmd_list,
    "reclaim": cmd_reclaim,
    "run": cmd_run,
    "audit": cmd_audit,
    "clean": cmd_clean,
    "watch": cmd_watch,
    "gui": cmd_gui,
}

_MUTATING = frozenset({"try", "acquire", "release", "reclaim", "run"})


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------


def _verb_of(argv: Sequence[str]) -> str | None:
    """The verb: the first word that is not an option (no global option takes a value)."""
    return next((a for a in argv if not a.startswith("-")), None)


def _split_run_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """For ``run``, split argv at the first ``--``: everything after it is the command, even
    words that look like options. Other verbs keep ``--`` (it lets a path start with ``-``)."""
    if _verb_of(argv) != "run" or "--" not in argv:
        return argv, None
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``lockwarden`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    Never raises (``SystemExit`` from ``--help``/``--version``/usage errors is turned into its
    code); errors are one line on stderr, with a traceback only under ``--debug``.
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args_list
    try:
        head, run_cmd = _split_run_command(args_list)
        parser = build_parser()
        try:
            if _verb_of(head) == "gui":  # options the CLI does not know go to the app
                args, extra = parser.parse_known_args(head)
                args.gui_args = extra
            else:
                args = parser.parse_args(head)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        if run_cmd is not None:
            args.cmd = [*getattr(args, "cmd", []), *run_cmd]
        debug = bool(getattr(args, "debug", False))
        out = Out(args)
        if args.verb in _MUTATING or args.verb in ("watch", "gui"):
            from core import audit

            audit.set_via("cli")
        return _VERBS[args.verb](args, out)
    except CliError as exc:
        if debug:
            import traceback

            traceback.print_exc()
        print(f"{PROG}: {_one_line(str(exc))}", file=sys.stderr, flush=True)
        return exc.code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr, flush=True)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except Exception as exc:  # one clear line, never a traceback unless --debug
        if debug:
            import traceback

            traceback.print_exc()
        return _report_exception(exc)


def _report_exception(exc: BaseException) -> int:
    from core.errors import (
        LockError,
        LockHeld,
        LockLost,
        LockTimeout,
        NotStale,
        ParseError,
        UnreadableError,
    )

    if isinstance(exc, UnreadableError | ParseError):
        msg, code = str(exc), EXIT_IO
    elif isinstance(exc, LockHeld | LockTimeout | LockLost | NotStale):
        msg, code = str(exc), EXIT_NO  # a "no" answer the verb did not expect
    elif isinstance(exc, LockError):  # the engine could not do it: I/O, vanished holder...
        msg, code = str(exc), EXIT_IO
    elif isinstance(exc, OSError):
        msg, code = _os_error_text(exc), EXIT_IO
    elif isinstance(exc, ValueError) and "null byte" in str(exc):
        msg, code = f"path contains a NUL byte ({exc})", EXIT_USAGE
    else:
        msg = (f"internal error: {type(exc).__name__}: {exc} "
               "(run again with --debug for the traceback and report it)")
        code = EXIT_INTERNAL
    try:
        print(f"{PROG}: {_one_line(msg)}", file=sys.stderr, flush=True)
    except OSError:
        pass
    return code


def _os_error_text(exc: OSError) -> str:
    """``"PATH: reason"``; an error on one of the engine's temp files names the lock instead
    (``/tmp/x.lock: cannot write in /tmp: Permission denied``)."""
    from core.fsutil import parse_temp_name

    name = exc.filename
    reason = exc.strerror or str(exc)
    if not isinstance(name, str) or not name:
        return reason
    head, base = os.path.split(name)
    parsed = parse_temp_name(base)
    if parsed is not None:
        return f"{os.path.join(head, parsed[0])}: cannot write in {head or '.'}: {reason}"
    return f"{name}: {reason}"


def _silence_stdout() -> None:
    """After EPIPE on stdout, point it at /dev/null so the interpreter's final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
