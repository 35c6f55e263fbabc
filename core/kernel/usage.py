"""What is using a file or folder: every process that has it open, mapped, as its working
directory, root or executable, or holds a kernel lock on it (docs/cli.md, "who"; the question
File Locksmith, ``lsof`` and ``fuser`` answer).

Linux reads ``/proc`` itself (no shell-out): one ``readlink`` per open descriptor, matched by
path against the targets (a folder or mount point: everything beneath it), then ``stat`` and
``fdinfo`` only for the descriptors that match (to confirm the file and to read the open mode and
the ``lock:`` lines of ``flock``/OFD locks); ``/proc/PID/maps`` for mappings; ``/proc/locks``
(within :mod:`core.kernel.table`'s bounds) for POSIX locks and for holders whose descriptors
this user may not read. Processes this user may not inspect are counted, never silently left
out. macOS uses psutil's ``open_files``/``cwd``/``exe``; Windows the Restart Manager
(:mod:`core.kernel.windows`). A file opened under another hard-link name is matched only by its
lock (paths, not inodes, are compared: one ``stat`` per descriptor of the host would cost 15 µs
each).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import psutil

__all__ = ["HOWS", "Target", "Usage", "UsageReport", "who_uses"]

HOWS = ("read", "write", "read/write", "flock", "posix", "ofd", "mmap", "cwd", "root", "exe",
        "open")
"""Every way a process can use a file, as :attr:`Usage.how` names them: an open descriptor by
its access mode (``open`` where the mode is unknown: macOS, Windows), a kernel lock by its kind,
a memory mapping, the working directory, the root directory, the executable."""

_ACCMODE = {0: "read", 1: "write", 2: "read/write"}
_LOCK_KINDS = {"FLOCK": "flock", "POSIX": "posix", "OFDLCK": "ofd"}


@dataclass(frozen=True, slots=True)
class Target:
    """One path asked about.

    Attributes:
        path: as given.
        real: its resolved absolute path (symlinks followed).
        folder: True for a directory: everything beneath it counts.
        key: ``(major, minor, inode)`` of the path itself (how ``/proc/locks`` names files).
    """

    path: str
    real: str
    folder: bool
    key: tuple[int, int, int]

    def covers(self, link: str) -> bool:
        """True when ``link`` (a path the kernel printed) is this target or lies beneath it."""
        if link == self.real:
            return True
        return self.folder and link.startswith(self.real.rstrip(os.sep) + os.sep)


@dataclass(slots=True)
class Usage:
    """One process using one or more targets.

    Attributes:
        pid: its PID; name: its name; user: its user name (``None``: unknown);
        cmdline: its argument vector (empty when unreadable); started: its start time (Unix s,
        UTC; ``None``: unknown);
        how: the ways it uses them, in :data:`HOWS` order, each once;
        files: the paths it uses (sorted, each once).
    """

    pid: int
    name: str = ""
    user: str | None = None
    cmdline: tuple[str, ...] = ()
    started: float | None = None
    how: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def add(self, how: str, path: str) -> None:
        """Record one more way (``how``, one of :data:`HOWS`) of using ``path``."""
        if how not in self.how:
            self.how.append(how)
            self.how.sort(key=HOWS.index)
        if path not in self.files:
            self.files.append(path)
            self.files.sort()


@dataclass(slots=True)
class UsageReport:
    """What :func:`who_uses` found.

    Attributes:
        targets: the paths asked about.
        uses: the processes using them, by PID.
        uninspected: PIDs whose open files this user may not read (another user's processes,
            unless root), with their user names where known: counted and said, never shown as
            using nothing.
        lock_table_cut: ``/proc/locks`` was too large to read within its bounds (a lock held
            only through it may be missing).
    """

    targets: list[Target]
    uses: dict[int, Usage] = field(default_factory=dict)
    uninspected: dict[int, str | None] = field(default_factory=dict)
    lock_table_cut: bool = False

    def use(self, pid: int) -> Usage:
        """The :class:`Usage` of ``pid``, made on first use."""
        found = self.uses.get(pid)
        if found is None:
            found = self.uses[pid] = Usage(pid)
        return found


def target_of(path: str) -> Target:
    """The :class:`Target` for ``path``.

    Raises:
        OSError: the path does not exist or cannot be reached (``FileNotFoundError``...).
    """
    real = os.path.realpath(path)
    st = os.stat(real)
    import stat as _stat

    return Target(path, real, _stat.S_ISDIR(st.st_mode), _key(st))


def _key(st: os.stat_result) -> tuple[int, int, int]:
    """``(major, minor, inode)`` as ``/proc/locks`` names a file (Windows: no device numbers;
    its locks come from the Restart Manager, which names no inode)."""
    if sys.platform == "win32":
        return (0, 0, st.st_ino)
    else:
        return (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)


def who_uses(paths: Sequence[str], *, proc: str = "/proc", self_pid: int | None = None
             ) -> UsageReport:
    """Every process that uses any of ``paths`` (files or folders), this process left out.

    Args:
        paths: the files or folders asked about.
        proc: the proc mount (Linux; tests may pass another).
        self_pid: the PID to leave out (default this process: it opens the files it asks
            about).

    Returns:
        :class:`UsageReport`. Processes that exit during the scan are left out.

    Raises:
        OSError: a path does not exist or cannot be reached.
    """
    report = UsageReport([target_of(p) for p in paths])
    me = os.getpid() if self_pid is None else self_pid
    if sys.platform.startswith("linux"):
        _scan_proc(report, proc, me)
    elif sys.platform == "win32":
        _scan_restart_manager(report, me)
    else:
        _scan_psutil(report, me)
    _describe(report)
    return report


# -- Linux --------------------------------------------------------------------------------------


def _scan_proc(report: UsageReport, proc: str, me: int) -> None:
    """Walk ``/proc`` once (see the module docstring)."""
    targets = report.targets
    # a working or root directory is a folder: looked at only when a folder is asked about
    links = ("cwd", "root", "exe") if any(t.folder for t in targets) else ("exe",)
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid == me:
            continue
        base = f"{proc}/{pid}"
        for how in links:
            try:
                link = os.readlink(f"{base}/{how}")
            except OSError:
                continue
            for t in targets:
                if t.covers(link) and not (how == "root" and link == "/" and t.real != "/"):
                    report.use(pid).add(how, link)
        try:
            fds = os.listdir(f"{base}/fd")
        except PermissionError:
            report.uninspected[pid] = None
            continue
        except OSError:  # gone, or a kernel thread
            continue
        for fd in fds:
            try:
                link = os.readlink(f"{base}/fd/{fd}")
            except OSError:
                continue
            if link[:1] != "/":
                continue
            link = link.removesuffix(" (deleted)")
            for t in targets:
                if t.covers(link):
                    _fd_use(report, pid, f"{base}/fdinfo/{fd}", link)
        _maps(report, pid, f"{base}/maps")
    _locks(report, proc)


def _fd_use(report: UsageReport, pid: int, fdinfo: str, link: str) -> None:
    """Record an open descriptor: its access mode and the locks its fdinfo lists."""
    use = report.use(pid)
    try:
        with open(fdinfo, encoding="ascii", errors="replace") as f:
            text = f.read(64 * 1024)
    except OSError:
        use.add("open", link)
        return
    mode = "open"
    for line in text.splitlines():
        if line.startswith("flags:"):
            try:
                mode = _ACCMODE.get(int(line.split()[1], 8) & 3, "open")
            except (IndexError, ValueError):
                pass
        elif line.startswith("lock:"):
            parts = line.split()
            kind = _LOCK_KINDS.get(parts[2]) if len(parts) > 2 else None
            if kind is not None:
                use.add(kind, link)
    use.add(mode, link)


def _maps(report: UsageReport, pid: int, maps: str) -> None:
    """Record the targets ``pid`` maps into memory (its executable's mapping counts as
    ``exe``, already seen). The text is searched for the targets' paths before it is split: most
    processes map none of them."""
    try:
        with open(maps, "rb") as f:
            data = f.read()
    except OSError:
        return
    if not any(t.real.encode("utf-8", "surrogateescape") in data for t in report.targets):
        return
    seen: set[str] = set()
    for line in data.decode("utf-8", "surrogateescape").splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or parts[5][:1] != "/":
            continue
        path = parts[5].removesuffix(" (deleted)")
        if path in seen:
            continue
        seen.add(path)
        for t in report.targets:
            if t.covers(path):
                use = report.use(pid)
                if "exe" not in use.how or path not in use.files:
                    use.add("mmap", path)


def _locks(report: UsageReport, proc: str) -> None:
    """POSIX locks (owned by a process, not by a descriptor) and every lock of a process whose
    descriptors could not be read, from one bounded read of ``/proc/locks``."""
    from core.errors import ParseError
    from core.kernel.locks import LockKind, parse_line
    from core.kernel.table import read_table

    try:
        table = read_table(f"{proc}/locks")
    except OSError:
        return
    report.lock_table_cut = not table.complete
    keys = {t.key: t for t in report.targets if not t.folder}
    folders = [t for t in report.targets if t.folder]
    for line in table.text.splitlines():
        try:
            lock = parse_line(line)
        except ParseError:
            continue
        if lock.waiter or lock.pid is None or lock.key is None:
            continue
        target = keys.get(lock.key)
        path = target.real if target is not None else None
        if path is None and folders:
            path = _path_in_folders(lock.key, lock.pid, proc, folders)
        if path is None:
            continue
        use = report.uses.get(lock.pid)
        if lock.kind is LockKind.POSIX or use is None or not (
                {"flock", "ofd"} & set(use.how)):
            name = _LOCK_KINDS.get(lock.kind.value)
            if name is not None:
                report.use(lock.pid).add(name, path)


def _path_in_folders(key: tuple[int, int, int], pid: int, proc: str,
                     folders: Iterable[Target]) -> str | None:
    """The path beneath one of ``folders`` of the file ``key`` that ``pid`` locks, found among
    the files ``pid`` has open (``None`` when they cannot be read or none matches)."""
    try:
        fds = os.listdir(f"{proc}/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            link = os.readlink(f"{proc}/{pid}/fd/{fd}")
            if not any(t.covers(link) for t in folders):
                continue
            st = os.stat(f"{proc}/{pid}/fd/{fd}")
        except OSError:
            continue
        if _key(st) == key:
            return link
    return None


# -- macOS and the other platforms psutil serves ------------------------------------------------


def _scan_psutil(report: UsageReport, me: int) -> None:
    """Every process's open files, working directory and executable through psutil."""
    for p in psutil.process_iter():
        if p.pid == me:
            continue
        try:
            for how, link in (("cwd", p.cwd()), ("exe", p.exe())):
                if link and any(t.covers(link) for t in report.targets):
                    report.use(p.pid).add(how, link)
            for f in p.open_files():
                if any(t.covers(f.path) for t in report.targets):
                    report.use(p.pid).add("open", f.path)
        except psutil.AccessDenied:
            report.uninspected[p.pid] = None
        except psutil.Error:
            continue


# -- Windows ----------------------------------------------------------------------------------


def _scan_restart_manager(report: UsageReport, me: int) -> None:
    """The Restart Manager's answer for each file (File Locksmith's call); a folder is asked
    about the files beneath it."""
    if sys.platform == "win32":
        from core.kernel.windows import processes_using

        for t in report.targets:
            files = [t.real]
            if t.folder:
                files = [os.path.join(d, n) for d, _, names in os.walk(t.real) for n in names]
            for path in files:
                try:
                    users = processes_using(path)
                except OSError:
                    continue
                for u in users:
                    if u.pid != me:
                        report.use(u.pid).add("open", path)


# -- process details --------------------------------------------------------------------------


def _describe(report: UsageReport) -> None:
    """Fill in each process's name, user, command line and start time (psutil); drop the
    processes that exited meanwhile; name the users of the uninspected ones."""
    for pid in list(report.uses):
        use = report.uses[pid]
        try:
            p = psutil.Process(pid)
            with p.oneshot():
                use.name = p.name()
                use.started = p.create_time()
                try:
                    use.user = p.username()
                except (psutil.AccessDenied, KeyError):
                    use.user = None
                try:
                    use.cmdline = tuple(p.cmdline())
                except psutil.AccessDenied:
                    use.cmdline = ()
        except psutil.NoSuchProcess:
            del report.uses[pid]
        except psutil.AccessDenied:
            continue
    for pid in list(report.uninspected):
        if pid in report.uses:  # named by a lock it holds
            del report.uninspected[pid]
            continue
        try:
            report.uninspected[pid] = psutil.Process(pid).username()
        except psutil.NoSuchProcess:
            del report.uninspected[pid]
        except (psutil.AccessDenied, KeyError):
            continue
