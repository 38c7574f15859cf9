"""TCP between two nodes with nr-tcpserver / nr-tcptest (Hpcbench tcptest parity; seed 002).

Server on the first node of the job, client on the last (one node: both on loopback). Interconnects: every one
whose traffic shows on an interface (``tcp`` on local, ``fast``/``gige`` on vcluster, ``eth`` at a site).
"""
import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, variable

from netregress.judge import figures
from netregress.measure import interconnects
from netregress.measure.iperf import Iperf3YardstickPlugin
from netregress.measure.plugins import SweepPlugin
from netregress.measure.roundtrip import TcpRoundTripPeerPlugin
from netregress.measure.tcppair import TcpKernelCheck


# Ping-pong with TCP_NODELAY, as NetPIPE's NPtcp always runs: with Nagle's algorithm a request/response pattern waits
# on delayed acknowledgements, and the same 1 MiB loopback ping-pong (pinned) read 3.2-27 Gbit/s in five runs;
# with -N 23.0-23.8.
PINGPONG_OPTS = ['-i', '-N']


def _ip_interconnects():
    table = interconnects.load()
    return [n for n in table.names if table.interconnect(n).counters == 'interface']


class TcpBenchmark(TcpKernelCheck):
    """Abstract nr-tcptest benchmark over an IP interconnect; keep runs short (2 cores, 20-minute suite)."""

    interconnect = parameter(_ip_interconnects(), fmt=lambda ic: ic, loggable=True)

    #: Repetitions of a fixed-size test (``-r``).
    #:
    #: :type: :class:`int`
    #: :default: ``5``
    repetitions = variable(int, value=5)

    #: Seconds each repetition is calibrated to (``-t``; latency: the whole test).
    #:
    #: :type: :class:`float`
    #: :default: ``0.3``
    test_time_s = variable(float, value=0.3)

    #: Extra client options (socket buffer ``-b``, ``-N`` TCP_NODELAY, ``-M`` MSS ...).
    #:
    #: :type: :class:`List[str]`
    #: :default: ``[]``
    extra_opts = variable(typ.List[str], value=[])

    tags = {'tcp'}


@rfm.simple_test
class tcp_throughput(Iperf3YardstickPlugin, TcpBenchmark):
    """Fixed-size stream / ping-pong, blocking / non-blocking sockets: median throughput over repetitions.

    Blocking stream also runs iperf3 on the same node pair first on link-bound fabrics (``gige``) and reports
    the ratio (goal: within 3%).
    """

    mode = parameter(['stream', 'pingpong'], fmt=lambda m: m, loggable=True)
    io = parameter(['blocking', 'nonblocking'], fmt=lambda m: m, loggable=True)

    @run_after('init')
    def describe(self):
        self.ref_test = f'tcp.{self.mode}.{self.io}'
        if self.mode == 'stream':
            self.link_bound_metric = 'throughput_mbps'
        self.descr = f'TCP {self.mode} throughput, {self.io} sockets'
        if self.mode == 'stream' and self.io == 'blocking':
            self.tags |= {'ci'}
        else:
            self.yardstick_interconnects = []

    @run_after('setup')
    def set_options(self):
        kind = 'throughput' if self.mode == 'stream' else 'cpu_bound'
        opts = self.repetition_opts(self.repetitions, kind) + ['-t', str(self.repetition_s(self.test_time_s))]
        if self.mode == 'pingpong':
            opts += PINGPONG_OPTS
        if self.io == 'nonblocking':
            opts.append('-n')
        self.client_opts = opts + list(self.extra_opts)

    @run_after('setup')
    def set_metrics(self):
        # the median repetition: one repetition that lost its CPU must not move the figure
        # a stream the link bounds (blocking and non-blocking alike); a ping-pong waits a round trip per message,
        # so latency and scheduling decide it too
        label = f'TCP {self.mode} throughput, {self.io} sockets'
        self.add_metric('throughput_mbps', 'summary.throughput_mbps.median', 'Mbit/s',
                        figures.throughput(label) if self.mode == 'stream' else figures.cpu_bound(label))



@rfm.simple_test
class tcp_rtt(TcpRoundTripPeerPlugin, TcpBenchmark):
    """Round-trip time of small messages (``-a``: Hpcbench latency test); NPtcp times the same round trip in the
    same job (``ratio_to_peer``)."""

    #: Message size of the RTT test (``-A``).
    #:
    #: :type: :class:`int`
    #: :default: ``8``
    size_bytes = variable(int, value=8)

    @run_after('init')
    def describe(self):
        self.ref_test = 'tcp.rtt'
        self.tags |= {'ci'}

    @run_after('setup')
    def set_options(self):
        # -t is the whole test at the minimum count of trials
        self.client_opts = ['-A', str(self.size_bytes), *self.repetition_opts(self.repetitions, 'latency'), '-t',
                            str(self.repetition_s(self.test_time_s))]
        self.client_opts += list(self.extra_opts)

    @run_after('setup')
    def set_metrics(self):
        self.add_metric('rtt_us', 'latency.min_us', 'us',     # the best trial, as NetPIPE and IMB report
                        figures.latency(f'TCP round trip, {figures.size_text(self.size_bytes)}'))


@rfm.simple_test
class tcp_sweep(SweepPlugin, TcpBenchmark):
    """Exponential sweep 1 B .. 2^max_exp B (``-e``), stream or ping-pong: throughput at every size."""

    mode = parameter(['stream', 'pingpong'], fmt=lambda m: m, loggable=True)

    @run_after('init')
    def describe(self):
        self.ref_test = f'tcp.sweep.{self.mode}'
        self.sweep_label = f'TCP {self.mode} sweep throughput'

    @run_after('setup')
    def set_options(self):
        mode_opts = PINGPONG_OPTS if self.mode == 'pingpong' else []
        self.client_opts = self.sweep_opts() + mode_opts + list(self.extra_opts)
