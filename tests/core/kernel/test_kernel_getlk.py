"""core.kernel.getlk and kernel_holders(source="getlk"): kernel locks through fcntl F_GETLK,
the view Lockwarden has where /proc/locks is absent (docs/specs/devtool-locks.md §2.6, "fcntl
F_GETLK"). Real holders in real processes: fasteners (lockf), a shared lockf range, an OFD lock,
portalocker and flock(1) (flock, which F_GETLK cannot see on Linux)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from core.kernel import getlk as kernel_getlk
from core.kernel.getlk import FLOCK_FORMAT, getlk, open_by, pack_flock, unpack_flock
from core.kernel.locks import Access, LockKind, kernel_holders
from tests.support.kernel_holders import hold as _hold

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux F_GETLK view")
has_ofd = pytest.mark.skipif(not hasattr(fcntl, "F_OFD_SETLK"), reason="no OFD locks")

def _release(p: subprocess.Popen[str]) -> None:
    """End a holder by closing its stdin and wait for its exit (an event, no sleep)."""
    assert p.stdin is not None
    p.stdin.close()
    assert p.wait(timeout=10) == 0


def test_struct_layouts() -> None:
    """Linux x86_64/aarch64 '@hhqqi4x' (32 bytes), macOS '@qqihh' (24), FreeBSD with l_sysid
    (spec §2.6, "Struct layout differs by platform"); pack/unpack round-trip."""
    linux_layout = kernel_getlk._layout("linux")
    if struct.calcsize("P") == 8:  # 64-bit: off_t aligned to 8, the struct padded to 32
        assert linux_layout[0] == "@hhqqi4x" and len(pack_flock(1, layout=linux_layout)) == 32
    mac = kernel_getlk._layout("darwin")
    assert mac == ("@qqihh", ("start", "len", "pid", "type", "whence"))
    assert len(pack_flock(1, layout=mac)) == 24
    assert kernel_getlk._layout("freebsd14")[0] == "@qqihhi"
    raw = pack_flock(fcntl.F_RDLCK, 5, 100, 42, layout=mac)
    assert unpack_flock(raw, layout=mac) == {"start": 5, "len": 100, "pid": 42,
                                             "type": fcntl.F_RDLCK, "whence": os.SEEK_SET}
    if sys.platform.startswith("linux"):
        assert linux_layout[0] == FLOCK_FORMAT


@linux
def test_fasteners_holder_named_then_gone(tmp_path: Path,
                                          procs: list[subprocess.Popen[str]]) -> None:
    path = tmp_path / "fasteners.lock"
    holder = _hold(procs, "fasteners", path)
    found = getlk(str(path))
    assert found is not None
    assert (found.access, found.start, found.length, found.end) == ("WRITE", 0, 0, None)
    assert found.pid == holder.pid == found.raw_pid and not found.by_ofd_query
    _release(holder)
    assert getlk(str(path)) is None


@linux
def test_shared_lockf_range(tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    path = tmp_path / "range.lock"
    holder = _hold(procs, "posix-range", path)
    found = getlk(str(path))
    assert found is not None
    assert (found.access, found.start, found.length, found.end, found.pid) == (
        "READ", 0, 100, 99, holder.pid)


@linux
@has_ofd
def test_ofd_lock_has_no_pid(tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    path = tmp_path / "ofd.lock"
    _hold(procs, "ofd", path)
    found = getlk(str(path))
    assert found is not None
    assert (found.access, found.pid, found.raw_pid) == ("WRITE", None, -1)


@linux
def test_flock_is_invisible_on_linux(tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    """The documented limit: portalocker and flock(1) hold flock locks, which /proc/locks shows
    and F_GETLK on Linux does not."""
    portal = tmp_path / "portalocker.lock"
    _hold(procs, "portalocker", portal)
    cli = tmp_path / "cli.lock"
    flock1 = subprocess.Popen(["flock", str(cli), "sh", "-c", "echo ready; exec cat"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    procs.append(flock1)
    assert flock1.stdout is not None and flock1.stdout.readline() == "ready\n"
    for path in (portal, cli):
        assert getlk(str(path)) is None
    seen = kernel_holders([str(portal), str(cli)], source="proc")
    assert {h.lock.kind for hs in seen.values() for h in hs} == {LockKind.FLOCK}
    assert len(seen) == 2
    assert kernel_holders([str(portal), str(cli)], source="getlk") == {}


def test_refuses_fifo_symlink_directory(tmp_path: Path,
                                        procs: list[subprocess.Popen[str]]) -> None:
    fifo = tmp_path / "fifo.lock"
    os.mkfifo(fifo)  # no writer: an open without O_NONBLOCK would block for ever
    with pytest.raises(OSError) as err:
        getlk(str(fifo))
    assert err.value.errno == errno.EINVAL
    target = tmp_path / "t.lock"
    _hold(procs, "fasteners", target)
    link = tmp_path / "link.lock"
    link.symlink_to(target)
    with pytest.raises(OSError) as err:
        getlk(str(link))
    assert err.value.errno == errno.ELOOP
    with pytest.raises(IsADirectoryError):
        getlk(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        getlk(str(tmp_path / "missing"))


NB_CYCLES = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
print("ready", flush=True)
sys.stdin.readline()
failures = 0
for _ in range(50):
    for take, drop in ((lambda: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB),
                        lambda: fcntl.lockf(fd, fcntl.LOCK_UN)),
                       (lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB),
                        lambda: fcntl.flock(fd, fcntl.LOCK_UN))):
        try:
            take()
        except OSError:
            failures += 1
        else:
            drop()
print(failures, flush=True)
"""


def test_querying_never_takes_the_lock(tmp_path: Path) -> None:
    """Queries run in a loop in a thread while another process takes and releases lockf and
    flock locks with LOCK_NB 50 times each: not one attempt fails."""
    path = tmp_path / "busy.lock"
    path.write_text("")
    cycler = subprocess.Popen([sys.executable, "-c", NB_CYCLES, str(path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    stop = threading.Event()
    first = threading.Event()
    pids: set[int | None] = set()
    count = 0

    def query() -> None:
        nonlocal count
        while not stop.is_set():
            found = getlk(str(path))
            if found is not None:
                pids.add(found.pid)
            count += 1
            first.set()

    worker = threading.Thread(target=query)
    try:
        assert cycler.stdout is not None and cycler.stdin is not None
        assert cycler.stdout.readline() == "ready\n"
        worker.start()
        assert first.wait(10)
        cycler.stdin.write("go\n")
        cycler.stdin.flush()
        failures = int(cycler.stdout.readline())
    finally:
        stop.set()
        if worker.is_alive():
            worker.join()
        cycler.kill()
        cycler.wait()
    assert failures == 0
    assert count > 0 and pids <= {cycler.pid}


TRY_LOCKF = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError:
    raise SystemExit(1)
"""


@linux
def test_own_posix_lock_survives_a_query(tmp_path: Path) -> None:
    """Closing any descriptor of a file drops this process's POSIX locks on it; getlk sees its
    own lock through F_OFD_GETLK and keeps the descriptor instead of closing it."""
    path = tmp_path / "mine.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    ident = (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
    try:
        for _ in range(2):  # the second query reuses the kept descriptor
            found = getlk(str(path))
            assert found is not None
            assert (found.pid, found.by_ofd_query, found.access) == (os.getpid(), True, "WRITE")
            check = subprocess.run([sys.executable, "-c", TRY_LOCKF, str(path)])
            assert check.returncode == 1  # still ours
        assert ident in kernel_getlk._KEPT
    finally:
        fcntl.lockf(fd, fcntl.LOCK_UN)
        os.close(fd)
        kept = kernel_getlk._KEPT.pop(ident, None)
        if kept is not None:
            os.close(kept)


@linux
def test_kernel_holders_getlk_mixed_paths(tmp_path: Path,
                                          procs: list[subprocess.Popen[str]]) -> None:
    posix = tmp_path / "fasteners.lock"
    shared = tmp_path / "range.lock"
    portal = tmp_path / "portalocker.lock"
    pids = {"posix": _hold(procs, "fasteners", posix).pid,
            "shared": _hold(procs, "posix-range", shared).pid}
    _hold(procs, "portalocker", portal)
    twin = tmp_path / "twin.lock"
    os.link(posix, twin)
    free = tmp_path / "free.lock"
    free.write_text("")
    link = tmp_path / "link.lock"
    link.symlink_to(posix)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    paths = [str(p) for p in (posix, shared, portal, twin, free, link, fifo, tmp_path,
                              tmp_path / "missing")]
    expected = {str(posix), str(shared), str(twin)}
    if hasattr(fcntl, "F_OFD_SETLK"):
        ofd = tmp_path / "ofd.lock"
        pids["ofd"] = _hold(procs, "ofd", ofd).pid
        paths.append(str(ofd))
        expected.add(str(ofd))
    found = kernel_holders(paths, source="getlk")
    assert set(found) == expected
    for path, key in ((posix, "posix"), (twin, "posix"), (shared, "shared")):
        (h,) = found[str(path)]
        assert h.lock.kind is LockKind.POSIX and h.confirmed_by == "getlk"
        assert h.pids == (pids[key],) and h.lock.pid == pids[key] and h.open_by == ()
    (h,) = found[str(shared)]
    assert (h.lock.access, h.lock.start, h.lock.end) == (Access.READ, 0, 99)
    if "ofd" in pids:  # no PID from F_GETLK: named through /proc/<pid>/fdinfo
        (h,) = found[str(tmp_path / "ofd.lock")]
        assert (h.lock.kind, h.lock.pid, h.lock.access) == (LockKind.OFDLCK, None, Access.WRITE)
        assert h.pids == (pids["ofd"],) and h.confirmed_by == "fdinfo"


@linux
def test_auto_falls_back_when_proc_locks_is_missing(tmp_path: Path,
                                                    procs: list[subprocess.Popen[str]]) -> None:
    """A proc mount without ``locks`` (as in a restricted container): source="auto" answers
    through F_GETLK instead of raising; source="proc" still raises."""
    no_proc = tmp_path / "proc"
    no_proc.mkdir()
    path = tmp_path / "fasteners.lock"
    holder = _hold(procs, "fasteners", path)
    (h,) = kernel_holders([str(path)], proc=str(no_proc))[str(path)]
    assert (h.lock.kind, h.pids, h.confirmed_by) == (LockKind.POSIX, (holder.pid,), "getlk")
    with pytest.raises(OSError):
        kernel_holders([str(path)], proc=str(no_proc), source="proc")
    with pytest.raises(ValueError):
        kernel_holders([str(path)], source="lsof")
    (h,) = kernel_holders([str(path)])[str(path)]  # the real /proc/locks, same holder
    assert h.confirmed_by == "proc_locks" and h.pids == (holder.pid,)


def test_open_by_names_processes_with_the_file_open(tmp_path: Path,
                                                    procs: list[subprocess.Popen[str]]) -> None:
    """The macOS naming of an flock's candidates, run here directly: who has the file open."""
    real = tmp_path / "real"
    real.mkdir()
    path = real / "open.lock"
    other = real / "other.lock"
    other.write_text("")
    holder = _hold(procs, "open", path)
    alias = tmp_path / "alias"
    alias.symlink_to(real)
    found = open_by([str(path), str(alias / "open.lock"), str(other), str(tmp_path / "gone")])
    assert set(found) == {str(path), str(alias / "open.lock")}
    assert holder.pid in found[str(path)] and found[str(path)] == found[str(alias / "open.lock")]
    _release(holder)
    assert holder.pid not in open_by([str(path)]).get(str(path), ())


AS_USER2 = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from core.kernel.locks import kernel_holders
secret, held = sys.argv[2], sys.argv[3]
try:
    kernel_holders([secret], source="getlk")
    alone = "answered"
except PermissionError:
    alone = "PermissionError"
both = kernel_holders([secret, held], source="getlk")
print(json.dumps([alone, {p: [list(h.pids) for h in hs] for p, hs in both.items()}]))
"""


@linux
def test_a_file_that_cannot_be_queried_is_nothing_known(procs: list[subprocess.Popen[str]]
                                                        ) -> None:
    """Run as a second account: root's 0600 file cannot be opened, so asking about it alone
    raises (nothing known, not "no lock"); among others it is left out."""
    import tempfile

    from tests.support.second_user import (
        second_user,
        second_user_python,
        site_for_second_user,
    )

    uid, gid = second_user()
    python = second_user_python(uid, gid)
    base = Path(tempfile.mkdtemp(prefix="lockwarden-getlk-"))
    try:
        base.chmod(0o755)
        site = site_for_second_user(base, [])
        secret = base / "secret.lock"
        secret.write_text("")
        secret.chmod(0o600)
        held = base / "held.lock"
        holder = _hold(procs, "fasteners", held)
        held.chmod(0o644)
        run = subprocess.run([python, "-I", "-c", AS_USER2, str(site), str(secret), str(held)],
                             user=uid, group=gid, extra_groups=[], capture_output=True,
                             text=True, timeout=60, cwd="/")
        assert run.returncode == 0, run.stderr
        alone, both = json.loads(run.stdout)
        assert alone == "PermissionError"
        assert both == {str(held): [[holder.pid]]}
    finally:
        shutil.rmtree(base)


def test_lock_kind_by_platform() -> None:
    """PID -1: OFD on Linux, flock-or-OFD (UNKNOWN) on macOS/BSD; any other PID: POSIX."""
    assert kernel_getlk.lock_kind(-1, "linux") == "OFDLCK"
    assert kernel_getlk.lock_kind(-1, "darwin") == "UNKNOWN"
    assert kernel_getlk.lock_kind(-1, "freebsd14") == "UNKNOWN"
    assert {kernel_getlk.lock_kind(pid, p) for pid in (0, 1, 4242)
            for p in ("linux", "darwin")} == {"POSIX"}
    assert {k.value for k in LockKind} >= {"POSIX", "OFDLCK", "UNKNOWN"}


IN_CHILD_NS = r"""
import json, os, sys
from core.kernel import getlk as kernel_getlk
from core.kernel.locks import kernel_holders
found = kernel_getlk.getlk(sys.argv[1])
(h,) = kernel_holders([sys.argv[1]], source="getlk")[sys.argv[1]]
print(json.dumps([os.getpid(), found.raw_pid, found.pid, found.kind, h.lock.kind.value,
                  list(h.pids), h.confirmed_by, list(h.open_by)]))
"""


@linux
def test_holder_outside_the_pid_namespace(tmp_path: Path,
                                          procs: list[subprocess.Popen[str]]) -> None:
    """Queried from a new PID namespace (unshare(1)), the holder's PID is not visible: F_GETLK
    gives 0, reported as no PID; a POSIX lock with nobody named, the processes that have the
    file open (psutil, through the parent's /proc) listed as candidates in ``open_by``."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a new PID namespace")
    path = tmp_path / "fasteners.lock"
    holder = _hold(procs, "fasteners", path)
    run = subprocess.run(["unshare", "--pid", "--fork", sys.executable, "-c", IN_CHILD_NS,
                          str(path)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])})
    if run.returncode != 0 and "unshare failed" in run.stderr:
        pytest.skip(f"no new PID namespace here: {run.stderr.strip()}")
    assert run.returncode == 0, run.stderr
    inner_pid, raw, pid, kind, lock_kind, pids, confirmed, open_by_ = json.loads(run.stdout)
    assert inner_pid == 1  # really in a new namespace
    assert (raw, pid, kind, lock_kind, pids) == (0, None, "POSIX", "POSIX", [])
    assert confirmed == "open_files" and holder.pid in open_by_
