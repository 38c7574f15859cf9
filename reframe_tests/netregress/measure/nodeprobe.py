"""Every node against its peers: a short TCP stream over each node's own loopback, one node after the other.

A link test cannot see a slow node on a fabric the CPU bounds: a TCP stream over veth does most of its work in
the sender's softirq and the receiver's copy, and capping one node's processes at half a CPU moved its links by
only 0.86x (measured on the vcluster). A loopback stream on the node itself runs both ends there, so it halves with
the node's CPU (23.8 -> 12.8 Gbit/s with a cgroup quota of half a CPU over the node's processes). After a
maintenance a node with a wrong CPU governor, a lost memory channel or a runaway process is exactly that node.

:class:`NodeLoopbackCheck` allocates every usable node of the partition by name (like the all-pairs link check: a
node Slurm cannot use is left out and named, the others measured) and runs
``nr-tcpserver`` + ``nr-tcptest -h 127.0.0.1`` on each node in turn (the server bound to loopback, on a port it picks,
serving only a client with the job's secret, as :mod:`.tcppair` starts it), in ``passes`` passes that rotate the order.
Each pass of a node (the median over its repetitions) is judged against its contemporaries, the median of the
other nodes measured at the same time (the same pass where every node measures at once; the passes just before and
after it where the nodes take turns on a host's CPUs), and a node's ratio is its best pass's (:func:`peer_ratios`):
a host that slows down for a few seconds slows a node's contemporaries too, while a slow node is slow in every pass.
On the 2-vCPU vcluster the host's loopback stream has a slow mode, 0.6 x its usual rate for up to ten seconds at a
time: in 21 clean jobs the slowest node read 0.68-0.99 x the median node's best pass (five below 0.8) and 0.86-1.24
x its contemporaries, while the drill's node capped at half a CPU read 0.28-0.30 either way (docs/validation.md).
Baseline-free verdicts: every node measured (sanity, :func:`unmeasured_nodes`), and each node's ratio at least
``min_node_fraction`` (performance, :func:`slow_nodes`), else the nodes are named. Both are tested in
tests/python/test_nodeprobe.py.

Each pass also records the CPU cgroup its stream ran in, that group's quota and how long the quota throttled it
(:mod:`.cpulimit`). A node under a quota its peers lack is named with it. When every node's stream ran under one
and the same quota and it throttled them (the machine itself is capped), the ratio to the median node is recorded,
not asserted, and the run says why; every node must still be measured.
"""
from __future__ import annotations

import bisect
import os
import shlex
import statistics
from typing import Mapping

import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import fixture, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import PerformanceError, SanityError
from reframe.core.logging import getlogger

from ..judge import figures
from . import interconnects, results, slurm
from .cpulimit import CPU_LIMIT_SH, CpuLimit, own_cpu_quotas, read_cpu_limit, shared_cpu_quota
from .linkplan import SLURM_ON_NAMED_NODE
from .base import NetregressCheck
from .build import TcpKernelBuild
from .tcppair import SECRET_FILE, auth_problem, job_secret_cmds, printed_port_cmd

NODE_DIR = 'nodes'
DRIVER = 'nodes.sh'


def unmeasured_nodes(figures: Mapping[str, float | None]) -> list[str]:
    """Nodes whose loopback stream gave no figure (a sanity failure: nothing was measured)."""
    return [f'node {n}: loopback stream not measured (see {NODE_DIR}/{n}.*.err)' for n, v in figures.items()
            if v is None]


def turn_order(nodes: list[str], passes: int) -> list[tuple[str, int]]:
    """(node, pass) in the order the nodes take turns: pass k starts at node k (mod N)."""
    return [(nodes[(i + k) % len(nodes)], k) for k in range(passes) for i in range(len(nodes))]


def peer_ratios(passes: Mapping[str, list[float | None]],
                order: list[tuple[str, int]] | None = None) -> dict[str, tuple[float, float]]:
    """{node: (ratio, contemporaries' median)} of its best pass: each pass's figure over the median of the other
    nodes' figures measured at the same time. ``order`` None: every node measured each pass at once, so its
    contemporaries are the other nodes of that pass. ``order`` (:func:`turn_order`): the nodes took turns, so they are
    the nearest measured pass of another node before it and after it. A node without contemporaries is left out."""
    out: dict[str, tuple[float, float]] = {}
    seq = order if order is not None else [(n, k) for k in range(max(map(len, passes.values()), default=0))
                                            for n in passes]
    by_pass: dict[int, list[float]] = {}

    def value(node: str, k: int) -> float | None:
        figs = passes.get(node, [])
        return figs[k] if k < len(figs) else None

    for j, (node, k) in enumerate(seq):
        mine = value(node, k)
        if mine is None:
            continue
        if order is None:
            if k not in by_pass:        # sorted once per pass: 1,000 nodes cost 3 sorts, not 3,000
                by_pass[k] = sorted(v for n in passes if (v := value(n, k)) is not None)
            ranked = by_pass[k]
            i = bisect.bisect_left(ranked, mine)
            peers = ranked[:i] + ranked[i + 1:]
        else:
            peers = []
            for step in (-1, 1):
                i = j + step
                while 0 <= i < len(seq) and (seq[i][0] == node or value(*seq[i]) is None):
                    i += step
                if 0 <= i < len(seq):
                    peers.append(value(*seq[i]))
        if not peers:
            continue
        median = statistics.median(peers)
        if median > 0 and (node not in out or mine / median > out[node][0]):
            out[node] = (mine / median, median)
    return out


def slow_nodes(ratios: Mapping[str, tuple[float, float]], figures: Mapping[str, float | None], min_fraction: float,
               notes: Mapping[str, str] | None = None) -> list[str]:
    """Nodes whose best pass was below ``min_fraction`` x its contemporaries (:func:`peer_ratios`; a performance
    verdict: a retry may measure again); a node's entry in ``notes`` (:func:`own_cpu_quotas`) is added to its
    verdict."""
    problems: list[str] = []
    for node, (ratio, peers) in sorted(ratios.items(), key=lambda kv: kv[1][0]):
        if ratio < min_fraction:
            note = f'; it ran {notes[node]}' if notes and node in notes else ''
            problems.append(f'node {node}: loopback stream {figures.get(node) or 0:.0f} Mbit/s at best, its best pass '
                            f'{ratio:.2f} x the nodes measured beside it ({peers:.0f} Mbit/s, at least '
                            f'{min_fraction:g} x expected): the node is slow{note}')
    return problems


def driver_script(nodes: list[str], prefixes: Mapping[str, str], kernels_dir: str, opts: list[str],
                  passes: int = 1, on_every_node: str | None = None) -> str:
    """Shell script writing nodes/<node>.<pass>.json per node and pass. With ``on_every_node`` (a prefix running
    one task on each node of the job) every node measures at once, one job step per pass: nodes with CPUs of
    their own do not disturb each other, and 1,000 nodes take ``passes`` steps, not 1,000 x ``passes``. Without
    it (nodes sharing one host's CPUs) each node in turn, pass k starting at node k (mod N)."""
    server, client = (shlex.quote(os.path.join(kernels_dir, k)) for k in ('nr-tcpserver', 'nr-tcptest'))
    lines = ['#!/bin/bash', 'set -u', f'mkdir -p {NODE_DIR}', *job_secret_cmds()]
    if on_every_node is not None:
        lines += [_node_line('${SLURMD_NODENAME:-$(hostname)}', k, on_every_node, server, client, opts, label='all')
                  for k in range(passes)]
    else:
        lines += [_node_line(node, k, prefixes[node], server, client, opts, label=node)
                  for node, k in turn_order(nodes, passes)]
    return '\n'.join(lines) + '\n'


def _node_line(node: str, k: int, prefix: str, server: str, client: str, opts: list[str], label: str) -> str:
    """One pass on one node (or on every node at once): the server on the node's loopback only, on a port it picks,
    taking only a client with the job's secret (the driver's, in the stage directory the nodes share)."""
    out = f'{NODE_DIR}/{node}.{k}'
    body = (f'{CPU_LIMIT_SH} > {out}.cpu; '
            f'{server} -B 127.0.0.1 -p 0 --auth-file {SECRET_FILE} --max-tests 1 > {out}.srv 2>&1 & s=$!; '
            f'for i in $(seq 100); do grep -q "listening on port" {out}.srv && break; sleep 0.05; done; '
            f'{printed_port_cmd("p", f"{out}.srv")}; '
            f'{client} -h 127.0.0.1 -p "$p" --auth-file {SECRET_FILE} {" ".join(map(shlex.quote, opts))} '
            f'--json {out}.json '
            f'> {out}.out 2> {out}.err; rc=$?; kill $s 2>/dev/null; wait $s 2>/dev/null; '
            f'{CPU_LIMIT_SH} >> {out}.cpu; exit $rc')
    return f'{prefix} sh -c {shlex.quote(body)}; echo "netregress-node: {label} pass={k} status=$?"'


class NodeLoopbackCheck(NetregressCheck):
    """Abstract: the loopback stream of every node of a multi-node partition (all at once, or one at a time where
    the nodes share a host's CPUs), once per partition."""

    valid_prog_environs = ['+tcp']
    kernels = fixture(TcpKernelBuild, scope='environment')
    record_counters = False         # loopback inside each node: no interface under test
    nr_fabric_payload = False       # nor payload over the fabric: it covers no node for it

    #: Repetitions (``-r``) and seconds each (``-t``) of each node's stream; the figure is their median.
    #:
    #: :type: :class:`int`
    #: :default: ``3``
    repetitions = variable(int, value=3)

    #: :type: :class:`float`
    #: :default: ``0.3``
    test_time_s = variable(float, value=0.3)

    #: Passes over all nodes (each node's best pass counts).
    #:
    #: :type: :class:`int`
    #: :default: ``3``
    passes = variable(int, value=3)

    #: A node whose best pass is below this fraction of the nodes measured beside it fails the check, named.
    #:
    #: :type: :class:`float`
    #: :default: ``0.8``
    min_node_fraction = variable(float, value=0.8)

    #: The partition's nodes (filled in setup).
    #:
    #: :type: :class:`List[str]`
    nodes = variable(typ.List[str], value=[])

    #: Nodes in scope that Slurm could not use, left out of the probe, each ``node: why`` (set in setup); the probe
    #: measures the others and fails naming these.
    #:
    #: :type: :class:`List[str]`
    nodes_left_out = variable(typ.List[str], value=[], loggable=True)

    #: Why the nodes were not compared (:func:`shared_cpu_quota`; filled by sanity, goes to the perflog).
    #:
    #: :type: :class:`str`
    cpu_quota_note = variable(str, value='', loggable=True)

    keep_files = [NODE_DIR, DRIVER]

    @run_after('setup')
    def allocate_every_node(self):
        part = self.current_partition
        if self.ic.nodes < 2 or part.scheduler.registered_name not in ('slurm', 'squeue'):
            self.skip(f'{part.fullname} {self.interconnect}: one node, or no Slurm partition to list nodes of')
        table = interconnects.load()
        fabrics = [f[3:] for f in part.features if f.startswith('ic-') and f[3:] in table.names
                   and table.interconnect(f[3:]).nodes >= 2]
        if fabrics and self.interconnect != fabrics[0]:
            self.skip(f'{part.fullname}: the nodes are probed once, with the {fabrics[0]} case (a loopback stream '
                      f'does not depend on the fabric)')
        self.nodes, left_out = slurm.allocate_scoped_nodes(self, wait_s=10.0)
        self.nodes_left_out = list(left_out.values())
        if not self.nodes:
            if self.nodes_left_out:
                raise SanityError(f'{part.fullname}: no usable node in scope; left out: '
                                  f'{"; ".join(self.nodes_left_out)}')
            self.skip(f'{part.fullname}: no node of it in the run\'s scope')
        self.num_tasks = len(self.nodes)
        self.num_tasks_per_node = 1
        # no upper bound: the slowest node's best pass may well beat the nodes measured beside it
        self.fixed_references = {**self.fixed_references,
                                 'min_to_median': (1.0, self.min_node_fraction - 1.0, None)}
        # after the partition's time_limit (base class): one step per pass, or per node and pass where the nodes
        # share a host's CPUs and take turns
        steps = self.passes * (1 if self.all_at_once() else len(self.nodes))
        self.time_limit = int(60 + steps * (self.repetitions * self.test_time_s * 2 + 3))

    def all_at_once(self) -> bool:
        """Every node measures at once, unless the nodes share one host's CPUs (partition extra ``host_cpus``)."""
        return not self.current_partition.extras.get('host_cpus')

    @run_after('setup')
    def node_figures(self):
        """The performance variables: each node's own loopback stream (its CPU and memory decide it)."""
        for name, label in (('min_node_mbps', 'slowest node\'s loopback stream'),
                            ('median_node_mbps', 'median node\'s loopback stream')):
            self.add_figure(name, sn.make_performance_function(self._summary(name), 'Mbit/s'),
                            figures.cpu_bound(label))
        self.add_figure('min_to_median', sn.make_performance_function(self._summary('min_to_median'), 'ratio'),
                        figures.ratio('slowest node / the nodes measured beside it'))

    @run_before('run')
    def write_driver(self):
        template = self.current_partition.extras.get('on_named_node') or SLURM_ON_NAMED_NODE
        prefixes = {n: ' '.join(shlex.quote(str(t).format(node=n)) for t in template) for n in self.nodes}
        opts = ['-r', str(self.repetitions), '-t', str(self.test_time_s), '-m', '1M']
        with open(os.path.join(self.stagedir, DRIVER), 'w') as fp:
            fp.write(driver_script(self.nodes, prefixes, self.kernels.kernels_dir, opts, self.passes,
                                   self.node_prefix('on_each_node', nodes=len(self.nodes))
                                   if self.all_at_once() else None))
        self.job.launcher = getlauncher('local')()
        self.executable = 'bash'
        self.executable_opts = [DRIVER]

    def pass_figures(self) -> dict[str, list[float | None]]:
        """{node: each pass's loopback stream (the median of its repetitions), None where it gave none}."""
        out: dict[str, list[float | None]] = {}
        for node in self.nodes:
            out[node] = []
            for k in range(self.passes):
                path = os.path.join(self.stagedir, NODE_DIR, f'{node}.{k}.json')
                try:
                    out[node].append(float(results.get(results.load_result(path), 'summary.throughput_mbps.median')))
                except (results.KernelResultError, KeyError, TypeError, ValueError):
                    out[node].append(None)
        return out

    def figures(self) -> dict[str, float | None]:
        """{node: its best pass}."""
        return {n: max((v for v in p if v is not None), default=None) for n, p in self.pass_figures().items()}

    def peer_ratios(self) -> dict[str, tuple[float, float]]:
        """:func:`peer_ratios` in the order this job measured the nodes."""
        order = None if self.all_at_once() else turn_order(self.nodes, self.passes)
        return peer_ratios(self.pass_figures(), order)

    def unauthenticated_passes(self) -> list[str]:
        """Passes whose result does not prove the session was authenticated (:func:`.tcppair.auth_problem`)."""
        problems = []
        for node in self.nodes:
            for k in range(self.passes):
                try:
                    doc = results.load_result(os.path.join(self.stagedir, NODE_DIR, f'{node}.{k}.json'))
                except results.KernelResultError:
                    continue            # not measured: unmeasured_nodes says so when no pass was
                problem = auth_problem(doc)
                if problem:
                    problems.append(f'node {node} pass {k}: {problem}')
        return problems

    def cpu_limits(self) -> dict[str, list[CpuLimit | None]]:
        return {node: [read_cpu_limit(os.path.join(self.stagedir, NODE_DIR, f'{node}.{k}.cpu'))
                       for k in range(self.passes)] for node in self.nodes}

    @sn.deferrable
    def _summary(self, what: str) -> float:
        measured = [v for v in self.figures().values() if v is not None]
        if not measured:
            raise SanityError('no node was measured')
        if what == 'min_to_median':
            ratios = [r for r, _ in self.peer_ratios().values()]
            return min(ratios) if ratios else 1.0       # one node measured: it has no peers to fall behind
        return {'min_node_mbps': min(measured), 'median_node_mbps': statistics.median(measured)}[what]

    def payload_bytes(self) -> float:
        return 0.0

    @sanity_function
    def validate(self):
        problems = self.job_witness() or unmeasured_nodes(self.figures()) + self.unauthenticated_passes()
        problems = [f'node {x} (left out of the probe)' for x in self.nodes_left_out] + problems
        if problems:
            raise SanityError('; '.join(problems))
        limits = self.cpu_limits()      # read once: the performance stage uses what sanity found
        one_machine = bool(self.current_partition.extras.get('host_cpus'))
        self.cpu_quota_note = shared_cpu_quota(limits, one_machine=one_machine) or ''
        self._own_quotas = own_cpu_quotas(limits)
        if self.cpu_quota_note:
            getlogger().warning(f'{self.display_name}: {self.cpu_quota_note}')
        return True

    def recorded_only(self) -> set[str]:
        """Where every node shares the quota that throttled them, the ratio to the median node is recorded, not
        asserted (:func:`shared_cpu_quota`)."""
        return {'min_to_median'} if self.cpu_quota_note else set()

    @run_before('performance')
    def name_slow_nodes(self):
        """A slow node fails the performance stage, named (ReFrame's own message would name only the ratio);
        not where every node shares the quota that throttled them (:func:`shared_cpu_quota`), nor in a dry run
        (ReFrame runs the stage's hooks though nothing was measured)."""
        if self.cpu_quota_note or self.is_dry_run():
            return
        problems = slow_nodes(self.peer_ratios(), self.figures(), self.min_node_fraction, self._own_quotas)
        if problems:
            raise PerformanceError('; '.join(problems))
