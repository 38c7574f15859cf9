"""Run-to-run history through ReFrame's own results storage (issue 13, part 2).

``config/settings.py`` turns ReFrame's results storage on: every ``reframe -r`` session is stored in
``<state>/reframe/results.db`` (``$NETREGRESS_STATE``, default ``run/state``, beside the host baselines). This module
asks ReFrame for what it holds, through its command line (``--performance-compare``, ``--list-stored-sessions``,
``--list-stored-testcases`` with ``--table-format csv``); it computes no statistic itself:

* :func:`against_last_pass`: each figure of a run against its last value from an earlier session that passed
  (``num_failures == 0``) in the 30 days before it: ``UUID/<start>-30d:<start>?num_failures==0/last:/+presult``;
* :func:`against_baseline`: each figure against the median of the sessions that made this host's baseline
  (``tools/refs show``; the baseline's reference value is the median of its runs):
  ``UUID/?uuid in (...)/median:/+presult``;
* :func:`series`: every stored value of every figure, one per session (the report's history figures: the sessions
  of the 30 days up to the run, :func:`days_before`);
* :func:`store_reports`: put run reports written before the storage was on into the database (ReFrame's own
  ``StorageBackend.store``), so that history starts with them.

    python -m netregress_postrun.history compare REPORT [--against last-pass|baseline|both]
    python -m netregress_postrun.history sessions
    python -m netregress_postrun.history import REPORT...

Errors (no such report, not a run report, the session not stored, ReFrame failing) raise :class:`HistoryError`
with the reason; the command line prints it and exits 2.
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import subprocess
import sys
import time
import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from netregress.judge import bandrules, baselines
from netregress.measure import interconnects, site
from netregress import paths
from . import runreport

#: Seconds a ReFrame query may take (it decodes every stored session it selects).
QUERY_TIMEOUT_S = 600
LHS, RHS_LAST, RHS_BASE = 'now', 'last pass', 'baseline'
#: The keys of a test case ReFrame's storage reads when it stores a report.
STORED_KEYS = ('name', 'system', 'partition', 'environ', 'job_completion_time_unix', 'uuid')


class HistoryError(Exception):
    """A report or the results database cannot be read, or ReFrame failed to answer."""


def reframe_exe() -> str:
    """ReFrame of the venv (``tools/bootstrap``), else ``$NETREGRESS_REFRAME``, else ``reframe`` on PATH."""
    for cand in (paths.deps_dir() / 'venv' / 'bin' / 'reframe', os.environ.get('NETREGRESS_REFRAME')):
        if cand and Path(cand).is_file():
            return str(cand)
    return 'reframe'


def database() -> Path:
    """Where ``config/settings.py`` keeps ReFrame's results database."""
    return baselines.state_dir() / 'reframe' / 'results.db'


# -- a run's session --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Session:
    """The ReFrame session of one run report."""
    path: Path
    uuid: str
    system: str
    time_start: str          # ReFrame's format, %Y%m%dT%H%M%S%z
    time_start_unix: float
    num_failures: int
    time_end_unix: float = 0.0      # 0: the report does not say


def session_of(report: Path) -> Session:
    """The session a ReFrame run report describes, each report parsed once per process while it is unchanged: the
    comparison report asks for a run's session three times (its end, its comparisons, the baseline's runs), and
    the vcluster's run report is 4.6 MB of JSON."""
    try:
        stat = os.stat(report)
    except OSError:
        return _session_of(str(report), 0, -1)          # the parser names what is wrong
    return _session_of(str(report), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _session_of(report: str, _mtime_ns: int, _size: int) -> Session:
    try:
        data = runreport.read(Path(report))
    except runreport.RunReportError as err:
        raise HistoryError(str(err)) from None
    info = data.get('session_info')
    if not isinstance(info, dict) or not info.get('uuid'):
        raise HistoryError(f'{report}: not a ReFrame run report (no session_info.uuid or runs)')
    systems = sorted({tc.get('system') for run in data['runs'] for tc in run.get('testcases') or []
                      if tc.get('system')})
    try:
        start = float(info['time_start_unix'])
    except (KeyError, TypeError, ValueError):
        raise HistoryError(f'{report}: session_info has no time_start_unix') from None
    try:
        end = float(info.get('time_end_unix') or 0)
    except (TypeError, ValueError):
        end = 0.0
    return Session(Path(report), str(info['uuid']), ','.join(systems) or '?', str(info.get('time_start', '')),
                   start, int(info.get('num_failures') or 0), end)


# -- asking ReFrame -----------------------------------------------------------------------------------------------

def reframe(args: Sequence[str], env: Mapping[str, str] | None = None) -> list[dict]:
    """Run ReFrame's query ``args`` with CSV tables; the rows as dicts (header from ReFrame)."""
    cmd = [reframe_exe(), *site.reframe_args(), '--nocolor', '--table-format', 'csv', *args]
    environ = {**os.environ, 'RFM_ENABLE_RESULTS_STORAGE': '1', **(env or {})}
    environ.pop('RFM_SYSTEM', None)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S, env=environ,
                              cwd=paths.repo_root())
    except subprocess.TimeoutExpired:
        raise HistoryError(f'reframe {" ".join(args)}: no answer within {QUERY_TIMEOUT_S} s') from None
    except OSError as err:
        raise HistoryError(f'cannot run {cmd[0]}: {err} (tools/bootstrap installs ReFrame)') from None
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0:
        why = [ln for ln in (proc.stderr + proc.stdout).splitlines() if 'ERROR' in ln or 'error' in ln]
        raise HistoryError(f'reframe {" ".join(args)} failed (exit {proc.returncode}): '
                           f'{(why or lines or ["no output"])[-1].strip()}')
    # the table is the last block of comma-separated lines (ReFrame may print warnings before it)
    start = len(lines)
    while start > 0 and ',' in lines[start - 1]:
        start -= 1
    rows = list(csv.reader(lines[start:]))
    if not rows:
        return []
    header = rows[0]
    return [dict(zip(header, row)) for row in rows[1:]]


#: Every stored session (a session filter that holds for all; ReFrame's 'all' is a time period up to now).
ALL_SESSIONS = '?True'
#: Days of history the report asks for: ReFrame decodes every stored session a query selects (0.7 s per session of
#: 3,000 figures here), so an unbounded history grows a daily run's report without limit.
HISTORY_DAYS = 30


def days_before(end_unix: float, days: int) -> str:
    """ReFrame's time period of the ``days`` days up to ``end_unix`` (ReFrame selects by its indexed times, and
    decodes only the sessions it selects)."""
    end = time.strftime('%Y%m%dT%H%M%S+0000', time.gmtime(math.ceil(end_unix) + 1))
    return f'{end}-{int(days)}d:{end}'


def positive_days(text: str) -> int:
    """argparse type: a whole number of days, 1 or more."""
    try:
        days = int(text)
    except ValueError:
        days = 0
    if days < 1:
        raise argparse.ArgumentTypeError(f'{text!r}: a whole number of days, 1 or more')
    return days


def stored_sessions(sessions: str = ALL_SESSIONS) -> list[dict]:
    """``--list-stored-sessions``: UUID, Start time, End time, Num runs, Num cases (+ session extras)."""
    return reframe(['--list-stored-sessions', sessions])


#: Sessions ReFrame said it holds (a stored session stays stored: asked once per process, 1.4 s a question).
_STORED: set[tuple[Path, str]] = set()


def _require_stored(session: Session) -> None:
    key = (database(), session.uuid)
    if key in _STORED:
        return
    if any(row.get('UUID') == session.uuid for row in reframe(['--list-stored-sessions', session.uuid])):
        _STORED.add(key)
        return
    raise HistoryError(f'session {session.uuid} of {session.path} is not in the results database '
                       f'{database()} (run before the storage was on? python -m netregress_postrun.history import '
                       f'{session.path})')


@dataclass
class Change:
    """One figure of a run against an earlier value (a row of ReFrame's comparison)."""
    name: str
    sysenv: str
    pvar: str
    unit: str
    now: float | None
    before: float | None
    pdiff: float | None           # 100 x (now - before) / before, ReFrame's
    result_now: str
    result_before: str
    better: str | None = None     # 'higher' or 'lower', as the check declared it (nr_figures); None: undeclared

    @property
    def worse(self) -> bool | None:
        """True when the change goes the bad way for its declared direction (a latency up, a throughput down);
        None without a before or without a declaration (a report older than nr_figures)."""
        if self.pdiff is None or self.better is None:
            return None
        return self.pdiff > 0 if self.better == 'lower' else self.pdiff < 0


def _num(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def _changes(rows: list[dict], rhs: str) -> list[Change]:
    out = []
    for row in rows:
        def pick(prefix: str, term: str, row: dict = row) -> str | None:
            return next((v for k, v in row.items() if k.startswith(prefix) and k.endswith(f'({term})')), None)
        out.append(Change(name=row.get('name', '?'), sysenv=row.get('sysenv', '?'), pvar=row.get('pvar', '?'),
                          unit=row.get('punit', ''), now=_num(pick('pval', LHS)), before=_num(pick('pval', rhs)),
                          pdiff=_num(row.get('pdiff (%)')), result_now=pick('presult', LHS) or '',
                          result_before=pick('presult', rhs) or ''))
    return out


def compare(spec: str, rhs: str, session: Session | None = None) -> list[Change]:
    """``--performance-compare SPEC`` with this module's terms (``now`` against ``rhs``). ReFrame joins the two
    sides, so a figure without an earlier value is not in its table; with ``session`` those figures of the run
    are added (``before`` None)."""
    changes = _changes(reframe(['--performance-compare', spec, '--term-lhs', LHS, '--term-rhs', rhs]), rhs)
    if session is None:
        return changes
    cases = {(str(tc.get('name')), f'{tc.get("system")}:{tc.get("partition")}+{tc.get("environ")}'): tc
             for tc in runreport.final_cases(runreport.read(session.path))}
    # which way is worse: as the run's checks declared each figure
    changes = [dataclasses.replace(c, better=runreport.declaration(cases[(c.name, c.sysenv)], c.pvar).better)
               if (c.name, c.sysenv) in cases else c for c in changes]
    return changes + _unmatched(cases, changes)


def _unmatched(cases: Mapping[tuple[str, str], Mapping], changes: Sequence[Change]) -> list[Change]:
    """The figures of the run's last attempts (``cases``: (name, sysenv) -> case) that ``changes`` lacks."""
    seen = {(c.name, c.sysenv, c.pvar) for c in changes}
    out = []
    for (name, sysenv), tc in cases.items():
        for pv in runreport.perfvalues(tc):
            if pv.value is None or (name, sysenv, pv.var) in seen:
                continue
            out.append(Change(name=name, sysenv=sysenv, pvar=pv.var, unit=pv.unit, now=pv.value, before=None,
                              pdiff=None, result_now=pv.result or '', result_before='',
                              better=runreport.declaration(tc, pv.var).better))
    return out


def last_pass_spec(session: Session, days: int = HISTORY_DAYS) -> str:
    """The sessions that passed in the ``days`` days before ``session`` (ReFrame decodes each one it selects)."""
    return f'{session.uuid}/{session.time_start}-{int(days)}d:{session.time_start}?num_failures==0/last:/+presult'


def against_last_pass(session: Session, days: int = HISTORY_DAYS) -> list[Change]:
    """Each figure of ``session`` against its last value from an earlier session that passed within ``days``
    days before it."""
    _require_stored(session)
    return compare(last_pass_spec(session, days), RHS_LAST, session)


def baseline_sessions(system: str) -> tuple[list[str], str]:
    """(session uuids, description) of the runs this host's baseline of ``system`` was made from (the last
    ``window`` runs whose report still exists)."""
    try:
        rules = bandrules.load()
        base, _warning = baselines.Baseline.for_run(system, rules)     # the one a run of this version compares with
    except (baselines.BaselineError, interconnects.InterconnectError) as err:
        return [], f'unreadable baseline: {err}'
    if base is None:
        return [], f'no baseline of {system} on this host ({baselines.baseline_path(system)})'
    uuids = []
    for run in base.runs:
        try:
            uuids.append(session_of(Path(str(run.get('report')))).uuid)
        except HistoryError:
            continue
    uuids = uuids[-rules.window:]
    return uuids, f'{len(uuids)} run(s) of {base.path}'


def baseline_spec(session: Session, uuids: Sequence[str]) -> str:
    chosen = ', '.join(repr(u) for u in uuids)
    return f'{session.uuid}/?uuid in ({chosen},)/median:/+presult'


def against_baseline(session: Session) -> tuple[list[Change], str]:
    """Each figure of ``session`` against the median of the baseline's sessions; (changes, which runs)."""
    _require_stored(session)
    uuids, text = baseline_sessions(session.system.split(',')[0])
    uuids = [u for u in uuids if u != session.uuid]
    if not uuids:
        return [], text
    return compare(baseline_spec(session, uuids), RHS_BASE, session), text


def series(sessions: str = ALL_SESSIONS) -> list[dict]:
    """Every stored figure, one value per session: name, sysenv, pvar, punit, session_uuid, ref_test,
    interconnect, ``pval (last)`` (the last attempt of the session)."""
    return reframe(['--list-stored-testcases', f'{sessions}/last:+session_uuid+ref_test+interconnect/'])


# -- putting old reports in -------------------------------------------------------------------------------------

def store_reports(reports: Sequence[Path]) -> list[str]:
    """Store run reports in the results database with ReFrame's own storage backend (a fresh interpreter with
    ReFrame's runtime); one line per report: stored, or already there."""
    sessions = [session_of(Path(r)) for r in reports]
    for s in sessions:                     # what ReFrame's store() reads of every test case
        try:
            cases = list(runreport.testcases(runreport.read(s.path)))
        except runreport.RunReportError as err:
            raise HistoryError(str(err)) from None
        for tc in cases:
            missing = [k for k in STORED_KEYS if k not in tc]
            if missing:
                raise HistoryError(f'{s.path}: a test case ({tc.get("display_name", "?")}) has no '
                                   f'{", ".join(missing)}: not a ReFrame 4 run report')
    stored = {row.get('UUID') for row in stored_sessions()}
    todo = [s for s in sessions if s.uuid not in stored]
    lines = [f'{s.path}: session {s.uuid} already stored' for s in sessions if s.uuid in stored]
    if not todo:
        return lines
    script = ('import json, sys\n'
              'from reframe.core.runtime import temp_runtime\n'
              'from reframe.frontend.reporting.storage import StorageBackend\n'
              'with temp_runtime(sys.argv[1], None, None):\n'
              '    backend = StorageBackend.default()\n'
              '    for path in sys.argv[2:]:\n'
              '        print(path, backend.store(json.load(open(path)), path))\n')
    python = Path(reframe_exe()).parent / 'python'
    # ReFrame's runtime takes one file here; the results storage is configured by ours (a site adds systems)
    proc = subprocess.run([str(python if python.exists() else sys.executable), '-c', script,
                           str(site.settings_files()[0]),
                           *(str(s.path) for s in todo)], capture_output=True, text=True, timeout=QUERY_TIMEOUT_S,
                          env={**os.environ, 'RFM_ENABLE_RESULTS_STORAGE': '1'}, cwd=paths.repo_root())
    if proc.returncode != 0:
        raise HistoryError(f'storing {len(todo)} report(s) failed: {(proc.stderr.strip().splitlines() or ["?"])[-1]}')
    return lines + [f'{s.path}: stored as session {s.uuid}' for s in todo]


# -- printing -----------------------------------------------------------------------------------------------------

def fmt(v: float | None) -> str:
    if v is None:
        return '-'
    return f'{v:.4g}' if abs(v) < 1e5 else f'{v:,.0f}'


def format_changes(changes: Sequence[Change], rhs: str, threshold_pct: float = 0.0) -> list[str]:
    """A fixed-width table, largest change first; figures without an earlier value last."""
    shown = [c for c in changes if c.pdiff is None or abs(c.pdiff) >= threshold_pct]
    shown.sort(key=lambda c: (c.pdiff is None, -abs(c.pdiff or 0.0), c.sysenv, c.name, c.pvar))
    rows = [('test case', 'figure', LHS, rhs, 'change', 'verdict now')]
    for c in shown:
        change = 'no earlier value' if c.pdiff is None else f'{c.pdiff:+.1f}%' + (' (worse)' if c.worse else '')
        rows.append((f'{c.name} @{c.sysenv}', f'{c.pvar} ({c.unit})', fmt(c.now), fmt(c.before), change,
                     c.result_now or '-'))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ['  '.join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog='python -m netregress_postrun.history', description=__doc__.split('\n\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    c = sub.add_parser('compare', help='a run against the last passing run and/or the baseline')
    c.add_argument('report', type=Path, help="the run's ReFrame report (report-<system>.json)")
    c.add_argument('--against', choices=['last-pass', 'baseline', 'both'], default='both')
    c.add_argument('--threshold', type=runreport.percent, default=0.0,
                   help='only changes of at least this many percent')
    c.add_argument('--days', type=positive_days, default=HISTORY_DAYS,
                   help=f'the last passing run is looked for this many days back (default {HISTORY_DAYS})')
    sub.add_parser('sessions', help='the stored sessions')
    i = sub.add_parser('import', help='store run reports written before the storage was on')
    i.add_argument('reports', type=Path, nargs='+')
    args = ap.parse_args(argv)
    try:
        if args.cmd == 'sessions':
            for row in stored_sessions():
                print('  '.join(row.values()))
        elif args.cmd == 'import':
            print('\n'.join(store_reports(args.reports)))
        else:
            session = session_of(args.report)
            print(f'run {session.uuid} ({session.system}, started {session.time_start}; results database '
                  f'{database()})')
            if args.against in ('last-pass', 'both'):
                changes = against_last_pass(session, args.days)
                print(f'\n== against the last passing run (each figure\'s last value from an earlier session with '
                      f'no failure; reframe --performance-compare \'{last_pass_spec(session, args.days)}\')')
                print('\n'.join(format_changes(changes, RHS_LAST, args.threshold)) if changes else 'no figures')
            if args.against in ('baseline', 'both'):
                changes, which = against_baseline(session)
                print(f'\n== against this host\'s baseline (median of its runs: {which})')
                print('\n'.join(format_changes(changes, RHS_BASE, args.threshold)) if changes
                      else 'no stored session of the baseline to compare with')
    except HistoryError as err:
        print(f'history: {err}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
