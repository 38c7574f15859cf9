"""iperf3: the TCP stream check (:class:`Iperf3Check`) and the yardstick run before a stream of ours on the same
node pair (:class:`Iperf3YardstickPlugin`); what a TCP stream can reach on the fabric.
"""
from __future__ import annotations

import json
import os
import re
import statistics

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import SanityError

from ..judge import figures
from . import interconnects
from ..judge.bands import fraction_of
from .plugins import ExitStatusPlugin
from .tcppair import SERVER_OUT, TcpPairCheck, background_server_cmds, server_address_cmds


IPERF3_OUT = 'iperf3.json'
YARDSTICK_SERVER_OUT = 'yardstick-server.out'


def load_iperf3(path: str) -> dict:
    try:
        with open(path) as fp:
            doc = json.load(fp)
    except (FileNotFoundError, json.JSONDecodeError) as err:
        raise SanityError(f'iperf3 wrote no usable {os.path.basename(path)}: {err}') from None
    if doc.get('error'):
        raise SanityError(f'iperf3: {doc["error"]}')
    return doc


#: One interval line of iperf3's text output: start, end, rate and its prefix (summary lines end in sender/receiver).
_IPERF3_INTERVAL = re.compile(
    r'^\[\s*\d+\]\s+([0-9.]+)-([0-9.]+)\s+sec\s+[0-9.]+\s+\S+\s+([0-9.]+)\s+([KMG]?)bits/sec\s*$', re.M)
_BIT_UNITS = {'': 1e-6, 'K': 1e-3, 'M': 1.0, 'G': 1e3}


def iperf3_intervals(server_text: str) -> list[float]:
    """Mbit/s of every whole one-second interval the iperf3 server reported (what the receiver got; the last,
    partial interval and the summary lines left out)."""
    return [float(rate) * _BIT_UNITS[unit] for start, end, rate, unit in _IPERF3_INTERVAL.findall(server_text)
            if float(end) - float(start) >= 0.99]


@sn.deferrable
def iperf3_mbps(path: str, server_out: str) -> float:
    """The median of the receiver's one-second intervals, as our kernels report the median of their one-second
    repetitions: iperf3's mean over the run took in whatever the hypervisor stole (a 2-s yardstick read 911 Mbit/s
    beside a kernel's median of 957 on the same link)."""
    load_iperf3(path)           # the client's JSON: the run itself succeeded
    try:
        with open(server_out, errors='replace') as fp:
            rates = iperf3_intervals(fp.read())
    except FileNotFoundError:
        raise SanityError(f'the iperf3 server wrote no {os.path.basename(server_out)}') from None
    if not rates:
        raise SanityError(f'{os.path.basename(server_out)}: the iperf3 server reported no whole one-second interval')
    return statistics.median(rates)


class Iperf3Check(ExitStatusPlugin, TcpPairCheck):
    """iperf3 TCP stream: the yardstick for nr-tcptest and MPI bandwidth on the same fabric."""

    #: Seconds of measurement (``-t``); the first ``omit_s`` are not counted (TCP slow start, ``-O``). The figure is
    #: the median of the receiver's one-second intervals.
    #:
    #: :type: :class:`float`
    #: :default: ``5``
    duration_s = variable(float, value=5.0)

    #: Seconds omitted at the start (``-O``).
    #:
    #: :type: :class:`float`
    #: :default: ``0.5``
    omit_s = variable(float, value=0.5)

    server_ready_pattern = 'Server listening'

    def server_command(self) -> str:
        return 'iperf3 -s -1 --forceflush -B $SERVER_ADDR -p $SERVER_PORT'

    @run_before('run')
    def set_client(self):
        self.executable = 'iperf3'
        self.executable_opts = ['-c', '$SERVER_ADDR', '-p', '$SERVER_PORT', '-t', str(self.duration_s),
                                '-O', str(self.omit_s), '-J', '--logfile', IPERF3_OUT]

    @run_after('setup')
    def iperf3_metrics(self):
        self.add_figure('throughput_mbps', sn.make_performance_function(
            iperf3_mbps(os.path.join(self.stagedir, IPERF3_OUT), os.path.join(self.stagedir, SERVER_OUT)),
            'Mbit/s'), figures.throughput('iperf3 TCP stream throughput'))

    def payload_bytes(self) -> float:
        doc = load_iperf3(os.path.join(self.stagedir, IPERF3_OUT))
        return float(doc['end']['sum_received']['bytes'])

    def iperf3_witness(self) -> list[str]:
        try:
            load_iperf3(os.path.join(self.stagedir, IPERF3_OUT))
        except SanityError as err:
            return [str(err)]
        return []

    def witnesses(self) -> list:
        return [self.exit_witness, self.iperf3_witness] + super().witnesses()


YARDSTICK_OUT = 'yardstick-iperf3.json'


class Iperf3YardstickPlugin(rfm.RegressionTestPlugin):
    """Before the benchmark, measure the same node pair with iperf3 and report the benchmark's ratio to it.

    Used by the stream checks on fabrics where the link, not the CPU, bounds throughput (``gige``): there the goal
    is a TCP stream and an MPI 1 MiB stream within 3% of iperf3. Adds ``iperf3_mbps`` (referenced like every
    other metric) and ``ratio_to_iperf3`` (the check's ``throughput_mbps`` / iperf3), asserted with the
    baseline-free band ``fixed_bands.peer_ratio`` of config/interconnects.yaml.
    """

    #: Interconnects on which the yardstick runs; None: every interconnect with a configured ``rate_mbps`` (the
    #: link, not the CPU, bounds a stream there).
    #:
    #: :type: :class:`List[str]` or ``None``
    #: :default: ``None``
    yardstick_interconnects = variable(typ.List[str], type(None), value=None)

    #: Seconds of iperf3 measurement (after 0.5 s omitted for slow start); the figure is the median of the
    #: receiver's one-second intervals.
    #:
    #: :type: :class:`float`
    #: :default: ``5.0``
    yardstick_time_s = variable(float, value=5.0)

    def _yardstick_active(self) -> bool:
        wanted = (self.interconnect in self.yardstick_interconnects if self.yardstick_interconnects is not None
                  else bool(self.ic.rate_mbps))
        return wanted and self.ic.counters == 'interface'

    @run_before('run')
    def run_yardstick_first(self):
        if not self._yardstick_active():
            return
        on_last = self.node_prefix('on_node', index=self.ic.nodes - 1)
        self.prerun_cmds += server_address_cmds(self, 'YARDSTICK_ADDR')
        self.prerun_cmds += background_server_cmds(
            self, 'iperf3 -s -1 --forceflush -B $YARDSTICK_ADDR -p $YARDSTICK_PORT', YARDSTICK_SERVER_OUT,
            'YARDSTICK_PID', 'Server listening', 'YARDSTICK_PORT', 10)
        self.prerun_cmds += [
            f'{on_last} {self.end_cpu_prefix(1)} iperf3 -c $YARDSTICK_ADDR -p $YARDSTICK_PORT '
            f'-t {self.yardstick_time_s} -O 0.5 -J --logfile {YARDSTICK_OUT} || echo "yardstick iperf3 failed" >&2',
            'wait $YARDSTICK_PID 2>/dev/null',
        ]

    @run_after('setup')
    def yardstick_metrics(self):
        if not self._yardstick_active():
            return
        iperf = iperf3_mbps(os.path.join(self.stagedir, YARDSTICK_OUT),
                            os.path.join(self.stagedir, YARDSTICK_SERVER_OUT))
        self.add_figure('iperf3_mbps', sn.make_performance_function(iperf, 'Mbit/s'),
                        figures.throughput('iperf3 yardstick stream throughput'))
        self.add_figure('ratio_to_iperf3', sn.make_performance_function(
            fraction_of(self, 'throughput_mbps', iperf), 'ratio'), figures.ratio('throughput / iperf3 yardstick'))
        lower, upper = interconnects.load().fixed_band('peer_ratio')
        self.fixed_references = {**self.fixed_references, 'ratio_to_iperf3': (1.0, lower, upper)}
