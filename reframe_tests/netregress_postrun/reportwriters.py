"""The run report's writers: ``summary.csv`` (long form), ``summary.md`` and ``index.html``.

The page is the Jinja template ``templates/report.html.j2`` beside this module.
"""
from __future__ import annotations

import collections
import csv
import io
from pathlib import Path

import jinja2

from netregress import statefiles
from . import changepoints, history
from .reporthistory import CHANGE_LISTED_PCT, began
from .reportmodel import NOT_MEASURED, Report, bounds, cell_text, fmt_number, fmt_ratio, row_label
from .runreport import case_name, case_status

CSV_FIELDS = ['system', 'partition', 'interconnect', 'metric', 'label', 'environ', 'value', 'unit', 'ratio_to_best',
              'verdict', 'reference', 'lower_bound', 'upper_bound', 'transports', 'nodes', 'test_case']


def write_csv(report: Report, path: Path) -> None:
    """summary.csv, written whole or not at all (statefiles.atomic_write)."""
    fp = io.StringIO(newline='')
    w = csv.DictWriter(fp, fieldnames=CSV_FIELDS)
    w.writeheader()
    for sec in report.sections:
        for row in sec.rows:
            for env, cell in row.cells.items():
                fig = cell.figure
                rec = {'system': sec.system, 'partition': sec.partition, 'interconnect': sec.interconnect,
                       'metric': row.metric.key, 'label': row.metric.label, 'environ': env,
                       'unit': row.metric.unit, 'value': '', 'ratio_to_best': '', 'verdict': cell.missing,
                       'reference': '', 'lower_bound': '', 'upper_bound': '', 'transports': '', 'nodes': '',
                       'test_case': ''}
                if fig is not None:
                    lo, hi = bounds(fig)
                    rec.update(value=f'{fig.value:.6g}', verdict=fig.verdict,
                               ratio_to_best='' if cell.ratio is None else f'{cell.ratio:.4f}',
                               reference='' if fig.verdict == 'no reference' else f'{fig.reference:.6g}',
                               lower_bound='' if lo is None else f'{lo:.6g}',
                               upper_bound='' if hi is None else f'{hi:.6g}',
                               transports=fig.case.get('nr_transports') or '',
                               nodes=fig.case.get('job_nodelist') or '',
                               test_case=case_name(fig.case))
                w.writerow(rec)
    statefiles.atomic_write(path, fp.getvalue(), what='report file')


def _md(text: object) -> str:
    """Markdown table cell text: pipes escaped, one line."""
    return ' '.join(str(text).split()).replace('|', '\\|')


def write_markdown(report: Report, path: Path) -> None:
    out = io.StringIO()
    p = lambda s='': print(s, file=out)     # noqa: E731
    p(f'# Run report: {report.run_dir.name}')
    p()
    for rep in report.reports:
        s = rep.session
        count = collections.Counter(case_status(tc) for tc in rep.cases)
        p(f'- `{rep.path.name}`: ReFrame {s.get("version", "?")} on {s.get("hostname", "?")}, '
          f'{s.get("time_start", "?")} .. {s.get("time_end", "?")}; cases: '
          f'{", ".join(f"{n} {k}" for k, n in sorted(count.items()))}')
    p()
    p('## Host (read where this report was made)')
    p()
    p('| fact | value |')
    p('|---|---|')
    for k, v in report.host.items():
        p(f'| {_md(k)} | {_md(v)} |')
    p(f'| host id | {report.host_id} |')
    p()
    p('## MPI builds (the MPI library their kernels reported: MPI_Get_library_version)')
    p()
    p('| build | MPI library | test cases |')
    p('|---|---|---|')
    for b in report.builds:
        p(f'| {b["environ"]} | {_md(b["library"])} | {_md(", ".join(f"{n} {k}" for k, n in b["cases"].items()))} |')
    p()
    if report.reference_changes:
        p('## Accepted changes of the references (tools/refs accept, newest first)')
        p()
        for line in report.reference_changes:
            p(f'- {line}')
        p()
    p('## What changed since earlier runs')
    p()
    if report.history_note:
        p(report.history_note)
        p()
    for entry in report.comparisons:
        p(f'### {entry["report"]}')
        p()
        if entry['error']:
            p(entry['error'])
            p()
            continue
        for title, changes, listed, source in (
                ('against the last passing run', entry['last'], entry['listed_last'],
                 f"`reframe --performance-compare '{entry['spec']}'`"),
                ("against this host's baseline", entry['base'], entry['listed_base'],
                 f'median of {entry["which"] or "no baseline"}')):
            fresh = sum(c.pdiff is None for c in changes)
            p(f'{title} ({source}): {len(listed)} of {len(changes)} figures moved by {CHANGE_LISTED_PCT:g}% or more, '
              f'{fresh} without an earlier value')
            p()
            if listed:
                p('| test case | figure | now | before | change | verdict now |')
                p('|---|---|---|---|---|---|')
                for c in listed:
                    p(f'| {_md(c.name)} @{_md(c.sysenv)} | {_md(c.pvar)} ({_md(c.unit)}) | {fmt_number(c.now)} | '
                      f'{fmt_number(c.before)} | {c.pdiff:+.1f}%{" worse" if c.worse else ""} | '
                      f'{c.result_now or "-"} |')
                p()
    p('## Persistent shifts over the run history')
    p()
    if report.history_note:
        p(report.history_note)
    else:
        p(f'{len(report.shifts)} of {report.shift_series} figure series (each build\'s figure with at least '
          f'{2 * changepoints.MIN_SEGMENT} runs stored in the {report.history_days} days up to this run) have their '
          f'latest runs at another level than the runs before (change points, docs/history.md), worse first; all in '
          f'`changepoints.csv`.')
        if report.shifts:
            p()
            p('| section | build | figure | began | runs before / after | before | after | shift |')
            p('|---|---|---|---|---|---|---|---|')
            for s in report.shifts:
                cp = s.latest
                p(f'| {_md(s.interconnect)} on {_md(s.system)}:{_md(s.partition)} | {_md(s.environ)} | '
                  f'{_md(s.label)}{f" ({_md(s.unit)})" if s.unit else ""} | {began(s)} | {cp.runs_before} / '
                  f'{cp.runs_after} | {fmt_number(cp.before)} | {fmt_number(cp.after)} | '
                  f'{cp.shift_pct:+.1f}%{" " + cp.direction if cp.direction else ""} |')
    p()
    p('Cells: value in the row\'s unit, (ratio to the best build: 1.00 is the best, lower is worse, for latencies '
      'too), verdict against the reference (pass, fail, or no reference: measured and logged only).')
    for sec in report.sections:
        p()
        p(f'## {sec.title}')
        p()
        for table in sec.tables:
            p(f'| {table.title} | ' + ' | '.join(table.environs) + ' |')
            p('|---|' + '---|' * len(table.environs))
            if any(table.transports[e] != 'none reported' for e in table.environs):
                p('| transports used | ' + ' | '.join(_md(table.transports[e]) for e in table.environs) + ' |')
            for row in table.rows:
                p(f'| {_md(row_label(row.metric))} | '
                  + ' | '.join(_md(cell_text(row.cells[e])) for e in table.environs) + ' |')
            p()
        if not sec.tables:
            p(f'No figure measured here ({NOT_MEASURED}).')
            p()
        if sec.unmeasured:
            p('Tests without any figure here:')
            for tests, text in sec.unmeasured:
                p(f'- {", ".join(tests)}: {text}')
        for name, caption in sec.images:
            p()
            p(f'![{caption}]({name})')
        for note in sec.figure_notes:
            p(f'- note: {note}')
    p()
    p(f'## Failures ({len(report.failures)})')
    p()
    for f in report.failures:
        p(f'- {f["case"]}: {f["reason"]}')
    if not report.failures:
        p('none')
    if report.hidden or report.retried:
        p()
        p('## Retries')
        p()
        for f in report.hidden:
            p(f'- FAILED, then passed on a retry: {f["case"]}: {f["reason"]}')
        for f in report.retried:
            p(f'- passed on a retry (a performance failure, or a declared known fault): {f["case"]}: {f["reason"]}')
    p()
    p(f'## Skips ({sum(len(v) for _, v in report.skips)}), by reason')
    p()
    for reason, names in report.skips:
        p(f'- {len(names)} x {reason}')
    if not report.skips:
        p('none')
    statefiles.atomic_write(path, out.getvalue(), what='report file')

_JINJA = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / 'templates'), autoescape=True,
                            trim_blocks=True, lstrip_blocks=True)
_JINJA.filters.update(num=fmt_number, casename=case_name, ratio=fmt_ratio, rowlabel=row_label, began=began)
PAGE = _JINJA.get_template('report.html.j2')


def write_html(report: Report, path: Path) -> None:
    counts = [', '.join(f'{n} {k}' for k, n in sorted(collections.Counter(case_status(tc) for tc in rep.cases)
                                                        .items())) for rep in report.reports]
    statefiles.atomic_write(path, PAGE.render(r=report, counts=counts, not_measured=NOT_MEASURED, db=history.database(),
                                pct=f'{CHANGE_LISTED_PCT:g}', max_rows=40, min_segment=changepoints.MIN_SEGMENT,
                                alpha=changepoints.ALPHA, shift_pct=f'{changepoints.MIN_SHIFT_PCT:g}',
                                nskips=sum(len(v) for _, v in report.skips),
                                cls={'pass': 'pass', 'fail': 'fail', 'no reference': 'noref'},
                                short={'no reference': 'no ref'}), what='report file')


