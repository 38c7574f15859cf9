"""End to end on the `local` system with stand-in kernels: the library's failure modes really fail the check.

Runs ReFrame (from the Python running pytest) on copies of the real checks, with stand-in kernels
(tests/python/fake_kernels) and a scratch reference directory. Covers: a complete run passes; a missing reference
fails after measuring; a kernel error or crash fails with its cause; an MPI forced onto another path than the interconnect
under test fails on both witnesses (transport report and byte counters).
"""
import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip('reframe')
ROOT = Path(__file__).resolve().parents[2]
FAKES = Path(__file__).resolve().parent / 'fake_kernels'
REFRAME = Path(sys.executable).parent / 'reframe'

WRONG_PATH_CHECK = '''
import reframe as rfm
from reframe.core.builtins import run_after
from mpi_p2p import mpi_latency


@rfm.simple_test
class wrong_path_latency(mpi_latency):
    """Claims shm but forces Open MPI onto TCP: must fail on the transport and the counters."""
    @run_after('setup')
    def sabotage(self):
        self.env_vars.update({'OMPI_MCA_btl': 'self,tcp', 'OMPI_MCA_btl_tcp_if_include': 'lo'})
'''


@pytest.fixture(scope='module')
def sandbox(tmp_path_factory):
    if not REFRAME.exists():
        pytest.skip(f'no reframe next to {sys.executable}')
    tmp = tmp_path_factory.mktemp('rfm')
    kernels = tmp / 'kernels'
    for env in ('gnu', 'openmpi4'):
        (kernels / env / 'bin').mkdir(parents=True)
        for exe in ('nr-tcpserver', 'nr-tcptest'):
            shutil.copy(FAKES / exe, kernels / env / 'bin' / exe)
    have_ompi = shutil.which('mpicc.openmpi') is not None
    if have_ompi:
        exe = kernels / 'openmpi4' / 'bin' / 'nr-mpitest'
        subprocess.run(['mpicc.openmpi', '-O1', '-o', str(exe), str(FAKES / 'fake_mpitest.c')], check=True,
                       capture_output=True)
        for name in ('nr-mpicoll', 'nr-ebb'):
            shutil.copy(exe, exe.parent / name)
    checks = tmp / 'checks'
    checks.mkdir()
    for name in ('tcp.py', 'mpi_p2p.py'):
        shutil.copy(ROOT / 'reframe_tests' / 'checks' / name, checks / name)
    (checks / 'wrong_path.py').write_text(WRONG_PATH_CHECK)
    refs = tmp / 'refs'
    refs.mkdir()
    return {'tmp': tmp, 'kernels': kernels, 'checks': checks, 'refs': refs, 'have_ompi': have_ompi}


def run(sandbox, name, *extra, env=None, references=None):
    """Run one check by name; return (exit code, list of test cases from the JSON report)."""
    tmp = sandbox['tmp']
    (sandbox['refs'] / 'local.yaml').write_text(yaml.safe_dump(references or {}))
    report = tmp / f'report-{name}.json'
    environ = {**os.environ, 'NETREGRESS_KERNELS': f'{sandbox["kernels"]}/{{env}}/bin',
               'NETREGRESS_REFERENCES': str(sandbox['refs']), 'TMPDIR': str(tmp),
               'PYTHONPATH': f'{sandbox["checks"]}:{ROOT / "reframe_tests"}',
               'OMPI_ALLOW_RUN_AS_ROOT': '1', 'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1',
               'RFM_ENABLE_RESULTS_STORAGE': '0',    # fake runs stay out of this host's results database
               **(env or {})}
    cmd = [str(REFRAME), '-C', str(ROOT / 'config' / 'settings.py'), '-c', str(sandbox['checks']),
           '--system', 'local', '--prefix', str(tmp / 'prefix'), '--stage', str(tmp / 'stage'),
           '--output', str(tmp / 'output'), '--perflogdir', str(tmp / 'perflogs'),
           '--report-file', str(report), '-n', name, *extra, '-r']
    proc = subprocess.run(cmd, env=environ, capture_output=True, text=True, timeout=300)
    cases = [tc for r in json.loads(report.read_text())['runs'] for tc in r['testcases'] if not tc.get('fixture')]
    assert cases, proc.stdout + proc.stderr
    return proc.returncode, cases


def reference(env, ic, test, metric, value, unit):
    """A committed reference file for one figure (any value within 0.01x..100x passes), and for the peer's round
    trip and the ratio to it, which tcp_rtt and mpi_latency measure in the same job."""
    metrics = {metric: {'value': value, 'unit': unit, 'lower': -0.99, 'upper': 99.0, 'comment': 'test'}}
    anything = {'value': 1.0, 'lower': -0.9999, 'upper': 9999.0, 'comment': 'test'}   # a real peer, a fake kernel
    metrics |= {'peer_rtt_us': {'unit': 'us', **anything}, 'ratio_to_peer': {'unit': 'ratio', **anything}}
    return {'schema': 'netregress-references/1', 'system': 'local', 'references': {'default': {env: {ic: {test: (
        metrics)}}}}}


def test_complete_run_passes(sandbox):
    rc, cases = run(sandbox, 'tcp_rtt', references=reference('gnu', 'tcp', 'tcp.rtt', 'rtt_us', 25.0, 'us'))
    assert rc == 0 and cases[0]['result'] == 'pass', cases[0]['fail_reason']
    assert cases[0]['nr_wire'].startswith(f'{os.uname().nodename}:lo=')


def test_the_server_authenticates_listens_on_the_interface_under_test_on_a_port_it_picks(sandbox):
    """Issue 29: nr-tcpserver takes only a client holding the job's secret (made 0600 from the start, removed at the
    end), bound to the address under test, on a port it picks and the client reads from what it printed."""
    rc, cases = run(sandbox, 'tcp_rtt', '--keep-stage-files',
                    references=reference('gnu', 'tcp', 'tcp.rtt', 'rtt_us', 25.0, 'us'))
    assert rc == 0 and cases[0]['result'] == 'pass', cases[0]['fail_reason']
    script = (Path(cases[0]['outputdir']) / 'rfm_job.sh').read_text()
    secret = "(umask 077; set -C; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > auth.secret)"
    assert secret in script and "trap 'rm -f auth.secret' EXIT" in script
    assert script.index(secret) < script.index('nr-tcpserver -B $SERVER_ADDR -p 0 --auth-file auth.secret')
    assert 'nr-tcptest -h $SERVER_ADDR -p $SERVER_PORT --auth-file auth.secret' in script
    assert "SERVER_PORT=$(sed -n 's/.*listening on port" in script
    stage = Path(cases[0]['stagedir'])
    assert (stage / 'server.out').exists() and not (stage / 'auth.secret').exists()


def test_a_session_without_authentication_fails_the_check(sandbox):
    """A server that took a client without the secret (options.auth false in the result) cannot pass silently."""
    rc, cases = run(sandbox, 'tcp_rtt', env={'FAKE_TCPTEST_NOAUTH': '1'},
                    references=reference('gnu', 'tcp', 'tcp.rtt', 'rtt_us', 25.0, 'us'))
    assert rc != 0 and cases[0]['fail_phase'] == 'sanity'
    assert 'options.auth is not true' in cases[0]['fail_reason']


def test_missing_reference_fails_after_measuring(sandbox):
    rc, cases = run(sandbox, 'tcp_rtt')
    assert rc != 0 and cases[0]['fail_phase'] == 'performance'
    assert 'no reference for local:default gnu tcp tcp.rtt rtt_us' in cases[0]['fail_reason']
    assert cases[0]['perfvalues']['local:default:rtt_us'][0] == 25.0       # measured, so tools/refs can use it


def test_the_round_trip_is_measured_beside_its_peer_in_the_same_job(sandbox):
    """NPtcp runs in the tcp_rtt job (before the counters); our round trip is also reported over the peer's."""
    rc, cases = run(sandbox, 'tcp_rtt', references=reference('gnu', 'tcp', 'tcp.rtt', 'rtt_us', 25.0, 'us'))
    assert rc == 0, cases[0]['fail_reason']
    values = {key.split(':')[-1]: v[0] for key, v in cases[0]['perfvalues'].items()}
    assert values['peer_rtt_us'] > 0 and cases[0]['nr_peer'] == 'NPtcp'
    assert values['ratio_to_peer'] == pytest.approx(values['rtt_us'] / values['peer_rtt_us'])


def test_a_peer_that_measured_nothing_fails_the_check_naming_it(sandbox):
    rc, cases = run(sandbox, 'tcp_rtt', '-S', 'peer_nptcp=false',
                    references=reference('gnu', 'tcp', 'tcp.rtt', 'rtt_us', 25.0, 'us'))
    assert rc != 0 and cases[0]['fail_phase'] == 'sanity'
    assert 'the peer NetPIPE wrote no peer-np.out' in cases[0]['fail_reason']
    assert 'peer false exited with 1' in cases[0]['fail_reason']


def test_kernel_error_fails_with_its_message(sandbox):
    rc, cases = run(sandbox, 'tcp_rtt', env={'FAKE_TCPTEST_FAIL': '1'},
                    references=reference('gnu', 'tcp', 'tcp.rtt', 'rtt_us', 25.0, 'us'))
    assert rc != 0 and cases[0]['fail_phase'] == 'sanity'
    assert 'exited with 1 (runtime failure): connection refused by fake server' in cases[0]['fail_reason']


def test_kernel_crash_is_named_not_lost_behind_the_missing_result(sandbox):
    rc, cases = run(sandbox, 'tcp_rtt', env={'FAKE_TCPTEST_CRASH': '1'},
                    references=reference('gnu', 'tcp', 'tcp.rtt', 'rtt_us', 25.0, 'us'))
    assert rc != 0 and cases[0]['fail_phase'] == 'sanity'
    assert 'exited with 139 (killed by signal 11)' in cases[0]['fail_reason']
    # the job script lifts the core size limit, so the crashed process leaves its core in the stage directory
    if Path('/proc/sys/kernel/core_pattern').read_text().strip() == 'core' and \
            resource.getrlimit(resource.RLIMIT_CORE)[1] == resource.RLIM_INFINITY:
        stage = cases[0]['stagedir']
        assert f'core file kept: {stage}/core' in cases[0]['fail_reason']


def test_mpi_on_the_declared_path_passes(sandbox):
    if not sandbox['have_ompi']:
        pytest.skip('Debian Open MPI not installed')
    # the stand-in kernel times no duet yardstick (its own test: tests/mpi, mpi.mpitest_duet_*)
    rc, cases = run(sandbox, 'mpi_latency', '-p', 'openmpi4', '-E', "interconnect == 'shm'", '-S', 'duet=false',
                    references=reference('openmpi4', 'shm', 'mpitest.latency', 'rtt_us', 100.0, 'us'))
    assert rc == 0, cases[0]['fail_reason']
    assert cases[0]['nr_transports'] == 'btl:vader'


def test_mpi_on_another_path_fails_on_both_witnesses(sandbox):
    if not sandbox['have_ompi']:
        pytest.skip('Debian Open MPI not installed')
    rc, cases = run(sandbox, 'wrong_path_latency', '-p', 'openmpi4', '-E', "interconnect == 'shm'",
                    references=reference('openmpi4', 'shm', 'mpitest.latency', 'rtt_us', 100.0, 'us'))
    assert rc != 0 and cases[0]['fail_phase'] == 'sanity'
    reason = cases[0]['fail_reason']
    assert 'MPI took another path: reported btl:tcp' in reason
    assert 'the payload went over the network, not shm' in reason


def test_host_baseline_judges_cpu_bound_figures_by_the_wide_band(sandbox, tmp_path, monkeypatch):
    """local's host baseline judges a CPU-bound round trip (assert_cpu_bound False) by the wide band its spread
    supports (4x-10x): the stand-in's 25 us passes against a baseline of 10 us and fails against 0.83 us (30x);
    figures the baseline has not seen (the peer's, the ratio) are recorded; committed references assert it tightly."""
    from netregress.judge import bandrules, baselines
    from netregress import measurement
    from netregress_postrun import refswrite
    rules = bandrules.load()

    def run_against(rtt_us):
        state = tmp_path / f'state-{rtt_us}'
        monkeypatch.setenv('NETREGRESS_STATE', str(state))
        base = baselines.Baseline('local', baselines.baseline_path('local'))
        base.measured_by = measurement.measurement_version()
        for _ in range(3):
            base.add([refswrite.Measurement(system='local', partition='default', environ='gnu', interconnect='tcp',
                                           test='tcp.rtt', metric='rtt_us', value=rtt_us, unit='us')], rules, 'test')
        base.save()
        return run(sandbox, 'tcp_rtt', env={'NETREGRESS_REFERENCES': '', 'NETREGRESS_STATE': str(state)})

    rc, cases = run_against(10.0)
    assert rc == 0 and cases[0]['result'] == 'pass', cases[0]['fail_reason']
    assert cases[0]['nr_shared_cpu_band'] == 'rtt_us' and 'host baseline' in cases[0]['nr_reference_source']
    assert set(cases[0]['nr_recorded_only'].split(',')) == {'peer_rtt_us', 'ratio_to_peer'}
    rc, cases = run_against(25.0 / 30)
    assert rc != 0 and cases[0]['fail_phase'] == 'performance' and 'rtt_us' in cases[0]['fail_reason']
    strict = reference('gnu', 'tcp', 'tcp.rtt', 'rtt_us', 2.5, 'us')
    strict['references']['default']['gnu']['tcp']['tcp.rtt']['rtt_us'].update(lower=-0.33, upper=0.5)
    rc, cases = run(sandbox, 'tcp_rtt', references=strict)
    assert rc != 0 and cases[0]['fail_phase'] == 'performance' and cases[0]['nr_recorded_only'] == ''


def test_a_second_run_judges_every_figure_and_fails_a_30x_fall(sandbox, tmp_path, monkeypatch):
    """A fresh host: the first run records its baseline (tools/refs record); the second judges every figure, the
    CPU-bound ones too, by their prior bands (the old rule recorded them without a band until the third run), and
    passes. The same second run against a first run that read the round trip 30x shorter fails, naming it."""
    from netregress.judge import baselines
    from netregress.measure import interconnects
    from netregress_postrun import refsbaseline, runsummary, runreport
    state = tmp_path / 'state'
    monkeypatch.setenv('NETREGRESS_STATE', str(state))
    env = {'NETREGRESS_REFERENCES': '', 'NETREGRESS_STATE': str(state)}
    table = interconnects.load()

    rc, cases = run(sandbox, 'tcp_rtt', env=env)
    assert rc == 0 and cases[0]['result'] == 'pass', cases[0]['fail_reason']
    assert 'no baseline' in cases[0]['nr_reference_source']
    first = sandbox['tmp'] / 'first-tcp_rtt.json'
    shutil.copy(sandbox['tmp'] / 'report-tcp_rtt.json', first)
    assert '3 figures added' in refsbaseline.record([first], 'local', table)

    rc, cases = run(sandbox, 'tcp_rtt', env=env)
    assert rc == 0 and cases[0]['result'] == 'pass', cases[0]['fail_reason']
    assert cases[0]['nr_recorded_only'] == ''
    assert set(cases[0]['nr_shared_cpu_band'].split(',')) == {'rtt_us', 'peer_rtt_us', 'ratio_to_peer'}
    counts = runsummary.judged(cases)[('local', 'tcp')]
    assert counts['band'] == 3 and counts['out'] == 0 and counts['recorded'] == 0
    assert runsummary.summarise(runreport.read(sandbox['tmp'] / 'report-tcp_rtt.json'))[1]

    # the first run's round trip 30x shorter than the stand-in's 25 us: the second run's is 30x slower
    base = baselines.Baseline.load('local')
    rtt = base.entries[('default', 'gnu', 'tcp', 'tcp.rtt', 'rtt_us')]
    assert rtt['samples'] == [25.0]
    rtt['samples'] = [25.0 / 30]
    base.save()
    rc, cases = run(sandbox, 'tcp_rtt', env=env)
    assert rc != 0 and cases[0]['fail_phase'] == 'performance' and 'rtt_us=25' in cases[0]['fail_reason']
    text, ok = runsummary.summarise(runreport.read(sandbox['tmp'] / 'report-tcp_rtt.json'))
    assert not ok and 'outside it: 1' in text
