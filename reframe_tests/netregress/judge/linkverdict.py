"""The link test's judgement: nr-linkmap's directed pairs read, summarised and judged, with the culprit named.

A *link* is a pair of nodes; nr-linkmap measures it in each direction (a directed pair: sender -> receiver). A
link's figure is its slower direction (a token bucket or a bad port on one end slows one direction only). Verdicts,
all baseline-free:

* :func:`unmeasured_links` (sanity): a pair that failed or moved nothing, named with its round and error;
* :func:`slow_links` (performance): a link below ``min_fraction`` x the median link, or below ``rate_fraction`` of
  the fabric's payload rate where it has one. The culprit is named: a node when every slow link involves it, an
  uplink when the plan ran leaf switches against each other and every slow link crosses one leaf's uplink while
  the links inside that leaf are fine (:func:`culprit`).

``links.txt`` is the table for people (:func:`format_table`); the pure functions are tested in
tests/python/test_allpairs.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

LINKS_TABLE = 'links.txt'
#: Links named in one failure message; the rest are counted (all are in links.txt).
MAX_NAMED_LINKS = 6


@dataclass
class LinkResult:
    """One link (a, b) with each direction's Mbit/s, its round trip and what went wrong."""
    a: str
    b: str
    directions: dict[str, float] = field(default_factory=dict)      # 'b->a': Mbit/s
    rtt_us: float | None = None
    errors: list[str] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f'{self.a}-{self.b}'

    @property
    def throughput_mbps(self) -> float | None:
        """The slower direction (None when no direction was measured)."""
        return min(self.directions.values()) if self.directions else None

    @property
    def slower_direction(self) -> str:
        return min(self.directions, key=self.directions.__getitem__) if self.directions else '-'

    def as_dict(self) -> dict:
        return {'link': self.name, 'throughput_mbps': self.throughput_mbps, 'directions': self.directions,
                'rtt_us': self.rtt_us, 'rounds': self.rounds, 'errors': self.errors}


def collect_links(doc: Mapping) -> list[LinkResult]:
    """The links of an nr-linkmap result (``rounds[].pairs[]``), in the order they were first measured; a direction's
    figure is its ``steady_mbps`` (after the warm-up: a token bucket's burst left out), else its ``mbps``; measured
    in several rounds (a plan's passes, ``LinkPlan.passes``), its best round, while a failed round fails the link."""
    links: dict[frozenset, LinkResult] = {}
    for rnd in doc.get('rounds') or []:
        for p in rnd.get('pairs') or []:
            src, dst = str(p.get('src_host')), str(p.get('dst_host'))
            key = frozenset((src, dst))
            link = links.get(key)
            if link is None:
                a, b = sorted((src, dst))
                link = links[key] = LinkResult(a, b)
            index = int(rnd.get('index', 0))
            if index not in link.rounds:
                link.rounds.append(index)
            mbps = p.get('steady_mbps')
            if not isinstance(mbps, (int, float)) or not mbps > 0:       # a stream too short for a warm-up
                mbps = p.get('mbps')
            if p.get('status') != 'ok' or not isinstance(mbps, (int, float)) or not mbps > 0:
                link.errors.append(f'{src}->{dst} (round {index}): {p.get("error") or "moved nothing"}')
            else:
                direction = f'{src}->{dst}'
                link.directions[direction] = max(float(mbps), link.directions.get(direction, 0.0))
            rtt = p.get('rtt_us')
            if isinstance(rtt, (int, float)) and rtt > 0:
                link.rtt_us = min(float(rtt), link.rtt_us if link.rtt_us is not None else float('inf'))
    return list(links.values())


def _mbps(link: LinkResult) -> float:
    """The figure of a measured link: its slower direction."""
    return link.throughput_mbps or 0.0


def upper_median(values: Iterable[float]) -> float:
    """The median; for an even count the upper of the two middle values.

    The reference of the slow-link test: a slow node spoils N-1 of the N(N-1)/2 links, half of them on 4 nodes,
    and the mean of the two middle values would then sit between slow and good links.
    """
    ordered = sorted(values)
    if not ordered:
        raise ValueError('no values')
    return ordered[len(ordered) // 2]


def culprit(bad: Sequence[LinkResult], good: Sequence[LinkResult],
            leaves: Mapping[str, Sequence[str]] | None = None) -> str:
    """What the bad links have in common: ``node X`` when each involves X (and there is more than one), ``the
    uplink of leaf L`` when each crosses L's uplink while the links inside L are good; '' when nothing is shared."""
    if not bad:
        return ''
    shared = [n for n in (bad[0].a, bad[0].b) if all(n in (x.a, x.b) for x in bad)]
    if len(bad) > 1 and len(shared) == 1:
        return f'node {shared[0]}'
    if leaves:
        leaf_of = {n: leaf for leaf, nodes in leaves.items() for n in nodes}
        for leaf in leaves:
            crosses = all((leaf_of.get(x.a) == leaf) != (leaf_of.get(x.b) == leaf) for x in bad)
            inside_good = [x for x in good if leaf_of.get(x.a) == leaf == leaf_of.get(x.b)]
            if crosses and inside_good and len(bad) > 1:
                return f'the uplink of leaf switch {leaf}'
    return ''


def summary(links: Sequence[LinkResult]) -> dict[str, float]:
    """The performance figures over the measured links (empty when none was measured)."""
    measured = [x for x in links if x.throughput_mbps is not None]
    if not measured:
        return {}
    values = [_mbps(x) for x in measured]
    median = upper_median(values)
    rtts = [x.rtt_us for x in links if x.rtt_us is not None]
    out = {'min_link_mbps': min(values), 'median_link_mbps': median,
           'min_to_median': min(values) / median if median > 0 else 0.0}
    if rtts:
        out['max_rtt_us'] = max(rtts)
    return out


def _link_figure(link: LinkResult) -> str:
    text = f'link {link.name} at {link.throughput_mbps:.0f} Mbit/s'
    if len(link.directions) > 1:
        text += f' ({link.slower_direction})'
    return text


def _named(parts: list[str], total: int, what: str) -> str:
    extra = total - MAX_NAMED_LINKS
    return '; '.join(parts + ([f'{extra} more {what} (all in {LINKS_TABLE})'] if extra > 0 else []))


def unmeasured_links(links: Sequence[LinkResult], leaves: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """Links with a failed or empty direction, named with the cause (a sanity failure: nothing was measured)."""
    failed = [x for x in links if x.errors]
    if not failed:
        return [] if links else ['no link was measured']
    parts = [f'link {x.name} not measured: {x.errors[0]}' + (f' (and {len(x.errors) - 1} more)' if len(x.errors) > 1
                                                            else '') for x in failed[:MAX_NAMED_LINKS]]
    blame = culprit(failed, [x for x in links if not x.errors], leaves)
    return [_named(parts, len(failed), 'links not measured') + (f'; the failed links all involve {blame}'
                                                              if blame else '')]


def slow_links(links: Sequence[LinkResult], *, min_fraction: float, rate_mbps: float | None = None,
               rate_fraction: float = 0.95, leaves: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """Links below ``min_fraction`` x the median link or ``rate_fraction`` x ``rate_mbps``, with the culprit (a
    performance verdict: a retry may measure again)."""
    problems: list[str] = []
    measured = [x for x in links if x.throughput_mbps is not None]
    if not measured:
        return problems
    median = upper_median(_mbps(x) for x in measured)
    slow = sorted((x for x in measured if _mbps(x) < min_fraction * median), key=_mbps)
    if slow:
        parts = [f'{_link_figure(x)} is {_mbps(x) / median:.2f} x the median {median:.0f} Mbit/s'
                 for x in slow[:MAX_NAMED_LINKS]]
        blame = culprit(slow, [x for x in measured if x not in slow], leaves)
        problems.append(_named(parts, len(slow), 'such links') + f' (min_link_fraction {min_fraction:g})'
                        + (f'; the slow links all involve {blame}' if blame else ''))
    if rate_mbps:
        below = sorted((x for x in measured if _mbps(x) < rate_fraction * rate_mbps), key=_mbps)
        if below:
            parts = [f'{_link_figure(x)} is {_mbps(x) / rate_mbps:.3f} x the {rate_mbps:g} Mbit/s a link '
                     f'carries' for x in below[:MAX_NAMED_LINKS]]
            blame = culprit(below, [x for x in measured if x not in below], leaves)
            problems.append(_named(parts, len(below), 'such links') + f' (min_rate_fraction {rate_fraction:g})'
                            + (f'; the slow links all involve {blame}' if blame else ''))
    return problems


def payload_per_host(doc: Mapping) -> dict[str, float]:
    """Bytes each host sent or received over all pairs (a lower bound for its interface counters)."""
    out: dict[str, float] = {}
    for rnd in doc.get('rounds') or []:
        for p in rnd.get('pairs') or []:
            moved = float(p.get('bytes') or 0)
            for host in (p.get('src_host'), p.get('dst_host')):
                out[str(host)] = out.get(str(host), 0.0) + moved
    return out


def format_table(links: Sequence[LinkResult], stats: Mapping[str, float] | None = None) -> str:
    """The per-link table for people (``links.txt``)."""
    rows = [('rounds', 'link', 'Mbit/s', 'RTT us', 'directions (Mbit/s)', 'problem')]
    for x in links:
        rows.append((','.join(map(str, x.rounds)), x.name,
                     f'{x.throughput_mbps:.1f}' if x.throughput_mbps is not None else '-',
                     f'{x.rtt_us:.1f}' if x.rtt_us is not None else '-',
                     ', '.join(f'{d} {v:.1f}' for d, v in x.directions.items()) or '-',
                     '; '.join(x.errors) or ''))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    text = '\n'.join('  '.join(c.ljust(w) for c, w in zip(r[:-1], widths)) + ('  ' + r[-1] if r[-1] else '')
                     for r in rows)
    if stats:
        text += '\n\n' + '\n'.join(f'{k} = {v:.3f}' if k == 'min_to_median' else f'{k} = {v:.1f}'
                                   for k, v in stats.items())
    return text.rstrip() + '\n'
