"""Property tests for the developer tools' formats: whatever the bytes and whichever tool's
path they sit at, only ParseError (with a real reason) escapes ``detect`` and ``parse``; the
real files from tests/data/devtools/ mutated at random too."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.formats import emacs, libreoffice, softfilelock, terraform, vimswap
from core.record import DEVTOOL_FORMATS
from tests.support.fuzz import FAST, check_parse

pytestmark = pytest.mark.slow  # hypothesis, thousands of examples

DATA = Path(__file__).parents[2] / "data" / "devtools"
PATHS = [
    "/r/.git/index.lock", "/r/.git/HEAD.lock", "/r/.git/refs/heads/m.lock", "/r/.git/gc.pid",
    "/r/.git/index~pid.lock", "/b.git/packed-refs.lock", "/d/.#f.txt", "/d/.~lock.a.odt#",
    "/d/.f.swp", "/d/.terraform.tfstate.lock.info", "/d/x.lock", "/h/.config/libreoffice/4/.lock",
    "",
]
SAMPLES = [
    (DATA / "vim/dead-dirty.notes.txt.swp").read_bytes()[:1100],
    (DATA / "vim/live-clean.notes.txt.swp").read_bytes()[:1024],
    (DATA / "emacs/example-with-boottime.txt").read_bytes(),
    (DATA / "libreoffice/.~lock.report.odt#").read_bytes(),
    (DATA / "terraform/.terraform.tfstate.lock.info").read_bytes(),
    (DATA / "python-filelock/softfilelock-dead-holder.lock").read_bytes(),
    (DATA / "git/gc.pid.dead-git-gc").read_bytes(),
    (DATA / "git/refs-heads-main.lock.dead-git-commit").read_bytes(),
    b"pid 4242\n",
    (DATA / "libreoffice/profile-dot-lock.txt").read_bytes(),
]


@settings(FAST, max_examples=3_000)
@given(st.binary(max_size=120), st.sampled_from(PATHS))
def test_arbitrary_bytes_at_tool_paths(data: bytes, path: str) -> None:
    check_parse(data, path=path)


@settings(FAST, max_examples=1_500)
@given(st.binary(max_size=1200), st.sampled_from([*DEVTOOL_FORMATS]), st.sampled_from(PATHS))
def test_arbitrary_bytes_forced_devtool_format(data: bytes, fmt: str, path: str) -> None:
    check_parse(data, fmt, path=path)


@settings(FAST, max_examples=1_500)
@given(
    st.sampled_from(SAMPLES),
    st.lists(st.tuples(st.integers(0, 1100), st.binary(max_size=6)), max_size=5),
    st.sampled_from([*DEVTOOL_FORMATS, None]),
    st.sampled_from(PATHS),
)
def test_mutated_real_tool_files(sample: bytes, edits: list[tuple[int, bytes]],
                                 fmt: str | None, path: str) -> None:
    data = bytearray(sample)
    for pos, chunk in edits:
        pos = min(pos, len(data))
        data[pos: pos + len(chunk)] = chunk
    check_parse(bytes(data), fmt, path=path)


@settings(FAST, max_examples=500)
@given(st.text(max_size=60))
def test_text_parsers_direct(text: str) -> None:
    data = text.encode("utf-8", errors="surrogatepass")
    for parser in (emacs.parse, libreoffice.parse, libreoffice.parse_profile,
                   softfilelock.parse, terraform.parse, vimswap.parse):
        try:
            parser(data, "/d/.#x")
        except Exception as exc:
            assert type(exc).__name__ == "ParseError", (parser, exc)
