"""The scheduler: which schedules are run (docs/engine.md, "Every interleaving checked").

- :func:`exhaust`: every schedule of the given processes with at most ``preemptions``
  switches away from a process that could have gone on (switches when a process ends or
  waits on a busy kernel lock are free: CHESS's preemption bound, Musuvathi and Qadeer, PLDI
  2007) and at most ``crashes`` crashes, each before any step of any process; a depth-first
  search that runs each schedule from the start (the processes are real).
- :func:`sample`: bounded random schedules (three and four processes).

A schedule is its list of moves; a violation comes back with the steps that led to it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.verify.world import Shared, Violation, World

MAX_STEPS = 400
"""Moves after which a schedule is cut (a livelock would show here): counted, not failed."""


@dataclass
class Finding:
    """A violation, the schedule that found it (its moves) and the steps, in words."""

    seed: str
    ops: tuple[str, ...]
    moves: list[tuple[str, int]]
    violations: list[Violation]
    trace: list[str]

    def report(self) -> str:
        lines = [f"VIOLATION seed={self.seed} ops={','.join(self.ops)}"]
        lines += [f"  {v.invariant}: {v.words}" for v in self.violations]
        lines += [f"  {i:3d}. {t}" for i, t in enumerate(self.trace, 1)]
        lines.append(f"  moves: {self.moves}")
        return "\n".join(lines)


@dataclass
class Tally:
    """What a check explored."""

    schedules: int = 0
    limits: int = 0  # crashes inside an exchange's window (docs/engine.md)
    reused: int = 0  # crashes whose PID a new process got
    steps: int = 0
    cut: int = 0
    findings: list[Finding] = field(default_factory=list)
    every: int = 0  # pairs whose every schedule within the pass's bounds was run
    capped: int = 0  # pairs stopped at the pass's per-pair limit


@dataclass
class Ran:
    """One schedule run: its moves, its finding (or None), whether it was cut at
    :data:`MAX_STEPS`, and the known limits it met (docs/engine.md)."""

    moves: list[tuple[str, int]]
    finding: Finding | None
    cut: bool
    limits: int
    reused: int = 0  # crashes whose PID a new process got


def run_one(shared: Shared, seed: str, ops: tuple[str, ...],
            choose: Callable[[list[tuple[str, int]], int], int], *,
            preemptions: int, crashes: int, trace: list[str] | None = None,
            reuse: bool | str = False) -> Ran:
    """Run one schedule, ``choose(options, depth)`` picking each move; ``trace`` receives
    its steps in words."""
    world = World(shared, seed, ops, reuse=reuse)
    world.start()
    moves: list[tuple[str, int]] = []
    last: int | None = None
    found: list[Violation] = []
    cut = False
    try:
        while True:
            options = world.choices(last, preemptions, crashes)
            if not options:
                break
            if len(moves) >= MAX_STEPS:
                cut = True
                break
            pick = options[choose(options, len(moves))]
            moves.append(pick)
            what, i = pick
            if what in ("crash", "reuse"):
                crashes -= 1
            elif (last is not None and i != last and ("go", last) in options
                  and not world.in_cs(last)):
                preemptions -= 1
            last = i if what == "go" else last
            found = world.move(pick)
            if found:
                break
    finally:
        found += world.finish()
    if trace is not None:
        trace += world.trace
    finding = Finding(seed, ops, moves, found, world.trace) if found else None
    return Ran(moves, finding, cut, len(world.limits), world.reused[1])


def exhaust(shared: Shared, seed: str, ops: tuple[str, ...], *, preemptions: int,
            crashes: int, tally: Tally, limit: int | None = None,
            reuse: bool | str = False) -> bool:
    """Every schedule of ``ops`` on ``seed`` within the bounds (see the module docstring);
    findings and counts go to ``tally``. ``limit``: stop after that many schedules. Returns
    True when every schedule was run (``tally.every`` counts it), False when ``limit`` cut
    the search (``tally.capped``)."""
    stack: list[list[int]] = []  # per depth: [index chosen, number of options]

    def choose(options: list[tuple[str, int]], depth: int) -> int:
        if depth < len(stack):
            return min(stack[depth][0], len(options) - 1)
        stack.append([0, len(options)])
        return 0

    n = 0
    while True:
        ran = run_one(shared, seed, ops, choose, preemptions=preemptions, crashes=crashes,
                      reuse=reuse)
        del stack[len(ran.moves):]
        n += 1
        tally.schedules += 1
        _count(tally, ran)
        while stack and stack[-1][0] + 1 >= stack[-1][1]:
            stack.pop()
        if not stack:
            tally.every += 1
            return True
        if limit is not None and n >= limit:
            tally.capped += 1
            return False
        stack[-1][0] += 1


def sample(shared: Shared, seed: str, ops: tuple[str, ...], *, schedules: int,
           rng: random.Random, crashes: int, tally: Tally) -> None:
    """``schedules`` random schedules of ``ops`` on ``seed`` (any number of preemptions, at
    most ``crashes`` crashes, a crash chosen with probability 1/20 where one may be)."""
    for _ in range(schedules):
        def choose(options: list[tuple[str, int]], depth: int) -> int:
            goes = [k for k, o in enumerate(options) if o[0] == "go"]
            kills = [k for k, o in enumerate(options) if o[0] == "crash"]
            if kills and (not goes or rng.random() < 0.05):
                return rng.choice(kills)
            return rng.choice(goes)

        ran = run_one(shared, seed, ops, choose, preemptions=10**6, crashes=crashes)
        tally.schedules += 1
        _count(tally, ran)


def _count(tally: Tally, ran: Ran) -> None:
    tally.steps += len(ran.moves)
    tally.cut += ran.cut
    tally.limits += ran.limits
    tally.reused += ran.reused
    if ran.finding is not None:
        tally.findings.append(ran.finding)


def replay(shared: Shared, seed: str, ops: tuple[str, ...],
           moves: tuple[tuple[str, int], ...]) -> tuple[Ran, list[str]]:
    """Run ``moves`` (a found schedule), then the first option at each step to the end;
    returns the run and its trace. Raises AssertionError when a move is not possible (the
    engine's steps changed: the schedule must be found again)."""
    trace: list[str] = []

    def choose(options: list[tuple[str, int]], depth: int) -> int:
        if depth < len(moves):
            assert moves[depth] in options, (depth, moves[depth], options)
            return options.index(moves[depth])
        return 0

    ran = run_one(shared, seed, ops, choose, preemptions=10**6, crashes=1, trace=trace)
    return ran, trace
