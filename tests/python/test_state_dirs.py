"""Where the host's history lives and who may touch it: the CI templates' state directory, make clean, and the
state directory the library uses (netregress.baselines.state_dir)."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

yaml = pytest.importorskip('yaml')
ROOT = Path(__file__).resolve().parents[2]


def state_blocks():
    """The shell block of each CI template that makes NR_STATE_DIR."""
    _, gitlab = yaml.safe_load_all((ROOT / 'ci' / 'gitlab-ci.yml').read_text())     # inputs, then the jobs
    github = yaml.safe_load((ROOT / 'ci' / 'github-actions.yml').read_text())
    gl = next(s for s in gitlab['.netregress-cluster']['before_script'] if 'NR_STATE_DIR' in s)
    gh = next(s['run'] for s in github['jobs']['netregress']['steps'] if s.get('name') == 'state outside the checkout')
    return {'gitlab': gl, 'github': gh.split('{')[0]}          # github: up to the lines for $GITHUB_ENV


def run_block(block, state, cwd):
    return subprocess.run(['bash', '-ec', block], cwd=cwd, capture_output=True, text=True, timeout=30,
                          env={**os.environ, 'NR_STATE_DIR': str(state)})


@pytest.mark.parametrize('ci', ['gitlab', 'github'])
def test_ci_state_directory_is_created_for_this_user_alone_to_write(tmp_path, ci):
    out = run_block(state_blocks()[ci], tmp_path / 'var' / 'netregress-ci', tmp_path)
    assert out.returncode == 0, out.stderr
    # the user's, writable by no one else; searchable, since LAM's jobs run as another user and read the kernels
    assert oct((tmp_path / 'var' / 'netregress-ci').stat().st_mode & 0o777) == '0o755'


@pytest.mark.parametrize('ci', ['gitlab', 'github'])
def test_ci_refuses_a_state_directory_others_may_write_or_a_symlink(tmp_path, ci):
    open_dir = tmp_path / 'open'
    open_dir.mkdir()
    open_dir.chmod(0o777)
    out = run_block(state_blocks()[ci], open_dir, tmp_path)
    assert out.returncode == 1 and 'is not private to' in out.stderr
    (tmp_path / 'mine').mkdir(mode=0o700)
    (tmp_path / 'link').symlink_to(tmp_path / 'mine')
    out = run_block(state_blocks()[ci], tmp_path / 'link', tmp_path)
    assert out.returncode == 1 and 'is not private to' in out.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason='needs root to make a directory of another user')
@pytest.mark.parametrize('ci', ['gitlab', 'github'])
def test_ci_refuses_a_state_directory_another_user_made_first(tmp_path, ci):
    """/var/tmp is everyone's: a local user who creates /var/tmp/netregress-ci first must not get the venvs."""
    planted = tmp_path / 'netregress-ci'
    planted.mkdir(mode=0o755)
    os.chown(planted, 65534, 65534)
    out = run_block(state_blocks()[ci], planted, tmp_path)
    assert out.returncode == 1 and 'is not private to' in out.stderr


def test_make_clean_keeps_the_history(tmp_path):
    if not shutil.which('make'):
        pytest.skip('no make')
    for d in ('build/x', 'run/stage/a', 'run/state/baselines/vc', 'run/state/reframe'):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / 'run' / 'state' / 'reframe' / 'results.db').write_text('db')
    (tmp_path / 'run' / 'report.json').write_text('{}')
    subprocess.run(['make', '-s', '-f', str(ROOT / 'Makefile'), 'clean'], cwd=tmp_path, check=True, timeout=30)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob('*')) == [
        'run', 'run/state', 'run/state/baselines', 'run/state/baselines/vc', 'run/state/reframe',
        'run/state/reframe/results.db']


def test_the_state_directory_follows_netregress_state_then_the_prefix(tmp_path, monkeypatch):
    from netregress.judge import baselines
    monkeypatch.setenv('NETREGRESS_STATE', str(tmp_path / 'explicit'))
    monkeypatch.setenv('RFM_PREFIX', str(tmp_path / 'prefix'))
    assert baselines.state_dir() == tmp_path / 'explicit'
    monkeypatch.delenv('NETREGRESS_STATE')
    assert baselines.state_dir() == tmp_path / 'prefix' / 'state'
    assert oct((tmp_path / 'prefix' / 'state').stat().st_mode & 0o777) == '0o700'
