"""core.audit.heads: this user's chain head of each log (record, load, checksum, pruning)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core import audit
from core.audit import appender
from core.audit import heads as audit_heads
from core.audit.heads import ChainHead
from core.fsutil import AUDIT_LOG_NAME

pytestmark = pytest.mark.usefixtures("private_state")  # HOME and XDG dirs in tmp_path


def _head(log: Path, offset: int = 0) -> ChainHead:
    return ChainHead(log=audit_heads.head_key(str(log)), dev=1, ino=2, offset=offset, end=99,
                     digest="ab" * 32, written="2026-01-01T00:00:00.000Z")  # fmt: skip


def test_append_records_where_its_line_is(lockdir: Path) -> None:
    audit.append(str(lockdir / "a.lock"), "acquire")
    w = audit.append(str(lockdir / "a.lock"), "release")
    first = audit_heads.load(w.log_path)  # the first append writes its head at once
    assert first is not None and first.offset == 0
    appender.flush_heads()  # the second's was held back (batched): written now
    head = audit_heads.load(w.log_path)
    last = audit.read(w.log_path)[-1]
    st = os.stat(w.log_path)
    assert head is not None
    assert (head.ino, head.dev, head.offset, head.end) == (
        st.st_ino, st.st_dev, last.offset, st.st_size)  # fmt: skip
    assert head.digest == last.digest and head.written == last.raw.split('"')[3]
    assert stat_mode(Path(audit_heads.head_file(w.log_path)).parent) == 0o700
    assert stat_mode(Path(audit_heads.head_file(w.log_path))) == 0o600


def stat_mode(p: Path) -> int:
    return os.stat(p).st_mode & 0o777


def test_same_directory_by_another_spelling_shares_the_head(lockdir: Path, tmp_path: Path) -> None:
    (tmp_path / "alias").symlink_to(lockdir)
    audit.append(str(tmp_path / "alias" / "a.lock"), "acquire")
    res = audit.verify(str(lockdir))
    assert res.ok and res.head_checked


def test_half_written_or_foreign_head_is_no_head(lockdir: Path) -> None:
    log = lockdir / AUDIT_LOG_NAME
    assert audit_heads.record(_head(log))
    assert audit_heads.load(str(log)) == _head(log)
    path = Path(audit_heads.head_file(str(log)))
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"offset": 0', b'"offset": 5'))  # checksum no longer fits
    assert audit_heads.load(str(log)) is None
    path.write_bytes(data[:40])
    assert audit_heads.load(str(log)) is None
    other = lockdir / "other.log"  # a head filed under another log's name is not this log's
    path.write_bytes(data)
    os.rename(path, audit_heads.head_file(str(other)))
    assert audit_heads.load(str(other)) is None


def test_heads_are_pruned_to_the_most_recent(tmp_path: Path) -> None:
    for k in range(audit_heads.MAX_HEADS + 5):
        assert audit_heads.record(_head(tmp_path / f"d{k}" / AUDIT_LOG_NAME))
    folder = Path(audit_heads.head_file(str(tmp_path / "x"))).parent
    assert len(list(folder.glob("*.json"))) == audit_heads.MAX_HEADS
    newest = tmp_path / f"d{audit_heads.MAX_HEADS + 4}" / AUDIT_LOG_NAME
    assert audit_heads.load(str(newest)) is not None


def test_unwritable_state_never_costs_the_entry(
    lockdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker / "state"))
    w = audit.append(str(lockdir / "a.lock"), "acquire")
    assert w.fallback is False and w.error is None
    res = audit.verify(str(lockdir))
    assert res.ok and not res.head_checked


def test_a_shorter_record_leaves_nothing_of_a_longer_one(lockdir: Path) -> None:
    log = lockdir / AUDIT_LOG_NAME
    long = ChainHead(log=audit_heads.head_key(str(log)), dev=1, ino=2, offset=10**12,
                     end=10**12 + 1, digest="ab" * 32, written="2026-01-01T00:00:00.000Z")
    assert audit_heads.record(long)
    short = _head(log)
    assert audit_heads.record(short)
    assert audit_heads.load(str(log)) == short
    data = Path(audit_heads.head_file(str(log))).read_bytes()
    assert data.count(b"\n") == 2 and data.endswith(b"\n")
