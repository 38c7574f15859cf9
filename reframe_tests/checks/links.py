"""Every link of every node fabric: an all-pairs nr-tcptest run over all nodes of the partition (N-1 rounds).

One test case per interconnect that spans nodes and shows its traffic on an interface (``fast`` and ``gige`` on the
vcluster, ``eth`` at a site). The logic (pairing, job script, judgement) is in ``netregress.allpairs``.
"""
import reframe as rfm
from reframe.core.builtins import run_after

from netregress.measure.allpairs import AllPairsLinkCheck


@rfm.simple_test
class link_allpairs(AllPairsLinkCheck):
    """Throughput (both directions) and 8-byte RTT of all N(N-1)/2 links; slowest link against the median link
    and, where the fabric has a line rate, against that rate."""

    tags = {'links', 'ci'}

    @run_after('init')
    def describe(self):
        self.ref_test = 'links.allpairs'
        self.descr = f'all-pairs link test of the {self.interconnect} fabric'
