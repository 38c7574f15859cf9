"""tools/refs accept: replace one scope's references from passing run reports, refuse failed figures, remove the
stale ones, print the diff, and leave the file intact on any error."""
import json
import os
import re

import pytest
import yaml

from netregress.judge import references
from netregress_postrun import refsaccept, refstool, refswrite, runreport

LAT = {'kind': 'latency', 'label': '8 B latency', 'better': 'lower'}
BW = {'kind': 'throughput', 'label': '1 MiB stream', 'better': 'higher'}


def case(env, perf, *, result='pass', phase=None, reason=None, test='mpitest.latency', ic='gige', part='gige',
         name=None):
    """A test case of system vc; ``perf``: {var: value}, declared latency for '*_us', throughput otherwise."""
    return {'display_name': name or f'{test} %interconnect={ic}', 'unique_name': f'{name or test}_{ic}_{env}',
            'system': 'vc', 'partition': part, 'environ': env, 'interconnect': ic, 'ref_test': test,
            'result': result, 'fail_phase': phase, 'fail_reason': reason,
            'nr_figures': {var: LAT if var.split('@')[0].endswith('_us') else BW for var in perf},
            'perfvalues': {f'vc:{part}:{var}': [v, 0, None, None, 'us' if var.split('@')[0].endswith('_us')
                                                else 'Mbit/s', result] for var, v in perf.items()}}


REASON = 'Open MPI 4.1.6 installed (site change 1234)'


def accept(*args, **kw):
    """refsaccept.accept with a reason."""
    return refsaccept.accept(*args, reason=REASON, **kw)


def write_report(path, cases):
    path.write_text(json.dumps({'session_info': {}, 'runs': [{'testcases': cases}]}))
    return path


def entry(value, lower=-0.2, upper=0.2, unit='us', comment='tuned by hand'):
    return {'value': value, 'lower': lower, 'upper': upper, 'unit': unit, 'comment': comment}


@pytest.fixture
def ref_dir(tmp_path):
    """vc.yaml: openmpi4 (the scope) and mpich4 (outside it, one of its bands one-sided) on gige."""
    doc = {'schema': references.SCHEMA, 'system': 'vc', 'references': {'gige': {
        'openmpi4': {'gige': {
            'mpitest.latency': {'rtt_us': entry(10.0), 'peer_rtt_us': entry(9.0)},
            'osu.latency': {'latency_us': {'unit': 'us', 'comment': 'osu', 'sizes': {
                8: {'value': 3.0, 'lower': -0.5, 'upper': 0.5}, 1024: {'value': 9.0, 'lower': -0.5, 'upper': 0.5}}}},
            'mpitest.stream.blocking': {'throughput_mbps': entry(900.0, unit='Mbit/s')}}},
        'mpich4': {'gige': {
            'mpitest.latency': {'rtt_us': entry(12.0)},
            'mpitest.stream.blocking': {'throughput_mbps': entry(940.0, None, 0.1, unit='Mbit/s',
                                                                 comment='one-sided: no lower bound')}}}}}}
    d = tmp_path / 'refs'
    d.mkdir()
    (d / 'vc.yaml').write_text(refswrite.dump(doc))
    return d


def new_run(tmp_path, extra=()):
    """openmpi4 after its upgrade: a faster round trip, OSU at 8 B only, a new IMB figure, no peer round trip and no
    stream any more; mpich4 measured too (outside the scope)."""
    return write_report(tmp_path / 'new.json', [
        case('openmpi4', {'rtt_us': 8.0}),
        case('openmpi4', {'latency_us@8': 2.5}, test='osu.latency'),
        case('openmpi4', {'latency_us': 7.0}, test='imb.pingpong'),
        case('mpich4', {'rtt_us': 30.0}),
        *extra])


def tree(path):
    return yaml.safe_load(path.read_text())['references']['gige']


def test_accept_replaces_only_the_scope_and_removes_what_is_no_longer_measured(tmp_path, ref_dir, table, capsys):
    before = tree(ref_dir / 'vc.yaml')
    assert refstool.main(['accept', '--reason', REASON, str(new_run(tmp_path)), '--environ', 'openmpi4',
                          '--dir', str(ref_dir)]) == 0
    out = capsys.readouterr().out
    after = tree(ref_dir / 'vc.yaml')
    o4 = after['openmpi4']['gige']
    assert o4['mpitest.latency'] == {'rtt_us': dict(entry(8.0))}              # value replaced, tuned band kept
    assert set(o4['osu.latency']['latency_us']['sizes']) == {8}               # 1024 B no longer measured
    assert o4['osu.latency']['latency_us']['sizes'][8]['value'] == 2.5
    lower, upper, comment = table.tolerance('gige', 'latency')
    assert o4['imb.pingpong']['latency_us'] == {'value': 7.0, 'lower': lower, 'upper': upper, 'unit': 'us',
                                                'comment': comment}            # new: the interconnect's band
    assert 'mpitest.stream.blocking' not in o4
    assert after['mpich4'] == before['mpich4']                                # outside the scope: as it was
    assert after['mpich4']['gige']['mpitest.stream.blocking']['throughput_mbps']['lower'] is None
    # the diff, and every removed entry named
    assert out.startswith(f'--- {ref_dir / "vc.yaml"} (before)\n+++ {ref_dir / "vc.yaml"} (after)\n')
    assert '-        mpitest.stream.blocking:' in out and '+        imb.pingpong:' in out
    assert '-            value: 10.0' in out and '+            value: 8.0' in out
    assert '-              1024: {value: 9.0, lower: -0.5, upper: 0.5}' in out
    removed = sorted(line.split(': ', 2)[2] for line in out.splitlines() if 'removed (the new runs' in line)
    assert removed == ['gige/openmpi4/gige/mpitest.latency/peer_rtt_us',
                       'gige/openmpi4/gige/mpitest.stream.blocking/throughput_mbps',
                       'gige/openmpi4/gige/osu.latency/latency_us@1024']
    # accepting the same run again changes nothing
    diff, removed, _ = accept([tmp_path / 'new.json'], ref_dir, table, refsaccept.Scope('openmpi4'))
    assert diff == '' and removed == []


def test_accept_refuses_a_fault_naming_each_case_and_writes_nothing(tmp_path, ref_dir, table, capsys):
    """A case that failed outside the performance stage (here the wrong transport, a sanity failure) is a fault,
    not a change: refused in one line saying why, whatever the reason given."""
    text = (ref_dir / 'vc.yaml').read_text()
    failed = case('openmpi4', {'throughput_mbps': 400.0}, test='mpitest.stream.blocking', result='fail',
                  phase='sanity', reason="\nsanity error: transport 'btl:tcp' reported, expected only transports "
                                         "matching 'ucx:.*'")
    elsewhere = case('mpich4', {'latency_us': 1.0}, test='imb.pingpong', result='fail', phase='sanity',
                     reason='sanity error: outside the scope')
    report = new_run(tmp_path, [failed, elsewhere])
    assert refstool.main(['accept', '--reason', REASON, str(report), '--environ', 'openmpi4',
                          '--dir', str(ref_dir)]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ('tools/refs: refusing the figures of failed test case mpitest.stream.blocking '
                      '%interconnect=gige @vc:gige+openmpi4 (new.json): sanity error: transport \'btl:tcp\' '
                      'reported, expected only transports matching \'ucx:.*\' (a fault, not a change: only a '
                      'performance failure is accepted)')
    assert out[1:] == ['tools/refs: nothing written']                         # mpich4's failure is not in scope
    assert (ref_dir / 'vc.yaml').read_text() == text
    # an error (the job never ran), and a case that failed so and passed on a retry: refused too
    crashed = case('openmpi4', {}, result='fail', phase='run', reason='run error: job exited with 137')
    first = case('openmpi4', {'rtt_us': 1.0}, result='fail', phase='sanity', reason='sanity error: no traffic')
    retried = {'session_info': {}, 'runs': [{'testcases': [first]}, {'testcases': [case('openmpi4', {'rtt_us': 8.0})]}]}
    (tmp_path / 'retried.json').write_text(json.dumps(retried))
    for reports, message in (([write_report(tmp_path / 'crash.json', [crashed])], 'run error: job exited with 137'),
                             ([tmp_path / 'retried.json'], 'failed, then passed on a retry: sanity error: no traffic')):
        with pytest.raises(refswrite.RefsError, match=message):
            accept(reports, ref_dir, table, refsaccept.Scope(environ='openmpi4'))
    assert (ref_dir / 'vc.yaml').read_text() == text and sorted(p.name for p in ref_dir.iterdir()) == ['vc.yaml']


def test_a_deliberate_change_is_accepted_with_its_reason_and_shown_in_the_report(tmp_path, ref_dir, table, capsys,
                                                                                  monkeypatch):
    """The run after an MPI upgrade failed its band in the performance stage: accept takes those figures, keeps
    the reason, who and when in the file's changes: list, and tools/report shows the change."""
    moved = case('openmpi4', {'rtt_us': 6.5}, result='fail', phase='performance',
                 reason='performance error: failed to meet reference: rtt_us=6.5, expected 10 (l=8.0, u=12.0)')
    report = write_report(tmp_path / 'upgrade.json', [moved])
    assert refstool.main(['accept', str(report), '--environ', 'openmpi4', '--dir', str(ref_dir)]) == 2
    assert capsys.readouterr().out.splitlines() == [
        'tools/refs: accept needs --reason: why the references change (a new MPI release, a firmware update)',
        'tools/refs: nothing written']
    mpich4 = tree(ref_dir / 'vc.yaml')['mpich4']
    assert refstool.main(['accept', str(report), '--environ', 'openmpi4', '--interconnect', 'gige',
                          '--reason', REASON, '--dir', str(ref_dir)]) == 0
    out = capsys.readouterr().out
    assert '-            value: 10.0' in out and '+            value: 6.5' in out
    assert out.rstrip().endswith(f'({REASON})')
    doc = yaml.safe_load((ref_dir / 'vc.yaml').read_text())
    assert doc['references']['gige']['openmpi4']['gige']['mpitest.latency']['rtt_us']['value'] == 6.5
    assert doc['references']['gige']['mpich4'] == mpich4                     # outside the scope
    [change] = doc['changes']
    assert change['reason'] == REASON and change['scope'] == {'environ': 'openmpi4', 'interconnect': 'gige'}
    assert change['who'].count('@') == 1 and re.fullmatch(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ', change['when'])
    assert change['reports'] == [str(report)]
    assert 'gige/openmpi4/gige/mpitest.latency/rtt_us: 10.0 us -> 6.5 us' in change['figures']
    assert 'gige/openmpi4/gige/osu.latency/latency_us@8: removed, was 3.0 us' in change['figures']
    assert refstool.main(['check', '--dir', str(ref_dir)]) == 0                 # the schema holds the audit trail
    capsys.readouterr()
    # a later tools/refs write keeps the trail
    refswrite.write([write_report(tmp_path / 'later.json', [case('mpich4', {'rtt_us': 12.5})])], ref_dir, table)
    assert yaml.safe_load((ref_dir / 'vc.yaml').read_text())['changes'] == [change]
    # the next report of the system shows it
    monkeypatch.setenv('NETREGRESS_REFERENCES', str(ref_dir))
    from netregress_postrun import report as report_tool
    shown = report_tool.reference_changes([runreport.load(tmp_path / 'later.json')])
    assert shown == [f'vc ({ref_dir / "vc.yaml"}): {change["when"]} by {change["who"]}: environ openmpi4, '
                     f'interconnect gige: {REASON} ({len(change["figures"])} entries changed)']
    collected = report_tool.collect(tmp_path / 'later.json')
    report_tool.write_markdown(collected, tmp_path / 'summary.md')
    report_tool.write_html(collected, tmp_path / 'index.html')
    assert f'- {shown[0]}' in (tmp_path / 'summary.md').read_text()
    assert REASON in (tmp_path / 'index.html').read_text()


def test_accept_needs_a_scope_and_refuses_undeclared_figures(tmp_path, ref_dir, table, capsys):
    report = new_run(tmp_path)
    assert refstool.main(['accept', '--reason', REASON, str(report), '--dir', str(ref_dir)]) == 2
    assert 'accept needs a scope' in capsys.readouterr().out
    old = case('openmpi4', {'rtt_us': 8.0})
    del old['nr_figures']
    with pytest.raises(refswrite.RefsError, match=r'^mpitest.latency rtt_us \(vc:gige\+openmpi4 gige\): undeclared'):
        accept([write_report(tmp_path / 'old.json', [old])], ref_dir, table, refsaccept.Scope('openmpi4'))
    with pytest.raises(refswrite.RefsError, match='nothing to accept'):
        accept([report], ref_dir, table, refsaccept.Scope(interconnect='ib'))


def test_selectors_combine_partition_and_interconnect(tmp_path, ref_dir, table):
    report = write_report(tmp_path / 'r.json', [case('openmpi4', {'rtt_us': 8.0}), case('mpich4', {'rtt_us': 11.0})])
    diff, removed, used = accept([report], ref_dir, table,
                                            refsaccept.Scope(partition='gige', interconnect='gige'), dry_run=True)
    assert used == 2 and '+            value: 11.0' in diff and len(removed) == 5   # both builds' stale entries
    assert tree(ref_dir / 'vc.yaml')['mpich4']['gige']['mpitest.latency']['rtt_us']['value'] == 12.0  # dry run


def test_the_file_is_intact_when_the_write_fails(tmp_path, ref_dir, table, monkeypatch):
    text = (ref_dir / 'vc.yaml').read_text()

    def fail(src, dst):
        raise OSError(28, 'No space left on device')
    monkeypatch.setattr(os, 'replace', fail)
    with pytest.raises(refswrite.RefsError, match='No space left on device.*the old one is intact'):
        accept([new_run(tmp_path)], ref_dir, table, refsaccept.Scope('openmpi4'))
    assert (ref_dir / 'vc.yaml').read_text() == text
    assert sorted(p.name for p in ref_dir.iterdir()) == ['.lock', 'vc.yaml']  # no temporary file left behind
