"""A report of one validation run: the MPI builds side by side per interconnect, with figures.

``tools/report RUN_DIR`` reads the ReFrame JSON run reports a run wrote (``RUN_DIR/report-<system>.json``, see
``tools/validate``) and writes, beside them, ``RUN_DIR/report/``; ``tools/report REPORT.json`` reads any one ReFrame
JSON run report (``run/ci/report.json``, ``reframe --report-file``) and writes ``<REPORT>-report/`` beside it:

* ``index.html``: the page (one section per system, partition and interconnect) with its PNG figures;
* ``summary.csv``: one row per figure and MPI build (long form, for machines);
* ``summary.md``: the same tables as the page, in Markdown.

What a section shows, per MPI build (the ReFrame environment; the builds in the order the configuration defines
them, ``netregress.site.environments``, the interconnects in the order of the partition's ``ic-<name>`` features;
anything the configuration does not name in the order the report shows it): every performance
figure the run measured (8-byte latency, 1 MiB bandwidth, NetPIPE and IMB, the 13 collective tests' normalised
rates, effective bisection bandwidth, sweep points, OSU and NAS where they ran), each with

* its *ratio to the best build* of the same row: 1.00 is the best; a throughput's ratio is value / best, a
  latency's best / value, so below 1 always means worse (figures that are themselves ratios get none);
* its *verdict* against the reference ReFrame applied: ``pass`` or ``fail`` (outside the band), or
  ``no reference`` (measured and logged only, e.g. a host's first run);
* the transports the MPI library reported (``nr_transports``) and the nodes it ran on.

A build without a figure says why: ``failed``, ``skipped``, ``aborted`` or ``not measured``. The last attempt of a
test case decides (as in :mod:`netregress_postrun.runsummary`, which also supplies the failure, retry and skip lists).

Figures (matplotlib, Agg): throughput against message size per MPI build (log axes; the sweep checks' asserted
points, or every point of their ``result.json`` where the output or stage directory still holds it), the
collective rates as grouped bars, and the link map of ``link_allpairs`` (its ``linkmatrix.bin``, one pixel per
direction in the order of the switch tree; the named elements, suspect directions and switches of its
``links.json`` listed beside it).
A file in an output directory written after the run ended belongs to a later run and is not used.

The MPI library of each build is the one its kernels ran with: the ``mpi.library`` their ``result.json`` records
(``MPI_Get_library_version``, first line) in the case's output or stage directory; ``unknown`` when no kernel of
this run recorded one. The host facts (:func:`netregress.baselines.host_facts`) are read where the report is made,
which is normally the machine that ran the suite; the page says so.

    python -m netregress_postrun.report RUN_DIR|REPORT.json [--out DIR]

The pieces: :mod:`.reportmodel` (reading a run, figures, sections and their tables), :mod:`.reportplots` (the
figures), :mod:`.reporthistory` (ReFrame's results storage: changes, history figures, CSV),
:mod:`.reportwriters` (CSV, Markdown, the page from ``templates/report.html.j2``); this module collects and
writes, and names the pieces other modules use (seed004, postmaint, the tests).

Exit status: 0 written, 2 bad input (no such file or directory, no run report in the directory, a file that is
not a readable ReFrame run report).
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import datetime
import multiprocessing
import os
import sys
from pathlib import Path
from typing import Sequence

from netregress import statefiles
from netregress.judge import baselines, references
from . import history
from .reporthistory import (ask_history, find_shifts, plot_history, shift_lines, write_changepoints_csv,
                            write_changes_csv, write_history_csv)
from .reportmodel import (NOT_MEASURED, REPORT_DIR, Cell, Figure, Metric, Order, Report, ReportError, Row, Section,
                          Table, build_sections, case_figures, cell_text, describe, fmt_number, fmt_ratio,
                          is_mpi_case, load_run, ratio_to_best, row_label, size_label, split_var)
from .reportplots import (case_file, link_map_pixels, plot_collectives, plot_ebb, plot_links, plot_sweeps,
                          read_json, size_curves)
from .reportwriters import write_csv, write_html, write_markdown
from .runreport import REPORT_GLOB, RunReport, case_name, case_status, failure, one_line, test_name

__all__ = ['Cell', 'Figure', 'Metric', 'NOT_MEASURED', 'Order', 'REPORT_DIR', 'REPORT_GLOB', 'Report', 'ReportError',
           'Row', 'RunReport', 'Section', 'Table', 'case_figures', 'case_name', 'case_status', 'cell_text', 'collect',
           'default_out', 'describe', 'fmt_number', 'fmt_ratio', 'link_map_pixels', 'load_run', 'main', 'mpi_libraries',
           'ratio_to_best', 'row_label', 'size_curves', 'size_label', 'split_var', 'test_name', 'write_report']

#: The figures this module writes (an earlier report's are removed before a new one is written).
FIGURE_GLOBS = ('sweep-*.png', 'collectives-*.png', 'links-*.png', 'ebb-*.png', 'history-*.png')

# -- host and builds ------------------------------------------------------------------------------------------------

#: The MPI library of a build none of whose cases is an MPI check (the TCP kernels and their peers).
NO_MPI = 'no MPI (no MPI check ran with it)'


def mpi_libraries(cases: list, run_end: float | None) -> dict[str, str]:
    """environ -> the MPI library its kernels reported (``mpi.library`` of each MPI case's ``result.json``, first
    line; several distinct ones joined with ' | '), ``unknown`` when none did, :data:`NO_MPI` without MPI cases."""
    found: dict[str, dict[str, None]] = {}
    for tc in cases:
        env = tc.get('environ') or '?'
        if not is_mpi_case(tc):
            continue
        seen = found.setdefault(env, {})
        doc = read_json(case_file(tc, 'result.json', run_end, []), [])
        mpi = (doc or {}).get('mpi')
        library = mpi.get('library') if isinstance(mpi, dict) else None
        if isinstance(library, str) and library.strip():
            seen[library.strip().splitlines()[0].strip()] = None
    return {env: ' | '.join(libs) or 'unknown' for env, libs in found.items()}


def collect(run_dir: Path) -> Report:
    """Everything the report shows, from ``run_dir`` (a run directory or one run report: :func:`load_run`)."""
    reports = load_run(run_dir)
    order = Order.of(tc for rep in reports for tc in rep.cases)
    libraries: dict[str, str] = {}
    sections = []
    failures, hidden, retried = [], [], []
    skips: dict[str, list[str]] = collections.defaultdict(list)
    builds: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for rep in reports:
        run_end = rep.session.get('time_end_unix')
        for sec in build_sections(rep.cases, order):
            sec.run_end = run_end
            sections.append(sec)
        for env, library in mpi_libraries(rep.cases, run_end).items():
            if libraries.get(env, 'unknown') == 'unknown':
                libraries[env] = library
            elif library not in ('unknown', libraries[env]):
                libraries[env] = f'{libraries[env]} | {library}'

        for tc in rep.cases:
            builds[tc.get('environ') or '?'][case_status(tc)] += 1
            if tc.get('result') in ('fail', 'abort'):
                failures.append({'case': case_name(tc), 'reason': failure(tc)})
            elif tc.get('result') == 'skip':
                skips[one_line(tc.get('fail_reason'))].append(case_name(tc))
        hidden += [{'case': case_name(tc), 'reason': failure(tc)} for tc in rep.hidden.values()]
        retried += [{'case': case_name(tc), 'reason': one_line(tc.get('fail_reason'))}
                    for tc in [*rep.excused.values(), *rep.retried.values()]]
    facts = baselines.host_facts()
    return Report(
        run_dir=run_dir, reports=reports, sections=sections, host=facts, host_id=baselines.host_id(facts),
        builds=[{'environ': env, 'library': libraries.get(env, NO_MPI), 'cases': dict(sorted(count.items()))}
                for env, count in sorted(builds.items(), key=lambda kv: order.env_key(kv[0]))],
        failures=failures, hidden=hidden, retried=retried,
        skips=sorted(skips.items(), key=lambda kv: (-len(kv[1]), kv[0])),
        generated=datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC'),
        reference_changes=reference_changes(reports))


#: How many accepted changes of its references the report lists per system (the newest; the file keeps all).
CHANGES_SHOWN = 5


def reference_changes(reports: list[RunReport]) -> list[str]:
    """The newest changes ``tools/refs accept`` recorded in the committed reference file of each system the run
    measured, newest first: '<system> (<file>): <when> by <who>: <scope>: <reason> (<n> entries changed)'; a file
    that cannot be read is one line saying so."""
    lines = []
    for system in sorted({str(tc['system']) for rep in reports for tc in rep.cases if tc.get('system')}):
        try:
            path = references.reference_file(system)
            if not path.is_file():
                continue
            changes = references.load_file(path, system).changes
        except references.ReferenceError as err:
            lines.append(f'{system}: {err}')
            continue
        for change in reversed([c for c in changes if isinstance(c, dict)][-CHANGES_SHOWN:]):
            selectors = change.get('scope')
            scope = ', '.join(f'{k} {v}' for k, v in selectors.items()) if isinstance(selectors, dict) else ''
            lines.append(f'{system} ({path}): {change.get("when")} by {change.get("who")}: {scope}: '
                         f'{change.get("reason")} ({len(change.get("figures") or [])} entries changed)')
    return lines


#: The figures of a section, in the order the page shows them (the history figure comes last, once the history is in).
SECTION_FIGURES = (plot_sweeps, plot_collectives, plot_ebb, plot_links)
#: Processes drawing figures: matplotlib holds the GIL, and the report's minute on 2 CPUs was mostly drawing.
FIGURE_PROCESSES = max(1, min(2, os.cpu_count() or 1))
_DRAWING: Report | None = None     # the report a forked drawing process inherits


def _draw(plot, index: int, *args) -> tuple[list, list]:
    """In a drawing process: one figure of section ``index``; the captions and notes it added (the parent adds
    them to its own copy of the section)."""
    assert _DRAWING is not None, 'set before the drawing processes fork'
    sec = _DRAWING.sections[index]
    images, notes = len(sec.images), len(sec.figure_notes)
    plot(sec, *args)
    return sec.images[images:], sec.figure_notes[notes:]


def default_out(path: Path) -> Path:
    """RUN_DIR/report for a run directory, ``<dir>/<name>-report/`` for a run report file ``<dir>/<name>.json``."""
    return path / REPORT_DIR if path.is_dir() else path.parent / f'{path.stem}-{REPORT_DIR}'


def write_report(run_dir: Path, out: Path | None = None, with_history: bool = True,
                 days: int = history.HISTORY_DAYS) -> Path:
    """Write index.html, its figures, summary.csv and summary.md into ``out`` (default :func:`default_out`); with
    history also changes.csv, history.csv and changepoints.csv (ReFrame's results storage, the ``days`` days up to
    the run)."""
    return _write_report(run_dir, out, with_history, days)[0]


def _write_report(run_dir: Path, out: Path | None, with_history: bool,
                  days: int = history.HISTORY_DAYS) -> tuple[Path, Report]:
    report = collect(run_dir)
    out = out or default_out(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    for pattern in FIGURE_GLOBS:           # figures of an earlier report of this run (nothing else)
        for old in out.glob(pattern):
            old.unlink()
    # ReFrame's history queries are subprocesses (about 25 s of a minute here), asked while the figures are drawn in
    # processes of their own: forked before any thread starts (the first submit forks them all), each inherits the
    # report as it is now
    global _DRAWING
    _DRAWING = report
    with concurrent.futures.ProcessPoolExecutor(FIGURE_PROCESSES, mp_context=multiprocessing.get_context('fork')) \
            as drawing:
        drawn = [(sec, drawing.submit(_draw, plot, i, out, *(() if plot is plot_collectives else (sec.run_end,))))
                 for i, sec in enumerate(report.sections) for plot in SECTION_FIGURES]
        series = ask_history(report, days) if with_history else {}
        if with_history:
            for i, sec in enumerate(report.sections):
                mine = {k: v for k, v in series.items() if k[:3] == (sec.system, sec.partition, sec.interconnect)}
                drawn.append((sec, drawing.submit(_draw, plot_history, i, mine, out, days)))
            find_shifts(report, series)      # beside the history figures
        for sec, added in drawn:             # in the order they were asked for, as one process would add them
            images, notes = added.result()
            sec.images += images
            sec.figure_notes += notes
    if with_history:
        write_history_csv(series, out / 'history.csv')
        write_changes_csv(report, out / 'changes.csv')
        write_changepoints_csv(report, out / 'changepoints.csv')
    else:
        report.history_note = 'history left out (--no-history)'
    write_csv(report, out / 'summary.csv')
    write_markdown(report, out / 'summary.md')
    write_html(report, out / 'index.html')
    return out, report


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog='tools/report', description=__doc__.split('\n\n')[0])
    ap.add_argument('run_dir', type=Path, metavar='RUN_DIR|REPORT.json',
                    help='a run directory holding report-<system>.json (run/validate/<stamp>-full or -ci), or any '
                         'ReFrame JSON run report (run/ci/report.json)')
    ap.add_argument('--out', type=Path, help='where to write (default RUN_DIR/report, or <REPORT>-report/ beside a '
                                             'report file)')
    ap.add_argument('--no-history', action='store_true',
                    help="leave out the comparison with earlier runs and the history figures (ReFrame's results "
                         "storage)")
    ap.add_argument('--history-days', type=history.positive_days, default=history.HISTORY_DAYS, metavar='DAYS',
                    help='how far back the history figures, history.csv, the persistent shifts and the last passing '
                         f'run reach (default {history.HISTORY_DAYS}; every stored session in it is read)')
    args = ap.parse_args(argv)
    try:
        out, written = _write_report(args.run_dir, args.out, not args.no_history, args.history_days)
    except (ReportError, statefiles.StateError) as err:
        print(f'tools/report: {err}', file=sys.stderr)
        return 2
    except OSError as err:
        print(f'tools/report: cannot write the report: {err.filename}: {err.strerror}', file=sys.stderr)
        return 2
    print(f'report: {out / "index.html"}')
    print(f'        {out / "summary.md"}, {out / "summary.csv"}')
    if not written.history_note:
        print('\n'.join(shift_lines(written)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
