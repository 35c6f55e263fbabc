"""A log in a shared directory that another user controls (core.audit.write, core.audit.heads).

* An append reads at most 64 KiB from the end of a log to find the line it chains onto: a 20 GB
  sparse log costs it one bounded read (counted with the kernel's own ``rchar`` counter of
  this process), never a hang.
* A log owned by another user is never appended to, even when its mode lets us: the entry goes
  to our own per-user log, and nothing of the shared log is read.
* A user's chain head (kept in their own state directory) lets ``verify`` catch a shared log
  that someone else rewrote with a fresh valid chain, cut short or replaced: what the chain
  alone cannot show. The second user is a real account (``lwtest2``, created with useradd)
  running a real process; those tests need root and skip otherwise.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core import audit
from core.fsutil import AUDIT_LOG_NAME
from tests.support.second_user import (
    USER2,
    second_user,
    second_user_python,
    site_for_second_user,
)

GB = 1024**3
WINDOW = 64 * 1024


pytestmark = pytest.mark.usefixtures("private_state")  # HOME and XDG dirs in tmp_path


def _rchar() -> int:
    """Bytes this process has read through read()/pread() so far (Linux /proc/self/io)."""
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


needs_proc_io = pytest.mark.skipif(
    not os.path.exists("/proc/self/io"), reason="needs Linux /proc/self/io to count bytes read"
)


def _sparse(path: Path, size: int, tail: bytes = b"") -> None:
    """A file of ``size`` bytes: a hole (zeros, no disk blocks) and then ``tail``."""
    with open(path, "wb") as f:
        f.truncate(size - len(tail))
        f.seek(size - len(tail))
        f.write(tail)


def _appended(lock: Path) -> tuple[audit.AuditWrite, int, float]:
    """Append once; the result, the bytes read meanwhile and the seconds it took."""
    before, t0 = _rchar(), time.perf_counter()
    w = audit.append(str(lock), "acquire", details={"k": 1})
    return w, _rchar() - before, time.perf_counter() - t0


# ------------------------------------------------------------------ bounded tail read


@needs_proc_io
@pytest.mark.timeout(60)
def test_20gb_sparse_log_without_newline_is_refused_after_one_64k_read(lockdir: Path) -> None:
    log = lockdir / AUDIT_LOG_NAME
    _sparse(log, 20 * GB)
    audit.append(str(lockdir / "warm.lock"), "acquire")  # imports and caches out of the count
    w, read_bytes, took = _appended(lockdir / "a.lock")
    assert w.fallback and w.error is None and w.log_path == audit.fallback_log_path()
    assert w.reason is not None and "64 KiB" in w.reason
    assert read_bytes <= WINDOW + 16 * 1024, read_bytes
    assert took < 1.0
    assert os.path.getsize(log) == 20 * GB  # not written to


@needs_proc_io
@pytest.mark.timeout(60)
def test_20gb_sparse_log_ending_in_an_entry_is_chained_after_one_64k_read(lockdir: Path) -> None:
    log = lockdir / AUDIT_LOG_NAME
    last = b'{"timestamp":"2026-01-01T00:00:00.000Z","operation":"acquire","lockPath":"/x",' \
           b'"details":{},"user":"alice","pid":7}'  # fmt: skip
    _sparse(log, 20 * GB, b"\n" + last + b"\n")
    audit.append(str(lockdir / "warm.lock"), "acquire", details={"warm": 1})
    size = os.path.getsize(log)
    w, read_bytes, took = _appended(lockdir / "a.lock")
    assert w.fallback is False and w.log_path == str(log)
    assert read_bytes <= WINDOW + 16 * 1024, read_bytes
    assert took < 1.0
    with open(log, "rb") as f:
        f.seek(size)
        ours = json.loads(f.read())
    with open(log, "rb") as f:  # the warm-up entry chained onto Task MCP's line, ours onto it
        f.seek(20 * GB - len(last) - 1)
        warm = f.read(size - (20 * GB - len(last) - 1)).split(b"\n")[1]
    assert json.loads(warm)["prev"] == hashlib.sha256(last).hexdigest()
    assert ours["prev"] == hashlib.sha256(warm).hexdigest()
    assert [e.operation for e in audit.tail(str(log), 2)] == ["acquire", "acquire"]


# ------------------------------------------------------------------ another user's log


@pytest.fixture
def world_tmp() -> Iterator[Path]:
    """A directory under the system tmp dir that the second user can traverse (pytest's
    tmp_path is under root's 0700 directory); removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix="lockwarden-shared-"))
    try:
        d.chmod(0o755)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@needs_proc_io
@pytest.mark.timeout(60)
def test_another_users_20gb_log_is_neither_read_nor_written(world_tmp: Path) -> None:
    uid, gid = second_user()
    shared = world_tmp / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    log = shared / AUDIT_LOG_NAME
    _sparse(log, 20 * GB, b"\n")
    os.chown(log, uid, gid)
    log.chmod(0o666)  # its mode would let anyone append: the owner check must still refuse
    before = os.stat(log)
    audit.append(str(world_tmp / "warm.lock"), "acquire")
    w, read_bytes, took = _appended(shared / "job.lock")
    assert w.fallback and w.error is None and w.log_path == audit.fallback_log_path()
    assert w.reason is not None and "another user" in w.reason and USER2 in w.reason
    assert read_bytes < WINDOW, read_bytes  # the owner check comes before any read
    assert took < 1.0
    after = os.stat(log)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size, before.st_mtime_ns, before.st_ino)  # fmt: skip
    (e,) = audit.read(w.log_path)
    assert e.lock_path == str(shared / "job.lock") and e.details == {"k": 1}


AS_USER2 = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from core import audit
cmd, path = sys.argv[2], sys.argv[3]
if cmd == "append":
    out = []
    for i in range(int(sys.argv[4])):
        w = audit.append(path, "acquire" if i % 2 == 0 else "release", details={"i": i})
        out.append([w.log_path, w.fallback, w.reason, w.error])
else:
    v = audit.verify(path)
    out = {"ok": v.ok, "bad_line": v.bad_line, "reason": v.reason, "missing": v.missing,
           "head_checked": v.head_checked, "entries": v.entries}
print(json.dumps(out))
"""


class User2:
    """Runs ``core.audit`` as the second account, from a world-readable copy of the code, with
    its own HOME (so its own per-user log and chain heads)."""

    def __init__(self, base: Path, uid: int, gid: int) -> None:
        self.uid, self.gid = uid, gid
        self.site = site_for_second_user(base, ["platformdirs"])
        self.home = base / "home2"
        self.home.mkdir()
        os.chown(self.home, uid, gid)
        self.python = second_user_python(uid, gid)

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(self.home), "LANG": "C.UTF-8",
               "XDG_STATE_HOME": str(self.home / "state")}  # fmt: skip
        return subprocess.run(argv, user=self.uid, group=self.gid, extra_groups=[], env=env,
                              capture_output=True, text=True, timeout=60, cwd="/")  # fmt: skip

    def __call__(self, *args: str) -> Any:
        r = self._run([self.python, "-I", "-c", AS_USER2, str(self.site), *args])
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


def _rechain(lines: list[bytes]) -> list[bytes]:
    """The lines with every ``prev`` recomputed: a fresh, valid chain (what a forger writes)."""
    out: list[bytes] = []
    prev = audit.ZERO_HASH
    for line in lines:
        obj = json.loads(line)
        obj["prev"] = prev
        out.append(json.dumps(obj, separators=(",", ":")).encode())
        prev = hashlib.sha256(out[-1]).hexdigest()
    return out


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_second_user_detects_their_shared_log_rewritten_by_someone_else(world_tmp: Path) -> None:
    uid, gid = second_user()
    user2 = User2(world_tmp, uid, gid)
    shared = world_tmp / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    log = shared / AUDIT_LOG_NAME
    lock = str(shared / "job.lock")

    # the second user appends to the log in the shared directory: it is theirs
    wrote = user2("append", lock, "4")
    assert [w[:2] for w in wrote] == [[str(log), False]] * 4
    assert os.stat(log).st_uid == uid
    assert user2("verify", str(log))["ok"] is True
    original = log.read_bytes()

    # we (root, another user) never append to their log: our entry goes to our own log
    ours = audit.append(str(shared / "other.lock"), "acquire")
    assert ours.fallback and ours.log_path == audit.fallback_log_path()
    assert ours.reason is not None and f"another user ({USER2}" in ours.reason
    assert log.read_bytes() == original

    # someone rewrites it in place with a fresh, valid chain: the second entry edited
    lines = original.rstrip(b"\n").split(b"\n")
    edited = lines[1].replace(b'"details":{"i":1}', b'"details":{"i":7}')
    assert edited != lines[1]
    forged = b"".join(x + b"\n" for x in _rechain([lines[0], edited, *lines[2:]]))
    with open(log, "r+b") as f:
        f.truncate(0)
        f.write(forged)
    assert audit.verify(str(log)).ok  # the chain alone cannot tell (no head of ours here)
    v = user2("verify", str(log))
    assert v["ok"] is False and v["head_checked"] is True and v["bad_line"] == 4
    assert "differs from the entry you appended" in v["reason"] and "rewritten" in v["reason"]

    # rewritten with the second entry left out: shorter than their last entry's end
    dropped = b"".join(x + b"\n" for x in _rechain([lines[0], *lines[2:]]))
    log.write_bytes(dropped)
    assert audit.verify(str(log)).ok
    v = user2("verify", str(log))
    assert v["ok"] is False and v["bad_line"] == 4 and "truncated or rewritten" in v["reason"]

    # cut short: the last entry removed, the chain before it intact
    log.write_bytes(b"".join(x + b"\n" for x in lines[:3]))
    assert audit.verify(str(log)).ok
    v = user2("verify", str(log))
    assert v["ok"] is False and v["bad_line"] == 4 and "truncated" in v["reason"], v

    # replaced by another file with the very same bytes (a new inode)
    fresh = shared / "fresh"
    fresh.write_bytes(original)
    os.chown(fresh, uid, gid)
    os.replace(fresh, log)
    v = user2("verify", str(log))
    assert v["ok"] is False and v["bad_line"] == 1 and "replaced" in v["reason"], v

    # the log removed altogether
    log.unlink()
    v = user2("verify", str(log))
    assert v["missing"] is True and v["ok"] is False and "removed" in v["reason"], v

    # their next append starts a new log and a new head: verify is clean again
    assert [w[:2] for w in user2("append", lock, "1")] == [[str(log), False]]
    assert user2("verify", str(log))["ok"] is True
