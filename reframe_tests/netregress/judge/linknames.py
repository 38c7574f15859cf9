"""The link test's elements and their naming: which node ports, uplink cables, leaf uplinks, spines and fabric a
direction runs through (in the job's rank order), and the smallest of them that explain a set of suspect directions.

:func:`name_elements` is what a FAILED line of :mod:`netregress.judge.linkverdict` names; :func:`phrase` says it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ..measure.linkplan import Topology

#: The share of an element's directions that must be suspect for the element to explain them: a slow element slows
#: every direction through it, while a stall or two of healthy streams still lets it be named.
EXPLAINS = 0.8
#: A named element's suspect directions read within this spread of each other (p90 / p10 - 1): a stable rate, as a
#: link that trained to a lower speed reads.
STABLE_SPREAD = 0.10
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
    """The switch tree (:class:`netregress.measure.linkplan.Topology`) in the job's rank order: each rank's leaf index
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
