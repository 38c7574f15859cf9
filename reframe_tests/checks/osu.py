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

from netregress import figures, spack_build
from netregress.base import stage_file
from netregress.mpicheck import MpiCheck
from netregress.plugins import ExitStatusPlugin
from netregress.osu_npb import (OSU_BENCHMARKS, OSU_WINDOW_BENCHMARKS, osu_default_iterations, osu_problems,
                                osu_value, parse_osu, read_text)
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
    #: osu_mbw_mr 64 KiB too: on its one pair of ranks it sends osu_bw's window, so above that its bandwidth is
    #: osu_bw's figure measured again (gige: 0.96-1.02 x osu_bw at 64 KiB, 256 KiB and 1 MiB for four MPI builds),
    #: on shared memory with 100 iterations at every size against osu_bw's 20; its own figure is the message rate
    #: of small messages.
    #:
    #: :type: :class:`int`
    #: :default: ``0`` (per benchmark as above)
    max_size = variable(int, value=0)

    #: Measured iterations per size (``-i``; OSU then uses it for large messages too) of osu_latency and the
    #: collectives, whose own counts (10000 and 1000 small) would take minutes. The window benchmarks (osu_bw,
    #: osu_bibw, osu_mbw_mr: 64 messages per iteration) run OSU's own counts on shared memory (100 up to 8 KiB,
    #: 20 above, warm-up 10 and 2; osu_mbw_mr 100 at every size) and ``link_bound_iterations`` on a network.
    #: 100 at every size made osu_bw on shared memory 4x slower (7.7-8.4 s against 1.9-2.0 s) for the same
    #: figures (1 MiB 13.7-15.1 against 14.3-15.2 GB/s; 3 runs each, Open MPI 5, vcluster shm, side by side).
    #:
    #: :type: :class:`int`
    #: :default: ``100``
    iterations = variable(int, value=100)

    #: Measured iterations per size of the window benchmarks on a network (any interconnect but shared memory).
    #: At 64 KiB and above a link-bound figure is the line rate whatever the count: over the 1 Gbit/s gige link
    #: osu_bw read 120.7-122.2 MB/s at 64 KiB and 1 MiB with 4 as with 10, osu_bibw 242-243 with 4 and 231-247
    #: with 10 (3 runs each, Open MPI 5, side by side), in 5.8-6.0 s instead of 13.7-14.8 s.
    #:
    #: :type: :class:`int`
    #: :default: ``4``
    link_bound_iterations = variable(int, value=4)

    #: Untimed repetitions of each window (or round trip) before the timed one, per iteration, with validation on
    #: (OSU's ``-u``, default 5) for the window benchmarks and osu_latency on a network. OSU 7.4 re-fills the
    #: buffers for validation every iteration and then sends the window ``1 + u`` times: with its default, osu_bw
    #: over the 1 Gbit/s gige link moved six times the planned bytes and needed about 135 s (the 90-s time limit
    #: killed it at 512 KiB), and osu_latency 1 B..1 MiB took 11.9 s there against 2.1-2.2 s with 0 (Open MPI 4,
    #: vcluster gige, in one job), every size still validated. Warm caches matter on shared memory, where it stays
    #: at OSU's default; a link is not faster for them.
    #:
    #: :type: :class:`int`
    #: :default: ``0``
    link_bound_validation_warmup = variable(int, value=0)

    #: Warm-up iterations per size (``-x``) of osu_latency and the collectives (see ``iterations``).
    #:
    #: :type: :class:`int`
    #: :default: ``10``
    warmup = variable(int, value=10)

    #: Warm-up iterations per size of the window benchmarks on a network. From 64 KiB one window moves at least
    #: 4 MiB, more than the gige shaper's 4 MB bucket (docs/vcluster.md); the figures above were measured with 1.
    #:
    #: :type: :class:`int`
    #: :default: ``1``
    link_bound_warmup = variable(int, value=1)

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
            self.max_size = 1 << 20 if subdir == 'pt2pt' and self.benchmark != 'osu_mbw_mr' else 1 << 16

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
        # OSU's bandwidths are windows of short sends between two ranks: CPU-bound at every size
        declared = {'latency_us': figures.latency(f'{self.benchmark} latency'),
                    'bandwidth_mbs': figures.cpu_bound(f'{self.benchmark} bandwidth'),
                    'message_rate': figures.cpu_bound(f'{self.benchmark} message rate')}
        for metric in metrics:
            for size in self.sizes:
                self.add_figure(metric_name(metric, size), sn.make_performance_function(
                    osu_value(out, metric, size), unit[metric]), declared[metric].at(size))

    @property
    def window_on_network(self) -> bool:
        return self.benchmark in OSU_WINDOW_BENCHMARKS and self.ic.counters != 'none'

    @property
    def validation_warmup(self) -> list[str]:
        """``-u`` of this run (``link_bound_validation_warmup``), or none: OSU's default."""
        on_network = self.ic.counters != 'none'
        if on_network and (self.benchmark in OSU_WINDOW_BENCHMARKS or self.benchmark == 'osu_latency'):
            return ['-u', str(self.link_bound_validation_warmup)]
        return []

    @property
    def loops(self) -> tuple[int, int] | None:
        """(``-i``, ``-x``) of this run; None: OSU's own counts (the window benchmarks on shared memory)."""
        if self.window_on_network:
            return min(self.iterations, self.link_bound_iterations), min(self.warmup, self.link_bound_warmup)
        return None if self.benchmark in OSU_WINDOW_BENCHMARKS else (self.iterations, self.warmup)

    def iterations_at(self, size: int) -> int:
        """Measured iterations of message size ``size`` in this run."""
        loops = self.loops
        return loops[0] if loops else osu_default_iterations(self.benchmark, size)

    @run_before('run')
    def set_command(self):
        subdir, _, _ = OSU_BENCHMARKS[self.benchmark]
        self.executable = os.path.join(self.osu_build.kernels_dir, subdir, self.benchmark)
        datatype = ['-T', OSU_REDUCTIONS[self.benchmark]] if self.benchmark in OSU_REDUCTIONS else []
        loops = self.loops
        counts = ['-i', str(loops[0]), '-x', str(loops[1])] if loops else []
        self.executable_opts = ['-m', f'{self.min_size}:{self.max_size}', *counts, '-c', *self.validation_warmup,
                                *datatype, *self.extra_opts]

    def payload_bytes(self) -> float:
        """Lower bound of the bytes crossing between the ranks in the measured iterations."""
        per_size = {'osu_latency': 2, 'osu_bw': OSU_WINDOW, 'osu_bibw': 2 * OSU_WINDOW,
                    'osu_mbw_mr': OSU_WINDOW * max(1, self.num_tasks // 2)}.get(self.benchmark, 1)
        return float(sum(per_size * size * self.iterations_at(size) for size in self.sizes))

    def osu_witness(self) -> list[str]:
        try:
            res = parse_osu(read_text(stage_file(self, self.stdout)))
        except Exception as err:            # SanityError from read_text
            return [str(err)]
        _, metrics, _ = OSU_BENCHMARKS[self.benchmark]
        return osu_problems(res, max_size=self.max_size, validate=True, metrics=metrics)

    def witnesses(self) -> list:
        return [self.exit_witness, self.osu_witness] + super().witnesses()
