"""The fleet in the app (docs/gui.md "Fleet", docs/fleet.md "The app") against a real
PostgreSQL, real offscreen Qt, real files, and hosts simulated by processes in UTS namespaces of
their own (``unshare -u``) as in tests/remote/test_fleet.py:

- another host's published locks are rows of the table with their Host; the host filter; the
  Hosts panel (heartbeat, locks, silent hosts);
- actions on another host's lock only where the same file is here (a shared directory), refused
  with the reason as tooltip for a path that is not here or a different file at that path;
- a holder on "host B" SIGKILLed: this host's row of B's lock turns stale by B's report;
- the database stopped mid-run: a problem in the Problems panel, the local rows keep updating,
  and once it is back the problem goes and every local lock is published (caught up).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'psycopg[binary]')")

from app.table.columns import Col
from app.table.fleet_rows import fleet_key, fleet_origin
from core.codes import Code
from core.config.model import FleetSpec
from core.fleet.store import Publisher, connect, read_snapshot
from core.record import State
from core.verdicts.inspect import inspect
from tests.support.fleet import (
    FLEET_ENV,
    HOLDER,
    dsn,
    fresh_fleet,
    on_host,
    pg_ctl,
)
from tests.support.servers import PG_PASSWORD, PgServer, start_pg

pytestmark = pytest.mark.slow  # real lock servers (started once a session) and processes

UNSHARE = sys.platform.startswith("linux") and os.geteuid() == 0 and bool(shutil.which("unshare"))


def _fleet_toml(pg: PgServer, host: str | None) -> str:
    return (f'[fleet]\ndsn = "{dsn(pg)}"\npassword_env = "LOCKWARDEN_FLEET_PW"\n'
            + (f'host = "{host}"\n' if host else "") + "interval = 0.5\nsilent_after = 3\n")


@pytest.fixture
def app_for(qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``app_for(watched_dir, pg)``: a started offscreen app of host ``fleet-a`` watching
    ``watched_dir`` and publishing to ``pg`` (quit and disposed after the test)."""
    from PySide6.QtWidgets import QApplication

    from app.application import LockwardenApp

    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.setenv("LOCKWARDEN_FLEET_PW", PG_PASSWORD)
    apps: list[Any] = []

    def make(watched: Path, pg: PgServer | None) -> Any:
        cfg = tmp_path / "cfg" / "config.toml"
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(f'[[watch]]\npath = "{watched}"\n\n'
                       + (_fleet_toml(pg, "fleet-a") if pg is not None else ""))
        os.chmod(cfg, 0o600)
        qapp = QApplication.instance()
        assert isinstance(qapp, QApplication)
        lw = LockwardenApp(qapp, config_path=str(cfg), use_tray=False)
        apps.append(lw)
        lw.start(show_window=True)
        return lw

    yield make
    for lw in apps:
        lw.finish_quit(release=True)
        lw.dispose()


def _record(path: Path, pid: int, host: str, tag: str) -> None:
    path.write_text(f"pid={pid}\nhost={host}\ntimestamp={int(time.time())}\ntag={tag}\n")


def _cell(lw: Any, key: str, col: Col) -> str:
    row = lw.model.row_of(key)
    assert row is not None, key
    return str(lw.model.data(lw.model.index(row, col)))


def _shown_hosts(lw: Any) -> set[str]:
    p = lw.proxy
    return {str(p.data(p.index(r, Col.HOST))) for r in range(p.rowCount())}


def test_another_hosts_locks_host_filter_hosts_panel_and_action_safety(
        app_for: Any, fresh_db: PgServer, tmp_path: Path, qtbot: Any) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    _record(mine / "local.lock", os.getpid(), "fleet-a", "here")
    shared, private = tmp_path / "shared", tmp_path / "b-private"
    shared.mkdir()
    private.mkdir()
    _record(shared / "build.lock", 4242, "fleet-b", "shared")
    _record(shared / "swapped.lock", 4243, "fleet-b", "theirs")
    _record(private / "tmp.lock", 4244, "fleet-b", "private")
    # host B publishes its three locks (its own publisher, its own connection)
    pub_b = Publisher(FleetSpec(dsn(fresh_db), password_env="LOCKWARDEN_FLEET_PW",
                                host="fleet-b", interval=0.5))
    try:
        pub_b.publish([inspect(str(p)) for p in (shared / "build.lock",
                                                  shared / "swapped.lock",
                                                  private / "tmp.lock")])
    finally:
        pub_b.close()
    shutil.rmtree(private)  # B's private /tmp: not here
    _record(shared / "swapped.lock", 999_999, "fleet-c", "another")  # not B's lock here
    import psycopg

    with psycopg.connect(**fresh_db.conninfo(), autocommit=True) as admin, \
            admin.transaction():  # a host name nobody bound (a superuser's rows: no RLS)
        admin.execute("INSERT INTO lockwarden_hosts (host, interval_s) VALUES ('fleet-x', 2)")
        admin.execute("INSERT INTO lockwarden_locks (host, path, state, liveness, reasons,"
                      " verdict) VALUES ('fleet-x', '/x.lock', 'stale', 'dead', '[]',"
                      " '{\"path\": \"/x.lock\", \"state\": \"stale\", \"liveness\":"
                      " \"dead\"}')")

    lw = app_for(mine, fresh_db)
    w = lw.window
    build = fleet_key("fleet-b", str(shared / "build.lock"))
    gone = fleet_key("fleet-b", str(private / "tmp.lock"))
    swapped = fleet_key("fleet-b", str(shared / "swapped.lock"))
    qtbot.waitUntil(lambda: all(lw.model.status_of(k) is not None
                                for k in (build, gone, swapped)), timeout=20_000)
    qtbot.waitUntil(lambda: lw.model.status_of(str(mine / "local.lock")) is not None,
                    timeout=20_000)
    # one table: B's locks with their Host beside this host's own
    assert _cell(lw, build, Col.HOST) == "fleet-b"
    assert _cell(lw, build, Col.TAG) == "shared"
    assert _cell(lw, str(mine / "local.lock"), Col.HOST) == "fleet-a"
    assert not w.table.isColumnHidden(Col.HOST)
    assert lw.model.headerData(Col.HOST, Qt.Orientation.Horizontal) == "Host"

    # the Hosts panel: both hosts, B silent (its one heartbeat is older than 3 s soon)
    assert w.hosts.isVisible() and w.act_hosts.isEnabled()
    assert w.act_hosts.shortcut().toString() == "Ctrl+Shift+O"
    assert w.hosts.accessibleName() == "Hosts" and w.hosts.table.accessibleName()
    qtbot.waitUntil(lambda: {r[0] for r in w.hosts.rows()} == {"fleet-a", "fleet-b",
                                                                 "fleet-x"}, timeout=20_000)
    rows = {r[0]: r for r in w.hosts.rows()}
    assert rows["fleet-b"][2] == "3"  # locks published
    assert rows["fleet-x"][2] == "0" and rows["fleet-x"][4] == "not trusted"  # unbound
    assert lw.model.status_of(fleet_key("fleet-x", "/x.lock")) is None
    assert rows["fleet-a"][4].startswith("live") and "this host" in rows["fleet-a"][4]
    qtbot.waitUntil(lambda: any(r[0] == "fleet-b" and r[4] == "silent"
                                for r in w.hosts.rows()), timeout=20_000)
    assert "silent: fleet-b" in w.hosts.summary.text()

    # the host filter: only B's locks; then every host again
    w.host_filter.choose("fleet-b")
    assert _shown_hosts(lw) == {"fleet-b"} and lw.proxy.rowCount() == 3
    w.hosts.hostChosen.emit("fleet-a")  # Enter on a host in the panel
    assert w.host_filter.host() == "fleet-a" and _shown_hosts(lw) == {"fleet-a"}
    w.host_filter.choose(None)
    assert _shown_hosts(lw) == {"fleet-a", "fleet-b"}

    # actions: B's lock in a shared directory (the same file here): offered, on the file
    qtbot.waitUntil(lambda: lw.fleet.safety(swapped) is not None, timeout=20_000)
    assert w.select_path(build)
    assert w.act_force.isEnabled() and w.act_copy.isEnabled()
    asked: list[str] = []
    w.copyPathRequested.connect(asked.append)
    w.act_copy.trigger()
    assert asked == [str(shared / "build.lock")]
    # a lock in B's private /tmp (not here): refused, and the tooltip says why
    assert w.select_path(gone)
    assert not w.act_force.isEnabled() and not w.act_reclaim.isEnabled()
    assert not w.act_open_folder.isEnabled()
    assert "does not exist on this host" in w.act_force.toolTip()
    assert "fleet-b" in w.act_force.toolTip()
    # a different file at the same path (B's lock was in a directory this host does not share)
    assert w.select_path(swapped)
    assert not w.act_force.isEnabled()
    assert "is not the lock fleet-b published" in w.act_reclaim.toolTip()
    # back on a lock of this host: the actions' own tooltips
    assert w.select_path(str(mine / "local.lock"))
    assert "Not from here" not in w.act_force.toolTip()
    # the shared lock force-released from here: the same engine, on the file itself
    assert w.select_path(build) and w.act_force.isEnabled()
    n = len(lw.ops.dialogs)
    errors: list[object] = []
    lw.ops.errorShown.connect(lambda *a: errors.append(a))
    w.act_force.trigger()
    dlg = lw.ops.dialogs[n]
    dlg.reason.setText("build host B is down")
    dlg.accept()
    qtbot.waitUntil(lambda: not (shared / "build.lock").exists(), timeout=60_000)
    assert not errors
    # no fleet any more (Settings): the other hosts' rows, the column and the panel go
    lw.set_fleet(replace(lw.config, fleet=None))
    qtbot.waitUntil(lambda: w_hidden(lw), timeout=20_000)


@pytest.mark.skipif(not UNSHARE, reason="hosts are simulated with UTS namespaces (root)")
def test_a_holder_killed_on_host_b_turns_stale_in_this_hosts_table(
        app_for: Any, fresh_db: PgServer, tmp_path: Path, qtbot: Any) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    lock = shared / "deploy.lock"
    cfg_b = tmp_path / "b.toml"
    cfg_b.write_text(f'[[watch]]\npath = "{shared}"\n\n' + _fleet_toml(fresh_db, None))
    os.chmod(cfg_b, 0o600)

    def on_b(*argv: str) -> subprocess.Popen[str]:
        return subprocess.Popen(on_host("fleet-b", *argv), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=FLEET_ENV)

    agent = on_b(sys.executable, "-m", "core", "agent", "--config", str(cfg_b))
    holder = on_b(sys.executable, "-c", HOLDER, str(lock))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        lw = app_for(shared, fresh_db)
        path = str(lock)

        def codes() -> set[Code]:
            st = lw.model.status_of(path)
            return set() if st is None else {r.code for r in st.reasons}

        qtbot.waitUntil(lambda: Code.FLEET_REPORT in codes(), timeout=30_000)
        st = lw.model.status_of(path)
        assert st.state is State.HELD and _cell(lw, path, Col.HOST) == "fleet-b"
        killed = time.monotonic()
        holder.kill()
        holder.wait(10)
        qtbot.waitUntil(lambda: (s := lw.model.status_of(path)) is not None
                        and s.state is State.STALE and Code.FLEET_REPORT in codes(),
                        timeout=30_000)
        print(f"\nstale in host A's table {time.monotonic() - killed:.2f} s after the kill")
        st = lw.model.status_of(path)
        report = next(r for r in st.reasons if r.code is Code.FLEET_REPORT)
        assert report.get("host") == "fleet-b" and report.get("liveness") == "dead"
        assert _cell(lw, path, Col.STATE).lower().startswith("stale")
        # the fleet taken out of the configuration: the local rules judge the row again
        lw.set_fleet(replace(lw.config, fleet=None))
        qtbot.waitUntil(lambda: Code.FLEET_REPORT not in codes(), timeout=20_000)
        assert lw.model.status_of(path).state is State.HELD  # remote: the age rule
        assert w_hidden(lw)
    finally:
        for p in (holder, agent):
            if p.poll() is None:
                p.kill()
            p.communicate(timeout=30)


def w_hidden(lw: Any) -> bool:
    """No fleet shown: no Host column, no Hosts panel, no fleet rows."""
    w = lw.window
    return (w.table.isColumnHidden(Col.HOST) and not w.hosts.isVisible()
            and not any(fleet_origin(st.path) for st in lw.model.statuses()))


def test_the_database_stopped_mid_run_is_a_problem_and_the_local_table_goes_on(
        app_for: Any, tmp_path: Path, qtbot: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pg = start_pg()
    fresh_fleet(pg)
    try:
        mine = tmp_path / "mine"
        mine.mkdir()
        _record(mine / "one.lock", os.getpid(), "fleet-a", "one")
        lw = app_for(mine, pg)
        w = lw.window
        qtbot.waitUntil(lambda: any(r[0] == "fleet-a" and r[2] == "1"
                                    for r in w.hosts.rows()), timeout=30_000)
        assert not w.problems.problems("fleet")

        pg_ctl(pg, "-m", "immediate", "-w", "stop")
        qtbot.waitUntil(lambda: bool(w.problems.problems("fleet")), timeout=30_000)
        problem = w.problems.problems("fleet")[0]
        assert "fleet database" in problem and "local table goes on" in problem
        assert PG_PASSWORD not in problem
        assert w.problems.isVisible()  # opened when the problem started
        assert "cannot be read" in w.hosts.summary.text()
        # the local monitor carries on: a new lock and a removal reach the table
        _record(mine / "two.lock", os.getpid(), "fleet-a", "two")
        qtbot.waitUntil(lambda: lw.model.status_of(str(mine / "two.lock")) is not None,
                        timeout=20_000)
        (mine / "one.lock").unlink()
        qtbot.waitUntil(lambda: lw.model.status_of(str(mine / "one.lock")) is None,
                        timeout=20_000)
        _record(mine / "three.lock", os.getpid(), "fleet-a", "three")
        qtbot.waitUntil(lambda: lw.model.status_of(str(mine / "three.lock")) is not None,
                        timeout=20_000)

        opts = f"-k {pg.sockdir} -p {pg.port} -c listen_addresses=127.0.0.1 -c fsync=off"
        pg_ctl(pg, "-l", os.path.join(pg.sockdir, "pg.log"), "-w", "-o", opts, "start")
        qtbot.waitUntil(lambda: not w.problems.problems("fleet"), timeout=30_000)
        monkeypatch.setenv("LOCKWARDEN_FLEET_PW", PG_PASSWORD)
        spec = FleetSpec(dsn(pg), password_env="LOCKWARDEN_FLEET_PW", host="fleet-a")

        def published() -> list[str]:
            conn = connect(spec)
            try:
                return sorted(os.path.basename(lk.path)
                              for lk in read_snapshot(conn, locks=True).locks)
            finally:
                conn.close()

        qtbot.waitUntil(lambda: published() == ["three.lock", "two.lock"], timeout=20_000)
        assert "cannot be read" not in w.hosts.summary.text()
    finally:
        pg.stop()


def test_without_a_fleet_no_host_column_no_hosts_panel(app_for: Any, tmp_path: Path,
                                                        qtbot: Any) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    lw = app_for(mine, None)
    w = lw.window
    assert not lw.fleet.active
    assert w.table.isColumnHidden(Col.HOST)
    assert not w.act_hosts.isEnabled() and not w.hosts.isVisible()
    assert not w.problems.problems("fleet")


def test_a_hung_database_is_a_problem_and_the_local_table_goes_on(
        app_for: Any, tmp_path: Path, qtbot: Any) -> None:
    """A server that stops answering (SIGSTOP: the connection stays open, nothing times out
    on the server's side) holds the worker at most the fleet's deadline, never the GUI thread:
    a problem says so (the deadline's, or the app's own watchdog's), and everything is back
    once the server answers again."""
    import psutil

    pg = start_pg()
    fresh_fleet(pg)
    with open(os.path.join(pg.data, "postmaster.pid"), encoding="ascii") as f:
        postmaster = psutil.Process(int(f.readline()))
    server: list[psutil.Process] = []
    try:
        mine = tmp_path / "mine"
        mine.mkdir()
        lw = app_for(mine, pg)
        w = lw.window
        qtbot.waitUntil(lambda: any(r[0] == "fleet-a" for r in w.hosts.rows()),
                        timeout=30_000)
        server += [postmaster, *postmaster.children(recursive=True)]  # the app's backends too
        for p in server:
            p.suspend()
        _record(mine / "one.lock", os.getpid(), "fleet-a", "one")  # wakes the worker: hangs
        qtbot.waitUntil(lambda: lw.model.status_of(str(mine / "one.lock")) is not None,
                        timeout=20_000)
        qtbot.waitUntil(lambda: any("no answer" in p or "no complete answer within 10 s" in p
                                    for p in w.problems.problems("fleet")), timeout=60_000)
        assert "cannot be read" in w.hosts.summary.text()
        _record(mine / "two.lock", os.getpid(), "fleet-a", "two")  # the table goes on
        qtbot.waitUntil(lambda: lw.model.status_of(str(mine / "two.lock")) is not None,
                        timeout=20_000)
        for p in server:
            p.resume()
        qtbot.waitUntil(lambda: not w.problems.problems("fleet"), timeout=60_000)
        qtbot.waitUntil(lambda: any(r[0] == "fleet-a" and r[2] == "2"
                                    for r in w.hosts.rows()), timeout=30_000)
    finally:
        for p in server:
            try:
                p.resume()
            except psutil.Error:
                pass
        pg.stop()
