"""core.audit.write.cached_tail: an append chains onto the line it wrote last without reading
the log's tail, and only when that line is still byte for byte the log's last one."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import pytest

from core import audit
from core.audit import write as audit_write

pytestmark = pytest.mark.usefixtures("private_state")  # HOME and XDG dirs in tmp_path


def _lines(log: str) -> list[bytes]:
    return [x for x in Path(log).read_bytes().split(b"\n") if x]


def _prev(line: bytes) -> str:
    return str(json.loads(line)["prev"])


def test_a_second_append_hits_the_cache_and_the_chain_verifies(
    lockdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = str(lockdir / "a.lock")
    log = audit.append(lock, "acquire").log_path
    calls: list[int] = []
    real = audit_write.tail_state

    def counting(fd: int, size: int) -> audit_write.TailState:
        calls.append(size)
        return real(fd, size)

    monkeypatch.setattr(audit_write, "tail_state", counting)
    audit.append(lock, "release")
    assert calls == []  # chained from the cache
    first, second = _lines(log)
    assert _prev(second) == hashlib.sha256(first).hexdigest()
    assert audit.verify(log).ok


def test_a_same_size_rewrite_of_our_line_is_a_miss(lockdir: Path) -> None:
    lock = str(lockdir / "a.lock")
    log = audit.append(lock, "acquire").log_path
    data = Path(log).read_bytes()
    i = data.index(b'"acquire"')
    with open(log, "r+b") as f:  # same size, other bytes: someone else's rewrite
        f.seek(i + 1)
        f.write(b"A")
    audit.append(lock, "release")
    first, second = _lines(log)
    assert first.count(b'"Acquire"') == 1
    assert _prev(second) == hashlib.sha256(first).hexdigest()  # chained onto what is there


def test_another_writers_append_is_a_miss(lockdir: Path) -> None:
    lock = str(lockdir / "a.lock")
    log = audit.append(lock, "acquire").log_path
    ours = audit_write._written[log]
    audit.append(lock, "refresh")  # as another process would: our cache still says "acquire"
    audit_write._written[log] = ours
    audit.append(lock, "release")
    lines = _lines(log)
    assert len(lines) == 3
    for before, after in itertools.pairwise(lines):
        assert _prev(after) == hashlib.sha256(before).hexdigest()
    assert audit.verify(log).ok
