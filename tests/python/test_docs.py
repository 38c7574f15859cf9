"""The user docs hold: "Writing a check" (docs/validation.md) is a check ReFrame loads and runs, and every relative
link of the README and docs/ names a file and heading that exist."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFRAME = Path(sys.executable).parent / 'reframe'
BEGIN, END = '<!-- writing-a-check: begin -->', '<!-- writing-a-check: end -->'


def example_check(tmp_path: Path) -> Path:
    """The page's code block, as a check file."""
    text = (ROOT / 'docs' / 'validation.md').read_text()
    block = text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip()
    assert block.startswith('```python\n') and block.endswith('\n```'), 'one python code block between the markers'
    path = tmp_path / 'checks' / 'example_check.py'
    path.parent.mkdir()
    path.write_text(block[len('```python\n'):-len('```')])
    return path


def reframe(tmp_path: Path, check: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    report = tmp_path / 'report.json'
    env = {**os.environ, 'NETREGRESS_STATE': str(tmp_path / 'state'), 'RFM_ENABLE_RESULTS_STORAGE': '0'}
    out = subprocess.run([str(REFRAME), '-C', str(ROOT / 'config' / 'settings.py'), '-c', str(check), '--system',
                          'local', '--prefix', str(tmp_path / 'run'), '--report-file', str(report), *args],
                         capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    return out, json.loads(report.read_text()) if report.exists() else {}


def settings_environments() -> list[str]:
    """The MPI environments of the local system (config/mpi_builds.toml)."""
    from netregress.measure import mpibuilds
    return list(mpibuilds.load())


@pytest.fixture
def check(tmp_path: Path) -> Path:
    if not REFRAME.exists():
        pytest.skip(f'no reframe next to {sys.executable}')
    return example_check(tmp_path)


def test_writing_a_check_sets_up_for_every_build_and_interconnect(tmp_path: Path, check: Path):
    out, report = reframe(tmp_path, check, '--dry-run')
    assert out.returncode == 0 and 'WARNING' not in out.stdout + out.stderr, out.stdout[-3000:] + out.stderr
    cases = [tc for run in report['runs'] for tc in run['testcases'] if not tc.get('fixture')]
    assert {(tc['environ'], tc['interconnect']) for tc in cases} == {
        (env, ic) for env in settings_environments() for ic in ('shm', 'tcp')}
    for tc in cases:
        assert tc['result'] == 'pass', tc['display_name']
        assert tc['nr_figures'] == {'rtt_us': {'kind': 'latency', 'label': 'MPI round trip, 64 KiB',
                                               'better': 'lower'}}, tc['display_name']


def test_writing_a_check_runs(tmp_path: Path, check: Path):
    built = [env for env in ('mpich5', 'openmpi4', 'mpich4', 'openmpi5')
             if (Path(os.environ.get('NETREGRESS_DEPS') or ROOT / '.deps') / 'kernels' / env / 'bin' /
                 'nr-mpitest').exists()]
    if not built:
        pytest.skip('no MPI kernels built (tools/bootstrap builds them)')
    out, report = reframe(tmp_path, check, '-r', '-p', built[0], '-n', 'mpi_rtt_64k')
    cases = [tc for run in report['runs'][-1:] for tc in run['testcases'] if not tc.get('fixture')]
    assert out.returncode == 0 and len(cases) == 2, out.stdout[-3000:]
    for tc in cases:
        assert tc['result'] == 'pass'
        values = [pv[0] for pv in tc['perfvalues'].values()]
        assert values and all(v > 0 for v in values), tc['perfvalues']


# -- links ----------------------------------------------------------------------------------------------------------

LINK = re.compile(r'\]\(([^)\s]+)\)')


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')


def anchors(page: Path) -> set[str]:
    text = re.sub(r'```.*?```', '', page.read_text(), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r'^#+ (.+)$', text, re.M)}


def test_every_relative_link_of_the_docs_resolves():
    broken = []
    for page in [ROOT / 'README.md', *sorted((ROOT / 'docs').glob('*.md'))]:
        for target in LINK.findall(page.read_text()):
            if re.match(r'[a-z]+:', target):
                continue
            path, _, anchor = target.partition('#')
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f'{page.relative_to(ROOT)}: {target} (no such file)')
            elif anchor and dest.suffix == '.md' and anchor not in anchors(dest):
                broken.append(f'{page.relative_to(ROOT)}: {target} (no such heading)')
    assert not broken
