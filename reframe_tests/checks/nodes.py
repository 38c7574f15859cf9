"""Every node of a multi-node partition against its peers: a loopback TCP stream on each node in turn
(netregress.nodeprobe). Catches a slow node on fabrics where the links are bounded elsewhere.
"""
import reframe as rfm
from reframe.core.builtins import parameter, run_after

from netregress.measure import interconnects
from netregress.measure.nodeprobe import NodeLoopbackCheck


def _node_fabrics():
    table = interconnects.load()
    return [n for n in table.names if table.interconnect(n).nodes >= 2]


@rfm.simple_test
class node_loopback(NodeLoopbackCheck):
    """Every node's own loopback TCP stream, one node after the other, against the median node: a node whose CPU
    or memory lost speed shows here even where its links are bounded elsewhere."""

    interconnect = parameter(_node_fabrics(), fmt=lambda ic: ic, loggable=True)
    tags = {'links', 'nodes', 'ci'}

    @run_after('init')
    def describe(self):
        self.ref_test = 'nodes.loopback'
        self.descr = f'loopback stream of every node of the {self.interconnect} partition'
