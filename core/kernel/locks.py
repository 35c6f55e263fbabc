"""Kernel locks: ``flock``, fcntl POSIX record locks and OFD locks, which only the kernel knows
(docs/specs/devtool-locks.md, "The one rule that decides everything", kind B, and "Kernel-held
locks"). A kernel lock is never stale and its file is never deleted: this module only reads.

:func:`parse_line` / :func:`parse_proc_locks` read ``/proc/locks`` lines (their format:
docs/specs/devtool-locks.md, "Linux: ``/proc/locks``") into :class:`KernelLock`;
:func:`fd_holders` finds through ``/proc/<pid>/fdinfo`` the processes that really hold an
``flock`` or OFD lock; :func:`file_key` is a path's ``(major, minor, inode)``;
:func:`kernel_holders` joins locks and paths, within bounds (:mod:`core.kernel.lookup`), or with
``F_GETLK`` alone where ``/proc/locks`` cannot be read (:mod:`core.kernel.getlk`). Rules:
docs/formats.md, "Kernel locks are not formats" and "Where there is no /proc/locks".

Units: byte offsets are ints; PIDs are ints (``None`` for ``-1``); nothing here measures time.
"""

from __future__ import annotations

import enum
import errno
import os
import stat
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

from core.errors import ParseError
from core.kernel import getlk as kernel_getlk
from core.kernel.table import read_table


class LockKind(enum.StrEnum):
    """The ``TYPE`` column of ``/proc/locks``."""

    FLOCK = "FLOCK"
    """``flock(2)``: whole file, owned by the open file description."""
    POSIX = "POSIX"
    """``fcntl(F_SETLK)`` / ``lockf(3)``: byte ranges, owned by the process."""
    OFDLCK = "OFDLCK"
    """``fcntl(F_OFD_SETLK)``: byte ranges, owned by the open file description (PID ``-1``)."""
    LEASE = "LEASE"
    DELEG = "DELEG"
    ACCESS = "ACCESS"
    UNKNOWN = "UNKNOWN"
    """Never in ``/proc/locks``: a lock ``F_GETLK`` reported with PID ``-1`` on macOS/BSD, where
    that means an flock or an OFD lock (:mod:`core.kernel.getlk`)."""

    @property
    def per_description(self) -> bool:
        """True for locks owned by an open file description (flock, OFD, and the macOS
        ``UNKNOWN``, which is one of the two): the PID shown may be dead or absent while the
        lock is held by another process that shares the descriptor."""
        return self in (LockKind.FLOCK, LockKind.OFDLCK, LockKind.UNKNOWN)


class Access(enum.StrEnum):
    """The ``RW`` column: a shared (``READ``) or exclusive (``WRITE``) lock."""

    READ = "READ"
    WRITE = "WRITE"
    UNLCK = "UNLCK"


FileKey = tuple[int, int, int]
"""``(major, minor, inode)`` of a file: how ``/proc/locks`` names it."""


class KernelLock(NamedTuple):
    """One line of ``/proc/locks`` (or one ``lock:`` line of an fdinfo file).

    Attributes:
        ordinal: the ``<id>`` column (an ordinal within one read, not stable between reads).
        kind: :class:`LockKind`.
        mode: ``ADVISORY``, ``MANDATORY`` (kernels before 5.15), ``MSNFS``, or a lease state
            (``ACTIVE``, ``BREAKING``, ``BREAKER``).
        access: :class:`Access`.
        pid: the PID shown (in the reader's PID namespace), ``None`` for ``-1`` (OFD locks).
        key: ``(major, minor, inode)``, or ``None`` for a lock without an inode (``<none>``).
        start: first byte (inclusive).
        end: last byte (inclusive), ``None`` for ``EOF`` (to the end of the file).
        waiter: True for a ``->`` line: a blocked request waiting on the lock above it, not a
            holder.
    """

    ordinal: int
    kind: LockKind
    mode: str
    access: Access
    pid: int | None
    key: FileKey | None
    start: int
    end: int | None
    waiter: bool = False

    @property
    def exclusive(self) -> bool:
        """True for a ``WRITE`` lock."""
        return self.access is Access.WRITE

    @property
    def whole_file(self) -> bool:
        """True when the lock covers byte 0 to the end of the file."""
        return self.start == 0 and self.end is None


def key_text(key: FileKey) -> str:
    """``(0xfe, 0, 402117)`` -> ``"fe:00:402117"``: the token ``/proc/locks`` prints."""
    return f"{key[0]:02x}:{key[1]:02x}:{key[2]}"


def file_key(st: os.stat_result) -> FileKey:
    """``(major, minor, inode)`` of a ``stat`` result. On btrfs subvolumes (and some overlayfs
    setups) ``st_dev`` differs from the superblock device that ``/proc/locks`` prints; there
    :func:`fd_holders` (which compares ``stat`` with ``stat``) still finds the holders.

    Raises:
        OSError: ``ENOTSUP`` on Windows (no device numbers, nor a ``/proc/locks`` to match).
    """
    if sys.platform == "win32":  # pragma: no cover - callers read /proc/locks first
        raise OSError(errno.ENOTSUP, "device numbers are not available on Windows")
    return (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)


_KINDS = {k.value: k for k in LockKind if k is not LockKind.UNKNOWN}
_ACCESS = {a.value: a for a in Access}


def _int(word: str, what: str, line: str, *, signed: bool = False) -> int:
    if word.isdigit() and word.isascii() and len(word) <= 20:
        return int(word)
    if signed and word[:1] == "-" and word[1:].isdigit() and word.isascii() and len(word) <= 20:
        return int(word)
    raise ParseError(f"{what} is not a number in /proc/locks line {line[:80]!r}")


def parse_line(line: str) -> KernelLock:
    """Parse one ``/proc/locks`` line (also the part after ``lock:\\t`` of an fdinfo line).

    Follows ``fs/locks.c: lock_get_status`` as quoted in ``docs/specs/devtool-locks.md``
    (§2.6): ``<id>: [-> ]TYPE MODE RW PID MAJ:MIN:INODE START END``; deeper waiters are
    indented before their ``->``; a lock without an inode prints ``<none>:0``.

    Raises:
        ParseError: the line does not have that shape (too few fields, an unknown TYPE or RW,
            a field that is not a number).
    """
    parts = line.split()
    waiter = len(parts) > 1 and parts[1] == "->"
    if waiter:
        del parts[1]
    if len(parts) < 8:
        raise ParseError(f"too few fields in /proc/locks line {line[:80]!r}")
    ident, kind, mode, rw, pid, where, start, end = parts[:8]
    if not ident.endswith(":"):
        raise ParseError(f"no '<id>:' at the start of /proc/locks line {line[:80]!r}")
    lock_kind = _KINDS.get(kind)
    access = _ACCESS.get(rw)
    if lock_kind is None or access is None:
        raise ParseError(f"unknown lock type or access in /proc/locks line {line[:80]!r}")
    key: FileKey | None = None
    if not where.startswith("<none>"):
        fields = where.split(":")
        if len(fields) != 3:
            raise ParseError(f"no MAJ:MIN:INODE in /proc/locks line {line[:80]!r}")
        try:
            key = (int(fields[0], 16), int(fields[1], 16), _int(fields[2], "inode", line))
        except ValueError:
            raise ParseError(f"bad device number in /proc/locks line {line[:80]!r}") from None
    pid_n = _int(pid, "PID", line, signed=True)
    return KernelLock(
        ordinal=_int(ident[:-1], "id", line),
        kind=lock_kind,
        mode=mode,
        access=access,
        pid=pid_n if pid_n > 0 else None,
        key=key,
        start=_int(start, "start", line),
        end=None if end == "EOF" else _int(end, "end", line),
        waiter=waiter,
    )


def parse_proc_locks(text: str, *, waiters: bool = False) -> list[KernelLock]:
    """Every lock of a ``/proc/locks`` text, in order. Pure: no file is read.

    Args:
        text: the content of ``/proc/locks``.
        waiters: also return the ``->`` lines (blocked requests); default only holders.

    Lines that do not parse (:func:`parse_line`) are skipped: a future kernel's new lock type
    must not hide the others. Never raises.
    """
    out: list[KernelLock] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            lock = parse_line(line)
        except ParseError:
            continue
        if waiters or not lock.waiter:
            out.append(lock)
    return out


def locks_on(text: str, keys: Iterable[FileKey], *, waiters: bool = False
             ) -> dict[FileKey, list[KernelLock]]:
    """The locks of ``text`` (``/proc/locks``) on the files ``keys``, filter first: each line
    is split and its ``MAJ:MIN:INODE`` token looked up before anything else is parsed (19 ms
    for 10 000 lines in the spec's measurements). Never raises."""
    wanted = {key_text(k): k for k in keys}
    out: dict[FileKey, list[KernelLock]] = {}
    if not wanted:
        return out
    for line in text.splitlines():
        parts = line.split(None, 7)
        if len(parts) < 6:
            continue
        token = parts[6] if parts[1] == "->" and len(parts) > 6 else parts[5]
        key = wanted.get(token)
        if key is None:
            continue
        try:
            lock = parse_line(line)
        except ParseError:
            continue
        if waiters or not lock.waiter:
            out.setdefault(key, []).append(lock)
    return out


# --------------------------------------------------------------------------------------------
# who really holds it: /proc/<pid>/fd and fdinfo
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FdHolder:
    """A process with a descriptor open on a file.

    Attributes:
        pid: the process.
        fd: the descriptor number.
        locks: the locks held through that descriptor (its fdinfo ``lock:`` lines); empty when
            the file is only open.
    """

    pid: int
    fd: int
    locks: tuple[KernelLock, ...] = ()


def _pids(proc: str) -> list[int]:
    try:
        return [int(n) for n in os.listdir(proc) if n.isdigit()]
    except OSError:
        return []


def fdinfo_locks(text: str) -> tuple[KernelLock, ...]:
    """The locks in the text of an fdinfo file (its ``lock:\\t…`` lines). Never raises."""
    out = []
    for line in text.splitlines():
        if line.startswith("lock:"):
            try:
                out.append(parse_line(line[5:]))
            except ParseError:
                continue
    return tuple(out)


def fd_holders(st: os.stat_result, *, pids: Iterable[int] | None = None,
               proc: str = "/proc") -> list[FdHolder]:
    """Processes with a descriptor open on the file whose ``stat`` is ``st`` (same ``st_dev``
    and ``st_ino``), each with the locks held through it (``/proc/<pid>/fdinfo/<fd>``).

    This names the holder of an OFD lock (PID ``-1``) and of an flock whose listed PID is dead
    (docs/specs/devtool-locks.md §2.6, "The PID can be stale"). Only processes this user may inspect
    are seen (root sees all). Cost: one ``stat`` per open descriptor of ``pids`` (default every
    process).
    Never raises.
    """
    want = (st.st_dev, st.st_ino)
    out: list[FdHolder] = []
    for pid in _pids(proc) if pids is None else pids:
        base = f"{proc}/{pid}"
        try:
            fds = os.listdir(f"{base}/fd")
        except OSError:
            continue
        for name in fds:
            try:
                fst = os.stat(f"{base}/fd/{name}")
            except OSError:
                continue
            if (fst.st_dev, fst.st_ino) != want:
                continue
            try:
                with open(f"{base}/fdinfo/{name}", encoding="ascii", errors="replace") as f:
                    info = f.read(1 << 20)
            except OSError:
                info = ""
            out.append(FdHolder(pid, int(name), fdinfo_locks(info)))
    return out


def pid_running(pid: int, proc: str = "/proc") -> bool:
    """True when ``pid`` exists and is not a zombie (``/proc/<pid>/stat`` state ``Z``; an
    unreaped zombie still shows its PID). Never raises."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            data = f.read(4096)
    except OSError:
        return False
    close = data.rfind(b")")
    state = data[close + 2: close + 3] if close >= 0 else b""
    return state not in (b"Z", b"X", b"")


@dataclass(frozen=True, slots=True)
class Holding:
    """A kernel lock on a watched file and who holds it.

    Attributes:
        path: the file (the lock's anchor).
        lock: the ``/proc/locks`` entry.
        pids: the processes that hold it: the listed PID when it runs; for flock/OFD locks
            whose listed PID is dead or ``-1``, the processes whose descriptor carries the
            lock (fdinfo). Empty when nobody could be named (another user's processes).
        confirmed_by: ``"proc_locks"`` (the listed PID runs), ``"fdinfo"`` (the holders
            were found through their descriptors), ``"getlk"`` (``F_GETLK`` named the PID of
            a POSIX lock, :mod:`core.kernel.getlk`), ``"open_files"`` (nobody could be named
            as the holder; ``open_by`` lists who has the file open) or ``"none"``.
        open_by: processes that have the file **open**, which is not the same as holding its
            lock: candidates for a lock of unknown holder (``F_GETLK`` PID ``-1`` on macOS,
            docs/specs/devtool-locks.md §2.6 "macOS"). Empty otherwise; never copied into ``pids``.
    """

    path: str
    lock: KernelLock
    pids: tuple[int, ...]
    confirmed_by: str
    open_by: tuple[int, ...] = ()


def _confirm(path: str, st: os.stat_result, lock: KernelLock, proc: str) -> Holding:
    # /proc/locks names the process that *took* an flock/OFD lock; it holds it only while a
    # descriptor of its own carries it (it may have closed its copy after a fork, or died and
    # had its PID reused): trusted when its descriptors say so or cannot be read here
    if lock.pid is not None and pid_running(lock.pid, proc) and (
            not lock.kind.per_description or _carries(lock.pid, st, lock, proc) is not False):
        return Holding(path, lock, (lock.pid,), "proc_locks")
    if not lock.kind.per_description:
        # a POSIX lock dies with its process: a dead listed PID means the line was read just
        # before the kernel dropped it; report it with nobody named
        return Holding(path, lock, (), "none")
    found = sorted({h.pid for h in fd_holders(st, proc=proc)
                    if any(_same_lock(lock, mine) for mine in h.locks)})
    return Holding(path, lock, tuple(found), "fdinfo" if found else "none")


def _carries(pid: int, st: os.stat_result, lock: KernelLock, proc: str) -> bool | None:
    """Whether a descriptor of process ``pid`` on the file ``st`` carries ``lock`` (fdinfo);
    ``None`` when its descriptors cannot be read (another user's process, when not root)."""
    if any(_same_lock(lock, mine) for h in fd_holders(st, pids=(pid,), proc=proc)
           for mine in h.locks):
        return True
    try:  # not carried, or not readable here: only the second is "unknown"
        os.listdir(f"{proc}/{pid}/fd")
    except OSError:
        return None
    return False


def _same_lock(a: KernelLock, b: KernelLock) -> bool:
    return (a.kind, a.access, a.start, a.end) == (b.kind, b.access, b.start, b.end)


def kernel_holders(paths: Iterable[str], *, text: str | None = None, proc: str = "/proc",
                   source: str = "auto") -> dict[str, list[Holding]]:
    """The kernel locks held on each of ``paths`` and their holders.

    Args:
        paths: files to look up (``lstat``: a symlink is never followed, so it never matches;
            paths that cannot be ``lstat``-ed or are not regular files are left out).
        text: a ``/proc/locks`` text already read (then only it is consulted).
        proc: the proc mount (tests).
        source: ``"auto"`` (default): ``/proc/locks`` read within bounds
            (:func:`core.kernel.table.read_table`), each file asked through ``F_GETLK`` too
            when it was cut off; ``F_GETLK`` alone when it cannot be read (macOS, BSD, a
            restricted container view); ``"proc"``: ``/proc/locks`` only (within bounds);
            ``"getlk"``: ``F_GETLK`` per file (:func:`core.kernel.getlk.getlk`) even where
            ``/proc/locks`` exists.

    Through ``F_GETLK`` a file has at most one :class:`Holding`: a PID -> ``POSIX``
    (``confirmed_by="getlk"``); PID ``-1`` on Linux -> ``OFDLCK``, named through fdinfo;
    elsewhere ``UNKNOWN`` (flock or OFD on macOS), ``open_by`` listing who has it open.

    Returns:
        ``path -> [Holding, ...]`` for the paths that have a lock (waiters left out). A path
        absent has no lock **the source shows**: ``F_GETLK`` on Linux misses flock locks, a
        ``/proc/locks`` cut off at its bounds may miss any; to decide "no kernel lock" use
        :func:`core.kernel.lookup.look_up` (docs/verdicts.md, "When the kernel's lock table
        is too large").

    Raises:
        OSError: ``/proc/locks`` cannot be read (only when ``text`` is not given) and
            ``source`` is ``"proc"`` or ``F_GETLK`` is unavailable too (Windows); or, through
            ``F_GETLK``, no file could be opened or queried (unreadable, a file system without
            locks): "nothing known", not "no lock". Files that fail among others are left out.
        ValueError: an unknown ``source``.
    """
    if source not in ("auto", "proc", "getlk"):
        raise ValueError(f"unknown kernel-lock source {source!r}")
    stats = _regular_files(paths)
    if not stats:
        return {}
    if text is None and source != "getlk":
        try:
            table = read_table(os.path.join(proc, "locks"))
        except OSError:
            if source == "proc" or not kernel_getlk.available():
                raise
        else:
            out = held_in_text(table.text, stats, proc)
            if source == "auto" and not table.complete and kernel_getlk.available():
                for path, held in _getlk_holders(stats, proc, strict=False).items():
                    out.setdefault(path, held)  # a POSIX/OFD lock beyond the cut
            return out
    if text is None:
        return _getlk_holders(stats, proc)
    return held_in_text(text, stats, proc)


def held_in_text(text: str, stats: Mapping[FileKey, list[tuple[str, os.stat_result]]],
                 proc: str = "/proc") -> dict[str, list[Holding]]:
    """The locks ``text`` (``/proc/locks``) shows on the files of ``stats`` (``file_key`` ->
    ``[(path, stat), ...]``), their flock/OFD holders confirmed through fdinfo. Never raises."""
    out: dict[str, list[Holding]] = {}
    for key, locks in locks_on(text, stats).items():
        for path, st in stats[key]:
            out[path] = [_confirm(path, st, lock, proc) for lock in locks]
    return out


def _regular_files(paths: Iterable[str]) -> dict[FileKey, list[tuple[str, os.stat_result]]]:
    stats: dict[FileKey, list[tuple[str, os.stat_result]]] = {}
    for path in paths:
        try:
            st = os.lstat(path)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode):
            stats.setdefault(file_key(st), []).append((path, st))
    return stats


def _getlk_holders(stats: Mapping[FileKey, list[tuple[str, os.stat_result]]], proc: str,
                   *, strict: bool = True) -> dict[str, list[Holding]]:
    """``F_GETLK`` on each file (see :func:`kernel_holders`); with ``strict``, raises the
    ``OSError`` of the last file when no file could be asked, else never raises."""
    out: dict[str, list[Holding]] = {}
    unnamed: list[str] = []
    failed: OSError | None = None
    answered = 0
    for key, entries in stats.items():
        try:
            found = kernel_getlk.getlk(entries[0][0])
        except FileNotFoundError:
            continue  # gone since the lstat: no lock to report
        except OSError as exc:
            failed = exc
            continue
        answered += 1
        if found is None:
            continue
        kind = LockKind(found.kind)
        lock = KernelLock(0, kind, "ADVISORY", Access(found.access), found.pid, key,
                          found.start, found.end)
        for path, st in entries:
            if found.pid is not None:
                out[path] = [Holding(path, lock, (found.pid,), "getlk")]
            elif kind is LockKind.OFDLCK:
                out[path] = [_confirm(path, st, lock, proc)]
            else:
                out[path] = [Holding(path, lock, (), "none")]
                unnamed.append(path)
    if strict and failed is not None and not answered:
        raise failed  # no file could be queried: nothing known (not "no lock")
    if unnamed:
        for path, pids in kernel_getlk.open_by(unnamed).items():
            out[path] = [replace(h, open_by=pids, confirmed_by="open_files") for h in out[path]]
    return out
