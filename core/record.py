"""The data types every part of Lockwarden shares: what a lock file says (:class:`LockRecord`)
and what we conclude about it (:class:`LockStatus`).

Times are aware ``datetime`` objects in UTC; durations (``ttl``, ages) are float seconds.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from core.codes import Code
from core.reasons import Reason
from core.stale_policy import DEFAULT_POLICY, StalePolicy


class Liveness(enum.StrEnum):
    """Whether the holder process of a lock still runs (docs/DESIGN.md, "Liveness and verdicts").

    - ``alive``: same host, the PID exists and started no later than the lock was written
      (+1 s, sema timestamps are whole seconds); ``psutil.AccessDenied`` counts as alive.
    - ``dead``: same host and no such PID.
    - ``reused``: same host, the PID exists but belongs to a later process (or its start time
      differs from the lock's ``start=``): the holder is dead.
    - ``remote``: the lock names another host; only age or TTL can judge it.
    - ``unknown``: the format records no PID (af, most task-mcp owners).
    """

    ALIVE = "alive"
    DEAD = "dead"
    REUSED = "reused"
    REMOTE = "remote"
    UNKNOWN = "unknown"


class State(enum.StrEnum):
    """A lock's verdict (docs/DESIGN.md, "Liveness and verdicts").

    ``free`` is the state of a path with no lock file. ``writing`` is an empty or partial file
    younger than the 2 s grace. ``expired``: TTL or ``expires_at`` passed while the holder may
    be alive. ``stale``: the holder is proven dead, or age/TTL is past the policy where liveness
    cannot be known. ``unreadable``: the file cannot be read or parsed (see ``reasons``).
    """

    FREE = "free"
    HELD = "held"
    STALE = "stale"
    EXPIRED = "expired"
    WRITING = "writing"
    UNREADABLE = "unreadable"


FORMATS: tuple[str, ...] = (
    "sema", "af-ledger", "af-claim", "task-mcp", "pidfile",
    "git-lock", "git-gc", "vim-swap", "emacs-lock", "libreoffice-lock", "terraform-lock-info",
    "softfilelock", "libreoffice-profile",
)
"""Format names, as used in ``LockRecord.format`` and on the command line. The last eight are
developer tools' marker locks, read-only in Lockwarden (``docs/specs/devtool-locks.md``)."""

DEVTOOL_FORMATS: tuple[str, ...] = FORMATS[5:]
"""Developer tools' marker locks (git, Vim, Emacs, LibreOffice, Terraform, filelock): read and
judged by :mod:`core.verdicts.devtools`, never written."""

TOOLS: dict[str, str] = {
    "sema": "sema", "task-mcp": "task-mcp", "af-ledger": "af", "af-claim": "af",
    "pidfile": "pidfile", "git-lock": "git", "git-gc": "git", "vim-swap": "vim",
    "emacs-lock": "emacs", "libreoffice-lock": "libreoffice",
    "libreoffice-profile": "libreoffice", "terraform-lock-info": "terraform",
    "softfilelock": "filelock",
}
"""The tool of each format (:attr:`LockStatus.tool`)."""

_ANCHOR_CODES = frozenset({Code.KERNEL_LOCK_HELD, Code.KERNEL_ANCHOR_FREE,
                           Code.KERNEL_ANCHOR_UNCHECKED, Code.KERNEL_TABLE_TOO_LARGE})
_FREE_FILE_CODES = frozenset({Code.KERNEL_ANCHOR_FREE, Code.EMPTY_FREE})

WRITABLE_FORMATS: tuple[str, ...] = ("sema", "task-mcp", "af-ledger")
"""Formats Lockwarden can acquire locks in."""


@dataclass(frozen=True, slots=True)
class LockRecord:
    """What one lock says, parsed from its bytes by a format in :mod:`core.formats`.

    Attributes:
        path: the lock file's path (for a claim replayed from an ``af`` ledger:
            ``"<proof>/ledger#<node_id>"``).
        format: one of :data:`FORMATS`.
        holder: owner text (``owner``, ``agent_id``) or ``None``; for sema, ``None``.
        pid: holder PID, or ``None`` when the format has none.
        host: hostname the lock names, or ``None`` (unknown: assume this host for sema/pidfile).
        acquired_at: when the lock was taken (aware, UTC), or ``None`` (pidfile).
        expires_at: absolute expiry (aware, UTC), or ``None``.
        ttl: lease length in seconds, or ``None``.
        tag: human description (sema ``tag``), control characters already replaced by spaces.
        metadata: format-specific extra data (task-mcp ``metadata``; sema unknown keys).
        raw: the file's text as read (decoded UTF-8, errors replaced).
        token: random 128-bit hex of a Lockwarden acquisition (sema ``token=``), else ``None``.
        start: holder process start time (Unix seconds, float) when recorded (sema ``start=``).
        proc: clock-independent identity of the holder process where the OS has one (Linux:
            ``"<boot_id>:<start time in clock ticks since boot>"``, sema ``proc=``), so that a
            wall-clock step cannot make a live holder look like a reused PID.
        renewed_at: when a refreshed lock was last renewed (aware, UTC), where the format
            keeps that apart from ``acquired_at`` (sema: ``timestamp`` of a lock that also
            records ``acquired=``; docs/formats.md, "Refresh: age and expiry"), else ``None``.
        removal: for a lock held on a lock server, what releasing it does there, as reasons
            (``terminates_session{pid, user, app}`` per PostgreSQL session,
            ``deletes_key{key, token, signal}``, ``revokes_lease{lease, keys, names}``,
            ``resets_row{table, id}``; rendered by :func:`core.reasons.render`; docs/remote.md,
            "What a release does"); ``()`` for a lock file.
    """

    path: str
    format: str
    holder: str | None = None
    pid: int | None = None
    host: str | None = None
    acquired_at: datetime | None = None
    expires_at: datetime | None = None
    ttl: float | None = None
    tag: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    raw: str = ""
    token: str | None = None
    start: float | None = None
    proc: str | None = None
    renewed_at: datetime | None = None
    removal: tuple[Reason, ...] = ()

    @property
    def written_by_lockwarden(self) -> bool:
        """True when the lock carries our ``token`` and ``host`` keys (docs/DESIGN.md stale
        policy)."""
        return self.token is not None and self.host is not None

    @property
    def timestamp(self) -> int | None:
        """``acquired_at`` as integer Unix seconds (sema's ``timestamp``), or ``None``."""
        return int(self.acquired_at.timestamp()) if self.acquired_at else None

    def effective_expiry(self) -> datetime | None:
        """``expires_at`` if set, else ``acquired_at + ttl`` if both are set, else ``None``.

        A lease that would end after year 9999 is reported as ``datetime.max`` (UTC)."""
        if self.expires_at is not None:
            return self.expires_at
        if self.acquired_at is not None and self.ttl is not None:
            from datetime import timedelta

            try:
                return self.acquired_at + timedelta(seconds=self.ttl)
            except (OverflowError, ValueError):
                return datetime.max.replace(tzinfo=UTC)  # a lease past year 9999: never
        return None


@dataclass(frozen=True, slots=True)
class FileInfo:
    """Identity of the file a verdict was made on: used to verify that the file about to be
    broken is still the one judged (inode, size, mtime in ns)."""

    ino: int
    dev: int
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a verdict was judged on besides the file: the process seen under the recorded PID
    and this host's boot time.

    Attributes:
        pid: the PID looked up, or ``None``.
        process_start: that process's start time (Unix s, psutil ``create_time``), or ``None``.
        process_name: that process's name, or ``None`` (not found, or access denied).
        boot_time: this host's last boot (Unix s, ``psutil.boot_time()``), when it was used.
        process_user: the name of the user the process runs as (its real UID), or ``None``
            (not found, not alive, or not readable); a UID without a name is its number.
        process_uid: that real UID, or ``None``.
        followed: how the watcher follows that live holder, as a reason
            (:class:`core.reasons.Reason`: ``liveness_followed{pid, how}`` -- the kernel tells
            it at once when the process exits -- or ``liveness_polled{pid, every_s, why}`` --
            the liveness pass checks it); ``None`` outside the watcher, or for a holder that is
            not alive on this host (docs/watching.md, "Holders' exits").
    """

    pid: int | None = None
    process_start: float | None = None
    process_name: str | None = None
    boot_time: float | None = None
    process_user: str | None = None
    process_uid: int | None = None
    followed: Reason | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the fields (``followed`` only when set: a reason object)."""
        out: dict[str, Any] = {"pid": self.pid, "process_start": self.process_start,
                               "process_name": self.process_name,
                               "process_user": self.process_user,
                               "process_uid": self.process_uid, "boot_time": self.boot_time}
        if self.followed is not None:
            out["followed"] = self.followed.to_dict()
        return out


@dataclass(frozen=True, slots=True)
class LockStatus:
    """The verdict on one lock path at one moment.

    Attributes:
        path: the lock path (or virtual path of an af ledger claim, see :class:`LockRecord`).
        state: :class:`State`; ``free`` when there is no file (``record`` is then ``None``).
        liveness: :class:`Liveness` of the holder.
        reasons: the verdict's reasons as data (:class:`core.reasons.Reason`: a code and its
            parameters), e.g. ``holder_dead{pid=4242}``, ``older_than_stale_after{age_s,
            limit_s}``; :func:`core.reasons.render` gives the words.
        record: the parsed lock, or ``None`` (free, writing or unreadable).
        checked_at: when the verdict was made (aware UTC).
        file: identity of the judged file, or ``None``.
        error: for ``unreadable``: the reason the file could not be read or parsed.
        read_only: True for locks Lockwarden must not modify (af ledger claims, known tools'
            kernel-lock anchors: :attr:`anchor_tool`).
        policy: the :class:`~core.stale_policy.StalePolicy` the verdict was judged under
            (``stale_after`` is its limit for the lock's format, seconds).
        evidence: the process and boot time the verdict was judged on (:class:`Evidence`).
    """

    path: str
    state: State
    liveness: Liveness = Liveness.UNKNOWN
    reasons: tuple[Reason, ...] = ()
    record: LockRecord | None = None
    checked_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    file: FileInfo | None = None
    error: str | None = None
    read_only: bool = False
    evidence: Evidence = field(default_factory=lambda: Evidence())
    policy: StalePolicy = DEFAULT_POLICY

    @property
    def stale_after(self) -> float:
        """The stale limit (seconds) this verdict was judged with: the policy's limit for the
        lock's format (:meth:`core.stale_policy.StalePolicy.limit_for`)."""
        return self.policy.limit_for(self.record.format if self.record else None)

    @property
    def age_s(self) -> float | None:
        """Seconds since ``record.acquired_at`` at ``checked_at``, or ``None``."""
        if self.record is None or self.record.acquired_at is None:
            return None
        return (self.checked_at - self.record.acquired_at).total_seconds()

    @property
    def age_is_lower_bound(self) -> bool:
        """True when :attr:`age_s` counts from when Lockwarden first saw the lock, not from
        when it was taken (a server that records no time: an etcd lock, a Redis key without
        one; the reason ``age_from_first_seen``): the real age is at least that, and unknown
        when it was first seen just now."""
        return any(r.code is Code.AGE_FROM_FIRST_SEEN for r in self.reasons)

    @property
    def locked(self) -> bool:
        """True when a lock file exists at the path (any state but ``free``)."""
        return self.state is not State.FREE

    @property
    def kernel_pid(self) -> int | None:
        """The PID the kernel names as holder when a kernel lock decided this verdict (reason
        ``kernel_lock_held``), else None (also when the kernel names none)."""
        for r in self.reasons:
            if r.code is Code.KERNEL_LOCK_HELD:
                pid = r.get("pid")
                return pid if isinstance(pid, int) else None
        return None

    @property
    def kernel_held(self) -> bool:
        """True when a kernel lock (flock, POSIX, OFD) decided this verdict."""
        return any(r.code is Code.KERNEL_LOCK_HELD for r in self.reasons)

    @property
    def anchor_tool(self) -> str:
        """The tool whose kernel-lock anchor the path is (``"dpkg"``, ``"apt"``, ``"cargo"``,
        ``"uv"``, ``"gradle"``: :func:`core.kernel.anchors.anchor_tool`), read from the reasons
        (``tool`` of ``kernel_lock_held``, ``kernel_anchor_free``, ``kernel_anchor_unchecked``,
        ``kernel_table_too_large``), else ``""``. Such a file is never deleted
        (docs/specs/devtool-locks.md §0)."""
        for r in self.reasons:
            if r.code in _ANCHOR_CODES:
                tool = r.get("tool")
                if isinstance(tool, str) and tool:
                    return tool
        return ""

    @property
    def present(self) -> bool:
        """True when a file is at the path: any state but ``free``, and a ``free`` file --
        a kernel-lock anchor nobody holds (``kernel_anchor_free``) or an empty file nobody
        holds or has open (``empty_free``). The GUI keeps a row for each present path; a
        ``free`` verdict without a file removes it."""
        return self.state is not State.FREE or any(
            r.code in _FREE_FILE_CODES for r in self.reasons)

    @property
    def empty_free(self) -> bool:
        """True for an empty file that no kernel lock holds and no process has open
        (``empty_free``, docs/DESIGN.md "Two kinds of locks"): free, and removable or
        replaceable on request, holding its ``flock`` (:mod:`core.engine.unheld`)."""
        return self.state is State.FREE and any(r.code is Code.EMPTY_FREE for r in self.reasons)

    @property
    def holder_pid(self) -> int | None:
        """The PID of the holder as far as it is known: the one the lock records, else the
        one the kernel names for a kernel lock on the file; ``None`` otherwise."""
        if self.record is not None and self.record.pid is not None:
            return self.record.pid
        return self.kernel_pid

    @property
    def tool(self) -> str:
        """The tool whose lock this is (:data:`TOOLS`: ``"git"``, ``"vim"``, ``"sema"``...),
        the tool of a known kernel-lock anchor (:attr:`anchor_tool`: ``"dpkg"``, ``"cargo"``,
        ``"uv"``...), ``"kernel"`` for another file only the kernel locks (filelock's
        ``FileLock``, portalocker, fasteners...), ``""`` when nothing reads it
        (docs/specs/devtool-locks.md)."""
        if self.record is not None:
            return TOOLS.get(self.record.format, self.record.format)
        return self.anchor_tool or ("kernel" if self.kernel_held else "")

    @property
    def kind(self) -> str:
        """``"kernel"`` when a kernel lock decides the verdict or the path is a known tool's
        kernel-lock anchor, held or free (never stale, its file never deleted), ``"server"``
        for a lock held on a lock server (its record says what releasing it does:
        :attr:`LockRecord.removal`), ``"marker"`` for a lock file that is the lock (removed to
        release a dead holder's), ``""`` for a free path or a file that is not a lock."""
        if self.kernel_held or self.anchor_tool:
            return "kernel"
        if self.record is not None and self.record.removal:
            return "server"
        if self.record is not None or (self.state is not State.FREE and self.file is not None
                                       and self.file.size == 0):
            return "marker"
        return ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict, a superset of sema's ``status --json``: ``locked``, ``pid``,
        ``timestamp``, ``tag`` plus ``path``, ``format``, ``host``, ``holder``, ``liveness``,
        ``tool``, ``kind`` (``marker``/``kernel``/``server``/""), ``state``, ``reasons`` (objects
        ``{"code", "text", **params}``), ``age_s``,
        ``expires_at`` (RFC 3339 UTC or null), ``ttl``, ``error``, ``evidence``, ``removal``
        (what releasing a server lock does, as reason objects; ``[]`` for a lock file).

        ``pid`` is the holder's PID (:attr:`holder_pid`): the recorded one, or for a file a
        kernel lock holds, the PID the kernel names; ``holder`` is the recorded owner, or for
        a kernel-held file the holder process's name (``evidence`` has its user too)."""
        rec = self.record
        expiry = rec.effective_expiry() if rec else None
        age = self.age_s
        holder = rec.holder if rec else (self.evidence.process_name if self.kernel_held
                                         else None)
        return {
            "locked": self.locked,
            "pid": self.holder_pid,
            "timestamp": rec.timestamp if rec else None,
            "tag": rec.tag if rec else None,
            "path": self.path,
            "format": rec.format if rec else None,
            "tool": self.tool,
            "kind": self.kind,
            "host": rec.host if rec else None,
            "holder": holder,
            "liveness": self.liveness.value,
            "state": self.state.value,
            "reasons": [r.to_dict() for r in self.reasons],
            "age_s": round(age, 3) if age is not None else None,
            "expires_at": expiry.isoformat().replace("+00:00", "Z") if expiry else None,
            "ttl": rec.ttl if rec else None,
            "error": self.error,
            "evidence": self.evidence.to_dict(),
            "removal": [r.to_dict() for r in rec.removal] if rec else [],
        }
