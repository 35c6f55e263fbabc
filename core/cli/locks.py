"""The verbs that take or give back a lock: ``try``, ``acquire``, ``release``, ``reclaim``
(docs/cli.md, "Verbs").

Each is a thin layer over the engine (:mod:`core.engine.lock`; docs/DESIGN.md, "Lock operations (the
engine)"): it checks the path, picks the holder PID, builds the one stale policy of the command
(:func:`core.cli.common.stale_policy`), calls the engine and maps the outcome to an exit code.
Engine modules are imported inside each verb (start-up cost: docs/cli.md, "Start-up time").
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from core.cli.caller import (
    caller_holds,
    checked_holder_pid,
    held_by_caller,
    refuse_held_by_caller,
    releasing_pid,
)
from core.cli.common import (
    EXIT_NO,
    EXIT_OK,
    Out,
    check_lock_path,
    cli_policies,
    refuse_unreadable,
    stale_policy,
)

if TYPE_CHECKING:
    from core.engine.lock import Lock
    from core.stale_policy import StalePolicy


def cmd_try(args: argparse.Namespace, out: Out) -> int:
    """``try PATH``: acquire without waiting (a stale lock is reclaimed on the way).

    Returns:
        0 acquired, 1 held (the holder is printed on stderr).

    Raises:
        CliError: bad path (exit 3), ``--pid`` of no running process (exit 2), the lock file
            cannot be read as a lock (exit 3).
    """
    return _acquire(args, out, blocking=False, timeout=None)


def cmd_acquire(args: argparse.Namespace, out: Out) -> int:
    """``acquire PATH [--timeout S]``: wait (event-driven, in the engine) until acquired.

    Returns:
        0 acquired, 1 timed out. Raises as :func:`cmd_try`.
    """
    timeout: float | None = args.timeout
    return _acquire(args, out, blocking=True, timeout=timeout)


def _acquire(args: argparse.Namespace, out: Out, *, blocking: bool, timeout: float | None) -> int:
    from core.engine.lock import Lock
    from core.errors import LockHeld, LockTimeout
    from core.holder import describe_holder

    path: str = args.path
    check_lock_path(path, must_be_file=True)
    pid = checked_holder_pid(args)
    policy = writer_policy(args, path)
    lock = Lock(path, tag=args.tag, ttl=args.ttl, format=args.format, holder_pid=pid,
                policy=policy, durable=bool(args.durable))
    # a lock held by the very holder this command records (the calling shell) is refused at
    # once: waiting for it would never end (looked at first, not by a refused attempt, which
    # the engine would audit as acquire_refused)
    if blocking and args.pid is None and os.path.lexists(path) \
            and (held := caller_holds(path, policy, pid)) is not None:
        return refuse_held_by_caller(*held, path, out)
    try:
        lock.acquire(timeout=timeout, blocking=blocking)
    except (LockHeld, LockTimeout) as exc:
        status = exc.status
        if status is not None:
            refuse_unreadable(status)
            if args.pid is None and (own := held_by_caller(status, pid, path)) is not None:
                return refuse_held_by_caller(status, own, path, out)
        if out.json:
            out.data(status.to_dict() if status is not None else {"path": path})
        what = "timed out waiting for " if isinstance(exc, LockTimeout) else ""
        detail = describe_holder(status) if status else "held"
        out.note(f"{what}{path}: {detail}")
        return EXIT_NO
    if out.json:
        from core.verdicts.inspect import inspect

        out.data(inspect(path, policy=policy).to_dict())
    else:
        out.result(f"acquired {path} (pid {pid})")
    _say_flock_tools_get_in(lock, path, out)
    return EXIT_OK


def _say_flock_tools_get_in(lock: Lock, path: str, out: Out) -> None:
    """After a verb took over the empty file flock-style tools lock: say that they see only
    kernel locks, which no process of this command keeps once it has ended (docs/engine.md,
    "The holder's pin"), and name ``run``, which hands its command one."""
    from core.engine.gate import emptied_of

    if emptied_of(lock.record) is not None:
        out.note(f"{path} was an empty file, which filelock, portalocker and flock(1) lock "
                 "by its inode: they see only a kernel lock, which nothing keeps once this "
                 f"command has ended; to keep them out, hold it with `lockwarden run {path} "
                 "-- CMD`")


def cmd_release(args: argparse.Namespace, out: Out) -> int:
    """``release PATH [--force [--discard-unsaved]] [--reason T]``: owner-checked release
    through :func:`core.engine.operations.release_path_kept` for the holder
    :func:`core.cli.caller.releasing_pid` picks (``--pid``; else the lock's recorded PID when
    it is this process or one of its ancestors; else the caller); ``--force`` removes anyone's
    lock (audited by the engine as ``force_release``; a foreign file with content goes to the
    trash or quarantine, and the line says where), but a file holding unsaved editor changes
    only with ``--discard-unsaved`` (docs/engine.md, "Unsaved work").

    The refusal is worded from data, never from the engine's message: :exc:`LockLost` says
    only "not released", so the lock is looked at again (:func:`core.verdicts.inspect.inspect`) and
    the line says whether it is free or whose it is.

    ``--json`` prints the lock after the release (``status --json``'s fields: ``free``) with
    ``"released": true``, ``"displaced"`` (the status of the lock removed) and ``"kept"``
    (docs/cli.md, "Verbs").

    Returns:
        0 released, 1 not yours or not held, or unsaved changes without
        ``--discard-unsaved`` (the line names the recovery command).

    Raises:
        CliError: bad path (exit 3).
    """
    from core.engine.operations import release_path_kept
    from core.errors import LockLost, UnsavedChanges
    from core.holder import describe_holder
    from core.record import State
    from core.verdicts.inspect import inspect

    path: str = args.path
    force = bool(args.force)
    check_lock_path(path, must_be_file=True)
    policy = stale_policy(args)
    pid = releasing_pid(args, inspect(path, policy=policy))
    try:
        done = release_path_kept(path, pid=pid, force=force, reason=args.reason, policy=policy,
                                 discard_unsaved=bool(getattr(args, "discard_unsaved", False)))
    except UnsavedChanges as exc:
        from core.reasons import render

        out.note(f"not released: {path}: {render(exc.reason)} (or add --discard-unsaved to "
                 "move the file to the trash anyway)")
        return EXIT_NO
    except LockLost:
        now = inspect(path, policy=policy)
        if now.state is State.FREE:
            out.note(f"not released: {path} is not held")
        elif getattr(args, "pid", None) is not None:
            out.note(f"not released: {path} is not held by PID {pid} on this host: "
                     f"{describe_holder(now)}")
        else:
            out.note(f"not released: {path} is not held by the caller (PID {pid}) or a "
                     f"process it runs under, on this host: {describe_holder(now)}")
        return EXIT_NO
    status = done.status
    if status.state is State.FREE and not status.empty_free:
        out.note(f"not released: {path} is not held")
        return EXIT_NO
    if out.json:
        # the result, as try/acquire print theirs: the lock now (free), what was removed
        # ("displaced", as a server lock's release prints it), where a kept file went
        out.data({**inspect(path, policy=policy).to_dict(), "released": True,
                  "displaced": status.to_dict(),
                  "kept": done.kept.to_dict() if done.kept else None})
    elif status.empty_free:
        out.result(f"removed {path}: an empty lock file that nobody held or had open")
    else:
        extra = f" (was {describe_holder(status)})" if force else ""
        kept = f"; the file is in {done.kept.where()}" if done.kept else ""
        out.result(f"released {path}{extra}{kept}")
    return EXIT_OK


def cmd_reclaim(args: argparse.Namespace, out: Out) -> int:
    """``reclaim PATH [--force] [--reason T]``: break a stale lock and take it
    (:func:`core.engine.reclaiming.reclaim`, race-free: docs/DESIGN.md, "Lock operations (the
    engine)").

    A free path is simply acquired (the engine audits an ``acquire``, not a ``reclaim``); the
    CLI tells the two apart by the engine's result, :attr:`core.engine.lock.Lock.reclaimed_from`
    (the status of the lock it replaced, None when it replaced nothing), and says
    ``nothing to reclaim: PATH was free; acquired it``. ``--json`` adds ``reclaimed_from``
    (that status as ``to_dict()``, or null) to the new lock's status.

    Returns:
        0 reclaimed, or acquired because the path was free; 1 refused (the holder is alive
        and no ``--force``).

    Raises:
        CliError: bad path or unreadable lock (exit 3), ``--pid`` of no running process
            (exit 2).
    """
    from core.engine.reclaiming import reclaim
    from core.errors import LockHeld, NotStale
    from core.holder import describe_holder

    path: str = args.path
    check_lock_path(path, must_be_file=True)
    pid = checked_holder_pid(args)
    policy = writer_policy(args, path)
    try:
        lock = reclaim(path, force=bool(args.force), reason=args.reason, holder_pid=pid,
                       durable=bool(args.durable),
                       tag=args.tag, ttl=args.ttl, policy=policy)
    except (NotStale, LockHeld) as exc:
        status = exc.status
        if status is not None:
            refuse_unreadable(status)
            if out.json:
                out.data(status.to_dict())
        out.note(f"refused: {exc}")
        return EXIT_NO
    displaced = lock.reclaimed_from
    if out.json:
        from core.verdicts.inspect import inspect

        out.data({**inspect(path, policy=policy).to_dict(),
                  "reclaimed_from": displaced.to_dict() if displaced is not None else None,
                  "kept": lock.kept.to_dict() if lock.kept else None})
    elif displaced is None:
        out.result(f"nothing to reclaim: {path} was free; acquired it (pid {pid})")
    else:
        kept = f"; the file it replaced is in {lock.kept.where()}" if lock.kept else ""
        out.result(f"reclaimed {path} (pid {pid}); it was {describe_holder(displaced)}{kept}")
    _say_flock_tools_get_in(lock, path, out)
    return EXIT_OK


def writer_policy(args: argparse.Namespace, path: str) -> StalePolicy:
    """The policy of a verb that writes a lock file at ``path`` (``try``, ``acquire``,
    ``reclaim``, ``run``): :func:`core.cli.common.stale_policy` as the governing directory's
    resolver gives it to a writer (:meth:`core.config.policies.PolicyResolver.writer_policy`;
    the configuration is read even when ``--stale-after`` is given).

    Raises:
        CliError: ``--config PATH`` names no file (exit 3).
    """
    config_args = argparse.Namespace(**{**vars(args), "stale_after": None})
    return cli_policies(config_args).for_writer(path, stale_policy(args))
