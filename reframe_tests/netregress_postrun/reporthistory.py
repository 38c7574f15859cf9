"""The run report against earlier runs: ReFrame's results storage (:mod:`netregress_postrun.history`).

Each run report's figures against the last passing run and the host baseline (listed on the page when they moved
by :data:`CHANGE_LISTED_PCT` or more, all of them in ``changes.csv``), every stored value per figure
(``history.csv``) and one history figure per section.
"""
from __future__ import annotations

import collections
import csv
import datetime
from pathlib import Path
from typing import Mapping, Sequence

from . import history
from .reportmodel import Report, Section, row_label
from .reportplots import _pyplot

#: Changes at least this large (percent) are listed on the page; every change is in changes.csv.
CHANGE_LISTED_PCT = 5.0
#: At most this many metric panels per history figure (table order); every value is in history.csv.
HISTORY_PANELS = 16


def compare_history(report: Report) -> None:
    """Each run report's figures against the last passing run and the host baseline (netregress_postrun.history, i.e.
    ReFrame's --performance-compare); a run that is not in the results database says so."""
    for rep in report.reports:
        entry = {'report': rep.path.name, 'last': [], 'base': [], 'which': '', 'spec': '', 'error': ''}
        try:
            session = history.session_of(rep.path)
            entry['last'] = history.against_last_pass(session)
            entry['spec'] = history.last_pass_spec(session)
            entry['base'], entry['which'] = history.against_baseline(session)
        except history.HistoryError as err:
            entry['error'] = str(err)
        entry['listed_last'] = _listed(entry['last'])
        entry['listed_base'] = _listed(entry['base'])
        report.comparisons.append(entry)


def _listed(changes: Sequence[history.Change]) -> list[history.Change]:
    moved = [c for c in changes if c.pdiff is not None and abs(c.pdiff) >= CHANGE_LISTED_PCT]
    return sorted(moved, key=lambda c: (-abs(c.pdiff or 0), c.sysenv, c.name, c.pvar))


def _session_times() -> dict[str, datetime.datetime]:
    out = {}
    for row in history.stored_sessions():
        try:
            out[row['UUID']] = datetime.datetime.strptime(row['Start time'], '%Y%m%dT%H%M%S%z')
        except (KeyError, ValueError):
            continue
    return out


def ask_history(report: Report) -> dict:
    """:func:`compare_history`, then :func:`history_series` (only ReFrame's queries: no figures)."""
    compare_history(report)
    return history_series(report)


def history_series(report: Report) -> dict[tuple, dict[str, list[tuple[datetime.datetime, float]]]]:
    """(system, partition, interconnect, metric key) -> build -> [(session start, value)], oldest first."""
    try:
        rows, times = history.series(), _session_times()
    except history.HistoryError as err:
        report.history_note = f'no history: {err}'
        return {}
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


def plot_history(sec: Section, series: Mapping, out: Path) -> None:
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
    handles = {}
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
    sec.images.append((name, f'Each figure of {sec.title} over the runs in ReFrame\'s results storage (one point '
                             f'per session, its last attempt; reframe --list-stored-testcases){more}'))


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


