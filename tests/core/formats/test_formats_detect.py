"""Detection by content (docs/DESIGN.md "Formats"), the pidfile format, and reading real lock files
with core.fsutil before parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from core import formats
from core.errors import ParseError
from core.fsutil import read_lock_file


@pytest.mark.parametrize(
    ("data", "fmt"),
    [
        (b"pid=1\ntimestamp=2\n", "sema"),
        (b"\xef\xbb\xbfpid=1\r\ntimestamp=2\r\n", "sema"),
        (b"   4242\n", "pidfile"),
        (b"4242", "pidfile"),
        (b"\r\n4242\r\n", "pidfile"),
        (b'  {"owner":"o","since":1,"ttl":2}', "task-mcp"),
        (b'{"agent_id":"a","acquired_at":"2024-01-15T10:30:00Z"}', "af-ledger"),
        (b'{"node_id":"1","owner":"o","expires_at":"2024-01-15T10:30:00Z"}', "af-claim"),
    ],
)
def test_detect_by_content_whatever_the_name(data: bytes, fmt: str) -> None:
    for path in ("", "/run/x.pid", "/tmp/.X0-lock", "/p/ledger/ledger.lock", "/a/b.lock"):
        if fmt in ("task-mcp", "af-ledger", "af-claim") or path:
            assert formats.detect(data, path) == fmt
    assert formats.parse(data).format == fmt


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"4242 4243\n", "holds 2 words"),
        (b"0\n", "must be a positive integer"),
        (b"99999999999\n", "out of range"),
        (b"0000000000000000000000042\n", "out of range"),
    ],
)
def test_pidfile_errors(data: bytes, reason: str) -> None:
    assert formats.detect(data) == "pidfile"
    with pytest.raises(ParseError) as info:
        formats.parse(data)
    assert reason in info.value.reason


def test_pidfile_forced_on_other_text() -> None:
    with pytest.raises(ParseError, match="not a decimal number"):
        formats.parse(b"pid=4\n", format="pidfile")
    assert formats.parse(b"  17  ", format="pidfile").pid == 17


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"[1, 2]", "JSON is an array, not an object"),
        (b'"text"', "not a lock format we know"),
        (b'{"hello": 1}', "JSON object is not a lock format we know"),
        (b'{"owner": "o", "since": 1}', "looks like a task-mcp lock but has no 'ttl' field"),
        (
            b'{"node_id": "1", "expires_at": "x"}',
            "looks like an af-claim lock but has no 'owner' field",
        ),
        (b"{broken", "not valid JSON"),
        (b"[" * 50_000, "nested too deeply"),
        (b"just some words", "not a lock format we know"),
        (b"\x00\x01\x02", "binary data"),
        (b"\xc3\x28", "not UTF-8"),
        (b"", "empty"),
        (b"\n\n  \t", "only whitespace"),
        (b'{"type":"nodes_released","timestamp":"x","node_ids":[]}', "af ledger event"),
    ],
)
def test_detect_failure_reasons(data: bytes, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        formats.detect(data, "/d/f.lock")
    assert reason in info.value.reason
    assert info.value.path == "/d/f.lock"


def test_detect_does_not_validate_values() -> None:
    # the shape is sema; the values are parse()'s business
    assert formats.detect(b"pid=abc\n") == "sema"
    with pytest.raises(ParseError, match="pid is not an integer"):
        formats.parse(b"pid=abc\ntimestamp=1\n")


def test_read_then_parse_real_files(lockdir: Path) -> None:
    samples = {
        "a.lock": b"pid=5\r\ntimestamp=1703520000\r\ntag=crlf\r\n",
        ".X0-lock": b"%10d\n" % 321,
        "svc.pid": b"321\n",
        "t.lock": b'{"owner":"pid-5@h","since":"2025-10-23T14:30:00.000Z","ttl":3600}',
    }
    for name, data in samples.items():
        (lockdir / name).write_bytes(data)
        raw, info = read_lock_file(str(lockdir / name))
        assert info.size == len(data)
        rec = formats.parse(raw, str(lockdir / name))
        assert rec.path == str(lockdir / name)
        assert rec.pid in (5, 321)
    assert formats.parse(samples["a.lock"]).tag == "crlf"


def test_trailing_newline_never_sneaks_past_a_pattern() -> None:
    token = "0123456789abcdef0123456789abcdef"
    rec = formats.parse(b'{"owner":"o","since":1,"ttl":1,"token":"' + token.encode() + b'\\n"}')
    assert rec.token is None
    with pytest.raises(ParseError, match="RFC 3339"):
        formats.parse(b'{"agent_id":"a","acquired_at":"2024-01-15T10:30:00Z\\n"}')
