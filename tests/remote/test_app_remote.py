"""Locks on a real redis-server in the app's table (docs/remote.md, "In the app"): polled off
the GUI thread, shown with their holder and verdict under their URL, force-released through the
same confirmation (checked against the token shown, audited), and an unreachable server shown
in the status line while the app keeps working. Real server, real python-redis-lock, real
offscreen Qt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

redis = pytest.importorskip("redis", reason="redis-py is not installed (pip install redis)")
redis_lock = pytest.importorskip("redis_lock", reason="python-redis-lock is not installed")

from core import config as cfgmod  # noqa: E402
from core.config.model import ServerSpec  # noqa: E402
from core.record import State  # noqa: E402
from tests.support.servers import RedisServer, free_port  # noqa: E402

pytestmark = pytest.mark.slow  # real lock servers (started once a session) and processes


def _app(qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lockdir: Path,
         servers: list[ServerSpec]) -> Any:
    from PySide6.QtWidgets import QApplication

    from app.application import LockwardenApp

    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    cfg_path = tmp_path / "cfg" / "config.toml"
    cfgmod.save(cfgmod.Config(watches=[cfgmod.WatchSpec(path=str(lockdir))], servers=servers),
                str(cfg_path))
    qapp = QApplication.instance()
    assert isinstance(qapp, QApplication)
    return LockwardenApp(qapp, config_path=str(cfg_path), use_tray=False)


def test_redis_locks_in_the_table_and_force_release(
        qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lockdir: Path,
        redis_server: RedisServer) -> None:
    client = redis.Redis(port=redis_server.port)
    client.flushdb()
    held = redis_lock.Lock(client, "deploy", expire=60)
    assert held.acquire(blocking=False)
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    lw = _app(qtbot, tmp_path, monkeypatch, lockdir,
              [ServerSpec(kind="redis", url=url, profiles=["python-redis-lock"])])
    try:
        lw.start(show_window=True)
        path = f"{url}#lock:deploy"
        qtbot.waitUntil(lambda: lw.model.status_of(path) is not None, timeout=15_000)
        st = lw.model.status_of(path)
        assert st.state is State.HELD and st.record is not None
        assert st.record.effective_expiry() is not None  # its PTTL
        assert lw.window.select_path(path)
        assert lw.window.act_force.isEnabled() and not lw.window.act_reclaim.isEnabled()
        assert not lw.remote.problems
        n = len(lw.ops.dialogs)
        lw.window.act_force.trigger()
        dlg = lw.ops.dialogs[n]
        dlg.reason.setText("deploy host died")
        dlg.accept()
        qtbot.waitUntil(lambda: client.get("lock:deploy") is None, timeout=15_000)
        qtbot.waitUntil(lambda: lw.model.status_of(path) is None, timeout=15_000)
    finally:
        lw.finish_quit(release=True)
        lw.dispose()


def test_an_unreachable_server_is_a_status_line_problem(
        qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lockdir: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    lw = _app(qtbot, tmp_path, monkeypatch, lockdir,
              [ServerSpec(kind="redis", url=url, profiles=["python-redis-lock"])])
    try:
        lw.start(show_window=True)
        label = lw.window.status_line.servers_label
        qtbot.waitUntil(lambda: bool(lw.remote.problems), timeout=15_000)
        assert label.isVisibleTo(lw.window) and "1 lock server problem" in label.text()
        assert "127.0.0.1" in label.toolTip()
        # the watched directories are not held up by the server
        qtbot.waitUntil(lambda: lw.inventory.initial_done, timeout=15_000)
    finally:
        lw.finish_quit(release=True)
        lw.dispose()


def test_settings_tests_the_connection_of_each_server(
        qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lockdir: Path,
        redis_server: RedisServer) -> None:
    client = redis.Redis(port=redis_server.port)
    client.flushdb()
    held = redis_lock.Lock(client, "nightly", expire=60)
    assert held.acquire(blocking=False)
    good = f"redis://127.0.0.1:{redis_server.port}/0"
    bad = f"redis://127.0.0.1:{free_port()}/0"
    lw = _app(qtbot, tmp_path, monkeypatch, lockdir,
              [ServerSpec(kind="redis", url=good, profiles=["python-redis-lock"]),
               ServerSpec(kind="redis", url=bad, profiles=["python-redis-lock"])])
    try:
        dlg = lw.ops.open_settings()
        group = dlg.servers
        assert group.list.count() == 2 and group.list.item(0).text() == f"redis: {good}"
        with qtbot.waitSignal(group.tested, timeout=15_000):
            group.test.click()
        assert group.result.text() == "connected: 1 lock"
        group.list.setCurrentRow(1)
        with qtbot.waitSignal(group.tested, timeout=15_000):
            group.test.click()
        assert group.result.text().startswith("failed (unreachable)")
        dlg.reject()
    finally:
        held.release()
        lw.finish_quit(release=True)
        lw.dispose()


def test_keyspace_notifications_bring_changes_without_polling(
        qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lockdir: Path,
        redis_server: RedisServer) -> None:
    """Opted in (``notifications = true``), the poller turns on the server's keyspace events
    and follows them: with polling slowed to once an hour, a lock taken and released by the
    real python-redis-lock still appears and disappears in the table."""
    from app.bridges.remote_poller import RemotePoller

    client = redis.Redis(port=redis_server.port)
    client.flushdb()
    client.config_set("notify-keyspace-events", "")
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    lw = _app(qtbot, tmp_path, monkeypatch, lockdir, [])
    poller = RemotePoller(lw.inventory, lw, poll_s=3600.0)
    spec = ServerSpec(kind="redis", url=url, profiles=["python-redis-lock"], notifications=True)
    try:
        lw.start(show_window=False)
        poller.set_config(cfgmod.Config(servers=[spec]))
        qtbot.waitUntil(lambda: set("Kg$x") <= set(
            client.config_get("notify-keyspace-events")["notify-keyspace-events"]),
            timeout=15_000)
        qtbot.waitUntil(lambda: client.pubsub_numpat() >= 1, timeout=15_000)  # subscribed
        path = f"{url}#lock:feed"
        held = redis_lock.Lock(client, "feed", expire=60)
        assert held.acquire(blocking=False)
        qtbot.waitUntil(lambda: lw.model.status_of(path) is not None, timeout=15_000)
        held.release()
        qtbot.waitUntil(lambda: lw.model.status_of(path) is None, timeout=15_000)
        assert not poller.problems
    finally:
        poller.close()
        lw.finish_quit(release=True)
        lw.dispose()
