"""What the latency benchmarks of holders' exits share (tests/benchmarks/bench_holder_exits.py,
bench_exit_row.py, bench_fleet_exits.py): percentiles, one line of figures in milliseconds,
and the kernel's floor -- a bare ``poll()`` on a pidfd woken by SIGKILL."""

from __future__ import annotations

import os
import select
import signal
import statistics
import subprocess
import time
from collections.abc import Callable


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``xs``, nearest rank."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def summary_ms(xs: list[float]) -> str:
    """``p50 … ms  p95 … ms  max … ms  (n=…)`` for figures in ms; ``(none)`` for none."""
    if not xs:
        return "(none)"
    return (f"p50 {statistics.median(xs):7.2f} ms  p95 {pct(xs, 0.95):7.2f} ms  "
            f"max {max(xs):7.2f} ms  (n={len(xs)})")


def pidfd_floor_once(spawn: Callable[[], subprocess.Popen[bytes]]) -> float:
    """ms from just before SIGKILL to a bare ``poll()`` on the victim's pidfd waking up
    (``spawn`` starts the victim). Linux only (``os.pidfd_open``)."""
    p = spawn()
    fd = os.pidfd_open(p.pid)
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    t0 = time.perf_counter_ns()
    os.kill(p.pid, signal.SIGKILL)
    poller.poll()
    t1 = time.perf_counter_ns()
    os.close(fd)
    p.wait()
    return (t1 - t0) / 1e6
