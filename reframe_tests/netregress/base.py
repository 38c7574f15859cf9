"""Abstract checks shared by every netregress benchmark (our kernels, NetPIPE, IMB, iperf3, OSU, NAS).

Structure (as hpctestlib's osu.py: fixtures -> abstract benchmark -> thin leaves):

``NetregressCheck``
    interconnect parameter (filtered by the partition's ``ic-<name>`` features), rank placement from the
    interconnect table, byte-counter snapshots before/after on every node, references from ``reference_values/``
    (missing reference -> failure), one sanity entry point collecting every witness.
``MpiCheck(NetregressCheck)``
    an MPI programming environment: the environment's launcher template, the variables that force the MPI onto the
    interconnect and make it report its transport, and the transport witness. OSU/NAS checks derive from this.
``TcpPairCheck(NetregressCheck)``
    a server started on the first node and a client on the last (both on one host for a one-node interconnect).
``KernelMixin``
    the kernel build fixture and the JSON result (``--json result.json``) read through ``netregress.results``.

Site data lives in config/ (partition ``extras``), never here. Partition extras used:

``interconnects``  ``{<ic>: {iface: NAME, subnet: CIDR}}`` placeholders for the interconnect table
``on_node``        command prefix running one task on node ``{index}`` of the job (``[]`` = run in place)
``on_each_node``   command prefix running one task on each of ``{nodes}`` nodes (``[]`` = run in place)
"""
from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import zlib
from collections.abc import Mapping, Sequence

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import (fixture, parameter, performance_function, run_after, run_before,
                                   sanity_function, variable)
from reframe.core.exceptions import PerformanceError, SanityError

from . import baselines, figures, interconnects, launch, provenance, references, results, slurm
from .build import KernelBuild, MpiKernelBuild, TcpKernelBuild

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
SERVER_OUT = 'server.out'       # what a TcpPairCheck's server printed (iperf3's receiver intervals)


def _interconnect_names() -> list[str]:
    return interconnects.load().names


def stage_file(check, name) -> str:
    """Absolute path of a stage-directory file (``name`` may be a deferred expression such as ``stdout``)."""
    name = name.evaluate() if hasattr(name, 'evaluate') else name
    return os.path.join(check.stagedir, str(name))


def _evaluate(checks, notes) -> bool:
    """Run witness functions in order; raise SanityError with every problem found, followed by ``notes()``."""
    problems: list[str] = []
    for check in checks:
        problems += check()
    if problems:
        raise SanityError('; '.join(problems + notes()))
    return True


def known_fault(faults: Sequence[Mapping], check: str, interconnect: str, oversubscribed: bool) -> str | None:
    """The reason of the first declared fault (environment extra ``known_faults``) that matches this run, else None:
    the check is listed, the interconnect is among ``interconnects`` (where given), and the run is oversubscribed
    (where ``oversubscribed`` is set)."""
    for fault in faults:
        if (check in fault.get('checks', [])
                and ('interconnects' not in fault or interconnect in fault['interconnects'])
                and (not fault.get('oversubscribed') or oversubscribed)):
            return fault['reason']
    return None


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
    fit_host_cpus = variable(bool, value=True)

    #: Fraction of the kernel's payload each node's interface under test must have carried.
    #:
    #: :type: :class:`float`
    #: :default: ``1.0`` (point-to-point: every payload byte crosses)
    payload_fraction = variable(float, value=1.0)

    #: Record /proc/net/dev (and InfiniBand port counters) on every node before and after the run.
    #:
    #: :type: :class:`bool`
    #: :default: ``True``
    record_counters = variable(bool, value=True)

    #: What the counters showed on the interface under test, per node (filled by sanity; goes to the perflog).
    #:
    #: :type: :class:`str`
    nr_wire = variable(str, value='', loggable=True)

    #: Where the references came from: a host baseline, the committed file, or none yet (goes to the perflog).
    #:
    #: :type: :class:`str`
    nr_reference_source = variable(str, value='', loggable=True)

    #: Figures measured and recorded but not asserted here: CPU-bound absolutes on a partition whose extra
    #: ``assert_cpu_bound`` is False (filled before the performance stage; goes to the perflog).
    #:
    #: :type: :class:`str`
    nr_recorded_only = variable(str, value='', loggable=True)

    #: Baseline-free bands fixed by the check: ``{variable: (value, lower, upper)}`` (fraction of a link's rate,
    #: ratio to a peer measured in the same job); they win over baselines and committed references.
    #:
    #: :type: :class:`Dict[str, Tuple[float, float, float]]`
    fixed_references = variable(typ.Dict[str, typ.Tuple[float, float, float]], value={})

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

    #: Transports the MPI library reported (filled by sanity; goes to the perflog).
    #:
    #: :type: :class:`str`
    nr_transports = variable(str, value='', loggable=True)

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

    @run_before('run', always_last=True)
    def snapshot_counters(self):
        """Counter snapshots enclose the benchmark step alone: after every other pre-run step (servers, an iperf3
        yardstick on the same link) and after every post-run step."""
        if not self.record_counters:
            return
        prefix = self.node_prefix('on_each_node', nodes=self.ic.nodes)

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
        """Slurm's node states of this partition (``sinfo``), for a job that could not start."""
        part = self.current_partition
        if part.scheduler.registered_name not in ('slurm', 'squeue') or not shutil.which('sinfo'):
            return 'node states unknown'
        parts = [slurm.slurm_partition(part.access, part.name)]
        try:
            out = subprocess.run(['sinfo', '-h', '-p', parts[0], '-o', '%T:%N'], capture_output=True, text=True,
                                 timeout=30)
        except subprocess.TimeoutExpired:
            return f'partition {parts[0]}: sinfo did not answer in 30 s (slurmctld down?)'
        states = ', '.join(out.stdout.split()) or out.stderr.strip() or 'no nodes'
        return f'partition {parts[0]} nodes {states}'

    @sanity_function
    def validate(self):
        """Every witness (scheduler, kernel status, counters, transport) must agree; all problems are reported at
        once."""
        return _evaluate([self.job_witness] + self.witnesses(), self.core_notes)

    def core_notes(self) -> list[str]:
        """Where a failed job's crashed processes left their cores (:meth:`keep_cores`)."""
        cores = results.core_files(self.stagedir)
        return [f'core file kept: {", ".join(cores)}'] if cores else []

    @run_before('run')
    def keep_cores(self):
        """A process of the job that crashes leaves its core in its working directory, the stage directory, kept
        for a failed test (where ``core_pattern`` is the kernel's default): the Open MPI 4 SIGSEGV at start-up was
        placed from such a core (docs/validation.md). srun passes the limit on to the tasks; the local scheduler's
        ranks inherit it."""
        self.prerun_cmds = [CORE_LIMIT_CMD] + self.prerun_cmds

    # -- performance ------------------------------------------------------------------------------------------

    @run_after('setup')
    def assert_link_rate(self):
        """On a fabric with a configured line rate, a link-bound stream is also asserted as a fraction of the most
        payload a link carries (the rate less framing): a band that needs no baseline and holds on any healthy
        machine."""
        if not self.link_bound_metric or not self.ic.payload_mbps:
            return
        lower, upper = interconnects.load().fixed_band('link_fraction')
        self.perf_variables['fraction_of_link'] = sn.make_performance_function(
            fraction_of(self, self.link_bound_metric, self.ic.payload_mbps), 'ratio')
        self.fixed_references = {**self.fixed_references, 'fraction_of_link': (1.0, lower, upper)}

    def repetition_s(self, default: float) -> float:
        """Seconds per repetition: ``default``, or at least ``link_bound_repetition_s`` for a link-bound stream."""
        if self.link_bound_metric and self.ic.rate_mbps:
            return max(default, self.link_bound_repetition_s)
        return default

    @run_before('performance')
    def apply_references(self):
        """A reference for every performance variable, from the first source that has one:

        1. a baseline-free band the check fixed itself (``fixed_references``);
        2. on partitions with ``extras.references: host`` (the embedded systems), this host's baseline
           (netregress/baselines.py): the median of its recent runs with a band from their spread. Without a
           baseline, or for a variable it does not know yet, the figure is measured, logged and recorded
           afterwards (tools/validate), not asserted;
        3. otherwise the site's committed ``reference_values/<system>.yaml``: a missing reference fails the check
           (:meth:`fail_on_missing_references`), after the values were measured and logged.

        Against a host baseline, a partition whose extra ``assert_cpu_bound`` is False (nodes that share a virtual
        machine's CPUs) asserts no CPU-bound absolute figure (:meth:`asserted_absolute`): they are measured, logged
        and recorded in the baseline; its ratios and link-bound streams are asserted. Committed references are
        asserted whole.
        """
        system, part = self.current_system.name, self.current_partition.name
        env = self.current_environ.name
        refs, self.missing_references, recorded_only = {}, [], []
        host_refs = self.current_partition.extras.get('references') == 'host'
        try:
            refset, self.nr_reference_source = reference_source(system, self.current_partition.extras)
        except (references.ReferenceError, baselines.BaselineError) as err:
            raise PerformanceError(str(err)) from None
        for name, fn in self.perf_variables.items():
            if name in self.recorded_only():
                refs[name] = (0, None, None, fn.unit)
                recorded_only.append(name)
                continue
            if name in self.fixed_references:
                refs[name] = (*self.fixed_references[name], fn.unit)
                continue
            if refset is None:
                refs[name] = (0, None, None, fn.unit)
                continue
            if host_refs and not self.asserted_absolute(name, fn.unit):
                refs[name] = (0, None, None, fn.unit)
                recorded_only.append(name)
                continue
            try:
                refs[name] = refset.lookup(part, env, self.interconnect, self.ref_test, name).as_reframe()
            except references.MissingReferenceError as err:
                if self.current_partition.extras.get('references') != 'host':
                    self.missing_references.append(str(err))
                refs[name] = (0, None, None, fn.unit)
            except references.ReferenceError as err:
                raise PerformanceError(str(err)) from None
        if not refs:
            raise PerformanceError(f'{self.unique_name} defines no performance variables')
        self.nr_recorded_only = ','.join(recorded_only)
        self.reference = {f'{system}:{part}': refs}

    def recorded_only(self) -> set[str]:
        """Performance variables this run records without asserting them, whatever their reference (a check
        that found, after measuring, that a figure cannot be judged on this machine says so and names them)."""
        return set()

    def asserted_absolute(self, name: str, unit: str) -> bool:
        """Whether figure ``name`` is asserted against its reference on this partition.

        Everything is, except where the partition extra ``assert_cpu_bound`` is False: there a figure is asserted
        only when it is a ratio or a link-bound stream on a fabric with a line rate. On a 2-vCPU virtual machine
        the CPU-bound figures of two consecutive runs differed up to 2x (Intel MPI shared-memory 1 MiB stream 86
        vs 145 Gbit/s, MPI over unshaped veth 11 vs 20 Gbit/s, a collective 10.5 vs 2.8 GB/s): they measured
        the hypervisor's moment (steal time, where it placed the vCPUs), and no band within 0.67x..1.5x holds
        them."""
        return figures.asserted(figures.metric_kind(name, unit, self.ref_test),
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


@sn.deferrable
def fraction_of(check, name: str, denominator: float) -> float:
    """check.perf_variables[name] / denominator, looked up when evaluated (leaves define ``name`` later)."""
    try:
        own = check.perf_variables[name]
    except KeyError:
        raise SanityError(f'{check.unique_name} has no {name} to compare') from None
    return float(own.evaluate()) / float(sn.evaluate(denominator))


def reference_source(system: str, extras) -> tuple:
    """(ReferenceSet or None, description) for a partition: its host baseline or the committed references."""
    if extras.get('references') != 'host':
        return references.load(system), f'committed {references.reference_file(system)}'
    found = _host_baseline(system, str(baselines.baseline_path(system)))
    if found is None:
        return None, f'no baseline for host {baselines.host_id()} yet: recording'
    return found


@functools.lru_cache(maxsize=8)
def _host_baseline_cached(system: str, path: str, mtime: float):
    base = baselines.Baseline.load(system)
    if base is None:
        return None
    stale = base.stale_reason()
    if stale:
        return None
    rules = baselines.BandRules.from_table(interconnects.load().baselines)
    return base.reference_set(rules), f'host baseline {base.host_id} ({len(base.runs)} runs)'


def _host_baseline(system: str, path: str):
    mtime = os.stat(path).st_mtime if os.path.exists(path) else -1.0
    return _host_baseline_cached(system, path, mtime)


class ExitStatusPlugin(rfm.RegressionTestPlugin):
    """Records the benchmark's exit status in stdout (first post-run command) for sanity."""

    @run_before('run')
    def mark_exit_status(self):
        self.postrun_cmds = [f'echo "{results.EXIT_MARK} $?"'] + self.postrun_cmds

    def exit_witness(self) -> list[str]:
        try:
            code = results.exit_status(stage_file(self, self.stdout))
        except SanityError as err:
            return [str(err)]
        return [] if code == 0 else [f'{self.executable} exited with {code} ({results.describe_exit(code)})']


class SweepPlugin(rfm.RegressionTestPlugin):
    """Exponential sweeps of our kernels (``-e max_exp -t point_time_s``): throughput asserted at a few sizes."""

    #: Largest message is 2**max_exp bytes.
    #:
    #: :type: :class:`int`
    #: :default: ``20``
    max_exp = variable(int, value=20)

    #: Seconds each size is calibrated to (``-t``); 21 sizes x 0.05 s keeps the sweep near 1.5 s.
    #:
    #: :type: :class:`float`
    #: :default: ``0.05``
    point_time_s = variable(float, value=0.05)

    #: Sizes whose throughput is asserted against references: latency-bound (1 B, 64 B), one page, 64 KiB and
    #: 1 MiB (every size stays in result.json; 21 bands on a shared 2-core machine failed somewhere in most runs
    #: by chance alone).
    #:
    #: :type: :class:`List[int]`
    #: :default: ``[1, 64, 4096, 65536, 1048576]``
    asserted_sizes = variable(typ.List[int], value=[1, 64, 4096, 65536, 1048576])

    def sweep_opts(self) -> list[str]:
        return ['-e', str(self.max_exp), '-t', str(self.point_time_s)]

    @run_after('setup')
    def add_sweep_metrics(self):
        for size in (s for s in self.asserted_sizes if s <= 2 ** self.max_exp):
            self.add_metric(references.metric_name('throughput_mbps', size),
                            f'sweep[size_bytes={size}].throughput_mbps', 'Mbit/s')


class KernelMixin(ExitStatusPlugin):
    """Our kernels: build fixture, exit-status mark and the JSON result."""

    #: The build fixture providing the kernels (MPI kernels; TCP checks use TcpKernelBuild).
    kernels = fixture(MpiKernelBuild, scope='environment')

    @run_after('init')
    def keep_result(self):
        """A passed case keeps the kernel's JSON in its output directory (tools/report draws every size of a sweep
        and the ebb histogram from it); the check's own ``keep_files`` stay."""
        if RESULT_FILE not in self.keep_files:
            self.keep_files = [*self.keep_files, RESULT_FILE]

    def kernel(self, name: str) -> str:
        return os.path.join(self.kernels.kernels_dir, name)

    @property
    def result_path(self) -> str:
        return os.path.join(self.stagedir, RESULT_FILE)

    def kernel_witness(self) -> list[str]:
        try:
            results.kernel_ok(self.result_path, stage_file(self, self.stdout)).evaluate()
        except SanityError as err:
            return [str(err)]
        return []

    def payload_bytes(self) -> float:
        return results.payload_bytes(results.load_result(self.result_path))

    def add_metric(self, name: str, keypath: str, unit: str):
        """Declare performance variable ``name`` read from the result at ``keypath``."""
        self.perf_variables[name] = sn.make_performance_function(results.value(self.result_path, keypath), unit)


class MpiCheck(NetregressCheck):
    """Abstract MPI benchmark: launcher per environment, interconnect forced, transport witnessed."""

    valid_prog_environs = ['+mpi']

    #: Check the transport the MPI library reports against the interconnect table.
    #:
    #: :type: :class:`bool`
    #: :default: ``True``
    check_transport = variable(bool, value=True)

    #: The ranks outnumber the CPUs they run on (set in setup; tools/refs gives such runs a wider band).
    #:
    #: :type: :class:`bool`
    oversubscribed = variable(bool, value=False, loggable=True)

    #: Environment variables set after the interconnect's forcing ones (``-S extra_env_vars=UCX_TLS:all``): to try
    #: a setting by hand, and for the drill's wrong-path fault. The transport and counter witnesses still judge.
    #:
    #: :type: :class:`Dict[str, str]`
    #: :default: ``{}``
    extra_env_vars = variable(typ.Dict[str, str], value={})

    @run_after('setup')
    def force_interconnect(self):
        family = self.current_environ.extras.get('mpi_family')
        if not family:
            raise SanityError(f'environment {self.current_environ.name} has no extras.mpi_family')
        table = interconnects.load()
        self.mpi_path = table.path(self.interconnect, family, self.ic_context)
        self.env_vars.update(self.mpi_path.all_env())
        self.oversubscribed = self.oversubscribes()
        if self.oversubscribed:
            self.env_vars.update(table.oversubscribed_env(family))
        self.env_vars.update(self.extra_env_vars)

    def oversubscribes(self) -> bool:
        """More ranks than CPUs to run them: on nodes that share one host's CPUs (partition extra ``host_cpus``,
        the vcluster), all ranks count; otherwise the ranks on one node against its CPU count."""
        part = self.current_partition
        host_cpus = part.extras.get('host_cpus')
        if host_cpus:
            return self.num_tasks > int(host_cpus)
        cpus = part.processor.num_cpus or (os.cpu_count() if part.scheduler.registered_name == 'local' else None)
        per_node = self.num_tasks_per_node or self.num_tasks
        return bool(cpus) and per_node > cpus

    @run_after('setup')
    def skip_known_faults(self):
        """A defect of the MPI build declared in the environment's ``known_faults`` skips the run, with the
        reason in the report, rather than spending the time limit on a known hang."""
        reason = known_fault(self.current_environ.extras.get('known_faults') or [], type(self).__name__,
                             self.ic.name, self.oversubscribed)
        if reason:
            self.skip(f'known fault of {self.current_environ.name}: {reason}')

    @run_after('setup')
    def use_environment_launcher(self):
        launcher = launch.launcher_for(self.current_environ, self.current_partition)
        if launcher is not None:
            self.job.launcher = launcher
        self.job.launcher.options += self.mpi_path.launcher
        launch.run_unprivileged(self)       # environment extra run_as (LAM/MPI refuses root)

    def pinned_cpus(self) -> int | None:
        """The CPUs ranks are pinned over (rank r on CPU r mod this), or None when this partition does not pin."""
        cpus = self.current_partition.extras.get('host_cpus')
        if not cpus or not self.current_partition.extras.get('pin_ranks'):
            return None
        return int(cpus)

    @run_before('run', always_last=True)
    def pin_ranks_to_host_cpus(self):
        """Nodes sharing one host (partition extra ``host_cpus``, the vcluster): rank r runs on CPU r mod
        host_cpus. Unpinned, two shared-memory ranks sometimes shared a core and sometimes not, and the same
        check measured 10x apart (Intel MPI 1 MiB stream 19 vs 227 Gbit/s, 8-byte RTT 3.8 vs 0.32 us)."""
        self.executable, self.executable_opts = self.rank_command(self.executable, self.executable_opts)

    def rank_command(self, executable: str, opts: Sequence[str]) -> tuple[str, list[str]]:
        """(executable, options) that start one rank of ``executable`` pinned as :meth:`pin_ranks_to_host_cpus`
        says (unchanged where this partition does not pin); a peer in the same job is started the same way."""
        cpus = self.pinned_cpus()
        if cpus is None:
            return executable, list(opts)
        # PMI_RANK: ranks started by Hydra (whose proxies srun starts) or Intel MPI; OMPI_COMM_WORLD_RANK: ranks
        # mpirun starts (local); LAMRANK: ranks LAM's lamd starts; SLURM_PROCID: ranks srun starts itself
        pin = (f'r=${{PMI_RANK:-${{OMPI_COMM_WORLD_RANK:-${{LAMRANK:-${{SLURM_PROCID:-0}}}}}}}}; '
               f'exec taskset -c $((r % {cpus})) "$@"')
        return 'sh', ['-c', shlex.quote(pin), 'nr-pin', executable, *opts]

    def end_cpu_prefix(self, end: int) -> str:
        """A TCP pair in an MPI job (the iperf3 yardstick) runs where ranks ``end`` run, so that the ratio compares
        like with like: with both iperf3 ends on one CPU and the ranks on two, the yardstick read 830-866 Mbit/s
        beside MPI streams of 943-955 while the host's other tenants took CPU."""
        cpus = self.pinned_cpus()
        return '' if cpus is None else f'taskset -c {end % cpus}'

    def console_files(self) -> list:
        """Where the MPI library's console output (its transport reports) went: the job's stdout and stderr, and
        the output of a peer that ran in the same job (the peer's path is judged like the benchmark's)."""
        return [self.stdout, self.stderr]

    def transport_witness(self) -> list[str]:
        if not self.check_transport:
            return []
        text = ''
        for name in self.console_files():
            path = stage_file(self, name)
            if os.path.exists(path):
                with open(path, errors='replace') as fp:
                    text += fp.read()
        found = provenance.transports(text)
        self.nr_transports = ','.join(sorted(found)) or 'none-reported'
        return provenance.check_transports(found, self.mpi_path.transport)

    def witnesses(self) -> list:
        return [self.transport_witness] + super().witnesses()


class MpiKernelCheck(KernelMixin, MpiCheck):
    """Abstract: one of our MPI kernels (nr-mpitest, nr-mpicoll, nr-ebb) writing ``result.json``."""

    #: The kernel executable (set by the leaf's benchmark base).
    #:
    #: :type: :class:`str`
    kernel_name = variable(str)

    #: Options for the kernel (without ``--json``); filled by the leaf.
    #:
    #: :type: :class:`List[str]`
    kernel_opts = variable(typ.List[str], value=[])

    @run_before('run')
    def set_kernel_command(self):
        self.executable = self.kernel(self.kernel_name)
        self.executable_opts = list(self.kernel_opts) + ['--json', RESULT_FILE]

    def witnesses(self) -> list:
        return [self.kernel_witness, self.hosts_witness] + super().witnesses()

    def hosts_witness(self) -> list[str]:
        """The kernel's own ``hosts`` must name as many distinct nodes as the interconnect spans.

        Only for kernels that name every rank's host (nr-mpitest: master and secondary); nr-mpicoll names only
        its root, nr-ebb none: there the counters of every node do the job.
        """
        try:
            doc = results.load_result(self.result_path)
        except results.KernelResultError:
            return []          # reported by the kernel witness
        raw = doc.get('hosts')
        if not isinstance(raw, dict) or len(raw) < 2:
            return []
        hosts = results.hosts(doc)
        if len(hosts) < self.ic.nodes:
            return [f'{self.interconnect} needs ranks on {self.ic.nodes} nodes, kernel ran on {", ".join(hosts)}']
        return []


class TcpPairCheck(NetregressCheck):
    """Abstract two-party TCP benchmark: server on the first node, client on the last, over ``iface``."""

    valid_prog_environs = ['+tcp']
    num_ranks = 1

    #: TCP port of the server; 0 = derived from the test name (stable, spread over 20000-39999).
    #:
    #: :type: :class:`int`
    #: :default: ``0``
    port = variable(int, value=0)

    #: Seconds the client waits for the server to listen.
    #:
    #: :type: :class:`int`
    #: :default: ``10``
    server_wait_s = variable(int, value=10)

    #: Regular expression (grep -E) the server prints once it listens; None: wait until a socket listens on ``port``.
    #:
    #: :type: :class:`str` or ``None``
    #: :default: ``None``
    server_ready_pattern = variable(str, type(None), value=None)

    def server_command(self) -> str:
        """Shell command starting the server (leaves implement)."""
        raise NotImplementedError

    @run_after('setup')
    def choose_port(self):
        if not self.port:
            self.port = 20000 + zlib.crc32(self.unique_name.encode()) % 20000

    @run_after('setup')
    def client_on_last_node(self):
        nodes = self.ic.nodes
        self.num_tasks = nodes
        self.num_tasks_per_node = 1
        self.job.launcher = launch.TemplateLauncher(
            [str(t).format(index=nodes - 1) for t in (self.current_partition.extras.get('on_node') or [])])

    @run_before('run')
    def start_server(self):
        """Find the server's address on ``iface``, start it in the background, stop it after the client."""
        self.prerun_cmds += server_address_cmds(self, 'SERVER_ADDR')
        self.prerun_cmds += background_server_cmds(self, self.server_command(), SERVER_OUT, 'SERVER_PID',
                                                   self.server_ready_pattern, self.port, self.server_wait_s)
        self.postrun_cmds += ['kill $SERVER_PID 2>/dev/null; wait $SERVER_PID 2>/dev/null; true']

    @run_before('run', always_last=True)
    def pin_client_with_server(self):
        """The client runs on the server's CPU (:meth:`NetregressCheck.pair_cpu_prefix`)."""
        pin = self.pair_cpu_prefix().split()
        if pin:
            self.executable_opts = pin[1:] + [self.executable, *self.executable_opts]
            self.executable = pin[0]


def server_address_cmds(check: NetregressCheck, var: str) -> list[str]:
    """Shell lines setting ``$var`` to the first node's IPv4 address on the interface under test.

    The job script itself runs on the first node of the allocation (Slurm's batch host; the only host on a local
    system), so no job step is needed to ask that node.
    """
    return [
        f'{var}=$(ip -4 -o addr show dev {check.iface} | awk \'{{split($4,a,"/"); print a[1]; exit}}\')',
        f'test -n "${var}" || echo "no IPv4 address on {check.iface} of the first node" >&2',
    ]


def background_server_cmds(check: NetregressCheck, command: str, out: str, pid_var: str,
                           ready_pattern: str | None, port: int, wait_s: int) -> list[str]:
    """Shell lines starting ``command`` on the first node in the background and waiting until it listens: until
    it prints ``ready_pattern``, or, for a server that prints nothing (NPtcp's receiver), until a socket listens
    on ``port``. The job script runs on that node (:func:`server_address_cmds`), so ``ss`` sees the socket. A
    fixed one-second sleep was not enough on a loaded CI runner: NPtcp's transmitter met a refused connection."""
    on_first = check.node_prefix('on_node', index=0)
    launch = ' '.join(filter(None, [on_first, check.end_cpu_prefix(0), command]))
    ready = (f'grep -qE {shlex.quote(ready_pattern)} {out}' if ready_pattern else
             f'ss -Hltn "sport = :{int(port)}" | grep -q .')
    return [
        f'{launch} > {out} 2>&1 &', f'{pid_var}=$!',
        f'for i in $(seq {10 * wait_s}); do {ready} && break; kill -0 ${pid_var} 2>/dev/null || break; sleep 0.1; done',
        f'{ready} || {{ echo "server did not start listening within {wait_s} s:" >&2; cat {out} >&2; }}',
    ]


class TcpKernelCheck(KernelMixin, TcpPairCheck):
    """Abstract: nr-tcpserver / nr-tcptest pair writing ``result.json`` on the client side."""

    server_ready_pattern = 'listening on port'

    kernels = fixture(TcpKernelBuild, scope='environment')

    #: Client options (without host, port and ``--json``); filled by the leaf.
    #:
    #: :type: :class:`List[str]`
    client_opts = variable(typ.List[str], value=[])

    #: Server options (without port).
    #:
    #: :type: :class:`List[str]`
    server_opts = variable(typ.List[str], value=[])

    def server_command(self) -> str:
        return ' '.join([self.kernel('nr-tcpserver'), '-p', str(self.port), '--max-tests', '1', *self.server_opts])

    @run_before('run')
    def set_client_command(self):
        self.executable = self.kernel('nr-tcptest')
        self.executable_opts = ['-h', '$SERVER_ADDR', '-p', str(self.port), *self.client_opts,
                                '--json', RESULT_FILE]

    def witnesses(self) -> list:
        return [self.kernel_witness] + super().witnesses()
