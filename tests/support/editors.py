"""Real editors' files for tests: a Vim swap with unsaved changes, made by a real Vim in a
pseudo-terminal that is then killed (SIGKILL), as a crash leaves it."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _read_until(fd: int, marker: bytes, seen: bytearray, timeout: float = 20.0) -> None:
    """Read the pseudo-terminal until ``marker`` appears (select: an event, no sleep)."""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"{marker!r} never came; got {bytes(seen[-300:])!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:  # the terminal's other end closed
                break


def dirty_vim_swap(directory: Path, name: str = "notes.txt") -> tuple[Path, Path]:
    """Edit ``directory/name`` in a real Vim, type a change, ``:preserve`` it into the swap and
    SIGKILL Vim: returns the swap (``.NAME.swp``, dirty, its Vim dead) and the edited file.
    Skips the test when Vim is not installed."""
    vim = shutil.which("vim")
    if vim is None:
        pytest.skip("vim is not installed (CI installs it)")
    edited = directory / name
    edited.write_text("saved line\n")
    master, slave = os.openpty()
    env = {**os.environ, "TERM": "xterm", "HOME": str(directory)}
    p = subprocess.Popen([vim, "-u", "NONE", "-N", "-i", "NONE", str(edited)], cwd=directory,
                         stdin=slave, stdout=slave, stderr=slave, env=env,
                         start_new_session=True)
    os.close(slave)
    try:
        seen = bytearray()
        _read_until(master, name.encode(), seen)
        os.write(master, b"Ounsaved line\x1b:preserve\r")
        _read_until(master, b"preserved", seen)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
        os.close(master)
    swap = directory / f".{name}.swp"
    assert swap.exists()
    return swap, edited


@contextlib.contextmanager
def live_vim(directory: Path, name: str = "notes.txt") -> Iterator[tuple[Path, int]]:
    """A real Vim editing ``directory/name`` in a pseudo-terminal, for as long as the ``with``
    lasts: yields its swap (``.NAME.swp``) and its PID; it is killed after. Skips the test when
    Vim is not installed."""
    vim = shutil.which("vim")
    if vim is None:
        pytest.skip("vim is not installed (CI installs it)")
    edited = directory / name
    edited.write_text("saved line\n")
    master, slave = os.openpty()
    env = {**os.environ, "TERM": "xterm", "HOME": str(directory)}
    p = subprocess.Popen([vim, "-u", "NONE", "-N", "-i", "NONE", str(edited)], cwd=directory,
                         stdin=slave, stdout=slave, stderr=slave, env=env,
                         start_new_session=True)
    os.close(slave)
    try:
        _read_until(master, name.encode(), bytearray())
        swap = directory / f".{name}.swp"
        assert swap.exists()
        yield swap, p.pid
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
        os.close(master)
