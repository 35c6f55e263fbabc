"""The verdicts of a large ``lockwarden list`` judged in worker processes (docs/cli.md,
"``list``: what could not be listed"; docs/performance.md, "Listing and watching 100,000
locks").

:func:`judged` turns the walk's batches (:func:`core.cli.listing.walk`) into rendered batches
(JSON text, table cells), in the order of the walk. Past :data:`PARALLEL_AFTER` candidate files
on a Linux host with more than one CPU, the rest are judged by worker processes *forked* from
this one (sharing its snapshot, moment, kernel view and policies, so a verdict is the one this
process would give), at most :data:`AHEAD` batches per worker in flight. A batch a worker cannot
judge as this process would (a lock of another host, re-judged by the fleet's report; a worker
that failed) is judged here: the listing never loses a batch.
"""

from __future__ import annotations

import gc
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol, TypeVar

from core.cli.common import PolicyChoice, json_text

if TYPE_CHECKING:
    from concurrent.futures import Future

    from core.record import LockStatus

T = TypeVar("T")

Judged = list[tuple["LockStatus", PolicyChoice]]
"""One batch's verdicts with the policy each was judged under
(:meth:`core.cli.listing.Judge.batch`)."""


class Batch(Protocol):
    """What :func:`judged` needs of a walk's batch (:class:`core.cli.listing.Batch`)."""

    @property
    def files(self) -> list[str]:
        """The batch's candidate files."""
        ...


B = TypeVar("B", bound=Batch)
B_contra = TypeVar("B_contra", bound=Batch, contravariant=True)


class Judge(Protocol[B_contra]):
    """What :func:`judged` needs of a judge (:class:`core.cli.listing.Judge`)."""

    def batch(self, batch: B_contra, *, fleet: bool = True) -> Judged:
        """The verdicts on ``batch``; with ``fleet`` False, the fleet is not asked."""
        ...


PARALLEL_AFTER = 2000
"""Candidate files seen before a listing starts its worker processes: a small listing starts
as fast as before (no fork, no import of :mod:`multiprocessing`); 2,000 files take ~0.1 s to
judge here, about what starting the workers costs."""

AHEAD = 4
"""Batches handed to each worker beyond the one being printed."""

MAX_WORKERS = 8
"""At most this many worker processes, whatever the number of CPUs."""

_JOB: tuple[Judge[Batch], Callable[[Judged], object]] | None = None
"""The judge and renderer the workers inherit at the fork (set only while a pool runs)."""


class JsonItems:
    """A batch's ``list --json`` items as text: each ``{**status.to_dict(), "policy": ...}``,
    exactly as one ``json.dumps`` of the list would write it (:func:`core.cli.common.json_text`),
    items joined by ``", "``. Each policy's JSON text is computed once and spliced in as the
    last key."""

    def __init__(self) -> None:
        self._policy_text: dict[PolicyChoice, str] = {}

    def __call__(self, judged: Judged) -> str:
        """The items of ``judged``, joined by ``", "`` (``""`` for none)."""
        policy_text = self._policy_text
        parts = []
        for s, c in judged:
            pol = policy_text.get(c)
            if pol is None:
                pol = policy_text[c] = json_text(c.to_dict())
            # {**s.to_dict(), "policy": ...}: "policy" is the last key
            parts.append(f'{json_text(s.to_dict())[:-1]}, "policy": {pol}}}')
        return ", ".join(parts)


def table_cells(judged: Judged) -> list[list[str]]:
    """A batch's ``list`` table rows, escaped (:func:`core.cli.output.table_row`)."""
    from core.cli.output import table_cells as cells

    return cells([s for s, _c in judged])


def no_cells(judged: Judged) -> list[list[str]]:
    """No rows (``list -q``: the verdicts are judged, nothing is printed)."""
    return []


def judged(batches: Iterator[B], judge: Judge[B], render: Callable[[Judged], T], *,
           parallel_after: int = PARALLEL_AFTER, workers: int | None = None) -> Iterator[T]:
    """``render(judge.batch(b))`` for each batch ``b`` of ``batches``, in order: in this
    process up to ``parallel_after`` candidate files, then (Linux, ``workers`` > 1) by
    ``workers`` forked worker processes (default: the CPUs this process may run on, at most
    :data:`MAX_WORKERS`).

    ``render`` runs here for the first batches and in the workers for the rest: its result
    must pickle (text, lists of text) and never be ``None``. stdout and stderr are flushed
    before the fork (a worker never writes to them). Never raises for what is on disk; an
    exception of ``judge`` or ``render`` propagates as it would here.
    """
    n = _cpus() if workers is None else workers
    seen = 0
    for batch in batches:
        yield render(judge.batch(batch))
        seen += len(batch.files)
        if seen > parallel_after and n > 1 and _can_fork():
            break
    else:
        return
    yield from _in_workers(batches, judge, render, n)


def _cpus() -> int:
    n = os.cpu_count() or 1
    if sys.platform.startswith("linux"):  # the CPUs this process may run on
        try:
            n = len(os.sched_getaffinity(0))
        except OSError:
            pass
    return min(n, MAX_WORKERS)


def _can_fork() -> bool:
    """Workers are forked (they inherit the judge): Linux only (macOS's fork is unsafe with
    its system libraries; Windows has none)."""
    return sys.platform.startswith("linux")


def _in_workers(batches: Iterator[B], judge: Judge[B], render: Callable[[Judged], T],
                n: int) -> Iterator[T]:
    """The rest of :func:`judged`: ``n`` forked workers, results in the order of the walk."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _JOB
    sys.stdout.flush()  # a forked worker flushes its copy of the buffers when it ends
    sys.stderr.flush()
    pending: deque[tuple[B, Future[T | None] | None]] = deque()

    def result(batch: B, fut: Future[T | None] | None) -> T:
        done: T | None = None
        if fut is not None:
            try:
                done = fut.result()
            except Exception:  # a worker died, or failed: judged here
                done = None
        return render(judge.batch(batch)) if done is None else done

    _JOB = (judge, render)  # type: ignore[assignment]  # B is the walk's Batch
    gc.freeze()  # the workers' collections skip what they inherit (no copy of its pages)
    try:
        pool = ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork"),
                                   initializer=_worker_init, initargs=(os.getpid(),))
    except BaseException:
        _JOB = None
        gc.unfreeze()
        raise
    try:
        broken = False
        for batch in batches:
            fut: Future[T | None] | None = None
            if not broken:
                try:
                    fut = pool.submit(_work, batch)  # type: ignore[arg-type]  # T from render
                except Exception:  # the pool broke (a worker killed): the rest judged here
                    broken = True
            pending.append((batch, fut))
            while len(pending) > n * AHEAD or (broken and pending):
                yield result(*pending.popleft())
        while pending:
            yield result(*pending.popleft())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _JOB = None
        gc.unfreeze()


PR_SET_PDEATHSIG = 1
"""prctl(2): the signal a process gets when the thread that forked it ends."""


def _worker_init(listing: int) -> None:
    """In a worker forked by the listing ``listing`` (its PID): Ctrl-C is the listing's to
    handle (it ends the pool), not each worker's; the worker is SIGKILLed when the listing
    dies, however it dies (prctl(2) ``PR_SET_PDEATHSIG``: a listing killed alone by SIGTERM or
    SIGKILL would otherwise leave workers waiting for work for ever), and it holds neither
    the listing's stdin nor its stdout (``/dev/null`` in their place: whatever reads the
    listing's output sees its end when the listing ends)."""
    import ctypes
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):  # workers are Linux only (_can_fork)
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):  # pragma: no cover - Linux has prctl
            pass
    if os.getppid() != listing:  # the listing died before prctl took effect
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)


def _work(batch: Batch) -> object | None:
    """In a worker: the rendered verdicts of ``batch``, or ``None`` when one of its locks was
    recorded on another host (the listing's process judges that batch with the fleet)."""
    from core.record import Liveness

    assert _JOB is not None, "a list worker runs only in a fork of the listing"
    judge, render = _JOB
    done = judge.batch(batch, fleet=False)
    if any(s.liveness is Liveness.REMOTE for s, _c in done):
        return None
    return render(done)
