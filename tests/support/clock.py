"""Lock ages a test can give on any machine, however recently it booted: a lock of this host
taken before its last boot is stale whatever else it says (docs/DESIGN.md, "Liveness and
verdicts"; reason ``predates_boot``), so a lock meant to be judged by its age, its PID or its
TTL must be taken after the boot."""

from __future__ import annotations

import time

import psutil

MARGIN = 5.0
"""Seconds kept between the boot and the oldest lock a test writes (the boot rule allows 1 s of
slack; ``psutil.boot_time()`` is whole seconds)."""


def uptime() -> float:
    """Seconds since this host's last boot (``psutil.boot_time()``)."""
    return time.time() - psutil.boot_time()


def age_after_boot(seconds: float, *, margin: float = MARGIN) -> float:
    """``seconds``, or less on a machine that booted less than ``seconds + margin`` ago: the
    oldest age (seconds, > 0) a lock taken now can have without predating the boot. A test
    whose verdict needs an age above some limit scales the limit with this age."""
    age = min(float(seconds), uptime() - margin)
    assert age > 0, f"this host booted {uptime():.0f} s ago: too recently for a lock's age"
    return age


def taken_ago(seconds: float, *, margin: float = MARGIN) -> float:
    """The Unix time (s) :func:`age_after_boot` ``(seconds)`` ago: a lock's timestamp or mtime
    that is old, yet after this host's last boot."""
    return time.time() - age_after_boot(seconds, margin=margin)
