"""Change -> table latency of locks on servers (docs/remote.md, "In the app", "Change feed"):
from a real python-redis-lock acquire (and release) on a private redis-server to the app's
inventory delivering it to the table, with the change feed (``notifications = true``) and with
polling alone (every 5 s: the worst case is the interval). Prints figures next to the anchor
measured in the same run: a bare keyspace notification's arrival at a Python subscriber.
Asserts nothing about speed (docs/DESIGN.md "Testing").

    QT_QPA_PLATFORM=offscreen .venv/bin/python tests/benchmarks/bench_remote_latency.py \\
        [--samples 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from tests.support.servers import start_redis  # noqa: E402


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def line(name: str, values: list[float]) -> str:
    return (f"  {name:52s} p50 {statistics.median(values) * 1e3:7.2f} ms  "
            f"p95 {pct(values, 0.95) * 1e3:7.2f} ms  (n={len(values)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=30)
    args = ap.parse_args()
    try:
        import redis
        import redis_lock
    except ImportError:
        print("redis or python-redis-lock is not installed: skipped")
        return
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from app.bridges.remote_poller import RemotePoller
    from app.bridges.watch_bridge import WatchBridge
    from core.config import Config
    from core.config.model import ServerSpec

    qapp = QApplication([sys.argv[0]])
    with tempfile.TemporaryDirectory(prefix="lw-bench-remote-") as tmp:
        server = start_redis(Path(tmp) / "redis")
        try:
            client = redis.Redis(port=server.port)
            url = f"redis://127.0.0.1:{server.port}/0"

            # anchor: a keyspace event's arrival at a plain Python subscriber
            client.config_set("notify-keyspace-events", "Kg$x")
            sub = redis.Redis(port=server.port).pubsub(ignore_subscribe_messages=True)
            sub.psubscribe("__keyspace@0__:lock:*")
            anchor: list[float] = []
            for i in range(args.samples):
                t0 = time.perf_counter()
                client.set(f"lock:a{i}", "x", px=60000)
                while (m := sub.get_message(timeout=1)) is None or m["type"] != "pmessage":
                    pass
                anchor.append(time.perf_counter() - t0)
                while sub.get_message(timeout=0.01) is not None:
                    pass  # the SET's second event (expire)
            sub.close()
            client.flushdb()

            results: dict[str, list[float]] = {}
            for feed, poll_s in ((True, 3600.0), (False, 5.0)):
                inv = WatchBridge()
                poller = RemotePoller(inv, poll_s=poll_s)
                arrived: dict[str, float] = {}
                inv.updated.connect(lambda ups, a=arrived: a.update(
                    {p: time.perf_counter() for p, st in ups if st is not None}))
                spec = ServerSpec(kind="redis", url=url, profiles=["python-redis-lock"],
                                  notifications=feed)
                poller.set_config(Config(servers=[spec]))
                samples = []
                n = args.samples if feed else max(3, args.samples // 10)
                for i in range(n):
                    loop = QEventLoop()
                    QTimer.singleShot(200, loop.quit)
                    loop.exec()  # settle: the subscription is up, the last poll is done
                    name = f"b{int(feed)}{i}"
                    path = f"{url}#lock:{name}"
                    lk = redis_lock.Lock(client, name, expire=60)
                    t0 = time.perf_counter()
                    lk.acquire(blocking=False)
                    deadline = time.monotonic() + 30
                    while path not in arrived and time.monotonic() < deadline:
                        qapp.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents, 5)
                    if path in arrived:
                        samples.append(arrived[path] - t0)
                    lk.release()
                poller.close()
                inv.close()
                results["change feed (notifications = true)" if feed
                        else "polling only (every 5 s)"] = samples
            print(f"redis lock acquired -> row in the table, {args.samples} samples, "
                  f"load {os.getloadavg()[0]:.2f}")
            print(line("anchor: keyspace event at a Python subscriber", anchor))
            for name, values in results.items():
                print(line(f"Lockwarden, {name}", values))
            print("  PostgreSQL is polled (every 5 s): up to the interval, plus one poll "
                  "(bench_remote.py); etcd follows a prefix watch")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
