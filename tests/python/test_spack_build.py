"""The Spack seam (netregress.spack_build) and the Spack tools, without Spack where possible.

A fake fixture (system, environment, stagedir) goes through ``configure``; the environment's YAML is the real one
(config/spack/<system>/). Tests that need ``spack`` skip with "spack not on PATH"."""
import os
import re
import shutil
import subprocess
import types
from pathlib import Path

import pytest

pytest.importorskip('reframe')
from reframe.core.buildsystems import Spack  # noqa: E402
from reframe.core.exceptions import BuildSystemError  # noqa: E402

from netregress import spack_build  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
needs_spack = pytest.mark.skipif(shutil.which('spack') is None, reason='spack not on PATH')


class FakeFixture:
    """What configure() touches on a ReFrame build fixture."""

    def __init__(self, system, env, stagedir, extras=None):
        self.current_system = types.SimpleNamespace(name=system)
        self.current_environ = types.SimpleNamespace(name=env, extras=extras or {})
        self.stagedir = str(stagedir)
        self.postbuild_cmds = []
        self._bs = None

    @property
    def build_system(self):
        return self._bs

    @build_system.setter
    def build_system(self, name):
        assert name == 'Spack'
        self._bs = Spack()


@pytest.fixture
def locked(monkeypatch, tmp_path):
    """A copy of config/ whose local environment has a (dummy) spack.lock, and a (pretend) spack on PATH."""
    root = tmp_path / 'repo'
    monkeypatch.setattr(spack_build, 'spack_exe', lambda: '/usr/bin/spack')
    # without this machine's own locks (tools/spack-env concretize writes them into the checkout)
    shutil.copytree(ROOT / 'config' / 'spack', root / 'config' / 'spack', ignore=shutil.ignore_patterns('spack.lock'))
    (root / 'config' / 'spack' / 'local' / 'spack.lock').write_text('{}')
    monkeypatch.setenv('NETREGRESS_ROOT', str(root))
    spack_build._load_yaml.cache_clear()
    yield root
    spack_build._load_yaml.cache_clear()


def test_every_system_environment_pins_each_mpi_and_lists_the_packages():
    for system in ('local', 'vcluster', 'site-template'):
        specs = spack_build.root_specs(system)
        names = [s.split('@')[0].split()[0] for s in specs]
        assert names == ['netregress', 'netpipe', 'osu-micro-benchmarks', 'npb', 'intel-mpi-benchmarks'], system
        text = (ROOT / 'config' / 'spack' / system / 'spack.yaml').read_text()
        assert '[$^mpis]' in text and 'unify: false' in text and 'install_tree' in text
        for env, mpi in spack_build.environment_map(system).items():
            assert re.search(rf'^    - {re.escape(mpi)}\s*(#.*)?$', text, re.M), f'{system}: {env} -> {mpi} not in mpis'


def test_npb_names_and_class_per_system():
    assert spack_build.spec_variant(spack_build.package_spec('local', 'npb'), 'classes') == ['S']
    assert spack_build.spec_variant(spack_build.package_spec('vcluster', 'npb'), 'classes') == ['W']
    names = spack_build.spec_variant(spack_build.package_spec('local', 'npb'), 'names')
    assert sorted(names) == sorted(['is', 'ep', 'cg', 'mg', 'ft', 'lu', 'bt', 'sp'])
    with pytest.raises(BuildSystemError, match='not in config/spack/local'):
        spack_build.package_spec('local', 'hpl')


def test_configure_uses_the_locked_environment_without_concretizing(locked, tmp_path):
    fx = FakeFixture('local', 'mpich4', tmp_path / 'stage')
    spack_build.configure(fx)
    env = str(locked / 'config' / 'spack' / 'local')
    bs = fx.build_system
    assert bs.environment == env and bs.specs == [] and not bs.emit_load_cmds
    cmds = bs.emit_build_commands(None)
    assert cmds == [f'spack -e {env} install --fail-fast netregress@develop +mpi ^mpich@4.0']
    assert not any(' add ' in c or 'concretize' in c or 'env create' in c for c in cmds)
    assert fx.kernels_dir == os.path.join(str(tmp_path / 'stage'), 'spack-prefix', 'bin')
    assert f'spack -e {env} location -i netregress@develop +mpi ^mpich@4.0' in fx.postbuild_cmds[0]


def test_environment_extra_overrides_the_map(locked, tmp_path):
    fx = FakeFixture('local', 'openmpi4', tmp_path, extras={'spack_mpi': 'openmpi@4.1.4'})
    spack_build.configure_package(fx, 'osu-micro-benchmarks@7.5.1', 'libexec/osu-micro-benchmarks/mpi')
    assert fx.build_system.install_opts[-1] == 'osu-micro-benchmarks@7.5.1 ^openmpi@4.1.4'
    assert fx.kernels_dir.endswith('spack-prefix/libexec/osu-micro-benchmarks/mpi')


def test_unknown_environment_and_missing_lock_fail_clearly(locked, tmp_path, monkeypatch):
    with pytest.raises(BuildSystemError, match='no Spack MPI for environment nompi on local'):
        spack_build.configure(FakeFixture('local', 'nompi', tmp_path))
    with pytest.raises(BuildSystemError, match='tools/spack-env concretize vcluster'):
        spack_build.configure(FakeFixture('vcluster', 'mpich4', tmp_path))
    monkeypatch.setattr(spack_build, 'spack_exe', lambda: None)
    with pytest.raises(BuildSystemError, match='build path spack: spack is not on PATH'):
        spack_build.configure(FakeFixture('local', 'mpich4', tmp_path))


def test_unavailable_reasons(locked, monkeypatch):
    monkeypatch.setattr(spack_build, 'spack_exe', lambda: None)
    assert 'spack is not on PATH' in spack_build.unavailable_reason('local')
    monkeypatch.setattr(spack_build, 'spack_exe', lambda: '/usr/bin/spack')
    assert spack_build.unavailable_reason('local', ('npb', 'osu-micro-benchmarks')) is None
    assert 'not concretized' in spack_build.unavailable_reason('vcluster')
    assert 'no Spack environment' in spack_build.unavailable_reason('nosuch')
    assert 'hpl is not in' in spack_build.unavailable_reason('local', ('hpl',))


def test_externals_helper_prints_packages_yaml():
    out = subprocess.run([str(ROOT / 'tools' / 'spack-externals'), '--print'], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith('# Written by tools/spack-externals')
    if os.path.exists('/usr/bin/mpicc.mpich'):
        assert '- spec: mpich@' in out.stdout and 'mpi-prefixes/mpich4' in out.stdout
    for line in out.stdout.splitlines():
        if line.strip().startswith('buildable:'):
            assert line.strip() == 'buildable: false'


def test_mirror_list_fails_clearly_when_not_concretized(tmp_path):
    tool = str(ROOT / 'tools' / 'spack-mirror-list')
    out = subprocess.run([tool], capture_output=True, text=True)
    assert out.returncode == 2 and 'usage' in out.stderr
    out = subprocess.run([tool, 'nosuch'], capture_output=True, text=True)
    assert out.returncode == 2 and 'no Spack environment' in out.stderr
    if not (ROOT / 'config' / 'spack' / 'site-template' / 'spack.lock').exists():
        out = subprocess.run([tool, 'site-template'], capture_output=True, text=True)
        assert out.returncode == 2 and 'not concretized' in out.stderr and 'tools/spack-env concretize' in out.stderr


def test_spack_env_usage_errors():
    tool = str(ROOT / 'tools' / 'spack-env')
    out = subprocess.run([tool, 'concretize', 'nosuch'], capture_output=True, text=True,
                         env={**os.environ, 'PATH': '/usr/bin:/bin'})
    assert out.returncode == 2 and "no Spack environment for system 'nosuch'" in out.stderr
    out = subprocess.run([tool, 'systems'], capture_output=True, text=True)
    assert out.stdout.split() == ['local', 'site-template', 'vcluster']


@needs_spack
def test_environment_parses_with_real_spack():
    out = subprocess.run(['spack', '-e', str(ROOT / 'config' / 'spack' / 'local'), 'config', 'get', 'repos'],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert 'netregress' in out.stdout
