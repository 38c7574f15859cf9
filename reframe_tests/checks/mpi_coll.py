"""Luecke & Coyle's 13 MPI communication tests (nr-mpicoll, seed 003) and Netgauge's effective bisection bandwidth
(nr-ebb, seed 001), at 4 ranks per MPI build and interconnect (one node for shm, two nodes x 2 ranks otherwise;
no more ranks than the host's CPUs where the nodes share one host: 2 on a 2-core machine).
"""
import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, variable

from netregress.judge import figures
from netregress.measure.mpicheck import MpiKernelCheck
from netregress.judge.references import metric_name

#: The 13 tests in the paper's order, test 2 with fixed and cycled root (names as nr-mpicoll reports them).
COLL_TESTS = ['p2p', 'bcast', 'bcast_cycled', 'reduce', 'allreduce', 'gather', 'allgather', 'scatter', 'alltoall',
              'bcast_gather', 'scatter_gather', 'reduce_scatter', 'right_shift', 'left_right_shift']


@rfm.simple_test
class mpi_collectives(MpiKernelCheck):
    """All 13 tests in one run; the paper's (log-)normalized rate (KB/s, KB = 1000 B) per test and size."""

    kernel_name = 'nr-mpicoll'
    num_ranks = 4
    tags = {'mpi', 'collectives'}

    #: Message sizes in bytes (the paper's 8 B, 1 KB, 100 KB, 1 MB; decimal as in the paper).
    #:
    #: :type: :class:`List[int]`
    #: :default: ``[8, 1000, 100000, 1000000]``
    sizes = variable(typ.List[int], value=[8, 1000, 100000, 1000000])

    #: Minimum seconds of each timed loop (``-t``; the paper: at least one second; here short).
    #:
    #: :type: :class:`float`
    #: :default: ``0.02``
    time_per_point_s = variable(float, value=0.02)

    #: Timed runs per test and size, best reported (``-r``; the paper's best-of-N damps a run that lost its CPU).
    #:
    #: :type: :class:`int`
    #: :default: ``3``
    runs = variable(int, value=3)

    # With 2 ranks per node on the fabrics, part of the traffic stays on a node: require a quarter on the wire.
    payload_fraction = 0.25

    @run_after('init')
    def describe(self):
        self.ref_test = 'mpicoll'

    @run_after('setup')
    def set_options(self):
        self.kernel_opts = ['-s', ','.join(map(str, self.sizes)), '-t', str(self.time_per_point_s),
                            '-r', str(self.runs)]
        # Oversubscribed (4 ranks on this 2-core machine), a small message's time is a scheduler time slice
        # (MPICH and Intel MPI rates swung 100-1000x between runs at 8 B): only the largest size, which lasts
        # several slices, is asserted. Every size stays in result.json.
        asserted = self.sizes[-1:] if self.oversubscribed else self.sizes
        for test in COLL_TESTS:
            # a collective's rate: the ranks' CPUs and the scheduler decide it as much as the links
            figure = figures.cpu_bound(f'{test} normalized rate')
            for size in asserted:
                self.add_metric(metric_name(f'{test}_rate_kBps', size),
                                f'tests[name={test}].points[size_bytes={size}].rate_kBps', 'KB/s', figure.at(size))


@rfm.simple_test
class mpi_ebb(MpiKernelCheck):
    """Effective bisection bandwidth: random bisection patterns of 1 MiB messages, average and bucket spread."""

    kernel_name = 'nr-ebb'
    num_ranks = 4
    payload_fraction = 0.25
    tags = {'mpi', 'ebb'}

    #: Message size (``-s``).
    #:
    #: :type: :class:`int`
    #: :default: ``1048576``
    size_bytes = variable(int, value=1048576)

    #: Rounds of random patterns (``-r``).
    #:
    #: :type: :class:`int`
    #: :default: ``20``
    rounds = variable(int, value=20)

    @run_after('init')
    def describe(self):
        self.ref_test = 'ebb'

    @run_after('setup')
    def set_options(self):
        self.kernel_opts = ['-s', f'{self.size_bytes}-{self.size_bytes}', '-r', str(self.rounds)]
        # the seed's effective bisection bandwidth: the final "average ... (B MiB/s)" of the size
        self.add_metric('ebb_mibps', f'sizes[size_bytes={self.size_bytes}].bandwidth_mibps', 'MiB/s',
                        figures.cpu_bound(f'effective bisection bandwidth, {figures.size_text(self.size_bytes)}'))
