"""iperf3 TCP stream on the fabric under test: what a TCP stream can reach there (yardstick for tcp/mpi checks)."""
import reframe as rfm
from reframe.core.builtins import parameter, run_after

from netregress.measure import interconnects
from netregress.measure.iperf import Iperf3Check


def _ip_interconnects():
    table = interconnects.load()
    return [n for n in table.names if table.interconnect(n).counters == 'interface']


@rfm.simple_test
class iperf3_stream(Iperf3Check):
    """iperf3 -c for a few seconds, slow start omitted."""

    interconnect = parameter(_ip_interconnects(), fmt=lambda ic: ic, loggable=True)
    tags = {'iperf3', 'tcp'}

    @run_after('init')
    def describe(self):
        self.ref_test = 'iperf3.stream'
        self.link_bound_metric = 'throughput_mbps'
