"""config/settings.py: every system (including the site template) loads and lists every check file cleanly."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip('reframe')
ROOT = Path(__file__).resolve().parents[2]
REFRAME = Path(sys.executable).parent / 'reframe'


@pytest.mark.parametrize('system', ['local', 'vcluster', 'site-example'])
def test_reframe_lists_checks_without_skipping_files(system, tmp_path):
    if not REFRAME.exists():
        pytest.skip(f'no reframe next to {sys.executable}')
    site_dir = {'site-example': 'example', 'vcluster': 'vcluster'}.get(system)
    site = ['-C', str(ROOT / 'config' / 'sites' / site_dir / 'settings.py')] if site_dir else []
    proc = subprocess.run([str(REFRAME), '-C', str(ROOT / 'config' / 'settings.py'), *site, '-c',
                           str(ROOT / 'reframe_tests'), '--system', system, '-l'],
                          capture_output=True, text=True, timeout=120, env={**os.environ, 'TMPDIR': str(tmp_path)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert 'skipping test file' not in out, out
    assert 'Found' in out
    if system == 'site-example':
        assert 'ib' in out or 'eth' in out or 'Found 0' not in out


def test_launch_template_placeholders():
    from netregress.measure.launch import TemplateLauncher

    class Job:
        num_tasks, num_tasks_per_node = 4, 2
    assert TemplateLauncher(['mpiexec', '-n', '{ntasks}', '-ppn', '{ntasks_per_node}', '#{nodes}']).command(Job()) \
        == ['mpiexec', '-n', '4', '-ppn', '2', '#2']
    with pytest.raises(ValueError, match='unknown placeholder'):
        TemplateLauncher(['{cores}']).command(Job())
