"""python -m netregress.sitecheck: the site against the code (families, interconnects, features, paths) and against
the cluster it can see (modules, Spack specs, Slurm partitions and reservation), each problem named; ReFrame's
--list and post-maintenance's --dry-run warn about the first kind. Lmod, Spack and Slurm are stand-in scripts on
PATH; none of them present is said, not passed."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip('reframe')
ROOT = Path(__file__).resolve().parents[2]
REFRAME = Path(sys.executable).parent / 'reframe'

#: the example site's two partitions, one with a fabric we do not know, one MPI of a family we do not know
BAD = '''
def part(name, slurm, fabric):
    return {'name': name, 'scheduler': 'slurm', 'launcher': 'srun', 'access': [f'--partition={slurm}'],
            'environs': ['ompi', 'odd'], 'features': ['ic-shm', f'ic-{fabric}'],
            'extras': {'interconnects': {fabric: {'iface': 'x'}}}}
site_configuration = {
    'systems': [{'name': 'rock', 'hostnames': [r'^rock-login$'], 'modules_system': 'lmod',
                 'partitions': [part('ib', 'compute', 'ib'), part('opa', 'omni', 'opa')]}],
    'environments': [
        {'name': 'ompi', 'modules': ['openmpi/4.1.6'], 'cc': 'mpicc', 'features': ['mpi'], 'target_systems': ['rock'],
         'extras': {'mpi_family': 'openmpi-ucx'}},
        {'name': 'odd', 'modules': ['oddmpi/1.0'], 'cc': 'mpicc', 'features': ['mpi'], 'target_systems': ['rock'],
         'extras': {'mpi_family': 'no-such-family'}}],
}
'''
REFRAME_YAML = 'environments:\n  ompi: openmpi@4.1 fabrics=ucx\n  odd: oddmpi@1.0\n  ghost: mpich@4\n'

FAKES = {
    # Lmod's terse listing goes to stderr, as Lmod's does
    'lmod': '#!/bin/sh\n[ "$2" = -t ] && [ "$3" = avail ] || exit 2\n'
            'case $4 in openmpi/4.1.6) echo "openmpi/4.1.6(default)" >&2 ;; esac\n',
    # spack python -c PROBE < one spec a line: oddmpi is no package
    'spack': '#!/bin/sh\nprintf "{"; sep=""\nwhile read -r s; do\n'
             '  case $s in odd*) why="no Spack package oddmpi" ;; *) why="" ;; esac\n'
             '  printf \'%s"%s": "%s"\' "$sep" "$s" "$why"; sep=", "\ndone\necho "}"\n',
    'sinfo': '#!/bin/sh\necho compute\necho debug\n',
    'scontrol': '#!/bin/sh\n[ "$3" = maint ] && echo "ReservationName=maint Nodes=n[1-4]" && exit 0\n'
                'echo "Reservation $3 not found" >&2; exit 1\n',
}


@pytest.fixture
def rock(tmp_path):
    site = tmp_path / 'rock'
    (site / 'spack' / 'rock').mkdir(parents=True)
    (site / 'settings.py').write_text(BAD)
    (site / 'spack' / 'rock' / 'reframe.yaml').write_text(REFRAME_YAML)
    return site


def sitecheck(site, *args, fakes=(), tmp_path):
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir(exist_ok=True)
    for name in fakes:
        (bin_dir / name).write_text(FAKES[name])
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != 'LMOD_CMD'}
    # only the stand-ins: this host's own Slurm commands (the vcluster's) must not answer for the site's
    env.update(NETREGRESS_SITE=str(site), PATH=str(bin_dir), PYTHONPATH=str(ROOT / 'reframe_tests'))
    return subprocess.run([sys.executable, '-m', 'netregress.sitecheck', *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_every_problem_against_the_code_and_the_cluster_is_named(rock, tmp_path):
    res = sitecheck(rock, 'check', '--reservation', 'gone', fakes=('lmod', 'spack', 'sinfo', 'scontrol'),
                    tmp_path=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    problems = [ln[len('PROBLEM: '):] for ln in res.stdout.splitlines() if ln.startswith('PROBLEM: ')]
    settings = f'{rock}/settings.py'
    expected = [
        f"{settings}: environment odd: mpi_family 'no-such-family' is no MPI family of",
        f'{settings}: partition rock:opa: feature ic-opa names no interconnect of',
        f'{settings}: partition rock:opa: extras.interconnects.opa names no interconnect',
        f'{rock}/spack/rock/reframe.yaml: environments.ghost is no environment of system rock',
        f"{settings}: environment odd: module 'oddmpi/1.0' is not available",
        f"{rock}/spack/rock/reframe.yaml: environments.odd: 'oddmpi@1.0': no Spack package oddmpi",
        f"{settings}: partition rock:opa: Slurm has no partition 'omni' (sinfo lists: compute, debug)",
        'reservation gone: scontrol failed (exit 1): Reservation gone not found']
    for start in expected:
        assert sum(p.startswith(start) for p in problems) == 1, (start, problems)
    assert len(problems) == len(expected), problems
    assert res.stdout.splitlines()[-1] == f'site check: {len(expected)} problem(s)'
    # the good parts are not named: the known module, the known spec, the partition Slurm has, a known reservation
    res = sitecheck(rock, 'check', '--reservation', 'maint', fakes=('lmod', 'spack', 'sinfo', 'scontrol'),
                    tmp_path=tmp_path)
    assert 'openmpi/4.1.6' not in res.stdout and "'compute'" not in res.stdout and 'maint' not in res.stdout


def test_what_cannot_be_asked_here_is_said(rock, tmp_path):
    res = sitecheck(rock, 'check', tmp_path=tmp_path)
    notes = [ln for ln in res.stdout.splitlines() if ln.startswith('note: ')]
    assert notes == ['note: rock: modules not checked: no lmod command here (LMOD_CMD unset, no lmod on PATH)',
                     'note: rock: Spack specs not checked: no spack on PATH',
                     'note: rock: Slurm not checked: no sinfo on PATH']
    assert res.stdout.splitlines()[-1] == 'site check: 4 problem(s), 3 thing(s) not checked here'
    # loading only (what every tool does first on --site) passes: the problems are the check's
    assert sitecheck(rock, 'load', tmp_path=tmp_path).returncode == 0
    assert sitecheck(tmp_path / 'nowhere', 'load', tmp_path=tmp_path).returncode == 2


def test_the_example_site_and_ours_are_clean():
    for site in (ROOT / 'config' / 'sites' / 'example', ROOT / 'config' / 'sites' / 'vcluster'):
        env = {**os.environ, 'NETREGRESS_SITE': str(site), 'PYTHONPATH': str(ROOT / 'reframe_tests')}
        res = subprocess.run([sys.executable, '-m', 'netregress.sitecheck', 'check', '--static'], env=env,
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0 and 'PROBLEM' not in res.stdout, res.stdout + res.stderr


@pytest.mark.skipif(not REFRAME.exists(), reason='no ReFrame beside this Python')
def test_reframe_list_and_the_post_maintenance_dry_run_warn(rock, tmp_path):
    # ReFrame asks Lmod for its version and Python bindings before it lists anything: no modules system here
    (rock / 'settings.py').write_text(BAD.replace("'modules_system': 'lmod'", "'modules_system': 'nomod'"))
    env = {**os.environ, 'NETREGRESS_SITE': str(rock), 'RFM_PREFIX': str(tmp_path / 'p'),
           'PYTHONPATH': str(ROOT / 'reframe_tests')}
    res = subprocess.run([str(REFRAME), '-C', str(ROOT / 'config' / 'settings.py'), '-C', str(rock / 'settings.py'),
                          '--system', 'rock', '-c', str(ROOT / 'reframe_tests' / 'checks' / 'site_layer.py'), '-l'],
                         env=env, capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    assert "WARNING: site: " in out and "mpi_family 'no-such-family'" in out and 'ic-opa' in out, out
    res = subprocess.run([str(ROOT / 'ci' / 'post-maintenance'), '--system', 'rock', '--reservation', 'maint',
                          '--dry-run'], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "post-maintenance: WARNING: site: " in res.stderr and 'ic-opa' in res.stderr


def test_a_sites_own_checks_are_loaded_beside_ours(rock, monkeypatch):
    from netregress.measure import site
    monkeypatch.setenv(site.ENV, str(rock))
    assert '-c' not in site.reframe_args()
    (rock / 'checks').mkdir()
    assert site.reframe_args()[-2:] == ['-c', str(rock / 'checks')]
    out = subprocess.run(['bash', '-c', f'. {ROOT}/tools/lib/common.sh && nr_config_args && echo "${{NR_CONFIG[*]}}"'],
                         env={**os.environ, 'NETREGRESS_SITE': str(rock)}, capture_output=True, text=True).stdout
    assert out.split()[-2:] == ['-c', str(rock / 'checks')]
