"""netregress_postrun.history against a real ReFrame results database (ReFrame's own storage and --performance-compare):
sessions are stored in a scratch state directory, then each figure of a run is compared with the last passing run
(a failing session in between is skipped) and with the median of the host baseline's runs."""
import json
import subprocess
import sys

import pytest

from netregress.judge import baselines
from netregress_postrun import history
from reports_fixture import BW, LAT, T0, case, history_reports, report

pytestmark = pytest.mark.skipif(not (history.paths.deps_dir() / 'venv' / 'bin' / 'reframe').exists(),
                                reason='no ReFrame in .deps/venv (tools/bootstrap)')


@pytest.fixture
def stored(tmp_path, monkeypatch):
    monkeypatch.setenv('NETREGRESS_STATE', str(tmp_path / 'state'))
    paths = history_reports(tmp_path)
    lines = history.store_reports([paths[n] for n in ('r1', 'r2', 'r3', 'now')])
    assert all('stored as session' in ln for ln in lines), lines
    return paths


def by_key(changes):
    return {(c.name, c.sysenv.split('+')[-1], c.pvar): c for c in changes}


def test_against_the_last_passing_run(stored):
    assert (history.database()).is_file()
    assert len(history.stored_sessions()) == 4
    # storing again is harmless and says so
    assert history.store_reports([stored['r1']]) == [f'{stored["r1"]}: session '
                                                     f'{history.session_of(stored["r1"]).uuid} already stored']
    now = history.session_of(stored['now'])
    got = by_key(history.against_last_pass(now))
    o4 = got[(LAT, 'openmpi4', 'rtt_us')]
    assert (o4.now, o4.before, o4.pdiff, o4.worse) == (15.4, 11.0, 40.0, True)     # r3, not the failing r2
    m4 = got[(LAT, 'mpich4', 'rtt_us')]
    assert (m4.before, m4.pdiff, m4.worse) == (12.5, 0.0, False)                   # r2's 30 us is not a pass
    bw = got[(BW, 'openmpi4', 'throughput_mbps')]
    assert bw.pdiff == pytest.approx(-20.0, abs=0.01) and bw.worse and bw.unit == 'Mbit/s'
    ebb = got[('mpi_ebb %interconnect=gige', 'openmpi4', 'ebb_mibps')]
    assert ebb.before is None and ebb.pdiff is None                               # nothing earlier
    assert ('tcp_rtt %interconnect=gige', 'gnu', 'rtt_us') not in got             # failed: no figure
    table = history.format_changes(list(got.values()), history.RHS_LAST, threshold_pct=5.0)
    assert table[1].startswith(f'{LAT} @vcluster:gige+openmpi4') and '+40.0% (worse)' in table[1]
    assert '-20.0% (worse)' in table[2] and 'no earlier value' in table[-1]
    assert not any('mpich4' in line for line in table)                            # 0% is below 5%


def test_against_the_baseline_sessions(stored):
    now = history.session_of(stored['now'])
    changes, which = history.against_baseline(now)
    assert changes == [] and 'no baseline of vcluster' in which
    base = baselines.Baseline('vcluster', baselines.baseline_path('vcluster'))
    base.runs = [{'recorded_utc': 'x', 'report': str(stored[n]), 'figures': 3} for n in ('r1', 'r3')]
    base.runs.append({'recorded_utc': 'y', 'report': '/nonexistent/report.json', 'figures': 3})
    base.entries[('gige', 'openmpi4', 'gige', 'mpitest.latency', 'rtt_us')] = {
        'unit': 'us', 'kind': 'latency', 'samples': [10.0, 11.0]}
    base.save()
    changes, which = history.against_baseline(now)
    assert which.startswith('2 run(s) of ')
    o4 = by_key(changes)[(LAT, 'openmpi4', 'rtt_us')]
    assert o4.before == 10.5 and o4.pdiff == pytest.approx(46.67, abs=0.01)      # median of 10 and 11


def test_series_has_one_value_per_session(stored):
    rows = [r for r in history.series() if r['name'] == LAT and r['sysenv'].endswith('+openmpi4')]
    assert sorted(float(r['pval (last)']) for r in rows) == [10.0, 11.0, 11.0, 15.4]
    assert {r['ref_test'] for r in rows} == {'mpitest.latency'} and {r['interconnect'] for r in rows} == {'gige'}


def test_history_reaches_back_the_days_asked_and_the_last_pass_too(stored, tmp_path):
    """A daily run's report must not read every session ever stored: the series and the last passing run are looked
    for in the days up to the run. A passing session 3 days before r1 is in a 4-day window, not in a 1-day one."""
    old = tmp_path / 'old.json'
    report(old, T0 - 3 * 86400, [case(LAT, 'openmpi4', perf={'rtt_us': (9.0, 10.0, 'us')})])
    history.store_reports([old])
    now = history.session_of(stored['now'])
    assert now.time_end_unix == T0 + 3000 + 300

    def values(days):
        return sorted(float(r['pval (last)']) for r in history.series(history.days_before(now.time_end_unix, days))
                      if r['name'] == LAT and r['sysenv'].endswith('+openmpi4'))
    assert values(1) == [10.0, 11.0, 11.0, 15.4] and values(4) == [9.0, 10.0, 11.0, 11.0, 15.4]
    start = '20260921T150320+0000'             # the session's start: a last pass is looked for before it
    assert history.last_pass_spec(now, 2).split('/')[1] == f'{start}-2d:{start}?num_failures==0'
    with pytest.raises(history.argparse.ArgumentTypeError, match="'0': a whole number of days, 1 or more"):
        history.positive_days('0')


def test_bad_input_names_what_is_wrong(tmp_path, monkeypatch, stored):
    bad = tmp_path / 'bad.json'
    bad.write_text('{"runs": [')
    for path, message in ((tmp_path / 'missing.json', 'no such run report'), (bad, 'unreadable run report')):
        with pytest.raises(history.HistoryError, match=message):
            history.session_of(path)
    bad.write_text(json.dumps({'runs': []}))
    with pytest.raises(history.HistoryError, match='not a ReFrame run report'):
        history.session_of(bad)
    # a report whose session is not in the database (run before the storage was on)
    monkeypatch.setenv('NETREGRESS_STATE', str(tmp_path / 'other-state'))
    with pytest.raises(history.HistoryError, match='is not in the results database'):
        history.against_last_pass(history.session_of(stored['now']))
    res = subprocess.run([sys.executable, '-m', 'netregress_postrun.history', 'compare', str(tmp_path / 'missing.json')],
                         capture_output=True, text=True, cwd=history.paths.repo_root(),
                         env={**__import__('os').environ, 'PYTHONPATH': str(history.paths.repo_root() /
                                                                               'reframe_tests')})
    assert res.returncode == 2 and 'no such run report' in res.stderr


@pytest.mark.parametrize('better, pdiff, worse', [
    ('lower', 10.0, True), ('lower', -10.0, False), ('higher', -10.0, True), ('higher', 10.0, False),
    (None, -50.0, None),                      # a report older than the checks' declarations: not judged
])
def test_which_way_is_worse_is_the_declared_direction(better, pdiff, worse):
    # the variable's name says nothing: a rate named like a time is still judged as declared
    change = history.Change('c', 's', 'rtt_us', 'u', 1.0, 1.0, pdiff, 'pass', 'pass', better=better)
    assert change.worse is worse
