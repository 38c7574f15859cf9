"""How many streams of a round share a switch link under a fat tree's static routing, per stream, per round and per
direction of a plan: what the link verdict expects a stream to read (:class:`Contention`: 1 / that of what it
reads alone), what the check's recheck threshold allows for, and what a plan costs in false alarms
(:func:`plan_collisions`). The tree and its routing rule are :class:`netregress.measure.linkplan.Topology`'s.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .linkplan import LinkPlan, Topology


def round_contention(topology: Topology, leaf: np.ndarray, pos: np.ndarray, src: np.ndarray,
                     dst: np.ndarray) -> np.ndarray:
    """For each stream of one round (``src``, ``dst``: indices into ``leaf``/``pos``, from :meth:`Topology.arrays`):
    how many streams of the round share its busiest switch link under the tree's routing (1: none; a stream inside
    a leaf, or between nodes the tree does not list, 1). Each then gets 1 / that of what it would read alone."""
    ls, ld = leaf[src], leaf[dst]
    cross = (ls != ld) & (ls >= 0) & (ld >= 0)
    out = np.ones(len(src), dtype=np.int64)
    if not cross.any():
        return out
    k, leaves = topology.uplinks, len(topology.leaves)
    if topology.routing == 'd-mod-k':
        u = pos[dst] % k
        up, down = ls * k + u, ld * k + u
        on_up = np.bincount(up[cross], minlength=leaves * k)
        on_down = np.bincount(down[cross], minlength=leaves * k)
        out[cross] = np.maximum(on_up[up[cross]], on_down[down[cross]])
    else:
        leaving = np.bincount(ls[cross], minlength=leaves)
        entering = np.bincount(ld[cross], minlength=leaves)
        out[cross] = np.maximum(-(-leaving[ls[cross]] // k), -(-entering[ld[cross]] // k))
    return out


@dataclass(frozen=True)
class Contention:
    """Each direction's least contention (:func:`round_contention`) over the rounds that ran it, by rank: kept for
    the directions above 1 only (``keys`` sender x n + receiver, ascending; ``counts`` theirs), every other
    direction 1. On a 1:1 tree under the plans' shifts nothing is kept; on a tapered one the crossing directions."""
    n: int
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint8))

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    def of(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """The contention of directions ``src`` -> ``dst`` (int64)."""
        want = np.asarray(src, dtype=np.int64) * self.n + np.asarray(dst, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.keys, want), max(0, len(self.keys) - 1))
        hit = (self.keys[at] == want) if len(self.keys) else np.zeros(len(want), dtype=bool)
        return np.where(hit, self.counts[at] if len(self.keys) else 1, 1).astype(np.int64)

    def max(self) -> int:
        return int(self.counts.max()) if len(self.counts) else 1

    def cleared(self, pairs: np.ndarray) -> Contention:
        """The same with ``pairs`` ((k, 2) ranks) at 1: measured again without sharing a switch cable."""
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        keep = ~np.isin(self.keys, pairs[:, 0] * self.n + pairs[:, 1])
        return Contention(self.n, self.keys[keep], self.counts[keep])

    def reordered(self, order: Sequence[int]) -> Contention:
        """The same with rank i of the result rank ``order[i]`` of this one."""
        ranks = np.asarray(order, dtype=np.int64)
        place = np.full(self.n, -1, dtype=np.int64)
        place[ranks] = np.arange(len(ranks))
        s, d = np.divmod(self.keys, self.n)
        there = (place[s] >= 0) & (place[d] >= 0)
        keys = place[s[there]] * len(ranks) + place[d[there]]
        ranked = np.argsort(keys, kind='stable')
        return Contention(len(ranks), keys[ranked], self.counts[there][ranked])

    @classmethod
    def from_dense(cls, least: np.ndarray) -> Contention:
        least = np.asarray(least)
        s, d = np.nonzero(least > 1)
        return cls(len(least), s.astype(np.int64) * len(least) + d, least[s, d].astype(np.uint8))

    def dense(self) -> np.ndarray:
        """(n, n) uint8 (small fabrics: tests)."""
        out = np.ones((self.n, self.n), dtype=np.uint8)
        s, d = np.divmod(self.keys, self.n)
        out[s, d] = self.counts
        return out


def plan_contention(plan: LinkPlan, topology: Topology, index: Sequence[int], n: int) -> Contention:
    """Each direction's least contention (:func:`round_contention`) over the rounds that ran it, at ``index[p]``
    for plan position p (the job's rank order); 1 where the plan did not run it. A direction judged by its best
    round is judged against what that round let it read. In two passes over the rounds, holding only the directions
    above 1: those a round shares, then any of them another round ran alone."""
    leaf, pos = topology.arrays(plan.nodes)
    rank = np.asarray(index, dtype=np.int64)
    keys, counts = [], []
    for r in plan.iter_rounds():
        c = round_contention(topology, leaf, pos, r[:, 0], r[:, 1])
        shared = c > 1
        keys.append(rank[r[shared, 0]] * n + rank[r[shared, 1]])
        counts.append(np.minimum(c[shared], 255).astype(np.uint8))
    if not keys or not sum(len(k) for k in keys):
        return Contention(n)
    key, count = np.concatenate(keys), np.concatenate(counts)
    ranked = np.lexsort((count, key))                   # by direction, its least contention first
    key, count = key[ranked], count[ranked]
    first = np.r_[True, key[1:] != key[:-1]]
    key, count = key[first], count[first]
    alone = np.zeros(len(key), dtype=bool)
    for r in plan.iter_rounds():                        # a direction another round ran alone counts 1
        c = round_contention(topology, leaf, pos, r[:, 0], r[:, 1])
        ran = rank[r[c == 1, 0]] * n + rank[r[c == 1, 1]]
        at = np.minimum(np.searchsorted(key, ran), len(key) - 1)
        alone[at[key[at] == ran]] = True
    return Contention(n, key[~alone], count[~alone])


def plan_collisions(plan: LinkPlan, topology: Topology) -> tuple[int, int]:
    """(streams that share a switch link with another of their round, rounds with such a stream), counted with
    the tree's routing model: what a plan costs in false alarms where the verdict would not expect it."""
    leaf, pos = topology.arrays(plan.nodes)
    streams = rounds = 0
    for r in plan.iter_rounds():
        shared = int((round_contention(topology, leaf, pos, r[:, 0], r[:, 1]) > 1).sum())
        streams += shared
        rounds += shared > 0
    return streams, rounds
