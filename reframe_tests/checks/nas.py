"""NAS Parallel Benchmarks 3.4 (MPI) per MPI build and interconnect, built through Spack (config/spack/<system>/).

IS EP CG MG FT LU on 2 processes, BT and SP on 4 (a square number): each on the smallest count of
:data:`NPB_PROCS` it accepts. The problem class is the system's: ``npb_class`` of its Spack reframe.yaml, else
the first of the npb spec's ``classes=`` (local and vcluster share one environment built with ``classes=S,W``:
S on local, W on vcluster; a site picks its own), never from this file; ``-S npb_class=X`` overrides (X must have
been built). Sanity: the run printed its result block with ``Verification = SUCCESSFUL``,
the expected benchmark, class and process count; performance: ``Mop/s total``. On a machine without Spack the check is
skipped with the reason (``reframe --list`` still shows every case); where Spack is present but the environment is
not concretized (or stale, or lacks npb) the build fixture fails with the fix. LAM/MPI, which Spack cannot build
for, runs the NPB tools/bootstrap built against it (``extras.npb_dir``).
"""
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import fixture, parameter, run_after, run_before, variable
from reframe.core.exceptions import BuildSystemError

from netregress.judge import figures
from netregress.measure import spack_build
from netregress.measure.base import stage_file
from netregress.measure.mpicheck import MpiCheck
from netregress.measure.plugins import ExitStatusPlugin
from netregress.measure.osu_npb import NPB_C, NPB_NAMES, npb_cases, npb_problems, npb_value, parse_npb, read_text

NPB_PACKAGE = 'npb'
#: Candidate process counts; each benchmark runs on the smallest it accepts: IS EP CG MG FT LU on 2, BT and SP
#: (a square number) on 4 (2 cores here: oversubscribed above 2).
NPB_PROCS = (2, 4)


def _cases() -> list[tuple[str, int]]:
    return npb_cases(NPB_PROCS)


def system_class(system: str) -> str:
    """The NPB class ``system`` runs: its reframe.yaml's ``npb_class``, else the first of the npb spec's
    ``classes=``; one the environment builds (ValueError otherwise)."""
    classes = spack_build.spec_variant(spack_build.package_spec(system, NPB_PACKAGE), 'classes')
    where = f'the npb spec of {spack_build.source_dir(system)}/spack.yaml'
    if not classes:
        raise ValueError(f'{where} names no classes=')
    chosen = str(spack_build.system_settings(system).get('npb_class') or classes[0])
    if chosen not in classes:
        raise ValueError(f'npb_class {chosen} of {system} is not built: {where} has classes={",".join(classes)}')
    return chosen


class NpbSpackBuild(spack_build.SpackPackageBuild):
    """NPB (MPI implementation) for the current MPI environment, from the system's pre-concretized Spack
    environment (executables ``<prefix>/bin/<name>.<class>.x``); optional: where Spack builds nothing for the
    environment the check takes its ``extras.npb_dir`` (LAM/MPI's, built by tools/bootstrap) or is skipped."""

    package = NPB_PACKAGE
    subdir = 'bin'
    optional = True

    @run_before('compile', always_last=True)
    def expected_executables(self):
        """Every benchmark of the class; only the C ones for an MPI without Fortran bindings (``no_fortran``)."""
        names = NPB_C if self.current_environ.extras.get('no_fortran') else NPB_NAMES
        self.executables = [f'{name}.{system_class(self.current_system.name)}.x' for name in names]


@rfm.simple_test
class nas(ExitStatusPlugin, MpiCheck):
    """One NPB benchmark on a process count it accepts, the system's class."""

    case = parameter(_cases(), fmt=lambda c: f'{c[0]}-np{c[1]}', loggable=True)

    npb_build = fixture(NpbSpackBuild, scope='environment')

    #: Problem class; empty: the system's (npb ``classes=`` in config/spack/<system>/spack.yaml).
    #:
    #: :type: :class:`str`
    #: :default: ``''``
    npb_class = variable(str, value='', loggable=True)

    #: NPB reports no byte count: on a fabric the interface under test must have carried at least this much
    #: (proof that the ranks talked over it at all).
    #:
    #: :type: :class:`int`
    #: :default: ``4096``
    min_wire_bytes = variable(int, value=4096)

    tags = {'nas', 'npb', 'mpi', 'spack'}
    time_limit = '10m'

    @run_after('init')
    def describe(self):
        self.bench, self.num_ranks = self.case
        self.fit_host_cpus = False      # NPB fixes its process count (BT/SP: a square)
        self.descr = f'NPB {self.bench.upper()} on {self.num_ranks} processes'

    @run_after('setup')
    def skip_fortran_without_bindings(self):
        """A declared limit of the MPI build (environment extra ``no_fortran``: why): its Fortran benchmarks cannot
        exist, so they are skipped with that reason (IS, in C, still runs)."""
        reason = self.current_environ.extras.get('no_fortran')
        self.skip_if(bool(reason) and self.bench not in NPB_C,
                     f'NPB {self.bench.upper()} is Fortran and {reason}')

    @run_after('setup')
    def choose_npb_build(self):
        """Spack's NPB for this MPI, else the environment's own (``extras.npb_dir``), else skipped, saying why."""
        self.npb_dir = self.npb_build.kernels_dir or self.current_environ.extras.get('npb_dir', '')
        self.skip_if(not self.npb_dir,
                     f'{spack_build.not_built_reason(self.current_environ)}; and no NPB built outside Spack for '
                     f'this MPI (tools/bootstrap builds one for LAM/MPI only, from a Spack source mirror)')

    @run_after('setup')
    def choose_class(self):
        if not self.npb_class:
            self.npb_class = system_class(self.current_system.name)
        self.ref_test = f'npb.{self.bench}.{self.npb_class}.np{self.num_ranks}'
        self.add_figure('mops_total', sn.make_performance_function(
            npb_value(stage_file(self, self.stdout), 'mops_total'), 'Mop/s'),
            figures.cpu_bound(f'NPB {self.bench.upper()} class {self.npb_class} on {self.num_ranks} processes, '
                              f'Mop/s total'))

    @run_before('run')
    def set_command(self):
        self.executable = os.path.join(self.npb_dir, f'{self.bench}.{self.npb_class}.x')
        # a build outside Spack may lack a class; a dry run builds nothing, so its Spack link does not exist yet
        if not self.is_dry_run() and not os.access(self.executable, os.X_OK):
            raise BuildSystemError(f'{self.executable} does not exist: NPB class {self.npb_class} was not built for '
                                   f'{self.current_environ.name} (tools/bootstrap builds the classes of '
                                   f'config/spack/*/spack.yaml)')
        self.executable_opts = []

    def payload_bytes(self) -> float:
        # EP only reduces a few sums at its end: Intel MPI over TCP loopback carried 1716 B in all (class S, 2 ranks)
        return float(min(self.min_wire_bytes, 256) if self.bench == 'ep' else self.min_wire_bytes)

    def npb_witness(self) -> list[str]:
        try:
            res = parse_npb(read_text(stage_file(self, self.stdout)))
        except Exception as err:            # SanityError from read_text
            return [str(err)]
        return npb_problems(res, name=self.bench, npb_class=self.npb_class, nprocs=self.num_ranks)

    def witnesses(self) -> list:
        return [self.exit_witness, self.npb_witness] + super().witnesses()
