"""The CI templates for sites, as a centre includes them without forking (ci/post-maintenance itself:
tests/python/test_postmaint.py).

What they must get right: nothing leaked into the including pipeline (GitLab: no global keys, every job prefixed),
every input declared is used and every one used declared, inputs reach the scripts only through the environment,
JUnit from every job that runs checks at the path the tools write it to, artifact paths that hold what the tools
wrote, state outside the clean checkout, one job at a time on the cluster, and the project's own tests kept out."""
import os
import re
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest

import standins

ROOT = Path(__file__).resolve().parents[2]
yaml = pytest.importorskip('yaml')
GITLAB = ROOT / 'ci' / 'gitlab-ci.yml'
GITHUB = ROOT / 'ci' / 'github-actions.yml'
#: what runs checks: the jobs that must publish JUnit
RUNS_CHECKS = re.compile(r'tools/validate|ci/post-maintenance')


@pytest.fixture(scope='module')
def gitlab():
    header, jobs = yaml.safe_load_all(GITLAB.read_text())       # spec: inputs, then the configuration
    return header['spec']['inputs'], jobs


@pytest.fixture(scope='module')
def github():
    return yaml.safe_load(GITHUB.read_text())                   # PyYAML reads the key `on` as True


def scripts(job):
    return '\n'.join(job.get('before_script', []) + job.get('script', []))


def test_gitlab_adds_only_its_own_prefixed_jobs_to_the_including_pipeline(gitlab):
    _, jobs = gitlab
    assert set(jobs) == {'.netregress-cluster', 'netregress-suite', 'netregress-post-maintenance'}
    for job, spec in jobs.items():
        assert job.lstrip('.').startswith('netregress-') and isinstance(spec, dict)
    # every job on the cluster, one at a time across pipelines, on the runner the inputs name
    for job in ('netregress-suite', 'netregress-post-maintenance'):
        assert jobs[job]['extends'] == '.netregress-cluster' and jobs[job]['stage'] == '$[[ inputs.stage ]]'
    assert jobs['.netregress-cluster']['tags'] == '$[[ inputs.tags ]]'
    assert jobs['.netregress-cluster']['resource_group'] == '$[[ inputs.resource-group ]]'


def test_every_input_is_used_and_every_use_declared(gitlab, github):
    inputs, _ = gitlab
    body = GITLAB.read_text().split('\n---\n', 1)[1]
    used = set(re.findall(r'\$\[\[ inputs\.([\w-]+)', body))
    assert used == set(inputs), (used ^ set(inputs))
    for name in ('reservation', 'nodes', 'exclude', 'links', 'reframe-options', 'timeout', 'maintenance-timeout',
                 'tags', 'system', 'site'):
        assert name in inputs
    on = github[True]
    assert set(on['workflow_dispatch']['inputs']) <= set(on['workflow_call']['inputs'])
    assert len(on['workflow_dispatch']['inputs']) <= 10
    text = yaml.safe_dump(github['jobs'])
    used = set(re.findall(r'inputs\.([\w-]+)', text))
    assert used == set(on['workflow_call']['inputs']), used ^ set(on['workflow_call']['inputs'])


def test_inputs_reach_the_scripts_through_the_environment_only(gitlab, github):
    _, jobs = gitlab
    for job, spec in jobs.items():
        assert '$[[' not in scripts(spec), f'{job}: an input interpolated into a script'
    for step in github['jobs']['netregress']['steps']:
        assert '${{' not in step.get('run', ''), f'interpolation into a run script: {step.get("name")}'
    assert not re.search(r'\beval\b', re.sub(r'#.*', '', GITLAB.read_text() + GITHUB.read_text()))


def test_jobs_that_run_checks_publish_junit_and_keep_their_results(gitlab, github):
    _, jobs = gitlab
    checks = {job: spec for job, spec in jobs.items() if RUNS_CHECKS.search(scripts(spec))}
    assert set(checks) == {'netregress-suite', 'netregress-post-maintenance'}
    for job, spec in checks.items():
        art = spec['artifacts']
        assert art['when'] == 'always' and art['reports']['junit'] and art['paths'], job
    assert jobs['netregress-post-maintenance']['timeout'] == '$[[ inputs.maintenance-timeout ]] minutes'
    steps = github['jobs']['netregress']['steps']
    junit = next(s for s in steps if 'junit' in s.get('uses', ''))
    assert junit['if'] == 'always()'
    upload = next(s for s in steps if s.get('uses', '').startswith('actions/upload-artifact'))
    assert upload['if'] == 'always()' and upload['with']['path'].split() == ['run/ci/']


def test_the_projects_own_tests_stay_out_of_a_centres_pipeline(gitlab, github):
    for text in (GITLAB.read_text(), GITHUB.read_text()):
        assert 'pytest' not in re.sub(r'#.*', '', text) and 'make test' not in text


def test_state_lives_outside_the_checkout(gitlab, github):
    inputs, jobs = gitlab
    v = jobs['.netregress-cluster']['variables']
    assert v['NETREGRESS_DEPS'] == '$[[ inputs.state-dir ]]/deps'
    assert v['NETREGRESS_STATE'] == '$[[ inputs.state-dir ]]/state'
    assert not inputs['state-dir']['default'].startswith(('.', '$CI_PROJECT_DIR'))
    assert '.deps/' not in re.sub(r'#.*', '', GITLAB.read_text() + GITHUB.read_text())
    state = next(s for s in github['jobs']['netregress']['steps'] if s.get('name') == 'state outside the checkout')
    assert 'NETREGRESS_DEPS=$NR_STATE_DIR/deps' in state['run'] and '>> "$GITHUB_ENV"' in state['run']


def test_jobs_on_the_cluster_never_run_at_once(github):
    """Two pipelines at once would measure each other and rewrite each other's venvs; a waiting run (a
    post-maintenance validation) must never be cancelled for a newer one."""
    assert list(github['jobs']) == ['netregress']
    assert github['jobs']['netregress']['concurrency'] == {'group': 'netregress-cluster', 'cancel-in-progress': False,
                                                           'queue': 'max'}


def test_maintenance_pipelines_run_post_maintenance_only(gitlab, github):
    _, jobs = gitlab
    assert jobs['netregress-suite']['rules'][0] == {'if': '$NR_MAINT_RESERVATION', 'when': 'never'}
    assert jobs['netregress-post-maintenance']['rules'][0]['if'] == '$NR_MAINT_RESERVATION'
    steps = {s.get('name'): s for s in github['jobs']['netregress']['steps']}
    assert steps['post-maintenance validation']['if'] == '${{ inputs.maintenance }}'
    assert steps['suite']['if'] == '${{ !inputs.maintenance }}'


# --- the scripts, run: the paths the tools write to are the ones the templates publish ------------------------------

STAND_IN = r'''#!/bin/bash
# stand-in ReFrame: --list answers; a run writes its JUnit and report where told, and what it was asked (after the
# prefix it was given)
echo "RFM_PREFIX=${RFM_PREFIX:-} $*" >> "$FAKE_DIR/calls"
for a in "$@"; do [ "$a" = --list ] && exit 0; done
while [ $# -gt 0 ]; do
  case $1 in --report-junit) echo '<testsuites/>' > "$2" ;; --report-file) echo '{"runs": []}' > "$2" ;; esac
  shift
done
'''
#: Slurm of a two-partition cluster, fast[1-2] and gige[1-2]; reservation maint holds gige[1-2]
CLUSTER = standins.Cluster(partitions={p: [f'{p}1', f'{p}2'] for p in ('fast', 'gige')},
                           reservations={'maint': ['gige1', 'gige2']})
#: a site with that cluster (not the vcluster: nothing here may bring it up)
SITE = '''
def part(name):
    return {'name': name, 'scheduler': 'slurm', 'launcher': 'srun', 'access': [f'--partition={name}'],
            'environs': ['gnu'], 'features': ['ic-shm', 'ic-eth'], 'extras': {'interconnects': {'eth': {'iface': 'x'}}}}
site_configuration = {'systems': [{'name': 'cl', 'hostnames': ['^cl-login$'], 'partitions': [part('fast'), part('gige')]}]}
'''


def script_env(tmp_path, **values):
    """The job's environment as the template makes it (inputs as variables), with stand-ins for ReFrame and Slurm."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    deps = tmp_path / 'deps' / 'venv' / 'bin'
    deps.mkdir(parents=True)
    (deps / 'python').write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    CLUSTER.install(bin_dir)
    for path, text in [(deps / 'python', None), (bin_dir / 'reframe', STAND_IN)]:
        if text is not None:
            path.write_text(text)
        path.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(('NETREGRESS_', 'RFM_'))}
    env.update(PATH=f'{bin_dir}:{env["PATH"]}', NETREGRESS_DEPS=str(tmp_path / 'deps'), FAKE_DIR=str(tmp_path),
               NETREGRESS_REFRAME=str(bin_dir / 'reframe'), REFRAME=str(bin_dir / 'reframe'),
               NETREGRESS_SPACK='none', NETREGRESS_STATE=str(tmp_path / 'state'), NR_HOME=str(ROOT),
               CI_PROJECT_DIR=str(tmp_path / 'project'), GITHUB_WORKSPACE=str(tmp_path / 'project'),
               NR_EXCLUDE='', NR_LINKS='sample', NR_REFRAME_OPTIONS='-n mpi_latency', NR_TAGS='ci', NR_SUITE='ci',
               NR_MAINT_TIMEOUT_MIN='240', NR_TIMEOUT_MIN='240', NR_RESERVATION='', NR_NODES='', NR_SYSTEM='')
    env.update(values)
    (tmp_path / 'project').mkdir()
    (tmp_path / 'site').mkdir()
    (tmp_path / 'site' / 'settings.py').write_text(SITE)
    env.update(NETREGRESS_SITE=str(tmp_path / 'site'), NR_SYSTEM='cl')
    return env


def run_script(text, env, cwd=ROOT):
    """A job's script as the runner runs it: GitLab's from anywhere (NR_HOME is the checkout), GitHub's from the
    checkout (the workspace)."""
    return subprocess.run(['bash', '-eo', 'pipefail', '-c', text], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def published(pattern: str, project: Path) -> list[str]:
    """The files under ``project`` a GitLab/GitHub artifact pattern picks."""
    return [str(p.relative_to(project)) for p in project.rglob('*') if p.is_file()
            and fnmatch(str(p.relative_to(project)), pattern)]


def test_the_suite_job_writes_its_junit_where_it_is_published(gitlab, github, tmp_path):
    _, jobs = gitlab
    env = script_env(tmp_path, NR_NODES='gige[1-2]')
    res = run_script(jobs['netregress-suite']['script'][0], env, tmp_path / 'project')
    project = tmp_path / 'project'
    found = published(jobs['netregress-suite']['artifacts']['reports']['junit'], project)
    assert len(found) == 1, res.stdout[-3000:] + res.stderr[-2000:]
    assert all(f.startswith(jobs['netregress-suite']['artifacts']['paths'][0]) for f in found)
    calls = (tmp_path / 'calls').read_text().splitlines()
    run = next(c for c in calls if ' -r ' in f' {c} ')
    # the scope of the inputs: the node list as one exclusion (fast is outside it), the link plan, the options
    assert '--system cl' in run and '-J exclude=fast[1-2]' in run
    assert '-S link_allpairs.plan=sample' in run and '-n mpi_latency' in run and '--mode ci' in run
    gh = next(s['run'] for s in github['jobs']['netregress']['steps'] if s.get('name') == 'suite')
    for f in found:
        (project / f).unlink()
    res = run_script(gh, env)
    junit = next(s for s in github['jobs']['netregress']['steps'] if 'junit' in s.get('uses', ''))
    assert sum(len(published(p, project)) for p in junit['with']['report_paths'].split(',')) == 1, \
        f'exit {res.returncode}\n' + res.stdout[-3000:] + res.stderr[-2000:]


def test_the_post_maintenance_job_writes_its_junit_where_it_is_published(gitlab, github, tmp_path):
    _, jobs = gitlab
    env = script_env(tmp_path, NR_MAINT_RESERVATION='maint', NR_RESERVATION='maint', NR_MAINTENANCE='true')
    project = tmp_path / 'project'
    run_script(jobs['netregress-post-maintenance']['script'][0], env, project)
    assert published(jobs['netregress-post-maintenance']['artifacts']['reports']['junit'], project) == \
        ['run/ci/post-maintenance/junit-maintenance.xml']
    # everything of the run under run/ci, the artifact, as the suite's (ReFrame's stage, logs and perflogs)
    run = next(c for c in (tmp_path / 'calls').read_text().splitlines() if ' -r ' in f' {c} ')
    assert run.startswith(f'RFM_PREFIX={project}/run/ci ') and '-J reservation=maint' in run
    assert jobs['netregress-post-maintenance']['artifacts']['paths'] == ['run/ci/']
    (project / 'run/ci/post-maintenance/junit-maintenance.xml').unlink()
    gh = next(s['run'] for s in github['jobs']['netregress']['steps'] if s.get('name') == 'post-maintenance validation')
    res = run_script(gh, env)
    runs = [c for c in (tmp_path / 'calls').read_text().splitlines() if ' -r ' in f' {c} ']
    assert len(runs) == 2 and runs[-1].startswith(f'RFM_PREFIX={project}/run/ci ')
    junit = next(s for s in github['jobs']['netregress']['steps'] if 'junit' in s.get('uses', ''))
    assert sum(len(published(p, project)) for p in junit['with']['report_paths'].split(',')) == 1, \
        f'exit {res.returncode}\n' + res.stdout[-3000:] + res.stderr[-2000:]
