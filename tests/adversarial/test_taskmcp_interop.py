"""Task MCP interop, checked with Task MCP's own code run by Node (docs/formats.md, "task-mcp:
what Lockwarden writes"): the age check of ``atomic_lock`` ("Current Implementation",
``Date.now() - lock.since``), ``canReclaimLock``'s age (``new Date(lock.since)``) and
``validateLockOwner`` ("Security Controls"), copied from docs/specs/task-mcp.txt,
run against a live lock Lockwarden wrote: Task MCP must see it held and valid."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from core.engine.lock import Lock
from core.formats.taskmcp import ALLOWED_METADATA

NODE = shutil.which("node") or shutil.which("nodejs")

# The checks as Task MCP writes them (spec 004), reading the lock file named in argv[2].
TASK_MCP = r"""
const fs = require('fs');
const lock = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
function validateLockOwner(owner) {
  if (!owner || typeof owner !== 'object') throw new Error('Invalid lock owner format');
  if (!owner.owner || typeof owner.owner !== 'string' || owner.owner.length > 256)
    throw new Error('Invalid owner identifier');
  if (owner.metadata && typeof owner.metadata !== 'object')
    throw new Error('Invalid metadata format');
  const allowedFields = ['hostname', 'process_id', 'user_identity', 'session_id',
                         'environment', 'purpose'];
  if (owner.metadata) {
    for (const field of Object.keys(owner.metadata)) {
      if (!allowedFields.includes(field)) throw new Error(`Unexpected metadata field: ${field}`);
    }
  }
  return owner;
}
const now = Date.now();
const age = now - lock.since;                       // atomic_lock's check
const stolen = !(age < lock.ttl * 1000);            // NaN < x is false: it would steal
const reclaimAge = now - new Date(lock.since).getTime();
let valid = 'ok';
try { validateLockOwner(lock); } catch (e) { valid = e.message; }
console.log(JSON.stringify({stolen, age, reclaimAge, valid}));
"""


@pytest.mark.skipif(NODE is None, reason="Node.js is not installed (CI installs it)")
@pytest.mark.parametrize("tag", [None, "deploy"])
def test_task_mcp_sees_our_live_lock_as_held_and_valid(lockdir: Path, tmp_path: Path,
                                                       tag: str | None) -> None:
    assert NODE is not None
    script = tmp_path / "taskmcp.js"
    script.write_text(TASK_MCP)
    path = lockdir / "change.lock"
    lk = Lock(path, format="task-mcp", ttl=300.0, tag=tag).acquire()
    try:
        out = subprocess.run([NODE, str(script), str(path)], capture_output=True, text=True,
                             timeout=60, check=True)
        seen = json.loads(out.stdout)
        assert seen["stolen"] is False and 0 <= seen["age"] < 60_000
        assert 0 <= seen["reclaimAge"] < 60_000
        assert seen["valid"] == "ok"
        obj = json.loads(path.read_bytes())
        assert set(obj["metadata"]) <= set(ALLOWED_METADATA)
        assert obj.get("tag") == tag
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        lk.release()
