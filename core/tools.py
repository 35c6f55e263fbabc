"""The safe action on a lock, in words (:func:`safe_action`), for the CLI's ``status`` and the
GUI's detail pane. The tool and the kind are data on the verdict
(:attr:`core.record.LockStatus.tool`, :attr:`~core.record.LockStatus.kind`), decided from the
record's format and the reason codes, never from text.

Rules: a *marker* lock's file is the lock, and a dead holder's marker is removed to release it;
a *kernel* lock's file is only its anchor, never stale, never deleted (its holder process can
be ended instead; a known tool's free anchor needs nothing); an empty file no kernel lock holds
and no process has open is free: leave it. docs/specs/devtool-locks.md, "The one rule that
decides everything"; docs/DESIGN.md, "Two kinds of locks"; docs/verdicts.md, "Developer tools'
locks (``core.verdicts.devtools``)" and "Empty files".
"""

from __future__ import annotations

from core.codes import Code
from core.reasons import render
from core.record import Liveness, LockStatus, State

_SAFE: tuple[tuple[Code, str], ...] = (
    (Code.KERNEL_LOCK_HELD, "leave it: the kernel holds it while its process lives; if that "
                            "process hangs, end it (deleting the file would not release it)"),
    (Code.KERNEL_ANCHOR_FREE, "none: only the kernel knows; never delete (the file is the "
                              "tool's anchor, and no process holds it now)"),
    (Code.KERNEL_ANCHOR_UNCHECKED, "none: only the kernel knows; never delete (the file is the "
                                   "tool's anchor)"),
    (Code.SWAP_RECOVER, "recover the unsaved changes with 'vim -r', then delete the swap file"),
    (Code.GIT_REMOVE_LOCK, "remove the file, as git's own message says"),
    (Code.NO_KERNEL_LOCK, "delete the leftover label: no process holds the state lock"),
    (Code.EMPTY_FREE, "leave it: nobody holds it, and the program that locks this path "
                      "will use it again (remove it only if no program uses the path any more)"),
    (Code.EMPTY_OPEN, "wait: a process has it open, to write it or to lock it"),
    (Code.EMPTY_UNCHECKED, "leave it: a kernel lock may hold it, and only the kernel knows"),
    (Code.KERNEL_TABLE_TOO_LARGE, "leave it: a kernel lock may hold it, unseen among too many "
                                  "locks; it is judged again at the next look"),
)


_SERVER_KINDS: dict[Code, str] = {
    Code.TERMINATES_SESSION: "PostgreSQL advisory lock: held by a database session, gone when "
                             "that session ends",
    Code.RESETS_ROW: "lock row in a database table (Liquibase): held until the row is reset",
    Code.DELETES_KEY: "Redis key: the key is the lock, gone when it is deleted or its TTL ends",
    Code.REVOKES_LEASE: "etcd key on a lease: gone when the lease is revoked or lapses",
}
_FILE_KINDS: dict[str, str] = {
    "kernel": "kernel lock (only the kernel knows; the file is an anchor)",
    "marker": "marker (the file is the lock)",
}


def kind_words(status: LockStatus) -> str:
    """What kind of lock this is, in words, from :attr:`~core.record.LockStatus.kind` and, for
    a lock on a server, the code of its :attr:`~core.record.LockRecord.removal`: "marker (the
    file is the lock)", "Redis key: the key is the lock, ...", ""."""
    rec = status.record
    if status.kind == "server" and rec is not None:
        return _SERVER_KINDS.get(rec.removal[0].code, "lock on a server")
    return _FILE_KINDS.get(status.kind, "")


def removal_words(status: LockStatus) -> str:
    """What releasing this lock does on its server, in words (each reason of
    :attr:`~core.record.LockRecord.removal` rendered by :func:`core.reasons.render`, joined
    with " and "): "terminate PostgreSQL session PID 4242 of user 'app' (...)"; "" for a lock
    file (docs/remote.md, "What a release does")."""
    rec = status.record
    if rec is None or not rec.removal:
        return ""
    return " and ".join(render(r) for r in rec.removal)


def force_words(status: LockStatus) -> str:
    """What a forced release of this lock would do, in words, for the detail pane: on a server
    :func:`removal_words`; for a file, whether it is removed (a lock Lockwarden wrote, an empty
    file, holding its flock) or moved to the desktop trash where Undo finds it (anything else
    with content: docs/engine.md, "Nothing is simply unlinked"); "" where no forced release is
    offered (nothing there, a kernel lock, a read-only lock)."""
    if status.kind == "server":
        return removal_words(status)
    if status.empty_free:
        return "removes the empty file, holding its flock (refused if a process has it open)"
    rec = status.record
    if rec is None or status.read_only or status.kind == "kernel":
        return ""
    if rec.written_by_lockwarden:
        return "removes the lock file (written by Lockwarden)"
    return ("moves the file to the desktop trash (or Lockwarden's quarantine folder), where "
            "Undo finds it")


def safe_action(status: LockStatus) -> str:
    """What to do with this lock, in words: the tool's own safe action when a reason names one,
    else by state (reclaim or release a stale lock, wait for a held one -- saying whether its
    holder is alive or cannot be checked from here, and what ends it then)."""
    codes = {r.code for r in status.reasons}
    for code, words in _SAFE:
        if code in codes:
            return words
    if status.read_only:
        return "nothing: only its tool changes it"
    report = next((r for r in status.reasons if r.code is Code.FLEET_REPORT), None)
    if report is not None and (status.state is State.STALE or status.liveness in (
            Liveness.DEAD, Liveness.REUSED)):  # another host's word alone
        return (f"confirm on host {report.get('host')} first (lockwarden status there): this "
                "verdict rests on that host's report alone; a forced release from here only "
                "once that host agrees")
    if status.state is State.STALE:
        if status.kind == "server":
            return f"release it (that will {removal_words(status)})"
        rec = status.record
        reclaimable = rec is None or rec.format in ("sema", "task-mcp", "af-ledger", "pidfile")
        return "reclaim it, or release it" if reclaimable else "release it (delete the file)"
    if status.state is State.EXPIRED:
        return "wait, or force it with a reason: its holder still runs"
    if status.state is State.HELD:
        if status.liveness in (Liveness.DEAD, Liveness.REUSED):
            return ("its holder is gone: it becomes stale after the stale limit; release it "
                    "now (force, with a reason) only if you know its tool is done with it")
        if status.liveness is Liveness.ALIVE:
            return "wait: its holder is alive"
        who = ("its holder is on another host" if status.liveness is Liveness.REMOTE
               else "its holder cannot be checked from here")
        if Code.EXPIRES_IN in codes:
            return f"wait: {who}; its lease ends by itself unless the holder renews it"
        if Code.AGE_UNKNOWN in codes:
            return (f"wait: {who} and its age is unknown, so it never turns stale; release it "
                    "(force, with a reason) only if you know its holder is done")
        return f"wait: {who}; it turns stale once older than the stale limit"
    if status.state is State.WRITING:
        return "wait: it is being written"
    if status.state is State.UNREADABLE:
        return "look at it: Lockwarden never deletes a file it cannot read as a lock"
    return ""
