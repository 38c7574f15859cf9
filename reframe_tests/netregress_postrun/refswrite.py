"""Report -> reference conversion: the figures of ReFrame run reports merged into reference files.

:func:`measurements` takes every measured performance variable of every netregress test case whose kernel and
provenance were fine (:func:`usable`: passed, or failed only because its reference was missing); :func:`merge`
folds them into a reference document (several measurements of one variable: their median; a new entry gets the
interconnect's default tolerance and comment from ``config/interconnects.yaml``, an existing one keeps its own
unless ``reset_tolerance``); :func:`write` checks every file, prints its diff and writes it atomically. Figures
whose check did not declare them (``nr_figures``) are refused: their band kind is unknown. ``tools/refs write`` and
``diff`` are this module (:mod:`.refstool`); ``accept`` (:mod:`.refsaccept`) and the host-baseline commands
(:mod:`.refsbaseline`) build on it.
"""
from __future__ import annotations

import contextlib
import copy
import difflib
import io
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

import yaml

from netregress.judge import baselines, references
from netregress.measure import interconnects
from netregress import statefiles
from . import runreport

HEADER = ('# netregress reference performance for system {system!r} (schema {schema}).\n'
          '# Written by tools/refs from ReFrame run reports; values come from real runs on that system.\n'
          '# Keys: partition / environment / interconnect / test / metric [/ sizes / bytes].\n'
          '# lower/upper are fractions of value; edit them and the comment by hand, tools/refs keeps them.\n')


@dataclass(frozen=True)
class Measurement:
    system: str
    partition: str
    environ: str
    interconnect: str
    test: str
    metric: str            # may carry @size
    value: float
    unit: str
    oversubscribed: bool = False
    #: what the check declared the figure to be (``nr_figures``), ``undeclared`` for a report that predates it
    figure_kind: str = runreport.UNDECLARED
    #: which direction is better, as the check declared it; None for an undeclared figure
    better: str | None = None
    #: the check judged it by a band of its own (``fixed_references``), not by a reference
    fixed: bool = False

    @property
    def kind(self) -> str:
        """Band kind: 'oversubscribed', else the declared kind ('throughput', 'cpu_bound', 'latency', 'ratio')."""
        return 'oversubscribed' if self.oversubscribed else self.figure_kind

    @property
    def where(self) -> str:
        return f'{self.system}:{self.partition}+{self.environ} {self.interconnect}'


class RefsError(Exception):
    """Figures that may not become references, or a reference file that cannot be written; one line per reason."""


def refuse_undeclared(found: Iterable[Measurement]) -> None:
    """:class:`RefsError` naming every figure whose check did not declare what it is (its band needs the kind)."""
    lines = sorted({f'{m.test} {m.metric} ({m.where}): undeclared figure (the run report predates nr_figures; '
                    f'its band kind is unknown): rerun the check to record it' for m in found
                    if m.figure_kind == runreport.UNDECLARED})
    if lines:
        raise RefsError('\n'.join(lines))


def usable(tc: Mapping) -> bool:
    """A test case whose numbers may become references: it passed, or its only failure was a missing reference
    (a site's first baseline). A figure that failed its band, or a run whose sanity failed, never becomes one."""
    if tc.get('fixture'):
        return False
    if tc.get('result') == 'pass':
        return True
    reason = tc.get('fail_reason') or ''
    return (tc.get('result') == 'fail' and tc.get('fail_phase') == 'performance'
            and 'no reference for' in reason and 'failed to meet reference' not in reason)


def measurements(report: Mapping, accepts: Callable[[Mapping], bool] = usable) -> list[Measurement]:
    """All netregress performance values of the cases ``accepts`` takes (default: :func:`usable`) of one ReFrame
    run report (the last attempt of each case)."""
    out = []
    for tc in runreport.final_cases(report):
        if not accepts(tc) or not tc.get('ref_test') or not tc.get('interconnect'):
            continue
        for pv in runreport.perfvalues(tc):
            if pv.value is None:
                continue
            out.append(Measurement(system=pv.system, partition=pv.partition, environ=tc['environ'],
                                   interconnect=tc['interconnect'], test=tc['ref_test'], metric=pv.var,
                                   value=pv.value, unit=pv.unit, oversubscribed=bool(tc.get('oversubscribed')),
                                   figure_kind=(decl := runreport.declaration(tc, pv.var)).kind,
                                   better=decl.better,
                                   fixed=pv.var in (tc.get('fixed_references') or {})))
    return out


MACHINE_INDEPENDENT = ('a link-bound stream on a fabric with a line rate: what the link carries, on any machine that '
                       'runs this system; judged from the first run, before the host baseline (the interconnect\'s '
                       'throughput tolerance)')


def machine_independent(m: Measurement, table: interconnects.InterconnectTable) -> bool:
    """Whether a figure holds on any machine that runs its system: a link-bound stream on a fabric with a line
    rate (a shaped or physical link carries what it carries, whatever the CPUs). The figures a check judges by
    its own band (a ratio to a peer in the same job, a fraction of the line rate) are machine-independent too,
    but for every system: they stay in the checks (``fixed_bands``), not in a system's file. A latency or a
    ratio to a yardstick is not: the CPUs move it (LAM/MPI's gige round trip against TCP's: 1.72-2.82 on one host)."""
    if m.fixed or m.kind != 'throughput':
        return False
    return bool(table.interconnect(m.interconnect).rate_mbps)


def _round(value: float) -> float:
    return float(f'{value:.4g}')


def merge(data: Mapping | None, system: str, found: Iterable[Measurement],
          table: interconnects.InterconnectTable, reset_tolerance: bool = False, comment: str | None = None) -> dict:
    """Return a new reference document: ``data`` updated with the medians of ``found`` (a new entry's comment:
    ``comment``, else the interconnect's tolerance comment)."""
    doc = copy.deepcopy(dict(data or {}))
    doc['schema'] = references.SCHEMA
    doc['system'] = system
    tree = doc.setdefault('references', {}) or {}
    doc['references'] = tree
    groups: dict[tuple, list[Measurement]] = {}
    for m in found:
        if m.system == system:
            groups.setdefault((m.partition, m.environ, m.interconnect, m.test, m.metric), []).append(m)
    for (part, env, ic, test, metric), ms in sorted(groups.items()):
        value = _round(statistics.median(m.value for m in ms))
        unit = ms[-1].unit
        kind = 'oversubscribed' if any(m.oversubscribed for m in ms) else ms[-1].figure_kind
        lower, upper, why = table.tolerance(ic, kind)
        why = comment or why
        base, size = references.split_metric(metric)
        node = tree.setdefault(part, {}).setdefault(env, {}).setdefault(ic, {}).setdefault(test, {})
        if size is None:
            entry = node.get(base)
            if entry is None or reset_tolerance or 'sizes' in entry:
                node[base] = {'value': value, 'lower': lower, 'upper': upper, 'unit': unit, 'comment': why}
            else:
                entry['value'] = value
                entry['unit'] = unit
        else:
            entry = node.get(base)
            if entry is None or 'sizes' not in entry:
                entry = node[base] = {'unit': unit, 'comment': why, 'sizes': {}}
            if reset_tolerance:
                entry['comment'] = why
            sizes = entry['sizes']
            old = sizes.get(size)
            if old is None or reset_tolerance:
                sizes[size] = {'value': value, 'lower': lower, 'upper': upper}
            else:
                old['value'] = value
            entry['sizes'] = dict(sorted(sizes.items()))
    return doc


class _Flow(dict):
    pass


class _Dumper(yaml.SafeDumper):
    """Never an alias: readers of reference files refuse them (an object met twice is written twice)."""

    def ignore_aliases(self, data) -> bool:
        return True


_Dumper.add_representer(_Flow, lambda d, data: d.represent_mapping('tag:yaml.org,2002:map', data.items(),
                                                                    flow_style=True))


def _flowify(node: object) -> object:
    if isinstance(node, dict):
        if node and all(k in ('value', 'lower', 'upper') for k in node):
            return _Flow(node)
        return {k: _flowify(v) for k, v in node.items()}
    return node


def dump(doc: Mapping) -> str:
    """YAML text of a reference document (per-size entries one line each)."""
    buf = io.StringIO()
    buf.write(HEADER.format(system=doc.get('system'), schema=references.SCHEMA))
    yaml.dump(_flowify(dict(doc)), buf, Dumper=_Dumper, sort_keys=False, width=118, default_flow_style=False)
    return buf.getvalue()


def check_report(source: object, report: Mapping, accepts: Callable[[Mapping], bool] = usable) -> None:
    """:class:`RefsError` naming the report and the figure when a case whose figures would become references
    (``accepts``, default :func:`usable`) holds a figure that is not a number: NaN, infinity or text never enter a
    reference or a baseline, and a run holding one is not recorded at all (its other figures came from the same
    run)."""
    for tc in runreport.final_cases(report):
        if not accepts(tc) or not tc.get('ref_test') or not tc.get('interconnect'):
            continue
        for pv in runreport.perfvalues(tc):
            if pv.value is None and pv.raw is not None:
                raise RefsError(f'{source}: {pv.partition}/{tc.get("environ")}/{tc["interconnect"]}/'
                                f'{tc["ref_test"]}/{pv.var}: {pv.raw!r} is not a finite figure')


def check_figures(source: object, found: Iterable[Measurement]) -> None:
    """:class:`RefsError` naming the report and the figure for a value that is not a finite number >= 0."""
    for m in found:
        try:
            baselines.figure_value(m.value, f'{source}: {m.partition}/{m.environ}/{m.interconnect}/{m.test}/'
                                            f'{m.metric}')
        except baselines.BaselineError as err:
            raise RefsError(str(err)) from None


def read_reference_text(path: Path) -> tuple[str, dict | None]:
    """(text, document) of an existing reference file ('' and None when there is none); :class:`RefsError` for one
    that is not valid YAML or not a mapping (a file cut to its header is a new file: its text stays in the diff)."""
    if path.is_symlink():
        raise RefsError(f'{path}: a symbolic link (to {os.readlink(path)}): refusing to write through it')
    if not path.exists():
        return '', None
    try:
        before = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise RefsError(f'{path}: unreadable ({err})') from None
    try:
        data = references.load_yaml(before) if before else None
    except yaml.YAMLError as err:
        raise RefsError(f'{path}: not valid YAML ({" ".join(str(err).split())}): fix or move it, nothing '
                        f'written') from None
    if data is not None and not isinstance(data, dict):
        raise RefsError(f'{path}: not a reference file (top level is {type(data).__name__}, not a mapping)')
    return before, data


def validate_text(text: str, system: str, path: Path) -> int:
    """Parse a reference document as the checks will, every entry; its number of references (:class:`RefsError`
    naming the entry otherwise)."""
    try:
        n = references.ReferenceSet(references.load_yaml(text), system, source=str(path)).count()
    except references.ReferenceError as err:
        raise RefsError(str(err)) from None
    if not n:
        raise RefsError(f'{path}: would hold no references')
    return n


def reference_path(system: str, directory: Path) -> Path:
    """The reference file of ``system`` in ``directory``; :class:`RefsError` for a system that is not a name."""
    try:
        return references.reference_file(system, directory)
    except references.ReferenceError as err:
        raise RefsError(str(err)) from None


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """The reference directory (made when missing) locked for a read-change-write of its files: ``flock`` on its
    ``.lock`` (:func:`netregress.statefiles.locked`, the lock ``tools/refs record`` holds on the state directory),
    so concurrent writers queue instead of losing each other's entries."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with statefiles.locked(directory):
            yield
    except statefiles.StateError as err:
        raise RefsError(str(err)) from None
    except OSError as err:
        raise RefsError(f'{directory}: cannot create the reference directory ({err.strerror})') from None


def read_reports(reports: list[Path]) -> list[Measurement]:
    """The usable figures of every report, each report checked first (:class:`RefsError`, :class:`RunReportError`)."""
    found: list[Measurement] = []
    for path in reports:
        doc = runreport.read(path)
        check_report(path, doc)
        got = measurements(doc)
        check_figures(path, got)
        found += got
    return found


def _merged(found: list[Measurement], directory: Path, table: interconnects.InterconnectTable,
            reset_tolerance: bool, comment: str | None = None) -> list[tuple[Path, str, str]]:
    """(path, text before, text after) of every reference file the figures change, each checked."""
    out = []
    for sys_name in sorted({m.system for m in found}):
        path = reference_path(sys_name, directory)
        before, data = read_reference_text(path)
        try:
            after = dump(merge(data, sys_name, found, table, reset_tolerance=reset_tolerance, comment=comment))
        except (AttributeError, TypeError) as err:
            raise RefsError(f'{path}: malformed reference tree ({err}): fix it by hand, nothing written') from None
        validate_text(after, sys_name, path)         # the written file must be readable by the checks
        out.append((path, before, after))
    return out


def write(reports: list[Path], directory: Path, table: interconnects.InterconnectTable, *,
          system: str | None = None, dry_run: bool = False, reset_tolerance: bool = False,
          only_machine_independent: bool = False) -> tuple[str, int]:
    """Merge the reports into the reference files; return (diff text, number of measurements used). Every file is
    checked before any is written, and merged again under the directory's lock (:func:`locked`) when it is; each
    is written atomically (never through a symlink). ``only_machine_independent``: just the figures
    :func:`machine_independent` takes (a host-baseline system's committed file). :class:`RefsError`: nothing
    written."""
    found = read_reports(reports)
    if system:
        found = [m for m in found if m.system == system]
    if only_machine_independent:
        found = [m for m in found if machine_independent(m, table)]
        if not found:
            raise RefsError(f'no machine-independent figure in {", ".join(map(str, reports))} (a link-bound '
                            f'stream on a fabric with a line rate): nothing to write')
    refuse_undeclared(found)
    comment = MACHINE_INDEPENDENT if only_machine_independent else None
    merged = _merged(found, directory, table, reset_tolerance, comment)
    if not dry_run and any(before != after for _, before, after in merged):
        with locked(directory):
            merged = _merged(found, directory, table, reset_tolerance, comment)
            for path, before, after in merged:
                if after != before:
                    write_reference_file(path, after)
    return ''.join(unified_diff(path, before, after) for path, before, after in merged), len(found)


def unified_diff(path: Path, before: str, after: str) -> str:
    """The unified diff of a reference file's text, ``<path> (before)`` to ``<path> (after)``."""
    return ''.join(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                        fromfile=f'{path} (before)', tofile=f'{path} (after)'))


def write_reference_file(path: Path, text: str) -> None:
    """``text`` into the reference file ``path`` atomically (:func:`netregress.statefiles.atomic_write`); hold
    :func:`locked` on its directory around the read-change-write."""
    try:
        statefiles.atomic_write(path, text, what='reference file')
    except statefiles.StateError as err:
        raise RefsError(str(err)) from None


def latest_report(run_dir: Path) -> Path | None:
    reports = sorted((run_dir / 'reports').glob('*.json'), key=lambda p: p.stat().st_mtime)
    return reports[-1] if reports else None
