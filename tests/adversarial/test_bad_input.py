"""Bad input to the engine and the CLI: a clear error, nothing written, no hang
(docs/cli.md, "Exit codes"; docs/formats.md, "What Lockwarden writes")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core import audit
from core.defaults import MAX_TAG_BYTES
from core.engine.lock import Lock
from core.errors import TagTooLong
from tests.support.cli import lw, one_line, status_json

OLD = 1_700_000_000


def test_a_tag_over_4_kib_is_refused_and_nothing_written(lockdir: Path) -> None:
    path = lockdir / "t.lock"
    out = lw("try", str(path), "--tag", "é" * (MAX_TAG_BYTES // 2 + 1))  # 2 bytes each
    assert out.returncode == 2
    assert f"at most {MAX_TAG_BYTES} bytes" in one_line(out.stderr)
    assert os.listdir(lockdir) == []
    with pytest.raises(TagTooLong) as exc:
        Lock(path, tag="x" * (MAX_TAG_BYTES + 1))
    assert (exc.value.size, exc.value.limit) == (MAX_TAG_BYTES + 1, MAX_TAG_BYTES)
    # the longest allowed tag is written, read back, and released
    lk = Lock(path, tag="x" * MAX_TAG_BYTES, format="task-mcp").acquire()
    assert status_json(path)["tag"] == "x" * MAX_TAG_BYTES
    lk.release()


def test_a_long_tag_written_by_another_tool_is_still_read(lockdir: Path) -> None:
    path = lockdir / "other.lock"
    tag = "y" * 60_000  # under the 64 KiB read limit, over what Lockwarden writes
    path.write_text(f"pid=1\ntimestamp={OLD}\ntag={tag}\n")
    assert status_json(path)["tag"] == tag


@pytest.mark.parametrize("verb", [["acquire"], ["wait"], ["run", "--", "true"]],
                         ids=["acquire", "wait", "run"])
@pytest.mark.parametrize("content", [b"\x00\x01binary", b"z" * (64 * 1024 + 10)],
                         ids=["binary", "oversized"])
def test_waiting_on_an_unreadable_lock_ends_with_exit_3(
        lockdir: Path, verb: list[str], content: bytes) -> None:
    """No ``--timeout``: without the rule these would wait for ever (the test's own timeout
    would fail them)."""
    path = lockdir / "bad.lock"
    path.write_bytes(content)
    os.utime(path, (OLD, OLD))
    out = lw(verb[0], str(path), *verb[1:], timeout=30)
    assert out.returncode == 3, out.stderr
    one_line(out.stderr)
    assert path.read_bytes() == content


def test_reclaim_of_a_missing_lock_says_there_was_nothing_to_reclaim(lockdir: Path) -> None:
    path = lockdir / "nosuch.lock"
    out = lw("reclaim", str(path), "--pid", str(os.getpid()))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"nothing to reclaim: {path} was free; acquired it")
    assert [e.operation for e in audit.read(str(lockdir))] == ["acquire"]
    out = lw("reclaim", str(lockdir / "n2.lock"), "--pid", str(os.getpid()), "--json")
    assert '"reclaimed_from": null' in out.stdout


@pytest.mark.parametrize("ttl", [0.0, -1.0, float("inf"), float("nan"), 1e22])
def test_lock_ttl_is_validated_at_the_api(lockdir: Path, ttl: float) -> None:
    with pytest.raises(ValueError, match="ttl"):
        Lock(lockdir / "x.lock", ttl=ttl)
    assert os.listdir(lockdir) == []
