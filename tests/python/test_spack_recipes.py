"""Recipe logic of spack_repo/netregress without Spack: the package modules are imported against small stubs of
``spack.package`` and the builtin build systems that record directives; a fake spec drives ``cmake_args``.
With ``spack`` on PATH, the recipes are also loaded by real Spack (skipped otherwise)."""
import importlib.util
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ROOT / 'spack_repo' / 'netregress' / 'packages'


class Recorder:
    """Class-body directives append (name, args, kwargs) to ``DIRECTIVES``."""


DIRECTIVES: list = []


def _directive(name):
    def fn(*args, **kwargs):
        DIRECTIVES.append((name, args, kwargs))
    return fn


class FakeBase:
    """Just enough of Spack's CMakePackage/MakefilePackage for the recipes' own logic."""

    def __init__(self, spec):
        self.spec = spec

    @staticmethod
    def define(name, value):
        if isinstance(value, bool):
            return f'-D{name}:BOOL={"ON" if value else "OFF"}'
        return f'-D{name}:STRING={value}'

    def define_from_variant(self, name, variant):
        return self.define(name, self.spec.variants[variant])


class FakeSpec:
    def __init__(self, variants, mpi=None):
        self.variants = variants
        self._mpi = mpi

    def satisfies(self, constraint):
        if constraint.startswith('^'):
            return self._mpi is not None and constraint[1:] in self._mpi.name
        sign, name = constraint[0], constraint[1:]
        return self.variants.get(name) == (sign == '+')

    def __getitem__(self, name):
        assert name == 'mpi' and self._mpi is not None, 'no mpi in this spec'
        return self._mpi


@pytest.fixture
def stubs(monkeypatch):
    DIRECTIVES.clear()
    pkg = types.ModuleType('spack.package')
    for name in ('version', 'variant', 'depends_on', 'conflicts', 'maintainers', 'license', 'requires'):
        setattr(pkg, name, _directive(name))
    pkg.SkipTest = type('SkipTest', (Exception,), {})
    for name in ('which', 'test_part', 'make', 'mkdirp', 'install', 'join_path'):
        setattr(pkg, name, lambda *a, **k: None)
    pkg.spack_cc = 'cc'
    pkg.__all__ = [n for n in vars(pkg) if not n.startswith('_')]
    spack = types.ModuleType('spack')
    spack.package = pkg
    monkeypatch.setitem(sys.modules, 'spack', spack)
    monkeypatch.setitem(sys.modules, 'spack.package', pkg)
    for mod, cls in (('cmake', 'CMakePackage'), ('makefile', 'MakefilePackage')):
        m = types.ModuleType(f'spack_repo.builtin.build_systems.{mod}')
        setattr(m, cls, type(cls, (FakeBase,), {}))
        monkeypatch.setitem(sys.modules, f'spack_repo.builtin.build_systems.{mod}', m)
    for name in ('spack_repo', 'spack_repo.builtin', 'spack_repo.builtin.build_systems'):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    return DIRECTIVES


def load(name):
    spec = importlib.util.spec_from_file_location(f'nr_recipe_{name}', PACKAGES / name / 'package.py')
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def find(directives, kind, first=None):
    return [(a, k) for n, a, k in directives if n == kind and (first is None or a[0] == first)]


def test_repo_yaml_namespace_and_api():
    text = (ROOT / 'spack_repo' / 'netregress' / 'repo.yaml').read_text()
    assert 'namespace: netregress' in text and 'api: v2.2' in text


def test_netregress_directives(stubs):
    load('netregress')
    assert find(stubs, 'variant', 'mpi')[0][1]['default'] is True
    assert find(stubs, 'variant', 'mpi')[0][1]['description']
    assert (('mpi',), {'when': '+mpi'}) in find(stubs, 'depends_on', 'mpi')
    assert find(stubs, 'depends_on', 'cmake@3.20:')[0][1] == {'type': 'build'}
    assert {a[0] for a, _ in find(stubs, 'version')} == {'main', 'develop'}


def test_netregress_cmake_args_with_and_without_mpi(stubs):
    mod = load('netregress')
    mpi = types.SimpleNamespace(name='mpich', mpicc='/opt/mpich/bin/mpicc')
    pkg = mod.Netregress(FakeSpec({'mpi': True}, mpi))
    args = pkg.cmake_args()
    assert '-DNR_ENABLE_MPI:BOOL=ON' in args
    assert '-DNR_BUILD_TESTS:BOOL=OFF' in args
    assert '-DMPI_C_COMPILER:STRING=/opt/mpich/bin/mpicc' in args
    assert pkg.kernels == ('nr-tcpserver', 'nr-tcptest', 'nr-mpitest', 'nr-mpicoll', 'nr-ebb', 'nr-linkmap')
    nompi = mod.Netregress(FakeSpec({'mpi': False}))
    args = nompi.cmake_args()
    assert '-DNR_ENABLE_MPI:BOOL=OFF' in args and not any('MPI_C_COMPILER' in a for a in args)
    assert nompi.kernels == ('nr-tcpserver', 'nr-tcptest')


def test_netregress_port_line_matches_the_server():
    import re
    src = (ROOT / 'src' / 'tcp' / 'server.c').read_text()
    assert 'TCP socket listening on port [%u]' in src
    text = (PACKAGES / 'netregress' / 'package.py').read_text()
    pattern = re.search(r're\.compile\(r"(.*)"\)', text).group(1)
    assert re.search(pattern, 'TCP socket listening on port [40123]').group(1) == '40123'


def test_netregress_has_stand_alone_tests(stubs):
    mod = load('netregress')
    for name in ('test_help', 'test_tcp_loopback', 'test_mpi_two_ranks'):
        assert callable(getattr(mod.Netregress, name)) and getattr(mod.Netregress, name).__doc__


def test_netpipe_directives_and_targets(stubs):
    mod = load('netpipe')
    (args, kwargs), = find(stubs, 'version')
    assert args == ('3.7.2',)
    assert kwargs['sha256'] == '13dac884ff52951636f651c421f5ff4a853218a95aa28a4a852402ee385a2ab8'
    assert {a[0] for a, _ in find(stubs, 'variant')} == {'tcp', 'mpi'}
    assert (('mpi',), {'when': '+mpi'}) in find(stubs, 'depends_on', 'mpi')
    assert mod.Netpipe(FakeSpec({'tcp': True, 'mpi': True})).targets == [('tcp', 'NPtcp'), ('mpi', 'NPmpi')]
    assert mod.Netpipe(FakeSpec({'tcp': True, 'mpi': False})).targets == [('tcp', 'NPtcp')]


@pytest.mark.skipif(shutil.which('spack') is None, reason='spack not on PATH')
def test_real_spack_loads_the_recipes():
    code = ('import spack.repo; r = spack.repo.from_path("%s"); '
            'print(sorted(r.all_package_names())); '
            'print(r.get_pkg_class("netregress").variants.keys() and "ok")') % (ROOT / 'spack_repo' / 'netregress')
    out = subprocess.run(['spack', 'python', '-c', code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "['netpipe', 'netregress']" in out.stdout
