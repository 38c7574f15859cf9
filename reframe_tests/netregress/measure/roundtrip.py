"""The round trip's peer in the same job: NetPIPE (NPtcp beside nr-tcptest, NPmpi beside nr-mpitest) or IMB-MPI1
PingPong, and our kernel's ratio to it (:class:`RoundTripPeerPlugin`).
"""
from __future__ import annotations

import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import SanityError

from ..judge import figures
from . import results
from ..judge.bands import fraction_of
from .base import stage_file
from .peers import parse_imb_pingpong, parse_netpipe
from .tcppair import background_server_cmds, server_address_cmds


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
    ratio of two round trips is CPU-bound, as it declares). Where the CPUs are shared (partition
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
        peer = 'IMB-MPI1' if kind == 'imb' else 'NetPIPE'
        self.add_figure('peer_rtt_us', sn.make_performance_function(rtt, 'us'),
                        figures.latency(f'{peer} round trip, {figures.size_text(self.size_bytes)}'))
        # a ratio of two CPU-bound round trips from separate launches: judged like the figures it divides
        self.add_figure('ratio_to_peer', sn.make_performance_function(fraction_of(self, 'rtt_us', rtt), 'ratio'),
                        figures.cpu_bound(f'round trip / {peer}\'s', better='lower'))

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
            text = ''
            if os.path.exists(stage_file(self, PEER_OUT)):
                with open(stage_file(self, PEER_OUT), errors='replace') as fp:
                    text = fp.read().strip()
            # srun's account of the peer's tasks names a crash; else the last lines say what happened
            why = '; '.join(f'{f} (srun)' for f in results.failed_tasks(text)) or ' | '.join(text.splitlines()[-3:])
            return [f'{err}{": " + why if why else ""}']
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
        launch = self.same_job_launch(executable, args)
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
        size = str(self.size_bytes)
        args = ['-P', '$PEER_PORT', '-l', size, '-u', size, '-p', '0']
        on_last = self.node_prefix('on_node', index=self.ic.nodes - 1)
        transmitter = ' '.join(filter(None, [on_last, self.end_cpu_prefix(1), executable, '-h', '$PEER_ADDR', *args,
                                             '-o', PEER_NETPIPE_OUT]))
        # NPtcp's receiver prints nothing when it listens: background_server_cmds waits for its socket
        return (server_address_cmds(self, 'PEER_ADDR')
                + background_server_cmds(self, ' '.join([executable, *args]), PEER_SERVER_OUT, 'PEER_PID', None,
                                         'PEER_PORT', self.server_wait_s)
                + [f'{transmitter} > {PEER_OUT} 2>&1 '
                   f'|| echo "peer {os.path.basename(executable)} exited with $?" >> {PEER_OUT}',
                   'wait $PEER_PID 2>/dev/null'])
