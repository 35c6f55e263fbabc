"""Taking over a judged lock: the guarded, exchange-based replacement of the file at a lock
path by our complete lock (docs/engine.md, "Reclaim is race-free", "The gate", "Peers' kernel
locks"). Split from :mod:`core.engine.publish`, whose staged file, publish and swap-back it uses.

- :func:`publish_or_take_over`: an acquire -- publish, or take over what the gate lets an
  acquire take over (:func:`core.engine.gate.ask`).
- :func:`take_over`: under the directory guard (:class:`core.engine.exchange.DirGuard`) the
  judged file is re-read and re-judged, then atomically exchanged with our complete lock; what
  came out must be exactly the judged file (identity and bytes), else it is swapped back.
  Without an exchange primitive (and only while the guard is held) the judged file is renamed
  out to ``.<name>.<pid>.<token>.lwswap``, verified, deleted, and ours linked in.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Literal, NamedTuple

from core import seam
from core.engine import exchange as _exchange
from core.engine import gate, publish
from core.engine.entries import put_back, read_regular, unlink_quiet
from core.engine.exchange import DirGuard, ExchangeUnsupported
from core.engine.gate import Act, EmptyFile, Intent
from core.engine.publish import Dispose, Staged, discard, swap_back
from core.engine.unheld import Hold, hold_while_it_goes
from core.errors import LockError, LockHeld, LockLost, ReadOnlyLock
from core.fsutil import refuse_unreadable
from core.record import FileInfo, LockStatus, State
from core.stale_policy import StalePolicy
from core.tempfiles import temp_path
from core.verdicts.inspect import inspect, inspect_bytes

__all__ = ["Outcome", "OutcomeKind", "publish_or_take_over", "take_over"]


OutcomeKind = Literal["won", "published", "refused", "retry", "lost_race", "restage"]


class Outcome(NamedTuple):
    """Result of one guarded take-over attempt.

    ``kind``: ``"won"`` (the judged lock was replaced by ours; ``displaced`` is its verdict),
    ``"published"`` (the path was free: our temp file is linked there), ``"refused"`` (the
    re-judged lock is not to be broken), ``"retry"`` (another file is there now: judge it
    afresh), ``"lost_race"`` (we removed the stale lock, someone else took the free path
    before our link), ``"restage"`` (the gate lets us take over a file our staged lock must
    record differently: :attr:`emptied`, the empty file to put back on release -- stage it
    again). ``status``: the last verdict seen.
    """

    kind: OutcomeKind
    status: LockStatus | None
    displaced: LockStatus | None = None
    emptied: EmptyFile | None = None


def publish_or_take_over(staged: Staged, policy: StalePolicy,
                         emptied: EmptyFile | None = None) -> Outcome:
    """Publish ``staged``, or replace what is in the way when the gate lets an acquire take it
    over (:func:`core.engine.gate.ask`, :attr:`~core.engine.gate.Intent.ACQUIRE`: a stale
    lock, an empty file nobody holds or has open); retried while the path keeps changing.
    ``emptied``: the empty file the staged lock records (``emptied=``). ``kind`` is
    ``"published"`` (``settle(linked=True)``), ``"won"`` (``settle(linked=False)``),
    ``"lost_race"``, ``"restage"`` (stage a lock recording :attr:`Outcome.emptied`), or
    ``"refused"`` with the verdict on the lock that stops us.

    Raises:
        ReadOnlyLock, UnsavedChanges, UnreadableError: the gate refuses what is there, whatever
            waiting does (a lock only its tool writes, unsaved work, not a lock, ...).
    """
    status: LockStatus | None = None
    path = staged.path

    def accept(st: LockStatus) -> bool:
        return gate.ask(path, st, Intent.ACQUIRE).act is Act.TAKE_OVER

    for _ in range(publish.MAX_RETRIES):
        if publish.publish(staged):
            return Outcome("published", status)
        status = inspect(path, policy=policy)
        answer = gate.ask(path, status, Intent.ACQUIRE)
        if answer.act is Act.PUBLISH:
            continue  # it went meanwhile
        if answer.act is Act.REFUSE:
            gate.refuse(path, answer, Intent.ACQUIRE)
        if answer.act is not Act.TAKE_OVER:
            return Outcome("refused", answer.status or status)
        if answer.emptied != emptied:
            return Outcome("restage", status, emptied=answer.emptied)
        out = take_over(staged, status, accept, policy)
        if out.kind != "retry":
            return out
        if not os.path.lexists(staged.tmp):  # a swap-back put the file back by a link
            return Outcome("restage", out.status, emptied=emptied)
        status = out.status
    return Outcome("refused", status)


def take_over(
    staged: Staged,
    judged: LockStatus,
    accept: Callable[[LockStatus], bool],
    policy: StalePolicy,
    dispose: Dispose | None = None,
) -> Outcome:
    """Replace the lock at the path by our complete temp file, under the guard, if
    (re-read and re-judged under the guard) it is still the judged file and ``accept``
    approves the new verdict (docs/engine.md, "Reclaim is race-free", steps 1-5). The judged
    file, once out and verified, goes to ``dispose`` (default: unlinked); if that raises, the
    judged file is swapped back and the exception propagates. An empty
    file is replaced holding its ``flock`` until it is gone (:mod:`core.engine.unheld`):
    ``"refused"`` when a process holds it or has it open by then.

    Raises:
        GuardTimeout: the directory guard stayed held by another process.
        LockError: neither a guard nor an exchange primitive is available (see
            :func:`_fallback_take_over`).
        UnreadableError: something not a regular file is at the path.
    """
    path = staged.path
    out = _take_over(staged, judged, accept, policy, dispose)
    if out.kind == "refused" and out.status is None:  # a peer holds, opened or uses it
        return Outcome("refused", inspect(path, policy=policy))
    return out


def _take_over(staged: Staged, judged: LockStatus, accept: Callable[[LockStatus], bool],
               policy: StalePolicy, dispose: Dispose | None) -> Outcome:
    """:func:`take_over` under the guard; ``"refused"`` without a status when the file's
    peers hold, opened or use it (:mod:`core.engine.unheld`): the caller looks again once the
    hold is let go."""
    path = staged.path
    with DirGuard(os.path.dirname(path)) as guard, contextlib.ExitStack() as stack:
        publish.crash_point("reclaim_after_guard")
        cur = read_regular(path)
        if cur is None:
            status = inspect(path, policy=policy)
            if status.state is State.FREE and publish.publish(staged):
                return Outcome("published", status)
            refuse_unreadable(path, status)
            return Outcome("retry", status)
        cur_data, cur_info = cur
        now_status = inspect_bytes(path, cur_data, cur_info, policy=policy)
        if judged.file is not None and cur_info != judged.file:
            return Outcome("retry", now_status)  # another file now: judge it afresh
        if not accept(now_status):
            return Outcome("refused", now_status)
        try:
            hold = hold_while_it_goes(stack, path, cur_data, cur_info, now_status.record,
                                      own=False)
        except LockLost:
            return Outcome("retry", now_status)
        except (ReadOnlyLock, LockHeld):
            return Outcome("refused", None)
        if hold is not None and (hold.busy or (hold.opened() and not hold.retake())):
            return Outcome("refused", None)  # its peers use, or are opening, the file
        if cur_info.dev in publish._no_exchange_devs:
            return _fallback_take_over(guard, staged, cur, now_status, policy, dispose, hold)
        try:
            seam.step("exchange", path)
            _exchange.exchange(staged.tmp, path)
        except ExchangeUnsupported:
            publish._no_exchange_devs.add(cur_info.dev)
            return _fallback_take_over(guard, staged, cur, now_status, policy, dispose, hold)
        except FileNotFoundError:
            return Outcome("retry", now_status)
        publish.crash_point("reclaim_after_exchange")
        out = hold.moved(staged.tmp) if hold is not None else read_regular(staged.tmp)
        if out is None or out[1] != cur_info or out[0] != cur_data:
            # not the judged file (a foreign tool replaced it meanwhile): put it back
            swap_back(staged.tmp, path, hold=hold is not None)
            return Outcome("retry", now_status)
        if hold is not None and hold.disturbed() and not hold.retake():
            # a peer opened it meanwhile: it must find it at the path (unheld.py)
            swap_back(staged.tmp, path, hold=True)
            return Outcome("refused", None)
        if dispose is None:
            with contextlib.suppress(OSError):  # the lock is ours whatever happens here
                seam.step("unlink", staged.tmp)
                os.unlink(staged.tmp)  # the judged stale lock, now under our temp name
        else:
            try:
                dispose(staged.tmp, cur_data, cur_info)
            except BaseException:
                seam.step("exchange", path)
                _exchange.exchange(staged.tmp, path)  # the judged file back, ours out
                raise
        publish.crash_point("reclaim_after_unlink_old")
        return Outcome("won", now_status, displaced=now_status)


def _fallback_take_over(
    guard: DirGuard,
    staged: Staged,
    cur: tuple[bytes, FileInfo],
    judged: LockStatus,
    policy: StalePolicy,
    dispose: Dispose | None = None,
    hold: Hold | None = None,
) -> Outcome:
    """Without an exchange primitive the judged file must leave the path before ours can
    be linked in; that is safe only while every Lockwarden breaker is serialised by the
    guard. Without the guard: refuse (two breakers could each remove the other's fresh
    lock), with a clear error."""
    if not guard.held:
        raise LockError(
            f"cannot break {staged.path} safely: this file system offers neither a kernel "
            "lock on the directory (or on a guard file in it) nor an atomic exchange; "
            "remove the stale lock by hand once you are sure its holder is gone"
        )
    return _rename_out_and_link(staged, cur, judged, policy, dispose, hold)


def _rename_out_and_link(
    staged: Staged, cur: tuple[bytes, FileInfo], judged: LockStatus, policy: StalePolicy,
    dispose: Dispose | None = None, hold: Hold | None = None,
) -> Outcome:
    """Fallback without an exchange primitive (under the guard): move the judged file
    out, verify it, delete it, then publish ours with ``link`` (EEXIST: a foreign acquirer
    got in first, fairly)."""
    path = staged.path
    swap = temp_path(path, publish.new_token(), "swap")
    if hold is not None and hold.opened() and not hold.retake():
        return Outcome("refused", None)  # a peer is opening it: it stays
    try:
        seam.step("rename", path)
        os.rename(path, swap)
    except FileNotFoundError:
        return Outcome("retry", judged)
    publish.crash_point("reclaim_after_rename_out")
    out = hold.moved(swap) if hold is not None else read_regular(swap)
    if out is None or out[1] != cur[1] or out[0] != cur[0]:
        put_back(swap, path, hold=hold is not None)
        return Outcome("retry", judged)
    if hold is not None and hold.disturbed() and not hold.retake():  # a peer opened it
        put_back(swap, path, hold=True)
        return Outcome("refused", None)
    discard(swap, path, out, dispose)
    publish.crash_point("reclaim_after_unlink_old")
    if publish.publish(staged):
        unlink_quiet(staged.tmp)
        return Outcome("won", judged, displaced=judged)
    # we removed the stale lock, but another acquirer linked into the free path first
    return Outcome("lost_race", inspect(path, policy=policy), displaced=judged)
