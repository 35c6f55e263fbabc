"""Configuration problems on the command line and in the file (docs/cli.md, "Configuration
problems"): every verb that reads the configuration prints each problem once on stderr, in
the words of the app's Problems panel; a misspelled table or key is named with the known name
it is closest to, and stays in the file; ``--config FILE`` is accepted before the verb too.
Real files, real subprocesses."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from core.config import load, save
from core.config.problems import problem_line
from tests.support.cli import ENV, LW, Lines

BAD = ('[[watch]]\npath = "{d}"\nstale_after = "abc"\nbogus = 1\n\n'
       '[[watch]]\npath = "{d}"\nstale_after = -5\n\n'
       '[[wacth]]\npath = "{d}"\n\n[ui]\nthem = "dark"\n')


@pytest.fixture
def bad_config(tmp_path: Path) -> tuple[Path, Path]:
    locks = tmp_path / "locks"
    locks.mkdir()
    (locks / "a.lock").write_text("pid=1\n")
    cfg = tmp_path / "config.toml"
    cfg.write_text(BAD.format(d=locks))
    return cfg, locks


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LW, *args], capture_output=True, text=True, timeout=60, env=ENV,
                          check=False)


def test_a_misspelled_table_or_key_is_named_with_a_suggestion(
        bad_config: tuple[Path, Path]) -> None:
    cfg, _ = bad_config
    assert load(str(cfg)).warnings == [
        "config.toml line 3: watch[1].stale_after: must be a finite positive number of "
        "seconds, not 'abc'; using 3600.0",
        "config.toml line 4: watch[1].bogus: unknown key; ignored",
        "config.toml line 8: watch[2].stale_after: must be a finite positive number of "
        "seconds, not -5; using 3600.0",
        "config.toml line 10: unknown table `wacth` (ignored; did you mean `watch`?)",
        "config.toml line 14: ui.them: unknown key; ignored (did you mean `theme`?)",
    ]


def test_unknown_names_in_every_table_get_a_suggestion(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('[[projects]]\npath = "/src"\nskp = []\n[fleet]\ndsn = "postgresql://a@b/c"\n'
                   'hots = "x"\n[history]\nkeeep = "3d"\n[[redis]]\nurl = "redis://a:6379/0"\n'
                   'profile = []\n[notifications]\non_stal = true\n[frobnicate]\nx = 1\n'
                   'wach = 3\n')
    assert load(str(cfg)).warnings == [
        "config.toml line 3: projects[1].skp: unknown key; ignored (did you mean `skip`?)",
        "config.toml line 6: fleet.hots: unknown key; ignored (did you mean `host`?)",
        "config.toml line 8: history.keeep: unknown key; ignored (did you mean `keep`?)",
        "config.toml line 11: redis[1].profile: unknown key; ignored (did you mean "
        "`profiles`?)",
        "config.toml line 13: notifications.on_stal: unknown key; ignored (did you mean "
        "`on_stale`?)",
        "config.toml line 14: unknown table `frobnicate` (ignored)",
    ]


def test_a_misspelled_server_key_is_named_beside_the_missing_one(tmp_path: Path) -> None:
    # `dns` for `dsn`: the table is unusable, and the misspelling is why: both are said
    cfg = tmp_path / "config.toml"
    cfg.write_text('[fleet]\ndns = "postgresql://db/x"\n[[postgres]]\ndns = "postgresql://db/x"\n'
                   '[[redis]]\nulr = "redis://localhost"\n')
    assert load(str(cfg)).warnings == [
        "config.toml line 1: fleet.dsn: is missing; this host does not publish to a fleet",
        "config.toml line 2: fleet.dns: unknown key; ignored (did you mean `dsn`?)",
        "config.toml line 3: postgres[1].dsn: is missing; this [[postgres]] entry is ignored",
        "config.toml line 4: postgres[1].dns: unknown key; ignored (did you mean `dsn`?)",
        "config.toml line 5: redis[1].url: is missing; this [[redis]] entry is ignored",
        "config.toml line 6: redis[1].ulr: unknown key; ignored (did you mean `url`?)",
    ]


def test_unknown_tables_and_keys_stay_in_the_file_when_saved(
        bad_config: tuple[Path, Path]) -> None:
    cfg, _ = bad_config
    loaded = load(str(cfg))
    loaded.ui.theme = "light"
    save(loaded, base=load(str(cfg)))
    text = cfg.read_text()
    assert "[[wacth]]" in text and "bogus = 1" in text and 'them = "dark"' in text
    assert 'theme = "light"' in text


@pytest.mark.parametrize("verb", ["list", "status"])
def test_every_verb_that_reads_the_config_prints_each_problem_once(
        bad_config: tuple[Path, Path], verb: str) -> None:
    cfg, locks = bad_config
    target = locks if verb == "list" else locks / "a.lock"
    out = run(verb, str(target), "--config", str(cfg))
    printed = [line for line in out.stderr.splitlines() if line.startswith("lockwarden: config:")]
    assert printed == [problem_line(w) for w in load(str(cfg)).warnings]
    assert ("lockwarden: config: config.toml line 10: unknown table `wacth` (ignored; did you "
            "mean `watch`?)") in printed


def test_watch_prints_each_problem_once(bad_config: tuple[Path, Path]) -> None:
    cfg, locks = bad_config
    proc = subprocess.Popen([*LW, "watch", str(locks), "--json", "--no-history", "--config",
                             str(cfg)], env=ENV, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        Lines(proc).until(lambda o: o["event"] == "ready")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert proc.stderr is not None
        printed = [line for line in proc.stderr.read().splitlines()
                   if line.startswith("lockwarden: config:")]
        assert printed == [problem_line(w) for w in load(str(cfg)).warnings]
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("how", [["--config", "{cfg}"], ["--config={cfg}"]])
def test_config_before_the_verb_is_the_same_as_after_it(bad_config: tuple[Path, Path],
                                                        how: list[str]) -> None:
    cfg, locks = bad_config
    before = run(*[w.format(cfg=cfg) for w in how], "list", str(locks), "--json")
    after = run("list", str(locks), "--json", "--config", str(cfg))
    assert before.returncode == after.returncode == 0, before.stderr
    def verdicts(out: str) -> list[tuple[str, str, dict[str, object]]]:
        return [(i["path"], i["state"], i["policy"]) for i in json.loads(out)]

    assert verdicts(before.stdout) == verdicts(after.stdout)
    assert verdicts(before.stdout)[0][2]["source"] == "config"
    assert before.stderr == after.stderr
    assert "unknown table `wacth`" in before.stderr
    # through a shell, as a user types it
    shell = subprocess.run(["bash", "-c", 'exec "$@"', "bash", *LW, "--config", str(cfg),
                            "status", str(locks / "a.lock")], capture_output=True, text=True,
                           timeout=60, env=ENV, check=False)
    assert shell.returncode == 1 and "unknown table `wacth`" in shell.stderr  # held by PID 1
    assert "invalid choice" not in shell.stderr


def test_config_before_a_verb_without_it_is_a_clear_usage_error(
        bad_config: tuple[Path, Path]) -> None:
    cfg, locks = bad_config
    out = run("--config", str(cfg), "try", str(locks / "b.lock"))
    assert out.returncode == 2 and not (locks / "b.lock").exists()
    assert out.stderr == ("lockwarden: error: try takes no --config; the verbs that do: "
                          "status, list, watch, agent, fleet (see 'lockwarden try --help')\n")
    alone = run("--config", str(cfg))
    assert alone.returncode == 2
    assert "the following arguments are required: VERB" in alone.stderr
