"""The safe action on a lock, in words (docs/specs/devtool-locks.md, "Two kinds";
docs/formats.md), for the CLI's ``status`` and the GUI's detail pane. The tool and the kind are
data on the verdict (:attr:`core.record.LockStatus.tool`, :attr:`~core.record.LockStatus.kind`),
decided from the record's format and the reason codes, never from text.

- **marker** locks: the file's existence is the lock (sema, Task MCP, af, pidfiles, git, Vim,
  Emacs, LibreOffice, Terraform's label, filelock's SoftFileLock); a dead holder's marker is
  removed to release it.
- **kernel** locks: only the kernel knows (flock, POSIX ``fcntl``, OFD locks); the file is an
  anchor, and deleting it would let a second holder in. Never stale, never deleted; the holder
  process can be ended instead. A known tool's anchor (dpkg, apt, cargo, uv, Gradle:
  :func:`core.kernel.anchors.anchor_tool`) that nobody holds is ``free``, and its safe action is
  none.
- an **empty file** that no kernel lock holds and no process has open (what filelock,
  portalocker, fasteners and ``flock(1)`` leave when they release) is ``free``: leave it
  (docs/DESIGN.md, "Two kinds of locks").
"""

from __future__ import annotations

from core.reasons import Code
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
)


def safe_action(status: LockStatus) -> str:
    """What to do with this lock, in words: the tool's own safe action when a reason names one,
    else by state (reclaim or release a stale lock, wait for a held one...)."""
    codes = {r.code for r in status.reasons}
    for code, words in _SAFE:
        if code in codes:
            return words
    if status.read_only:
        return "nothing: only its tool changes it"
    if status.state is State.STALE:
        rec = status.record
        reclaimable = rec is None or rec.format in ("sema", "task-mcp", "af-ledger", "pidfile")
        return "reclaim it, or release it" if reclaimable else "release it (delete the file)"
    if status.state is State.EXPIRED:
        return "wait, or force it with a reason: its holder still runs"
    if status.state is State.HELD:
        if status.liveness in (Liveness.DEAD, Liveness.REUSED):
            return ("its holder is gone: it becomes stale after the stale limit; release it "
                    "now (force, with a reason) only if you know its tool is done with it")
        return "wait: its holder is alive"
    if status.state is State.WRITING:
        return "wait: it is being written"
    if status.state is State.UNREADABLE:
        return "look at it: Lockwarden never deletes a file it cannot read as a lock"
    return ""
