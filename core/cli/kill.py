"""``lockwarden kill-holder PATH [--reason T] [--yes]``: end the process holding a kernel lock
on PATH (:func:`core.engine.end_holder.end_holder`; docs/cli.md, "kill-holder"). Asks for
confirmation on a terminal; without one, ``--yes`` is required (exit 2)."""

from __future__ import annotations

import argparse
import os
import sys

from core.cli.common import EXIT_NO, EXIT_OK, EXIT_USAGE, CliError, Out, check_lock_path


def cmd_kill_holder(args: argparse.Namespace, out: Out) -> int:
    """Confirm, then send SIGTERM to the kernel-named holder of ``args.path``.

    Returns:
        0 signalled, 1 refused (no kernel lock, no known holder, the user said no).

    Raises:
        CliError: bad path (exit 3); no terminal to confirm on and no ``--yes`` (exit 2).
    """
    from datetime import datetime

    from core.engine.end_holder import NotKernelHeld, end_holder, holders
    from core.kernel.proof import own_session_role
    from core.text import printable
    from core.verdicts.liveness import process_facts

    path: str = args.path
    check_lock_path(path, must_be_file=True)
    pids = holders(path)
    facts = process_facts(pids[0]) if pids else None
    if facts is None:
        out.note(f"not ended: no process can be proven to hold a kernel lock on {path} (none "
                 "is held, or its holder is another user's process)")
        return EXIT_NO
    pid = facts.pid
    role = own_session_role(pid)
    if not args.yes:
        if not sys.stdin.isatty():
            raise CliError("kill-holder asks before it ends a process; pass --yes to confirm "
                           "without a terminal", EXIT_USAGE)
        started = datetime.fromtimestamp(facts.start).astimezone().strftime("%Y-%m-%d %H:%M:%S")
        others = [str(p) for p in pids[1:] if p != os.getpid()]
        print(f"PID {pid} ({printable(facts.name)}, user {printable(facts.user or '?')}, "
              f"started {started}) holds a kernel lock on {printable(path)}.", file=sys.stderr)
        if others:
            one = len(others) == 1
            print(f"PID{'' if one else 's'} {', '.join(others)} share{'s' if one else ''} it "
                  f"and keep{'s' if one else ''} the lock after this one ends.", file=sys.stderr)
        if role is not None:
            print(f"WARNING: PID {pid} is {role}: ending it ends your session's programs.",
                  file=sys.stderr)
        print(f"End PID {pid}? [y/N] ", end="", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            out.note("not ended")
            return EXIT_NO
    elif role is not None:
        out.note(f"not ended: PID {pid}, the holder of {path}, is {role}; --yes never ends it "
                 "(confirm on a terminal)")
        return EXIT_NO
    try:
        ended = end_holder(path, reason=args.reason, expected_pid=pid,
                           expected_start=facts.start, own_session=role is not None)
    except NotKernelHeld as exc:
        out.note(f"not ended: {exc}")
        return EXIT_NO
    except PermissionError:
        out.note(f"not ended: PID {pid} belongs to another user (permission denied)")
        return EXIT_NO
    out.result(f"sent SIGTERM to PID {ended}, the holder of {path}")
    return EXIT_OK
