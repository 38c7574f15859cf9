"""The measurement version (netregress.measurement): it follows what measures, by folder, and nothing else."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from netregress import measurement

ROOT = Path(__file__).resolve().parents[2]

#: One real file per role, the edit that changes its code (not a comment), and whether it measures.
EDITS = [
    ('measure', 'reframe_tests/netregress/measure/launch.py', '\nNR_EDIT = 1\n', True),
    ('judge', 'reframe_tests/netregress/judge/bandrules.py', '\nNR_EDIT = 1\n', False),
    ('setup', 'reframe_tests/netregress/setup/spackparts.py', '\nNR_EDIT = 1\n', False),
    ('package root', 'reframe_tests/netregress/paths.py', '\nNR_EDIT = 1\n', False),
    ('post-run', 'reframe_tests/netregress_postrun/report.py', '\nNR_EDIT = 1\n', False),
    ('checks', 'reframe_tests/checks/tcp.py', '\nNR_EDIT = 1\n', True),
    ('kernel sources', 'src/tcp/client.c', '\nint nr_edit;\n', True),
    ('fabric script', 'tools/lib/vcluster-fabric.sh', '\nnr_edit=1\n', True),
    ('cluster settings', 'config/vcluster.env', '\nNR_EDIT=1\n', True),
    ('MPI settings', 'config/settings.py', '\nNR_EDIT = 1\n', True),
    ('MPI builds', 'config/mpi_builds.toml', '\n[nr_edit]\nfamily = "x"\n', True),
    ('a tool', 'tools/refs', '\nnr_edit=1\n', False),
]
#: The same files, edited where only a reader sees it.
COMMENTS = {'.py': '\n# a reworded comment\n', '.c': '\n/* a reworded comment */\n', '.sh': '\n# a comment\n',
            '.env': '\n# a comment\n', '.toml': '\n# a comment\n', '': '\n# a comment\n'}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of what the version can see: the kernels, the library and checks, the settings, the tools."""
    skip = shutil.ignore_patterns('__pycache__', '*.pyc')
    for folder in ('src', 'reframe_tests', 'config', 'tools'):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=skip, symlinks=True)
    return tmp_path


def test_every_file_edited_here_exists():
    assert all((ROOT / rel).is_file() for _, rel, _, _ in EDITS), [rel for _, rel, _, _ in EDITS
                                                                   if not (ROOT / rel).is_file()]


def test_the_version_changes_when_and_only_when_measuring_code_changes(tree: Path):
    before = measurement.measurement_version(tree)
    for role, rel, code, measures in EDITS:
        path = tree / rel
        path.write_text(path.read_text() + COMMENTS[path.suffix])
        assert measurement.measurement_version(tree) == before, f'{role}: a comment in {rel} changed the version'
        path.write_text(path.read_text() + code)
        after = measurement.measurement_version(tree)
        assert (after != before) == measures, f'{role}: {rel} {"measures" if measures else "does not measure"}'
        before = after


def test_a_new_module_measures_by_its_folder(tree: Path):
    first = measurement.measurement_version(tree)
    (tree / 'reframe_tests/netregress/judge/newrule.py').write_text('CAP = 3\n')
    (tree / 'reframe_tests/netregress/setup/newstep.py').write_text('STEP = 3\n')
    assert measurement.measurement_version(tree) == first
    (tree / 'reframe_tests/netregress/measure/newprobe.py').write_text('PROBE = 3\n')
    files = measurement.measured_files(tree)
    assert 'reframe_tests/netregress/measure/newprobe.py' in files
    assert measurement.version_of(files) != first


def test_the_band_rules_of_the_table_judge_and_the_rest_measures(tree: Path):
    table = tree / 'config' / 'interconnects.yaml'
    text = table.read_text()
    assert '\nbaselines:' in text
    first = measurement.measurement_version(tree)
    table.write_text(text.replace('\nbaselines:', '\nbaselines:\n  nr_edit: 1', 1))
    assert measurement.measurement_version(tree) == first
    table.write_text(text + '\nnr_edit: 1\n')
    assert measurement.measurement_version(tree) != first


def test_the_fabric_is_every_file_the_cluster_script_sources(tree: Path):
    names = [p.relative_to(tree).as_posix() for p in measurement.fabric_files(tree)]
    assert names[0] == 'tools/vcluster'
    assert {'config/vcluster.env', 'tools/lib/vcluster-configs.sh', 'tools/lib/vcluster-fabric.sh'} <= set(names)
    assert set(names) <= set(measurement.measured_files(tree))


def _config_version(tree: Path, extra: str = '') -> str:
    """tools/vcluster's own config_version function, run in the copy."""
    script = (tree / 'tools' / 'vcluster').read_text()
    start = script.index('\nconfig_version() {')
    body = script[start:script.index('\n}\n', start) + 3]
    env = {**os.environ, 'ROOT': str(tree), 'EXTRA_ENV': extra, 'NETREGRESS_DEPS': str(Path(sys.executable).parents[2])}
    out = subprocess.run(['bash', '-c', f'set -euo pipefail\n{body}\nconfig_version'], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_tools_vcluster_records_the_fabric_version_computed_here(tree: Path, tmp_path: Path):
    first = _config_version(tree)
    assert first == measurement.fabric_version(tree)
    (tree / 'reframe_tests/checks/tcp.py').write_text((tree / 'reframe_tests/checks/tcp.py').read_text() + 'X = 1\n')
    assert _config_version(tree) == first                      # a check is no reason to restart the cluster
    fabric = tree / 'tools/lib/vcluster-fabric.sh'
    fabric.write_text(fabric.read_text() + 'nr_edit=1\n')
    second = _config_version(tree)
    assert second != first and second == measurement.fabric_version(tree)
    extra = tmp_path / 'big.env'
    extra.write_text('VC_NODES=8\n')
    assert _config_version(tree, str(extra)) not in (first, second)


def test_the_command_line(tree: Path):
    env = {**os.environ, 'PYTHONPATH': str(ROOT / 'reframe_tests')}
    run = [sys.executable, '-m', 'netregress.measurement']
    out = subprocess.run(run + ['version', '--root', str(tree)], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == measurement.measurement_version(tree)
    out = subprocess.run(run + ['files', '--root', str(tree)], env=env, capture_output=True, text=True)
    assert 'reframe_tests/checks/tcp.py' in out.stdout and 'judge/' not in out.stdout
    out = subprocess.run(run + ['fabric', '--extra', str(tree / 'nonexistent.env')], env=env, capture_output=True,
                         text=True)
    assert out.returncode == 2 and out.stderr.count('\n') == 1 and 'nonexistent.env' in out.stderr


def test_meaning_drops_comments_and_docstrings_not_code(tmp_path: Path):
    c, py = tmp_path / 'k.c', tmp_path / 'm.py'
    c.write_text('/* kernel */\nint main(void) { return 0; } // done\n')
    py.write_text('"""Docs."""\nPIN = "taskset -c 0"  # pin\n')
    first = (measurement.meaning(c), measurement.meaning(py))
    c.write_text('/* the kernel,\n   reworded */\nint main(void)\n{\n    return 0;   /* ok */\n}\n')
    py.write_text('"""Other docs, longer."""\n\n# a comment\nPIN = "taskset -c 0"\n')
    assert (measurement.meaning(c), measurement.meaning(py)) == first
    c.write_text('int main(void) { puts("/* not a comment */"); return 0; }\n')     # a string is code
    py.write_text('PIN = "taskset -c 1"\n')
    assert measurement.meaning(c) != first[0] and measurement.meaning(py) != first[1]


def test_changed_files_names_what_differs():
    old = {'src/k.c': 'aaa', 'gone.py': 'bbb', 'same.py': 'ccc'}
    new = {'src/k.c': 'ddd', 'same.py': 'ccc', 'new.py': 'eee'}
    assert measurement.changed_files(old, new) == ['gone.py', 'new.py', 'src/k.c']
