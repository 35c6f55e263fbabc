"""Removing ``prev`` from Lockwarden's lines must not hide an edit (core.audit.verify).

Before, a line without ``prev`` was simply *foreign* (another tool's), so editing line 3 and
stripping ``prev`` from it and every later line left a log that verified. Now a line carrying any
of Lockwarden's own keys (host, via, format, result) must have ``prev``; only lines with none of
them (Task MCP's six-field lines) may lack it: before the first of ours (a log that began
without a chain) and between ours. Task MCP's lines are written here by a real Node process
with Task MCP's own ``appendFile`` code, when Node is installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from core import audit
from core.fsutil import AUDIT_LOG_NAME

pytestmark = pytest.mark.usefixtures("private_state")  # HOME and XDG dirs in tmp_path


def _fill(d: Path, n: int) -> Path:
    for i in range(n):
        assert audit.append(str(d / "a.lock"), "acquire", details={"i": i}).fallback is False
    return d / AUDIT_LOG_NAME


def _lines(log: Path) -> list[bytes]:
    return log.read_bytes().split(b"\n")[:-1]


def _write(log: Path, lines: list[bytes]) -> None:
    log.write_bytes(b"".join(x + b"\n" for x in lines))


def _without(line: bytes, *keys: str) -> bytes:
    obj = json.loads(line)
    for k in keys:
        obj.pop(k, None)
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def test_edit_hidden_by_stripping_prev_from_later_lines_is_detected(lockdir: Path) -> None:
    log = _fill(lockdir, 6)
    lines = _lines(log)
    lines[2] = lines[2].replace(b'"i":2', b'"i":99')  # the edit (line 3)
    lines[3:] = [_without(x, "prev") for x in lines[3:]]  # and prev gone from lines 4..6
    _write(log, lines)
    res = audit.verify(str(log))
    assert (res.ok, res.bad_line) == (False, 4)
    assert res.reason == (
        "line 4: Lockwarden's entry without prev (prev was removed, which hides any edit "
        "before it)"
    )


def test_stripping_prev_from_the_edited_line_itself_is_detected(lockdir: Path) -> None:
    log = _fill(lockdir, 4)
    lines = _lines(log)
    lines[1:] = [_without(x.replace(b'"i":1', b'"i":5'), "prev") for x in lines[1:]]
    _write(log, lines)
    res = audit.verify(str(log))
    assert (res.ok, res.bad_line) == (False, 2)
    assert res.reason is not None and "without prev" in res.reason


def test_our_first_line_without_prev_is_detected(lockdir: Path) -> None:
    """A log begins without chain only with foreign lines: our lines always carry prev, so
    one of ours without it, even first, had it removed."""
    log = _fill(lockdir, 3)
    _write(log, [_without(x, "prev") for x in _lines(log)])
    res = audit.verify(str(log))
    assert (res.ok, res.bad_line) == (False, 1)
    assert res.reason is not None and "without prev" in res.reason


def test_null_or_malformed_prev_is_still_named_as_such(lockdir: Path) -> None:
    log = _fill(lockdir, 2)
    lines = _lines(log)
    obj = json.loads(lines[1])
    obj["prev"] = None
    lines[1] = json.dumps(obj).encode()
    _write(log, lines)
    res = audit.verify(str(log))
    assert (res.bad_line, res.reason) == (2, "line 2: prev is not a SHA-256 hex digest")


TASK_MCP_APPEND = r"""
// Task MCP's logLockOperation (docs/specs/task-mcp.txt)
// (with node -e, argv[1] is the first argument)
const fs = require('fs'), path = require('path');
async function logLockOperation(operation, lockPath, details) {
  const logEntry = {timestamp: new Date().toISOString(), operation, lockPath, details,
                    user: process.env.USER, pid: process.pid};
  const logPath = path.join(path.dirname(lockPath), '.lock_audit.log');
  await fs.promises.appendFile(logPath, JSON.stringify(logEntry) + '\n');
}
logLockOperation(process.argv[1], process.argv[2], {reason: 'LOCK_EXPIRED'});
"""


def _task_mcp(op: str, lock: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed: cannot run Task MCP's own appendFile")
    subprocess.run([node, "-e", TASK_MCP_APPEND, op, str(lock)], check=True, timeout=60,
                   env={"USER": "alice", "PATH": "/usr/bin:/bin"})  # fmt: skip


def test_task_mcp_lines_before_between_and_after_ours_are_accepted(lockdir: Path) -> None:
    lock = lockdir / "a.lock"
    _task_mcp("acquire", lock)  # the log begins without a chain
    _task_mcp("release", lock)
    _fill(lockdir, 2)
    _task_mcp("reclaim", lock)  # between ours
    _fill(lockdir, 1)
    _task_mcp("release", lock)  # after our last line
    res = audit.verify(str(lock))
    assert (res.ok, res.entries, res.foreign, res.bad_line) == (True, 7, 4, None), res.reason
    foreign = [e for e in audit.read(str(lock)) if e.foreign]
    assert [e.operation for e in foreign] == ["acquire", "release", "reclaim", "release"]
    assert {e.user for e in foreign} == {"alice"} and all(e.prev is None for e in foreign)


def test_disguising_our_lines_as_foreign_is_caught_by_the_writers_chain_head(
    lockdir: Path, tmp_path: Path
) -> None:
    """Stripping every Lockwarden key makes a line look like Task MCP's. Between our lines that
    still breaks the chain; after our last line only the chain head of the user who wrote it
    notices (for anyone else it is the documented limit: changes after our last line)."""
    log = _fill(lockdir, 4)
    lines = _lines(log)
    lines[3] = _without(lines[3].replace(b'"i":3', b'"i":8'), *audit_keys())
    _write(log, lines)
    res = audit.verify(str(log))
    assert (res.ok, res.bad_line, res.head_checked) == (False, 4, True)
    assert res.reason is not None and "differs from the entry you appended" in res.reason

    shutil.rmtree(tmp_path / "state" / "lockwarden" / "audit_heads")  # as another user sees it
    res = audit.verify(str(log))
    assert (res.ok, res.foreign, res.head_checked) == (True, 1, False)

    lines[1] = _without(lines[1], *audit_keys())  # between ours: line 3 no longer chains
    _write(log, lines)
    res = audit.verify(str(log))
    assert (res.ok, res.bad_line) == (False, 3)


def audit_keys() -> tuple[str, ...]:
    return ("prev", "host", "via", "format", "result")
