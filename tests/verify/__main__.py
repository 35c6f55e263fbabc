"""``python -m tests.verify [--depth NAME] [--mutant NAME|all] [--only OPS] [--seed S]
[--limit N]`` (depths: :data:`DEPTHS`):
run the interleaving checker and print the schedules explored and the violations found
(docs/engine.md, "Every interleaving checked"). Exit 0 when nothing was found (with
``--mutant``: when every mutant was caught), 1 otherwise."""

from __future__ import annotations

import argparse
import itertools
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.verify.explore import Tally


@dataclass(frozen=True)
class Pass:
    """One sweep of a depth: pairs of ``ops`` (None: every engine operation and peer) on
    ``seeds`` (None: every seed), every schedule with at most ``preemptions`` preemptions and
    ``crashes`` crashes; ``randoms`` random schedules of each three- and four-process set."""

    preemptions: int
    crashes: int
    randoms: int = 0
    ops: tuple[str, ...] | None = None
    seeds: tuple[str, ...] | None = None
    reuse: bool | str = False  # a crash may give its PID to a new process ("only": always)
    limit: int | None = None  # schedules after which a pair's search stops (counted: capped)


UNBOUNDED = 10**6
"""Preemptions no schedule reaches: every interleaving of the pair (with ``crashes`` 0)."""


CORE_OPS = ("try", "reclaim", "release", "force", "refresh", "clean", "sema", "filelock")
"""CI's operations: the engine's every kind of step (``acquire`` is ``try`` and a wait, which
the checker does not model) beside one peer of each family."""

DEPTHS: dict[str, tuple[Pass, ...]] = {
    # CI: a crash before every step of every schedule without a preemption, on a free path and
    # a stale lock; the kernel-lock peers' empty file for the operations that take it over
    "ci": (Pass(0, 1, 3, CORE_OPS, ("free", "stale")),
           Pass(0, 1, 0, ("try", "reclaim", "force", "filelock"), ("empty",))),
    # make verify: the same for every pair on every seed, random three- and four-process
    # schedules, every schedule with two preemptions between two engine operations, and a
    # crash before any step whose PID a new process then gets
    "full": (Pass(0, 1, 10),
             Pass(2, 0, 0, ("try", "reclaim", "release", "force", "refresh", "clean"),
                  ("free", "stale")),
             Pass(0, 1, 0, ("try", "reclaim", "release", "force", "refresh"),
                  ("free", "stale"), reuse="only")),
    # a mutant's narrow run: one preemption and a crash
    "deep": (Pass(1, 1, 30),),
    # the preemption pass alone, on every seed (its figures)
    "reuse": (Pass(0, 1, 0, ("try", "reclaim", "release", "force", "refresh"),
                   ("free", "stale"), reuse="only"),),
    "preempt": (Pass(2, 0, 0, ("try", "reclaim", "release", "force", "refresh", "clean"),
                     ("free", "stale", "live")),),
    # every interleaving, no preemption bound, of each pair whose interleavings number at
    # most ``limit`` (the rest are capped there and counted: the bounded passes cover them)
    "every": (Pass(UNBOUNDED, 0, 0, limit=400),),
}


def pairs(engine: list[str], peers: list[str]) -> list[tuple[str, str]]:
    """Every two processes: each pair of engine operations (a pair of one, too), and each
    engine operation beside each peer."""
    out = list(itertools.combinations_with_replacement(engine, 2))
    out += [(e, p) for e in engine for p in peers]
    return out


FLOCK_PEERS = frozenset({"filelock", "portalocker", "fasteners", "flock1"})
SEMA_PEERS = frozenset({"sema", "sema-create", "semats"})


def fits(seed: str, ops: tuple[str, ...]) -> bool:
    """Whether ``ops`` meet on ``seed`` as their tools meet in use: the kernel-lock tools on
    their own empty file (a Lockwarden lock they lock too keeps nothing alive: docs/engine.md,
    "The holder's pin"), sema's family on sema files (free, stale, live), never the two
    families on one path."""
    flock = any(o in FLOCK_PEERS for o in ops)
    sema = any(o in SEMA_PEERS for o in ops)
    if flock and sema:
        return False
    if flock:
        return seed == "empty"
    if sema:
        return seed in ("free", "stale", "live")
    return True


def groups(engine: list[str], peers: list[str], rng: random.Random) -> list[tuple[str, ...]]:
    """Three- and four-process sets for the random schedules: two kernel-lock peers and one
    or two engine operations (the set that let two filelock holders in), and mixed sets."""
    out: list[tuple[str, ...]] = []
    for peer in (p for p in ("filelock", "portalocker", "flock1", "sema-create") if p in peers):
        for e in (e for e in ("try", "reclaim", "force") if e in engine):
            out.append((peer, peer, e))
        if "try" in engine and "force" in engine:
            out.append((peer, peer, "try", "force"))
    sema = [p for p in peers if p in SEMA_PEERS]
    for _ in range(4):
        out.append(tuple(rng.sample(engine, 3)))
        out.append(tuple(rng.sample(engine, 4)))
        if sema:
            out.append((*rng.sample(engine, 2), rng.choice(sema)))
            out.append((*rng.sample(engine, 2), *rng.sample(sema, min(2, len(sema)))))
    return out


def setup_env(root: str) -> None:
    """Every forked process's per-user directories inside the checker's temp root."""
    for k in ("HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        d = os.path.join(root, k.lower())
        os.makedirs(d, exist_ok=True)
        os.environ[k] = d
    os.environ["LOCKWARDEN_CONFIG"] = ""


Task = tuple[str, tuple[str, ...], str, int]
"""One piece of a check: the seed, the processes' operations, ``exhaust`` or ``sample``, the
index of its pass in the depth."""

_WORKER: dict[str, object] = {}


def _worker_init(root: str, depth: str) -> None:
    """A worker process: its own directories, the engine warmed, its own dead PID and live
    holder (:class:`tests.verify.world.Shared`)."""
    import gc

    from tests.verify import actors
    from tests.verify.world import Shared

    me = os.path.join(root, f"w{os.getpid()}")
    os.makedirs(os.path.join(me, "warm"))
    actors.warm(os.path.join(me, "warm"))
    gc.collect()
    gc.freeze()  # forked processes do not copy what the collector would touch
    _WORKER["shared"] = Shared.make(os.path.join(me, "runs"))
    _WORKER["depth"] = depth
    _WORKER["rng"] = random.Random(37 + os.getpid())


def _worker_run(task: Task) -> tuple[Task, Tally]:
    from tests.verify.explore import Tally, exhaust, sample
    from tests.verify.world import Shared

    shared = _WORKER["shared"]
    assert isinstance(shared, Shared)
    seed, ops, mode, k = task
    ps = DEPTHS[str(_WORKER["depth"])][k]
    tally = Tally()
    if mode == "exhaust":
        exhaust(shared, seed, ops, preemptions=ps.preemptions, crashes=ps.crashes,
                tally=tally, reuse=ps.reuse, limit=ps.limit)
    else:
        rng = _WORKER["rng"]
        assert isinstance(rng, random.Random)
        sample(shared, seed, ops, schedules=ps.randoms or 30, rng=rng, crashes=1,
               tally=tally)
    return task, tally


def tasks(depth: str, only: list[str] | None, seeds: list[str],
          group: list[str] | None = None) -> list[Task]:
    """What a check at ``depth`` runs: each pass's pairs exhaustively on its seeds, and its
    random three- and four-process sets."""
    from tests.verify import actors
    from tests.verify.world import SEEDS

    rng = random.Random(37)
    out: list[Task] = []
    for k, ps in enumerate(DEPTHS[depth]):
        engine = list(actors.ENGINE_OPS)
        peers = [p for p in actors.PEERS if p != "fasteners"]  # its protocol is portalocker's
        keep = only or ps.ops
        if keep:
            engine = [o for o in engine if o in keep]
            peers = [o for o in peers if o in keep]
        chosen = seeds or list(ps.seeds or SEEDS)
        if group:
            return [(seed, tuple(group), "sample", k) for seed in chosen]
        for seed in chosen:
            out += [(seed, ops, "exhaust", k) for ops in pairs(engine, peers)
                    if fits(seed, ops)]
            if ps.randoms and not only:
                out += [(seed, ops, "sample", k) for ops in groups(engine, peers, rng)
                        if fits(seed, ops)]
    return out


def check(depth: str, only: list[str] | None, seeds: list[str], *, quiet: bool = False,
          workers: int = 2, stop_first: bool = False, group: list[str] | None = None
          ) -> tuple[int, int, int, list[str]]:
    """Run the checker at ``depth`` in ``workers`` processes; returns schedules, steps, cut
    schedules and the reports of the violations found. Prints the figures."""
    import multiprocessing

    import core
    from tests.verify.explore import Tally

    want = os.environ.get("LOCKWARDEN_VERIFY_CORE")
    if want and os.path.dirname(os.path.abspath(core.__file__)) != os.path.abspath(want):
        raise SystemExit(f"the engine checked is {core.__file__}, not {want}")
    root = tempfile.mkdtemp(prefix="lockwarden-verify-")
    setup_env(root)
    todo = tasks(depth, only, seeds, group)
    total = Tally()
    t0 = time.monotonic()
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers, initializer=_worker_init, initargs=(root, depth),
                  maxtasksperchild=None) as pool:
        for n, (task, tally) in enumerate(pool.imap_unordered(_worker_run, todo), 1):
            total.schedules += tally.schedules
            total.steps += tally.steps
            total.cut += tally.cut
            total.limits += tally.limits
            total.reused += tally.reused
            total.every += tally.every
            total.capped += tally.capped
            total.findings += tally.findings
            if not quiet:
                seed, ops, mode, _k = task
                print(f"  [{n}/{len(todo)}] {seed:6s} {'+'.join(ops):32s} {mode:7s} "
                      f"{tally.schedules:6d} schedules  total {total.schedules:7d}  "
                      f"violations {len(total.findings)}{'  capped' if tally.capped else ''}",
                      file=sys.stderr, flush=True)
            if stop_first and total.findings:
                pool.terminate()
                break
    took = time.monotonic() - t0
    shutil.rmtree(root, ignore_errors=True)
    reports = [f.report() for f in total.findings]
    print(f"verify ({depth}): {total.schedules} schedules explored, {total.steps} steps, "
          f"{total.cut} cut at the step bound, {total.reused} crashed PIDs given to a new "
          f"process, {total.limits} crashes inside an exchange's window (a known limit), "
          f"{len(reports)} violations, {took:.0f} s")
    if any(ps.limit is not None for ps in DEPTHS[depth]):
        print(f"  every interleaving run for {total.every} pairs; {total.capped} capped at "
              "the per-pair limit")
    return total.schedules, total.steps, total.cut, reports


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.verify", description=__doc__)
    ap.add_argument("--depth", choices=sorted(DEPTHS), default="full")
    ap.add_argument("--only", help="comma-separated operations and peers to pair")
    ap.add_argument("--seed", action="append", default=[],
                    help="a starting state (free, stale, live, empty, text); repeatable")
    ap.add_argument("--mutant", help="a weakened engine to check (see tests/verify/mutants.py)"
                    ", or 'all'")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--group", help="comma-separated processes to run random schedules of")
    ap.add_argument("--stop-first", action="store_true", help="stop at the first violation")
    ap.add_argument("--limit", type=int, help="schedules after which a pair's search stops, "
                    "for the passes that have such a limit (every: 400)")
    args = ap.parse_args(argv)
    if args.limit is not None:
        import dataclasses

        if all(p.limit is None for p in DEPTHS[args.depth]):
            ap.error(f"--limit: depth {args.depth} has no per-pair limit (every has)")

        DEPTHS[args.depth] = tuple(
            p if p.limit is None else dataclasses.replace(p, limit=args.limit)
            for p in DEPTHS[args.depth])
    only = args.only.split(",") if args.only else None
    from tests.verify.actors import OPS
    from tests.verify.world import SEEDS

    unknown = [o for o in (only or []) + (args.group.split(",") if args.group else [])
               if o not in OPS] + [s for s in args.seed if s not in SEEDS]
    if unknown:
        ap.error(f"unknown operation or seed: {', '.join(unknown)} (operations: "
                 f"{', '.join(OPS)}; seeds: {', '.join(SEEDS)})")
    if args.mutant:
        from tests.verify.mutants import check_mutants

        return check_mutants(args.mutant, args.depth)
    _n, _s, _c, reports = check(args.depth, only, args.seed, quiet=args.quiet,
                                stop_first=args.stop_first,
                                group=args.group.split(",") if args.group else None)
    for r in reports[:20]:
        print(r)
    return 1 if reports else 0


if __name__ == "__main__":
    sys.exit(main())
