"""``core.verdicts.inspect`` on real files: whatever is at the path, a verdict and never an
exception."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pytest

import core
from core.codes import Code
from core.fsutil import read_lock_file
from core.reasons import texts
from core.record import Liveness, State
from core.stale_policy import StalePolicy
from core.verdicts.inspect import inspect, inspect_bytes
from core.verdicts.judge import taskmcp_decision
from core.verdicts.liveness import same_host


def _age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_missing_file_is_free(lockdir: Path) -> None:
    st = inspect(str(lockdir / "nothing.lock"))
    assert st.state is State.FREE and not st.locked
    assert texts(st.reasons) == ["no lock file"] and st.record is None
    assert inspect(str(lockdir / "no-such-dir" / "x.lock")).state is State.FREE


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this OS")
def test_fifo_is_unreadable_and_not_opened(lockdir: Path) -> None:
    fifo = lockdir / "pipe.lock"
    os.mkfifo(fifo)
    st = inspect(str(fifo))  # would block forever if it opened the FIFO for reading
    assert st.state is State.UNREADABLE
    assert texts(st.reasons) == ["is a FIFO (named pipe), not a lock file"]
    assert st.error == texts(st.reasons)[0]


def test_symlink_is_unreadable_and_not_followed(lockdir: Path) -> None:
    target = lockdir / "real.lock"
    target.write_bytes(b"pid=1\ntimestamp=1\n")
    link = lockdir / "link.lock"
    link.symlink_to(target)
    st = inspect(str(link))
    assert st.state is State.UNREADABLE
    assert "symbolic link" in texts(st.reasons)[0] and "never followed" in texts(st.reasons)[0]
    dangling = lockdir / "dangling.lock"
    dangling.symlink_to(lockdir / "gone")
    assert inspect(str(dangling)).state is State.UNREADABLE


def test_directory_is_unreadable(lockdir: Path) -> None:
    d = lockdir / "dir.lock"
    d.mkdir()
    st = inspect(str(d))
    assert st.state is State.UNREADABLE
    assert texts(st.reasons) == ["is a directory, not a lock file"]


def test_too_large_file_is_unreadable(lockdir: Path) -> None:
    big = lockdir / "big.lock"
    big.write_bytes(b"x" * (64 * 1024 + 1))
    st = inspect(str(big))
    assert st.state is State.UNREADABLE and "larger than" in texts(st.reasons)[0]


def test_empty_file_nobody_uses_is_free_at_any_age(lockdir: Path) -> None:
    """docs/DESIGN.md "Two kinds of locks": never writing without a writer, never unreadable,
    never stale (tests/core/watch/test_empty_files.py has the real holders)."""
    f = lockdir / "empty.lock"
    f.write_bytes(b"")
    for age in (0.5, 60, 2 * 3600):
        _age(f, age)
        st = inspect(str(f))
        assert st.state is State.FREE and st.empty_free and st.present, age
        assert [r.code for r in st.reasons] == [Code.EMPTY_FREE] and st.error is None
        assert st.file is not None and st.file.size == 0
    assert inspect(str(f), policy=StalePolicy(stale_after=30)).state is State.FREE
    # whitespace only is as empty
    f.write_bytes(b"\r\n\n")
    _age(f, 2 * 3600)
    assert inspect(str(f)).state is State.FREE


@pytest.mark.parametrize(
    "data",
    [b"\x00\xff\xfe garbage", b"{not json", b"hello world\n", b"\xef\xbb\xbf\x00" * 10],
)
def test_garbage_young_writing_old_unreadable_forever(lockdir: Path, data: bytes) -> None:
    f = lockdir / "junk.lock"
    f.write_bytes(data)
    assert inspect(str(f)).state is State.WRITING
    for age in (10, 3 * 3600, 365 * 86400):
        _age(f, age)
        st = inspect(str(f))
        assert st.state is State.UNREADABLE, age
        assert texts(st.reasons) and texts(st.reasons)[0] and st.error == texts(st.reasons)[0]


def test_permission_denied_is_unreadable(lockdir: Path) -> None:
    f = lockdir / "secret.lock"
    f.write_bytes(b"pid=1\ntimestamp=1\n")
    f.chmod(0)
    if os.name != "posix":
        pytest.skip("POSIX permissions")
    if os.geteuid() != 0:
        st = inspect(str(f))
        assert st.state is State.UNREADABLE and texts(st.reasons) == ["permission denied"]
        return
    if shutil.which("setpriv") is None:
        pytest.skip("root reads any file, and setpriv is missing to drop to user nobody")
    # as root: read the file as user nobody, from a tmp dir nobody can enter (pytest's own
    # tmp dirs are 0700, which would deny the lstat before the open)
    with tempfile.TemporaryDirectory(prefix="lockwarden-perm-") as tmp:
        os.chmod(tmp, 0o755)
        secret = Path(tmp, "secret.lock")
        secret.write_bytes(b"pid=1\ntimestamp=1\n")
        secret.chmod(0)
        out = subprocess.run(
            [*AS_NOBODY, sys.executable, "-c", _INSPECT_AS_NOBODY.format(str(secret))],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "unreadable ['permission denied']"


ROOT = Path(__file__).resolve().parents[3]
AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
_INSPECT_AS_NOBODY = (
    "from core.verdicts.inspect import inspect; from core.reasons import Code, texts; "
    "s = inspect({!r}); print(s.state.value, texts(s.reasons))"
)


def test_inspect_bytes_uses_given_mtime(lockdir: Path) -> None:
    f = lockdir / "e.lock"
    f.write_bytes(b"pid=1\n")  # partial: no timestamp yet
    data, info = read_lock_file(str(f))
    assert inspect_bytes(str(f), data, info).state is State.WRITING
    st = inspect_bytes(str(f), data, info, mtime=time.time() - 3 * 3600)
    assert st.state is State.UNREADABLE and st.file == info
    assert inspect_bytes(str(f), data, None).state is State.UNREADABLE  # no age: no guess


def test_core_inspect_is_the_function_whatever_was_imported(lockdir: Path) -> None:
    """The public ``core.inspect`` is the function; its module lives in the verdicts room
    (``core.verdicts.inspect``), so importing that module cannot hide the function."""
    import core.verdicts.inspect as module

    assert module is not core.inspect
    assert core.inspect(str(lockdir / "x.lock")).state is State.FREE


# --- the reference tools' lock files (tests/data/fixtures) -----------------------------------


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.parametrize(
    "name",
    [
        "sema/untagged.lock",
        "sema/tagged.lock",
        "sema/newline-in-tag.lock",
        "semats/unicode-tag.lock",
        "semats/control-chars-sanitized.lock",
    ],
)
def test_sema_fixtures(fixtures_dir: Path, name: str) -> None:
    """Other tools' locks: held while young whatever their PID; stale once older than 1 h and
    their PID is not the holder (the machine started after these files were written, so the
    PID is gone or belongs to a later process)."""
    path = str(fixtures_dir / name)
    rec = inspect(path).record
    assert rec is not None and rec.format == "sema" and rec.acquired_at is not None
    assert psutil.boot_time() > rec.acquired_at.timestamp(), "fixtures predate this boot"
    young = inspect(path, now=rec.acquired_at + timedelta(minutes=5))
    assert young.state is State.HELD
    assert young.liveness in (Liveness.DEAD, Liveness.REUSED)
    assert texts(young.reasons)[0].startswith(f"PID {rec.pid} ")
    old = inspect(path, now=rec.acquired_at + timedelta(hours=2))
    assert old.state is State.STALE
    assert texts(old.reasons)[-1] == "lock is 2h 0m old, older than the 1h 0m stale limit"
    assert old.to_dict()["state"] == "stale" and old.to_dict()["pid"] == rec.pid


@pytest.mark.parametrize("name", ["pidfile/.X42-lock", "pidfile/daemon.pid"])
def test_pidfile_fixtures(fixtures_dir: Path, name: str) -> None:
    """Pidfiles have no timestamp: age and the PID-reuse check come from the file's mtime."""
    f = fixtures_dir / name
    before_boot = psutil.boot_time() - 3 * 3600
    os.utime(f, (before_boot, before_boot))
    st = inspect(str(f))
    assert st.record is not None and st.record.format == "pidfile" and st.record.pid == 4242
    assert st.liveness in (Liveness.DEAD, Liveness.REUSED)
    assert st.state is State.STALE


def test_taskmcp_epoch_ms_fixture(fixtures_dir: Path) -> None:
    if same_host("devbox"):
        pytest.skip("this machine is named like the fixture's host")
    path = str(fixtures_dir / "task-mcp" / "simple-epoch-ms.lock")
    since = datetime.fromtimestamp(1795280000, UTC)
    st = inspect(path, now=since + timedelta(minutes=3))
    assert st.state is State.HELD and st.liveness is Liveness.REMOTE
    assert "devbox" in texts(st.reasons)[0] and texts(st.reasons)[-1] == "expires in 57m 0s"
    late = inspect(path, now=since + timedelta(hours=1, minutes=5))
    # a lapsed lease whose holder cannot be checked (another host) is stale (docs/DESIGN.md)
    assert late.state is State.STALE
    assert "expired 5m 0s ago (TTL 1h 0m)" in texts(late.reasons)
    assert taskmcp_decision(late, policy=StalePolicy()) == (True, "LOCK_EXPIRED", "high")
    assert taskmcp_decision(st, policy=StalePolicy())[1] == "LOCK_HELD"


def test_taskmcp_enhanced_fixture(fixtures_dir: Path) -> None:
    path = str(fixtures_dir / "task-mcp" / "enhanced-iso.lock")
    since = _ts("2026-11-21T09:30:00Z")
    st = inspect(path, now=since + timedelta(hours=2))
    assert st.state is State.HELD and st.liveness is Liveness.UNKNOWN
    assert texts(st.reasons)[-1] == "expires in 22h 0m"
    everything_on = StalePolicy(allow_higher_privilege=True, allow_emergency=True)
    # a ci lock: no environment ranks above it
    assert taskmcp_decision(
        st, policy=everything_on, requester_user="bob", requester_environment="ci"
    ) == (False, "LOCK_HELD", "low")
    assert (
        taskmcp_decision(
            st, policy=everything_on, requester_user="bob", requester_purpose="emergency"
        )[1]
        == "EMERGENCY_OVERRIDE"
    )
    assert inspect(path, now=since + timedelta(days=1, minutes=1)).state is State.STALE


def test_af_fixtures(fixtures_dir: Path) -> None:
    proof = fixtures_dir / "af" / "proof"
    claim = str(proof / "locks" / "1.2.3.lock")
    st = inspect(claim, now=_ts("2026-11-21T09:34:00Z"))
    assert st.state is State.HELD and st.liveness is Liveness.UNKNOWN and not st.read_only
    expired = inspect(claim, now=_ts("2026-11-22T09:00:00Z"))
    assert expired.state is State.EXPIRED  # never stale: af reaps its own claims
    ledger_lock = str(proof / "ledger" / "ledger.lock")
    # af holds its ledger lock for milliseconds: its own stale limit is 30 s (core.defaults)
    assert inspect(ledger_lock, now=_ts("2026-11-21T09:30:20Z")).state is State.HELD
    late = inspect(ledger_lock, now=_ts("2026-11-21T09:31:00Z"))
    assert late.state is State.STALE and late.stale_after == 30.0
    assert late.reasons[-1].code is Code.OLDER_THAN_STALE_AFTER
    assert late.reasons[-1].get("limit_s") == 30.0
    hourly = StalePolicy(format_stale_after=())
    assert inspect(ledger_lock, policy=hourly, now=_ts("2026-11-21T09:31:00Z")).state \
        is State.HELD
    old = inspect(ledger_lock, policy=hourly, now=_ts("2026-11-21T11:00:00Z"))
    assert old.state is State.STALE and texts(old.reasons)[-1].startswith("lock is 1h 30m old")
    # ledger events and audit logs are not locks: unreadable with the parser's reason
    event = inspect(str(proof / "ledger" / "000002.json"), now=_ts("2026-11-22T00:00:00Z"))
    assert event.state is State.UNREADABLE and "ledger event" in texts(event.reasons)[0]


def test_af_ledger_claims_by_virtual_path(fixtures_dir: Path) -> None:
    ledger = fixtures_dir / "af" / "proof" / "ledger"
    at = _ts("2026-11-21T09:56:00Z")
    held = inspect(f"{ledger}#1.1", now=at)
    assert held.state is State.HELD and held.read_only
    assert held.record is not None and held.record.holder == "prover-7"
    assert texts(held.reasons)[-1] == "expires in 44m 0s"
    gone = inspect(f"{ledger}#1.2", now=_ts("2026-11-21T10:05:00Z"))
    assert gone.state is State.EXPIRED and gone.read_only
    released = inspect(f"{ledger}#1", now=at)  # nodes_released
    assert released.state is State.FREE and "not claimed" in texts(released.reasons)[0]
    # '#' in an ordinary missing path is just a missing file
    assert texts(inspect(str(fixtures_dir / "no#such"), now=at).reasons) == ["no lock file"]
