"""core.audit.appender with real processes: the log kept open and the chain heads written in
batches keep every guarantee of docs/audit.md -- the chain verifies under concurrent writers,
after a SIGKILL at every step of an append and at random points, and a log rewritten or cut
short is detected (docs/audit.md, "Chain heads written in batches")."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core import audit
from core.audit import appender
from core.audit import heads as audit_heads
from core.fsutil import AUDIT_LOG_NAME
from tests.support.cli import cli_env

WRITER = r"""
import os, signal, sys
from core import audit
from core.audit import appender
lock, n, die_at, die_on = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
count = {"n": 0}

def hook(step):
    if step == "open":
        count["n"] += 1
    if step == die_at and count["n"] >= die_on:
        os.kill(os.getpid(), signal.SIGKILL)

appender.crash_hook = hook
print("ready", flush=True)
if sys.stdin.readline().strip() != "go":
    sys.exit(2)
for i in range(n):
    w = audit.append(lock, "acquire" if i % 2 == 0 else "release", details={"seq": i},
                     durable=(i % 7 == 6))
    if w.fallback or w.error:
        print("FAILED", w, flush=True)
        sys.exit(1)
    print(i, flush=True)
print("done", flush=True)
"""


pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("private_state"),  # chain heads: this test's and its processes'
]


def _writer(lock: Path, n: int, die_at: str = "", die_on: int = 0,
            ) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(lock), str(n), die_at, str(die_on)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=cli_env())
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def _go(p: subprocess.Popen[str]) -> None:
    assert p.stdin is not None
    p.stdin.write("go\n")
    p.stdin.flush()


def _run(lock: Path, n: int, die_at: str = "", die_on: int = 0) -> int:
    p = _writer(lock, n, die_at, die_on)
    _go(p)
    p.communicate(timeout=60)
    return p.returncode


def _verified(lockdir: Path, head: bool = True) -> audit.VerifyResult:
    res = audit.verify(str(lockdir))
    assert res.ok, res.reason
    assert res.head_checked == head and not res.torn_tail
    return res


def test_many_processes_then_the_head_is_the_last_line(lockdir: Path) -> None:
    """Six writers at once, 60 entries each (every 7th fsynced): every line once, the chain
    intact, and after they exit (each writes its held-back head unless a later one is
    recorded) the head is the log's last line."""
    procs = [_writer(lockdir / "shared.lock", 60) for _ in range(6)]
    for p in procs:
        _go(p)
    for p in procs:
        p.communicate(timeout=120)
    assert [p.returncode for p in procs] == [0] * 6
    log = lockdir / AUDIT_LOG_NAME
    assert _verified(lockdir).entries == 360
    head = audit_heads.load(str(log))
    assert head is not None and head.end == log.stat().st_size


@pytest.mark.timeout(300)
@pytest.mark.parametrize("step", ["open", "locked", "written", "synced", "head", "unlocked"])
def test_sigkill_at_every_step_leaves_a_verifiable_chain(
    lockdir: Path, step: str
) -> None:
    """A writer killed at ``step`` of an append (the first from the 1st, 7th -- fsynced --
    and 20th on): the log verifies, the head recorded still matches, the next writer chains
    on."""
    lock = lockdir / "a.lock"
    for die_on in (1, 7, 20):
        assert _run(lock, 30, step, die_on) == -signal.SIGKILL
        _verified(lockdir, head=audit_heads.load(str(lockdir / AUDIT_LOG_NAME)) is not None)
        assert _run(lock, 3) == 0  # the kernel dropped the dead writer's lock
        _verified(lockdir)


@pytest.mark.timeout(300)
def test_writers_killed_at_random_points(lockdir: Path) -> None:
    """Three writers at once, each SIGKILLed after it reported a different number of entries
    (the kill lands anywhere in the next append), eight rounds: the chain always verifies."""
    lock = lockdir / "r.lock"
    for rnd in range(8):
        procs = [_writer(lock, 200) for _ in range(3)]
        for p in procs:
            _go(p)
        for k, p in enumerate(procs):
            assert p.stdout is not None
            for _ in range(3 + 11 * k + rnd):
                assert p.stdout.readline().strip().isdigit()
            p.send_signal(signal.SIGKILL)
        for p in procs:
            p.communicate(timeout=60)
        _verified(lockdir)
    assert _run(lock, 2) == 0
    _verified(lockdir)


def test_a_cut_after_a_clean_exit_is_detected(lockdir: Path) -> None:
    """40 entries in a burst (heads held back), a normal exit (the held-back head written):
    cutting off only the last entry is reported."""
    assert _run(lockdir / "a.lock", 40) == 0
    log = lockdir / AUDIT_LOG_NAME
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:-1]))
    res = audit.verify(str(lockdir))
    assert not res.ok and res.reason is not None and "truncated or rewritten" in res.reason


def test_after_a_sigkill_the_head_lags_by_less_than_a_batch(
    lockdir: Path
) -> None:
    """Killed before its 40th append: the head recorded is one of the last HEAD_EVERY lines
    (what a crash may lose), and cutting the log before it is reported."""
    assert _run(lockdir / "a.lock", 60, "open", 40) == -signal.SIGKILL
    log = lockdir / AUDIT_LOG_NAME
    lines = log.read_bytes().splitlines(keepends=True)
    assert len(lines) == 39
    head = audit_heads.load(str(log))
    assert head is not None
    ends = [sum(len(x) for x in lines[: i + 1]) for i in range(len(lines))]
    assert head.end in ends[-appender.HEAD_EVERY:]
    log.write_bytes(b"".join(lines[: ends.index(head.end)]))  # the head's line and after cut
    res = audit.verify(str(lockdir))
    assert not res.ok and res.reason is not None and "truncated or rewritten" in res.reason


def test_a_log_rewritten_from_scratch_is_detected(lockdir: Path) -> None:
    """A fresh, valid chain in place of the log (another file): reported as replaced."""
    assert _run(lockdir / "a.lock", 20) == 0
    log = lockdir / AUDIT_LOG_NAME
    first = json.loads(log.read_bytes().splitlines()[0])
    log.rename(lockdir / "old.log")
    log.write_bytes(json.dumps(first, separators=(",", ":")).encode() + b"\n")
    res = audit.verify(str(lockdir))
    assert not res.ok and res.reason is not None and "replaced" in res.reason


ROTATED = r"""
import sys
from core import audit
lock = sys.argv[1]
for i in range(3):
    audit.append(lock, "refresh", details={"i": i})   # the last head held back
print("appended", flush=True)
sys.stdin.readline()   # the log is rotated meanwhile, another process writes the new one
"""


def test_a_held_back_head_never_overwrites_the_new_logs(lockdir: Path) -> None:
    """A process whose held-back head is for a log renamed away since (a rotation) exits after
    another process wrote the new log: the new log's head stays, and it verifies."""
    lock = lockdir / "a.lock"
    p = subprocess.Popen([sys.executable, "-c", ROTATED, str(lock)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=cli_env())
    assert p.stdout is not None and p.stdout.readline().strip() == "appended"
    log = lockdir / AUDIT_LOG_NAME
    log.rename(lockdir / "rotated.log")
    assert _run(lock, 2) == 0
    p.communicate("\n", timeout=60)
    assert p.returncode == 0
    head = audit_heads.load(str(log))
    assert head is not None and head.ino == log.stat().st_ino
    _verified(lockdir)


def test_close_logs_lets_go_of_the_file(lockdir: Path) -> None:
    """The process keeps its log open between appends; close_logs writes the head it held
    back and closes it (what the idle thread does after a second; before an unmount)."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc to see open descriptors")
    audit.append(str(lockdir / "a.lock"), "acquire")
    ino = (lockdir / AUDIT_LOG_NAME).stat().st_ino

    def open_on_log() -> int:
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                n += os.stat(f"/proc/self/fd/{fd}").st_ino == ino
            except OSError:
                pass
        return n

    assert open_on_log() == 1
    audit.append(str(lockdir / "a.lock"), "release")  # its head held back
    audit.close_logs()
    assert open_on_log() == 0
    head = audit_heads.load(str(lockdir / AUDIT_LOG_NAME))  # written on closing
    assert head is not None and head.end == (lockdir / AUDIT_LOG_NAME).stat().st_size
    audit.append(str(lockdir / "a.lock"), "release")  # opened again
    _verified(lockdir)


def test_a_replaced_log_gets_its_head_at_once(lockdir: Path) -> None:
    """Heads held back in a burst; the log removed; the next append (a new file) writes its
    head at once, so no other process's verify meanwhile takes the new log for a replacement
    of the one the head names -- nor accepts it silently later."""
    lock = str(lockdir / "a.lock")
    audit.append(lock, "acquire")
    audit.append(lock, "release")  # held back
    log = lockdir / AUDIT_LOG_NAME
    log.unlink()
    audit.append(lock, "acquire", details={"after": "the log was removed"})
    head = audit_heads.load(str(log))
    (line,) = log.read_bytes().splitlines()
    assert head is not None and head.digest == hashlib.sha256(line).hexdigest()
    assert (head.ino, head.end) == (log.stat().st_ino, log.stat().st_size)


FROZEN = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from core import audit
w = audit.append(sys.argv[2], "acquire")
print(json.dumps([w.log_path, w.fallback]), flush=True)
sys.stdin.readline()                      # the log is made read-only meanwhile
w = audit.append(sys.argv[2], "release")
print(json.dumps([w.log_path, w.fallback, w.reason]), flush=True)
"""


@pytest.mark.timeout(60)
def test_a_log_made_read_only_is_not_written_through_the_kept_descriptor(
    tmp_path: Path,
) -> None:
    """A log its owner froze (``chmod a-w``) while a process keeps it open: the next entry
    goes to the per-user log, as when the log had to be opened (root excepted, whom modes do
    not stop: run as the second account)."""
    import tempfile

    from tests.support.second_user import second_user, second_user_python, site_for_second_user

    uid, gid = second_user()
    base = Path(tempfile.mkdtemp(prefix="lockwarden-frozen-"))
    try:
        base.chmod(0o755)
        site = site_for_second_user(base, ["platformdirs"])
        python = second_user_python(uid, gid)
        locks, home = base / "locks", base / "home"
        for d in (locks, home):
            d.mkdir()
            os.chown(d, uid, gid)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
               "XDG_STATE_HOME": str(home / "state")}  # fmt: skip
        p = subprocess.Popen([python, "-I", "-c", FROZEN, str(site), str(locks / "a.lock")],
                             user=uid, group=gid, extra_groups=[], env=env, cwd="/",
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert p.stdout is not None
        first = json.loads(p.stdout.readline())
        log = locks / AUDIT_LOG_NAME
        assert first == [str(log), False]
        size = log.stat().st_size
        log.chmod(0o444)
        out, _ = p.communicate("\n", timeout=60)
        second = json.loads(out)
        assert second[1] is True and "ermission denied" in second[2], second
        assert log.stat().st_size == size
    finally:
        import shutil

        shutil.rmtree(base, ignore_errors=True)


CYCLER = r"""
import sys
from core.engine.lock import Lock
lk = Lock(sys.argv[1], tag="cycler")
print("ready", flush=True)
sys.stdin.readline()
for i in range(100000):
    lk.acquire(timeout=30)
    lk.release()
    print(i, flush=True)
"""


@pytest.mark.timeout(300)
def test_lock_cycles_killed_at_random_points(lockdir: Path) -> None:
    """Three processes taking and giving back locks in one directory (two on the same lock),
    SIGKILLed after different numbers of cycles (anywhere in the next acquire, release or
    audit append), six rounds: the directory's audit chain always verifies, and a lock a
    killed process held is then reclaimed (its ``reclaim`` entry chained on like any)."""
    from core.engine.lock import Lock

    for rnd in range(6):
        procs = []
        for k in range(3):
            lock = lockdir / ("shared.lock" if k < 2 else f"own{rnd}.lock")
            p = subprocess.Popen([sys.executable, "-c", CYCLER, str(lock)], env=cli_env(),
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
            procs.append(p)
        for p in procs:
            _go(p)
        for k, p in enumerate(procs):
            assert p.stdout is not None
            for _ in range(2 + 5 * k + rnd):
                assert p.stdout.readline().strip().isdigit()
            p.send_signal(signal.SIGKILL)
        for p in procs:
            p.communicate(timeout=60)
        _verified(lockdir)
    for lock in sorted(lockdir.glob("*.lock")):  # a lock left by a killed holder: stale
        Lock(lock, tag="after").acquire(blocking=False).release()
    _verified(lockdir)


@pytest.mark.timeout(120)
def test_a_forked_child_never_shares_the_parents_descriptor(
    lockdir: Path
) -> None:
    """The parent keeps its log open; a child made by fork (multiprocessing's default on
    Linux) appends at the same time as the parent: it opens its own description (a shared one
    would share the parent's flock, and the two would chain onto the same line)."""
    if not hasattr(os, "fork"):
        pytest.skip("needs fork")
    lock = str(lockdir / "f.lock")
    audit.append(lock, "acquire")  # the parent's descriptor is open now
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: wait for the go, append, leave without cleanup
        code = 1
        try:
            os.close(w)
            os.read(r, 1)
            for i in range(150):
                if audit.append(lock, "refresh", details={"child": i}).fallback:
                    raise SystemExit
            code = 0
        finally:
            os._exit(code)
    os.close(r)
    os.write(w, b"g")
    for i in range(150):
        assert not audit.append(lock, "refresh", details={"parent": i}).fallback
    os.close(w)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    res = _verified(lockdir)
    assert res.entries == 301


def test_threads_take_turns_on_the_kept_descriptor(lockdir: Path) -> None:
    """Eight threads append through the process's one descriptor of the log, switching as
    often as the interpreter allows: the per-log mutex keeps each append whole (a flock on a
    shared description excludes nobody), so the chain holds."""
    import threading

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        lock = str(lockdir / "t.lock")
        audit.append(lock, "acquire")
        barrier = threading.Barrier(8)
        failed: list[str] = []

        def work(k: int) -> None:
            barrier.wait()
            for i in range(150):
                if audit.append(lock, "refresh", details={"t": k, "i": i}).fallback:
                    failed.append(f"{k}/{i}")

        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        sys.setswitchinterval(old)
    assert not failed
    assert _verified(lockdir).entries == 1201
