# netregress kernels: the measurement core library and its thin front ends (nr-tcpserver, nr-tcptest,
# nr-mpitest, nr-mpicoll, nr-ebb, nr-linkmap), built with CMake against one MPI.
#
# Versions: `main` is the branch of this repository (git URL: NETREGRESS_GIT, default the repository this
# recipe lives in); `develop` is meant for a local checkout:
#   spack develop --no-clone --path <checkout> netregress@develop   (inside an environment), or
#   spack install netregress@develop dev_path=<checkout>
import os
import re
import subprocess
import time

from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *

# spack_repo/netregress/packages/netregress/package.py -> the repository root
_REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *([os.pardir] * 4)))

TCP_KERNELS = ("nr-tcpserver", "nr-tcptest")
MPI_KERNELS = ("nr-mpitest", "nr-mpicoll", "nr-ebb", "nr-linkmap")

#: What nr-tcpserver prints once it listens (with -p 0 the port is the one the kernel picked).
PORT_LINE = re.compile(r"TCP socket listening on port \[(\d+)\]")


class Netregress(CMakePackage):
    """Interconnect and MPI regression-test kernels: TCP throughput/latency (nr-tcpserver, nr-tcptest) and MPI
    point-to-point, collective and bandwidth kernels (nr-mpitest, nr-mpicoll, nr-ebb) and the partition link test
    (nr-linkmap), with JSON results."""

    homepage = "file://" + _REPO_ROOT
    git = os.environ.get("NETREGRESS_GIT", "file://" + _REPO_ROOT)

    maintainers("netregress")

    version("main", branch="main")
    version("develop", branch="main")

    variant("mpi", default=True, description="Build the MPI kernels (nr-mpitest, nr-mpicoll, nr-ebb, nr-linkmap)")

    depends_on("c", type="build")
    depends_on("cmake@3.20:", type="build")
    depends_on("mpi", when="+mpi")

    def cmake_args(self):
        args = [
            self.define_from_variant("NR_ENABLE_MPI", "mpi"),
            # the ctest cases are run by the project's own CI, not inside a package build
            self.define("NR_BUILD_TESTS", False),
        ]
        if self.spec.satisfies("+mpi"):
            # the MPI's own wrapper: on Debian /usr/bin/mpicc is always Open MPI (see tools/spack-externals)
            args.append(self.define("MPI_C_COMPILER", self.spec["mpi"].mpicc))
        return args

    @property
    def kernels(self):
        """Executables this spec installs."""
        return TCP_KERNELS + (MPI_KERNELS if self.spec.satisfies("+mpi") else ())

    # -- stand-alone tests (spack test run netregress) -------------------------------------------------------

    def test_help(self):
        """every installed kernel prints its usage with --help and exits 0"""
        for name in self.kernels:
            with test_part(self, f"test_help_{name.replace('-', '_')}", purpose=f"{name} --help"):
                exe = which(self.prefix.bin.join(name), required=True)
                out = exe("--help", output=str.split, error=str.split)
                assert "Usage:" in out, f"{name} --help printed no usage"

    def test_tcp_loopback(self):
        """nr-tcpserver on a free port (-p 0), one short nr-tcptest stream over 127.0.0.1"""
        server_exe = self.prefix.bin.join("nr-tcpserver")
        server = subprocess.Popen(
            [server_exe, "-p", "0", "--max-tests", "1", "--insecure"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            port, deadline, seen = None, time.monotonic() + 10, []
            while port is None and time.monotonic() < deadline:
                line = server.stdout.readline()
                if not line:
                    break
                seen.append(line)
                m = PORT_LINE.search(line)
                port = m.group(1) if m else None
            assert port, "nr-tcpserver did not report its port: " + "".join(seen)
            client = which(self.prefix.bin.join("nr-tcptest"), required=True)
            out = client(
                "-h", "127.0.0.1", "-p", port, "-r", "1", "-t", "0.2", "-m", "64k",
                output=str.split, error=str.split,
            )
            assert client.returncode == 0, f"nr-tcptest failed: {out}"
        finally:
            if server.poll() is None:
                server.terminate()
            server.wait(timeout=10)

    def test_mpi_two_ranks(self):
        """nr-mpitest latency with two ranks under the spec's own MPI launcher"""
        if not self.spec.satisfies("+mpi"):
            raise SkipTest("built without MPI (~mpi)")
        mpitest = self.prefix.bin.join("nr-mpitest")
        assert os.path.exists(mpitest), "nr-mpitest was not installed (is src/mpi in this checkout?)"
        mpi_bin = self.spec["mpi"].prefix.bin
        launcher = None
        for name in ("mpiexec", "mpirun"):
            if os.path.exists(mpi_bin.join(name)):
                launcher = which(mpi_bin.join(name))
                break
        assert launcher is not None, f"no mpiexec/mpirun in {mpi_bin}"
        args = ["-n", "2"]
        if self.spec.satisfies("^openmpi"):
            args = ["--oversubscribe"] + args
            if os.geteuid() == 0:         # containers and CI runners often run as root
                os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        out = launcher(*args, mpitest, "-A", "8", "-r", "2",
                       output=str.split, error=str.split)
        assert launcher.returncode == 0, f"nr-mpitest under {launcher.name} failed: {out}"
