"""sema format: parsing rules of specs 000/002, Lockwarden's extra keys, serialisation,
interoperability with the specs' shell and Python snippets."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core import formats
from core.errors import ParseError
from core.formats import sema

TOKEN = "0123456789abcdef0123456789abcdef"
T0 = datetime(2026, 11, 21, 9, 30, tzinfo=UTC)


def test_spec_example_lf_and_crlf() -> None:
    lf = b"pid=12345\ntimestamp=1703520000\ntag=deploy-v1.2.3\n"
    crlf = lf.replace(b"\n", b"\r\n")
    for data in (lf, crlf, crlf.rstrip(b"\r\n"), lf.rstrip(b"\n")):
        rec = formats.parse(data, "/x/a.lock")
        assert (rec.pid, rec.timestamp, rec.tag) == (12345, 1703520000, "deploy-v1.2.3")
        assert rec.metadata == {}
        assert formats.detect(data) == "sema"


def test_trim_empty_lines_unknown_keys_first_equals() -> None:
    data = (
        b"\r\n\n  pid =  77 \r\n# a comment without equals\n"
        b"timestamp\t=\t1703520000\nfuture=1\n\ntag= a=b=c \nweird key = v\n"
    )
    rec = formats.parse(data)
    assert rec.pid == 77
    assert rec.timestamp == 1703520000
    assert rec.tag == "a=b=c"
    assert rec.metadata == {"future": "1", "weird key": "v"}


def test_later_key_wins_like_the_spec_python_snippet() -> None:
    rec = formats.parse(b"pid=1\npid=2\ntimestamp=5\n")
    assert rec.pid == 2


def test_missing_tag_is_none_empty_tag_is_empty() -> None:
    assert formats.parse(b"pid=1\ntimestamp=5\n").tag is None
    assert formats.parse(b"pid=1\ntimestamp=5\ntag=\n").tag == ""


def test_control_characters_in_tag_become_spaces() -> None:
    rec = formats.parse(b"pid=1\ntimestamp=5\ntag=a\x01b\x1bc\x7fd\rX\n")
    assert rec.tag == "a b c d X"


def test_lockwarden_keys_read_back() -> None:
    data = (
        f"pid=4242\ntimestamp=1795289498\ntag=t\nhost=box-1\nstart=1795289400.250000\n"
        f"token={TOKEN}\nttl=90\n"
    ).encode()
    rec = formats.parse(data)
    assert rec.host == "box-1"
    assert rec.start == 1795289400.25
    assert rec.token == TOKEN
    assert rec.ttl == 90.0
    assert rec.written_by_lockwarden
    assert rec.effective_expiry() == datetime.fromtimestamp(1795289498 + 90, UTC)
    assert rec.metadata == {}


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("token=0123", "token"),
        (f"token={TOKEN.upper()}", "token"),
        ("start=nan", "start"),
        ("start=-5", "start"),
        ("start=soon", "start"),
        ("ttl=inf", "ttl"),
        ("ttl=-1", "ttl"),
        ("ttl=1e300", "ttl"),
        ("host=", "host"),
    ],
)
def test_bad_lockwarden_values_are_ignored_and_kept(line: str, key: str) -> None:
    rec = formats.parse(f"pid=1\ntimestamp=5\n{line}\n".encode())
    assert getattr(rec, key) is None
    assert rec.metadata[key] == line.split("=", 1)[1]


def test_serialize_order_and_sanitising() -> None:
    rec = sema.make_record(
        "/l/x.lock",
        pid=4242,
        timestamp=T0.replace(microsecond=999999),
        tag="evil\ninjected=1\r\x00x",
        host="box\nttl=0",
        start=1795289400.1234567,
        token=TOKEN,
        ttl=60,
    )
    data = formats.serialize(rec)
    assert data == (
        b"pid=4242\ntimestamp=1795253400\ntag=evil injected=1  x\nhost=box ttl=0\n"
        b"start=1795289400.123457\ntoken=0123456789abcdef0123456789abcdef\nttl=60\n"
    )
    assert rec.raw == data.decode()
    assert rec.acquired_at == T0
    assert formats.parse(data, "/l/x.lock") == rec


def test_make_record_minimal_equals_parse() -> None:
    rec = sema.make_record("p", pid=1, timestamp=T0)
    assert rec.raw == "pid=1\ntimestamp=1795253400\n"
    assert formats.parse(rec.raw.encode(), "p") == rec
    assert rec.tag is None and rec.host is None and rec.token is None


def test_serialize_refuses_bad_records() -> None:
    good = sema.make_record("p", pid=1, timestamp=T0)
    from dataclasses import replace

    for bad in (
        replace(good, pid=None),
        replace(good, pid=0),
        replace(good, acquired_at=None),
        replace(good, token="XYZ"),
        replace(good, ttl=float("nan")),
        replace(good, start=float("inf")),
    ):
        with pytest.raises(ValueError):
            formats.serialize(bad)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "the file is empty"),
        (b"  \r\n\t\n", "the file holds only whitespace"),
        (b"timestamp=5\ntag=x\n", "no pid= line"),
        (b"pid=1\ntag=x\n", "no timestamp= line"),
        (b"pid=abc\ntimestamp=5\n", "pid is not an integer: 'abc'"),
        (b"pid=1\ntimestamp=soon\n", "timestamp is not an integer: 'soon'"),
        (b"pid=1\ntimestamp=1.5\n", "timestamp is not an integer: '1.5'"),
        (b"pid=0\ntimestamp=5\n", "pid must be a positive integer"),
        (b"pid=-3\ntimestamp=5\n", "pid must be a positive integer"),
        (b"pid=99999999999\ntimestamp=5\n", "pid is out of range"),
        (b"pid=1\ntimestamp=-5\n", "timestamp is negative"),
        (b"pid=1\ntimestamp=99999999999999\n", "timestamp is out of range"),
        (b"pid=\ntimestamp=5\n", "pid is empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "binary data"),
        (b"pid=1\xff\ntimestamp=5\n", "not UTF-8"),
        (b"hello world\n", "not a lock format we know"),
    ],
)
def test_clear_distinct_reasons(data: bytes, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        formats.parse(data, "/locks/a.lock")
    assert reason in info.value.reason
    assert info.value.path == "/locks/a.lock"
    assert "/locks/a.lock" in str(info.value)


def test_reasons_are_distinct() -> None:
    cases = [b"", b"timestamp=5\n", b"pid=x\ntimestamp=5\n", b"pid=1\ntimestamp=x\n", b"\x00\xff"]
    reasons = set()
    for data in cases:
        with pytest.raises(ParseError) as info:
            formats.parse(data)
        reasons.add(info.value.reason)
    assert len(reasons) == len(cases)


def spec_parse_lock_file(path: str) -> dict[str, str]:
    """Verbatim from spec 000 "Example: Parsing in Python"."""
    with open(path) as f:
        info = {}
        for line in f:
            if "=" in line:
                key, value = line.strip().split("=", 1)
                info[key] = value
    return info


def test_spec_python_snippet_reads_our_output(lockdir: Path) -> None:
    rec = sema.make_record(
        str(lockdir / "a.lock"),
        pid=12345,
        timestamp=datetime.fromtimestamp(1703520000, UTC),
        tag="shell-script ✓",
        host="h",
        start=1.5,
        token=TOKEN,
        ttl=30.5,
    )
    path = lockdir / "a.lock"
    path.write_bytes(formats.serialize(rec))
    info = spec_parse_lock_file(str(path))
    assert info["pid"] == "12345"
    assert info["timestamp"] == "1703520000"
    assert info["tag"] == "shell-script ✓"
    assert info["token"] == TOKEN


def test_lock_written_the_spec_shell_way_parses(lockdir: Path) -> None:
    path = lockdir / "my.lock"
    script = (
        'echo "pid=$$" > "$1"\n'
        'echo "timestamp=$(date +%s)" >> "$1"\n'
        'echo "tag=shell-script" >> "$1"\n'
        'echo "$$"\n'
    )
    out = subprocess.run(
        ["sh", "-c", script, "sh", str(path)], capture_output=True, text=True, check=True
    )
    rec = formats.parse(path.read_bytes(), str(path))
    assert rec.format == "sema"
    assert rec.pid == int(out.stdout.strip())
    assert rec.tag == "shell-script"
    assert rec.acquired_at is not None
    assert abs((datetime.now(UTC) - rec.acquired_at).total_seconds()) < 600


def test_lone_surrogates_and_c1_controls_in_values() -> None:
    rec = sema.make_record("p", pid=1, timestamp=T0, tag="a\ud800b\x9b[31mc", host="h\udfff")
    assert rec.tag == "a\ufffdb [31mc"
    assert rec.host == "h\ufffd"
    assert formats.parse(formats.serialize(rec), "p") == rec


def test_whitespace_only_values_are_trimmed_the_way_readers_trim() -> None:
    rec = sema.make_record("p", pid=1, timestamp=T0, tag="  \u3000 x \x85", host=" \t ")
    assert rec.tag == "x"
    assert rec.host is None
    assert rec.raw == "pid=1\ntimestamp=1795253400\ntag=x\n"
