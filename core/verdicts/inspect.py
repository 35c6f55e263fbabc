"""One lock path to one verdict: read safely, parse, check the holder, judge
(docs/DESIGN.md, "Formats" and "Liveness and verdicts").

:func:`inspect` is ``core.inspect`` of the public API and the CLI's ``status``; the scanner,
which has already read the bytes, calls :func:`inspect_bytes`. Neither ever raises because of
what is (or is not) at the path: FIFOs, symlinks, directories, garbage and permission problems
all become ``unreadable`` verdicts with a reason, a missing file is ``free``.
"""

from __future__ import annotations

import dataclasses
import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from core.codes import Code, UnreadableKind
from core.errors import ParseError, UnreadableError
from core.fsutil import os_reason, read_lock_file
from core.kernel.anchors import anchor_tool
from core.reasons import Reason
from core.record import (
    DEVTOOL_FORMATS,
    Evidence,
    FileInfo,
    Liveness,
    LockRecord,
    LockStatus,
    State,
)
from core.stale_policy import DEFAULT_POLICY, StalePolicy
from core.verdicts.judge import (
    free_status,
    judge,
    judge_empty,
    judge_unparsed,
    judge_unreadable,
)
from core.verdicts.liveness import ProcessSnapshot, check, evidence

if TYPE_CHECKING:
    from core.kernel.locks import Holding
    from core.kernel.openfiles import Answer, KernelView
    from core.kernel.table import Table

EMPTY_REREADS = 3
"""Times :func:`inspect` reads an empty file again when it changed while it was judged (its
writer wrote and closed it between the read and the look at who has it open)."""


def inspect(
    path: str,
    *,
    policy: StalePolicy | None = None,
    procs: ProcessSnapshot | None = None,
    now: datetime | None = None,
) -> LockStatus:
    """The verdict on the lock at ``path``.

    Args:
        path: the lock file path.
        policy: stale policy; default :class:`~core.stale_policy.StalePolicy` ``()`` (3600 s).
        procs: a :func:`core.verdicts.liveness.snapshot` to judge liveness with; default: look up
        the
            holder's PID directly.
        now: the moment of the verdict (aware UTC); default the current time.

    Returns:
        A :class:`~core.record.LockStatus`: ``free`` ("no lock file") when nothing is at
        ``path``; for a virtual path ``"<proof>/ledger#<node_id>"`` (an af claim replayed from
        the ledger's events, :func:`core.formats.af.replay_ledger`) the claim's read-only
        verdict, or ``free`` when the node is not claimed; ``unreadable`` with the reason for
        a FIFO, device, socket, directory, symlink, a file over 64 KiB or a permission problem
        (:func:`core.fsutil.read_lock_file`); otherwise as :func:`inspect_bytes`.

    Raises nothing for the path's content. (``TypeError`` for a ``path`` that is not a
    string or path-like, as any file function would.)
    """
    policy = policy or DEFAULT_POLICY
    fixed_now = now
    for _ in range(EMPTY_REREADS):
        now = fixed_now or datetime.now(UTC)
        try:
            data, info = _read_settled(path)
        except FileNotFoundError:
            claim = _ledger_claim(path, policy=policy, procs=procs, now=now)
            if claim is not None:
                return claim
            return free_status(path, policy=policy, now=now)
        except UnreadableError as exc:
            return judge_unreadable(path, kind=exc.kind, detail=exc.reason, policy=policy,
                                    now=now)
        except OSError as exc:  # anything read_lock_file did not foresee
            return judge_unreadable(path, kind=UnreadableKind.OS_ERROR, detail=os_reason(exc),
                                    policy=policy, now=now)
        status = inspect_bytes(path, data, info, policy=policy, procs=procs, now=now)
        if not status.empty_free or _same_file(path, info):
            return status
    return status


def _same_file(path: str, info: FileInfo | None) -> bool:
    """True when ``path`` is still the file ``info`` describes (inode, device, size, mtime):
    a verdict of ``free`` on an empty file stands only if nobody wrote it meanwhile."""
    if info is None:
        return True
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns) == (
        info.ino, info.dev, info.size, info.mtime_ns)


def inspect_bytes(
    path: str,
    data: bytes,
    file: FileInfo | None,
    *,
    policy: StalePolicy | None = None,
    procs: ProcessSnapshot | None = None,
    now: datetime | None = None,
    mtime: float | None = None,
    kernel: KernelView | None = None,
) -> LockStatus:
    """The verdict on a lock whose bytes were already read (by the scanner).

    Args:
        path: the lock path (used by format detection and in the verdict).
        data: the file's bytes (at most 64 KiB, as :func:`core.fsutil.read_lock_file` reads).
        file: the identity of the file the bytes came from, or ``None``.
        policy, procs, now: as :func:`inspect`.
        mtime: the file's modification time (Unix s); default ``file.mtime_ns``.
        kernel: the kernel's locks and open files for a batch of verdicts
            (:class:`core.kernel.openfiles.KernelView`: ``/proc/locks`` read once, one walk of
            the open descriptors for all empty files); default a view for this file alone.

    An empty file on which the kernel holds a lock (flock, fcntl, OFD: cargo, uv, dpkg,
    ``flock(1)``, filelock's ``FileLock``) is ``held`` (``kernel_lock_held``), never stale:
    only the kernel knows, and deleting it would break the lock (``docs/formats.md``, "Kernel
    locks are not formats"). An empty file at a known tool's kernel-lock anchor path
    (:func:`core.kernel.anchors.anchor_tool`: dpkg, apt, cargo, uv, Gradle) that no process holds is
    ``free`` (``kernel_anchor_free``), never stale either (docs/specs/devtool-locks.md §0);
    where the kernel's locks cannot be read it is ``held`` with unknown liveness
    (``kernel_anchor_unchecked``). Anchors, held or not, are ``read_only``: never deleted,
    never replaced; so is an anchor whose content no format reads (Gradle writes an
    information region into its lock files, docs/specs/devtool-locks.md §1 row Gradle). An empty git
    lock file (``HEAD.lock``) is a ``git-lock``.
    Other empty bytes (or only whitespace) are judged by
    :func:`core.verdicts.judge.judge_empty` with the processes that have the file open
    (``free`` when nobody does; ``writing`` while someone does; never ``stale``, never
    ``unreadable``). Bytes no format accepts go to :func:`core.verdicts.judge.judge_unparsed`
    (``writing`` while young; garbage stays ``unreadable``). Parsed records get a liveness
    check (:func:`core.verdicts.liveness.check`) and a verdict. Never raises for the content of
    ``data``.
    """
    policy = policy or DEFAULT_POLICY
    now = now or datetime.now(UTC)
    if mtime is None and file is not None:
        mtime = file.mtime_ns / 1e9
    empty = not data.strip()
    if empty:
        view = kernel if kernel is not None else _view()
        answer = view.answer(path)
        verdict = _kernel_verdict(path, file, answer, policy=policy, now=now, any_file=True)
        if verdict is not None:
            return verdict
        if not _named_by_path(path):
            return _judge_empty(path, file, view, answer.error, policy=policy, now=now,
                                mtime=mtime)
    try:
        record = _parse(data, path)
    except ParseError as exc:  # partial: "writing" within the grace, else unreadable
        # an anchor with content of its own (Gradle's info region) is still an anchor
        if anchor_tool(path) is not None:
            answer = (kernel if kernel is not None else _view()).answer(path)
            verdict = _kernel_verdict(path, file, answer, policy=policy, now=now,
                                      any_file=False)
            if verdict is not None:
                return verdict
        return judge_unparsed(path, empty=False, detail=exc.reason, policy=policy, now=now,
                              file=file, mtime=mtime)
    return judge_record(path, record, policy=policy, procs=procs, now=now, file=file,
                        mtime=mtime)


def judge_record(
    path: str,
    record: LockRecord,
    *,
    policy: StalePolicy,
    procs: ProcessSnapshot | None,
    now: datetime,
    file: FileInfo | None = None,
    mtime: float | None = None,
) -> LockStatus:
    """Check ``record``'s holder (:func:`core.verdicts.liveness.check`) and judge it
    (:func:`core.verdicts.judge.judge`); a developer tool's lock
    (:data:`core.record.DEVTOOL_FORMATS`)
    is judged by :func:`core.verdicts.devtools.judge_devtool` instead. A failure of the process
    check (psutil, ``/proc`` not mounted) is judged as ``unknown`` liveness with reason
    ``liveness_unchecked``. Never raises."""
    if record.format in DEVTOOL_FORMATS:
        from core.verdicts.devtools import judge_devtool

        status = judge_devtool(path, record, now=now, mtime=mtime, policy=policy, file=file)
        if status is not None:
            return status
    try:
        liveness, reasons = check(record, procs=procs, written_at=mtime)
    except Exception as exc:  # psutil failure (e.g. /proc not mounted): judge without it
        liveness = Liveness.UNKNOWN
        reasons = [Reason.of(Code.LIVENESS_UNCHECKED, detail=str(exc))]
    if liveness is not Liveness.ALIVE and record.written_by_lockwarden and file is not None \
            and record.pid is not None:
        # the holder's pin (core.kernel.pin, docs/engine.md "The holder's pin"): an flock
        # the recorded holder took on its lock file proves the lock alive where its PID
        # proves nothing: the holder runs in another PID namespace, or it was `lockwarden run`,
        # which handed the pin down to its command, and the command outlives it. The process
        # that has the recorded PID now is not the holder (dead or reused): never counted.
        from core.kernel.pin import pinned_by

        pinned, pin_pid = pinned_by(path, record.pid, record.token, exclude=record.pid)
        if pinned:
            liveness = Liveness.ALIVE
            reasons = [Reason.of(Code.HOLDER_PINNED, pid=pin_pid, recorded=record.pid,
                                 name=_process_name(pin_pid)),
                       *reasons]
    return judge(path, record, liveness=liveness, liveness_reasons=reasons, policy=policy,
                 now=now, file=file, mtime=mtime, evidence=evidence(record, reasons, procs))


def _process_name(pid: int | None) -> str | None:
    """The name of process ``pid`` (psutil), or ``None``. Never raises."""
    if pid is None:
        return None
    import psutil

    try:
        return str(psutil.Process(pid).name())
    except psutil.Error:
        return None


def _ledger_claim(
    path: str, *, policy: StalePolicy, procs: ProcessSnapshot | None, now: datetime
) -> LockStatus | None:
    """The verdict on ``"<ledger_dir>#<node_id>"`` when ``path`` has that shape and
    ``ledger_dir`` is a directory; ``None`` otherwise (then ``path`` is just missing)."""
    ledger_dir, sep, node = str(path).rpartition("#")
    if not sep or not node or not ledger_dir or not os.path.isdir(ledger_dir):
        return None
    from core.formats import af

    try:
        claims = af.replay_ledger(ledger_dir)
    except Exception as exc:  # a bug in the replay must not escape
        return judge_unreadable(
            path, kind=UnreadableKind.PARSE, policy=policy, now=now,
            detail=f"the ledger could not be replayed ({type(exc).__name__}: {exc})")
    for record in claims:
        node_id = record.metadata.get("node_id") if isinstance(record.metadata, dict) else None
        if node_id == node or record.path == path:
            status = judge_record(path, record, policy=policy, procs=procs, now=now)
            return dataclasses.replace(status, read_only=True)
    return free_status(path, policy=policy, now=now, read_only=True,
                       reason=Reason.of(Code.NOT_CLAIMED, node=node))


def _named_by_path(path: str) -> bool:
    """True for a git lock path, whose empty content is a valid lock (``HEAD.lock``)."""
    from core.formats import git

    return git.lock_target(path) is not None


def _view() -> KernelView:
    """A :class:`core.kernel.openfiles.KernelView` for one verdict (imported lazily: the CLI's
    ``status`` of a file with content never needs it)."""
    from core.kernel.openfiles import KernelView

    return KernelView()


def kernel_status(path: str, *, policy: StalePolicy | None = None) -> LockStatus | None:
    """The ``held`` verdict of a kernel lock (flock, POSIX, OFD) on ``path`` whatever the file
    holds -- a pidfile with content can be flock'ed too -- or ``None`` when the kernel shows
    none (or ``/proc/locks`` cannot be read). When the kernel's lock table was cut off at its
    bounds and nothing on the file itself answered, ``held`` with unknown liveness
    (``kernel_table_too_large``, :func:`table_too_large_status`): "cannot tell" is never "no
    lock". Used before anything deletes or replaces a file
    (:func:`core.engine.gate.ask`). Never raises."""
    from core.stale_policy import DEFAULT_POLICY

    answer = _view().answer(path)
    policy = policy or DEFAULT_POLICY
    if answer.held:
        return _held_status(path, answer.held[0], None, policy=policy,
                            now=datetime.now(UTC), tool=anchor_tool(path))
    if answer.cut is not None:
        return table_too_large_status(path, answer.cut, None, policy=policy,
                                      now=datetime.now(UTC), tool=anchor_tool(path))
    return None


def _judge_empty(path: str, file: FileInfo | None, view: KernelView, kernel_error: str | None,
                 *, policy: StalePolicy, now: datetime, mtime: float | None) -> LockStatus:
    """:func:`core.verdicts.judge.judge_empty` with the processes that have the file open
    (:meth:`core.kernel.openfiles.KernelView.open_by`) and the first one's name and user."""
    openers: tuple[int, ...] | None = None
    if file is not None:
        openers = view.open_by(file.dev, file.ino, mtime)
    opener = _process_evidence(openers[0]) if openers else None
    return judge_empty(path, openers=openers, policy=policy, now=now, file=file, mtime=mtime,
                       kernel_error=kernel_error, opener=opener)


def _process_evidence(pid: int | None) -> Evidence:
    """:class:`~core.record.Evidence` naming process ``pid``: start time, name and user
    (:func:`core.verdicts.liveness.process_facts`); only the PID when it cannot be read."""
    from core.verdicts.liveness import boot_time, process_facts

    facts = process_facts(pid) if pid else None
    if facts is None:
        return Evidence(pid=pid)
    return Evidence(pid=pid, process_start=facts.start, process_name=facts.name,
                    process_user=facts.user, process_uid=facts.uid, boot_time=boot_time())


def anchor_status(path: str, tool: str, file: FileInfo | None, *, policy: StalePolicy,
                  now: datetime, error: str | None = None) -> LockStatus:
    """The verdict on an empty kernel-lock anchor of ``tool``
    (:func:`core.kernel.anchors.anchor_tool`)
    on which the kernel shows no lock: ``free`` with ``kernel_anchor_free{tool, file}``, or,
    when the kernel's locks could not be read (``error``: why), ``held`` with unknown liveness
    and ``kernel_anchor_unchecked{tool, file, detail}``. Both are ``read_only``: the file is
    the tool's anchor, never stale and never deleted (docs/specs/devtool-locks.md §0, §1 rows
    dpkg/apt, cargo, uv, Gradle). Never raises."""
    if error is not None:
        return LockStatus(path, State.HELD, liveness=Liveness.UNKNOWN,
                          reasons=(Reason.of(Code.KERNEL_ANCHOR_UNCHECKED, tool=tool, file=path,
                                             detail=error),),
                          checked_at=now, file=file, policy=policy, read_only=True)
    return LockStatus(path, State.FREE,
                      reasons=(Reason.of(Code.KERNEL_ANCHOR_FREE, tool=tool, file=path),),
                      checked_at=now, file=file, policy=policy, read_only=True)


def _kernel_verdict(path: str, file: FileInfo | None, answer: Answer, *, policy: StalePolicy,
                    now: datetime, any_file: bool) -> LockStatus | None:
    """The verdict the kernel's locks (``answer``: :meth:`core.kernel.openfiles.KernelView.answer`)
    decide for ``path``: ``held`` (``kernel_lock_held``) when one is held on it -- on any file
    with ``any_file``, else only on a known tool's anchor; else ``held`` with unknown liveness
    (``kernel_table_too_large``) when ``/proc/locks`` was cut off and nothing answered
    (docs/verdicts.md, "When the kernel's lock table is too large"); else, for an anchor
    (:func:`core.kernel.anchors.anchor_tool`), ``free`` or ``unchecked`` (:func:`anchor_status`);
    ``None`` when the kernel decides nothing."""
    tool = anchor_tool(path)
    if tool is None and not any_file:
        return None
    if answer.held:
        return _held_status(path, answer.held[0], file, policy=policy, now=now, tool=tool)
    if answer.cut is not None:
        return table_too_large_status(path, answer.cut, file, policy=policy, now=now, tool=tool)
    if tool is not None:
        return anchor_status(path, tool, file, policy=policy, now=now, error=answer.error)
    return None


def table_too_large_status(path: str, table: Table, file: FileInfo | None, *,
                           policy: StalePolicy, now: datetime, tool: str | None) -> LockStatus:
    """``held`` with liveness ``unknown`` and ``kernel_table_too_large{file, bytes, seconds,
    cut, tool}``: ``/proc/locks`` was cut off at its bounds (``table``,
    :class:`core.kernel.table.Table`: bytes read, seconds taken, which bound) and neither the
    file itself nor the processes that have it open showed a lock, so a kernel lock may hold
    it unseen (docs/verdicts.md, "When the kernel's lock table is too large"). Never stale,
    never free; ``read_only`` for a known tool's anchor (``tool``). Never raises."""
    return LockStatus(path, State.HELD, liveness=Liveness.UNKNOWN,
                      reasons=(Reason.of(Code.KERNEL_TABLE_TOO_LARGE, file=path,
                                         bytes=table.bytes_read,
                                         seconds=round(table.seconds, 3), cut=table.cut,
                                         tool=tool),),
                      checked_at=now, file=file, policy=policy, read_only=tool is not None)


def _held_status(path: str, h: Holding, file: FileInfo | None, *, policy: StalePolicy,
                 now: datetime, tool: str | None) -> LockStatus:
    """``held`` with ``kernel_lock_held`` for the kernel lock ``h`` on ``path``; ``tool``
    names a known anchor's tool (then the verdict is also ``read_only``). The evidence names
    the holder process the kernel names (name, user, start time)."""
    pid = h.pids[0] if h.pids else None
    who = _process_evidence(pid)
    return LockStatus(path, State.HELD, liveness=Liveness.ALIVE if pid else Liveness.UNKNOWN,
                      reasons=(Reason.of(Code.KERNEL_LOCK_HELD, pid=pid, name=who.process_name,
                                         kind=h.lock.kind.value, access=h.lock.access.value,
                                         file=path, tool=tool),),
                      checked_at=now, file=file, policy=policy, evidence=who,
                      read_only=tool is not None)


def _parse(data: bytes, path: str) -> LockRecord:
    """``core.formats.parse``, imported lazily; a bug in a parser (anything but ParseError)
    becomes a ParseError so the verdict is ``unreadable`` instead of a crash."""
    from core import formats

    try:
        return formats.parse(data, path)
    except ParseError:
        raise
    except Exception as exc:
        raise ParseError(f"could not be parsed ({type(exc).__name__}: {exc})", path=path) from exc


def _read_settled(path: str) -> tuple[bytes, FileInfo]:
    """:func:`core.fsutil.read_lock_file`, tried a second time when the file was swapped while
    being read (an engine refresh or reclaim exchanges names atomically): the second read sees
    the settled file instead of reporting a passing "changed while being read"."""
    try:
        return read_lock_file(path)
    except UnreadableError as exc:
        if exc.kind is not UnreadableKind.CHANGED:
            raise
    return read_lock_file(path)
