"""IMB-MPI1 PingPong with Intel MPI (its wheel ships IMB-MPI1): the vendor yardstick for nr-mpitest."""
import reframe as rfm
from reframe.core.builtins import run_after

from netregress.peers import ImbPingPongCheck


@rfm.simple_test
class imb_pingpong(ImbPingPongCheck):
    """PingPong 8 B .. 1 MiB: latency at 8 B, bandwidth at 1 MiB."""

    tags = {'imb', 'mpi'}

    @run_after('init')
    def describe(self):
        self.ref_test = 'imb.pingpong'
