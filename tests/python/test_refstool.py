"""Report -> reference conversion (tools/refs)."""
import json

import pytest
import yaml

from netregress import references
from netregress_postrun import refstool


def report(*cases):
    return {'runs': [{'testcases': list(cases)}]}


_names = iter(range(10 ** 6))


def case(value, metric='bw_mbps', unit='Mbit/s', result='pass', fail_phase=None, ic='gige', test='tcp.stream',
         part='gige', env='gnu', fixture=False, reason=None, name=None, kind=None):
    """A test case with one figure; ``kind`` (default: throughput, latency for a 'us' unit) is its declaration,
    'undeclared': none (a report from before nr_figures)."""
    kind = kind or ('latency' if unit == 'us' else 'throughput')
    decl = {} if kind == 'undeclared' else {
        metric: {'kind': kind, 'label': f'{test} {metric}', 'better': 'lower' if kind == 'latency' else 'higher'}}
    return {'result': result, 'fail_phase': fail_phase, 'fail_reason': reason, 'fixture': fixture, 'environ': env,
            'interconnect': ic, 'ref_test': test, 'unique_name': name or f'case_{next(_names)}',
            'system': 'vc', 'partition': part, 'nr_figures': decl,
            'perfvalues': {f'vc:{part}:{metric}': [value, 0, None, None, unit, 'pass']}}


def test_measurements_skip_failed_sanity_failed_bands_and_fixtures():
    got = refstool.measurements(report(
        case(940.0), case(1.0, result='fail', fail_phase='sanity'), case(2.0, fixture=True),
        case(930.0, fail_phase='performance', result='fail', reason='no reference for vc:gige gnu ...'),
        case(300.0, fail_phase='performance', result='fail', reason='failed to meet reference(s): bw_mbps=300')))
    assert [m.value for m in got] == [940.0, 930.0]
    assert got[0].system == 'vc' and got[0].partition == 'gige' and got[0].metric == 'bw_mbps'


def test_measurements_take_the_last_attempt_of_a_retried_case():
    first, retry = case(300.0, name='t'), case(940.0, name='t')
    got = refstool.measurements({'runs': [{'testcases': [first]}, {'testcases': [retry]}]})
    assert [m.value for m in got] == [940.0]


def test_merge_new_entry_takes_interconnect_tolerance(table):
    found = refstool.measurements(report(case(940.0), case(950.0), case(945.0)))
    doc = refstool.merge(None, 'vc', found, table)
    entry = doc['references']['gige']['gnu']['gige']['tcp.stream']['bw_mbps']
    lower, upper, comment = table.tolerance('gige', 'throughput')
    assert entry == {'value': 945.0, 'lower': lower, 'upper': upper, 'unit': 'Mbit/s', 'comment': comment}


def test_merge_keeps_hand_tuned_tolerance_unless_reset(table):
    old = {'schema': references.SCHEMA, 'system': 'vc', 'references': {'gige': {'gnu': {'gige': {'tcp.stream': {
        'bw_mbps': {'value': 900.0, 'lower': -0.01, 'upper': 0.02, 'unit': 'Mbit/s', 'comment': 'tuned'}}}}}}}
    found = refstool.measurements(report(case(940.0)))
    kept = refstool.merge(old, 'vc', found, table)['references']['gige']['gnu']['gige']['tcp.stream']['bw_mbps']
    assert kept == {'value': 940.0, 'lower': -0.01, 'upper': 0.02, 'unit': 'Mbit/s', 'comment': 'tuned'}
    assert old['references']['gige']['gnu']['gige']['tcp.stream']['bw_mbps']['value'] == 900.0   # not mutated
    reset = refstool.merge(old, 'vc', found, table, reset_tolerance=True)
    assert reset['references']['gige']['gnu']['gige']['tcp.stream']['bw_mbps']['comment'] != 'tuned'


def test_per_size_metrics_and_latency_kind(table):
    found = refstool.measurements(report(case(12.0, metric='lat_us@8', unit='us'),
                                         case(30.0, metric='lat_us@1024', unit='us')))
    doc = refstool.merge(None, 'vc', found, table)
    entry = doc['references']['gige']['gnu']['gige']['tcp.stream']['lat_us']
    assert set(entry['sizes']) == {8, 1024}
    assert entry['sizes'][8]['lower'] == table.tolerance('gige', 'latency')[0]


def test_write_round_trips_and_shows_diff(tmp_path, table):
    rep = tmp_path / 'r.json'
    rep.write_text(json.dumps(report(case(940.0), case(12.0, metric='lat_us@8', unit='us'))))
    diff, used = refstool.write([rep], tmp_path, table, dry_run=True)
    assert used == 2 and '+    gnu:' in diff and not (tmp_path / 'vc.yaml').exists()
    refstool.write([rep], tmp_path, table)
    refs = references.load_file(tmp_path / 'vc.yaml', 'vc')
    assert refs.lookup('gige', 'gnu', 'gige', 'tcp.stream', 'bw_mbps').value == 940.0
    assert refs.lookup('gige', 'gnu', 'gige', 'tcp.stream', 'lat_us@8').value == 12.0
    assert yaml.safe_load((tmp_path / 'vc.yaml').read_text())['schema'] == references.SCHEMA
    diff, _ = refstool.write([rep], tmp_path, table)
    assert diff == ''                                   # idempotent


def test_the_declared_kind_chooses_the_band_whatever_the_names_say(table):
    # a stream named like a sweep, declared link-bound: the declaration decides, not the test or metric name
    found = refstool.measurements(report(case(940.0, metric='throughput_mbps@1048576', test='tcp.sweep.stream',
                                              kind='throughput'),
                                         case(1.2, metric='ratio_to_peer', unit='ratio', test='mpitest.latency',
                                              kind='cpu_bound')))
    assert [m.kind for m in found] == ['throughput', 'cpu_bound']
    doc = refstool.merge(None, 'vc', found, table)
    sweep = doc['references']['gige']['gnu']['gige']['tcp.sweep.stream']['throughput_mbps']['sizes'][1048576]
    assert (sweep['lower'], sweep['upper']) == table.tolerance('gige', 'throughput')[:2]
    peer = doc['references']['gige']['gnu']['gige']['mpitest.latency']['ratio_to_peer']
    assert (peer['lower'], peer['upper']) == table.tolerance('gige', 'cpu_bound')[:2]
    # gige: tight for link-bound throughput, loose for CPU-bound, -3% for the iperf3 ratio; shm: no distinction
    assert table.tolerance('gige', 'throughput')[:2] == (-0.05, 0.05)
    assert table.tolerance('gige', 'cpu_bound')[0] < -0.5
    assert table.tolerance('gige', 'ratio')[0] == -0.03
    assert table.tolerance('shm', 'cpu_bound') == table.tolerance('shm', 'throughput')


def test_write_refuses_undeclared_figures_naming_each_and_writes_nothing(tmp_path, table, capsys):
    rep = tmp_path / 'old.json'
    rep.write_text(json.dumps(report(case(940.0), case(12.0, metric='rtt_us', unit='us', test='tcp.rtt',
                                                       kind='undeclared'))))
    with pytest.raises(refstool.RefsError) as err:
        refstool.write([rep], tmp_path, table)
    assert str(err.value).startswith('tcp.rtt rtt_us (vc:gige+gnu gige): undeclared figure')
    assert '\n' not in str(err.value) and not (tmp_path / 'vc.yaml').exists()
    assert refstool.main(['write', str(rep), '--dir', str(tmp_path)]) == 2
    assert capsys.readouterr().out.startswith('tools/refs: tcp.rtt rtt_us (vc:gige+gnu gige): undeclared figure')


def test_oversubscribed_runs_get_the_oversubscribed_band(table):
    crowded = case(5000.0, metric='reduce_rate_kbps@1000000', unit='KB/s', test='mpicoll', env='mpich4')
    crowded['oversubscribed'] = True
    doc = refstool.merge(None, 'vc', refstool.measurements(report(crowded)), table)
    entry = doc['references']['gige']['mpich4']['gige']['mpicoll']['reduce_rate_kbps']
    lower, upper, comment = table.tolerance('gige', 'oversubscribed')
    assert entry['sizes'][1000000] == {'value': 5000.0, 'lower': lower, 'upper': upper}
    assert entry['comment'] == comment and lower != table.tolerance('gige', 'throughput')[0]


def test_what_a_partition_asserts():
    # everything where CPU-bound figures hold (a site's cluster), only ratios and link-bound streams where not
    assert all(refstool.asserted(kind, True, False) for kind in ('latency', 'cpu_bound', 'throughput', 'ratio'))
    assert refstool.asserted('ratio', False, False) and refstool.asserted('throughput', False, True)
    assert not refstool.asserted('throughput', False, False)          # a stream on unshaped veth: CPU-bound
    assert not refstool.asserted('latency', False, True) and not refstool.asserted('cpu_bound', False, True)
