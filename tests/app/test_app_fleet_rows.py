"""Other hosts' locks as rows of the app's table (app/table/fleet_rows.py; docs/gui.md "Fleet"),
without a database: the row key, the published verdict read back, the Host and Directory
columns, and the action-safety rule against real files read by the engine."""

from __future__ import annotations

import time
from pathlib import Path

from app.table.columns import Col, static_text
from app.table.fleet_rows import (
    action_safety,
    display_path,
    fleet_key,
    fleet_origin,
    host_of,
    published_status,
    real_path,
)
from core.codes import Code
from core.record import State
from core.verdicts.inspect import inspect


def _published(path: Path) -> dict[str, object]:
    """What a host publishes for ``path`` (as core.fleet.store does: the verdict without its
    age, reasons as ``{"code", **params}``)."""
    st = inspect(str(path))
    d = st.to_dict()
    d.pop("age_s")
    d["reasons"] = [{"code": r.code.value, **dict(r.params)} for r in st.reasons]
    return d


def _lock(path: Path, pid: int, host: str) -> Path:
    path.write_text(f"pid={pid}\nhost={host}\ntimestamp={int(time.time()) - 60}\ntag=t\n")
    return path


def test_the_key_names_host_and_path_and_gives_them_back() -> None:
    key = fleet_key("build-7", "/nfs/cache/x.lock")
    assert fleet_origin(key) == ("build-7", "/nfs/cache/x.lock")
    assert real_path(key) == "/nfs/cache/x.lock"
    assert fleet_origin("/nfs/cache/x.lock") is None and real_path("/a") == "/a"
    assert fleet_origin("redis://h:6379/0#lock:a") is None


def test_a_published_verdict_is_a_row_with_its_host_and_reasons(tmp_path: Path) -> None:
    lock = _lock(tmp_path / "x.lock", 4242, "build-7")
    verdict = _published(lock)
    reasons = verdict["reasons"]
    assert isinstance(reasons, list)
    reasons.append({"code": "from_a_newer_version", "x": 1})
    st = published_status("build-7", str(lock), verdict)
    assert st.path == fleet_key("build-7", str(lock))
    assert st.state is State.HELD and st.record is not None
    assert (st.record.pid, st.record.host, st.record.tag) == (4242, "build-7", "t")
    assert st.record.timestamp == verdict["timestamp"]
    assert Code.REMOTE_HOST in {r.code for r in st.reasons}  # the host's own reasons
    assert all(r.code.value != "from_a_newer_version" for r in st.reasons)
    assert host_of(st, "here") == "build-7"
    assert static_text(st, Col.HOST, "here") == "build-7"
    assert static_text(st, Col.DIRECTORY, "here") == f"build-7:{tmp_path}"
    assert static_text(st, Col.LOCK, "here") == "x.lock"


def test_the_detail_pane_shows_a_fleet_rows_path_as_host_and_path(tmp_path: Path,
                                                                  qtbot: object) -> None:
    """The detail pane's Path of another host's lock is ``host:/path`` (as ``scp`` writes it),
    never the table's internal key (app/table/detail.py)."""
    from app.table.detail import DetailPane

    lock = _lock(tmp_path / "x.lock", 4242, "build-7")
    st = published_status("build-7", str(lock), _published(lock))
    pane = DetailPane()
    pane.show_status(st)
    assert pane.values["Path"].text() == f"build-7:{lock}"
    assert display_path(str(lock)) == str(lock)


def test_the_host_column_of_this_hosts_rows(tmp_path: Path) -> None:
    remote = inspect(str(_lock(tmp_path / "r.lock", 4242, "build-7")))
    assert host_of(remote, "here") == "build-7"
    (tmp_path / "plain.pid").write_text("4242\n")
    assert host_of(inspect(str(tmp_path / "plain.pid")), "here") == "here"


def test_actions_only_on_the_same_file_here(tmp_path: Path) -> None:
    shared = _lock(tmp_path / "shared.lock", 4242, "build-7")
    row = published_status("build-7", str(shared), _published(shared))
    ok = action_safety("build-7", str(shared), row, inspect(str(shared)))
    assert ok.ok and "shared file" in ok.why
    # not here (that host's private /tmp)
    missing = tmp_path / "gone.lock"
    gone = action_safety("build-7", str(missing), row, None)
    assert not gone.ok and "does not exist on this host" in gone.why and "build-7" in gone.why
    # another file at the same path here
    _lock(shared, 999, "elsewhere")
    other = action_safety("build-7", str(shared), row, inspect(str(shared)))
    assert not other.ok and "is not the lock build-7 published" in other.why
    # nothing recorded: this host cannot tell
    (tmp_path / "empty.lock").write_text("")
    bare = published_status("build-7", str(tmp_path / "empty.lock"),
                            _published(tmp_path / "empty.lock"))
    unknown = action_safety("build-7", str(tmp_path / "empty.lock"), bare,
                            inspect(str(tmp_path / "empty.lock")))
    assert not unknown.ok and "cannot tell" in unknown.why
