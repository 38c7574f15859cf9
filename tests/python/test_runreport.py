"""netregress_postrun.runreport: loading a run report (one-line errors naming the file), which attempt counts,
names, and the figures of a case."""
import json

import pytest

from netregress_postrun import runreport


def tc(name, env='openmpi4', result='pass', phase=None, perf=None, **extra):
    return {'display_name': name, 'unique_name': name, 'system': 'vc', 'partition': 'gige', 'environ': env,
            'result': result, 'fail_phase': phase, 'fail_reason': None, 'perfvalues': perf or {}, **extra}


@pytest.mark.parametrize('content, words', [
    (None, 'no such run report'),
    ('', 'empty file'),
    ('{"session_info": {}, "runs": [{"testcases": [', 'truncated JSON'),
    ('{"runs": [}', 'malformed JSON'),
    ('[1, 2]', 'not a ReFrame run report'),
    ('{"session_info": {}}', 'not a ReFrame run report'),
])
def test_a_bad_report_is_one_line_naming_the_file(tmp_path, content, words):
    path = tmp_path / 'report.json'
    if content is not None:
        path.write_text(content)
    with pytest.raises(runreport.RunReportError) as err:
        runreport.load(path)
    text = str(err.value)
    assert text.startswith(f'{path}: ') and words in text and '\n' not in text


def test_find_takes_a_run_directory_or_a_report_file(tmp_path):
    with pytest.raises(runreport.RunReportError, match='no ReFrame run report'):
        runreport.find(tmp_path)
    (tmp_path / 'report-b.json').write_text('{"runs": []}')
    (tmp_path / 'report-a.json').write_text('{"runs": []}')
    assert [p.name for p in runreport.find(tmp_path)] == ['report-a.json', 'report-b.json']
    assert runreport.find(tmp_path / 'report-b.json') == [tmp_path / 'report-b.json']
    with pytest.raises(runreport.RunReportError, match='no such file or directory'):
        runreport.find(tmp_path / 'nothing.json')


def test_the_last_attempt_decides_and_a_non_performance_failure_is_not_excused(tmp_path):
    first = [tc('lat'), tc('bw', result='fail', phase='performance'), tc('rtt', result='fail', phase='sanity')]
    retry = [tc('bw'), tc('rtt')]
    path = tmp_path / 'r.json'
    path.write_text(json.dumps({'runs': [{'testcases': first}, {'testcases': retry}]}))
    rep = runreport.load(path)
    assert [(c['display_name'], c['result']) for c in rep.cases] == [('lat', 'pass'), ('bw', 'pass'), ('rtt', 'pass')]
    assert [c['fail_phase'] for c in rep.hidden.values()] == ['sanity']          # failed, then passed: counts
    assert [c['fail_phase'] for c in rep.retried.values()] == ['performance']
    assert len(rep.attempts) == 5
    res = runreport.analyse(json.loads(path.read_text()))
    assert [(c['display_name'], c['result']) for c in res['first'].values()] == \
        [('lat', 'pass'), ('bw', 'fail'), ('rtt', 'fail')]                       # what retries off had ended with
    # the same name in another environment is another case
    assert len(runreport.final_cases({'runs': [{'testcases': [tc('lat'), tc('lat', env='mpich4')]}]})) == 2


def test_a_declared_known_fault_that_passes_on_the_retry_is_excused_and_listed(tmp_path):
    """A failure the check marked as a declared known fault of its environment (Open MPI 4.1.4's SIGSEGV in
    MPI_Init) does not fail the run when the retry passes; unmarked, or marked but failing again, it does."""
    known = f'sanity error: gige1 task 0: Segmentation fault (srun); {runreport.KNOWN_FAILURE_MARK} openmpi4: x'
    first = [dict(tc('osu'), result='fail', fail_phase='sanity', fail_reason=known),
             dict(tc('nas'), result='fail', fail_phase='sanity', fail_reason=known),
             dict(tc('ebb'), result='fail', fail_phase='sanity', fail_reason='sanity error: no result')]
    retry = [tc('osu'), dict(tc('nas'), result='fail', fail_phase='sanity', fail_reason='sanity error: no result'),
             tc('ebb')]
    res = runreport.analyse({'runs': [{'testcases': first}, {'testcases': retry}]})
    assert [c['display_name'] for c in res['excused'].values()] == ['osu']
    assert [c['display_name'] for c in res['hidden'].values()] == ['ebb']
    assert [c['display_name'] for c in res['final'].values() if c['result'] == 'fail'] == ['nas']
    assert not res['retried']


def test_names():
    case = tc('mpi_latency %interconnect=gige', ref_test='mpitest.latency')
    assert runreport.case_name(case) == 'mpi_latency %interconnect=gige @vc:gige+openmpi4'
    assert runreport.test_name(case) == 'mpitest.latency'
    assert runreport.test_name(tc('nas %case=is-np2 %interconnect=gige', ref_test='<undefined>')) == 'nas %case=is-np2'
    assert runreport.case_status(tc('x', result='skip')) == 'skipped'
    assert runreport.failure(dict(tc('x', result='fail', phase='sanity'), fail_reason='\nsanity error: bad\n  path')) \
        == 'sanity error: bad path'


def test_perfvalues_keep_the_order_and_mark_what_could_not_be_evaluated():
    case = tc('x', perf={'vc:gige:rtt_us': [12.5, 10.0, -0.1, None, 'us', 'pass'],
                         'vc:gige:bw_mbps@1048576': [None, 0, None, None, 'Mbit/s', 'fail'],
                         'vc:gige:nan_mbps': ['nan', 0, None, None, 'Mbit/s', 'pass'],
                         'vc:gige:broken': 'garbage'})
    pvs = runreport.perfvalues(case)
    assert [pv.var for pv in pvs] == ['rtt_us', 'bw_mbps@1048576', 'nan_mbps', 'broken']
    rtt = pvs[0]
    assert (rtt.system, rtt.partition, rtt.value, rtt.ref, rtt.lower, rtt.upper, rtt.unit, rtt.result) == \
        ('vc', 'gige', 12.5, 10.0, -0.1, None, 'us', 'pass')
    assert rtt.banded and not pvs[1].banded                     # one-sided band: still a band
    assert [pv.value for pv in pvs[1:]] == [None, None, None]


def test_a_figure_that_is_no_figure_fails_its_case_in_the_run_summary():
    """NaN, infinity and a negative value in a passing case, even inside ReFrame's band: the summary counts them
    outside it and fails the case, naming the figure; a sound case beside them passes."""
    from netregress_postrun import runsummary
    banded = [-0.1, 0.1]
    cases = [tc(f'c-{name}', perf={'vc:gige:bw_mbps': [value, 940.0, *banded, 'Mbit/s', 'pass']})
             for name, value in (('nan', float('nan')), ('inf', float('inf')), ('negative', -940.0),
                                 ('sound', 940.0))]
    report = json.loads(json.dumps({'runs': [{'testcases': cases}]}))            # NaN as JSON carries it
    text, ok = runsummary.summarise(report)
    assert not ok and 'figures asserted against a band: 4 of 4, outside it: 3' in text
    failed = [line.strip() for line in text.splitlines() if line.startswith('     c-')]
    assert failed == ['c-nan @vc:gige+openmpi4: performance error: bw_mbps: nan is not a finite figure',
                      'c-inf @vc:gige+openmpi4: performance error: bw_mbps: inf is not a finite figure',
                      'c-negative @vc:gige+openmpi4: performance error: bw_mbps: -940 is negative']
    assert runsummary.failure_lines(report) == failed
    assert runsummary.summarise({'runs': [{'testcases': cases[3:]}]})[1]
