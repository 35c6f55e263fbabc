"""Property-test helpers for the lock formats (core.formats, docs/formats.md): hypothesis
settings for a loaded machine and the check every parser must pass whatever the bytes."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, settings

from core import formats
from core.errors import ParseError
from core.record import FORMATS, LockRecord

FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""No per-example deadline and no too-slow health check: the machine is shared; use as
``@settings(FAST, max_examples=N)``."""


def check_parse(data: bytes, fmt: str | None = None, path: str = "/d/x.lock") -> None:
    """parse/detect either succeed consistently or raise ParseError with a real reason that
    did not come from the catch-all safety net (which would mean a parser bug)."""
    try:
        rec = formats.parse(data, path, format=fmt)
    except ParseError as exc:
        assert isinstance(exc.reason, str) and exc.reason
        assert "could not be parsed (" not in exc.reason, exc.reason
    else:
        assert isinstance(rec, LockRecord)
        assert rec.format in FORMATS
        assert rec.path == path
        if fmt is None:
            assert formats.detect(data, path) == rec.format
        if rec.acquired_at is not None:
            assert rec.acquired_at.utcoffset() == timedelta(0)
            rec.effective_expiry()  # must not overflow
        if rec.expires_at is not None:
            assert rec.expires_at.utcoffset() == timedelta(0)
    try:
        name = formats.detect(data, path)
    except ParseError as exc:
        assert "could not be parsed (" not in exc.reason
    else:
        assert name in FORMATS
