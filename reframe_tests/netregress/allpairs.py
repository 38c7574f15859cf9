"""All-pairs link test of a fabric: every link between the nodes of a partition, in rounds of disjoint pairs.

A post-maintenance run must prove each link, not only the two nodes an ordinary check happens to get: a bad cable,
port or NIC shows on the links of one node only. :class:`AllPairsLinkCheck` allocates every node of the partition
(``--nodelist``, so a down node makes the check fail instead of silently running without it), and one job visits
all N(N-1)/2 links in the rounds of a round-robin tournament (:func:`round_robin`, the circle method: N-1 rounds
for even N; for odd N, N rounds with one node sitting out each). Pairs of a round share no node, so they could run
at once (``concurrent_pairs``); by default they run one after the other, because on nodes that share a host's
CPUs (the vcluster) concurrent pairs measure the CPU, not the links.

Per link (a, b), measured with our kernels: a server (``nr-tcpserver -p 0``) runs on every node for the whole job,
started by one job step, and clients are job steps on one node each:

* the 8-byte round-trip time (``nr-tcptest -A 8``) from b to a; the link's RTT is the smallest trial mean;
* a short blocking stream from b to a and, with ``both_directions`` (default), from a to b; a direction's figure
  is the median over its repetitions (``summary.throughput_mbps.median``) in its best pass, the link's the slower
  direction (a token bucket or a bad port on one end of a link slows one direction only).

The job makes ``passes`` passes over all rounds (two, in the same order: a link's measurements lie one pass
apart), so a link is slow only when it is slow every time: on a host shared with other work one stream now and
then falls into a busy second.
The median link is the upper median (a slow node spoils half the links of four nodes).

Results: ``links.json`` and the table ``links.txt`` in the stage directory, the performance variables
``min_link_mbps``, ``median_link_mbps``, ``min_to_median`` and ``max_rtt_us``, and two baseline-free verdicts:
every link measured (sanity, :func:`unmeasured_links`); the slowest link at least ``min_link_fraction`` of the
median link and, where the fabric has a line rate, every link at least ``min_rate_fraction`` of it (performance,
:func:`slow_links`). A failure names the links
and, when they all share one node, that node. Byte counters of every node prove that the traffic crossed the
interface under test.

The pure functions (pairing, script, parsing, judgement, table) need no cluster; ``tests/python/test_allpairs.py``
tests them.
"""
from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import fixture, parameter, performance_function, run_after, run_before, variable
from reframe.core.exceptions import PerformanceError, SanityError

from . import interconnects, provenance, results, slurm
from .base import COUNTERS_FILE, ExitStatusPlugin, NetregressCheck
from .build import TcpKernelBuild

DRIVER = 'allpairs.sh'
SERVE = 'serve.sh'
LINK_DIR = 'links'
LINKS_JSON = 'links.json'
LINKS_TABLE = 'links.txt'
TEST_MARK = 'netregress-test:'
#: Failed or slow links named one by one in a sanity message; the rest are counted (all are in links.txt).
MAX_NAMED_LINKS = 4
#: Default share of the median link the slowest link must reach.
MIN_LINK_FRACTION = 0.85
#: Default share of the fabric's line rate (where configured) every link must reach.
MIN_RATE_FRACTION = 0.95
#: Runs one task on a named node of the job when the partition has no ``on_named_node`` extra (Slurm).
SLURM_ON_NAMED_NODE = ['srun', '--mpi=none', '--overlap', '--nodes=1', '--ntasks=1', '--nodelist={node}']
_TEST_LINE = re.compile(rf'^{TEST_MARK} pass=(\d+) kind=(\w+) client=(\S+) server=(\S+) status=(\S+)\s*$', re.M)


# --- pairing -------------------------------------------------------------------------------------------------------

def round_robin(nodes: Sequence[str]) -> list[list[tuple[str, str]]]:
    """Rounds of disjoint pairs covering every pair of ``nodes`` exactly once (circle method).

    The first node stays in place while the others rotate one position per round; position i plays position n-1-i.
    Even N: N-1 rounds of N/2 pairs. Odd N: a placeholder makes it even, so there are N rounds of (N-1)/2 pairs and
    each node sits out (has a bye in) exactly one round. Within a pair the node earlier in ``nodes`` comes first.
    """
    nodes = list(nodes)
    if len(set(nodes)) != len(nodes):
        raise ValueError(f'duplicate node names in {nodes}')
    if len(nodes) < 2:
        return []
    order = {n: i for i, n in enumerate(nodes)}
    circle: list[str | None] = nodes + ([None] if len(nodes) % 2 else [])
    n = len(circle)
    rounds = []
    for _ in range(n - 1):
        pairs = []
        for i in range(n // 2):
            x, y = circle[i], circle[n - 1 - i]
            if x is not None and y is not None:
                pairs.append((x, y) if order[x] < order[y] else (y, x))
        rounds.append(sorted(pairs, key=lambda p: order[p[0]]))
        circle = [circle[0], circle[-1]] + circle[1:-1]
    return rounds


# --- the job's driver script ---------------------------------------------------------------------------------------

def link_tests(a: str, b: str, both_directions: bool) -> list[tuple[str, str, str]]:
    """(kind, client, server) of the tests measuring link (a, b), in the order they run: RTT first (on idle
    queues), then the stream b -> a and, optionally, a -> b (nr-tcptest's client sends to the server)."""
    tests = [('rtt', b, a), ('stream', b, a)]
    if both_directions:
        tests.append(('stream', a, b))
    return tests


def test_tag(kind: str, client: str, server: str, pass_: int = 1) -> str:
    """File name stem of one test's output under ``links/``."""
    return f'{kind}.{client}.{server}.p{pass_}'


def sessions_per_server(rounds: Sequence[Sequence[tuple[str, str]]], both_directions: bool,
                        passes: int = 1) -> dict[str, int]:
    """How many tests each node's server serves over the whole job (it exits after the last one)."""
    count: dict[str, int] = {}
    for pairs in rounds:
        for a, b in pairs:
            for _, _, server in link_tests(a, b, both_directions):
                count[server] = count.get(server, 0) + passes
    return count


def serve_script(kernels_dir: str, iface: str, sessions: Mapping[str, int]) -> str:
    """Run as one task per node: write the node's address on ``iface``, then serve its ``sessions`` link tests
    (a node missing from ``sessions`` serves until it is killed)."""
    lines = [
        '#!/bin/sh',
        "# netregress all-pairs: this node's endpoint, then nr-tcpserver until its last test",
        'node=${SLURMD_NODENAME:-$(hostname)}',
        f'exec > "{LINK_DIR}/server-$node.out" 2>&1',
        f'addr=$(ip -4 -o addr show dev {shlex.quote(iface)} | awk \'{{split($4, a, "/"); print a[1]; exit}}\')',
        'echo "netregress-endpoint: node=$node host=$(hostname) addr=$addr"',
        f'test -n "$addr" || {{ echo "no IPv4 address on {iface} of $node"; exit 1; }}',
        'case $node in',
    ]
    lines += [f'  {shlex.quote(node)}) n={int(n)} ;;' for node, n in sessions.items()]
    lines += [
        '  *) n=0 ;;',
        'esac',
        f'exec {shlex.quote(os.path.join(kernels_dir, "nr-tcpserver"))} -p 0 -v --max-tests "$n"',
        '',
    ]
    return '\n'.join(lines)


def driver_script(rounds: Sequence[Sequence[tuple[str, str]]], *, nodes: Sequence[str], kernels_dir: str,
                  on_named_node: Mapping[str, str], on_every_node: str, stream_opts: Sequence[str],
                  rtt_opts: Sequence[str], both_directions: bool = True, concurrent: bool = False,
                  passes: int = 1, step_timeout_s: int = 60, server_wait_s: int = 10) -> str:
    """The bash script the job runs on its first node.

    ``on_named_node`` maps every node to the command prefix running one task there; ``on_every_node`` runs one
    task on each node of the job. Steps: counter snapshot on every node; one step starting a server on every node
    (``serve.sh``); ``passes`` times over the rounds (in the same order, so a link's passes lie one pass apart),
    per pair the tests of :func:`link_tests`, each a step on its client node bounded by
    ``step_timeout_s`` and reported as a ``netregress-test:`` line with its exit status (``noserver`` when the
    server node never said where it listens); servers stopped; counter snapshot again.
    """
    nodes = list(nodes)
    q = shlex.quote
    nlinks = sum(len(r) for r in rounds)
    lines = [
        '#!/bin/bash',
        f'# netregress all-pairs link test: {len(nodes)} nodes, {nlinks} links in {len(rounds)} rounds, '
        f'{passes} pass(es), pairs {"concurrent" if concurrent else "one after the other"} '
        '(generated by netregress.allpairs)',
        f'K={q(kernels_dir)}',
        f'mkdir -p {LINK_DIR} && rm -f {LINK_DIR}/*',
        '',
        'on_node() {  # NODE COMMAND...: COMMAND as one task on NODE',
        '  local node=$1; shift',
        '  case $node in',
    ]
    for node in nodes:
        lines.append(f'    {q(node)}) timeout -k 5 {int(step_timeout_s)} {on_named_node[node]} "$@" ;;')
    lines += [
        '    *) echo "on_node: $node is not a node of this job" >&2; return 127 ;;',
        '  esac',
        '}',
        'endpoint() {  # NODE: "ADDRESS PORT" of the server on NODE (nothing until it listens)',
        f'  local f={LINK_DIR}/server-$1.out addr port',
        '  addr=$(sed -n \'s/^netregress-endpoint: .* addr=\\([0-9.]*\\)$/\\1/p\' "$f" 2>/dev/null)',
        '  port=$(sed -n \'s/.*listening on port \\[\\([0-9]*\\)\\].*/\\1/p\' "$f" 2>/dev/null | head -1)',
        '  [ -n "$addr" ] && [ -n "$port" ] && echo "$addr $port"',
        '}',
        'measure() {  # PASS KIND CLIENT SERVER OPTIONS...: nr-tcptest on CLIENT against the server on SERVER',
        '  local pass=$1 kind=$2 client=$3 server=$4 ep status; shift 4',
        '  local tag=$kind.$client.$server.p$pass',
        '  ep=$(endpoint "$server")',
        '  if [ -z "$ep" ]; then status=noserver; else',
        f'    on_node "$client" "$K/nr-tcptest" -h "${{ep% *}}" -p "${{ep#* }}" "$@" --json {LINK_DIR}/$tag.json \\',
        f'      > {LINK_DIR}/$tag.out 2>&1',
        '    status=$?',
        '  fi',
        f'  echo "{TEST_MARK} pass=$pass kind=$kind client=$client server=$server status=$status"',
        '}',
        'link() {  # PASS A B: every test of the link between A and B',
    ]
    for kind, client, server in link_tests('$2', '$3', both_directions):
        opts = ' '.join(q(o) for o in (rtt_opts if kind == 'rtt' else stream_opts))
        lines.append(f'  measure "$1" {kind} "{client}" "{server}" {opts}')
    snapshot = 'sh -c ' + q(provenance.snapshot_command('{when}'))
    lines += [
        '}',
        '',
        f': > {COUNTERS_FILE}',
        f'{on_every_node} {snapshot.replace("{when}", "before")} >> {COUNTERS_FILE} 2>&1',
        f'{on_every_node} sh {SERVE} &',
        'SERVERS=$!',
        f'for i in $(seq {10 * int(server_wait_s)}); do',
        '  up=0',
        f'  for n in {" ".join(q(n) for n in nodes)}; do endpoint "$n" > /dev/null && up=$((up + 1)); done',
        f'  [ $up -eq {len(nodes)} ] && break',
        '  kill -0 $SERVERS 2>/dev/null || break',
        '  sleep 0.1',
        'done',
        f'echo "netregress-servers: $up of {len(nodes)} listening"',
    ]
    for pass_ in range(1, passes + 1):
        for index, pairs in enumerate(rounds, start=1):
            lines.append(f'echo "netregress-round: pass {pass_} round {index} '
                         f'{" ".join(f"{a}-{b}" for a, b in pairs)}"')
            if concurrent:
                lines.append('pids=')
                lines += [f'link {pass_} {q(a)} {q(b)} & pids="$pids $!"' for a, b in pairs]
                lines.append('wait $pids')
            else:
                lines += [f'link {pass_} {q(a)} {q(b)}' for a, b in pairs]
    lines += [
        '# each server exits after its last test; one still waiting for a test that failed is stopped',
        f'for i in $(seq {10 * int(server_wait_s)}); do kill -0 $SERVERS 2>/dev/null || break; sleep 0.1; done',
        'kill $SERVERS 2>/dev/null; wait $SERVERS 2>/dev/null',
        f'{on_every_node} {snapshot.replace("{when}", "after")} >> {COUNTERS_FILE} 2>&1',
        'exit 0',
        '',
    ]
    return '\n'.join(lines)


# --- results -------------------------------------------------------------------------------------------------------

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


# --- the check -----------------------------------------------------------------------------------------------------

def allpairs_interconnects() -> list[str]:
    """Interconnects an all-pairs test applies to: spanning nodes, traffic visible on an interface."""
    table = interconnects.load()
    return [n for n in table.names
            if table.interconnect(n).nodes >= 2 and table.interconnect(n).counters == 'interface']


class AllPairsLinkCheck(ExitStatusPlugin, NetregressCheck):
    """Every link of a partition's fabric, measured with nr-tcptest in round-robin rounds (see module doc)."""

    #: Fabrics whose links are tested: spanning nodes, traffic visible on an interface.
    interconnect = parameter(allpairs_interconnects(), fmt=lambda ic: ic, loggable=True)

    valid_prog_environs = ['+tcp']
    kernels = fixture(TcpKernelBuild, scope='environment')

    #: Run the pairs of a round at the same time (they share no node). Off by default: where nodes share a host's
    #: CPUs, concurrent pairs measure the CPU.
    #:
    #: :type: :class:`bool`
    #: :default: ``False``
    concurrent_pairs = variable(bool, value=False, loggable=True)

    #: Measure the stream in both directions of each link; the link's figure is the slower one.
    #:
    #: :type: :class:`bool`
    #: :default: ``True``
    both_directions = variable(bool, value=True)

    #: Passes over all links (same round order, so a link's measurements lie one pass apart); a direction's figure
    #: is the median over the repetitions of its best pass, so a slow link must be slow in every pass. Two: on the shared 2-core
    #: host a stream now and then fell into a busy second as a whole (fast: every repetition of one direction at
    #: 9-13 instead of 13-16 Gbit/s; gige: 820-925 instead of 948-957 Mbit/s), never the same link twice.
    #:
    #: :type: :class:`int`
    #: :default: ``2``
    passes = variable(int, value=2, loggable=True)

    #: Stream repetitions per direction and pass (``-r``; the RTT test's trials too). One repetition in three or
    #: four lost a few ms to the CPU scheduler here (gige 930 instead of 957 Mbit/s): the median discards it.
    #:
    #: :type: :class:`int`
    #: :default: ``3``
    repetitions = variable(int, value=3)

    #: Seconds each stream repetition is calibrated to (``-t``).
    #:
    #: :type: :class:`float`
    #: :default: ``0.3``
    test_time_s = variable(float, value=0.3)

    #: Stream message size (``-m``; k/M suffixes).
    #:
    #: :type: :class:`str`
    #: :default: ``'1M'``
    message_size = variable(str, value='1M')

    #: Message size of the round-trip test (``-A``).
    #:
    #: :type: :class:`int`
    #: :default: ``8``
    rtt_size_bytes = variable(int, value=8)

    #: Seconds of the whole round-trip test (``-t``; ``repetitions`` trials).
    #:
    #: :type: :class:`float`
    #: :default: ``0.2``
    rtt_time_s = variable(float, value=0.2)

    #: The slowest link must reach this fraction of the median link. None: the partition extra
    #: ``interconnects.<ic>.min_link_fraction`` where given (a fabric whose links the CPU decides, such as veth
    #: between namespaces on a shared host), else :data:`MIN_LINK_FRACTION` (set in setup).
    #:
    #: :type: :class:`float` or ``None``
    #: :default: ``None`` (0.85)
    min_link_fraction = variable(float, type(None), value=None, loggable=True)

    #: Where the fabric has a line rate, every link must reach this fraction of the most payload a link carries
    #: (``rate_mbps``, the line rate less framing). None: the partition extra
    #: ``interconnects.<ic>.min_rate_fraction`` where given, else :data:`MIN_RATE_FRACTION` (set in setup).
    #:
    #: :type: :class:`float` or ``None``
    #: :default: ``None`` (0.95)
    min_rate_fraction = variable(float, type(None), value=None, loggable=True)

    #: The most TCP payload one link carries, Mbit/s; None: the partition extra ``interconnects.<ic>.payload_mbps``
    #: (or its ``rate_mbps``), else ``payload_mbps`` of the interconnect in ``config/interconnects.yaml`` (its line
    #: rate less framing), else no rate test (set in setup).
    #:
    #: :type: :class:`float` or ``None``
    #: :default: ``None``
    rate_mbps = variable(float, type(None), value=None, loggable=True)

    #: Seconds one test step (client on its node) may take before it is killed and its link reported (a test
    #: takes 1-2 s; a node that died during the job must not hold every later test for long).
    #:
    #: :type: :class:`int`
    #: :default: ``30``
    step_timeout_s = variable(int, value=30)

    #: Seconds to wait for every node's server to listen.
    #:
    #: :type: :class:`int`
    #: :default: ``10``
    server_wait_s = variable(int, value=10)

    #: Seconds to wait, before submitting, for nodes in a passing state (not responding, unknown) to recover.
    #:
    #: :type: :class:`float`
    #: :default: ``10``
    node_wait_s = variable(float, value=10.0)

    #: Time limit per link on top of 30 s of set-up (the job's ``time_limit`` follows the number of links).
    #:
    #: :type: :class:`int`
    #: :default: ``10``
    link_budget_s = variable(int, value=10)

    #: The nodes of the partition, in Slurm's order (set in setup).
    #:
    #: :type: :class:`List[str]`
    nodes = variable(typ.List[str], value=[])

    # the counters of all N nodes are checked by wire_witness; the base class would snapshot only ic.nodes nodes
    record_counters = False
    # on a fabric with a line rate the base class also reports min_link_mbps / rate_mbps as fraction_of_link with
    # the baseline-free band fixed_bands.link_fraction (its upper end catches a shaper that is gone)
    link_bound_metric = 'min_link_mbps'
    keep_files = [LINKS_JSON, LINKS_TABLE, DRIVER, SERVE, COUNTERS_FILE, LINK_DIR]

    @run_after('setup')
    def allocate_every_node(self):
        """Ask Slurm for every node of the partition by name; fail now, naming them, when some cannot be used."""
        part = self.current_partition
        if part.scheduler.registered_name not in ('slurm', 'squeue'):
            self.skip(f'{part.fullname}: all-pairs needs a Slurm partition (scheduler '
                      f'{part.scheduler.registered_name})')
        slurm_part = slurm.slurm_partition(part.access, part.name)
        problems = slurm.node_problems([slurm_part], self.node_wait_s)
        if problems:
            raise SanityError(f'partition {slurm_part}: not every node can be used: {"; ".join(problems)}')
        try:
            self.nodes = slurm.partition_nodes(slurm_part)
        except slurm.SlurmQueryError as err:
            raise SanityError(f'partition {slurm_part}: {err}') from None
        if len(self.nodes) < 2:
            self.skip(f'partition {slurm_part} has {len(self.nodes)} node: no link to test')
        self.rounds = round_robin(self.nodes)
        self.num_tasks = len(self.nodes)
        self.num_tasks_per_node = 1
        self.job.options += [f'--nodes={len(self.nodes)}', f'--nodelist={",".join(self.nodes)}']
        # after the partition's time_limit (base class): the job's length grows with the number of links
        self.time_limit = 30 + self.link_budget_s * self.passes * sum(len(r) for r in self.rounds)
        if self.rate_mbps is None:
            self.rate_mbps = self.configured_rate_mbps()
        if self.min_link_fraction is None:
            self.min_link_fraction = float(self.fabric_extra('min_link_fraction') or MIN_LINK_FRACTION)
        if self.min_rate_fraction is None:
            self.min_rate_fraction = float(self.fabric_extra('min_rate_fraction') or MIN_RATE_FRACTION)
        # the ratio is asserted by sanity already; as a fixed band it needs no host baseline either
        self.fixed_references = {**self.fixed_references,
                                 'min_to_median': (1.0, round(self.min_link_fraction - 1.0, 6), 0.0)}

    def fabric_extra(self, key: str):
        """``key`` of this interconnect's block in the partition extra ``interconnects`` (None: absent)."""
        return ((self.current_partition.extras.get('interconnects') or {}).get(self.interconnect) or {}).get(key)

    def configured_rate_mbps(self) -> float | None:
        """The most payload a link of the fabric carries, from the partition extras or the interconnect table (None:
        no rate declared)."""
        for value in (self.fabric_extra('payload_mbps'), self.fabric_extra('rate_mbps'),
                      getattr(self.ic, 'payload_mbps', None)):
            if value:
                return float(value)
        return None

    def stream_opts(self) -> list[str]:
        return ['-r', str(self.repetitions), '-t', str(self.test_time_s), '-m', self.message_size]

    def rtt_opts(self) -> list[str]:
        return ['-A', str(self.rtt_size_bytes), '-r', str(self.repetitions), '-t', str(self.rtt_time_s)]

    def named_node_prefix(self, node: str) -> str:
        """Command prefix running one task on ``node`` (partition extra ``on_named_node``, default srun -w)."""
        template = self.current_partition.extras.get('on_named_node') or SLURM_ON_NAMED_NODE
        return ' '.join(shlex.quote(str(t).format(node=node)) for t in template)

    @run_before('run')
    def write_driver(self):
        """The job runs the generated driver on its first node; every test is a job step of its own."""
        if not self.iface:
            raise SanityError(f'partition {self.current_partition.fullname} names no iface for {self.interconnect}')
        kernels_dir = self.kernels.kernels_dir
        with open(os.path.join(self.stagedir, SERVE), 'w') as fp:
            fp.write(serve_script(kernels_dir, self.iface, sessions_per_server(self.rounds, self.both_directions,
                                                                                 self.passes)))
        script = driver_script(
            self.rounds, nodes=self.nodes, kernels_dir=kernels_dir,
            on_named_node={n: self.named_node_prefix(n) for n in self.nodes},
            on_every_node=self.node_prefix('on_each_node', nodes=len(self.nodes)),
            stream_opts=self.stream_opts(), rtt_opts=self.rtt_opts(), both_directions=self.both_directions,
            concurrent=self.concurrent_pairs, passes=self.passes, step_timeout_s=self.step_timeout_s,
            server_wait_s=self.server_wait_s)
        with open(os.path.join(self.stagedir, DRIVER), 'w') as fp:
            fp.write(script)
        self.job.launcher = getlauncher('local')()
        self.executable = 'bash'
        self.executable_opts = [DRIVER]

    # -- sanity -----------------------------------------------------------------------------------------------

    def links(self) -> list[LinkResult]:
        """The measured links (read once, after the job)."""
        if getattr(self, '_links', None) is None:
            with open(os.path.join(self.stagedir, str(self.stdout.evaluate())), errors='replace') as fp:
                statuses = parse_test_lines(fp.read())
            self._links, self._docs = collect_links(self.rounds, os.path.join(self.stagedir, LINK_DIR), statuses,
                                                    self.both_directions, self.passes, self.step_timeout_s)
        return self._links

    def links_witness(self) -> list[str]:
        """Every link measured (how fast is the performance stage's: :meth:`name_slow_links`); writes links.json
        and links.txt."""
        links = self.links()
        stats = summary(links)
        doc = {'partition': self.current_partition.fullname, 'interconnect': self.interconnect,
               'nodes': self.nodes, 'rounds': [[list(p) for p in r] for r in self.rounds],
               'concurrent_pairs': self.concurrent_pairs, 'both_directions': self.both_directions,
               'passes': self.passes,
               'rate_mbps': self.rate_mbps, 'summary': stats, 'links': [x.as_dict() for x in links]}
        with open(os.path.join(self.stagedir, LINKS_JSON), 'w') as fp:
            json.dump(doc, fp, indent=2)
        with open(os.path.join(self.stagedir, LINKS_TABLE), 'w') as fp:
            fp.write(format_table(links, stats))
        return unmeasured_links(links)

    @run_before('performance')
    def name_slow_links(self):
        """A slow link fails the performance stage, named with its direction and the node slow links share
        (ReFrame's own message would name only the ratio)."""
        problems = slow_links(self.links(), min_fraction=self.min_link_fraction, rate_mbps=self.rate_mbps,
                              rate_fraction=self.min_rate_fraction)
        if problems:
            raise PerformanceError('; '.join(problems))

    def wire_witness(self) -> list[str]:
        """Each node's interface under test carried at least the bytes its tests moved (payload_fraction)."""
        self.links()
        delta, problem = self.counter_deltas()
        if problem:
            return [problem]
        payload = payload_per_host(self._docs)
        self.nr_wire = ' '.join(f'{h}:{self.iface}={delta.get(h, {}).get(self.iface, provenance.Counters(0, 0)).total}'
                                f'/{payload[h]:.0f}' for h in sorted(payload))
        problems = []
        for host in sorted(payload):
            problems += provenance.check_counters(delta, kind='interface', iface=self.iface, hosts=[host],
                                                  payload_bytes=payload[host], fraction=self.payload_fraction)
        return problems

    def witnesses(self) -> list:
        return [self.exit_witness, self.links_witness, self.wire_witness]

    # -- performance ------------------------------------------------------------------------------------------

    def _figure(self, name: str) -> float:
        stats = summary(self.links())
        if name not in stats:
            raise SanityError(f'no link measured: {name} undefined')
        return stats[name]

    @performance_function('Mbit/s')
    def min_link_mbps(self):
        """Throughput of the slowest link (its slower direction)."""
        return self._figure('min_link_mbps')

    @performance_function('Mbit/s')
    def median_link_mbps(self):
        """Median link throughput (upper median for an even number of links)."""
        return self._figure('median_link_mbps')

    @performance_function('ratio')
    def min_to_median(self):
        """Slowest link / median link."""
        return self._figure('min_to_median')

    @performance_function('us')
    def max_rtt_us(self):
        """The largest of the links' 8-byte round-trip times."""
        return self._figure('max_rtt_us')
