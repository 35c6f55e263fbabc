"""One lock path to one verdict: read safely, parse, check the holder, judge
(DESIGN.md, "Formats" and "Liveness and verdicts").

:func:`inspect` is ``core.inspect`` of the public API and the CLI's ``status``; the scanner,
which has already read the bytes, calls :func:`inspect_bytes`. Neither ever raises because of
what is (or is not) at the path: FIFOs, symlinks, directories, garbage and permission problems
all become ``unreadable`` verdicts with a reason, a missing file is ``free``.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import types
from datetime import UTC, datetime

from core.errors import ParseError, UnreadableError
from core.fsutil import os_reason, read_lock_file
from core.liveness import ProcessSnapshot, check
from core.policy import StalePolicy, judge
from core.record import FileInfo, Liveness, LockRecord, LockStatus, State

_DEFAULT_POLICY = StalePolicy()


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
        policy: stale policy; default :class:`~core.policy.StalePolicy` ``()`` (3600 s).
        procs: a :func:`core.liveness.snapshot` to judge liveness with; default: look up the
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
    policy = policy or _DEFAULT_POLICY
    now = now or datetime.now(UTC)
    try:
        data, info = _read_settled(path)
    except FileNotFoundError:
        claim = _ledger_claim(path, policy=policy, procs=procs, now=now)
        if claim is not None:
            return claim
        return LockStatus(
            path,
            State.FREE,
            reasons=["no lock file"],
            checked_at=now,
            stale_after=policy.stale_after,
        )
    except OSError as exc:  # UnreadableError, or anything read_lock_file did not foresee
        return judge(
            path,
            None,
            file=None,
            liveness=Liveness.UNKNOWN,
            liveness_reasons=[],
            policy=policy,
            now=now,
            error=exc.reason if isinstance(exc, UnreadableError) else os_reason(exc),
        )
    return inspect_bytes(path, data, info, policy=policy, procs=procs, now=now)


def inspect_bytes(
    path: str,
    data: bytes,
    file: FileInfo | None,
    *,
    policy: StalePolicy | None = None,
    procs: ProcessSnapshot | None = None,
    now: datetime | None = None,
    mtime: float | None = None,
) -> LockStatus:
    """The verdict on a lock whose bytes were already read (by the scanner).

    Args:
        path: the lock path (used by format detection and in the verdict).
        data: the file's bytes (at most 64 KiB, as :func:`core.fsutil.read_lock_file` reads).
        file: the identity of the file the bytes came from, or ``None``.
        policy, procs, now: as :func:`inspect`.
        mtime: the file's modification time (Unix s); default ``file.mtime_ns``.

    Empty bytes (or only whitespace) and bytes no format accepts go to
    :func:`core.policy.judge` as ``empty_or_partial`` (``writing`` while young; an old empty
    file is ``stale``; garbage stays ``unreadable``). Parsed records get a liveness check
    (:func:`core.liveness.check`) and a verdict. Never raises for the content of ``data``.
    """
    policy = policy or _DEFAULT_POLICY
    now = now or datetime.now(UTC)
    if mtime is None and file is not None:
        mtime = file.mtime_ns / 1e9
    empty = not data.strip()
    error = "the file is empty" if empty else None
    if error is None:
        try:
            record = _parse(data, path)
        except ParseError as exc:
            error = exc.reason
    if error is not None:  # empty or partial: "writing" within the grace, else unreadable
        return judge(
            path,
            None,
            file=file,
            liveness=Liveness.UNKNOWN,
            liveness_reasons=[],
            policy=policy,
            now=now,
            mtime=mtime,
            error=error,
            empty_or_partial=True,
            empty=empty,
        )
    try:
        liveness, reasons = check(record, procs=procs, written_at=mtime)
    except Exception as exc:  # psutil failure (e.g. /proc not mounted): judge without it
        liveness, reasons = Liveness.UNKNOWN, [f"the holder's process could not be checked: {exc}"]
    return judge(
        path,
        record,
        file=file,
        liveness=liveness,
        liveness_reasons=reasons,
        policy=policy,
        now=now,
        mtime=mtime,
    )


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
        return judge(
            path,
            None,
            file=None,
            liveness=Liveness.UNKNOWN,
            liveness_reasons=[],
            policy=policy,
            now=now,
            error=f"the ledger could not be replayed ({type(exc).__name__}: {exc})",
        )
    for record in claims:
        node_id = record.metadata.get("node_id") if isinstance(record.metadata, dict) else None
        if node_id == node or record.path == path:
            liveness, reasons = check(record, procs=procs)
            status = judge(
                path,
                record,
                file=None,
                liveness=liveness,
                liveness_reasons=reasons,
                policy=policy,
                now=now,
            )
            return dataclasses.replace(status, read_only=True)
    return LockStatus(
        path,
        State.FREE,
        reasons=[f"node {node} is not claimed in the ledger"],
        checked_at=now,
        stale_after=policy.stale_after,
        read_only=True,
    )


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


class _CallableModule(types.ModuleType):
    """``core.inspect`` is both this module and the public function ``core.inspect(path)``.

    Importing the submodule (``from core.inspect import inspect_bytes``) makes Python set the
    attribute ``core.inspect`` to the module, hiding the lazily exported function; calling the
    module therefore calls :func:`inspect`, so ``core.inspect(path)`` works whatever was
    imported first."""

    def __call__(
        self,
        path: str,
        *,
        policy: StalePolicy | None = None,
        procs: ProcessSnapshot | None = None,
        now: datetime | None = None,
    ) -> LockStatus:
        return inspect(path, policy=policy, procs=procs, now=now)


sys.modules[__name__].__class__ = _CallableModule


def _read_settled(path: str) -> tuple[bytes, FileInfo]:
    """:func:`core.fsutil.read_lock_file`, tried a second time when the file was swapped while
    being read (an engine refresh or reclaim exchanges names atomically): the second read sees
    the settled file instead of reporting a passing "changed while being read"."""
    try:
        return read_lock_file(path)
    except UnreadableError as exc:
        if not exc.reason.startswith("changed while"):
            raise
    return read_lock_file(path)
