"""A password in a server URL is never shown: not in a URL's parse error, the ``list --json``
error item, the ``watch --json`` ready event, the human "watching" line, nor a configuration
warning quoting a DSN (core.config.servers.redact_url; docs/remote.md, "Passwords shown
nowhere"). Real CLI runs against a port nothing listens on (127.0.0.1)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import load
from tests.support.cli import ROOT, cli_env, lw
from tests.support.servers import free_port

pytestmark = pytest.mark.slow  # unreachable servers and watch processes, seconds each

SECRET = "topsecret"


def test_url_errors_hide_the_password() -> None:
    port = free_port()
    # an unencoded "/" in the password: urlsplit reads "u:pw" as host and port
    bad_port = lw("status", f"redis://u:pw/{SECRET}@127.0.0.1:{port}/0#lock:k")
    assert bad_port.returncode == 2 and SECRET not in bad_port.stderr
    assert "pw" not in bad_port.stderr and "redis://u:***@127.0.0.1" in bad_port.stderr
    bad_db = lw("status", f"redis://:{SECRET}@127.0.0.1:{port}/zero#lock:k")
    assert bad_db.returncode == 2 and SECRET not in bad_db.stderr
    no_key = lw("status", f"postgres://u:{SECRET}@127.0.0.1:{port}/db")
    assert no_key.returncode == 2 and SECRET not in no_key.stderr
    assert "postgres://u:***@127.0.0.1" in no_key.stderr


def test_list_error_items_hide_the_password() -> None:
    url = f"redis://:{SECRET}@127.0.0.1:{free_port()}/0"
    js = lw("list", url, "--json", "--deadline", "5")
    assert js.returncode == 3 and SECRET not in js.stdout + js.stderr
    (item,) = json.loads(js.stdout)
    assert item["kind"] == "error" and item["path"] == url.replace(SECRET, "***")
    human = lw("list", url, "--deadline", "5")
    assert human.returncode == 3 and SECRET not in human.stdout + human.stderr


def _watch_until_ready(*args: str) -> str:
    proc = subprocess.Popen([sys.executable, "-m", "core", "watch", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=cli_env())
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "ready" in line or line.startswith("watching"):
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return "".join(lines) + out + err


def test_watch_ready_event_and_watching_line_hide_the_password() -> None:
    url = f"redis://:{SECRET}@127.0.0.1:{free_port()}/0"
    shown = url.replace(SECRET, "***")
    js = _watch_until_ready(url, "--json", "--deadline", "5")
    assert SECRET not in js
    ready = next(json.loads(x) for x in js.splitlines() if '"ready"' in x)
    assert ready == {"event": "ready", "dirs": [shown]}
    text = _watch_until_ready(url, "--deadline", "5")
    assert SECRET not in text and f"watching {shown} (Ctrl-C to stop)" in text


def test_config_warnings_quoting_a_dsn_hide_the_password(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[[postgres]]\ndsn = "mysql://u:{SECRET}@h/db"\n'
                   f'[[etcd]]\nendpoints = ["ftp://u:{SECRET}@h"]\n'
                   f'[[postgres]]\ndsn = "postgres://u:{SECRET}@h:{SECRET}/db"\n')
    warnings = load(str(cfg)).warnings
    assert len(warnings) == 3 and not any(SECRET in w for w in warnings)
    assert "mysql://u:***@h/db" in warnings[0]


def test_the_fleet_database_is_named_without_its_password() -> None:
    """The fleet's messages name its database through the same redaction as the lock servers'
    (core.config.servers.redact_url), URL and libpq keyword forms alike."""
    import psycopg

    from core.config.model import FleetSpec
    from core.fleet.store import fleet_error

    for dsn in ("postgresql://lw:s3cret@db.example/lockwarden",
                "host=db.example dbname=lockwarden user=lw password=s3cret"):
        err = fleet_error(FleetSpec(dsn), psycopg.OperationalError("connection refused"))
        assert "s3cret" not in str(err) and "db.example" in str(err)
