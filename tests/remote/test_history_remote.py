"""Locks on a server in the history (docs/history.md): ``lockwarden watch redis://…`` records
what each poll finds, and ``lockwarden history URL#KEY`` reads it back. A real Redis server,
python-redis-lock's own locks, real CLI processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # real lock servers (started once a session) and processes

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(120)
def test_watch_url_records_a_server_lock_coming_and_going(redis_server: Any,
                                                         tmp_path: Path) -> None:
    import redis
    import redis_lock

    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "LOCKWARDEN_CONFIG": ""}
    client = redis.Redis(port=redis_server.port)
    client.flushdb()
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    proc = subprocess.Popen([sys.executable, "-m", "core", "watch", url, "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["event"] == "ready"
        lock = redis_lock.Lock(client, "deploy", expire=60)
        assert lock.acquire(blocking=False)
        assert json.loads(proc.stdout.readline())["event"] == "added"
        lock.release()
        assert json.loads(proc.stdout.readline())["event"] == "removed"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    out = subprocess.run([sys.executable, "-m", "core", "history", f"{url}#lock:deploy",
                          "--json"], env=env, capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["event"], r["state"]) for r in rows] == [("acquired", "held"),
                                                       ("released", "free")]
    assert rows[0]["lock"] == f"{url}#lock:deploy"
