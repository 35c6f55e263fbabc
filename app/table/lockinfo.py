"""Facts about one :class:`core.record.LockStatus` that the table, the detail pane, the tray
and the confirmations all need: durations in words, whether the holder changed, reasons worded
for now, whether the path is a lock file at all, whether the state needs attention.

Pure functions, no Qt (docs/gui.md "Window", "Tray").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime

from core.codes import Code, UnreadableKind
from core.reasons import advance, texts
from core.record import DEVTOOL_FORMATS, Liveness, LockStatus, State
from core.text import human_duration as _core_human_duration
from core.text import plural as _core_plural

Update = tuple[str, LockStatus | None]
"""One inventory update: (lock path, new status or ``None`` when the lock disappeared)."""


def human_duration(seconds: float) -> str:
    """``seconds`` (float, s; negative counts as 0) in words, whole seconds only, via
    :func:`core.text.human_duration` ("3m 12s", "2h 0m")."""
    return _core_human_duration(float(int(max(0.0, seconds))))


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``n`` and the noun in the right number: "1 lock", "3 locks", "2 directories"
    (``nouns``: the plural when it is not ``noun + "s"``; :func:`core.text.plural`)."""
    return _core_plural(n, noun, nouns)


def local_time(when: datetime) -> str:
    """An aware time as the user's clock reads it: ``"2024-05-02 16:03:11 CEST"`` (the local
    zone's abbreviation, else its UTC offset). The GUI shows local times and gives the UTC time
    on hover (:func:`utc_time`)."""
    local = when.astimezone()
    return local.strftime("%Y-%m-%d %H:%M:%S ") + (local.tzname() or local.strftime("%z"))


def utc_time(when: datetime) -> str:
    """An aware time in UTC: ``"2024-05-02 14:03:11 UTC"`` (tooltips, beside
    :func:`local_time`)."""
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def holder_changed(old: LockStatus, new: LockStatus) -> bool:
    """True when the lock file now names another acquisition (token, PID or timestamp);
    False when either status has no record."""
    a, b = old.record, new.record
    if a is None or b is None:
        return False
    return (a.token, a.pid, a.acquired_at) != (b.token, b.pid, b.acquired_at)


def status_now(st: LockStatus, now: datetime | None = None) -> LockStatus:
    """``st`` as it reads at ``now`` (aware UTC; default the clock): ticking reason parameters
    moved along the clock (:func:`core.reasons.advance`) and ``checked_at`` set to ``now``
    (never earlier than it was)."""
    at = now or datetime.now(UTC)
    dt = max((at - st.checked_at).total_seconds(), 0.0)
    return replace(st, reasons=advance(st.reasons, dt), checked_at=max(at, st.checked_at))


def current_reasons(st: LockStatus, now: datetime | None = None) -> list[str]:
    """The verdict's reasons in words as they read at ``now`` (aware UTC; default the clock),
    for the detail pane and the confirmations: the watcher does not resend a verdict whose only
    change is a ticking parameter ("held for 3m 12s"), so those parameters are moved along the
    clock here (:func:`core.reasons.advance`) before rendering. Never raises."""
    at = now or datetime.now(UTC)
    return texts(advance(st.reasons, max((at - st.checked_at).total_seconds(), 0.0)))


NOT_FILE_KINDS = frozenset(k for k in UnreadableKind if k.not_a_file)
"""Unreadable kinds that are no regular file (symlink, FIFO, socket, device, directory)."""


def _kind(value: object) -> UnreadableKind | None:
    try:
        return UnreadableKind(str(value))
    except ValueError:
        return None


def not_a_lock_file(st: LockStatus) -> bool:
    """True when the path is a symlink, FIFO, socket, device or directory
    (:func:`core.fsutil.read_lock_file` refused it without opening it): Lockwarden offers
    neither Reclaim nor Force release for what is not a lock file."""
    return st.state is State.UNREADABLE and st.file is None and any(
        r.code is Code.UNREADABLE and _kind(r.get("kind")) in NOT_FILE_KINDS
        for r in st.reasons)


def is_remote(path: str) -> bool:
    """True for the path of a lock on a server: a URL of a known scheme
    (:func:`core.remote.sources.is_server_url`), never a file path."""
    from core.remote.sources import is_server_url

    return is_server_url(path)


def lock_name(path: str) -> str:
    """A lock's short name for titles and dialogs: the file name, or for a lock on a server the
    lock after ``#`` (``redis://host:6379/0#lock:deploy`` -> ``lock:deploy``)."""
    if is_remote(path) and "#" in path:
        return path.split("#", 1)[1]
    return os.path.basename(path)


def server_of(path: str) -> str | None:
    """The server a lock on a server is on: its URL before ``#``
    (``redis://host:6379/0#lock:deploy`` -> ``redis://host:6379/0``, docs/remote.md "Paths");
    None for a file path (and a fleet row's key)."""
    if "#" in path and is_remote(path):
        return path.split("#", 1)[0]
    return None


def reclaimable(st: LockStatus) -> bool:
    """True when the engine may replace this lock with one of its own (the Reclaim action):
    a lock file it reads, not being written, not free (an empty file nobody holds is taken
    by Acquire…, or removed), not read-only, and not an af claim or a developer tool's lock,
    which their tool would mistake (core.engine.gate.ask)."""
    rec = st.record
    return (not st.read_only and not not_a_lock_file(st)
            and st.state not in (State.WRITING, State.FREE)
            and not st.kernel_held and not is_remote(st.path)
            and not (rec is not None and rec.format in ("af-claim", *DEVTOOL_FORMATS)))


def forceable(st: LockStatus) -> bool:
    """True when a forced release may remove the file (the Force release action): a lock file,
    not read-only, and not held by a kernel lock -- deleting that file would not release it
    and would let a second holder in (core.engine.gate.ask)."""
    return not st.read_only and not not_a_lock_file(st) and not st.kernel_held


def held_by_user(st: LockStatus) -> bool:
    """True when the lock's holder process -- the live one its evidence names: the recorded
    PID, or the kernel lock's holder -- runs as the user of this app ("mine" in the table and
    the tray, docs/gui.md "Holder"). Compared by UID where the OS has UIDs, else by name."""
    ev = st.evidence
    if sys.platform != "win32" and ev.process_uid is not None:
        return ev.process_uid == os.getuid()
    if ev.process_user is None:
        return False
    import getpass

    try:
        return ev.process_user.split("\\")[-1] == getpass.getuser()
    except Exception:  # no login name (a container without a passwd entry)
        return False


def is_attention(state: State) -> bool:
    """True for the states the tray counts as "stale or expired"."""
    return state in (State.STALE, State.EXPIRED)


# -- what the user sees of a state: word, colour, icon, explanation ---------------------------

HELD_DEAD = "held-dead"
"""Display state of a lock judged ``held`` whose holder is dead or its PID reused: another
tool's lock younger than its stale limit, a short-lived CLI lock, a pidfile left behind."""

DISPLAY_STATES: tuple[str, ...] = ("stale", "expired", "unreadable", "writing", HELD_DEAD,
                                   "held")
"""Display states, attention first (:func:`display_state`)."""

STATE_WORDS: dict[str, str] = {
    "held": "held",
    HELD_DEAD: "held, holder dead",
    "stale": "stale",
    "expired": "expired",
    "writing": "writing",
    "unreadable": "unreadable",
    "free": "free",
}
"""The word of each display state (table, tray, detail pane)."""

STATE_EXPLAIN: dict[str, str] = {
    "held": "Held: the holder is alive (or its lease stands); leave it alone.",
    HELD_DEAD: "Held, holder dead: the process that wrote it is gone, but the lock is not "
               "stale yet — another tool's lock only becomes stale after the stale limit "
               "(its PID may have been a short-lived command).",
    "stale": "Stale: its holder is gone; it can be reclaimed safely.",
    "expired": "Expired: its lease lapsed but its holder still runs; breaking it needs a "
               "reason.",
    "writing": "Writing: the file is empty or incomplete and young; its writer is probably "
               "still writing it.",
    "unreadable": "Unreadable: not a lock Lockwarden can read (or not a regular file); it is "
                  "never judged stale and never deleted by Lockwarden.",
    "free": "Free: no lock file; an empty lock file that no process holds or has open (what "
            "filelock, portalocker, fasteners and flock(1) leave when they release: leave it); "
            "or a kernel lock's anchor file (dpkg, cargo, uv...) that no process holds now, "
            "which is never deleted.",
}
"""One sentence per display state (tooltips, docs/gui.md "States")."""


def display_state(st: LockStatus) -> str:
    """The state as the user sees it: the engine's state, except that a ``held`` lock whose
    holder is dead or whose PID was reused is :data:`HELD_DEAD` (decided from the status's
    liveness, never from text)."""
    if st.state is State.HELD and st.liveness in (Liveness.DEAD, Liveness.REUSED):
        return HELD_DEAD
    return st.state.value


_RULES: tuple[tuple[Code, str], ...] = (
    (Code.UNREADABLE, "the file cannot be read as a lock: shown as unreadable, never judged "
                      "stale"),
    (Code.WRITING, "an empty or incomplete file younger than the writing grace is being "
                   "written"),
    (Code.EMPTY_OPEN, "an empty file a process has open is being written, or about to be "
                      "locked"),
    (Code.EMPTY_FREE, "an empty file that no kernel lock holds and no process has open is "
                      "free, never stale"),
    (Code.EMPTY_UNCHECKED, "an empty file whose kernel locks cannot be read may be held"),
    (Code.KERNEL_TABLE_TOO_LARGE, "a file on which no lock could be seen in a kernel lock "
                                  "table too large to read whole may be held, never free"),
    # developer tools' own rules (docs/specs/devtool-locks.md §1), before the generic ones
    (Code.KERNEL_LOCK_HELD, "only the kernel knows: a kernel lock is held while its holder "
                            "keeps the file open, and is never stale"),
    (Code.NO_KERNEL_LOCK, "Terraform's state is locked by the kernel: without that lock the "
                          "lock info is left over"),
    (Code.GIT_WORKER, "a git lock is held while a git process works in its repository"),
    (Code.GIT_LOCK_YOUNG, "a git lock with no git process in its repository is given its "
                          "limit before it is stale"),
    (Code.NO_GIT_WORKER, "a git lock with no git process in its repository is stale"),
    (Code.GC_PID_OLD, "git ignores a gc.pid older than 12 h"),
    (Code.GC_PID_REMOTE, "a gc.pid of another host counts as live for 12 h"),
    (Code.SWAP_RECOVER, "a swap file whose Vim is gone is stale; its unsaved changes can be "
                        "recovered"),
    (Code.SWAP_CLEAN, "a swap file whose Vim is gone is stale; it holds no unsaved changes"),
    (Code.OTHER_BOOT, "an Emacs lock written before this boot is stale"),
    (Code.OFFICE_RUNNING, "a LibreOffice lock is held while the user's office process runs"),
    (Code.NO_OFFICE_PROCESS, "a LibreOffice lock with no office process of its user is stale"),
    (Code.START_TOKEN_MISMATCH, "a SoftFileLock whose PID now names another process is "
                                "stale"),
    (Code.NOT_THE_TOOL, "a lock whose PID now names another program is stale"),
    (Code.PREDATES_BOOT, "a lock of this host taken before its last boot is stale"),
    (Code.EXPIRED_HOLDER_DEAD, "a lapsed lease whose holder is dead is stale"),
    (Code.EXPIRED_HOLDER_UNKNOWABLE, "a lapsed lease whose holder cannot be checked is stale"),
    (Code.AF_KEEPS_EXPIRED, "an expired af claim stays until af reaps it"),
    (Code.EXPIRED, "a lapsed lease whose holder is alive is expired (not stale)"),
    (Code.HOLDER_DEAD_BEFORE_EXPIRY, "a Lockwarden lease whose holder is proven dead is stale"),
    (Code.OURS_HOLDER_DEAD, "a Lockwarden lock whose holder is dead is stale at once"),
    (Code.OLDER_THAN_STALE_AFTER, "another tool's lock whose holder is not alive is stale "
                                  "once older than the stale limit"),
    (Code.YOUNGER_THAN_STALE_AFTER, "another tool's lock whose holder is not alive stays held "
                                    "until it is older than the stale limit"),
    (Code.AF_REAPS_CLAIMS, "af claims are never judged stale: af reaps them"),
    (Code.EXPIRES_IN, "a lease that has not lapsed stands"),
    (Code.AGE_UNKNOWN, "a lock of unknown age cannot be judged stale"),
    (Code.HOLDER_ALIVE, "a lock whose holder is alive is held"),
    (Code.HOLDER_ALIVE_UNVERIFIED, "a lock whose holder is alive is held"),
    (Code.KERNEL_ANCHOR_FREE, "a kernel lock's anchor no process holds is free, never stale: "
                              "only the kernel knows, and the file is never deleted"),
    (Code.KERNEL_ANCHOR_UNCHECKED, "a kernel lock's anchor whose lock cannot be read is held, "
                                   "never stale"),
    (Code.REMOTE_HOST, "a lock of another host whose holder cannot be checked from here "
                       "stays held"),
    (Code.NO_LOCK_FILE, "no lock file: free"),
)
"""Reason codes that decide a verdict, most decisive first, with the rule in words
(docs/verdicts.md "Verdicts")."""


def deciding_rule(st: LockStatus) -> str:
    """The rule that decided ``st``'s state, in words, from its reason codes (the first of
    :data:`_RULES` present), or "" when no reason names one."""
    codes = {r.code for r in st.reasons}
    for code, rule in _RULES:
        if code in codes:
            return rule
    return ""


def under_any(path: str, dirs: Iterable[str]) -> bool:
    """True when ``path`` is one of ``dirs`` or lies below one of them."""
    return any(path == d or path.startswith(d.rstrip(os.sep) + os.sep) for d in dirs)


def duration_words(seconds: float) -> str:
    """A setting's duration in words with spaces: "1 h", "2 min", "1 h 30 min", "45 s",
    "1 d" (whole seconds; fractions are kept as "1.5 s" below a minute)."""
    s = max(0.0, float(seconds))
    if s < 60:
        text = f"{s:.3f}".rstrip("0").rstrip(".")
        return f"{text} s"
    total = round(s)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if total >= size:
            parts.append(f"{total // size} {unit}")
            total %= size
    return " ".join(parts)


_UNITS = {"d": 86400.0, "day": 86400.0, "days": 86400.0, "h": 3600.0, "hr": 3600.0,
          "hour": 3600.0, "hours": 3600.0, "m": 60.0, "min": 60.0, "mins": 60.0,
          "minute": 60.0, "minutes": 60.0, "s": 1.0, "sec": 1.0, "secs": 1.0,
          "second": 1.0, "seconds": 1.0, "": 1.0}


def parse_duration(text: str) -> float | None:
    """Seconds from "1 h", "2 min", "1h 30m", "90 s", "90" (seconds); ``None`` when it does
    not read as a duration."""
    import re

    t = text.strip().lower()
    if not t:
        return None
    total = 0.0
    pos = 0
    for m in re.finditer(r"\s*(\d+(?:\.\d*)?)\s*([a-z]*)\s*", t):
        if m.start() != pos or m.group(2) not in _UNITS:
            return None
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return total if pos == len(t) else None
