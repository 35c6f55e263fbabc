"""``lockwarden who`` and core.kernel.usage: every process using a file or folder, with real
processes (a writer, a reader, flock, POSIX and OFD lock holders, an mmap, a working directory
inside a folder), a second real account, and processes exiting during the scan (docs/cli.md,
"who")."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.kernel.usage import who_uses
from tests.support.cli import ENV, LW

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

HOLDER = textwrap.dedent("""
    import fcntl, mmap, os, sys
    kind, path = sys.argv[1], sys.argv[2]
    if kind == "reader":
        f = open(path, "rb")
    elif kind == "writer":
        f = open(path, "ab")
    elif kind == "flock":
        f = open(path, "ab"); fcntl.flock(f, fcntl.LOCK_EX)
    elif kind == "posix":
        f = open(path, "ab"); fcntl.lockf(f, fcntl.LOCK_EX)
    elif kind == "ofd":
        f = open(path, "r+b")
        lk = __import__("struct").pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0)
        fcntl.fcntl(f, fcntl.F_OFD_SETLK, lk)
    elif kind == "mmap":
        f = open(path, "rb"); m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ); f.close()
    elif kind == "cwd":
        os.chdir(path)
    print("ready", flush=True)
    sys.stdin.read()
""")


@pytest.fixture
def start(tmp_path: Path) -> Iterator[object]:
    """Start a holder of one kind on a path; every holder is ended after the test."""
    procs: list[subprocess.Popen[str]] = []

    def run(kind: str, path: Path, **kw: object) -> subprocess.Popen[str]:
        p = subprocess.Popen([kw.pop("python", sys.executable), "-c", HOLDER, kind, str(path)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             **kw)  # type: ignore[call-overload]
        procs.append(p)
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        return p

    yield run
    for p in procs:
        p.kill()
        p.wait()


@pytest.mark.parametrize(("kind", "how"), [
    ("reader", ["read"]), ("writer", ["write"]), ("flock", ["write", "flock"]),
    ("posix", ["write", "posix"]), ("ofd", ["read/write", "ofd"]),
    ("mmap", ["read", "mmap"]),  # Python's mmap keeps a duplicate of the descriptor
])
def test_each_way_of_using_a_file_is_named(tmp_path: Path, start, kind: str,
                                          how: list[str]) -> None:
    f = tmp_path / "data.bin"
    f.write_bytes(b"x" * 4096)
    p = start(kind, f)
    report = who_uses([str(f)])
    assert list(report.uses) == [p.pid]
    use = report.uses[p.pid]
    assert use.how == how
    assert use.files == [str(f)]
    assert (use.name.startswith("python") and use.user == "root") or use.user is not None
    assert use.started is not None and use.cmdline[:2] == (sys.executable, "-c")


@pytest.mark.slow
def test_a_folder_counts_everything_beneath_it_and_a_working_directory(tmp_path: Path,
                                                                       start) -> None:
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    (sub / "f.txt").write_text("hi")
    reader = start("reader", sub / "f.txt")
    sitter = start("cwd", sub)
    report = who_uses([str(tmp_path)])
    assert set(report.uses) == {reader.pid, sitter.pid}
    assert report.uses[sitter.pid].how == ["cwd"]
    assert report.uses[reader.pid].files == [str(sub / "f.txt")]
    assert who_uses([str(tmp_path / "a" / "b" / "f.txt")]).uses.keys() == {reader.pid}


def test_the_command_line_exit_codes_and_json(tmp_path: Path, start) -> None:
    f = tmp_path / "free.txt"
    f.write_text("")
    out = subprocess.run([*LW, "who", str(f)], capture_output=True, text=True, env=ENV,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("nothing uses ")
    p = start("flock", f)
    out = subprocess.run([*LW, "who", str(f), "--json"], capture_output=True, text=True,
                         env=ENV, timeout=60, check=False)
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    [proc] = doc["processes"]
    assert proc["pid"] == p.pid and proc["how"] == ["write", "flock"]
    assert doc["uninspected"] == 0
    text = subprocess.run([*LW, "who", str(f)], capture_output=True, text=True, env=ENV,
                          timeout=60, check=False)
    assert text.returncode == 1
    assert text.stdout.splitlines()[0].split() == ["PID", "USER", "NAME", "HOW", "SINCE",
                                                   "COMMAND"]
    assert str(p.pid) in text.stdout.splitlines()[1]
    gone = subprocess.run([*LW, "who", str(tmp_path / "missing")], capture_output=True,
                          text=True, env=ENV, timeout=60, check=False)
    assert gone.returncode == 3 and "No such file" in gone.stderr


def test_another_users_process_is_shown_as_that_user_to_root_and_counted_for_them(
        start, request: pytest.FixtureRequest) -> None:
    from tests.support.second_user import (
        USER2,
        second_user,
        second_user_python,
        site_for_second_user,
    )

    uid, gid = second_user()
    python = second_user_python(uid, gid)
    shared = Path(tempfile.mkdtemp(prefix="lw-who-", dir="/tmp"))  # reachable by both
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    shared.chmod(0o777)
    f = shared / "theirs.txt"
    f.write_text("x")
    f.chmod(0o666)
    theirs = start("reader", f, python=python, user=uid, group=gid, extra_groups=[], cwd="/")
    report = who_uses([str(f)])  # as root: shown, as that user
    assert report.uses[theirs.pid].user == USER2
    mine = start("reader", f)
    site = site_for_second_user(shared, ["psutil"])
    probe = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
             "from core.kernel.usage import who_uses; r = who_uses([sys.argv[2]]); "
             "print(json.dumps([sorted(r.uses), len(r.uninspected), "
             "sorted({u or '?' for u in r.uninspected.values()})]))")
    out = subprocess.run([python, "-I", "-c", probe, str(site), str(f)], user=uid, group=gid,
                         extra_groups=[], capture_output=True, text=True, timeout=120,
                         cwd="/", check=False)
    assert out.returncode == 0, out.stderr
    pids, uninspected, users = json.loads(out.stdout)
    assert theirs.pid in pids and mine.pid not in pids  # root's process is not readable...
    assert uninspected >= 1 and "root" in users  # ...and so it is counted, never missing


@pytest.mark.slow
def test_processes_exiting_during_the_scan_are_left_out_without_error(tmp_path: Path) -> None:
    f = tmp_path / "busy.txt"
    f.write_text("x")
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            subprocess.run([sys.executable, "-c", f"open({str(f)!r}).read()"], check=False)

    threads = [threading.Thread(target=churn) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(20):
            report = who_uses([str(f)])
            assert all(u.name for u in report.uses.values())  # described, or left out
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert os.getpid() not in who_uses([str(f)]).uses
