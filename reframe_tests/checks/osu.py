"""OSU Micro-Benchmarks 7.x, per MPI build and interconnect, built through Spack (config/spack/<system>/).

Seven benchmarks: osu_latency, osu_bw, osu_bibw, osu_mbw_mr (point-to-point, 2 ranks) and osu_allreduce,
osu_alltoall, osu_bcast (4 ranks). Every size is validated (``-c``): a ``Fail`` row or ``DATA VALIDATION ERROR``
fails the check, as does a curve that stops before ``max_size`` (killed / crashed run). OSU 7.4 validates inside the
timed loop, refilling and checking the buffers between timed round trips, so the validation runs as its own short
pass before the timed one wherever it slows or moves the figure (:attr:`osu.validation_iterations`). A performance
variable per message size (``latency_us@8``, ``bandwidth_mbs@1048576``, ...), each with a reference from
reference_values/ (missing reference: failure after the values were logged). Where Spack or the environment's lock
is missing, the build fixture is skipped with the reason (``reframe --list`` still shows every case); where Spack is
present but the environment is not concretized (or stale, or lacks OSU) the fixture fails with the fix.
"""
import os

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import fixture, parameter, run_after, run_before, variable

from netregress.judge import figures
from netregress.measure import spack_build
from netregress.measure.base import stage_file
from netregress.measure.mpicheck import MpiCheck
from netregress.measure.plugins import ExitStatusPlugin
from netregress.measure.osu_npb import (OSU_BENCHMARKS, OSU_WINDOW_BENCHMARKS, osu_default_iterations, osu_problems,
                                osu_value, parse_osu, read_text)
from netregress.measure.results import failed_tasks
from netregress.judge.references import metric_name

OSU_PACKAGE = 'osu-micro-benchmarks'
OSU_MPI_DIR = 'libexec/osu-micro-benchmarks/mpi'     # <prefix>/<this>/{pt2pt,collective}/<benchmark>
OSU_WINDOW = 64                                      # OSU's default window size (osu_bw, osu_bibw, osu_mbw_mr)
#: Reductions run on MPI_INT (``-T mpi_int``), not OSU's default MPI_CHAR: the MPI standard defines MPI_SUM for
#: integer types, and MPI_CHAR is not one. Measured: Open MPI 4.1.4 and 5.0.11 fail OSU's validation of
#: osu_allreduce on MPI_CHAR from 16 bytes (4 ranks, shm) and pass on MPI_INT and MPI_FLOAT; the MPICHs and Intel
#: MPI pass on MPI_CHAR. The sizes stay in bytes.
OSU_REDUCTIONS = {'osu_allreduce': 'mpi_int'}
OSU_TYPE_BYTES = {'mpi_int': 4}                      # smallest message of that datatype (OSU starts there)
OSU_VALIDATION_OUT = 'osu-validation.out'            # the validation pass's console output


class OsuSpackBuild(spack_build.SpackPackageBuild):
    """OSU Micro-Benchmarks for the current MPI environment, from the system's pre-concretized Spack environment
    (skipped where the machine has no Spack; failed with the fix where Spack is present but cannot build it)."""

    package = OSU_PACKAGE
    subdir = OSU_MPI_DIR
    executables = [f'{sub}/{name}' for name, (sub, _, _) in OSU_BENCHMARKS.items()]


@rfm.simple_test
class osu(ExitStatusPlugin, MpiCheck):
    """One OSU benchmark over the whole size curve 1 B (a reduction: one element) .. ``max_size``, every size
    validated."""

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
    #: collectives on a network. On shared memory every benchmark runs OSU's own counts (osu_latency 10000 up to
    #: 8 KiB and 1000 above, the collectives 1000 and 100, osu_bw and osu_bibw 100 and 20, osu_mbw_mr 100 at every
    #: size): its small round trips take 0.25-0.3 us, so 100 of them averaged one 2-ms stall of the shared vCPUs
    #: into a figure 15-100x the baseline (seven retries in three runs), and 10000 take 1.0 s for the whole curve
    #: without validation in the timed loop. The window benchmarks use ``link_bound_iterations`` on a network.
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

    #: Untimed repetitions of each window (or round trip) before the timed one, per iteration, when validation is
    #: on (OSU's ``-u``, default 5). 0 in the validation pass and in the window benchmarks' timed loop on a
    #: network: OSU 7.4 re-fills the buffers for validation every iteration and then sends the window ``1 + u``
    #: times, so with its default osu_bw over the 1 Gbit/s gige link moved six times the planned bytes and needed
    #: about 135 s (the 90-s time limit killed it at 512 KiB).
    #:
    #: :type: :class:`int`
    #: :default: ``0``
    validation_warmup = variable(int, value=0)

    #: Iterations per size of the validation pass (``-c -i N -x 0``), run in the same job before the timed pass,
    #: which then runs without ``-c``. OSU 7.4 validates inside the timed loop: it refills the buffers and
    #: synchronises the ranks between timed round trips, and on shared memory sends each one ``1 + u`` times. That
    #: made osu_latency 1 B-1 MiB on shared memory take 3.6-4.3 s against 1.0 s without it at 100x the iterations
    #: (osu_bw and osu_bibw 3.5 s against 0.75 s, the same figures), and over gige it read the 1 MiB round trip at
    #: 405-487 us, faster than the 1 Gbit/s link can carry a MiB (4,390 us without it): the pauses refilled the
    #: shaper's token bucket. The collectives over gige took 1.2-1.35 s against 0.34-0.36 s. The pass takes
    #: 0.2-0.6 s. The window benchmarks on a network keep validation in their timed loop (``-u 0``): there the
    #: link decides the time (5.84 s with it, 5.82 without), and without it osu_bibw's 512 KiB-1 MiB windows over
    #: gige read 123-127 MB/s in two runs of three and 239 in the third (Open MPI 4, one job each).
    #:
    #: :type: :class:`int`
    #: :default: ``2``
    validation_iterations = variable(int, value=2)

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
    def on_network(self) -> bool:
        return self.ic.counters != 'none'

    @property
    def window_on_network(self) -> bool:
        return self.benchmark in OSU_WINDOW_BENCHMARKS and self.on_network

    @property
    def loops(self) -> tuple[int, int] | None:
        """(``-i``, ``-x``) of the timed pass; None: OSU's own counts (every benchmark on shared memory)."""
        if not self.on_network:
            return None
        if self.window_on_network:
            return min(self.iterations, self.link_bound_iterations), min(self.warmup, self.link_bound_warmup)
        return self.iterations, self.warmup

    def iterations_at(self, size: int) -> int:
        """Measured iterations of message size ``size`` in the timed pass."""
        loops = self.loops
        return loops[0] if loops else osu_default_iterations(self.benchmark, size)

    @property
    def validation_pass(self) -> bool:
        """Validation runs as a pass of its own (else inside the timed loop: the window benchmarks on a network)."""
        return not self.window_on_network

    @run_before('run')
    def set_command(self):
        subdir, _, _ = OSU_BENCHMARKS[self.benchmark]
        self.executable = os.path.join(self.osu_build.kernels_dir, subdir, self.benchmark)
        sizes = ['-m', f'{self.min_size}:{self.max_size}']
        datatype = ['-T', OSU_REDUCTIONS[self.benchmark]] if self.benchmark in OSU_REDUCTIONS else []
        validate = ['-c', '-u', str(self.validation_warmup)]
        loops = self.loops
        counts = ['-i', str(loops[0]), '-x', str(loops[1])] if loops else []
        self.executable_opts = [*sizes, *counts, *([] if self.validation_pass else validate), *datatype,
                                *self.extra_opts]
        if self.validation_pass:
            opts = [*sizes, '-i', str(self.validation_iterations), '-x', '0', *validate, *datatype, *self.extra_opts]
            # before the counter snapshots: the interface witness judges the timed pass's bytes
            self.prerun_cmds += [f'{self.same_job_launch(self.executable, opts)} > {OSU_VALIDATION_OUT} 2>&1 || '
                                 f'echo "validation pass of {self.benchmark} exited with $?" >> {OSU_VALIDATION_OUT}']

    def payload_bytes(self) -> float:
        """Lower bound of the bytes crossing between the ranks in the measured iterations."""
        per_size = {'osu_latency': 2, 'osu_bw': OSU_WINDOW, 'osu_bibw': 2 * OSU_WINDOW,
                    'osu_mbw_mr': OSU_WINDOW * max(1, self.num_tasks // 2)}.get(self.benchmark, 1)
        return float(sum(per_size * size * self.iterations_at(size) for size in self.sizes))

    def osu_witness(self) -> list[str]:
        _, metrics, _ = OSU_BENCHMARKS[self.benchmark]
        try:
            res = parse_osu(read_text(stage_file(self, self.stdout)))
        except Exception as err:            # SanityError from read_text
            return [str(err)]
        problems = osu_problems(res, max_size=self.max_size, validate=not self.validation_pass, metrics=metrics)
        if not self.validation_pass:
            return problems
        try:
            text = read_text(stage_file(self, OSU_VALIDATION_OUT))
        except Exception as err:
            return problems + [f'validation pass: {err}']
        found = osu_problems(parse_osu(text), max_size=self.max_size, validate=True)
        if found:
            # srun's account of a crashed task, else the pass's last lines, say why
            why = '; '.join(failed_tasks(text)) or ' | '.join(text.strip().splitlines()[-3:])
            problems += [f'validation pass ({OSU_VALIDATION_OUT}): {p}' for p in found] + ([why] if why else [])
        return problems

    def console_files(self) -> list:
        """The validation pass's transport reports are judged with the timed pass's."""
        return super().console_files() + ([OSU_VALIDATION_OUT] if self.validation_pass else [])

    def witnesses(self) -> list:
        return [self.exit_witness, self.osu_witness] + super().witnesses()
