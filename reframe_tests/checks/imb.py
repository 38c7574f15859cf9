"""IMB-MPI1 PingPong, the vendor yardstick for nr-mpitest, for every MPI build.

IMB comes from the system's Spack environment (``intel-mpi-benchmarks``, IMB-MPI1 only, built with each MPI
build's own wrapper). On a machine without Spack the check falls back to the environment's ``extras.imb`` (the
Intel MPI wheel ships IMB-MPI1) and is skipped, with that reason, for the MPI builds that have none. With Spack
present but unable to build IMB, the build fixture fails with the fix.
"""
import os

import reframe as rfm
from reframe.core.builtins import fixture, run_after, run_before

from netregress.measure import spack_build
from netregress.measure.peers import ImbPingPongCheck


class ImbSpackBuild(spack_build.SpackPackageBuild):
    """IMB-MPI1 built by Spack with the current MPI environment (optional: without Spack the check falls back)."""

    package = 'intel-mpi-benchmarks'
    executables = ['IMB-MPI1']
    optional = True


@rfm.simple_test
class imb_pingpong(ImbPingPongCheck):
    """PingPong 8 B .. 1 MiB: latency at 8 B, bandwidth at 1 MiB."""

    valid_prog_environs = ['+mpi']
    imb_build = fixture(ImbSpackBuild, scope='environment')
    tags = {'imb', 'mpi'}

    @run_after('init')
    def describe(self):
        self.ref_test = 'imb.pingpong'

    @run_after('setup')
    def choose_imb(self):
        """Spack's IMB-MPI1 for this MPI, else the environment's own, else skipped (no Spack, none exists)."""
        if self.imb_build.kernels_dir:
            self.imb_exe = os.path.join(self.imb_build.kernels_dir, 'IMB-MPI1')
        else:
            self.imb_exe = self.current_environ.extras.get('imb', '')
            self.skip_if(not self.imb_exe, f'{spack_build.not_built_reason(self.current_environ)}; '
                                           f'no other IMB-MPI1 exists for '
                                           f'{self.current_environ.name} (only the Intel MPI wheel ships one)')

    @run_before('run')
    def set_command(self):
        """The options of ImbPingPongCheck.set_command, on the IMB-MPI1 chosen above (not ``extras.imb``)."""
        lo, hi = self.msglog
        self.executable = self.imb_exe
        self.executable_opts = ['PingPong', '-msglog', f'{lo}:{hi}', '-iter_policy', 'off',
                                '-iter', str(self.iterations)]
