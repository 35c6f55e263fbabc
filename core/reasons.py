"""Verdict reasons as data: one enumeration of codes, typed parameters, and the one place
where they become words.

Every reason a verdict carries (:attr:`core.record.LockStatus.reasons`) is a :class:`Reason`:
a stable :class:`Code` plus parameters (numbers in seconds, PIDs, host names, ISO 8601 UTC
times). Code decides on codes and parameters only; people read :func:`render`. Nothing in
Lockwarden compares or parses the rendered text (``docs/verdicts.md`` lists the codes).

Imports only the standard library, so every module of ``core`` may use it.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

Param = int | float | str | bool | None
"""A reason's parameter value: JSON-ready scalars only."""


class Code(enum.StrEnum):
    """Stable reason codes (``docs/verdicts.md``). Values are the JSON ``code`` strings."""

    # what is (not) at the path
    NO_LOCK_FILE = "no_lock_file"
    NOT_CLAIMED = "not_claimed"  # node
    UNREADABLE = "unreadable"  # kind, detail
    WRITING = "writing"  # empty, age_s
    EMPTY_LEFT_BY_CRASH = "empty_left_by_crash"  # age_s
    # the holder's liveness (core.verdicts.liveness)
    NO_PID = "no_pid"
    INVALID_PID = "invalid_pid"  # pid
    INIT_HOLDER = "init_holder"  # pid
    REMOTE_HOST = "remote_host"  # pid, host, this_host
    HOLDER_ALIVE = "holder_alive"  # pid, name
    HOLDER_ALIVE_UNVERIFIED = "holder_alive_unverified"  # pid, name, why
    HOLDER_DEAD = "holder_dead"  # pid, zombie
    HOLDER_PINNED = "holder_pinned"  # pid, recorded
    PID_REUSED = "pid_reused"  # pid, how, delta_s
    PREDATES_BOOT = "predates_boot"  # pid (optional), boot_at
    LIVENESS_UNCHECKED = "liveness_unchecked"  # detail
    # the policy (core.verdicts.policy)
    EXPIRED = "expired"  # ago_s, ttl_s | expires_at
    AF_KEEPS_EXPIRED = "af_keeps_expired"
    EXPIRED_HOLDER_DEAD = "expired_holder_dead"
    EXPIRED_HOLDER_UNKNOWABLE = "expired_holder_unknowable"  # remote
    HOLDER_DEAD_BEFORE_EXPIRY = "holder_dead_before_expiry"  # left_s
    HELD_FOR = "held_for"  # age_s
    CLOCK_SKEW = "clock_skew"  # ahead_s
    EXPIRES_IN = "expires_in"  # left_s
    AF_REAPS_CLAIMS = "af_reaps_claims"
    OURS_HOLDER_DEAD = "ours_holder_dead"
    AGE_UNKNOWN = "age_unknown"
    OLDER_THAN_STALE_AFTER = "older_than_stale_after"  # age_s, limit_s
    YOUNGER_THAN_STALE_AFTER = "younger_than_stale_after"  # age_s, limit_s, holder
    # locks on servers (core.remote, docs/remote.md)
    PG_SESSION = "pg_session"  # pid, user, app, client, state, holders
    SESSION_IDLE = "session_idle"  # idle_s
    WAITERS = "waiters"  # count
    NO_TTL = "no_ttl"
    AGE_FROM_FIRST_SEEN = "age_from_first_seen"  # age_s
    CLIENT_CONNECTED = "client_connected"  # ip, sessions
    NO_SESSION_FROM_CLIENT = "no_session_from_client"  # ip
    # developer tools' marker locks (core.verdicts.devtools)
    GIT_WORKER = "git_worker"  # pid, name, count
    NO_GIT_WORKER = "no_git_worker"  # repo
    GIT_LOCK_YOUNG = "git_lock_young"  # age_s, limit_s
    GIT_LOCK_SUSPICIOUS = "git_lock_suspicious"  # age_s
    GIT_REMOVE_LOCK = "git_remove_lock"
    GC_PID_OLD = "gc_pid_old"  # age_s, limit_s
    GC_PID_REMOTE = "gc_pid_remote"  # age_s, limit_s
    NOT_THE_TOOL = "not_the_tool"  # pid, name, tool
    SWAP_RECOVER = "swap_recover"  # file
    SWAP_CLEAN = "swap_clean"
    OTHER_BOOT = "other_boot"  # boot_at, this_boot_at
    OFFICE_RUNNING = "office_running"  # pid, user
    NO_OFFICE_PROCESS = "no_office_process"  # user
    START_TOKEN_MISMATCH = "start_token_mismatch"  # pid
    # kernel locks (core.kernel.locks)
    KERNEL_LOCK_HELD = "kernel_lock_held"  # pid, kind, access, file, tool (known anchors)
    KERNEL_ANCHOR_FREE = "kernel_anchor_free"  # tool, file
    KERNEL_ANCHOR_UNCHECKED = "kernel_anchor_unchecked"  # tool, file, detail
    NO_KERNEL_LOCK = "no_kernel_lock"  # file
    LEASE = "lease"  # lease, left_s, granted_s


class UnreadableKind(enum.StrEnum):
    """Why a path could not be read as a lock (parameter ``kind`` of ``unreadable``)."""

    SYMLINK = "symlink"
    FIFO = "fifo"
    SOCKET = "socket"
    DEVICE = "device"
    DIRECTORY = "directory"
    NOT_REGULAR = "not_regular"
    TOO_LARGE = "too_large"
    CHANGED = "changed"
    PERMISSION = "permission"
    OS_ERROR = "os_error"
    EMPTY = "empty"
    PARSE = "parse"
    ENGINE_FILE = "engine_file"
    """One of Lockwarden's own files, never a lock: the audit log, the guard file, a temp
    file of the engine (:func:`core.fsutil.is_engine_file`)."""

    @property
    def inconclusive(self) -> bool:
        """True for kinds that say nothing lasting about what the file is: it changed while
        being read (an exchange in progress), or this user may not read it (another user's
        lock, e.g. a mode 0600 task-mcp lock: it can still be waited for until it goes away).
        A wait does not end on them (:func:`core.fsutil.refuse_unreadable`)."""
        return self in (UnreadableKind.CHANGED, UnreadableKind.PERMISSION)

    @property
    def not_a_file(self) -> bool:
        """True for kinds that are no regular file at all (never opened, never removed)."""
        return self in _NOT_FILES


class ReadOnlyKind(enum.StrEnum):
    """Why the engine refuses to remove or replace a lock it can read
    (:class:`core.errors.ReadOnlyLock`)."""

    LEDGER_CLAIM = "ledger_claim"
    """A claim replayed from an af ledger's events (``"<proof>/ledger#<node>"``): there is no
    file to remove; only af changes its ledger (docs/DESIGN.md, "Formats": claims in a ledger are
    read-only)."""
    KERNEL_LOCK = "kernel_lock"
    """A file the kernel holds a lock on (flock, POSIX, OFD), or a known tool's kernel-lock
    anchor (dpkg, apt, cargo, uv, Gradle: :func:`core.kernel.anchors.anchor_tool`) whether held now
    or not: deleting or replacing it would not release that lock and would let a second holder in
    (docs/engine.md, "What force may remove"; docs/specs/devtool-locks.md §0); end the holder
    process instead."""
    NOT_A_LOCK = "not_a_lock"
    """A regular file that no lock format reads and that is not empty (a text file, a
    binary, a file over 64 KiB): ``--force`` never removes or replaces it (docs/engine.md,
    "What force may remove")."""
    NOT_WRITABLE = "not_writable"
    """A lock in a format Lockwarden never writes (``af-claim``): a reclaim would have to put a
    lock of another format where af expects its own claim file (docs/engine.md, "af claims")."""


_NOT_FILES = frozenset(
    {
        UnreadableKind.SYMLINK,
        UnreadableKind.FIFO,
        UnreadableKind.SOCKET,
        UnreadableKind.DEVICE,
        UnreadableKind.DIRECTORY,
        UnreadableKind.NOT_REGULAR,
    }
)

TICKING: Mapping[str, int] = {"age_s": 1, "ago_s": 1, "left_s": -1, "ahead_s": -1, "idle_s": 1}
"""Parameters that follow the clock: +1 grows with time, -1 shrinks. A verdict whose reasons
differ only in these says nothing new (:func:`same_reasons`)."""


@dataclass(frozen=True, slots=True)
class Reason:
    """One reason of a verdict: a :class:`Code` and its parameters (sorted name/value pairs).

    Build with :meth:`of`; read parameters with :meth:`get`. Hashable and comparable."""

    code: Code
    params: tuple[tuple[str, Param], ...] = ()

    @classmethod
    def of(cls, code: Code, **params: Param) -> Reason:
        """``Reason.of(Code.HOLDER_DEAD, pid=4242)``; ``None`` parameters are dropped."""
        return cls(code, tuple(sorted((k, v) for k, v in params.items() if v is not None)))

    def get(self, name: str, default: Param = None) -> Param:
        """The parameter ``name``, or ``default``."""
        for key, value in self.params:
            if key == name:
                return value
        return default

    def stable(self) -> tuple[Code, tuple[tuple[str, Param], ...]]:
        """Code and parameters without the :data:`TICKING` ones."""
        return self.code, tuple(p for p in self.params if p[0] not in TICKING)

    def advanced(self, seconds: float) -> Reason:
        """The same reason ``seconds`` later: ticking parameters moved with the clock."""
        if seconds == 0 or not any(k in TICKING for k, _ in self.params):
            return self
        moved: list[tuple[str, Param]] = []
        for key, value in self.params:
            if key in TICKING and isinstance(value, int | float) and not isinstance(value, bool):
                value = float(value) + TICKING[key] * seconds
            moved.append((key, value))
        ahead = dict(moved).get("ahead_s")
        if self.code is Code.CLOCK_SKEW and isinstance(ahead, float) and ahead <= 0:
            return Reason.of(Code.HELD_FOR, age_s=-ahead)  # the future has arrived
        return Reason(self.code, tuple(moved))

    def to_dict(self) -> dict[str, Param]:
        """JSON object: ``{"code": …, "text": …, **params}``."""
        return {"code": self.code.value, "text": render(self), **dict(self.params)}

    def __str__(self) -> str:
        return render(self)


def same_reasons(a: Iterable[Reason], b: Iterable[Reason]) -> bool:
    """True when two reason lists agree except for ticking parameters (ages, time left)."""
    return [r.stable() for r in a] == [r.stable() for r in b]


def advance(reasons: Iterable[Reason], seconds: float) -> tuple[Reason, ...]:
    """Every reason moved ``seconds`` along the clock (:meth:`Reason.advanced`)."""
    return tuple(r.advanced(seconds) for r in reasons)


# --------------------------------------------------------------------------------------------
# words: the one place where reasons become text
# --------------------------------------------------------------------------------------------


_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
"""Characters no human output may show as they are: C0 and C1 controls and DEL (line breaks,
terminal escapes, bells), the Unicode line/paragraph separators, the bidirectional overrides
(they reorder what a terminal or a label shows), and lone surrogates (an undecodable byte of a
file name, ``os.fsdecode``'s ``surrogateescape``: printing one raises ``UnicodeEncodeError``
under a strict UTF-8 stdout)."""

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    named = _NAMED.get(c)
    if named is not None:
        return named
    o = ord(c)
    if o < 0x100:
        return f"\\x{o:02x}"
    if 0xDC80 <= o <= 0xDCFF:  # surrogateescape: the undecodable byte itself
        return f"\\x{o - 0xDC00:02x}"
    return f"\\u{o:04x}"


def printable(text: str) -> str:
    """``text`` safe to show a person, on one line: every character of :data:`_UNSAFE` is
    escaped -- ``\\n``, ``\\r``, ``\\t``, ``\\xNN`` (other controls, and the raw byte of an
    undecodable file name), ``\\uNNNN`` (separators, bidi overrides). Everything else,
    backslashes included, is kept, so escaping twice changes nothing more. Used by every human
    output: CLI lines, table cells, the detail pane, tray menus and notifications (docs/cli.md,
    "Control characters")."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_escape, text)


DURATION_UNITS: dict[str, float] = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0,
                                    "w": 7 * 86400.0}
"""Units of :func:`parse_duration`, in seconds."""

MAX_DURATION_S = 100 * 365 * 86400.0
"""Longest duration :func:`parse_duration` accepts (100 years, in seconds)."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", re.IGNORECASE)


def parse_duration(text: str | float) -> float:
    """Seconds of a duration written ``"30d"``, ``"12h"``, ``"90m"``, ``"45s"``, ``"2w"``, or a
    number of seconds (``3600`` or ``"3600"``): ``[history] keep`` and ``--since``
    (docs/history.md, "Settings").

    Raises:
        ValueError: not a duration of more than 0 and at most 100 years.
    """
    if isinstance(text, bool):
        raise ValueError(f"not a span of time: {text!r}")
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        m = _DURATION.match(text)
        if not m:
            raise ValueError(f"not a span of time (e.g. 30d, 12h, 90m): {text!r}")
        seconds = float(m.group(1)) * DURATION_UNITS[(m.group(2) or "s").lower()]
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_DURATION_S:
        raise ValueError(f"a span must be more than 0 and at most 100 years: {text!r}")
    return seconds


def human_duration(seconds: float) -> str:
    """A duration in seconds as short text: ``0.4s``, ``45s``, ``3m 12s``, ``2h 0m``,
    ``3d 4h``. Negative durations get a leading ``-``; non-finite ones are ``"forever"``."""
    if math.isnan(seconds) or math.isinf(seconds):
        return "forever"
    if seconds < 0:
        return "-" + human_duration(-seconds)
    if seconds < 10:
        text = f"{seconds:.1f}".rstrip("0").rstrip(".")
        return f"{text}s"
    total = int(seconds)
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m {total % 60}s"
    if total < 86400:
        return f"{total // 3600}h {total % 3600 // 60}m"
    return f"{total // 86400}d {total % 86400 // 3600}h"


def _dur(r: Reason, name: str) -> str:
    value = r.get(name)
    return human_duration(float(value)) if isinstance(value, int | float) else "?"


def _utc(iso: Param) -> str:
    text = str(iso or "?")
    return text.replace("T", " ").replace("+00:00", " UTC").replace("Z", " UTC")


def _label(r: Reason) -> str:
    name = r.get("name")
    return f"PID {r.get('pid')}" + (f" ({name})" if name else "")


def _reused(r: Reason) -> str:
    pid, how, delta = r.get("pid"), r.get("how"), r.get("delta_s")
    if how == "boot":
        return f"PID {pid} is another process: the lock was written before the last reboot"
    if how == "proc":
        return (f"PID {pid} now belongs to another process (started at another moment since "
                "boot than the lock's holder)")
    d = float(delta) if isinstance(delta, int | float) else 0.0
    if how == "start":
        when = "after" if d > 0 else "before"
        return (f"PID {pid} now belongs to another process, started "
                f"{human_duration(abs(d))} {when} the lock's holder")
    return (f"PID {pid} now belongs to a process started {human_duration(d)} "
            "after the lock was written")


def _unverified(r: Reason) -> str:
    why = r.get("why")
    if why == "hidepid":
        return f"PID {r.get('pid')} is running (as another user, hidden from this one: hidepid)"
    if why == "access_denied":
        return f"PID {r.get('pid')} is running (as another user: access denied)"
    return f"{_label(r)} is running (its start time is not readable)"


def _expired(r: Reason) -> str:
    ttl = r.get("ttl_s")
    lease = (f"TTL {human_duration(float(ttl))}" if isinstance(ttl, int | float)
             else f"at {_utc(r.get('expires_at'))}")
    return f"expired {_dur(r, 'ago_s')} ago ({lease})"


def _held_for(r: Reason) -> str:
    return f"held for {_dur(r, 'age_s')}"


def _younger(r: Reason) -> str:
    age, limit = _dur(r, "age_s"), _dur(r, "limit_s")
    if r.get("holder") == "dead":
        return (f"lock is {age} old; another tool's lock becomes stale only after {limit} "
                "(its PID may be that of a short-lived CLI process)")
    return (f"lock is {age} old; a lock whose holder cannot be checked becomes stale "
            f"after {limit}")


def _writing(r: Reason) -> str:
    what = "file is empty" if r.get("empty") else "file is incomplete"
    value = r.get("age_s")
    age = max(float(value), 0.0) if isinstance(value, int | float) else 0.0
    return f"{what}, written {human_duration(age)} ago: its writer is probably still writing"


def _kernel_kind(r: Reason) -> str:
    """``a flock``, ``a POSIX``, ``an OFD``; ``a flock or OFD`` for the ``UNKNOWN`` kind
    ``F_GETLK`` reports on macOS/BSD (:class:`core.kernel.locks.LockKind`)."""
    kind = str(r.get("kind"))
    words = {"FLOCK": "a flock", "POSIX": "a POSIX", "OFDLCK": "an OFD",
             "UNKNOWN": "a flock or OFD"}
    return words.get(kind, f"a {kind}")


def _remote(r: Reason) -> str:
    return (f"the lock was taken on host {r.get('host')!r}, not on this host "
            f"({r.get('this_host')!r}): PID {r.get('pid')} cannot be checked from here")


def _predates_boot(r: Reason) -> str:
    return (f"the lock was taken before this host's last boot ({_utc(r.get('boot_at'))}): "
            "its holder cannot still run")


def _pg_session(r: Reason) -> str:
    who = f"PostgreSQL session PID {r.get('pid')} of {r.get('user')!r}"
    app = r.get("app")
    client = r.get("client")
    more = r.get("holders")
    return (who + (f" ({app})" if app else "") + (f" from {client}" if client else "")
            + f" holds it, {r.get('state') or 'state not visible'}"
            + (f"; shared with {more} other session(s)" if more else ""))


_WORDS: dict[Code, object] = {
    Code.NO_LOCK_FILE: "no lock file",
    Code.NOT_CLAIMED: lambda r: f"node {r.get('node')} is not claimed in the ledger",
    Code.UNREADABLE: lambda r: str(r.get("detail") or "could not be read"),
    Code.WRITING: _writing,
    Code.EMPTY_LEFT_BY_CRASH: lambda r: (
        f"empty lock file {_dur(r, 'age_s')} old: its writer crashed before writing it"),
    Code.NO_PID: "the lock records no process ID",
    Code.INVALID_PID: lambda r: f"PID {r.get('pid')} is not a valid process ID",
    Code.INIT_HOLDER: lambda r: (
        f"PID {r.get('pid')} is the init process, recorded when the caller's shell was gone: "
        "it proves nothing, so the lock is judged by its TTL and age"),
    Code.REMOTE_HOST: _remote,
    Code.HOLDER_ALIVE: lambda r: f"{_label(r)} is alive",
    Code.HOLDER_ALIVE_UNVERIFIED: _unverified,
    Code.HOLDER_DEAD: lambda r: (
        f"PID {r.get('pid')} exited"
        + (" (a zombie not yet reaped by its parent)" if r.get("zombie") else "")),
    Code.HOLDER_PINNED: lambda r: (
        "the holder keeps its kernel pin on the lock file"
        + (f" (PID {r.get('pid')} here)" if r.get("pid") is not None else "")
        + f", so it is alive whatever the recorded PID {r.get('recorded')} means here"),
    Code.PID_REUSED: _reused,
    Code.PREDATES_BOOT: _predates_boot,
    Code.LIVENESS_UNCHECKED: lambda r: (
        f"the holder's process could not be checked: {r.get('detail')}"),
    Code.EXPIRED: _expired,
    Code.AF_KEEPS_EXPIRED: "af keeps an expired claim until af reaps it",
    Code.EXPIRED_HOLDER_DEAD: "its holder is dead, so the lock is stale",
    Code.EXPIRED_HOLDER_UNKNOWABLE: lambda r: (
        ("its holder is on another host" if r.get("remote")
         else "its holder cannot be checked") + ", so the lapsed lease makes it stale"),
    Code.HOLDER_DEAD_BEFORE_EXPIRY: lambda r: (
        "its holder is proven dead on this host, so the lock is stale "
        f"(its lease would have expired in {_dur(r, 'left_s')})"),
    Code.HELD_FOR: _held_for,
    Code.CLOCK_SKEW: lambda r: f"taken {_dur(r, 'ahead_s')} in the future (clock skew?)",
    Code.EXPIRES_IN: lambda r: f"expires in {_dur(r, 'left_s')}",
    Code.AF_REAPS_CLAIMS: "af claims are reaped by af itself",
    Code.OURS_HOLDER_DEAD: "a lock written by Lockwarden is stale as soon as its holder is dead",
    Code.AGE_UNKNOWN: "its age is unknown, so it cannot be judged stale",
    Code.OLDER_THAN_STALE_AFTER: lambda r: (
        f"lock is {_dur(r, 'age_s')} old, older than the {_dur(r, 'limit_s')} stale limit"),
    Code.YOUNGER_THAN_STALE_AFTER: _younger,
    Code.PG_SESSION: _pg_session,
    Code.SESSION_IDLE: lambda r: f"its session has been idle for {_dur(r, 'idle_s')}",
    Code.WAITERS: lambda r: (
        f"{r.get('count')} session{'' if r.get('count') == 1 else 's'} waiting for it"),
    Code.NO_TTL: "the key has no TTL: it lives until someone deletes it",
    Code.AGE_FROM_FIRST_SEEN: lambda r: (
        f"first seen {_dur(r, 'age_s')} ago: its real age is unknown, at least that"),
    Code.CLIENT_CONNECTED: lambda r: (
        f"{r.get('sessions')} session{'' if r.get('sessions') == 1 else 's'} connected from "
        f"{r.get('ip')}, the address the lock "
        "names: its holder may still run"),
    Code.NO_SESSION_FROM_CLIENT: lambda r: (
        f"no session is connected from {r.get('ip')}, the address the lock names"),
    Code.GIT_WORKER: lambda r: (
        f"git process {_label(r)} works in this repository"
        + (f" ({r.get('count')} git processes)" if _more_than_one(r.get("count")) else "")),
    Code.NO_GIT_WORKER: lambda r: f"no git process works in {r.get('repo')}",
    Code.GIT_LOCK_YOUNG: lambda r: (
        f"the lock is {_dur(r, 'age_s')} old; a git lock with no git process becomes stale "
        f"after {_dur(r, 'limit_s')} (git may be between two steps)"),
    Code.GIT_LOCK_SUSPICIOUS: lambda r: (
        f"held for {_dur(r, 'age_s')}: an editor opened by 'git commit' or 'git rebase -i' "
        "may still be waiting"),
    Code.GIT_REMOVE_LOCK: (
        "git crashed while holding it: remove the file (as git's own message says); never "
        "rename it into place, it may be half-written"),
    Code.GC_PID_OLD: lambda r: (
        f"gc.pid is {_dur(r, 'age_s')} old; git ignores one older than {_dur(r, 'limit_s')}"),
    Code.GC_PID_REMOTE: lambda r: (
        f"git counts a gc.pid of another host as running until it is {_dur(r, 'limit_s')} "
        f"old (this one: {_dur(r, 'age_s')})"),
    Code.NOT_THE_TOOL: lambda r: (
        f"PID {r.get('pid')} is now {r.get('name')!r}, not {r.get('tool')}: its "
        f"{r.get('tool')} has exited"),
    Code.SWAP_RECOVER: lambda r: (
        f"the swap holds unsaved changes: recover them with 'vim -r {r.get('file')}', "
        "then delete the swap file"),
    Code.SWAP_CLEAN: "the swap holds no unsaved changes: Vim itself deletes such a swap file",
    Code.OTHER_BOOT: lambda r: (
        f"the lock was taken in another boot ({_utc(r.get('boot_at'))}; this boot: "
        f"{_utc(r.get('this_boot_at'))}): its holder cannot still run"),
    Code.OFFICE_RUNNING: lambda r: (
        f"LibreOffice (PID {r.get('pid')}) of user {r.get('user')!r} is running"),
    Code.NO_OFFICE_PROCESS: lambda r: (
        f"no LibreOffice process of user {r.get('user')!r} runs on this host"),
    Code.START_TOKEN_MISMATCH: lambda r: (
        f"PID {r.get('pid')} now belongs to another process (its start token differs from "
        "the marker's)"),
    Code.KERNEL_LOCK_HELD: lambda r: (
        f"the kernel holds {_kernel_kind(r)} {str(r.get('access')).lower()} lock on "
        f"{r.get('file')}"
        + (f" ({r.get('tool')}'s lock)" if r.get("tool") else "")
        + (f" for PID {r.get('pid')}" if r.get("pid") is not None else "")
        + ": held while that process lives; deleting the file would not release it"),
    Code.KERNEL_ANCHOR_FREE: lambda r: (
        f"no process holds {r.get('tool')}'s lock on {r.get('file')}: the file is only its "
        "anchor (only the kernel knows whether it is held); it is never deleted"),
    Code.KERNEL_ANCHOR_UNCHECKED: lambda r: (
        f"{r.get('file')} is {r.get('tool')}'s lock anchor, but the kernel's locks cannot be "
        f"read here ({r.get('detail')}): it may be held; it is never deleted"),
    Code.NO_KERNEL_LOCK: lambda r: (
        f"no kernel lock on {r.get('file')}: this is a leftover label, and deleting it is "
        "harmless"),
    Code.LEASE: lambda r: (
        f"etcd lease {r.get('lease')}: {_dur(r, 'left_s')} left of {_dur(r, 'granted_s')} "
        "(its holder's keepalive renews it; it ends by itself when the holder dies)"),
}


def _more_than_one(count: Param) -> bool:
    return isinstance(count, int) and count > 1


def render(reason: Reason) -> str:
    """The reason in plain English words (CLI, GUI, notifications and audit log alike), control
    characters of its parameters escaped (:func:`printable`)."""
    words = _WORDS.get(reason.code, reason.code.value)
    return printable(words(reason) if callable(words) else str(words))


def render_all(reasons: Iterable[Reason], sep: str = "; ") -> str:
    """All reasons as one line, joined by ``sep``."""
    return sep.join(render(r) for r in reasons)


def texts(reasons: Iterable[Reason]) -> list[str]:
    """Each reason rendered (:func:`render`), in order."""
    return [render(r) for r in reasons]
