"""ci/post-maintenance: arguments, the node set it covers, its verdict from ReFrame 4.10 reports and the comparison
with the runs before the maintenance.

Slurm is faked by ``sinfo``/``scontrol`` stand-ins on PATH (partitions fast[1-4] and gige[1-4]), ReFrame's run by a
stand-in (``$REFRAME``) that writes a fixture report where ``--report-file`` says and stores it in the scratch
results database as ReFrame would (tests/python/standins.py); the comparison itself is the real ReFrame's
``--performance-compare``.
"""
import getpass
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from netregress import scope
from netregress.judge import baselines
from netregress_postrun import postmaint
from reports_fixture import LAT, T0, case, history_reports, report
import standins

# the vcluster system is a site (config/sites/vcluster): loaded through the layer, as a centre's is
pytestmark = pytest.mark.usefixtures('vcluster_site')

ROOT = Path(__file__).resolve().parents[2]
TOOL = str(ROOT / 'ci' / 'post-maintenance')

#: The cluster the stand-ins answer for: Slurm partitions fast[1-4] and gige[1-4], reservation maint of gige[1-4]
CLUSTER = standins.Cluster(partitions={p: [f'{p}{i}' for i in range(1, 5)] for p in ('fast', 'gige')},
                           reservations={'maint': [f'gige{i}' for i in range(1, 5)]})


@pytest.fixture
def env(tmp_path):
    bin_dir = CLUSTER.install(tmp_path / 'bin')
    reframe = standins.install_reframe(bin_dir)
    return {**os.environ, 'PATH': f'{bin_dir}:{os.environ["PATH"]}', 'REFRAME': str(reframe),
            'NETREGRESS_STATE': str(tmp_path / 'state'), 'FAKE_ARGS': str(tmp_path / 'args'),
            'FAKE_PYTHON': sys.executable, 'PYTHONPATH': str(ROOT / 'reframe_tests')}


def run(env, *args, **extra):
    return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=300, env={**env, **extra})


@pytest.mark.parametrize('args,message', [
    ([], 'give --reservation NAME or --nodes NODELIST'),
    (['--reservation', 'r1', '--nodes', 'n1'], 'not both'),
    (['--nodes'], '--nodes needs a value'),
    (['--nodes', 'n1', '--bogus'], 'unknown argument: --bogus'),
    (['--nodes', 'n1', '--partition', 'ib'], '--partition needs --system'),
    (['--reservation', 'r1;reboot'], 'shell metacharacters'),
    (['--nodes', 'gige[1-2],nowhere7', '--system', 'vcluster'], 'nodes in no partition of vcluster: nowhere7'),
    (['--nodes', 'n1', '--system', 'local'], '--nodes needs Slurm partitions; system local has none'),
    (['--nodes', 'n1', '--prefix', ' '], 'argument --prefix: an empty directory name'),
])
def test_argument_errors_exit_2(env, args, message):
    res = run(env, *args)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and 'usage:' in res.stderr and res.stdout == ''


def test_nodes_are_the_set_to_cover_not_a_nodelist(env, tmp_path):
    # all of gige and half of fast came back: jobs may use only those, each takes what it needs
    res = run(env, '--nodes', 'gige[1-4],fast[1-2]', '--system', 'vcluster', '--output', str(tmp_path / 'pm'),
              '--dry-run')
    assert res.returncode == 0, res.stderr
    cmd = shlex.split(res.stdout)
    assert 'nodelist' not in res.stdout
    assert cmd[cmd.index('-J') + 1] == 'exclude=fast[3-4]'     # one host list, however many nodes
    assert '-x' not in cmd              # the all-node checks ask for the nodes of fast inside the set only
    assert 'fast: 2 of its 4 nodes in scope: every check there, the all-node ones too, uses only fast[1-2]' \
        in res.stderr
    assert cmd[cmd.index('--report-file') + 1] == f'{tmp_path}/pm/{postmaint.REPORT_NAME}'
    assert not (tmp_path / 'pm').exists()
    # the whole partition: nothing excluded, the all-pairs check runs
    res = run(env, '--nodes', 'gige[1-4]', '--system', 'vcluster', '--partition', 'gige', '--dry-run')
    assert res.returncode == 0 and '-J' not in shlex.split(res.stdout) and '-x' not in shlex.split(res.stdout)
    assert '--system vcluster:gige' in res.stdout
    res = run(env, '--reservation', 'maint', '--dry-run')
    assert '-J reservation=maint' in res.stdout and '-t ci' in res.stdout


def test_prefix_is_where_the_run_writes(env, tmp_path):
    """--prefix: ReFrame's prefix (RFM_PREFIX of its run), the report's default directory and the state
    directory when NETREGRESS_STATE is not set, as tools/validate's --prefix."""
    env = {k: v for k, v in env.items() if k not in ('NETREGRESS_STATE', 'RFM_PREFIX')}
    prefix, ran = tmp_path / 'px', tmp_path / 'ran.json'
    report(ran, T0, [case(LAT, 'openmpi4', nodes=('gige1', 'gige2'), perf={'rtt_us': (11.0, 11.0, 'us')})])
    res = run(env, '--reservation', 'maint', '--system', 'vcluster', '--prefix', str(prefix), '--no-compare',
              FAKE_REPORT=str(ran))
    out = Path(res.stdout.splitlines()[-1].split()[1]).parent
    assert out.parent == prefix / 'post-maintenance', res.stdout + res.stderr
    assert Path(env['FAKE_ARGS'] + '.env').read_text() == f'RFM_PREFIX={prefix}\n'
    assert (prefix / 'state' / 'reframe' / 'results.db').is_file()       # where the stand-in stored the run
    help_text = subprocess.run([TOOL, '--help'], capture_output=True, text=True, timeout=60).stdout
    assert '--prefix DIR' in help_text and help_text.splitlines()[-1].startswith('Exit: 0 pass')


def test_a_venv_the_user_cannot_run_is_one_line(env, tmp_path):
    """A shared install whose venv links to an interpreter in someone's private home: the tools fell back to
    python3 and stopped on ModuleNotFoundError: No module named 'reframe'."""
    venv = tmp_path / 'deps' / 'venv' / 'bin'
    venv.mkdir(parents=True)
    (venv / 'python').symlink_to(tmp_path / 'private' / 'python3')
    (tmp_path / 'bare-python').write_text('#!/bin/sh\nexit 1\n')            # a Python without ReFrame
    (tmp_path / 'bare-python').chmod(0o755)
    res = run(env, '--reservation', 'maint', '--plan', NETREGRESS_DEPS=str(tmp_path / 'deps'),
              NETREGRESS_PYTHON=str(tmp_path / 'bare-python'))
    assert res.returncode == 2 and res.stdout == ''
    assert res.stderr == (f'post-maintenance: no Python with ReFrame: {venv}/python is there but {getpass.getuser()} '
                          f'cannot run it (it, or the interpreter it links to, is not readable for '
                          f'{getpass.getuser()}), and {tmp_path}/bare-python has no ReFrame; set NETREGRESS_DEPS to a '
                          f'venv you may run, or NETREGRESS_PYTHON\n')


def test_a_reservation_that_refuses_the_user_stops_the_run_before_it_starts(env, tmp_path):
    """Made for other users only, the reservation would refuse every sbatch of the run: one line, exit 2, nothing
    run (no ReFrame arguments written)."""
    CLUSTER.but(reservation_users={'maint': ['operator1']}).install(tmp_path / 'bin')
    res = run(env, '--reservation', 'maint', '--system', 'vcluster', '--output', str(tmp_path / 'ru'))
    assert res.returncode == 2, res.stdout + res.stderr
    refused = res.stderr.split('post-maintenance: reservation maint does not admit ')[1].split(', who')[0]
    assert getpass.getuser() in refused.split(', '), res.stderr
    assert 'scontrol update reservation=maint users+=' in res.stderr and not (tmp_path / 'args').exists()


def test_a_check_file_that_did_not_load_fails_the_run(env, tmp_path, maintenance):
    """ReFrame only warns and leaves the file's tests out; post-maintenance must not pass without them."""
    warning = ("WARNING: skipping test file 'reframe_tests/checks/osu.py': import error: No module named 'x' "
               "(rerun with '-v' for more information)")
    res = run(env, '--reservation', 'maint', '--system', 'vcluster', '--output', str(tmp_path / 'nl'),
              '--no-compare', FAKE_REPORT=str(maintenance['r2']), FAKE_LOG=warning)
    assert res.returncode == 1
    assert 'NOT LOADED reframe_tests/checks/osu.py: ReFrame skipped this check file' in res.stdout
    assert res.stdout.splitlines()[-2].startswith('RESULT: FAIL') and '1 check file(s) did not load' in res.stdout


def test_a_reframe_run_that_outlasts_its_timeout_is_stopped_and_fails(env, tmp_path):
    (tmp_path / 'bin' / 'reframe').write_text('#!/bin/sh\nsleep 600 & wait\n')     # hangs, with a child
    res = run(env, '--reservation', 'maint', '--system', 'vcluster', '--output', str(tmp_path / 'to'),
              '--timeout', '0.02', '--no-compare')
    assert res.returncode == 1
    assert 'ReFrame did not finish within --timeout 0.02 min: stopped' in res.stdout
    assert res.stdout.splitlines()[-2].startswith('RESULT: FAIL')
    for bad in ('0', 'nan', '-1', 'x'):
        res = run(env, '--reservation', 'maint', '--timeout', bad)
        assert res.returncode == 2 and '--timeout' in res.stderr, bad


def test_plan_prints_the_link_tests_rounds_steps_and_time_and_runs_nothing(env, tmp_path):
    res = run(env, '--reservation', 'maint', '--system', 'vcluster', '--plan')
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith('link test ')]
    # the reservation holds gige[1-4] only: fast has no node in scope
    assert 'link test vcluster:fast fast: 0 node in scope, no link to test' in lines
    # the vcluster's gige streams one at a time (partition extra link_concurrency 1), in two passes (link_passes
    # 2): 24 rounds of one stream
    (gige,) = [ln for ln in lines if ln.startswith('link test vcluster:gige gige: full: 4 nodes, 24 rounds, '
                                                   '24 directed streams (6 links), 3 job steps, about ')]
    assert gige.endswith("; 2 passes, each direction's best counts"), gige
    assert not (tmp_path / 'args').exists()                    # ReFrame never ran
    res = run(env, '--nodes', 'gige[1-3]', '--system', 'vcluster', '--partition', 'gige', '--plan',
              '--links', 'sample')
    # 3 nodes: one link set (shifts 1 and 2, every link both ways) covers every link in one run: 6 streams, one at a
    # time, twice
    assert 'link test vcluster:gige gige: sample: 3 nodes, 12 rounds, 12 directed streams (3 links)' in res.stdout, \
        res.stdout + res.stderr
    assert 'every link within 1 run in a row' in res.stdout
    # every fit of config/linkcost.yaml: the simulator's and the vcluster's
    assert 'by the simulator fit (SimGrid' in res.stdout and 'by the vcluster fit (bench/linktest_scale.py' in res.stdout
    # a node of the reservation left out by --exclude: the link test plans without it
    res = run(env, '--reservation', 'maint', '--exclude', 'gige2', '--system', 'vcluster', '--partition', 'gige',
              '--plan')
    assert 'link test vcluster:gige gige: full: 3 nodes, 12 rounds' in res.stdout, res.stdout + res.stderr
    # and one Slurm has drained: named, and planned without, as the run leaves it out (a one-stream round a
    # direction, twice)
    CLUSTER.but(drained={'gige3': 'bad cable'}).install(tmp_path / 'bin')
    res = run(env, '--reservation', 'maint', '--exclude', 'gige2', '--system', 'vcluster', '--partition', 'gige',
              '--plan')
    assert 'post-maintenance: gige3 (gige): drained (drained; reason: bad cable): left out (--strict fails the run ' \
           'for it)' in res.stderr.splitlines(), res.stderr
    assert 'link test vcluster:gige gige: full: 2 nodes, 4 rounds, 4 directed streams (1 links)' in res.stdout, \
        res.stdout + res.stderr
    CLUSTER.install(tmp_path / 'bin')
    res = run(env, '--nodes', 'gige[1-4]', '--system', 'vcluster', '--partition', 'gige', '--plan',
              '--links', 'topology')
    assert 'no topology plan: ' in res.stdout
    res = run(env, '--nodes', 'gige[1-4]', '--system', 'vcluster', '--links', 'sample', '--dry-run')
    assert '-S link_allpairs.plan=sample' in res.stdout


def test_exclude_takes_nodes_out_of_the_set_with_a_reservation_or_a_node_list(env):
    res = run(env, '--reservation', 'maint', '--exclude', 'gige[2,4]', '--dry-run')
    assert res.returncode == 0, res.stderr
    assert "-J reservation=maint -J 'exclude=gige[2,4]'" in res.stdout, res.stdout
    res = run(env, '--nodes', 'gige[1-3]', '--exclude', 'gige3', '--system', 'vcluster', '--dry-run')
    assert "-J 'exclude=fast[1-4],gige[3-4]'" in res.stdout, res.stdout
    assert 'excluded: gige3' in res.stderr
    for args, message in ((['--nodes', 'gige1', '--exclude', 'gige1'], '--exclude leaves no node of --nodes'),
                          (['--reservation', 'maint', '--exclude', 'a b'], '--exclude'),
                          (['--reservation', 'maint', '--exclude', '[]'], "--exclude '[]' is not a Slurm host list"),
                          (['--nodes', 'x[1-', '--exclude', 'x1'], "--nodes 'x[1-' is not a Slurm host list")):
        res = run(env, *args, '--system', 'vcluster', '--dry-run')
        assert res.returncode == 2 and message in res.stderr, (args, res.stderr)


def test_plan_from_slurm_with_an_injected_runner():
    def runner(argv, timeout_s):
        out = {'sinfo': 'gige[1-4]\n', 'scontrol': 'gige1\ngige2\ngige3\ngige4\n'}[argv[0]]
        return subprocess.CompletedProcess(argv, 0, out, '')
    where = scope.Scope('vcluster', ('gige',), nodes=('gige2', 'gige3'))
    plan = postmaint.node_plan(where, runner=runner)
    assert plan.cover == {'gige': ['gige2', 'gige3']} and plan.exclude == ['gige1', 'gige4']
    assert plan.partial == ['gige']
    # exclusions take nodes out of the set: none of them is used or must be covered
    plan = postmaint.node_plan(scope.Scope('vcluster', ('gige',), nodes=('gige2', 'gige3'), exclude=('gige3',)),
                               runner=runner)
    assert plan.cover == {'gige': ['gige2']} and plan.exclude == ['gige1', 'gige3', 'gige4']


@pytest.fixture
def maintenance(env, tmp_path):
    """Three runs before the maintenance stored (one failed), a host baseline from two of them, and the report
    the post-maintenance run will write."""
    paths = history_reports(tmp_path)
    store = subprocess.run([sys.executable, '-m', 'netregress_postrun.history', 'import',
                            *(str(paths[n]) for n in ('r1', 'r2', 'r3'))], env=env, capture_output=True, text=True)
    assert store.returncode == 0, store.stderr
    base = baselines.Baseline('vcluster', baselines.baseline_path('vcluster', tmp_path / 'state'))
    base.runs = [{'recorded_utc': 'x', 'report': str(paths[n]), 'figures': 3} for n in ('r1', 'r3')]
    base.entries[('gige', 'openmpi4', 'gige', 'mpitest.latency', 'rtt_us')] = {
        'unit': 'us', 'kind': 'latency', 'samples': [10.0, 11.0]}
    base.save()
    return paths


def test_a_failed_run_names_failures_uncovered_nodes_and_what_changed(env, tmp_path, maintenance):
    out = tmp_path / 'pm'
    res = run(env, '--nodes', 'gige[1-4]', '--system', 'vcluster', '--partition', 'gige', '--output', str(out),
              FAKE_REPORT=str(maintenance['now']), FAKE_RC='1')
    assert res.returncode == 1, res.stderr
    lines = res.stdout.splitlines()
    # the ticket lines: ReFrame 4.10's 'pass'/'fail' counted (the old script read 'success'/'failure': 0/N)
    assert lines[-2] == ('RESULT: FAIL (4/6 test cases passed, 1 failed, 1 skipped; 1 node(s) not covered; '
                         'reframe exit 1)')
    assert lines[-1] == f'REPORT: {out / postmaint.REPORT_NAME}   (console log: {out / "reframe.log"})'
    assert f'--report-junit {out / postmaint.JUNIT_NAME}' in Path(env['FAKE_ARGS']).read_text()
    assert ('FAILED tcp_rtt %interconnect=gige @vcluster:gige+gnu: sanity error: kernel exited with 1 (runtime '
            'failure): connection refused [nodes: gige[2-3]]') in lines          # every failure names its nodes
    assert 'NOT COVERED gige4: no passing check moved payload over its fabric there' in lines
    assert '== nodes of --nodes gige[1-4]: gige[1-4]; jobs ran on gige[1-3]; covered by a passing check: gige[1-3]' \
        in lines
    text = res.stdout
    assert 'what changed since the last passing run (before the maintenance): 2 of 4 figures moved by 5% or more, ' \
           '1 without an earlier value' in text
    o4 = next(ln for ln in lines if ln.strip().startswith(f'{LAT} @vcluster:gige+openmpi4') and 'last pass' not in ln
              and '+40.0% (worse)' in ln)
    assert o4.split()[-4:] == ['11', '+40.0%', '(worse)', 'pass']
    assert "what changed against this host's baseline: " in text and '+46.7% (worse)' in text
    assert f'== report page: {out / "report" / "index.html"}' in lines and (out / 'report' / 'changes.csv').exists()
    # jobs were confined to the set and nothing pinned them to all of it
    args = Path(env['FAKE_ARGS']).read_text()
    assert 'nodelist' not in args and '--report-file' in args


def test_a_reservation_covers_its_nodes(env, tmp_path, maintenance):
    # r3 ran on gige1 and gige2 only: the reservation's other two nodes are named
    res = run(env, '--reservation', 'maint', '--system', 'vcluster', '--output', str(tmp_path / 'r3'),
              '--no-compare', FAKE_REPORT=str(maintenance['r3']))
    assert res.returncode == 1
    assert res.stdout.splitlines()[-2] == ('RESULT: FAIL (3/3 test cases passed, 0 failed, 0 skipped; '
                                           '2 node(s) not covered)')
    assert 'NOT COVERED gige3: no passing check moved payload over its fabric there' in res.stdout and 'what changed' not in res.stdout
    every = tmp_path / 'every.json'
    report(every, T0 + 5000, [case(LAT, 'openmpi4', nodes=('gige1', 'gige2'), perf={'rtt_us': (11.0, 11.0, 'us')}),
                              case(LAT, 'mpich4', nodes=('gige3', 'gige4'), perf={'rtt_us': (12.0, 12.0, 'us')})])
    res = run(env, '--reservation', 'maint', '--system', 'vcluster', '--output', str(tmp_path / 'ok'),
              FAKE_REPORT=str(every))
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.splitlines()[-2] == 'RESULT: PASS (2/2 test cases passed, 0 failed, 0 skipped)'
    assert 'what changed since the last passing run (before the maintenance): 0 of 2 figures moved' in res.stdout


def test_a_drained_node_of_the_reservation_is_named_and_left_out_unless_strict(env, tmp_path, maintenance):
    every = tmp_path / 'every.json'
    report(every, T0 + 5000, [case(LAT, 'openmpi4', nodes=('gige1', 'gige2'), perf={'rtt_us': (11.0, 11.0, 'us')}),
                              case(LAT, 'mpich4', nodes=('gige4', 'gige1'), perf={'rtt_us': (12.0, 12.0, 'us')})])
    CLUSTER.but(drained={'gige3': 'bad cable'}).install(tmp_path / 'bin')
    res = run(env, '--reservation', 'maint', '--system', 'vcluster', '--output', str(tmp_path / 'ok'),
              '--no-compare', FAKE_REPORT=str(every))
    assert res.returncode == 0, res.stdout + res.stderr
    assert 'post-maintenance: gige3 (gige): drained (drained; reason: bad cable): left out' in res.stderr
    assert res.stdout.splitlines()[-2] == ('RESULT: PASS (2/2 test cases passed, 0 failed, 0 skipped; '
                                           '1 node(s) left out: gige3)')
    args = shlex.split(Path(env['FAKE_ARGS']).read_text())
    assert args[args.index('reservation=maint') + 1:args.index('reservation=maint') + 3] == ['-J', 'exclude=gige3']
    res = run(env, '--reservation', 'maint', '--system', 'vcluster', '--output', str(tmp_path / 'strict'),
              '--no-compare', '--strict', FAKE_REPORT=str(every))
    assert res.returncode == 1
    assert 'NOT COVERED gige3' in res.stdout and 'exclude=' not in Path(env['FAKE_ARGS']).read_text()


def test_reframe_that_writes_nothing_fails_clearly(env, tmp_path):
    res = run(env, '--nodes', 'gige[1-4]', '--system', 'vcluster', '--output', str(tmp_path / 'x'), FAKE_REPORT='',
              FAKE_RC='3')
    assert res.returncode == 1
    assert 'RESULT: FAIL (ReFrame exited 3 and wrote no readable report' in res.stdout
