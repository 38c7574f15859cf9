"""Where a run's time went on a Slurm system: every job of its test cases (retries and fixtures too) as Slurm's
accounting saw it (``sacct``: submitted, started, ended), summed per check, and how much of the span from the first
start to the last end some job was running. ReFrame's own ``time_run`` of a case counts the wait in Slurm's queue,
so on a cluster that runs one job at a time the cases of the vcluster sum to four times the phase; this does not.

    python -m netregress_postrun.jobtime run/validate/<run>/report-vcluster.json

tools/validate prints it after each Slurm system's phase, before the cluster goes down. Slurm without accounting
(no slurmdbd) or without ``sacct`` gives one line saying so, never a failure: the account informs, it judges nothing.
One ``sacct`` call per 400 jobs.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from netregress.measure import slurm
from . import runreport

#: Job ids per sacct call (its command line stays short).
BATCH = 400
SLURM_SCHEDULERS = ('slurm', 'squeue')


@dataclass(frozen=True)
class Job:
    """One job as the accounting saw it: epoch seconds (Slurm's resolution); ``start``/``end`` 0 when it never
    ran (cancelled while pending)."""
    jobid: str
    check: str
    submit: int
    start: int
    end: int

    @property
    def ran(self) -> int:
        return max(0, self.end - self.start) if self.start else 0

    @property
    def waited(self) -> int:
        return max(0, self.start - self.submit) if self.start and self.submit else 0


def case_jobs(doc: Mapping, system: str | None = None, partitions: Sequence[str] = ()) -> dict[str, str]:
    """{Slurm job id: check name} of every attempt of every test case that ran a job through Slurm (of ``system``
    and ``partitions`` only, when given: the scope's part of a report)."""
    jobs = {}
    for tc in runreport.testcases(doc):
        jobid = tc.get('jobid')
        if system and tc.get('system') != system or partitions and tc.get('partition') not in partitions:
            continue
        if tc.get('scheduler') in SLURM_SCHEDULERS and jobid not in (None, ''):
            jobs[str(jobid)] = str(tc.get('display_name') or tc.get('name') or '?').split()[0]
    return jobs


def _epoch(text: str) -> int:
    try:
        return int(text)
    except ValueError:                  # 'Unknown', 'None': not started or not ended
        return 0


def run_sacct(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess:
    """The default runner: sacct printing times as epoch seconds (SLURM_TIME_FORMAT), whatever the user's setting."""
    return slurm.run_command(argv, timeout_s, env={'SLURM_TIME_FORMAT': '%s'})


def query_jobs(jobs: Mapping[str, str], runner: slurm.Runner = run_sacct, timeout_s: float = 30.0) -> list[Job]:
    """The accounting records of ``jobs`` (:class:`slurm.SlurmQueryError` when sacct fails); ids Slurm does not
    know are left out."""
    ids = sorted(jobs, key=lambda j: (len(j), j))
    found = []
    for i in range(0, len(ids), BATCH):
        # -X: the job's allocation only, not its steps
        argv = ['sacct', '-X', '-n', '-P', '-o', 'JobIDRaw,Submit,Start,End', '-j', ','.join(ids[i:i + BATCH])]
        out = slurm.query(argv, runner, timeout_s)
        for line in out.splitlines():
            parts = line.strip().split('|')
            if len(parts) == 4 and parts[0] in jobs:
                found.append(Job(parts[0], jobs[parts[0]], *(_epoch(p) for p in parts[1:])))
    return found


def busy_seconds(jobs: Iterable[Job]) -> int:
    """Seconds in which at least one of ``jobs`` was running (the union of their run intervals)."""
    total, cur_start, cur_end = 0, 0, None
    for start, end in sorted((j.start, j.end) for j in jobs if j.ran):
        if cur_end is None or start > cur_end:
            total += (cur_end - cur_start) if cur_end is not None else 0
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    return total + ((cur_end - cur_start) if cur_end is not None else 0)


def account(jobs: Sequence[Job], system: str = '', top: int = 8) -> list[str]:
    """The lines tools/validate prints: the span, how much of it jobs ran, the queue, and the checks that took
    longest."""
    ran = [j for j in jobs if j.ran]
    where = f' on {system}' if system else ''
    if not ran:
        return [f'time{where}: no job of the run has start and end times in Slurm\'s accounting']
    span = max(j.end for j in ran) - min(j.start for j in ran)
    busy = busy_seconds(ran)
    per: dict[str, list[int]] = {}
    for j in ran:
        per.setdefault(j.check, [0, 0])
        per[j.check][0] += 1
        per[j.check][1] += j.ran
    ordered = sorted(per.items(), key=lambda kv: (-kv[1][1], kv[0]))
    checks = ', '.join(f'{name} {n} x {s / n:.1f} s = {s} s' for name, (n, s) in ordered[:top])
    more = f', {len(ordered) - top} more checks {sum(s for _, (_, s) in ordered[top:])} s' if len(ordered) > top else ''
    share = 100.0 * busy / span if span else 100.0
    return [f'time{where} (Slurm accounting, {len(ran)} jobs): a job ran during {busy} s of the {span} s from the '
            f'first start to the last end ({share:.0f} %); {sum(j.ran for j in ran)} s of job time, '
            f'{sum(j.waited for j in ran)} s waited in the queue',
            f'  by check (jobs x mean = seconds): {checks}{more}']


def main(argv: Sequence[str] | None = None, *, runner: slurm.Runner = run_sacct) -> int:
    """Print the account of a run report's Slurm jobs; 2 for a report that cannot be read, else 0."""
    ap = argparse.ArgumentParser(prog='python -m netregress_postrun.jobtime', description=__doc__.split('\n\n')[0])
    ap.add_argument('report', help='ReFrame JSON run report (tools/validate: <run dir>/report-<system>.json)')
    ap.add_argument('--top', type=int, default=8, help='checks listed by their time (default: 8)')
    ap.add_argument('--system', help='only the test cases of this system, or SYSTEM:PARTITION (a report holds the '
                                     'nodes, reservation and exclusions its run was scoped to)')
    ap.add_argument('--partition', action='append', default=[], help='only this partition (repeatable)')
    args = ap.parse_args(argv)
    if args.system and ':' in args.system:
        args.system, part = args.system.split(':', 1)
        args.partition.append(part)
    if args.top < 1:
        ap.error(f'--top must be at least 1, not {args.top}')
    try:
        doc = runreport.read(args.report)
    except runreport.RunReportError as err:
        print(f'jobtime: {err}', file=sys.stderr)
        return 2
    jobs = case_jobs(doc, args.system, args.partition)
    system = args.system or next((str(tc.get('system')) for tc in runreport.testcases(doc) if tc.get('system')), '')
    system += f':{",".join(args.partition)}' if args.partition else ''
    if not jobs:
        print(f'time on {system or os.path.basename(args.report)}: no test case ran a Slurm job')
        return 0
    try:
        found = query_jobs(jobs, runner)
    except slurm.SlurmQueryError as err:
        print(f'time on {system}: no Slurm accounting for its {len(jobs)} jobs: {err}')
        return 0
    print('\n'.join(account(found, system, args.top)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
