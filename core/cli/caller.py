"""Who holds a lock taken from the command line (docs/cli.md, "Who holds a lock taken from the
command line"): the caller a lock records -- this command's parent, skipping programs that only
run a command and exit with it (``sudo``, ``timeout``, ``xargs``, a shell running ``-c`` with
one simple command) -- the PID ``release`` releases for, and the checks on ``--pid``.

psutil is imported inside the functions: only the verbs that take or give back a lock pay for
it (docs/cli.md, "Start-up time").
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from core.cli.common import EXIT_NO, EXIT_USAGE, CliError, Out

if TYPE_CHECKING:
    from core.reasons import Reason
    from core.record import LockStatus
    from core.stale_policy import StalePolicy

__all__ = ["INIT_PID", "SHELLS", "WRAPPERS", "caller_holds", "caller_pid", "checked_holder_pid",
           "held_by_caller", "holder_pid", "lineage", "one_command", "refuse_held_by_caller",
           "releasing_pid"]

INIT_PID = 1
"""The init process, which adopts orphans (as :data:`core.verdicts.liveness.INIT_PID`; not imported
from there: psutil is not loaded at start-up)."""

WRAPPERS = frozenset({
    "timeout", "sudo", "doas", "su", "runuser", "xargs", "time", "flock", "setsid", "nohup",
    "env", "nice", "stdbuf", "ionice", "chrt", "taskset", "setpriv",
})
"""Names (psutil ``Process.name()``) of programs that run a command and exit with it: they are
never the caller a lock records (docs/cli.md, "Who holds a lock taken from the command line").
``timeout``, ``sudo``, ``doas``, ``su``, ``runuser``, ``xargs``, ``time`` and ``flock`` fork
the command and wait for it; ``setsid`` forks when it leads a process group; the others
``exec`` it and so never appear among a command's ancestors, but a copy that did not exec
(``env`` running a shell function's subshell...) is no caller either."""

SHELLS = frozenset({"sh", "dash", "ash", "bash", "zsh", "ksh", "mksh", "posh", "yash",
                    "busybox"})
"""Names of shells: one running ``-c`` with a single simple command runs it and exits with it,
so it is a wrapper too (dash forks even its last command: ``sh -c 'lockwarden try x'``, as
Python's ``subprocess.run(..., shell=True)`` and make's recipe lines run commands)."""

_MAX_ANCESTORS = 256
"""Most ancestors walked (a cycle cannot happen, but a bound costs nothing)."""

_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "for", "while", "until", "do",
                       "done", "case", "esac", "select", "function", "{", "}", "!", "[[",
                       "coproc"})


def one_command(script: str) -> bool:
    """True when the shell text ``script`` (a ``-c`` argument) is one simple command --
    words and redirections, no ``;``, ``&``, ``&&``, ``||``, ``|``, newline, subshell,
    substitution or compound command: a shell running it exits as soon as that command does.
    Conservative: anything it cannot parse is not one command."""
    import shlex

    if "\n" in script or "`" in script or "$(" in script:
        return False
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # an unclosed quote
        return False
    if not words or words[0] in _KEYWORDS:
        return False
    return not any(w and set(w) <= set("();|&") for w in words)


def _is_wrapper(name: str, cmdline: list[str] | None) -> bool:
    """Whether a process named ``name`` with argument vector ``cmdline`` (None: unreadable)
    only runs one command and exits with it (:data:`WRAPPERS`; a shell running ``-c`` with
    :func:`one_command`)."""
    if name in WRAPPERS:
        return True
    if name not in SHELLS or not cmdline:
        return False
    if name == "busybox" and len(cmdline) > 1 and cmdline[1] in WRAPPERS:
        return True  # `busybox timeout 5 lockwarden ...`: an applet by its name
    for i, word in enumerate(cmdline[1:-1], start=1):
        if word == "-c" or (len(word) > 1 and word[0] == "-" and word[1] != "-"
                            and "c" in word[1:] and word[1:].isalpha()):
            return one_command(cmdline[i + 1])
    return False


def _parent_and_name(pid: int) -> tuple[int, str] | None:
    """``(ppid, name)`` of process ``pid`` (psutil), or None when it is gone or unreadable."""
    import psutil

    try:
        proc = psutil.Process(pid)
        return proc.ppid(), proc.name()
    except psutil.Error:
        return None


def _cmdline(pid: int) -> list[str] | None:
    """The argument vector of process ``pid`` (psutil), or None when it cannot be read."""
    import psutil

    try:
        return list(psutil.Process(pid).cmdline())
    except psutil.Error:
        return None


def caller_pid() -> int:
    """The process this command works for: its parent, skipping programs that only run a
    command and exit with it (:data:`WRAPPERS`: ``sudo``, ``timeout``, ``xargs``...; a shell
    whose ``-c`` text is that one command, :func:`one_command`), i.e. the nearest ancestor
    that is not such a wrapper -- the shell, script, ``make`` or program that ran
    ``lockwarden``. :data:`INIT_PID` when the walk reaches init (the caller is gone).

    psutil is imported here: only the verbs that take or give back a lock pay for it
    (docs/cli.md, "Start-up time")."""
    pid = os.getppid()
    for _ in range(_MAX_ANCESTORS):
        if pid <= INIT_PID:
            return INIT_PID
        info = _parent_and_name(pid)
        if info is None or not _is_wrapper(info[1], _cmdline(pid) if info[1] in SHELLS
                                           else None):
            return pid
        pid = info[0]
    return pid


def lineage() -> list[int]:
    """This process and its ancestors, nearest first, init (PID 1) and the kernel's PID 0 left
    out: the processes a lock taken from the command line may name when ``release`` runs
    (docs/cli.md, "Who holds a lock taken from the command line")."""
    out = [os.getpid()]
    pid = os.getppid()
    for _ in range(_MAX_ANCESTORS):
        if pid <= INIT_PID or pid in out:
            break
        out.append(pid)
        info = _parent_and_name(pid)
        if info is None:
            break
        pid = info[0]
    return out


def holder_pid(args: argparse.Namespace) -> int:
    """The PID a lock taken by this command records: ``--pid``, or the caller
    (:func:`caller_pid`: the parent, wrappers such as ``sudo``/``timeout``/``xargs`` skipped).

    The ``sema`` CLI records its own PID, which is dead once the command returns; recording the
    calling shell keeps the lock alive while the script that took it runs (docs/cli.md, "Who
    holds a lock taken from the command line")."""
    pid = getattr(args, "pid", None)
    return int(pid) if pid is not None else caller_pid()


def releasing_pid(args: argparse.Namespace, status: LockStatus) -> int:
    """The holder PID ``release`` releases for: ``--pid``; else the PID the lock at hand
    (``status``, judged just before) records when that process is this one or one of its
    ancestors (:func:`lineage`) -- the same process, its start time checked as liveness checks
    it (:func:`core.verdicts.liveness.check`: not a reused PID), on this host; else the caller
    (:func:`caller_pid`), for which the engine will refuse.

    Why ancestors: a shell that took a lock may ``exec`` its last command (``bash -c 'try &&
    make && release'``), so ``release`` runs *as* the holder; a script the holder runs acts
    for it (docs/cli.md, "Who holds a lock taken from the command line"). A sibling -- another
    shell whose ancestry does not include the holder -- is still refused."""
    pid = getattr(args, "pid", None)
    if pid is not None:
        return int(pid)
    rec = status.record
    if rec is not None and rec.pid is not None and rec.pid > INIT_PID \
            and rec.pid in lineage():
        from core.record import Liveness
        from core.verdicts.liveness import check, same_host

        if (rec.host is None or same_host(rec.host)) \
                and check(rec)[0] is Liveness.ALIVE:
            return rec.pid
    return caller_pid()


def checked_holder_pid(args: argparse.Namespace) -> int:
    """:func:`holder_pid`, refusing a ``--pid`` that names no running process (a lock recorded
    for it would be stale at once), and refusing to record init (PID 1) when the calling shell
    is gone (docs/cli.md, "Who holds a lock taken from the command line").

    Raises:
        CliError: ``--pid N`` names no running process, or the caller is init (exit
            :data:`EXIT_USAGE`).
    """
    pid = holder_pid(args)
    if getattr(args, "pid", None) is not None:
        from core.verdicts.liveness import process_start_time

        if process_start_time(pid) is None:
            raise CliError(f"--pid {pid}: no such process", EXIT_USAGE)
    elif pid == INIT_PID:
        # the calling shell is gone and init adopted us: a lock naming init proves nothing
        # (core.verdicts.liveness judges such a lock by its TTL and age only), so none is written
        raise CliError("the calling process is gone (this command's parent is init, PID 1, "
                       "once wrappers such as sudo or timeout are skipped): no holder to "
                       "record; pass --pid N, or hold the lock with 'lockwarden run'",
                       EXIT_USAGE)
    return pid



def held_by_caller(status: LockStatus, pid: int, path: str | None = None) -> Reason | None:
    """A ``held_by_caller`` reason (:class:`core.codes.Code`, docs/verdicts.md) when the lock
    ``status`` judges is held by ``pid`` -- the holder ``try``/``acquire``/``wait`` would
    record (:func:`holder_pid`) -- itself: the same PID, alive with the start time the lock
    recorded (:func:`core.verdicts.liveness.check`: not a reused PID), on this host. Such a
    lock frees only when that caller releases it, which it cannot do while it waits for this
    command, so waiting would never end (docs/cli.md, "Who holds a lock taken from the command
    line"). None otherwise (also for init, PID 1: no caller).

    Parameters: ``pid``, ``name`` (its process name, psutil, or None), ``shell`` (the name is
    one of :data:`SHELLS`), ``since`` (ISO 8601 UTC, when the lock was taken), ``path``
    (``path`` as the user wrote it, else the status's)."""
    from core.record import Liveness, State

    rec = status.record
    if (status.state not in (State.HELD, State.EXPIRED) or rec is None or rec.pid != pid
            or pid <= INIT_PID):
        return None
    from core.verdicts.liveness import check, same_host

    if (rec.host is not None and not same_host(rec.host)) \
            or check(rec)[0] is not Liveness.ALIVE:
        return None
    from core.codes import Code
    from core.reasons import Reason

    info = _parent_and_name(pid)
    name = info[1] if info is not None else None
    since = rec.acquired_at.isoformat(timespec="seconds") if rec.acquired_at else None
    return Reason.of(Code.HELD_BY_CALLER, pid=pid, name=name, shell=name in SHELLS,
                     since=since, path=path if path is not None else status.path)


def caller_holds(path: str, policy: StalePolicy,
                 pid: int | None = None) -> tuple[LockStatus, Reason] | None:
    """The lock at ``path`` judged under ``policy`` and its :func:`held_by_caller` reason when
    ``pid`` (default: this command's caller, :func:`caller_pid`) holds it itself -- looked at
    before waiting for it, which would never end; None otherwise. psutil is asked only for a
    lock that names a process."""
    from core.verdicts.inspect import inspect

    now = inspect(path, policy=policy)
    if now.record is None or not now.record.pid:
        return None
    own = held_by_caller(now, caller_pid() if pid is None else pid, path)
    return None if own is None else (now, own)


def refuse_held_by_caller(status: LockStatus, own: Reason, path: str, out: Out, *,
                          verb: str = "", after: str = "") -> int:
    """Exit 1 (:data:`~core.cli.common.EXIT_NO`) for a lock its own caller holds (``own``: the
    :func:`held_by_caller` reason; docs/cli.md, "Who holds a lock taken from the command
    line"): with ``--json`` the status on stdout; the reason rendered on stderr, led by
    ``verb`` (``"run: "``) and followed by ``after`` (``"; command not run"``)."""
    from core.reasons import render

    if out.json:
        out.data(status.to_dict())
    out.note(f"{verb}{path}: {render(own)}{after}")
    return EXIT_NO
