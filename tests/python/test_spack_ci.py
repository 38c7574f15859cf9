"""ci/post-maintenance argument handling (exit 2 with a clear message) and the CI templates' structure."""
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = str(ROOT / 'ci' / 'post-maintenance')


@pytest.mark.parametrize('args,message', [
    ([], 'give --reservation NAME or --nodes NODELIST'),
    (['--reservation', 'r1', '--nodes', 'n1'], 'not both'),
    (['--nodes'], '--nodes needs a Slurm node list'),
    (['--nodes', 'n1', '--bogus'], 'unknown argument: --bogus'),
    (['--nodes', 'n1', '--partition', 'ib'], '--partition needs --system'),
    (['--reservation', 'r1;reboot'], 'shell metacharacters'),
])
def test_argument_errors_exit_2(args, message):
    out = subprocess.run([TOOL, *args], capture_output=True, text=True)
    assert out.returncode == 2
    assert message in out.stderr and 'usage:' in out.stderr


def test_dry_run_passes_the_node_selection_to_the_scheduler(tmp_path):
    out = subprocess.run([TOOL, '--nodes', 'n[001-004]', '--system', 'site-example', '--partition', 'ib',
                          '--output', str(tmp_path / 'pm'), '--dry-run'], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert '--system site-example:ib' in out.stdout and '-J nodelist=n\\[001-004\\]' in out.stdout
    assert '--performance-report' in out.stdout and f'--report-file {tmp_path}/pm/report.json' in out.stdout
    assert not (tmp_path / 'pm').exists()
    out = subprocess.run([TOOL, '--reservation', 'maint', '--dry-run'], capture_output=True, text=True)
    assert '-J reservation=maint' in out.stdout and '-t ci' in out.stdout


def test_ci_templates_run_the_suite_and_keep_artifacts():
    yaml = pytest.importorskip('yaml')
    gl = yaml.safe_load((ROOT / 'ci' / 'gitlab-ci.yml').read_text())
    script = ' '.join(gl['suite']['script'])
    assert 'reframe' in script and ' -r ' in script and '--performance-report' in script
    assert gl['suite']['artifacts']['when'] == 'always' and 'run/perflogs/' in gl['suite']['artifacts']['paths']
    gh = yaml.safe_load((ROOT / 'ci' / 'github-actions.yml').read_text())
    steps = gh['jobs']['suite']['steps']
    assert any('--performance-report' in s.get('run', '') for s in steps)
    assert any(s.get('uses', '').startswith('actions/upload-artifact') for s in steps)
