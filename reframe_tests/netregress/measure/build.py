"""Build fixtures: one check definition, several ways to obtain the kernels.

:class:`KernelBuild` is an environment-scoped fixture. Its ``build_path`` decides where the executables come from:

``prebuilt``
    Already installed for this MPI build (``tools/bootstrap`` puts them in ``.deps/kernels/<env>/bin``; a site
    names its install directory in the environment's ``extras.kernels``). The fixture only verifies they exist.
``cmake``
    Configure, build and install ``src/`` with the environment's MPI compiler (``extras.mpicc``) into the
    fixture's stage directory, through ``tools/build-kernels`` (the same CMake invocation as tools/bootstrap).
``spack``
    Build through ReFrame's Spack build system against the system's pre-concretized environment.
    Implemented by ``netregress.spack_build.configure(fixture)`` (owned by the Spack path; imported only here).
``NETREGRESS_KERNELS`` (environment variable, e.g. ``/opt/nr/{env}/bin``) overrides the prebuilt directory.

``auto`` (default)
    ``extras.build_path`` of the partition, else of the environment, else ``prebuilt`` when the kernels are
    installed, else ``cmake``. A ``spack`` from the extras is taken only where the Spack path can work (``spack`` on
    PATH, the system's environment concretized); otherwise the fixture falls back and logs why.

The chosen path and the resulting ``kernels_dir`` are recorded as loggable variables, so a report says how the
binaries were made. Checks read ``self.kernels.kernels_dir``.
"""
from __future__ import annotations

import os
from pathlib import Path

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_before, variable, sanity_function
import reframe.utility.sanity as sn
from reframe.core.logging import getlogger

from .. import paths
from . import spack_build

BUILD_PATHS = ('auto', 'prebuilt', 'cmake', 'spack')
MPI_KERNELS = ('nr-mpitest', 'nr-mpicoll', 'nr-ebb')
TCP_KERNELS = ('nr-tcpserver', 'nr-tcptest')


def choose_build_path(requested: str, partition_extras: dict, environ_extras: dict,
                      prebuilt_dir: str | None, executables: list[str], spack_unavailable: str | None = None) -> str:
    """Resolve ``auto`` to a concrete build path (see module docstring for the order); ``spack_unavailable`` is
    why the Spack path cannot work here (None: it can)."""
    if requested not in BUILD_PATHS:
        raise ValueError(f'build_path {requested!r} is not one of {BUILD_PATHS}')
    if requested != 'auto':
        return requested
    for extras in (partition_extras, environ_extras):
        if extras.get('build_path'):
            chosen = extras['build_path']
            if chosen == 'spack' and spack_unavailable is not None:
                continue
            return chosen
    if prebuilt_dir and all(os.access(Path(prebuilt_dir) / exe, os.X_OK) for exe in executables):
        return 'prebuilt'
    return 'cmake'


class KernelBuild(rfm.CompileOnlyRegressionTest):
    """Provides netregress kernels for the current programming environment (use as an environment fixture)."""

    #: How to obtain the kernels: ``auto`` | ``prebuilt`` | ``cmake`` | ``spack``.
    #:
    #: :type: :class:`str`
    #: :default: ``'auto'``
    build_path = variable(str, value='auto', loggable=True)

    #: The executables the requesting checks need (verified after the build).
    #:
    #: :type: :class:`List[str]`
    #: :default: MPI and TCP kernels
    executables = variable(typ.List[str], value=list(MPI_KERNELS + TCP_KERNELS))

    #: Directory holding the executables once the fixture has run (set by the build hooks).
    #:
    #: :type: :class:`str`
    kernels_dir = variable(str, value='', loggable=True)

    #: Extra CMake arguments for the ``cmake`` path (passed through tools/build-kernels, which already sets the
    #: build type Release, the MPI wrapper and the rpath).
    #:
    #: :type: :class:`List[str]`
    #: :default: ``[]``
    cmake_args = variable(typ.List[str], value=[])

    valid_systems = ['*']
    valid_prog_environs = ['+kernels']
    build_locally = True
    sourcesdir = None

    @run_before('compile')
    def select_build_path(self):
        environ, part = self.current_environ, self.current_partition
        prebuilt = (os.environ.get('NETREGRESS_KERNELS', '').replace('{env}', environ.name)
                    or environ.extras.get('kernels') or str(paths.kernels_bin(environ.name)))
        spack_unavailable = spack_build.unavailable_reason(self.current_system.name)
        requested = self.build_path
        self.build_path = choose_build_path(requested, part.extras, environ.extras, prebuilt, self.executables,
                                            spack_unavailable)
        if requested == 'auto' and 'spack' in (part.extras.get('build_path'), environ.extras.get('build_path')) \
                and self.build_path != 'spack':
            getlogger().warning(f'{part.fullname}+{environ.name}: build_path spack configured but not usable '
                                f'({spack_unavailable}): using {self.build_path}')
        if self.build_path == 'spack':
            spack_build.configure(self)
            return
        self.build_system = 'CustomBuild'
        if self.build_path == 'prebuilt':
            self.kernels_dir = prebuilt
            self.build_system.commands = [f'test -x {prebuilt}/{exe} || '
                                          f'{{ echo "missing prebuilt kernel {prebuilt}/{exe}" >&2; exit 1; }}'
                                          for exe in self.executables]
        else:
            # tools/build-kernels: the one CMake invocation (bootstrap and run-tests use it too), with the rpath
            # to the wrapper's own MPI library that the PyPI builds need (their sonames are Debian's)
            mpicc = environ.extras.get('mpicc') or 'none'
            self.kernels_dir = os.path.join(self.stagedir, 'install', 'bin')
            extra = ['--', *self.cmake_args] if self.cmake_args else []
            self.build_system.commands = [
                ' '.join([str(paths.repo_root() / 'tools' / 'build-kernels'), '--mpicc', mpicc, '--build', 'build',
                          '--prefix', 'install', '--jobs', str(os.cpu_count() or 1), *extra]),
            ]

    @sanity_function
    def kernels_present(self):
        """Every requested executable exists after the build."""
        return sn.all([sn.assert_true(os.access(os.path.join(self.kernels_dir, exe), os.X_OK),
                                      msg=f'{exe} not found in {self.kernels_dir} after {self.build_path} build')
                       for exe in self.executables])


class MpiKernelBuild(KernelBuild):
    """The MPI kernels (nr-mpitest, nr-mpicoll, nr-ebb) built with the environment's MPI."""
    executables = list(MPI_KERNELS)
    valid_prog_environs = ['+mpi +kernels']


class TcpKernelBuild(KernelBuild):
    """The TCP kernels (nr-tcpserver, nr-tcptest); they do not link MPI."""
    executables = list(TCP_KERNELS)
    valid_prog_environs = ['+tcp +kernels']
