"""The run report against earlier runs: ReFrame's results storage (:mod:`netregress_postrun.history`).

Each run report's figures against the last passing run and the host baseline (listed on the page when they moved
by :data:`CHANGE_LISTED_PCT` or more, all of them in ``changes.csv``), every stored value per figure
(``history.csv``), one history figure per section, and the figures whose latest runs sit at a new level
(:mod:`.changepoints`; ``changepoints.csv``).
"""
from __future__ import annotations

import collections
import concurrent.futures
import csv
import datetime
import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from . import changepoints, history, runreport
from .reportmodel import Report, Section, fmt_number, row_label
from .reportplots import _pyplot

#: Changes at least this large (percent) are listed on the page; every change is in changes.csv.
CHANGE_LISTED_PCT = 5.0
#: At most this many metric panels per history figure (table order); every value is in history.csv.
HISTORY_PANELS = 16
#: ReFrame queries running at once (each is one process decoding stored sessions).
QUERIES_AT_ONCE = 2


def _compare(path: Path, days: int) -> dict:
    """One run report's figures against the last passing run and the host baseline (netregress_postrun.history, i.e.
    ReFrame's --performance-compare); a run that is not in the results database says so."""
    entry: dict[str, Any] = {'report': path.name, 'last': [], 'base': [], 'which': '', 'spec': '', 'error': ''}
    try:
        session = history.session_of(path)
        entry['last'] = history.against_last_pass(session, days)
        entry['spec'] = history.last_pass_spec(session, days)
        entry['base'], entry['which'] = history.against_baseline(session)
    except history.HistoryError as err:
        entry['error'] = str(err)
    entry['listed_last'] = _listed(entry['last'])
    entry['listed_base'] = _listed(entry['base'])
    return entry


def _listed(changes: Sequence[history.Change]) -> list[history.Change]:
    moved = [c for c in changes if c.pdiff is not None and abs(c.pdiff) >= CHANGE_LISTED_PCT]
    return sorted(moved, key=lambda c: (-abs(c.pdiff or 0), c.sysenv, c.name, c.pvar))


def _session_times(period: str) -> dict[str, datetime.datetime]:
    out = {}
    for row in history.stored_sessions(period):
        try:
            out[row['UUID']] = datetime.datetime.strptime(row['Start time'], '%Y%m%dT%H%M%S%z')
        except (KeyError, ValueError):
            continue
    return out


def _run_end(report: Report) -> float:
    """When the run ended: its last session's end (start), else now (a report without session times)."""
    ends = []
    for rep in report.reports:
        try:
            session = history.session_of(rep.path)
        except history.HistoryError:
            continue
        ends.append(max(session.time_end_unix, session.time_start_unix))
    return max(ends, default=time.time())


def ask_history(report: Report, days: int = history.HISTORY_DAYS) -> dict:
    """Every run report against earlier runs (``report.comparisons``), and :func:`history_series` of the ``days``
    days up to the run: only ReFrame's queries, no figures. Each is a ReFrame process, most of it start-up, so they
    run two at a time beside the figures being drawn."""
    period, report.history_days = history.days_before(_run_end(report), days), days
    with concurrent.futures.ThreadPoolExecutor(max_workers=QUERIES_AT_ONCE) as pool:
        rows = pool.submit(history.series, period)
        times = pool.submit(_session_times, period)
        report.comparisons = list(pool.map(functools.partial(_compare, days=days), [r.path for r in report.reports]))
        try:
            return history_series(rows.result(), times.result())
        except history.HistoryError as err:
            report.history_note = f'no history: {err}'
            return {}


def history_series(rows: Sequence[Mapping], times: Mapping[str, datetime.datetime]
                   ) -> dict[tuple, dict[str, list[tuple[datetime.datetime, float]]]]:
    """(system, partition, interconnect, metric key) -> build -> [(session start, value)], oldest first, from
    ReFrame's stored figures (``rows``) and the start of each stored session (``times``)."""
    out: dict[tuple, dict[str, list]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for row in rows:
        sysenv, when = row.get('sysenv') or '', times.get(row.get('session_uuid') or '')
        value = history._num(row.get('pval (last)'))
        if '+' not in sysenv or ':' not in sysenv or when is None or value is None:
            continue
        syspart, env = sysenv.rsplit('+', 1)
        system, part = syspart.split(':', 1)
        key = (system, part, row.get('interconnect') or '', f'{row.get("ref_test")}:{row.get("pvar")}')
        out[key][env].append((when, value))
    for per_env in out.values():
        for points in per_env.values():
            points.sort()
    return out


def plot_history(sec: Section, series: Mapping, out: Path, days: int) -> None:
    """Each metric of the section over the stored runs, one line per build (sweep points are in the size
    figure and left out here)."""
    rows = [row for row in sec.rows if not row.metric.key.split(':', 1)[0].startswith(('mpitest.sweep', 'tcp.sweep'))]
    panels = [(row, series.get((sec.system, sec.partition, sec.interconnect, row.metric.key)) or {})
              for row in rows]
    panels = [(row, per_env) for row, per_env in panels if any(len(v) >= 2 for v in per_env.values())]
    if not panels:
        return
    total = len(panels)
    panels = panels[:HISTORY_PANELS]
    plt = _pyplot()
    import matplotlib.dates as mdates
    cols = min(4, len(panels))
    nrows = -(-len(panels) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols, 2.5 * nrows + 0.6), layout='constrained',
                             squeeze=False)
    for ax, (row, per_env) in zip(axes.flat, panels):
        for env in sorted(per_env, key=sec.order.env_key):
            pts = per_env[env]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker='o', markersize=3, color=sec.order.colour(env),
                    label=env)
        ax.set_title(row_label(row.metric), fontsize=8)
        locator = mdates.AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    handles: dict[str, Any] = {}
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    if handles:
        fig.legend(list(handles.values()), list(handles.keys()), loc='outside lower center', ncols=min(7, len(handles)),
                   fontsize='small')
    fig.suptitle(f'History over the stored runs: {sec.title}')
    name = f'history-{sec.slug}.png'
    fig.savefig(out / name, dpi=80)
    plt.close(fig)
    more = f'; the first {len(panels)} of {total} metrics in table order, every value in history.csv' \
        if total > len(panels) else ''
    sec.images.append((name, f'Each figure of {sec.title} over the runs of the {days} days up to this one in '
                             f'ReFrame\'s results storage (one point per session, its last attempt; reframe '
                             f'--list-stored-testcases){more}'))


def write_history_csv(series: Mapping, path: Path) -> None:
    with path.open('w', newline='') as fp:
        w = csv.writer(fp)
        w.writerow(['system', 'partition', 'interconnect', 'metric', 'environ', 'session_start_utc', 'value'])
        for (system, part, ic, metric), per_env in sorted(series.items()):
            for env, points in sorted(per_env.items()):
                for when, value in points:
                    w.writerow([system, part, ic, metric, env, when.strftime('%Y-%m-%dT%H:%M:%S%z'), f'{value:.6g}'])


def write_changes_csv(report: Report, path: Path) -> None:
    with path.open('w', newline='') as fp:
        w = csv.writer(fp)
        w.writerow(['report', 'against', 'test_case', 'sysenv', 'figure', 'unit', 'now', 'before', 'change_pct',
                    'worse', 'verdict_now'])
        for entry in report.comparisons:
            for against, changes in (('last pass', entry['last']), ('baseline', entry['base'])):
                for c in changes:
                    w.writerow([entry['report'], against, c.name, c.sysenv, c.pvar, c.unit,
                                '' if c.now is None else f'{c.now:.6g}', '' if c.before is None else f'{c.before:.6g}',
                                '' if c.pdiff is None else f'{c.pdiff:.2f}', '' if c.worse is None else c.worse,
                                c.result_now])


# -- persistent shifts: change points of each figure's history -------------------------------------------------------

@dataclass(frozen=True)
class Shift:
    """A figure of one build whose latest runs sit at another level than the runs before them."""
    system: str
    partition: str
    interconnect: str
    environ: str
    test: str
    figure: str
    label: str
    unit: str
    better: str | None
    runs: int                       # stored values of the figure
    change_points: int              # in its whole history; the last one is ``latest``
    latest: changepoints.ChangePoint


def _declarations(report: Report) -> dict[tuple, tuple[runreport.Declaration, str]]:
    """(system, partition, interconnect, 'ref_test:var') -> (declaration, unit), from this run's cases: a figure
    this run did not measure has no direction (it is listed, not judged)."""
    out: dict[tuple, tuple[runreport.Declaration, str]] = {}
    for sec in report.sections:
        for tc in sec.cases:
            for pv in runreport.perfvalues(tc):
                key = (sec.system, sec.partition, sec.interconnect, f'{runreport.test_name(tc)}:{pv.var}')
                out.setdefault(key, (runreport.declaration(tc, pv.var), pv.unit))
    return out


def find_shifts(report: Report, series: Mapping) -> None:
    """``report.shifts``: every figure and build of ``series`` (:func:`history_series`) with at least two segments'
    worth of stored values whose last change point is a real one, worse first, then larger first."""
    declared = _declarations(report)
    shifts, searched = [], 0
    for key, per_env in series.items():
        test, _, var = key[3].partition(':')
        decl, unit = declared.get(key, (None, ''))
        for env, points in per_env.items():
            if len(points) < 2 * changepoints.MIN_SEGMENT:
                continue
            searched += 1
            found = changepoints.change_points([v for _, v in points], [t for t, _ in points],
                                               decl.better if decl else None)
            if found:
                shifts.append(Shift(key[0], key[1], key[2], env, test, var,
                                    decl.label if decl else f'{test} {var}', unit,
                                    decl.better if decl else None, len(points), len(found), found[-1]))
    rank = {'worse': 0, '': 1, 'better': 2}
    report.shifts = sorted(shifts, key=lambda s: (rank[s.latest.direction], -abs(s.latest.shift_pct), s.system,
                                                  s.partition, s.interconnect, s.test, s.figure, s.environ))
    report.shift_series = searched


def began(shift: Shift) -> str:
    when = shift.latest.time
    return when.strftime('%Y-%m-%d %H:%M %Z').strip() if isinstance(when, datetime.datetime) else str(when)


def shift_lines(report: Report, limit: int = 20) -> list[str]:
    """One line per persistent shift, the first ``limit`` of them (the text summary tools/report prints)."""
    lines = [f'persistent shifts over the run history: {len(report.shifts)} of {report.shift_series} figure series '
             f'(changepoints.csv)']
    for s in report.shifts[:limit]:
        cp = s.latest
        lines.append(f'  {cp.shift_pct:+.1f}%{" " + cp.direction if cp.direction else ""}  '
                     f'{s.interconnect} on {s.system}:{s.partition} {s.environ}  {s.label}'
                     f'{f" ({s.unit})" if s.unit else ""}: {fmt_number(cp.before)} -> {fmt_number(cp.after)} '
                     f'since {began(s)} ({cp.runs_after} runs, {cp.runs_before} before)')
    if len(report.shifts) > limit:
        lines.append(f'  ... and {len(report.shifts) - limit} more in changepoints.csv')
    return lines


def write_changepoints_csv(report: Report, path: Path) -> None:
    with path.open('w', newline='') as fp:
        w = csv.writer(fp)
        w.writerow(['system', 'partition', 'interconnect', 'environ', 'test', 'figure', 'label', 'unit', 'better',
                    'direction', 'began_utc', 'runs_before', 'runs_after', 'median_before', 'median_after',
                    'shift_pct', 'rank_z', 'p_value', 'change_points', 'stored_runs'])
        for s in report.shifts:
            cp = s.latest
            w.writerow([s.system, s.partition, s.interconnect, s.environ, s.test, s.figure, s.label, s.unit,
                        s.better or '', cp.direction, cp.time.strftime('%Y-%m-%dT%H:%M:%S%z'), cp.runs_before,
                        cp.runs_after, f'{cp.before:.6g}', f'{cp.after:.6g}', f'{cp.shift_pct:.2f}',
                        f'{cp.statistic:.2f}', f'{cp.p_value:.3g}', s.change_points, s.runs])
