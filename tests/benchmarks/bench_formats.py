"""Parser throughput: detect+parse and serialize calls/s for each format, and af ledger replay
events/s. Prints figures; asserts nothing about speed (docs/DESIGN.md "Testing").

    .venv/bin/python tests/benchmarks/bench_formats.py [--seconds 0.5] [--events 2000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core import formats  # noqa: E402
from core.errors import ParseError  # noqa: E402
from core.formats import af, sema, taskmcp  # noqa: E402

T0 = datetime(2026, 11, 21, 9, 30, tzinfo=UTC)
TOKEN = "0123456789abcdef0123456789abcdef"


def rate(fn: Callable[[], object], seconds: float) -> float:
    """Calls per second of ``fn`` over about ``seconds``."""
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(100):
            fn()
        n += 100
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=0.5, help="time per measurement")
    ap.add_argument("--events", type=int, default=2000, help="ledger events to replay")
    args = ap.parse_args()

    records = {
        "sema": sema.make_record(
            "/l/a.lock", pid=4242, timestamp=T0, tag="deploy", host="h", start=1.5, token=TOKEN,
            ttl=60,
        ),
        "task-mcp": taskmcp.make_record(
            "/l/t.lock", owner="pid-4242@h", since=T0, ttl=3600,
            metadata=taskmcp.default_metadata(4242), token=TOKEN, start=1.5,
        ),
        "af-ledger": formats.parse(
            b'{"agent_id":"a","acquired_at":"2026-11-21T09:30:00Z"}\n', "/p/ledger/ledger.lock"
        ),
    }  # fmt: skip
    samples = {name: formats.serialize(rec) for name, rec in records.items()}
    samples["af-claim"] = (
        b'{"node_id":"1.2.3","owner":"agent","acquired_at":"2026-11-21T09:30:00.123456789Z",'
        b'"expires_at":"2026-11-21T09:35:00.123456789Z"}'
    )
    samples["pidfile"] = b"      4242\n"
    print(f"{'format':20} {'parse/s':>12} {'serialize/s':>12}")
    for name, data in samples.items():
        p = rate(partial(formats.parse, data, "/l/x.lock"), args.seconds)
        rec = records.get(name)
        s = rate(partial(formats.serialize, rec), args.seconds) if rec else None
        print(f"{name:20} {p:12,.0f} {s:12,.0f}" if s else f"{name:20} {p:12,.0f} {'-':>12}")
    devtools = Path(__file__).resolve().parents[1] / "data" / "devtools"
    tool_samples = [  # (format, file in tests/data/devtools, the path it is parsed at)
        ("git-lock", "git/index.lock.dead-git-commit", "/src/r/.git/index.lock"),
        ("git-gc", "git/gc.pid.dead-git-gc", "/src/r/.git/gc.pid"),
        ("vim-swap", "vim/dead-dirty.notes.txt.swp", "/src/.notes.txt.swp"),
        ("emacs-lock", "emacs/lockfile-regular-variant.txt", "/src/.#draft.txt"),
        ("libreoffice-lock", "libreoffice/.~lock.report.odt#", "/d/.~lock.report.odt#"),
        ("libreoffice-profile", "libreoffice/profile-dot-lock.txt", "/h/4/.lock"),
        ("terraform-lock-info", "terraform/.terraform.tfstate.lock.info", "/i/.t.lock.info"),
        ("softfilelock", "python-filelock/softfilelock-dead-holder.lock", "/d/s.lock"),
    ]
    for name, rel, at in tool_samples:
        data = (devtools / rel).read_bytes()[:1024]
        assert formats.parse(data, at).format == name
        p = rate(partial(formats.parse, data, at), args.seconds)
        print(f"{name:20} {p:12,.0f} {'-':>12}")
    garbage = bytes(range(256)) * 4
    g = rate(lambda: _swallow(garbage), args.seconds)
    print(f"{'garbage':20} {g:12,.0f} {'-':>12}   (1 KiB of binary, rejected)")

    with tempfile.TemporaryDirectory() as tmp:
        ledger = Path(tmp) / "ledger"
        ledger.mkdir()
        for i in range(args.events):
            node = f"1.{(i // 3) % 50}"
            when = (T0 + timedelta(seconds=i)).isoformat().replace("+00:00", "Z")
            until = (T0 + timedelta(seconds=i + 300)).isoformat().replace("+00:00", "Z")
            kind = i % 3
            if kind == 2:
                event = {"type": "nodes_released", "timestamp": when, "node_ids": [node]}
            elif kind == 0:
                event = {"type": "nodes_claimed", "timestamp": when, "node_ids": [node],
                         "owner": "a", "timeout": until}  # fmt: skip
            else:
                event = {"type": "claim_refreshed", "timestamp": when, "node_id": node,
                         "owner": "a", "new_timeout": until}  # fmt: skip
            (ledger / f"{i + 1:06d}.json").write_text(json.dumps(event) + "\n")
        start = time.perf_counter()
        claims, problems = af.replay_ledger_detailed(str(ledger))
        elapsed = time.perf_counter() - start
        print(
            f"af replay: {args.events} events in {elapsed * 1000:.1f} ms "
            f"({args.events / elapsed:,.0f} events/s), {len(claims)} claims, "
            f"{len(problems)} problems"
        )


def _swallow(data: bytes) -> None:
    try:
        formats.parse(data)
    except ParseError:
        pass


if __name__ == "__main__":
    main()
