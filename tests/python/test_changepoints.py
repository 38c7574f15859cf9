"""Change points in a figure's run history (netregress_postrun.changepoints) and the report's persistent shifts.

Every series here comes from a fixed seed; the rates printed (pytest -s) are the measured ones docs/history.md quotes.
"""
import csv
import datetime
import math
import random

import pytest

from netregress_postrun import changepoints, report
from reports_fixture import LAT, T0, case
from reports_fixture import report as write_run_report

pytestmark = pytest.mark.usefixtures('vcluster_site')


def noisy(levels, noise, seed):
    """``levels`` (one per run) times 1 + N(0, noise)."""
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, noise)) for level in levels]


def indices(values, **kw):
    return [cp.index for cp in changepoints.change_points(values, **kw)]


def test_flat_noisy_series_rarely_raise_a_change():
    runs, trials = 16, 200
    false = sum(bool(changepoints.change_points(noisy([100.0] * runs, 0.05, seed))) for seed in range(trials))
    print(f'flat series ({runs} runs, 5% noise): {false} of {trials} with a change point ({100 * false / trials:.1f}%)')
    assert false <= 4                     # alpha 0.01 and the 5% median step: about 1 in 100 expected


def test_a_step_of_ten_percent_is_found_where_it_is():
    step = [100.0] * 8 + [110.0] * 8
    (cp,) = changepoints.change_points(noisy(step, 0.03, seed=1), better='higher')
    assert (cp.index, cp.runs_before, cp.runs_after, cp.direction) == (8, 8, 8, 'better')
    assert cp.shift_pct == pytest.approx(10, abs=3) and cp.p_value < changepoints.ALPHA
    exact = sum(indices(noisy(step, 0.03, seed)) == [8] for seed in range(100))
    print(f'10% step after 8 of 16 runs, 3% noise: found at run 8 in {exact} of 100 series')
    assert exact >= 80


def test_a_step_on_a_latency_is_worse_and_times_name_its_first_run():
    times = [datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(days=d)
             for d in range(16)]
    (cp,) = changepoints.change_points(noisy([10.0] * 8 + [11.0] * 8, 0.03, seed=1), times, better='lower')
    assert cp.direction == 'worse' and cp.time == times[8]
    assert changepoints.change_points(noisy([10.0] * 8 + [11.0] * 8, 0.03, seed=1))[0].direction == ''


def test_a_slow_drift_shows():
    drift = [100.0 * (1 + 0.01 * run) for run in range(20)]          # 1% a run, no single step above 1%
    found = changepoints.change_points(noisy(drift, 0.01, seed=2), better='lower')
    assert found and all(cp.direction == 'worse' and cp.shift_pct >= changepoints.MIN_SHIFT_PCT for cp in found)
    shown = sum(bool(changepoints.change_points(noisy(drift, 0.01, seed))) for seed in range(100))
    print(f'drift of 1% a run over 20 runs, 1% noise: a change point in {shown} of 100 series')
    assert shown >= 95


def test_a_single_outlier_run_is_no_change():
    for seed in range(20):
        values = noisy([100.0] * 16, 0.02, seed)
        values[seed % 16] *= 1.8
        assert changepoints.change_points(values) == [], seed


def test_two_steps_are_both_found():
    levels = [100.0] * 10 + [110.0] * 10 + [121.0] * 10
    assert indices(noisy(levels, 0.03, seed=3)) == [10, 20]
    both = sum(len(found := indices(noisy(levels, 0.03, seed))) == 2
               and all(abs(i - want) <= 1 for i, want in zip(found, (10, 20))) for seed in range(100))
    print(f'two 10% steps (after 10 and 20 of 30 runs, 3% noise): both found within a run in {both} of 100 series')
    assert both >= 80


def test_a_regression_undone_does_not_hide_a_later_shift():
    # up 10% for 10 runs, back, then down 10%: whether or not the old bump is listed, the last step is
    levels = [100.0] * 10 + [110.0] * 10 + [100.0] * 10 + [90.0] * 10
    last = changepoints.change_points(noisy(levels, 0.02, seed=4), better='higher')[-1]
    assert (last.index, last.direction, last.runs_after) == (30, 'worse', 10)
    assert last.shift_pct == pytest.approx(-10, abs=2)
    found = sum(abs(changepoints.change_points(noisy(levels, 0.02, seed))[-1].index - 30) <= 1 for seed in range(50))
    print(f'10% bump for 10 runs, then a 10% step down 10 runs later: the step found within a run in {found} of 50')
    assert found >= 40


def test_short_series_give_none():
    for runs in range(2 * changepoints.MIN_SEGMENT):
        assert changepoints.change_points([100.0] * (runs // 2) + [200.0] * (runs - runs // 2)) == []


def test_nan_inf_and_none_are_skipped():
    clean = noisy([100.0] * 8 + [110.0] * 8, 0.03, seed=1)
    dirty = clean[:3] + [math.nan, None, math.inf] + clean[3:] + [-math.inf]
    (cp,) = changepoints.change_points(dirty)
    assert cp.index == 11 and dirty[cp.index] == clean[8]          # an index of the input, not of the clean run
    assert changepoints.change_points([math.nan] * 10 + [None] * 3) == []
    assert changepoints.change_points([5.0] * 12) == []            # constant: ranks all tie
    assert changepoints.change_points([0.0] * 6 + [3.0] * 6)[0].shift_pct == math.inf


# -- through the report ---------------------------------------------------------------------------------------------

def test_the_report_lists_persistent_shifts_worse_first(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv('NETREGRESS_STATE', str(tmp_path / 'state'))
    run_dir = tmp_path / 'run'
    run_dir.mkdir()
    bw = 'mpi_throughput %mode=stream %io=blocking %interconnect=gige'
    write_run_report(run_dir / 'report-vcluster.json', T0, [
        case(LAT, 'openmpi4', perf={'rtt_us': (11.5, 10.0, 'us')}),
        case(LAT, 'mpich4', perf={'rtt_us': (12.0, 12.0, 'us')}),
        case(bw, 'openmpi4', perf={'throughput_mbps': (990.0, 950.0, 'Mbit/s')}, ref_test='mpitest.stream.blocking')])
    when = [datetime.datetime(2026, 11, 1, 6, tzinfo=datetime.timezone.utc) + datetime.timedelta(days=d)
            for d in range(16)]
    series = lambda levels, seed: list(zip(when, noisy(levels, 0.01, seed)))     # noqa: E731
    lat = ('vcluster', 'gige', 'gige', 'mpitest.latency:rtt_us')
    fake = {
        lat: {'openmpi4': series([10.0] * 10 + [11.5] * 6, 1),          # +15%: worse (a latency)
              'mpich4': series([12.0] * 16, 2)},                        # flat
        ('vcluster', 'gige', 'gige', 'mpitest.stream.blocking:throughput_mbps'):
            {'openmpi4': series([900.0] * 8 + [990.0] * 8, 3)},          # +10%: better (a throughput)
        ('vcluster', 'gige', 'gige', 'gone.test:x'): {'openmpi4': series([1.0] * 8 + [2.0] * 8, 4),   # not in this run
                                                       'mpich4': series([1.0] * 4, 5)},               # too short
        **{('vcluster', 'gige', 'gige', f'many:f{i:02d}'): {'gnu': series([50.0] * 8 + [40.0] * 8, 10 + i)}
           for i in range(22)},
    }
    monkeypatch.setattr(report, 'ask_history', lambda rep, days: fake)
    out = tmp_path / 'out'
    assert report.main([str(run_dir), '--out', str(out)]) == 0

    with open(out / 'changepoints.csv', newline='') as fp:
        rows = list(csv.DictReader(fp))
    assert len(rows) == 25                                    # 3 + 22; mpich4's flat and short series not listed
    first = rows[0]
    assert (first['environ'], first['test'], first['figure'], first['direction'], first['began_utc']) == \
        ('openmpi4', 'mpitest.latency', 'rtt_us', 'worse', '2026-11-11T06:00:00+0000')
    assert (first['runs_before'], first['runs_after'], first['unit'], first['better']) == ('10', '6', 'us', 'lower')
    assert float(first['shift_pct']) == pytest.approx(15, abs=2)
    assert [r['direction'] for r in rows[1:24]] == [''] * 23 and rows[-1]['figure'] == 'throughput_mbps'
    assert rows[-1]['direction'] == 'better'

    printed = capsys.readouterr().out.splitlines()
    at = printed.index('persistent shifts over the run history: 25 of 26 figure series (changepoints.csv)')
    assert printed[at + 1].startswith('  +1') and ' worse  gige on vcluster:gige openmpi4  rtt_us (us): ' \
        in printed[at + 1] and printed[at + 1].endswith('since 2026-11-11 06:00 UTC (6 runs, 10 before)')
    assert printed[at + 21:] == ['  ... and 5 more in changepoints.csv']

    md = (out / 'summary.md').read_text()
    assert '## Persistent shifts over the run history' in md and '25 of 26 figure series' in md
    assert '| gige on vcluster:gige | openmpi4 | rtt_us (us) | 2026-11-11 06:00 UTC | 10 / 6 |' in md
    page = (out / 'index.html').read_text()
    assert '<h2 id="shifts">' in page and 'href="changepoints.csv"' in page and '25 of 26 figure series' in page


def test_no_history_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv('NETREGRESS_STATE', str(tmp_path / 'state'))
    run_dir = tmp_path / 'run'
    run_dir.mkdir()
    write_run_report(run_dir / 'report-vcluster.json', T0, [case(LAT, 'openmpi4', perf={'rtt_us': (11.5, 10, 'us')})])
    assert report.main([str(run_dir), '--no-history']) == 0
    assert not (run_dir / 'report' / 'changepoints.csv').exists()
    md = (run_dir / 'report' / 'summary.md').read_text()
    assert '## Persistent shifts over the run history\n\nhistory left out (--no-history)' in md
