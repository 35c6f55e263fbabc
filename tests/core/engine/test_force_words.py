"""The detail pane's "Force release" line says what a forced release of that lock would do
(core/tools.py ``force_words``; docs/engine.md, "Nothing is simply unlinked"): a lock
Lockwarden wrote is removed, another tool's file with content goes to the trash, an empty file
nobody holds is removed holding its flock, and nothing is offered for a kernel-held file. It
was an empty line for every lock file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from core.engine.lock import Lock
from core.tools import force_words
from core.verdicts.inspect import inspect


def test_ours_is_removed_and_a_foreign_file_goes_to_the_trash(lockdir: Path) -> None:
    ours = lockdir / "ours.lock"
    with Lock(str(ours)):
        assert force_words(inspect(str(ours))) == "removes the lock file (written by Lockwarden)"
    foreign = lockdir / "foreign.lock"
    foreign.write_text(f"pid={os.getpid()}\ntimestamp=1\n")
    assert "desktop trash" in force_words(inspect(str(foreign)))


def test_an_empty_free_file_and_a_kernel_held_one(lockdir: Path) -> None:
    empty = lockdir / "cache.lock"
    empty.write_bytes(b"")
    assert force_words(inspect(str(empty))).startswith("removes the empty file")
    held = lockdir / "held.lock"
    held.write_bytes(b"")
    proc = subprocess.Popen(["flock", str(held), sys.executable, "-c",
                             "import sys; sys.stdout.write('in\\n'); sys.stdout.flush(); "
                             "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "in\n"
        assert force_words(inspect(str(held))) == ""
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)
    assert force_words(inspect(str(lockdir / "absent.lock"))) == ""
