"""A refreshed lock keeps its age and moves only its expiry (docs/formats.md, "Refresh: age
and expiry"), for both formats with a lease, through the real engine and the files it
writes."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from core.engine.lock import Lock
from core.formats import parse
from tests.support.cli import status_json


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["sema", "task-mcp"])
def test_refresh_moves_the_expiry_not_the_age(lockdir: Path, fmt: str) -> None:
    path = lockdir / "lease.lock"
    lk = Lock(path, format=fmt, ttl=60.0).acquire()
    first = parse(path.read_bytes(), str(path))
    first_expiry = first.effective_expiry()
    assert first.acquired_at is not None and first_expiry is not None
    # the subject is the passage of wall-clock time: sema stores whole seconds
    time.sleep(1.2)
    lk.refresh()
    renewed = parse(path.read_bytes(), str(path))
    assert renewed.acquired_at == first.acquired_at            # age counts from acquisition
    expiry = renewed.effective_expiry()
    assert expiry is not None and expiry > first_expiry
    st = status_json(path)
    assert st["age_s"] >= 1.0
    assert datetime.fromisoformat(st["expires_at"].replace("Z", "+00:00")) == expiry
    if fmt == "sema":
        text = path.read_text()
        assert f"acquired={int(first.acquired_at.timestamp())}\n" in text
        assert "timestamp=" in text and renewed.renewed_at is not None
    else:
        obj = json.loads(path.read_bytes())
        assert isinstance(obj["since"], int) and obj["ttl"] > 60
    lk.release()
