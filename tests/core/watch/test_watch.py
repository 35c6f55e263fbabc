"""core.watch.watcher: real files, real processes, real watchdog.

Waits use queues with generous timeouts (the machine is shared and loaded); nothing asserts on
wall-clock speed (figures are in tests/benchmarks/bench_watch_*.py)."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import namedtuple
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core.codes import Code
from core.config import WatchSpec
from core.reasons import Reason, render_all
from core.record import Liveness, LockStatus, State
from core.watch.watcher import (
    DirStatus,
    Watcher,
    filesystem_of,
    is_network_fs,
    same_verdict,
)
from tests.support.cli import ROOT
from tests.support.clock import age_after_boot
from tests.support.second_user import run_unprivileged
from tests.support.watch import (
    HOLDER,
    WAIT,
    Recorder,
    holder_dies,
    make_hostile,
    sema_text,
    write,
)

# -- the basic file operations ---------------------------------------------------------------


def test_create_modify_replace_delete(watch: Any, lockdir: Path) -> None:
    w, rec = watch([WatchSpec(str(lockdir))])
    assert w.snapshot() == []
    p = str(lockdir / "a.lock")

    write(lockdir / "a.lock", sema_text(os.getpid(), "one"))
    sets = rec.until(lambda m: p in m and m[p].state is State.HELD, what="create")
    assert any(s.path == p for cs in sets for s in cs.added)
    assert rec.model[p].record.tag == "one"
    assert rec.model[p].liveness is Liveness.ALIVE

    write(lockdir / "a.lock", sema_text(os.getpid(), "two"))  # modify in place
    sets = rec.until(lambda m: m[p].record is not None and m[p].record.tag == "two",
                     what="modify")
    assert any(s.path == p for cs in sets for s in cs.changed)
    ino = rec.model[p].file.ino

    tmp = lockdir / ".a.lock.new"  # replace: temp + rename
    write(tmp, sema_text(os.getpid(), "three"))
    os.replace(tmp, lockdir / "a.lock")
    sets = rec.until(lambda m: m[p].record is not None and m[p].record.tag == "three",
                     what="replace")
    assert any(s.path == p for cs in sets for s in cs.changed)
    assert rec.model[p].file.ino != ino
    assert str(tmp) not in rec.model

    os.unlink(lockdir / "a.lock")
    sets = rec.until(lambda m: p not in m, what="delete")
    assert [s.path for cs in sets for s in cs.removed] == [p]
    assert [(e, s.path) for cs in sets for e, s in cs.events()] == [("removed", p)]
    assert w.snapshot() == []


def test_chmod_as_unprivileged_watcher(shared_tmp: Path) -> None:
    """chmod 000 makes the lock unreadable to the (unprivileged) watcher; chmod back heals."""
    lock = shared_tmp / "c.lock"
    write(lock, sema_text(os.getpid()))
    lock.chmod(0o644)
    code = (
        "import json, sys\n"
        "from core.watch.watcher import Watcher\n"
        "from core.config import WatchSpec\n"
        "def on_change(cs):\n"
        "    for kind, xs in (('added', cs.added), ('changed', cs.changed),"
        " ('removed', cs.removed)):\n"
        "        for s in xs:\n"
        "            print(json.dumps({'event': kind, 'path': s.path, 'state': s.state.value,"
        " 'error': s.error}), flush=True)\n"
        f"w = Watcher([WatchSpec({str(shared_tmp)!r})], on_change)\n"
        "w.start()\n"
        "print(json.dumps({'event': 'ready', 'initial': [s.state.value for s in w.snapshot()]}),"
        " flush=True)\n"
        "sys.stdin.read()\n"
        "w.close()\n"
    )
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the watcher as an unprivileged user")
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.Popen(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
         code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=str(ROOT))
    lines: queue.Queue[dict[str, Any]] = queue.Queue()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(json.loads(line))

    threading.Thread(target=reader, daemon=True).start()

    def next_event(kind: str) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                ev = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if ev["event"] == kind:
                return ev
        raise AssertionError(f"no {kind!r} line from the unprivileged watcher")

    try:
        assert next_event("ready")["initial"] == ["held"]
        lock.chmod(0o000)
        ev = next_event("changed")
        assert (ev["path"], ev["state"]) == (str(lock), "unreadable")
        assert "permission denied" in ev["error"]
        lock.chmod(0o644)
        ev = next_event("changed")
        assert (ev["path"], ev["state"]) == (str(lock), "held")
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0


# -- time and liveness without file events ---------------------------------------------------


@pytest.mark.slow
def test_killed_holder_turns_stale_without_file_event(watch: Any, lockdir: Path) -> None:
    _w, rec = watch([WatchSpec(str(lockdir))])
    p = str(lockdir / "held.lock")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen([sys.executable, "-c", HOLDER, p], stdout=subprocess.PIPE,
                             text=True, env=env)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        sets = rec.until(lambda m: p in m and m[p].state is State.HELD
                         and m[p].liveness is Liveness.ALIVE, what="live holder")
        # a holder started after the last liveness pass is looked up, never called dead
        first = next(s for cs in sets for s in cs.added if s.path == p)
        assert (first.state, first.liveness) == (State.HELD, Liveness.ALIVE), first.reasons
        before = rec.model[p]
        assert before.record.written_by_lockwarden
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=WAIT)
        t0 = time.monotonic()
        sets = rec.until(lambda m: m[p].state is State.STALE, what="stale after SIGKILL")
        elapsed = time.monotonic() - t0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    after = rec.model[p]
    assert after.liveness is Liveness.DEAD
    assert after.file == before.file  # no file event: the same file, judged again
    assert any(s.path == p for cs in sets for s in cs.changed)
    print(f"killed holder seen stale after {elapsed:.2f} s (liveness tick: 2 s)")


@pytest.mark.slow
def test_holder_dying_between_two_snapshots(watch: Any, lockdir: Path) -> None:
    """A holder that starts after one liveness snapshot and dies before the next is in
    neither: it was judged alive by a direct look-up, and must still be re-judged."""
    _w, rec = watch([WatchSpec(str(lockdir))], liveness_interval=4.0)
    holder_dies(rec, str(lockdir / "brief.lock"))


@pytest.mark.slow
def test_ttl_lock_expires_on_time_without_file_event(watch: Any, lockdir: Path) -> None:
    from core.formats import serialize, taskmcp

    _w, rec = watch([WatchSpec(str(lockdir))])
    p = str(lockdir / "lease.lock")
    record = taskmcp.make_record(p, owner="agent-7", since=datetime.now(UTC), ttl=1.5,
                                 metadata={"environment": "local", "purpose": "test",
                                           "process_id": os.getpid()})
    write(lockdir / "lease.lock", serialize(record).decode())
    rec.until(lambda m: p in m and m[p].state is State.HELD, what="held lease")
    before = rec.model[p]
    sets = rec.until(lambda m: m[p].state is State.EXPIRED, what="expired lease")
    assert rec.model[p].file == before.file
    assert len([s for cs in sets for s in cs.changed]) == 1  # one change: the flip


def test_no_change_sets_while_only_ages_grow(watch: Any, lockdir: Path) -> None:
    write(lockdir / "a.lock", sema_text(os.getpid()))
    w, rec = watch([WatchSpec(str(lockdir))], liveness_interval=0.1, rescan_interval=0.3)
    assert [s.state for s in w.snapshot()] == [State.HELD]
    with pytest.raises(queue.Empty):  # ~10 liveness passes and 3 rescans, nothing to say
        rec.q.get(timeout=1.2)


def test_same_verdict_ignores_numbers_only(lockdir: Path) -> None:
    held = Reason.of(Code.HELD_FOR, age_s=192.0)
    a = LockStatus("/x.lock", State.HELD, reasons=(held,))
    later = (Reason.of(Code.HELD_FOR, age_s=194.0),)
    assert same_verdict(a, LockStatus("/x.lock", State.HELD, reasons=later))
    assert not same_verdict(a, LockStatus("/x.lock", State.STALE, reasons=(held,)))
    dead = (Reason.of(Code.HOLDER_DEAD, pid=5),)
    assert not same_verdict(a, LockStatus("/x.lock", State.HELD, reasons=dead))
    other_pid = (Reason.of(Code.HOLDER_DEAD, pid=6),)
    assert not same_verdict(LockStatus("/x.lock", State.HELD, reasons=dead),
                            LockStatus("/x.lock", State.HELD, reasons=other_pid))


# -- bursts, hostile entries, patterns --------------------------------------------------------


def test_burst_of_1000_files_arrives_complete(watch: Any, lockdir: Path) -> None:
    _w, rec = watch([WatchSpec(str(lockdir))])
    text = sema_text(os.getpid())
    names = {str(lockdir / f"b{i:04d}.lock") for i in range(1000)}
    for n in names:
        write(Path(n), text)
    sets = rec.until(lambda m: names <= set(m), timeout=60, what="1000 files")
    added = [s.path for cs in sets for s in cs.added]
    assert sorted(added) == sorted(names)  # each exactly once
    assert len(sets) < 500, f"{len(sets)} change sets: bursts are not coalesced"
    print(f"1000 files arrived in {len(sets)} change sets")


@pytest.mark.timeout(120)
def test_hostile_entries_while_watching(watch: Any, lockdir: Path) -> None:
    w, rec = watch([WatchSpec(str(lockdir), recursive=True)])
    expected = make_hostile(lockdir)
    paths = {str(lockdir / n) for n in expected}
    rec.until(lambda m: paths <= set(m) and all(m[x].state is State.UNREADABLE for x in paths),
              what="hostile entries")
    for name, words in expected.items():
        st = rec.model[str(lockdir / name)]
        assert words in render_all(st.reasons), (name, st.reasons)
    # a file deleted between its event and its read never shows up: published by link()
    # (IN_CREATE only, so its read waits for the debounce) and deleted at once (a file closed
    # after writing is read in the same round: docs/watching.md, "Latency")
    staged = lockdir.parent / f"{lockdir.name}-gone.tmp"
    write(staged, sema_text(os.getpid()))
    os.link(staged, lockdir / "gone.lock")
    os.unlink(lockdir / "gone.lock")
    os.unlink(staged)
    write(lockdir / "sentinel.lock", sema_text(os.getpid()))
    sentinel = str(lockdir / "sentinel.lock")
    sets = rec.until(lambda m: sentinel in m, what="sentinel")
    assert str(lockdir / "gone.lock") not in rec.model
    assert not [s for cs in sets for s in cs.added if s.path.endswith("gone.lock")]
    assert not [p for p in rec.model if "loopdir" in p]
    assert w._thread is not None and w._thread.is_alive()


# watchdog itself warns when `mkdir -p` races its recursive registration (it copes)
@pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
def test_own_name_filter_recursive(watch: Any, lockdir: Path) -> None:
    """Patterns apply to base names at any depth (watchdog 7 would match absolute paths)."""
    _w, rec = watch([WatchSpec(str(lockdir), recursive=True)])
    deep = lockdir / "sub" / "deep"
    deep.mkdir(parents=True)
    write(deep / "x.lock", sema_text(os.getpid()))
    (lockdir / "a.lock").mkdir()
    write(lockdir / "a.lock" / "inner.txt", "not a lock")
    write(lockdir / "sub" / "x.txt", "not a lock")
    write(lockdir / "sub" / "daemon.pid", f"{os.getpid()}\n")
    want = {str(deep / "x.lock"), str(lockdir / "a.lock"), str(lockdir / "sub" / "daemon.pid")}
    rec.until(lambda m: want <= set(m), what="nested locks")
    assert set(rec.model) == want
    assert rec.model[str(lockdir / "a.lock")].state is State.UNREADABLE
    shutil.rmtree(lockdir / "sub")
    rec.until(lambda m: set(m) == {str(lockdir / "a.lock")}, what="subtree removed")


# -- directories ----------------------------------------------------------------------------


@pytest.mark.slow
def test_missing_directory_appears_and_is_recreated(watch: Any, tmp_path: Path) -> None:
    d = tmp_path / "later"
    w, rec = watch([WatchSpec(str(d))])
    assert w.dir_status() == [DirStatus(str(d), "missing", w.dir_status()[0].message)]
    rec.until_dirs(lambda ds: bool(ds) and ds[0].mode == "missing")
    d.mkdir()
    write(d / "a.lock", sema_text(os.getpid()))
    rec.until(lambda m: str(d / "a.lock") in m, what="lock in new directory")
    rec.until_dirs(lambda ds: ds[0].mode == "events")
    shutil.rmtree(d)
    rec.until(lambda m: not m, what="directory deleted")
    rec.until_dirs(lambda ds: ds[0].mode == "missing")
    d.mkdir()
    write(d / "b.lock", sema_text(os.getpid()))
    rec.until(lambda m: str(d / "b.lock") in m, what="lock in re-created directory")
    write(d / "c.lock", sema_text(os.getpid()))  # and events work again
    rec.until(lambda m: str(d / "c.lock") in m, what="event in re-created directory")


@pytest.mark.slow
def test_directory_recreated_at_once(watch: Any, tmp_path: Path) -> None:
    """Deleted and re-created before the watcher looks (often with the same inode number):
    the dead watch is replaced all the same."""
    d = tmp_path / "quick"
    d.mkdir()
    write(d / "a.lock", sema_text(os.getpid()))
    _w, rec = watch([WatchSpec(str(d))])
    for i in range(3):
        shutil.rmtree(d)
        d.mkdir()
        write(d / f"b{i}.lock", sema_text(os.getpid()))
        rec.until(lambda m, i=i: set(m) == {str(d / f"b{i}.lock")}, what=f"round {i}")
        write(d / f"c{i}.lock", sema_text(os.getpid()))  # events still arrive
        rec.until(lambda m, i=i: str(d / f"c{i}.lock") in m, what=f"event in round {i}")


@pytest.mark.slow
def test_polling_on(watch: Any, lockdir: Path) -> None:
    w, rec = watch([WatchSpec(str(lockdir), polling="on")])
    [ds] = w.dir_status()
    assert ds.mode == "polling" and "polling" in ds.message
    write(lockdir / "p.lock", sema_text(os.getpid()))
    rec.until(lambda m: str(lockdir / "p.lock") in m, what="polled create")
    os.unlink(lockdir / "p.lock")
    rec.until(lambda m: not m, what="polled delete")


def test_network_filesystems_detected() -> None:
    Part = namedtuple("Part", "device mountpoint fstype opts")
    parts = [
        Part("/dev/vda", "/", "ext4", "rw"),
        Part("srv:/export", "/mnt/nfs", "nfs4", "rw"),
        Part("me@host:", "/mnt/nfs/ssh", "fuse.sshfs", "rw"),
        Part("//srv/share", "/media/smb", "cifs", "rw"),
        Part("tag", "/mnt/p9", "9p", "rw"),
        Part("tmpfs", "/mnt/nfs-local", "tmpfs", "rw"),
    ]
    def fstype(path: str) -> str | None:
        fs = filesystem_of(path, parts)
        return fs.fstype if fs is not None else None

    assert fstype("/mnt/nfs/a/b") == "nfs4"
    assert fstype("/mnt/nfs/ssh/x") == "fuse.sshfs"  # the longest prefix wins
    assert fstype("/mnt/nfs-local/x") == "tmpfs"  # a prefix of the name is not a parent
    assert fstype("/home/me") == "ext4"
    for path, net in [("/mnt/nfs/x", True), ("/mnt/nfs/ssh/x", True), ("/media/smb/x", True),
                      ("/mnt/p9/x", True), ("/mnt/nfs-local/x", False), ("/var/x", False)]:
        assert is_network_fs(filesystem_of(path, parts)) is net, path
    drive = [Part("Z:\\", "Z:\\", "NTFS", "rw,remote")]
    assert is_network_fs(filesystem_of("Z:\\locks", drive)) is (os.sep == "\\")
    assert filesystem_of("/", []) is None


INOTIFY_EXHAUSTED = """
import ctypes, json, os, queue, sys
from core.watch.watcher import Watcher
from core.config import WatchSpec
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 4096:
    fd = libc.inotify_init()
    if fd < 0:
        break
    fds.append(fd)
q = queue.Queue()
w = Watcher([WatchSpec(sys.argv[1])], q.put)
w.start()
[ds] = w.dir_status()
print(json.dumps({"mode": ds.mode, "message": ds.message}), flush=True)
sys.stdin.readline()
cs = q.get(timeout=30)
print(json.dumps({"added": [s.path for s in cs.added]}), flush=True)
w.close()
"""


@pytest.mark.slow
def test_inotify_instances_exhausted_falls_back_to_polling(shared_tmp: Path) -> None:
    """As user nobody (so only that user's 128 inotify instances are used up), the watcher
    cannot get an inotify instance and polls instead, and says so."""
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux-only")
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to use up an unprivileged user's inotify instances")
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.Popen(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
         INOTIFY_EXHAUSTED, str(shared_tmp)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env, cwd=str(ROOT))
    try:
        assert proc.stdout is not None and proc.stdin is not None
        first = json.loads(proc.stdout.readline() or "{}")
        assert first.get("mode") == "polling", first
        assert "inotify" in first["message"] and "polling" in first["message"]
        write(shared_tmp / "n.lock", sema_text(os.getpid()))
        proc.stdin.write("go\n")
        proc.stdin.flush()
        second = json.loads(proc.stdout.readline() or "{}")
        assert second.get("added") == [str(shared_tmp / "n.lock")]
        proc.wait(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert proc.returncode == 0


def test_unreadable_directory_is_an_error(shared_tmp: Path) -> None:
    locked = shared_tmp / "locked"
    locked.mkdir()
    locked.chmod(0o700)  # root's: nobody cannot list it
    code = (
        "import json\n"
        "from core.watch.watcher import Watcher\n"
        "from core.config import WatchSpec\n"
        f"w = Watcher([WatchSpec({str(locked)!r}), WatchSpec({str(shared_tmp)!r}, "
        "recursive=True)], print)\n"
        "w.start()\n"
        "print(json.dumps([(d.mode, d.message) for d in w.dir_status()]))\n"
        "w.close()\n"
    )
    proc = run_unprivileged(code)
    assert proc.returncode == 0, proc.stderr
    [(mode, message), (mode2, message2)] = json.loads(proc.stdout)
    assert mode == "error" and "permission denied" in message.lower()
    # a recursive watch above it works, and says what it cannot see
    assert mode2 == "events" and str(locked) in message2 and "cannot be listed" in message2


# -- af proofs -----------------------------------------------------------------------------


def put_event(ledger: Path, name: str, event: dict[str, Any]) -> None:
    tmp = ledger / f".{name}.tmp"
    write(tmp, json.dumps(event))
    os.replace(tmp, ledger / name)  # af's atomic write pattern (spec 003 §4)


def test_af_proof_directory(watch: Any, fixtures_dir: Path) -> None:
    proof = fixtures_dir / "af" / "proof"
    ledger = proof / "ledger"
    _w, rec = watch([WatchSpec(str(proof))])
    c = str(ledger) + "#"
    assert {c + "1.1", c + "1.2", str(ledger / "ledger.lock"),
            str(proof / "locks" / "1.2.3.lock")} == set(rec.model)
    assert rec.model[c + "1.1"].state is State.EXPIRED and rec.model[c + "1.1"].read_only

    ts = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    put_event(ledger, "000006.json", {"type": "nodes_released", "timestamp": ts,
                                      "node_ids": ["1.1"]})
    rec.until(lambda m: c + "1.1" not in m, what="released claim")

    until = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    put_event(ledger, "event-000007.json", {"type": "lock_acquired", "timestamp": ts,
                                            "node_id": "2.1", "owner": "agent-9",
                                            "expires_at": until})
    rec.until(lambda m: c + "2.1" in m, what="new claim")
    st = rec.model[c + "2.1"]
    assert st.state is State.HELD and st.read_only and st.record.holder == "agent-9"

    # the same claim as a lock file: shown once, as the file
    claim = {"node_id": "2.1", "owner": "agent-9", "acquired_at": ts, "expires_at": until}
    write(proof / "locks" / "2.1.lock", json.dumps(claim))
    rec.until(lambda m: str(proof / "locks" / "2.1.lock") in m and c + "2.1" not in m,
              what="claim file replaces ledger claim")

    os.unlink(ledger / "ledger.lock")
    rec.until(lambda m: str(ledger / "ledger.lock") not in m, what="ledger lock released")


# -- settings, rescans, closing ---------------------------------------------------------------


def test_set_specs_without_restart(watch: Any, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    write(a / "1.lock", sema_text(os.getpid()))
    age = age_after_boot(60)  # older would predate this host's boot: stale under any policy
    write(b / "2.lock", sema_text(999_999_999 % 4_000_000 + 4_000_000,
                                  timestamp=time.time() - age + 1))
    w, rec = watch([WatchSpec(str(a))])
    assert set(rec.model) == {str(a / "1.lock")}
    w.set_specs([WatchSpec(str(a)), WatchSpec(str(b))])
    rec.until(lambda m: str(b / "2.lock") in m, what="second directory")
    assert rec.model[str(b / "2.lock")].state is State.HELD  # dead pid, but only 60 s old
    w.set_specs([WatchSpec(str(b), stale_after=age / 2)])
    rec.until(lambda m: str(a / "1.lock") not in m
              and m[str(b / "2.lock")].state is State.STALE, what="new policy")
    assert [d.path for d in w.dir_status()] == [str(b)]
    write(a / "3.lock", sema_text(os.getpid()))  # no longer watched
    write(b / "4.lock", sema_text(os.getpid()))
    rec.until(lambda m: str(b / "4.lock") in m, what="still watching b")
    assert str(a / "3.lock") not in rec.model


def test_rescan_heals_missed_events(watch: Any, lockdir: Path) -> None:
    w, rec = watch([WatchSpec(str(lockdir))], rescan_interval=0.5)
    d = w._dirs[0]
    for obs, watch_ in list(d.watches.values()):  # lose every event from now on
        obs.unschedule(watch_)
    d.watches.clear()
    write(lockdir / "missed.lock", sema_text(os.getpid()))
    rec.until(lambda m: str(lockdir / "missed.lock") in m, what="periodic rescan")
    os.unlink(lockdir / "missed.lock")
    w.rescan()  # an explicit rescan waits until done
    rec.until(lambda m: not m, timeout=5, what="explicit rescan")


def test_close_stops_everything(lockdir: Path, tmp_path: Path) -> None:
    rec = Recorder()
    w = Watcher([WatchSpec(str(lockdir)), WatchSpec(str(tmp_path / "x"), polling="on"),
                 WatchSpec(str(tmp_path), polling="on")], rec.on_change)
    w.start()
    tree = w._directories.sources.tree_obs  # plain directories' inotify reader (Linux)
    threads = [w._thread] + [o for o in (w._events_obs, w._poll_obs) if o is not None] + (
        [tree._thread] if tree is not None else [])
    assert len(threads) == 3
    t0 = time.monotonic()
    w.close()
    took = time.monotonic() - t0
    for t in threads:
        assert t is not None
        t.join(WAIT)
        assert not t.is_alive(), t
    w.close()  # idempotent
    with pytest.raises(RuntimeError):
        w.start()
    print(f"close() took {took * 1000:.0f} ms")


def test_snapshot_is_thread_safe_during_changes(watch: Any, lockdir: Path) -> None:
    w, rec = watch([WatchSpec(str(lockdir))])
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                snap = w.snapshot()
                assert snap == sorted(snap, key=lambda s: s.path)
                w.dir_status()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=reader)
    t.start()
    names = {str(lockdir / f"s{i}.lock") for i in range(200)}
    for n in names:
        write(Path(n), sema_text(os.getpid()))
    rec.until(lambda m: names <= set(m), what="200 files")
    stop.set()
    t.join(WAIT)
    assert not errors
    assert {s.path for s in w.snapshot()} == names


def test_refresh_reports_a_lock_shorter_lived_than_the_debounce(watch: Any, lockdir: Path) -> None:
    # the GUI calls refresh() right after its own action: the watcher must report both the
    # lock's arrival and its removal, even when both happen inside one debounce window
    w, rec = watch([WatchSpec(str(lockdir))])
    p = lockdir / "brief.lock"
    assert w.covers(str(p)) and not w.covers("/elsewhere/x.lock")
    write(p, sema_text(os.getpid()))
    assert w.refresh([str(p)])
    rec.until(lambda m: str(p) in m, what="added after refresh")
    p.unlink()
    w.refresh([str(p)])
    rec.until(lambda m: str(p) not in m, what="removed after refresh")
    outside = lockdir.parent / "outside.lock"
    write(outside, sema_text(os.getpid()))
    w.refresh([str(outside)])  # not watched: ignored
    with pytest.raises(queue.Empty):
        rec.q.get(timeout=0.3)
    assert str(outside) not in rec.model
