"""The one gate (docs/engine.md, "The gate"; docs/DESIGN.md, "Lock operations"): every
operation that creates over, replaces, moves or removes a file at a lock's path asks
:func:`ask` what it may do with what is there now, and gets one :class:`Answer` -- an act
and its reasons as data (:class:`core.reasons.Reason`, rendered only by
:mod:`core.reasons`).

The rules live here and nowhere else:

- a claim in an af ledger is af's: never changed (``ledger_claim``);
- a known tool's kernel-lock anchor (dpkg, apt, cargo...) and a file a kernel lock holds (but
  a Lockwarden holder's own pin) are never removed nor replaced (``kernel_anchor``,
  ``kernel_held``); while the kernel's lock table cannot be read in full, neither
  (``kernel_unknown``);
- a file that stands for a person's unsaved work (a Vim swap with unsaved changes, an Emacs
  lock with an auto-save file: :func:`core.verdicts.unsaved.unsaved_changes`) is never taken
  over nor removed unless the caller discards that work by name (``discard_unsaved``: the
  CLI's ``--discard-unsaved``, the app's confirmation);
- a file no lock format reads (a text file, a binary, over 64 KiB) is not a lock
  (``not_a_lock``), and what is no regular file at all is refused as unreadable;
- a lock only its own tool writes -- an af claim, a developer tool's lock -- is never
  replaced by one of Lockwarden's (``af_claim_not_written``, ``tool_lock_kept``); it may be
  removed;
- an empty file is taken over or removed holding its kernel locks, following the protocol of
  the tools that lock such files (:mod:`core.engine.unheld`), and a lock that replaced one
  puts it back, empty, with its mode and time, when it is released (``empty_put_back``,
  ``emptied_on_release``; :class:`EmptyFile`);
- a forced removal keeps a foreign file with content (trash or quarantine), never simply
  unlinks it (:func:`must_keep`).

Callers: :mod:`core.engine.publish` (acquire, try, wait, run, ``Lock.acquire``, the app's
Acquire), :class:`core.engine.lock.Lock` (reclaim, release), :mod:`core.engine.operations`
(force release, release on behalf of a PID), :mod:`core.engine.trash` (the app's Undo),
:mod:`core.engine.cleanup` (``lockwarden clean``). Each asks again under the directory guard on
the bytes it is about to act on. :func:`listening` lets a test see every question asked.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, NoReturn

from core.codes import Code, ReadOnlyKind, UnreadableKind
from core.engine.audited import holder_summary, record_audit
from core.errors import LockError, LockHeld, ReadOnlyLock, UnreadableError, UnsavedChanges
from core.fsutil import unreadable_kind
from core.reasons import Reason, render, render_all
from core.record import DEVTOOL_FORMATS, LockRecord, LockStatus, State
from core.verdicts.inspect import kernel_status
from core.verdicts.unsaved import unsaved_changes

__all__ = ["Act", "Answer", "EmptyFile", "Intent", "Refusal", "ask", "ask_clean",
           "emptied_of", "listening", "must_keep", "pinned_by_its_holder", "refuse",
           "virtual"]


class Intent(enum.StrEnum):
    """What an operation means to do at a lock's path."""

    ACQUIRE = "acquire"
    """``try``, ``acquire``, ``run``, ``Lock.acquire``, the app's Acquire: publish where
    nothing is, replace only a stale lock or an empty file nobody holds or has open."""
    RECLAIM = "reclaim"
    """``reclaim``: replace the lock the reclaim judge lets go (stale; Task MCP's matrix)."""
    FORCE_RECLAIM = "force_reclaim"
    """``reclaim --force``: replace whatever lock is there."""
    FORCE_RELEASE = "force_release"
    """``release --force``, ``force_release``, the app's Force release / Remove: remove
    whatever lock is there."""
    RELEASE = "release"
    """A holder giving back its own lock (``Lock.release``, ``release PATH``, ``run``): the
    caller proves it is ours; the gate says how it goes."""
    REFRESH = "refresh"
    """A holder renewing its own lock (``Lock.refresh``): the new file replaces ours, still
    recording the empty file the lock replaced."""
    RESTORE = "restore"
    """The app's Undo: put a kept file back where nothing is now."""
    CLEAN = "clean"
    """``lockwarden clean``: remove a temp file the engine left behind."""


TAKERS = frozenset({Intent.ACQUIRE, Intent.RECLAIM, Intent.FORCE_RECLAIM})
"""Intents that put a lock of Lockwarden's at the path."""


class Act(enum.StrEnum):
    """What the gate lets an operation do with what is at the path."""

    PUBLISH = "publish"
    """Nothing is there: link ours in (``link`` never replaces anything)."""
    TAKE_OVER = "take_over"
    """Replace what is there by ours, under the directory guard (exchange)."""
    REMOVE = "remove"
    """Move it out and unlink it -- or keep it in the trash (:attr:`Answer.keep`)."""
    EMPTY_IT = "empty_it"
    """A lock of ours that replaced an empty file: release it by emptying it in place, with
    the mode and time of the file it replaced (:attr:`Answer.emptied`)."""
    NOTHING = "nothing"
    """Nothing is there to remove."""
    WAIT = "wait"
    """Not now: it is held (an acquire waits or says held; a reclaim refuses: not stale)."""
    REFUSE = "refuse"
    """Never, whatever waiting does: :func:`refuse` raises the matching error."""


class Refusal(enum.StrEnum):
    """Which error a refusal raises (:meth:`Answer.error`)."""

    READ_ONLY = "read_only"  # ReadOnlyLock, with Answer.kind
    UNSAVED = "unsaved"  # UnsavedChanges
    UNREADABLE = "unreadable"  # UnreadableError, with Answer.unreadable
    HELD = "held"  # LockHeld


class EmptyFile(NamedTuple):
    """The empty file a lock replaced, as its release puts it back: permission bits, owner,
    group and modification time (ns). Written into the lock as ``emptied=MODE UID GID NS``
    (sema; a top-level ``"emptied"`` key in JSON formats), which other tools ignore."""

    mode: int
    uid: int
    gid: int
    mtime_ns: int

    def text(self) -> str:
        """``"0644 1000 1000 1700000000000000000"``: the value written into the lock."""
        return f"{self.mode:04o} {self.uid} {self.gid} {self.mtime_ns}"

    @classmethod
    def parse(cls, text: object) -> EmptyFile | None:
        """The value :meth:`text` wrote, or ``None`` for anything else."""
        if not isinstance(text, str):
            return None
        parts = text.split()
        if len(parts) != 4:
            return None
        try:
            mode = int(parts[0], 8)
            uid, gid, ns = int(parts[1]), int(parts[2]), int(parts[3])
        except ValueError:
            return None
        if not (0 <= mode <= 0o7777 and uid >= 0 and gid >= 0 and ns >= 0):
            return None
        return cls(mode, uid, gid, ns)

    @classmethod
    def of(cls, st: os.stat_result) -> EmptyFile:
        """The empty file ``st`` (an ``lstat``/``fstat`` result) describes."""
        return cls(st.st_mode & 0o7777, st.st_uid, st.st_gid, st.st_mtime_ns)


def emptied_of(record: LockRecord | None) -> EmptyFile | None:
    """The empty file a Lockwarden lock replaced (``emptied=`` in it), or ``None``."""
    if record is None or not record.written_by_lockwarden:
        return None
    found = EmptyFile.parse(record.metadata.get("emptied"))
    if found is None and record.raw.lstrip().startswith("{"):  # task-mcp keeps it top-level
        with contextlib.suppress(ValueError):
            obj = json.loads(record.raw)
            if isinstance(obj, dict):
                found = EmptyFile.parse(obj.get("emptied"))
    return found


@dataclass(frozen=True)
class Answer:
    """The gate's answer.

    Attributes:
        act: what the operation may do (:class:`Act`).
        reasons: why, as data (rendered by :func:`core.reasons.render`).
        refusal: for :attr:`Act.REFUSE`, which error (:class:`Refusal`).
        kind: for a read-only refusal, the :class:`~core.codes.ReadOnlyKind`.
        unreadable: for an unreadable refusal, the :class:`~core.codes.UnreadableKind`.
        audited: a refusal the audit log records (``*_refused``).
        empty: the file is empty: it goes holding its kernel locks (:mod:`core.engine.unheld`).
        emptied: the empty file a new lock must put back on release (take-over), or that a
            release must leave in place of our lock (:attr:`Act.EMPTY_IT`).
        keep: a removal must keep the file (trash or quarantine): foreign content.
        status: the verdict the answer was made on (for a kernel lock: the kernel's).
    """

    act: Act
    reasons: tuple[Reason, ...] = ()
    refusal: Refusal | None = None
    kind: ReadOnlyKind | None = None
    unreadable: UnreadableKind | None = None
    audited: bool = False
    empty: bool = False
    emptied: EmptyFile | None = None
    keep: bool = False
    status: LockStatus | None = None

    @property
    def allowed(self) -> bool:
        """True when the operation may change the path now (publish, take over, remove,
        empty in place)."""
        return self.act in (Act.PUBLISH, Act.TAKE_OVER, Act.REMOVE, Act.EMPTY_IT)

    def words(self) -> str:
        """The reasons in words (:func:`core.reasons.render_all`)."""
        return render_all(self.reasons)

    def error(self, path: str, verb: str) -> LockError:
        """The error of a refusal: ``not VERB: PATH: reasons; nothing was changed``
        (``verb``: ``"released"``, ``"reclaimed"``, ``"acquired"``, ``"removed"``,
        ``"restored"``)."""
        if self.refusal is Refusal.UNREADABLE:
            detail = (self.status.error if self.status is not None else None) or self.words()
            return UnreadableError(detail or "cannot be read as a lock", path=path,
                                   kind=self.unreadable or UnreadableKind.PARSE)
        text = f"not {verb}: {path}: {self.words()}; nothing was changed"
        if self.refusal is Refusal.UNSAVED:
            assert self.status is not None
            return UnsavedChanges(text, reason=self.reasons[0], status=self.status)
        if self.refusal is Refusal.HELD:
            return LockHeld(text, self.status)
        return ReadOnlyLock(text, kind=self.kind or ReadOnlyKind.NOT_A_LOCK, status=self.status)


Listener = Callable[[str, Intent, LockStatus, Answer], None]
_listeners: list[Listener] = []
_listeners_lock = threading.Lock()


@contextlib.contextmanager
def listening() -> Iterator[list[tuple[str, Intent, Answer]]]:
    """Collect every question the gate answers meanwhile, in this process: ``(path, intent,
    answer)`` (tests prove with it that an entry point asked; docs/engine.md, "The gate")."""
    seen: list[tuple[str, Intent, Answer]] = []

    def note(path: str, intent: Intent, status: LockStatus, answer: Answer) -> None:
        seen.append((path, intent, answer))

    with _listeners_lock:
        _listeners.append(note)
    try:
        yield seen
    finally:
        with _listeners_lock:
            _listeners.remove(note)


def _told(path: str, intent: Intent, status: LockStatus, answer: Answer) -> Answer:
    for listener in list(_listeners):
        listener(path, intent, status, answer)
    return answer


def virtual(path: str) -> bool:
    """True for a path the engine judges with no file of its own: a claim replayed from an af
    ledger, ``"<proof>/ledger#<node>"`` where ``<proof>/ledger`` is a directory
    (:func:`core.verdicts.inspect.inspect`). An acquire asks the gate before publishing there:
    a file of that name would be taken for the claim."""
    head, sep, node = path.rpartition("#")
    return (bool(sep and node and head) and os.path.basename(head) not in ("", ".", "..")
            and os.sep not in node and os.path.isdir(head))


def pinned_by_its_holder(status: LockStatus) -> bool:
    """True for a Lockwarden lock (:attr:`core.record.LockRecord.written_by_lockwarden`): a
    kernel lock on it is its holder's pin (:mod:`core.kernel.pin`), evidence of life only;
    removing the file breaks no mutual exclusion."""
    return status.record is not None and status.record.written_by_lockwarden


def must_keep(data: bytes, record_written_by_us: bool) -> bool:
    """True when removed bytes must be kept rather than unlinked: a file with content that
    Lockwarden did not write (an empty file, or a lock with our ``token`` and ``host``, may
    be unlinked: docs/engine.md, "Nothing is simply unlinked")."""
    return bool(data) and not record_written_by_us


def _refused(kind: ReadOnlyKind, *reasons: Reason, status: LockStatus,
             audited: bool = False) -> Answer:
    return Answer(Act.REFUSE, reasons, Refusal.READ_ONLY, kind=kind, audited=audited,
                  status=status)


def _empty_stat(path: str) -> EmptyFile | None:
    """The empty file at ``path`` as a lock replacing it records it (``None``: gone)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return EmptyFile.of(st)


def ask(path: str, status: LockStatus, intent: Intent, *, discard_unsaved: bool = False,
        judge: Callable[[LockStatus], bool] | None = None,
        kernel: bool = True) -> Answer:
    """What ``intent`` may do with what ``status`` (the verdict on ``path`` now) says is
    there; see the module docstring for the rules. ``discard_unsaved``: the caller discards
    unsaved work by name (a forced release only). ``judge``: for :attr:`Intent.RECLAIM`,
    whether the lock may be broken (:class:`core.engine.operations.ReclaimJudge`).
    ``kernel``: also ask the kernel whether a lock holds the file (one read of
    ``/proc/locks``) before allowing a change; callers that just asked pass ``False``.
    Never raises; every answer is told to :func:`listening`'s collectors."""
    return _told(path, intent, status, _rules(path, status, intent, discard_unsaved, judge,
                                               kernel))


def _rules(path: str, status: LockStatus, intent: Intent, discard_unsaved: bool,
           judge: Callable[[LockStatus], bool] | None, kernel: bool) -> Answer:
    rec = status.record
    if status.read_only and not status.anchor_tool and rec is not None:
        node = status.path.rpartition("#")[2] or None
        return _refused(ReadOnlyKind.LEDGER_CLAIM, Reason.of(Code.LEDGER_CLAIM, node=node),
                        status=status, audited=True)
    if intent is Intent.REFRESH:  # our own lock, which the caller checks under the guard
        return Answer(Act.TAKE_OVER, emptied=emptied_of(rec), status=status)
    if intent is Intent.RESTORE:
        if status.present:
            return Answer(Act.REFUSE, (Reason.of(Code.PATH_TAKEN),), Refusal.HELD,
                          status=status)
        return Answer(Act.PUBLISH, status=status)
    if not status.present:
        return Answer(Act.PUBLISH if intent in TAKERS else Act.NOTHING, status.reasons,
                      status=status)
    ukind = unreadable_kind(status) if status.state is State.UNREADABLE else None
    if rec is None and ukind is not None and (ukind.not_a_file
                                              or ukind is UnreadableKind.ENGINE_FILE):
        return Answer(Act.REFUSE, status.reasons, Refusal.UNREADABLE, unreadable=ukind,
                      status=status)
    if status.anchor_tool:
        if intent is Intent.ACQUIRE and status.state is State.HELD:
            return Answer(Act.WAIT, status.reasons, status=status)
        return _refused(ReadOnlyKind.KERNEL_LOCK, Reason.of(
            Code.KERNEL_ANCHOR, tool=status.anchor_tool, held=status.state is State.HELD),
            status=status)
    held_by_kernel = status if status.kernel_held else None
    if held_by_kernel is None and kernel and not pinned_by_its_holder(status) \
            and intent is not Intent.RELEASE:
        held_by_kernel = kernel_status(path, policy=status.policy)
    if held_by_kernel is not None and not pinned_by_its_holder(status):
        if intent is Intent.ACQUIRE:
            return Answer(Act.WAIT, held_by_kernel.reasons, status=held_by_kernel)
        if not held_by_kernel.kernel_held:  # the table was cut off: cannot tell
            return _refused(ReadOnlyKind.KERNEL_LOCK, *held_by_kernel.reasons,
                            Reason.of(Code.KERNEL_UNKNOWN), status=held_by_kernel)
        return _refused(ReadOnlyKind.KERNEL_LOCK, Reason.of(
            Code.KERNEL_HELD, pid=held_by_kernel.kernel_pid), status=held_by_kernel)
    empty = rec is None and (status.empty_free
                             or (status.file is not None and status.file.size == 0))
    if rec is None and not empty:  # bytes no format reads (or cannot read now)
        if intent is Intent.ACQUIRE and (status.state is State.WRITING
                                         or (ukind is not None and ukind.inconclusive)):
            return Answer(Act.WAIT, status.reasons, status=status)
        if intent in TAKERS and ukind is not None and not ukind.inconclusive:
            return Answer(Act.REFUSE, status.reasons, Refusal.UNREADABLE, unreadable=ukind,
                          status=status)
        detail = render_all(status.reasons) or None
        return _refused(ReadOnlyKind.NOT_A_LOCK, Reason.of(Code.NOT_A_LOCK, detail=detail),
                        status=status)
    if intent is Intent.ACQUIRE and status.state is not State.STALE and not status.empty_free:
        return Answer(Act.WAIT, status.reasons, status=status)
    why = unsaved_changes(status)
    if why is not None and not (discard_unsaved and intent is Intent.FORCE_RELEASE):
        return Answer(Act.REFUSE, (why,), Refusal.UNSAVED, audited=True, status=status)
    if intent in TAKERS and rec is not None:
        if rec.format == "af-claim":
            return _refused(ReadOnlyKind.NOT_WRITABLE, Reason.of(Code.AF_CLAIM_NOT_WRITTEN),
                            status=status, audited=True)
        if rec.format in DEVTOOL_FORMATS:
            return _refused(ReadOnlyKind.NOT_WRITABLE,
                            Reason.of(Code.TOOL_LOCK_KEPT, format=rec.format),
                            status=status, audited=True)
    if intent is Intent.RECLAIM and (judge is None or not judge(status)):
        return Answer(Act.WAIT, status.reasons, status=status)
    if intent is Intent.FORCE_RECLAIM and judge is not None:
        judge(status)  # records its decision (task-mcp: FORCE past the matrix)
    if intent in TAKERS:
        emptied = _empty_stat(path) if empty else emptied_of(rec)
        reasons = (Reason.of(Code.EMPTY_PUT_BACK, mode=f"{emptied.mode:04o}"),) \
            if empty and emptied is not None else status.reasons
        return Answer(Act.TAKE_OVER, reasons, empty=empty, emptied=emptied, status=status)
    emptied = emptied_of(rec)
    if emptied is not None:  # one of ours that replaced an empty file: empty it in place
        return Answer(Act.EMPTY_IT, (Reason.of(Code.EMPTIED_ON_RELEASE,
                                               mode=f"{emptied.mode:04o}"),),
                      emptied=emptied, status=status)
    ours = rec is not None and rec.written_by_lockwarden
    return Answer(Act.REMOVE, status.reasons, empty=empty,
                  keep=not empty and not ours, status=status)


def ask_clean(path: str, status: LockStatus, removable: bool, pid: int | None,
              kind: str | None) -> Answer:
    """What ``lockwarden clean`` may do with the engine temp file at ``path``: ``removable``
    is :func:`core.tempfiles.leftover_removable`'s answer, ``pid`` and ``kind`` what its name
    says. A leftover that a kernel lock holds, that stands for unsaved work, or whose bytes
    no format reads (no engine step moves such a file out: someone put it there), stays; one
    with foreign content (a forced removal interrupted before the trash took it) is kept in
    the trash, never simply unlinked; an empty one or one of our locks is unlinked."""
    if not removable:
        return _told(path, Intent.CLEAN, status, Answer(
            Act.NOTHING, (Reason.of(Code.NOT_A_LEFTOVER),), status=status))
    held = status if status.kernel_held else kernel_status(path, policy=status.policy)
    if held is not None and not pinned_by_its_holder(status):
        return _told(path, Intent.CLEAN, status, _refused(
            ReadOnlyKind.KERNEL_LOCK, Reason.of(Code.KERNEL_HELD, pid=held.kernel_pid),
            status=held))
    why = unsaved_changes(status)
    if why is not None:
        return _told(path, Intent.CLEAN, status, Answer(
            Act.REFUSE, (why,), Refusal.UNSAVED, status=status))
    rec = status.record
    empty = status.empty_free or (status.file is not None and status.file.size == 0)
    if rec is None and not empty:  # no engine step moves out what is not a lock: leave it
        return _told(path, Intent.CLEAN, status, _refused(
            ReadOnlyKind.NOT_A_LOCK, Reason.of(Code.NOT_A_LOCK, detail=None), status=status))
    ours = rec is not None and rec.written_by_lockwarden
    return _told(path, Intent.CLEAN, status, Answer(
        Act.REMOVE, (Reason.of(Code.LEFTOVER, kind=kind, pid=pid),), empty=empty,
        keep=not empty and not ours, status=status))


_REFUSED_OP = {Intent.ACQUIRE: "acquire", Intent.RECLAIM: "reclaim",
               Intent.FORCE_RECLAIM: "reclaim", Intent.FORCE_RELEASE: "release",
               Intent.RELEASE: "release", Intent.REFRESH: "refresh",
               Intent.RESTORE: "restore", Intent.CLEAN: "clean"}
_VERB = {"acquire": "acquired", "reclaim": "reclaimed", "release": "released",
         "refresh": "refreshed", "restore": "restored", "clean": "removed"}


def refuse(path: str, answer: Answer, intent: Intent) -> NoReturn:
    """Raise the error of a refusal (:meth:`Answer.error`), after writing its
    ``<operation>_refused`` audit entry when the rule is audited (a claim in an af ledger,
    a lock only its tool writes, unsaved work).

    Raises:
        LockError: always -- :class:`~core.errors.ReadOnlyLock`,
            :class:`~core.errors.UnsavedChanges`, :class:`~core.errors.UnreadableError` or
            :class:`~core.errors.LockHeld`.
    """
    op = _REFUSED_OP[intent]
    if answer.audited:
        st = answer.status
        details = {"holder": holder_summary(st) if st is not None else None,
                   "reason": answer.words()}
        if answer.refusal is Refusal.UNSAVED:
            details["unsaved"] = answer.reasons[0].to_dict()
            details["reason"] = render(answer.reasons[0])
        rec = st.record if st is not None else None
        record_audit(path, f"{op}_refused", result="refused", details=details,
                     format=rec.format if rec else None)
    raise answer.error(path, _VERB[op])
