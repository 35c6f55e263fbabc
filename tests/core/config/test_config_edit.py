"""core.config.save edits the file that is there (docs/DESIGN.md, "Nothing lost"): comments and
tables it does not change are kept, a file that does not parse is never overwritten, and a file
changed on disk since it was read is merged, or the conflict named. Real files in temp dirs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from core import config
from core.config import WatchSpec
from core.config.edit import ConfigConflict, ConfigUnparsable
from core.config.model import ServerSpec

HAND_WRITTEN = """\
# my Lockwarden settings -- written by hand
[[watch]]  # the build farm's locks
path = "~/build-locks"   # expanded on load
stale_after = 600  # ten minutes: builds are short
colour = "blue"    # a key Lockwarden does not know

# the shared one
[[watch]]
path = "/srv/locks"

[ui]
theme = "dark"  # easier on the eyes
"""

SERVERS_ADDED_BY_HAND = """
# added while the app ran, as docs/remote.md says
[[postgres]]
dsn = "postgres://monitor@db.internal:5432/shop"
password_env = "LOCKWARDEN_PGPASS"

[[redis]]
url = "redis://cache.internal:6379/0"   # the deploy locks

[[etcd]]
endpoints = ["http://etcd1:2379"]
prefix = "locks/"
"""


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(config.CONFIG_ENV, raising=False)


def test_an_edit_keeps_comments_unknown_keys_and_tables_added_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(HAND_WRITTEN)
    seen = config.load(str(path))  # what Settings showed
    with path.open("a") as f:  # the user adds lock servers by hand while the app runs
        f.write(SERVERS_ADDED_BY_HAND)
    edited = replace(seen, watches=[replace(seen.watches[0], stale_after=1200.0),
                                    seen.watches[1]],
                     notifications=replace(seen.notifications, on_acquire=True), warnings=[])
    config.save(edited, str(path), base=seen)
    text = path.read_text()
    # the one key changed, on its own line, its comment kept; nothing else rewritten
    assert "stale_after = 1200  # ten minutes: builds are short\n" in text
    assert text.startswith(HAND_WRITTEN.replace("stale_after = 600", "stale_after = 1200"))
    assert SERVERS_ADDED_BY_HAND in text
    assert 'path = "~/build-locks"' in text  # not rewritten expanded
    back = config.load(str(path))
    assert [s.kind for s in back.servers] == ["postgres", "redis", "etcd"]
    assert back.servers[0].password_env == "LOCKWARDEN_PGPASS"
    assert back.notifications.on_acquire and back.watches[0].stale_after == 1200.0
    assert back.ui.theme == "dark"


def test_ok_without_changes_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(HAND_WRITTEN)
    before = path.stat().st_mtime_ns
    seen = config.load(str(path))
    config.save(replace(seen, warnings=[]), str(path), base=seen)
    assert path.read_text() == HAND_WRITTEN and path.stat().st_mtime_ns == before


@pytest.mark.parametrize("broken, line, column", [
    ('[[watch]]\npath = "/srv/locks"\nstale_after = 12 34\n', 3, 18),
    ('[[watch]\npath = "/srv/locks"\n', 1, 8),
])
def test_a_file_that_does_not_parse_is_never_overwritten(
        tmp_path: Path, broken: str, line: int, column: int) -> None:
    path = tmp_path / "config.toml"
    path.write_text(broken)
    cfg = config.load(str(path))
    assert cfg.load_error is not None and cfg.watches_are_default
    assert (cfg.load_error.line, cfg.load_error.column) == (line, column)
    assert f"line {line}, column {column}" in cfg.warnings[0]
    # the app runs on the defaults; saving them (Settings' OK, Pause notifications) refuses
    for new in (cfg, replace(cfg, notifications=replace(cfg.notifications, paused=True))):
        with pytest.raises(ConfigUnparsable) as ei:
            config.save(new, str(path), base=cfg)
        assert (ei.value.line, ei.value.column) == (line, column)
        assert path.read_text() == broken
    assert [p.name for p in tmp_path.iterdir()] == ["config.toml"]  # no temp file left


def test_a_file_that_is_not_utf8_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    raw = b'[ui]\ntheme = "dark"\n# caf\xe9 (latin-1)\n'
    path.write_bytes(raw)
    cfg = config.load(str(path))
    assert cfg.ui.theme == "dark"  # read as well as it can be
    assert cfg.load_error is not None and cfg.load_error.line == 3
    with pytest.raises(ConfigUnparsable):
        config.save(replace(cfg, ui=replace(cfg.ui, theme="light")), str(path), base=cfg)
    assert path.read_bytes() == raw


def test_a_file_fixed_by_hand_takes_the_edit(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[[watch]]\npath = "/srv/locks"\nstale_after = 12 34\n')
    cfg = config.load(str(path))  # broken: the defaults
    path.write_text('[[watch]]\npath = "/srv/locks"  # fixed\nstale_after = 1234\n')
    config.save(replace(cfg, notifications=replace(cfg.notifications, paused=True)),
                str(path), base=cfg)
    back = config.load(str(path))
    assert back.notifications.paused
    assert [(w.path, w.stale_after) for w in back.watches] == [("/srv/locks", 1234.0)]
    assert "# fixed" in path.read_text()


def test_changes_on_disk_since_read_are_merged(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(HAND_WRITTEN)
    seen = config.load(str(path))
    path.write_text(HAND_WRITTEN.replace('theme = "dark"', 'theme = "light"')
                    + '\n[[watch]]\npath = "/var/tmp/new"\n')
    mine = replace(seen, watches=[seen.watches[0]],  # /srv/locks removed in Settings
                   ui=replace(seen.ui, start_minimized=True))
    config.save(mine, str(path), base=seen)
    back = config.load(str(path))
    assert [w.path for w in back.watches] == [
        str(tmp_path / "home" / "build-locks"), "/var/tmp/new"]
    assert back.ui.theme == "light" and back.ui.start_minimized  # both sides kept


def test_the_same_key_changed_on_both_sides_is_a_conflict(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(HAND_WRITTEN)
    seen = config.load(str(path))
    theirs = HAND_WRITTEN.replace("stale_after = 600", "stale_after = 30")
    path.write_text(theirs)
    mine = replace(seen, watches=[replace(seen.watches[0], stale_after=99.0), seen.watches[1]])
    with pytest.raises(ConfigConflict) as ei:
        config.save(mine, str(path), base=seen)
    (c,) = ei.value.conflicts
    assert (c.key, c.file, c.mine) == ("stale_after", 30.0, 99.0)
    assert "the file now says 30; yours says 99" in c.text()
    assert path.read_text() == theirs  # nothing written
    config.save(mine, str(path), base=seen, prefer_mine=True)  # the user chose theirs away
    assert config.load(str(path)).watches[0].stale_after == 99.0


def test_a_table_edited_here_and_removed_there_is_a_conflict(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(HAND_WRITTEN)
    seen = config.load(str(path))
    path.write_text(HAND_WRITTEN.split("# the shared one")[0] + '[ui]\ntheme = "dark"\n')
    mine = replace(seen, watches=[seen.watches[0], replace(seen.watches[1], recursive=True)])
    with pytest.raises(ConfigConflict) as ei:
        config.save(mine, str(path), base=seen)
    assert ei.value.conflicts[0].file is None and "/srv/locks" in ei.value.conflicts[0].where


def test_servers_are_added_edited_and_removed_in_place(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(HAND_WRITTEN + SERVERS_ADDED_BY_HAND)
    seen = config.load(str(path))
    pg, _redis, etcd = seen.servers
    new_redis = ServerSpec(kind="redis", url="redis://other:6379/1", keyring=True)
    mine = replace(seen, servers=[replace(pg, stale_after=120.0, password_env=None,
                                          keyring=True), etcd, new_redis])
    config.save(mine, str(path), base=seen)
    text = path.read_text()
    assert "redis://cache.internal" not in text and "LOCKWARDEN_PGPASS" not in text
    assert "# added while the app ran" in text
    back = config.load(str(path))
    assert [(s.kind, s.url, s.keyring) for s in back.servers] == [
        ("postgres", "postgres://monitor@db.internal:5432/shop", True),
        ("redis", "redis://other:6379/1", True),
        ("etcd", "http://etcd1:2379", False)]
    assert back.servers[0].stale_after == 120.0


def test_a_file_without_watch_tables_keeps_watching_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[ui]\ntheme = "dark"\n')
    seen = config.load(str(path))
    assert seen.watches_are_default
    config.save(replace(seen, ui=replace(seen.ui, theme="light")), str(path), base=seen)
    assert path.read_text() == '[ui]\ntheme = "light"\n'  # no default list frozen in
    # adding a directory in Settings writes the list the user saw
    extra = WatchSpec(str(tmp_path / "mine"))
    config.save(replace(seen, watches=[*seen.watches, extra]), str(path), base=seen)
    back = config.load(str(path))
    assert not back.watches_are_default and back.watches == [*seen.watches, extra]
    # removing every directory watches nothing: watch = []
    again = config.load(str(path))
    config.save(replace(again, watches=[]), str(path), base=again)
    assert config.load(str(path)).watches == [] and "watch = []" in path.read_text()


def test_inline_arrays_of_tables_are_edited_as_they_are(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('watch = [{path = "/a"}, {path = "/b", recursive = true}]\n')
    seen = config.load(str(path))
    mine = replace(seen, watches=[replace(seen.watches[1], stale_after=60.0), WatchSpec("/c")])
    config.save(mine, str(path), base=seen)
    text = path.read_text()
    assert text.startswith("watch = [{path = \"/b\", recursive = true")
    back = config.load(str(path))
    assert [(w.path, w.stale_after) for w in back.watches] == [("/b", 60.0), ("/c", 3600.0)]


def test_the_old_header_that_said_comments_are_lost_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("# Lockwarden configuration (written by Lockwarden; comments are not "
                    "preserved).\n[ui]\ntheme = \"dark\"\n")
    seen = config.load(str(path))
    config.save(replace(seen, ui=replace(seen.ui, theme="light")), str(path), base=seen)
    assert "not preserved" not in path.read_text() and "edited in place" in path.read_text()


def test_a_new_file_starts_with_a_header_and_loads_back(tmp_path: Path) -> None:
    path = tmp_path / "new" / "config.toml"
    cfg = config.Config(watches=[WatchSpec("/srv/locks", stale_after=90.5)])
    config.save(cfg, str(path))
    text = path.read_text()
    assert text.startswith("# Lockwarden configuration") and "stale_after = 90.5" in text
    assert config.load_strict(str(path)).watches == cfg.watches


def test_a_new_key_goes_above_the_comment_that_introduces_the_next_table(
        tmp_path: Path) -> None:
    """tomlkit keeps the comment (and blank line) before a table with the table above: a key
    added there would land under a comment that speaks of the next table. It goes after the
    table's last key instead."""
    path = tmp_path / "config.toml"
    text = ("[[watch]]\npath = \"/srv/locks\"\n\n# the UI, as I like it\n[ui]\ntheme = \"dark\"\n"
            "\n[notifications]\non_stale = true\n\n# lock servers (docs/remote.md)\n"
            "[[redis]]\nurl = \"redis://cache.internal:6379/0\"\n")
    path.write_text(text)
    seen = config.load(str(path))
    edited = replace(seen, watches=[replace(seen.watches[0], stale_after=1200.0)],
                     notifications=replace(seen.notifications, on_acquire=True), warnings=[])
    config.save(edited, str(path), base=seen)
    assert path.read_text() == text.replace(
        'path = "/srv/locks"\n', 'path = "/srv/locks"\nstale_after = 1200\n').replace(
        "on_stale = true\n", "on_stale = true\non_acquire = true\n")
    back = config.load(str(path))
    assert back.watches[0].stale_after == 1200.0 and back.notifications.on_acquire
