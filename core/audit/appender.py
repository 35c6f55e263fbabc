"""The process's open audit logs and its chain heads written in batches.

Part of :mod:`core.audit`; used by :mod:`core.audit.write`. Two costs of an append are paid
once instead of per entry: the log stays open (at most :data:`MAX_OPEN`, re-opened when
renamed, removed or replaced; docs/audit.md, "Guarantees": concurrent writers), and the chain
head is written every :data:`HEAD_EVERY` appends or :data:`HEAD_MAX_DELAY` seconds, and what a
crash can lose then (docs/audit.md, "Chain heads written in batches").

A test may set :data:`crash_hook` (called with the name of each step of an append) to kill
the process at any step.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import stat
import sys
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from core import seam
from core.audit import heads as audit_heads
from core.audit.heads import ChainHead
from core.audit.model import LogRefused
from core.fsutil import describe_mode, lock_within

HEAD_EVERY = 16
"""A chain head is written at least every this many appends to one log by one process."""

HEAD_MAX_DELAY = 1.0
"""Seconds: an append coming this long after the last head write of its log writes its head
at once (a process appending rarely writes every head)."""

MAX_OPEN = 16
"""Most audit logs one process keeps open (the least recently used is closed beyond it)."""

IDLE_CLOSE = 1.0
"""Seconds: a log no append of this process used for this long is closed and its held-back
head written, by a daemon thread that runs only while a log is open, so a kept-open log never
keeps a file system busy (an unmount) for long."""

crash_hook: Callable[[str], None] | None = None
"""Tests only: called with ``"open"``, ``"locked"``, ``"written"``, ``"synced"``, ``"head"``,
``"unlocked"`` as an append reaches each step (a crash-injection test kills the process)."""

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOCTTY = getattr(os, "O_NOCTTY", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)
APPEND_FLAGS = (
    os.O_RDWR | os.O_APPEND | os.O_CREAT | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_NOCTTY
    | _O_BINARY
)  # fmt: skip
LOG_MODE = 0o644
_READ_FLAGS = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_NOCTTY | _O_BINARY
_REOPEN_TRIES = 10
_WIN_LOCK_OFFSET = 0x7FFF_FFF0  # a byte past any real log: locking it never blocks readers


class _Open(NamedTuple):
    """An open log: descriptor, ``(st_dev, st_ino)`` and the process that opened it."""

    fd: int
    ident: tuple[int, int]
    pid: int


class Line(NamedTuple):
    """Where a line this process appended is: the log file's ``(dev, ino)``, the line's first
    byte ``offset`` and ``end`` (just past its LF), its SHA-256 hex ``digest`` and the entry's
    ``written`` timestamp -- a :class:`~core.audit.heads.ChainHead` without its key, cheap to
    make at every append."""

    dev: int
    ino: int
    offset: int
    end: int
    digest: str
    written: str


class _Pending(NamedTuple):
    """The head of this process's last line in a log, not yet written (the key is computed
    when written), appends since the last head write, and when that was
    (``time.monotonic()``)."""

    head: Line | None
    appended: int
    written_at: float


_open: dict[str, _Open] = {}
_pending: dict[str, _Pending] = {}
_mutexes: dict[str, threading.Lock] = {}
_last_use: dict[str, float] = {}
_fresh: set[str] = set()  # logs opened since their last head write
_table_lock = threading.Lock()
_janitor: threading.Thread | None = None


def step(name: str) -> None:
    """Call :data:`crash_hook` (tests) at step ``name`` of an append."""
    hook = crash_hook
    if hook is not None:
        hook(name)


def mutex(log_path: str) -> threading.Lock:
    """The mutex the threads of this process take turns on for ``log_path``."""
    m = _mutexes.get(log_path)
    if m is None:
        with _table_lock:
            m = _mutexes.setdefault(log_path, threading.Lock())
    return m


def check_file(st: os.stat_result) -> None:
    """Refuse (:class:`~core.audit.model.LogRefused`) a log that is not a regular file or
    belongs to another user (who could rewrite what we add)."""
    if not stat.S_ISREG(st.st_mode):
        kind = describe_mode(st.st_mode) or "not a regular file"
        raise LogRefused(errno.EINVAL, f"is {kind}, not an audit log")
    if sys.platform != "win32" and st.st_uid != os.geteuid():  # Windows: no owners
        raise LogRefused(
            errno.EPERM,
            f"belongs to another user ({_user_name(st.st_uid)}), who could rewrite what we add; "
            "Lockwarden appends only to your own logs",
        )


def _user_name(uid: int) -> str:
    """``"name, uid N"`` for a uid (``"uid N"`` when it has no name), for messages."""
    if sys.platform == "win32":  # no pwd there
        return f"uid {uid}"
    import pwd

    try:
        return f"{pwd.getpwuid(uid).pw_name}, uid {uid}"
    except KeyError:
        return f"uid {uid}"


def _descriptor(log_path: str) -> int:
    """This process's open descriptor of ``log_path`` (opened and checked when there is none).
    Raises OSError (ELOOP for a symlink) and LogRefused."""
    o = _open.get(log_path)
    pid = os.getpid()
    if o is not None and o.pid == pid:
        return o.fd
    fd = os.open(log_path, APPEND_FLAGS, LOG_MODE)
    try:
        st = os.fstat(fd)
        check_file(st)
    except BaseException:
        os.close(fd)
        raise
    with _table_lock:
        if len(_open) >= MAX_OPEN:
            _evict()
        _open[log_path] = _Open(fd, (st.st_dev, st.st_ino), pid)
        _fresh.add(log_path)
        _start_janitor()
    return fd


def _start_janitor() -> None:
    """Start the thread that closes idle logs, unless it runs (caller holds the table lock)."""
    global _janitor
    if _janitor is None:
        _janitor = threading.Thread(target=_janitor_run, name="lockwarden-audit-logs",
                                    daemon=True)
        _janitor.start()


def _janitor_run() -> None:
    """Every :data:`IDLE_CLOSE` seconds close the logs idle that long (their held-back heads
    written first); end when none is open and no head is held back."""
    global _janitor
    while True:
        time.sleep(IDLE_CLOSE)  # a period, not a wait for an event
        tidy(time.monotonic() - IDLE_CLOSE)
        with _table_lock:
            if not _open and not any(p.head is not None for p in _pending.values()):
                _janitor = None
                return


def tidy(before: float = float("inf")) -> None:
    """Write the held-back head of, and close, every log last used before ``before``
    (``time.monotonic()``; default: all) that no thread is using. Never raises."""
    for path in list(_open) + [p for p in list(_pending) if p not in _open]:
        if _last_use.get(path, 0.0) > before:
            continue
        m = mutex(path)
        if not m.acquire(blocking=False):
            continue
        try:
            p = _pending.get(path)
            if p is not None and p.head is not None:
                _pending[path] = _Pending(None, 0, time.monotonic())
                _flush_one(path, p.head, 1.0)
            with _table_lock:
                _close(path)
        except Exception:  # a janitor's failure costs nothing written
            pass
        finally:
            m.release()


def close_all() -> None:
    """Write every held-back head and close every log this process keeps open (before an
    unmount; the logs are opened again by the next append). Never raises."""
    flush_heads()
    tidy()


def _evict() -> None:
    """Close the least recently opened logs no thread is using (caller holds the table lock)."""
    for path in list(_open)[: len(_open) - MAX_OPEN + 1]:
        m = _mutexes.get(path)
        if m is not None and m.acquire(blocking=False):
            try:
                _close(path)
            finally:
                m.release()


def _close(log_path: str) -> None:
    """Forget (and close, when this process opened it) the descriptor of ``log_path``."""
    o = _open.pop(log_path, None)
    if o is not None and o.pid == os.getpid():
        with contextlib.suppress(OSError):
            os.close(o.fd)


def forget(log_path: str) -> None:
    """Close this process's descriptor of ``log_path`` (after an I/O error on it)."""
    with _table_lock:
        _close(log_path)


def lock_log(log_path: str, timeout: float) -> tuple[int, os.stat_result]:
    """Open (or reuse) the log at ``log_path``, take its kernel lock and return the descriptor
    and its ``fstat``, the path still naming that very file. The caller holds :func:`mutex`
    and releases the lock with :func:`unlock`.

    Raises LogRefused (not a regular file of this user), ``TimeoutError`` (another process
    kept the lock past ``timeout`` seconds), OSError from the OS (EAGAIN when the log kept
    being replaced).
    """
    seam.step("audit", log_path)
    _last_use[log_path] = time.monotonic()
    for _attempt in range(_REOPEN_TRIES):
        fd = _descriptor(log_path)
        step("open")
        try:
            lock(fd, timeout)
        except BaseException:
            forget(log_path)
            raise
        try:
            st = os.fstat(fd)
            check_file(st)
            if _still_at(log_path, st) and _writable(st):
                step("locked")
                return fd, st
        except BaseException:
            unlock(fd)
            forget(log_path)
            raise
        unlock(fd)
        forget(log_path)  # renamed, removed or replaced meanwhile: open (create) again
    raise OSError(errno.EAGAIN, "kept being replaced while we tried to append")


def _writable(st: os.stat_result) -> bool:
    """False when the owner's write permission was taken off the log since we opened it (a
    log frozen with ``chmod a-w``): the log is then opened afresh, which fails as it would
    have without a kept descriptor (root, whom permissions do not stop, excepted)."""
    if sys.platform == "win32":  # no root there
        return bool(st.st_mode & stat.S_IWUSR)
    return bool(st.st_mode & stat.S_IWUSR) or os.geteuid() == 0


def _still_at(log_path: str, st: os.stat_result) -> bool:
    """True when ``log_path`` still names the file ``st`` describes."""
    try:
        now = os.lstat(log_path)
    except FileNotFoundError:
        return False
    return (now.st_ino, now.st_dev) == (st.st_ino, st.st_dev)


def lock(fd: int, timeout: float) -> None:
    """Take an exclusive kernel lock on the open log ``fd``; on POSIX wait at most ``timeout``
    seconds, then raise ``TimeoutError`` (an ``OSError``: the caller falls back): a stopped or
    hostile process holding the log's lock must not hang every lock operation in the
    directory (:func:`core.fsutil.lock_within`)."""
    if sys.platform == "win32":  # pragma: no cover - not testable on Linux CI
        import msvcrt

        os.lseek(fd, _WIN_LOCK_OFFSET, os.SEEK_SET)
        while True:
            try:
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
                return
            except OSError as exc:  # LK_LOCK gives up after ~10 s; keep waiting
                if exc.errno not in (errno.EDEADLK, errno.EACCES):
                    raise
    if not lock_within(fd, timeout, pause=0.001, max_pause=0.05, what="audit log"):
        raise TimeoutError(
            errno.ETIMEDOUT,
            f"the audit log stayed locked by another process for {timeout:g} s",
        )


def unlock(fd: int) -> None:
    """Release the kernel lock :func:`lock` took. Never raises."""
    with contextlib.suppress(OSError):
        if sys.platform == "win32":  # pragma: no cover
            import msvcrt

            os.lseek(fd, _WIN_LOCK_OFFSET, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_UN)


def note_head(log_path: str, head: Line, now: bool) -> None:
    """This process just appended the line ``head`` describes to ``log_path``, holding the
    log's lock: write it as this user's chain head when ``now`` (an fsynced entry), when the
    log had to be opened for it (a first append, or the log was renamed, removed or replaced
    since: its head must name the new file at once) or when the batching rules of the module
    docstring say so, else keep it pending. Never raises."""
    p = _pending.get(log_path)
    t = time.monotonic()
    fresh = log_path in _fresh
    if (now or fresh or p is None or p.appended + 1 >= HEAD_EVERY
            or t - p.written_at >= HEAD_MAX_DELAY):
        step("head")
        _fresh.discard(log_path)
        _record(log_path, head)
        _pending[log_path] = _Pending(None, 0, t)
    else:
        _pending[log_path] = _Pending(head, p.appended + 1, p.written_at)


def _record(log_path: str, head: Line) -> None:
    """Write ``head`` as the chain head of ``log_path`` (its key computed now). Never raises."""
    with contextlib.suppress(Exception):
        audit_heads.record(ChainHead(audit_heads.head_key(log_path), *head))


def flush_heads(timeout: float = 1.0) -> None:
    """Write every pending chain head of this process (before a verify, at exit).

    Each is written under its log's kernel lock (waiting at most ``timeout`` seconds, else
    written without it) unless the head already recorded is newer evidence: a later line of
    the same file (another process of this user appended after us), or a line of the file now
    at the log's name when ours went to one renamed away since. Never raises.
    """
    for log_path in list(_pending):
        p = _pending.get(log_path)
        if p is None or p.head is None:
            continue
        with mutex(log_path):
            p = _pending.get(log_path)
            if p is None or p.head is None:
                continue
            _pending[log_path] = _Pending(None, 0, time.monotonic())
            _flush_one(log_path, p.head, timeout)


def _flush_one(log_path: str, head: Line, timeout: float) -> None:
    """Write ``head`` for ``log_path`` unless a newer one is recorded, holding the kernel lock
    of the file now at ``log_path`` (opened read-only, never created: a flush creates no
    log) when there is one and it can be had within ``timeout`` seconds. Never raises."""
    fd: int | None = None
    at_path: tuple[int, int] | None = None
    with contextlib.suppress(OSError):
        fd = os.open(log_path, _READ_FLAGS)
    try:
        if fd is not None:
            try:
                lock(fd, timeout)
            except OSError:
                os.close(fd)
                fd = None
        with contextlib.suppress(OSError):
            now = os.lstat(log_path)
            at_path = (now.st_dev, now.st_ino)
        stored = audit_heads.load(log_path)
        if stored is not None:
            same = (stored.dev, stored.ino) == (head.dev, head.ino)
            if same and stored.end >= head.end:
                return  # a later line of the same file is recorded (another process of ours)
            if not same and at_path == (stored.dev, stored.ino):
                return  # ours went to a file renamed away since; the recorded one is there
        _record(log_path, head)
    finally:
        if fd is not None:
            unlock(fd)
            os.close(fd)


def _after_fork_in_child() -> None:
    """In a forked child: never use (nor unlock) the parent's descriptors; close the copies,
    forget the parent's pending heads (the parent writes them) and renew the mutexes."""
    global _table_lock, _janitor
    _table_lock = threading.Lock()
    _janitor = None  # threads do not survive a fork
    for o in _open.values():
        with contextlib.suppress(OSError):
            os.close(o.fd)  # the parent's flock stays: its description is still open there
    _open.clear()
    _pending.clear()
    _mutexes.clear()
    _last_use.clear()
    _fresh.clear()


if sys.platform != "win32":  # no fork on Windows
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(flush_heads)
