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

The pure functions need no cluster: pairing and scripts are ``netregress.linkplan``'s, parsing, judgement and
table ``netregress.linkverdict``'s; ``tests/python/test_allpairs.py`` tests them.
"""
from __future__ import annotations

import json
import os
import shlex

import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import fixture, parameter, performance_function, run_after, run_before, variable
from reframe.core.exceptions import PerformanceError, SanityError

from . import figures, interconnects, provenance, slurm
from .base import COUNTERS_FILE, NetregressCheck
from .build import TcpKernelBuild
from .linkplan import (DRIVER, LINK_DIR, SERVE, SLURM_ON_NAMED_NODE, driver_script, round_robin, serve_script,
                       sessions_per_server)
from .linkverdict import (LINKS_TABLE, LinkResult, collect_links, format_table, parse_test_lines, payload_per_host,
                          slow_links, summary, unmeasured_links)
from .plugins import ExitStatusPlugin

LINKS_JSON = 'links.json'
#: Default share of the median link the slowest link must reach.
MIN_LINK_FRACTION = 0.85
#: Default share of the fabric's line rate (where configured) every link must reach.
MIN_RATE_FRACTION = 0.95


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

    #: Passes over all links (same round order, so a link's measurements lie one pass apart); a direction's figure is
    #: the median over the repetitions of its best pass, so a slow link must be slow in every pass. Two: on the shared
    #: 2-core host a stream now and then fell into a busy second as a whole (fast: every repetition of one direction
    #: at 9-13 instead of 13-16 Gbit/s; gige: 820-925 instead of 948-957 Mbit/s), never the same link twice.
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
        """Ask Slurm by name for every node of the partition the run is scoped to (a reservation, a node list:
        netregress.slurm.allocate_scoped_nodes); fail now, naming them, when some cannot be used."""
        part = self.current_partition
        if part.scheduler.registered_name not in ('slurm', 'squeue'):
            self.skip(f'{part.fullname}: all-pairs needs a Slurm partition (scheduler '
                      f'{part.scheduler.registered_name})')
        self.nodes = slurm.allocate_scoped_nodes(self, self.node_wait_s)
        if len(self.nodes) < 2:
            self.skip(f'{part.fullname}: {len(self.nodes)} node in scope: no link to test')
        self.rounds = round_robin(self.nodes)
        self.num_tasks = len(self.nodes)
        self.num_tasks_per_node = 1
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

    @run_after('init')
    def declare_link_figures(self):
        """What the performance functions below are. A link's figure is a short stream per direction between two
        nodes (start-up and the CPUs decide it as much as the link), so its throughputs are CPU-bound; the fabric's
        line rate is asserted through fraction_of_link and min_rate_fraction."""
        for name, figure in (('min_link_mbps', figures.cpu_bound('slowest link (slower direction)')),
                             ('median_link_mbps', figures.cpu_bound('median link')),
                             ('min_to_median', figures.ratio('slowest link / median link')),
                             ('max_rtt_us', figures.latency(f'largest {self.rtt_size_bytes}-byte link round trip'))):
            self.declare_figure(name, figure)

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
