"""Placing rows in a sorted order without sorting it again: :func:`merged` (new rows into a
sorted list of source rows, by binary search), :func:`position_of` (a row's place in it) and
:func:`runs_of` (contiguous runs), for
:class:`app.table.proxy.LockFilterProxy` (docs/performance.md "GUI under load")."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from typing import Any

MERGE_BELOW = 16
"""New rows are merged into the sorted order (a binary search each, then one copy of the
list) while the order holds more than this many times as many rows; beyond, it is sorted
whole."""


def merged(order: list[int], new: list[int], key: Callable[[int], Any] | None,
           desc: bool, where: dict[int, int] | None = None) -> list[int]:
    """``order`` (sorted by ``key``, descending with ``desc``; ``None``: by the row numbers
    themselves) with ``new`` (not in it) inserted where a sort would put them; with ``where``,
    the position of each new row in the result is stored there. Keys are unique (a lock path
    ends every key), so the result is exactly ``sorted(order + new)``: O(k log n) key look-ups
    and one O(n) copy in C, where a re-sort costs n look-ups and ~n string comparisons (10-20
    ms at 100,000 rows, docs/performance.md "GUI under load")."""
    asc = order[::-1] if desc else order
    new = sorted(new, key=key)
    out: list[int] = []
    prev = 0
    for r in new:
        p = (bisect_right(asc, r, prev) if key is None
             else bisect_right(asc, key(r), prev, key=key))
        out.extend(asc[prev:p])
        if where is not None:
            where[r] = len(out)
        out.append(r)
        prev = p
    out.extend(asc[prev:])
    if not desc:
        return out
    if where is not None:
        last = len(out) - 1
        for r, p in where.items():
            where[r] = last - p
    return out[::-1]


def position_of(order: list[int], row: int, key: Callable[[int], Any] | None,
                desc: bool) -> int | None:
    """Index of ``row`` in ``order`` (sorted as for :func:`merged`) by binary search: O(log n)
    key look-ups, where a map of every row's position costs ~30 ms at 100,000 rows. ``None``
    when ``row`` is not where its key says (not in ``order``, or ``order`` is not sorted by
    ``key`` any more)."""
    if key is None:
        i = bisect_left(order, row)
    elif not desc:
        i = bisect_left(order, key(row), key=key)
    else:  # descending: the first index whose key is not above the row's
        k = key(row)
        lo, hi = 0, len(order)
        while lo < hi:
            mid = (lo + hi) // 2
            if key(order[mid]) > k:
                lo = mid + 1
            else:
                hi = mid
        i = lo
    return i if i < len(order) and order[i] == row else None


def runs_of(rows: Sequence[int]) -> list[tuple[int, int]]:
    """Contiguous runs ``(first, last)`` of ascending ``rows``."""
    runs: list[tuple[int, int]] = []
    for r in rows:
        if runs and runs[-1][1] + 1 == r:
            runs[-1] = (runs[-1][0], r)
        else:
            runs.append((r, r))
    return runs
