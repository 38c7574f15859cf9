"""The link test of a fabric: every link between the nodes in scope, as one MPI job (nr-linkmap).

A post-maintenance run must prove each link, not only the two nodes an ordinary check happens to get: a bad cable,
port or NIC shows on the links of one node only, a bad uplink or spine on the links that cross it.
:class:`AllPairsLinkCheck` asks Slurm by name for every node of the partition inside the run's scope (a reservation,
a node list, exclusions: ``netregress.slurm.allocate_scoped_nodes``); a node in scope that Slurm cannot use (down,
drained, not responding) is left out and named, and the rest are measured. It starts one rank per node of
``nr-linkmap`` with the partition's MPI launcher: one job step for the whole fabric, however many nodes. The job's
rounds come from a plan (``full``, ``sample`` or ``topology``: :mod:`.runplan`), every plan in the order of Slurm's
switch tree where it has one.

Where nodes share a host's CPUs (the vcluster), concurrent pairs measure the CPU: the partition extra
``link_concurrency`` (directed streams at a time; 1: one after the other) cuts each round. The partition extra
``link_passes`` (default 1) runs the plan that many times and judges each direction by its best pass. At the end of
the job nr-linkmap measures the directions still below the floor again, in batches that share no node and no uplink
cable of the switch tree (no more streams than ``link_concurrency``), a direction slow in a batch again in half of
it, down to alone, within ``recheck_max`` rounds and the job's time limit (on a tapered tree the floor is divided by
the plan's contention, so that the streams the taper slowed are not what the rechecks are spent on). The data moves
through the MPI library forced onto the fabric (``link_transport`` ``mpi``, any fabric), or over TCP bound to the
interface under test with MPI only coordinating (``tcp``, IP fabrics). Each round is bounded (``--round-timeout``):
a dead or hung node fails its pairs, named.

Verdicts (``netregress.judge.linkverdict``), baseline-free, each direction against what its round let it read: every
direction measured (sanity), every direction at least ``min_link_fraction`` of the median link and, where the
fabric has a line rate, ``min_rate_fraction`` of it (performance); the smallest element that explains the slow or
failed directions named (a node's cable, an uplink, a spine, the fabric). On InfiniBand every node's port under test
must be ACTIVE at the fabric's line rate (sysfs, read beside the counters). Byte and error counters of every node
prove the traffic crossed the interface under test. When every rank ran under one CPU quota that throttled them
(the machine capped, :mod:`.cpulimit`), the comparison the quota decides is recorded, not asserted, and the run says
why. What is kept per run and fabric: ``linkmatrix.bin`` (the full plan's dense, 4 bytes a direction of N x N; a
topology or sample plan's sparse, 8 bytes a direction measured), ``links.json`` (per-node and per-switch summaries,
the suspect directions and what they were blamed on) and ``links.txt`` (the suspect directions for people);
nr-linkmap's ``result.json`` is kept without its per-pair lists.
"""
from __future__ import annotations

import dataclasses
import os
import shlex
from pathlib import Path

import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, run_before, variable
from reframe.core.exceptions import PerformanceError, SanityError
from reframe.core.logging import getlogger

from ..judge import figures
from ..judge.linkmatrix import MATRIX_FILE, LinkData, LinkMatrixError, from_result
from ..judge.linkjob import write_link_files
from ..judge.linknames import Fabric
from ..judge.linkverdict import (LINKS_JSON, LINKS_TABLE, PORT_LINE, Verdict, failed_problems, judge, port_problems,
                                 slow_problems)
from . import cpulimit, interconnects, provenance, results, slurm
from .base import COUNTERS_FILE
from .contention import Contention, plan_contention
from .linkplan import LinkPlan, TopologyError, topology_order, write_tree
from .runplan import PLANS, ROUND_TIME_S, make_plan
from .mpicheck import MpiKernelCheck

#: The switch tree as nr-linkmap reads it (``--tree``): recheck batches that share no uplink cable.
TREE_FILE = 'tree.txt'
#: The job's allowance for its start-up and end beyond its rounds, seconds.
STARTUP_S = 60
#: Each node's InfiniBand ports as sysfs has them (rate, state), read before the job on an InfiniBand fabric.
PORTS_FILE = 'ports.txt'
#: Default share of the median link the slowest direction must reach.
MIN_LINK_FRACTION = 0.85
#: Default share of the fabric's line rate (where configured) every direction must reach.
MIN_RATE_FRACTION = 0.95
#: One line per InfiniBand port of the node: ``port HOST DEVICE/PORT rate=...|state=...``
#: (linkverdict.port_problems).
PORTS_CMD = ('for p in /sys/class/infiniband/*/ports/*; do [ -r "$p/rate" ] || continue; '
             'd=${p#/sys/class/infiniband/}; '
             f'echo "{PORT_LINE} $(hostname -s) ${{d%%/ports/*}}/${{p##*/}} '
             'rate=$(cat $p/rate)|state=$(cat $p/state)"; done')


def link_interconnects() -> list[str]:
    """Fabrics a link test applies to: every interconnect that spans nodes, whatever its counters."""
    table = interconnects.load()
    return [n for n in table.names if table.interconnect(n).nodes >= 2]


def by_slurm_names(data: LinkData, nodes: list[str]) -> LinkData:
    """``data`` with each rank named as Slurm names its node (``nodes``) where the host the kernel reported is that
    node or its short name is: the switch tree and the plan speak Slurm's names. Unchanged where a host matches no
    node or two ranks match one (ranks on one machine): then the tree cannot place them either."""
    short = {n.split('.')[0]: n for n in nodes}
    names = [h if h in nodes else short.get(h.split('.')[0]) for h in data.nodes]
    if None in names or len(set(names)) != len(names) or names == data.nodes:
        return data
    return dataclasses.replace(data, nodes=names)


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

    #: Link sets (a shift and its opposite: every link at one distance, both ways) the ``sample`` plan measures per
    #: run; None: as many as cover every link within :data:`.runplan.SAMPLE_COVER_RUNS` runs in a row (1,000
    #: nodes: 17 of 500, 34 rounds).
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

    #: The slowest direction must reach this fraction of the median link. None: the partition extra
    #: ``interconnects.<ic>.min_link_fraction`` where given, else :data:`MIN_LINK_FRACTION` (set in setup).
    #:
    #: :type: :class:`float` or ``None``
    min_link_fraction = variable(float, type(None), value=None, loggable=True)

    #: Recheck rounds at most (``--recheck-rounds``; 0: none): at the end of the job nr-linkmap measures the
    #: directions below the floor again, in batches that share no node (nor, with the switch tree, an uplink
    #: cable), a slow one again in half the batch down to alone: a stream the host's scheduler starved for a moment
    #: passes, a slow link stays slow, and an element whose direction stayed slow alone is named as confirmed.
    #: Counted in the job's time limit, which nr-linkmap keeps to (``--time-limit``).
    #:
    #: :type: :class:`int`
    #: :default: ``64``
    recheck_max = variable(int, value=64)

    #: Where the fabric has a line rate, every direction must reach this fraction of the most payload a link
    #: carries. None: the partition extra ``interconnects.<ic>.min_rate_fraction``, else :data:`MIN_RATE_FRACTION`.
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

    #: Nodes in scope that Slurm could not use, left out of the job, each ``node: why`` (set in setup; the run
    #: report keeps it, so that coverage says why a node went untested).
    #:
    #: :type: :class:`List[str]`
    nodes_left_out = variable(typ.List[str], value=[], loggable=True)

    # on a fabric with a line rate the base class also reports min_link_mbps / rate_mbps as fraction_of_link with
    # the baseline-free band fixed_bands.link_fraction (its upper end catches a shaper that is gone)
    link_bound_metric = 'min_link_mbps'
    keep_files = [LINKS_JSON, LINKS_TABLE, MATRIX_FILE, COUNTERS_FILE]

    @run_after('setup')
    def allocate_every_node(self):
        """One MPI build measures the links (the partition extra ``link_environ``, else its first MPI environment);
        its ranks go to every usable node in scope, asked for by name."""
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
        self.nodes, left_out = slurm.allocate_scoped_nodes(self, self.node_wait_s)
        self.nodes_left_out = list(left_out.values())
        if len(self.nodes) < 2:
            if self.nodes_left_out:
                raise SanityError(f'{part.fullname}: {len(self.nodes)} usable node in scope, no link to test; '
                                  f'left out: {"; ".join(self.nodes_left_out)}')
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
        # after the partition's time_limit (base class): the job's length follows the plan, rechecks included
        per_round = self.round_time_s + (2.0 * len(self.nodes) * 0.05 if self.measure_rtt else 0) + 1.0
        rechecks = min(self.recheck_max, len(self.nodes) * (len(self.nodes) - 1))
        self.time_limit = int(STARTUP_S + (len(self.link_plan.rounds) + rechecks) * per_round * 2)

    def make_plan(self) -> LinkPlan:
        key = f'{self.current_system.name}:{self.current_partition.name}:{self.interconnect}'
        try:
            plan, self.topology = make_plan(self.plan, self.nodes, key, self.current_partition.extras,
                                            self.sample_matchings)
        except (slurm.SlurmQueryError, TopologyError) as err:
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

    def line_rate_mbps(self) -> float | None:
        """The fabric's line rate (what a port must train to): the partition's, else the table's."""
        value = self.fabric_extra('rate_mbps') or getattr(self.ic, 'rate_mbps', None)
        return float(value) if value else None

    def counted_nodes(self) -> int:
        return len(self.nodes)

    def contention(self) -> Contention | None:
        """Each direction's least contention under the plan and the switch tree, in the order of :attr:`nodes`
        (None without a tree, or where no round shares a switch link)."""
        if not hasattr(self, '_contention'):
            self._contention = None
            if getattr(self, 'topology', None) is not None:
                at = {n: i for i, n in enumerate(self.nodes)}
                least = plan_contention(self.link_plan, self.topology, [at[n] for n in self.link_plan.nodes],
                                        len(self.nodes))
                self._contention = least if least.max() > 1 else None
        return self._contention

    @run_after('setup')
    def set_linkmap_options(self):
        opts = [*self.link_plan.kernel_options(Path(self.stagedir), relative=True), '-t', str(self.round_time_s),
                '-m', self.message_size,
                '--round-timeout', str(self.round_timeout_s)]
        if self.recheck_max > 0:
            # nr-linkmap compares raw rates: where the plan makes streams share an uplink (a tapered tree) only
            # those below the floor even at their share are worth a recheck
            least = self.contention()
            below = self.min_link_fraction / (float(least.max()) if least is not None else 1.0)
            # the batches: no more streams than the partition lets run at once, none sharing an uplink cable where
            # the tree is known; no recheck round that would end the job after its time limit (less the start-up)
            opts += ['--recheck-below', f'{below:.6g}', '--recheck-rounds', str(self.recheck_max),
                     '--recheck-streams', str(int(self.current_partition.extras.get('link_concurrency') or 0)),
                     '--time-limit', str(max(1, int(self.time_limit) - STARTUP_S))]
            if getattr(self, 'topology', None) is not None:
                with open(os.path.join(self.stagedir, TREE_FILE), 'w') as fp:
                    write_tree(fp, self.topology, self.nodes)
                opts += ['--tree', TREE_FILE]
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

    @run_before('run')
    def read_ports(self):
        """On InfiniBand, every node's ports (rate, state) from sysfs, beside the error counters the snapshots
        read: a port that trained to a lower width or speed reads as a slow cable, and here it is named as such."""
        if self.ic.counters == 'infiniband':
            prefix = self.node_prefix('on_each_node', nodes=len(self.nodes))
            self.prerun_cmds = self.prerun_cmds + [f'{prefix} sh -c {shlex.quote(PORTS_CMD)} > {PORTS_FILE} 2>&1'
                                                   .strip()]
            if PORTS_FILE not in self.keep_files:
                self.keep_files = [*self.keep_files, PORTS_FILE]

    # -- sanity -----------------------------------------------------------------------------------------------

    def measurements(self) -> LinkData | None:
        """What the job measured (read once, after the job; None when it wrote nothing readable)."""
        if not hasattr(self, '_data'):
            self._doc, self._data, self._read_error = {}, None, ''
            try:
                self._doc = results.load_result(self.result_path)
                self._data = from_result(self._doc, self.stagedir)
            except (results.KernelResultError, LinkMatrixError) as err:
                self._read_error = str(err)
        return self._data

    def verdict(self) -> Verdict | None:
        """Every direction judged (once): what sanity and the performance stage report and the files keep."""
        return getattr(self, '_verdict', None)

    def kernel_witness(self) -> list[str]:
        """nr-linkmap exits 1 when a pair failed: the verdict says which, so the exit status alone is not
        repeated."""
        problems = super().kernel_witness()
        v = self.verdict()
        return [] if problems and v is not None and len(v.failed['src']) else problems

    def links_witness(self) -> list[str]:
        """Every direction measured and every node in scope used (how fast is the performance stage's, unless
        this fails too: then it is said here); judges the job and writes linkmatrix.bin, links.json and links.txt."""
        data = self.measurements()
        left_out = [f'node {x} (left out of the link test)' for x in self.nodes_left_out]
        if data is None:           # no result at all: the kernel witness says why
            return left_out + ([f'no link measured: {self._read_error}'] if self._doc else [])
        self.cpu_quota_note = cpulimit.shared_cpu_quota(
            cpulimit.from_linkmap(self._doc), one_machine=bool(self.current_partition.extras.get('host_cpus')),
            unit='ranks',
            consequence=('each link\'s rate against the line rate is recorded, not asserted (the quota trims every '
                         'link alike; each is still judged against the median link)' if self.rate_mbps else
                         'the slowest link\'s ratio to the median link is recorded, not asserted (the streams '
                         'measure the quota\'s moment)')) or ''
        if self.cpu_quota_note:
            getlogger().warning(f'{self.display_name}: {self.cpu_quota_note}')
        recorded = self.recorded_only()
        data = self._data = by_slurm_names(data, self.nodes)
        fabric = Fabric.of(self.topology, data.nodes) if getattr(self, 'topology', None) else None
        self._verdict = judge(data, min_fraction=0.0 if 'min_to_median' in recorded else self.min_link_fraction,
                              rate_mbps=None if 'fraction_of_link' in recorded else self.rate_mbps,
                              rate_fraction=self.min_rate_fraction, fabric=fabric, contention=self.aligned(data))
        self.write_links(data)
        problems = failed_problems(self._verdict)
        if problems or left_out:
            problems = left_out + problems + slow_problems(self._verdict)
        return problems

    def aligned(self, data: LinkData) -> Contention | None:
        """:meth:`contention` in the order of the job's ranks (``data.nodes``, by Slurm's names)."""
        least = self.contention()
        if least is None or list(data.nodes) == list(self.nodes):
            return least
        at = {n: i for i, n in enumerate(self.nodes)}
        if not all(h in at for h in data.nodes):
            return None             # hosts the tree does not know: judged as read
        return least.reordered([at[h] for h in data.nodes])

    def write_links(self, data: LinkData) -> None:
        """What is kept of the job (:func:`write_link_files`)."""
        topology = getattr(self, 'topology', None)
        order = topology_order(data.nodes, topology)
        at = {n: i for i, n in enumerate(data.nodes)}
        write_link_files(self.stagedir, self._doc, data, self._verdict, {
            'partition': self.current_partition.fullname, 'interconnect': self.interconnect,
            'plan': self.link_plan.name, 'plan_note': self.link_plan.note, 'rounds': len(self.link_plan.rounds),
            'order': [at[n] for n in order], 'nodes_left_out': self.nodes_left_out,
            'topology': topology.describe() if topology else None, 'rate_mbps': self.rate_mbps,
            'min_link_fraction': self.min_link_fraction, 'min_rate_fraction': self.min_rate_fraction})

    def recorded_only(self) -> set[str]:
        """Where every rank ran under the one quota that throttled them (``cpu_quota_note``): on a fabric with a
        line rate the fraction of it, else the ratio to the median link."""
        if not self.cpu_quota_note:
            return set()
        return {'fraction_of_link'} if self.rate_mbps else {'min_to_median'}

    @run_before('performance')
    def name_slow_links(self):
        """Slow directions fail the performance stage, named by the smallest element that explains them (ReFrame's
        own message would name only the ratio), and so do InfiniBand ports below the line rate; under a shared CPU
        quota only what :meth:`recorded_only` leaves asserted. Not in a dry run: ReFrame runs the stage's hooks, but
        no port was read and no link measured."""
        if self.is_dry_run():
            return
        problems = self.port_witness() + (slow_problems(self.verdict()) if self.verdict() else [])
        if problems:
            raise PerformanceError('; '.join(problems))

    def port_witness(self) -> list[str]:
        """On InfiniBand: every node's port under test ACTIVE at the fabric's line rate (linkverdict.port_problems)."""
        if self.ic.counters != 'infiniband':
            return []
        try:
            with open(os.path.join(self.stagedir, PORTS_FILE)) as fp:
                text = fp.read()
        except OSError:
            return [f'{PORTS_FILE} not written: the InfiniBand ports were not read']
        return port_problems(text, self.nodes, self.iface, self.line_rate_mbps())

    def payload_bytes(self) -> float:
        data = self.measurements()
        return sum(data.bytes_per_host.values()) / 2 if data else 0.0

    def counters_witness(self) -> list[str]:
        """Each node's interface under test carried at least the bytes its pairs moved."""
        data = self.measurements()
        delta, problem = self.counter_deltas()
        if problem:
            return [problem]
        payload = data.bytes_per_host if data else {}
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
        stats = self.verdict().summary() if self.verdict() else {}
        rtt = ((self._doc.get('summary') or {}).get('rtt_us') or {}).get('max') if self.measurements() else None
        if isinstance(rtt, (int, float)):
            stats['max_rtt_us'] = float(rtt)
        if name not in stats:
            raise SanityError(f'no link measured: {name} undefined')
        return stats[name]

    @run_after('setup')
    def link_figures(self):
        """The performance variables. A link's figure is its slower direction's stream (times the contention the
        plan gave it): start-up and the CPUs decide it as much as the link, so its throughputs are CPU-bound; the
        fabric's line rate is asserted through fraction_of_link and min_rate_fraction. The round trip (nr-linkmap's
        largest) only with ``measure_rtt``."""
        for name, unit, figure in (('min_link_mbps', 'Mbit/s', figures.cpu_bound('slowest link (slower direction)')),
                                   ('median_link_mbps', 'Mbit/s', figures.cpu_bound('median link')),
                                   ('min_to_median', 'ratio', figures.ratio('slowest link / median link')),
                                   *((('max_rtt_us', 'us', figures.latency('largest 8-byte link round trip')),)
                                     if self.measure_rtt else ())):
            self.add_figure(name, sn.make_performance_function(self._figure(name), unit), figure)


__all__ = ['AllPairsLinkCheck', 'link_interconnects']
