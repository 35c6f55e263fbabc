"""core.kernel.table and core.kernel.lookup: /proc/locks read within a byte bound and a deadline,
and a table cut off never taken for "no kernel lock" (docs/verdicts.md, "When the kernel's lock
table is too large"). Real files, real lock holders (tests/support/kernel_holders.py); the bounds
are
lowered so that the few locks of a test are enough to cut the table."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import core.kernel.table as table_mod
from core.codes import Code
from core.holder import describe_holder
from core.kernel.lookup import look_up
from core.kernel.table import Table, read_table
from core.reasons import render
from core.record import Liveness, State
from core.tools import safe_action
from core.verdicts.inspect import inspect, kernel_status
from tests.support.kernel_holders import hold

linux = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux /proc/locks")

LINE = b"1: POSIX  ADVISORY  WRITE 4242 fe:00:402117 0 EOF\n"

CUT = Table("", complete=False, bytes_read=4096, seconds=0.6, cut="time")
"""A table cut off before any line (what a flood of newer locks leaves of an old flock's)."""


def _table_file(tmp_path: Path, lines: int) -> Path:
    p = tmp_path / "locks"
    p.write_bytes(LINE * lines)
    return p


def test_the_byte_bound_cuts_at_a_line(tmp_path: Path) -> None:
    p = _table_file(tmp_path, 1000)
    t = read_table(str(p), max_bytes=1000, seconds=60)
    assert (t.complete, t.cut, t.bytes_read) == (False, "bytes", 1001)
    assert t.text.endswith("\n") and len(t.text) <= 1000
    assert t.text.count("\n") == 1000 // len(LINE)  # whole lines only


def test_a_table_exactly_at_the_bound_is_complete(tmp_path: Path) -> None:
    p = _table_file(tmp_path, 10)
    t = read_table(str(p), max_bytes=10 * len(LINE), seconds=60)
    assert (t.complete, t.cut) == (True, None) and t.text.encode() == LINE * 10


def test_the_deadline_cuts_a_long_table_but_not_a_short_one(tmp_path: Path) -> None:
    """Deadline 0 s: it has passed after the first read. One more read tells whether the table
    went on: a long one is cut (``time``), a short one read whole is complete."""
    long = read_table(str(_table_file(tmp_path, 20_000)), max_bytes=1 << 30, seconds=0)
    assert (long.complete, long.cut) == (False, "time")
    assert 0 < len(long.text) < 20_000 * len(LINE) and long.text.endswith("\n")
    short = tmp_path / "short"
    short.write_bytes(LINE * 3)
    t = read_table(str(short), max_bytes=1 << 30, seconds=0)
    assert (t.complete, t.cut, t.text.count("\n")) == (True, None, 3)


def test_the_module_bounds_are_read_at_each_call(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    p = _table_file(tmp_path, 100)
    monkeypatch.setattr(table_mod, "TABLE_MAX_BYTES", 2 * len(LINE))
    assert read_table(str(p)).text.count("\n") == 2


def test_a_missing_table_raises(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        read_table(str(tmp_path / "nope"))


@linux
def test_a_cut_table_leaves_an_unlocked_file_unknown_never_free(tmp_path: Path) -> None:
    free = tmp_path / "free.lock"
    free.write_bytes(b"")
    found = look_up([str(free)], table=CUT)
    assert found.held == {} and found.unknown == {str(free): CUT}
    whole = look_up([str(free)], table=CUT._replace(complete=True, cut=None))
    assert whole.held == {} and whole.unknown == {}  # read to its end: no lock


@linux
@pytest.mark.parametrize("kind, how", [("posix", "getlk"), ("ofd", "fdinfo"),
                                       ("flock", "fdinfo"), ("flock-sh", "fdinfo")])
def test_beyond_the_cut_the_file_itself_and_its_openers_name_the_holder(
        tmp_path: Path, procs: list[subprocess.Popen[str]], kind: str,
        how: str) -> None:
    """POSIX locks: F_GETLK on the file names the holder; OFD: F_OFD_GETLK sees it, fdinfo
    names it; flock (invisible to F_GETLK on Linux): the fdinfo of the processes that have
    the file open."""
    path = tmp_path / "held.lock"
    path.write_bytes(b"")
    holder = hold(procs, kind, path)
    found = look_up([str(path)], table=CUT)
    assert found.unknown == {}
    (h,) = found.held[str(path)]
    assert h.pids == (holder.pid,) and h.confirmed_by == how
    assert h.lock.kind.value == {"posix": "POSIX", "ofd": "OFDLCK"}.get(kind, "FLOCK")


@linux
def test_verdicts_under_a_cut_table(tmp_path: Path, procs: list[subprocess.Popen[str]],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """With the byte bound at 0 every read of /proc/locks is cut (a holder's line is in it):
    a held empty file is still ``held`` and named; a free one is ``held`` with unknown
    liveness (``kernel_table_too_large``), never ``free``; and ``kernel_status`` -- asked
    before anything deletes or replaces a file -- answers held for both."""
    held = tmp_path / "held.lock"
    held.write_bytes(b"")
    holder = hold(procs, "flock", held)
    free = tmp_path / "free.lock"
    free.write_bytes(b"")
    old = 1_000_000_000
    os.utime(free, (old, old))
    monkeypatch.setattr(table_mod, "TABLE_MAX_BYTES", 0)

    st = inspect(str(held))
    assert (st.state, st.kernel_pid, st.liveness) == (State.HELD, holder.pid, Liveness.ALIVE)
    st = inspect(str(free))
    assert (st.state, st.liveness) == (State.HELD, Liveness.UNKNOWN)
    (reason,) = st.reasons
    assert reason.code is Code.KERNEL_TABLE_TOO_LARGE
    assert (reason.get("cut"), reason.get("bytes"), reason.get("file")) == (
        "bytes", 1, str(free))
    assert not st.read_only and safe_action(st).startswith("leave it")
    kept = kernel_status(str(free))
    assert kept is not None and kept.state is State.HELD
    assert kept.reasons[0].code is Code.KERNEL_TABLE_TOO_LARGE

    assert describe_holder(st) == f"held ({render(reason)})"  # what `try` says: never bare

    monkeypatch.setattr(table_mod, "TABLE_MAX_BYTES", 16 << 20)  # read whole again: free
    st = inspect(str(free))
    assert st.state is State.FREE and kernel_status(str(free)) is None


@linux
def test_a_forced_release_is_refused_while_the_table_cannot_tell(
        lockdir: Path, procs: list[subprocess.Popen[str]],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A stale lock with content (a dead PID) that a kernel lock might hold unseen is not
    deleted by ``release --force`` while the table is cut off: the message says why (the
    kernel's lock table, not "a process holds it"), nothing is changed; once the table is read
    whole it is released."""
    from core.cli.main import main as core_main
    from tests.support.cli import dead_pid

    path = lockdir / "stale.lock"
    path.write_text(f"pid={dead_pid()}\ntimestamp=1000\ntag=left\n")
    os.utime(path, (1000, 1000))
    hold(procs, "flock", lockdir / "other.lock")  # /proc/locks has a line to cut
    monkeypatch.setattr(table_mod, "TABLE_MAX_BYTES", 0)
    code = core_main(["release", str(path), "--force", "--reason", "left over"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "kernel's lock table is too large" in err and "nothing was changed" in err
    assert "a process holds" not in err and path.exists()
    monkeypatch.setattr(table_mod, "TABLE_MAX_BYTES", 16 << 20)
    assert core_main(["release", str(path), "--force", "--reason", "left over"]) == 0
    assert not path.exists()


@linux
def test_a_terraform_label_is_judged_from_its_state_file_beyond_a_cut(
        tmp_path: Path, procs: list[subprocess.Popen[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Terraform's lock is a POSIX lock on the state file, which ``F_GETLK`` on that file
    settles whatever the table: a label without it stays a leftover (``no_kernel_lock``), and
    one whose state file a process locks is held, named."""
    data = Path(__file__).parents[2] / "data" / "devtools" / "terraform"
    info = tmp_path / ".terraform.tfstate.lock.info"
    info.write_bytes((data / ".terraform.tfstate.lock.info").read_bytes())
    state = tmp_path / "terraform.tfstate"
    state.write_text("{}")
    hold(procs, "flock", tmp_path / "other.lock")  # /proc/locks has a line to cut
    monkeypatch.setattr(table_mod, "TABLE_MAX_BYTES", 0)
    st = inspect(str(info))
    assert st.state is State.STALE and [r.code for r in st.reasons] == [Code.NO_KERNEL_LOCK]
    holder = hold(procs, "posix", state)
    st = inspect(str(info))
    assert st.state is State.HELD and st.reasons[0].code is Code.KERNEL_LOCK_HELD
    assert st.reasons[0].get("pid") == holder.pid
