"""Parsers of the peer benchmarks' output (NetPIPE, IMB-MPI1)."""
import pytest

pytest.importorskip('reframe')
from reframe.core.exceptions import SanityError  # noqa: E402

from netregress import peers  # noqa: E402

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
