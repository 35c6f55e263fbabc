"""``lockwarden kill-holder PATH [--reason T] [--yes]``: end the process holding a kernel lock
on PATH (:func:`core.engine.end_holder.end_holder`; docs/cli.md, "kill-holder"). Asks for
confirmation on a terminal; without one, ``--yes`` is required (exit 2)."""

from __future__ import annotations

import argparse
import sys

from core.cli.common import EXIT_NO, EXIT_OK, EXIT_USAGE, CliError, Out, check_lock_path


def cmd_kill_holder(args: argparse.Namespace, out: Out) -> int:
    """Confirm, then send SIGTERM to the kernel-named holder of ``args.path``.

    Returns:
        0 signalled, 1 refused (no kernel lock, no known holder, the user said no).

    Raises:
        CliError: bad path (exit 3); no terminal to confirm on and no ``--yes`` (exit 2).
    """
    from core.engine.end_holder import NotKernelHeld, end_holder
    from core.verdicts.inspect import inspect

    path: str = args.path
    check_lock_path(path, must_be_file=True)
    st = inspect(path)
    pid = st.kernel_pid
    if not st.kernel_held or pid is None:
        out.note(f"not ended: {path} is not held by a kernel lock of a known process")
        return EXIT_NO
    if not args.yes:
        if not sys.stdin.isatty():
            raise CliError("kill-holder asks before it ends a process; pass --yes to confirm "
                           "without a terminal", EXIT_USAGE)
        import psutil

        try:
            name = psutil.Process(pid).name()
        except psutil.Error:
            name = "?"
        print(f"End PID {pid} ({name}), which holds a kernel lock on {path}? [y/N] ",
              end="", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            out.note("not ended")
            return EXIT_NO
    try:
        ended = end_holder(path, reason=args.reason, expected_pid=pid)
    except NotKernelHeld as exc:
        out.note(f"not ended: {exc}")
        return EXIT_NO
    except PermissionError:
        out.note(f"not ended: PID {pid} belongs to another user (permission denied)")
        return EXIT_NO
    out.result(f"sent SIGTERM to PID {ended}, the holder of {path}")
    return EXIT_OK
