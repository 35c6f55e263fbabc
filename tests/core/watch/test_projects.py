"""Project roots (``[[projects]]``, ``list/watch --project``): a tree of repositories walked for
the locks developer tools leave, git's only inside ``.git``, never entering ``node_modules``,
``.venv``, ``target``, build outputs and caches -- neither when scanning nor when watching (the
skipped directories get no inotify watch at all: counted in the kernel's own fdinfo)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core import config
from core.config.model import PROJECT_SKIP_DIRS, Config, ProjectSpec
from core.config.scope import dir_matcher, skips_dir, walkable, wanted_file
from core.record import State
from core.watch.scan import list_dir

ROOT = Path(__file__).resolve().parents[3]
DEVTOOLS = ROOT / "tests" / "data" / "devtools"
SWAP = DEVTOOLS / "vim" / "dead-dirty.notes.txt.swp"
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify (Linux)")


def _tree(tmp_path: Path) -> tuple[Path, set[str]]:
    """A project root with one real git repository and the files a developer's tree has;
    returns the root and the paths a project walk must list."""
    root = tmp_path / "src"
    repo = root / "app"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    gitdir = repo / ".git"
    (gitdir / "index.lock").write_bytes(b"")
    (gitdir / "refs" / "heads" / "main.lock").write_text("0" * 40 + "\n")
    (gitdir / "objects" / "ab").mkdir(parents=True)
    (gitdir / "objects" / "ab" / "x.lock").write_bytes(b"")  # never a lock: skipped
    (gitdir / "logs").mkdir(exist_ok=True)
    (gitdir / "logs" / "HEAD.lock").write_bytes(b"")  # skipped too
    for pin in ("Cargo.lock", "yarn.lock", "poetry.lock"):
        (repo / pin).write_text("# dependency pins, not a mutex\n")
    (repo / "src").mkdir()
    shutil.copy(SWAP, repo / "src" / ".main.c.swp")
    (repo / ".#notes.txt").symlink_to("dev@otherhost.4242:1700000000")
    (repo / ".~lock.report.odt#").write_text(",dev,otherhost,24.11.2026 10:00,file:///x;")
    infra = repo / "infra"
    infra.mkdir()
    (infra / ".terraform.tfstate.lock.info").write_text(json.dumps(
        {"ID": "1", "Operation": "OperationTypeApply", "Who": "dev@otherhost",
         "Version": "1.0.3", "Created": "2026-11-24T10:00:00Z", "Path": "terraform.tfstate"}))
    for skipped in ("node_modules/pkg", ".venv/lib", "target/debug", "build", "dist"):
        d = repo / skipped
        d.mkdir(parents=True)
        shutil.copy(SWAP, d / ".skipped.c.swp")
        (d / ".git").mkdir()
        (d / ".git" / "index.lock").write_bytes(b"")
    wanted = {str(p) for p in (gitdir / "index.lock", gitdir / "refs" / "heads" / "main.lock",
                               repo / "src" / ".main.c.swp", repo / ".#notes.txt",
                               repo / ".~lock.report.odt#",
                               infra / ".terraform.tfstate.lock.info")}
    return root, wanted


def test_scope_rules() -> None:
    skip = dir_matcher(PROJECT_SKIP_DIRS)
    assert skips_dir(skip, "/p", "node_modules") and skips_dir(skip, "/p/a", ".venv")
    assert not skips_dir(skip, "/p", ".git") and not skips_dir(skip, "/p", "src")
    assert skips_dir(skip, "/p/.git", "logs") and skips_dir(skip, "/p/.git/objects", "ab")
    assert not skips_dir(skip, "/p/.git", "refs") and not skips_dir(skip, "/p/.git", "objects")
    assert not skips_dir(skip, "/p/logs", "x")  # "logs" is skipped only inside .git
    assert walkable(skip, "/p", "/p/a/.git/refs/heads")
    assert not walkable(skip, "/p", "/p/a/node_modules/x") and not walkable(skip, "/p", "/q")
    match = dir_matcher(("*.lock", "gc.pid", ".*.sw[a-p]"))
    assert wanted_file(True, match, "/p/a/.git", "index.lock")
    assert wanted_file(True, match, "/p/a/.git/worktrees/w", "index.lock")
    assert not wanted_file(True, match, "/p/a", "Cargo.lock")
    assert wanted_file(False, match, "/p/a", "Cargo.lock")  # a plain [[watch]]: as before
    assert wanted_file(True, match, "/p/a/src", ".main.c.swp")


@needs_git
def test_project_walk_lists_developer_locks_and_never_enters_skipped_trees(
        tmp_path: Path) -> None:
    root, wanted = _tree(tmp_path)
    listing = list_dir(ProjectSpec(str(root)).watch_spec())
    assert set(listing.files) == wanted
    walked = set(listing.dirs)
    assert str(root / "app" / "src") in walked and str(root / "app" / ".git" / "refs") in walked
    assert not any(part in Path(d).parts for d in walked
                   for part in ("node_modules", ".venv", "target", "build", "dist", "logs"))


@needs_git
def test_list_project_cli_shows_each_tool(tmp_path: Path) -> None:
    root, wanted = _tree(tmp_path)
    out = subprocess.run([sys.executable, "-m", "core", "list", "--project", str(root),
                          "--json"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = {r["path"]: r for r in json.loads(out.stdout)}
    assert set(rows) == wanted
    tools = {Path(p).name: r["tool"] for p, r in rows.items()}
    assert tools == {"index.lock": "git", "main.lock": "git", ".main.c.swp": "vim",
                     ".#notes.txt": "emacs", ".~lock.report.odt#": "libreoffice",
                     ".terraform.tfstate.lock.info": "terraform"}
    assert all(r["reasons"] and "code" in r["reasons"][0] for r in rows.values())


def test_projects_config_round_trip_and_warnings(tmp_path: Path) -> None:
    cfg = config.loads('[[projects]]\npath = "~/src"\nskip = ["node_modules", "vendor"]\n'
                       'stale_after = 600\n\n[[projects]]\npath = "/work"\npolling = "sideways"'
                       '\nfrobnicate = 1\n\n[[projects]]\nskip = []\n')
    assert [p.path for p in cfg.projects] == [os.path.expanduser("~/src"), "/work"]
    assert cfg.projects[0].skip == ["node_modules", "vendor"]
    assert cfg.projects[0].stale_after == 600 and cfg.projects[1].polling == "auto"
    assert cfg.projects[1].skip == list(PROJECT_SKIP_DIRS)
    assert any("projects[2].polling" in w and "line 8" in w for w in cfg.warnings)
    assert any("projects[2].frobnicate: unknown key" in w for w in cfg.warnings)
    assert any("projects[3].path: is missing" in w for w in cfg.warnings)
    assert cfg.watches_are_default  # projects add to the default directories
    specs = cfg.all_watches()
    assert specs[-2].project and specs[-2].recursive and specs[-2].skip == cfg.projects[0].skip
    path = config.save(Config(watches=[], projects=cfg.projects), str(tmp_path / "c.toml"))
    again = config.load(path)
    assert again.projects == cfg.projects and again.warnings == []
    assert "[[projects]]" in Path(path).read_text()


def _inotify_watches() -> int:
    """Inotify watches this process holds, as the kernel lists them (``inotify wd:`` lines of
    ``/proc/self/fdinfo``)."""
    n = 0
    for fd in os.listdir("/proc/self/fdinfo"):
        try:
            with open(f"/proc/self/fdinfo/{fd}") as f:
                n += sum(1 for line in f if line.startswith("inotify wd:"))
        except OSError:
            continue
    return n


@linux
@needs_git
def test_watched_project_tree_costs_no_watch_in_skipped_directories(
        watch: Any, tmp_path: Path) -> None:
    root, wanted = _tree(tmp_path)
    for i in range(300):  # a dependency tree: 300 directories nobody watches
        (root / "app" / "node_modules" / f"dep{i}" / "lib").mkdir(parents=True)
    before = _inotify_watches()
    spec = ProjectSpec(str(root)).watch_spec()
    w, rec = watch([spec], rescan_interval=3600)  # no rescan: events only
    rec.until(lambda m: set(m) == wanted, what="the project's locks")
    walked = list_dir(spec).dirs
    assert _inotify_watches() - before == len(walked) < 40
    # a new directory is walked and watched; a lock made in it arrives by its event
    new = root / "app" / "lib" / "deep"
    new.mkdir(parents=True)
    swap = new / ".x.c.swp"
    shutil.copy(SWAP, swap)
    rec.until(lambda m: str(swap) in m, what="a swap file in a new directory")
    # inside skipped trees nothing is seen; in .git a new lock is
    shutil.copy(SWAP, root / "app" / "node_modules" / "dep7" / ".y.c.swp")
    (root / "app" / "Gemfile.lock").write_text("pins\n")
    head = root / "app" / ".git" / "HEAD.lock"
    head.write_bytes(b"")
    rec.until(lambda m: str(head) in m, what="HEAD.lock")
    assert set(rec.model) == wanted | {str(swap), str(head)}
    assert rec.model[str(head)].tool == "git"
    os.unlink(swap)
    rec.until(lambda m: str(swap) not in m, what="the swap file removed")
    w.close()


@needs_git
def test_polled_project_tree_is_rescanned_not_snapshotted(
        watch: Any, tmp_path: Path) -> None:
    root, wanted = _tree(tmp_path)
    spec = ProjectSpec(str(root), polling="on").watch_spec()
    _w, rec = watch([spec], rescan_interval=0.3)
    rec.until_dirs(lambda ds: bool(ds) and ds[0].mode == "polling")
    assert "the tree walked every 5 s" in rec.dirs[0].message
    rec.until(lambda m: set(m) == wanted, what="the project's locks")
    lock = root / "app" / ".git" / "config.lock"
    lock.write_bytes(b"")
    rec.until(lambda m: str(lock) in m and m[str(lock)].state is not State.FREE,
              what="config.lock by the next rescan")
