"""Node coverage: sinfo node states, the nodes no passing check used, and the command line (fake Slurm, no cluster)."""
import json
import subprocess
from pathlib import Path

import pytest

from netregress.measure import site, slurm
from netregress_postrun import coverage

# the vcluster system is a site (config/sites/vcluster): loaded through the layer, as a centre's is
pytestmark = pytest.mark.usefixtures('vcluster_site')

ROOT = Path(__file__).resolve().parents[2]


class FakeSlurm:
    """A runner answering sinfo/scontrol from canned outputs; a list of sinfo outputs is served one per call."""

    def __init__(self, sinfo=None, hostnames=None, sinfo_exc=None, returncode=0, stderr='', sacct=''):
        self.sinfo = sinfo if isinstance(sinfo, list) else [sinfo or '']
        self.sacct = sacct
        self.hostnames = hostnames or {}
        self.sinfo_exc = sinfo_exc
        self.returncode = returncode
        self.stderr = stderr
        self.calls = []

    def __call__(self, argv, timeout_s):
        self.calls.append((list(argv), timeout_s))
        if argv[0] == 'sacct':
            return subprocess.CompletedProcess(argv, 0, self.sacct, '')
        if argv[0] == 'scontrol':
            return subprocess.CompletedProcess(argv, 0, '\n'.join(self.hostnames[argv[-1]]) + '\n', '')
        if self.sinfo_exc is not None:
            raise self.sinfo_exc
        if '%N' in argv:                          # partition node list (sinfo -o %N)
            part = argv[argv.index('-p') + 1]
            if self.returncode:
                return subprocess.CompletedProcess(argv, self.returncode, '', self.stderr)
            return subprocess.CompletedProcess(argv, 0, {'fast': 'fast[1-4]\n', 'gige': 'gige[1-4]\n'}
                                               .get(part, ''), '')
        out = self.sinfo[0] if len(self.sinfo) == 1 else self.sinfo.pop(0)
        return subprocess.CompletedProcess(argv, self.returncode, out, self.stderr)


class Clock:
    """Fake monotonic clock advanced by the fake sleep."""

    def __init__(self):
        self.now = 100.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.slept.append(s)
        self.now += s


def rows(*entries):
    return ''.join(f'{p}|{n}|{s}|{r}\n' for p, n, s, r in entries)


HEALTHY = rows(('fast*', 'fast1', 'idle', 'none'), ('fast*', 'fast2', 'mixed', 'none'),
               ('gige', 'gige1', 'allocated', 'none'), ('gige', 'gige2', 'idle~', 'none'))


def problems(sinfo, parts=('fast', 'gige'), wait_s=0.0, **kw):
    clock = Clock()
    fake = sinfo if isinstance(sinfo, FakeSlurm) else FakeSlurm(sinfo)
    out = slurm.node_problems(list(parts), wait_s, runner=fake, clock=clock, sleep=clock.sleep, **kw)
    return out, clock, fake


def test_healthy_nodes_give_no_problem():
    out, clock, fake = problems(HEALTHY)
    assert out == []
    assert clock.slept == []
    argv = fake.calls[0][0]
    assert argv[:5] == ['sinfo', '-h', '-N', '-p', 'fast,gige']


@pytest.mark.parametrize('state, reason, expected', [
    ('down*', 'Not responding', 'fast2: not responding (down*)'),
    ('idle*', 'none', 'fast2: not responding (idle*)'),
    ('drained', 'bad DIMM', 'fast2: drained (drained; reason: bad DIMM)'),
    ('draining', 'reboot after job', 'fast2: draining (draining; reason: reboot after job)'),
    ('mixed+drain', 'x', 'fast2: drained (mixed+drain; reason: x)'),
    ('down', 'admin', 'fast2: down (down; reason: admin)'),
    ('fail', 'none', 'fast2: failed (fail)'),
    ('unknown', 'none', 'fast2: state unknown (unknown)'),
    ('drained*', 'hw', 'fast2: not responding, drained (drained*; reason: hw)'),
])
def test_unusable_nodes_are_named_with_state_and_reason(state, reason, expected):
    out, _, _ = problems(rows(('fast', 'fast1', 'idle', 'none'), ('fast', 'fast2', state, reason)), parts=['fast'])
    assert out == [expected]


def test_a_scoped_run_judges_only_its_nodes_and_a_reservation_state_is_no_problem():
    sinfo = rows(('fast', 'fast1', 'maint', 'none'), ('fast', 'fast2', 'maint', 'none'),
                 ('fast', 'fast3', 'down', 'cable'), ('fast', 'fast4', 'idle', 'none'))
    out, _, _ = problems(sinfo, parts=['fast'])
    assert [p.split(':')[0] for p in out] == ['fast1', 'fast2', 'fast3']
    out, _, _ = problems(sinfo, parts=['fast'], only={'fast1', 'fast2'}, reserved_ok=True)
    assert out == []                      # fast3 is outside the reservation; maint is the reservation itself
    out, _, _ = problems(sinfo, parts=['fast'], only={'fast2', 'fast3'}, reserved_ok=True)
    assert out == ['fast3: down (down; reason: cable)']


def test_a_job_that_never_started_is_reported_with_its_partitions_node_states_or_why_there_are_none():
    def answers(code, out, err=''):
        def runner(argv, timeout_s):
            assert argv == ['sinfo', '-h', '-p', 'fast', '-o', '%T:%N']
            return subprocess.CompletedProcess(argv, code, out, err)
        return runner
    assert slurm.node_states('fast', runner=answers(0, 'idle:fast[1-3]\ndrained:fast4\n')) == \
        'partition fast nodes idle:fast[1-3], drained:fast4'
    assert slurm.node_states('fast', runner=answers(1, '', 'slurm_load_partitions: Unable to contact slurm '
                                                          'controller')) == \
        'partition fast: node states unknown (sinfo failed (exit 1): slurm_load_partitions: Unable to contact ' \
        'slurm controller)'

    def hangs(argv, timeout_s):
        raise subprocess.TimeoutExpired(argv, timeout_s)
    assert 'did not answer within 10 s' in slurm.node_states('fast', runner=hangs)


def test_the_scope_comes_from_the_jobs_slurm_options_as_reframe_passes_them():
    assert not slurm.node_scope([])
    assert slurm.node_scope(['reservation=maint', 'exclude=fast[3-4]']) == slurm.NodeScope(
        reservation='maint', exclude=('fast3', 'fast4'))
    assert slurm.node_scope(['--nodelist=gige[1-2]']).nodelist == ('gige1', 'gige2')
    assert slurm.node_scope(['-w gige3', '--partition=gige']).nodelist == ('gige3',)
    assert slurm.node_scope(['-x fast1']).exclude == ('fast1',)
    show = 'ReservationName=maint StartTime=now Nodes=fast[1-2],gige2 NodeCnt=3 Flags=MAINT\n'

    def runner(argv, timeout_s):
        assert argv == ['scontrol', 'show', 'reservation', 'maint']
        return subprocess.CompletedProcess(argv, 0, show, '')
    part = ['fast1', 'fast2', 'fast3', 'fast4']
    assert slurm.scoped_nodes(part, slurm.node_scope(['reservation=maint']), runner=runner) == ['fast1', 'fast2']
    assert slurm.scoped_nodes(part, slurm.node_scope(['exclude=fast[2-3]'])) == ['fast1', 'fast4']
    empty = lambda argv, t: subprocess.CompletedProcess(argv, 0, 'ReservationName=x Nodes=(null)\n', '')  # noqa: E731
    with pytest.raises(slurm.SlurmQueryError, match='reservation maint holds no nodes'):
        slurm.scoped_nodes(part, slurm.node_scope(['reservation=maint']), runner=empty)


def test_an_all_node_check_leaves_out_and_names_the_nodes_slurm_cannot_use():
    """A drained node in scope is no reason to skip the link test: the others are asked for by name, it is
    named; an exclusion (ci/post-maintenance --exclude, -J exclude=...) keeps a node out of scope altogether."""
    from types import SimpleNamespace
    fake = FakeSlurm(rows(('fast', 'fast1', 'idle', 'none'), ('fast', 'fast2', 'drained', 'bad cable'),
                          ('fast', 'fast3', 'down*', 'Not responding'), ('fast', 'fast4', 'idle', 'none')),
                     hostnames={'fast[1-4]': ['fast1', 'fast2', 'fast3', 'fast4']})
    check = SimpleNamespace(current_partition=SimpleNamespace(access=['--partition=fast'], name='fast'),
                            job=SimpleNamespace(cli_options=[], options=[]))
    nodes, left_out = slurm.allocate_scoped_nodes(check, 0.0, runner=fake)
    assert nodes == ['fast1', 'fast4'] and check.job.options == ['--nodes=2', '--nodelist=fast[1,4]']
    assert left_out == {'fast2': 'fast2: drained (drained; reason: bad cable)',
                        'fast3': 'fast3: not responding (down*)'}
    check.job = SimpleNamespace(cli_options=['exclude=fast[2-3]'], options=[])
    assert slurm.allocate_scoped_nodes(check, 0.0, runner=fake) == (['fast1', 'fast4'], {})
    report = {'runs': [{'testcases': [case('fast', ['fast1', 'fast4'], nodes_left_out=list(left_out.values()))]}]}
    assert coverage.uncovered_nodes(report, {'fast': ['fast1', 'fast2', 'fast3', 'fast4']}) == [
        'fast2: no passing check moved payload over its fabric there (the all-node checks left it out: drained '
        '(drained; reason: bad cable))',
        'fast3: no passing check moved payload over its fabric there (the all-node checks left it out: not '
        'responding (down*))']


def test_persistent_problem_returns_at_once_transient_one_is_polled_until_it_clears():
    drained = rows(('fast', 'fast1', 'idle', 'none'), ('fast', 'fast2', 'drained', 'x'))
    out, clock, _ = problems(drained, parts=['fast'], wait_s=30)
    assert out == ['fast2: drained (drained; reason: x)'] and clock.slept == []

    recovering = FakeSlurm([rows(('fast', 'fast2', 'unknown', 'none')), rows(('fast', 'fast2', 'idle*', 'none')),
                            rows(('fast', 'fast2', 'idle', 'none'))])
    out, clock, fake = problems(recovering, parts=['fast'], wait_s=30, poll_s=2)
    assert out == [] and clock.slept == [2, 2] and len(fake.calls) == 3


def test_waits_at_most_wait_s_then_reports():
    stuck = rows(('fast', 'fast2', 'down*', 'Not responding'))
    out, clock, fake = problems(stuck, parts=['fast'], wait_s=5, poll_s=2)
    assert out == ['fast2: not responding (down*)']
    assert sum(clock.slept) == pytest.approx(5)           # 2 + 2 + 1: never beyond wait_s
    assert clock.now - 100.0 <= 5
    assert all(t <= slurm.QUERY_TIMEOUT_S for _, t in fake.calls)
    assert fake.calls[-1][1] >= 1.0


def test_transient_and_persistent_together_do_not_wait():
    mixed = rows(('fast', 'fast1', 'idle*', 'none'), ('fast', 'fast2', 'drained', 'x'))
    out, clock, _ = problems(mixed, parts=['fast'], wait_s=30)
    assert len(out) == 2 and clock.slept == []


@pytest.mark.parametrize('exc, expected', [
    (subprocess.TimeoutExpired(['sinfo'], 10), 'sinfo did not answer within 10 s (slurmctld down or unreachable?)'),
    (FileNotFoundError('sinfo'), 'sinfo not found'),
])
def test_sinfo_failure_is_one_clear_message(exc, expected):
    out, clock, _ = problems(FakeSlurm(sinfo_exc=exc), wait_s=30)
    assert len(out) == 1 and expected in out[0]
    assert out[0].startswith('partitions fast, gige: node states unknown')
    assert clock.slept == []


def test_sinfo_error_exit_and_unknown_partition():
    out, _, _ = problems(FakeSlurm('', returncode=1, stderr='sinfo: error: Unable to contact slurm controller\n'))
    assert out == ['partitions fast, gige: node states unknown: sinfo failed (exit 1): '
                   'sinfo: error: Unable to contact slurm controller']
    out, _, _ = problems(HEALTHY, parts=['fast', 'nosuch'])
    assert out == ['partition nosuch: sinfo lists no nodes (no such partition, or it is empty)']


def test_describe_state():
    assert slurm.describe_state('idle') == (None, False)
    assert slurm.describe_state('idle~') == (None, False)          # powered off, resumes on demand
    assert slurm.describe_state('completing') == (None, False)
    assert slurm.describe_state('down*') == ('not responding', True)
    assert slurm.describe_state('drained*') == ('not responding, drained', False)
    assert slurm.describe_state('reboot^') == ('rebooting', True)
    assert slurm.split_state('MIXED-') == ('mixed', '-')


def test_expand_hostlist():
    assert slurm.expand_hostlist('fast[1-3,5],gige1') == ['fast1', 'fast2', 'fast3', 'fast5', 'gige1']
    assert slurm.expand_hostlist('n[008-010]') == ['n008', 'n009', 'n010']
    assert slurm.expand_hostlist('r[1-2]n[1-2]') == ['r1n1', 'r1n2', 'r2n1', 'r2n2']
    assert slurm.expand_hostlist('') == []


def test_partition_nodes_asks_scontrol_to_expand():
    fake = FakeSlurm(hostnames={'fast[1-4]': ['fast1', 'fast2', 'fast3', 'fast4']})
    assert slurm.partition_nodes('fast', runner=fake) == ['fast1', 'fast2', 'fast3', 'fast4']
    assert fake.calls[0][0] == ['sinfo', '-h', '-p', 'fast', '-o', '%N']
    with pytest.raises(slurm.SlurmQueryError, match='no nodes in partition nosuch'):
        slurm.partition_nodes('nosuch', runner=fake)


# --- coverage of a report -------------------------------------------------------------------------------------------

def case(partition, nodes, result='pass', system='vcluster', **kw):
    return {'name': 'x', 'system': system, 'partition': partition, 'environ': 'gnu', 'result': result,
            'job_nodelist': nodes, **kw}


REPORT = {'runs': [
    {'testcases': [case('fast', ['fast1', 'fast2']), case('fast', ['fast3', 'fast4'], result='fail'),
                   case('gige', ['gige1', 'gige2', 'gige3']), case('gige', [], result='pass', fixture=True),
                   case('gige', ['gige4'], system='other')]},
    {'testcases': [case('fast', 'fast[3-4]', result='pass')]},           # a retry that passed
]}
NODES = {'fast': ['fast1', 'fast2', 'fast3', 'fast4'], 'gige': ['gige1', 'gige2', 'gige3', 'gige4']}


def test_uncovered_nodes_counts_passing_cases_of_every_run():
    assert coverage.uncovered_nodes(REPORT, NODES, system='vcluster') == ['gige4: no passing check moved payload over its fabric there']
    # without the retry, fast3 and fast4 were only used by a failing case
    first_run = {'runs': REPORT['runs'][:1]}
    assert coverage.uncovered_nodes(first_run, NODES, system='vcluster') == [
        'fast3: no passing check moved payload over its fabric there', 'fast4: no passing check moved payload over its fabric there', 'gige4: no passing check moved payload over its fabric there']
    # another system's case counts only when no system is asked for
    assert coverage.uncovered_nodes(REPORT, NODES) == []


def test_a_node_is_covered_only_by_a_passing_check_that_moved_payload_over_its_fabric():
    """Shared memory, loopback TCP and the node loopback probe run on a node without one byte over its fabric."""
    report = {'runs': [{'testcases': [
        case('fast', 'fast[1-2]', interconnect='shm'),
        case('fast', 'fast[3-4]', interconnect='fast', nr_fabric_payload=False),       # node_loopback
        case('fast', 'fast[5-6]', interconnect='fast'),
        case('fast', 'fast[7-8]', interconnect='fast', result='fail')]}]}
    nodes = {'fast': [f'fast{i}' for i in range(1, 9)]}
    assert [p.split(':')[0] for p in coverage.uncovered_nodes(report, nodes)] == [
        'fast1', 'fast2', 'fast3', 'fast4', 'fast7', 'fast8']


def test_uncovered_nodes_of_an_empty_report():
    assert coverage.uncovered_nodes({}, {'fast': ['fast1']}) == ['fast1: no passing check moved payload over its fabric there']


def test_main_prints_problems_and_exits_1(tmp_path, capsys):
    report = tmp_path / 'report.json'
    report.write_text(json.dumps(REPORT))
    fake = FakeSlurm(rows(('fast', 'fast1', 'idle', 'none'), ('fast', 'fast2', 'drained', 'x'),
                          ('gige', 'gige1', 'idle', 'none')),
                     hostnames={'fast[1-4]': NODES['fast'], 'gige[1-4]': NODES['gige']})
    assert coverage.main(['--system', 'vcluster', '--report', str(report), '--wait', '0'], runner=fake) == 1
    out = capsys.readouterr().out.splitlines()
    # the drained node is named with its fabric and left out; the node nothing used is named with its fabric
    assert out == ['fast2 (fast): drained (drained; reason: x): left out',
                   'vcluster:gige (gige): no passing check moved payload over gige on 1 node(s) in scope: gige4']
    assert coverage.main(['--system', 'vcluster', '--report', str(report), '--wait', '0', '--strict'],
                         runner=fake) == 1
    assert capsys.readouterr().out.splitlines()[0] == 'fast2 (fast): drained (drained; reason: x)'


def test_main_exits_3_when_slurm_does_not_answer(capsys):
    fake = FakeSlurm('', returncode=1, stderr='sbatch: fatal: Could not establish a configuration source\n')
    assert coverage.main(['--system', 'vcluster', '--wait', '0'], runner=fake) == 3
    assert 'node states unknown: partition fast: sinfo failed (exit 1)' in capsys.readouterr().out


def test_main_all_good_and_bad_report(tmp_path, capsys):
    fake = FakeSlurm(HEALTHY, hostnames={'fast[1-4]': ['fast1', 'fast2'], 'gige[1-4]': ['gige1', 'gige2']})
    assert coverage.main(['--system', 'vcluster', '--wait', '0'], runner=fake) == 0
    assert capsys.readouterr().out == 'coverage: 4 nodes of vcluster:fast (fast), vcluster:gige (gige) usable\n'
    bad = tmp_path / 'bad.json'
    bad.write_text('{not json')
    assert coverage.main(['--system', 'vcluster', '--report', str(bad), '--wait', '0'], runner=fake) == 2
    with pytest.raises(SystemExit):
        coverage.main(['--system', 'vcluster', '--partition', 'nosuch'], runner=fake)


# --- one job at a time on shared CPUs -------------------------------------------------------------------------------

JOBS = {'runs': [{'testcases': [
    case('fast', ['fast1'], jobid=11, scheduler='slurm', name='osu'),
    case('gige', ['gige1'], jobid=12, scheduler='slurm', name='nas'),
    case('fast', ['fast2'], jobid=13, scheduler='slurm', name='mpi_latency'),
    case('fast', [], scheduler='local', jobid=999, fixture=True),       # a local build: not Slurm's
]}]}


def sacct(*spans):
    return ''.join(f'{j}|2026-11-26T01:{s}|2026-11-26T01:{e}\n' for j, s, e in spans)


def test_jobs_one_after_another_overlap_nowhere():
    # the next starts in the second the last one ended (whole seconds); a job not yet ended has End=Unknown
    fake = FakeSlurm(sacct=sacct((11, '00:00', '00:05'), (12, '00:05', '00:09')) + '13|2026-11-26T01:00:09|Unknown\n')
    assert coverage.overlapping_jobs(JOBS, runner=fake) == []
    argv = fake.calls[0][0]
    assert argv[:6] == ['sacct', '-X', '-P', '-n', '-j', '11,12,13']      # the Slurm jobs only


def test_jobs_running_at_once_are_named_pair_by_pair():
    fake = FakeSlurm(sacct=sacct((11, '00:00', '00:10'), (12, '00:03', '00:05'), (13, '00:08', '00:12')))
    assert coverage.overlapping_jobs(JOBS, runner=fake) == [
        'jobs 11 (osu @vcluster:fast+gnu) and 12 (nas @vcluster:gige+gnu) ran at the same time (01:00:03-01:00:05) '
        'on CPUs their nodes share: each measured the other',
        'jobs 11 (osu @vcluster:fast+gnu) and 13 (mpi_latency @vcluster:fast+gnu) ran at the same time '
        '(01:00:08-01:00:10) on CPUs their nodes share: each measured the other']
    assert coverage.overlapping_jobs({'runs': []}, runner=fake) == []          # nothing ran: nothing asked
    assert len(fake.calls) == 1


def test_main_checks_jobs_one_at_a_time_where_nodes_share_cpus(tmp_path, capsys):
    report = tmp_path / 'report.json'
    report.write_text(json.dumps(JOBS))
    hostnames = {'fast[1-4]': ['fast1', 'fast2'], 'gige[1-4]': ['gige1']}
    good = FakeSlurm(HEALTHY, hostnames=hostnames, sacct=sacct((11, '00:00', '00:05'), (12, '00:05', '00:09'),
                                                               (13, '00:09', '00:10')))
    assert coverage.main(['--system', 'vcluster', '--report', str(report), '--wait', '0'], runner=good) == 0
    assert capsys.readouterr().out.strip() == ('coverage: 3 nodes of vcluster:fast (fast), vcluster:gige (gige) '
                                               'usable and used by a passing check, its jobs one at a time')
    bad = FakeSlurm(HEALTHY, hostnames=hostnames, sacct=sacct((11, '00:00', '00:05'), (12, '00:04', '00:09'),
                                                              (13, '00:09', '00:10')))
    assert coverage.main(['--system', 'vcluster', '--report', str(report), '--wait', '0'], runner=bad) == 1
    assert 'jobs 11 (osu @vcluster:fast+gnu) and 12 (nas @vcluster:gige+gnu) ran at the same time' \
        in capsys.readouterr().out


def test_only_the_vcluster_shares_host_cpus_and_each_of_its_partitions_takes_the_license(monkeypatch):
    parts = site.slurm_partitions('vcluster')
    assert coverage.shares_host_cpus(parts)
    assert not coverage.shares_host_cpus(site.slurm_partitions('local'))    # no Slurm partitions
    # a real cluster's nodes have CPUs of their own
    monkeypatch.setenv('NETREGRESS_SITE', str(ROOT / 'config' / 'sites' / 'example'))
    site._config.cache_clear()
    assert not coverage.shares_host_cpus(site.slurm_partitions('site-example'))
    site._config.cache_clear()
    env = dict(line.split('=', 1) for line in (ROOT / 'config' / 'vcluster.env').read_text().splitlines()
               if line.startswith('VC_HOST_LICENSE='))
    license_opt = f'--licenses={env["VC_HOST_LICENSE"].split()[0]}:1'
    assert parts and all(license_opt in p['access'] for p in parts)
