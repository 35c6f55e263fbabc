"""Verdicts on developer tools' marker locks: git, Vim, Emacs, LibreOffice, Terraform,
filelock's SoftFileLock.

One function per tool (:func:`judge_git_lock`, :func:`judge_git_gc`, :func:`judge_vim_swap`,
:func:`judge_emacs_lock`, :func:`judge_libreoffice_lock`, :func:`judge_terraform`,
:func:`judge_softfilelock`), each returning a :class:`core.record.LockStatus` like
:func:`core.verdicts.judge.judge`; :func:`judge_devtool` picks one by ``record.format``. Their
holder is inferred from the PID/host they record or from the processes that run; Terraform's
label is judged by the kernel lock on its state file. Ages in seconds, from the file's mtime
unless the format records a time.

Rules (when each is ``held`` or ``stale``, and the reasons): docs/verdicts.md, "Developer
tools' locks (``core.verdicts.devtools``)"; docs/specs/devtool-locks.md, "Cross-cutting
liveness rules (recommended)".
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable
from datetime import UTC, datetime

import psutil

from core.codes import Code
from core.defaults import FORMAT_STALE_AFTER
from core.formats import git, softfilelock
from core.kernel.locks import Access, Holding, LockKind, kernel_holders
from core.kernel.table import Table
from core.reasons import Reason
from core.record import Evidence, FileInfo, Liveness, LockRecord, LockStatus, State
from core.stale_policy import DEFAULT_POLICY, StalePolicy
from core.verdicts.liveness import boot_time, hostname, process_owner, same_host

GIT_GRACE = FORMAT_STALE_AFTER["git-lock"]
"""Seconds a git lock with no git process in its repository stays ``held``
(docs/specs/devtool-locks.md §2.1: stale = no such process and age > ~10 s;
``core.packedRefsTimeout`` is 1 s): the default stale limit of ``git-lock``
(:data:`core.defaults.FORMAT_STALE_AFTER`; a directory's policy may set another,
:meth:`core.stale_policy.StalePolicy.limit_for`)."""

GIT_SUSPICIOUS = 3600.0
"""Seconds after which a held git lock is said to be suspicious (docs/specs/devtool-locks.md
§2.1)."""

GC_PID_MAX_AGE = FORMAT_STALE_AFTER["git-gc"]
"""Seconds after which git ignores a ``gc.pid`` (``builtin/gc.c``, 12 h): the default stale
limit of ``git-gc``."""

BOOT_SLACK = 1.0
"""Seconds of tolerance between an Emacs lock's BOOT and this host's boot time, and between a
process start and the swap file it wrote."""

EDITOR_NAMES = ("vim", "nvim", "gvim", "view", "vi")
"""Process names that may own a Vim swap file (psutil ``name()`` contains one of them)."""

OFFICE_NAMES = ("soffice.bin", "soffice", "oosplash")


class _Proc:
    """What psutil says about one PID: ``state`` is ``alive``, ``zombie``, ``dead`` or
    ``denied`` (exists, another user's); ``name`` and ``start`` (Unix s) when readable."""

    __slots__ = ("name", "pid", "start", "state")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.name: str | None = None
        self.start: float | None = None
        try:
            p = psutil.Process(pid)
            with p.oneshot():
                status = p.status()
                self.name = p.name()
                self.start = p.create_time()
            self.state = "zombie" if status == psutil.STATUS_ZOMBIE else "alive"
        except psutil.NoSuchProcess:
            self.state = "dead"
        except psutil.AccessDenied:
            self.state = "denied"
        except Exception:  # psutil failure: say nothing is known, never "dead"
            self.state = "denied"

    @property
    def running(self) -> bool:
        return self.state in ("alive", "denied")


def _age(now: datetime, taken: float | None) -> float | None:
    return None if taken is None else now.timestamp() - taken


class _Judge:
    """Builds the :class:`LockStatus` of one verdict."""

    def __init__(self, path: str, record: LockRecord, policy: StalePolicy, now: datetime,
                 file: FileInfo | None) -> None:
        self.path, self.record, self.policy, self.now, self.file = path, record, policy, now, file

    def __call__(self, state: State, liveness: Liveness, *reasons: Reason,
                 proc: _Proc | None = None, boot: float | None = None,
                 found: int | None = None) -> LockStatus:
        """The verdict. ``found``: the PID of the process found holding a lock whose file
        names none (a git process, LibreOffice, the kernel lock's holder): it becomes the
        record's ``pid`` (``metadata["pid_found"] = True``), so the watcher's liveness pass
        re-judges the lock when that process exits (docs/watching.md, "Liveness and
        time")."""
        # the live holder's user, as for every other lock ("mine": docs/gui.md, "Holder")
        uid, user = process_owner(proc.pid) if proc and proc.state == "alive" else (None, None)
        ev = Evidence(pid=proc.pid if proc else (found or self.record.pid),
                      process_start=proc.start if proc else None,
                      process_name=proc.name if proc else None, boot_time=boot,
                      process_user=user, process_uid=uid)
        record = self.record
        if found is not None and record.pid is None:
            record = dataclasses.replace(record, pid=found,
                                         metadata={**record.metadata, "pid_found": True})
        return LockStatus(self.path, state, liveness=liveness, reasons=reasons,
                          record=record, checked_at=self.now, file=self.file,
                          policy=self.policy, evidence=ev)


def _pid_reasons(proc: _Proc) -> Reason:
    if proc.state == "alive":
        return Reason.of(Code.HOLDER_ALIVE, pid=proc.pid, name=proc.name)
    if proc.state == "denied":
        return Reason.of(Code.HOLDER_ALIVE_UNVERIFIED, pid=proc.pid, why="access_denied")
    return Reason.of(Code.HOLDER_DEAD, pid=proc.pid, zombie=proc.state == "zombie" or None)


# -- git ---------------------------------------------------------------------------------------


def _read_small(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(65536)
    except (OSError, ValueError):
        return None


def worktree_of(gitdir: str) -> str | None:
    """The working tree of a git directory: the parent of ``…/.git``; for
    ``.git/worktrees/<w>`` the directory named by its ``gitdir`` file; for
    ``.git/modules/<m>`` (a submodule) its ``core.worktree`` (relative to the git directory);
    ``None`` for a bare repository or when it cannot be read. Never raises."""
    if os.path.basename(gitdir) == ".git":
        return os.path.dirname(gitdir)
    pointer = _read_small(os.path.join(gitdir, "gitdir"))
    if pointer and pointer.strip():
        return os.path.dirname(pointer.strip())
    for line in (_read_small(os.path.join(gitdir, "config")) or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() == "worktree" and value.strip():
            return os.path.normpath(os.path.join(gitdir, value.strip()))
    return None


def _under(path: str | None, roots: list[str]) -> bool:
    if not path:
        return False
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def git_workers(gitdir: str, worktree: str | None) -> list[tuple[int, str]]:
    """``(pid, name)`` of the git processes working in a repository: name ``git`` or
    ``git-*`` (psutil ``name()``), cwd under ``worktree`` or ``gitdir``, or ``GIT_DIR`` /
    ``GIT_WORK_TREE`` in their environment under them. Processes this user may not inspect
    are not seen. Never raises."""
    roots = [os.path.realpath(gitdir)]
    if worktree:
        roots.append(os.path.realpath(worktree))
    found: list[tuple[int, str]] = []
    for p in psutil.process_iter(["name"]):
        name = p.info.get("name") or ""
        if name != "git" and not name.startswith("git-"):
            continue
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            hit = _under(p.cwd(), roots)
            if not hit:
                env = p.environ()
                hit = any(_under(os.path.realpath(env[k]) if env.get(k) else None, roots)
                          for k in ("GIT_DIR", "GIT_WORK_TREE"))
        except (psutil.Error, OSError):
            continue
        if hit:
            found.append((p.pid, name))
    return found


def judge_git_lock(path: str, record: LockRecord, *, now: datetime, mtime: float | None,
                   policy: StalePolicy = DEFAULT_POLICY, file: FileInfo | None = None
                   ) -> LockStatus:
    """Verdict on a ``git-lock`` (module docstring, docs/specs/devtool-locks.md §2.1 "Liveness rule
    for Lockwarden"). A ``~pid.lock`` companion's PID that runs also keeps it held. Never raises."""
    status = _Judge(path, record, policy, now, file)
    gitdir = git.gitdir_of(path) or os.path.dirname(path)
    age = _age(now, mtime)
    grace = policy.limit_for(record.format)
    companion = git.companion_pid(path) if record.pid is None else None
    pid = record.pid or companion
    if pid is not None and not record.metadata.get("pid_found"):
        proc = _Proc(pid)
        if proc.running:
            return status(State.HELD, Liveness.ALIVE, _pid_reasons(proc), proc=proc,
                          found=companion)
    workers = git_workers(gitdir, worktree_of(gitdir))
    if workers:
        wpid, wname = workers[0]
        more = (Reason.of(Code.GIT_LOCK_SUSPICIOUS, age_s=age)
                if age is not None and age > GIT_SUSPICIOUS
                else Reason.of(Code.HELD_FOR, age_s=max(age or 0.0, 0.0)))
        return status(State.HELD, Liveness.ALIVE,
                      Reason.of(Code.GIT_WORKER, pid=wpid, name=wname, count=len(workers)),
                      more, found=wpid)
    none = Reason.of(Code.NO_GIT_WORKER, repo=worktree_of(gitdir) or gitdir)
    if age is None or age <= grace:
        return status(State.HELD, Liveness.UNKNOWN, none,
                      Reason.of(Code.GIT_LOCK_YOUNG, age_s=max(age or 0.0, 0.0),
                                limit_s=grace))
    return status(State.STALE, Liveness.DEAD, none, Reason.of(Code.GIT_REMOVE_LOCK))


def judge_git_gc(path: str, record: LockRecord, *, now: datetime, mtime: float | None,
                 policy: StalePolicy = DEFAULT_POLICY, file: FileInfo | None = None
                 ) -> LockStatus:
    """Verdict on ``gc.pid`` by git's own rule (``builtin/gc.c``): live when its mtime is at
    most 12 h old and (another host, or the PID runs); a zombie is dead (docs/specs/devtool-locks.md
    §3, 2). Never raises."""
    status = _Judge(path, record, policy, now, file)
    age = _age(now, mtime)
    limit = policy.limit_for(record.format)
    if age is not None and age > limit:
        return status(State.STALE, Liveness.UNKNOWN,
                      Reason.of(Code.GC_PID_OLD, age_s=age, limit_s=limit))
    if record.host and not same_host(record.host):
        return status(State.HELD, Liveness.REMOTE,
                      Reason.of(Code.REMOTE_HOST, pid=record.pid, host=record.host,
                                this_host=hostname()),
                      Reason.of(Code.GC_PID_REMOTE, age_s=max(age or 0.0, 0.0),
                                limit_s=limit))
    if record.pid is None:
        return status(State.HELD, Liveness.UNKNOWN, Reason.of(Code.NO_PID))
    proc = _Proc(record.pid)
    if proc.running:
        return status(State.HELD, Liveness.ALIVE, _pid_reasons(proc), proc=proc)
    return status(State.STALE, Liveness.DEAD, _pid_reasons(proc), proc=proc)


# -- editors -----------------------------------------------------------------------------------


def edited_file(path: str, record: LockRecord) -> str:
    """The file a swap belongs to: beside the swap when Vim set ``B0_SAME_DIR`` (its name is
    then the tail of the recorded one), else the recorded name with ``~`` expanded."""
    name = str(record.metadata.get("file") or record.tag or "")
    if record.metadata.get("same_dir") and name and path:
        return os.path.join(os.path.dirname(path), name.rsplit("/", 1)[-1])
    return os.path.expanduser(name)


def judge_vim_swap(path: str, record: LockRecord, *, now: datetime, mtime: float | None,
                   ctime: float | None = None, policy: StalePolicy = DEFAULT_POLICY,
                   file: FileInfo | None = None, boot: float | None = None) -> LockStatus:
    """Verdict on a ``vim-swap`` (docs/specs/devtool-locks.md §2.2, Vim's
    ``swapfile_process_running`` plus the PID reuse guard): see the module docstring.
    ``mtime``/``ctime``: the swap file's (Unix s); ``boot``: this host's boot time (default
    :func:`core.verdicts.liveness.boot_time`). A dead swap says whether it holds unsaved changes
    (``swap_recover``: recover with ``vim -r``) or not (``swap_clean``: Vim itself deletes it
    silently). Never raises."""
    status = _Judge(path, record, policy, now, file)
    boot = boot_time() if boot is None else boot
    meta = record.metadata
    name = edited_file(path, record)
    after = (Reason.of(Code.SWAP_RECOVER, file=name) if meta.get("dirty")
             else Reason.of(Code.SWAP_CLEAN))
    if record.host and not same_host(record.host):
        return status(State.HELD, Liveness.REMOTE,
                      Reason.of(Code.REMOTE_HOST, pid=record.pid, host=record.host,
                                this_host=hostname()))
    if boot is not None and mtime is not None and mtime < boot - BOOT_SLACK:
        return status(State.STALE, Liveness.DEAD, Reason.of(
            Code.PREDATES_BOOT, pid=record.pid,
            boot_at=datetime.fromtimestamp(boot, UTC).isoformat(timespec="seconds")),
            after, boot=boot)
    if record.pid is None:
        return status(State.HELD, Liveness.UNKNOWN, Reason.of(Code.NO_PID), boot=boot)
    proc = _Proc(record.pid)
    if not proc.running:
        return status(State.STALE, Liveness.DEAD, _pid_reasons(proc), after, proc=proc,
                      boot=boot)
    if proc.name is not None and not any(n in proc.name.lower() for n in EDITOR_NAMES):
        return status(State.STALE, Liveness.REUSED,
                      Reason.of(Code.NOT_THE_TOOL, pid=proc.pid, name=proc.name, tool="Vim"),
                      after, proc=proc, boot=boot)
    changed = ctime if ctime is not None else mtime
    if proc.start is not None and changed is not None and proc.start > changed + BOOT_SLACK:
        return status(State.STALE, Liveness.REUSED,
                      Reason.of(Code.PID_REUSED, pid=proc.pid, how="written",
                                delta_s=proc.start - changed), after, proc=proc, boot=boot)
    return status(State.HELD, Liveness.ALIVE, _pid_reasons(proc), proc=proc, boot=boot)


def judge_emacs_lock(path: str, record: LockRecord, *, now: datetime, mtime: float | None,
                     policy: StalePolicy = DEFAULT_POLICY, file: FileInfo | None = None,
                     boot: float | None = None) -> LockStatus:
    """Verdict on an ``emacs-lock`` by Emacs's own rule (``filelock.c``, docs/specs/devtool-locks.md
    §2.3): another host: ``held``; a recorded BOOT that is not this boot (±1 s): ``stale``; the PID
    runs (``EPERM`` counts) and is no zombie: ``held``; else ``stale``. Never raises."""
    status = _Judge(path, record, policy, now, file)
    if record.host and not same_host(record.host):
        return status(State.HELD, Liveness.REMOTE,
                      Reason.of(Code.REMOTE_HOST, pid=record.pid, host=record.host,
                                this_host=hostname()))
    boot = boot_time() if boot is None else boot
    recorded = record.metadata.get("boot")
    if isinstance(recorded, int) and recorded and boot is not None \
            and abs(recorded - boot) > BOOT_SLACK:
        return status(State.STALE, Liveness.DEAD, Reason.of(
            Code.OTHER_BOOT, boot_at=_iso(recorded), this_boot_at=_iso(boot)), boot=boot)
    if record.pid is None:
        return status(State.HELD, Liveness.UNKNOWN, Reason.of(Code.NO_PID))
    proc = _Proc(record.pid)
    if proc.running:
        return status(State.HELD, Liveness.ALIVE, _pid_reasons(proc), proc=proc, boot=boot)
    return status(State.STALE, Liveness.DEAD, _pid_reasons(proc), proc=proc, boot=boot)


def _iso(ts: float) -> str:
    try:
        return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return "?"


def office_processes(user: str, profile: str | None) -> list[int]:
    """PIDs of ``soffice.bin`` processes of ``user`` using ``profile`` (its
    ``-env:UserInstallation=`` argument; without one, the default profile
    ``…/.config/libreoffice/4``). Never raises."""
    found = []
    for p in psutil.process_iter(["name", "username", "cmdline"]):
        if (p.info.get("name") or "") not in OFFICE_NAMES or p.info.get("username") != user:
            continue
        args = p.info.get("cmdline") or []
        given = [a.split("=", 1)[1] for a in args if a.startswith("-env:UserInstallation=")]
        if not profile or (given and profile in given) or (
                not given and profile.rstrip("/").endswith("/.config/libreoffice/4")):
            found.append(p.pid)
    return found


def judge_libreoffice_lock(path: str, record: LockRecord, *, now: datetime,
                           mtime: float | None, policy: StalePolicy = DEFAULT_POLICY,
                           file: FileInfo | None = None) -> LockStatus:
    """Verdict on a ``libreoffice-lock`` (docs/specs/devtool-locks.md §2.4): no PID is recorded, so
    on this host it is ``held`` while an office process of that user and profile runs, else
    ``stale``; another host: ``held`` (cannot be judged from here). Never raises."""
    status = _Judge(path, record, policy, now, file)
    if record.host and not same_host(record.host):
        return status(State.HELD, Liveness.REMOTE,
                      Reason.of(Code.REMOTE_HOST, host=record.host,
                                this_host=hostname()))
    user = str(record.metadata.get("user") or record.holder or "")
    profile = record.metadata.get("profile")
    try:
        pids = office_processes(user, profile if isinstance(profile, str) else None)
    except Exception as exc:  # psutil unusable
        return status(State.HELD, Liveness.UNKNOWN,
                      Reason.of(Code.LIVENESS_UNCHECKED, detail=str(exc)))
    if pids:
        return status(State.HELD, Liveness.ALIVE,
                      Reason.of(Code.OFFICE_RUNNING, pid=pids[0], user=user), found=pids[0])
    return status(State.STALE, Liveness.DEAD, Reason.of(Code.NO_OFFICE_PROCESS, user=user))


# -- kernel-backed labels and markers ----------------------------------------------------------


def judge_terraform(path: str, record: LockRecord, *, now: datetime, mtime: float | None,
                    policy: StalePolicy = DEFAULT_POLICY, file: FileInfo | None = None,
                    locks_text: str | None = None) -> LockStatus:
    """Verdict on a ``terraform-lock-info`` (docs/specs/devtool-locks.md §2.5, "Rule: the .lock.info
    is only a label"): ``held`` while ``/proc/locks`` shows a POSIX write lock on the state file
    (its PID is the terraform child process); without one the label is leftover metadata: ``stale``.
    ``locks_text``: a ``/proc/locks`` text already read. Never raises."""
    status = _Judge(path, record, policy, now, file)
    state_file = str(record.metadata.get("state_file") or "")
    try:
        held, cut = _state_file_locks(state_file, locks_text)
    except OSError as exc:
        return status(State.HELD, Liveness.UNKNOWN,
                      Reason.of(Code.LIVENESS_UNCHECKED, detail=f"/proc/locks: {exc}"))
    if cut is not None and not held:
        return status(State.HELD, Liveness.UNKNOWN, Reason.of(
            Code.KERNEL_TABLE_TOO_LARGE, file=state_file, bytes=cut.bytes_read,
            seconds=round(cut.seconds, 3), cut=cut.cut, tool=None))
    for h in held:
        if h.lock.kind in (LockKind.POSIX, LockKind.OFDLCK, LockKind.UNKNOWN) \
                and h.lock.access is Access.WRITE:
            pid = h.pids[0] if h.pids else None
            proc = _Proc(pid) if pid is not None else None
            return status(State.HELD, Liveness.ALIVE, Reason.of(
                Code.KERNEL_LOCK_HELD, pid=pid, kind=h.lock.kind.value,
                access=h.lock.access.value, file=state_file), proc=proc, found=pid)
    return status(State.STALE, Liveness.DEAD, Reason.of(Code.NO_KERNEL_LOCK, file=state_file))


def _state_file_locks(state_file: str, locks_text: str | None
                      ) -> tuple[list[Holding], Table | None]:
    """The kernel locks on Terraform's state file, and the cut-off table where it may hide
    one: only where ``F_GETLK`` could not ask the file (Terraform's lock is POSIX; docs/verdicts.md,
    "When the kernel's lock table is too large"). Raises as ``kernel_holders``."""
    if locks_text is not None:
        return kernel_holders([state_file], text=locks_text).get(state_file, []), None
    from core.kernel.getlk import getlk
    from core.kernel.lookup import look_up

    try:
        found = look_up([state_file])
    except OSError:  # no /proc/locks: F_GETLK alone
        return kernel_holders([state_file]).get(state_file, []), None
    cut = found.unknown.get(state_file)
    if cut is not None:
        with contextlib.suppress(OSError):
            if getlk(state_file) is None:
                cut = None  # asked: F_GETLK sees no POSIX or OFD lock on it
    return found.held.get(state_file, []), cut


def judge_softfilelock(path: str, record: LockRecord, *, now: datetime, mtime: float | None,
                       policy: StalePolicy = DEFAULT_POLICY, file: FileInfo | None = None
                       ) -> LockStatus:
    """Verdict on a ``softfilelock`` marker (filelock's ``owner_is_stale``,
    docs/specs/devtool-locks.md §2.7): another host: ``held``; the PID runs and its start token
    matches (or none is recorded): ``held``; a different start token: ``stale`` (the PID was
    reused); no such PID: ``stale``.
    Never raises."""
    status = _Judge(path, record, policy, now, file)
    if record.host and not same_host(record.host):
        return status(State.HELD, Liveness.REMOTE,
                      Reason.of(Code.REMOTE_HOST, pid=record.pid, host=record.host,
                                this_host=hostname()))
    if record.pid is None:
        return status(State.HELD, Liveness.UNKNOWN, Reason.of(Code.NO_PID))
    proc = _Proc(record.pid)
    if not proc.running:
        return status(State.STALE, Liveness.DEAD, _pid_reasons(proc), proc=proc)
    recorded = record.metadata.get("start_token")
    current = softfilelock.start_token(record.pid)
    if isinstance(recorded, int) and current is not None \
            and not softfilelock.same_start(current, recorded):
        return status(State.STALE, Liveness.REUSED,
                      Reason.of(Code.START_TOKEN_MISMATCH, pid=record.pid), proc=proc)
    return status(State.HELD, Liveness.ALIVE, _pid_reasons(proc), proc=proc)


_Judger = Callable[..., LockStatus]

JUDGES: dict[str, _Judger] = {
    "git-lock": judge_git_lock,
    "git-gc": judge_git_gc,
    "vim-swap": judge_vim_swap,
    "emacs-lock": judge_emacs_lock,
    "libreoffice-lock": judge_libreoffice_lock,
    "terraform-lock-info": judge_terraform,
    "softfilelock": judge_softfilelock,
    "libreoffice-profile": judge_libreoffice_lock,
}
"""The judge of each developer tool's format (:data:`core.record.DEVTOOL_FORMATS`)."""


def judge_devtool(path: str, record: LockRecord, *, now: datetime, mtime: float | None,
                  policy: StalePolicy = DEFAULT_POLICY, file: FileInfo | None = None
                  ) -> LockStatus | None:
    """The verdict of ``record.format``'s judge, or ``None`` for a format that is not a
    developer tool's. Never raises (a failure becomes ``held`` with ``liveness_unchecked``:
    a marker is never called stale on no evidence)."""
    judge = JUDGES.get(record.format)
    if judge is None:
        return None
    try:
        return judge(path, record, now=now, mtime=mtime, policy=policy, file=file)
    except Exception as exc:
        return _Judge(path, record, policy, now, file)(
            State.HELD, Liveness.UNKNOWN,
            Reason.of(Code.LIVENESS_UNCHECKED, detail=f"{type(exc).__name__}: {exc}"))
