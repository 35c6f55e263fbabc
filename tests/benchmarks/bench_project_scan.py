"""A folder of repositories as developers have them (``[[projects]]``, docs/watching.md
"Projects"): N repositories, each with a git directory (an object store of 256 fan-out
directories), sources, and a ``node_modules`` of M packages. Prints the project walk
(core.watch.scan.list_dir of a ProjectSpec: skips applied) next to its anchors measured in the same
run -- ``os.walk`` of the whole tree (what a plain recursive walk enters) and the same walk with
the skipped directories pruned -- and the directories a project watch needs against those a
recursive inotify watch would take. Asserts nothing about speed (docs/DESIGN.md "Testing").

    .venv/bin/python tests/benchmarks/bench_project_scan.py [--repos 40] [--packages 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.config.model import PROJECT_SKIP_DIRS, ProjectSpec  # noqa: E402
from core.config.scope import dir_matcher, skips_dir  # noqa: E402
from core.watch.scan import list_dir  # noqa: E402


def build(root: Path, repos: int, packages: int) -> None:
    """The tree: per repository .git (objects/00..ff, refs, logs, hooks), src/a..e with five
    files each, node_modules/pkgN/lib with two files, target/debug."""
    for r in range(repos):
        repo = root / f"repo{r:03d}"
        git = repo / ".git"
        for sub in ("refs/heads", "refs/tags", "logs/refs/heads", "hooks", "info"):
            (git / sub).mkdir(parents=True)
        for i in range(256):
            (git / "objects" / f"{i:02x}").mkdir(parents=True)
        (git / "HEAD").write_text("ref: refs/heads/main\n")
        for s in "abcde":
            d = repo / "src" / s
            d.mkdir(parents=True)
            for f in range(5):
                (d / f"m{f}.py").write_text("x = 1\n")
        for p in range(packages):
            d = repo / "node_modules" / f"pkg{p}" / "lib"
            d.mkdir(parents=True)
            (d / "index.js").write_text("")
            (d.parent / "package.json").write_text("{}")
        (repo / "target" / "debug").mkdir(parents=True)
        (repo / "Cargo.lock").write_text("# pins\n")
    (root / "repo000" / ".git" / "index.lock").write_bytes(b"")


def best(fn: object, rounds: int) -> tuple[float, float]:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000, min(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repos", type=int, default=40)
    ap.add_argument("--packages", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "src"
        build(root, a.repos, a.packages)
        spec = ProjectSpec(str(root)).watch_spec()
        skip = dir_matcher(PROJECT_SKIP_DIRS)
        all_dirs = sum(1 for _ in os.walk(root))

        def pruned() -> None:
            for d, dirs, _files in os.walk(root):
                dirs[:] = [n for n in dirs if not skips_dir(skip, d, n)]

        listing = list_dir(spec)
        print(f"tree: {a.repos} repositories, {all_dirs} directories "
              f"({a.packages} node_modules packages and 256 object dirs each)")
        print(f"locks found: {len(listing.files)} (expected 1: .git/index.lock; Cargo.lock is "
              "not a lock)")
        print(f"directories a project watch takes: {len(listing.dirs)}  "
              f"(a recursive inotify watch: {all_dirs})")
        med, low = best(lambda: list_dir(spec), a.rounds)
        print(f"project walk (list_dir, skips applied): median {med:.1f} ms, best {low:.1f} ms")
        med, low = best(pruned, a.rounds)
        print(f"  anchor: os.walk pruned the same way: median {med:.1f} ms, best {low:.1f} ms")
        med, low = best(lambda: sum(1 for _ in os.walk(root)), a.rounds)
        print(f"  anchor: os.walk of everything: median {med:.1f} ms, best {low:.1f} ms")


if __name__ == "__main__":
    main()
