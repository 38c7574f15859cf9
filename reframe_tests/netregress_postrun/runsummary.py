"""What a validation run means, read from ReFrame's JSON run report (tools/validate prints it after every run).

The report itself (attempts, names, figures) is read by :mod:`netregress_postrun.runreport`.

* The last attempt of every test case decides its result, but a retry may only repeat a performance measurement:
  an attempt that failed anywhere else (sanity: wrong path, traffic missing, crash, kernel error; the job never
  started; setup) fails the run even when a later attempt passed, because an intermittent fault of that kind is
  the fault.
* Every failure is printed with its whole reason on one line (ReFrame's multi-line reasons start with a newline).
* Skipped test cases are listed, grouped by reason.
* ``baseline-status`` says, before a run, whether this host has a baseline for a system with host references.

    python -m netregress_postrun.runsummary report REPORT.json
    python -m netregress_postrun.runsummary baseline-status --system vcluster
"""
from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path
from typing import Mapping

from netregress.judge import bandrules, baselines
from netregress.measure import interconnects, site
from . import runreport


_ANSI = re.compile(r'\x1b\[[0-9;]*m')
_SKIP_LINE = re.compile(r'^\[\s*SKIP\s*\] \(\s*\d+/\d+\) (.+?) /[0-9a-f]+ @(\S+) \[(.*)\]\s*$')


def skip_reasons(log_text: str) -> dict[str, str]:
    """``'<display name> @<system:partition+environ>'`` -> reason, from ReFrame's console log (its JSON report
    keeps no reason for a skip)."""
    out = {}
    for line in _ANSI.sub('', log_text).splitlines():
        m = _SKIP_LINE.match(line)
        if m:
            out[f'{m.group(1)} @{m.group(2)}'] = m.group(3)
    return out


def case_seconds(tc: Mapping) -> float:
    """Time a case took. ReFrame's run phase of a case without a job (a fixture that builds nothing) lasts until
    its last dependent is done (860 s for MpiKernelBuild in a full vcluster run), so it counts only with a job."""
    phases = ['time_setup', 'time_compile', 'time_sanity', 'time_performance']
    if tc.get('jobid') is not None:
        phases.append('time_run')
    return sum(tc.get(k) or 0 for k in phases)


_DEPENDENCY_SKIP = 'skipped due to skipped dependencies'


def skip_reason(tc: Mapping, by_name: Mapping[tuple, Mapping], skips: Mapping[str, str]) -> str:
    """Why ``tc`` was skipped; a case skipped only because a dependency was (ReFrame's own words) takes the reason
    of that dependency, so 'no Spack' or a known fault is counted with every case it takes out. ``by_name``: the
    report's skipped cases by (unique name, 'system:partition', environ), the form of ``dependencies_actual``."""
    seen = set()
    while True:
        reason = skips.get(runreport.case_name(tc)) or runreport.one_line(tc.get('fail_reason'))
        deps = [by_name[tuple(d)] for d in tc.get('dependencies_actual') or [] if tuple(d) in by_name]
        if reason != _DEPENDENCY_SKIP or not deps or id(deps[0]) in seen:
            return reason
        seen.add(id(deps[0]))
        tc = deps[0]


def judged(cases: list[Mapping]) -> dict[tuple[str, str], collections.Counter]:
    """Per (system, interconnect): how many figures were judged against a band (``band``; of them ``shared_cpu``
    by the wide band of CPU-bound figures on shared CPUs), fell outside it (``out``), or were only recorded."""
    table: dict = collections.defaultdict(collections.Counter)
    for tc in cases:
        shared = set(filter(None, str(tc.get('nr_shared_cpu_band') or '').split(',')))
        row = table[(str(tc.get('system')), str(tc.get('interconnect') or '-'))]
        for pv in runreport.perfvalues(tc):
            if pv.banded:
                row['band'] += 1
                row['shared_cpu'] += pv.var in shared
                row['out'] += pv.result == 'fail' or pv.fault is not None
            else:
                row['recorded'] += 1
    return table


def judged_lines(cases: list[Mapping], first: list[Mapping] | None = None) -> list[str]:
    """The run's figures judged against a band and recorded without one, in all and per system and interconnect;
    ``first``: the first attempt of every case, whose figures outside are what the run had seen with retries off."""
    table = judged(cases)
    total = sum(table.values(), collections.Counter())
    band, out = total['band'], total['out']
    first_out = sum(judged(first).values(), collections.Counter())['out'] if first is not None else None
    lines = [f'   figures asserted against a band: {band} of {band + total["recorded"]}, outside it: {out}'
             f'{f" ({1000 * out / band:.1f} per 1,000)" if band else ""}'
             f'{f", on the first attempts (retries off) {first_out}" if first_out is not None else ""}'
             f'; of them {total["shared_cpu"]} by the wide band of CPU-bound figures on shared CPUs; recorded '
             f'without a band: {total["recorded"]} (a first run; else figures the baseline has not seen, or that '
             f'read 0 on shared CPUs, or whose check measures otherwise than the earlier version it comes from and '
             f'this version\'s baseline has no run yet: nr_reference_source)']
    if len(table) > 1:
        lines.append('     system:interconnect  judged  (shared-CPU band)  outside  recorded only')
        lines += [f'     {f"{system}:{ic}":20} {c["band"]:7d}  {c["shared_cpu"]:17d}  {c["out"]:7d}  '
                  f'{c["recorded"]:13d}'
                  for (system, ic), c in sorted(table.items())]
    return lines


def summarise(report: Mapping, name: str = 'report', skips: Mapping[str, str] | None = None) -> tuple[str, bool]:
    """(text, ok) for one report; ``skips`` from :func:`skip_reasons` names why cases were skipped."""
    res = runreport.analyse(report)
    cases = list(res['final'].values())
    count = collections.Counter(tc.get('result') for tc in cases)
    total = sum(map(case_seconds, cases))
    lines = [f'== {name}: {dict(count)}, {total:.0f} s in test cases; slowest:']
    for tc in sorted(cases, key=lambda t: -case_seconds(t))[:5]:
        lines.append(f'   {case_seconds(tc):6.1f} s  {runreport.case_name(tc)}  {tc.get("result")}')
    lines += judged_lines(cases, list(res['first'].values()))
    failed = failed_cases(cases)
    if failed:
        lines.append(f'   failed ({len(failed)}):')
        lines += ['     ' + runreport.failure_line(tc) for tc in failed]
    if res['hidden']:
        lines.append(f'   FAILED, then passed on a retry ({len(res["hidden"])}): a retry repeats a measurement, '
                     f'it never excuses a failure outside the performance stage:')
        lines += ['     ' + runreport.failure_line(tc) for tc in res['hidden'].values()]
    if res['excused']:
        lines.append(f'   failed with a declared known fault of the MPI build, then passed on a retry '
                     f'({len(res["excused"])}; config/settings.py known_faults):')
        lines += ['     ' + runreport.failure_line(tc) for tc in res['excused'].values()]
    if res['retried']:
        lines.append(f'   passed on a retry of the performance measurement ({len(res["retried"])}; every attempt '
                     f'is in the report):')
        lines += [f'     {runreport.case_name(tc)}: {runreport.one_line(tc.get("fail_reason"))}'
                  for tc in res['retried'].values()]
    skipped = collections.defaultdict(list)
    by_name = {(tc.get('unique_name'), f"{tc.get('system')}:{tc.get('partition')}", tc.get('environ')): tc
               for tc in cases if tc.get('result') == 'skip'}
    for tc in cases:
        if tc.get('result') == 'skip':
            skipped[skip_reason(tc, by_name, skips or {})].append(tc)
    if skipped:
        lines.append(f'   skipped ({sum(map(len, skipped.values()))}), by reason:')
        for reason, tcs in sorted(skipped.items(), key=lambda kv: -len(kv[1])):
            lines.append(f'     {len(tcs):4d} x {reason}')
    ok = not failed and not res['hidden']
    return '\n'.join(lines), ok


def failed_cases(cases: list[Mapping]) -> list[Mapping]:
    """The cases that failed: ReFrame's failures, and cases holding a value that is no figure (NaN, infinite,
    negative: :func:`runreport.figure_faults`), which ReFrame may have found inside their band."""
    return [tc for tc in cases if tc.get('result') == 'fail' or runreport.figure_faults(tc)]


def failure_lines(report: Mapping) -> list[str]:
    """One line per case that failed, or failed and then passed on a retry outside the performance stage: what the
    end of a run repeats, so that the last lines of a CI log say what failed."""
    res = runreport.analyse(report)
    failed = failed_cases(list(res['final'].values()))
    lines = ([runreport.failure_line(tc) for tc in failed]
             + [f'{runreport.case_name(tc)} (failed, then passed on a retry): {runreport.failure(tc)}'
                for tc in res['hidden'].values()])
    return [line if len(line) <= 400 else line[:397] + '...' for line in lines]


def uses_host_references(system: str) -> bool:
    """True when every partition of ``system`` in config/settings.py takes its references from a host baseline."""
    extras = site.partition_extras(system)
    return bool(extras) and all(x.get('references') == 'host' for x in extras.values())


def baseline_status(system: str) -> str:
    """One line for the start of a run on a system with host references."""
    if not uses_host_references(system):
        return f'{system} uses committed references ({site.reference_dir() / f"{system}.yaml"}): a missing one fails'
    rules = bandrules.load()
    base, warning = baselines.Baseline.for_run(system, rules)
    host = baselines.host_id()
    if base is None:
        return (f'no baseline of {system} for this host ({host}) under {baselines.state_dir()}: this run MEASURES '
                f'one; it asserts only what needs no baseline (provenance, link rates, ratios to the iperf3 '
                f'yardstick) and records its figures when it passes')
    if warning:
        return (f'WARNING: {warning}; a passing run adds its figures to the new version\'s baseline, the earlier '
                f'one is kept')
    shared = sorted(p for p, x in site.partition_extras(system).items() if not x.get('assert_cpu_bound', True))
    lo, hi = rules.shared_floor, rules.shared_cap
    scope = (f'; on {", ".join(shared)} link-bound streams and ratios get the normal bands, CPU-bound figures the '
             f'wide band their spread on this host supports ({lo:g}x to {hi:g}x either side: they swing with where '
             f'the host runs the CPUs, docs/validation.md)' if shared else '')
    early = (f'; figures seen in fewer than {rules.min_runs} runs are judged by prior bands that narrow as their '
             f'runs arrive (docs/validation.md)' if len(base.runs) < rules.min_runs else '')
    return (f'comparing with this host\'s baseline of {system} ({host}, {len(base.runs)} runs recorded, '
            f'{base.path}){scope}{early}; a passing run adds its figures to it')


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog='python -m netregress_postrun.runsummary', description=__doc__.split('\n\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    rep = sub.add_parser('report')
    rep.add_argument('reports', nargs='+', type=Path)
    rep.add_argument('--log', type=Path, action='append', default=[],
                     help="ReFrame's console log of the run (the skip reasons)")
    fl = sub.add_parser('failures', help='one line per failed case of the reports (the end of a run)')
    fl.add_argument('reports', nargs='+', type=Path)
    st = sub.add_parser('baseline-status')
    st.add_argument('--system', required=True)
    args = ap.parse_args(argv)
    if args.cmd == 'baseline-status':
        try:
            print(baseline_status(args.system))
        except (baselines.BaselineError, interconnects.InterconnectError, site.SiteError) as err:
            print(f'host baseline: {err}')
            return 2
        return 0
    if args.cmd == 'failures':
        for path in args.reports:
            try:
                print('\n'.join(failure_lines(runreport.read(path))) or 'no failed case')
            except runreport.RunReportError as err:
                print(f'{err}')
        return 0
    all_ok, unreadable = True, False
    for path in args.reports:
        try:
            report = runreport.read(path)
        except runreport.RunReportError as err:
            print(f'== {err}')
            unreadable = True
            continue
        skips: dict[str, str] = {}
        for log in args.log:
            try:
                skips.update(skip_reasons(log.read_text(errors='replace')))
            except OSError as err:
                print(f'== {log}: unreadable log ({err})')
        text, ok = summarise(report, path.name, skips)
        print(text)
        all_ok &= ok
    return 2 if unreadable else 0 if all_ok else 1


if __name__ == '__main__':
    sys.exit(main())
