"""Abstract checks for the peer benchmarks: NetPIPE (NPtcp, NPmpi), Intel MPI Benchmarks (IMB-MPI1), iperf3.

They are yardsticks for our kernels (seed 004: TCP vs MPI latency; iperf3 on the shaped fabric bounds what a TCP
stream can reach). Same interconnect parameter, placement, provenance and references as our kernels; their output
is parsed here, once.
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

import zlib

from . import interconnects
from .base import (SERVER_OUT, ExitStatusPlugin, MpiCheck, TcpPairCheck, fraction_of, background_server_cmds,
                   server_address_cmds, stage_file)

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
        self.perf_variables['latency_us'] = sn.make_performance_function(netpipe_value(out, 'latency_us'), 'us')
        self.perf_variables['max_throughput_mbps'] = sn.make_performance_function(
            netpipe_value(out, 'max_throughput_mbps'), 'Mbit/s')

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
        return ' '.join([self.nptcp, '-P', str(self.port), *self.netpipe_opts()])

    @run_before('run')
    def set_transmitter(self):
        # NPtcp's receiver prints nothing when it listens: TcpPairCheck waits for its socket (server_ready_pattern None)
        self.executable = self.nptcp
        self.executable_opts = ['-h', '$SERVER_ADDR', '-P', str(self.port), *self.netpipe_opts(),
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
        self.perf_variables['latency_us'] = sn.make_performance_function(imb_value(out, 't_us', 2 ** lo), 'us')
        self.perf_variables[f'bandwidth_mbs@{2 ** hi}'] = sn.make_performance_function(
            imb_value(out, 'mbs', 2 ** hi), 'MB/s')

    def payload_bytes(self) -> float:
        with open(stage_file(self, self.stdout), errors='replace') as fp:
            return float(sum(2 * n * reps for n, reps, _, _ in parse_imb_pingpong(fp.read())))

    def imb_witness(self) -> list[str]:
        with open(stage_file(self, self.stdout), errors='replace') as fp:
            rows = parse_imb_pingpong(fp.read())
        return [] if rows else ['IMB-MPI1 printed no PingPong table']

    def witnesses(self) -> list:
        return [self.exit_witness, self.imb_witness] + super().witnesses()


PEER_OUT = 'peer.out'                 # the same-job peer's console output
PEER_NETPIPE_OUT = 'peer-np.out'      # its NetPIPE -o file
PEER_SERVER_OUT = 'peer-server.out'   # NPtcp's receiver
PEER_IMB_LENGTHS = 'peer-imb.lengths'  # its IMB-MPI1 -msglen file


@sn.deferrable
def netpipe_rtt_us(path: str, size: int) -> float:
    """Round-trip time of ``size``-byte messages in a NetPIPE ``-o`` file: twice its one-way time, from the rate
    column (NetPIPE prints the time to 0.01 us, 7% of a 0.14-us shared-memory latency; its Mbps are 2^20 bit/s)."""
    try:
        with open(path) as fp:
            rates = [mbps for nbytes, mbps, _ in parse_netpipe(fp.read()) if nbytes == size and mbps > 0]
    except FileNotFoundError:
        raise SanityError(f'the peer NetPIPE wrote no {os.path.basename(path)}') from None
    if not rates:
        raise SanityError(f'the peer NetPIPE measured no {size}-byte round trip ({os.path.basename(path)})')
    return 2e6 * size * 8 / (max(rates) * 2 ** 20)


@sn.deferrable
def imb_rtt_us(path: str, size: int) -> float:
    """Round-trip time of ``size``-byte messages: twice the best one-way time over every IMB-MPI1 PingPong table
    in ``path``, from whichever column IMB printed with more digits (t[usec] and Mbytes/sec have two decimals)."""
    try:
        with open(path, errors='replace') as fp:
            rows = [(t_us, mbs) for nbytes, _, t_us, mbs in parse_imb_pingpong(fp.read()) if nbytes == size]
    except FileNotFoundError:
        raise SanityError(f'the peer IMB-MPI1 wrote no {os.path.basename(path)}') from None
    times = [t_us if t_us >= mbs or mbs <= 0 else size / mbs for t_us, mbs in rows]
    if not times or min(times) <= 0:
        raise SanityError(f'the peer IMB-MPI1 measured no {size}-byte round trip ({os.path.basename(path)})')
    return 2 * min(times)


class RoundTripPeerPlugin(rfm.RegressionTestPlugin):
    """The round trip's peer, run in the same job on the same nodes and CPUs just before the benchmark step.

    NetPIPE (NPtcp beside nr-tcptest, NPmpi beside nr-mpitest) or IMB-MPI1 PingPong (Intel MPI) time the same
    small-message round trip. Adds ``peer_rtt_us`` and ``ratio_to_peer`` = ``rtt_us`` / ``peer_rtt_us``: whether
    our kernel's figure means what the peer's means, judged like every figure against the site's references (a
    ratio of two round trips is CPU-bound, ``refstool.CPU_BOUND_RATIOS``). Where the CPUs are shared (partition
    extra ``assert_cpu_bound`` False) it is recorded, not asserted: on the 2-vCPU VM a cache line crossed between
    the two vCPUs in 104-175 ns for some seconds and in 440-990 ns for the next (the hypervisor moving them), so
    two launches a second apart saw different machines (ratios 0.61-2.39 over three runs; docs/validation.md).

    The peer runs before the counter snapshots, so the interface witness judges the benchmark's bytes alone; an
    MPI peer's transport reports are judged with the benchmark's. Where no peer exists for the build, ``nr_peer``
    says so. The leaf declares ``size_bytes`` (the message size) and the ``rtt_us`` performance variable.
    """

    #: The peer that ran beside the benchmark, or why none did (goes to the perflog).
    #:
    #: :type: :class:`str`
    nr_peer = variable(str, value='', loggable=True)

    def choose_peer(self) -> tuple[str | None, str]:
        """(executable, kind) of the peer for this environment, or (None, why there is none)."""
        raise NotImplementedError

    def peer_commands(self, executable: str) -> list[str]:
        """Shell lines running the peer (before the benchmark) and writing its figure."""
        raise NotImplementedError

    @run_after('setup', always_last=True)      # after the leaf's rtt_us: the check's own figure comes first
    def peer_metrics(self):
        self.peer_exe, kind = self.choose_peer()
        if self.peer_exe is None:
            self.nr_peer = f'none: {kind}'
            return
        self.peer_kind = kind
        self.nr_peer = os.path.basename(self.peer_exe)
        rtt = (imb_rtt_us(stage_file(self, PEER_OUT), self.size_bytes) if kind == 'imb' else
               netpipe_rtt_us(os.path.join(self.stagedir, PEER_NETPIPE_OUT), self.size_bytes))
        self.perf_variables['peer_rtt_us'] = sn.make_performance_function(rtt, 'us')
        self.perf_variables['ratio_to_peer'] = sn.make_performance_function(fraction_of(self, 'rtt_us', rtt),
                                                                            'ratio')

    @run_before('run')
    def run_peer_first(self):
        if self.peer_exe is not None:
            self.prerun_cmds += self.peer_commands(self.peer_exe)

    def peer_witness(self) -> list[str]:
        """The peer ran and measured the round trip (else the ratio cannot be judged: say why, not 'no value')."""
        if self.peer_exe is None:
            return []
        try:
            self.perf_variables['peer_rtt_us'].evaluate()
        except SanityError as err:
            tail = ''
            if os.path.exists(stage_file(self, PEER_OUT)):
                with open(stage_file(self, PEER_OUT), errors='replace') as fp:
                    tail = ' | '.join(fp.read().strip().splitlines()[-3:])
            return [f'{err}{": " + tail if tail else ""}']
        return []

    def witnesses(self) -> list:
        return [self.peer_witness] + super().witnesses()


class MpiRoundTripPeerPlugin(RoundTripPeerPlugin):
    """NPmpi built against the environment's MPI (``extras.netpipe_mpi``), else IMB-MPI1 (``extras.imb``), started
    with the benchmark's own launcher, forcing variables and rank pinning."""

    #: IMB-MPI1 trials (each ``-iter 1000``, a fraction of a second); the best is taken, as NetPIPE keeps the best
    #: of its three trials.
    #:
    #: :type: :class:`int`
    #: :default: ``3``
    peer_imb_trials = variable(int, value=3)

    def choose_peer(self) -> tuple[str | None, str]:
        extras = self.current_environ.extras
        if extras.get('netpipe_mpi'):
            return extras['netpipe_mpi'], 'netpipe'
        if extras.get('imb'):
            return extras['imb'], 'imb'
        return None, (f'no NetPIPE MPI module or IMB-MPI1 for {self.current_environ.name} (extras.netpipe_mpi, '
                      f'extras.imb)')

    def peer_commands(self, executable: str) -> list[str]:
        size = str(self.size_bytes)
        prepare = [f': > {PEER_OUT}']
        if self.peer_kind == 'imb':
            # a lengths file names any size (-msglog only powers of two); one line per trial, IMB times each
            prepare.append(f'printf "{size}\\n%.0s" $(seq {self.peer_imb_trials}) > {PEER_IMB_LENGTHS}')
            args = ['PingPong', '-msglen', PEER_IMB_LENGTHS, '-iter_policy', 'off', '-iter', '1000']
        else:
            args = ['-l', size, '-u', size, '-p', '0', '-o', PEER_NETPIPE_OUT]
        exe, opts = self.rank_command(executable, args)
        # ReFrame hands the job its task counts only when it writes the script; the launcher needs them now
        self.job.num_tasks, self.job.num_tasks_per_node = self.num_tasks, self.num_tasks_per_node
        launch = ' '.join([self.job.launcher.run_command(self.job), exe, *opts])
        return prepare + [f'{launch} >> {PEER_OUT} 2>&1 '
                          f'|| echo "peer {os.path.basename(executable)} exited with $?" >> {PEER_OUT}']

    def console_files(self) -> list:
        return super().console_files() + ([PEER_OUT] if self.peer_exe is not None else [])


class TcpRoundTripPeerPlugin(RoundTripPeerPlugin):
    """NPtcp between the benchmark's two ends: receiver on the first node, transmitter on the last, on the CPUs
    the benchmark's server and client use."""

    #: The NPtcp executable.
    #:
    #: :type: :class:`str`
    #: :default: ``'NPtcp'``
    peer_nptcp = variable(str, value='NPtcp')

    def choose_peer(self) -> tuple[str | None, str]:
        return self.peer_nptcp, 'netpipe'

    def peer_commands(self, executable: str) -> list[str]:
        port = 40000 + zlib.crc32(f'{self.unique_name} peer'.encode()) % 20000
        size = str(self.size_bytes)
        args = ['-P', str(port), '-l', size, '-u', size, '-p', '0']
        on_last = self.node_prefix('on_node', index=self.ic.nodes - 1)
        transmitter = ' '.join(filter(None, [on_last, self.end_cpu_prefix(1), executable, '-h', '$PEER_ADDR', *args,
                                             '-o', PEER_NETPIPE_OUT]))
        # NPtcp's receiver prints nothing when it listens: background_server_cmds waits for its socket
        return (server_address_cmds(self, 'PEER_ADDR')
                + background_server_cmds(self, ' '.join([executable, *args]), PEER_SERVER_OUT, 'PEER_PID', None,
                                         port, self.server_wait_s)
                + [f'{transmitter} > {PEER_OUT} 2>&1 '
                   f'|| echo "peer {os.path.basename(executable)} exited with $?" >> {PEER_OUT}',
                   'wait $PEER_PID 2>/dev/null'])


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
        return f'iperf3 -s -1 --forceflush -p {self.port}'

    @run_before('run')
    def set_client(self):
        self.executable = 'iperf3'
        self.executable_opts = ['-c', '$SERVER_ADDR', '-p', str(self.port), '-t', str(self.duration_s),
                                '-O', str(self.omit_s), '-J', '--logfile', IPERF3_OUT]

    @run_after('setup')
    def iperf3_metrics(self):
        self.perf_variables['throughput_mbps'] = sn.make_performance_function(
            iperf3_mbps(os.path.join(self.stagedir, IPERF3_OUT), os.path.join(self.stagedir, SERVER_OUT)),
            'Mbit/s')

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
        port = 40000 + zlib.crc32(self.unique_name.encode()) % 20000
        on_last = self.node_prefix('on_node', index=self.ic.nodes - 1)
        self.prerun_cmds += server_address_cmds(self, 'YARDSTICK_ADDR')
        self.prerun_cmds += background_server_cmds(self, f'iperf3 -s -1 --forceflush -p {port}',
                                                   YARDSTICK_SERVER_OUT, 'YARDSTICK_PID', 'Server listening', port, 10)
        self.prerun_cmds += [
            f'{on_last} {self.end_cpu_prefix(1)} iperf3 -c $YARDSTICK_ADDR -p {port} -t {self.yardstick_time_s} '
            f'-O 0.5 -J --logfile {YARDSTICK_OUT} || echo "yardstick iperf3 failed" >&2',
            'wait $YARDSTICK_PID 2>/dev/null',
        ]

    @run_after('setup')
    def yardstick_metrics(self):
        if not self._yardstick_active():
            return
        iperf = iperf3_mbps(os.path.join(self.stagedir, YARDSTICK_OUT),
                            os.path.join(self.stagedir, YARDSTICK_SERVER_OUT))
        self.perf_variables['iperf3_mbps'] = sn.make_performance_function(iperf, 'Mbit/s')
        self.perf_variables['ratio_to_iperf3'] = sn.make_performance_function(
            fraction_of(self, 'throughput_mbps', iperf), 'ratio')
        lower, upper = interconnects.load().fixed_band('peer_ratio')
        self.fixed_references = {**self.fixed_references, 'ratio_to_iperf3': (1.0, lower, upper)}
