"""``lockwarden audit --tail N`` reads from the end (core.audit.read.tail): on a 1 GB log the last
20 entries take well under a second and under 100 MB, measured in separate processes (the
library call, and the CLI itself through ``wait4`` resource usage); and ``tail`` gives exactly
the entries ``read`` gives for the same lines, whatever the log holds."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import audit
from core.fsutil import AUDIT_LOG_NAME

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
GB = 1024**3
BIG = 900 * 1024  # lines just under the 1 MiB an entry can be


pytestmark = pytest.mark.usefixtures("private_state")  # HOME and XDG dirs in tmp_path


@pytest.fixture
def gb_log(lockdir: Path, tmp_path: Path) -> tuple[Path, list[audit.AuditEntry]]:
    """A 1 GB log: a 1 GiB line of zeros (a sparse hole) and then 40 lines, among which ten
    foreign lines of 900 KiB; and the entries ``read`` gives for those last 40 lines."""
    part = tmp_path / "part" / AUDIT_LOG_NAME
    part.parent.mkdir()
    for i in range(30):
        audit.append(str(part.parent / "a.lock"), "acquire" if i % 2 else "release",
                     details={"i": i})  # fmt: skip
        if i >= 20:
            with open(part, "ab") as f:
                f.write(b'{"operation":"pad","details":{"p":"' + b"p" * BIG + b'"}}\n')
    expected = audit.read(str(part))
    log = lockdir / AUDIT_LOG_NAME
    with open(log, "wb") as f:
        f.truncate(GB)
        f.seek(GB)
        f.write(b"\n" + part.read_bytes())
    return log, expected


def _same(tailed: list[audit.AuditEntry], expected: list[audit.AuditEntry]) -> None:
    """Equal but for the place fields (line numbers from the end, offsets, the path)."""
    def strip(e: audit.AuditEntry) -> audit.AuditEntry:
        return dataclasses.replace(e, line=0, offset=0, log_path="")

    assert [strip(e) for e in tailed] == [strip(e) for e in expected]


def _peak_rss_kib() -> str:
    return "int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])"


# VmHWM, the peak resident size of this process since its exec: ru_maxrss would also count the
# pytest process the child was forked (vforked) from.
MEASURE = r"""
import json, sys, time
from core import audit
t0 = time.perf_counter()
got = audit.tail(sys.argv[1], 20)
took = time.perf_counter() - t0
print(json.dumps({"n": len(got), "s": took, "ops": [e.operation for e in got],
                  "peak_rss_kib": PEAK}))
""".replace("PEAK", _peak_rss_kib())

CLI = r"""
import atexit, runpy, sys
out = sys.argv[1]
def report():
    with open(out, "w") as f:
        f.write(str(PEAK))
atexit.register(report)
sys.argv = ["lockwarden", *sys.argv[2:]]
runpy.run_module("core", run_name="__main__", alter_sys=True)
""".replace("PEAK", _peak_rss_kib())


@pytest.mark.skipif(sys.platform != "linux", reason="reads VmHWM from Linux /proc")
@pytest.mark.timeout(120)
def test_tail_20_of_a_1gb_log_is_fast_and_small(
    gb_log: tuple[Path, list[audit.AuditEntry]],
) -> None:
    log, expected = gb_log
    assert os.path.getsize(log) > GB
    r = subprocess.run([sys.executable, "-c", MEASURE, str(log)], capture_output=True,
                       text=True, env=ENV, timeout=100)  # fmt: skip
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert m["n"] == 20 and m["ops"] == [e.operation for e in expected[-20:]]
    assert m["s"] < 1.0, m
    assert m["peak_rss_kib"] < 100 * 1024, m
    _same(audit.tail(str(log), 20), expected[-20:])


@pytest.mark.skipif(sys.platform != "linux", reason="reads VmHWM from Linux /proc")
@pytest.mark.timeout(120)
def test_cli_tail_uses_the_backward_reader(
    gb_log: tuple[Path, list[audit.AuditEntry]], tmp_path: Path
) -> None:
    """``lockwarden audit LOG --tail 20 --json`` as a whole process, interpreter start
    included: reading the 1 GiB line forwards would cost seconds of CPU just to hash it."""
    log, expected = gb_log
    peak = tmp_path / "peak"
    argv = [sys.executable, "-c", CLI, str(peak), "audit", str(log), "--tail", "20", "--json"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    assert p.stdout is not None and p.stderr is not None
    out, err = p.stdout.read(), p.stderr.read()
    _pid, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    assert p.returncode == 0, err
    rows = json.loads(out)
    assert [r["operation"] for r in rows] == [e.operation for e in expected[-20:]]
    assert rows[-1]["line"] == -1 and rows[0]["line"] == -20
    cpu = usage.ru_utime + usage.ru_stime
    assert cpu < 1.0, cpu
    assert int(peak.read_text()) < 100 * 1024


def test_tail_stops_at_a_line_longer_than_an_entry_can_be(lockdir: Path) -> None:
    log = lockdir / AUDIT_LOG_NAME
    log.write_bytes(b'{"operation":"first"}\n' + b"z" * (3 * 1024 * 1024) + b"\n"
                    + b'{"operation":"acquire"}\n' * 3)  # fmt: skip
    got = audit.tail(str(log), 10)
    assert len(got) == 4 and [e.operation for e in got[1:]] == ["acquire"] * 3
    assert got[0].error is not None and "earlier lines are not shown" in got[0].error
    assert (got[0].line, got[0].digest, got[0].offset) == (-4, "", -1)
    assert audit.tail(str(log), 3) == audit.tail(str(log), 10)[1:]


def test_tail_edge_cases(lockdir: Path) -> None:
    log = lockdir / AUDIT_LOG_NAME
    assert audit.tail(str(lockdir), 5) == []  # no log
    log.write_bytes(b"")
    assert audit.tail(str(log), 5) == []
    log.write_bytes(b"\n\n  \r\n")
    assert audit.tail(str(log), 5) == []
    with pytest.raises(ValueError):
        audit.tail(str(log), -1)
    log.write_bytes(b'{"a":1}\n' + b"\n" * (300 * 1024) + b'{"b":2}')  # blank blocks between
    got = audit.tail(str(log), 5)
    assert [e.raw for e in got] == ['{"a":1}', '{"b":2}']
    assert [e.line for e in got] == [-(300 * 1024 + 2), -1]
    assert [e.offset for e in got] == [0, 8 + 300 * 1024]
    assert audit.tail(str(log), 0) == []


_line = st.one_of(
    st.builds(lambda k: json.dumps({"operation": f"op{k}"}).encode(), st.integers(0, 99)),
    st.sampled_from([b"", b"  ", b"\r", b" \t\r", b"not json", b"\xff\xfe", b"[1]"]),
    st.builds(lambda n, c: b'{"pad":"' + c * n + b'"}',
              st.integers(60 * 1024, 200 * 1024), st.sampled_from([b"x", b" "])),
    st.binary(max_size=40).filter(lambda b: b"\n" not in b),
)


@pytest.mark.slow
@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lines=st.lists(_line, max_size=25), final_newline=st.booleans(), n=st.integers(0, 30))
def test_tail_gives_what_read_gives(
    lockdir: Path, lines: list[bytes], final_newline: bool, n: int
) -> None:
    log = lockdir / AUDIT_LOG_NAME
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    log.write_bytes(data)
    everything = audit.read(str(log))
    physical = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    got = audit.tail(str(log), n)
    want = everything[max(0, len(everything) - n):] if n else []
    assert got == [dataclasses.replace(e, line=e.line - physical - 1) for e in want]
