"""Host baselines (netregress.baselines), their bands, and what a run report means (netregress_postrun.runsummary)."""
import pytest
import yaml

from netregress.judge import bandrules, baselines, references
from netregress import measurement, statefiles
from netregress_postrun import refswrite, runsummary

RULES = bandrules.BandRules(window=3, min_runs=2, spread_factor=3.0, floor={'throughput': 0.05, 'latency': 0.10},
                            cap=(-0.33, 0.5))


def m(value, metric='throughput_mbps', unit='Mbit/s', test='tcp.stream.blocking', system='vc'):
    return refswrite.Measurement(system=system, partition='gige', environ='gnu', interconnect='gige', test=test,
                                metric=metric, value=value, unit=unit)


def test_a_figure_seen_once_gets_its_kinds_prior_band():
    # one run measures no spread: the band is the prior of its kind, so a ratio's 2x regression fails from the
    # second run on (the old rule, /4..x4 until min_runs runs, passed it), and a 30x fall of a stream fails
    rules = bandrules.BandRules(window=5, min_runs=3, spread_factor=4.0, floor={'throughput': 0.05, 'ratio': 0.03},
                                cap=(-0.33, 0.5), prior={'throughput': 0.2})
    value, lower, upper, comment = rules.band([950.0], 'throughput')
    assert (value, lower, upper) == (950.0, -0.2, 0.2) and '1 run(s)' in comment and 'prior band 20%' in comment
    # a kind without a prior of its own: the cap
    value, lower, upper, _ = rules.band([1.4], 'ratio')
    assert (lower, upper) == (-0.33, 0.5) and 2 * value > value * (1 + upper)
    stream, stream_lower, _, _ = rules.band([950.0], 'throughput')
    assert stream / 30 < stream * (1 + stream_lower) and stream / 2 < stream * (1 + stream_lower)
    # a figure of 0: only 0 passes, at any run count
    assert bandrules.BandRules.from_table({}).band([0.0], 'ratio')[0] == 0.0


def test_the_prior_narrows_toward_the_figures_own_band_by_run_count():
    rules = bandrules.BandRules(window=5, min_runs=3, spread_factor=4.0, floor={'throughput': 0.05},
                                cap=(-0.33, 0.5), prior={'throughput': 0.4})
    # two runs within 2%: own 4 x 1% -> the floor 5%; weighted by run count (1 for the prior, 1 for its own): 22.5%
    assert rules.band([100.0, 102.0], 'throughput')[1:3] == pytest.approx((-0.225, 0.225))
    # never narrower than its own: two runs 40% apart support 4 x 20% = 80%, which the cap holds at 0.67x..1.5x
    assert rules.band([100.0, 140.0], 'throughput')[1:3] == (-0.33, 0.5)
    # from min_runs runs on, its own alone (the steady state is unchanged)
    assert rules.band([100.0, 102.0, 101.0], 'throughput')[1:3] == pytest.approx((-0.05, 0.05))
    # the rule itself: runs 1, 2, 3 of min_runs 3 between a prior 0.4 and its own 0.1; its own where wider
    assert [rules.narrowed(n, 0.4, 0.1) for n in (1, 2, 3, 4)] == pytest.approx([0.4, 0.25, 0.1, 0.1])
    assert rules.narrowed(2, 0.1, 0.3) == 0.3
    # min_runs 1 still gives one run its prior (one run measures no spread), and 5 weights the prior 4:0 .. 1:3
    assert bandrules.BandRules.from_table({'min_runs': 1}).narrowed(1, 0.5, 0.1) == 0.5
    five = bandrules.BandRules.from_table({'min_runs': 5})
    assert [five.narrowed(n, 0.5, 0.1) for n in (1, 2, 4, 5)] == pytest.approx([0.5, 0.4, 0.2, 0.1])


def test_band_is_the_spread_times_the_factor_above_the_floor():
    value, lower, upper, _ = RULES.band([100.0, 104.0, 98.0], 'throughput')
    assert value == 100.0 and lower == pytest.approx(-0.12) and upper == pytest.approx(0.12)
    assert RULES.band([100.0, 100.5], 'throughput')[1:3] == (-0.05, 0.05)        # floor
    assert RULES.band([100.0, 300.0], 'latency')[1:3] == (-0.33, 0.5)            # never wider than the cap


def test_shared_cpu_band_is_a_factor_from_the_log_spread_between_floor_and_cap():
    rules = bandrules.BandRules.from_table({'shared_cpu': {'spread_factor': 4, 'floor': 4, 'cap': 10}})
    # three runs within 1.1x: the floor, 4x either side
    value, lower, upper, comment = rules.shared_cpu_band([10.0, 11.0, 10.5])
    assert value == 10.5 and (lower, upper) == pytest.approx((1 / 4 - 1, 3.0)) and 'shared CPUs' in comment
    # a 1.5x swing: exp(4 ln 1.5) = 5.06x either side
    assert rules.shared_cpu_band([10.0, 15.0, 15.0])[1:3] == pytest.approx((1 / 5.0625 - 1, 4.0625), rel=1e-3)
    # a 6x swing: never wider than the cap, so a 30x fall always fails
    value, lower, upper, _ = rules.shared_cpu_band([10.0, 60.0, 20.0])
    assert (lower, upper) == pytest.approx((-0.9, 9.0)) and value * (1 + lower) > value / 30
    # a figure that was 0: no factor means anything
    assert rules.shared_cpu_band([0.0, 1.0, 1.0]) is None and rules.shared_cpu_band([0.0]) is None


def test_a_shared_cpu_figure_seen_once_gets_the_prior_and_narrows_in_log_space():
    rules = bandrules.BandRules.from_table({'shared_cpu': {'floor': 4, 'cap': 15, 'prior': 12}})
    # one run: the prior, 12x either side (the old rule recorded it without a band): a 30x fall fails
    value, lower, upper, comment = rules.shared_cpu_band([10.0])
    assert (lower, upper) == pytest.approx((1 / 12 - 1, 11.0)) and 'prior band x12.00' in comment
    assert 10.0 / 30 < value * (1 + lower) and 10.0 * 30 > value * (1 + upper)
    # two runs within 1.1x: own band the floor 4x; the geometric mean of 12x and 4x
    assert rules.shared_cpu_band([10.0, 11.0])[2] == pytest.approx(48 ** 0.5 - 1)
    # never narrower than its own: two runs 2x apart, 1.5x from their median: 1.5 ** 4 = 5.06x, over the prior 4x
    assert bandrules.BandRules.from_table({'shared_cpu': {'prior': 4}}).shared_cpu_band([10.0, 20.0])[2] == \
        pytest.approx(1.5 ** 4 - 1)
    # never wider than the cap, whatever the prior says
    assert bandrules.BandRules.from_table({'shared_cpu': {'prior': 100}}).shared_cpu_band([10.0])[2] == \
        pytest.approx(14.0)
    # three runs: its own alone, as before
    assert rules.shared_cpu_band([10.0, 11.0, 10.5])[1:3] == pytest.approx((1 / 4 - 1, 3.0))


def test_the_shared_cpu_reference_set_judges_what_the_normal_one_cannot(tmp_path):
    rules = bandrules.BandRules.from_table({})
    base = baselines.Baseline('vc', baselines.baseline_path('vc', tmp_path, version='v1'))
    for v in (20.0, 11.0, 16.0):
        base.add([m(v, metric='rtt_us', unit='us', test='mpitest.latency')], rules, 'r.json')
    key = ('gige', 'gnu', 'gige', 'mpitest.latency', 'rtt_us')
    normal, wide = base.reference_set(rules).lookup(*key), base.reference_set(rules, shared_cpu=True).lookup(*key)
    assert (normal.lower, normal.upper) == (-0.33, 0.5)
    factor = (16 / 11) ** 4                         # the largest deviation, 16/11, to the power spread_factor
    assert wide.value == 16.0 and (wide.lower, wide.upper) == pytest.approx((1 / factor - 1, factor - 1))


def test_the_host_swing_widens_a_figure_whose_own_runs_missed_the_deep_swing(tmp_path):
    rules = bandrules.BandRules.from_table({'shared_cpu': {'pool_min': 300}})
    base = baselines.Baseline('vc', baselines.baseline_path('vc', tmp_path, version='v1'))
    # 100 figures of one partition and interconnect, one of them read 8x off in one run: the pool's 99.9th
    # percentile is that 8x, and x1.5 in log space (8 ** 1.5 = 22.6) is above the 15x cap
    for run in range(3):
        base.add([m(10.0 * (8 if (run, i) == (1, 0) else 1), metric=f'rtt_us@{i}', unit='us',
                    test='mpitest.sweep') for i in range(100)], rules, f'r{run}.json')
    # (the 200 steps from one run to the next are too few for a prior band of the pool's own: None)
    assert base.shared_pools(rules) == {('gige', 'gige'): (pytest.approx(8 ** 1.5), None)}
    wide = base.reference_set(rules, shared_cpu=True).lookup('gige', 'gnu', 'gige', 'mpitest.sweep', 'rtt_us@5')
    assert (wide.lower, wide.upper) == pytest.approx((1 / 15 - 1, 14.0))        # its own spread alone: 4x
    assert 'host swing x22.63' in wide.comment
    # the ratios are not pooled (their yardstick divided the host's state out); a pool too small has no say
    assert bandrules.BandRules.from_table({}).host_swing([0.1] * 999) == 1.0
    assert rules.host_swing([0.0] * 300) == 1.0
    with pytest.raises(baselines.BaselineError, match='pool_quantile: 1 is out of range'):
        bandrules.BandRules.from_table({'shared_cpu': {'pool_quantile': 1}})


def test_a_new_figure_on_a_host_with_a_pool_gets_the_pools_prior_not_the_committed_one(tmp_path):
    """Where the host's figures of a partition and interconnect hold enough steps from one run to the next, those
    steps are the prior of a figure seen once there: here every figure moved 1.2x between its two runs, so a new
    one gets the floor (4x), not the committed prior (15x); the other partition keeps the committed prior."""
    rules = bandrules.BandRules.from_table({'shared_cpu': {'pool_min': 300, 'prior': 15}})
    base = baselines.Baseline('vc', baselines.baseline_path('vc', tmp_path, version='v1'))
    for run in range(2):
        base.add([m(10.0 * 1.2 ** run, metric=f'rtt_us@{i}', unit='us', test='mpitest.sweep') for i in range(400)],
                 rules, f'r{run}.json')
    base.add([m(5.0, metric='new_us', unit='us', test='mpitest.sweep'),
              refswrite.Measurement(system='vc', partition='fast', environ='gnu', interconnect='fast',
                                   test='mpitest.sweep', metric='new_us', value=5.0, unit='us')], rules, 'r2.json')
    assert base.shared_pools(rules)[('gige', 'gige')] == pytest.approx((1.1 ** 1.5, 1.2 ** 1.5), rel=1e-3)
    wide = base.reference_set(rules, shared_cpu=True)
    pooled = wide.lookup('gige', 'gnu', 'gige', 'mpitest.sweep', 'new_us')
    assert (pooled.lower, pooled.upper) == pytest.approx((1 / 4 - 1, 3.0)) and 'prior band x1.31' in pooled.comment
    committed = wide.lookup('fast', 'gnu', 'fast', 'mpitest.sweep', 'new_us')
    assert (committed.lower, committed.upper) == pytest.approx((1 / 15 - 1, 14.0))


def test_a_shared_cpu_band_judges_only_the_worse_side_until_the_figures_spread_is_measured(tmp_path, monkeypatch):
    """A first run's sample on shared CPUs can be 20x slow (Open MPI 5's OSU alltoall on shm at 32 KiB read 146.59
    us in a fresh state's first run and 9.16 in its second): until the baseline holds ``min_runs`` runs of a
    figure, the run judges only its worse side, so a second run that reads far better passes and a 30x fall still
    fails; from ``min_runs`` runs on, both sides again."""
    from types import SimpleNamespace
    from netregress.judge import bands
    monkeypatch.setenv('NETREGRESS_STATE', str(tmp_path))
    monkeypatch.setattr(measurement, 'measurement_version', lambda: 'v1')
    check = _FakeCheck()
    check.perf_variables = {'throughput_mbps': SimpleNamespace(unit='Mbit/s'), 'rtt_us': SimpleNamespace(unit='us')}
    check.nr_figures = {'throughput_mbps': {'kind': 'cpu_bound', 'label': 't', 'better': 'higher'},
                        'rtt_us': {'kind': 'latency', 'label': 'r', 'better': 'lower'}}
    check.asserted_absolute = lambda name: False            # a partition whose nodes share the host's CPUs
    rules = bandrules.load()
    base = baselines.Baseline('vc', baselines.baseline_path('vc', tmp_path, version='v1'))
    base.measured_by = 'v1'
    for run in range(rules.min_runs):
        base.add([m(900.0), m(20.0, metric='rtt_us', unit='us')], rules, f'r{run}.json')
        base.save()
        if run == 0:
            assert base.reference_set(rules, shared_cpu=True).lookup(
                'gige', 'gnu', 'gige', 'tcp.stream.blocking', 'rtt_us').prior
        check.nr_reference_source = ''
        bands.apply(check)
        refs = check.reference['vc:gige']
        if run < rules.min_runs - 1:
            assert refs['throughput_mbps'][2] is None and -1 < refs['throughput_mbps'][1] < 0
            assert refs['rtt_us'][1] is None and refs['rtt_us'][2] > 0
            if run == 0:                                    # one run: the prior, 15x on the worse side
                assert (refs['throughput_mbps'][1], refs['rtt_us'][2]) == pytest.approx((1 / 15 - 1, 14.0))
            assert '2 figure(s) on shared CPUs judged on their worse side only' in check.nr_reference_source
        else:
            assert None not in refs['throughput_mbps'][1:3] and None not in refs['rtt_us'][1:3]
            assert 'worse side' not in check.nr_reference_source
    assert not base.reference_set(rules, shared_cpu=True).lookup(
        'gige', 'gnu', 'gige', 'tcp.stream.blocking', 'rtt_us').prior
    # the normal bands (ratios, link-bound streams) stay two-sided from the first run on
    one = baselines.Baseline('vc', baselines.baseline_path('vc', tmp_path / 'other', version='v1'))
    one.add([m(900.0)], rules, 'r.json')
    normal = one.reference_set(rules).lookup('gige', 'gnu', 'gige', 'tcp.stream.blocking', 'throughput_mbps')
    assert not normal.prior and None not in (normal.lower, normal.upper)


def test_a_reference_opens_only_its_better_side_and_a_file_cannot_claim_a_prior(tmp_path):
    ref = references.Reference(value=10.0, lower=-0.5, upper=0.5, unit='us', comment='c', prior=True)
    assert ref.worse_side('lower').as_reframe() == (10.0, None, 0.5, 'us')
    assert ref.worse_side('higher').as_reframe() == (10.0, -0.5, None, 'us')
    with pytest.raises(references.ReferenceError, match="better must be higher or lower, got 'up'"):
        ref.worse_side('up')
    path = tmp_path / 'vc.yaml'
    path.write_text('schema: netregress-references/1\nsystem: vc\nreferences:\n  p:\n    gnu:\n      gige:\n'
                    '        t:\n          rtt_us: {value: 1, lower: -0.5, upper: 0.5, unit: us, comment: c, '
                    'prior: true}\n')
    with pytest.raises(references.ReferenceError, match='prior'):
        references.check_file(path, 'vc')
    # and a file read without that check still judges both sides: only a host baseline names priors
    loaded = references.ReferenceSet(yaml.safe_load(path.read_text()), 'vc', source=str(path))
    assert loaded.lookup('p', 'gnu', 'gige', 't', 'rtt_us').as_judged('lower').as_reframe() == (1.0, -0.5, 0.5, 'us')
    assert ref.as_judged(None) is ref and ref.as_judged('lower') == ref.worse_side('lower')


def test_a_ratio_band_stands_on_the_spread_of_the_same_ratio_of_every_mpi_build(tmp_path):
    rules = bandrules.BandRules.from_table({})
    base = baselines.Baseline('vc', baselines.baseline_path('vc', tmp_path, version='v1'))

    def ratio(env, value, test='mpitest.latency'):
        return refswrite.Measurement(system='vc', partition='fast', environ=env, interconnect='fast', test=test,
                                    metric='ratio_to_yardstick', value=value, unit='ratio')
    # LAM/MPI's three runs within 1%, MPICH's within 10%: LAM's band stands on MPICH's spread (4 x 10%)
    for lam, mpich in ((6.6, 1.5), (6.65, 1.35), (6.6, 1.4)):
        base.add([ratio('lam7', lam), ratio('mpich5', mpich), ratio('lam7', 2.0, test='other')], rules, 'r.json')
    for _, entry in base.entries.items():
        entry['kind'] = 'ratio'
    assert base.sibling_deviations(rules) == {('fast', 'fast', 'mpitest.latency', 'ratio_to_yardstick'):
                                              pytest.approx(0.1 / 1.4)}
    lam = base.reference_set(rules).lookup('fast', 'lam7', 'fast', 'mpitest.latency', 'ratio_to_yardstick')
    assert lam.value == 6.6 and (lam.lower, lam.upper) == pytest.approx((-0.2857, 0.2857), abs=1e-3)
    assert "siblings' on other MPI builds; its own 0.8%" in lam.comment
    # a figure of one build only has no siblings: its own spread and the floor (the default one here)
    other = base.reference_set(rules).lookup('fast', 'lam7', 'fast', 'other', 'ratio_to_yardstick')
    assert (other.lower, other.upper) == (-0.05, 0.05)
    # a 2x regression of the ratio stays outside whatever the siblings say: the band never passes the cap
    assert 2 * lam.value > lam.value * (1 + rules.cap[1])


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



def test_the_end_of_a_failed_run_repeats_each_failed_case_on_one_line():
    """tools/validate prints these last (runsummary failures): a CI log is read from its end."""
    report = {'runs': [{'testcases': [tc('a', 'fail', 'sanity', 'MPI took\nanother path'), tc('b', 'pass'),
                                      tc('c', 'fail', 'performance', 'x' * 600)]},
                       {'testcases': [tc('a', 'pass'), tc('c', 'fail', 'performance', 'slow')]}]}
    lines = runsummary.failure_lines(report)
    assert lines[0].endswith('performance error: slow')
    assert lines[1].endswith('(failed, then passed on a retry): sanity error: MPI took another path')
    assert len(lines) == 2
    assert runsummary.failure_lines({'runs': [{'testcases': [tc('a', 'fail', 'sanity', 'y' * 600)]}]})[0].endswith('...')

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


# -- a new measurement version: a new baseline beside the old one, compared with the old one meanwhile -------------

def _record(base_dir, version, files, values, rules=RULES):
    base = baselines.Baseline.load('vc', base_dir, version=version) or \
        baselines.Baseline('vc', baselines.baseline_path('vc', base_dir, version=version))
    base.measured_by, base.measured_files = version, files
    for v in values:
        base.add([m(v)], rules, f'r{v}.json')
    base.save()
    return base


def test_a_new_version_keeps_the_old_baseline_and_compares_with_it(tmp_path):
    old_files = {'src/k.c': 'aaa', 'reframe_tests/netregress/measure/base.py': 'bbb'}
    new_files = {'src/k.c': 'ccc', 'reframe_tests/netregress/measure/base.py': 'bbb'}
    old = _record(tmp_path, 'v1', old_files, [900.0, 910.0, 920.0, 930.0, 940.0])
    text = old.path.read_text()
    rules = bandrules.BandRules(window=5, min_runs=3, spread_factor=3.0, floor={}, cap=(-0.33, 0.5))
    base, warning = baselines.Baseline.for_run('vc', rules, tmp_path, version='v2', files=new_files)
    assert base.path == old.path and 'earlier measurement version (v1, 5 runs' in warning
    assert 'changed since: src/k.c' in warning.replace('\n', ' ')
    new = _record(tmp_path, 'v2', new_files, [800.0])
    assert new.path != old.path and old.path.read_text() == text               # the old one is never touched
    base, _ = baselines.Baseline.for_run('vc', rules, tmp_path, version='v2', files=new_files)
    assert base.path == old.path                                                # 1 run < min_runs 3
    _record(tmp_path, 'v2', new_files, [805.0, 810.0])
    base, warning = baselines.Baseline.for_run('vc', rules, tmp_path, version='v2', files=new_files)
    assert base.measured_by == 'v2' and warning is None and len(base.runs) == 3
    assert sorted(p.name for p in (tmp_path / 'baselines' / 'vc').glob('*.yaml')) == \
        sorted([old.path.name, new.path.name])


def test_choosing_among_versions_reads_headers_and_only_the_chosen_one_whole(tmp_path, monkeypatch):
    files = {'src/k.c': 'aaa'}
    old = _record(tmp_path, 'v1', files, [900.0, 910.0, 920.0])
    _record(tmp_path, 'v0', files, [700.0, 710.0, 720.0])
    head = baselines.Baseline.read('vc', old.path, header_only=True)
    assert (head.complete, head.has_figures, head.measured_by, len(head.runs), head.entries) == \
        (False, True, 'v1', 3, {})
    for use in (head.to_dict, lambda: head.add([m(1.0)], RULES, 'r.json'), lambda: head.reference_set(RULES)):
        with pytest.raises(baselines.BaselineError, match='read for its header only'):
            use()
    whole = []
    real_read = baselines.Baseline.read.__func__
    monkeypatch.setattr(baselines.Baseline, 'read', classmethod(
        lambda cls, system, path, header_only=False: (whole.append(path.name) if not header_only else None)
        or real_read(cls, system, path, header_only)))
    base, warning = baselines.Baseline.for_run('vc', RULES, tmp_path, version='v2', files=files)
    assert base.complete and base.measured_by == 'v1' and len(base.entries) == 1 and 'v1, 3 runs' in warning
    assert whole == [old.path.name]                  # v0's figures were never parsed


@pytest.mark.parametrize('tail, complete, has_figures', [
    ('metrics: {}\n', False, False),
    ('metrics:\n  gige: {gnu: {gige: {t: {bw: {unit: x, samples: [1.0]}}}}}\n', False, True),
    ('metrics: {}\nnote: a key after the figures\n', True, False)])      # laid out otherwise: read whole
def test_a_header_read_knows_whether_figures_follow(tmp_path, tail, complete, has_figures):
    path = tmp_path / 'b.yaml'
    path.write_text(statefiles.sealed(f'schema: {baselines.SCHEMA}\nmeasured_by: v1\nruns:\n- recorded_utc: x\n'
                                      f'{tail}'))
    head = baselines.Baseline.read('vc', path, header_only=True)
    assert (head.complete, head.has_figures, len(head.runs)) == (complete, has_figures, 1)


def test_a_baseline_of_the_earlier_layout_is_read_and_kept(tmp_path):
    legacy = baselines.legacy_path('vc', tmp_path)
    b = baselines.Baseline('vc', legacy)
    b.measured_by = 'old'
    for v in (900.0, 905.0, 910.0):
        b.add([m(v)], RULES, 'r.json')
    b.save()
    base, warning = baselines.Baseline.for_run('vc', RULES, tmp_path, version='new', files={})
    assert base.path == legacy and 'predates the per-file record' in warning
    assert baselines.Baseline.load('vc', tmp_path, version='old').path == legacy


# -- bad input: one line naming file and entry, nothing written ------------------------------------------------------

@pytest.mark.parametrize('samples, message', [
    ('[abc]', "'abc' is not a number"), ('[.nan]', 'NaN is not a figure'), ('[.inf]', 'inf is not a finite'),
    ('[-5.0]', '-5 is negative'), ('[]', 'no samples'), ('[true]', 'True is not a number')])
def test_a_bad_sample_in_a_baseline_file_is_one_line(tmp_path, samples, message):
    path = baselines.baseline_path('vc', tmp_path, version='v1')
    path.parent.mkdir(parents=True)
    path.write_text(statefiles.sealed(f'schema: {baselines.SCHEMA}\nmeasured_by: v1\nmetrics: {{gige: {{gnu: '
                                      f'{{gige: {{t: {{bw: {{unit: x, samples: {samples}}}}}}}}}}}}}\n'))
    with pytest.raises(baselines.BaselineError) as err:
        baselines.Baseline.load('vc', tmp_path, version='v1')
    assert message in str(err.value) and str(path) in str(err.value) and 'gige/gnu/gige/t/bw' in str(err.value)
    assert '\n' not in str(err.value)


@pytest.mark.parametrize('text, message', [
    ('', 'empty baseline'), ('[1, 2]', 'top level is list'),
    ('schema: netregress-baseline/1\nmetrics: {a: 1}', 'a: expected a mapping'),
    ('{unclosed', 'not valid YAML'), ('runs: 5\nschema: netregress-baseline/1', 'runs: expected a list')])
def test_a_malformed_baseline_file_is_one_line(tmp_path, text, message):
    path = baselines.baseline_path('vc', tmp_path, version='v1')
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(baselines.BaselineError, match=message):
        baselines.Baseline.load('vc', tmp_path, version='v1')


@pytest.mark.parametrize('block, message', [
    ({'window': -1}, r'window: -1 is out of range \[1, 1000\]'), ({'window': 2.5}, 'window: expected a whole'),
    ({'min_runs': 0}, 'min_runs: 0 is out of range'), ({'spread_factor': float('nan')}, 'spread_factor: nan'),
    ({'spread_factor': 0}, 'spread_factor: 0 is out of range'), ({'floor': {'latency': 1.5}}, 'floor.latency'),
    ({'cap': [-1.5, 0.5]}, r'cap\[0\]: -1.5'), ({'cap': [0.1, 0.5]}, r'cap\[0\]: 0.1'),
    ({'cap': [-0.3, float('inf')]}, r'cap\[1\]: inf'), ({'cap': 3}, 'cap: expected'), ('x', 'expected a mapping'),
    ({'shared_cpu': {'floor': 0.5}}, r'shared_cpu.floor: 0.5 is out of range \[1, 1000\]'),
    ({'shared_cpu': {'floor': 5, 'cap': 4}}, r'shared_cpu.cap: 4 is out of range \[5, 1000\]'),
    ({'shared_cpu': {'spread_factor': 0}}, 'shared_cpu.spread_factor: 0'), ({'shared_cpu': 3}, 'shared_cpu: expected')])
def test_band_rules_out_of_range_are_refused(block, message):
    with pytest.raises(baselines.BaselineError, match=message):
        bandrules.BandRules.from_table(block)


def test_a_nan_or_negative_figure_never_enters_a_baseline(tmp_path):
    base = baselines.Baseline('vc', baselines.baseline_path('vc', tmp_path, version='v1'))
    for bad in (float('nan'), float('inf'), -1.0):
        with pytest.raises(baselines.BaselineError, match=r'r.json: gige/gnu/gige/tcp.stream.blocking/'):
            base.add([m(900.0), m(bad)], RULES, 'r.json')
    assert base.entries == {} and base.runs == []


def test_names_that_would_leave_the_state_directory_are_refused(tmp_path):
    for system in ('../escaped', 'a/b', '..', ''):
        with pytest.raises(baselines.BaselineError, match='letters, digits'):
            baselines.baseline_path(system, tmp_path, host='h', version='v')


def test_the_state_directory_is_made_private_and_checked(tmp_path, monkeypatch):
    monkeypatch.setenv('NETREGRESS_STATE', str(tmp_path / 'state'))
    assert oct(baselines.state_dir().stat().st_mode & 0o777) == '0o700'
    (tmp_path / 'state').chmod(0o777)
    with pytest.raises(baselines.BaselineError, match='writable by group or others'):
        baselines.state_dir()


def test_save_refuses_a_symlinked_baseline(tmp_path):
    base = baselines.Baseline('vc', baselines.baseline_path('vc', tmp_path, version='v1'))
    base.path.parent.mkdir(parents=True, mode=0o700)
    (tmp_path / 'baselines').chmod(0o700)
    base.path.symlink_to('/dev/full')
    base.add([m(900.0)], RULES, 'r.json')
    with pytest.raises(baselines.BaselineError, match='symbolic link'):
        base.save()
    with pytest.raises(baselines.BaselineError, match='symbolic link'):
        baselines.Baseline.load('vc', tmp_path, version='v1')


def test_a_run_compares_with_the_earlier_version_and_says_so(tmp_path, monkeypatch):
    """What the checks use (netregress.judge.bands): the older baseline's bands, the warning in nr_reference_source."""
    from netregress.judge import bands
    monkeypatch.setenv('NETREGRESS_STATE', str(tmp_path))
    files = {'src/k.c': 'aaa'}
    monkeypatch.setattr(measurement, 'measured_files', lambda root=None: dict(files))
    _record(tmp_path, measurement.version_of(files), dict(files), [900.0, 910.0, 920.0])
    refset, _, source = bands.reference_source('vc', {'references': 'host'})
    assert 'WARNING' not in source
    files['src/k.c'] = 'bbb'
    refset, _, source = bands.reference_source('vc', {'references': 'host'})
    assert 'WARNING: comparing with the baseline of an earlier measurement version' in source
    assert 'changed since: src/k.c' in source
    assert refset.lookup('gige', 'gnu', 'gige', 'tcp.stream.blocking', 'throughput_mbps').value == 910.0


def test_the_summary_counts_judged_and_recorded_figures_per_system_and_interconnect():
    def case(system, ic, shared, **perf):
        return {'name': f'c_{ic}', 'unique_name': f'c_{ic}', 'system': system, 'partition': 'p', 'environ': 'e',
                'result': 'pass', 'interconnect': ic, 'nr_shared_cpu_band': shared,
                'perfvalues': {f'{system}:p:{k}': v for k, v in perf.items()}}
    cases = [case('vc', 'fast', 'rtt_us', rtt_us=[30.0, 20.0, -0.9, 9.0, 'us', 'pass'],
                  ratio=[1.0, 1.0, -0.03, 0.05, 'ratio', 'fail']),
             case('local', 'shm', '', bw=[5.0, 0, None, None, 'MB/s', 'pass'])]
    table = runsummary.judged(cases)
    assert table[('vc', 'fast')] == {'band': 2, 'shared_cpu': 1, 'out': 1}
    assert table[('local', 'shm')] == {'recorded': 1}
    text = '\n'.join(runsummary.judged_lines(cases))
    assert 'figures asserted against a band: 2 of 3, outside it: 1 (500.0 per 1,000); of them 1 by the wide band' \
        in text and 'recorded without a band: 1' in text
    assert 'vc:fast' in text and 'local:shm' in text
    # the first attempts are what a run with retries off would have ended with: the retried case's first attempt
    # had both figures outside
    first = [dict(cases[0], perfvalues={'vc:p:rtt_us': [300.0, 20.0, -0.9, 9.0, 'us', 'fail'],
                                        'vc:p:ratio': [2.0, 1.0, -0.03, 0.05, 'ratio', 'fail']}), cases[1]]
    assert 'outside it: 1 (500.0 per 1,000), on the first attempts (retries off) 2;' in \
        '\n'.join(runsummary.judged_lines(cases, first))


class _FakeCheck:
    """What netregress.judge.bands.apply reads of a check (its class is defined in this file, its 'own file')."""
    def __init__(self):
        from types import SimpleNamespace
        self.current_system = SimpleNamespace(name='vc')
        self.current_partition = SimpleNamespace(name='gige', extras={'references': 'host'})
        self.current_environ = SimpleNamespace(name='gnu')
        self.interconnect, self.ref_test, self.unique_name = 'gige', 'tcp.stream.blocking', 'fake'
        self.perf_variables = {'throughput_mbps': SimpleNamespace(unit='Mbit/s')}
        self.fixed_references = {}

    def recorded_only(self):
        return set()

    def asserted_absolute(self, name):
        return True

    def is_dry_run(self):
        return False


def test_a_dry_run_is_not_judged(tmp_path, monkeypatch):
    """ReFrame's --dry-run runs the performance stage's hooks with nothing measured: no reference is looked up (a
    missing one failed every case of tools/validate --dry-run on a site without references yet)."""
    from netregress.judge import bands
    monkeypatch.setenv('NETREGRESS_STATE', str(tmp_path / 'state'))
    check = _FakeCheck()
    check.current_partition.extras = {}                 # a site's system: committed references, none written yet
    check.is_dry_run = lambda: True
    bands.apply(check)
    assert check.missing_references == [] and not hasattr(check, 'reference')
    check.is_dry_run = lambda: False
    bands.apply(check)
    assert check.missing_references, 'a real run without references fails'


def test_a_changed_check_is_judged_by_this_versions_baseline_not_the_earlier_one(tmp_path, monkeypatch):
    """OSU's options changed (osu_latency -u 0 on a network): its gige round trips of 128 KiB-1 MiB read 12-14x
    below the earlier version's baseline. An earlier version's figures of a check measured otherwise now are not
    its figures: they are recorded in the new version's first run and judged against its baseline from then on;
    the other checks are still judged against the earlier one, with the warning."""
    from netregress.judge import bands
    monkeypatch.setenv('NETREGRESS_STATE', str(tmp_path))
    own = 'tests/python/test_baselines.py'
    files = {'src/k.c': 'aaa', own: 'aaa'}
    monkeypatch.setattr(measurement, 'measured_files', lambda root=None: dict(files))
    _record(tmp_path, measurement.version_of(files), dict(files), [900.0, 910.0, 920.0])
    files['src/k.c'] = 'bbb'                                      # another file changed: judged, with the warning
    check = _FakeCheck()
    bands.apply(check)
    assert check.reference['vc:gige']['throughput_mbps'][0] == 910.0 and 'WARNING' in check.nr_reference_source
    files[own] = 'bbb'                                            # its own file changed too: recorded only
    check = _FakeCheck()
    bands.apply(check)
    assert check.reference['vc:gige']['throughput_mbps'] == (0, None, None, 'Mbit/s')
    assert check.nr_recorded_only == 'throughput_mbps' and f'{own} changed since it' in check.nr_reference_source
    # once this version's baseline holds a run, they are judged against it (its prior band), not recorded
    _record(tmp_path, measurement.version_of(files), dict(files), [300.0], rules=bandrules.load())
    check = _FakeCheck()
    bands.apply(check)
    value, lower, upper, _ = check.reference['vc:gige']['throughput_mbps']
    assert value == 300.0 and upper <= bandrules.load().cap[1] and 300.0 / 2 < value * (1 + lower)
    assert check.nr_recorded_only == '' and "judged against this version's own baseline (1 run(s))" in \
        check.nr_reference_source and 'WARNING' in check.nr_reference_source


def _local_report(values: dict) -> dict:
    """A run report of `local` with one case per figure: {(environ, interconnect, metric, kind): value}."""
    cases = []
    for i, ((env, ic, metric, kind), value) in enumerate(values.items()):
        unit = {'latency': 'us', 'ratio': 'ratio'}.get(kind, 'Mbit/s')
        cases.append({'result': 'pass', 'fixture': False, 'environ': env, 'interconnect': ic, 'ref_test': 'mpitest',
                      'unique_name': f'c{i}', 'system': 'local', 'partition': 'default',
                      'nr_figures': {metric: {'kind': kind, 'label': metric,
                                              'better': 'lower' if kind == 'latency' else 'higher'}},
                      'perfvalues': {f'local:default:{metric}': [value, 0, None, None, unit, 'pass']}})
    return {'runs': [{'testcases': cases}]}


def test_a_second_run_judges_every_figure_a_30x_or_2x_fall_fails_and_a_clean_run_passes(tmp_path, monkeypatch,
                                                                                       table):
    """The baseline of a fresh host after its first run, replayed as the run judges (tools/refs show --report):
    every figure of the second run has a band; a clean second run whose CPU-bound figures swung up to 6x either way
    and whose round-trip ratios moved 1.3x is inside them; one figure 30x down, or one MPI build's round-trip ratio
    doubled, is outside, named."""
    import json
    from netregress_postrun import refsbaseline
    monkeypatch.setenv('NETREGRESS_STATE', str(tmp_path / 'state'))
    envs = ('openmpi5', 'mpich5', 'intelmpi')
    first = {**{(env, ic, f'throughput_mbps@{2 ** e}', 'cpu_bound'): 10.0 * 2 ** e
                for env in envs for ic in ('shm', 'tcp') for e in range(20)},
             **{(env, 'tcp', 'ratio_to_yardstick', 'ratio'): r for env, r in zip(envs, (1.4, 1.6, 1.2))}}
    path = tmp_path / 'first.json'
    path.write_text(json.dumps(_local_report(first)))
    assert '123 figures added' in refsbaseline.record([path], 'local', table)

    def judged(second: dict) -> str:
        path = tmp_path / 'second.json'
        path.write_text(json.dumps(_local_report(second)))
        return refsbaseline.show('local', table, path)

    swing = (6.0, 1 / 6, 2.0, 0.5, 1.0)
    clean = {key: v * (swing[i % 5] if key[3] == 'cpu_bound' else (1.3, 1 / 1.3, 1.0)[i % 3])
             for i, (key, v) in enumerate(first.items())}
    text = judged(clean)
    assert 'second.json: 0 of 123 figures outside' in text and '(0 without one)' in text
    assert '123 with a band (123 of them by a prior band' in text
    point = ('mpich5', 'shm', 'throughput_mbps@1024', 'cpu_bound')
    text = judged({**clean, point: first[point] / 30})
    assert '1 of 123 figures outside' in text and 'OUT default/mpich5/shm/mpitest/throughput_mbps@1024: 341.3' in text
    # the run itself failed on that figure: it is still judged (a failed run is what show --report is asked about)
    report = _local_report({**clean, point: first[point] / 30})
    for tc in report['runs'][0]['testcases']:
        if 'throughput_mbps@1024' in tc['nr_figures'] and tc['environ'] == 'mpich5' and 'shm' == tc['interconnect']:
            tc['result'], tc['fail_phase'] = 'fail', 'performance'
    (tmp_path / 'failed.json').write_text(json.dumps(report))
    assert '1 of 123 figures outside' in refsbaseline.show('local', table, tmp_path / 'failed.json')
    # a first run's slow sample (the host's moment) reads 40x better in the second run: judged on its worse side
    # only, it passes; a ratio has its normal band, both sides
    assert '0 of 123 figures outside' in judged({**clean, point: first[point] * 40})
    text = judged({**clean, ('mpich5', 'tcp', 'ratio_to_yardstick', 'ratio'): 0.7})
    assert '1 of 123 figures outside' in text and 'ratio_to_yardstick: 0.7' in text
    text = judged({**clean, ('mpich5', 'tcp', 'ratio_to_yardstick', 'ratio'): 3.2})
    assert '1 of 123 figures outside' in text and 'OUT default/mpich5/tcp/mpitest/ratio_to_yardstick: 3.2' in text


def test_a_host_baseline_system_is_judged_by_its_committed_file_first(tmp_path, monkeypatch):
    """A figure the system's committed file holds (a link-bound stream on a shaped link) is judged by it from the
    first run on a fresh machine, before any baseline; one it does not hold is recorded (no baseline yet); a
    band the check fixed itself wins over both."""
    from types import SimpleNamespace
    from netregress.judge import bands
    monkeypatch.setenv('NETREGRESS_STATE', str(tmp_path / 'state'))
    monkeypatch.setenv('NETREGRESS_REFERENCES', str(tmp_path / 'refs'))
    (tmp_path / 'refs').mkdir()
    (tmp_path / 'refs' / 'vc.yaml').write_text(
        'schema: netregress-references/1\nsystem: vc\nreferences:\n  gige:\n    gnu:\n      gige:\n'
        '        tcp.stream.blocking:\n          throughput_mbps: {value: 956.5, lower: -0.05, upper: 0.05, '
        'unit: Mbit/s, comment: shaped}\n          fraction_of_link: {value: 0.5, lower: -0.5, upper: 0.5, '
        'unit: ratio, comment: not used}\n')
    check = _FakeCheck()
    check.perf_variables = {name: SimpleNamespace(unit=unit) for name, unit in
                            (('throughput_mbps', 'Mbit/s'), ('rtt_us', 'us'), ('fraction_of_link', 'ratio'))}
    check.fixed_references = {'fraction_of_link': (1.0, -0.05, None)}
    bands.apply(check)
    refs = check.reference['vc:gige']
    assert refs['throughput_mbps'] == (956.5, -0.05, 0.05, 'Mbit/s')
    assert refs['rtt_us'] == (0, None, None, 'us')                       # no baseline yet: recorded
    assert refs['fraction_of_link'] == (1.0, -0.05, None, 'ratio')
    assert f'throughput_mbps against committed {tmp_path / "refs" / "vc.yaml"}' in check.nr_reference_source


def test_the_checkouts_committed_file_holds_only_machine_independent_figures(repo_root, table):
    """reference_values/vcluster.yaml: link-bound streams on the shaped gige only (what refs write
    --machine-independent takes), each with the interconnect's throughput band."""
    import yaml
    data = yaml.safe_load((repo_root / 'reference_values' / 'vcluster.yaml').read_text())
    entries = [(part, env, ic, test, metric, e) for part, envs in data['references'].items()
               for env, ics in envs.items() for ic, tests in ics.items() for test, metrics in tests.items()
               for metric, e in metrics.items()]
    assert len(entries) >= 15
    lower, upper, _ = table.tolerance('gige', 'throughput')
    for part, env, ic, test, metric, e in entries:
        assert table.interconnect(ic).rate_mbps and metric.endswith('_mbps'), (part, env, ic, test, metric)
        assert (e['lower'], e['upper']) == (lower, upper) and 900 < e['value'] < table.interconnect(ic).rate_mbps
