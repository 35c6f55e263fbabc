"""What force may remove or replace, and the refusals of everything else (docs/engine.md,
"What force may remove", "af claims", "Unsaved work"; docs/specs/devtool-locks.md §0): a file no
lock format reads, a file a kernel lock holds (or may hold unseen), a known tool's kernel-lock
anchor, a claim in an af ledger, a developer tool's lock (never reclaimed) and a person's
unsaved work. Each refusal raises before anything is changed; the audited ones write one
``*_refused`` entry."""

from __future__ import annotations

from core.codes import ReadOnlyKind
from core.engine.audited import holder_summary, record_audit
from core.errors import ReadOnlyLock, UnsavedChanges
from core.reasons import render, render_all
from core.record import DEVTOOL_FORMATS, LockStatus, State
from core.verdicts.inspect import kernel_status
from core.verdicts.unsaved import unsaved_changes


def is_a_lock(status: LockStatus) -> bool:
    """True when ``status`` is a verdict on something a forced operation may remove or
    replace: a file some lock format reads (any :class:`~core.record.LockRecord`), or an empty
    regular file (lock files of flock(1), dpkg and many tools are empty; an empty file is also
    what a writer that crashed before writing leaves), also one judged ``free`` because nobody
    holds it or has it open (``empty_free``). False for anything else: a file no format reads
    (a text file, a binary, one over 64 KiB). Free paths are not locks either.
    docs/engine.md, "What force may remove"."""
    if status.record is not None or status.empty_free:
        return True
    return status.state is not State.FREE and status.file is not None and status.file.size == 0


def refuse_not_a_lock(path: str, status: LockStatus, operation: str) -> None:
    """Refuse to force ``operation`` (``"release"``/``"reclaim"``) on what is not a lock
    (:func:`is_a_lock`), on a file a kernel lock holds (:attr:`LockStatus.kernel_held`) or may
    hold unseen (``kernel_table_too_large``: docs/verdicts.md, "When the kernel's lock table is
    too large"), or on a known tool's kernel-lock anchor held or not
    (:attr:`LockStatus.anchor_tool`: dpkg, apt, cargo, uv, Gradle; docs/specs/devtool-locks.md
    §0); nothing is changed and nothing audited.

    Raises:
        ReadOnlyLock: ``kind`` :attr:`~core.codes.ReadOnlyKind.NOT_A_LOCK` or
            ``KERNEL_LOCK``, ``status``.
    """
    kernel = status if status.kernel_held else kernel_status(path, policy=status.policy)
    if kernel is not None and not pinned_by_its_holder(status):
        if not kernel.kernel_held:  # kernel_table_too_large: a lock may hold it, unseen
            raise ReadOnlyLock(f"{path}: {render_all(kernel.reasons)}; Lockwarden never forces "
                               f"a {operation} of it while it cannot tell; nothing was changed",
                               kind=ReadOnlyKind.KERNEL_LOCK, status=kernel)
        pid = kernel.kernel_pid
        who = f"PID {pid}" if pid is not None else "a process"
        raise ReadOnlyLock(
            f"{path}: {who} holds a kernel lock on it; deleting the file would not release it "
            f"and would let a second holder in, so Lockwarden never forces a {operation} of it "
            f"(end {who} if it hangs{f': kill {pid}' if pid is not None else ''}); nothing was "
            "changed", kind=ReadOnlyKind.KERNEL_LOCK, status=kernel)
    if status.anchor_tool:
        raise ReadOnlyLock(f"{path}: {anchor_why(status)}, so Lockwarden never forces a "
                           f"{operation} of it; nothing was changed",
                           kind=ReadOnlyKind.KERNEL_LOCK, status=status)
    if status.state is State.FREE or is_a_lock(status):
        return
    why = render_all(status.reasons) or "no lock format reads it"
    raise ReadOnlyLock(f"{path}: not a lock file ({why}); Lockwarden never forces a {operation} "
                       "of a file it cannot read as a lock, nothing was changed",
                       kind=ReadOnlyKind.NOT_A_LOCK, status=status)


def pinned_by_its_holder(status: LockStatus) -> bool:
    """True for a Lockwarden lock (:attr:`core.record.LockRecord.written_by_lockwarden`): a
    kernel lock on it is its holder's pin (:mod:`core.kernel.pin`), evidence of life only;
    removing the file breaks no mutual exclusion, so force may remove it."""
    return status.record is not None and status.record.written_by_lockwarden


def refuse_read_only(path: str, status: LockStatus) -> None:
    """Refuse to reclaim a lock Lockwarden must not replace: a known tool's kernel-lock anchor
    (:attr:`LockStatus.anchor_tool`, kind ``kernel_lock``), a claim replayed from an af
    ledger (``read_only``), an af claim file or a developer tool's lock (git, Vim, Emacs,
    LibreOffice, Terraform, SoftFileLock: :data:`core.record.DEVTOOL_FORMATS`) -- a reclaim
    would put a lock of another format where the tool expects its own (docs/engine.md, "af
    claims"; docs/specs/devtool-locks.md); they can still be released. Audited as
    ``reclaim_refused``.

    Raises:
        ReadOnlyLock: ``kind`` ``kernel_lock``, ``ledger_claim`` or ``not_writable``,
            ``status``.
    """
    rec = status.record
    if status.anchor_tool:
        kind, why = ReadOnlyKind.KERNEL_LOCK, anchor_why(status)
    elif status.read_only:
        kind, why = ReadOnlyKind.LEDGER_CLAIM, ledger_why(status)
    elif rec is not None and rec.format == "af-claim":
        kind, why = ReadOnlyKind.NOT_WRITABLE, ("it is an af claim; Lockwarden does not write "
                                                "af claims (force-release it instead)")
    elif rec is not None and rec.format in DEVTOOL_FORMATS:
        kind, why = ReadOnlyKind.NOT_WRITABLE, (
            f"it is a {rec.format} lock; its tool would take a Lockwarden lock in its place for "
            "its own and wait for ever (release it instead: the tool's own safe action)")
    else:
        return
    record_audit(path, "reclaim_refused", result="refused", details={
        "holder": holder_summary(status), "reason": why}, format=rec.format if rec else None)
    raise ReadOnlyLock(f"not reclaimed: {path}: {why}", kind=kind, status=status)


def ledger_why(status: LockStatus) -> str:
    """Why a claim replayed from an af ledger is never changed, with af's own command."""
    node = status.path.rpartition("#")[2] or "NODE"
    return f"it is a claim in an af ledger; only af changes its ledger: `af release {node}`"


def refuse_ledger_claim(path: str, status: LockStatus) -> None:
    """Refuse to release a claim replayed from an af ledger (``"<proof>/ledger#<node>"``,
    :attr:`LockStatus.read_only`; docs/engine.md, "af claims"): there is no file to remove and
    only af changes its ledger. Audited as ``release_refused`` with result ``refused``.

    Raises:
        ReadOnlyLock: ``kind`` :attr:`~core.codes.ReadOnlyKind.LEDGER_CLAIM`, ``status``.
    """
    if not status.read_only or status.anchor_tool or status.record is None:
        return
    why = ledger_why(status)
    record_audit(path, "release_refused", result="refused", details={
        "holder": holder_summary(status), "reason": why}, format=status.record.format)
    raise ReadOnlyLock(f"not released: {path}: {why}", kind=ReadOnlyKind.LEDGER_CLAIM,
                       status=status)


def refuse_unsaved(path: str, status: LockStatus, operation: str, discard: bool) -> None:
    """Refuse to force ``operation`` (``"release"``) on a file that stands for a person's
    unsaved work (:func:`core.verdicts.unsaved.unsaved_changes`: a Vim swap with unsaved
    changes, an Emacs lock with an auto-save file) unless ``discard``; audited as
    ``<operation>_refused`` (result ``refused``) naming the changes and the recovery command
    (docs/engine.md, "Unsaved work").

    Raises:
        UnsavedChanges: ``reason`` the ``unsaved_changes`` reason, ``status``.
    """
    why = None if discard else unsaved_changes(status)
    if why is None:
        return
    record_audit(path, f"{operation}_refused", result="refused", details={
        "holder": holder_summary(status), "reason": render(why), "unsaved": why.to_dict()},
        format=status.record.format if status.record else None)
    raise UnsavedChanges(f"not {operation}d: {path}: {render(why)}; nothing was changed",
                         reason=why, status=status)


def anchor_why(status: LockStatus) -> str:
    """Why a kernel-lock anchor is never deleted nor replaced, in words."""
    held = "held now" if status.state is State.HELD else "not held now"
    return (f"it is {status.anchor_tool}'s kernel-lock anchor ({held}; only the kernel knows): "
            "deleting or replacing it would let a second holder in")


__all__ = ["anchor_why", "is_a_lock", "ledger_why", "pinned_by_its_holder", "refuse_ledger_claim",
           "refuse_not_a_lock", "refuse_read_only", "refuse_unsaved"]
