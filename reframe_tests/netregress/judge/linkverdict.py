"""The link test's judgement: the matrix of directed-pair rates judged, summarised and the culprit named.

A *direction* is a sender -> receiver pair of nodes; a *link* is the pair, its figure its slower direction (a token
bucket or a bad port on one end slows one direction only). Every direction is judged against what its round let
it read: under the plan and the fabric's routing (:func:`netregress.measure.contention.plan_contention`) a stream
that shared its busiest switch link with c-1 others counts c x its rate (a tapered tree's uplinks under full load),
a stream measured again alone counts as read. Verdicts, all baseline-free (:func:`judge`):

* failed (sanity): a direction that failed or moved nothing;
* slow (performance): a direction below ``min_fraction`` x the median link, or below ``rate_fraction`` of the
  fabric's payload rate where it has one.

Each verdict names the smallest elements that explain its directions (:func:`name_elements`): a node's cable or
port (every direction from it, to it, or both), one uplink cable of a leaf switch or all its uplinks, a spine
switch (with d-mod-k routing: the pairs whose destination routes through it), the whole fabric; a direction no
element explains is named itself. A downgraded link speed reads as a node's cable at a stable rate.

Time and memory grow with the directions measured, not as lists of N x N records: the matrix file is read in
blocks (:func:`netregress.linkmatrix.cells`; the dense form by blocks of rows, a leaf's rows where the tree is
known, and of columns; the sparse form of a partial plan by its senders' rows and blocks of its entries, the
reverse of a direction found by binary search in its row: nothing N x N), only the directions run in a block are
worked on, the plan's contention is held for the directions it shares only
(:class:`netregress.measure.contention.Contention`), per node and per switch only counts and histograms of the
share of the median are kept (O(N)), and the suspect directions alone are listed. The pure functions are tested
in tests/python/test_allpairs.py; ``python -m netregress.judge.linkverdict RESULT.json`` judges a job's output by
hand (the scale benchmark too).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from .linkmatrix import BLOCK_ROWS, FAILED, MATRIX_FILE, LinkData, LinkMatrixError, cells, from_result, write_matrix
from ..measure.contention import Contention, plan_contention
from ..measure.linkplan import Topology

LINKS_TABLE = 'links.txt'
LINKS_JSON = 'links.json'
#: nr-linkmap's result as the check names it (measure.base.RESULT_FILE).
RESULT_JSON = 'result.json'
#: Elements and links named in one failure message; the rest are counted (all are in links.json and links.txt).
MAX_NAMED = 6
#: Suspect directions links.json keeps in full (the rest counted; the matrix has every one).
MAX_LISTED = 50_000
#: The share of an element's directions that must be suspect for the element to explain them: a slow element slows
#: every direction through it, while a stall or two of healthy streams still lets it be named.
EXPLAINS = 0.8
#: A named element's suspect directions read within this spread of each other (p90 / p10 - 1): a stable rate, as a
#: link that trained to a lower speed reads.
STABLE_SPREAD = 0.10
#: Histogram of the share of the median link: SHARE_BINS bins over 0 .. SHARE_MAX (medians to 0.005).
SHARE_BINS, SHARE_MAX = 400, 2.0
#: Contentions told apart when judging a node's directions (more count as the last).
CONTENTIONS = 16
#: Element ids a direction has (:class:`Elements`): node out, in, both ways (sender's and receiver's), uplink cable
#: up, down, both ways (the way up's and the way down's), a leaf's uplinks up and down, spine, fabric.
COLUMNS = 12
#: The columns of the elements a cap on a node's own link explains (node out, in, both; the fabric: every node's).
CAPPED = (0, 1, 2, 3, 11)


# --- the tree in the job's rank order -------------------------------------------------------------------------

@dataclass
class Fabric:
    """The switch tree (:class:`netregress.linkplan.Topology`) in the job's rank order: each rank's leaf index
    (-1: not under the tree) and uplink cable a stream to it takes (d-mod-k: its position mod K; otherwise every
    uplink is one element, cable 0)."""
    topology: Topology
    leaf: np.ndarray
    cable: np.ndarray

    @classmethod
    def of(cls, topology: Topology, nodes: Sequence[str]) -> Fabric:
        leaf, pos = topology.arrays(nodes)
        cable = pos % topology.uplinks if topology.routing == 'd-mod-k' else np.zeros(len(nodes), dtype=np.int64)
        return cls(topology, leaf, np.where(pos >= 0, cable, 0).astype(np.int64))

    @property
    def leaves(self) -> list[str]:
        return list(self.topology.leaves)

    @property
    def cables(self) -> int:
        """Uplink cables told apart per leaf."""
        return self.topology.uplinks if self.topology.routing == 'd-mod-k' else 1

    @property
    def spines(self) -> int:
        """Spines told apart (d-mod-k with named spines), else 0."""
        return len(self.topology.spines) if self.topology.routing == 'd-mod-k' else 0

    def uplink_name(self, leaf: int, cable: int) -> str:
        name = self.leaves[leaf]
        if self.cables == 1:
            spine = self.topology.spines[0] if len(self.topology.spines) == 1 else None
            return f'the uplink{"s" if self.topology.uplinks > 1 else ""} of leaf switch {name}' + \
                (f' (to {spine})' if spine else '')
        spine = self.topology.spine_of_cable(cable)
        return f'uplink {cable} of leaf switch {name}' + (f' (to {spine})' if spine else '')


# --- the element ids a direction belongs to --------------------------------------------------------------------

class Elements:
    """The elements of a fabric of n ranks as one id space: node out [0, n), node in [n, 2n), node both ways [2n,
    3n), then per leaf and cable the way up, the way down and both, per leaf all its uplinks up and down (where
    cables are told apart), per spine, and the fabric. A direction belongs to at most :data:`COLUMNS` of them."""

    def __init__(self, n: int, fabric: Fabric | None):
        self.n, self.fabric = n, fabric
        leaves = len(fabric.leaves) if fabric else 0
        cables = fabric.cables if fabric else 0
        spines = fabric.spines if fabric else 0
        whole_leaf = leaves if cables > 1 else 0
        sizes = [('out', n), ('in', n), ('node', n), ('up', leaves * cables), ('down', leaves * cables),
                 ('cable', leaves * cables), ('leaf_up', whole_leaf),
                 ('leaf_down', whole_leaf), ('spine', spines), ('fabric', 1)]
        self.start: dict[str, int] = {}
        at = 0
        for kind, size in sizes:
            self.start[kind] = at
            at += size
        self.count = at

    def physical(self, eid: int) -> tuple[str, int]:
        """What an element is part of whatever its way: a node, an uplink cable, a leaf's uplinks, a spine."""
        kind, index = self.kind(eid)
        return {'out': 'node', 'in': 'node', 'up': 'cable', 'down': 'cable', 'leaf_up': 'leaf',
                'leaf_down': 'leaf'}.get(kind, kind), index

    def kind(self, eid: int) -> tuple[str, int]:
        for kind in reversed(list(self.start)):
            if eid >= self.start[kind]:
                return kind, eid - self.start[kind]
        raise ValueError(eid)

    def of(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """(k, :data:`COLUMNS`) element ids of each direction, -1 where it belongs to none of that kind."""
        ids = np.full((len(src), COLUMNS), -1, dtype=np.int64)
        ids[:, 0] = self.start['out'] + src
        ids[:, 1] = self.start['in'] + dst
        ids[:, 2] = self.start['node'] + src
        ids[:, 3] = self.start['node'] + dst
        ids[:, 11] = self.start['fabric']
        f = self.fabric
        if f is not None and len(src):
            ls, ld = f.leaf[src], f.leaf[dst]
            cross = (ls != ld) & (ls >= 0) & (ld >= 0)
            u = f.cable[dst]
            for col, kind, leaf in ((4, 'up', ls), (5, 'down', ld), (6, 'cable', ls), (7, 'cable', ld)):
                ids[:, col] = np.where(cross, self.start[kind] + leaf * f.cables + u, -1)
            if f.cables > 1:
                ids[:, 8] = np.where(cross, self.start['leaf_up'] + ls, -1)
                ids[:, 9] = np.where(cross, self.start['leaf_down'] + ld, -1)
            if f.spines:
                ids[:, 10] = np.where(cross, self.start['spine'] + u % f.spines, -1)
        return ids


# --- the verdict ------------------------------------------------------------------------------------------------

@dataclass
class Named:
    """An element that explains suspect directions: what it is, in which direction, how many of its directions
    are suspect, their median share of what they should read and whether that share is stable."""
    kind: str               # node, uplink, uplinks, spine, fabric, link
    name: str
    direction: str          # out, in, both (nodes); up, down, both (uplinks); '' otherwise
    suspects: int
    directions: int
    share: float            # median share (slow) of the median link; 0 for failed
    of_rate: float | None = None    # median share (slow) of the line rate, where the fabric has one
    stable: bool = False
    confirmed: bool = False  # a direction of it was measured again alone and stayed so
    alternatives: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        out = dict(self.__dict__)
        if not self.alternatives:
            del out['alternatives']
        return out


@dataclass
class Verdict:
    """What :func:`judge` found. Direction arrays are rank indices; ``share`` is a direction's rate (times its
    contention) over the median link, ``of_rate`` over the fabric's payload rate."""
    nodes: list[str]
    median_link_mbps: float | None
    min_link_mbps: float | None
    min_fraction: float
    rate_mbps: float | None
    rate_fraction: float
    links: int
    directions: int
    slow: dict[str, np.ndarray]
    failed: dict[str, np.ndarray]
    errors: dict[tuple[int, int], str]
    slow_named: list[Named]
    failed_named: list[Named]
    per_node: dict[str, list]
    switches: dict[str, list]
    rechecked: int = 0

    def summary(self) -> dict[str, float]:
        """The performance figures (empty when nothing was measured)."""
        median, least = self.median_link_mbps, self.min_link_mbps
        if median is None or least is None:         # both set together, from the links measured
            return {}
        return {'min_link_mbps': least, 'median_link_mbps': median,
                'min_to_median': least / median if median > 0 else 0.0}


def _upper_median(values: np.ndarray) -> float:
    """The median; for an even count the upper of the two middle values: a slow node spoils N-1 of the N(N-1)/2
    links, half of them on 4 nodes, and the mean of the two middle values would sit between slow and good links."""
    k = len(values) // 2
    return float(np.partition(values, k)[k])


def _counted(keys: np.ndarray, rows: int, width: int) -> np.ndarray:
    """(rows, width) counts of ``keys`` (row * width + column)."""
    return np.bincount(keys.ravel(), minlength=rows * width).reshape(rows, width)


def _bins(share: np.ndarray) -> np.ndarray:
    return np.minimum((share * (SHARE_BINS / SHARE_MAX)).astype(np.int64), SHARE_BINS - 1)


def _hist_median(hist: np.ndarray) -> np.ndarray:
    """Upper median share of each row of histograms (NaN for an empty row)."""
    hist = np.atleast_2d(hist)
    total = hist.sum(axis=1)
    cum = hist.cumsum(axis=1)
    at = (cum <= (total // 2)[:, None]).sum(axis=1)
    return np.where(total > 0, (np.minimum(at, SHARE_BINS - 1) + 0.5) * (SHARE_MAX / SHARE_BINS), np.nan)


def _row_groups(n: int, fabric: Fabric | None) -> list[tuple[int, np.ndarray]]:
    """(leaf index or -1, ranks) to read at once: a leaf's ranks, or blocks of :data:`BLOCK_ROWS`."""
    if fabric is None:
        return [(-1, np.arange(i, min(n, i + BLOCK_ROWS))) for i in range(0, n, BLOCK_ROWS)]
    groups = [(ell, np.flatnonzero(fabric.leaf == ell)) for ell in range(len(fabric.leaves))]
    loose = np.flatnonzero(fabric.leaf < 0)
    groups += [(-1, loose[i:i + BLOCK_ROWS]) for i in range(0, len(loose), BLOCK_ROWS)]
    return [(ell, rows) for ell, rows in groups if len(rows)]


def judge(data: LinkData, *, min_fraction: float, rate_mbps: float | None = None, rate_fraction: float = 0.95,
          fabric: Fabric | None = None, contention: Contention | np.ndarray | None = None) -> Verdict:
    """Judge every direction of ``data`` (see the module doc). ``contention`` from
    :func:`netregress.measure.contention.plan_contention` in rank order (or an (n, n) array of it); the directions
    ``data.rechecked`` ran alone, and ``data.uncontended`` (where given) in a recheck round with no switch cable
    shared: both judged as read (a slow link's own rate can sit between its share in the plan and the line, so the
    share would hide it)."""
    m, n = cells(data.matrix), data.n
    uncontended = data.rechecked if data.uncontended is None else data.uncontended
    if contention is not None and not isinstance(contention, Contention):
        contention = Contention.from_dense(contention)
    if contention is not None and len(uncontended):
        contention = contention.cleared(uncontended)
    groups = _row_groups(n, fabric)

    # pass 1: each link's figure (its slower measured direction, times its contention), for the median
    figures: list[np.ndarray] = []
    for a, b, there, back in m.links():
        if contention is not None:
            there, back = there * contention.of(a, b), back * contention.of(b, a)
        figures.append(np.fmin(np.where(there > 0, there, np.nan), np.where(back > 0, back, np.nan)))
    values = np.concatenate(figures).astype(np.float32) if figures else np.zeros(0, dtype=np.float32)
    median = _upper_median(values) if len(values) else None
    floor = (min_fraction * median) if median else 0.0
    if rate_mbps:
        floor = max(floor, rate_fraction * rate_mbps)

    elements = Elements(n, fabric)
    start = elements.start
    ok_counts = np.zeros(elements.count, dtype=np.int64)
    failed_counts = np.zeros(elements.count, dtype=np.int64)
    cables = fabric.cables if fabric else 1
    leaves = len(fabric.leaves) if fabric else 0
    hist = {'out': np.zeros((n, SHARE_BINS), np.int64), 'in': np.zeros((n, SHARE_BINS), np.int64),
            'inside': np.zeros((leaves, SHARE_BINS), np.int64),
            'up': np.zeros((leaves * cables, SHARE_BINS), np.int64),
            'down': np.zeros((leaves * cables, SHARE_BINS), np.int64)}
    min_out, min_in = np.full(n, np.inf), np.full(n, np.inf)
    # a node's own link is not shared within a round: capped at x of its rate, a stream that the plan gave 1/c of an
    # uplink reads min(x, 1/c) and shows only where c x x is below the floor, so its ok directions are counted by c
    by_contention = np.zeros((3 * n + 1, CONTENTIONS), dtype=np.int64)
    slow_parts: list[tuple[np.ndarray, ...]] = []
    failed_parts: list[tuple[np.ndarray, ...]] = []
    directions = 0

    def shares(raw: np.ndarray, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rate times contention, share of the median link) of directions measured ok."""
        norm = raw * contention.of(src, dst) if contention is not None else raw
        return norm, norm / median

    # pass 2: a group of rows (a leaf's) at a time, the directions run in it listed: what they send, counted and
    # binned per element; the suspects
    for ell, rows in groups:
        r, c, v = m.rows(rows)                          # every direction run, ok or failed
        src = rows[r]
        ok, is_failed = v > 0, v == FAILED
        directions += int(ok.sum() + is_failed.sum())
        norm = np.full(len(v), np.nan, dtype=np.float32)
        share = np.full(len(v), np.inf)
        if median:
            norm[ok], share[ok] = shares(v[ok], src[ok], c[ok])
        is_slow = ok & (norm < floor)
        slow_parts.append((src[is_slow], c[is_slow], v[is_slow], norm[is_slow]))
        failed_parts.append((src[is_failed], c[is_failed], v[is_failed], norm[is_failed]))
        for mask, counts in ((ok, ok_counts), (is_failed, failed_counts)):
            counts[start['out'] + rows] += np.bincount(r[mask], minlength=len(rows))
            counts[start['in']:start['in'] + n] += np.bincount(c[mask], minlength=n)
            counts[start['fabric']] += int(mask.sum())
        ran = c
        r, c, share = r[ok], c[ok], share[ok]
        if contention is not None:
            cc = np.minimum(contention.of(rows[r], c), CONTENTIONS - 1)
            by_contention[rows] += _counted(r * CONTENTIONS + cc, len(rows), CONTENTIONS)
            by_contention[n:2 * n] += _counted(c * CONTENTIONS + cc, n, CONTENTIONS)
            by_contention[3 * n] += np.bincount(cc, minlength=CONTENTIONS)
        least = np.full(len(rows), np.inf)
        np.minimum.at(least, r, share)
        min_out[rows] = least
        b = _bins(share)
        hist['out'][rows] += _counted(r * SHARE_BINS + b, len(rows), SHARE_BINS)
        if fabric is None or ell < 0:
            continue
        to = fabric.leaf[c]
        inside, cross = to == ell, (to != ell) & (to >= 0)
        hist['inside'][ell] += np.bincount(b[inside], minlength=SHARE_BINS)
        hist['up'][ell * cables:(ell + 1) * cables] += _counted(fabric.cable[c[cross]] * SHARE_BINS + b[cross],
                                                                 cables, SHARE_BINS)
        for mask, counts in ((ok, ok_counts), (is_failed, failed_counts)):
            dst = ran[mask]
            dst = dst[(fabric.leaf[dst] != ell) & (fabric.leaf[dst] >= 0)]
            counts[start['up'] + ell * cables:start['up'] + (ell + 1) * cables] += \
                np.bincount(fabric.cable[dst], minlength=cables)
            counts[start['down']:start['down'] + leaves * cables] += \
                np.bincount(fabric.leaf[dst] * cables + fabric.cable[dst], minlength=leaves * cables)
    if contention is None:                              # every direction as read
        by_contention[:2 * n, 1] = ok_counts[:2 * n]
        by_contention[3 * n, 1] = ok_counts[start['fabric']]

    # pass 3: a block of columns at a time: what the nodes receive, binned, and what comes from other leaves (the
    # way down an uplink)
    crossing_in = np.zeros((n if fabric is not None else 0, SHARE_BINS), dtype=np.int64)   # only with a tree
    for j0, j1, r, c, v in (m.columns() if median else ()):
        if not len(r):
            continue
        _, share = shares(v, r, j0 + c)
        least = np.full(j1 - j0, np.inf)
        np.minimum.at(least, c, share)
        min_in[j0:j1] = np.minimum(min_in[j0:j1], least)
        b = _bins(share)
        hist['in'][j0:j1] += _counted(c * SHARE_BINS + b, j1 - j0, SHARE_BINS)
        if fabric is not None:
            other = (fabric.leaf[r] != fabric.leaf[j0 + c]) & (fabric.leaf[r] >= 0) & (fabric.leaf[j0 + c] >= 0)
            crossing_in[j0:j1] += _counted(c[other] * SHARE_BINS + b[other], j1 - j0, SHARE_BINS)
    if fabric is not None:
        placed = fabric.leaf >= 0
        np.add.at(hist['down'], (fabric.leaf * cables + fabric.cable)[placed], crossing_in[placed])
    by_contention[2 * n:3 * n] = by_contention[:n] + by_contention[n:2 * n]
    for counts in (ok_counts, failed_counts):
        counts[start['node']:start['node'] + n] = counts[:n] + counts[n:2 * n]
    if fabric is not None:
        for counts in (ok_counts, failed_counts):
            up = counts[start['up']:start['up'] + leaves * cables].reshape(leaves, cables)
            down = counts[start['down']:start['down'] + leaves * cables].reshape(leaves, cables)
            counts[start['cable']:start['cable'] + leaves * cables] = (up + down).ravel()
            if cables > 1:
                counts[start['leaf_up']:start['leaf_up'] + leaves] = up.sum(axis=1)
                counts[start['leaf_down']:start['leaf_down'] + leaves] = down.sum(axis=1)
            if fabric.spines:
                s = fabric.spines
                counts[start['spine']:start['spine'] + s] = \
                    np.bincount(np.arange(cables) % s, weights=up.sum(axis=0), minlength=s).astype(np.int64)

    def joined(parts: list[tuple[np.ndarray, ...]]) -> dict[str, np.ndarray]:
        keys = ('src', 'dst', 'mbps', 'norm')
        return {k: np.concatenate([p[i] for p in parts]) if parts else np.zeros(0) for i, k in enumerate(keys)}

    slow, failed = joined(slow_parts), joined(failed_parts)
    slow['share'] = slow['norm'] / median if median else slow['norm']
    slow['of_rate'] = slow['norm'] / rate_mbps if rate_mbps else np.full(len(slow['norm']), np.nan)
    slow['contention'] = (contention.of(slow['src'], slow['dst']) if contention is not None
                          else np.ones(len(slow['src']), dtype=np.int64))
    for d in (slow, failed):
        d['src'], d['dst'] = d['src'].astype(np.int64), d['dst'].astype(np.int64)
    order = np.argsort(slow['norm'], kind='stable')
    slow = {k: v[order] for k, v in slow.items()}
    rechecked = {(int(a), int(b)) for a, b in data.rechecked}

    limit = floor / median if median else 1.0
    slow_named = name_elements(elements, slow, ok_counts, data.nodes, rechecked, (by_contention, limit))
    failed_named = name_elements(elements, failed, ok_counts + failed_counts, data.nodes, set())
    per_node = {'ok_out': ok_counts[:n].tolist(), 'ok_in': ok_counts[n:2 * n].tolist(),
                'failed_out': failed_counts[:n].tolist(), 'failed_in': failed_counts[n:2 * n].tolist(),
                'slow_out': np.bincount(slow['src'], minlength=n).tolist(),
                'slow_in': np.bincount(slow['dst'], minlength=n).tolist(),
                'min_share_out': _rounded(min_out), 'min_share_in': _rounded(min_in),
                'median_share_out': _rounded(_hist_median(hist['out'])),
                'median_share_in': _rounded(_hist_median(hist['in']))}
    switches = _switch_summaries(fabric, elements, ok_counts, failed_counts, slow, hist) if fabric else {}
    return Verdict(data.nodes, median, float(values.min()) if len(values) else None, min_fraction, rate_mbps,
                   rate_fraction, len(values), directions, slow, failed, data.errors, slow_named, failed_named,
                   per_node, switches, len(rechecked))


def _rounded(values: np.ndarray) -> list:
    return [None if not np.isfinite(v) else round(float(v), 3) for v in values]


def _switch_summaries(fabric: Fabric, elements: Elements, ok: np.ndarray, failed: np.ndarray,
                      slow: Mapping[str, np.ndarray], hist: Mapping[str, np.ndarray]) -> dict[str, list]:
    """Per leaf: its nodes and the directions inside it, up and down its uplinks (counts and the median share of
    the median link); per spine (d-mod-k) the directions through it; per uplink cable with a suspect direction."""
    cables, leaves = fabric.cables, len(fabric.leaves)
    slow_ids = elements.of(slow['src'], slow['dst'])
    slow_counts = np.bincount(slow_ids[slow_ids >= 0], minlength=elements.count)

    def block(kind: str, i: int, h: np.ndarray) -> dict:
        eid = elements.start[kind] + i
        return {'ok': int(ok[eid]), 'slow': int(slow_counts[eid]), 'failed': int(failed[eid]),
                'median_share': _rounded(_hist_median(h))[0]}

    up = hist['up'].reshape(leaves, cables, SHARE_BINS)
    down = hist['down'].reshape(leaves, cables, SHARE_BINS)
    out_leaves = []
    for ell, name in enumerate(fabric.leaves):
        whole = 'leaf_up' if cables > 1 else 'up'
        entry = {'leaf': name, 'nodes': int((fabric.leaf == ell).sum()),
                 'inside': {'median_share': _rounded(_hist_median(hist['inside'][ell]))[0]},
                 'up': block(whole, ell, up[ell].sum(axis=0)),
                 'down': block('leaf_down' if cables > 1 else 'down', ell, down[ell].sum(axis=0))}
        out_leaves.append(entry)
    out = {'leaves': out_leaves}
    if fabric.spines:
        s = fabric.spines
        through = np.stack([up[:, u::s].sum(axis=(0, 1)) for u in range(s)])
        out['spines'] = [{'spine': fabric.topology.spines[i], **block('spine', i, through[i])} for i in range(s)]
    if cables > 1:
        out['uplinks'] = [{'leaf': fabric.leaves[ell], 'cable': u, 'spine': fabric.topology.spine_of_cable(u),
                           'up': block('up', ell * cables + u, up[ell, u]),
                           'down': block('down', ell * cables + u, down[ell, u])}
                          for ell in range(leaves) for u in range(cables)
                          if slow_counts[elements.start['up'] + ell * cables + u]
                          or slow_counts[elements.start['down'] + ell * cables + u]
                          or failed[elements.start['up'] + ell * cables + u]
                          or failed[elements.start['down'] + ell * cables + u]]
    return out


def name_elements(elements: Elements, suspects: Mapping[str, np.ndarray], measured: np.ndarray,
                  nodes: Sequence[str], rechecked: set[tuple[int, int]],
                  capped: tuple[np.ndarray, float] | None = None) -> list[Named]:
    """The smallest elements that explain ``suspects`` (``src``, ``dst``; ``share`` where slow): an element
    qualifies when at least :data:`EXPLAINS` of its ``measured`` directions are suspect (and two at least); the
    one that explains the most suspects still unexplained is named first (of two that explain the same, the one
    with fewer directions: a cable before the node behind it), until none explains two. Elements that explain
    exactly the same directions are named together (two leaves' uplinks seen only against each other). A node's
    or cable's two ways are merged into 'both'; suspects left over are named as directions (kind ``link``).

    ``capped`` (slow directions: the ok directions of node out, in, both ways and the fabric by contention, and the
    floor as a share of the median link): a node's link, or every node's, capped at share x slows only the directions
    whose round gave them more than x, so those with contention c and c x x >= the floor do not count against it."""
    src, dst = suspects['src'], suspects['dst']
    if not len(src):
        return []
    ids = elements.of(src, dst)
    counts = np.bincount(ids[ids >= 0], minlength=elements.count)
    if capped is not None:
        by_contention, limit = capped
        rows = np.r_[elements.start['out']:elements.start['out'] + 3 * elements.n, elements.start['fabric']]
        total = np.zeros(elements.count)
        for col in CAPPED:
            np.add.at(total, ids[:, col], suspects['share'])
        mean = total / np.maximum(counts, 1)
        c = suspects['contention']
        for col in CAPPED:                  # a suspect the cap could not have made does not count against it
            shown = (c == 1) | (c * mean[ids[:, col]] < limit)
            ids[:, col] = np.where(shown, ids[:, col], -1)
        counts = np.bincount(ids[ids >= 0], minlength=elements.count)
        visible = np.arange(CONTENTIONS)[None, :] * mean[rows][:, None] < limit
        visible[:, 1] = True                        # alone, every slow direction shows
        measured = measured.copy()
        measured[rows] = (by_contention * visible).sum(axis=1)
    qualifies = (counts >= 2) & (counts >= EXPLAINS * np.maximum(measured, 1))
    ids = np.where(ids >= 0, np.where(qualifies[np.maximum(ids, 0)], ids, -1), -1)
    left = np.ones(len(src), dtype=bool)
    chosen: list[tuple[int, np.ndarray, list[tuple[int, ...]]]] = []
    while left.any() and len(chosen) < 64:
        live = ids[left]
        tally = np.bincount(live[live >= 0], minlength=elements.count)
        if tally.max(initial=0) < 2:
            break
        best = max(np.flatnonzero(tally == tally.max()), key=lambda e: (-measured[e], -e))
        covered = left & (ids == best).any(axis=1)
        chosen.append((int(best), covered, _alternatives(elements, ids, covered, counts, measured, int(best))))
        left &= ~covered
    named: list[Named] = []
    for eid, covered, others in chosen:
        kind, index = elements.kind(eid)
        named.append(_describe(elements, kind, index, covered, int(measured[eid]), suspects, rechecked, nodes,
                               others))
    named = _merge_ways(named)
    share, of_rate = suspects.get('share'), suspects.get('of_rate')
    for i in np.flatnonzero(left):
        named.append(Named('link', f'{nodes[src[i]]}->{nodes[dst[i]]}', '', 1, 1,
                           round(float(share[i]), 3) if share is not None else 0.0,
                           round(float(of_rate[i]), 3) if of_rate is not None and np.isfinite(of_rate[i]) else None,
                           confirmed=(int(src[i]), int(dst[i])) in rechecked))
    return named


def _alternatives(elements: Elements, ids: np.ndarray, covered: np.ndarray, counts: np.ndarray,
                  measured: np.ndarray, best: int) -> list[tuple[int, ...]]:
    """Other elements, or both ways of one, whose directions are exactly the suspects ``covered`` (each of them
    suspect, none elsewhere): what the tree cannot tell from ``best``, as two leaves seen only against each other."""
    size = int(covered.sum())
    mine = ids[covered]
    inside = np.bincount(mine[mine >= 0], minlength=elements.count)
    exact = np.flatnonzero((inside == counts) & (counts > 0) & (measured == counts))
    groups: dict[tuple, list[int]] = {}
    for e in exact:
        groups.setdefault(elements.physical(int(e)), []).append(int(e))
    out: list[tuple[int, ...]] = []
    for key, members in groups.items():
        if key == elements.physical(best):
            continue
        whole = [e for e in members if counts[e] == size]
        if whole:
            out.append((max(whole),))                   # a node both ways before its one way
        elif len(members) == 2 and int(counts[members].sum()) == size:
            out.append(tuple(members))
    return out


def _describe(elements: Elements, kind: str, index: int, covered: np.ndarray, measured: int,
              suspects: Mapping[str, np.ndarray], rechecked: set, nodes: Sequence[str],
              others: list[tuple[int, ...]]) -> Named:
    f = elements.fabric
    src, dst = suspects['src'][covered], suspects['dst'][covered]
    shares = suspects['share'][covered] if 'share' in suspects else np.zeros(0)
    median = float(np.median(shares)) if len(shares) else 0.0
    stable = bool(len(shares) >= 2 and np.percentile(shares, 90) <= (1 + STABLE_SPREAD) * np.percentile(shares, 10))
    confirmed = any((int(a), int(b)) in rechecked for a, b in zip(src, dst))
    rates = suspects['of_rate'][covered] if 'of_rate' in suspects else np.zeros(0)
    of_rate = round(float(np.median(rates)), 3) if len(rates) and np.isfinite(rates).all() else None

    def name(k: str, i: int) -> tuple[str, str, str]:
        if k in ('out', 'in', 'node'):
            return 'node', f'node {nodes[i]}', 'both' if k == 'node' else k
        if f is None:                   # without a switch tree the nodes and the fabric are the only elements
            if k != 'fabric':
                raise ValueError(f'element {k} {i} without a switch tree')
            return 'fabric', 'the whole fabric', ''
        if k in ('up', 'down', 'cable'):
            return 'uplink', f.uplink_name(i // f.cables, i % f.cables), 'both' if k == 'cable' else k
        if k in ('leaf_up', 'leaf_down'):
            return 'uplinks', f'the uplinks of leaf switch {f.leaves[i]}', k.split('_')[1]
        if k == 'spine':
            return 'spine', f'spine switch {f.topology.spines[i]}', ''
        return 'fabric', 'the whole fabric', ''

    what, label, way = name(kind, index)
    alternatives = []
    for group in others:
        _, other, other_way = name(*elements.kind(group[0]))
        other_way = 'both' if len(group) > 1 else other_way
        alternatives.append(other + (f' ({_WAYS[other_way]})' if other_way else ''))
    return Named(what, label, way, int(covered.sum()), measured, round(median, 3), of_rate, stable, confirmed,
                 alternatives)


def _merge_ways(named: list[Named]) -> list[Named]:
    """A node (or cable) named for both ways becomes one entry, direction 'both'."""
    out: list[Named] = []
    for x in named:
        twin = next((y for y in out if y.kind == x.kind and y.name == x.name and {x.direction, y.direction} in
                     ({'out', 'in'}, {'up', 'down'})), None)
        if twin is None:
            out.append(x)
            continue
        total = twin.suspects + x.suspects
        twin.share = round((twin.share * twin.suspects + x.share * x.suspects) / total, 3)
        if twin.of_rate is not None and x.of_rate is not None:
            twin.of_rate = round((twin.of_rate * twin.suspects + x.of_rate * x.suspects) / total, 3)
        twin.direction, twin.suspects, twin.directions = 'both', total, twin.directions + x.directions
        twin.stable, twin.confirmed = twin.stable and x.stable, twin.confirmed or x.confirmed
    return out


# --- what the verdict says ------------------------------------------------------------------------------------

_WAYS = {'out': 'every direction from it', 'in': 'every direction towards it', 'both': 'both ways',
         'up': 'up, towards the spines', 'down': 'down, towards the leaf'}


def phrase(x: Named, slow: bool) -> str:
    """One named element or direction, as a failure message names it."""
    if x.kind == 'link':
        if not slow:
            return x.name
        return f'{x.name} at {x.share:.2f} x' + (' (again when measured alone)' if x.confirmed else '')
    way = {'spine': 'every pair routed through it', 'fabric': 'every direction'}.get(x.kind) or _WAYS[x.direction]
    if x.kind == 'node':
        way = f'its cable, port or NIC, {way}'
    detail = f'{x.suspects} of {x.directions} directions'
    if slow:
        detail += f' at {x.share:.2f} x the median link' + (f', {x.of_rate:.2f} x the line rate'
                                                           if x.of_rate is not None else '')
        if x.stable and x.share > 0.05:
            detail += ', a stable rate' + (': a link running at a lower speed?' if x.kind in ('node', 'uplink') else '')
        detail += ', slow again when measured alone' if x.confirmed else ''
    else:
        detail += ' failed' + (': the node is down or unreachable' if x.kind == 'node' and x.direction == 'both'
                               else '')
    return f'{x.name} ({way}: {detail})' + ''.join(f', or {other}' for other in x.alternatives)


def _listing(named: list[Named], slow: bool) -> str:
    elements = [x for x in named if x.kind != 'link']
    links = [x for x in named if x.kind == 'link']
    parts = [phrase(x, slow) for x in elements[:MAX_NAMED]]
    parts += [phrase(x, slow) for x in links[:max(0, MAX_NAMED - len(parts))]]
    more = len(elements) + len(links) - len(parts)
    if more > 0:
        parts.append(f'{more} more (all in {LINKS_TABLE})')
    head = 'the slow links all involve ' if slow else 'the failed directions all involve '
    if len(elements) == 1 and not links:
        return head + parts[0]
    return '; '.join(parts)


def failed_problems(v: Verdict) -> list[str]:
    """The sanity verdict: directions that failed or moved nothing, named by the elements they share, with the
    first error (empty: none failed; a job that measured nothing says so)."""
    if not len(v.failed['src']):
        return [] if v.directions else ['no link was measured']
    first = (int(v.failed['src'][0]), int(v.failed['dst'][0]))
    error = v.errors.get(first, 'moved nothing')
    return [f'{len(v.failed["src"])} of {v.directions} directions not measured (the first: '
            f'{v.nodes[first[0]]}->{v.nodes[first[1]]}: {error}): {_listing(v.failed_named, False)}']


def slow_problems(v: Verdict) -> list[str]:
    """The performance verdict: directions below their floor, named by the smallest elements that explain them."""
    if not len(v.slow['src']) or v.median_link_mbps is None:
        return []
    floors = [f'{v.min_fraction:g} x the median link ({v.median_link_mbps:.0f} Mbit/s, min_link_fraction '
              f'{v.min_fraction:g})']
    if v.rate_mbps:
        floors.append(f'{v.rate_fraction:g} x the {v.rate_mbps:g} Mbit/s a link carries (min_rate_fraction '
                      f'{v.rate_fraction:g})')
    return [f'{len(v.slow["src"])} of {v.directions} directions below {" or ".join(floors)}, each against what its '
            f'round let it read: {_listing(v.slow_named, True)}']


def suspects_json(v: Verdict, limit: int = MAX_LISTED) -> dict:
    """The suspect directions in full (at most ``limit`` of each kind, the slowest first) and the named elements."""
    def rows(d: Mapping[str, np.ndarray], slow: bool) -> list[dict]:
        out = []
        for i in range(min(limit, len(d['src']))):
            a, b = int(d['src'][i]), int(d['dst'][i])
            entry = {'src': a, 'dst': b, 'src_host': v.nodes[a], 'dst_host': v.nodes[b]}
            if slow:
                entry.update(mbps=round(float(d['mbps'][i]), 3), share=round(float(d['share'][i]), 4),
                             contention=int(d['contention'][i]))
                if v.rate_mbps:
                    entry['of_rate'] = round(float(d['of_rate'][i]), 4)
            else:
                entry['error'] = v.errors.get((a, b), 'moved nothing')
            out.append(entry)
        return out

    return {'slow': rows(v.slow, True), 'slow_count': int(len(v.slow['src'])),
            'failed': rows(v.failed, False), 'failed_count': int(len(v.failed['src'])),
            'named_slow': [x.as_dict() for x in v.slow_named], 'named_failed': [x.as_dict() for x in v.failed_named]}


def format_table(v: Verdict, limit: int = MAX_LISTED) -> str:
    """The table for people (``links.txt``): the named elements, then the suspect directions (at most ``limit``
    of each kind, the slowest first; links.json and linkmatrix.bin have the rest)."""
    lines = []
    for title, named in (('failed', v.failed_named), ('slow', v.slow_named)):
        for x in named:
            if x.kind != 'link':
                lines.append(f'{title}: {phrase(x, title == "slow")}')
    rows = [('direction', 'Mbit/s', 'share', 'contention', 'problem')]
    for i in range(min(limit, len(v.failed['src']))):
        a, b = int(v.failed['src'][i]), int(v.failed['dst'][i])
        rows.append((f'{v.nodes[a]}->{v.nodes[b]}', '-', '-', '-', f'failed: {v.errors.get((a, b), "moved nothing")}'))
    for i in range(min(limit, len(v.slow['src']))):
        a, b = int(v.slow['src'][i]), int(v.slow['dst'][i])
        rows.append((f'{v.nodes[a]}->{v.nodes[b]}', f'{v.slow["mbps"][i]:.1f}', f'{v.slow["share"][i]:.3f}',
                     str(int(v.slow['contention'][i])), 'slow'))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    table = '\n'.join('  '.join(c.ljust(w) for c, w in zip(r[:-1], widths)) + '  ' + r[-1] for r in rows)
    left = max(0, len(v.failed['src']) - limit) + max(0, len(v.slow['src']) - limit)
    stats = v.summary()
    tail = '\n'.join(f'{k} = {val:.3f}' if k == 'min_to_median' else f'{k} = {val:.1f}' for k, val in stats.items())
    head = (f'{v.directions} directions measured, {len(v.slow["src"])} slow, {len(v.failed["src"])} failed, '
            f'{v.rechecked} measured again alone; listed: the suspect ones only (linkmatrix.bin has every one)')
    more = [f'{left} more suspect directions not listed (the slowest {limit} of each kind are)'] if left else []
    return '\n'.join([head, *lines, '', table, *more, '', tail]).rstrip() + '\n'


# --- InfiniBand ports --------------------------------------------------------------------------------------------

#: What the port read prints per node and port (allpairs.PORTS_FILE): ``port HOST DEVICE/PORT rate=... state=...``.
PORT_LINE = 'port'


def port_problems(text: str, nodes: Sequence[str], device: str | None, line_rate_mbps: float | None) -> list[str]:
    """Per node, the InfiniBand port under test (``device`` like ``mlx5_0:1``; every port where None) from the
    sysfs read: a port not ACTIVE, a link width or speed below the fabric's line rate (a cable or port that trained
    down), a node that printed no port."""
    seen: dict[str, list[tuple[str, str, str]]] = {}
    for line in text.splitlines():
        words = line.split(None, 3)
        if len(words) < 4 or words[0] != PORT_LINE:
            continue
        host, port, rest = words[1], words[2], words[3]
        fields = dict(kv.split('=', 1) for kv in rest.split('|') if '=' in kv)
        seen.setdefault(host, []).append((port, fields.get('rate', '').strip(), fields.get('state', '').strip()))
    wanted = device.replace(':', '/') if device else None
    problems = []
    for node in nodes:
        ports = [p for p in seen.get(node, seen.get(node.split('.')[0], [])) if wanted in (None, p[0])]
        if not ports:
            problems.append(f'node {node}: no InfiniBand port{" " + device if device else ""} in '
                            f'/sys/class/infiniband')
            continue
        for port, rate, state in ports:
            if 'ACTIVE' not in state.upper():
                problems.append(f'node {node}: port {port} is {state or "in no state"} (not ACTIVE)')
                continue
            gbps = _rate_gbps(rate)
            if line_rate_mbps and (gbps is None or gbps * 1000 < 0.999 * line_rate_mbps):
                problems.append(f'node {node}: port {port} runs at {rate or "an unknown rate"}, below the fabric\'s '
                                f'line rate of {line_rate_mbps / 1000:g} Gb/sec: its link trained to a lower width or '
                                f'speed (cable or port)')
    return problems


def _rate_gbps(rate: str) -> float | None:
    """``200 Gb/sec (4X HDR)`` -> 200.0."""
    try:
        return float(rate.split()[0])
    except (IndexError, ValueError):
        return None


# --- by hand: judge a job's output ----------------------------------------------------------------------------

def compact_result(doc: Mapping) -> dict:
    """nr-linkmap's result without what linkmatrix.bin and links.json hold (every pair of every round, the N x N
    matrix): what is kept of it."""
    out = {k: v for k, v in doc.items() if k != 'matrix_mbps'}
    out['rounds'] = [{k: v for k, v in r.items() if k != 'pairs'} for r in doc.get('rounds') or []
                     if isinstance(r, Mapping)]
    out['compacted'] = f'every pair of every round and matrix_mbps: in {MATRIX_FILE} and {LINKS_JSON}'
    return out


def write_link_files(where: str, doc: Mapping, data: LinkData, verdict: Verdict, about: Mapping) -> None:
    """What is kept of one link-test job in directory ``where``: ``linkmatrix.bin`` (where the kernel did not
    write it), ``links.json`` (``about`` the run: partition, plan, the order of the switch tree...; the summaries,
    the suspect directions and what they were blamed on), ``links.txt``, and nr-linkmap's ``result.json`` without
    its per-pair lists (:func:`compact_result`)."""
    if not os.path.exists(os.path.join(where, MATRIX_FILE)):
        write_matrix(os.path.join(where, MATRIX_FILE), data.matrix)
    links = {**about, 'nodes': data.nodes, 'matrix': MATRIX_FILE, 'summary': verdict.summary(),
             'directions': verdict.directions, 'rechecked': verdict.rechecked, 'per_node': verdict.per_node,
             'switches': verdict.switches, **suspects_json(verdict)}
    with open(os.path.join(where, LINKS_JSON), 'w') as fp:
        fp.write(json.dumps(links, separators=(',', ':')))        # dumps: the C encoder (dump is Python's)
    with open(os.path.join(where, LINKS_TABLE), 'w') as fp:
        fp.write(format_table(verdict))
    if 'compacted' not in doc and (any(isinstance(r, Mapping) and r.get('pairs') for r in doc.get('rounds') or [])
                                   or 'matrix_mbps' in doc):
        with open(os.path.join(where, RESULT_JSON), 'w') as fp:
            fp.write(json.dumps(compact_result(doc)))


def main(argv: Sequence[str] | None = None) -> int:
    """Judge an nr-linkmap result (and its linkmatrix.bin) and print the verdicts, the time and peak memory; with
    --keep also write what the link check keeps (a simulated job's output becomes a report's link map)."""
    from ..measure import linkplan
    ap = argparse.ArgumentParser(prog='python -m netregress.judge.linkverdict', description=main.__doc__)
    ap.add_argument('result', type=Path, help="nr-linkmap's JSON result (linkmatrix.bin beside it)")
    ap.add_argument('--topology', type=Path, help="Slurm's topology.conf (or scontrol show topology output)")
    ap.add_argument('--routing', choices=linkplan.ROUTINGS, default='balanced')
    ap.add_argument('--uplinks', type=int, help='uplink cables a leaf has (default: one per spine)')
    ap.add_argument('--taper', type=float, help='nodes of a leaf per uplink (instead of --uplinks)')
    ap.add_argument('--plan', choices=('full', 'sample', 'topology'),
                    help='the plan the job ran (with --topology: the contention its rounds met is expected)')
    ap.add_argument('--sample', type=int, nargs=3, metavar=('PER_RUN', 'RUN', 'SEED'), help='the sample plan')
    ap.add_argument('--min-fraction', type=float, default=0.85)
    ap.add_argument('--rate', type=float, help='the payload a link carries, Mbit/s')
    ap.add_argument('--rate-fraction', type=float, default=0.95)
    ap.add_argument('--keep', action='store_true',
                    help='keep what the link check keeps beside the result: links.json, links.txt, the compact '
                         'result.json (tools/report then draws it)')
    args = ap.parse_args(argv)
    started = time.perf_counter()
    try:
        doc = json.loads(args.result.read_text())
        data = from_result(doc, args.result.parent)
        fabric = contention = None
        if args.topology:
            options = {'routing': args.routing, **({'uplinks': args.uplinks} if args.uplinks else {}),
                       **({'taper': args.taper} if args.taper else {})}
            topology = linkplan.Topology.from_text(args.topology.read_text(), options, str(args.topology))
            fabric = Fabric.of(topology, data.nodes)
            if args.plan:
                per_run, run_index, seed = args.sample or (1, 0, 1)
                plans: dict[str, Callable[[], linkplan.LinkPlan]] = {
                    'full': lambda: linkplan.full_plan(data.nodes, topology),
                    'topology': lambda: linkplan.topology_plan(topology, data.nodes),
                    'sample': lambda: linkplan.sample_plan(data.nodes, per_run, run_index, seed, topology)}
                plan = plans[args.plan]()
                at = {h: i for i, h in enumerate(data.nodes)}
                contention = plan_contention(plan, topology, [at[h] for h in plan.nodes], data.n)
    except (OSError, ValueError, LinkMatrixError) as err:
        print(f'linkverdict: {err}', file=sys.stderr)
        return 2
    v = judge(data, min_fraction=args.min_fraction, rate_mbps=args.rate, rate_fraction=args.rate_fraction,
              fabric=fabric, contention=contention)
    problems = failed_problems(v) + slow_problems(v)
    if args.keep:
        order = linkplan.topology_order(data.nodes, fabric.topology if fabric else None)
        at = {h: i for i, h in enumerate(data.nodes)}
        write_link_files(str(args.result.parent), doc, data, v, {
            'plan': args.plan, 'order': [at[h] for h in order], 'rate_mbps': args.rate,
            'topology': fabric.topology.describe() if fabric else None, 'min_link_fraction': args.min_fraction,
            'min_rate_fraction': args.rate_fraction})
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for p in problems:
        print(f'FAILED {p}')
    print(f'linkverdict: {data.n} nodes, {v.directions} directions, {len(v.slow["src"])} slow, '
          f'{len(v.failed["src"])} failed; {time.perf_counter() - started:.1f} s, peak {peak:.0f} MB')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
