"""The link test of a fabric: every link between the nodes in scope, as one MPI job (nr-linkmap).

A post-maintenance run must prove each link, not only the two nodes an ordinary check happens to get: a bad cable,
port or NIC shows on the links of one node only, a bad uplink on the links that cross it. :class:`AllPairsLinkCheck`
asks Slurm by name for every node of the partition inside the run's scope (a reservation, a node list:
``netregress.slurm.allocate_scoped_nodes``) and starts one rank per node of ``nr-linkmap`` with the partition's MPI
launcher: one job step for the whole fabric, however many nodes (the srun step per test it replaced needed 478,800
steps for 400 nodes; Slurm's MaxStepCount is 40,000). The job's rounds come from a plan (``netregress.linkplan``):

* ``full``: every link, both directions at once, in the N-1 perfect matchings of a round-robin tournament;
* ``sample``: a share of those matchings per run, rotated across runs (the rotation and its seed are kept in the
  state directory), so that every link is measured within 30 runs in a row (``sample_matchings``);
* ``topology``: from Slurm's switch tree (``scontrol show topology``): the links inside every leaf switch, then the
  leaves against each other, every node at once, so that each uplink carries load and a slow one stands out.

Where nodes share a host's CPUs (the vcluster), concurrent pairs measure the CPU: the partition extra
``link_concurrency`` (directed streams at a time; 1: one after the other, as a single-pair test) cuts each round.
The partition extra ``link_passes`` (default 1) runs the plan that many times and judges each direction by its best
pass: where a host's scheduler can starve one stream for a moment (shared CPUs) a good link then still passes,
while a slow link is slow in every pass; it multiplies the rounds (1,000 nodes, full plan: 999 rounds, about 10
min per pass). Cheaper and aimed: at the end of the job nr-linkmap measures once more, each alone, the directions
still below ``min_link_fraction`` x the median link (``recheck_max`` of them at most, 64: under a minute at any size).
The data moves through the MPI library forced onto the fabric like every MPI check (``link_transport`` ``mpi``, any
fabric), or over TCP bound to the interface under test with MPI only coordinating (``tcp``, IP fabrics). Each round
is bounded (``--round-timeout``): a dead or hung node fails its pairs, named, instead of holding the job to its time
limit.

Verdicts (``netregress.linkverdict``), baseline-free: every link measured (sanity); the slowest link at least
``min_link_fraction`` of the median link and, where the fabric has a line rate, every link at least
``min_rate_fraction`` of it (performance); the culprit named (a node, an uplink). Byte and error counters of every
node prove the traffic crossed the interface under test. When every rank ran under one CPU quota that throttled
them (the machine capped, :mod:`.cpulimit`), the comparison the quota decides is recorded, not asserted, and the run
says why: on a fabric with a line rate the rate (the quota trims every link alike, while a slow link still stands
out against the median link), else the ratio to the median link. Results: ``result.json`` (nr-linkmap's),
``links.json`` and the table ``links.txt``.
"""
from __future__ import annotations

import json
import os
import random
from typing import Mapping

import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, run_before, variable
from reframe.core.exceptions import PerformanceError, SanityError
from reframe.core.logging import getlogger

from ..judge import baselines, figures
from . import cpulimit, interconnects, provenance, results, slurm
from .. import statefiles
from .base import COUNTERS_FILE
from .linkplan import LinkPlan, full_plan, runs_to_cover, sample_plan, topology_plan
from ..judge.linkverdict import (LINKS_TABLE, LinkResult, collect_links, format_table, payload_per_host, slow_links,
                          summary, unmeasured_links)
from .mpicheck import MpiKernelCheck

LINKS_JSON = 'links.json'
PLAN_FILE = 'plan.txt'
#: Default share of the median link the slowest link must reach.
MIN_LINK_FRACTION = 0.85
#: Default share of the fabric's line rate (where configured) every link must reach.
MIN_RATE_FRACTION = 0.95
PLANS = ('full', 'sample', 'topology')
#: Runs in a row in which the ``sample`` plan measures every link (its matchings per run follow from it), and
#: seconds each round streams (the check's defaults).
SAMPLE_COVER_RUNS = 30
ROUND_TIME_S = 0.5


def sample_matchings_for(nodes: int, cover_runs: int = SAMPLE_COVER_RUNS) -> int:
    """Perfect matchings per ``sample`` run so that ``cover_runs`` runs in a row measure every link."""
    matchings = nodes - 1 if nodes % 2 == 0 else nodes
    return max(1, -(-matchings // cover_runs))


def link_interconnects() -> list[str]:
    """Fabrics a link test applies to: every interconnect that spans nodes, whatever its counters."""
    table = interconnects.load()
    return [n for n in table.names if table.interconnect(n).nodes >= 2]


def sample_rotation(key: str, advance: bool = True) -> tuple[int, int]:
    """(seed, run index) of the ``sample`` plan for ``key`` (system:partition:fabric), kept in the state directory
    under its lock; ``advance`` counts this run."""
    directory = baselines.state_dir() / 'link-samples'
    statefiles.private_dir(directory)
    path = directory / f'{key.replace(":", "-").replace("/", "_")}.json'
    with statefiles.locked(directory):
        try:
            state = json.loads(path.read_text())
            seed, runs = int(state['seed']), int(state['runs'])
        except (OSError, ValueError, KeyError, TypeError):
            seed, runs = random.SystemRandom().randrange(1, 2 ** 31), 0
        if advance:
            statefiles.atomic_write(path, json.dumps({'seed': seed, 'runs': runs + 1}) + '\n', what='sample rotation')
    return seed, runs


def make_plan(name: str, nodes: list[str], key: str, extras: Mapping | None = None, per_run: int | None = None,
              advance: bool = True, runner: slurm.Runner = slurm.run_command):
    """(the link plan ``name`` over ``nodes``, the leaf switches it was made from or None): what the check runs and
    what ``ci/post-maintenance --plan`` prints. ``extras`` (the partition's) may cut rounds (``link_concurrency``)
    and repeat them (``link_passes``). ``key`` (system:partition:fabric) names the sample rotation; ``advance``
    counts this run in it. :class:`slurm.SlurmQueryError` when Slurm has no switch tree."""
    extras = extras or {}
    concurrency, passes = extras.get('link_concurrency'), extras.get('link_passes', 1)
    leaves = None
    if name == 'sample':
        seed, run = sample_rotation(key, advance)
        plan = sample_plan(nodes, per_run or sample_matchings_for(len(nodes)), run, seed, concurrency)
    elif name == 'topology':
        leaves = slurm.leaf_switches(nodes, runner=runner)
        plan = topology_plan(leaves, concurrency)
    else:
        plan = full_plan(nodes, concurrency)
    try:
        return plan.passes(passes), leaves
    except ValueError as err:
        raise ValueError(f'partition extra link_passes: {err}') from None


class AllPairsLinkCheck(MpiKernelCheck):
    """Every link of a partition's fabric in one nr-linkmap job (see module doc)."""

    #: Fabrics whose links are tested: every interconnect spanning nodes.
    interconnect = parameter(link_interconnects(), fmt=lambda ic: ic, loggable=True)

    kernel_name = 'nr-linkmap'

    #: Which links this run measures: ``full``, ``sample`` or ``topology`` (module doc).
    #:
    #: :type: :class:`str`
    #: :default: ``'full'``
    plan = variable(str, value='full', loggable=True)

    #: Perfect matchings the ``sample`` plan measures per run; None: as many as cover every link within
    #: :data:`SAMPLE_COVER_RUNS` runs in a row (1,000 nodes: 34 of 999).
    #:
    #: :type: :class:`int` or ``None``
    #: :default: ``None``
    sample_matchings = variable(int, type(None), value=None)

    #: Seconds each round streams (``-t``).
    #:
    #: :type: :class:`float`
    #: :default: ``0.5``
    round_time_s = variable(float, value=ROUND_TIME_S)

    #: Message size of the streams (``-m``).
    #:
    #: :type: :class:`str`
    #: :default: ``'1M'``
    message_size = variable(str, value='1M')

    #: How the data moves: ``mpi`` (the MPI library forced onto the fabric like every MPI check, its transport and
    #: the interface counters witnessed; any fabric) or ``tcp`` (TCP bound to the fabric's interface, MPI only
    #: coordinating; IP fabrics).
    #:
    #: :type: :class:`str`
    #: :default: ``'mpi'``
    link_transport = variable(str, value='mpi', loggable=True)

    #: Also measure each link's small-message round trip (``--rtt``). Off: on the vcluster nr-linkmap's round trip
    #: read 7.9 ms for the pairs of one matching in every run (the others 7-10 us, where mpi_latency reads 35-50 us
    #: across two nodes); not a figure to publish until that is understood.
    #:
    #: :type: :class:`bool`
    #: :default: ``False``
    measure_rtt = variable(typ.Bool, value=False)

    #: Seconds a round may take before its unfinished pairs are failed (``--round-timeout``).
    #:
    #: :type: :class:`float`
    #: :default: ``10``
    round_timeout_s = variable(float, value=10.0)

    #: The slowest link must reach this fraction of the median link. None: the partition extra
    #: ``interconnects.<ic>.min_link_fraction`` where given, else :data:`MIN_LINK_FRACTION` (set in setup).
    #:
    #: :type: :class:`float` or ``None``
    min_link_fraction = variable(float, type(None), value=None, loggable=True)

    #: Directions below ``min_link_fraction`` x the median link that nr-linkmap measures once more, each alone, at
    #: the end of the job (``--recheck-below``, ``--recheck-max``; 0: none): a stream the host's scheduler starved
    #: for a moment passes, a slow link stays slow. At most this many extra rounds of one pair each.
    #:
    #: :type: :class:`int`
    #: :default: ``64``
    recheck_max = variable(int, value=64)

    #: Where the fabric has a line rate, every link must reach this fraction of the most payload a link carries.
    #: None: the partition extra ``interconnects.<ic>.min_rate_fraction``, else :data:`MIN_RATE_FRACTION`.
    #:
    #: :type: :class:`float` or ``None``
    min_rate_fraction = variable(float, type(None), value=None, loggable=True)

    #: The most payload one link carries, Mbit/s; None: the partition extra ``interconnects.<ic>.payload_mbps``
    #: (or ``rate_mbps``), else the interconnect table's ``payload_mbps``, else no rate test.
    #:
    #: :type: :class:`float` or ``None``
    rate_mbps = variable(float, type(None), value=None, loggable=True)

    #: Seconds to wait, before submitting, for nodes in a passing state (not responding, unknown) to recover.
    #:
    #: :type: :class:`float`
    #: :default: ``10``
    node_wait_s = variable(float, value=10.0)

    #: Why links were not compared as usual: every rank ran under one CPU quota that throttled them
    #: (:func:`.cpulimit.shared_cpu_quota`; filled by sanity, goes to the perflog).
    #:
    #: :type: :class:`str`
    cpu_quota_note = variable(str, value='', loggable=True)

    #: The nodes in scope, in Slurm's order (set in setup).
    #:
    #: :type: :class:`List[str]`
    nodes = variable(typ.List[str], value=[])

    # on a fabric with a line rate the base class also reports min_link_mbps / rate_mbps as fraction_of_link with
    # the baseline-free band fixed_bands.link_fraction (its upper end catches a shaper that is gone)
    link_bound_metric = 'min_link_mbps'
    keep_files = [LINKS_JSON, LINKS_TABLE, PLAN_FILE, COUNTERS_FILE]

    @run_after('setup')
    def allocate_every_node(self):
        """One MPI build measures the links (the partition extra ``link_environ``, else its first MPI environment);
        its ranks go to every node in scope, asked for by name."""
        part = self.current_partition
        if part.scheduler.registered_name not in ('slurm', 'squeue'):
            self.skip(f'{part.fullname}: the link test needs a Slurm partition (scheduler '
                      f'{part.scheduler.registered_name})')
        mpi_envs = [e.name for e in part.environs if 'mpi' in (e.features or [])]
        chosen = part.extras.get('link_environ') or (mpi_envs[0] if mpi_envs else None)
        if self.current_environ.name != chosen:
            self.skip(f'the links of {part.fullname} are measured once, with {chosen} (partition extra link_environ)')
        if self.plan not in PLANS:
            raise ValueError(f'link_allpairs: plan {self.plan!r} is not one of {", ".join(PLANS)}')
        self.nodes = slurm.allocate_scoped_nodes(self, self.node_wait_s)
        if len(self.nodes) < 2:
            self.skip(f'{part.fullname}: {len(self.nodes)} node in scope: no link to test')
        self.link_plan = self.make_plan()
        self.num_tasks = len(self.nodes)
        self.num_tasks_per_node = 1
        if self.rate_mbps is None:
            self.rate_mbps = self.configured_rate_mbps()
        if self.min_link_fraction is None:
            self.min_link_fraction = float(self.fabric_extra('min_link_fraction') or MIN_LINK_FRACTION)
        if self.min_rate_fraction is None:
            self.min_rate_fraction = float(self.fabric_extra('min_rate_fraction') or MIN_RATE_FRACTION)
        # the ratio is judged by the performance stage's own verdict too; as a fixed band it needs no baseline
        self.fixed_references = {**self.fixed_references,
                                 'min_to_median': (1.0, round(self.min_link_fraction - 1.0, 6), 0.0)}
        # after the partition's time_limit (base class): the job's length follows the plan
        per_round = self.round_time_s + (2.0 * len(self.nodes) * 0.05 if self.measure_rtt else 0) + 1.0
        rechecks = min(self.recheck_max, len(self.nodes) * (len(self.nodes) - 1))
        self.time_limit = int(60 + (len(self.link_plan.rounds) + rechecks) * per_round * 2)

    def make_plan(self) -> LinkPlan:
        key = f'{self.current_system.name}:{self.current_partition.name}:{self.interconnect}'
        try:
            plan, self.switch_leaves = make_plan(self.plan, self.nodes, key, self.current_partition.extras,
                                                 self.sample_matchings)
        except slurm.SlurmQueryError as err:
            raise SanityError(f'plan {self.plan}: {err}') from None
        return plan

    def fabric_extra(self, key: str):
        """``key`` of this interconnect's block in the partition extra ``interconnects`` (None: absent)."""
        return ((self.current_partition.extras.get('interconnects') or {}).get(self.interconnect) or {}).get(key)

    def configured_rate_mbps(self) -> float | None:
        for value in (self.fabric_extra('payload_mbps'), self.fabric_extra('rate_mbps'),
                      getattr(self.ic, 'payload_mbps', None)):
            if value:
                return float(value)
        return None

    def counted_nodes(self) -> int:
        return len(self.nodes)

    @run_after('setup')
    def set_linkmap_options(self):
        with open(os.path.join(self.stagedir, PLAN_FILE), 'w') as fp:
            fp.write(self.link_plan.text())
        opts = ['--plan-file', PLAN_FILE, '-t', str(self.round_time_s), '-m', self.message_size,
                '--round-timeout', str(self.round_timeout_s)]
        if self.recheck_max > 0:
            opts += ['--recheck-below', str(self.min_link_fraction), '--recheck-max', str(self.recheck_max)]
        if self.link_transport == 'tcp':
            if self.ic.counters != 'interface' or not self.iface:
                raise ValueError(f'link_allpairs: link_transport tcp needs an IP fabric with an interface; '
                                 f'{self.current_partition.fullname} {self.interconnect} has none')
            opts += ['--transport', 'tcp', '--bind-iface', self.iface]
        elif self.link_transport == 'mpi':
            opts += ['--transport', 'mpi']
        else:
            raise ValueError(f'link_allpairs: link_transport {self.link_transport!r} is not mpi or tcp')
        if self.measure_rtt:
            opts += ['--rtt']
        self.kernel_opts = opts

    # -- sanity -----------------------------------------------------------------------------------------------

    def leaves(self):
        """The switch tree the topology plan was made from (asked once, in setup), else None."""
        return getattr(self, 'switch_leaves', None)

    def links(self) -> list[LinkResult]:
        """The measured links (read once, after the job)."""
        if getattr(self, '_links', None) is None:
            try:
                self._doc = results.load_result(self.result_path)
            except results.KernelResultError:
                self._doc = {}
            self._links = collect_links(self._doc)
        return self._links

    def kernel_witness(self) -> list[str]:
        """nr-linkmap exits 1 when a pair failed: the links say which, so the exit status alone is not repeated."""
        problems = super().kernel_witness()
        return [] if problems and self.links() and any(x.errors for x in self.links()) else problems

    def links_witness(self) -> list[str]:
        """Every link measured (how fast is the performance stage's); writes links.json and links.txt."""
        links = self.links()
        stats = summary(links)
        doc = {'partition': self.current_partition.fullname, 'interconnect': self.interconnect,
               'plan': self.link_plan.name, 'plan_note': self.link_plan.note, 'nodes': self.nodes,
               'rounds': [[list(p) for p in r] for r in self.link_plan.rounds], 'rate_mbps': self.rate_mbps,
               'summary': stats, 'links': [x.as_dict() for x in links]}
        with open(os.path.join(self.stagedir, LINKS_JSON), 'w') as fp:
            json.dump(doc, fp, indent=2)
        with open(os.path.join(self.stagedir, LINKS_TABLE), 'w') as fp:
            fp.write(format_table(links, stats))
        self.cpu_quota_note = cpulimit.shared_cpu_quota(
            cpulimit.from_linkmap(self._doc), one_machine=bool(self.current_partition.extras.get('host_cpus')),
            unit='ranks',
            consequence=('each link\'s rate against the line rate is recorded, not asserted (the quota trims every '
                         'link alike; each is still judged against the median link)' if self.rate_mbps else
                         'the slowest link\'s ratio to the median link is recorded, not asserted (the streams '
                         'measure the quota\'s moment)')) or ''
        if self.cpu_quota_note:
            getlogger().warning(f'{self.display_name}: {self.cpu_quota_note}')
        return unmeasured_links(links, self.leaves()) if self._doc else []

    def recorded_only(self) -> set[str]:
        """Where every rank ran under the one quota that throttled them (``cpu_quota_note``): on a fabric with a
        line rate the fraction of it, else the ratio to the median link."""
        if not self.cpu_quota_note:
            return set()
        return {'fraction_of_link'} if self.rate_mbps else {'min_to_median'}

    @run_before('performance')
    def name_slow_links(self):
        """A slow link fails the performance stage, named with its direction and the node or uplink slow links
        share (ReFrame's own message would name only the ratio); under a shared CPU quota only what
        :meth:`recorded_only` leaves asserted."""
        recorded = self.recorded_only()
        problems = slow_links(self.links(),
                              min_fraction=0.0 if 'min_to_median' in recorded else self.min_link_fraction,
                              rate_mbps=None if 'fraction_of_link' in recorded else self.rate_mbps,
                              rate_fraction=self.min_rate_fraction, leaves=self.leaves())
        if problems:
            raise PerformanceError('; '.join(problems))

    def payload_bytes(self) -> float:
        self.links()
        return sum(payload_per_host(self._doc).values()) / 2

    def counters_witness(self) -> list[str]:
        """Each node's interface under test carried at least the bytes its pairs moved."""
        self.links()
        delta, problem = self.counter_deltas()
        if problem:
            return [problem]
        payload = payload_per_host(self._doc)
        name = self.iface if self.ic.counters == 'interface' else None
        self.nr_wire = ' '.join(f'{h}:{name or "port"}/{payload[h]:.0f}' for h in sorted(payload))
        problems = []
        for host in sorted(payload):
            problems += provenance.check_counters(delta, kind=self.ic.counters, iface=self.iface, hosts=[host],
                                                  payload_bytes=payload[host], fraction=self.payload_fraction)
        return problems

    def witnesses(self) -> list:
        return [self.links_witness] + super().witnesses()

    # -- performance ------------------------------------------------------------------------------------------

    @sn.deferrable
    def _figure(self, name: str) -> float:
        stats = summary(self.links())
        if name not in stats:
            raise SanityError(f'no link measured: {name} undefined')
        return stats[name]

    @run_after('setup')
    def link_figures(self):
        """The performance variables. A link's figure is a short stream per direction between two nodes (start-up
        and the CPUs decide it as much as the link), so its throughputs are CPU-bound; the fabric's line rate is
        asserted through fraction_of_link and min_rate_fraction. The round trip only with ``measure_rtt``."""
        for name, unit, figure in (('min_link_mbps', 'Mbit/s', figures.cpu_bound('slowest link (slower direction)')),
                                   ('median_link_mbps', 'Mbit/s', figures.cpu_bound('median link')),
                                   ('min_to_median', 'ratio', figures.ratio('slowest link / median link')),
                                   *((('max_rtt_us', 'us', figures.latency('largest 8-byte link round trip')),)
                                     if self.measure_rtt else ())):
            self.add_figure(name, sn.make_performance_function(self._figure(name), unit), figure)


__all__ = ['AllPairsLinkCheck', 'link_interconnects', 'runs_to_cover', 'sample_rotation']
