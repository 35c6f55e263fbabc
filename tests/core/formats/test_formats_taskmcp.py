"""task-mcp format (spec 004): both ``since`` shapes, pid/host derivation, what Lockwarden
writes, default TTLs and metadata."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from core import formats
from core.errors import ParseError
from core.formats import taskmcp

TOKEN = "fedcba9876543210fedcba9876543210"
T0 = datetime(2026, 11, 21, 9, 30, 0, 123456, tzinfo=UTC)


def _obj(**kw: object) -> bytes:
    base: dict[str, object] = {"owner": "o", "since": 1795280000000, "ttl": 60}
    base.update(kw)
    return json.dumps({k: v for k, v in base.items() if v is not ...}).encode()


def test_default_ttl_table_from_spec() -> None:
    expected = {
        ("local", "interactive"): 3600,
        ("local", "automated"): 1800,
        ("local", "emergency"): 300,
        ("ci", "automated"): 86400,
        ("ci", "interactive"): 3600,
        ("cloud", "interactive"): 7200,
        ("cloud", "automated"): 14400,
        ("container", "interactive"): 1800,
        ("container", "automated"): 3600,
    }
    for (env, purpose), ttl in expected.items():
        assert taskmcp.default_ttl(env, purpose) == ttl


def test_default_ttl_fallbacks() -> None:
    # emergency is short everywhere; an unknown purpose is interactive; unknown env is local
    assert taskmcp.default_ttl("ci", "emergency") == 300
    assert taskmcp.default_ttl("cloud", "emergency") == 300
    assert taskmcp.default_ttl("container", "emergency") == 300
    assert taskmcp.default_ttl("cloud", "other") == 7200
    assert taskmcp.default_ttl("mars", "automated") == 1800
    assert taskmcp.default_ttl("mars", "whatever") == 3600


def test_default_metadata_uses_the_real_os_user_and_host() -> None:
    meta = taskmcp.default_metadata(4242, environment="ci", purpose="automated")
    assert meta == {
        "hostname": socket.gethostname(),
        "process_id": 4242,
        "user_identity": getpass.getuser(),
        "environment": "ci",
        "purpose": "automated",
    }
    assert taskmcp.default_metadata(1)["environment"] == "local"
    assert taskmcp.default_metadata(1)["purpose"] == "interactive"
    assert taskmcp.default_owner(7, "h") == "pid-7@h"
    assert taskmcp.default_owner(7) == f"pid-7@{socket.gethostname()}"


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to run as a uid without a passwd entry",
)
def test_current_user_without_passwd_entry() -> None:
    """A uid with no name (containers): user_identity is uid-<N>, never a crash."""
    code = "from core.formats.taskmcp import current_user; print(current_user())"
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(Path(__file__).parents[3])}
    out = subprocess.run(
        ["setpriv", "--reuid=54321", "--regid=54321", "--clear-groups", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        check=False,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "uid-54321"


def test_make_record_serialises_the_enhanced_shape() -> None:
    meta = taskmcp.default_metadata(4242)
    rec = taskmcp.make_record(
        "/c/change.lock",
        owner="pid-4242@devbox",
        since=T0,
        ttl=3600,
        metadata=meta,
        token=TOKEN,
        start=1795250000.5,
        extra={"reclaimed_from": "pid-1@old", "reclaimed_reason": "LOCK_EXPIRED"},
    )
    assert formats.parse(rec.raw.encode(), rec.path) == rec
    obj = json.loads(rec.raw)
    assert list(obj) == ["owner", "since", "ttl", "metadata", "token", "start",
                         "reclaimed_from", "reclaimed_reason"]
    # since: integer epoch milliseconds, what Task MCP's atomic_lock reads (an ISO string
    # there is NaN age: it would take our live lock for free)
    assert obj["since"] == 1795253400123 and isinstance(obj["since"], int)
    assert set(obj["metadata"]) <= set(taskmcp.ALLOWED_METADATA)
    assert obj["ttl"] == 3600 and isinstance(obj["ttl"], int)
    assert obj["metadata"] == meta
    assert obj["token"] == TOKEN
    assert obj["start"] == 1795250000.5
    # parsed back: milliseconds kept, pid/host from metadata
    assert rec.acquired_at == T0.replace(microsecond=123000)
    assert rec.expires_at == rec.acquired_at + timedelta(hours=1)
    assert rec.pid == 4242
    assert rec.host == socket.gethostname()
    assert rec.token == TOKEN and rec.start == 1795250000.5
    assert rec.written_by_lockwarden
    assert formats.parse(rec.raw.encode(), "/c/change.lock") == rec
    assert formats.detect(rec.raw.encode()) == "task-mcp"
    assert rec.raw.encode().startswith(b'{\n  "owner": ')  # JSON.stringify(info, null, 2)


def test_tag_rides_in_metadata() -> None:
    rec = taskmcp.make_record(
        "p", owner="o", since=T0, ttl=5, metadata={"tag": "deploy\nx=1"}, token=None
    )
    assert rec.tag == "deploy x=1"


def test_since_forms() -> None:
    ms = formats.parse(_obj(since=1795280000123))
    assert ms.acquired_at == datetime.fromtimestamp(1795280000, UTC) + timedelta(milliseconds=123)
    frac = formats.parse(_obj(since=1795280000123.9))
    assert frac.acquired_at is not None and frac.acquired_at.microsecond // 1000 == 123
    iso = formats.parse(_obj(since="2026-11-21T10:30:00.000+01:00"))
    assert iso.acquired_at == datetime(2026, 11, 21, 9, 30, tzinfo=UTC)
    naive = formats.parse(_obj(since="2026-11-21T09:30:00"))
    assert naive.acquired_at == datetime(2026, 11, 21, 9, 30, tzinfo=UTC)
    assert iso.acquired_at.tzinfo is UTC or iso.acquired_at.utcoffset() == timedelta(0)


def test_pid_and_host_derivation() -> None:
    rec = formats.parse(_obj(owner="pid-77@box.local"))
    assert (rec.pid, rec.host) == (77, "box.local")
    rec = formats.parse(_obj(owner="pid-77@box", metadata={"process_id": 88, "hostname": "h2"}))
    assert (rec.pid, rec.host) == (88, "h2")
    rec = formats.parse(_obj(owner="user-john@session-abc123", metadata={"user_identity": "j"}))
    assert (rec.pid, rec.host) == (None, None)
    rec = formats.parse(_obj(owner="token-eyJhbGciOiJIUzI1NiIs", metadata=None))
    assert (rec.pid, rec.host, rec.metadata) == (None, None, {})
    rec = formats.parse(_obj(metadata={"process_id": True, "hostname": ""}))
    assert (rec.pid, rec.host) == (None, None)
    rec = formats.parse(_obj(owner="pid-0@h"))
    assert (rec.pid, rec.host) == (None, "h")


def test_bad_token_and_start_are_ignored() -> None:
    rec = formats.parse(_obj(token="short", start=-1))
    assert rec.token is None and rec.start is None
    rec = formats.parse(_obj(token=TOKEN, start=12.5))
    assert rec.token == TOKEN and rec.start == 12.5


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (_obj(ttl=...), "has no 'ttl' field"),
        (_obj(since=...), "has no 'since' field"),
        (_obj(ttl="60"), "ttl is a string, not a number of seconds"),
        (_obj(ttl=-1), "ttl is negative"),
        (_obj(ttl=True), "ttl is a boolean"),
        (_obj(since=True), "since is a boolean"),
        (_obj(since=-5), "since is negative"),
        (_obj(since="yesterday"), "since is not an RFC 3339 time"),
        (_obj(since="2026-13-01T00:00:00Z"), "since is not a valid time"),
        (_obj(since=10**30), "since is out of range"),
        (_obj(owner=5), "field 'owner' is a number, not a string"),
        (_obj(metadata=[1]), "metadata is an array, not an object"),
        (_obj(since="9999-12-31T23:59:59Z", ttl=10), "since + ttl is out of range"),
        (b'{"owner":"o","since":1,"ttl":NaN}', "not valid JSON"),
        (b'{"owner":"o","since":1,', "not valid JSON"),
    ],
)
def test_errors(data: bytes, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        formats.parse(data, format="task-mcp")
    assert reason in info.value.reason
    if b'"owner"' in data and b'"since"' in data and b'"ttl"' in data:
        with pytest.raises(ParseError):
            formats.parse(data)


def test_detect_partial_object_names_missing_field() -> None:
    with pytest.raises(ParseError, match="looks like a task-mcp lock but has no 'ttl' field"):
        formats.detect(_obj(ttl=...))


def test_serialize_refusals() -> None:
    good = taskmcp.make_record("p", owner="o", since=T0, ttl=1, metadata={})
    from dataclasses import replace

    for bad in (
        replace(good, holder=None),
        replace(good, acquired_at=None),
        replace(good, ttl=None),
        replace(good, ttl=float("inf")),
        replace(good, ttl=-1.0),
        replace(good, token="nope"),
        replace(good, start=float("nan")),
        replace(good, metadata={"x": object()}),
        replace(good, metadata={"x": float("nan")}),
    ):
        with pytest.raises(ValueError):
            formats.serialize(bad)
    with pytest.raises(ValueError):
        taskmcp.make_record("p", owner="o", since=T0, ttl=-5, metadata={})


def test_with_since_and_millis() -> None:
    rec = taskmcp.make_record(
        "p", owner="o", since=T0, ttl=10.5, metadata={"a": 1}, token=TOKEN, start=3.0
    )
    later = taskmcp.with_since(rec, T0 + timedelta(seconds=30))
    assert later.acquired_at == (T0 + timedelta(seconds=30)).replace(microsecond=123000)
    assert (later.holder, later.ttl, later.metadata, later.token, later.start) == (
        "o",
        10.5,
        {"a": 1},
        TOKEN,
        3.0,
    )
    assert taskmcp.since_millis(rec) == 1795253400123
    naive = taskmcp.make_record(
        "p", owner="o", since=datetime(2026, 1, 1), ttl=1, metadata={}
    )  # naive = UTC
    assert naive.acquired_at == datetime(2026, 1, 1, tzinfo=UTC)
    other_tz = taskmcp.make_record(
        "p",
        owner="o",
        since=datetime(2026, 1, 1, 2, tzinfo=timezone(timedelta(hours=2))),
        ttl=1,
        metadata={},
    )
    assert other_tz.acquired_at == datetime(2026, 1, 1, tzinfo=UTC)


NODE = shutil.which("node")

WRITE_LIKE_ATOMIC_LOCK = r"""
const fs = require('fs'), os = require('os');
// Task MCP's atomic_lock: LockInfo {owner, since: Date.now() (ms), ttl (s)}, default owner
const info = { owner: `pid-${process.pid}@${os.hostname()}`, since: Date.now(), ttl: 3600 };
fs.writeFileSync(process.argv[process.argv.length - 1], JSON.stringify(info, null, 2));
console.log(JSON.stringify({ pid: process.pid, host: os.hostname(), since: info.since }));
"""

READ_LIKE_RECLAIMER = r"""
const fs = require('fs');
// spec 004 "Decision Tree for Lock Reclamation": lockAge from new Date(lock.since)
const lock = JSON.parse(fs.readFileSync(process.argv[process.argv.length - 1], 'utf-8'));
const lockAge = Date.now() - new Date(lock.since).getTime();
console.log(JSON.stringify({
  owner: lock.owner, sinceMs: new Date(lock.since).getTime(), ttl: lock.ttl,
  expired: lockAge > lock.ttl * 1000, user: lock.metadata.user_identity,
}));
"""


@pytest.mark.skipif(NODE is None, reason="node (JavaScript) is not installed")
def test_lock_written_by_javascript_atomic_lock_parses(lockdir: Path) -> None:
    assert NODE is not None
    path = lockdir / "change.lock"
    out = subprocess.run(
        [NODE, "-e", WRITE_LIKE_ATOMIC_LOCK, str(path)],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    facts = json.loads(out.stdout)
    rec = formats.parse(path.read_bytes(), str(path))
    assert rec.format == "task-mcp"
    assert (rec.pid, rec.host) == (facts["pid"], facts["host"])
    assert taskmcp.since_millis(rec) == facts["since"]
    assert rec.ttl == 3600.0


@pytest.mark.skipif(NODE is None, reason="node (JavaScript) is not installed")
def test_javascript_reads_our_lock(lockdir: Path) -> None:
    assert NODE is not None
    path = lockdir / "ours.lock"
    rec = taskmcp.make_record(
        str(path), owner="pid-1@h", since=T0, ttl=60,
        metadata=taskmcp.default_metadata(1), token=TOKEN, start=2.5,
    )  # fmt: skip
    path.write_bytes(formats.serialize(rec))
    out = subprocess.run(
        [NODE, "-e", READ_LIKE_RECLAIMER, str(path)],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    seen = json.loads(out.stdout)
    assert seen == {
        "owner": "pid-1@h",
        "sinceMs": taskmcp.since_millis(rec),
        "ttl": 60,
        "expired": True,  # T0 + 60 s is long past
        "user": getpass.getuser(),
    }
