"""Property tests: whatever the bytes, only ParseError (with a reason) escapes ``detect`` and
``parse``; and serialize(parse(serialize(r))) == serialize(r) for every format we write."""

from __future__ import annotations

import json
import string
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from core import formats
from core.errors import ParseError
from core.formats import af, sema, taskmcp
from core.record import FORMATS, LockRecord
from tests.support.fuzz import FAST, check_parse

pytestmark = pytest.mark.slow  # hypothesis, thousands of examples

FIXTURE_SAMPLES = [
    b"pid=11294\ntimestamp=1795289498\ntag=deploy-v1.2.3\n",
    b'{"owner":"pid-4242@devbox","since":1795280000000,"ttl":3600}',
    b'{"agent_id":"append-operation","acquired_at":"2026-11-21T09:30:00Z"}\n',
    b'{"node_id":"1.2.3","owner":"a","acquired_at":"2026-11-21T09:30:00.123456789Z",'
    b'"expires_at":"2026-11-21T09:35:00.123456789Z"}',
    b"      4242\n",
]


# -- arbitrary bytes ---------------------------------------------------------------------------


@settings(FAST, max_examples=10_000)
@given(st.binary(max_size=120))
def test_arbitrary_bytes_only_parse_error(data: bytes) -> None:
    check_parse(data)


@settings(FAST, max_examples=1_500)
@given(st.binary(max_size=80), st.sampled_from([*FORMATS, None]))
def test_arbitrary_bytes_forced_format(data: bytes, fmt: str | None) -> None:
    check_parse(data, fmt)


@settings(FAST, max_examples=800)
@given(
    st.sampled_from(FIXTURE_SAMPLES),
    st.lists(st.tuples(st.integers(0, 200), st.binary(max_size=4)), max_size=4),
    st.sampled_from([*FORMATS, None]),
)
def test_mutated_real_files(sample: bytes, edits: list[tuple[int, bytes]], fmt: str | None) -> None:
    data = bytearray(sample)
    for pos, chunk in edits:
        pos = min(pos, len(data))
        data[pos : pos + len(chunk)] = chunk
    check_parse(bytes(data), fmt)


# -- structured: key=value lines ---------------------------------------------------------------

KEYS = st.sampled_from(["pid", "timestamp", "tag", "host", "start", "token", "ttl", " pid ", "x"])
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "+5", "-0", "1_000", "٣", "0x10", "1e3", "nan", "inf", " 7 ", "9" * 40]),
)
VALUES = st.one_of(NUMBERS, st.text(max_size=20), st.just("0123456789abcdef" * 2))


@settings(FAST, max_examples=500)
@given(
    st.lists(st.tuples(KEYS, VALUES), max_size=8),
    st.sampled_from(["\n", "\r\n", "\r", "\n\n"]),
    st.booleans(),
)
def test_random_key_value_lines(pairs: list[tuple[str, str]], eol: str, bom: bool) -> None:
    text = ("\ufeff" if bom else "") + eol.join(f"{k}={v}" for k, v in pairs)
    data = text.encode("utf-8", errors="surrogatepass")
    check_parse(data)
    check_parse(data, "sema")


# -- structured: JSON objects with the right keys and wrong types -------------------------------

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**80), 2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(
        [
            "2026-11-21T09:30:00Z",
            "2026-11-21T09:30:00.123456789Z",
            "2026-11-21T09:30:00+14:00",
            "0001-01-01T00:00:00-23:59",
            "9999-12-31T23:59:59+00:00",
            "9999-12-31T23:59:59-23:59",
            "2026-02-30T00:00:00Z",
            "2026-11-21",
            "5m",
            "pid-12@host",
            "pid-99999999999@h",
        ]
    ),
    st.integers(0, 2**64),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
ALL_KEYS = [
    "owner",
    "since",
    "ttl",
    "metadata",
    "agent_id",
    "acquired_at",
    "node_id",
    "expires_at",
    "pid",
    "host",
    "start",
    "token",
    "type",
    "timestamp",
]


@settings(FAST, max_examples=400)
@given(
    st.sampled_from([taskmcp.KEYS, af.LEDGER_KEYS, af.CLAIM_KEYS, ()]),
    st.dictionaries(st.sampled_from(ALL_KEYS), JSON_VALUES, max_size=6),
    st.dictionaries(
        st.sampled_from(["process_id", "hostname", "environment", "purpose"]),
        JSON_VALUES,
        max_size=3,
    ),
    st.sampled_from(["", "/p/ledger/ledger.lock", "/p/locks/1.lock"]),
)
def test_json_objects_with_wrong_types(
    required: tuple[str, ...], extra: dict[str, Any], meta: dict[str, Any], path: str
) -> None:
    obj: dict[str, Any] = dict(extra)
    for key in required:
        obj.setdefault(key, None)
    if "metadata" not in obj and meta:
        obj["metadata"] = meta
    data = json.dumps(obj).encode()
    check_parse(data, path=path)
    for fmt in ("task-mcp", "af-ledger", "af-claim"):
        check_parse(data, fmt, path=path)


@pytest.mark.parametrize(
    "data",
    [
        b"[" * 200_000,
        b'{"a":' * 100_000,
        b'{"owner":"o","since":NaN,"ttl":1}',
        b'{"owner":"o","since":1,"ttl":Infinity}',
        b'{"owner":"o","since":1,"ttl":-Infinity}',
        b'{"owner":"o","since":1,"ttl":1e400}',
        b'{"owner":"o","since":' + b"9" * 5000 + b',"ttl":1}',
        b'{"owner":"o","since":' + b"9" * 400 + b',"ttl":1}',
        b'{"owner":"o","since":1,"ttl":' + b"9" * 400 + b"}",
        b'{"owner":"o","since":1,"ttl":1,"start":' + b"9" * 400 + b"}",
        b'{"owner":"o","since":1,"ttl":1,"metadata":{"process_id":' + b"9" * 400 + b"}}",
        b'{"owner":"o","since":"9999-12-31T23:59:59Z","ttl":86400}',
        b'{"agent_id":"a","acquired_at":"0001-01-01T00:00:00+01:00"}',
        b'{"agent_id":"a","acquired_at":"2026-11-21T09:30:00Z","start":' + b"9" * 400 + b"}",
        b"pid=1\ntimestamp=253402300799\nttl=1\n",
        b"pid=1\ntimestamp=" + b"9" * 5000 + b"\n",
        b"9" * 5000,
        b"\xef\xbb\xbf",
        b"\xef\xbb\xbf   \n",
        b"\xed\xa0\x80",  # an encoded surrogate: not UTF-8
        b"=\n" * 100_000,
        b"\x00" * 64,
    ],
)
def test_hostile_inputs(data: bytes) -> None:
    check_parse(data)
    for fmt in FORMATS:
        check_parse(data, fmt)


def test_non_bytes_input_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        formats.parse("pid=1\ntimestamp=5\n")  # type: ignore[arg-type]
    with pytest.raises(ParseError):
        formats.detect(None)  # type: ignore[arg-type]
    assert formats.parse(bytearray(b"pid=1\ntimestamp=5\n")).pid == 1  # type: ignore[arg-type]
    assert formats.parse(memoryview(b"4242\n")).pid == 4242  # type: ignore[arg-type]


def test_unknown_forced_format() -> None:
    with pytest.raises(ParseError, match="unknown format"):
        formats.parse(b"pid=1\ntimestamp=5\n", format="yaml")


# -- round trips -------------------------------------------------------------------------------

DATETIMES = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(9000, 1, 1), timezones=st.just(UTC)
)
ANY_TEXT = st.text(
    st.characters(codec="utf-8", categories=None), max_size=24
)  # controls, Unicode, no surrogates
TOKENS = st.none() | st.text("0123456789abcdef", min_size=32, max_size=32)
STARTS = st.none() | st.floats(min_value=0, max_value=4e9, allow_nan=False)
TTLS = st.none() | st.floats(min_value=0, max_value=1e9, allow_nan=False)
JSON_DATA = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
    max_leaves=8,
)


def stable(record: LockRecord) -> LockRecord:
    once = formats.serialize(record)
    parsed = formats.parse(once, record.path)
    assert parsed.format == record.format
    assert formats.serialize(parsed) == once
    return parsed


@settings(FAST, max_examples=500)
@given(
    st.integers(1, 2**32 - 1),
    DATETIMES,
    st.none() | ANY_TEXT,
    st.none() | ANY_TEXT,
    STARTS,
    TOKENS,
    TTLS,
)
def test_sema_round_trip(
    pid: int,
    when: datetime,
    tag: str | None,
    host: str | None,
    start: float | None,
    token: str | None,
    ttl: float | None,
) -> None:
    rec = sema.make_record(
        "/d/a.lock", pid=pid, timestamp=when, tag=tag, host=host, start=start, token=token, ttl=ttl
    )
    parsed = stable(rec)
    assert parsed == rec
    assert (parsed.pid, parsed.timestamp) == (pid, int(when.timestamp()))
    if tag is not None:
        assert parsed.tag is not None
        assert not any(ord(c) < 32 or ord(c) == 127 for c in parsed.tag)
    # no value can inject a line: the line count is the number of keys written
    written = 2 + sum(x is not None for x in (tag, start, token, ttl)) + bool(parsed.host)
    assert rec.raw.count("\n") == written


@settings(FAST, max_examples=300)
@given(
    ANY_TEXT,
    DATETIMES,
    st.floats(min_value=0, max_value=1e9, allow_nan=False),
    st.dictionaries(ANY_TEXT, JSON_DATA, max_size=4),
    TOKENS,
    STARTS,
)
def test_task_mcp_round_trip(
    owner: str,
    since: datetime,
    ttl: float,
    metadata: dict[str, Any],
    token: str | None,
    start: float | None,
) -> None:
    rec = taskmcp.make_record(
        "/d/t.lock", owner=owner, since=since, ttl=ttl, metadata=metadata, token=token, start=start
    )
    parsed = stable(rec)
    assert parsed == rec
    assert parsed.holder == owner
    assert parsed.ttl == ttl
    assert parsed.token == token
    assert parsed.acquired_at is not None
    assert abs((parsed.acquired_at - since).total_seconds()) < 0.001


@settings(FAST, max_examples=300)
@given(
    ANY_TEXT,
    st.datetimes(
        min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
    ),
    st.none() | st.integers(1, 2**32 - 1),
    st.none() | ANY_TEXT,
    STARTS,
    TOKENS,
)
def test_af_ledger_round_trip(
    agent: str,
    when: datetime,
    pid: int | None,
    host: str | None,
    start: float | None,
    token: str | None,
) -> None:
    rec = LockRecord(
        path="/p/ledger/ledger.lock",
        format="af-ledger",
        holder=agent,
        pid=pid,
        host=host,
        acquired_at=when,
        token=token,
        start=start,
    )
    parsed = stable(rec)
    assert parsed.holder == agent
    assert parsed.acquired_at == when
    assert parsed.pid == pid
    assert parsed.token == token
    assert parsed.start == start
    assert parsed.host == (host or None)


@settings(FAST, max_examples=300)
@given(st.integers(1, 2**32 - 1), st.text(" \t\n", max_size=12), st.text(" \t\r\n", max_size=3))
def test_pidfile_round_trip(pid: int, pad: str, tail: str) -> None:
    data = f"{pad}{pid}{tail}".encode()
    rec = formats.parse(data)
    assert (rec.format, rec.pid) == ("pidfile", pid)
    assert formats.serialize(rec) == f"{pid}\n".encode()


@settings(FAST, max_examples=300)
@given(st.text(string.printable, max_size=30))
def test_printable_text_only_parse_error(text: str) -> None:
    assume(text)
    check_parse(text.encode())
