"""The CI templates for sites (ci/post-maintenance itself: tests/python/test_postmaint.py).

What they must get right: state outside the clean checkout, JUnit published, inputs only through the environment,
the suite kept out of maintenance pipelines, one job at a time on the cluster, and the template's names matching the
rest of the repository."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
yaml = pytest.importorskip('yaml')


@pytest.fixture(scope='module')
def gitlab():
    return yaml.safe_load((ROOT / 'ci' / 'gitlab-ci.yml').read_text())


@pytest.fixture(scope='module')
def github():
    # PyYAML reads the key `on` as True
    doc = yaml.safe_load((ROOT / 'ci' / 'github-actions.yml').read_text())
    return doc


def test_gitlab_runs_the_suite_through_tools_validate_with_junit_and_keeps_artifacts(gitlab):
    # tools/validate: the settings' modes, the site layer, check files that fail to load fail the job
    script = '\n'.join(gitlab['suite']['script'])
    assert 'tools/validate --system "$NR_SYSTEM" --prefix run/ci' in script and 'reframe' not in script
    art = gitlab['suite']['artifacts']
    assert art['when'] == 'always' and art['paths'] == ['run/ci/']
    assert art['reports']['junit'] == 'run/ci/validate/*/junit-*.xml'
    assert gitlab['unit']['artifacts']['reports']['junit'] == 'run/pytest.xml'


def test_gitlab_state_lives_outside_the_checkout(gitlab):
    v = gitlab['variables']
    assert v['NETREGRESS_DEPS'].startswith('$NR_STATE_DIR/') and v['NETREGRESS_STATE'].startswith('$NR_STATE_DIR/')
    assert not v['NR_STATE_DIR'].startswith(('.', '$CI_PROJECT_DIR'))
    text = (ROOT / 'ci' / 'gitlab-ci.yml').read_text()
    # every tool is reached through the state directory, never through a .deps/ inside the checkout
    assert '.deps/' not in re.sub(r'#.*', '', text)


def test_gitlab_suite_stays_out_of_maintenance_pipelines(gitlab):
    rules = gitlab['suite']['rules']
    assert rules[0] == {'if': '$NR_MAINT_RESERVATION', 'when': 'never'}
    assert gitlab['post-maintenance']['rules'][0]['if'] == '$NR_MAINT_RESERVATION'


def test_github_passes_inputs_through_the_environment_only(github):
    steps = github['jobs']['suite']['steps']
    for step in steps:
        assert '${{' not in step.get('run', ''), f'interpolation into a run script: {step.get("name")}'
    env = github['jobs']['suite']['env']
    assert env['NR_RESERVATION'] == '${{ github.event.inputs.reservation }}'
    post = next(s for s in steps if s.get('name') == 'post-maintenance validation')
    assert '--reservation "$NR_RESERVATION"' in post['run']


def test_github_publishes_junit_and_keeps_state(github):
    steps = github['jobs']['suite']['steps']
    suite = next(s for s in steps if s.get('name') == 'suite')
    assert 'tools/validate --system "$NR_SYSTEM" --prefix run/ci' in suite['run']
    junit = next(s for s in steps if 'junit' in s.get('uses', ''))
    assert junit['if'] == 'always()' and 'run/ci/validate/*/junit-*.xml' in junit['with']['report_paths']
    assert any(s.get('uses', '').startswith('actions/upload-artifact') for s in steps)
    state = next(s for s in steps if s.get('name') == 'state outside the checkout')
    assert 'NETREGRESS_DEPS=$NR_STATE_DIR/deps' in state['run'] and '>> "$GITHUB_ENV"' in state['run']


def test_template_system_name_agrees_everywhere(gitlab, github):
    assert gitlab['variables']['NR_SYSTEM'] == 'site-example'
    assert "'site-example'" in github['jobs']['suite']['env']['NR_SYSTEM']
    example = ROOT / 'config' / 'sites' / 'example'
    assert (example / 'spack' / 'site-example' / 'spack.yaml').exists()
    assert "'name': 'site-example'" in (example / 'settings.py').read_text()


def test_the_templates_pass_the_site_to_every_tool(gitlab, github):
    # the site directory reaches tools/validate and ci/post-maintenance through the environment
    assert 'NETREGRESS_SITE' in (ROOT / 'ci' / 'gitlab-ci.yml').read_text()
    assert github['jobs']['suite']['env']['NETREGRESS_SITE'] == '${{ vars.NETREGRESS_SITE }}'
    assert 'NR_SITE_CONFIG' not in (ROOT / 'ci' / 'gitlab-ci.yml').read_text() + str(github)


def test_jobs_on_the_cluster_never_run_at_once(gitlab, github):
    """Two pipelines at once would measure each other and rewrite each other's venvs in NR_STATE_DIR; a waiting run
    (a post-maintenance validation) must never be cancelled for a newer one."""
    assert gitlab['.cluster']['resource_group'] == 'netregress-cluster'
    assert {job for job, spec in gitlab.items() if isinstance(spec, dict) and 'script' in spec} == \
        {job for job, spec in gitlab.items() if isinstance(spec, dict) and spec.get('extends') == '.cluster'}
    assert list(github['jobs']) == ['suite']
    assert github['jobs']['suite']['concurrency'] == {'group': 'netregress-cluster', 'cancel-in-progress': False,
                                                      'queue': 'max'}
