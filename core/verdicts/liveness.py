"""Is the holder of a lock still running? :func:`check` answers with a
:class:`~core.record.Liveness` (``alive``, ``dead``, ``reused``, ``remote``, ``unknown``) and its
reasons, judged with psutil on this host only; ``psutil.AccessDenied`` means the process exists,
so it counts as alive.

One :func:`snapshot` (a single psutil pass over all processes) lets a scanner judge hundreds of
locks without one system call per lock; :func:`check` confirms a PID missing from a snapshot
with a direct look-up, so a process started after the snapshot is never called dead.

Rules: docs/verdicts.md, "Liveness of a holder (``core.verdicts.liveness.check``)";
docs/DESIGN.md, "Liveness and verdicts" (and "Defects": ``semats`` takes ``EPERM`` for dead).
"""

from __future__ import annotations

import functools
import os
import socket
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

import psutil

from core import seam
from core.codes import Code
from core.reasons import Reason
from core.record import Evidence, Liveness, LockRecord
from core.text import same_host_name

START_SLACK = 2.0
"""Seconds a process may seem to have started after its lock's ``acquired_at`` and still be
the holder. docs/DESIGN.md gives 1 s because sema timestamps are whole seconds (``timestamp`` is
the floor of the write time); one more second because psutil's ``create_time`` adds the
whole-second boot time of ``/proc/stat`` (``btime``), which a clock step can move by one second.
A PID cannot be recycled within 2 s in practice (the kernel would have to wrap its PID space)."""

START_TOLERANCE = 0.1
"""Seconds by which a recorded ``start=`` may differ from the live process's start time
(docs/DESIGN.md: ``start`` is psutil's ``create_time`` at acquisition, with its fraction)."""

_BTIME_JITTER = 0.02
"""A ``start=`` that differs by exactly one second (within this many seconds: the 10 ms clock
tick plus rounding) is the same process seen across a one-second move of the boot time."""


@functools.cache
def hostname() -> str:
    """This machine's host name (``socket.gethostname()``), computed once per process."""
    return socket.gethostname()


def same_host(name: str, local: str | None = None) -> bool:
    """True when host ``name`` (from a lock) is this host (``local``, default :func:`hostname`).

    Case-insensitive. A short name matches a fully qualified one by its first label
    (``devbox`` == ``devbox.example.org``); two fully qualified names must be equal.
    """
    return same_host_name(name, hostname() if local is None else local)


class ProcInfo(NamedTuple):
    """What a snapshot knows of one process.

    ``create_time``: start time, Unix seconds, or ``None`` when access was denied;
    ``status``: psutil status string (``"zombie"``, ``"running"`` ...) or ``None``;
    ``name``: process name or ``None``."""

    create_time: float | None
    status: str | None
    name: str | None = None


@dataclass(frozen=True, eq=False)
class ProcessSnapshot(Mapping[int, ProcInfo]):
    """All processes of this host at one moment: ``pid -> ProcInfo`` (a read-only mapping).

    ``taken_at`` is the Unix time (s) the snapshot was taken. Build one with :func:`snapshot`.
    """

    procs: Mapping[int, ProcInfo] = field(default_factory=dict)
    taken_at: float = field(default_factory=time.time)
    owners: dict[tuple[int, float | None], tuple[int | None, str | None]] = field(
        default_factory=dict, repr=False)
    """Owners looked up while judging against this snapshot (:func:`evidence`), by PID and
    start time: the locks of one holder ask psutil once per snapshot, not once per lock."""
    evidence: dict[tuple[int | None, float | None, str | None, bool], Evidence] = field(
        default_factory=dict, repr=False)
    """The :class:`~core.record.Evidence` :func:`evidence` gave while judging against this
    snapshot, by PID, start time, name and whether the holder was seen alive: the locks of
    one PID share one (immutable) object."""

    def __getitem__(self, pid: int) -> ProcInfo:
        return self.procs[pid]

    def __iter__(self) -> Iterator[int]:
        return iter(self.procs)

    def __len__(self) -> int:
        return len(self.procs)


def snapshot() -> ProcessSnapshot:
    """One psutil pass over every process (``psutil.process_iter``) giving each PID's start
    time, status and name. Processes that vanish during the pass are left out; fields psutil
    is denied are ``None``. Never raises for a single process."""
    taken_at = time.time()
    procs: dict[int, ProcInfo] = {}
    for p in psutil.process_iter(["create_time", "status", "name"]):
        info = p.info
        ct = info.get("create_time")
        procs[p.pid] = ProcInfo(
            float(ct) if ct is not None else None, info.get("status"), info.get("name")
        )
    return ProcessSnapshot(procs=procs, taken_at=taken_at)


@functools.cache
def boot_id() -> str | None:
    """This boot's random id (Linux ``/proc/sys/kernel/random/boot_id``), else ``None``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            value = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return value or None


def process_identity(pid: int) -> str | None:
    """A clock-independent identity of process ``pid``: ``"<boot_id>:<start ticks>"`` where
    the start is field 22 of ``/proc/<pid>/stat`` (clock ticks since boot; Linux only).

    psutil's ``create_time`` adds the boot time of ``/proc/stat``, which the kernel moves by
    the size of every wall-clock step (NTP, resume from suspend): after a step a live holder's
    ``create_time`` no longer equals the ``start=`` it recorded. This identity does not move.
    ``None`` elsewhere, or when there is no such process (or it cannot be read)."""
    boot = boot_id()
    if boot is None or pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    if len(fields) < 20 or not fields[19].isdigit():
        return None
    return f"{boot}:{int(fields[19])}"


def _hidden_but_running(pid: int) -> bool:
    """True when ``pid`` exists although psutil cannot see it (``/proc`` mounted with
    ``hidepid``): ``kill(pid, 0)`` answers ``EPERM`` for another user's live process. Never
    on Windows (its ``os.kill`` terminates)."""
    if sys.platform == "win32":
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    return False


def process_start_time(pid: int) -> float | None:
    """Start time of process ``pid`` in Unix seconds (psutil ``create_time``), or ``None``
    when there is no such process (or it is a zombie, or its start time cannot be read)."""
    info = _probe(pid)
    if info is None or info is _DENIED or info.status == psutil.STATUS_ZOMBIE:
        return None
    return info.create_time


INIT_PID = 1
"""The init process: it adopts orphans, so a CLI whose calling shell is gone sees it as its
parent. A lock naming it as holder proves nothing about liveness."""

_DENIED = ProcInfo(None, None, None)
"""Sentinel: the process exists but psutil was denied access to it."""


def _probe(pid: int) -> ProcInfo | None:
    """Direct look-up of one PID: ``None`` if no such process, ``_DENIED`` if access denied."""
    if pid <= 0:
        return None
    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None
    except psutil.AccessDenied:
        return _DENIED
    try:
        with proc.oneshot():
            ct: float | None
            try:
                ct = proc.create_time()
            except psutil.AccessDenied:
                ct = None
            try:
                status: str | None = proc.status()
            except psutil.AccessDenied:
                status = None
            try:
                name: str | None = proc.name()
            except psutil.AccessDenied:
                name = None
    except psutil.ZombieProcess:
        return ProcInfo(None, psutil.STATUS_ZOMBIE, None)
    except psutil.NoSuchProcess:
        return None
    return ProcInfo(ct, status, name)


def check(
    record: LockRecord,
    *,
    procs: ProcessSnapshot | None = None,
    written_at: float | None = None,
) -> tuple[Liveness, list[Reason]]:
    """Liveness of ``record``'s holder and the reasons for it, as :class:`~core.reasons.Reason`
    data (codes ``no_pid``, ``remote_host``, ``invalid_pid``, ``init_holder``, ``holder_alive``,
    ``holder_alive_unverified``, ``holder_dead``, ``pid_reused``).

    Args:
        record: the parsed lock.
        procs: a :func:`snapshot` to look PIDs up in; ``None`` looks each PID up directly.
            A PID missing from the snapshot is confirmed directly unless the lock was written
            before the snapshot (else its process may have started after the snapshot).
        written_at: when the lock file was written (Unix s, its mtime), used for the start-time
            check of records without ``acquired_at`` (pidfiles). ``None``: no check.

    Returns:
        ``(Liveness, reasons)``, by the rules of docs/verdicts.md, "Liveness of a holder
        (``core.verdicts.liveness.check``)" (slacks :data:`START_SLACK`, :data:`START_TOLERANCE`).

    Never raises for the record's content.
    """
    seam.step("liveness", str(record.pid))
    pid = record.pid
    if pid is None:
        return Liveness.UNKNOWN, [Reason.of(Code.NO_PID)]
    if record.host and not same_host(record.host):
        return Liveness.REMOTE, [
            Reason.of(Code.REMOTE_HOST, pid=pid, host=record.host, this_host=hostname())
        ]
    if pid <= 0:
        return Liveness.UNKNOWN, [Reason.of(Code.INVALID_PID, pid=pid)]
    if pid == INIT_PID:
        return Liveness.UNKNOWN, [Reason.of(Code.INIT_HOLDER, pid=pid)]

    written = _written_at(record.acquired_at, written_at)
    info: ProcInfo | None = None
    if procs is not None:
        info = procs.get(pid)
        if info is None and not _predates(record.start, written, procs.taken_at):
            info = _probe(pid)  # the process may have started after the snapshot
    else:
        info = _probe(pid)
    if info is None:
        if _hidden_but_running(pid):
            return Liveness.ALIVE, [
                Reason.of(Code.HOLDER_ALIVE_UNVERIFIED, pid=pid, why="hidepid")
            ]
        return Liveness.DEAD, [Reason.of(Code.HOLDER_DEAD, pid=pid)]
    if info is _DENIED:
        return Liveness.ALIVE, [
            Reason.of(Code.HOLDER_ALIVE_UNVERIFIED, pid=pid, why="access_denied")
        ]
    if info.status == psutil.STATUS_ZOMBIE:
        return Liveness.DEAD, [Reason.of(Code.HOLDER_DEAD, pid=pid, zombie=True)]

    return _by_start(record, pid, info, written)


def _by_start(record: LockRecord, pid: int, info: ProcInfo,
              written: float | None) -> tuple[Liveness, list[Reason]]:
    """The end of :func:`check` for a running, non-zombie ``info``: ``alive`` or ``reused`` by
    its recorded process identity, its recorded ``start``, or when it was written (Unix s)."""
    ct = info.create_time
    alive = Reason.of(Code.HOLDER_ALIVE, pid=pid, name=info.name, start=ct)
    if ct is None:
        return Liveness.ALIVE, [
            Reason.of(Code.HOLDER_ALIVE_UNVERIFIED, pid=pid, name=info.name, why="no_start_time")
        ]

    if record.proc is not None:
        # clock-independent comparison first (a wall-clock step moves ``create_time``)
        now_id = process_identity(pid)
        if now_id is not None:
            if now_id == record.proc:
                return Liveness.ALIVE, [alive]
            same_boot = now_id.rsplit(":", 1)[0] == record.proc.rsplit(":", 1)[0]
            return Liveness.REUSED, [
                Reason.of(Code.PID_REUSED, pid=pid, how="proc" if same_boot else "boot")
            ]

    if record.start is not None:
        diff = ct - record.start
        if not _same_start(diff):
            return Liveness.REUSED, [
                Reason.of(Code.PID_REUSED, pid=pid, how="start", delta_s=diff)
            ]
        return Liveness.ALIVE, [alive]

    if written is not None and ct > written + START_SLACK:
        return Liveness.REUSED, [
            Reason.of(Code.PID_REUSED, pid=pid, how="written", delta_s=ct - written)
        ]
    return Liveness.ALIVE, [alive]


@functools.lru_cache(maxsize=1)
def boot_time() -> float | None:
    """This host's last boot (Unix s, ``psutil.boot_time()``), read once per process; ``None``
    where psutil cannot tell."""
    try:
        return float(psutil.boot_time())
    except Exception:  # no /proc/stat (sandboxes): the boot rule is not applied
        return None


def evidence(record: LockRecord, reasons: list[Reason],
             procs: ProcessSnapshot | None = None) -> Evidence:
    """The :class:`~core.record.Evidence` of a :func:`check`: the PID looked up, the start time,
    name and user of the process found alive under it (:func:`process_owner`: one look-up
    per live holder, shared by the locks judged against the same ``procs`` snapshot), and this
    host's boot time. Against a snapshot, the locks of one PID get one shared object
    (:attr:`ProcessSnapshot.evidence`)."""
    start: float | None = None
    name: str | None = None
    alive = False
    for r in reasons:
        if r.code in (Code.HOLDER_ALIVE, Code.HOLDER_ALIVE_UNVERIFIED):
            s, n = r.get("start"), r.get("name")
            start = float(s) if isinstance(s, int | float) else None
            name = n if isinstance(n, str) else None
            alive = True
    uid: int | None = None
    user: str | None = None
    if procs is not None:
        shared = procs.evidence.get((record.pid, start, name, alive))
        if shared is not None:
            return shared
    if alive and record.pid:
        if procs is None:
            uid, user = process_owner(record.pid)
        else:
            key = (record.pid, start)
            owner = procs.owners.get(key)
            if owner is None:
                owner = procs.owners[key] = process_owner(record.pid)
            uid, user = owner
    made = Evidence(pid=record.pid, process_start=start, process_name=name,
                    boot_time=boot_time(), process_user=user, process_uid=uid)
    if procs is not None:
        procs.evidence[(record.pid, start, name, alive)] = made
    return made


@functools.lru_cache(maxsize=256)
def user_name(uid: int) -> str:
    """The login name of ``uid`` (``pwd``), or the number as text when it has none (a
    container's user, a deleted account). Cached: names of UIDs do not change while we run."""
    if sys.platform == "win32":  # no pwd: UIDs are not Windows' own
        return str(uid)
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def process_owner(pid: int) -> tuple[int | None, str | None]:
    """``(real UID, user name)`` of process ``pid`` (psutil; the UID is ``None`` on Windows,
    where the name is psutil's ``DOMAIN\\user``); ``(None, None)`` when there is no such
    process or it cannot be read. Never raises."""
    try:
        proc = psutil.Process(pid)
        if sys.platform == "win32":  # no UIDs there
            return None, proc.username()
        uid = int(proc.uids().real)
    except (psutil.Error, OSError, ValueError):
        return None, None
    return uid, user_name(uid)


class ProcessFacts(NamedTuple):
    """What a person needs to recognise a process before ending it (docs/gui.md, "End holder
    process"): its PID, name, user, start time (Unix s; identifies it against PID reuse) and
    command line (arguments; empty when not readable)."""

    pid: int
    name: str
    user: str | None
    uid: int | None
    start: float
    cmdline: tuple[str, ...]


def process_facts(pid: int) -> ProcessFacts | None:
    """The :class:`ProcessFacts` of ``pid``, or ``None`` when there is no such process (or
    it is a zombie, or even its start time cannot be read). Never raises."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            start = proc.create_time()
            name = proc.name()
            try:
                cmdline = tuple(proc.cmdline())
            except psutil.AccessDenied:
                cmdline = ()
    except (psutil.Error, OSError):
        return None
    uid, user = process_owner(pid)
    return ProcessFacts(pid, name, user, uid, start, cmdline)


def _predates(start: float | None, written: float | None, taken_at: float) -> bool:
    """True when the holder must have been running before a snapshot taken at ``taken_at``:
    its recorded start, or the lock's write time (plus the slack), is earlier. A PID missing
    from such a snapshot is dead without a second look (a process started later with the
    same PID would not be the holder either). psutil's start times can read ~0.1 s early
    (boot time in whole seconds), so the recorded start gets the same slack as the write time:
    a holder started just before the snapshot is looked up directly instead of judged dead."""
    if start is not None:
        return start + START_SLACK < taken_at
    return written is not None and written + START_SLACK < taken_at


def _same_start(diff: float) -> bool:
    if abs(diff) <= START_TOLERANCE:
        return True
    return abs(abs(diff) - 1.0) <= _BTIME_JITTER


def _written_at(acquired_at: datetime | None, written_at: float | None) -> float | None:
    if acquired_at is not None:
        try:
            return acquired_at.timestamp()
        except (OverflowError, OSError, ValueError):
            return None
    return written_at
