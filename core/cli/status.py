"""The verbs that only look at one lock: ``status`` and ``wait`` (docs/cli.md, "Verbs" and
"``status`` and ``list`` output"; ``list`` is :mod:`core.cli.listing`).

``status`` judges with the policy of the configured directory the lock is in,
``--stale-after`` when given, else the defaults, said in a note on stderr and the ``policy``
field of ``--json`` (:func:`core.cli.common.cli_policies`; docs/cli.md, "One verdict: the
configured directory's policy"); ``wait`` with ``--stale-after`` only, as ``try`` takes a lock.
Both print ``LockStatus.to_dict()`` for ``--json`` (``reasons`` as objects ``{"code", "text",
...params}``) or the text of :mod:`core.cli.output`. Engine modules are imported inside each
verb (docs/cli.md, "Start-up time": ``status`` never imports Qt or watchdog).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

from core.cli.common import (
    EXIT_NO,
    EXIT_OK,
    CliError,
    Out,
    check_lock_path,
    cli_policies,
    stale_policy,
)


def cmd_status(args: argparse.Namespace, out: Out) -> int:
    """``status PATH [--json] [--config PATH]``: the verdict of
    :func:`core.verdicts.inspect.inspect` under the configured directory's policy
    (:func:`core.cli.common.cli_policies`; a note on stderr when the defaults are used).

    Returns:
        0 free, 1 held (any state but free, as sema).

    Raises:
        CliError: the directory is missing (exit 3); ``PATH`` is a directory (exit 3, nothing
            printed: ``list`` is named); the file is unreadable (exit 3, after the status is
            printed).
    """
    from core.record import Liveness, State
    from core.verdicts.inspect import inspect

    path: str = args.path
    check_lock_path(path, must_be_file=False)
    if os.path.isdir(path):  # no verdict to print: a directory is no lock (exit 3, as for
        from core.text import printable  # every verb given a directory)

        raise CliError(printable(f"status {path}: a directory, not a lock file (the locks in "
                                 f"it: lockwarden list {shlex.quote(path)})"))
    choice = cli_policies(args).for_path(path)
    status = inspect(path, policy=choice.policy)
    if choice.needs_note and status.state is not State.UNREADABLE:  # an error is one line
        out.note(choice.note(path))
    if status.liveness is Liveness.REMOTE:  # another host's lock: its own report, if any
        from core.cli.fleet import fleet_judged

        status = fleet_judged([status], args)[0]
    users = open_by_windows(path)
    if out.json:
        out.data({**status.to_dict(), "policy": choice.to_dict(),
                  **({"open_by": users} if users else {})})
    elif not out.quiet:
        from core.cli.output import status_text
        from core.text import printable

        print(status_text(status), flush=True)
        for u in users:
            print(printable(f"open by:   PID {u['pid']} {u['app_name']}"), flush=True)
    if status.state is State.UNREADABLE:
        raise CliError(f"{path}: cannot be read as a lock: {status.error or 'unreadable'}")
    return EXIT_OK if status.state is State.FREE else EXIT_NO


def open_by_windows(path: str) -> list[dict[str, Any]]:
    """On Windows, the processes that have the file at ``path`` open, asked of the Restart
    Manager on this explicit request (:func:`core.kernel.windows.processes_using`; Windows
    cannot say who holds a ``LockFileEx`` range: docs/specs/devtool-locks.md §2.6 "Windows"),
    as ``{"pid", "start_time" (Unix s, UTC), "app_name"}``; ``[]`` elsewhere, for a path that
    is not a file, or when the Restart Manager cannot be asked. Not run on Windows yet. Never
    raises."""
    if sys.platform != "win32" or not os.path.isfile(path):
        return []
    from core.kernel.windows import processes_using

    try:
        users = processes_using(path)
    except (OSError, NotImplementedError):
        return []
    return [{"pid": u.pid, "start_time": u.start_time, "app_name": u.app_name} for u in users]


def cmd_wait(args: argparse.Namespace, out: Out) -> int:
    """``wait PATH [--timeout S] [--notify]``: until the lock is free or stale (the next
    ``try`` would take it; :func:`core.engine.waiting.wait`); ``--notify``: then one desktop
    notification (:mod:`core.cli.notify`); under ``--stale-after`` as ``try`` judges.

    Returns:
        0 free or stale, 1 on timeout.

    Raises:
        CliError: bad path (exit 3).
    """
    from core.engine.waiting import wait
    from core.errors import LockTimeout
    from core.holder import describe_holder
    from core.record import State

    path: str = args.path
    timeout: float | None = args.timeout
    check_lock_path(path, must_be_file=True)
    from core.cli.caller import caller_holds, refuse_held_by_caller

    if (held := caller_holds(path, stale_policy(args))) is not None:  # would wait for ever
        return refuse_held_by_caller(*held, path, out)
    try:
        status = wait(path, timeout=timeout, policy=stale_policy(args))
    except LockTimeout as exc:
        if exc.status is not None and out.json:
            out.data(exc.status.to_dict())
        detail = f": {describe_holder(exc.status)}" if exc.status else ""
        out.note(f"timed out waiting for {path}{detail}")
        return EXIT_NO
    if out.json:
        out.data(status.to_dict())
    elif status.state is State.STALE:
        out.result(f"{path} is stale (its holder is gone): it can be taken")
    else:
        out.result(f"{path} is free")
    if getattr(args, "notify", False):
        _notify_free(path, status.state is State.STALE, out)
    return EXIT_OK


def _notify_free(path: str, stale: bool, out: Out) -> None:
    """``wait --notify``: a desktop notification that ``path`` is free (or stale); when none
    can be shown, a note saying why (the result line was printed; :mod:`core.cli.notify`)."""
    from core.cli.notify import desktop_notify

    body = f"{path} is {'stale (its holder is gone)' if stale else 'free'}"
    why = desktop_notify("Lock free" if not stale else "Lock stale", body)
    if why is not None:  # the result line above already said it
        out.note(f"no desktop notification: {why}")
