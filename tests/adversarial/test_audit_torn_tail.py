"""An append cut short (disk full, file size limit, crash) leaves a torn last line: ``verify``
reports it as an interrupted write, not as tampering, and the next append terminates it and
records a ``repair`` entry that chains through it (core.audit.write, core.audit.verify).

The tears here are real: a child process whose file size limit (RLIMIT_FSIZE) stops the kernel
mid-write, and, as root, a real full file system (a 64 KiB tmpfs).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from core import audit
from core.fsutil import AUDIT_LOG_NAME

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("private_state")  # HOME and XDG dirs in tmp_path


def _fill(d: Path, n: int) -> Path:
    for i in range(n):
        assert audit.append(str(d / "a.lock"), "acquire", details={"i": i}).fallback is False
    return d / AUDIT_LOG_NAME


def _check_torn_then_repair(log: Path, torn_at: int) -> None:
    """The log ends in a torn line starting at byte ``torn_at``: verify says so, and the next
    append repairs it and is itself clean."""
    data = log.read_bytes()
    assert not data.endswith(b"\n")
    torn = data[torn_at:]
    before = data[:torn_at].rstrip(b"\n").rsplit(b"\n", 1)[-1]
    res = audit.verify(str(log))
    assert (res.ok, res.torn_tail, res.bad_line) == (True, True, None)
    assert res.reason is not None and "interrupted write" in res.reason
    n = res.entries
    assert res.reason.startswith(f"line {n}: ")

    w = audit.append(str(log.parent / "a.lock"), "release")
    assert (w.fallback, w.repaired, w.log_path) == (False, True, str(log))
    after = audit.read(str(log))
    assert after[n - 1].error is not None and after[n - 1].offset == torn_at  # kept, terminated
    rep, ours = after[n], after[n + 1]
    assert rep.operation == "repair" and rep.lock_path == str(log) and rep.via == "api"
    assert rep.prev == hashlib.sha256(torn).hexdigest()
    assert rep.details["torn"] == {"offset": torn_at, "bytes": len(torn),
                                   "digest": hashlib.sha256(torn).hexdigest()}  # fmt: skip
    assert rep.details["before"] == hashlib.sha256(before).hexdigest()
    assert ours.operation == "release" and ours.prev == rep.digest
    res = audit.verify(str(log))
    assert (res.ok, res.torn_tail, res.repaired, res.entries) == (True, False, 1, n + 2)
    assert audit.append(str(log.parent / "a.lock"), "acquire").repaired is False


CUT_SHORT = r"""
import json, resource, sys
from core import audit
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # Python ignores SIGXFSZ: EFBIG
w = audit.append(sys.argv[1], "acquire", details={"pad": "x" * 300})
print(json.dumps([w.log_path, w.fallback, w.reason, w.error]))
"""


@pytest.mark.skipif(os.name != "posix", reason="RLIMIT_FSIZE is POSIX")
@pytest.mark.timeout(60)
def test_append_cut_short_by_the_file_size_limit_is_an_interrupted_write(
    lockdir: Path, tmp_path: Path
) -> None:
    log = _fill(lockdir, 4)
    size = os.path.getsize(log)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_STATE_HOME": str(tmp_path / "state2")}
    r = subprocess.run([sys.executable, "-c", CUT_SHORT, str(lockdir / "a.lock"), str(size + 40)],
                       capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert r.returncode == 0, r.stderr
    path, fallback, reason, error = json.loads(r.stdout)
    assert fallback is True and error is None and path.startswith(str(tmp_path / "state2"))
    assert reason is not None and "too large" in reason.lower()
    assert os.path.getsize(log) == size + 40  # the kernel wrote what the limit allowed
    _check_torn_then_repair(log, size)


@pytest.mark.timeout(60)
def test_append_cut_short_by_a_full_file_system(tmp_path: Path) -> None:
    if os.name != "posix" or os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root and mount(8) to mount a tiny tmpfs and fill it")
    mnt = Path(tempfile.mkdtemp(prefix="lockwarden-full-"))
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", str(mnt)],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    if r.returncode != 0:
        mnt.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        log = _fill(mnt, 2)
        page = os.sysconf("SC_PAGE_SIZE")
        pad = page - os.path.getsize(log) % page - 60  # leave 60 bytes in the log's last page
        with open(log, "ab") as f:  # Task MCP's line padding the log
            head, end = b'{"operation":"pad","details":{"p":"', b'"}}\n'
            f.write(head + b"p" * (pad - len(head) - len(end)) + end)
        assert os.path.getsize(log) % page == page - 60
        filler = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:  # every other page of the file system
            with pytest.raises(OSError) as full:
                while True:
                    os.write(filler, b"\0" * page)
        finally:
            os.close(filler)
        assert full.value.errno == errno.ENOSPC
        size = os.path.getsize(log)
        w = audit.append(str(mnt / "a.lock"), "acquire")
        assert w.fallback and w.error is None and w.reason is not None
        assert "no space left" in w.reason
        assert os.path.getsize(log) == size + 60  # a torn line: the page's last 60 bytes
        (mnt / "filler").unlink()
        _check_torn_then_repair(log, size)
    finally:
        audit.close_logs()  # this process keeps its logs open a moment
        subprocess.run(["umount", str(mnt)], check=False, timeout=60)
        mnt.rmdir()


def test_zero_filled_tail_after_a_crash_is_repaired(lockdir: Path) -> None:
    """After a crash a file system may keep the new size but not the data: NUL bytes."""
    log = _fill(lockdir, 3)
    size = os.path.getsize(log)
    with open(log, "ab") as f:
        f.write(b"\0" * 317)
    _check_torn_then_repair(log, size)


def test_torn_first_line_is_repaired(lockdir: Path) -> None:
    log = lockdir / AUDIT_LOG_NAME
    log.write_bytes(b'{"timestamp":"2026-')
    res = audit.verify(str(log))
    assert (res.ok, res.torn_tail, res.entries) == (True, True, 1)
    assert audit.append(str(lockdir / "a.lock"), "acquire").repaired
    rep = audit.read(str(log))[1]
    assert rep.operation == "repair" and rep.details["before"] == audit.ZERO_HASH
    assert audit.verify(str(log)).ok


def test_complete_last_line_without_newline_is_not_torn(lockdir: Path) -> None:
    log = _fill(lockdir, 2)
    log.write_bytes(log.read_bytes().rstrip(b"\n"))
    res = audit.verify(str(log))
    assert (res.ok, res.torn_tail, res.reason) == (True, False, None)
    w = audit.append(str(lockdir / "a.lock"), "release")
    assert w.repaired is False and audit.verify(str(log)).ok


def test_broken_line_before_the_end_is_tampering_not_a_tear(lockdir: Path) -> None:
    log = _fill(lockdir, 3)
    lines = log.read_bytes().split(b"\n")[:-1]
    lines.insert(1, b'{"timestamp":"2026-')  # a torn-looking line, but a line follows it
    log.write_bytes(b"".join(x + b"\n" for x in lines))
    res = audit.verify(str(log))
    assert (res.ok, res.torn_tail, res.bad_line, res.reason) == (
        False, False, 2, "line 2: not valid JSON")  # fmt: skip


def test_torn_tail_longer_than_an_append_writes_is_not_excused(lockdir: Path) -> None:
    log = _fill(lockdir, 2)
    with open(log, "ab") as f:
        f.write(b"{" + b"x" * (70 * 1024))
    res = audit.verify(str(log))
    assert (res.ok, res.torn_tail, res.bad_line) == (False, False, 3)
    w = audit.append(str(lockdir / "a.lock"), "acquire")  # cannot be hashed within 64 KiB
    assert w.fallback and w.reason is not None and "64 KiB" in w.reason


def test_repair_does_not_excuse_removing_the_line_before_the_tear(lockdir: Path) -> None:
    """The torn line has no usable prev; the repair entry's ``before`` stands in for it."""
    log = _fill(lockdir, 4)
    with open(log, "ab") as f:
        f.write(b'{"timestamp":"20')
    assert audit.append(str(lockdir / "a.lock"), "release").repaired
    assert audit.verify(str(log)).ok
    lines = log.read_bytes().split(b"\n")[:-1]
    del lines[3]  # our 4th entry, right before the torn line
    log.write_bytes(b"".join(x + b"\n" for x in lines))
    res = audit.verify(str(log))
    assert (res.ok, res.bad_line) == (False, 4)
    assert res.reason == "line 4: not valid JSON"  # no longer accounted for by the repair


def test_forged_repair_for_an_edited_line_is_caught(lockdir: Path) -> None:
    """Replacing a line in the middle by garbage plus a hand-made repair entry needs every later
    prev recomputed, as any rewrite does; without that the chain breaks right after."""
    log = _fill(lockdir, 4)
    lines = log.read_bytes().split(b"\n")[:-1]
    obj = json.loads(lines[2])
    garbage = b"garbage"
    repair = {**obj, "operation": "repair", "prev": hashlib.sha256(garbage).hexdigest(),
              "details": {"torn": {"offset": 0, "bytes": 7,
                                   "digest": hashlib.sha256(garbage).hexdigest()},
                          "before": hashlib.sha256(lines[0]).hexdigest()}}  # fmt: skip
    lines[1:3] = [garbage, json.dumps(repair, separators=(",", ":")).encode()]
    log.write_bytes(b"".join(x + b"\n" for x in lines))
    res = audit.verify(str(log))
    assert not res.ok and res.bad_line in (2, 4)
