"""Abstract two-party TCP checks: a server on the first node of the job, a client on the last.

``TcpPairCheck(NetregressCheck)``
    the server started in the background on the first node (both ends on one host for a one-node interconnect),
    found on the interface under test, stopped after the client; the client pinned with the server.
``TcpKernelCheck(KernelMixin, TcpPairCheck)``
    our nr-tcpserver / nr-tcptest pair writing ``result.json`` on the client side: the server authenticates its
    client with a per-job secret (:func:`job_secret_cmds`), listens on the address under test only, on a port it
    picked itself; sanity fails a result that was not authenticated (:func:`auth_problem`).

:func:`server_address_cmds` and :func:`background_server_cmds` start any server this way (iperf3 yardsticks,
NPtcp peers in an MPI job too), each on a port nobody can predict (issue 29: a port derived from the test name let
anyone who could reach the node take the server's one test slot).
"""
from __future__ import annotations

import shlex

import reframe.utility.typecheck as typ
from reframe.core.builtins import fixture, run_after, run_before, variable

from . import launch, results
from .base import RESULT_FILE, NetregressCheck
from .build import TcpKernelBuild
from .plugins import KernelMixin

SERVER_OUT = 'server.out'       # what a TcpPairCheck's server printed (iperf3's receiver intervals)
SECRET_FILE = 'auth.secret'     # the job's shared secret of nr-tcpserver / nr-tcptest (--auth-file)

#: sed script printing the port of nr-tcpserver's "TCP socket listening on port [N]" line.
_PRINTED_PORT_SED = r's/.*listening on port \[\([0-9]*\)\].*/\1/p'


class TcpPairCheck(NetregressCheck):
    """Abstract two-party TCP benchmark: server on the first node, client on the last, over ``iface``."""

    valid_prog_environs = ['+tcp']
    num_ranks = 1

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

    #: The server picks a free port itself and prints it (nr-tcpserver ``-p 0``); else the job script draws one
    #: (:func:`background_server_cmds`). Either way the port is ``$SERVER_PORT`` in the job script.
    #:
    #: :type: :class:`bool`
    #: :default: ``False``
    server_prints_port = variable(typ.Bool, value=False)

    def server_command(self) -> str:
        """Shell command starting the server on ``$SERVER_ADDR``, port ``$SERVER_PORT`` or, with
        ``server_prints_port``, one it picks (leaves implement)."""
        raise NotImplementedError

    def server_setup_cmds(self) -> list[str]:
        """Shell lines run before the server starts (leaves add what it needs)."""
        return []

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
        self.prerun_cmds += server_address_cmds(self, 'SERVER_ADDR') + self.server_setup_cmds()
        self.prerun_cmds += background_server_cmds(self, self.server_command(), SERVER_OUT, 'SERVER_PID',
                                                   self.server_ready_pattern, 'SERVER_PORT', self.server_wait_s,
                                                   self.server_prints_port)
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


def background_server_cmds(check: NetregressCheck, command: str, out: str, pid_var: str, ready_pattern: str | None,
                           port_var: str, wait_s: int, prints_port: bool = False) -> list[str]:
    """Shell lines starting ``command`` on the first node in the background and waiting until it listens: until
    it prints ``ready_pattern``, or, for a server that prints nothing (NPtcp's receiver), until a socket listens
    on its port. The job script runs on that node (:func:`server_address_cmds`), so ``ss`` sees the socket. A
    fixed one-second sleep was not enough on a loaded CI runner: NPtcp's transmitter met a refused connection.

    ``$port_var`` is the server's port, never predictable: a server that picks a free one itself and prints it
    (``prints_port``: nr-tcpserver ``-p 0``) has it read from what it printed; for the others, which must be told
    one (iperf3 and NPtcp take it on both command lines), it is drawn by :func:`random_port_cmd` before
    ``command`` (which names it ``$port_var``) starts, and drawn again, up to 3 times, when the server exits
    without listening (someone bound the port in between)."""
    on_first = check.node_prefix('on_node', index=0)
    launch = ' '.join(filter(None, [on_first, check.end_cpu_prefix(0), command]))
    ready = (f'grep -qE {shlex.quote(ready_pattern)} {out}' if ready_pattern else
             f'ss -Hltn "sport = :${port_var}" | grep -q .')
    start = (f'{launch} > {out} 2>&1 & {pid_var}=$!; '
             f'for i in $(seq {10 * wait_s}); do {ready} && break; kill -0 ${pid_var} 2>/dev/null || break; '
             f'sleep 0.1; done')
    if prints_port:
        lines = [start, printed_port_cmd(port_var, out)]
    else:
        lines = [f'for attempt in 1 2 3; do {random_port_cmd(port_var)}; {start}; '
                 f'{ready} || kill -0 ${pid_var} 2>/dev/null && break; done']
    return lines + [f'{ready} || {{ echo "server did not start listening within {wait_s} s:" >&2; cat {out} >&2; }}']


def printed_port_cmd(var: str, out: str) -> str:
    """Shell setting ``$var`` to the port nr-tcpserver ``-p 0`` printed into ``out`` (empty if it printed none)."""
    return f'{var}=$(sed -n {shlex.quote(_PRINTED_PORT_SED)} {out} | head -n 1)'


def random_port_cmd(var: str) -> str:
    """Shell setting ``$var`` to a random port of the dynamic range (49152-65535) that no TCP socket of this host
    uses. For servers that cannot pick their own and print it: iperf3 ``-p 0`` does not say which port it got."""
    return (f'for i in $(seq 50); do {var}=$((49152 + $(od -An -N2 -tu2 /dev/urandom) % 16384)); '
            f'ss -Htan "sport = :${var}" | grep -q . || break; done')


def job_secret_cmds(path: str = SECRET_FILE) -> list[str]:
    """Shell lines making this job's shared secret for nr-tcpserver and nr-tcptest ``--auth-file`` (64 hex digits
    from /dev/urandom) in the stage directory, which the server's and the client's nodes share: mode 0600 from its
    creation (umask 077; noclobber refuses a file someone put there in between), never on a command line, removed
    when the job script exits."""
    return [f"rm -f {path}; (umask 077; set -C; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > {path}) "
            f"|| echo 'cannot create the job secret {path}' >&2",
            f"trap 'rm -f {path}' EXIT"]


def auth_problem(doc: dict) -> str | None:
    """Why a successful nr-tcptest result does not prove an authenticated session (``options.auth``), else None (a
    failed run is the kernel witness's to report). A client given ``--auth-file`` refuses a server that does not
    authenticate, so auth true in a passing result means both ends held the job's secret."""
    if doc.get('status') == 'ok' and (doc.get('options') or {}).get('auth') is not True:
        return 'nr-tcptest ran without --auth-file (options.auth is not true): the server took any client'
    return None


class TcpKernelCheck(KernelMixin, TcpPairCheck):
    """Abstract: nr-tcpserver / nr-tcptest pair writing ``result.json`` on the client side."""

    server_ready_pattern = 'listening on port'
    server_prints_port = True

    kernels = fixture(TcpKernelBuild, scope='environment')

    #: Client options (without host, port and ``--json``); filled by the leaf.
    #:
    #: :type: :class:`List[str]`
    client_opts = variable(typ.List[str], value=[])

    #: Server options (without address, port and secret).
    #:
    #: :type: :class:`List[str]`
    server_opts = variable(typ.List[str], value=[])

    def server_setup_cmds(self) -> list[str]:
        return job_secret_cmds()

    def server_command(self) -> str:
        return ' '.join([self.kernel('nr-tcpserver'), '-B', '$SERVER_ADDR', '-p', '0', '--auth-file', SECRET_FILE,
                         '--max-tests', '1', *self.server_opts])

    @run_before('run')
    def set_client_command(self):
        self.executable = self.kernel('nr-tcptest')
        self.executable_opts = ['-h', '$SERVER_ADDR', '-p', '$SERVER_PORT', '--auth-file', SECRET_FILE,
                                *self.client_opts, '--json', RESULT_FILE]

    def auth_witness(self) -> list[str]:
        try:
            problem = auth_problem(results.load_result(self.result_path))
        except results.KernelResultError:
            return []                   # no result: the kernel witness says why
        return [problem] if problem else []

    def witnesses(self) -> list:
        return [self.kernel_witness, self.auth_witness] + super().witnesses()
