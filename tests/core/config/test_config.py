"""core.config: defaults per platform, round trip, bad files, strict loading, env override."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from core import config
from core.config import Config, NotificationSettings, UISettings, WatchSpec
from core.config.platform_defaults import default_watches
from core.errors import ConfigError


@pytest.fixture(autouse=True)
def _no_env_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(config.CONFIG_ENV, raising=False)


def test_default_watch_dirs_linux_this_machine() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("checks this machine's Linux directories")
    dirs = config.default_watch_dirs()
    assert dirs[0] == "/tmp"
    reals = [os.path.realpath(d) for d in dirs]
    assert len(reals) == len(set(reals)), "a directory is listed twice under two names"
    if os.path.islink("/var/lock") and os.path.realpath("/var/lock") == "/run/lock":
        assert "/var/lock" not in dirs or "/run/lock" not in dirs
    for d in dirs[1:]:
        assert os.path.isdir(d)


def test_default_watch_dirs_linux_xdg_runtime(tmp_path: Path) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("checks this machine's Linux directories")
    run = tmp_path / "run-user"
    run.mkdir()
    dirs = config.default_watch_dirs(environ={"XDG_RUNTIME_DIR": str(run)})
    assert dirs[-1] == str(run)
    # the same directory given twice (as a symlink) is listed once
    link = tmp_path / "alias"
    link.symlink_to(run)
    dirs2 = config.default_watch_dirs(environ={"XDG_RUNTIME_DIR": str(link)})
    assert str(link) in dirs2
    assert dirs2.count(str(link)) == 1


def test_default_watch_dirs_other_platforms() -> None:
    assert config.default_watch_dirs(system="linux", environ={}) == [
        "/tmp", "/run/lock", "/var/lock"]
    assert config.default_watch_dirs(system="linux", environ={"XDG_RUNTIME_DIR": "/run/user/7"}) \
        == ["/tmp", "/run/lock", "/var/lock", "/run/user/7"]
    assert config.default_watch_dirs(system="darwin", environ={}) == ["/tmp", "/private/var/run"]
    temp = r"C:\Users\me\AppData\Local\Temp"
    assert config.default_watch_dirs(system="win32", environ={"TEMP": temp}) == [temp]
    assert config.default_watch_dirs(system="win32", environ={"TMP": r"D:\t"}) == [r"D:\t"]


def test_no_file_gives_defaults(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "config.toml"
    cfg = config.load(str(missing))
    assert cfg.watches_are_default
    assert cfg.watches == default_watches()  # the lock directories, then the kernel anchors
    assert [w.path for w in cfg.watches][:len(config.default_watch_dirs())] == \
        config.default_watch_dirs()
    assert cfg.watches[0].patterns == ["*.lock", "*.pid", "*-lock"]
    assert cfg.notifications == NotificationSettings()
    assert cfg.ui == UISettings()
    assert cfg.path == str(missing)
    assert cfg.warnings == []  # a first run is not a problem


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "config.toml"
    cfg = Config(
        watches=[
            WatchSpec(str(tmp_path / "a"), recursive=True, patterns=["*.lock"], stale_after=90.5,
                      polling="on", allow_higher_privilege=True),
            WatchSpec(str(tmp_path / "b"), polling="off", allow_emergency=True),
        ],
        notifications=NotificationSettings(on_stale=False, on_acquire=True, paused=True),
        ui=UISettings(theme="dark", start_minimized=True, rescan_interval=12.0),
    )
    written = config.save(cfg, str(path))
    assert written == str(path)
    assert not [p for p in path.parent.iterdir() if p.name != "config.toml"], "temp file left"
    back = config.load_strict(str(path))
    assert back.watches == cfg.watches
    assert back.notifications == cfg.notifications
    assert back.ui == cfg.ui
    assert back.warnings == []
    assert not back.watches_are_default
    # saving again over the existing file keeps its permissions
    path.chmod(0o600)
    config.save(back)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert config.load(str(path)).watches == cfg.watches


def test_empty_watch_list_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    config.save(Config(watches=[]), str(path))
    cfg = config.load_strict(str(path))
    assert cfg.watches == [] and not cfg.watches_are_default


def test_paths_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LW_TEST_DIR", str(tmp_path / "var"))
    path = tmp_path / "config.toml"
    path.write_text('[[watch]]\npath = "~/locks"\n\n[[watch]]\npath = "$LW_TEST_DIR/run/"\n')
    cfg = config.load_strict(str(path))
    assert [w.path for w in cfg.watches] == [str(tmp_path / "home" / "locks"),
                                             str(tmp_path / "var" / "run")]
    assert WatchSpec("~/x").expanded_path == str(tmp_path / "home" / "x")


def test_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "elsewhere.toml"
    path.write_text(f'[[watch]]\npath = "{tmp_path}"\nrecursive = true\n')
    monkeypatch.setenv(config.CONFIG_ENV, str(path))
    assert config.default_config_path() == str(path)
    cfg = config.load()
    assert cfg.path == str(path)
    assert [(w.path, w.recursive) for w in cfg.watches] == [(str(tmp_path), True)]
    # an explicit path wins over the environment
    other = tmp_path / "other.toml"
    other.write_text("[ui]\ntheme = 'light'\n")
    assert config.load(str(other)).ui.theme == "light"
    # and saving without a path goes to the file it came from
    cfg.ui.theme = "dark"
    assert config.save(cfg) == str(path)
    assert config.load().ui.theme == "dark"


def test_default_path_is_platformdirs(monkeypatch: pytest.MonkeyPatch) -> None:
    import platformdirs

    assert config.default_config_path() == os.path.join(
        platformdirs.user_config_dir("lockwarden", appauthor=False), "config.toml")


BAD_TYPES = """\
# comment
[[watch]]
path = "/tmp/one"
recursive = "yes"

[[watch]]
path = "/tmp/two"
stale_after = "soon"
polling = "sometimes"
colour = "red"

[notifications]
on_stale = 1

[ui]
theme = "purple"
rescan_interval = -3
"""


def test_bad_types_give_warnings_with_key_and_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(BAD_TYPES)
    cfg = config.load(str(path))
    w = cfg.warnings
    expected = [
        ("line 4:", "watch[1].recursive"),
        ("line 8:", "watch[2].stale_after"),
        ("line 9:", "watch[2].polling"),
        ("line 10:", "watch[2].colour"),
        ("line 13:", "notifications.on_stale"),
        ("line 16:", "ui.theme"),
        ("line 17:", "ui.rescan_interval"),
    ]
    assert len(w) == len(expected), w
    for (line, key), msg in zip(expected, w, strict=True):
        assert line in msg and key in msg, msg
    # the good values are kept, the bad ones fall back to defaults
    assert [s.path for s in cfg.watches] == ["/tmp/one", "/tmp/two"]
    assert cfg.watches[0].recursive is False
    assert cfg.watches[1].stale_after == 3600.0 and cfg.watches[1].polling == "auto"
    assert cfg.notifications.on_stale is True
    assert cfg.ui.theme == "auto" and cfg.ui.rescan_interval == 30.0


def test_load_strict_raises_with_key_and_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(BAD_TYPES)
    with pytest.raises(ConfigError) as ei:
        config.load_strict(str(path))
    assert ei.value.key == "watch[1].recursive"
    assert ei.value.line == 4
    path.write_text('[ui]\nstart_minimized = true\ntheme = 7\n')
    with pytest.raises(ConfigError) as ei:
        config.load_strict(str(path))
    assert (ei.value.key, ei.value.line) == ("ui.theme", 3)
    path.write_text('[[watch]]\nrecursive = true\n')
    with pytest.raises(ConfigError) as ei:
        config.load_strict(str(path))
    assert ei.value.key == "watch[1].path"
    assert ei.value.line == 1  # the [[watch]] header: the key is missing


def test_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[[watch]]\npath = "/tmp"\nstale_after = 12 34\n')
    cfg = config.load(str(path))
    assert cfg.watches_are_default
    assert len(cfg.warnings) == 1
    assert "line 3" in cfg.warnings[0] and "stale_after" in cfg.warnings[0]
    with pytest.raises(ConfigError) as ei:
        config.load_strict(str(path))
    assert (ei.value.key, ei.value.line) == ("stale_after", 3)
    path.write_text("[ui\ntheme = 'dark'\n")
    with pytest.raises(ConfigError) as ei:
        config.load_strict(str(path))
    assert ei.value.line == 1


def test_no_usable_watch_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[[watch]]\npath = 3\n")
    cfg = config.load(str(path))
    assert cfg.watches_are_default and cfg.watches
    assert any("watch[1].path" in w and "line 2" in w for w in cfg.warnings)


def test_unreadable_and_binary_files_never_raise(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b"\xff\xfe\x00garbage\x00")
    cfg = config.load(str(path))
    assert cfg.watches_are_default and cfg.warnings
    d = tmp_path / "dir.toml"
    d.mkdir()
    cfg = config.load(str(d))
    assert cfg.watches_are_default and "cannot be read" in cfg.warnings[0]


def test_absurd_nesting_never_raises(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("a = " + "[" * 50000 + "]" * 50000 + "\n")
    cfg = config.load(str(path))
    assert cfg.watches_are_default and "nested too deeply" in cfg.warnings[0]
    with pytest.raises(ConfigError):
        config.load_strict(str(path))


def test_nul_in_paths(tmp_path: Path) -> None:
    assert config.load(str(tmp_path) + "/a\0b").warnings  # never raises
    path = tmp_path / "config.toml"
    path.write_text('[[watch]]\npath = "/tmp/a\\u0000b"\n')
    cfg = config.load(str(path))
    assert cfg.watches_are_default and "watch[1].path" in cfg.warnings[0]
