"""Parsers of the peer benchmarks' output (NetPIPE, IMB-MPI1), and how a job script waits for a peer's server."""
import os
import subprocess

import pytest

pytest.importorskip('reframe')
from reframe.core.exceptions import SanityError  # noqa: E402

from netregress.measure import iperf, peers, roundtrip  # noqa: E402
from netregress.measure.tcppair import background_server_cmds  # noqa: E402

NP_OUT = """      1   0.285132   0.00002676
      2   0.570921   0.00002673
1048576 28239.717219   0.00028329
"""
NP_STDOUT = """Using no perturbations
  0:       1 bytes     50 times -->      0.29 Mbps in      26.76 usec
  1:       2 bytes     50 times -->      0.57 Mbps in      26.73 usec
  2: 1048576 bytes     50 times -->  28239.72 Mbps in     283.29 usec
"""
IMB_OUT = """#---------------------------------------------------
# Benchmarking PingPong
# #processes = 2
#---------------------------------------------------
       #bytes #repetitions      t[usec]   Mbytes/sec
            8          200         1.85         4.32
      1048576          200       290.10      3614.55


# All processes entering MPI_Finalize
"""


def test_netpipe(tmp_path):
    out = tmp_path / 'np.out'
    out.write_text(NP_OUT)
    assert peers.parse_netpipe(NP_OUT)[0] == (1, 0.285132, 0.00002676)
    assert peers.netpipe_value(str(out), 'latency_us').evaluate() == pytest.approx(26.76)
    assert peers.netpipe_value(str(out), 'max_throughput_mbps').evaluate() == pytest.approx(28239.717219)
    assert peers.netpipe_payload(NP_STDOUT) == 2 * 50 * (1 + 2 + 1048576)
    out.write_text('')
    with pytest.raises(SanityError, match='no measurements'):
        peers.netpipe_value(str(out), 'latency_us').evaluate()


def test_imb(tmp_path):
    rows = peers.parse_imb_pingpong(IMB_OUT)
    assert rows == [(8, 200, 1.85, 4.32), (1048576, 200, 290.10, 3614.55)]
    out = tmp_path / 'imb.out'
    out.write_text(IMB_OUT)
    assert peers.imb_value(str(out), 'mbs', 1048576).evaluate() == 3614.55
    with pytest.raises(SanityError, match='no row for 16'):
        peers.imb_value(str(out), 't_us', 16).evaluate()
    assert peers.parse_imb_pingpong('no table') == []


def test_round_trip_of_a_peer_from_its_precise_column(tmp_path):
    """NetPIPE's time column has 0.01-us steps: the round trip comes from its rate (2^20 bit/s Mbps); IMB's best
    trial of several, from whichever of its two-decimal columns has more digits."""
    np_out = tmp_path / 'peer-np.out'
    np_out.write_text('       8   119.60340000   0.00000051\n')
    assert roundtrip.netpipe_rtt_us(str(np_out), 8).evaluate() == pytest.approx(2e6 * 64 / (119.6034 * 2 ** 20))
    with pytest.raises(SanityError, match='no 16-byte round trip'):
        roundtrip.netpipe_rtt_us(str(np_out), 16).evaluate()
    with pytest.raises(SanityError, match='wrote no'):
        roundtrip.netpipe_rtt_us(str(tmp_path / 'absent'), 8).evaluate()
    imb = tmp_path / 'peer.out'
    imb.write_text(IMB_OUT.replace('            8          200         1.85         4.32\n',
                                   '            8         1000         0.50        15.92\n'
                                   '            8         1000         0.47        16.93\n'
                                   '            8         1000        30.01         0.27\n'))
    assert roundtrip.imb_rtt_us(str(imb), 8).evaluate() == pytest.approx(2 * 8 / 16.93)     # MB/s: more digits
    imb.write_text(IMB_OUT.replace('1.85         4.32', '30.01         0.27'))
    assert roundtrip.imb_rtt_us(str(imb), 8).evaluate() == pytest.approx(2 * 30.01)        # t[usec]: more digits
    imb.write_text('# All processes entering MPI_Finalize\n')
    with pytest.raises(SanityError, match='no 8-byte round trip'):
        roundtrip.imb_rtt_us(str(imb), 8).evaluate()


IPERF3_SERVER = '''-----------------------------------------------------------
Server listening on 38141 (test #1)
-----------------------------------------------------------
Accepted connection from 10.92.2.12, port 45344
[  5] local 10.92.2.11 port 38141 connected to 10.92.2.12 port 45360
[ ID] Interval           Transfer     Bitrate
[  5]   0.00-1.00   sec   113 MBytes   948 Mbits/sec
[  5]   1.00-2.00   sec   109 MBytes   911 Mbits/sec
[  5]   2.00-3.00   sec   114 MBytes   956 Mbits/sec
[  5]   3.00-4.00   sec   113 MBytes   951 Mbits/sec
[  5]   4.00-4.50   sec  56.9 MBytes   954 Mbits/sec
[  5]   4.50-4.50   sec   255 KBytes   767 Kbits/sec
- - - - - - - - - - - - - - - - - - - - - - - - -
[ ID] Interval           Transfer     Bitrate
[  5]   0.00-4.50   sec   506 MBytes   943 Mbits/sec                  receiver
'''


def test_iperf3_figure_is_the_median_of_the_receivers_whole_seconds(tmp_path):
    assert iperf.iperf3_intervals(IPERF3_SERVER) == [948.0, 911.0, 956.0, 951.0]     # no partial, no summary
    client = tmp_path / 'iperf3.json'
    client.write_text('{"end": {"sum_received": {"bits_per_second": 943e6, "bytes": 506e6}}}')
    server = tmp_path / 'server.out'
    server.write_text(IPERF3_SERVER)
    assert iperf.iperf3_mbps(str(client), str(server)).evaluate() == 949.5       # one stolen second moves nothing
    server.write_text('Server listening on 38141\n')
    with pytest.raises(SanityError, match='no whole one-second interval'):
        iperf.iperf3_mbps(str(client), str(server)).evaluate()
    client.write_text('{"error": "unable to connect to server"}')
    with pytest.raises(SanityError, match='unable to connect'):
        iperf.iperf3_mbps(str(client), str(server)).evaluate()
    assert iperf.iperf3_intervals('[  5]   0.00-1.00   sec  1.16 GBytes  9.96 Gbits/sec\n') == [9960.0]


class _InPlace:
    """A check whose nodes are this host: no launcher prefix, no CPU pinning."""

    def node_prefix(self, key, **ctx):
        return ''

    def end_cpu_prefix(self, end):
        return ''


def _run_lines(tmp_path, lines, after, **env):
    script = '\n'.join(['set -u', *lines, after, 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; true'])
    return subprocess.run(['bash', '-c', script], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})


# a server that prints nothing and listens only after 1.5 s, as NPtcp's receiver did on a loaded CI runner; with
# FIRST_TAKEN its first start finds its port taken and exits, as when someone binds the drawn port first
_SILENT_SERVER = """import os, socket, sys, time
port = int(sys.argv[1])
with open('ports', 'a') as fp:
    fp.write(f'{port}\\n')
if os.environ.get('FIRST_TAKEN') and not os.path.exists('taken'):
    open('taken', 'w').close()
    sys.exit(f'bind: port {port} in use')
time.sleep(1.5)
s = socket.socket()
s.bind(('127.0.0.1', port))
s.listen()
time.sleep(20)
"""
_CONNECT = 'python3 -c "import socket, sys; socket.create_connection((\'127.0.0.1\', int(sys.argv[1])), 2)" $PORT'


def _silent_server(tmp_path):
    (tmp_path / 'server.py').write_text(_SILENT_SERVER)
    return 'python3 server.py $PORT'


def test_a_server_that_prints_nothing_is_waited_for_until_its_socket_listens(tmp_path):
    lines = background_server_cmds(_InPlace(), _silent_server(tmp_path), 'server.out', 'PID', None, 'PORT', 5)
    done = _run_lines(tmp_path, lines, f'{_CONNECT} && echo connected')
    assert 'connected' in done.stdout, done.stderr
    assert 'did not start listening' not in done.stderr


def test_a_port_is_drawn_at_random_and_drawn_again_when_the_server_finds_it_taken(tmp_path):
    """Servers that must be told a port (iperf3, NPtcp) get one nobody can predict: a random free port of the
    dynamic range, and another one when the server exits without listening."""
    lines = background_server_cmds(_InPlace(), _silent_server(tmp_path), 'server.out', 'PID', None, 'PORT', 5)
    done = _run_lines(tmp_path, lines, f'{_CONNECT} && echo connected on $PORT', FIRST_TAKEN='1')
    ports = [int(p) for p in (tmp_path / 'ports').read_text().split()]
    assert len(ports) == 2 and ports[0] != ports[1] and all(49152 <= p <= 65535 for p in ports), ports
    assert f'connected on {ports[1]}' in done.stdout, done.stderr


def test_the_port_a_server_picked_and_printed_is_read_from_its_output(tmp_path):
    server = 'sh -c "echo TCP socket listening on port [43210]; sleep 20"'
    lines = background_server_cmds(_InPlace(), server, 'server.out', 'PID', 'listening on port', 'PORT', 5,
                                   prints_port=True)
    done = _run_lines(tmp_path, lines, 'echo "port=$PORT"')
    assert 'port=43210' in done.stdout and 'did not start listening' not in done.stderr, done.stderr


def test_a_server_that_never_listens_is_reported_with_its_output(tmp_path):
    lines = background_server_cmds(_InPlace(), 'sh -c "echo bind failed; sleep 20"', 'server.out', 'PID', None,
                                   'PORT', 1)
    done = _run_lines(tmp_path, lines, 'true')
    assert 'server did not start listening within 1 s:' in done.stderr
    assert 'bind failed' in done.stderr
