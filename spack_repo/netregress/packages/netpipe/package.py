# NetPIPE 3.7.2: the classic ping-pong network benchmark, a yardstick for our TCP and MPI kernels.
# There is no netpipe recipe in Spack's builtin repository. The tarball is the one Debian ships as
# netpipe_3.7.2.orig.tar.gz; offline it comes from a source mirror in Spack's content-addressed layout
# (<mirror>/_source-cache/archive/13/<sha256>.tar.gz, see docs/spack.md and tools/spack-mirror-list).
import os

from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *


class Netpipe(MakefilePackage):
    """NetPIPE (Network Protocol Independent Performance Evaluator): ping-pong latency and throughput over a
    range of message sizes, for TCP (NPtcp) and MPI (NPmpi)."""

    homepage = "https://netpipe.cs.ksu.edu/"
    url = "http://deb.debian.org/debian/pool/main/n/netpipe/netpipe_3.7.2.orig.tar.gz"

    version("3.7.2", sha256="13dac884ff52951636f651c421f5ff4a853218a95aa28a4a852402ee385a2ab8")

    variant("tcp", default=True, description="Build NPtcp (TCP sockets)")
    variant("mpi", default=True, description="Build NPmpi (MPI point-to-point, with the spec's MPI)")

    conflicts("~tcp~mpi", msg="netpipe needs at least one of +tcp and +mpi")

    depends_on("c", type="build")
    depends_on("gmake", type="build")
    depends_on("mpi", when="+mpi")

    # The 2009 sources define globals in a header included twice: GCC >= 10 defaults to -fno-common.
    cflags = "-O2 -fcommon"

    @property
    def targets(self):
        """(make target, executable) pairs this spec builds."""
        out = []
        if self.spec.satisfies("+tcp"):
            out.append(("tcp", "NPtcp"))
        if self.spec.satisfies("+mpi"):
            out.append(("mpi", "NPmpi"))
        return out

    def build(self, spec, prefix):
        for target, _ in self.targets:
            cc = spec["mpi"].mpicc if target == "mpi" else spack_cc
            make(target, f"CC={cc}", f"MPICC={cc}", f"CFLAGS={self.cflags}", parallel=False)

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        for _, exe in self.targets:
            install(exe, prefix.bin)
        mkdirp(prefix.share.man.man1)
        if os.path.exists("dox/netpipe.1"):
            install("dox/netpipe.1", prefix.share.man.man1)

    def test_nptcp_loopback(self):
        """NPtcp receiver and transmitter over 127.0.0.1, sizes up to 1 KiB"""
        if not self.spec.satisfies("+tcp"):
            raise SkipTest("built without TCP (~tcp)")
        import subprocess
        import time

        nptcp = self.prefix.bin.join("NPtcp")
        receiver = subprocess.Popen([nptcp, "-P", "5402", "-u", "1024", "-n", "5"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1)
            transmitter = which(nptcp, required=True)
            transmitter("-h", "127.0.0.1", "-P", "5402", "-u", "1024", "-n", "5", "-o", "np.out",
                        output=str.split, error=str.split)
            with open("np.out") as fp:
                rows = [line.split() for line in fp if line.strip()]
            assert rows and int(rows[-1][0]) >= 1024, "NPtcp wrote no row for 1 KiB"
        finally:
            if receiver.poll() is None:
                receiver.terminate()
            receiver.wait(timeout=10)
