"""The server tables of the configuration (``[[postgres]]``, ``[[redis]]``, ``[[etcd]]``), read
from real TOML files: values, stale policies, passwords refused in the file, password from the
environment or the OS keychain, warnings naming key and line, save and load again, and the
sources built from them (docs/remote.md, "Configuration")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core import config
from core.errors import ConfigError
from core.remote.sources import (
    KEYRING_SERVICE,
    parse_url,
    source_from_url,
    sources_from_config,
)

ROOT = Path(__file__).resolve().parents[3]

GOOD = """\
[[postgres]]
dsn = "postgres://monitor@db.internal:5433/shop"
password_env = "LOCKWARDEN_TEST_PG_PW"
stale_after = 600

[[redis]]
url = "redis://cache.internal:6380/2"
profiles = ["python-redis-lock", "redis-py"]
patterns = ["deploy:*", "job:*"]
keyring = true

[[etcd]]
endpoints = ["http://etcd1:2379", "https://etcd2:2379"]
prefix = "locks/"
username = "monitor"
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_the_three_server_tables_are_read_with_their_policies(tmp_path: Path) -> None:
    cfg = config.load(write(tmp_path, GOOD))
    assert cfg.warnings == []
    pg, rd, et = cfg.servers
    assert (pg.kind, pg.url, pg.password_env, pg.stale_after) == (
        "postgres", "postgres://monitor@db.internal:5433/shop", "LOCKWARDEN_TEST_PG_PW", 600.0)
    assert pg.policy.stale_after == 600.0
    assert (rd.profiles, rd.patterns, rd.keyring) == (
        ["python-redis-lock", "redis-py"], ["deploy:*", "job:*"], True)
    assert rd.policy.stale_after == config.DEFAULT_STALE_AFTER
    assert (et.endpoints, et.prefix, et.username) == (
        ["http://etcd1:2379", "https://etcd2:2379"], "locks/", "monitor")
    assert cfg.watches_are_default  # servers do not replace the watched directories


def test_a_password_in_the_file_is_refused_with_its_line(tmp_path: Path) -> None:
    text = ('[[redis]]\nurl = "redis://:hunter2@cache:6379/0"\n\n'
            '[[postgres]]\ndsn = "postgres://u@db/shop"\n')
    cfg = config.load(write(tmp_path, text))
    assert [s.kind for s in cfg.servers] == ["postgres"]
    (warning,) = cfg.warnings
    assert warning.startswith("config.toml line 2: redis[1].url: must not hold a password")
    assert "password_env" in warning and "hunter2" not in warning
    with pytest.raises(ConfigError) as err:
        config.load_strict(write(tmp_path, text))
    assert err.value.key == "redis[1].url" and err.value.line == 2


@pytest.mark.parametrize(("text", "key", "line"), [
    ('[[postgres]]\ndsn = "mysql://db/shop"\n', "postgres[1].dsn", 2),
    ('[[etcd]]\nprefix = "locks/"\n', "etcd[1].endpoints", 1),
    ('[[redis]]\nurl = "redis://c:6379/0"\nstale_after = -5\n', "redis[1].stale_after", 3),
    ('[[redis]]\nurl = "redis://c:6379/0"\nprofiles = ["pottery"]\n', "redis[1].profiles", 3),
    ('[[redis]]\nurl = "redis://c:6379/0"\npassword_env = "not a name"\n',
     "redis[1].password_env", 3),
    ('[[postgres]]\ndsn = "postgres://db/shop"\nprefix = "x"\n', "postgres[1].prefix", 3),
    ('[[redis]]\nurl = "redis://c:6379/0"\nprofiles = ["redis-py"]\n', "redis[1].patterns", 3),
    ('redis = "redis://c"\n', "redis", 1),
])
def test_each_problem_names_its_key_and_line(tmp_path: Path, text: str, key: str,
                                             line: int) -> None:
    cfg = config.load(write(tmp_path, text))
    assert len(cfg.warnings) == 1 and f"line {line}: {key}:" in cfg.warnings[0]
    with pytest.raises(ConfigError) as err:
        config.load_strict(write(tmp_path, text))
    assert (err.value.key, err.value.line) == (key, line)


def test_save_and_load_again_keeps_the_servers(tmp_path: Path) -> None:
    cfg = config.load(write(tmp_path, GOOD))
    again_path = str(tmp_path / "again.toml")
    config.save(cfg, again_path)
    again = config.load_strict(again_path)
    assert again.servers == cfg.servers
    assert "hunter" not in Path(again_path).read_text()


def test_sources_are_built_with_the_password_from_the_environment(tmp_path: Path) -> None:
    cfg = config.load(write(tmp_path, GOOD))
    sources, problems = sources_from_config(cfg, environ={"LOCKWARDEN_TEST_PG_PW": "s3cret"})
    assert [s.base_url for s in sources] == [
        "postgres://db.internal:5433/shop", "redis://cache.internal:6380/2",
        "etcd://etcd1:2379"]
    assert [s.policy.stale_after for s in sources] == [600.0, 3600.0, 3600.0]
    assert "deploy:*" in sources[1].describe() and "locks/" in sources[2].describe()
    # no password in this run's keychain (or no usable backend): said, the source is built
    assert len(problems) == 1 and "keychain" in problems[0]
    missing, problems = sources_from_config(cfg, environ={})
    assert len(missing) == 3
    assert any("password_env LOCKWARDEN_TEST_PG_PW is not set" in p for p in problems)


def test_the_os_keychain_gives_the_password(tmp_path: Path) -> None:
    """A real keyring backend (keyrings.alt's file keyring, in a temp dir), in a child
    process: the password set with ``keyring`` is the one the source gets."""
    pytest.importorskip("keyrings.alt", reason="keyrings.alt is not installed")
    env = {"PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
           "XDG_DATA_HOME": str(tmp_path / "data"), "PATH": "/usr/bin:/bin"}
    code = (
        "import keyring, sys\n"
        "from core import config\n"
        "from core.remote.sources import password_for\n"
        f"keyring.set_password({KEYRING_SERVICE!r}, 'redis://cache.internal:6380/2', 'pw-1')\n"
        f"cfg = config.load({write(tmp_path, GOOD)!r})\n"
        "print(password_for(cfg.servers[1]))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "('pw-1', None)"


def test_the_keychain_unavailable_is_said_clearly(tmp_path: Path) -> None:
    """keyring's own "no backend" keyring (what a headless Linux without Secret Service has),
    in a child process since keyring picks its backend once per process."""
    env = {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring", "PATH": "/usr/bin:/bin"}
    code = ("from core import config\n"
            "from core.remote.sources import password_for\n"
            f"print(password_for(config.load({write(tmp_path, GOOD)!r}).servers[1])[1])\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out.startswith("[[redis]] redis://cache.internal:6380/2: the OS keychain is "
                          "unavailable (NoKeyringError:")
    assert out.endswith("no password")


def test_urls_of_the_cli() -> None:
    pg = parse_url("postgres://lw:pw@%2Frun%2Fpostgresql:5433/shop?liquibase=false#advisory/42")
    assert pg.kind == "postgres" and pg.lock == "advisory/42"
    assert pg.args == {"host": "/run/postgresql", "port": 5433, "dbname": "shop", "user": "lw",
                       "password": "pw", "liquibase": False}
    assert "pw" not in pg.public
    rd = parse_url("redis://127.0.0.1:6379/3#lock:deploy#2")
    assert (rd.kind, rd.args["db"], rd.lock) == ("redis", 3, "lock:deploy#2")
    et = parse_url("etcd://127.0.0.1:2379/locks/#locks/deploy")
    assert et.args["endpoints"] == ["http://127.0.0.1:2379"] and et.args["prefix"] == "locks/"
    src = source_from_url("redis://127.0.0.1:6379/0", profiles=["redis-py"],
                          patterns=["deploy:*"])
    assert src.describe() == "redis://127.0.0.1:6379/0 (redis-py deploy:*)"
