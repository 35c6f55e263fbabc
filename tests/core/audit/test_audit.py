"""core.audit: entry format, hash chain, tamper detection, reading (docs/DESIGN.md "Audit log",
spec 004 "Audit logging" / logLockOperation). Real files in tmp dirs."""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from core import audit
from core.errors import UnreadableError
from core.fsutil import AUDIT_LOG_NAME

pytestmark = pytest.mark.usefixtures("private_state")  # HOME and XDG dirs in tmp_path


def _lines(log: Path) -> list[bytes]:
    return log.read_bytes().split(b"\n")[:-1]


def _write_lines(log: Path, lines: list[bytes]) -> None:
    log.write_bytes(b"".join(line + b"\n" for line in lines))


def _fill(lockdir: Path, n: int) -> Path:
    lock = lockdir / "a.lock"
    for i in range(n):
        w = audit.append(str(lock), "acquire" if i % 2 == 0 else "release", details={"i": i})
        assert w.fallback is False
    return lockdir / AUDIT_LOG_NAME


def test_entry_fields_and_first_prev(lockdir: Path) -> None:
    lock = lockdir / "x.lock"
    audit.set_via("cli")
    w = audit.append(str(lock), "acquire", details={"token": "ab" * 16, "tag": "é"}, format="sema")
    assert w == audit.AuditWrite(log_path=str(lockdir / AUDIT_LOG_NAME), fallback=False)
    raw = (lockdir / AUDIT_LOG_NAME).read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    obj = json.loads(raw)
    assert list(obj) == [
        "timestamp", "operation", "lockPath", "details", "user", "pid",
        "host", "via", "format", "result", "prev",
    ]  # fmt: skip
    # Task MCP's timestamp form: toISOString(), UTC with milliseconds and Z
    assert len(obj["timestamp"]) == 24 and obj["timestamp"].endswith("Z")
    ts = dt.datetime.fromisoformat(obj["timestamp"])
    assert abs((dt.datetime.now(dt.UTC) - ts).total_seconds()) < 60
    assert obj["operation"] == "acquire"
    assert obj["lockPath"] == str(lock)
    assert obj["details"] == {"token": "ab" * 16, "tag": "é"}
    assert obj["pid"] == os.getpid()
    assert obj["via"] == "cli"
    assert obj["format"] == "sema"
    assert obj["result"] == "ok"
    assert obj["prev"] == "0" * 64
    assert "é".encode() in raw  # ensure_ascii=False, like JSON.stringify
    assert b'","' in raw and b", " not in raw  # compact separators


def test_user_is_real_os_user(lockdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    monkeypatch.setenv("USER", "mallory")
    monkeypatch.setenv("LOGNAME", "mallory")
    audit.append(str(lockdir / "x.lock"), "acquire")
    (entry,) = audit.read(str(lockdir))
    assert entry.user == pwd.getpwuid(os.getuid()).pw_name


def test_chain_links_each_line_to_the_previous(lockdir: Path) -> None:
    log = _fill(lockdir, 5)
    lines = _lines(log)
    assert len(lines) == 5
    assert json.loads(lines[0])["prev"] == "0" * 64
    for before, line in itertools.pairwise(lines):
        assert json.loads(line)["prev"] == hashlib.sha256(before).hexdigest()
    res = audit.verify(str(log))
    assert res == audit.VerifyResult(True, 5, 0, None, None, str(log))


def test_set_via_rejects_unknown_and_default_is_api(lockdir: Path) -> None:
    assert audit.get_via() == "api"
    with pytest.raises(ValueError):
        audit.set_via("web")
    audit.set_via("gui")
    audit.append(str(lockdir / "x.lock"), "release", result="refused")
    (e,) = audit.read(str(lockdir / "x.lock"))
    assert (e.via, e.result, e.operation) == ("gui", "refused", "release")


def test_log_path_for_and_read_path_forms(lockdir: Path) -> None:
    lock = lockdir / "x.lock"
    assert audit.log_path_for(str(lock)) == str(lockdir / AUDIT_LOG_NAME)
    audit.append(str(lock), "acquire")
    by_dir = audit.read(str(lockdir))
    by_lock = audit.read(str(lock))
    by_log = audit.read(str(lockdir / AUDIT_LOG_NAME))
    assert by_dir == by_lock == by_log and len(by_dir) == 1
    assert audit.read(str(lockdir / "nothing" / "y.lock")) == []
    assert audit.verify(str(lockdir / "nothing")).ok


def test_details_that_json_cannot_hold_and_newlines(lockdir: Path) -> None:
    class Thing:
        def __str__(self) -> str:
            return "thing\nwith newline"

    details: dict[Any, Any] = {
        "when": dt.datetime(2026, 1, 2, tzinfo=dt.UTC),
        "nan": float("nan"),
        "obj": Thing(),
        ("a", 1): {1, 2},
        "inject": 'x"}\n{"operation":"forged"',
        "surrogate": "\udc80",
        "sep": "\u2028",
    }
    w = audit.append(str(lockdir / "x.lock"), "force_release\nforged", details=details)
    assert w.error is None
    log = lockdir / AUDIT_LOG_NAME
    assert log.read_bytes().count(b"\n") == 1
    (e,) = audit.read(str(log))
    assert e.error is None
    assert e.operation == "force_release\nforged"
    assert e.details["inject"] == 'x"}\n{"operation":"forged"'
    assert e.details["obj"] == "thing\nwith newline"
    assert e.details["nan"] == "nan"
    assert e.details["when"] == "2026-01-02T00:00:00+00:00"
    assert sorted(e.details["('a', 1)"]) == [1, 2]
    assert e.details["surrogate"] == "\udc80"
    assert audit.verify(str(log)).ok


def test_task_mcp_line_first_is_foreign_and_chain_holds(lockdir: Path, fixtures_dir: Path) -> None:
    log = lockdir / AUDIT_LOG_NAME
    shutil.copy(fixtures_dir / "task-mcp" / AUDIT_LOG_NAME, log)
    tm_line = _lines(log)[0]
    audit.append(str(lockdir / "change-abc.lock"), "acquire")
    audit.append(str(lockdir / "change-abc.lock"), "release")
    lines = _lines(log)
    assert json.loads(lines[1])["prev"] == hashlib.sha256(tm_line).hexdigest()
    res = audit.verify(str(log))
    assert (res.ok, res.entries, res.foreign, res.bad_line) == (True, 3, 1, None)
    first = audit.read(str(log))[0]
    assert first.foreign and first.error is None
    assert first.operation == "reclaim" and first.user == "alice" and first.pid == 4243
    assert first.lock_path == "/srv/changes/change-abc.lock"
    assert first.details["reason"] == "LOCK_EXPIRED"
    assert first.timestamp == dt.datetime(2026, 11, 21, 9, 31, tzinfo=dt.UTC)
    assert first.prev is None and first.via is None


def test_foreign_line_appended_later_is_chained(lockdir: Path) -> None:
    log = _fill(lockdir, 2)
    with open(log, "ab") as f:  # Task MCP's own appendFile between our writes
        f.write(b'{"timestamp":"2026-11-21T10:00:00.000Z","operation":"acquire",'
                b'"lockPath":"/x/y.lock","details":{},"user":"bob","pid":7}\n')  # fmt: skip
    audit.append(str(lockdir / "a.lock"), "acquire")
    res = audit.verify(str(log))
    assert (res.ok, res.entries, res.foreign) == (True, 4, 1)


def test_missing_final_newline_and_blank_lines(lockdir: Path) -> None:
    log = lockdir / AUDIT_LOG_NAME
    log.write_bytes(b'{"operation":"x","pid":1}\r\n\n   \n{"operation":"y"}')
    audit.append(str(lockdir / "a.lock"), "acquire")
    lines = _lines(log)
    assert len(lines) == 5
    assert json.loads(lines[4])["prev"] == hashlib.sha256(b'{"operation":"y"}').hexdigest()
    entries = audit.read(str(log))
    assert [e.line for e in entries] == [1, 4, 5]
    assert entries[0].raw == '{"operation":"x","pid":1}'
    res = audit.verify(str(log))
    assert (res.ok, res.entries, res.foreign) == (True, 3, 2)
    # trailing blank lines are skipped by the writer too
    with open(log, "ab") as f:
        f.write(b"\n \r\n")
    audit.append(str(lockdir / "a.lock"), "release")
    assert audit.verify(str(log)).ok


# ------------------------------------------------------------------ tampering


def test_edit_a_line(lockdir: Path) -> None:
    log = _fill(lockdir, 8)
    lines = _lines(log)
    lines[3] = lines[3].replace(b'"i":3', b'"i":33')  # line 4, still valid JSON
    _write_lines(log, lines)
    res = audit.verify(str(log))
    assert not res.ok and res.bad_line == 5
    assert res.reason == "line 5: prev does not match line 4 (edited, removed or reordered)"


def test_edit_breaks_json(lockdir: Path) -> None:
    log = _fill(lockdir, 5)
    lines = _lines(log)
    lines[2] = lines[2][:-5]
    _write_lines(log, lines)
    res = audit.verify(str(log))
    assert (res.ok, res.bad_line, res.reason) == (False, 3, "line 3: not valid JSON")
    assert res.entries == 5


def test_delete_a_line(lockdir: Path) -> None:
    log = _fill(lockdir, 6)
    lines = _lines(log)
    del lines[2]  # line 3
    _write_lines(log, lines)
    res = audit.verify(str(log))
    assert (res.ok, res.bad_line, res.entries) == (False, 3, 5)
    assert res.reason is not None and "does not match line 2" in res.reason


def test_delete_the_first_line(lockdir: Path) -> None:
    log = _fill(lockdir, 3)
    _write_lines(log, _lines(log)[1:])
    res = audit.verify(str(log))
    assert (res.ok, res.bad_line) == (False, 1)
    assert res.reason is not None and "64 zeros" in res.reason


def test_swap_two_lines(lockdir: Path) -> None:
    log = _fill(lockdir, 7)
    lines = _lines(log)
    lines[3], lines[4] = lines[4], lines[3]  # lines 4 and 5
    _write_lines(log, lines)
    res = audit.verify(str(log))
    assert (res.ok, res.bad_line) == (False, 4)
    assert res.reason == "line 4: prev does not match line 3 (edited, removed or reordered)"


def test_insert_a_foreign_line_in_the_middle(lockdir: Path, fixtures_dir: Path) -> None:
    log = _fill(lockdir, 6)
    tm_line = (fixtures_dir / "task-mcp" / AUDIT_LOG_NAME).read_bytes().rstrip(b"\n")
    lines = _lines(log)
    lines.insert(3, tm_line)  # becomes line 4; line 5 (ours) no longer chains
    _write_lines(log, lines)
    res = audit.verify(str(log))
    assert (res.ok, res.bad_line, res.foreign, res.entries) == (False, 5, 1, 7)
    assert res.reason is not None and "does not match line 4" in res.reason


def test_bad_prev_value(lockdir: Path) -> None:
    log = _fill(lockdir, 2)
    lines = _lines(log)
    obj = json.loads(lines[1])
    obj["prev"] = "xyz"
    lines[1] = json.dumps(obj).encode()
    _write_lines(log, lines)
    res = audit.verify(str(log))
    assert (res.bad_line, res.reason) == (2, "line 2: prev is not a SHA-256 hex digest")


# ------------------------------------------------------------------ reading odd files


def test_read_garbage(lockdir: Path) -> None:
    log = lockdir / AUDIT_LOG_NAME
    log.write_bytes(b"\x00\xff\xfe garbage\n[1,2]\nnot json\n" + bytes(range(128, 256)) + b"\n")
    entries = audit.read(str(log))
    assert [(e.line, e.error) for e in entries] == [
        (1, "not valid UTF-8 (byte 1)"),
        (2, "not a JSON object"),
        (3, "not valid JSON"),
        (4, "not valid UTF-8 (byte 0)"),
    ]
    res = audit.verify(str(log))
    assert (res.ok, res.bad_line, res.reason) == (False, 1, "line 1: not valid UTF-8 (byte 1)")


def test_read_huge_line(lockdir: Path) -> None:
    log = lockdir / AUDIT_LOG_NAME
    huge = b'{"operation":"' + b"x" * (3 * 1024 * 1024) + b'"}'
    log.write_bytes(huge + b"\n")
    # an append reads at most 64 KiB from the end: it cannot hash this line, so it refuses the log
    w = audit.append(str(lockdir / "a.lock"), "acquire")
    assert w.fallback and w.error is None
    assert w.reason is not None and "64 KiB" in w.reason
    assert log.read_bytes() == huge + b"\n"
    with open(log, "ab") as f:  # a short foreign line after it: appends chain onto that one
        f.write(b'{"operation":"short"}\n')
    assert audit.append(str(lockdir / "a.lock"), "acquire").fallback is False
    entries = audit.read(str(log))
    assert len(entries) == 3
    assert entries[0].error is not None and "3.0 MiB" in entries[0].error
    assert len(entries[0].raw) == audit.MAX_LINE_BYTES
    assert entries[0].digest == hashlib.sha256(huge).hexdigest()
    assert entries[2].prev == entries[1].digest and entries[2].error is None
    res = audit.verify(str(log))
    assert (res.ok, res.bad_line) == (False, 1)


def test_read_fifo_symlink_and_directory_log(lockdir: Path, tmp_path: Path) -> None:
    log = lockdir / AUDIT_LOG_NAME
    os.mkfifo(log)  # nobody writes it: opening it blocking would hang forever
    with pytest.raises(UnreadableError) as ei:
        audit.read(str(lockdir))
    assert "FIFO" in ei.value.reason
    res = audit.verify(str(lockdir))
    assert not res.ok and res.reason is not None and "FIFO" in res.reason
    many = audit.read_many([str(lockdir)])
    assert len(many) == 1 and many[0].line == 0 and "FIFO" in (many[0].error or "")

    other = tmp_path / "other"
    other.mkdir()
    real = other / "real.log"
    real.write_text('{"operation":"x"}\n')
    (other / AUDIT_LOG_NAME).symlink_to(real)
    with pytest.raises(UnreadableError, match="symbolic link"):
        audit.read(str(other))

    d = tmp_path / "d"
    (d / AUDIT_LOG_NAME).mkdir(parents=True)
    assert not audit.verify(str(d)).ok


def test_read_many_newest_first(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()

    def line(op: str, ts: str | None) -> str:
        return json.dumps({"operation": op, **({"timestamp": ts} if ts else {})}) + "\n"

    (a / AUDIT_LOG_NAME).write_text(
        line("a1", "2026-01-01T00:00:01.000Z") + line("a-none", None)
        + line("a3", "2026-01-01T00:00:03.000Z")
    )  # fmt: skip
    (b / AUDIT_LOG_NAME).write_text(
        line("b2", "2026-01-01T00:00:02.000Z") + line("b4", "2026-01-01T01:00:04+01:00")
    )
    audit.append(str(b / "y.lock"), "acquire")  # now: newest of all
    entries = audit.read_many([str(a), str(b / "y.lock"), str(a / "x.lock")])
    assert [e.operation for e in entries] == ["acquire", "b4", "a3", "b2", "a1", "a-none"]
    assert entries[0].log_path == str(b / AUDIT_LOG_NAME)
    assert entries[1].timestamp == dt.datetime(2026, 1, 1, 0, 0, 4, tzinfo=dt.UTC)


# ------------------------------------------------------------------ properties

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@pytest.mark.slow
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(details=st.dictionaries(st.text(), _json_values, max_size=5), op=st.text(min_size=1))
def test_any_details_round_trip_on_one_line(
    lockdir: Path, details: dict[str, Any], op: str
) -> None:
    log = lockdir / AUDIT_LOG_NAME
    before = log.read_bytes().count(b"\n") if log.exists() else 0
    assert audit.append(str(lockdir / "p.lock"), op, details=details).fallback is False
    assert log.read_bytes().count(b"\n") == before + 1
    last = audit.read(str(log))[-1]
    assert last.error is None and last.operation == op
    assert json.dumps(last.details, sort_keys=True) == json.dumps(details, sort_keys=True)
    assert audit.verify(str(log)).ok


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=600))
def test_read_and_verify_never_raise_on_content(lockdir: Path, data: bytes) -> None:
    d = Path(tempfile.mkdtemp(dir=lockdir))  # a fresh log (and chain head) per example
    log = d / AUDIT_LOG_NAME
    log.write_bytes(data)
    entries = audit.read(str(log))
    res = audit.verify(str(log))
    assert res.entries == len(entries)
    # a torn last line (no newline, not a JSON object) is an interrupted write, not tampering
    body = entries[:-1] if res.torn_tail else entries
    if res.torn_tail:
        assert entries[-1].error is not None and not data.endswith(b"\n")
    if any(e.error is not None for e in body):
        assert not res.ok and res.bad_line is not None
    if res.ok:
        assert all(e.error is None for e in body)
    # appending after any garbage works and chains onto its last line (through a repair entry
    # when that line was torn)
    w = audit.append(str(d / "p.lock"), "acquire")
    assert w.fallback is False and w.repaired == res.torn_tail
    after = audit.read(str(log))
    assert after[-1].error is None and after[-1].operation == "acquire"
    first_new = after[-2] if res.torn_tail else after[-1]
    if res.torn_tail:
        assert first_new.operation == "repair" and after[-1].prev == first_new.digest
    assert first_new.prev == (entries[-1].digest if entries else audit.ZERO_HASH)
    if res.ok:
        again = audit.verify(str(log))
        assert again.ok and not again.torn_tail and again.repaired == int(res.torn_tail)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    k=st.integers(min_value=0, max_value=4),
    pos=st.integers(min_value=0, max_value=10_000),
    byte=st.integers(min_value=0, max_value=255).filter(lambda b: b != 0x0A),
)
def test_any_byte_change_before_the_last_line_is_detected(
    tmp_path_factory: pytest.TempPathFactory, k: int, pos: int, byte: int
) -> None:
    """Changing any one byte of line k+1 (of 6) makes verify fail at that line or the next."""
    d = tmp_path_factory.mktemp("tamper")
    log = _fill(d, 6)
    lines = _lines(log)
    line = bytearray(lines[k])
    i = pos % len(line)
    assume(line[i] != byte)
    line[i] = byte
    lines[k] = bytes(line)
    _write_lines(log, lines)
    res = audit.verify(str(log))
    assert not res.ok
    assert res.bad_line in (k + 1, k + 2)
