"""One lock in a directory two hosts share, published by both (docs/fleet.md, "Shared locks"),
against the session's real PostgreSQL, hosts simulated by UTS namespaces (``unshare -u``) as in
tests/remote/test_fleet.py: after B's holder is SIGKILLed, B's agent publishes the lock stale
(holder dead) while A's still publishes it held (liveness remote: A cannot check B's PID);
``list --fleet`` (JSON and table) and the app's fleet rows show it once, with B's verdict,
seen by both hosts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.fleet.schema import CHANNEL
from core.fleet.shared import fold, lock_identity
from tests.support.fleet import FLEET_ENV, HOLDER, Procs, fleet_config, on_host
from tests.support.servers import PgServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not sys.platform.startswith("linux") or os.geteuid() != 0,
        reason="hosts are simulated with UTS namespaces (unshare -u, as root)"),
]

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install psycopg)")


def _published(conn: Any, path: str) -> dict[str, tuple[str, str]]:
    """``{host: (state, liveness)}`` of the rows published for ``path``."""
    rows = conn.execute("SELECT host, state, liveness FROM lockwarden_locks WHERE path = %s",
                        (path,)).fetchall()
    return {host: (state, liveness) for host, state, liveness in rows}


def _until_published(conn: Any, path: str, want: dict[str, tuple[str, str]] | None,
                     timeout: float = 30.0) -> None:
    """Wait (on the fleet's NOTIFYs, ``conn`` LISTENing) until ``path``'s rows are ``want``
    (None: both hosts published one)."""
    import time

    def done() -> bool:
        got = _published(conn, path)
        return got == want if want is not None else set(got) == {"fleet-a", "fleet-b"}

    deadline = time.monotonic() + timeout
    while not done():
        left = deadline - time.monotonic()
        assert left > 0, f"published {_published(conn, path)}, not {want}"
        for _n in conn.notifies(timeout=min(left, 1.0), stop_after=1):
            pass


def _list(cfg: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([sys.executable, "-m", "core", "list", "--fleet", "--config", str(cfg),
                          *argv], capture_output=True, text=True, env=FLEET_ENV, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    return out


def test_a_lock_two_hosts_publish_is_listed_once_with_the_holder_hosts_verdict(
        fresh_db: PgServer, fleet_procs: Procs, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    lock = shared / "deploy.lock"
    other = shared / "solo.lock"  # a lock naming no host: never folded (each host's verdict)
    cfg_a = fleet_config(tmp_path / "a.toml", fresh_db, shared, silent_after=600)
    cfg_b = fleet_config(tmp_path / "b.toml", fresh_db, shared, silent_after=600)
    with psycopg.connect(**fresh_db.conninfo(), autocommit=True) as conn:
        conn.execute(f"LISTEN {CHANNEL}")
        for host, cfg in (("fleet-a", cfg_a), ("fleet-b", cfg_b)):
            fleet_procs.start(on_host(host, sys.executable, "-m", "core", "agent", "--config",
                                      str(cfg)))
        holder = fleet_procs.start(on_host("fleet-b", sys.executable, "-c", HOLDER, str(lock)))
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        other.write_text("pid=1\ntimestamp=1\n")  # sema without host=: each judges it here
        _until_published(conn, str(lock), {"fleet-a": ("held", "remote"),
                                           "fleet-b": ("held", "alive")})

        holder.kill()
        holder.wait(10)
        # the contradiction of the raw rows: B judged its PID dead, A cannot judge it
        _until_published(conn, str(lock), {"fleet-a": ("held", "remote"),
                                           "fleet-b": ("stale", "dead")})
        _until_published(conn, str(other), None)

        rows = json.loads(_list(cfg_a, "--json").stdout)
        mine = [r for r in rows if r["path"] == str(lock)]
        assert len(mine) == 1, mine
        assert (mine[0]["state"], mine[0]["liveness"], mine[0]["host_published"],
                mine[0]["seen_by"]) == ("stale", "dead", "fleet-b", ["fleet-a", "fleet-b"])
        assert (mine[0]["host"], mine[0]["pid"]) == ("fleet-b", holder.pid)
        solo = [r for r in rows if r["path"] == str(other)]
        assert sorted(r["host_published"] for r in solo) == ["fleet-a", "fleet-b"]
        assert all("seen_by" not in r for r in solo)

        table = [line for line in _list(cfg_a).stdout.splitlines()
                 if line.endswith(str(lock))]
        assert len(table) == 1, table
        assert table[0].startswith("fleet-b (seen by fleet-a, fleet-b)  stale"), table

        # the app's fleet rows: the same rule (a viewer that watches no shared directory)
        from app.fleet.bridge import FleetBridge
        from app.table.fleet_rows import fleet_key
        from core.fleet.hosts import published_locks

        shown: dict[str, Any] = {}
        updates = FleetBridge._fleet_rows(None, published_locks(conn), None, {}, {}, shown)
        about = [(key, st) for key, st in updates if st is not None and st.path.endswith(
            str(lock))]
        assert [key for key, _st in about] == [fleet_key("fleet-b", str(lock))]
        st = about[0][1]
        assert (st.state.value, st.liveness.value) == ("stale", "dead")
        seen = [r for r in st.reasons if r.code.value == "fleet_seen_by"]
        assert [dict(r.params) for r in seen] == [{"hosts": "fleet-a, fleet-b",
                                                    "judged_by": "fleet-b"}]
        assert sorted(key for key, _st in updates if key.endswith(str(other))) == [
            fleet_key("fleet-a", str(other)), fleet_key("fleet-b", str(other))]


def test_the_rule_prefers_the_holders_host_and_folds_only_the_same_record() -> None:
    def key(row: tuple[str, str, str | None, int]) -> tuple[str, Any]:
        host, path, record_host, pid = row
        return host, lock_identity(path, "sema", record_host, pid, "1700000000", "ci")

    rows = [("a", "/s/x.lock", "B.example", 7), ("b", "/s/x.lock", "B.example", 7),
            ("c", "/s/x.lock", "B.example", 7),  # the same lock: B (short name) judges it
            ("a", "/s/y.lock", "b", 7), ("b", "/s/y.lock", "b", 8),  # two records: both
            ("a", "/s/z.lock", None, 7), ("b", "/s/z.lock", None, 7),  # no host named: both
            ("a", "/s/w.lock", "c2", 9), ("b", "/s/w.lock", "c2", 9)]  # its host not here
    out = [(f.item[0], f.item[1], f.seen_by, len(f.folded)) for f in fold(rows, key)]
    assert out == [("b", "/s/x.lock", ("a", "b", "c"), 2), ("a", "/s/y.lock", ("a",), 0),
                   ("b", "/s/y.lock", ("b",), 0), ("a", "/s/z.lock", ("a",), 0),
                   ("b", "/s/z.lock", ("b",), 0), ("a", "/s/w.lock", ("a", "b"), 1)]


def test_the_apps_rows_follow_the_rule_as_hosts_publish_and_withdraw() -> None:
    """The app's fleet rows (a viewer watching no shared directory): one host's row alone,
    then the holder's host publishing the same lock takes its place (with ``fleet_seen_by``),
    a different record at that path is a row of its own, and a host withdrawing is undone."""
    from app.fleet.bridge import FleetBridge
    from app.table.fleet_rows import fleet_key
    from core.fleet.hosts import PublishedLock

    path = "/nfs/build/deploy.lock"
    base = {"path": path, "format": "sema", "host": "hostb", "pid": 42, "timestamp": 1700,
            "holder": None, "reasons": []}
    a = PublishedLock("hosta", path, {**base, "state": "held", "liveness": "remote"})
    b = PublishedLock("hostb", path, {**base, "state": "stale", "liveness": "dead"})
    rows: dict[str, Any] = {}
    shown: dict[str, Any] = {}

    def turn(published: list[PublishedLock], asked: set[str] | None
             ) -> list[tuple[str, str | None, list[str]]]:
        updates = FleetBridge._fleet_rows(None, published, asked, rows, {}, shown)
        return sorted((key, None if st is None else st.state.value,
                       [r.code.value for r in st.reasons] if st is not None else [])
                      for key, st in updates)

    ka, kb = fleet_key("hosta", path), fleet_key("hostb", path)
    assert turn([a], None) == [(ka, "held", [])]
    assert turn([b], {"hostb"}) == [(ka, None, []), (kb, "stale", ["fleet_seen_by"])]
    other = PublishedLock("hosta", path, {**a.verdict, "pid": 43})  # another lock file there
    assert turn([other], {"hosta"}) == [(ka, "held", []), (kb, "stale", [])]
    assert turn([a], {"hosta"}) == [(ka, None, []), (kb, "stale", ["fleet_seen_by"])]
    assert turn([], {"hostb"}) == [(ka, "held", []), (kb, None, [])]
