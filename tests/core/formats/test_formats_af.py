"""af formats (spec 003): ledger lock read/write, claim locks, ledger replay with real files
(both event file names, malformed/symlinked/FIFO events), meta.json lock timeout."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import formats
from core.errors import ParseError
from core.formats import af
from core.formats._common import parse_time
from core.record import LockRecord

TOKEN = "00112233445566778899aabbccddeeff"


def _t(h: int, m: int = 0) -> str:
    return f"2026-11-21T{h:02d}:{m:02d}:00Z"


def _dt(h: int, m: int = 0) -> datetime:
    return datetime(2026, 11, 21, h, m, tzinfo=UTC)


def _write(ledger: Path, name: str, event: Mapping[str, object] | str) -> None:
    text = event if isinstance(event, str) else json.dumps(event)
    (ledger / name).write_text(text + "\n")


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    d = tmp_path / "proof" / "ledger"
    d.mkdir(parents=True)
    return d


# -- ledger lock --------------------------------------------------------------------------------


def test_ledger_lock_written_by_lockwarden() -> None:
    rec = LockRecord(
        path="/p/ledger/ledger.lock",
        format="af-ledger",
        holder="lockwarden-pid-9@h",
        pid=9,
        host="h",
        acquired_at=_dt(9, 30),
        token=TOKEN,
        start=1795250000.25,
    )
    data = formats.serialize(rec)
    assert data == (
        b'{"agent_id":"lockwarden-pid-9@h","acquired_at":"2026-11-21T09:30:00Z","pid":9,'
        b'"host":"h","start":1795250000.25,"token":"00112233445566778899aabbccddeeff"}\n'
    )
    back = formats.parse(data, rec.path)
    assert back.format == "af-ledger"
    assert (back.holder, back.pid, back.host, back.acquired_at, back.token, back.start) == (
        "lockwarden-pid-9@h",
        9,
        "h",
        _dt(9, 30),
        TOKEN,
        1795250000.25,
    )
    assert back.metadata == {}
    assert back.written_by_lockwarden


def test_ledger_lock_as_go_writes_it() -> None:
    # json.NewEncoder(f).Encode(map) sorts keys and ends with a newline
    data = b'{"acquired_at":"2024-01-15T10:30:00Z","agent_id":"string"}\n'
    rec = formats.parse(data, "/p/ledger/ledger.lock")
    assert (rec.format, rec.holder) == ("af-ledger", "string")
    assert rec.acquired_at == datetime(2024, 1, 15, 10, 30, tzinfo=UTC)
    assert not rec.written_by_lockwarden


def test_ledger_lock_bad_lockwarden_keys_go_to_metadata() -> None:
    data = b'{"agent_id":"a","acquired_at":"2024-01-15T10:30:00Z","pid":-1,"token":"x","z":1}'
    rec = formats.parse(data)
    assert rec.pid is None and rec.token is None
    assert rec.metadata == {"pid": -1, "token": "x", "z": 1}


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"agent_id":5,"acquired_at":"2024-01-15T10:30:00Z"}', "'agent_id' is a number"),
        (b'{"agent_id":"a","acquired_at":"soon"}', "acquired_at is not an RFC 3339 time"),
        (b'{"agent_id":"a","acquired_at":null}', "'acquired_at' is null"),
    ],
)
def test_ledger_lock_errors(data: bytes, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        formats.parse(data)
    assert reason in info.value.reason


def test_ledger_lock_serialize_needs_holder_and_time() -> None:
    rec = LockRecord(path="p", format="af-ledger", acquired_at=_dt(9))
    with pytest.raises(ValueError):
        formats.serialize(rec)
    with pytest.raises(ValueError):
        formats.serialize(LockRecord(path="p", format="af-ledger", holder="a"))


# -- claim locks ---------------------------------------------------------------------------------


def test_claim_lock_is_read_only() -> None:
    data = (
        b'{"node_id":"1.2.3","owner":"agent","acquired_at":"2024-01-15T10:30:00.123456789Z",'
        b'"expires_at":"2024-01-15T10:35:00.999999999Z"}'
    )
    rec = formats.parse(data, "/p/locks/1.2.3.lock")
    assert rec.expires_at == datetime(2024, 1, 15, 10, 35, 0, 999999, tzinfo=UTC)
    with pytest.raises(ValueError, match="read-only"):
        formats.serialize(rec)


def test_claim_lock_without_acquired_at_and_with_offset() -> None:
    data = b'{"node_id":"7","owner":"o","expires_at":"2024-01-15T12:35:00+02:00"}'
    rec = formats.parse(data)
    assert rec.acquired_at is None and rec.ttl is None
    assert rec.expires_at == datetime(2024, 1, 15, 10, 35, tzinfo=UTC)


def test_object_with_every_key_set_uses_the_path() -> None:
    obj = {
        "agent_id": "a",
        "acquired_at": _t(9),
        "node_id": "1",
        "owner": "o",
        "expires_at": _t(10),
        "since": 1,
        "ttl": 5,
    }
    data = json.dumps(obj).encode()
    assert formats.detect(data, "/p/ledger/ledger.lock") == "af-ledger"
    assert formats.detect(data, "/p/locks/1.lock") == "af-claim"
    assert formats.detect(data, "/elsewhere/x.lock") == "af-claim"
    assert formats.parse(data, "/p/ledger/ledger.lock").format == "af-ledger"


# -- replay ---------------------------------------------------------------------------------------


def test_replay_orders_by_sequence_across_both_names(ledger: Path) -> None:
    claim = {"type": "nodes_claimed", "timestamp": _t(9), "node_ids": ["1"], "owner": "a"}
    _write(
        ledger, "000010.json", {"type": "nodes_released", "timestamp": _t(11), "node_ids": ["1"]}
    )
    _write(ledger, "event-000009.json", {**claim, "timeout": _t(10)})
    # name order would put event-000009 last; sequence order makes 10 release the claim
    assert af.replay_ledger(str(ledger)) == []
    _write(ledger, "event-000011.json", {**claim, "owner": "b", "timeout": _t(12)})
    (rec,) = af.replay_ledger(str(ledger))
    assert (rec.holder, rec.tag, rec.expires_at) == ("b", "1", _dt(12))


def test_replay_all_event_kinds(ledger: Path) -> None:
    events: list[dict[str, object]] = [
        {"type": "proof_initialized", "timestamp": _t(8), "conjecture": "x"},
        {"type": "nodes_claimed", "timestamp": _t(9), "node_ids": ["1", "2", "3"], "owner": "a",
         "timeout": _t(10)},
        {"type": "lock_acquired", "timestamp": _t(9, 5), "node_id": "4", "owner": "b",
         "expires_at": _t(9, 10)},
        {"type": "lock_acquired", "timestamp": _t(9, 6), "node_id": "5", "owner": "c",
         "expires_at": _t(9, 11)},
        {"type": "lock_released", "timestamp": _t(9, 7), "node_id": "4", "owner": "b"},
        {"type": "lock_reaped", "timestamp": _t(9, 8), "node_id": "2", "owner": "a"},
        {"type": "claim_refreshed", "timestamp": _t(9, 30), "node_id": "3", "owner": "a",
         "new_timeout": _t(11)},
        {"type": "node_created", "timestamp": _t(9, 31), "node_id": "1.1"},
    ]  # fmt: skip
    for i, event in enumerate(events, 1):
        _write(ledger, f"{i:06d}.json", event)
    records, problems = af.replay_ledger_detailed(str(ledger))
    assert problems == []
    got = {r.tag: (r.holder, r.acquired_at, r.expires_at) for r in records}
    assert got == {
        "1": ("a", _dt(9), _dt(10)),
        "3": ("a", _dt(9), _dt(11)),
        "5": ("c", _dt(9, 6), _dt(9, 11)),  # expired long ago: still claimed until reaped
    }
    assert [r.tag for r in records] == ["1", "3", "5"]
    assert all(r.format == "af-claim" and r.path.startswith(f"{ledger}#") for r in records)
    rec3 = next(r for r in records if r.tag == "3")
    assert rec3.metadata == {"node_id": "3", "event_file": "000007.json"}
    assert '"claim_refreshed"' in rec3.raw
    assert rec3.ttl == 7200.0


def test_replay_timeout_as_go_duration(ledger: Path) -> None:
    _write(
        ledger,
        "000001.json",
        {"type": "nodes_claimed", "timestamp": _t(9), "node_ids": ["2"], "owner": "a",
         "timeout": "5m"},
    )  # fmt: skip
    (rec,) = af.replay_ledger(str(ledger))
    assert rec.expires_at == _dt(9, 5)


def test_replay_skips_bad_files_and_reports_them(ledger: Path, tmp_path: Path) -> None:
    good = {"type": "lock_acquired", "timestamp": _t(9), "node_id": "1", "owner": "a",
            "expires_at": _t(10)}  # fmt: skip
    _write(ledger, "000001.json", good)
    _write(ledger, "000002.json", "{not json")
    _write(ledger, "000003.json", {"type": "lock_acquired", "timestamp": _t(9), "node_id": "2"})
    _write(ledger, "000004.json", {"type": "nodes_claimed", "timestamp": _t(9), "node_ids": "x",
                                   "owner": "a", "timeout": _t(10)})  # fmt: skip
    _write(ledger, "000005.json", {"type": "claim_refreshed", "timestamp": _t(9), "node_id": "9",
                                   "new_timeout": _t(10)})  # fmt: skip
    (ledger / "000006.json").write_bytes(b"\x00\xffbinary")
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({**good, "node_id": "evil"}))
    os.symlink(secret, ledger / "000007.json")
    os.mkfifo(ledger / "000008.json")  # opening it would block: it must not be opened
    _write(ledger, "event-000008.json", {**good, "node_id": "8"})
    (ledger / "000009.json").mkdir()
    _write(ledger, "000010.json", {**good, "node_id": "10", "timestamp": "2026-99-99T00:00:00Z"})
    _write(ledger, "notes.txt", "ignored: not an event file")
    _write(ledger, ".event-abc.tmp", "ignored: af's temp file")
    records, problems = af.replay_ledger_detailed(str(ledger))
    assert [r.tag for r in records] == ["1", "8"]
    text = "\n".join(problems)
    assert "000002.json: event is not valid JSON" in text
    assert "000003.json: lock_acquired event has no 'owner' field" in text
    assert "000004.json: node_ids is a string, not a list of strings" in text
    assert "000005.json: refreshes node '9', which is not claimed" in text
    assert "000006.json: holds binary data" in text
    assert "000007.json: is a symbolic link" in text
    assert "000008.json: is a FIFO" in text
    assert "sequence number 8" in text
    assert "000009.json: is a directory" in text
    assert "000010.json: timestamp is not a valid time" in text
    assert "notes.txt" not in text and ".event-abc.tmp" not in text
    assert af.replay_ledger(str(ledger)) == records


def test_replay_missing_dir(tmp_path: Path) -> None:
    records, problems = af.replay_ledger_detailed(str(tmp_path / "nope"))
    assert records == []
    assert len(problems) == 1 and "cannot list the ledger directory" in problems[0]
    assert af.replay_ledger(str(tmp_path / "nope")) == []


def test_replay_natural_node_order(ledger: Path) -> None:
    _write(
        ledger,
        "000001.json",
        {"type": "nodes_claimed", "timestamp": _t(9), "node_ids": ["1.10", "1.2", "1", "x"],
         "owner": "a", "timeout": _t(10)},
    )  # fmt: skip
    assert [r.tag for r in af.replay_ledger(str(ledger))] == ["1", "1.2", "1.10", "x"]


# -- meta.json / Go durations ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5m", 300.0),
        ("30s", 30.0),
        ("1h", 3600.0),
        ("1m30s", 90.0),
        ("1.5h", 5400.0),
        ("300ms", 0.3),
        ("2h45m0.5s", 9900.5),
        ("0", 0.0),
        ("-1s", -1.0),
        ("10us", 1e-5),
        ("10µs", 1e-5),
    ],
)
def test_parse_go_duration(text: str, seconds: float) -> None:
    got = af.parse_go_duration(text)
    assert got is not None and abs(got - seconds) < 1e-9


@pytest.mark.parametrize("text", ["", "5", "m", "5 m", "1d", "1h-5m", "abc", "1e3s", "+"])
def test_parse_go_duration_rejects(text: str) -> None:
    assert af.parse_go_duration(text) is None


@pytest.mark.parametrize(
    ("content", "seconds"),
    [
        ('{"lock_timeout":"5m"}', 300.0),
        ('{"lock_timeout":"1m30s","other":1}', 90.0),
        ('{"lock_timeout":30000000000}', 30.0),  # Go's JSON time.Duration: nanoseconds
        ('{"lock_timeout":"-5m"}', None),
        ('{"lock_timeout":"soon"}', None),
        ('{"lock_timeout":true}', None),
        ('{"other":1}', None),
        ("[1]", None),
        ("not json", None),
        ("", None),
    ],
)
def test_read_lock_timeout(tmp_path: Path, content: str, seconds: float | None) -> None:
    (tmp_path / "meta.json").write_text(content)
    assert af.read_lock_timeout(str(tmp_path)) == seconds


def test_read_lock_timeout_missing_or_symlink(tmp_path: Path) -> None:
    assert af.read_lock_timeout(str(tmp_path)) is None
    real = tmp_path / "real.json"
    real.write_text('{"lock_timeout":"5m"}')
    os.symlink(real, tmp_path / "meta.json")
    assert af.read_lock_timeout(str(tmp_path)) is None


# -- replay property: random event sequences against a plain model --------------------------------

NODES = st.sampled_from(["1", "1.1", "1.2", "2"])
OWNERS = st.sampled_from(["a", "b"])
MINUTES = st.integers(0, 59)
EVENTS = st.one_of(
    st.builds(
        lambda ids, o, m: {"type": "nodes_claimed", "node_ids": ids, "owner": o,
                           "timeout": _t(10, m)},
        st.lists(NODES, max_size=3), OWNERS, MINUTES,
    ),
    st.builds(
        lambda n, o, m: {"type": "claim_refreshed", "node_id": n, "owner": o,
                         "new_timeout": _t(11, m)},
        NODES, OWNERS, MINUTES,
    ),
    st.builds(lambda ids: {"type": "nodes_released", "node_ids": ids}, st.lists(NODES, max_size=3)),
    st.builds(
        lambda n, o, m: {"type": "lock_acquired", "node_id": n, "owner": o,
                         "expires_at": _t(12, m)},
        NODES, OWNERS, MINUTES,
    ),
    st.builds(lambda n: {"type": "lock_released", "node_id": n}, NODES),
    st.builds(lambda n: {"type": "lock_reaped", "node_id": n}, NODES),
    st.just({"type": "node_created", "node_id": "3"}),
    st.just("{garbage"),
    st.binary(max_size=8).filter(lambda b: b"{" not in b),
)  # fmt: skip


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(EVENTS, max_size=8), st.lists(st.booleans(), min_size=8, max_size=8))
def test_replay_matches_a_plain_model(
    events: list[dict[str, object] | str | bytes], spec_names: list[bool]
) -> None:
    model: dict[str, tuple[str, datetime, datetime]] = {}
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, event in enumerate(events):
            name = f"event-{i + 1:06d}.json" if spec_names[i] else f"{i + 1:06d}.json"
            when = _dt(9, i)
            if isinstance(event, bytes | str):
                data = event if isinstance(event, bytes) else event.encode()
                (Path(tmp) / name).write_bytes(data)
                bad += 1
                continue
            ev: dict[str, Any] = dict(event)
            ev["timestamp"] = when.isoformat().replace("+00:00", "Z")
            (Path(tmp) / name).write_text(json.dumps(ev))
            kind = ev["type"]
            if kind == "nodes_claimed":
                for n in ev["node_ids"]:
                    model[n] = (ev["owner"], when, parse_time(ev["timeout"], "t"))
            elif kind == "lock_acquired":
                model[ev["node_id"]] = (ev["owner"], when, parse_time(ev["expires_at"], "t"))
            elif kind == "claim_refreshed":
                n = ev["node_id"]
                if n in model:
                    model[n] = (ev["owner"], model[n][1], parse_time(ev["new_timeout"], "t"))
                else:
                    bad += 1
            elif kind == "nodes_released":
                for n in ev["node_ids"]:
                    model.pop(n, None)
            elif kind in ("lock_released", "lock_reaped"):
                model.pop(ev["node_id"], None)
        records, problems = af.replay_ledger_detailed(tmp)
    got = {r.tag: (r.holder, r.acquired_at, r.expires_at) for r in records}
    assert got == model
    assert len(problems) == bad
