"""What the engine asks a format to write: one typed request per lock Lockwarden publishes.

Each writable format (:data:`core.record.WRITABLE_FORMATS`) has a builder in its own module --
:func:`core.formats.sema.build`, :func:`core.formats.taskmcp.build`,
:func:`core.formats.af.build_ledger` -- chosen by name through :func:`core.formats.build`. A
builder turns a :class:`WriteRequest` into the :class:`~core.record.LockRecord` and the exact
bytes the engine publishes (:mod:`core.engine.publish`). Everything a format may need is a field
here; there is no other channel between the engine and a format.

What Lockwarden writes besides each format's own fields (docs/DESIGN.md, "Formats"; docs/engine.md,
"Acquire publishes a complete file atomically"): the holder's ``host``, ``start`` (process start
time, Unix seconds) and ``proc`` (boot id and start ticks, docs/engine.md "Clock steps"), the
acquisition's random ``token`` and, where asked for, the lease ``ttl``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple

from core.defaults import MAX_TAG_BYTES
from core.errors import TagTooLong
from core.record import LockRecord

# NamedTuples rather than dataclasses: immutable and typed as well, and ~6x cheaper to define
# at import, which the CLI's start-up pays (docs/cli.md, "Start-up time")


class Holder(NamedTuple):
    """The process a lock names as its holder.

    Attributes:
        pid: the holder's PID (this process, or the CLI's parent shell).
        host: this host's name (:func:`core.verdicts.liveness.hostname`).
        start: the holder's start time, Unix seconds (psutil's ``create_time``), so that a
            reused PID is detected (docs/DESIGN.md, "Liveness and verdicts").
        proc: the clock-independent process identity ``"<boot id>:<start ticks>"`` where the
            OS has one (:func:`core.verdicts.liveness.process_identity`), else ``None``.
    """

    pid: int
    host: str
    start: float
    proc: str | None = None


class Reclaimed(NamedTuple):
    """What a Task MCP reclaim replaced, written into the new lock's ``metadata`` as
    ``reclaimed_from`` and ``reclaimed_reason`` (``docs/specs/task-mcp.txt``, "Reclaim
    Process"). Formats without such fields ignore it.

    Attributes:
        holder: the displaced lock's ``owner`` (``None`` when it had none).
        reason: the reclaim matrix's decision (``LOCK_EXPIRED``, ``HOLDER_DEAD``, ``FORCE``...;
            ``STALE`` when the matrix did not decide).
    """

    holder: str | None
    reason: str


class WriteRequest(NamedTuple):
    """One lock to write.

    Attributes:
        path: the absolute lock path (``LockRecord.path``).
        holder: who holds it (:class:`Holder`).
        token: 32 lowercase hex digits naming this acquisition.
        at: when it was taken or renewed (aware datetime, UTC); each format cuts it to what it
            stores (sema: whole seconds; task-mcp: milliseconds).
        tag: the human description, or ``None`` (sema ``tag``; task-mcp ``metadata.tag``;
            af-ledger ``agent_id``). Every writable format writes it with control characters and
            Unicode format characters (category ``Cf``: bidi overrides, zero width characters)
            replaced by spaces and trimmed (:func:`core.formats._common.clean_tag`).
        ttl: lease length in seconds, or ``None`` (task-mcp needs one). For a renewal, the
            lease from ``at`` on.
        reclaimed: for a reclaim, what was replaced (:class:`Reclaimed`), else ``None``.
        acquired: for a renewal (refresh), when the lock was first taken (aware, UTC): a
            lock's age counts from its acquisition, only its expiry moves (docs/formats.md,
            "Refresh: age and expiry"). ``None`` for a new lock (``at`` is then both).
        emptied: the empty file this lock replaces, which its release puts back
            (:meth:`core.engine.gate.EmptyFile.text`: mode, owner, group, mtime); written as
            ``emptied`` (other tools ignore it). ``None`` when it replaced none.
    """

    path: str
    holder: Holder
    token: str
    at: datetime
    tag: str | None = None
    ttl: float | None = None
    reclaimed: Reclaimed | None = None
    acquired: datetime | None = None
    emptied: str | None = None


class Built(NamedTuple):
    """A builder's result: the record as a reader will parse it, its exact bytes, and the
    file mode (permission bits) to create it with (0644; task-mcp 0600, as Task MCP's own
    lock files)."""

    record: LockRecord
    data: bytes
    mode: int = 0o644


def check_tag(tag: str | None) -> None:
    """Refuse a tag longer than :data:`core.defaults.MAX_TAG_BYTES` bytes of UTF-8.

    Raises:
        TagTooLong: (a ``ValueError`` and a ``LockError``) with ``size`` and ``limit`` in bytes.
    """
    if tag is None or len(tag) * 4 <= MAX_TAG_BYTES:  # at most 4 bytes per character
        return
    size = len(tag.encode("utf-8", "surrogatepass"))
    if size > MAX_TAG_BYTES:
        raise TagTooLong(size, MAX_TAG_BYTES)


Builder = Callable[[WriteRequest], Built]
"""The signature of a format's builder."""

__all__ = ["Builder", "Built", "Holder", "Reclaimed", "WriteRequest", "check_tag"]
