"""OSU and NPB output parsers on format fixtures (tests/python/fixtures/{osu,npb}: hand-written, not measured), and
the iteration counts the OSU check passes."""
import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip('reframe')
from reframe.core.exceptions import SanityError  # noqa: E402

from netregress.measure import osu_npb  # noqa: E402

FIX = Path(__file__).parent / 'fixtures'
MAX = 1 << 20


def osu(name):
    return osu_npb.parse_osu((FIX / 'osu' / name).read_text())


def npb(name):
    return osu_npb.parse_npb((FIX / 'npb' / name).read_text())


@pytest.mark.parametrize('name,key,first,metrics', [
    ('latency_pass.txt', 'latency_us', 0, ('latency_us',)),
    ('bw_pass.txt', 'bandwidth_mbs', 1, ('bandwidth_mbs',)),
    ('bibw_pass.txt', 'bandwidth_mbs', 1, ('bandwidth_mbs',)),
    ('mbw_mr_pass.txt', 'bandwidth_mbs', 1, ('bandwidth_mbs', 'message_rate')),
    ('allreduce_pass.txt', 'latency_us', 1, ('latency_us',)),
    ('alltoall_pass.txt', 'latency_us', 1, ('latency_us',)),
    ('bcast_pass.txt', 'latency_us', 1, ('latency_us',)),
])
def test_passing_runs_parse_whole_curve(name, key, first, metrics):
    res = osu(name)
    assert res.version == '7.4'
    assert res.validated
    assert res.sizes[0] == first and res.sizes[-1] == MAX
    assert all(isinstance(r[key], float) for r in res.rows)
    assert osu_npb.osu_problems(res, max_size=MAX, validate=True, metrics=metrics) == []


def test_exact_values_and_columns():
    lat = osu('latency_pass.txt')
    assert lat.columns == ['latency_us', 'validation']
    assert lat.value('latency_us', 8) == pytest.approx(1.5)
    assert lat.value('latency_us', 1048576) == pytest.approx(263.64)
    mr = osu('mbw_mr_pass.txt')
    assert mr.title == 'OSU MPI Multiple Bandwidth / Message Rate Test'
    assert mr.columns == ['bandwidth_mbs', 'message_rate', 'validation']
    assert mr.value('bandwidth_mbs', 4) == pytest.approx(8.5)
    assert mr.value('message_rate', 4) == pytest.approx(2000000.25)


def test_missing_size_or_column_is_a_sanity_error():
    res = osu('bw_pass.txt')
    with pytest.raises(SanityError, match='no row for 3 bytes'):
        res.value('bandwidth_mbs', 3)
    with pytest.raises(SanityError, match='no latency_us column'):
        res.value('latency_us', 8)


def test_validation_failure_is_reported_with_its_size():
    res = osu('latency_validation_fail.txt')
    assert res.failed_sizes() == [4096]
    assert res.validation_errors == [4096]
    problems = osu_npb.osu_problems(res, max_size=MAX, validate=True)
    assert any('validation failed at 1 size(s): 4096' in p for p in problems)
    assert any('ends at 4096 bytes' in p for p in problems)


def test_truncated_run_is_detected_and_partial_row_ignored():
    res = osu('bw_truncated.txt')
    assert res.sizes[-1] == 65536
    problems = osu_npb.osu_problems(res, max_size=MAX)
    assert problems == ['OSU output ends at 65536 bytes, expected up to 1048576: output truncated '
                        '(benchmark killed or crashed)']


def test_run_without_validation_fails_when_validation_required():
    res = osu('bcast_no_validation.txt')
    assert not res.validated
    assert osu_npb.osu_problems(res, max_size=MAX, validate=False) == []
    assert osu_npb.osu_problems(res, max_size=MAX, validate=True) == [
        'OSU ran without data validation (no Validation column; run with -c)']


def test_no_table():
    res = osu('empty_mpi_abort.txt')
    assert res.rows == []
    assert 'no result table' in osu_npb.osu_problems(res)[0]


def test_osu_value_deferred(tmp_path):
    assert osu_npb.osu_value(str(FIX / 'osu' / 'bcast_pass.txt'), 'latency_us', 1024).evaluate() == \
        pytest.approx(3.42)
    with pytest.raises(SanityError, match='was not written'):
        osu_npb.osu_value(str(tmp_path / 'none.out'), 'latency_us', 8).evaluate()


def test_npb_success():
    res = npb('cg.S.4.success.txt')
    assert res == {'benchmark': 'cg', 'class': 'S', 'size': '1400', 'iterations': 15, 'time_s': 0.05,
                   'total_processes': 4, 'active_processes': 4, 'mops_total': 1234.56, 'mops_per_process': 308.64,
                   'operation_type': 'floating point', 'verification': 'SUCCESSFUL', 'version': '3.4.1'}
    assert osu_npb.npb_problems(res, name='cg', npb_class='S', nprocs=4) == []
    bt = npb('bt.S.4.success.txt')
    assert bt['size'] == '12x12x12' and bt['mops_total'] == pytest.approx(2890.12)
    assert osu_npb.npb_problems(npb('is.S.2.success.txt'), name='is', npb_class='S', nprocs=2) == []


def test_npb_failures():
    ft = npb('ft.W.4.unsuccessful.txt')
    assert ft['verification'] == 'UNSUCCESSFUL'
    assert osu_npb.npb_problems(ft, name='ft', npb_class='W', nprocs=4) == ['NPB FT class W verification UNSUCCESSFUL']
    lu = npb('lu.S.4.truncated.txt')
    assert 'mops_total' not in lu
    problems = osu_npb.npb_problems(lu, name='lu', npb_class='S', nprocs=4)
    assert 'NPB LU printed no Verification line: output truncated' in problems
    assert 'NPB printed no "Mop/s total"' in problems
    # wrong class / process count / benchmark are failures too
    cg = npb('cg.S.4.success.txt')
    assert osu_npb.npb_problems(cg, name='mg', npb_class='W', nprocs=2) == [
        'output is from NPB CG, expected MG', 'NPB ran class S, expected W', 'NPB ran on 4 processes, expected 2']
    assert 'no "Benchmark Completed" block' in osu_npb.npb_problems({}, name='ep', npb_class='S', nprocs=1)[0]


def test_npb_value_deferred():
    assert osu_npb.npb_value(str(FIX / 'npb' / 'bt.S.4.success.txt')).evaluate() == pytest.approx(2890.12)
    with pytest.raises(SanityError, match='no mops_total'):
        osu_npb.npb_value(str(FIX / 'npb' / 'lu.S.4.truncated.txt')).evaluate()


@pytest.mark.parametrize('name,ok,bad', [
    ('bt', [1, 4, 9, 16], [2, 8, 12]),
    ('sp', [1, 4, 9], [3, 6]),
    ('cg', [1, 2, 4, 8, 16], [3, 6, 9]),
    ('is', [2, 4], [0, 5]),
])
def test_npb_process_counts(name, ok, bad):
    assert all(osu_npb.npb_accepts(name, n) for n in ok)
    assert not any(osu_npb.npb_accepts(name, n) for n in bad)



def test_nas_cases_are_the_issue_matrix():
    """IS EP CG MG FT LU on 2 processes, BT and SP on 4: one case each (reframe_tests/checks/nas.py)."""
    cases = osu_npb.npb_cases((2, 4))
    assert sorted(cases) == sorted([('is', 2), ('ep', 2), ('cg', 2), ('mg', 2), ('ft', 2), ('lu', 2),
                                    ('bt', 4), ('sp', 4)])
    assert osu_npb.npb_cases((4,)) == [(n, 4) for n in osu_npb.NPB_NAMES]


@pytest.fixture(scope='module')
def osu_check():
    """The osu check class of reframe_tests/checks/osu.py (ReFrame needs its module in sys.modules)."""
    path = Path(__file__).resolve().parents[2] / 'reframe_tests' / 'checks' / 'osu.py'
    spec = importlib.util.spec_from_file_location('nr_osu_check', path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.osu


@pytest.mark.parametrize('benchmark,network,iterations,loops,at_8k,at_16k', [
    ('osu_bw', False, 100, None, 100, 20),           # shared memory: OSU's own counts, fewer above 8 KiB
    ('osu_bibw', False, 100, None, 100, 20),
    ('osu_mbw_mr', False, 100, None, 100, 100),      # OSU keeps its small count at every size
    ('osu_latency', False, 100, None, 10000, 1000),
    ('osu_allreduce', False, 50, None, 1000, 100),
    ('osu_bw', True, 100, (4, 1), 4, 4),             # a network: link_bound_iterations, link_bound_warmup
    ('osu_mbw_mr', True, 2, (2, 1), 2, 2),           # ... never more than a lowered `iterations`
    ('osu_latency', True, 100, (100, 10), 100, 100),
    ('osu_allreduce', True, 50, (50, 10), 50, 50),
])
def test_osu_iteration_counts(osu_check, benchmark, network, iterations, loops, at_8k, at_16k):
    check = osu_check
    run = SimpleNamespace(benchmark=benchmark, on_network=network, iterations=iterations, warmup=10,
                          link_bound_iterations=4, link_bound_warmup=1)
    run.window_on_network = check.window_on_network.fget(run)
    run.loops = check.loops.fget(run)
    assert run.loops == loops
    assert (check.iterations_at(run, 8192), check.iterations_at(run, 16384)) == (at_8k, at_16k)


def test_osu_default_iterations_name_an_unknown_benchmark():
    with pytest.raises(ValueError, match='osu_put_latency is not an OSU benchmark this suite runs'):
        osu_npb.osu_default_iterations('osu_put_latency', 8)


def _without_validation(text: str) -> str:
    """An OSU table as the timed pass prints it: no Validation column."""
    return '\n'.join(line.replace('Validation', '').replace('Pass', '').rstrip() for line in text.splitlines())


def _osu_run(tmp_path, timed: str, validation: str | None, *, window_on_network=False):
    (tmp_path / 'rfm_job.out').write_text(timed)
    if validation is not None:
        (tmp_path / 'osu-validation.out').write_text(validation)
    return SimpleNamespace(benchmark='osu_latency', max_size=MAX, stdout='rfm_job.out', stagedir=str(tmp_path),
                           validation_pass=not window_on_network)


def test_osu_validation_runs_in_its_own_pass(osu_check, tmp_path):
    passed = (FIX / 'osu' / 'latency_pass.txt').read_text()
    run = _osu_run(tmp_path, _without_validation(passed), passed)
    assert osu_check.osu_witness(run) == []
    # the timed pass without -c is sane; the same table where validation stays in the timed loop is not
    run = _osu_run(tmp_path, _without_validation(passed), None, window_on_network=True)
    assert osu_check.osu_witness(run) == ['OSU ran without data validation (no Validation column; run with -c)']


def test_a_failed_validation_pass_fails_the_check_naming_the_size(osu_check, tmp_path):
    passed = (FIX / 'osu' / 'latency_pass.txt').read_text()
    failed = (FIX / 'osu' / 'latency_validation_fail.txt').read_text()
    problems = osu_check.osu_witness(_osu_run(tmp_path, _without_validation(passed), failed))
    assert 'validation pass (osu-validation.out): OSU data validation failed at 1 size(s): 4096 bytes' in problems


def test_a_validation_pass_that_crashed_is_named_with_srun_s_account(osu_check, tmp_path):
    passed = (FIX / 'osu' / 'latency_pass.txt').read_text()
    crashed = ('srun: error: fast1: task 1: Segmentation fault (core dumped)\n'
               'validation pass of osu_latency exited with 139\n')
    problems = osu_check.osu_witness(_osu_run(tmp_path, _without_validation(passed), crashed))
    assert problems[0].startswith('validation pass (osu-validation.out): OSU printed no result table')
    assert problems[-1] == 'fast1 task 1: Segmentation fault (core dumped)'
    (tmp_path / 'none').mkdir()
    missing = osu_check.osu_witness(_osu_run(tmp_path / 'none', _without_validation(passed), None))
    assert missing == ['validation pass: osu-validation.out was not written']
