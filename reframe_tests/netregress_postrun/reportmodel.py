"""The run report's table model (tools/report): reading a run, a test case's figures, and the sections they fill.

A section is one system, partition and interconnect; its tables put the MPI builds (ReFrame environments) side
by side, one row per figure, each cell the figure, its ratio to the best build and its verdict, or why the build
has none. :mod:`netregress_postrun.report` writes them; :mod:`netregress_postrun.seed004` picks from them.
"""
from __future__ import annotations

import collections
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from netregress.measure import site
from . import runreport
from .runreport import RunReport, case_status, test_name

REPORT_DIR = 'report'
NOT_MEASURED = 'not measured'


#: Bad input: a run directory or a run report that cannot be read (exit status 2; the message names the file).
ReportError = runreport.RunReportError


def load_run(path: Path) -> list[RunReport]:
    """The run reports of a run directory (``report-*.json``), or the one run report ``path`` is; :class:`ReportError`
    when there is none or one is unreadable."""
    return runreport.load_all(path)


@dataclass
class Order:
    """The order builds and interconnects are shown in, from the configuration (``netregress.measure.site``): the
    environments in the order each system of the run defines them, a partition's interconnects in the order of its
    features (``ic-<name>``), then of its extras' ``interconnects``; whatever the configuration does not name (a
    report from another site, a system it lacks) follows in the order the report first shows it."""
    environs: list[str] = field(default_factory=list)
    interconnects: dict[tuple, list[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, cases: Iterable[Mapping]) -> 'Order':
        cases = list(cases)
        envs: list[str] = []
        ics: dict[tuple, list[str]] = {}
        for system in dict.fromkeys(str(tc.get('system')) for tc in cases if tc.get('system')):
            try:
                conf = site.systems().get(system)
                if conf is None:
                    continue
                envs += [env['name'] for env in site.environments(system)]
            except site.SiteError:
                continue
            for part in conf.get('partitions') or []:
                names = [f[len('ic-'):] for f in part.get('features') or [] if f.startswith('ic-')]
                names += list((part.get('extras') or {}).get('interconnects') or {})
                ics[(system, part['name'])] = list(dict.fromkeys(names))
        envs += [tc.get('environ') or '?' for tc in cases]
        for tc in cases:
            if tc.get('interconnect'):
                known = ics.setdefault((tc.get('system') or '?', tc.get('partition') or '?'), [])
                if tc['interconnect'] not in known:
                    known.append(tc['interconnect'])
        return cls(list(dict.fromkeys(envs)), ics)

    def env_key(self, env: str) -> int:
        return self.environs.index(env) if env in self.environs else len(self.environs)

    def interconnect_key(self, system: str, partition: str, ic: str) -> int:
        known = self.interconnects.get((system, partition)) or []
        return known.index(ic) if ic in known else len(known)

    def colour(self, env: str) -> str:
        """One colour per build in every figure (matplotlib's default cycle, in the configuration's order)."""
        return f'C{self.env_key(env) % 10}'


# -- figures of a test case -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Metric:
    """A row of a comparison table: one figure, the same for every MPI build."""
    key: str                 # ref_test:var, unique within a section
    label: str
    unit: str
    better: str | None       # 'higher', 'lower', or None (no ratio to the best build)
    order: tuple             # within its test: (position in the case's perfvalues, size)
    kind: str = runreport.UNDECLARED   # the check's declaration: throughput, cpu_bound, latency, ratio


@dataclass
class Figure:
    """One measured figure of one test case."""
    metric: Metric
    environ: str
    value: float
    reference: float | None
    lower: float | None
    upper: float | None
    verdict: str             # 'pass', 'fail', 'no reference'
    case: Mapping


_SIZED = re.compile(r'^(?P<name>.+)@(?P<size>\d+)$')
_COLL = re.compile(r'^(?P<test>\w+)_rate_kbps$', re.I)


def size_label(size: int) -> str:
    """1048576 -> '1 MiB', 1000000 -> '1 MB', 4096 -> '4 KiB', 8 -> '8 B'."""
    for factor, unit in ((2 ** 20, 'MiB'), (10 ** 6, 'MB'), (2 ** 10, 'KiB'), (10 ** 3, 'kB')):
        if size >= factor and size % factor == 0:
            return f'{size // factor} {unit}'
    return f'{size} B'


def split_var(var: str) -> tuple[str, int | None]:
    m = _SIZED.match(var)
    return (m['name'], int(m['size'])) if m else (var, None)


def describe(tc: Mapping, var: str, unit: str, seen: int) -> Metric:
    """The table row of performance variable ``var`` of a case, as its check declared it (``nr_figures``: label,
    kind, which direction is better); an undeclared figure (a report that predates the declarations) keeps its raw
    name and is not ranked. ``seen``: its position in the case's perfvalues, the check's own order. A figure that is
    itself a ratio gets no ratio to the best build."""
    decl = runreport.declaration(tc, var)
    better = decl.better if decl.kind not in ('ratio', runreport.UNDECLARED) else None
    return Metric(key=f'{test_name(tc)}:{var}', label=decl.label, unit=unit, better=better,
                  order=(seen, split_var(var)[1] or 0), kind=decl.kind)


def _osu_kept(tc: Mapping, perfvalues: Mapping) -> set[str]:
    """OSU reports every size: keep the latency at 8 B (else the smallest size) and the rest at the largest."""
    sizes: dict[str, list[int]] = collections.defaultdict(list)
    for var in perfvalues:
        name, size = split_var(var)
        if size is not None:
            sizes[name].append(size)
    kept = {var for var in perfvalues if split_var(var)[1] is None}
    for name, found in sizes.items():
        kinds = {runreport.declaration(tc, f'{name}@{s}').kind for s in found}
        latency = kinds == {'latency'} if runreport.UNDECLARED not in kinds else 'latency' in name
        pick = (8 if 8 in found else min(found)) if latency else max(found)
        kept.add(f'{name}@{pick}')
    return kept


def verdict(lower: float | None, upper: float | None, result: str | None) -> str:
    if lower is None and upper is None:
        return 'no reference'
    return result if result in ('pass', 'fail') else str(result)


def case_figures(tc: Mapping) -> list[Figure]:
    """Every performance figure of a test case (an OSU case: one size per metric)."""
    pvs = {pv.var: pv for pv in runreport.perfvalues(tc)}
    ref_test = test_name(tc)
    kept = _osu_kept(tc, pvs) if ref_test.startswith('osu.') else set(pvs)
    figures = []
    for seen, (var, pv) in enumerate(pvs.items()):
        if var not in kept or pv.value is None:
            continue                     # a figure ReFrame could not evaluate: the case's failure says so
        figures.append(Figure(metric=describe(tc, var, pv.unit, seen), environ=tc.get('environ', '?'),
                              value=pv.value, reference=pv.ref, lower=pv.lower, upper=pv.upper,
                              verdict=verdict(pv.lower, pv.upper, pv.result), case=tc))
    return figures


# -- sections: one per system, partition and interconnect -----------------------------------------------------------

@dataclass
class Cell:
    """One build's entry in a row: a figure, or why there is none."""
    figure: Figure | None = None
    ratio: float | None = None
    missing: str = NOT_MEASURED


@dataclass
class Row:
    metric: Metric
    cells: dict[str, Cell]


@dataclass
class Table:
    """The builds side by side: MPI builds in one table, the TCP kernels and peers (no MPI) in another."""
    title: str
    environs: list[str]
    rows: list[Row] = field(default_factory=list)
    transports: dict[str, str] = field(default_factory=dict)


@dataclass
class Section:
    system: str
    partition: str
    interconnect: str
    cases: list[Mapping] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    environs: list[str] = field(default_factory=list)
    #: tests with a case here but no figure at all, grouped: (tests, '<status>: <builds>; ...')
    unmeasured: list[tuple[list[str], str]] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)       # (file name, caption)
    figure_notes: list[str] = field(default_factory=list)
    #: end of the run that measured it (files written later belong to another run)
    run_end: float | None = None
    order: Order = field(default_factory=Order)

    @property
    def title(self) -> str:
        return f'{self.interconnect} on {self.system}:{self.partition}'

    @property
    def rows(self) -> list[Row]:
        return [row for table in self.tables for row in table.rows]

    @property
    def slug(self) -> str:
        return re.sub(r'[^A-Za-z0-9_.-]+', '_', f'{self.system}-{self.partition}-{self.interconnect}')


def ratio_to_best(metric: Metric, values: Mapping[str, float]) -> dict[str, float]:
    """1.0 for the best build; below 1 worse (value / best, or best / value where lower is better); none for a
    figure that is itself a ratio, or when fewer than two builds measured it."""
    usable = {env: v for env, v in values.items() if v > 0}
    if not metric.better or len(usable) < 2:        # one build is compared with nobody
        return {}
    if metric.better == 'higher':
        best = max(usable.values())
        return {env: v / best for env, v in usable.items()}
    best = min(usable.values())
    return {env: best / v for env, v in usable.items()}


def build_sections(cases: Iterable[Mapping], order: Order | None = None) -> list[Section]:
    """Group the final test cases that have an interconnect into sections and fill their tables."""
    cases = list(cases)
    order = order or Order.of(cases)
    sections: dict[tuple, Section] = {}
    for tc in cases:
        ic = tc.get('interconnect')
        if not ic:
            continue
        key = (tc.get('system') or '?', tc.get('partition') or '?', ic)
        sections.setdefault(key, Section(*key, order=order)).cases.append(tc)
    for sec in sections.values():
        fill_section(sec)
    return [sections[k] for k in sorted(sections, key=lambda k: (k[0], k[1], order.interconnect_key(*k)))]


def is_mpi_case(tc: Mapping) -> bool:
    """An MPI check (every one carries ``check_transport``); the TCP kernels and peers do not."""
    return 'check_transport' in tc


def _env_list(envs: Iterable[str], order: Order) -> str:
    """'openmpi4, mpich4 (2 cases each)' / 'gnu'."""
    count = collections.Counter(envs)
    names = ', '.join(sorted(count, key=order.env_key))
    per = set(count.values())
    return names if per == {1} else f'{names} ({max(per)} cases each)' if len(per) == 1 else \
        ', '.join(f'{e} ({count[e]})' for e in sorted(count, key=order.env_key))


def fill_section(sec: Section) -> None:
    sec.environs = sorted(dict.fromkeys(tc.get('environ') or '?' for tc in sec.cases), key=sec.order.env_key)
    figures: dict[str, dict[str, Figure]] = collections.defaultdict(dict)
    metrics: dict[str, Metric] = {}
    mpi_metric: dict[str, bool] = {}
    measured_tests = set()
    for tc in sec.cases:
        for fig in case_figures(tc):
            metrics.setdefault(fig.metric.key, fig.metric)
            mpi_metric.setdefault(fig.metric.key, is_mpi_case(tc))
            figures[fig.metric.key][fig.environ] = fig
            measured_tests.add(test_name(tc))
    # rows: tests in the order the run first shows them, each test's figures in its check's order
    test_pos = {t: i for i, t in enumerate(dict.fromkeys(test_name(tc) for tc in sec.cases))}
    # why a build has no figure for a test: the status of its case of that test (a failed case has no figures)
    status: dict[tuple, str] = {}
    for tc in sec.cases:
        status[(test_name(tc), tc.get('environ'))] = case_status(tc)
    for mpi, title in ((True, 'MPI builds'), (False, 'TCP kernels and peers (no MPI)')):
        envs = [e for e in sec.environs if any(is_mpi_case(tc) == mpi and tc.get('environ') == e
                                               for tc in sec.cases)]
        table = Table(title, envs)
        for mkey in sorted((k for k in metrics if mpi_metric[k] == mpi),
                           key=lambda k: (test_pos[k.rsplit(':', 1)[0]], metrics[k].order)):
            metric = metrics[mkey]
            ref_test = mkey.rsplit(':', 1)[0]
            ratios = ratio_to_best(metric, {env: f.value for env, f in figures[mkey].items()})
            cells = {}
            for env in envs:
                found = figures[mkey].get(env)
                if found is not None:
                    cells[env] = Cell(figure=found, ratio=ratios.get(env))
                else:
                    st = status.get((ref_test, env))
                    cells[env] = Cell(missing=st if st and st != 'passed' else NOT_MEASURED)
            table.rows.append(Row(metric, cells))
        for env in envs:
            used = sorted({str(tc['nr_transports']) for tc in sec.cases
                           if tc.get('environ') == env and tc.get('nr_transports')})
            table.transports[env] = ', '.join(used) if used else 'none reported'
        if table.rows:
            sec.tables.append(table)
    by_test: dict[str, dict[str, list[str]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for tc in sec.cases:
        if test_name(tc) not in measured_tests:
            by_test[test_name(tc)][case_status(tc)].append(str(tc.get('environ')))
    grouped: dict[str, list[str]] = collections.defaultdict(list)
    for test in sorted(by_test, key=lambda t: test_pos[t]):
        text = '; '.join(f'{st}: {_env_list(envs, sec.order)}' for st, envs in sorted(by_test[test].items()))
        grouped[text].append(test)
    sec.unmeasured = [(tests, text) for text, tests in grouped.items()]


# -- the whole report -----------------------------------------------------------------------------------------------

@dataclass
class Report:
    """Everything the page, the Markdown and the CSV files show (made by :func:`netregress_postrun.report.collect`)."""
    run_dir: Path
    reports: list[RunReport]
    sections: list[Section]
    host: dict
    host_id: str
    builds: list[dict]
    failures: list[dict]
    hidden: list[dict]
    retried: list[dict]
    skips: list[tuple[str, list[str]]]
    generated: str
    #: per run report: its comparisons with earlier runs (:func:`netregress_postrun.reporthistory.ask_history`)
    comparisons: list[dict] = field(default_factory=list)
    history_note: str = ''
    #: the days of stored runs the history figures, history.csv and the shifts cover (the last pass is looked for
    #: as far back)
    history_days: int = 0
    #: figures whose latest runs shifted (:func:`netregress_postrun.reporthistory.find_shifts`), of how many searched
    shifts: list = field(default_factory=list)
    shift_series: int = 0


# -- how a cell reads -----------------------------------------------------------------------------------------------

def fmt_number(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return '-'
    a = abs(v)
    if a >= 1000:
        return f'{v:,.0f}'
    if a >= 100:
        return f'{v:.1f}'
    if a >= 1:
        return f'{v:.2f}'
    return f'{v:.3f}' if a >= 0.01 else f'{v:.3g}'


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return ''
    return f'{r:.2f}' if r >= 0.1 else f'{r:.2g}'


def row_label(metric: Metric) -> str:
    return f'{metric.label} ({metric.unit})' if metric.unit else metric.label


def cell_text(cell: Cell) -> str:
    """'12.3 (0.85) fail' (the unit is the row's) / 'skipped'."""
    if cell.figure is None:
        return cell.missing
    ratio = f' ({fmt_ratio(cell.ratio)})' if cell.ratio is not None else ''
    return f'{fmt_number(cell.figure.value)}{ratio} {cell.figure.verdict}'

def bounds(fig: Figure) -> tuple[float | None, float | None]:
    """The band in the figure's unit (ReFrame's: reference x (1 + lower) .. reference x (1 + upper))."""
    if fig.reference is None or fig.verdict == 'no reference':
        return None, None
    lo = None if fig.lower is None else fig.reference * (1 + fig.lower)
    hi = None if fig.upper is None else fig.reference * (1 + fig.upper)
    return lo, hi

