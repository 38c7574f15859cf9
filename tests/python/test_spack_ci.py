"""The CI templates' structure (ci/post-maintenance is tested in test_postmaint.py)."""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


# ci/post-maintenance itself (arguments, node set, verdict, comparison): tests/python/test_postmaint.py


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
