"""The detail pane says which way a live holder's liveness is followed (app/table/detail.py,
``liveness_text``; docs/watching.md, "Holders' exits"): by the kernel (a pidfd) or by the
liveness pass every 2 s, from the status's evidence (``Evidence.followed``), worded by
core.reasons. Real processes, a real watcher."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.table.detail import DetailPane
from core.config import WatchSpec
from core.verdicts.inspect import inspect
from core.watch.watcher import Watcher
from tests.support.exit_holders import holders, sleeper, write_lock  # noqa: F401

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs pidfds (Linux)")


@pytest.fixture
def held(lockdir: Path, holders: list[subprocess.Popen[bytes]]) -> Iterator[Path]:  # noqa: F811
    holders.append(sleeper())
    path = lockdir / "held.lock"
    write_lock(path, holders[-1].pid)
    yield path


def _liveness(qtbot: Any, lockdir: Path, path: Path, **kw: Any) -> str:
    w = Watcher([WatchSpec(str(lockdir))], lambda cs: None, liveness_interval=2.0, **kw)
    try:
        w.start()
        st = next(s for s in w.snapshot() if s.path == str(path))
    finally:
        w.close()
    pane = DetailPane()
    qtbot.addWidget(pane)
    pane.show_status(st)
    return pane.values["Liveness"].text()


def test_followed_by_the_kernel(qtbot: Any, lockdir: Path, held: Path) -> None:
    text = _liveness(qtbot, lockdir, held)
    assert text.startswith("alive — liveness followed by the kernel (pidfd)"), text


def test_checked_by_the_pass_when_no_descriptor_is_spared(qtbot: Any, lockdir: Path,
                                                          held: Path) -> None:
    text = _liveness(qtbot, lockdir, held, exit_budget=0)
    assert text.startswith("alive — liveness checked every 2 s: no descriptor to spare"), text


def test_outside_the_watcher_nothing_is_said(qtbot: Any, held: Path) -> None:
    pane = DetailPane()
    qtbot.addWidget(pane)
    pane.show_status(inspect(str(held)))
    assert pane.values["Liveness"].text() == "alive"
