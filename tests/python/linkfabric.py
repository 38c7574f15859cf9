"""A synthetic fat tree for the link test's tests: what each direction of a plan would read, with faults.

Each round of a plan streams every pair at once; a stream gets the least of its path's capacities shared among the
round's streams on each switch link (the sender's and receiver's own links carry one stream each), routed as the
tree says (d-mod-k: up and down on cable ``position of the destination mod K``). Faults scale a capacity: a node's
cable (out, in or both), a leaf's uplink cable (both ways), every cable of a spine; a node down fails every
direction to and from it. This is a model of our own, not the simulator: it tests the verdict's logic and the
plans' collisions under the same routing rule.

:data:`FIXTURE` is a real job's output: nr-linkmap (Open MPI 5 of .deps) on 4 ranks of this machine, each in a UTS
namespace of its own named node1..node4 (``unshare -u``), ``-t 0.05 -m 64k --recheck-below 0.85 --recheck-max 4``;
:func:`keep_fixture` keeps it as the link check does.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from netregress.measure import linkplan
from netregress.judge import linkjob, linkmatrix, linkverdict

FIXTURE = Path(__file__).parent / 'fixtures' / 'linkmap' / 'result.json'

LINE = 1000.0


def tree(leaves: int, per_leaf: int, spines: int, routing: str = 'd-mod-k', uplinks: int | None = None,
         prefix: str = 'n') -> linkplan.Topology:
    """``leaves`` leaf switches of ``per_leaf`` nodes each (n0001 ...) under ``spines`` spines, as topology.conf."""
    width = max(4, len(str(leaves * per_leaf)))
    text = ''.join(f'SwitchName=leaf{i} Nodes={prefix}[{i * per_leaf + 1:0{width}d}-{(i + 1) * per_leaf:0{width}d}]\n'
                   for i in range(leaves))
    text += ''.join(f'SwitchName=spine{s} Switches=leaf[0-{leaves - 1}]\n' for s in range(spines))
    return linkplan.Topology.from_text(text, {'routing': routing, **({'uplinks': uplinks} if uplinks else {})})


def capacities(topology: linkplan.Topology, nodes: list[str], faults=()) -> dict[str, np.ndarray]:
    """Each node's own link out and in, each leaf cable up and down (share of the line rate), and who is down.
    ``faults``: ('out'|'in'|'cable', node, share), ('down', node), ('uplink', leaf, cable, share),
    ('spine', spine, share)."""
    k, leaves, spines = topology.uplinks, list(topology.leaves), len(topology.spines) or 1
    at = {n: i for i, n in enumerate(nodes)}
    cap = {'out': np.ones(len(nodes)), 'in': np.ones(len(nodes)), 'up': np.ones(len(leaves) * k),
           'down': np.ones(len(leaves) * k), 'dead': np.zeros(len(nodes), dtype=bool)}
    for f in faults:
        if f[0] in ('out', 'in'):
            cap[f[0]][at[f[1]]] = f[2]
        elif f[0] == 'cable':
            cap['out'][at[f[1]]] = cap['in'][at[f[1]]] = f[2]
        elif f[0] == 'down':
            cap['dead'][at[f[1]]] = True
        elif f[0] == 'uplink':
            i = leaves.index(f[1]) * k + f[2]
            cap['up'][i] = cap['down'][i] = f[3]
        elif f[0] == 'spine':
            s = topology.spines.index(f[1])
            for u in range(s, k, spines):
                cap['up'][u::k] = cap['down'][u::k] = f[2]
    return cap


def measure(topology: linkplan.Topology, plan: linkplan.LinkPlan, nodes: list[str], faults=(), noise: float = 0.02,
            seed: int = 1) -> np.ndarray:
    """The (n, n) matrix by ``nodes`` order (each direction's best round, -1 where it failed) the plan would
    read on the tree with ``faults``, each stream off by a normal ``noise``."""
    rng = np.random.default_rng(seed)
    n = len(nodes)
    at = {h: i for i, h in enumerate(nodes)}
    index = np.array([at[h] for h in plan.nodes])
    cap = capacities(topology, list(plan.nodes), faults)
    leaf, pos = topology.arrays(plan.nodes)
    k, count = topology.uplinks, len(topology.leaves) * topology.uplinks
    out = np.full((n, n), np.nan, dtype=np.float32)
    for r in plan.iter_rounds():
        a, b = r[:, 0], r[:, 1]
        cross = leaf[a] != leaf[b]
        up, down = leaf[a] * k + pos[b] % k, leaf[b] * k + pos[b] % k
        on_up = np.maximum(np.bincount(up[cross], minlength=count)[up], 1)
        on_down = np.maximum(np.bincount(down[cross], minlength=count)[down], 1)
        rate = np.minimum(cap['out'][a], cap['in'][b])
        rate = np.where(cross, np.minimum(rate, np.minimum(cap['up'][up] / on_up, cap['down'][down] / on_down)),
                        rate) * LINE * (1 + noise * rng.standard_normal(len(a)))
        rate = np.where(cap['dead'][a] | cap['dead'][b], -1.0, rate)
        ia, ib = index[a], index[b]
        was = out[ia, ib]
        best = np.where(np.isnan(was) | (rate > was), rate, was)
        out[ia, ib] = np.where((rate == -1) | (was == -1), -1.0, best)
    return out


def alone(topology: linkplan.Topology, nodes: list[str], faults=(), noise: float = 0.02,
          seed: int = 1) -> np.ndarray:
    """Every direction measured alone (no round shares a switch link: a 1:1 tree under a collision-free plan),
    built at once: the matrix of any size for the scale measurements."""
    rng = np.random.default_rng(seed)
    n = len(nodes)
    cap = capacities(topology, nodes, faults)
    leaf, pos = topology.arrays(nodes)
    k = topology.uplinks
    m = np.empty((n, n), dtype=np.float32)
    for i0 in range(0, n, 512):
        rows = np.arange(i0, min(n, i0 + 512))
        rate = np.minimum(cap['out'][rows][:, None], cap['in'][None, :])
        cross = leaf[rows][:, None] != leaf[None, :]
        up = leaf[rows][:, None] * k + (pos % k)[None, :]
        down = (leaf * k + pos % k)[None, :]
        rate = np.where(cross, np.minimum(rate, np.minimum(cap['up'][up], cap['down'][down])), rate)
        rate = rate * LINE * (1 + noise * rng.standard_normal(rate.shape))
        rate[cap['dead'][rows][:, None] | cap['dead'][None, :]] = -1.0
        m[rows] = rate
    np.fill_diagonal(m, np.nan)
    return m


def keep_fixture(where: Path) -> dict:
    """:data:`FIXTURE` judged and kept in ``where`` as the link check keeps a job's output
    (linkjob.write_link_files); returns the result as nr-linkmap wrote it."""
    doc = json.loads(FIXTURE.read_text())
    (where / 'result.json').write_text(json.dumps(doc))
    data = linkmatrix.from_result(doc, where)
    v = linkverdict.judge(data, min_fraction=0.85)
    linkjob.write_link_files(str(where), doc, data, v, {'plan': 'full', 'order': [0, 1, 2, 3],
                                                          'nodes_left_out': ['node5: not responding (down*)']})
    return doc
