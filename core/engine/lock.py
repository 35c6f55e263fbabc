"""The public lock API: :class:`Lock` (acquire, release, refresh, the context manager and the
refresher thread; :func:`core.engine.reclaiming.reclaim` builds on it, taking over with a
``Lock``'s own steps) (docs/DESIGN.md, "Lock
operations"; docs/engine.md, whose
"Guarantees and how they are kept" says how and why). Every lock Lockwarden creates, rewrites
or removes goes through the engine: this module, then :mod:`core.engine.operations` (operations on a
path without a Lock; re-exported here), :mod:`core.engine.publish` (the publish protocol, crash
points), :func:`core.formats.build` (what each format writes), :mod:`core.engine.exchange`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, NamedTuple

from core import formats
from core.defaults import MAX_TTL, MIN_REFRESH_INTERVAL
from core.engine import gate, operations, publish, takeover, waiting
from core.engine.audited import holder_summary, record_audit
from core.engine.gate import Act, EmptyFile, Intent
from core.engine.operations import (
    describe,
    force_release,
    resolve_policy,
)
from core.engine.publish import Staged
from core.engine.remove import empty_if, remove_if
from core.engine.takeover import Outcome
from core.engine.trash import Kept
from core.errors import LockError, LockHeld, LockLost, LockTimeout
from core.formats import Built, Reclaimed, WriteRequest
from core.formats.writing import check_tag
from core.fsutil import fsync_dir, validate_lock_path
from core.kernel import pin as holder_pin
from core.reasons import render_all
from core.record import WRITABLE_FORMATS, FileInfo, LockRecord, LockStatus, State
from core.stale_policy import StalePolicy
from core.verdicts.inspect import inspect

__all__ = ["Lock"]

log = logging.getLogger("lockwarden.lock")

_audit = record_audit  # every audit call of Lock (a benchmark replaces it)


def _now() -> datetime:
    return datetime.now(UTC)


def _exactly(held: _Held) -> Callable[[bytes, FileInfo], bool]:
    """The check a holder's own release makes: the same inode and exactly the bytes this
    acquisition wrote (they contain its token)."""
    return lambda d, i: d == held.data and (i.ino, i.dev) == held.ident


def _ours_or_truncated(held: _Held) -> Callable[[bytes, FileInfo], bool]:
    """The check a refresh in place and a release make of a lock on flock-style tools' empty
    file (rewritten or emptied in place, never removed): :func:`_exactly`, or -- while our pin
    is held -- our inode emptied by a truncating open: filelock 3.x opens the path with
    ``O_TRUNC`` before it tries its ``flock`` (docs/engine.md, "Refresh"), which empties our
    record and, the pin holding, gets nothing more. Not when its modification time is the one
    a release gives back (:func:`core.engine.remove.empty_if`): a release, forced or not,
    emptied it, and the lock is lost."""
    exactly, emptied = _exactly(held), held.emptied
    if held.pin is None or emptied is None:
        return exactly
    return lambda d, i: exactly(d, i) or (not d and (i.ino, i.dev) == held.ident
                                          and i.mtime_ns != emptied.mtime_ns)


class _Held(NamedTuple):
    """One acquisition, as long as it is ours: its token, the record and bytes written (the
    last refresh's), the lock file's ``(inode, device)``, the descriptor of the holder's
    pin on it (:mod:`core.kernel.pin`; ``None``: not pinned), and the empty file it replaced
    (put back on release; refreshes keep recording it)."""

    token: str
    record: LockRecord
    data: bytes
    ident: tuple[int, int]
    pin: int | None = None
    emptied: EmptyFile | None = None


class Lock:
    """One lock at ``path``, taken and given back through the engine.

    Args:
        path: the lock file path (its directory must exist).
        tag: human description written into the lock (sema ``tag``; ``metadata.tag`` for
            task-mcp; the ``agent_id`` for af-ledger). Control characters become spaces.
        ttl: lease length in seconds, or None. For ``task-mcp`` the spec's default
            (:func:`core.formats.default_ttl`, local/interactive: 3600 s) applies when None.
        format: ``"sema"`` (default), ``"task-mcp"`` or ``"af-ledger"``
            (:data:`core.record.WRITABLE_FORMATS`).
        stale_after: seconds; another tool's lock whose holder is not alive becomes stale when
            older than this. Replaces ``policy.stale_after`` when given.
        holder_pid: the PID recorded as holder (default: this process). The CLI passes its
            parent shell's PID so the lock lives as long as the shell.
        auto_refresh: with a TTL, renew the lock at 75% of the TTL in a daemon thread
        (docs/specs/task-mcp.txt
            "Auto-Refresh Mechanism"). A lost lock is reported (``lost`` is set, a ``lost``
            audit entry and a logging warning), never silently re-taken.
        durable: fsync the lock file and its directory when it is published or renewed, and
            its audit entries (off by default: docs/architecture.md, "Durability"; an explicit
            reclaim is always made durable).
        policy: the stale policy locks in the way are judged with
            (:class:`core.stale_policy.StalePolicy`; default
            :data:`core.stale_policy.DEFAULT_POLICY`, ``stale_after`` 3600 s as in the specs).

    Attributes:
        path: absolute lock path. ``policy``: the stale policy in force. ``lost``:
        :class:`threading.Event` set when the lock was found to be no longer ours.
        ``reclaimed_from``: the stale lock this acquisition replaced, or None. ``kept``:
        where a forced reclaim put the foreign file it replaced
        (:class:`core.engine.trash.Kept`: the trash or quarantine), or None. ``notes``: what
        the last release said (it went on without a directory guard another process held:
        :func:`core.engine.remove.remove_if`).

    Raises:
        ValueError: unknown format, a TTL that is not a positive finite number of at most
            :data:`core.defaults.MAX_TTL` seconds, a ``stale_after`` that is not a finite
            number > 0, or ``auto_refresh`` without a TTL.
        TagTooLong: (a ValueError) a tag over :data:`core.defaults.MAX_TAG_BYTES` bytes of
            UTF-8; nothing is written.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        tag: str | None = None,
        ttl: float | None = None,
        format: str = "sema",
        stale_after: float | None = None,
        holder_pid: int | None = None,
        auto_refresh: bool = False,
        policy: StalePolicy | None = None,
        durable: bool = False,
    ) -> None:
        if format not in WRITABLE_FORMATS:
            raise ValueError(
                f"Lockwarden cannot write {format!r} locks; use one of {WRITABLE_FORMATS}"
            )
        if ttl is not None and not (math.isfinite(ttl) and 0 < ttl <= MAX_TTL):
            raise ValueError(f"ttl must be a positive number of seconds up to {MAX_TTL:.0f} "
                             f"(one year), not {ttl!r}")
        check_tag(tag)
        if ttl is None:
            ttl = formats.default_ttl(format)
        if auto_refresh and ttl is None:
            raise ValueError("auto_refresh needs a ttl")
        self.path = os.path.abspath(os.fspath(path))
        self.tag = tag
        self.ttl = ttl
        self.format = format
        self.holder_pid = holder_pid
        self.auto_refresh = auto_refresh
        self.durable = durable
        self.policy = resolve_policy(policy, stale_after)
        self.stale_after = self.policy.stale_after
        self.lost = threading.Event()
        self.reclaimed_from: LockStatus | None = None
        self.kept: Kept | None = None
        self.notes: list[str] = []
        self._mutex = threading.RLock()
        self._owner_thread: int | None = None  # thread that acquired (for ``with``)
        self._held: _Held | None = None
        self._stop_refresh: threading.Event | None = None
        self._holders = operations.HolderCache()

    # -- properties -----------------------------------------------------------------------
    @property
    def is_held(self) -> bool:
        """True while this object holds the lock (acquired, not released, not found lost)."""
        return self._held is not None

    @property
    def token(self) -> str | None:
        """The 128-bit hex token of the current acquisition, or None."""
        held = self._held
        return held.token if held is not None else None

    @property
    def record(self) -> LockRecord | None:
        """The lock as written by the current acquisition (or last refresh), or None."""
        held = self._held
        return held.record if held is not None else None

    def __repr__(self) -> str:
        state = "held" if self.is_held else ("lost" if self.lost.is_set() else "free")
        return f"<Lock {self.path!r} {self.format} {state}>"

    # -- what we write ----------------------------------------------------------------------
    def _pid(self) -> int:
        return self.holder_pid if self.holder_pid is not None else os.getpid()

    def _build(self, token: str, reclaimed: Reclaimed | None = None,
               acquired: datetime | None = None, emptied: EmptyFile | None = None) -> Built:
        """This lock's file for acquisition ``token``; ``acquired``: for a renewal, when the
        lock was first taken (its age counts from then: docs/formats.md, "Refresh: age and
        expiry"); ``emptied``: the empty file it replaces, put back on release
        (docs/engine.md, "Empty files")."""
        holder = self._holders.holder(self._pid(), self.path)
        request = WriteRequest(path=self.path, holder=holder, token=token, at=_now(),
                               tag=self.tag, ttl=self.ttl, reclaimed=reclaimed,
                               acquired=acquired,
                               emptied=emptied.text() if emptied is not None else None)
        return formats.build(self.format, request)

    # -- acquire --------------------------------------------------------------------------
    def acquire(self, timeout: float | None = None, blocking: bool = True) -> Lock:
        """Take the lock; returns ``self``.

        Args:
            timeout: seconds to wait at most when ``blocking`` (None: no limit).
            blocking: wait while the lock is held by someone else. Waiting is event-driven
                (directory events, the holder's exit) with a 1 s fallback poll.

        A lock found stale (docs/DESIGN.md stale policy via :func:`core.verdicts.inspect.inspect`)
        is reclaimed race-free on the way (:func:`core.engine.takeover.take_over`);
        ``reclaimed_from`` then holds its status.

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
        validate_lock_path(self.path)
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        status = self._attempt()
        if status is None:
            return self
        if not blocking:
            _audit(self.path, "acquire_refused", result="held",
                   details={"holder": holder_summary(status)}, format=self.format)
            raise LockHeld(f"lock held: {describe(status)}", status)
        try:
            waiting.wait_until(self.path, self.policy, status, deadline, timeout,
                                  lambda: self._attempt(precheck=True))
        except LockTimeout as exc:
            _audit(self.path, "acquire_refused", result="timeout",
                   details={"holder": holder_summary(exc.status) if exc.status else None,
                            "timeout": timeout}, format=self.format)
            raise
        return self

    def _attempt(self, precheck: bool = False) -> LockStatus | None:
        """One try: publish, or take over what the gate lets an acquire take
        (:func:`core.engine.gate.ask`: a stale lock, an empty file nobody holds or has open).
        None when we now hold the lock, else the verdict on the lock that stops us.
        ``precheck``: look first, so that waiters woken together do not each write and fsync
        a temp file for a lock that is held again.

        Raises:
            ReadOnlyLock, UnsavedChanges, UnreadableError: the gate refuses what is there.
        """
        if (precheck and os.path.lexists(self.path)) or gate.virtual(self.path):
            seen = inspect(self.path, policy=self.policy)
            answer = gate.ask(self.path, seen, Intent.ACQUIRE)
            if answer.act is Act.REFUSE:
                gate.refuse(self.path, answer, Intent.ACQUIRE)
            if answer.act is Act.WAIT:
                return answer.status or seen
        emptied: EmptyFile | None = None
        out: Outcome | None = None
        for _ in range(publish.MAX_RETRIES):
            token = publish.new_token()
            built = self._build(token, emptied=emptied)
            with publish.stage(self.path, token, built.data, self.policy.file_mode(built.mode),
                               self.durable) as staged, self._prepin(staged) as pre:
                out = takeover.publish_or_take_over(staged, self.policy, emptied)
                if out.kind in ("published", "won"):
                    self._took_over(out, token, built, staged, pre, emptied=emptied)
                    return None
            if out.kind == "restage":  # it must record the empty file it replaces
                emptied = out.emptied
                continue
            if out.kind == "lost_race":
                operations.audit_lost_race(self.path, self.format, out)
            assert out.status is not None  # "refused" and "lost_race" carry the verdict
            return out.status
        assert out is not None and out.status is not None
        return out.status

    def _took_over(
        self,
        out: Outcome,
        token: str,
        built: Built,
        staged: Staged,
        pre: holder_pin.Prepin,
        judge: operations.ReclaimJudge | None = None,
        reason: str | None = None,
        emptied: EmptyFile | None = None,
    ) -> None:
        """Bookkeeping and audit once the path holds our lock: ``acquire`` when it was free
        (``out.kind == "published"``), ``reclaim`` naming the displaced lock when we replaced
        it (``"won"``; with :func:`core.engine.reclaiming.reclaim`'s ``judge`` and ``reason``, its
        decision too). ``pre``: the pin the staged file got before it was published."""
        published = out.kind == "published"
        ident = publish.settle(staged, linked=published)
        pin_fd = pre.take()
        if ident != staged.ident:  # the O_EXCL fallback wrote another inode: pin that one
            holder_pin.unpin(pin_fd)
            pin_fd = self._pin(ident)
        with self._mutex:
            self._held = _Held(token, built.record, built.data, ident, pin_fd, emptied)
            self._owner_thread = threading.get_ident()
            self.lost.clear()
            self.reclaimed_from = None
        if self.auto_refresh and self.ttl is not None:
            self._start_refresher(token)
        if published:
            _audit(self.path, "acquire", details=self._details(), format=self.format,
                   durable=self.durable)
            return
        assert out.displaced is not None  # a "won" outcome names what it replaced
        self.reclaimed_from = out.displaced
        more: dict[str, Any] = {} if judge is None else {"forced": judge.force, **judge.decision}
        if self.kept is not None:
            more["kept"] = self.kept.to_dict()
        _audit(self.path, "reclaim", details=self._details(
            displaced=holder_summary(out.displaced),
            reason=reason or render_all(out.displaced.reasons) or "stale", **more),
            format=self.format)

    def _pin(self, ident: tuple[int, int]) -> int | None:
        """The holder's pin on the file just published (:func:`core.kernel.pin.pin`) when
        this process is the recorded holder, else ``None``."""
        if self.holder_pid not in (None, os.getpid()):
            return None
        return holder_pin.pin(self.path, ident)

    def _prepin(self, staged: Staged) -> holder_pin.Prepin:
        """The pin on ``staged`` before it is published (:class:`core.kernel.pin.Prepin`)
        when this process is the recorded holder."""
        return holder_pin.Prepin(staged.tmp, staged.ident,
                                 self.holder_pid in (None, os.getpid()))

    def _drop(self) -> None:
        """Forget the acquisition (released or lost) and close its pin."""
        held, self._held = self._held, None
        if held is not None:
            holder_pin.unpin(held.pin)

    def _details(self, **more: Any) -> dict[str, Any]:
        d: dict[str, Any] = {"token": self.token, "holder_pid": self._pid()}
        if self.tag is not None:
            d["tag"] = self.tag
        if self.ttl is not None:
            d["ttl"] = self.ttl
        d.update(more)
        return d

    # -- release ----------------------------------------------------------------------------
    def release(self, force: bool = False) -> None:
        """Give the lock back.

        The file is removed only if it is still this acquisition's (same inode and the exact
        bytes written, which include the token), checked under the directory guard; a
        successor's lock is never deleted (docs/DESIGN.md "Lock operations", release;
        :func:`core.engine.remove.remove_if`).

        Args:
            force: remove whatever is at the path even if it is not ours (audited as
                ``force_release`` with the displaced holder).

        Raises:
            LockLost: the file is gone or belongs to someone else now (it is left alone).
            LockError: this object does not hold the lock (and ``force`` is False).
        """
        with self._mutex:
            self._stop_refresher()
            held = self._held
            if force:
                self._drop()
                force_release(self.path, reason="release(force=True) by the holder")
                return
            if held is None:
                if self.lost.is_set():
                    _audit(self.path, "release_refused", result="lost",
                           details={"reason": "the lock was lost earlier"}, format=self.format)
                    raise LockLost(f"{self.path}: this lock was lost earlier")
                raise LockError(f"{self.path} is not held by this Lock object")
            self.notes = []
            # the gate says how our own lock goes: removed, or -- when it replaced an empty
            # file -- emptied in place as that file was (docs/engine.md, "Empty files")
            answer = gate.ask(self.path, LockStatus(self.path, State.HELD, record=held.record),
                              Intent.RELEASE, kernel=False)
            holder_pin.unpin(held.pin)  # our own pin must not look like another user of it
            self._held = held._replace(pin=None)
            try:
                ours = _exactly(held)
                if answer.act is Act.EMPTY_IT and answer.emptied is not None:
                    empty_if(self.path, _ours_or_truncated(held), answer.emptied,
                             notes=self.notes)
                else:
                    remove_if(self.path, ours, notes=self.notes)
            except LockLost as exc:
                self._drop()
                self.lost.set()
                _audit(self.path, "release_refused", result="lost",
                       details={"token": held.token, "reason": str(exc)}, format=self.format)
                raise
            self._drop()
            _audit(self.path, "release", format=self.format, durable=self.durable, details={
                "token": held.token, **({"guard": self.notes[0]} if self.notes else {}),
                **({"emptied": answer.emptied.text()} if answer.emptied else {})})

    # -- refresh ----------------------------------------------------------------------------
    def refresh(self) -> None:
        """Renew the lock (same token) so that its lease runs ``ttl`` seconds from now
        (docs/specs/task-mcp.txt "Auto-Refresh Mechanism"); its age still counts from
        the first acquisition (sema: ``timestamp`` = now, ``acquired=`` kept; task-mcp: ``since``
        kept, ``ttl`` extended: docs/formats.md, "Refresh: age and expiry").

        Under the directory guard the renewed file is *exchanged* with ours after checking
        that the path still holds our acquisition, and what came out is checked again; the
        path is never empty and a lock that is no longer ours is never overwritten. Without
        an exchange primitive, the renewed file replaces ours with ``rename`` under the guard
        right after the check (:func:`core.engine.publish.renew`). A lock that replaced the
        empty file flock-style tools lock is rewritten in place, its inode kept for them
        (:func:`core.engine.publish.renew_in_place`).

        Raises:
            LockLost: the lock is no longer ours (``lost`` is set, a ``lost`` entry audited).
            LockError: this object does not hold the lock.
        """
        with self._mutex:
            held = self._held
            if held is None:
                if self.lost.is_set():
                    raise LockLost(f"{self.path}: this lock was lost earlier")
                raise LockError(f"{self.path} is not held by this Lock object")
            # renew for the same holder process: reuse its recorded start and identity (a
            # holder that died meanwhile must not be replaced by whoever has its PID)
            self._holders.keep(held.record)
            answer = gate.ask(self.path, LockStatus(self.path, State.HELD, record=held.record),
                              Intent.REFRESH, kernel=False)
            emptied = answer.emptied or held.emptied
            built = self._build(held.token, acquired=held.record.acquired_at, emptied=emptied)
            ident, new_pin = held.ident, held.pin
            if emptied is not None:  # flock-style tools lock this inode: it stays
                data = publish.padded(built.data, len(held.data))  # never cut: no torn record
                lost_why = publish.renew_in_place(self.path, data, _ours_or_truncated(held),
                                                  durable=self.durable)
                built = built._replace(data=data)
            else:
                with publish.stage(self.path, publish.new_token(), built.data,
                                   self.policy.file_mode(built.mode), self.durable) as staged, \
                        self._prepin(staged) as pre:
                    lost_why = publish.renew(staged, held.data, held.ident)
                    # the renewed file reached the path pinned (the exchange keeps its inode)
                    new_pin = pre.take() if lost_why is None else None
                ident = staged.ident
            if lost_why is not None:
                # audited outside the directory guard: the audit log's own lock may wait
                self._mark_lost("refresh", lost_why)
                raise LockLost(f"{self.path}: the lock is no longer ours")
            if self.durable:
                with contextlib.suppress(OSError):
                    fsync_dir(os.path.dirname(self.path))
            self._held = _Held(held.token, built.record, built.data, ident, new_pin,
                               held.emptied)
            if new_pin != held.pin:
                holder_pin.unpin(held.pin)  # the old file is gone: its pin pins nothing
        _audit(self.path, "refresh", details={"token": held.token, "ttl": self.ttl},
               format=self.format, durable=self.durable)

    def _mark_lost(self, during: str, why: str) -> None:
        token = self.token
        self._drop()
        log.warning("lock %s lost during %s: %s", self.path, during, why)
        _audit(self.path, "lost", result="lost",
               details={"token": token, "during": during, "reason": why}, format=self.format)
        self.lost.set()  # last: once ``lost`` is seen, the report is complete

    def _start_refresher(self, token: str) -> None:
        assert self.ttl is not None
        stop = threading.Event()
        self._stop_refresh = stop
        interval = max(0.75 * self.ttl, MIN_REFRESH_INTERVAL)

        def run() -> None:
            while not stop.wait(interval):
                with self._mutex:
                    if stop.is_set() or self.token != token:
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
        enters the lock already held. Leaving releases it.

        Raises:
            LockError: this Lock object is held by another thread (one Lock per thread);
                else as :meth:`acquire`.
        """
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
        """Release the lock (:meth:`release`).

        Raises:
            LockLost: the lock was lost while held (and the block raised nothing itself), or
                release found it no longer ours.
        """
        if self.is_held:
            self.release()
        elif self.lost.is_set() and exc_type is None:
            raise LockLost(f"{self.path}: the lock was lost while held")
