"""Build-path selection of the kernel build fixture (the seam where the Spack path plugs in)."""
import os
import stat

import pytest

pytest.importorskip('reframe')
from netregress.measure.build import choose_build_path  # noqa: E402


def make_exes(directory, names):
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = directory / name
        path.write_text('#!/bin/sh\n')
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_explicit_choice_wins(tmp_path):
    assert choose_build_path('cmake', {'build_path': 'spack'}, {}, None, []) == 'cmake'
    with pytest.raises(ValueError):
        choose_build_path('make', {}, {}, None, [])


def test_prebuilt_when_every_executable_exists(tmp_path):
    make_exes(tmp_path, ['nr-mpitest', 'nr-mpicoll'])
    assert choose_build_path('auto', {}, {}, str(tmp_path), ['nr-mpitest', 'nr-mpicoll']) == 'prebuilt'
    assert choose_build_path('auto', {}, {}, str(tmp_path), ['nr-mpitest', 'nr-ebb']) == 'cmake'
    assert choose_build_path('auto', {}, {}, None, ['nr-mpitest']) == 'cmake'


def test_partition_then_environment_extras():
    assert choose_build_path('auto', {'build_path': 'cmake'}, {'build_path': 'prebuilt'}, None, []) == 'cmake'
    assert choose_build_path('auto', {}, {'build_path': 'prebuilt'}, None, []) == 'prebuilt'
    # spack only where the Spack path can work; else the next choice
    assert choose_build_path('auto', {'build_path': 'spack'}, {}, None, [], 'spack is not on PATH') == 'cmake'
    assert choose_build_path('auto', {'build_path': 'spack'}, {'build_path': 'prebuilt'}, None, [],
                             'not concretized') == 'prebuilt'
    assert choose_build_path('auto', {'build_path': 'spack'}, {}, None, [], None) == 'spack'
    # an explicit request is honoured (and fails in the Spack fixture with its reason)
    assert choose_build_path('spack', {}, {}, None, [], 'spack is not on PATH') == 'spack'


# --- tools/build-kernels: the one CMake invocation (bootstrap, the fixture's cmake path, run-tests) -------------
import shutil  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOOL = str(ROOT / 'tools' / 'build-kernels')
DEPS = Path(os.environ.get('NETREGRESS_DEPS') or ROOT / '.deps')


@pytest.mark.parametrize('args, code, message', [
    ([], 2, 'usage'),
    (['--mpicc', 'none'], 2, 'usage'),
    (['--mpicc', 'none', '--build', 'b', '--jobs', 'x'], 2, '--jobs needs a positive number'),
    (['--mpicc', 'none', '--build', 'b', '--frobnicate'], 2, "unknown argument '--frobnicate'"),
    (['--mpicc', 'no-such-mpicc', '--build', 'b'], 1, "MPI compiler 'no-such-mpicc' not found"),
])
def test_build_kernels_rejects_bad_input(tmp_path, args, code, message):
    args = [str(tmp_path / a) if a == 'b' else a for a in args]
    out = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == code and message in out.stderr


def test_the_fixture_and_run_tests_use_build_kernels():
    """No second hand-written cmake invocation for the kernels anywhere."""
    build_py = (ROOT / 'reframe_tests' / 'netregress' / 'measure' / 'build.py').read_text()
    assert "'build-kernels'" in build_py and "f'cmake -S" not in build_py
    run_tests = (ROOT / 'tools' / 'run-tests').read_text()
    assert 'tools/build-kernels' in run_tests and 'cmake -S' not in run_tests
    bootstrap = (ROOT / 'tools' / 'bootstrap').read_text()
    assert 'tools/build-kernels' in bootstrap and 'cmake -S' not in bootstrap


@pytest.mark.skipif(not (DEPS / 'mpi' / 'openmpi5' / 'bin' / 'mpicc').exists() or not shutil.which('cmake'),
                    reason='PyPI Open MPI 5 (tools/bootstrap) or cmake missing')
def test_build_kernels_links_the_pypi_mpi_with_its_own_rpath(tmp_path):
    """Open MPI 5 from PyPI shares libmpi.so.40 with Debian's Open MPI 4: the installed nr-mpitest must load its
    own (the fixture's cmake path lacked this rpath before tools/build-kernels)."""
    mpicc = DEPS / 'mpi' / 'openmpi5' / 'bin' / 'mpicc'
    out = subprocess.run(['nice', '-n', '19', TOOL, '--mpicc', str(mpicc), '--build', str(tmp_path / 'build'),
                          '--prefix', str(tmp_path / 'install'), '--jobs', '2'],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    ldd = subprocess.run(['ldd', str(tmp_path / 'install' / 'bin' / 'nr-mpitest')], capture_output=True, text=True,
                         env={**os.environ, 'LD_LIBRARY_PATH': ''}).stdout
    line = next(ln for ln in ldd.splitlines() if 'libmpi.so' in ln)
    assert str((DEPS / 'mpi' / 'openmpi5' / 'lib').resolve()) in line or str(DEPS / 'mpi' / 'openmpi5') in line, line


@pytest.mark.skipif(not shutil.which('cmake'), reason='cmake missing')
def test_build_kernels_keeps_an_install_whose_sources_are_unchanged_whatever_their_mtime(tmp_path):
    """A fresh clone (new mtimes, another path) with the same sources reuses the install; a changed source rebuilds."""
    def checkout(name):
        root = tmp_path / name
        (root / 'tools').mkdir(parents=True)
        shutil.copy(TOOL, root / 'tools')
        shutil.copy(ROOT / 'CMakeLists.txt', root)
        shutil.copytree(ROOT / 'src', root / 'src')
        return root

    def build(root):
        out = subprocess.run(['nice', '-n', '19', str(root / 'tools' / 'build-kernels'), '--mpicc', 'none',
                              '--build', str(tmp_path / 'build'), '--prefix', str(tmp_path / 'install')],
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr
        return (tmp_path / 'install' / 'bin' / 'nr-tcptest').stat().st_mtime_ns

    first = build(checkout('a'))
    assert (tmp_path / 'install' / '.nr-kernels-stamp').read_text().strip()
    second = checkout('b')
    assert build(second) == first                                  # same sources: nothing built or installed
    with open(second / 'src' / 'tcp' / 'client.c', 'a') as f:
        f.write('\n/* changed */\n')
    assert build(second) != first
