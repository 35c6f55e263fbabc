"""Deliberately weakened engines (``make verify-mutants``): each is the engine's source with one
protection taken out, checked by the same checker; the check succeeds only when every mutant
is caught (a violation found), which shows the checker can see what each protection is for
(docs/engine.md, "Every interleaving checked").

A mutant is a copy of ``core/`` with one edit, put first on ``PYTHONPATH`` of a checker run
limited to the operations that exercise it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Mutant:
    """One protection taken out: ``file`` (under core/), the text replaced, its replacement,
    and the checker run that must catch it (operations, seeds)."""

    name: str
    why: str
    file: str
    old: str
    new: str
    only: str
    seeds: tuple[str, ...]


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "no_rejudge",
        "a take-over does not read and judge the file again under the directory guard",
        "engine/takeover.py",
        """        now_status = inspect_bytes(path, cur_data, cur_info, policy=policy)
        if judged.file is not None and cur_info != judged.file:
            return Outcome("retry", now_status)  # another file now: judge it afresh
""",
        """        now_status = judged
""",
        "reclaim,sema", ("stale",)),
    Mutant(
        "rename_not_exchange",
        "a take-over renames its file over the path (the old file set aside first) instead "
        "of exchanging the two atomically",
        "engine/exchange.py",
        """    loaded = _load_exchange()
    if loaded is None:
        raise ExchangeUnsupported(errno.ENOTSUP, "no atomic exchange on this platform")
""",
        """    from core import seam

    aside = a + ".aside"
    os.rename(b, aside)
    seam.step("rename", b)
    os.rename(a, b)
    os.rename(aside, a)
    return
    loaded = _load_exchange()
    if loaded is None:
        raise ExchangeUnsupported(errno.ENOTSUP, "no atomic exchange on this platform")
""",
        "reclaim,sema", ("stale",)),
    Mutant(
        "no_token_check",
        "a release removes the lock without checking that it is the releasing process's",
        "engine/operations.py",
        """        return r is not None and r.pid == pid and on_this_host(r.host)
""",
        """        return True
""",
        "release,try", ("free",)),
    Mutant(
        "inode_kept_linked",
        "a file taken out from under a peer's kernel lock is kept linked under another name "
        "when the path was taken meanwhile, not unlinked before its locks are let go",
        "engine/entries.py",
        """        if hold:
            log.warning("%s was taken meanwhile; the file a peer opened is unlinked (it must "
                        "not stay linked under another name)", path)
            unlink_quiet(moved)
            return False
""",
        "",
        "try,force,filelock", ("empty",)),
)


def build(mutant: Mutant, into: str) -> str:
    """A copy of core/ with ``mutant``'s edit under ``into``; returns the directory to put on
    ``PYTHONPATH``. Raises ValueError when the text to replace is not in the file (the
    engine changed: the mutant must follow it)."""
    shutil.copytree(ROOT / "core", os.path.join(into, "core"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    target = Path(into) / "core" / mutant.file
    text = target.read_text(encoding="utf-8")
    if text.count(mutant.old) != 1:
        raise ValueError(f"mutant {mutant.name}: the text to replace is not in core/"
                         f"{mutant.file} once")
    target.write_text(text.replace(mutant.old, mutant.new), encoding="utf-8")
    return into


def check_mutants(which: str, depth: str) -> int:
    """Run the checker on each mutant (``which``: a name or ``all``); 0 when every one was
    caught. Prints one line per mutant."""
    chosen = [m for m in MUTANTS if which in ("all", m.name)]
    if not chosen:
        print(f"no mutant named {which!r}; known: {', '.join(m.name for m in MUTANTS)}")
        return 2
    missed = 0
    for m in chosen:
        with tempfile.TemporaryDirectory(prefix=f"lockwarden-mutant-{m.name}-") as d:
            path = build(m, d)
            env = {**os.environ, "PYTHONPATH": path + os.pathsep + str(ROOT)}
            cmd = [sys.executable, "-m", "tests.verify", "--depth", depth, "--only", m.only,
                   "--quiet", "--stop-first"]
            for s in m.seeds:
                cmd += ["--seed", s]
            t0 = time.monotonic()
            env["LOCKWARDEN_VERIFY_CORE"] = os.path.join(path, "core")
            out = subprocess.run(cmd, cwd=path, env=env, capture_output=True, text=True,
                                 check=False)  # cwd: ``-m`` puts it first on sys.path
            took = time.monotonic() - t0
        summary = next((ln for ln in out.stdout.splitlines() if ln.startswith("verify")), "")
        first = next((ln.strip() for ln in out.stdout.splitlines()
                      if ln.startswith("  ") and ":" in ln and not ln.strip()[0].isdigit()),
                     "")
        caught = out.returncode == 1 and "VIOLATION" in out.stdout
        missed += not caught
        print(f"{m.name:20s} {'caught' if caught else 'MISSED'} in {took:.0f} s -- {m.why}")
        print(f"    {summary}")
        if first:
            print(f"    {first}")
        if not caught and out.returncode not in (0, 1):
            print(out.stderr[-2000:])
    print(f"verify-mutants: {len(chosen) - missed} of {len(chosen)} caught")
    return 1 if missed else 0
