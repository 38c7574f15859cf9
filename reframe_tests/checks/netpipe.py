"""NetPIPE: TCP (NPtcp) and MPI (NPmpi per MPI build) latency and throughput, seed 004's micro-benchmark view.

NPmpi comes from the system's Spack environment (our ``netpipe`` recipe in spack_repo/, built with each MPI
build's own wrapper), so every MPI environment has one. On a machine without Spack the check falls back to the
environment's ``extras.netpipe_mpi`` (Debian's NPopenmpi / NPmpich2 for its own Open MPI and MPICH) and is skipped,
with that reason, for the MPI builds that have none. With Spack present but unable to build NetPIPE (environment
not concretized, recipe missing) the build fixture fails with the fix: no silent fallback to another binary.
"""
import os

import reframe as rfm
from reframe.core.builtins import fixture, parameter, run_after, run_before

from netregress.measure import interconnects, spack_build
from netregress.measure.peers import NETPIPE_OUT, NetpipeMpiCheck, NetpipeTcpCheck


def _ip_interconnects():
    table = interconnects.load()
    return [n for n in table.names if table.interconnect(n).counters == 'interface']


class NetpipeSpackBuild(spack_build.SpackPackageBuild):
    """NPmpi built by Spack with the current MPI environment (optional: without Spack the check falls back)."""

    package = 'netpipe'
    executables = ['NPmpi']
    optional = True


@rfm.simple_test
class netpipe_tcp(NetpipeTcpCheck):
    """NPtcp ping-pong 1 B .. 1 MiB between the two nodes (loopback on one node)."""

    interconnect = parameter(_ip_interconnects(), fmt=lambda ic: ic, loggable=True)
    tags = {'netpipe', 'tcp'}

    @run_after('init')
    def describe(self):
        self.ref_test = 'netpipe.tcp'


@rfm.simple_test
class netpipe_mpi(NetpipeMpiCheck):
    """NPmpi ping-pong 1 B .. 1 MiB with the environment's MPI on the interconnect under test."""

    netpipe_build = fixture(NetpipeSpackBuild, scope='environment')
    tags = {'netpipe', 'mpi'}

    @run_after('init')
    def describe(self):
        self.ref_test = 'netpipe.mpi'

    @run_after('setup')
    def require_netpipe_module(self):
        """Spack's NPmpi for this MPI, else the environment's own module, else skipped (no Spack, none exists)."""
        if self.netpipe_build.kernels_dir:
            self.netpipe_exe = os.path.join(self.netpipe_build.kernels_dir, 'NPmpi')
        else:
            self.netpipe_exe = self.current_environ.extras.get('netpipe_mpi', '')
            self.skip_if(not self.netpipe_exe,
                         f'{spack_build.not_built_reason(self.current_environ)}; '
                         f'no other NetPIPE MPI module exists for '
                         f'{self.current_environ.name} (Debian ships NPopenmpi and NPmpich2 for its own Open MPI '
                         f'and MPICH only)')

    @run_before('run')
    def set_command(self):
        self.executable = self.netpipe_exe
        self.executable_opts = [*self.netpipe_opts(), '-o', os.path.join(self.stagedir, NETPIPE_OUT)]
