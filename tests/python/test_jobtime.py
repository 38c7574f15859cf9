"""Where a run's time went: its Slurm jobs from the accounting (fake sacct, no cluster)."""
import json
import subprocess

import pytest

from netregress.measure import slurm
from netregress_postrun import jobtime


def tc(name, jobid, scheduler='slurm', system='vc'):
    return {'display_name': name, 'jobid': jobid, 'scheduler': scheduler, 'system': system, 'result': 'pass'}


def report(*cases, retry=()):
    return {'runs': [{'testcases': list(cases)}] + ([{'testcases': list(retry)}] if retry else [])}


class FakeSacct:
    """Answers sacct from {jobid: 'submit|start|end'}; counts its calls."""

    def __init__(self, rows, returncode=0):
        self.rows, self.returncode, self.calls = rows, returncode, []

    def __call__(self, argv, timeout_s):
        self.calls.append(list(argv))
        assert argv[0] == 'sacct' and '-X' in argv
        ids = argv[argv.index('-j') + 1].split(',')
        out = ''.join(f'{j}|{self.rows[j]}\n' for j in ids if j in self.rows)
        return subprocess.CompletedProcess(argv, self.returncode, out, 'sacct: error: no slurmdbd' if
                                           self.returncode else '')


def test_every_attempt_of_every_slurm_case_is_counted_and_local_ones_are_not():
    doc = report(tc('osu %benchmark=osu_bw %interconnect=fast', 11), tc('nas %case=cg', 12),
                 tc('MpiKernelBuild ~vc:fast+gnu', 4711, scheduler='local'), tc('skipped', None),
                 retry=[tc('osu %benchmark=osu_bw %interconnect=fast', 15)])
    assert jobtime.case_jobs(doc) == {'11': 'osu', '12': 'nas', '15': 'osu'}


def test_the_account_sums_job_time_per_check_and_tells_the_busy_share_of_the_span():
    jobs = {'1': 'osu', '2': 'osu', '3': 'nas', '4': 'nas', '5': 'cancelled'}
    rows = {'1': '100|100|110', '2': '100|110|112', '3': '101|112|130',
            '4': '200|140|150',                          # a gap of 10 s: no job ran from 130 to 140
            '5': '120|Unknown|Unknown'}                  # never started
    found = jobtime.query_jobs(jobs, FakeSacct(rows))
    assert [j.jobid for j in found] == ['1', '2', '3', '4', '5'] and found[4].ran == 0
    assert jobtime.busy_seconds(found) == 40
    head, checks = jobtime.account(found, 'vc')
    assert head == ('time on vc (Slurm accounting, 4 jobs): a job ran during 40 s of the 50 s from the first start '
                    'to the last end (80 %); 40 s of job time, 21 s waited in the queue'), head
    assert checks == '  by check (jobs x mean = seconds): nas 2 x 14.0 s = 28 s, osu 2 x 6.0 s = 12 s'
    assert jobtime.account(found, 'vc', top=1)[1].endswith('nas 2 x 14.0 s = 28 s, 1 more checks 12 s')


def test_overlapping_jobs_count_once_in_the_busy_time():
    spans = [(100, 110), (105, 112), (120, 125), (121, 122)]
    jobs = [jobtime.Job(str(i), 'x', 100, s, e) for i, (s, e) in enumerate(spans)]
    assert jobtime.busy_seconds(jobs) == 17


def test_many_jobs_go_to_sacct_in_batches():
    jobs = {str(i): 'osu' for i in range(1, 1001)}
    fake = FakeSacct({str(i): f'{i}|{i}|{i + 1}' for i in range(1, 1001)})
    assert len(jobtime.query_jobs(jobs, fake)) == 1000
    assert len(fake.calls) == 3 and all(len(c[c.index('-j') + 1].split(',')) <= jobtime.BATCH for c in fake.calls)


def test_the_command_line_says_why_there_is_no_account_and_never_fails_for_it(tmp_path, capsys):
    rep = tmp_path / 'report-vc.json'
    rep.write_text(json.dumps(report(tc('osu x', 7))))
    assert jobtime.main([str(rep)], runner=FakeSacct({}, returncode=1)) == 0
    out = capsys.readouterr().out
    assert out == 'time on vc: no Slurm accounting for its 1 jobs: sacct failed (exit 1): sacct: error: no slurmdbd\n'
    assert jobtime.main([str(rep)], runner=FakeSacct({'7': '1|2|5'})) == 0
    assert capsys.readouterr().out.splitlines()[1] == '  by check (jobs x mean = seconds): osu 1 x 3.0 s = 3 s'
    local = tmp_path / 'report-local.json'
    local.write_text(json.dumps(report(tc('tcp x', 99, scheduler='local', system='local'))))
    assert jobtime.main([str(local)]) == 0
    assert capsys.readouterr().out == 'time on local: no test case ran a Slurm job\n'
    bad = tmp_path / 'bad.json'
    bad.write_text('{"runs": [')
    assert jobtime.main([str(bad)]) == 2
    assert 'truncated JSON' in capsys.readouterr().err


def test_no_sacct_on_the_path_is_named(monkeypatch):
    monkeypatch.setenv('PATH', '/nonexistent')
    with pytest.raises(slurm.SlurmQueryError, match='^sacct not found: Slurm client commands are not installed'):
        jobtime.query_jobs({'1': 'osu'})


def test_the_scope_picks_the_systems_and_partitions_of_a_report(tmp_path, capsys):
    rep = tmp_path / 'report.json'
    rep.write_text(json.dumps(report({**tc('osu ib', 7), 'partition': 'ib'}, {**tc('osu eth', 8), 'partition': 'eth'},
                                     tc('nas other', 9, system='other'))))
    assert jobtime.case_jobs(json.loads(rep.read_text()), 'vc', ['ib']) == {'7': 'osu'}
    fake = FakeSacct({'7': '1|2|5', '8': '1|2|9', '9': '1|1|2'})
    assert jobtime.main([str(rep), '--system', 'vc:eth'], runner=fake) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith('time on vc:eth (Slurm accounting, 1 jobs)') and 'osu 1 x 7.0 s' in out[1]
