"""Abstract MPI checks: an MPI programming environment forced onto the interconnect under test.

``MpiCheck(NetregressCheck)``
    the environment's launcher template, the variables that force the MPI onto the interconnect and make it report
    its transport, rank pinning, known faults of a build, and the transport witness. OSU/NAS checks derive from it.
``MpiKernelCheck(KernelMixin, MpiCheck)``
    one of our MPI kernels (nr-mpitest, nr-mpicoll, nr-ebb) writing ``result.json``.
"""
from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import SanityError

from . import interconnects, launch, provenance, results
from .base import RESULT_FILE, NetregressCheck, stage_file
from .knownfaults import known_fault
from .plugins import KernelMixin


class MpiCheck(NetregressCheck):
    """Abstract MPI benchmark: launcher per environment, interconnect forced, transport witnessed."""

    valid_prog_environs = ['+mpi']

    #: Check the transport the MPI library reports against the interconnect table.
    #:
    #: :type: :class:`bool`
    #: :default: ``True``
    check_transport = variable(typ.Bool, value=True)

    #: The ranks outnumber the CPUs they run on (set in setup; tools/refs gives such runs a wider band).
    #:
    #: :type: :class:`bool`
    oversubscribed = variable(typ.Bool, value=False, loggable=True)

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

    def same_job_launch(self, executable: str, opts: Sequence[str]) -> str:
        """The shell line that starts ``executable opts`` on this job's ranks as the benchmark step is started (its
        launcher, forcing variables and rank pinning): another step in the same job (a peer, a validation pass)."""
        exe, args = self.rank_command(executable, opts)
        # ReFrame hands the job its task counts only when it writes the script; the launcher needs them now
        self.job.num_tasks, self.job.num_tasks_per_node = self.num_tasks, self.num_tasks_per_node
        return ' '.join([self.job.launcher.run_command(self.job), exe, *args])

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
