"""NetPIPE: TCP (NPtcp) and MPI (NPmpi per MPI build) latency and throughput, seed 004's micro-benchmark view.

NPmpi exists only for the Debian MPIs (NPopenmpi, NPmpich2); for the other builds the check is skipped with that
reason rather than run with a module built against another MPI.
"""
import reframe as rfm
from reframe.core.builtins import parameter, run_after

from netregress import interconnects
from netregress.peers import NetpipeMpiCheck, NetpipeTcpCheck


def _ip_interconnects():
    table = interconnects.load()
    return [n for n in table.names if table.interconnect(n).counters == 'interface']


@rfm.simple_test
class netpipe_tcp(NetpipeTcpCheck):
    """NPtcp ping-pong 1 B .. 1 MiB between the two nodes (loopback on one node)."""

    interconnect = parameter(_ip_interconnects(), fmt=lambda ic: ic, loggable=True)
    tags = {'netpipe', 'tcp'}

    @run_after('init')
    def describe(self):
        self.ref_test = 'netpipe.tcp'


@rfm.simple_test
class netpipe_mpi(NetpipeMpiCheck):
    """NPmpi ping-pong 1 B .. 1 MiB with the environment's MPI on the interconnect under test."""

    tags = {'netpipe', 'mpi'}

    @run_after('init')
    def describe(self):
        self.ref_test = 'netpipe.mpi'
