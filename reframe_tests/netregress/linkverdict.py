"""The all-pairs link test's results: what each link measured (:class:`LinkResult`), the figures over all links,
and the verdicts that name failed and slow links and the node they share.

Reads what ``netregress.linkplan``'s driver wrote (``netregress-test:`` lines, one result file per test).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from . import results
from .linkplan import TEST_MARK, link_tests, test_tag

LINKS_TABLE = 'links.txt'
#: Failed or slow links named one by one in a sanity message; the rest are counted (all are in links.txt).
MAX_NAMED_LINKS = 4
_TEST_LINE = re.compile(rf'^{TEST_MARK} pass=(\d+) kind=(\w+) client=(\S+) server=(\S+) status=(\S+)\s*$', re.M)


def parse_test_lines(text: str) -> dict[tuple[str, str, str, int], str]:
    """``netregress-test:`` lines of the driver: (kind, client, server, pass) -> exit status (or ``noserver``)."""
    return {(m.group(2), m.group(3), m.group(4), int(m.group(1))): m.group(5) for m in _TEST_LINE.finditer(text)}


@dataclass
class LinkResult:
    """What one link measured (or why it could not)."""
    round: int
    a: str
    b: str
    #: Stream throughput per direction, ``'client->server'`` -> Mbit/s: the median over the repetitions of its
    #: best pass.
    directions: dict[str, float] = field(default_factory=dict)
    rtt_us: float | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f'{self.a}-{self.b}'

    @property
    def throughput_mbps(self) -> float | None:
        """The slower direction (None when no direction was measured)."""
        return min(self.directions.values()) if self.directions else None

    @property
    def slower_direction(self) -> str | None:
        return min(self.directions, key=self.directions.get) if self.directions else None

    @property
    def ok(self) -> bool:
        return not self.errors and self.throughput_mbps is not None and self.rtt_us is not None

    def as_dict(self) -> dict:
        return {'round': self.round, 'a': self.a, 'b': self.b, 'throughput_mbps': self.throughput_mbps,
                'directions_mbps': dict(self.directions), 'rtt_us': self.rtt_us, 'errors': list(self.errors)}


def _describe_status(status: str, step_timeout_s: int | None) -> str:
    if status == 'noserver':
        return 'no server listening there (serve step failed or the node did not answer)'
    try:
        code = int(status)
    except ValueError:
        return f'status {status}'
    if code == 124:
        return f'timed out after {step_timeout_s} s' if step_timeout_s else 'timed out'
    return f'exited with {code} ({results.describe_exit(code)})'


def read_test(directory: str, kind: str, client: str, server: str, status: str | None, pass_: int = 1,
              step_timeout_s: int | None = None) -> tuple[float | None, dict | None, str | None]:
    """(figure, result document, error) of one test: a stream's median throughput over its repetitions (Mbit/s,
    ``summary.throughput_mbps.median``), or the RTT test's smallest trial mean (us, ``latency.min_us``).

    ``status`` is the driver's exit status for the test (None: the driver never reported it).
    """
    what = f'{"RTT" if kind == "rtt" else "stream"} {client}->{server}' + (f' (pass {pass_})' if pass_ > 1 else '')
    stem = os.path.join(directory, test_tag(kind, client, server, pass_))
    if status is None:
        return None, None, f'{what}: not run (the job ended before it)'
    doc = None
    try:
        doc = results.load_result(stem + '.json')
    except results.KernelResultError as err:
        if status == '0':
            return None, None, f'{what}: {err}'
    if status != '0':
        msg = f'{what}: {_describe_status(status, step_timeout_s)}'
        if doc and doc.get('error'):
            msg += f': {doc["error"]}'
        else:
            tail = _last_line(stem + '.out')
            msg += f': {tail}' if tail else ''
        return None, doc, msg
    if doc.get('status') != 'ok':
        return None, doc, f'{what}: kernel reports status {doc.get("status")!r}: {doc.get("error", "no message")}'
    key = 'latency.min_us' if kind == 'rtt' else 'summary.throughput_mbps.median'
    try:
        return float(results.get(doc, key)), doc, None
    except (KeyError, TypeError, ValueError) as err:
        return None, doc, f'{what}: result has no {key} ({err})'


def _last_line(path: str) -> str:
    try:
        with open(path, errors='replace') as fp:
            lines = [ln.strip() for ln in fp if ln.strip()]
    except OSError:
        return ''
    return lines[-1][:200] if lines else ''


def collect_links(rounds: Sequence[Sequence[tuple[str, str]]], directory: str, statuses: Mapping,
                  both_directions: bool = True, passes: int = 1, step_timeout_s: int | None = None
                  ) -> tuple[list[LinkResult], list[dict]]:
    """Every planned link's result from the test files in ``directory``, and the result documents read.

    A direction's throughput is its best pass (each pass: the median over its repetitions): a pass that fell
    into a busy moment of a shared host does not make a link slow, a link that is slow in every pass is. The RTT
    is the smallest over the passes.
    """
    links, docs = [], []
    for index, pairs in enumerate(rounds, start=1):
        for a, b in pairs:
            link = LinkResult(round=index, a=a, b=b)
            for kind, client, server in link_tests(a, b, both_directions):
                figures: list[float] = []
                for pass_ in range(1, passes + 1):
                    got, doc, err = read_test(directory, kind, client, server,
                                              statuses.get((kind, client, server, pass_)), pass_, step_timeout_s)
                    if err:
                        link.errors.append(err)
                    elif doc is not None:
                        docs.append(doc)
                        figures.append(got)
                if not figures or any(e.startswith(f'{"RTT" if kind == "rtt" else "stream"} {client}->{server}')
                                      for e in link.errors):
                    continue
                if kind == 'rtt':
                    link.rtt_us = min(figures)
                else:
                    link.directions[f'{client}->{server}'] = max(figures)
            links.append(link)
    return links, docs


def upper_median(values: Iterable[float]) -> float:
    """The median; for an even count the upper of the two middle values.

    The reference of the slow-link test: a slow node spoils N-1 of the N(N-1)/2 links, half of them on 4 nodes,
    and the mean of the two middle values would then sit between slow and good links.
    """
    ordered = sorted(values)
    if not ordered:
        raise ValueError('no values')
    return ordered[len(ordered) // 2]


def common_nodes(links: Iterable[LinkResult]) -> list[str]:
    """Nodes that every one of ``links`` involves (in the order they appear)."""
    links = list(links)
    if not links:
        return []
    shared = [n for n in (links[0].a, links[0].b) if all(n in (x.a, x.b) for x in links)]
    return shared


def _attribution(links: Sequence[LinkResult], adjective: str) -> str:
    shared = common_nodes(links)
    if len(links) > 1 and len(shared) == 1:
        return f'; {adjective} links all involve {shared[0]}'
    return ''


def summary(links: Sequence[LinkResult]) -> dict[str, float]:
    """The performance figures over the measured links (empty when none was measured)."""
    measured = [x for x in links if x.throughput_mbps is not None]
    if not measured:
        return {}
    values = [x.throughput_mbps for x in measured]
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


def _more(links: Sequence[LinkResult]) -> list[str]:
    extra = len(links) - MAX_NAMED_LINKS
    return [f'{extra} more such links (all in {LINKS_TABLE})'] if extra > 0 else []


def _first_error(link: LinkResult) -> str:
    if not link.errors:
        return 'no result'
    more = f' (and {len(link.errors) - 1} more tests)' if len(link.errors) > 1 else ''
    return link.errors[0] + more


def unmeasured_links(links: Sequence[LinkResult]) -> list[str]:
    """Links whose tests failed, named with the cause (a sanity failure: nothing was measured)."""
    failed = [x for x in links if x.errors or x.throughput_mbps is None or x.rtt_us is None]
    if not failed:
        return [] if links else ['no link was measured']
    parts = [f'link {x.name} not measured: {_first_error(x)}' for x in failed[:MAX_NAMED_LINKS]]
    if len(failed) > MAX_NAMED_LINKS:
        parts.append(f'{len(failed) - MAX_NAMED_LINKS} more of the {len(links)} links not measured '
                     f'(every cause in {LINKS_TABLE})')
    return ['; '.join(parts) + _attribution(failed, 'failed')]


def slow_links(links: Sequence[LinkResult], *, min_fraction: float, rate_mbps: float | None = None,
               rate_fraction: float = 0.95) -> list[str]:
    """Links below ``min_fraction`` x the median link or ``rate_fraction`` x ``rate_mbps`` (a performance verdict:
    a retry may measure again)."""
    problems: list[str] = []
    measured = [x for x in links if x.throughput_mbps is not None]
    if not measured:
        return problems
    median = upper_median(x.throughput_mbps for x in measured)
    slow = sorted((x for x in measured if x.throughput_mbps < min_fraction * median),
                  key=lambda x: x.throughput_mbps)
    if slow:
        parts = [f'{_link_figure(x)} is {x.throughput_mbps / median:.2f} x the median {median:.0f} Mbit/s'
                 for x in slow[:MAX_NAMED_LINKS]] + _more(slow)
        problems.append('; '.join(parts) + f' (min_link_fraction {min_fraction:g})' + _attribution(slow, 'slow'))
    if rate_mbps:
        below = sorted((x for x in measured if x.throughput_mbps < rate_fraction * rate_mbps),
                       key=lambda x: x.throughput_mbps)
        if below:
            parts = [f'{_link_figure(x)} is {x.throughput_mbps / rate_mbps:.3f} x the {rate_mbps:g} Mbit/s a link '
                     f'carries' for x in below[:MAX_NAMED_LINKS]] + _more(below)
            problems.append('; '.join(parts) + f' (min_rate_fraction {rate_fraction:g})'
                            + _attribution(below, 'slow'))
    return problems


def payload_per_host(docs: Iterable[Mapping]) -> dict[str, float]:
    """Bytes each host moved as client or server over all tests (lower bound for its interface counters)."""
    out: dict[str, float] = {}
    for doc in docs:
        moved = results.payload_bytes(dict(doc))
        for host in results.hosts(dict(doc)):
            out[host] = out.get(host, 0.0) + moved
    return out


def format_table(links: Sequence[LinkResult], stats: Mapping[str, float] | None = None) -> str:
    """The per-link table for people (``links.txt``)."""
    rows = [('round', 'link', 'Mbit/s', 'RTT us', 'directions (Mbit/s)', 'problem')]
    for x in links:
        rows.append((str(x.round), x.name,
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
