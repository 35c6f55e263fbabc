"""Holders' exits delivered by the kernel (docs/watching.md, "Holders' exits"): prints figures
beside the kernel's own floor measured in the same run; asserts nothing (docs/DESIGN.md,
"Testing"). Targets (docs/performance.md, "Holders' exits"): a holder SIGKILLed -> its
``watch --json`` stale line p95 <= 20 ms over 100 kills; with 1,000 live holders watched, the
idle watcher <= 0.05 % of a core; 10,000 holders: nothing breaks (fallback counted).

    .venv/bin/python tests/benchmarks/bench_holder_exits.py [--kills 100] [--holders 1000]
        [--seconds 60] [--scale 10000] [--scale-limit 4096] [--skip latency,idle,scale]

- **latency**: one ``python -m core watch DIR --json --no-history`` (this worktree's code) for
  the whole run. For each kill a ``sleep`` holder is started and a lock naming it is written as
  Lockwarden writes one (``host``, ``start``, ``token``: stale as soon as its holder is proven
  dead); once its ``added`` line is read (and says ``liveness_followed``), the holder is
  SIGKILLed: latency = from just before ``kill()`` to the moment its ``changed`` stale line is
  read. The judgement of a Lockwarden lock whose holder died reads ``/proc/locks`` once (is
  the holder's pin kept by another process? core/kernel/pin.py), so a sema tool's lock
  (``pid``, ``timestamp``, ``tag``: held until ``stale_after``, its ``changed`` line says the
  holder dead) is measured too, without that read. Beside them, in the same loop: the
  **floor**, a bare ``poll()`` on a pidfd of another ``sleep`` from just before ``kill()`` to
  the wake-up; and one read of ``/proc/locks``.
- **idle**: ``--holders`` live ``sleep`` holders, one lock each in one directory, watched by a
  child process running :class:`core.watch.watcher.Watcher` (default settings: liveness pass
  every 2 s, rescan every 30 s); its CPU time (the sum of its threads' ``schedstat``, ns) and
  wake-ups (context switches) over ``--seconds``, and its RSS. Then the same with every holder
  left to the liveness pass (``exit_budget=0``: the behaviour before this work), and the
  floor: a Python process holding the same number of pidfds in one ``epoll``. Then, in this
  process, the cost of one periodic rescan of that directory, listed in full and skipped as
  unchanged (core/watch/quiet.py), and the rescans' share of a core over
  ``FULL_RESCAN_INTERVAL`` (one full, the rest skipped): a ``--seconds`` window may hold no
  full rescan.
- **scale**: ``--scale`` holders watched by one child (with the machine's descriptor limit,
  then with ``RLIMIT_NOFILE`` at ``--scale-limit``, where the rest fall back to the pass): how
  many are followed and how many counted as fallback, the start time, then every holder
  SIGKILLed at once and the time until the watcher reports every lock stale.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from core.formats import sema  # noqa: E402
from core.verdicts.liveness import hostname  # noqa: E402
from tests.support.latency import pidfd_floor_once, summary_ms  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def write_lock(path: str, pid: int, *, ours: bool = True) -> None:
    """A sema lock naming ``pid``, published with ``link()``: as Lockwarden writes one
    (``ours``), or as the sema tools do (``pid``, ``timestamp``, ``tag`` only)."""
    if ours:
        rec = sema.make_record(path, pid=pid, timestamp=datetime.now(UTC), tag="bench",
                               host=hostname(), start=psutil.Process(pid).create_time(),
                               token="ab" * 16)
        data = sema.serialize(rec)
    else:
        data = f"pid={pid}\ntimestamp={int(time.time())}\ntag=bench\n".encode()
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        f.write(data)
    os.link(tmp, path)
    os.unlink(tmp)


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL)


# -- latency ------------------------------------------------------------------------------------


def floor_once() -> float:
    """ms from just before SIGKILL to a bare ``poll()`` on the victim's pidfd waking up."""
    return pidfd_floor_once(sleeper)


def proc_locks_once() -> float:
    t0 = time.perf_counter()
    with open("/proc/locks", "rb") as f:
        f.read()
    return (time.perf_counter() - t0) * 1000


class Lines:
    """The watcher's stdout, one JSON object a line, handed over by path and event."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.cond = threading.Condition()
        self.seen: dict[tuple[str, str], tuple[float, dict[str, object]]] = {}
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            t = time.monotonic()
            obj = json.loads(line)
            key = (str(obj.get("event")), str(obj.get("path", "")))
            if obj.get("event") == "changed" and obj.get("liveness") != "dead":
                continue
            with self.cond:
                self.seen[key] = (t, obj)
                self.cond.notify_all()

    def wait(self, event: str, path: str, timeout: float = 30.0) -> tuple[float, dict[str, object]]:
        with self.cond:
            if not self.cond.wait_for(lambda: (event, path) in self.seen, timeout):
                raise SystemExit(f"no {event} line for {path} within {timeout:g} s")
            return self.seen.pop((event, path))


def latency(kills: int) -> None:
    d = tempfile.mkdtemp(prefix="lw-exits-")
    w = subprocess.Popen([sys.executable, "-m", "core", "watch", d, "--json", "--no-history"],
                         cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    lines = Lines(w)
    lines.wait("ready", "")
    ours: list[float] = []
    theirs: list[float] = []
    floor: list[float] = []
    table: list[float] = []
    followed = 0
    states: set[str] = set()
    try:
        for i in range(kills):
            floor.append(floor_once())
            table.append(proc_locks_once())
            for own, into in ((True, ours), (False, theirs)):
                holder = sleeper()
                path = os.path.join(d, f"k{i:04d}{'' if own else '-sema'}.lock")
                write_lock(path, holder.pid, ours=own)
                _t, added = lines.wait("added", path)
                evidence = added.get("evidence")
                how = evidence.get("followed") if isinstance(evidence, dict) else None
                followed += isinstance(how, dict) and how.get("code") == "liveness_followed"
                t0 = time.monotonic()
                os.kill(holder.pid, signal.SIGKILL)
                t1, changed = lines.wait("changed", path)
                into.append((t1 - t0) * 1000)
                states.add(f"{'ours' if own else 'sema'}: {changed.get('state')}")
                holder.wait()
                os.unlink(path)
                lines.wait("removed", path)
    finally:
        w.terminate()
        w.wait(5)
        shutil.rmtree(d, ignore_errors=True)
    print(f"holder SIGKILLed -> its watch --json line ({kills} kills each; {followed} of "
          f"{2 * kills} holders said liveness_followed when added; {', '.join(sorted(states))})")
    print(f"  floor: bare pidfd poll() wake-up               {summary_ms(floor)}")
    print(f"  anchor: one read of /proc/locks                 {summary_ms(table)}")
    print(f"  Lockwarden's lock: stale line (pin checked)    {summary_ms(ours)}")
    print(f"  sema tool's lock: holder-dead line (no pin)    {summary_ms(theirs)}")


# -- idle and scale -----------------------------------------------------------------------------

CHILD = r"""
import json, os, resource, sys, threading, time
limit = int(sys.argv[3])
if limit:
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
from core.config import WatchSpec
from core.record import State
from core.watch.watcher import Watcher
budget = None if sys.argv[2] == "none" else int(sys.argv[2])
stale, want, done = set(), [0], threading.Event()
def on_change(cs):
    for s in [*cs.added, *cs.changed]:
        if s.state is State.STALE:
            stale.add(s.path)
    if want[0] and len(stale) >= want[0]:
        done.set()
t = time.monotonic()
w = Watcher([WatchSpec(sys.argv[1])], on_change, exit_budget=budget)
w.start()
st = w.exit_stats()
print(json.dumps({"start_s": time.monotonic() - t, "locks": len(w.snapshot()),
                  "followed": st.followed, "polled": st.polled,
                  "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}), flush=True)
for line in sys.stdin:
    n, t0 = line.split()
    want[0] = int(n)
    if len(stale) >= want[0]:
        done.set()
    done.wait(900)
    st = w.exit_stats()
    print(json.dumps({"all_stale_s": time.monotonic() - float(t0), "stale": len(stale),
                      "followed": st.followed, "polled": st.polled}), flush=True)
w.close()
"""

FLOOR_IDLE = r"""
import os, select, sys
ep = select.epoll()
fds = [os.pidfd_open(int(p)) for p in sys.argv[1:]]
for fd in fds:
    ep.register(fd, select.EPOLLIN | select.EPOLLONESHOT)
print("{}", flush=True)
r, _ = os.pipe()
ep.register(r, select.EPOLLIN)
sys.stdin.read()
"""


def _cpu_ns(pid: int) -> tuple[int, int]:
    """CPU time (ns, all threads) and context switches of process ``pid``."""
    ns = switches = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns += int(f.read().split()[0])
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if "ctxt_switches" in line:
                        switches += int(line.split()[1])
        except OSError:
            pass
    return ns, switches


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _child(d: str, budget: str, limit: int) -> tuple[subprocess.Popen[str], dict[str, object]]:
    p = subprocess.Popen([sys.executable, "-c", CHILD, d, budget, str(limit)], cwd=ROOT,
                         env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    first = p.stdout.readline()
    if not first:
        raise SystemExit("the watcher child died")
    return p, json.loads(first)


def _measure(p: subprocess.Popen[str], seconds: float) -> tuple[float, float, float]:
    """(% of a core, wake-ups/s, RSS MiB) of ``p`` over ``seconds`` after a 3 s settle."""
    time.sleep(3.0)
    ns0, sw0 = _cpu_ns(p.pid)
    time.sleep(seconds)
    ns1, sw1 = _cpu_ns(p.pid)
    return (ns1 - ns0) / 1e9 / seconds * 100, (sw1 - sw0) / seconds, _rss_mib(p.pid)


def _holders(n: int, d: str) -> list[subprocess.Popen[bytes]]:
    hs = []
    for i in range(n):
        h = sleeper()
        hs.append(h)
        write_lock(os.path.join(d, f"h{i:05d}.lock"), h.pid)
    return hs


def _reap(hs: list[subprocess.Popen[bytes]]) -> None:
    for h in hs:
        if h.poll() is None:
            h.kill()
    for h in hs:
        h.wait()


def idle(n: int, seconds: float) -> None:
    d = tempfile.mkdtemp(prefix="lw-idle-")
    hs = _holders(n, d)
    try:
        print(f"idle watcher, {n} live holders (one lock each), {seconds:g} s each")
        fl = subprocess.Popen([sys.executable, "-c", FLOOR_IDLE, *[str(h.pid) for h in hs]],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert fl.stdout is not None
        fl.stdout.readline()
        cpu, wake, rss = _measure(fl, seconds)
        fl.communicate("")
        print(f"  floor: {n} pidfds in one epoll, idle     CPU {cpu:6.3f} % of a core  "
              f"{wake:6.1f} wake-ups/s  RSS {rss:5.1f} MiB")
        for name, budget in (("followed by the kernel (pidfd)", "none"),
                             ("every holder left to the 2 s pass", "0")):
            p, info = _child(d, budget, 0)
            cpu, wake, rss = _measure(p, seconds)
            p.communicate("")
            print(f"  Watcher, {name:34s} CPU {cpu:6.3f} % of a core  {wake:6.1f} wake-ups/s"
                  f"  RSS {rss:5.1f} MiB  (start {info['start_s']:.2f} s, followed "
                  f"{info['followed']}, polled {info['polled']})")
        _rescan_costs(d)
    finally:
        _reap(hs)
        shutil.rmtree(d, ignore_errors=True)


def _rescan_costs(d: str) -> None:
    """One periodic rescan of ``d`` in this process: listed in full, and skipped unchanged."""
    from core.config import DEFAULT_RESCAN_INTERVAL, WatchSpec
    from core.watch.quiet import FULL_RESCAN_INTERVAL
    from core.watch.watcher import Watcher

    w = Watcher([WatchSpec(d)], lambda cs: None, rescan_interval=3600, liveness_interval=3600)
    w.start()
    dirs = w._directories
    wd = dirs.dirs[0]
    try:
        with w._lock:
            full, quick = [], []
            for _ in range(20):
                wd.listed = None
                t = time.perf_counter()
                dirs.rescan_dir(wd)
                full.append(time.perf_counter() - t)
            for _ in range(200):
                t = time.perf_counter()
                dirs.rescan_dir(wd)
                quick.append(time.perf_counter() - t)
            skipped = dirs.skipped
    finally:
        w.close()
    f, q = statistics.median(full), statistics.median(quick)
    n = FULL_RESCAN_INTERVAL / DEFAULT_RESCAN_INTERVAL
    share = (f + (n - 1) * q) / FULL_RESCAN_INTERVAL * 100
    print(f"  a periodic rescan in this process: listed in full {f * 1000:.2f} ms, skipped "
          f"unchanged {q * 1e6:.1f} us ({skipped}/200 skipped); rescans every "
          f"{DEFAULT_RESCAN_INTERVAL:g} s, full every {FULL_RESCAN_INTERVAL:g} s: "
          f"{share:.4f} % of a core (all full: {f / DEFAULT_RESCAN_INTERVAL * 100:.4f} %)")


def scale(n: int, limit: int) -> None:
    print(f"{n} holders (one lock each), all SIGKILLed at once")
    for nofile in (0, limit):
        d = tempfile.mkdtemp(prefix="lw-scale-")
        hs = _holders(n, d)
        try:
            p, info = _child(d, "none", nofile)
            assert p.stdin is not None and p.stdout is not None
            rss = _rss_mib(p.pid)
            t0 = time.monotonic()
            for h in hs:
                os.kill(h.pid, signal.SIGKILL)
            killed = time.monotonic() - t0
            p.stdin.write(f"{n} {t0}\n")
            p.stdin.flush()
            after = json.loads(p.stdout.readline())
            p.communicate("")
            print(f"  RLIMIT_NOFILE {info['nofile']}: start {info['start_s']:.2f} s, "
                  f"{info['locks']} locks, followed {info['followed']}, fallback "
                  f"{info['polled']}, RSS {rss:.0f} MiB; killing took {killed:.2f} s; all "
                  f"{after['stale']} stale {after['all_stale_s']:.2f} s after the first kill; "
                  f"then followed {after['followed']}, fallback {after['polled']}")
        finally:
            _reap(hs)
            shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--holders", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--scale", type=int, default=10000)
    ap.add_argument("--scale-limit", type=int, default=4096)
    ap.add_argument("--skip", default="", help="comma-separated: latency, idle, scale")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the holders' pipes
    print(f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs, kernel {os.uname().release}")
    if "latency" not in skip:
        latency(args.kills)
    if "idle" not in skip:
        idle(args.holders, args.seconds)
    if "scale" not in skip:
        scale(args.scale, args.scale_limit)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
