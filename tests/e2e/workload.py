"""Actors of the end-to-end workload, each run as its own OS process.

``python tests/e2e/workload.py ROLE ARGS...`` (with the repository on ``PYTHONPATH``).
Every actor appends one JSON object per action to its own log file::

    {"t": <Unix s, float>, "actor": "...", "op": "create" | "remove", "path": "...",
     "key": "<tag or holder that identifies this lifetime in `watch --json`>"}

``create`` is logged once the lock exists, ``remove`` once it is gone, so a lifetime lasted at
least ``remove.t - create.t`` seconds. The test compares these logs with what
``lockwarden watch --json`` printed.

Roles:

- ``run DIR LOG NAME SECONDS``: ``lockwarden run PATH --tag T -- sh -c 'echo started; sleep
  0.5'`` in a loop, alternating a path shared by every ``run`` actor (contention: the CLI waits
  for it) and a path of its own.
- ``api DIR LOG NAME SECONDS``: :class:`core.Lock` in a loop, alternating a shared path
  (blocking acquire) and a path of its own; held 0.6 s.
- ``taskmcp DIR LOG NAME SECONDS``: Task MCP JSON locks (spec 004) with a 6 s TTL held for
  8 s with ``auto_refresh`` (refreshed at 75 % of the TTL, Task MCP's rule).
- ``af PROOF LOG SECONDS``: appends ``nodes_claimed`` / ``nodes_released`` events
  (``NNNNNN.json``, the real ``af`` CLI's names, docs/DESIGN.md "Formats") to ``PROOF/ledger``.
- ``victim DIR LOG``: holds ``DIR/victim.lock`` through the API until it is killed; prints
  ``ready`` when it holds it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import core  # noqa: E402


def lockwarden_cmd() -> list[str]:
    """The ``lockwarden`` console script next to this interpreter, else ``python -m core``."""
    script = Path(sys.executable).parent / "lockwarden"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    found = shutil.which("lockwarden")
    return [found] if found else [sys.executable, "-m", "core"]


class ActorLog:
    """Appends the actor's actions to its log file, one JSON object a line (flushed)."""

    def __init__(self, path: str, actor: str) -> None:
        self.path = path
        self.actor = actor

    def note(self, op: str, path: str, key: str) -> None:
        """Record that ``path`` was created (``op="create"``) or removed (``"remove"``)."""
        line = json.dumps({"t": time.time(), "actor": self.actor, "op": op, "path": path,
                           "key": key})
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def run_actor(d: str, log_path: str, name: str, seconds: float) -> int:
    """Loop ``lockwarden run`` until ``seconds`` have passed; returns 0, 1 on a CLI failure."""
    log = ActorLog(log_path, f"run-{name}")
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        i += 1
        path = os.path.join(d, "run-shared.lock" if i % 2 else f"run-{name}-{i}.lock")
        tag = f"run-{name}-{i}"
        proc = subprocess.Popen(
            [*lockwarden_cmd(), "run", path, "--tag", tag, "--timeout", "60", "--",
             "sh", "-c", "echo started; sleep 0.5"],
            stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        started = proc.stdout.readline().strip() == "started"
        if started:
            log.note("create", path, tag)
        proc.stdout.read()
        rc = proc.wait()
        if started:
            log.note("remove", path, tag)
        if rc != 0 or not started:
            print(f"run actor {name}: lockwarden run exited {rc}", file=sys.stderr)
            return 1
        time.sleep(0.2)
    return 0


def api_actor(d: str, log_path: str, name: str, seconds: float) -> int:
    """Loop :class:`core.Lock` acquire/hold/release until ``seconds`` have passed."""
    log = ActorLog(log_path, f"api-{name}")
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        i += 1
        path = os.path.join(d, "api-shared.lock" if i % 2 else f"api-{name}-{i}.lock")
        tag = f"api-{name}-{i}"
        lock = core.Lock(path, tag=tag)
        lock.acquire(timeout=60)
        log.note("create", path, tag)
        time.sleep(0.6)
        lock.release()
        log.note("remove", path, tag)
        time.sleep(0.25)
    return 0


def taskmcp_actor(d: str, log_path: str, name: str, seconds: float) -> int:
    """Task MCP JSON locks with a short TTL, refreshed by the engine while held."""
    log = ActorLog(log_path, f"taskmcp-{name}")
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        i += 1
        path = os.path.join(d, f"task-{name}-{i}.lock")
        tag = f"task-{name}-{i}"
        lock = core.Lock(path, format="task-mcp", ttl=6.0, tag=tag, auto_refresh=True)
        lock.acquire(blocking=False)
        log.note("create", path, tag)
        time.sleep(min(8.0, max(0.5, end - time.monotonic())))
        lock.release()
        log.note("remove", path, tag)
        time.sleep(0.3)
    return 0


def _rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def af_actor(proof: str, log_path: str, seconds: float) -> int:
    """Append claim events to ``proof/ledger``: claim node ``2.i`` for ``prover-i``, release it
    2 s later. Each event is written to a temp name and renamed into place."""
    log = ActorLog(log_path, "af")
    ledger = os.path.join(proof, "ledger")
    end = time.monotonic() + seconds

    def append(event: dict[str, object]) -> None:
        n = 1 + max((int(p[:6]) for p in os.listdir(ledger)
                     if p.endswith(".json") and p[:6].isdigit()), default=0)
        tmp = os.path.join(ledger, f".event-{n:06d}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(event, f)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, os.path.join(ledger, f"{n:06d}.json"))

    i = 0
    while time.monotonic() < end:
        i += 1
        node, owner = f"2.{i}", f"prover-{i}"
        now = datetime.now(UTC)
        append({"type": "nodes_claimed", "timestamp": _rfc3339(now), "node_ids": [node],
                "owner": owner, "timeout": _rfc3339(now + timedelta(seconds=600))})
        vpath = f"{ledger}#{node}"
        log.note("create", vpath, owner)
        time.sleep(2.0)
        append({"type": "nodes_released", "timestamp": _rfc3339(datetime.now(UTC)),
                "node_ids": [node]})
        log.note("remove", vpath, owner)
        time.sleep(0.5)
    return 0


def victim(d: str, log_path: str) -> int:
    """Hold ``d/victim.lock`` through the API until killed."""
    log = ActorLog(log_path, "victim")
    path = os.path.join(d, "victim.lock")
    lock = core.Lock(path, tag="victim")
    lock.acquire(blocking=False)
    log.note("create", path, "victim")
    print("ready", flush=True)
    time.sleep(600)
    return 0


def main(argv: list[str]) -> int:
    """Dispatch on the role (see the module docstring)."""
    role, args = argv[0], argv[1:]
    if role == "run":
        return run_actor(args[0], args[1], args[2], float(args[3]))
    if role == "api":
        return api_actor(args[0], args[1], args[2], float(args[3]))
    if role == "taskmcp":
        return taskmcp_actor(args[0], args[1], args[2], float(args[3]))
    if role == "af":
        return af_actor(args[0], args[1], float(args[2]))
    if role == "victim":
        return victim(args[0], args[1])
    print(f"unknown role {role!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
