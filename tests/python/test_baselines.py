"""Host baselines (netregress.baselines), their bands, and what a run report means (netregress_postrun.runsummary)."""
import pytest

from netregress import baselines, references
from netregress_postrun import refstool, runsummary

RULES = baselines.BandRules(window=3, min_runs=2, spread_factor=3.0, floor={'throughput': 0.05, 'latency': 0.10},
                            cap=(-0.33, 0.5))


def m(value, metric='throughput_mbps', unit='Mbit/s', test='tcp.stream.blocking', system='vc'):
    return refstool.Measurement(system=system, partition='gige', environ='gnu', interconnect='gige', test=test,
                                metric=metric, value=value, unit=unit)


def test_one_run_gets_the_cap_band():
    value, lower, upper, comment = RULES.band([950.0], 'throughput')
    assert (value, lower, upper) == (950.0, -0.33, 0.5) and '1 run(s)' in comment
    rules3 = baselines.BandRules(window=5, min_runs=3, spread_factor=4.0, floor={'throughput': 0.01}, cap=(-0.33, 0.5))
    assert rules3.band([950.0, 960.0], 'throughput')[1:3] == (-0.33, 0.5)
    assert rules3.band([950.0, 960.0, 955.0], 'throughput')[1:3] == pytest.approx((-0.0209, 0.0209), abs=1e-3)


def test_band_is_the_spread_times_the_factor_above_the_floor():
    value, lower, upper, _ = RULES.band([100.0, 104.0, 98.0], 'throughput')
    assert value == 100.0 and lower == pytest.approx(-0.12) and upper == pytest.approx(0.12)
    assert RULES.band([100.0, 100.5], 'throughput')[1:3] == (-0.05, 0.05)        # floor
    assert RULES.band([100.0, 300.0], 'latency')[1:3] == (-0.33, 0.5)            # never wider than the cap


def test_baseline_round_trip_window_and_lookup(tmp_path, monkeypatch):
    monkeypatch.setenv('NETREGRESS_STATE', str(tmp_path))
    base = baselines.Baseline('vc', baselines.baseline_path('vc'))
    base.measured_by = 'k1'
    for v in (900.0, 940.0, 950.0, 960.0):
        base.add([m(v), m(12.0 + v / 1000, metric='rtt_us', unit='us', test='tcp.rtt'), m(1.0, system='other')],
                 RULES, 'r.json')
    base.save()
    again = baselines.Baseline.load('vc')
    assert again.entries[('gige', 'gnu', 'gige', 'tcp.stream.blocking', 'throughput_mbps')]['samples'] == \
        [940.0, 950.0, 960.0]
    assert len(again.runs) == 4 and again.host_id == baselines.host_id()
    ref = again.reference_set(RULES).lookup('gige', 'gnu', 'gige', 'tcp.stream.blocking', 'throughput_mbps')
    assert ref.value == 950.0 and ref.lower == -0.05 and 'host baseline' in ref.comment
    with pytest.raises(references.MissingReferenceError):
        again.reference_set(RULES).lookup('gige', 'gnu', 'gige', 'tcp.stream.blocking', 'other_metric')
    assert again.stale_reason('k1') is None and 'another version' in again.stale_reason('k2')


def test_fingerprint_is_stable_and_names_no_host():
    facts = baselines.host_facts()
    assert baselines.host_id(facts) == baselines.host_id() and 'hostname' not in facts
    assert {'cpu_model', 'cores', 'mem_gib', 'kernel', 'virtualisation'} <= set(facts)


def tc(name, result, phase=None, reason=None):
    return {'display_name': name, 'unique_name': name, 'system': 'vc', 'partition': 'gige', 'environ': 'gnu',
            'result': result, 'fail_phase': phase, 'fail_reason': reason, 'time_total': 1.0}


def test_a_retry_never_hides_a_sanity_failure():
    report = {'runs': [{'testcases': [tc('a', 'fail', 'sanity', 'MPI took another path'), tc('b', 'pass')]},
                       {'testcases': [tc('a', 'pass')]}]}
    text, ok = runsummary.summarise(report)
    assert not ok and 'MPI took another path' in text and 'never excuses' in text


def test_a_retried_performance_measurement_may_pass():
    report = {'runs': [{'testcases': [tc('a', 'fail', 'performance', 'x')]}, {'testcases': [tc('a', 'pass')]}]}
    text, ok = runsummary.summarise(report)
    assert ok and 'passed on a retry of the performance measurement (1' in text


def test_multi_line_reasons_are_never_empty_and_skips_are_grouped():
    report = {'runs': [{'testcases': [
        tc('a', 'fail', 'performance', '\n      failed to meet reference(s): \n        rtt_us=9 us'),
        tc('b', 'fail', 'performance', None),
        tc('c', 'skip', 'setup', 'no Spack'), tc('d', 'skip', 'setup', 'no Spack')]}]}
    text, ok = runsummary.summarise(report)
    assert not ok
    assert 'performance error: failed to meet reference(s): rtt_us=9 us' in text
    assert 'performance error: no reason recorded by ReFrame' in text
    assert '2 x no Spack' in text


def test_skip_reasons_come_from_the_console_log():
    log = ('[ \x1b[33m    SKIP\x1b[0m ] ( 91/495) OsuSpackBuild ~vcluster:fast+openmpi4 /a6627e78 '
           '@vcluster:fast+openmpi4 [spack is not on PATH: OSU/NAS are built through Spack (docs/spack.md)]\n')
    skips = runsummary.skip_reasons(log)
    assert skips == {'OsuSpackBuild ~vcluster:fast+openmpi4 @vcluster:fast+openmpi4':
                     'spack is not on PATH: OSU/NAS are built through Spack (docs/spack.md)'}
    case = {'display_name': 'OsuSpackBuild ~vcluster:fast+openmpi4', 'system': 'vcluster', 'partition': 'fast',
            'environ': 'openmpi4', 'result': 'skip'}
    text, ok = runsummary.summarise({'runs': [{'testcases': [case]}]}, skips=skips)
    assert ok and '1 x spack is not on PATH' in text


def test_a_case_without_a_job_is_not_timed_by_its_dependents():
    where = {'system': 'vc', 'partition': 'fast', 'environ': 'gnu', 'result': 'pass'}
    fixture = {'display_name': 'MpiKernelBuild', 'jobid': None, 'time_setup': 0.02, 'time_run': 860.0, **where}
    check = {'display_name': 'mpi_latency', 'jobid': '42', 'time_setup': 0.1, 'time_run': 12.0, **where}
    assert runsummary.case_seconds(fixture) == pytest.approx(0.02)
    text, _ = runsummary.summarise({'runs': [{'testcases': [fixture, check]}]})
    assert '12 s in test cases' in text and 'mpi_latency' in text.splitlines()[1]


def test_a_case_skipped_for_a_skipped_fixture_counts_under_the_fixture_reason():
    log = ('[ SKIP ] (91/495) NpbSpackBuild ~vcluster:fast+openmpi4 /a6627e78 @vcluster:fast+openmpi4 [no Spack here]\n'
           '[ SKIP ] (92/495) nas %case=is-np2 /ddffb51a @vcluster:fast+openmpi4 [skipped due to skipped dependencies]\n'
           '[ SKIP ] (93/495) nas %case=ep-np2 /ddffb51b @vcluster:fast+openmpi4 [skipped due to skipped dependencies]\n')
    where = {'system': 'vcluster', 'partition': 'fast', 'environ': 'openmpi4', 'result': 'skip'}
    fixture = {'display_name': 'NpbSpackBuild ~vcluster:fast+openmpi4', 'unique_name': 'NpbSpackBuild_53daa780',
               **where}
    dep = [['NpbSpackBuild_53daa780', 'vcluster:fast', 'openmpi4']]
    cases = [fixture, {'display_name': 'nas %case=is-np2', 'dependencies_actual': dep, **where},
             {'display_name': 'nas %case=ep-np2', 'dependencies_actual': dep, **where},
             {'display_name': 'orphan', 'dependencies_actual': [['Gone_1', 'vcluster:fast', 'openmpi4']],
              'fail_reason': 'skipped due to skipped dependencies', **where}]
    text, ok = runsummary.summarise({'runs': [{'testcases': cases}]}, skips=runsummary.skip_reasons(log))
    assert ok and '3 x no Spack here' in text
    assert '1 x skipped due to skipped dependencies' in text      # a dependency not in the report: ReFrame's words


def test_what_measures_makes_a_baseline_stale_and_what_reads_does_not(tmp_path):
    (tmp_path / 'src').mkdir()
    (tmp_path / 'src' / 'k.c').write_text('int main(void) { return 0; }\n')
    lib = tmp_path / 'reframe_tests' / 'netregress'
    lib.mkdir(parents=True)
    (lib / 'base.py').write_text('PIN = "taskset -c 0"\n')
    post = tmp_path / 'reframe_tests' / 'netregress_postrun'
    post.mkdir()
    (post / 'report.py').write_text('TITLE = "a"\n')
    (tmp_path / 'config').mkdir()
    (tmp_path / 'config' / 'settings.py').write_text('site_configuration = {}\n')
    table = tmp_path / 'config' / 'interconnects.yaml'
    table.write_text('baselines: {spread_factor: 4}\ninterconnects: {shm: {nodes: 1}}\n')
    first = baselines.measurement_version(tmp_path)
    (post / 'report.py').write_text('TITLE = "b"\n')
    table.write_text('baselines: {spread_factor: 3}\ninterconnects: {shm: {nodes: 1}}\n')
    assert baselines.measurement_version(tmp_path) == first         # reading and judging figures
    (lib / 'base.py').write_text('PIN = ""\n')
    second = baselines.measurement_version(tmp_path)
    assert second != first                                           # how the checks launch the kernels
    table.write_text('baselines: {spread_factor: 3}\ninterconnects: {shm: {nodes: 2}}\n')
    assert baselines.measurement_version(tmp_path) not in (first, second)
