"""The stable reason codes of verdicts (docs/verdicts.md lists them) and the kinds of why a path
could not be read as a lock or may not be removed; values are the JSON strings. A reason is a
code with parameters (:class:`core.reasons.Reason`), rendered to words only in
:mod:`core.reasons`. Standard library only."""

from __future__ import annotations

import enum


class Code(enum.StrEnum):
    """Stable reason codes (``docs/verdicts.md``). Values are the JSON ``code`` strings."""

    # what is (not) at the path
    NO_LOCK_FILE = "no_lock_file"
    NOT_CLAIMED = "not_claimed"  # node
    UNREADABLE = "unreadable"  # kind, detail
    WRITING = "writing"  # empty, age_s
    EMPTY_LEFT_BY_CRASH = "empty_left_by_crash"  # age_s (no longer judged; old audit entries)
    EMPTY_FREE = "empty_free"  # open_seen
    EMPTY_OPEN = "empty_open"  # pid, name, count
    EMPTY_UNCHECKED = "empty_unchecked"  # detail
    # the holder's liveness (core.verdicts.liveness)
    NO_PID = "no_pid"
    INVALID_PID = "invalid_pid"  # pid
    INIT_HOLDER = "init_holder"  # pid
    REMOTE_HOST = "remote_host"  # pid, host, this_host
    HOLDER_ALIVE = "holder_alive"  # pid, name
    HOLDER_ALIVE_UNVERIFIED = "holder_alive_unverified"  # pid, name, why
    HOLDER_DEAD = "holder_dead"  # pid, zombie
    HOLDER_PINNED = "holder_pinned"  # pid, recorded, name
    PID_REUSED = "pid_reused"  # pid, how, delta_s
    PREDATES_BOOT = "predates_boot"  # pid (optional), boot_at
    LIVENESS_UNCHECKED = "liveness_unchecked"  # detail
    HELD_BY_CALLER = "held_by_caller"  # pid, name, shell, since, path (CLI: a self-deadlock)
    # how the watcher follows a live holder (Evidence.followed; docs/watching.md, "Holders' exits")
    LIVENESS_FOLLOWED = "liveness_followed"  # pid, how (pidfd | kqueue | handle)
    LIVENESS_POLLED = "liveness_polled"  # pid, every_s, why
    # the policy (core.verdicts.judge)
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
    UNSAVED_CHANGES = "unsaved_changes"  # tool, file, where, recover
    OTHER_BOOT = "other_boot"  # boot_at, this_boot_at
    OFFICE_RUNNING = "office_running"  # pid, user
    NO_OFFICE_PROCESS = "no_office_process"  # user
    START_TOKEN_MISMATCH = "start_token_mismatch"  # pid
    # kernel locks (core.kernel.locks)
    KERNEL_LOCK_HELD = "kernel_lock_held"  # pid, name, kind, access, file, tool (anchors)
    KERNEL_ANCHOR_FREE = "kernel_anchor_free"  # tool, file
    KERNEL_ANCHOR_UNCHECKED = "kernel_anchor_unchecked"  # tool, file, detail
    NO_KERNEL_LOCK = "no_kernel_lock"  # file
    LEASE = "lease"  # lease, left_s, granted_s
    KERNEL_TABLE_TOO_LARGE = "kernel_table_too_large"  # file, bytes, seconds, cut, tool
    # what releasing a lock on a server does (core.remote; LockRecord.removal, docs/remote.md)
    TERMINATES_SESSION = "terminates_session"  # pid, user, app
    DELETES_KEY = "deletes_key"  # key, token, signal
    REVOKES_LEASE = "revokes_lease"  # lease, keys, names
    RESETS_ROW = "resets_row"  # table, id
    # the fleet: another host's report on its own PIDs (core.fleet, docs/fleet.md)
    FLEET_REPORT = "fleet_report"  # host, pid, liveness, reported_at
    FLEET_HOST_SILENT = "fleet_host_silent"  # host, silent_s
    FLEET_PID_UNREPORTED = "fleet_pid_unreported"  # host, pid
    FLEET_HOST_UNTRUSTED = "fleet_host_untrusted"  # host, why
    FLEET_SEEN_BY = "fleet_seen_by"  # hosts (comma-separated), judged_by
    # the engine's gate: what an operation may do with what is at a lock's path
    # (core.engine.gate, docs/engine.md "The gate")
    LEDGER_CLAIM = "ledger_claim"  # node
    KERNEL_ANCHOR = "kernel_anchor"  # tool, held
    KERNEL_HELD = "kernel_held"  # pid
    KERNEL_UNKNOWN = "kernel_unknown"
    NOT_A_LOCK = "not_a_lock"  # detail
    AF_CLAIM_NOT_WRITTEN = "af_claim_not_written"
    TOOL_LOCK_KEPT = "tool_lock_kept"  # format
    EMPTY_PUT_BACK = "empty_put_back"  # mode
    EMPTIED_ON_RELEASE = "emptied_on_release"  # mode
    PATH_TAKEN = "path_taken"
    LEFTOVER = "leftover"  # kind, pid
    NOT_A_LEFTOVER = "not_a_leftover"
    PEER_OPENED = "peer_opened"  # pid, name, count


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


__all__ = ["Code", "ReadOnlyKind", "UnreadableKind"]
