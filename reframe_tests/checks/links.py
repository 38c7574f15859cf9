"""Every link of every node fabric: one nr-linkmap job over every usable node of the partition in scope.

One test case per interconnect that spans nodes (``fast`` and ``gige`` on the vcluster, ``eth`` and ``ib`` at a
site). The logic (plans in the order of the switch tree, the job, the verdict that names a cable, an uplink or a
spine) is in ``netregress.measure.allpairs``.
"""
import reframe as rfm
from reframe.core.builtins import run_after

from netregress.measure.allpairs import AllPairsLinkCheck


@rfm.simple_test
class link_allpairs(AllPairsLinkCheck):
    """Throughput of every direction of the links the plan measures, each against what its round let it read: the
    median link and, where the fabric has a line rate, that rate."""

    tags = {'links', 'ci'}

    @run_after('init')
    def describe(self):
        self.ref_test = 'links.allpairs'
        self.descr = f'all-pairs link test of the {self.interconnect} fabric'
