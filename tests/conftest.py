"""Shared pytest fixtures: fixture lock files, temp lock directories, private per-user state,
the in-process watcher, the lock servers, an X display with a tray. Helpers the tests share
live in tests/support/ (a test module never imports another test module:
tests/test_house.py)."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.servers import (
    EtcdServer,
    PgServer,
    RedisServer,
    start_etcd,
    start_pg,
    start_redis,
)

if TYPE_CHECKING:
    from core.config import WatchSpec
    from core.watch.watcher import Watcher
    from tests.support.watch import Recorder

# Widgets and models are tested offscreen; tray tests start their own Xvfb + trayer and run
# Qt in a subprocess with QT_QPA_PLATFORM=xcb (docs/DESIGN.md, "Testing").
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# `lockwarden watch` and the app record what they see (docs/history.md), and forced
# operations keep the foreign files they remove in the desktop trash (send2trash:
# $XDG_DATA_HOME/Trash for files on the home's file system) or in the quarantine folder under
# platformdirs' data directory (docs/engine.md, "Nothing is simply unlinked"): the whole run,
# and every process it starts, gets a private one, never the user's own. Set before anything
# imports send2trash, which reads XDG_DATA_HOME once.
_DATA_HOME = tempfile.mkdtemp(prefix="lockwarden-test-data-")
os.environ["XDG_DATA_HOME"] = _DATA_HOME
atexit.register(shutil.rmtree, _DATA_HOME, True)

DATA = Path(__file__).parent / "data"
FIXTURES = DATA / "fixtures"


@pytest.fixture(autouse=True)
def _audit_logs_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """After each test, the chain heads this process held back are written and its audit logs
    closed (core.audit.appender) while the test's environment (its private state directory)
    is still in place, so none lands in another test's state directory or the user's; and the
    process's audit ``via`` is the API's again (core.audit.model.set_via)."""
    yield
    import sys

    appender = sys.modules.get("core.audit.appender")
    if appender is not None:
        appender.close_all()
    model = sys.modules.get("core.audit.model")
    if model is not None:  # a test that ran the CLI in-process set this process's "via"
        model.set_via("api")


@pytest.fixture
def fixtures_dir(tmp_path: Path) -> Path:
    """A private copy of the reference tools' lock files (tests/data/fixtures)."""
    dest = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, dest)
    return dest


@pytest.fixture
def lockdir(tmp_path: Path) -> Path:
    """An empty directory for lock files."""
    d = tmp_path / "locks"
    d.mkdir()
    return d


@pytest.fixture
def make_app(
    qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Any]]:
    """Factory of offscreen :class:`app.application.LockwardenApp` instances watching the
    given directories, with a private config and XDG directories; all are quit (releasing
    what they hold) and disposed after the test. Qt is imported only by the tests using it."""
    from PySide6.QtWidgets import QApplication

    from app.application import LockwardenApp
    from core import config as cfgmod

    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    apps: list[Any] = []

    def make(dirs: list[Path], *, tray: bool = False, stale_after: float = 3600.0,
             **notes: Any) -> Any:
        cfg_path = tmp_path / "cfg" / "config.toml"
        cfg = cfgmod.Config(
            watches=[cfgmod.WatchSpec(path=str(d), stale_after=stale_after) for d in dirs],
            notifications=cfgmod.NotificationSettings(**notes))
        cfgmod.save(cfg, str(cfg_path))
        qapp = QApplication.instance()
        assert isinstance(qapp, QApplication)
        lw = LockwardenApp(qapp, config_path=str(cfg_path), use_tray=tray)
        apps.append(lw)
        return lw

    yield make
    for lw in apps:
        lw.finish_quit(release=True)
        lw.dispose()


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """The processes a test started (kernel-lock holders: tests/support/kernel_holders.py
    ``hold``); killed and reaped after it."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


@pytest.fixture
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process's per-user directories in the test's temp dir, for it and every process
    it starts with the environment of the moment (tests/support/cli.py ``cli_env``, ``lw``):
    ``HOME`` (tmp_path/home), ``XDG_STATE_HOME`` (the per-user audit log and chain heads),
    ``XDG_DATA_HOME`` (history, quarantine), ``XDG_CONFIG_HOME`` (the configuration), and no
    ``LOCKWARDEN_CONFIG``. Returns the state directory (tmp_path/state)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("LOCKWARDEN_CONFIG", raising=False)
    return tmp_path / "state"


@pytest.fixture
def private_env(private_state: Path) -> dict[str, str]:
    """The environment of a CLI process sharing the test's :func:`private_state`."""
    from tests.support.cli import cli_env

    return cli_env()


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A temp directory an unprivileged user can enter (pytest's tmp_path is 0700 root)."""
    d = Path(tempfile.mkdtemp(prefix="lockwarden-test-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def watch() -> Iterator[Callable[..., tuple[Watcher, Recorder]]]:
    """Factory of started in-process watchers (core.watch.watcher) reporting to a
    :class:`tests.support.watch.Recorder` whose model starts from the first snapshot:
    ``watch(specs, **kw) -> (watcher, recorder)``; all are closed after the test."""
    from core.watch.watcher import Watcher
    from tests.support.watch import Recorder

    made: list[Watcher] = []

    def make(specs: list[WatchSpec], **kw: Any) -> tuple[Watcher, Recorder]:
        rec = Recorder()
        w = Watcher(specs, rec.on_change, on_dirs=rec.on_dirs, **kw)
        made.append(w)
        w.start()
        rec.model = {s.path: s for s in w.snapshot()}
        return w, rec

    yield make
    for w in made:
        w.close()


@pytest.fixture(scope="session")
def xtray() -> Iterator[str]:
    """A private Xvfb display with trayer as the system tray host, one per session; yields
    DISPLAY (tests/support/xvfb.py; skips without Xvfb and trayer)."""
    from tests.support.xvfb import tray_display

    yield from tray_display()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One private redis-server per session (tests/support/servers.py)."""
    server = start_redis(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One private PostgreSQL cluster per session (tests/support/servers.py)."""
    server = start_pg()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    """One private etcd per session (tests/support/servers.py)."""
    server = start_etcd(tmp_path_factory.mktemp("etcd"))
    yield server
    server.stop()


@pytest.fixture
def own_audit_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The per-user audit log goes to the test's temp dir (``XDG_STATE_HOME`` only: the
    servers' processes keep the session's ``HOME``): returns the log's path. Every test of
    tests/remote has it (tests/remote/conftest.py)."""
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state / "lockwarden" / "log" / "audit.log"
