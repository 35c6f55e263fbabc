"""Every file under tests/data/fixtures parses to exactly the values it holds, and the af
ledger replays to the claims its events leave (checked by hand from the event files)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core import formats
from core.errors import ParseError
from core.formats import af
from core.record import LockRecord


def _utc(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0, us: int = 0) -> datetime:
    return datetime(y, mo, d, h, mi, s, us, tzinfo=UTC)


def _parse(path: Path) -> LockRecord:
    return formats.parse(path.read_bytes(), str(path))


@pytest.mark.parametrize(
    ("name", "pid", "timestamp", "tag"),
    [
        ("sema/tagged.lock", 11294, 1795289498, "deploy-v1.2.3"),
        ("sema/untagged.lock", 11296, 1795289498, None),
        ("sema/newline-in-tag.lock", 11348, 1795289499, "line1 line2"),
        ("semats/control-chars-sanitized.lock", 11334, 1795289499, "evil injected=1 x"),
        ("semats/unicode-tag.lock", 11309, 1795289499, "npm build ✓ – ünïcode"),
    ],
)
def test_sema_fixtures(
    fixtures_dir: Path, name: str, pid: int, timestamp: int, tag: str | None
) -> None:
    path = fixtures_dir / name
    data = path.read_bytes()
    assert formats.detect(data, str(path)) == "sema"
    rec = _parse(path)
    assert rec.format == "sema"
    assert rec.path == str(path)
    assert rec.pid == pid
    assert rec.timestamp == timestamp
    assert rec.acquired_at == datetime.fromtimestamp(timestamp, UTC)
    assert rec.tag == tag
    assert rec.holder is None
    assert rec.host is None
    assert rec.token is None and rec.start is None and rec.ttl is None
    assert rec.expires_at is None
    assert rec.metadata == {}
    assert rec.raw == data.decode("utf-8")
    assert not rec.written_by_lockwarden
    # The injected "injected=1" stays inside the tag: no extra key appeared.
    assert "injected" not in rec.metadata


@pytest.mark.parametrize("name", ["pidfile/.X42-lock", "pidfile/daemon.pid"])
def test_pidfile_fixtures(fixtures_dir: Path, name: str) -> None:
    path = fixtures_dir / name
    assert formats.detect(path.read_bytes(), str(path)) == "pidfile"
    rec = _parse(path)
    assert (rec.format, rec.pid, rec.acquired_at, rec.host, rec.holder) == (
        "pidfile",
        4242,
        None,
        None,
        None,
    )


def test_x11_lock_is_ten_columns(fixtures_dir: Path) -> None:
    assert (fixtures_dir / "pidfile/.X42-lock").read_bytes() == b"%10d\n" % 4242


def test_task_mcp_simple_epoch_ms(fixtures_dir: Path) -> None:
    rec = _parse(fixtures_dir / "task-mcp/simple-epoch-ms.lock")
    assert rec.format == "task-mcp"
    assert rec.holder == "pid-4242@devbox"
    assert rec.pid == 4242
    assert rec.host == "devbox"
    assert rec.acquired_at == datetime.fromtimestamp(1795280000, UTC)
    assert rec.ttl == 3600.0
    assert rec.expires_at == datetime.fromtimestamp(1795280000 + 3600, UTC)
    assert rec.metadata == {}
    assert rec.token is None


def test_task_mcp_enhanced_iso(fixtures_dir: Path) -> None:
    rec = _parse(fixtures_dir / "task-mcp/enhanced-iso.lock")
    assert rec.format == "task-mcp"
    assert rec.holder == "ci-pipeline-gh-456"
    assert rec.pid is None
    assert rec.host == "runner-12"
    assert rec.acquired_at == _utc(2026, 11, 21, 9, 30)
    assert rec.ttl == 86400.0
    assert rec.expires_at == _utc(2026, 11, 22, 9, 30)
    assert rec.metadata == {"hostname": "runner-12", "environment": "ci", "purpose": "automated"}


def test_af_ledger_lock(fixtures_dir: Path) -> None:
    path = fixtures_dir / "af/proof/ledger/ledger.lock"
    assert formats.detect(path.read_bytes(), str(path)) == "af-ledger"
    rec = _parse(path)
    assert rec.format == "af-ledger"
    assert rec.holder == "append-operation"
    assert rec.acquired_at == _utc(2026, 11, 21, 9, 30)
    assert rec.expires_at is None and rec.ttl is None and rec.pid is None
    assert rec.metadata == {}


def test_af_claim_lock_nanoseconds(fixtures_dir: Path) -> None:
    path = fixtures_dir / "af/proof/locks/1.2.3.lock"
    assert formats.detect(path.read_bytes(), str(path)) == "af-claim"
    rec = _parse(path)
    assert rec.format == "af-claim"
    assert rec.holder == "agent-uuid-1234"
    assert rec.tag == "1.2.3"
    assert rec.metadata == {"node_id": "1.2.3"}
    # RFC3339Nano .123456789 is truncated (never rounded) to microseconds.
    assert rec.acquired_at == _utc(2026, 11, 21, 9, 30, 0, 123456)
    assert rec.expires_at == _utc(2026, 11, 21, 9, 35, 0, 123456)
    assert rec.ttl == 300.0
    assert rec.pid is None


def test_af_replay_fixture_ledger(fixtures_dir: Path) -> None:
    ledger = fixtures_dir / "af/proof/ledger"
    records, problems = af.replay_ledger_detailed(str(ledger))
    assert problems == []
    by_node = {r.tag or "": r for r in records}
    # 000002 claims 1 and 1.1 until 10:10; 000003 refreshes 1.1 to 10:40; 000004 releases 1;
    # event-000005 (the spec's file name) acquires 1.2 until 10:00.
    assert sorted(by_node) == ["1.1", "1.2"]
    c11 = by_node["1.1"]
    assert c11.format == "af-claim"
    assert c11.path == f"{ledger}#1.1"
    assert c11.holder == "prover-7"
    assert c11.acquired_at == _utc(2026, 11, 21, 9, 10)
    assert c11.expires_at == _utc(2026, 11, 21, 10, 40)
    assert c11.metadata["node_id"] == "1.1"
    c12 = by_node["1.2"]
    assert c12.path == f"{ledger}#1.2"
    assert c12.holder == "verifier-2"
    assert c12.acquired_at == _utc(2026, 11, 21, 9, 55)
    assert c12.expires_at == _utc(2026, 11, 21, 10, 0)
    assert af.replay_ledger(str(ledger)) == records


def test_af_meta_lock_timeout(fixtures_dir: Path) -> None:
    assert af.read_lock_timeout(str(fixtures_dir / "af/proof")) == 300.0


@pytest.mark.parametrize(
    ("name", "reason_part"),
    [
        ("af/proof/ledger/000002.json", "af ledger event"),
        ("af/proof/meta.json", "not a lock format we know"),
        ("task-mcp/.lock_audit.log", "audit log"),
        ("README.md", "no pid= line"),
    ],
)
def test_non_lock_fixture_files_give_reasons(
    fixtures_dir: Path, name: str, reason_part: str
) -> None:
    path = fixtures_dir / name
    with pytest.raises(ParseError) as info:
        formats.parse(path.read_bytes(), str(path))
    assert reason_part in info.value.reason
    assert info.value.path == str(path)


def test_every_fixture_file_is_covered(fixtures_dir: Path) -> None:
    """Guard: a fixture added later must get a test here."""
    known = {
        "README.md",
        "af/proof/ledger/000001.json",
        "af/proof/ledger/000002.json",
        "af/proof/ledger/000003.json",
        "af/proof/ledger/000004.json",
        "af/proof/ledger/event-000005.json",
        "af/proof/ledger/ledger.lock",
        "af/proof/locks/1.2.3.lock",
        "af/proof/meta.json",
        "pidfile/.X42-lock",
        "pidfile/daemon.pid",
        "sema/newline-in-tag.lock",
        "sema/tagged.lock",
        "sema/untagged.lock",
        "semats/control-chars-sanitized.lock",
        "semats/unicode-tag.lock",
        "task-mcp/.lock_audit.log",
        "task-mcp/enhanced-iso.lock",
        "task-mcp/simple-epoch-ms.lock",
    }
    found = {str(p.relative_to(fixtures_dir)) for p in fixtures_dir.rglob("*") if p.is_file()}
    assert found == known


LOCK_FIXTURES = [
    "sema/tagged.lock",
    "sema/untagged.lock",
    "sema/newline-in-tag.lock",
    "semats/control-chars-sanitized.lock",
    "semats/unicode-tag.lock",
    "pidfile/.X42-lock",
    "pidfile/daemon.pid",
    "task-mcp/simple-epoch-ms.lock",
    "task-mcp/enhanced-iso.lock",
    "af/proof/ledger/ledger.lock",
    "af/proof/locks/1.2.3.lock",
]


@pytest.mark.parametrize("name", LOCK_FIXTURES)
def test_crlf_variant_of_every_lock_fixture(fixtures_dir: Path, name: str) -> None:
    """Spec 000 "Format Rules" 2 / spec 002 "Line Endings": CRLF parses as LF does."""
    path = fixtures_dir / name
    data = path.read_bytes()
    crlf = data.replace(b"\n", b"\r\n") if b"\n" in data else data + b"\r\n"
    lf_rec = formats.parse(data, str(path))
    crlf_rec = formats.parse(crlf, str(path))
    assert replace(crlf_rec, raw=lf_rec.raw) == lf_rec
    assert crlf_rec.raw == crlf.decode()


@pytest.mark.parametrize("name", LOCK_FIXTURES)
def test_writable_fixtures_round_trip(fixtures_dir: Path, name: str) -> None:
    """serialize(parse(x)) is stable for the formats we write, starting from real files."""
    rec = _parse(fixtures_dir / name)
    if rec.format == "af-claim":
        with pytest.raises(ValueError):
            formats.serialize(rec)
        return
    once = formats.serialize(rec)
    again = formats.parse(once, rec.path)
    assert formats.serialize(again) == once
    for attr in ("format", "holder", "pid", "acquired_at", "expires_at", "ttl", "tag"):
        assert getattr(again, attr) == getattr(rec, attr), attr
