"""Shared pytest fixtures: fixture lock files, temp lock directories."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.kernel_holders import procs  # noqa: F401  (real kernel-lock holders, killed after)

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
