"""Abstract checks for the peer benchmarks NetPIPE (NPtcp, NPmpi) and Intel MPI Benchmarks (IMB-MPI1).

They are yardsticks for our kernels (seed 004: TCP vs MPI latency). Same interconnect parameter, placement,
provenance and references as our kernels; their output is parsed here, once. A peer run in the same job as one
of our kernels (its round trip beside ours) is ``netregress.roundtrip``'s; iperf3, the stream yardstick, is
``netregress.iperf``'s.
"""
from __future__ import annotations

import os
import re

import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import SanityError

from ..judge import figures
from .base import stage_file
from .mpicheck import MpiCheck
from .plugins import ExitStatusPlugin
from .tcppair import TcpPairCheck

NETPIPE_OUT = 'np.out'
_NP_LINE = re.compile(r'^\s*(\d+)\s+([0-9.eE+-]+)\s+([0-9.eE+-]+)\s*$')
_NP_REPEATS = re.compile(r'^\s*\d+:\s+(\d+) bytes\s+(\d+) times -->', re.M)


def parse_netpipe(text: str) -> list[tuple[int, float, float]]:
    """NetPIPE ``-o`` file: (bytes, Mbit/s, one-way seconds) per size."""
    rows = []
    for line in text.splitlines():
        m = _NP_LINE.match(line)
        if m:
            rows.append((int(m.group(1)), float(m.group(2)), float(m.group(3))))
    return rows


def netpipe_payload(stdout: str) -> float:
    """Bytes NetPIPE moved: for every size, ``times`` round trips of two messages (a lower bound)."""
    return float(sum(2 * int(size) * int(times) for size, times in _NP_REPEATS.findall(stdout)))


@sn.deferrable
def netpipe_value(path: str, what: str, size: int | None = None) -> float:
    """``latency_us`` (smallest size), ``max_throughput_mbps`` or ``throughput_mbps`` at ``size``."""
    try:
        with open(path) as fp:
            rows = parse_netpipe(fp.read())
    except FileNotFoundError:
        raise SanityError(f'NetPIPE wrote no {os.path.basename(path)}') from None
    if not rows:
        raise SanityError(f'{os.path.basename(path)} has no measurements')
    if what == 'latency_us':
        return min(rows)[2] * 1e6
    if what == 'max_throughput_mbps':
        return max(r[1] for r in rows)
    for size_, mbps, _ in rows:
        if size_ == size:
            return mbps
    raise SanityError(f'{os.path.basename(path)} has no row for {size} bytes')


class NetpipeMixin(ExitStatusPlugin):
    """NetPIPE options, output file and metrics shared by NPtcp and NPmpi."""

    #: Largest message size (``-u``).
    #:
    #: :type: :class:`int`
    #: :default: ``1048576``
    upper_bytes = variable(int, value=1048576)

    #: Constant repeat count per size (``-n``); NetPIPE's own calibration makes a run take ~1 minute.
    #:
    #: :type: :class:`int`
    #: :default: ``50``
    repeats = variable(int, value=50)

    def netpipe_opts(self) -> list[str]:
        return ['-u', str(self.upper_bytes), '-p', '0', '-n', str(self.repeats)]

    @run_after('setup')
    def netpipe_metrics(self):
        out = os.path.join(self.stagedir, NETPIPE_OUT)
        self.add_figure('latency_us', sn.make_performance_function(netpipe_value(out, 'latency_us'), 'us'),
                        figures.latency('NetPIPE one-way latency, smallest message'))
        # a peak over the curve: CPU, scheduler and token-bucket bursts decide it
        self.add_figure('max_throughput_mbps', sn.make_performance_function(
            netpipe_value(out, 'max_throughput_mbps'), 'Mbit/s'), figures.cpu_bound('NetPIPE peak throughput'))

    def payload_bytes(self) -> float:
        text = ''
        for name in (self.stdout, self.stderr):      # NPtcp reports progress on stderr, NPmpi on stdout
            with open(stage_file(self, name), errors='replace') as fp:
                text += fp.read()
        return netpipe_payload(text)

    def netpipe_witness(self) -> list[str]:
        try:
            netpipe_value(os.path.join(self.stagedir, NETPIPE_OUT), 'latency_us').evaluate()
        except SanityError as err:
            return [str(err)]
        return []


class NetpipeTcpCheck(NetpipeMixin, TcpPairCheck):
    """NPtcp: receiver on the first node, transmitter on the last."""

    valid_prog_environs = ['+tcp']

    #: The NPtcp executable.
    #:
    #: :type: :class:`str`
    #: :default: ``'NPtcp'``
    nptcp = variable(str, value='NPtcp')

    def server_command(self) -> str:
        return ' '.join([self.nptcp, '-P', '$SERVER_PORT', *self.netpipe_opts()])

    @run_before('run')
    def set_transmitter(self):
        # NPtcp's receiver prints nothing when it listens: TcpPairCheck waits for its socket (server_ready_pattern None)
        self.executable = self.nptcp
        self.executable_opts = ['-h', '$SERVER_ADDR', '-P', '$SERVER_PORT', *self.netpipe_opts(),
                                '-o', os.path.join(self.stagedir, NETPIPE_OUT)]

    def witnesses(self) -> list:
        return [self.exit_witness, self.netpipe_witness] + super().witnesses()


class NetpipeMpiCheck(NetpipeMixin, MpiCheck):
    """NPmpi built against the environment's MPI (``extras.netpipe_mpi``); absent -> the check says so."""

    @run_after('setup')
    def require_netpipe_module(self):
        self.skip_if(not self.current_environ.extras.get('netpipe_mpi'),
                     f'no NetPIPE MPI module exists for {self.current_environ.name} (Debian ships NPopenmpi and '
                     f'NPmpich2 for its own Open MPI and MPICH only); not measured')

    @run_before('run')
    def set_command(self):
        self.executable = self.current_environ.extras['netpipe_mpi']
        self.executable_opts = [*self.netpipe_opts(), '-o', os.path.join(self.stagedir, NETPIPE_OUT)]

    def witnesses(self) -> list:
        return [self.exit_witness, self.netpipe_witness] + super().witnesses()


_IMB_ROW = re.compile(r'^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s*$', re.M)


def parse_imb_pingpong(text: str) -> list[tuple[int, int, float, float]]:
    """IMB-MPI1 PingPong table: (bytes, repetitions, t[usec], Mbytes/sec)."""
    section = text.split('Benchmarking PingPong', 1)[-1] if 'Benchmarking PingPong' in text else ''
    return [(int(a), int(b), float(c), float(d)) for a, b, c, d in _IMB_ROW.findall(section)]


@sn.deferrable
def imb_value(path: str, column: str, size: int) -> float:
    with open(path, errors='replace') as fp:
        rows = parse_imb_pingpong(fp.read())
    for nbytes, _, t_us, mbs in rows:
        if nbytes == size:
            return t_us if column == 't_us' else mbs
    raise SanityError(f'IMB-MPI1 PingPong printed no row for {size} bytes')


class ImbPingPongCheck(ExitStatusPlugin, MpiCheck):
    """IMB-MPI1 PingPong (environment ``extras.imb``)."""

    valid_prog_environs = ['+imb']

    #: Message sizes 2^lo .. 2^hi (``-msglog lo:hi``).
    #:
    #: :type: :class:`List[int]`
    #: :default: ``[3, 20]``
    msglog = variable(typ.List[int], value=[3, 20])

    #: Iterations per message size (``-iter``, fixed with ``-iter_policy off``). No ``-time`` cap: with it,
    #: 1 MiB results on the fast fabric came out bimodal (1.8 vs 24 GB/s, the latter impossible over veth).
    #:
    #: :type: :class:`int`
    #: :default: ``100``
    iterations = variable(int, value=100)

    @run_before('run')
    def set_command(self):
        self.executable = self.current_environ.extras['imb']
        lo, hi = self.msglog
        self.executable_opts = ['PingPong', '-msglog', f'{lo}:{hi}', '-iter_policy', 'off',
                                '-iter', str(self.iterations)]

    @run_after('setup')
    def imb_metrics(self):
        out = stage_file(self, self.stdout)
        lo, hi = self.msglog
        self.add_figure('latency_us', sn.make_performance_function(imb_value(out, 't_us', 2 ** lo), 'us'),
                        figures.latency(f'IMB PingPong one-way time, {figures.size_text(2 ** lo)}'))
        # a ping-pong (it waits a round trip per message): CPU-bound at any size
        self.add_figure(f'bandwidth_mbs@{2 ** hi}',
                        sn.make_performance_function(imb_value(out, 'mbs', 2 ** hi), 'MB/s'),
                        figures.cpu_bound('IMB PingPong bandwidth').at(2 ** hi))

    def payload_bytes(self) -> float:
        with open(stage_file(self, self.stdout), errors='replace') as fp:
            return float(sum(2 * n * reps for n, reps, _, _ in parse_imb_pingpong(fp.read())))

    def imb_witness(self) -> list[str]:
        with open(stage_file(self, self.stdout), errors='replace') as fp:
            rows = parse_imb_pingpong(fp.read())
        return [] if rows else ['IMB-MPI1 printed no PingPong table']

    def witnesses(self) -> list:
        return [self.exit_witness, self.imb_witness] + super().witnesses()

