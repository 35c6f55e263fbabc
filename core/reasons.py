"""Verdict reasons as data: a code (:class:`core.codes.Code`) with typed parameters, and the one
place where they become words.

Every reason a verdict carries (:attr:`core.record.LockStatus.reasons`) is a :class:`Reason`:
a stable :class:`Code` plus parameters (numbers in seconds, PIDs, host names, ISO 8601 UTC
times). Code decides on codes and parameters only; people read :func:`render`. Nothing in
Lockwarden compares or parses the rendered text (``docs/verdicts.md`` lists the codes).

Imports only the standard library, :mod:`core.codes` and :mod:`core.text` (escaping and
durations), so every module of ``core`` may use it.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from core.codes import Code
from core.text import human_duration, plural, printable

Param = int | float | str | bool | None
"""A reason's parameter value: JSON-ready scalars only."""


TICKING: Mapping[str, int] = {"age_s": 1, "ago_s": 1, "left_s": -1, "ahead_s": -1, "idle_s": 1,
                              "silent_s": 1}
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
        """``Reason.of(Code.HOLDER_DEAD, pid=4242)``; ``None`` parameters are dropped. Equal
        reasons made lately are one object, and so are equal parameters that do not tick
        (:data:`TICKING`): 100,000 verdicts share their ``holder_dead{pid}`` and ``limit_s``
        (docs/performance.md, "Listing and watching 100,000 locks")."""
        pairs = tuple(sorted([(k, v) for k, v in params.items() if v is not None]))
        if len(_REASONS) >= _SHARED_MAX or len(_PAIRS) >= _SHARED_MAX:
            _REASONS.clear()
            _PAIRS.clear()
        # keyed with the values' types: 1, 1.0 and True are equal, but not the same JSON
        types = []
        for k, v in pairs:
            if k in TICKING:  # an age: the reason is its own, its other parameters shared
                return cls(code, tuple([p if p[0] in TICKING
                                        else _PAIRS.setdefault((*p, type(p[1])), p)
                                        for p in pairs]))
            types.append(type(v))
        key = (code, pairs, tuple(types))
        reason = _REASONS.get(key)
        if reason is None:
            reason = _REASONS[key] = cls(code, pairs)
        return reason

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
        """JSON object: ``{"code": …, "text": …, **params}``. The text of a reason without
        ticking parameters is rendered once per shared reason (:meth:`of`)."""
        return {"code": self.code.value, "text": _text(self), **dict(self.params)}

    def __str__(self) -> str:
        return render(self)


_REASONS: dict[tuple[Code, tuple[tuple[str, Param], ...], tuple[type, ...]], Reason] = {}
"""Reasons :meth:`Reason.of` made lately, by code, parameters and their types."""
_PAIRS: dict[tuple[str, Param, type], tuple[str, Param]] = {}
"""Parameters (name, value) :meth:`Reason.of` made lately, by name, value and type."""
_SHARED_MAX = 16384
"""Entries kept in each of :data:`_REASONS` and :data:`_PAIRS` (emptied when full)."""


def _text(reason: Reason) -> str:
    """:func:`render`, remembered for a reason without :data:`TICKING` parameters (by
    identity: :meth:`Reason.of` shares equal ones; the cache holds the reason, so its id is
    not reused while remembered)."""
    for k, _v in reason.params:
        if k in TICKING:
            return render(reason)
    known = _TEXTS.get(id(reason))
    if known is not None and known[0] is reason:
        return known[1]
    if len(_TEXTS) >= _SHARED_MAX:
        _TEXTS.clear()
    text = render(reason)
    _TEXTS[id(reason)] = (reason, text)
    return text


_TEXTS: dict[int, tuple[Reason, str]] = {}
"""Rendered texts of reasons without ticking parameters, by the reason's id."""


def same_reasons(a: Iterable[Reason], b: Iterable[Reason]) -> bool:
    """True when two reason lists agree except for ticking parameters (ages, time left)."""
    return [r.stable() for r in a] == [r.stable() for r in b]


def advance(reasons: Iterable[Reason], seconds: float) -> tuple[Reason, ...]:
    """Every reason moved ``seconds`` along the clock (:meth:`Reason.advanced`)."""
    return tuple(r.advanced(seconds) for r in reasons)


# --------------------------------------------------------------------------------------------
# words: the one place where reasons become text
# --------------------------------------------------------------------------------------------


def _dur(r: Reason, name: str) -> str:
    value = r.get(name)
    return human_duration(float(value)) if isinstance(value, int | float) else "?"


def _table_too_large(r: Reason) -> str:
    n, secs = r.get("bytes"), r.get("seconds")
    size = f"{n / 1048576:.1f} MiB" if isinstance(n, int) else "?"
    took = f"{secs:.2f} s" if isinstance(secs, int | float) else "?"
    bound = "its size bound" if r.get("cut") == "bytes" else "its time bound"
    return (f"the kernel's lock table is too large to tell whether a kernel lock holds "
            f"{r.get('file')}" + (f" ({r.get('tool')}'s lock)" if r.get("tool") else "")
            + f": /proc/locks was cut off at {bound} ({size} read in {took}) and neither the "
            "file itself nor a process that has it open shows a lock; it may be held, so it is "
            "never judged free or stale")


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


def _empty_open(r: Reason) -> str:
    count = r.get("count")
    more = f" (and {count - 1} more)" if isinstance(count, int) and count > 1 else ""
    return (f"the file is empty and {_label(r)}{more} has it open: it is being written, or "
            "about to be locked")


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
            + (f"; shared with {plural(more, 'other session')}" if isinstance(more, int)
               and more else ""))


def _quoted(value: Param) -> str:
    return repr(str(value)) if value is not None else "?"


def _terminates(r: Reason) -> str:
    user, app = r.get("user"), r.get("app")
    return (f"terminate PostgreSQL session PID {r.get('pid')}"
            + (f" of user {_quoted(user)}" if user else "")
            + " (" + (f"application {_quoted(app)}, " if app else "")
            + "its open transaction rolled back)")


def _deletes_key(r: Reason) -> str:
    signal = r.get("signal")
    return (f"delete Redis key {_quoted(r.get('key'))} (token {r.get('token')})"
            + (f" and wake its waiters (list {_quoted(signal)})" if signal else ""))


def _revokes_lease(r: Reason) -> str:
    keys, names = r.get("keys"), r.get("names")
    text = f"revoke etcd lease {r.get('lease')}"
    if isinstance(keys, int) and keys > 1:
        text += f", which deletes all {keys} keys attached to it"
        if names:
            text += f" ({names})"
    return text


_UNTRUSTED = {
    "unbound": "no role is bound to that host name",
    "other_role": "it was written by another role than the one bound to that host name",
    "future_heartbeat": "its heartbeat is dated in the future",
}
"""Why a host's report is not trusted (``fleet_host_untrusted``'s ``why``), in words."""


def _fleet_report(r: Reason) -> str:
    how = {"alive": "is alive", "dead": "has exited",
           "reused": "now belongs to a later process (its holder has exited)"}
    return (f"host {r.get('host')} reported at {_utc(r.get('reported_at'))} that PID "
            f"{r.get('pid')} {how.get(str(r.get('liveness')), 'cannot be checked')}")


_FOLLOW_HOW = {"pidfd": "pidfd", "kqueue": "kqueue", "handle": "process handle"}
_POLL_WHY = {
    "descriptor_budget": "no descriptor to spare for a pidfd (Lockwarden keeps a margin below "
                         "its open-file limit)",
    "denied": "this user may not inspect that process",
    "unverified": "its start time cannot be read, so a notification could name another process",
    "unsupported": "this system gives no exit notification",
    "no_reader": "no reader for the notifications (no inotify instance left)",
    "error": "the notification could not be set up",
}


def _followed(r: Reason) -> str:
    how = str(r.get("how"))
    return (f"liveness followed by the kernel ({_FOLLOW_HOW.get(how, how)}): its exit is "
            "seen at once")


def _polled(r: Reason) -> str:
    why = str(r.get("why"))
    every = r.get("every_s")
    text = (f"liveness checked every {float(every):g} s" if isinstance(every, int | float)
            else "liveness checked by the liveness pass")
    return text + (f": {_POLL_WHY.get(why, why)}" if r.get("why") is not None else "")


_WORDS: dict[Code, object] = {
    Code.NO_LOCK_FILE: "no lock file",
    Code.NOT_CLAIMED: lambda r: f"node {r.get('node')} is not claimed in the ledger",
    Code.UNREADABLE: lambda r: str(r.get("detail") or "could not be read"),
    Code.WRITING: _writing,
    Code.EMPTY_LEFT_BY_CRASH: lambda r: (
        f"empty lock file {_dur(r, 'age_s')} old: its writer crashed before writing it"),
    Code.EMPTY_FREE: lambda r: (
        "empty file that no process holds a kernel lock on"
        + (" or has open" if r.get("open_seen") else ", past the writing grace")
        + ": free (filelock, portalocker, fasteners and flock(1) leave such a file when they "
        "release; the next locker reuses it)"),
    Code.EMPTY_OPEN: _empty_open,
    Code.EMPTY_UNCHECKED: lambda r: (
        f"the file is empty and the kernel's locks cannot be read here ({r.get('detail')}): "
        "a kernel lock may hold it"),
    Code.HELD_BY_CALLER: lambda r: (
        ("held by this shell" if r.get("shell") else "held by the caller of this command")
        + f" (PID {r.get('pid')}" + (f", {r.get('name')}" if r.get("name") else "") + ")"
        + (f" since {_utc(r.get('since'))}" if r.get("since") else "")
        + f"; release it first: lockwarden release {shlex.quote(str(r.get('path')))}"),
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
        (f"{_label(r)} keeps" if r.get("pid") is not None else
         "a process this user may not inspect keeps")
        + " the kernel pin its holder took on the lock file, so the lock is alive while it "
        f"runs, whatever the recorded PID {r.get('recorded')} means here"),
    Code.PID_REUSED: _reused,
    Code.PREDATES_BOOT: _predates_boot,
    Code.LIVENESS_FOLLOWED: _followed,
    Code.LIVENESS_POLLED: _polled,
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
    Code.FLEET_REPORT: _fleet_report,
    Code.FLEET_HOST_SILENT: lambda r: (
        f"host {r.get('host')} has sent no heartbeat for {_dur(r, 'silent_s')}: its reports "
        "no longer count, so the lock is judged by its age and TTL"),
    Code.FLEET_HOST_UNTRUSTED: lambda r: (
        f"the report published as host {r.get('host')} is not trusted: "
        + _UNTRUSTED.get(str(r.get("why")), "it fails the fleet's checks")
        + ", so the lock is judged by its age and TTL"),
    Code.FLEET_SEEN_BY: lambda r: (
        f"the same lock file is published by hosts {r.get('hosts')} (a shared directory): "
        f"shown once, with the verdict of {r.get('judged_by')}"),
    Code.FLEET_PID_UNREPORTED: lambda r: (
        f"host {r.get('host')} publishes nothing on PID {r.get('pid')} (it does not watch "
        "this lock), so the lock is judged by its age and TTL"),
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
    Code.UNSAVED_CHANGES: lambda r: (
        f"unsaved {r.get('tool')} changes to {r.get('file')} are in {r.get('where')}: recover "
        f"them with `{r.get('recover')}`"),
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
        + (f" for {_label(r)}" if r.get("pid") is not None else "")
        + ": held while that process lives; deleting the file would not release it"),
    Code.KERNEL_ANCHOR_FREE: lambda r: (
        f"no process holds {r.get('tool')}'s lock on {r.get('file')}: the file is only its "
        "anchor (only the kernel knows whether it is held); it is never deleted"),
    Code.KERNEL_ANCHOR_UNCHECKED: lambda r: (
        f"{r.get('file')} is {r.get('tool')}'s lock anchor, but the kernel's locks cannot be "
        f"read here ({r.get('detail')}): it may be held; it is never deleted"),
    Code.KERNEL_TABLE_TOO_LARGE: _table_too_large,
    Code.NO_KERNEL_LOCK: lambda r: (
        f"no kernel lock on {r.get('file')}: this is a leftover label, and deleting it is "
        "harmless"),
    Code.TERMINATES_SESSION: _terminates,
    Code.DELETES_KEY: _deletes_key,
    Code.REVOKES_LEASE: _revokes_lease,
    Code.RESETS_ROW: lambda r: (
        f"reset row id {r.get('id')} of table {r.get('table')} (LOCKED = false), "
        "as Liquibase's releaseLocks does"),
    Code.LEDGER_CLAIM: lambda r: (
        "it is a claim in an af ledger; only af changes its ledger: "
        f"`af release {r.get('node') or 'NODE'}`"),
    Code.KERNEL_ANCHOR: lambda r: (
        f"it is {r.get('tool')}'s kernel-lock anchor ("
        + ("held now" if r.get("held") else "not held now")
        + "; only the kernel knows): deleting or replacing it would let a second holder in"),
    Code.KERNEL_HELD: lambda r: (
        (f"PID {r.get('pid')}" if r.get("pid") is not None else "a process")
        + " holds a kernel lock on it; deleting or replacing the file would not release it "
        "and would let a second holder in ("
        + (f"end PID {r.get('pid')} if it hangs: kill {r.get('pid')}"
           if r.get("pid") is not None else "end its holder if it hangs") + ")"),
    Code.KERNEL_UNKNOWN: (
        "Lockwarden never deletes or replaces a file while it cannot tell whether a kernel "
        "lock holds it"),
    Code.NOT_A_LOCK: lambda r: (
        f"not a lock file ({r.get('detail') or 'no lock format reads it'}); Lockwarden never "
        "removes or replaces a file it cannot read as a lock"),
    Code.AF_CLAIM_NOT_WRITTEN: (
        "it is an af claim; Lockwarden does not write af claims (force-release it instead)"),
    Code.TOOL_LOCK_KEPT: lambda r: (
        f"it is a {r.get('format')} lock; its tool would take a Lockwarden lock in its place "
        "for its own and wait for ever (release it instead: the tool's own safe action)"),
    Code.EMPTY_PUT_BACK: lambda r: (
        f"an empty file (mode {r.get('mode')}): taken over holding its kernel locks, and put "
        "back empty, with its mode and time, when the lock is released"),
    Code.EMPTIED_ON_RELEASE: lambda r: (
        f"this lock replaced an empty file: releasing it empties the file in place (mode "
        f"{r.get('mode')}), as it was"),
    Code.PATH_TAKEN: "the path is taken again",
    Code.LEFTOVER: lambda r: (
        f"a .lw{r.get('kind')} file the engine left behind (its writer, PID {r.get('pid')}, "
        "is gone)"),
    Code.NOT_A_LEFTOVER: (
        "not a leftover of the engine (young, still linked as a lock, or its writer runs)"),
    Code.PEER_OPENED: lambda r: (
        f"PID {r.get('pid')}" + (f" ({r.get('name')})" if r.get("name") else "")
        + (f" and {int(str(r.get('count'))) - 1} more" if _more_than_one(r.get("count")) else "")
        + " has it open, to write it or to lock it; removing it now would let that process "
        "lock a file that no longer exists"),
    # etcd cannot tell whether a keepalive renews the lease (`lockwarden reclaim` takes one
    # nobody renews): say when it ends, not that it is renewed
    Code.LEASE: lambda r: (
        f"etcd lease {r.get('lease')}: {_dur(r, 'left_s')} left of {_dur(r, 'granted_s')}; "
        "it ends then unless its holder renews it"),
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
