"""The link test's judgement: the matrix of directed-pair rates judged, summarised and the culprit named.

A *direction* is a sender -> receiver pair of nodes; a *link* is the pair, its figure its slower direction (a token
bucket or a bad port on one end slows one direction only). Every direction is judged against what its round let
it read: under the plan and the fabric's routing (:func:`netregress.measure.contention.plan_contention`) a stream
that shared its busiest switch link with c-1 others counts c x its rate (a tapered tree's uplinks under full load),
a stream measured again alone counts as read. Verdicts, all baseline-free (:func:`judge`):

* failed (sanity): a direction that failed or moved nothing;
* slow (performance): a direction below ``min_fraction`` x the median link, or below ``rate_fraction`` of the
  fabric's payload rate where it has one.

Each verdict names the smallest elements that explain its directions
(:func:`netregress.judge.linknames.name_elements`): a node's cable or
port (every direction from it, to it, or both), one uplink cable of a leaf switch or all its uplinks, a spine
switch (with d-mod-k routing: the pairs whose destination routes through it), the whole fabric; a direction no
element explains is named itself. A downgraded link speed reads as a node's cable at a stable rate.

Time and memory grow with the directions measured, not as lists of N x N records: the matrix file is read in
blocks (:func:`netregress.judge.linkmatrix.cells`; the dense form by blocks of rows, a leaf's rows where the tree is
known, and of columns; the sparse form of a partial plan by its senders' rows and blocks of its entries, the
reverse of a direction found by binary search in its row: nothing N x N), only the directions run in a block are
worked on, the plan's contention is held for the directions it shares only
(:class:`netregress.measure.contention.Contention`), per node and per switch only counts and histograms of the
share of the median are kept (O(N)), and the suspect directions alone are listed. The pure functions are tested
in tests/python/test_allpairs.py; what a job keeps, and judging its output by hand: :mod:`netregress.judge.linkjob`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .linkmatrix import BLOCK_ROWS, FAILED, LinkData, cells
from .linknames import CONTENTIONS, Elements, Fabric, Named, name_elements, phrase
from ..measure.contention import Contention

LINKS_TABLE = 'links.txt'
LINKS_JSON = 'links.json'
#: Elements and links named in one failure message; the rest are counted (all are in links.json and links.txt).
MAX_NAMED = 6
#: Histogram of the share of the median link: SHARE_BINS bins over 0 .. SHARE_MAX (medians to 0.005).
SHARE_BINS, SHARE_MAX = 400, 2.0


# --- the verdict ------------------------------------------------------------------------------------------------

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
