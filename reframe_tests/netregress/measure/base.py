"""The abstract check every netregress benchmark builds on (our kernels, NetPIPE, IMB, iperf3, OSU, NAS).

Structure (as hpctestlib's osu.py: fixtures -> abstract benchmark -> thin leaves):

``NetregressCheck`` (here)
    interconnect parameter (filtered by the partition's ``ic-<name>`` features), rank placement from the
    interconnect table, byte-counter snapshots before/after on every node, references from ``reference_values/``
    (missing reference -> failure; the sources and bands: ``netregress.judge.bands``), one sanity entry point collecting
    every witness.
``MpiCheck``, ``MpiKernelCheck`` (``netregress.mpicheck``)
    an MPI programming environment: the environment's launcher template, the variables that force the MPI onto the
    interconnect and make it report its transport, and the transport witness. OSU/NAS checks derive from this.
``TcpPairCheck``, ``TcpKernelCheck`` (``netregress.tcppair``)
    a server started on the first node and a client on the last (both on one host for a one-node interconnect).
``ExitStatusPlugin``, ``SweepPlugin``, ``KernelMixin`` (``netregress.plugins``)
    the benchmark's exit status; exponential sweeps; the kernel build fixture and the JSON result
    (``--json result.json``) read through ``netregress.results``.

Site data lives in config/ (partition ``extras``), never here. Partition extras used:

``interconnects``  ``{<ic>: {iface: NAME, subnet: CIDR}}`` placeholders for the interconnect table
``on_node``        command prefix running one task on node ``{index}`` of the job (``[]`` = run in place)
``on_each_node``   command prefix running one task on each of ``{nodes}`` nodes (``[]`` = run in place)
"""
from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import PerformanceError, SanityError

from ..judge import bandrules, bands, figures
from . import interconnects, knownfaults, provenance, results, slurm
from ..judge.bands import fraction_of

COUNTERS_FILE = 'counters.txt'

CORE_LIMIT_CMD = 'ulimit -c unlimited 2>/dev/null || true'   # see NetregressCheck.keep_cores

# On a one-host system other processes use `lo` too, so host-wide counters cannot prove where a payload went.
# Partitions with extras.private_netns re-run the job script in a new network namespace holding only `lo` (root:
# unshare -n; otherwise an unprivileged user namespace, unshare -rn); where neither works, say so and go on.
PRIVATE_NETNS_GUARD = (
    'if [ -z "${NETREGRESS_NETNS:-}" ]; then for u in "unshare -n" "unshare -rn"; do '
    'if $u true 2>/dev/null; then export NETREGRESS_NETNS="$u"; '
    'exec $u bash -c \'ip link set lo up && exec bash "$0"\' "$0"; fi; done; '
    'echo "netregress: no private network namespace (unshare failed): byte counters include other processes" >&2; '
    'fi'
)
RESULT_FILE = 'result.json'


def _interconnect_names() -> list[str]:
    return interconnects.load().names


def stage_file(check, name) -> str:
    """Absolute path of a stage-directory file (``name`` may be a deferred expression such as ``stdout``)."""
    name = name.evaluate() if hasattr(name, 'evaluate') else name
    return os.path.join(check.stagedir, str(name))


def _evaluate(checks, notes) -> bool:
    """Run witness functions in order; raise SanityError with every problem found, followed by ``notes(problems)``."""
    problems: list[str] = []
    for check in checks:
        problems += check()
    if problems:
        raise SanityError('; '.join(problems + notes(problems)))
    return True


def repetition_precision(kind: str) -> float:
    """The sequential rule's target for a figure of this kind: a band of +-x needs the median known to about
    +-x/4, and the narrowest band a figure gets is its kind's floor (config/interconnects.yaml ``baselines.floor``:
    5 % for a link-bound throughput gives 1.25 %, 10 % for CPU-bound and latency figures gives 2.5 %). A wider band
    drawn from a noisy figure's own spread only needs less."""
    floor = bandrules.load().floor
    return floor.get(kind, floor.get('throughput', 0.05)) / 4

class NetregressCheck(rfm.RunOnlyRegressionTest):
    """Abstract base: interconnect parameter, placement, provenance counters and references."""

    #: The interconnect under test (a key of ``config/interconnects.yaml``); a check only runs on partitions
    #: whose ``features`` contain ``ic-<name>``.
    interconnect = parameter(_interconnect_names(), fmt=lambda ic: ic, loggable=True)

    #: Key of this test in ``reference_values/`` (e.g. ``tcp.stream.blocking``). Set by every leaf.
    #:
    #: :type: :class:`str`
    ref_test = variable(str, loggable=True)

    #: Ranks (or processes) the benchmark runs; placed per the interconnect's ``nodes``.
    #:
    #: :type: :class:`int`
    #: :default: ``2``
    num_ranks = variable(int, value=2)

    #: Cap the ranks at the partition's ``host_cpus`` (False: the benchmark needs exactly ``num_ranks``, e.g. NAS
    #: BT/SP on a square number of processes).
    #:
    #: :type: :class:`bool`
    #: :default: ``True``
    fit_host_cpus = variable(typ.Bool, value=True)

    #: Fraction of the kernel's payload each node's interface under test must have carried.
    #:
    #: :type: :class:`float`
    #: :default: ``1.0`` (point-to-point: every payload byte crosses)
    payload_fraction = variable(float, value=1.0)

    #: Record /proc/net/dev (and InfiniBand port counters) on every node before and after the run.
    #:
    #: :type: :class:`bool`
    #: :default: ``True``
    record_counters = variable(typ.Bool, value=True)

    #: What the counters showed on the interface under test, per node (filled by sanity; goes to the perflog).
    #:
    #: :type: :class:`str`
    nr_wire = variable(str, value='', loggable=True)

    #: The check moves its payload over the interconnect under test between its nodes (False: it measures inside
    #: each node, like the node loopback probe). Node coverage counts a node for a fabric only through passing
    #: checks that did (netregress_postrun.coverage).
    #:
    #: :type: :class:`bool`
    #: :default: ``True``
    nr_fabric_payload = variable(typ.Bool, value=True, loggable=True)

    #: Where the references came from: a host baseline, the committed file, or none yet (goes to the perflog).
    #:
    #: :type: :class:`str`
    nr_reference_source = variable(str, value='', loggable=True)

    #: Figures measured and recorded but not asserted here: CPU-bound absolutes on a partition whose extra
    #: ``assert_cpu_bound`` is False that the host baseline has not seen in ``min_runs`` runs yet (filled before
    #: the performance stage; goes to the perflog).
    #:
    #: :type: :class:`str`
    nr_recorded_only = variable(str, value='', loggable=True)

    #: Figures judged by the wide band of CPU-bound figures on shared CPUs (``baselines.shared_cpu`` of
    #: config/interconnects.yaml), comma-separated.
    #:
    #: :type: :class:`str`
    nr_shared_cpu_band = variable(str, value='', loggable=True)

    #: Baseline-free bands fixed by the check: ``{variable: (value, lower, upper)}`` (fraction of a link's rate,
    #: ratio to a peer measured in the same job); upper None: no upper bound. They win over baselines and
    #: committed references.
    #:
    #: :type: :class:`Dict[str, Tuple[float, float, float | None]]`
    fixed_references = variable(typ.Dict[str, typ.Tuple[float, float, object]], value={})

    #: Performance variable of a link-bound stream (asserted as a fraction of the most payload one link of the
    #: fabric carries, ``payload_mbps``, where the interconnect table gives a rate); None: not link-bound.
    #:
    #: :type: :class:`str` or ``None``
    link_bound_metric = variable(str, type(None), value=None)

    #: Seconds per repetition of a link-bound stream on a fabric with a line rate. Each repetition starts after a
    #: barrier, and Linux restarts TCP slow start after an idle gap: at 0.3 s per repetition a gige MPI stream
    #: read 950-959 Mbit/s against iperf3's 956.
    #:
    #: :type: :class:`float`
    #: :default: ``1.0``
    link_bound_repetition_s = variable(float, value=1.0)

    #: The sequential repetition rule of the kernels (``-r MIN:MAX --precision P``, docs/mpi.md "Repetitions"):
    #: repetitions of 1/``repetition_split`` of the check's time, at least its count and at most that many times it,
    #: stopped once the median's 90 % interval is within a quarter of the narrowest band the figure can be judged by
    #: (:func:`repetition_precision`). A quiet host stops at the minimum, a noisy one spends at most what the fixed
    #: count spent. 1 (the default until a quiet host shows the rule saves time without widening a band): the fixed
    #: count of full-length repetitions; ``-S repetition_split=3`` tries the rule.
    #:
    #: :type: :class:`int`
    #: :default: ``1``
    repetition_split = variable(int, value=1)

    #: Transports the MPI library reported (filled by sanity; goes to the perflog).
    #:
    #: :type: :class:`str`
    nr_transports = variable(str, value='', loggable=True)

    #: What each performance variable of this case is, ``{name: {'kind', 'label', 'better'}}`` with ``name`` as in
    #: the run report's perfvalues (``@size`` included): filled at setup from the figures the check declared with
    #: its performance variables (netregress.figures); goes to the run report, where netregress_postrun reads it.
    #:
    #: :type: :class:`Dict[str, Dict[str, str]]`
    nr_figures = variable(typ.Dict[str, typ.Dict[str, str]], value={}, loggable=True)

    # -- setup ------------------------------------------------------------------------------------------------

    @run_after('init')
    def restrict_to_partitions_offering_interconnect(self):
        self.valid_systems = [f'+ic-{self.interconnect}']

    @run_after('setup')
    def apply_partition_limits(self):
        """Job time limit and how long a job may wait in the queue are site data: partition extras
        ``time_limit`` and ``max_pending_time`` (ReFrame's defaults where absent)."""
        extras = self.current_partition.extras
        if extras.get('time_limit'):
            self.time_limit = extras['time_limit']
        if extras.get('max_pending_time'):
            self.max_pending_time = extras['max_pending_time']

    @run_after('setup')
    def resolve_interconnect(self):
        table = interconnects.load()
        self.ic = table.interconnect(self.interconnect)
        ctx = (self.current_partition.extras.get('interconnects') or {}).get(self.interconnect) or {}
        self.ic_context = {k: str(v) for k, v in ctx.items()}

    @run_after('setup')
    def place_ranks(self):
        """One node: all ranks there. Several nodes: spread ranks evenly, at least one per node.

        Nodes that share one host's CPUs (partition extra ``host_cpus``, the vcluster) get no more ranks than there
        are CPUs: an oversubscribed run measures the scheduler (4-rank 1 MB collectives on 2 cores swung 20x
        between runs), and a band derived from its spread would catch nothing."""
        nodes = self.ic.nodes
        host_cpus = self.current_partition.extras.get('host_cpus')
        if self.fit_host_cpus and host_cpus and self.num_ranks > int(host_cpus):
            self.num_ranks = max(int(host_cpus), nodes)
        self.num_tasks = max(self.num_ranks, nodes)
        self.num_tasks_per_node = -(-self.num_tasks // nodes)
        if nodes == 1 and self.current_partition.scheduler.registered_name != 'local':
            # Slurm rejects --ntasks-per-node above a node's CPU count even with --overcommit (4 ranks, 2 CPUs);
            # --nodes=1 places them all on one node as well.
            self.num_tasks_per_node = None
            self.job.options += ['--nodes=1']

    @property
    def iface(self) -> str | None:
        return self.ic_context.get('iface')

    def node_prefix(self, key: str, **ctx) -> str:
        """Render partition extra ``on_node`` / ``on_each_node`` with ``ctx`` (empty string = run in place)."""
        template = self.current_partition.extras.get(key) or []
        return ' '.join(shlex.quote(str(t).format(**ctx)) for t in template)

    def pair_cpu_prefix(self) -> str:
        """``taskset -c N`` for both ends of a TCP pair (our kernels, iperf3, NPtcp) where the partition extra
        ``pair_cpu`` says so (nodes that share one host's CPUs), else empty.

        On the 2-vCPU VM the scheduler put client and server on one CPU in some runs and on two in others; a
        wakeup across vCPUs costs tens of microseconds there, so the same loopback check read 4.4 or 46-115 us
        round trip and 0.3 or 4.5-9 Gbit/s 1 MiB ping-pong (unpinned, consecutive runs). Pinned to one CPU the
        8-byte round trip held 4.81-4.96 us over 10 runs."""
        cpu = self.current_partition.extras.get('pair_cpu')
        return '' if cpu is None else f'taskset -c {int(cpu)}'

    def end_cpu_prefix(self, end: int) -> str:
        """CPU placement of end ``end`` (0: the server, 1: the client) of a TCP pair this job runs: the pair's CPU
        here; an MPI check places a yardstick like its ranks (:meth:`MpiCheck.end_cpu_prefix`)."""
        return self.pair_cpu_prefix()

    def counted_nodes(self) -> int:
        """Nodes whose counters are read (the interconnect's span; a check using more nodes says so)."""
        return self.ic.nodes

    @run_before('run', always_last=True)
    def snapshot_counters(self):
        """Counter snapshots enclose the benchmark step alone: after every other pre-run step (servers, an iperf3
        yardstick on the same link) and after every post-run step."""
        if not self.record_counters:
            return
        prefix = self.node_prefix('on_each_node', nodes=self.counted_nodes())

        def snap(when):
            cmd = f'sh -c {shlex.quote(provenance.snapshot_command(when))}'
            return f'{prefix} {cmd} >> {COUNTERS_FILE} 2>&1'.strip()

        self.prerun_cmds = self.prerun_cmds + [f': > {COUNTERS_FILE}', snap('before')]
        self.postrun_cmds = self.postrun_cmds + [snap('after')]
        if self.current_partition.extras.get('private_netns'):
            self.prerun_cmds = [PRIVATE_NETNS_GUARD] + self.prerun_cmds

    # -- sanity -----------------------------------------------------------------------------------------------

    def payload_bytes(self) -> float:
        """Bytes the benchmark moved between the ranks (leaves override; used by the counter witness)."""
        raise NotImplementedError

    def witnesses(self) -> list:
        """Callables returning lists of problems; sanity fails with all of them. Subclasses extend."""
        return [self.counters_witness] if self.record_counters else []

    def counter_deltas(self):
        """(per-host counter deltas of ``counters.txt``, None) or (None, the problem reading them)."""
        try:
            with open(os.path.join(self.stagedir, COUNTERS_FILE)) as fp:
                snaps = provenance.parse_snapshots(fp.read())
        except FileNotFoundError:
            return None, f'{COUNTERS_FILE} not written: the job died before the counters were read'
        if 'before' not in snaps or 'after' not in snaps:
            return None, f'counter snapshots incomplete (have: {", ".join(snaps) or "none"}); a node did not answer'
        return provenance.deltas(snaps['before'], snaps['after']), None

    def counters_witness(self) -> list[str]:
        delta, problem = self.counter_deltas()
        if problem:
            return [problem]
        hosts = sorted(delta)
        problems = []
        if len(hosts) < self.ic.nodes:
            problems.append(f'{self.interconnect} needs {self.ic.nodes} nodes, counters came from '
                            f'{len(hosts)} ({", ".join(hosts)})')
        try:
            payload = self.payload_bytes()
        except results.KernelResultError:
            return problems    # no result to compare the counters with: the kernel witness says why
        kind = self.ic.counters
        if kind == 'interface' and not self.iface:
            return problems + [f'partition {self.current_partition.fullname} names no iface for {self.interconnect}']
        self.nr_wire = ' '.join(
            f'{h}:{self.iface}={delta[h][self.iface].total}' if kind == 'interface' and self.iface in delta[h]
            else f'{h}:max={max((c.total for c in delta[h].values()), default=0)}' for h in hosts
        ) + f' payload={payload:.0f}'
        problems += provenance.check_counters(delta, kind=kind, iface=self.iface, hosts=hosts,
                                              payload_bytes=payload, fraction=self.payload_fraction)
        return problems

    def job_witness(self) -> list[str]:
        """What the scheduler and srun saw happen to the job (never started, a task that died, time limit, node
        failure), named first."""
        if not self.job.nodelist and self.current_partition.scheduler.registered_name != 'local':
            return [f'the job never started (state {self.job.state}; cancelled after max_pending_time '
                    f'{self.max_pending_time}): {self.partition_nodes()}']
        path = stage_file(self, self.stderr)
        if not os.path.exists(path):
            return []
        with open(path, errors='replace') as fp:
            text = fp.read()
        problems = [f'{f} (srun)' for f in results.failed_tasks(text)]
        cause = results.scheduler_cancellation(text)
        if cause:
            problems.append(f'the scheduler cancelled the job {cause} (time_limit {self.time_limit})')
        return problems

    def partition_nodes(self) -> str:
        """Slurm's node states of this partition, for a job that could not start."""
        part = self.current_partition
        if part.scheduler.registered_name not in ('slurm', 'squeue'):
            return 'node states unknown'
        return slurm.node_states(slurm.slurm_partition(part.access, part.name))

    @sanity_function
    def validate(self):
        """Every witness (scheduler, kernel status, counters, transport) must agree; all problems are reported at
        once."""
        return _evaluate([self.job_witness] + self.witnesses(), self.failure_notes)

    def failure_notes(self, problems: Sequence[str]) -> list[str]:
        """Where a failed job's crashed processes left their cores (:meth:`keep_cores`), and the declared known
        fault of the environment the problems match, if any."""
        cores = results.core_files(self.stagedir)
        notes = [f'core file kept: {", ".join(cores)}'] if cores else []
        env = self.current_environ
        reason = knownfaults.known_failure(env.extras.get('known_faults') or [], problems) if env else None
        return notes + ([f'{results.KNOWN_FAILURE_MARK} {env.name}: {reason}'] if reason else [])

    @run_before('run')
    def keep_cores(self):
        """A process of the job that crashes leaves its core in its working directory, the stage directory, kept
        for a failed test (where ``core_pattern`` is the kernel's default): the Open MPI 4 SIGSEGV at start-up was
        placed from such a core (docs/validation.md). srun passes the limit on to the tasks; the local scheduler's
        ranks inherit it."""
        self.prerun_cmds = [CORE_LIMIT_CMD] + self.prerun_cmds

    # -- performance ------------------------------------------------------------------------------------------

    def declare_figure(self, name: str, figure: figures.Figure):
        """Declare what performance variable ``name`` is (a metric without ``@size`` covers every ``name@size``)."""
        self.declared_figures = {**getattr(self, 'declared_figures', {}), name: figure}

    def add_figure(self, name: str, function, figure: figures.Figure):
        """Define performance variable ``name`` (a performance function) and declare its figure."""
        self.perf_variables[name] = function
        self.declare_figure(name, figure)

    @run_after('setup', always_last=True)
    def record_figures(self):
        """Every performance variable has a declared figure (else the case fails here, naming it); ``nr_figures``
        records them. Runs after every other setup hook (ReFrame runs a base class's last hooks last)."""
        self.nr_figures = figures.describe(f'{type(self).__name__} ({self.unique_name})', self.perf_variables,
                                           getattr(self, 'declared_figures', {}))

    @run_after('setup')
    def assert_link_rate(self):
        """On a fabric with a configured line rate, a link-bound stream is also asserted as a fraction of the most
        payload a link carries (the rate less framing): a band that needs no baseline and holds on any healthy
        machine."""
        if not self.link_bound_metric or not self.ic.payload_mbps:
            return
        lower, upper = interconnects.load().fixed_band('link_fraction')
        self.add_figure('fraction_of_link', sn.make_performance_function(
            fraction_of(self, self.link_bound_metric, self.ic.payload_mbps), 'ratio'),
            figures.ratio(f'{self.link_bound_metric} / the {self.ic.payload_mbps:g} Mbit/s a link carries'))
        self.fixed_references = {**self.fixed_references, 'fraction_of_link': (1.0, lower, upper)}

    def repetition_s(self, default: float) -> float:
        """Seconds per repetition: ``default`` (split by the sequential rule), or at least
        ``link_bound_repetition_s`` for a link-bound stream."""
        split = round(default / max(self.repetition_split, 1), 6)
        if self.link_bound_metric and self.ic.rate_mbps:
            return max(split, self.link_bound_repetition_s)
        return split

    def repetition_opts(self, count: int, kind: str) -> list[str]:
        """``-r`` for ``count`` repetitions of a figure of this kind: the fixed count, or the sequential rule from
        ``count`` to ``repetition_split`` x ``count``."""
        if self.repetition_split <= 1:
            return ['-r', str(count)]
        return ['-r', f'{count}:{count * self.repetition_split}', '--precision', f'{repetition_precision(kind):g}']

    @run_before('performance')
    def apply_references(self):
        """A reference for every performance variable, from the first source that has one:

        1. a baseline-free band the check fixed itself (``fixed_references``);
        2. on partitions with ``extras.references: host`` (the embedded systems), the system's committed file
           where it holds the figure (its machine-independent streams, docs/references.md), else this host's baseline
           (netregress/baselines.py): the median of its recent runs with a band from their spread. Without a
           baseline, or for a variable it does not know yet, the figure is measured, logged and recorded
           afterwards (tools/validate), not asserted;
        3. otherwise the system's committed ``<reference directory>/<system>.yaml``: a missing reference fails the check
           (:meth:`fail_on_missing_references`), after the values were measured and logged.

        Against a host baseline, a partition whose extra ``assert_cpu_bound`` is False (nodes that share a virtual
        machine's CPUs) judges its CPU-bound absolute figures (:meth:`asserted_absolute` False) by the wide band
        their measured spread supports (``baselines.shared_cpu``: a factor of 4-15 either side, so a 30x fall
        always fails), and records them unjudged only while the baseline has not seen them; its ratios and
        link-bound streams get the normal bands. Committed references are asserted whole (the logic:
        :func:`netregress.judge.bands.apply`).
        """
        bands.apply(self)

    def recorded_only(self) -> set[str]:
        """Performance variables this run records without asserting them, whatever their reference (a check
        that found, after measuring, that a figure cannot be judged on this machine says so and names them)."""
        return set()

    def asserted_absolute(self, name: str) -> bool:
        """Whether figure ``name`` is asserted against its reference's normal band on this partition (by its
        declared kind; the others get the shared-CPU band, :meth:`apply_references`).

        Everything is, except where the partition extra ``assert_cpu_bound`` is False: there a figure is asserted
        so only when it is a ratio or a link-bound stream on a fabric with a line rate. On a 2-vCPU virtual machine
        the CPU-bound figures of two consecutive runs differed up to 2x (Intel MPI shared-memory 1 MiB stream 86
        vs 145 Gbit/s, MPI over unshaped veth 11 vs 20 Gbit/s, a collective 10.5 vs 2.8 GB/s): they measured
        the hypervisor's moment (steal time, where it placed the vCPUs), and no band within 0.67x..1.5x holds
        them."""
        return figures.asserted(self.nr_figures[name]['kind'],
                                 self.current_partition.extras.get('assert_cpu_bound', True),
                                 bool(self.ic.payload_mbps))

    @run_after('performance')
    def fail_on_missing_references(self):
        """A performance variable ReFrame could not evaluate (it only warns and skips it) or without a reference
        fails the check, naming it."""
        measured = {key.split(':')[-1] for key in self.perfvalues}
        lost = sorted(set(self.perf_variables) - measured)
        if lost:
            raise PerformanceError(f'performance variable(s) {", ".join(lost)} could not be evaluated (see the '
                                   f'warning in the log): a figure that is not measured is not a pass')
        missing = getattr(self, 'missing_references', [])
        if missing:
            more = f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''
            raise PerformanceError(f'{missing[0]}{more}')

