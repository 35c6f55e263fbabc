"""Files the engine's gate protects (docs/engine.md, "The gate"), made for tests: a crashed
Vim's swap with unsaved changes (the real one in tests/data/devtools/vim), an Emacs lock whose
auto-save file exists, an empty ``__init__.py`` and ``.gitkeep``, a text file, an af claim file
and a claim replayed from an af ledger (tests/data/fixtures/af), and the empty file a real
filelock leaves when it releases."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

DATA = Path(__file__).resolve().parents[1] / "data"
OLD = 1_700_000_000
"""An mtime long past the writing grace (Unix s)."""

KINDS = ("vim", "emacs", "init", "gitkeep", "text", "afclaim", "ledger", "filelock")
"""The protected kinds, by name."""

EMPTY_KINDS = frozenset({"init", "gitkeep", "filelock"})
"""Kinds that are empty files."""


class Snapshot(NamedTuple):
    """What is at a path: its bytes (``None``: nothing), permission bits and mtime (ns)."""

    data: bytes | None
    mode: int = 0
    mtime_ns: int = 0

    @classmethod
    def of(cls, path: Path) -> Snapshot:
        try:
            st = path.lstat()
        except FileNotFoundError:
            return cls(None)
        return cls(path.read_bytes(), stat.S_IMODE(st.st_mode), st.st_mtime_ns)


def make(kind: str, directory: Path) -> Path:
    """Make a file of ``kind`` (one of :data:`KINDS`) in ``directory``; returns the path the
    engine is asked about (for ``ledger``: the virtual ``<proof>/ledger#1.1``)."""
    if kind == "vim":
        (directory / "notes.txt").write_text("saved line\n")
        path = directory / ".notes.txt.swp"
        shutil.copyfile(DATA / "devtools" / "vim" / "dead-dirty.notes.txt.swp", path)
    elif kind == "emacs":
        path = directory / ".#draft.txt"
        path.write_text(f"dev@{socket.gethostname()}.999999:1\n")  # a dead Emacs
        (directory / "#draft.txt#").write_text("what Emacs auto-saved\n")
    elif kind in ("init", "gitkeep"):
        path = directory / ("__init__.py" if kind == "init" else ".gitkeep")
        path.write_bytes(b"")
        path.chmod(0o640 if kind == "init" else 0o664)
    elif kind == "text":
        path = directory / "notes.lock"
        path.write_text("meeting notes: do not delete\n")
    elif kind == "afclaim":
        (directory / "locks").mkdir()
        path = directory / "locks" / "n1.lock"
        path.write_text('{"node_id":"n1","owner":"agent-7","acquired_at":'
                        '"2020-01-01T00:00:00Z","expires_at":"2020-01-01T01:00:00Z"}\n')
    elif kind == "ledger":
        shutil.copytree(DATA / "fixtures" / "af" / "proof", directory / "proof")
        return Path(f"{directory}/proof/ledger#1.1")
    elif kind == "filelock":
        path = directory / "job.lock"
        shutil.copy2(_filelock_leftover(), path)  # as a real filelock leaves it (mode too)
    else:
        raise ValueError(kind)
    os.utime(path, (OLD, OLD))
    return path


_made: list[Path] = []


def _filelock_leftover() -> Path:
    """The empty file a real ``filelock.FileLock`` leaves when it releases, made once per
    process (in a private temp directory, removed at exit)."""
    if not _made:
        import atexit
        import tempfile

        where = Path(tempfile.mkdtemp(prefix="lockwarden-filelock-"))
        atexit.register(shutil.rmtree, where, True)
        path = where / "job.lock"
        subprocess.run([sys.executable, "-c",
                        "import filelock, sys\nwith filelock.FileLock(sys.argv[1]): pass",
                        str(path)], check=True, timeout=60)
        assert path.read_bytes() == b""
        _made.append(path)
    return _made[0]


def ledger_files(path: Path) -> dict[str, bytes]:
    """The files of the af ledger behind the virtual ``<proof>/ledger#<node>`` ``path``."""
    ledger = Path(str(path).rpartition("#")[0])
    return {p.name: p.read_bytes() for p in sorted(ledger.iterdir())}
