"""OSU Micro-Benchmarks 7.x, per MPI build and interconnect, built through Spack (config/spack/<system>/).

Seven benchmarks: osu_latency, osu_bw, osu_bibw, osu_mbw_mr (point-to-point, 2 ranks) and osu_allreduce,
osu_alltoall, osu_bcast (4 ranks). Data validation is on (``-c``): a ``Fail`` row or ``DATA VALIDATION ERROR``
fails the check, as does a curve that stops before ``max_size`` (killed / crashed run). A performance variable per
message size (``latency_us@8``, ``bandwidth_mbs@1048576``, ...), each with a reference from reference_values/
(missing reference: failure after the values were logged). Where Spack or the environment's lock is missing, the
build fixture is skipped with the reason (``reframe --list`` still shows every case); where Spack is present but
the environment is not concretized (or stale, or lacks OSU) the fixture fails with the fix.
"""
import os

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import fixture, parameter, run_after, run_before, variable

from netregress import spack_build
from netregress.base import ExitStatusPlugin, MpiCheck, stage_file
from netregress.osu_npb import OSU_BENCHMARKS, osu_problems, osu_value, parse_osu, read_text
from netregress.references import metric_name

OSU_PACKAGE = 'osu-micro-benchmarks'
OSU_MPI_DIR = 'libexec/osu-micro-benchmarks/mpi'     # <prefix>/<this>/{pt2pt,collective}/<benchmark>
OSU_WINDOW = 64                                      # OSU's default window size (osu_bw, osu_bibw, osu_mbw_mr)
#: Reductions run on MPI_INT (``-T mpi_int``), not OSU's default MPI_CHAR: the MPI standard defines MPI_SUM for
#: integer types, and MPI_CHAR is not one. Measured: Open MPI 4.1.4 and 5.0.11 fail OSU's validation of
#: osu_allreduce on MPI_CHAR from 16 bytes (4 ranks, shm) and pass on MPI_INT and MPI_FLOAT; the MPICHs and Intel
#: MPI pass on MPI_CHAR. The sizes stay in bytes.
OSU_REDUCTIONS = {'osu_allreduce': 'mpi_int'}
OSU_TYPE_BYTES = {'mpi_int': 4}                      # smallest message of that datatype (OSU starts there)


class OsuSpackBuild(spack_build.SpackPackageBuild):
    """OSU Micro-Benchmarks for the current MPI environment, from the system's pre-concretized Spack environment
    (skipped where the machine has no Spack; failed with the fix where Spack is present but cannot build it)."""

    package = OSU_PACKAGE
    subdir = OSU_MPI_DIR
    executables = [f'{sub}/{name}' for name, (sub, _, _) in OSU_BENCHMARKS.items()]


@rfm.simple_test
class osu(ExitStatusPlugin, MpiCheck):
    """One OSU benchmark over the whole size curve 1 B (a reduction: one element) .. ``max_size``, validation on."""

    benchmark = parameter(list(OSU_BENCHMARKS), fmt=lambda b: b[4:], loggable=True)

    osu_build = fixture(OsuSpackBuild, scope='environment')

    #: Largest message size (``-m 1:max_size``); point-to-point 1 MiB, collectives 64 KiB (4 ranks, 2 cores).
    #:
    #: :type: :class:`int`
    #: :default: ``0`` (per benchmark as above)
    max_size = variable(int, value=0)

    #: Measured iterations per size (``-i``; OSU then uses it for large messages too).
    #:
    #: :type: :class:`int`
    #: :default: ``100``
    iterations = variable(int, value=100)

    #: Measured iterations per size of the window benchmarks (osu_bw, osu_bibw, osu_mbw_mr: 64 messages per
    #: iteration) on a network (any interconnect but shared memory): 100 x 64 x 1 MiB take a minute per size at
    #: 1 Gbit/s, and an osu_bibw over TCP loopback took 75 s in all on this machine.
    #:
    #: :type: :class:`int`
    #: :default: ``10``
    link_bound_iterations = variable(int, value=10)

    #: Untimed repetitions of each window before the timed one, per iteration, with validation on (OSU's ``-u``,
    #: default 5) for the window benchmarks on a network. OSU 7.4 re-fills the buffers for validation every
    #: iteration and then sends the window ``1 + u`` times: with its default, osu_bw over the 1 Gbit/s gige link
    #: moved six times the planned bytes and needed about 135 s (the 90-s time limit killed it at 512 KiB).
    #: Warm caches matter on shared memory, where it stays at OSU's default; a link is not faster for them.
    #:
    #: :type: :class:`int`
    #: :default: ``0``
    link_bound_validation_warmup = variable(int, value=0)

    #: Warm-up iterations per size (``-x``).
    #:
    #: :type: :class:`int`
    #: :default: ``10``
    warmup = variable(int, value=10)

    #: Warm-up iterations per size of the window benchmarks on a network: OSU's own default for messages above
    #: 8 KiB (``BW_SKIP_LARGE``). Ten of them moved as many bytes as the ten measured iterations: 23 s of each
    #: 24-s osu_bw over gige went to warm-up and measurement in equal parts.
    #:
    #: :type: :class:`int`
    #: :default: ``2``
    link_bound_warmup = variable(int, value=2)

    #: Ranks of the collective benchmarks.
    #:
    #: :type: :class:`int`
    #: :default: ``4``
    collective_ranks = variable(int, value=4)

    #: Extra OSU options.
    #:
    #: :type: :class:`List[str]`
    #: :default: ``[]``
    extra_opts = variable(typ.List[str], value=[])

    tags = {'osu', 'mpi', 'spack'}

    @run_after('init')
    def describe(self):
        subdir, metrics, ranks = OSU_BENCHMARKS[self.benchmark]
        self.ref_test = f'osu.{self.benchmark[4:]}'
        self.descr = f'OSU {self.benchmark} ({subdir}), validation on'
        self.num_ranks = ranks or (2 if subdir == 'pt2pt' else self.collective_ranks)
        if not self.max_size:
            self.max_size = 1 << 20 if subdir == 'pt2pt' else 1 << 16

    @property
    def min_size(self) -> int:
        return OSU_TYPE_BYTES.get(OSU_REDUCTIONS.get(self.benchmark, ''), 1)

    @property
    def sizes(self) -> list[int]:
        return [1 << e for e in range(self.max_size.bit_length()) if self.min_size <= 1 << e <= self.max_size]

    @run_after('setup')
    def osu_metrics(self):
        out = stage_file(self, self.stdout)
        _, metrics, _ = OSU_BENCHMARKS[self.benchmark]
        unit = {'latency_us': 'us', 'bandwidth_mbs': 'MB/s', 'message_rate': 'msg/s'}
        for metric in metrics:
            for size in self.sizes:
                self.perf_variables[metric_name(metric, size)] = sn.make_performance_function(
                    osu_value(out, metric, size), unit[metric])

    @property
    def window_on_network(self) -> bool:
        return self.benchmark in ('osu_bw', 'osu_bibw', 'osu_mbw_mr') and self.ic.counters != 'none'

    @property
    def run_iterations(self) -> int:
        """``-i`` of this run: fewer for the window benchmarks on a network."""
        return min(self.iterations, self.link_bound_iterations) if self.window_on_network else self.iterations

    @property
    def run_warmup(self) -> int:
        """``-x`` of this run: fewer for the window benchmarks on a network."""
        return min(self.warmup, self.link_bound_warmup) if self.window_on_network else self.warmup

    @run_before('run')
    def set_command(self):
        subdir, _, _ = OSU_BENCHMARKS[self.benchmark]
        self.executable = os.path.join(self.osu_build.kernels_dir, subdir, self.benchmark)
        datatype = ['-T', OSU_REDUCTIONS[self.benchmark]] if self.benchmark in OSU_REDUCTIONS else []
        warm = ['-u', str(self.link_bound_validation_warmup)] if self.window_on_network else []
        self.executable_opts = ['-m', f'{self.min_size}:{self.max_size}', '-i', str(self.run_iterations),
                                '-x', str(self.run_warmup), '-c', *warm, *datatype, *self.extra_opts]

    def payload_bytes(self) -> float:
        """Lower bound of the bytes crossing between the ranks in the measured iterations."""
        per_size = {'osu_latency': 2, 'osu_bw': OSU_WINDOW, 'osu_bibw': 2 * OSU_WINDOW,
                    'osu_mbw_mr': OSU_WINDOW * max(1, self.num_tasks // 2)}.get(self.benchmark, 1)
        return float(sum(per_size * size * self.run_iterations for size in self.sizes))

    def osu_witness(self) -> list[str]:
        try:
            res = parse_osu(read_text(stage_file(self, self.stdout)))
        except Exception as err:            # SanityError from read_text
            return [str(err)]
        _, metrics, _ = OSU_BENCHMARKS[self.benchmark]
        return osu_problems(res, max_size=self.max_size, validate=True, metrics=metrics)

    def witnesses(self) -> list:
        return [self.exit_witness, self.osu_witness] + super().witnesses()
