"""What each process of a checked schedule does, in the process the scheduler forked for it:
one engine operation (the real code: :mod:`core.engine`), or one peer following its published
protocol (docs/specs/). Every step another process could observe stops at a scheduling point
(:func:`core.seam.step`, or :meth:`Channel.point` in a peer's code) until the scheduler says go.

The process tells the scheduler, over its end of a socket pair, one line per event:
``S kind<TAB>subject`` (stopped before a step), ``E inode`` (now in the critical section, holding
the file with that inode at the lock's path), ``X`` (leaving it), ``D result`` (done).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

from core import seam

SOUND_ALONE = frozenset({"filelock", "portalocker", "fasteners", "flock1", "sema-create"})
"""Peers whose protocol alone never lets two holders in (a kernel lock on the inode at the
path; ``O_EXCL`` without reclaim): two of them in at once is the engine's doing."""


PRIVATE_KINDS = frozenset({"audit"})
"""Steps no invariant depends on the order of: an audit append (serialised by the log's own
kernel lock, whose chain the ``audit`` invariant checks at the end)."""


REPLACES_HELD = frozenset({"semats", "sema"})
"""Peers whose own protocol may remove or replace a held lock (semats' rename over the path
after a check; sema's read-judge-unlink reclaim, racing another reclaimer): what they do to a
holder is theirs, not the engine's."""


LOCK_THE_INODE = frozenset({"filelock", "portalocker", "fasteners", "flock1"})
"""Peers whose lock is a ``flock`` on the inode at the path, never its content: what the file
holds is nothing to them (a release of ours empties the file they lock, by design)."""


TRUNCATES = frozenset({"filelock"})
"""Peers whose ``open`` truncates the file at the path, whoever holds it (filelock 3.x's
``O_TRUNC``; 4.x no longer does): a record of ours they empty is their protocol's doing, and
the holder's ``flock`` pin, not its record, keeps them out (docs/engine.md, "The holder's
pin")."""


class Channel:
    """This process's end of the scheduler's socket pair. ``temps_visible``: another process
    of the schedule lists the directory (``clean``), so this process's own temp files are
    seen; otherwise steps on them are private and not scheduling points."""

    def __init__(self, sock: socket.socket, *, temps_visible: bool = False) -> None:
        self.sock = sock
        self.rfile = sock.makefile("rb", buffering=0)
        self.temps_visible = temps_visible
        self.pid = os.getpid()

    def private(self, kind: str, subject: str) -> bool:
        """A step no other process of the schedule can observe or race."""
        from core.tempfiles import parse_temp

        if kind in PRIVATE_KINDS or subject == "audit log":
            return True
        if self.temps_visible:
            return False
        temp = parse_temp(os.path.basename(subject))
        return temp is not None and temp.pid == self.pid

    def send(self, line: str) -> None:
        self.sock.sendall(line.replace("\n", "\\n").encode("utf-8", "surrogateescape") + b"\n")

    def hook(self, kind: str, subject: str) -> None:
        """:func:`core.seam.step`'s hook: stop until the scheduler's go (at once for a private
        step)."""
        if self.private(kind, subject):
            return
        self.send(f"S {kind}\t{subject}")
        if self.rfile.read(1) != b"g":  # the scheduler is gone: stop here, as a crash would
            os._exit(70)

    def point(self, kind: str, subject: str) -> None:
        """A scheduling point in a peer's code or in the critical section."""
        self.hook(kind, subject)

    def enter(self, path: str) -> None:
        self.send(f"E {os.lstat(path).st_ino}")

    def enter_fd(self, fd: int) -> None:
        self.send(f"E {os.fstat(fd).st_ino}")

    def leave(self) -> None:
        self.send("X")


Op = Callable[[str, Channel], str]


# -- the engine's operations (the real code) -------------------------------------------------

def _hold(lk: object, path: str, ch: Channel, *, refresh: bool = False) -> str:
    """In the critical section with the file ``lk`` published, then out and released. A lock
    force-released meanwhile says so on refresh or release (``LockLost``): "lost"."""
    from core.engine.lock import Lock
    from core.errors import LockLost

    assert isinstance(lk, Lock) and lk._held is not None
    ch.send(f"E {lk._held.ident[0]}")
    ch.point("cs", path)
    try:
        if refresh:
            lk.refresh()
            assert lk._held is not None
            ch.send(f"E {lk._held.ident[0]}")
            ch.point("cs", path)
        ch.leave()
        lk.release()
    except LockLost:
        ch.leave()
        return "lost"
    return "released"


def op_try(path: str, ch: Channel) -> str:
    from core.engine.lock import Lock
    from core.errors import LockError

    lk = Lock(path)
    try:
        lk.acquire(blocking=False)
    except LockError as exc:
        return f"no:{type(exc).__name__}"
    return _hold(lk, path, ch)


def op_acquire(path: str, ch: Channel) -> str:
    from core.engine.lock import Lock
    from core.errors import LockError

    lk = Lock(path)
    try:
        lk.acquire(timeout=0)
    except LockError as exc:
        return f"no:{type(exc).__name__}"
    return _hold(lk, path, ch)


def op_refresh(path: str, ch: Channel) -> str:
    from core.engine.lock import Lock
    from core.errors import LockError

    lk = Lock(path, ttl=600)
    try:
        lk.acquire(blocking=False)
    except LockError as exc:
        return f"no:{type(exc).__name__}"
    return _hold(lk, path, ch, refresh=True)


def op_reclaim(path: str, ch: Channel) -> str:
    from core.engine.reclaiming import reclaim
    from core.errors import LockError

    try:
        lk = reclaim(path, reason="verify")
    except LockError as exc:
        return f"no:{type(exc).__name__}"
    return _hold(lk, path, ch)


def op_release(path: str, ch: Channel) -> str:
    """A release by a process that does not hold the lock (``lockwarden release PATH``)."""
    from core.engine.operations import release_path
    from core.errors import LockError

    try:
        release_path(path, pid=os.getpid())
    except LockError as exc:
        return f"no:{type(exc).__name__}"
    return "removed"


def op_force(path: str, ch: Channel) -> str:
    from core.engine.operations import force_release_kept
    from core.errors import LockError

    try:
        force_release_kept(path, reason="verify")
    except (LockError, FileNotFoundError) as exc:
        return f"no:{type(exc).__name__}"
    return "removed"


def op_clean(path: str, ch: Channel) -> str:
    from core.engine.cleanup import leftovers, remove_leftover

    n = 0
    for p in leftovers(os.path.dirname(path), min_age=0.0):
        n += remove_leftover(p).removed
    return f"cleaned:{n}"


# -- peers, as their specs and sources describe them ------------------------------------------

def _sema_text(pid: int, age: float = 0.0) -> bytes:
    return f"pid={pid}\ntimestamp={int(time.time() - age)}\n".encode()


def _sema_stale(path: str) -> bool:
    """sema's stale check (docs/specs/sema.txt, "Stale Detection"; its holder's PID gone)."""
    import psutil

    try:
        with open(path, "rb") as f:
            fields = dict(line.split("=", 1) for line in f.read().decode().splitlines()
                          if "=" in line)
        pid = int(fields.get("pid", "0"))
        ts = int(fields.get("timestamp", "0"))
    except (OSError, ValueError):
        return False
    return time.time() - ts > 3600 or not psutil.pid_exists(pid)


def peer_sema(path: str, ch: Channel, *, reclaim: bool = True) -> str:
    """sema: ``O_CREAT|O_EXCL``, then the record written; on EEXIST read, judge, unlink if
    stale and try again (docs/specs/sema.txt, "Acquisition")."""
    for _ in range(2):
        ch.point("create", path)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            if not reclaim:
                return "no:held"
            ch.point("read", path)
            if not _sema_stale(path):
                return "no:held"
            ch.point("unlink", path)
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            continue
        ch.point("write", path)
        os.write(fd, _sema_text(os.getpid()))
        ch.enter_fd(fd)
        os.close(fd)
        return _inside_then_unlink(path, ch)
    return "no:gave_up"


def _inside_then_unlink(path: str, ch: Channel) -> str:
    """The sema family's critical section and release: out, then unlink whatever is at the
    path (their specs do not check it is still theirs)."""
    ch.point("cs", path)
    ch.leave()
    ch.point("unlink", path)
    try:
        os.unlink(path)
    except FileNotFoundError:  # force-released meanwhile
        return "lost"
    return "released"


def peer_sema_create(path: str, ch: Channel) -> str:
    """sema's ``try-acquire`` without its reclaim: ``O_EXCL`` only."""
    return peer_sema(path, ch, reclaim=False)


def peer_semats(path: str, ch: Channel) -> str:
    """semats and Task MCP: a complete temp file renamed onto the path after checking it is
    free (docs/specs/semats.txt, "Atomic Rename"; its TOCTOU noted there)."""
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    with open(tmp, "wb") as f:
        f.write(_sema_text(os.getpid()))
    ch.point("read", path)
    if os.path.lexists(path):
        os.unlink(tmp)
        return "no:held"
    ch.point("rename", path)
    ino = os.lstat(tmp).st_ino
    os.rename(tmp, path)
    ch.send(f"E {ino}")
    return _inside_then_unlink(path, ch)


def _flock_peer(path: str, ch: Channel, flags: int, *, recheck: str) -> str:
    """The kernel-lock tools: open (creating) the path, a non-blocking exclusive ``flock``,
    then the tool's own check that the locked file is still the one at the path
    (``recheck``: ``nlink`` as filelock, ``inode`` as portalocker and fasteners, ``none`` as
    flock(1)); unlock and close on release, never unlinking."""
    import fcntl

    for _ in range(2):
        ch.point("open", path)
        fd = os.open(path, flags, 0o644)
        ch.point("lock", path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return "no:held"
        if recheck != "none":
            ch.point("read", path)
            st = os.fstat(fd)
            stale = st.st_nlink == 0 if recheck == "nlink" else (
                not os.path.lexists(path) or os.lstat(path).st_ino != st.st_ino)
            if stale:
                os.close(fd)
                continue
        ch.enter_fd(fd)
        ch.point("cs", path)
        ch.leave()
        ch.point("lock", path)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        return "released"
    return "no:gave_up"


def peer_filelock(path: str, ch: Channel) -> str:
    """filelock's UnixFileLock: ``O_RDWR|O_CREAT|O_TRUNC``, ``flock``, an unlinked file
    (``st_nlink == 0``) tried again."""
    return _flock_peer(path, ch, os.O_RDWR | os.O_CREAT | os.O_TRUNC, recheck="nlink")


def peer_portalocker(path: str, ch: Channel) -> str:
    """portalocker and fasteners: open for appending, ``flock``, the inode at the path
    checked against the locked one."""
    return _flock_peer(path, ch, os.O_RDWR | os.O_CREAT | os.O_APPEND, recheck="inode")


def peer_flock1(path: str, ch: Channel) -> str:
    """flock(1): ``open(O_RDONLY|O_CREAT)``, ``flock``; no check."""
    return _flock_peer(path, ch, os.O_RDONLY | os.O_CREAT, recheck="none")


ENGINE_OPS: dict[str, Op] = {
    "try": op_try, "acquire": op_acquire, "reclaim": op_reclaim, "release": op_release,
    "force": op_force, "refresh": op_refresh, "clean": op_clean,
}
"""The engine's operations, each by one process."""

PEERS: dict[str, Op] = {
    "sema": peer_sema, "sema-create": peer_sema_create, "semats": peer_semats,
    "filelock": peer_filelock, "portalocker": peer_portalocker, "fasteners": peer_portalocker,
    "flock1": peer_flock1,
}
"""Peers' protocols (fasteners' is portalocker's: open, flock, the inode checked)."""

OPS: dict[str, Op] = {**ENGINE_OPS, **PEERS}


def run(name: str, path: str, sock: socket.socket, *, temps_visible: bool = False) -> None:
    """In the forked process: install the hook, do ``name`` on ``path``, say how it ended and
    exit without running the parent's clean-up (``os._exit``)."""
    import logging

    logging.disable(logging.CRITICAL)  # the engine's warnings are the schedule's, not news
    ch = Channel(sock, temps_visible=temps_visible)
    seam.install(ch.hook)
    code = 0
    try:
        result = OPS[name](path, ch)
    except BaseException as exc:
        result = f"error:{type(exc).__name__}:{exc}"
        code = 1
    try:
        from core.audit import appender

        seam.install(None)
        appender.flush_heads()
        ch.send(f"D {result}")
    finally:
        os._exit(code)


def warm(directory: str) -> None:
    """Run each engine operation once in this (the scheduler's) process, with no hook, so
    that what the forked processes would each load the first time (lazy imports, caches) is
    loaded once before they are forked; then close the audit log descriptors it kept."""
    from core.audit import appender
    from core.engine.lock import Lock
    from core.engine.operations import force_release_kept

    path = os.path.join(directory, "warm.lock")
    lk = Lock(path)
    lk.acquire(blocking=False)
    lk.refresh()
    lk.release()
    Lock(path).acquire(blocking=False)
    force_release_kept(path, reason="warm")
    appender.flush_heads()
    appender.close_all()
