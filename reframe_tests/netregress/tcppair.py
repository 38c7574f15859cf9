"""Abstract two-party TCP checks: a server on the first node of the job, a client on the last.

``TcpPairCheck(NetregressCheck)``
    the server started in the background on the first node (both ends on one host for a one-node interconnect),
    found on the interface under test, stopped after the client; the client pinned with the server.
``TcpKernelCheck(KernelMixin, TcpPairCheck)``
    our nr-tcpserver / nr-tcptest pair writing ``result.json`` on the client side.

:func:`server_address_cmds` and :func:`background_server_cmds` start any server this way (iperf3 yardsticks,
NPtcp peers in an MPI job too).
"""
from __future__ import annotations

import shlex
import zlib

import reframe.utility.typecheck as typ
from reframe.core.builtins import fixture, run_after, run_before, variable

from . import launch
from .base import RESULT_FILE, NetregressCheck
from .build import TcpKernelBuild
from .plugins import KernelMixin

SERVER_OUT = 'server.out'       # what a TcpPairCheck's server printed (iperf3's receiver intervals)


class TcpPairCheck(NetregressCheck):
    """Abstract two-party TCP benchmark: server on the first node, client on the last, over ``iface``."""

    valid_prog_environs = ['+tcp']
    num_ranks = 1

    #: TCP port of the server; 0 = derived from the test name (stable, spread over 20000-39999).
    #:
    #: :type: :class:`int`
    #: :default: ``0``
    port = variable(int, value=0)

    #: Seconds the client waits for the server to listen.
    #:
    #: :type: :class:`int`
    #: :default: ``10``
    server_wait_s = variable(int, value=10)

    #: Regular expression (grep -E) the server prints once it listens; None: wait until a socket listens on ``port``.
    #:
    #: :type: :class:`str` or ``None``
    #: :default: ``None``
    server_ready_pattern = variable(str, type(None), value=None)

    def server_command(self) -> str:
        """Shell command starting the server (leaves implement)."""
        raise NotImplementedError

    @run_after('setup')
    def choose_port(self):
        if not self.port:
            self.port = 20000 + zlib.crc32(self.unique_name.encode()) % 20000

    @run_after('setup')
    def client_on_last_node(self):
        nodes = self.ic.nodes
        self.num_tasks = nodes
        self.num_tasks_per_node = 1
        self.job.launcher = launch.TemplateLauncher(
            [str(t).format(index=nodes - 1) for t in (self.current_partition.extras.get('on_node') or [])])

    @run_before('run')
    def start_server(self):
        """Find the server's address on ``iface``, start it in the background, stop it after the client."""
        self.prerun_cmds += server_address_cmds(self, 'SERVER_ADDR')
        self.prerun_cmds += background_server_cmds(self, self.server_command(), SERVER_OUT, 'SERVER_PID',
                                                   self.server_ready_pattern, self.port, self.server_wait_s)
        self.postrun_cmds += ['kill $SERVER_PID 2>/dev/null; wait $SERVER_PID 2>/dev/null; true']

    @run_before('run', always_last=True)
    def pin_client_with_server(self):
        """The client runs on the server's CPU (:meth:`NetregressCheck.pair_cpu_prefix`)."""
        pin = self.pair_cpu_prefix().split()
        if pin:
            self.executable_opts = pin[1:] + [self.executable, *self.executable_opts]
            self.executable = pin[0]


def server_address_cmds(check: NetregressCheck, var: str) -> list[str]:
    """Shell lines setting ``$var`` to the first node's IPv4 address on the interface under test.

    The job script itself runs on the first node of the allocation (Slurm's batch host; the only host on a local
    system), so no job step is needed to ask that node.
    """
    return [
        f'{var}=$(ip -4 -o addr show dev {check.iface} | awk \'{{split($4,a,"/"); print a[1]; exit}}\')',
        f'test -n "${var}" || echo "no IPv4 address on {check.iface} of the first node" >&2',
    ]


def background_server_cmds(check: NetregressCheck, command: str, out: str, pid_var: str,
                           ready_pattern: str | None, port: int, wait_s: int) -> list[str]:
    """Shell lines starting ``command`` on the first node in the background and waiting until it listens: until
    it prints ``ready_pattern``, or, for a server that prints nothing (NPtcp's receiver), until a socket listens
    on ``port``. The job script runs on that node (:func:`server_address_cmds`), so ``ss`` sees the socket. A
    fixed one-second sleep was not enough on a loaded CI runner: NPtcp's transmitter met a refused connection."""
    on_first = check.node_prefix('on_node', index=0)
    launch = ' '.join(filter(None, [on_first, check.end_cpu_prefix(0), command]))
    ready = (f'grep -qE {shlex.quote(ready_pattern)} {out}' if ready_pattern else
             f'ss -Hltn "sport = :{int(port)}" | grep -q .')
    return [
        f'{launch} > {out} 2>&1 &', f'{pid_var}=$!',
        f'for i in $(seq {10 * wait_s}); do {ready} && break; kill -0 ${pid_var} 2>/dev/null || break; sleep 0.1; done',
        f'{ready} || {{ echo "server did not start listening within {wait_s} s:" >&2; cat {out} >&2; }}',
    ]


class TcpKernelCheck(KernelMixin, TcpPairCheck):
    """Abstract: nr-tcpserver / nr-tcptest pair writing ``result.json`` on the client side."""

    server_ready_pattern = 'listening on port'

    kernels = fixture(TcpKernelBuild, scope='environment')

    #: Client options (without host, port and ``--json``); filled by the leaf.
    #:
    #: :type: :class:`List[str]`
    client_opts = variable(typ.List[str], value=[])

    #: Server options (without port).
    #:
    #: :type: :class:`List[str]`
    server_opts = variable(typ.List[str], value=[])

    def server_command(self) -> str:
        return ' '.join([self.kernel('nr-tcpserver'), '-p', str(self.port), '--max-tests', '1', *self.server_opts])

    @run_before('run')
    def set_client_command(self):
        self.executable = self.kernel('nr-tcptest')
        self.executable_opts = ['-h', '$SERVER_ADDR', '-p', str(self.port), *self.client_opts,
                                '--json', RESULT_FILE]

    def witnesses(self) -> list:
        return [self.kernel_witness] + super().witnesses()
