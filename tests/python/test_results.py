"""The shared kernel-result helper: key paths, sanity on status/exit code, payload arithmetic."""
import json

import pytest

pytest.importorskip('reframe')
from reframe.core.exceptions import SanityError  # noqa: E402

from netregress.measure import results  # noqa: E402

DOC = {'schema': 'netregress-result/1', 'tool': 'nr-tcptest', 'status': 'ok', 'mode': 'stream-exp',
       'hosts': {'client': 'n1', 'server': 'n2'},
       'summary': {'throughput_mbps': {'avg': 941.5}},
       'sweep': [{'size_bytes': 1, 'throughput_mbps': 0.5, 'iterations': 10},
                 {'size_bytes': 1024, 'throughput_mbps': 400.0, 'iterations': 100}],
       'bytes': {'client': 5000, 'server': 4990}}


def write(tmp_path, doc, name='result.json'):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_key_paths():
    assert results.get(DOC, 'summary.throughput_mbps.avg') == 941.5
    assert results.get(DOC, 'sweep[size_bytes=1024].throughput_mbps') == 400.0
    assert results.get(DOC, 'sweep[0].size_bytes') == 1
    with pytest.raises(KeyError, match='no key'):
        results.get(DOC, 'summary.rtt_us')
    with pytest.raises(KeyError, match='0 records'):
        results.get(DOC, 'sweep[size_bytes=2048].throughput_mbps')


def test_value_and_missing_key(tmp_path):
    path = write(tmp_path, DOC)
    assert results.value(path, 'sweep[size_bytes=1].throughput_mbps').evaluate() == 0.5
    with pytest.raises(SanityError, match='no key'):
        results.value(path, 'latency.avg_us').evaluate()


def test_kernel_ok_reads_status_and_exit_mark(tmp_path):
    path = write(tmp_path, DOC)
    out = tmp_path / 'out'
    out.write_text(f'blah\n{results.EXIT_MARK} 0\n')
    assert results.kernel_ok(path, out, tool='nr-tcptest').evaluate()
    out.write_text(f'{results.EXIT_MARK} 3\n')
    with pytest.raises(SanityError, match='validation failure'):
        results.kernel_ok(path, out).evaluate()
    out.write_text('killed before the mark\n')
    with pytest.raises(SanityError, match='exit status not recorded'):
        results.kernel_ok(path, out).evaluate()


def test_kernel_error_status_is_reported(tmp_path):
    path = write(tmp_path, {**DOC, 'status': 'error', 'error': 'connection refused'})
    with pytest.raises(SanityError, match='connection refused'):
        results.kernel_ok(path).evaluate()
    with pytest.raises(SanityError, match='no result file'):
        results.kernel_ok(tmp_path / 'absent.json').evaluate()
    (tmp_path / 'cut.json').write_text('{"schema": "netregress-res')
    with pytest.raises(SanityError, match='not valid JSON'):
        results.kernel_ok(tmp_path / 'cut.json').evaluate()


def test_payload_bytes_and_hosts():
    assert results.payload_bytes(DOC) == 4990                  # the smaller of the two sides' counts
    no_bytes = {k: v for k, v in DOC.items() if k != 'bytes'}
    assert results.payload_bytes(no_bytes) == 1 * 10 + 1024 * 100
    assert results.payload_bytes({'latency': {'size_bytes': 8, 'iterations': 100}}) == 1600
    assert results.hosts(DOC) == ['n1', 'n2']
    assert results.hosts({'hosts': {'master': 'a', 'secondary': 'a'}}) == ['a']


def test_exit_status_descriptions():
    assert results.describe_exit(3).startswith('validation failure')
    assert results.describe_exit(137) == 'killed by signal 9'
    assert results.describe_exit(255) == 'launcher or MPI runtime failure'


def test_scheduler_cancellation_is_named():
    err = ('srun: Job step aborted\n'
           'slurmstepd-fast1: error: *** JOB 151 ON fast1 CANCELLED AT 2026-11-23T01:47:18 DUE TO TIME LIMIT ***\n')
    assert results.scheduler_cancellation(err) == 'DUE TO TIME LIMIT'
    assert results.scheduler_cancellation('*** STEP 7.0 ON gige2 CANCELLED AT 2026-11-23T01:00:00 DUE TO NODE '
                                          'FAILURE ***') == 'DUE TO NODE FAILURE'
    assert results.scheduler_cancellation('*** JOB 9 ON fast1 CANCELLED AT 2026-11-23T01:00:00 ***') is None
    assert results.scheduler_cancellation('') is None


def test_a_task_that_died_is_named_before_the_tasks_killed_after_it():
    # srun --kill-on-bad-exit=1, as measured on the vcluster: rank 0 segfaults, srun terminates rank 1
    err = ('srun: error: gige1: task 0: Segmentation fault\n'
           'srun: launch/slurm: _step_signal: Terminating StepId=874.0\n'
           'srun: error: gige2: task 1: Terminated\n'
           'srun: Force Terminated StepId=874.0\n')
    assert results.failed_tasks(err) == ['gige1 task 0: Segmentation fault', 'gige2 task 1: Terminated']
    err = ('srun: error: fast2: tasks 0-1: Terminated\n'
           'srun: error: fast1: task 2: Exited with exit code 3\n')
    assert results.failed_tasks(err) == ['fast1 task 2: Exited with exit code 3', 'fast2 tasks 0-1: Terminated']
    assert results.failed_tasks('srun: Job step aborted\n') == []


def test_core_files_a_crash_left_are_found_by_the_kernels_default_names(tmp_path):
    assert results.core_files(tmp_path) == [] and results.core_files(tmp_path / 'gone') == []
    for name in ('core', 'core.1407', 'counters.txt', 'core.txt', 'score'):
        (tmp_path / name).write_text('')
    assert results.core_files(tmp_path) == [str(tmp_path / 'core'), str(tmp_path / 'core.1407')]
