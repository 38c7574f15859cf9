"""Change points in one figure's run history: where its level shifted and stayed (issue 30, item 4).

The skeleton of E-divisive means, which Apache Otava (Hunter) runs over continuous performance results: split the
series where it differs most before and after, keep the split when a permutation test says the difference is not
chance, search both sides again. What is scored here is ranks, not values (Pettitt's change-point test, the
Mann-Whitney rank sum at every split):

* every split leaving ``min_segment`` runs on both sides gets the standardised rank-sum z of the runs before it
  against those after it; the best |z| is tested against the best |z| of the same runs shuffled ``permutations``
  times (``random.Random(seed)``: the same series always gives the same answer), so scanning every split is paid
  for, and a split is kept when p < ``alpha``;
* ranks need no noise estimate and ignore how far one outlier run lies; a slow drift ranks like a step;
* afterwards each change point must move the median of its segment against the segment before by at least
  ``min_shift_pct`` percent (the weakest is dropped until all do): significant but negligible steps are not shown.

NaN, infinities and None are left out; indices and times are those of the input.

    from netregress_postrun.changepoints import change_points
    for cp in change_points(values, times, better='lower'):
        print(cp.index, cp.time, cp.before, cp.after, cp.shift_pct, cp.direction)
"""
from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Sequence

MIN_SEGMENT = 3           # runs on each side: a median of fewer is one run's say
MIN_SHIFT_PCT = 5.0       # the report's change threshold (reporthistory.CHANGE_LISTED_PCT)
ALPHA = 0.01
PERMUTATIONS = 999        # p resolves to 0.001; a shuffle costs O(runs) on ranks
SEED = 30                 # fixed: the report is reproducible


@dataclass(frozen=True)
class ChangePoint:
    index: int                 # position in the input of the first run after the change
    time: object               # that run's time (``times[index]``), None without times
    before: float              # median of the segment before (back to the previous change point)
    after: float               # median of the segment after (up to the next change point)
    runs_before: int
    runs_after: int
    shift_pct: float           # 100 x (after - before) / |before|
    statistic: float           # the rank-sum |z| of the split when it was found
    p_value: float             # of the permutation test when it was found
    direction: str             # 'worse', 'better', or '' without a declared better direction


def _ranks(xs: Sequence[float]) -> list[float]:
    """Ranks 1..n, ties sharing their mean rank."""
    order = sorted(range(len(xs)), key=xs.__getitem__)
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for pos in order[i:j + 1]:
            ranks[pos] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _best_split(ranks: Sequence[float], min_segment: int) -> tuple[float, int]:
    """(largest |z|, split): z of split k is the rank-sum (Mann-Whitney) statistic of the runs before k against
    those after it, standardised, so a split near either end scores on the same scale as one in the middle."""
    n = len(ranks)
    best, split, rank_sum = -1.0, 0, 0.0
    for k in range(1, n - min_segment + 1):
        rank_sum += ranks[k - 1]
        if k >= min_segment:
            z = abs(2 * rank_sum - k * (n + 1)) / math.sqrt(k * (n - k) * (n + 1) / 3)
            if z > best:
                best, split = z, k
    return best, split


def _pct(before: float, after: float) -> float:
    if before == 0:
        return 0.0 if after == 0 else math.copysign(math.inf, after)
    return 100.0 * (after - before) / abs(before)


def _permutation_p(ranks: Sequence[float], observed: float, min_segment: int, permutations: int, alpha: float,
                   rng: random.Random) -> float:
    """(1 + shuffles scoring at least ``observed``) / (1 + shuffles); stops once p cannot fall below alpha."""
    shuffled, as_high = list(ranks), 0
    for _ in range(permutations):
        rng.shuffle(shuffled)
        as_high += _best_split(shuffled, min_segment)[0] >= observed - 1e-9     # a tie counts (float sums)
        if (1 + as_high) / (1 + permutations) >= alpha:
            break                              # not significant whatever the remaining shuffles give
    return (1 + as_high) / (1 + permutations)


def _placed_between_neighbours(xs: Sequence[float], splits: list[int], min_segment: int) -> list[int]:
    """Each split moved to the best one between its neighbours: binary segmentation places the first split while
    the other changes still blur it (two steps up: anywhere between them)."""
    splits = list(splits)
    for _ in range(len(splits)):              # settles in a pass or two
        moved = False
        for i, k in enumerate(splits):
            bounds = [0, *splits, len(xs)]
            lo, hi = bounds[i], bounds[i + 2]
            best = lo + _best_split(_ranks(xs[lo:hi]), min_segment)[1]
            moved |= best != k
            splits[i] = best
        if not moved:
            break
    return splits


def change_points(values: Sequence[float | None], times: Sequence | None = None, better: str | None = None, *,
                  min_segment: int = MIN_SEGMENT, min_shift_pct: float = MIN_SHIFT_PCT, alpha: float = ALPHA,
                  permutations: int = PERMUTATIONS, seed: int = SEED) -> list[ChangePoint]:
    """The persistent level shifts of one series (oldest first), in time order; ``better``: 'higher', 'lower' or
    None (the figure's declaration) decides ``direction``."""
    finite = [(i, float(v)) for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    kept = [i for i, _ in finite]
    xs = [v for _, v in finite]
    rng = random.Random(seed)
    found: dict[int, tuple[float, float]] = {}      # split (in xs) -> (statistic, p)

    def search(lo: int, hi: int) -> None:
        part = xs[lo:hi]
        if len(part) < 2 * min_segment:
            return
        ranks = _ranks(part)
        score, k = _best_split(ranks, min_segment)
        # significant but small still splits: an old regression that was undone can hide a later shift
        p = _permutation_p(ranks, score, min_segment, permutations, alpha, rng)
        if p >= alpha:
            return
        found[lo + k] = (score, p)
        search(lo, lo + k)
        search(lo + k, hi)

    search(0, len(xs))
    splits = _placed_between_neighbours(xs, sorted(found), min_segment)
    found = {new: found[old] for new, old in zip(splits, sorted(found))}
    while True:                                # neighbours only: drop the weakest step below min_shift_pct
        bounds = [0, *splits, len(xs)]
        shifts = [_pct(statistics.median(xs[a:k]), statistics.median(xs[k:b]))
                  for a, k, b in zip(bounds, bounds[1:], bounds[2:])]
        weak = [(abs(s), k) for s, k in zip(shifts, splits) if abs(s) < min_shift_pct]
        if not weak:
            break
        splits.remove(min(weak)[1])
    out = []
    for a, k, b, shift in zip(bounds, bounds[1:], bounds[2:], shifts):
        index = kept[k]
        worse = shift > 0 if better == 'lower' else shift < 0 if better == 'higher' else None
        out.append(ChangePoint(index=index, time=times[index] if times is not None else None,
                               before=statistics.median(xs[a:k]), after=statistics.median(xs[k:b]),
                               runs_before=k - a, runs_after=b - k, shift_pct=shift, statistic=found[k][0],
                               p_value=found[k][1], direction='' if worse is None else 'worse' if worse else 'better'))
    return out
