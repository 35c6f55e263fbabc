"""Unicode format characters (category Cf: U+202E RIGHT-TO-LEFT OVERRIDE and the other bidi
controls, zero width spaces and joiners, the byte-order mark, the soft hyphen, tag characters)
can reorder or hide what a person reads. Every human output escapes them like control
characters (``core.text.printable``; docs/cli.md, "Control characters"), the raw-file pane of
and the engine never writes one into a tag: it replaces them by spaces like control characters
(``core.formats._common.clean_tag``). The app's raw-file pane: tests/app/test_app_rough_edges.py.
Real files, real processes."""

from __future__ import annotations

import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from core.engine.lock import Lock
from core.text import printable, printable_lines
from core.verdicts.inspect import inspect
from tests.support.cli import ENV

FORMAT_CHARS = ("\u202e", "\u202a", "\u2066", "\u200b", "\u200d", "\u2060", "\ufeff", "\u00ad",
                "\u061c", "\U000e0041")


def test_every_format_character_is_escaped() -> None:
    for c in FORMAT_CHARS:
        assert unicodedata.category(c) == "Cf"
        shown = printable(f"a{c}b")
        assert c not in shown and shown.startswith("a\\") and shown.endswith("b"), repr(shown)
    # every Cf character of the running Python's Unicode tables
    every = "".join(chr(i) for i in range(0x80, 0x110000)
                    if unicodedata.category(chr(i)) == "Cf")
    assert not any(unicodedata.category(c) == "Cf" for c in printable(every))
    # other non-ASCII text is kept, and escaping twice changes nothing more
    for text in ("déjà vu", "日本語のタグ", "🔒 deploy", "a\\u202eb"):
        assert printable(text) == text
    assert printable(printable("x\u202ey\n")) == "x\\u202ey\\n"


def test_printable_lines_keeps_the_line_breaks_only() -> None:
    assert printable_lines("one\r\ntwo\u202e\nthree\x1b[2J") == "one\ntwo\\u202e\nthree\\x1b[2J"
    assert printable_lines("a\tb") == "a\\tb"
    assert printable_lines("a\tb", tabs=True) == "a\tb"


@pytest.mark.parametrize("fmt", ["sema", "task-mcp", "af-ledger"])
def test_the_engine_writes_no_format_character_into_a_tag(lockdir: Path, fmt: str) -> None:
    path = lockdir / ("proof/ledger/ledger.lock" if fmt == "af-ledger" else f"{fmt}.lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    tag = "deploy \u202eevil\u200b v1\u2066.2\ufeff"
    lock = Lock(str(path), tag=tag, format=fmt, ttl=60.0 if fmt == "task-mcp" else None)
    lock.acquire(blocking=False)
    try:
        raw = path.read_bytes().decode("utf-8")
        written = raw.encode("ascii", "backslashreplace").decode("ascii").lower()
        for c in FORMAT_CHARS[:7]:
            assert c not in raw
            assert f"\\u{ord(c):04x}" not in written  # nor a JSON escape of one
        st = inspect(str(path))
        assert st.record is not None
        said = st.record.holder if fmt == "af-ledger" else st.record.tag
        assert said == "deploy  evil  v1 .2"
    finally:
        lock.release()


def test_the_cli_writes_no_format_character_into_a_tag(lockdir: Path) -> None:
    path = lockdir / "cli.lock"
    out = subprocess.run([sys.executable, "-m", "core", "try", str(path), "--tag",
                          "nightly\u202ereversed"], capture_output=True, text=True, env=ENV,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert "\u202e" not in path.read_text(encoding="utf-8")
    assert "tag=nightly reversed\n" in path.read_text(encoding="utf-8")
