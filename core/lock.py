"""Lock operations: acquire, release, reclaim, force release, refresh and wait
(DESIGN.md, "Lock operations"; docs/INTERFACES.md, ``core/lock.py``). The GUI, the CLI and the
Python API all go through these functions; no other module creates, rewrites or removes a lock.

Guarantees (see ``docs/engine.md`` for the reasoning and the measurements):

- **Acquire publishes a complete file atomically.** The lock is written to a temp file in the
  same directory (``.<name>.<token>.tmp``, ``O_CREAT|O_EXCL|O_NOFOLLOW``, mode 0644), fsynced,
  then hard-linked to the lock path: ``link()`` fails with ``EEXIST`` when the lock is held, so
  there is never a window where a reader sees a partial lock of ours and two acquirers can
  never both succeed. The temp name is unlinked and the directory fsynced. Where hard links
  are not supported (``EPERM``/``ENOTSUP``/``EXDEV``...), the specs' ``O_CREAT|O_EXCL`` + write +
  fsync is used instead. ``rename()`` never targets the lock path on acquire (it would replace a
  held lock: the defect of semats and Task MCP's ``atomic_lock``).
- **Release never deletes a successor's lock.** Under the directory guard the lock is checked
  in place (same inode and the exact bytes we wrote, token included) -- a lock that is not ours
  is left untouched and :class:`~core.errors.LockLost` raised -- then moved out to
  ``.<name>.<token>.rel``, checked again (against tools that replace files without the guard)
  and deleted; a file found foreign at that point is put back.
- **Reclaim is race-free.** Breakers serialise on a kernel lock (``flock`` on the lock's
  directory, :class:`core._exchange.DirGuard`), re-read and re-judge the file under it, then
  atomically *exchange* it with their complete new lock (``renameat2(RENAME_EXCHANGE)`` on
  Linux, ``renamex_np(RENAME_SWAP)`` on macOS) and verify that what came out is exactly the
  file judged (inode, device, size, mtime, bytes); otherwise they swap back. When N processes
  reclaim the same stale lock, exactly one wins and no fresh lock is ever removed. Without an
  exchange primitive the judged file is renamed out, verified, and our lock linked in (a
  foreign ``O_EXCL`` acquirer slipping in between just makes our link fail: ``LockHeld``).
- **Waiting is event-driven** (:mod:`core._waiter`): inotify on the directory plus a pidfd on
  a local holder, a 1 s poll as a fallback, and a wake-up at the exact moment a TTL or
  ``stale_after`` passes. A SIGKILLed holder of a Lockwarden lock is taken over within
  milliseconds.
- **Every operation is audited once** (:func:`core.audit.append`), naming the displaced holder
  and the reason for reclaims and forced releases.

Crash testing (test-only): when the environment variable ``LOCKWARDEN_CRASH_AT`` names one of
:data:`CRASH_POINTS`, the process calls ``os._exit(137)`` at that step.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import stat
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, NoReturn

from core import _exchange
from core._exchange import DirGuard, ExchangeUnsupported
from core.errors import (
    LockError,
    LockHeld,
    LockLost,
    LockTimeout,
    NotStale,
    UnreadableError,
)
from core.fsutil import (
    WRITE_EXCL_FLAGS,
    describe_mode,
    fsync_dir,
    read_lock_file,
    temp_path,
)
from core.policy import StalePolicy
from core.reasons import Code, Reason, render_all
from core.record import WRITABLE_FORMATS, FileInfo, Liveness, LockRecord, LockStatus, State

log = logging.getLogger("lockwarden.lock")

CRASH_ENV = "LOCKWARDEN_CRASH_AT"
"""Environment variable naming a crash point (test-only, see :data:`CRASH_POINTS`)."""

CRASH_POINTS: tuple[str, ...] = (
    "after_temp_create",  # empty temp file exists
    "after_temp_write",  # temp file complete and fsynced
    "after_link",  # lock published, temp name still present
    "after_temp_unlink",  # lock published, before directory fsync and audit
    "reclaim_after_guard",  # guard held, nothing changed yet
    "reclaim_after_exchange",  # new lock at the path, judged file at the temp name
    "reclaim_after_unlink_old",  # judged file removed, before audit
    "reclaim_after_rename_out",  # no-exchange fallback: judged file moved to .swap
    "release_after_rename_out",  # our lock moved to .rel, not yet removed
    "refresh_after_exchange",  # renewed lock at the path, old one at the temp name
)
"""Steps at which ``LOCKWARDEN_CRASH_AT`` makes the process exit with ``os._exit(137)``."""

POLL_INTERVAL = 1.0
"""Seconds between re-checks while waiting with directory events (the slow fallback poll)."""

POLL_NO_EVENTS = 0.25
"""Seconds between re-checks while waiting when no directory event source could be set up."""

_LINK_UNSUPPORTED = {
    errno.EPERM,
    errno.ENOTSUP,
    errno.EOPNOTSUPP,
    errno.EXDEV,
    errno.EMLINK,
    errno.ENOSYS,
}
_no_link_devs: set[int] = set()
_no_exchange_devs: set[int] = set()
_MAX_RETRIES = 50


def _new_token() -> str:
    """128 random bits as 32 lowercase hex digits (``os.urandom``, as ``secrets.token_hex``
    uses; importing :mod:`secrets` would cost the CLI ~9 ms)."""
    return os.urandom(16).hex()


def _link(src: str, dst: str) -> None:
    """``link(src, dst)`` without following a symlink at ``src`` where the OS can say so
    (``linkat`` without ``AT_SYMLINK_FOLLOW``); ``dst`` is never followed by ``link``."""
    if os.link in os.supports_follow_symlinks:
        os.link(src, dst, follow_symlinks=False)
    else:  # pragma: no cover - Windows: CreateHardLinkW
        os.link(src, dst)


def _put_back(moved: str, path: str) -> None:
    """Return a file that was moved out of ``path`` but is not the one expected (someone
    else's), without ever replacing what may be at ``path`` now. If ``path`` was taken in the
    meantime, the file stays under its temp name (recognisable, never deleted)."""
    try:
        _link(moved, path)
    except FileExistsError:
        log.warning("%s was taken meanwhile; the displaced file stays at %s", path, moved)
        return
    except OSError:  # not hard-linkable (a directory; no links on this file system)
        if not os.path.lexists(path):
            with contextlib.suppress(OSError):
                os.rename(moved, path)
        return
    _unlink_quiet(moved)


def _crash_point(step: str) -> None:
    """Test-only crash hook: ``os._exit(137)`` when ``LOCKWARDEN_CRASH_AT == step``."""
    if os.environ.get(CRASH_ENV) == step:
        os._exit(137)


def _now() -> datetime:
    return datetime.now(UTC)


def _audit(
    path: str,
    operation: str,
    *,
    result: str = "ok",
    details: dict[str, Any] | None = None,
    format: str | None = None,
) -> None:
    from core import audit

    try:
        w = audit.append(path, operation, result=result, details=details, format=format)
    except Exception as exc:  # auditing must never turn a done operation into a failure
        log.warning("audit entry for %s of %s not written: %s", operation, path, exc)
        return
    if w.error:
        log.warning("audit entry for %s of %s not written: %s", operation, path, w.error)


def _inspect(path: str, policy: StalePolicy) -> LockStatus:
    from core.inspect import inspect

    return inspect(path, policy=policy)


def _inspect_bytes(path: str, data: bytes, info: FileInfo, policy: StalePolicy) -> LockStatus:
    from core.inspect import inspect_bytes

    return inspect_bytes(path, data, info, policy=policy)


def _same_host(host: str | None) -> bool:
    if host is None:
        return True
    from core.liveness import same_host

    return same_host(host)


def _lock_path(path: str | os.PathLike[str]) -> str:
    """Absolute lock path after validation (DESIGN.md "Hostile directories").

    Raises:
        UnreadableError: the parent directory is missing or not a directory; or something
            that is not a regular file (symlink, FIFO, directory, socket, device) is at the
            path. Nothing is written in that case.
    """
    p = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(p)
    try:
        pst = os.stat(parent)
    except FileNotFoundError:
        raise UnreadableError(f"directory {parent} does not exist", path=p) from None
    except OSError as exc:
        raise UnreadableError(f"directory {parent}: {exc.strerror}", path=p) from None
    if not stat.S_ISDIR(pst.st_mode):
        raise UnreadableError(f"{parent} is not a directory", path=p)
    _check_regular(p)
    return p


def _check_regular(p: str) -> None:
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UnreadableError(exc.strerror or str(exc), path=p) from None
    kind = describe_mode(st.st_mode)
    if kind is not None:
        if stat.S_ISLNK(st.st_mode):
            raise UnreadableError(
                "is a symbolic link; Lockwarden never writes through links", path=p
            )
        raise UnreadableError(f"is {kind}, not a lock file; nothing was written", path=p)


def _write_temp(tmp: str, data: bytes) -> tuple[int, int]:
    """Create ``tmp`` exclusively (never through a symlink), write ``data``, fsync it.
    Returns the file's ``(inode, device)``."""
    try:
        fd = os.open(tmp, WRITE_EXCL_FLAGS, 0o644)
    except OSError as exc:
        raise LockError(
            f"cannot create a lock file in {os.path.dirname(tmp)}: "
            f"{exc.strerror or exc}"
        ) from exc
    try:
        _crash_point("after_temp_create")
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    _crash_point("after_temp_write")
    return st.st_ino, st.st_dev


def _unlink_quiet(p: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(p)


def _read_regular(p: str) -> tuple[bytes, FileInfo] | None:
    """Bytes and identity of the regular file at ``p``; None if it is missing or not a
    readable regular file."""
    try:
        return read_lock_file(p)
    except (FileNotFoundError, UnreadableError):
        return None


def _holder_summary(status: LockStatus) -> dict[str, Any]:
    return status.to_dict()


def _describe(status: LockStatus) -> str:
    rec = status.record
    who = ""
    if rec is not None:
        if rec.pid is not None:
            who = f" by PID {rec.pid}" + (f" on {rec.host}" if rec.host else "")
        elif rec.holder:
            who = f" by {rec.holder}"
    why = render_all(status.reasons)
    return f"{status.path} is {status.state.value}{who}" + (f" ({why})" if why else "")


class _Outcome:
    """Result of one guarded take-over attempt."""

    __slots__ = ("displaced", "kind", "status")

    def __init__(self, kind: str, status: LockStatus, displaced: LockStatus | None = None):
        # "won", "published" (path was free), "refused", "retry", "lost_race" (we removed the
        # stale lock, someone else took the free path before our link)
        self.kind = kind
        self.status = status
        self.displaced = displaced


class Lock:
    """One lock at ``path``, taken and given back through the engine.

    Args:
        path: the lock file path (its directory must exist).
        tag: human description written into the lock (sema ``tag``; ``metadata.tag`` for
            task-mcp; the ``agent_id`` for af-ledger). Control characters become spaces.
        ttl: lease length in seconds, or None. For ``task-mcp`` the spec's default
            (:func:`core.formats.taskmcp.default_ttl`, local/interactive: 3600 s) applies when
            None.
        format: ``"sema"`` (default), ``"task-mcp"`` or ``"af-ledger"``.
        stale_after: seconds; another tool's lock whose holder is not alive becomes stale when
            older than this (:class:`core.policy.StalePolicy`).
        holder_pid: the PID recorded as holder (default: this process). The CLI passes its
            parent shell's PID so the lock lives as long as the shell.
        auto_refresh: with a TTL, renew the lock at 75% of the TTL in a daemon thread (spec 004
            "Auto-Refresh Mechanism"). A lost lock is reported (``lost`` is set, a ``lost``
            audit entry and a logging warning), never silently re-taken.

    Attributes:
        path: absolute lock path. ``lost``: :class:`threading.Event` set when the lock was
        found to be no longer ours. ``reclaimed_from``: the stale lock this acquisition
        replaced, or None.

    Raises:
        ValueError: unknown format, a TTL that is not a positive finite number, or
            ``auto_refresh`` without a TTL.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        tag: str | None = None,
        ttl: float | None = None,
        format: str = "sema",
        stale_after: float = 3600.0,
        holder_pid: int | None = None,
        auto_refresh: bool = False,
    ) -> None:
        if format not in WRITABLE_FORMATS:
            raise ValueError(
                f"Lockwarden cannot write {format!r} locks; use one of {WRITABLE_FORMATS}"
            )
        if ttl is not None and not (math.isfinite(ttl) and ttl > 0):
            raise ValueError(f"ttl must be a positive number of seconds, not {ttl!r}")
        if format == "task-mcp" and ttl is None:
            from core.formats import taskmcp

            ttl = taskmcp.default_ttl("local", "interactive")
        if auto_refresh and ttl is None:
            raise ValueError("auto_refresh needs a ttl")
        self.path = os.path.abspath(os.fspath(path))
        self.tag = tag
        self.ttl = ttl
        self.format = format
        self.stale_after = stale_after
        self.holder_pid = holder_pid
        self.auto_refresh = auto_refresh
        self.policy = StalePolicy(stale_after=stale_after)
        self.lost = threading.Event()
        self.reclaimed_from: LockStatus | None = None
        self._mutex = threading.RLock()
        self._owner_thread: int | None = None  # thread that acquired (for ``with``)
        self._token: str | None = None
        self._record: LockRecord | None = None
        self._data: bytes | None = None
        self._ident: tuple[int, int] | None = None
        self._stop_refresh: threading.Event | None = None
        self._extra_metadata: dict[str, Any] = {}
        self._start_cache: dict[int, tuple[float, str | None]] = {}

    # -- properties -----------------------------------------------------------------------
    @property
    def is_held(self) -> bool:
        """True while this object holds the lock (acquired, not released, not found lost)."""
        return self._token is not None

    @property
    def token(self) -> str | None:
        """The 128-bit hex token of the current acquisition, or None."""
        return self._token

    @property
    def record(self) -> LockRecord | None:
        """The lock as written by the current acquisition (or last refresh), or None."""
        return self._record

    def __repr__(self) -> str:
        state = "held" if self.is_held else ("lost" if self.lost.is_set() else "free")
        return f"<Lock {self.path!r} {self.format} {state}>"

    # -- building the lock ----------------------------------------------------------------
    def _pid(self) -> int:
        return self.holder_pid if self.holder_pid is not None else os.getpid()

    def _build(self, token: str, now: datetime) -> tuple[LockRecord, bytes]:
        from core import formats
        from core.liveness import hostname, process_identity, process_start_time

        pid = self._pid()
        cached = self._start_cache.get(pid)
        if cached is None:
            start = process_start_time(pid)
            proc = process_identity(pid)
            if start is not None and pid == os.getpid():
                self._start_cache[pid] = (start, proc)
        else:
            start, proc = cached
        if start is None:
            raise LockError(f"holder process {pid} does not exist; cannot take {self.path}")
        host = hostname()
        record: LockRecord
        if self.format == "sema":
            from core.formats import sema

            record = sema.make_record(
                self.path, pid=pid, timestamp=now, tag=self.tag, host=host, start=start,
                token=token, ttl=self.ttl, proc=proc,
            )
        elif self.format == "task-mcp":
            from core.formats import taskmcp

            metadata = taskmcp.default_metadata(pid)
            if self.tag is not None:
                metadata["tag"] = self.tag
            metadata.update(self._extra_metadata)
            assert self.ttl is not None
            record = taskmcp.make_record(
                self.path, owner=taskmcp.default_owner(pid, host), since=now, ttl=self.ttl,
                metadata=metadata, token=token, start=start, proc=proc,
            )
        else:
            agent = self.tag or f"lockwarden-pid-{pid}@{host}"
            record = LockRecord(
                path=self.path, format=self.format, holder=agent, pid=pid, host=host,
                acquired_at=now, token=token, start=start, proc=proc,
            )
        # make_record already serialised it (raw is exactly those bytes, decoded)
        data = record.raw.encode("utf-8") if record.raw else formats.serialize(record)
        return record, data

    # -- acquire --------------------------------------------------------------------------
    def acquire(self, timeout: float | None = None, blocking: bool = True) -> Lock:
        """Take the lock; returns ``self``.

        Args:
            timeout: seconds to wait at most when ``blocking`` (None: no limit).
            blocking: wait while the lock is held by someone else. Waiting is event-driven
                (directory events, the holder's exit) with a 1 s fallback poll.

        A lock found stale (DESIGN.md stale policy via :func:`core.inspect.inspect`) is
        reclaimed race-free on the way (see the module docstring); ``reclaimed_from`` then
        holds its status.

        Raises:
            LockHeld: not blocking and the lock is held (``.status`` is the holder's verdict).
            LockTimeout: blocking and ``timeout`` passed (``.status``: last verdict seen).
            UnreadableError: the path is a symlink, FIFO, directory or device, or its
                directory is missing; nothing is written.
            LockError: this object already holds the lock; the holder PID does not exist.
        """
        with self._mutex:
            if self.is_held:
                raise LockError(f"{self.path} is already held by this Lock object")
        _lock_path(self.path)
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        status = self._attempt()
        if status is None:
            return self
        if not blocking:
            _audit(self.path, "acquire_refused", result="held",
                   details={"holder": _holder_summary(status)}, format=self.format)
            raise LockHeld(f"lock held: {_describe(status)}", status)
        try:
            _wait_until(self.path, self.policy, status, deadline, timeout,
                        lambda: self._attempt(precheck=True))
        except LockTimeout as exc:
            _audit(self.path, "acquire_refused", result="timeout",
                   details={"holder": _holder_summary(exc.status) if exc.status else None,
                            "timeout": timeout}, format=self.format)
            raise
        return self

    def _attempt(self, precheck: bool = False) -> LockStatus | None:
        """One try: publish, or reclaim a stale lock. None when we now hold the lock, else
        the verdict on the lock that stops us. ``precheck``: look first, so that waiters woken
        together do not each write and fsync a temp file for a lock that is held again."""
        if precheck and os.path.lexists(self.path):
            seen = _inspect(self.path, self.policy)
            if seen.state not in (State.FREE, State.STALE):
                if seen.state is State.UNREADABLE and seen.record is None:
                    _check_regular(self.path)
                return seen
        token = _new_token()
        record, data = self._build(token, _now())
        tmp = temp_path(self.path, token)
        ident = _write_temp(tmp, data)
        try:
            status: LockStatus | None = None
            for _ in range(_MAX_RETRIES):
                if self._publish(tmp, data):
                    self._took(token, record, data, ident, tmp_linked=tmp)
                    _audit(self.path, "acquire", details=self._details(), format=self.format)
                    return None
                status = _inspect(self.path, self.policy)
                if status.state is State.FREE:
                    continue
                if status.state is State.UNREADABLE and status.record is None:
                    _check_regular(self.path)  # symlink/FIFO/dir slipped in: clear error
                if status.state is not State.STALE:
                    return status
                out = self._take_over(tmp, ident, data, status, _accept_stale)
                if out.kind == "published":
                    self._took(token, record, data, ident, tmp_linked=tmp)
                    _audit(self.path, "acquire", details=self._details(), format=self.format)
                    return None
                if out.kind == "won":
                    assert out.displaced is not None
                    self._took(token, record, data, ident, tmp_linked=None)
                    self.reclaimed_from = out.displaced
                    _audit(self.path, "reclaim", details=self._details(
                        displaced=_holder_summary(out.displaced),
                        reason=render_all(out.displaced.reasons) or "stale"),
                        format=self.format)
                    return None
                status = out.status
                if out.kind == "lost_race":
                    self._audit_lost_race(out)
                if out.kind in ("refused", "lost_race"):
                    return status
            return status
        finally:
            _unlink_quiet(tmp)

    def _publish(self, tmp: str, data: bytes) -> bool:
        """Make the complete temp file the lock: ``link(tmp, path)``; ``O_EXCL`` create where
        hard links are not supported. False when something is already at the path."""
        dev = os.lstat(tmp).st_dev if _no_link_devs else -1
        if dev not in _no_link_devs:
            try:
                _link(tmp, self.path)
                _crash_point("after_link")
                return True
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno not in _LINK_UNSUPPORTED:
                    raise
                _no_link_devs.add(os.lstat(tmp).st_dev)
        # specs' protocol: O_CREAT|O_EXCL, write, fsync (a reader may see it partial)
        try:
            fd = os.open(self.path, WRITE_EXCL_FLAGS, 0o644)
        except FileExistsError:
            return False
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        except BaseException:
            # our own partial file would stay "unreadable" forever: take it back
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            raise
        finally:
            os.close(fd)
        return True

    def _took(
        self,
        token: str,
        record: LockRecord,
        data: bytes,
        ident: tuple[int, int],
        *,
        tmp_linked: str | None,
    ) -> None:
        """Bookkeeping once the path holds our lock."""
        if tmp_linked is not None:
            _unlink_quiet(tmp_linked)
            _crash_point("after_temp_unlink")
        if _no_link_devs and ident[1] in _no_link_devs:
            with contextlib.suppress(OSError):
                st = os.lstat(self.path)
                ident = (st.st_ino, st.st_dev)  # the O_EXCL fallback wrote a new inode
        with contextlib.suppress(OSError):
            fsync_dir(os.path.dirname(self.path))
        with self._mutex:
            self._token = token
            self._record = record
            self._data = data
            self._ident = ident
            self._owner_thread = threading.get_ident()
            self.lost.clear()
            self.reclaimed_from = None
        if self.auto_refresh and self.ttl is not None:
            self._start_refresher(token)

    def _details(self, **more: Any) -> dict[str, Any]:
        d: dict[str, Any] = {"token": self._token, "holder_pid": self._pid()}
        if self.tag is not None:
            d["tag"] = self.tag
        if self.ttl is not None:
            d["ttl"] = self.ttl
        d.update(more)
        return d

    # -- guarded take-over ----------------------------------------------------------------
    def _take_over(
        self,
        tmp: str,
        ident: tuple[int, int],
        data: bytes,
        judged: LockStatus,
        accept: Callable[[LockStatus], bool],
    ) -> _Outcome:
        """Replace the lock at the path by our complete temp file ``tmp``, under the guard,
        if (re-read and re-judged under the guard) it is still the judged file and
        ``accept`` approves the new verdict."""
        with DirGuard(os.path.dirname(self.path)) as guard:
            _crash_point("reclaim_after_guard")
            cur = _read_regular(self.path)
            if cur is None:
                status = _inspect(self.path, self.policy)
                if status.state is State.FREE and self._publish(tmp, data):
                    return _Outcome("published", status)
                if status.state is State.UNREADABLE and status.record is None:
                    _check_regular(self.path)
                return _Outcome("retry", status)
            cur_data, cur_info = cur
            now_status = _inspect_bytes(self.path, cur_data, cur_info, self.policy)
            if judged.file is not None and cur_info != judged.file:
                return _Outcome("retry", now_status)  # another file now: judge it afresh
            if not accept(now_status):
                return _Outcome("refused", now_status)
            if cur_info.dev in _no_exchange_devs:
                return self._fallback_take_over(guard, tmp, data, cur_data, cur_info, now_status)
            try:
                _exchange.exchange(tmp, self.path)
            except ExchangeUnsupported:
                _no_exchange_devs.add(cur_info.dev)
                return self._fallback_take_over(guard, tmp, data, cur_data, cur_info, now_status)
            except FileNotFoundError:
                return _Outcome("retry", now_status)
            _crash_point("reclaim_after_exchange")
            out = _read_regular(tmp)
            if out is not None and out[1] == cur_info and out[0] == cur_data:
                with contextlib.suppress(OSError):  # the lock is ours whatever happens here
                    os.unlink(tmp)  # the judged stale lock, now under our temp name
                _crash_point("reclaim_after_unlink_old")
                return _Outcome("won", now_status, displaced=now_status)
            # not the judged file (a foreign tool replaced it meanwhile): put it back
            _exchange.exchange(tmp, self.path)
            return _Outcome("retry", now_status)

    def _fallback_take_over(
        self, guard: DirGuard, tmp: str, data: bytes, cur_data: bytes, cur_info: FileInfo,
        judged: LockStatus,
    ) -> _Outcome:
        """Without an exchange primitive the judged file must leave the path before ours can
        be linked in; that is safe only while every Lockwarden breaker is serialised by the
        guard. Without the guard: refuse (two breakers could each remove the other's fresh
        lock), with a clear error."""
        if not guard.held:
            raise LockError(
                f"cannot break {self.path} safely: this file system offers neither a kernel "
                "lock on the directory (or on a guard file in it) nor an atomic exchange; "
                "remove the stale lock by hand once you are sure its holder is gone"
            )
        return self._rename_out_and_link(tmp, data, cur_data, cur_info, judged)

    def _rename_out_and_link(
        self, tmp: str, data: bytes, cur_data: bytes, cur_info: FileInfo, judged: LockStatus
    ) -> _Outcome:
        """Fallback without an exchange primitive (under the guard): move the judged file
        out, verify it, delete it, then publish ours with ``link`` (EEXIST: a foreign acquirer
        got in first, fairly)."""
        swap = temp_path(self.path, _new_token(), "swap")
        try:
            os.rename(self.path, swap)
        except FileNotFoundError:
            return _Outcome("retry", judged)
        _crash_point("reclaim_after_rename_out")
        out = _read_regular(swap)
        if out is None or out[1] != cur_info or out[0] != cur_data:
            _put_back(swap, self.path)
            return _Outcome("retry", judged)
        os.unlink(swap)
        _crash_point("reclaim_after_unlink_old")
        if self._publish(tmp, data):
            _unlink_quiet(tmp)
            return _Outcome("won", judged, displaced=judged)
        # we removed the stale lock, but another acquirer linked into the free path first
        return _Outcome("lost_race", _inspect(self.path, self.policy), displaced=judged)

    def _reclaim(self, *, force: bool, reason: str | None) -> Lock:
        """Break the lock at the path and hold it (see :func:`reclaim`)."""
        with self._mutex:
            if self.is_held:
                raise LockError(f"{self.path} is already held by this Lock object")
        decision: dict[str, str] = {}

        def accept(status: LockStatus) -> bool:
            decision.clear()
            rec = status.record
            if status.state is State.FREE:
                return True
            if rec is not None and rec.format == "task-mcp":
                from core.policy import taskmcp_decision

                ok, why, priority = taskmcp_decision(
                    status,
                    requester_environment=self._extra_metadata.get("environment", "local"),
                    requester_purpose=self._extra_metadata.get("purpose", "interactive"),
                    policy=self.policy,
                )
                decision.update(decision=why, priority=priority)
                if not ok and force:
                    decision.update(decision="FORCE", matrix=why)
                    return True
                return ok
            return force or status.state is State.STALE

        for _ in range(_MAX_RETRIES):
            status = _inspect(self.path, self.policy)
            if status.state is State.FREE:
                return self.acquire(blocking=False)
            if status.state is State.UNREADABLE and status.record is None:
                _check_regular(self.path)
            if not accept(status):
                self._refuse(status, decision.get("decision"), reason)
            rec = status.record
            if self.format == "task-mcp":
                self._extra_metadata["reclaimed_from"] = rec.holder if rec else None
                self._extra_metadata["reclaimed_reason"] = decision.get("decision", "STALE")
            token = _new_token()
            record, data = self._build(token, _now())
            tmp = temp_path(self.path, token)
            ident = _write_temp(tmp, data)
            try:
                out = self._take_over(tmp, ident, data, status, accept)
                if out.kind == "published":
                    self._took(token, record, data, ident, tmp_linked=tmp)
                    _audit(self.path, "acquire", details=self._details(), format=self.format)
                    return self
                if out.kind == "won":
                    assert out.displaced is not None
                    self._took(token, record, data, ident, tmp_linked=None)
                    self.reclaimed_from = out.displaced
                    why = reason or render_all(out.displaced.reasons) or "stale"
                    _audit(self.path, "reclaim", details=self._details(
                        displaced=_holder_summary(out.displaced), reason=why, forced=force,
                        **decision), format=self.format)
                    return self
                if out.kind == "lost_race":
                    self._audit_lost_race(out, reason)
                    raise LockHeld(f"lock taken first by another process: "
                                   f"{_describe(out.status)}", out.status)
                if out.kind == "refused":
                    self._refuse(out.status, decision.get("decision"), reason)
            finally:
                _unlink_quiet(tmp)
                self._extra_metadata.pop("reclaimed_from", None)
                self._extra_metadata.pop("reclaimed_reason", None)
        raise LockHeld(f"{self.path} kept changing; reclaim gave up", status)

    def _audit_lost_race(self, out: _Outcome, reason: str | None = None) -> None:
        assert out.displaced is not None
        _audit(self.path, "reclaim", result="lost_race", details={
            "displaced": _holder_summary(out.displaced),
            "reason": reason or render_all(out.displaced.reasons) or "stale",
            "note": "the stale lock was removed, another process then took the free lock",
            "holder": _holder_summary(out.status),
        }, format=self.format)

    def _refuse(
        self, status: LockStatus, decision: str | None, reason: str | None
    ) -> NoReturn:
        _audit(self.path, "reclaim_refused", result="refused", details={
            "holder": _holder_summary(status), "decision": decision, "reason": reason,
        }, format=status.record.format if status.record else None)
        raise NotStale(f"not reclaimed: {_describe(status)}"
                       + (f"; Task MCP decision {decision}" if decision else ""),
                       status, decision=decision)

    # -- release ----------------------------------------------------------------------------
    def release(self, force: bool = False) -> None:
        """Give the lock back.

        The file is removed only if it is still this acquisition's (same inode and the exact
        bytes written, which include the token), checked under the directory guard; a
        successor's lock is never deleted (DESIGN.md "Lock operations", release).

        Args:
            force: remove whatever is at the path even if it is not ours (audited as
                ``force_release`` with the displaced holder).

        Raises:
            LockLost: the file is gone or belongs to someone else now (it is left alone).
            LockError: this object does not hold the lock (and ``force`` is False).
        """
        with self._mutex:
            self._stop_refresher()
            token, data, ident = self._token, self._data, self._ident
            if force:
                self._forget()
                force_release(self.path, reason="release(force=True) by the holder")
                return
            if token is None or data is None or ident is None:
                if self.lost.is_set():
                    _audit(self.path, "release_refused", result="lost",
                           details={"reason": "the lock was lost earlier"}, format=self.format)
                    raise LockLost(f"{self.path}: this lock was lost earlier")
                raise LockError(f"{self.path} is not held by this Lock object")
            try:
                _remove_if(self.path, token, lambda d, i: d == data and (i.ino, i.dev) == ident)
            except LockLost as exc:
                self._forget()
                self.lost.set()
                _audit(self.path, "release_refused", result="lost",
                       details={"token": token, "reason": str(exc)}, format=self.format)
                raise
            self._forget()
            _audit(self.path, "release", details={"token": token}, format=self.format)

    def _forget(self) -> None:
        self._token = None
        self._record = None
        self._data = None
        self._ident = None

    # -- refresh ----------------------------------------------------------------------------
    def refresh(self) -> None:
        """Renew the lock: rewrite its ``timestamp``/``since``/``acquired_at`` to now (same
        token), so its TTL starts again (spec 004 "Auto-Refresh Mechanism").

        Under the directory guard the renewed file is *exchanged* with ours after checking
        that the path still holds our acquisition, and what came out is checked again; the
        path is never empty and a lock that is no longer ours is never overwritten. Without
        an exchange primitive, the renewed file replaces ours with ``rename`` under the guard
        right after the check.

        Raises:
            LockLost: the lock is no longer ours (``lost`` is set, a ``lost`` entry audited).
            LockError: this object does not hold the lock.
        """
        with self._mutex:
            token, old_data, ident = self._token, self._data, self._ident
            if token is None or old_data is None or ident is None:
                if self.lost.is_set():
                    raise LockLost(f"{self.path}: this lock was lost earlier")
                raise LockError(f"{self.path} is not held by this Lock object")
            rec = self._record
            if rec is not None and rec.pid is not None and rec.start is not None:
                # renew for the same holder process: reuse its recorded start and identity
                # (a holder that died meanwhile must not be replaced by whoever has its PID)
                self._start_cache[rec.pid] = (rec.start, rec.proc)
            record, data = self._build(token, _now())
            tmp = temp_path(self.path, _new_token())
            new_ident = _write_temp(tmp, data)
            lost_why: str | None = None
            try:
                with DirGuard(os.path.dirname(self.path)):
                    cur = _read_regular(self.path)
                    if cur is None or cur[0] != old_data or (cur[1].ino, cur[1].dev) != ident:
                        lost_why = "the lock file was removed or replaced"
                    else:
                        try:
                            if cur[1].dev in _no_exchange_devs:
                                raise ExchangeUnsupported(errno.ENOTSUP, "no exchange")
                            _exchange.exchange(tmp, self.path)
                            _crash_point("refresh_after_exchange")
                            out = _read_regular(tmp)
                            if (out is None or out[0] != old_data
                                    or (out[1].ino, out[1].dev) != ident):
                                _exchange.exchange(tmp, self.path)
                                lost_why = "the lock file was replaced"
                        except ExchangeUnsupported:
                            _no_exchange_devs.add(cur[1].dev)
                            os.replace(tmp, self.path)
            finally:
                _unlink_quiet(tmp)
            if lost_why is not None:
                # audited outside the directory guard: the audit log's own lock may wait
                self._mark_lost("refresh", lost_why)
                raise LockLost(f"{self.path}: the lock is no longer ours")
            with contextlib.suppress(OSError):
                fsync_dir(os.path.dirname(self.path))
            self._record, self._data, self._ident = record, data, new_ident
        _audit(self.path, "refresh", details={"token": token, "ttl": self.ttl},
               format=self.format)

    def _mark_lost(self, during: str, why: str) -> None:
        token = self._token
        self._forget()
        log.warning("lock %s lost during %s: %s", self.path, during, why)
        _audit(self.path, "lost", result="lost",
               details={"token": token, "during": during, "reason": why}, format=self.format)
        self.lost.set()  # last: once ``lost`` is seen, the report is complete

    def _start_refresher(self, token: str) -> None:
        assert self.ttl is not None
        stop = threading.Event()
        self._stop_refresh = stop
        interval = 0.75 * self.ttl

        def run() -> None:
            while not stop.wait(interval):
                with self._mutex:
                    if stop.is_set() or self._token != token:
                        return
                    try:
                        self.refresh()
                    except LockLost:
                        return  # reported by refresh(): lost set, audited, warned
                    except (LockError, OSError) as exc:
                        log.warning("could not refresh lock %s: %s", self.path, exc)

        threading.Thread(target=run, name=f"lockwarden-refresh {self.path}", daemon=True).start()

    def _stop_refresher(self) -> None:
        if self._stop_refresh is not None:
            self._stop_refresh.set()
            self._stop_refresh = None

    # -- context manager ----------------------------------------------------------------
    def __enter__(self) -> Lock:
        """``with lk:`` acquires (blocking, no timeout); ``with lk.acquire(timeout=5):``
        enters the lock already held. Leaving releases it."""
        with self._mutex:
            if self.is_held:
                if self._owner_thread == threading.get_ident():
                    return self  # ``with lk.acquire(...):`` -- already ours
                raise LockError(
                    f"{self.path} is held through this Lock object by another thread; "
                    "a Lock object is not shared between threads: give each thread its own"
                )
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.is_held:
            self.release()
        elif self.lost.is_set() and exc_type is None:
            raise LockLost(f"{self.path}: the lock was lost while held")


def _accept_stale(status: LockStatus) -> bool:
    return status.state is State.STALE


def _local_holder_pid(status: LockStatus) -> int | None:
    rec = status.record
    if rec is None or rec.pid is None or status.state is State.FREE:
        return None
    if status.liveness is not Liveness.ALIVE:
        return None  # dead/reused: its exit is past; remote/unknown: cannot be watched
    return rec.pid if _same_host(rec.host) else None


def _wait_until(
    path: str,
    policy: StalePolicy,
    status: LockStatus,
    deadline: float | None,
    timeout: float | None,
    attempt: Callable[[], LockStatus | None],
) -> None:
    """Sleep on the lock's directory events and its local holder's exit (no polling loop;
    DESIGN.md "Lock operations", wait), calling ``attempt()`` after each wake-up until it
    returns ``None`` (done); otherwise it returns the verdict that still stops us.

    ``deadline`` is a ``time.monotonic()`` value (``timeout``, seconds, only names it in the
    message). Raises LockTimeout (``.status``: the last verdict) when the deadline passes.
    """
    from core._waiter import Waiter

    with Waiter(path) as waiter:
        backoff = 0.005
        watched: int | None = -1
        while True:
            pid = _local_holder_pid(status)
            if pid != watched:
                # open the pidfd *before* the next check, so the check that says "alive"
                # and the descriptor refer to the same process
                waiter.watch_holder(pid)
                watched = pid
            else:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise LockTimeout(
                        f"timed out after {timeout:g} s waiting for {_describe(status)}", status
                    )
                wake = _next_wake(status, policy, waiter.events, remaining)
                if waiter.holder_exited and status.liveness is Liveness.ALIVE:
                    # the holder exited but is still judged alive (not yet reaped):
                    # re-check soon, backing off
                    wake = min(wake, backoff) if wake is not None else backoff
                    backoff = min(backoff * 2, 0.5)
                waiter.wait(wake)
            after = attempt()
            if after is None:
                return
            status = after


def _next_wake(
    status: LockStatus, policy: StalePolicy, events: bool, remaining: float | None
) -> float | None:
    """Seconds until the next re-check: the slow poll, the moment a TTL expires or
    ``stale_after`` passes, the end of the writing grace, or the caller's timeout."""
    wake = POLL_INTERVAL if events else POLL_NO_EVENTS
    now = time.time()
    rec = status.record
    bounds: list[float] = []
    if rec is not None:
        expiry = rec.effective_expiry()
        if expiry is not None:
            bounds.append(expiry.timestamp() - now)
        if rec.acquired_at is not None:
            bounds.append(rec.acquired_at.timestamp() + policy.stale_after - now)
    if status.state is State.WRITING and status.file is not None:
        bounds.append(status.file.mtime_ns / 1e9 + policy.writing_grace - now)
    for b in bounds:
        if b > 0:
            wake = min(wake, b + 0.002)
    if remaining is not None:
        wake = min(wake, max(remaining, 0.0))
    return wake


def _remove_if(
    path: str, token: str, ours: Callable[[bytes, FileInfo], bool]
) -> tuple[bytes, FileInfo]:
    """Under the directory guard: check the lock in place with ``ours(bytes, info)`` (a lock
    that is not ours is never touched), then move it out to ``.<name>.<token>.rel``, check
    again what was moved (closes the gap between the check and the move against tools that
    replace files without the guard) and delete it; put it back and raise LockLost if it is
    not ours. Returns the removed file's bytes and identity."""
    with DirGuard(os.path.dirname(path)):
        # a fresh random name: the token is readable in the lock file, so a name derived from
        # it could be occupied in advance by anyone who can write to the directory
        rel = temp_path(path, _new_token(), "rel")
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            raise LockLost(f"{path}: the lock file is gone") from None
        if not stat.S_ISREG(st.st_mode):
            raise LockLost(f"{path}: now {describe_mode(st.st_mode)}, not our lock")
        seen = _read_regular(path)
        if seen is None or not ours(seen[0], seen[1]):
            raise LockLost(f"{path}: the lock file now belongs to someone else; left in place")
        try:
            os.rename(path, rel)
        except FileNotFoundError:
            raise LockLost(f"{path}: the lock file is gone") from None
        _crash_point("release_after_rename_out")
        out = _read_regular(rel)
        if out is None or not ours(out[0], out[1]):
            _put_back(rel, path)
            raise LockLost(f"{path}: the lock file now belongs to someone else; left in place")
        os.unlink(rel)
    return out


def _removed_status(path: str, removed: tuple[bytes, FileInfo]) -> LockStatus:
    return _inspect_bytes(path, removed[0], removed[1], StalePolicy())


# -- module-level operations ----------------------------------------------------------------


def reclaim(
    path: str | os.PathLike[str],
    *,
    force: bool = False,
    reason: str | None = None,
    holder_pid: int | None = None,
    tag: str | None = None,
    ttl: float | None = None,
    stale_after: float = 3600.0,
    auto_refresh: bool = False,
) -> Lock:
    """Break the lock at ``path`` and hold it; returns the held :class:`Lock`.

    Allowed when the verdict is ``stale`` (DESIGN.md stale policy), or ``force`` is True (an
    explicit human or ``--force`` decision), or -- for a ``task-mcp`` lock -- when spec 004's
    decision matrix (:func:`core.policy.taskmcp_decision`: LOCK_EXPIRED, HOLDER_DEAD,
    SAME_USER; HIGHER_PRIVILEGE and EMERGENCY_OVERRIDE only when the directory policy enables
    them, since they rest on self-declared fields) says so. The decision and its reason go
    into the audit entry and, for task-mcp, into the new lock's ``metadata``
    (``reclaimed_from``, ``reclaimed_reason``; spec 004 "Reclaim Process").

    The new lock keeps the old one's format when Lockwarden writes it (sema, task-mcp,
    af-ledger), else sema. A free path is simply acquired. Race-free when many processes
    reclaim at once: exactly one wins, the others get NotStale (or LockHeld); see the module
    docstring.

    ``auto_refresh``: renew the new lock at 75% of its lease in a daemon thread, as
    :class:`Lock` does (spec 004 "Auto-Refresh Mechanism"); it applies when the new lock has a
    lease (``ttl`` given, or a task-mcp lock with the spec's default TTL) and is ignored
    otherwise.

    Raises:
        NotStale: not stale and not ``force`` (``.status``; ``.decision`` for task-mcp).
        LockHeld: someone else took the lock first.
        UnreadableError: the path is a symlink, FIFO, directory or device.
    """
    p = _lock_path(path)
    status = _inspect(p, StalePolicy(stale_after=stale_after))
    fmt = "sema"
    if status.record is not None and status.record.format in WRITABLE_FORMATS:
        fmt = status.record.format
    leased = ttl is not None or fmt == "task-mcp"
    lk = Lock(p, tag=tag, ttl=ttl, format=fmt, stale_after=stale_after, holder_pid=holder_pid,
              auto_refresh=auto_refresh and leased)
    try:
        return lk._reclaim(force=force, reason=reason)
    except LockHeld as exc:
        raise NotStale(str(exc), exc.status) from exc


def force_release(path: str | os.PathLike[str], *, reason: str | None = None) -> LockStatus:
    """Remove whatever lock is at ``path`` (an explicit human or ``--force`` decision), under
    the directory guard; returns the verdict on the file removed (``free`` when there was
    none). Audited as ``force_release`` with the displaced holder and ``reason``.

    Raises:
        UnreadableError: the path is a symlink, FIFO, directory or device (never removed).
    """
    p = _lock_path(path)
    token = _new_token()
    try:
        status = _removed_status(p, _remove_if(p, token, lambda _d, _i: True))
    except LockLost:
        status = LockStatus(p, State.FREE, reasons=(Reason.of(Code.NO_LOCK_FILE),))
        _audit(p, "force_release", result="free", details={"reason": reason,
                                                           "displaced": None})
        return status
    _audit(p, "force_release", details={"displaced": _holder_summary(status), "reason": reason},
           format=status.record.format if status.record else None)
    return status


def release_path(
    path: str | os.PathLike[str], *, pid: int, force: bool = False, reason: str | None = None
) -> LockStatus:
    """Release the lock at ``path`` on behalf of process ``pid`` (the CLI ``release`` verb,
    run from another process than the holder): the lock is removed only when it records
    ``pid`` and this host (sema's and semats' release check, spec 002 "Lock Release"), checked
    under the directory guard; with ``force`` it is removed whoever holds it (audited as
    ``force_release``). Returns the verdict on the removed lock.

    Raises:
        LockLost: no lock, or it is not ``pid``'s on this host (and not ``force``).
        UnreadableError: the path is a symlink, FIFO, directory or device.
    """
    p = _lock_path(path)
    status = _inspect(p, StalePolicy())
    if status.state is State.FREE:
        _audit(p, "release_refused", result="free", details={"pid": pid, "reason": reason})
        raise LockLost(f"{p}: there is no lock to release")
    rec = status.record

    def mine(data: bytes, info: FileInfo) -> bool:
        r = _inspect_bytes(p, data, info, StalePolicy()).record
        return r is not None and r.pid == pid and _same_host(r.host)

    fmt = rec.format if rec else None
    if not force:
        try:
            removed = _removed_status(p, _remove_if(p, _new_token(), mine))
        except LockLost as exc:
            _audit(p, "release_refused", result="refused",
                   details={"pid": pid, "holder": _holder_summary(status), "reason": str(exc)},
                   format=fmt)
            raise LockLost(f"{p}: not released, the lock is not held by PID {pid} on this "
                           f"host ({_describe(status)})") from None
        _audit(p, "release", details={"pid": pid, "holder": _holder_summary(removed),
                                      "token": removed.record.token if removed.record else None},
               format=fmt)
        return removed
    try:
        removed = _removed_status(p, _remove_if(p, _new_token(), lambda _d, _i: True))
    except LockLost:
        _audit(p, "release_refused", result="free", details={"pid": pid, "reason": reason})
        raise
    r = removed.record
    op = "release" if r is not None and r.pid == pid and _same_host(r.host) else "force_release"
    _audit(p, op, details={"pid": pid, "displaced": _holder_summary(removed), "reason": reason},
           format=fmt)
    return removed


def wait(
    path: str | os.PathLike[str], *, timeout: float | None = None, stale_after: float = 3600.0
) -> LockStatus:
    """Block until the lock at ``path`` can be taken: it is ``free``, or ``stale`` (a stale
    lock is reclaimed by the next acquire). Returns that verdict. Event-driven like a
    blocking :meth:`Lock.acquire` (directory events, the local holder's exit, 1 s poll).

    Args:
        timeout: seconds (None: no limit).
        stale_after: the stale policy's limit for other tools' locks, seconds.

    Raises:
        LockTimeout: ``timeout`` passed first (``.status``: the last verdict).
        UnreadableError: the path's directory is missing, or the path is a symlink, FIFO,
            directory or device.
    """
    p = _lock_path(path)
    policy = StalePolicy(stale_after=stale_after)
    deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
    status = _inspect(p, policy)
    if status.state in (State.FREE, State.STALE):
        return status
    settled: list[LockStatus] = []

    def look() -> LockStatus | None:
        st = _inspect(p, policy)
        if st.state in (State.FREE, State.STALE):
            settled.append(st)
            return None
        if st.state is State.UNREADABLE and st.record is None:
            _check_regular(p)
        return st

    _wait_until(p, policy, status, deadline, timeout, look)
    return settled[-1]
