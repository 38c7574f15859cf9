"""The ReFrame JSON run report, read in one place: its test cases, which attempt of each counts, and its figures.

Every post-run module reads run reports through this one (report, runsummary, refstool, seed004; coverage and
postmaint too). What it settles once:

* **Loading** (:func:`load`, :func:`read`): a missing, empty, truncated or malformed file, or JSON that is not a
  run report, is a :class:`RunReportError` whose message is one line naming the file.
* **Finding** (:func:`find`): a run directory holds ``report-<system>.json`` (``tools/validate``); any other path
  must be a run report itself (``run/ci/report.json``, ``reframe --report-file``).
* **Attempts** (:func:`testcases`, :func:`analyse`): ReFrame writes one ``runs[]`` entry per attempt
  (``--max-retries``); the *last* attempt of a case (same :func:`case_key`) decides. A case that failed outside
  the performance stage and passed on a retry is *hidden* (the failure counts), unless its check marked the
  failure as a declared known fault of its environment (:data:`KNOWN_FAILURE_MARK`): then it is *excused*
  (listed, the run not failed for it); one that failed only its performance check is *retried*.
* **Names** (:func:`case_name`, :func:`test_name`, :func:`case_status`, :func:`failure`).
* **Figures** (:func:`perfvalues`): each ``perfvalues`` entry ``"system:partition:var": [value, ref, lower, upper,
  unit, result]`` as a :class:`PerfValue`; with :func:`declaration`, what the check says the figure is (its
  ``nr_figures`` entry: kind, label, which direction is better), ``undeclared`` for reports that predate it.

    from netregress_postrun import runreport
    rep = runreport.load(path)                 # RunReportError: '<path>: truncated JSON (...)'
    for tc in rep.cases:                       # the last attempt of every case
        for pv in runreport.perfvalues(tc):    # PerfValue(system, partition, var, value, ref, lower, ...)
            decl = runreport.declaration(tc, pv.var)   # Declaration(kind, label, better)
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from reframe.utility import nodelist_abbrev, nodelist_expand

from netregress.measure.results import KNOWN_FAILURE_MARK

#: The run reports of a run directory (tools/validate writes one per system).
REPORT_GLOB = 'report-*.json'
#: Kinds a check may declare for a figure (netregress.judge.figures); :data:`UNDECLARED` for a report without them.
KINDS = ('throughput', 'cpu_bound', 'latency', 'ratio')
UNDECLARED = 'undeclared'
#: The test-case key holding the check's figure declarations.
DECLARATIONS = 'nr_figures'


class RunReportError(Exception):
    """A run report cannot be read or is not one; the message is one line and names the file."""


# -- loading --------------------------------------------------------------------------------------------------------

def read(path: Path) -> dict:
    """The JSON document of the run report at ``path``, checked to be one (a ``runs`` list)."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise RunReportError(f'{path}: no such run report') from None
    except IsADirectoryError:
        raise RunReportError(f'{path}: a directory, not a run report') from None
    except (OSError, UnicodeDecodeError) as err:
        raise RunReportError(f'{path}: unreadable run report ({err})') from None
    if not text.strip():
        raise RunReportError(f'{path}: empty file, not a run report (a run that stopped before ReFrame wrote it?)')
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        # a string still open at the end, or an error where the text ends: the file stops short
        cut = err.pos >= len(text.rstrip()) or err.msg.startswith('Unterminated string')
        what = 'truncated JSON' if cut else 'malformed JSON'
        raise RunReportError(f'{path}: unreadable run report: {what} ({err.msg} at line {err.lineno} column '
                             f'{err.colno}; a run that stopped while ReFrame wrote it?)') from None
    if not isinstance(data, dict) or not isinstance(data.get('runs'), list):
        raise RunReportError(f'{path}: not a ReFrame run report (no "runs" list)')
    check_structure(data, path)
    return data


def check_structure(data: Mapping, path: Path | str) -> None:
    """:class:`RunReportError` naming the entry (``runs[0].testcases[3]``) where a run report is not shaped as
    ReFrame writes one: runs and test cases are mappings, ``testcases`` a list, ``perfvalues`` and ``nr_figures``
    mappings, ``session_info`` a mapping."""
    if 'session_info' in data and not isinstance(data['session_info'], (dict, type(None))):
        raise RunReportError(f'{path}: session_info: expected an object, got {type(data["session_info"]).__name__}')
    for i, run in enumerate(data.get('runs') or []):
        if not isinstance(run, dict):
            raise RunReportError(f'{path}: runs[{i}]: expected an object, got {type(run).__name__}')
        cases = run.get('testcases')
        if cases is not None and not isinstance(cases, list):
            raise RunReportError(f'{path}: runs[{i}].testcases: expected a list, got {type(cases).__name__}')
        for j, tc in enumerate(cases or []):
            where = f'{path}: runs[{i}].testcases[{j}]'
            if not isinstance(tc, dict):
                raise RunReportError(f'{where}: expected an object, got {type(tc).__name__}')
            for key in ('perfvalues', DECLARATIONS):
                if tc.get(key) is not None and not isinstance(tc[key], dict):
                    raise RunReportError(f'{where}.{key}: expected an object, got {type(tc[key]).__name__}')


def percent(text: str) -> float:
    """An argparse ``type`` for a threshold in percent: a finite number >= 0 (``nan``, ``inf``, ``-5`` refused)."""
    import argparse
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'{text!r} is not a number') from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f'{text!r}: a threshold is a finite number of percent >= 0')
    return value


def find(path: Path) -> list[Path]:
    """The run reports at ``path``: a run directory's ``report-*.json``, or ``path`` itself when it is a file."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob(REPORT_GLOB))
        if not files:
            raise RunReportError(f'{path}: no ReFrame run report ({REPORT_GLOB}) in it; a run still going, or one '
                                 f'that stopped before ReFrame wrote its report, has none')
        return files
    if not path.exists():
        raise RunReportError(f'{path}: no such file or directory (give a run directory holding '
                             f'{REPORT_GLOB}, or a ReFrame JSON run report)')
    return [path]


@dataclass
class RunReport:
    """One ReFrame run report: its document and what :func:`analyse` makes of it."""
    path: Path
    data: Mapping
    analysis: Mapping

    @classmethod
    def from_data(cls, data: Mapping, path: Path | str = '<memory>') -> 'RunReport':
        return cls(Path(path), data, analyse(data))

    @property
    def session(self) -> Mapping:
        return self.data.get('session_info') or {}

    @property
    def final(self) -> dict[tuple, Mapping]:
        """:func:`case_key` -> the last attempt of that case."""
        return self.analysis['final']

    @property
    def cases(self) -> list[Mapping]:
        """The last attempt of every test case, in the order of their first attempt."""
        return list(self.analysis['final'].values())

    @property
    def hidden(self) -> dict[tuple, Mapping]:
        """Cases that failed outside the performance stage and passed on a retry (their first such failure)."""
        return self.analysis['hidden']

    @property
    def excused(self) -> dict[tuple, Mapping]:
        """Cases that passed on a retry after a failure their check marked as a declared known fault."""
        return self.analysis['excused']

    @property
    def retried(self) -> dict[tuple, Mapping]:
        """Cases that passed on a retry after failing only their performance check (their first failure)."""
        return self.analysis['retried']

    @property
    def attempts(self) -> list[Mapping]:
        """Every attempt of every case, in the report's order."""
        return list(testcases(self.data))


def load(path: Path) -> RunReport:
    """The run report at ``path`` (:func:`read`)."""
    return RunReport.from_data(read(path), path)


def load_all(path: Path) -> list[RunReport]:
    """Every run report at ``path`` (:func:`find`)."""
    return [load(p) for p in find(path)]


# -- attempts -------------------------------------------------------------------------------------------------------

def testcases(report: Mapping) -> Iterator[Mapping]:
    """Every attempt of every test case (each ``runs[]`` entry is one attempt of the cases it holds)."""
    for run in report.get('runs') or []:
        yield from run.get('testcases') or []


def case_key(tc: Mapping) -> tuple:
    """What makes two attempts the same case: (unique name, system, partition, environment)."""
    return (tc.get('unique_name') or tc.get('display_name'), tc.get('system'), tc.get('partition'),
            tc.get('environ'))


def analyse(report: Mapping) -> dict:
    """final: last attempt per case; first: first attempt per case (what a run with retries off ends with);
    hidden: cases that passed on a retry after a non-performance failure; excused: those of them whose every
    failed attempt was marked a declared known fault; retried: cases that passed on a retry after a performance
    failure (first failure kept)."""
    final: dict[tuple, Mapping] = {}
    first: dict[tuple, Mapping] = {}
    first_failure: dict[tuple, Mapping] = {}
    bad_attempt: dict[tuple, Mapping] = {}
    unexcused: set[tuple] = set()
    for tc in testcases(report):
        key = case_key(tc)
        final[key] = tc
        first.setdefault(key, tc)
        if tc.get('result') == 'fail':
            first_failure.setdefault(key, tc)
            if tc.get('fail_phase') != 'performance':
                bad_attempt.setdefault(key, tc)
                if KNOWN_FAILURE_MARK not in str(tc.get('fail_reason') or ''):
                    unexcused.add(key)
    hidden = {k: bad_attempt[k] for k, tc in final.items() if k in bad_attempt and tc.get('result') == 'pass'}
    excused = {k: tc for k, tc in hidden.items() if k not in unexcused}
    hidden = {k: tc for k, tc in hidden.items() if k in unexcused}
    retried = {k: first_failure[k] for k, tc in final.items()
               if k in first_failure and k not in hidden and k not in excused and tc.get('result') == 'pass'}
    return {'final': final, 'first': first, 'hidden': hidden, 'excused': excused, 'retried': retried}


def final_cases(report: Mapping) -> list[Mapping]:
    """The last attempt of every test case of a report document."""
    return list(analyse(report)['final'].values())


# -- names ----------------------------------------------------------------------------------------------------------

def case_name(tc: Mapping) -> str:
    """``'<display name> @<system>:<partition>+<environ>'``, ReFrame's own way of naming a case."""
    return f"{tc.get('display_name')} @{tc.get('system')}:{tc.get('partition')}+{tc.get('environ')}"


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
    result = str(tc.get('result'))
    return {'fail': 'failed', 'skip': 'skipped', 'abort': 'aborted', 'pass': 'passed'}.get(result, result)


def one_line(reason: str | None) -> str:
    """A failure reason on one line; never empty."""
    text = ' '.join((reason or '').split())
    return text or 'no reason recorded by ReFrame'


def job_nodes(tc: Mapping) -> list[str]:
    """The nodes the case's job ran on (ReFrame's ``job_nodelist``: a list, or a Slurm host list string)."""
    raw = tc.get('job_nodelist', tc.get('nodelist'))
    if isinstance(raw, str):
        return list(nodelist_expand(raw)) if raw.strip() else []
    return [str(n) for n in raw] if isinstance(raw, (list, tuple)) else []


def failure(tc: Mapping) -> str:
    """'<phase> error: <reason> [nodes: <host list>]' on one line (ReFrame's own reasons often start with '<phase>
    error:'); the nodes the job ran on, where it got any, so that every failure names where it happened."""
    reason, phase = one_line(tc.get('fail_reason')), tc.get('fail_phase') or 'unknown stage'
    text = reason if reason.startswith(f'{phase} error') else f'{phase} error: {reason}'
    nodes = job_nodes(tc)
    return f'{text} [nodes: {nodelist_abbrev(nodes)}]' if nodes else text


def failure_line(tc: Mapping) -> str:
    """'<case name>: <failure>', the one line every post-run tool writes for a failed case."""
    return f'{case_name(tc)}: {failure(tc)}'


# -- figures --------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PerfValue:
    """One ``perfvalues`` entry of a test case. ``value`` is None when ReFrame could not evaluate the figure (not a
    finite number); ``lower``/``upper`` are fractions of ``ref`` (None: unbounded on that side, or no band)."""
    system: str
    partition: str
    var: str                  # the performance variable, with '@size' where it has one
    value: float | None
    ref: float | None
    lower: float | None
    upper: float | None
    unit: str
    result: str | None        # ReFrame's verdict of the figure: 'pass', 'fail' (None when malformed)
    #: the value as the report holds it (``value`` is None for NaN, infinity, text: ``raw`` says which)
    raw: object = None

    @property
    def banded(self) -> bool:
        """Whether ReFrame judged the figure against a band (a reference with a bound on either side)."""
        return self.lower is not None or self.upper is not None


def _number(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def perfvalues(tc: Mapping) -> list[PerfValue]:
    """Every ``perfvalues`` entry of ``tc``, in the check's order (malformed ones with value None)."""
    out = []
    for key, entry in (tc.get('perfvalues') or {}).items():
        parts = str(key).split(':', 2)
        system, partition = (parts[0], parts[1]) if len(parts) == 3 else (tc.get('system'), tc.get('partition'))
        try:
            value, ref, lower, upper, unit, result = entry
        except (TypeError, ValueError):
            out.append(PerfValue(str(system), str(partition), parts[-1], None, None, None, None, '', None))
            continue
        out.append(PerfValue(str(system), str(partition), parts[-1], _number(value), ref, lower, upper,
                             '' if unit is None else str(unit), result, value))
    return out


@dataclass(frozen=True)
class Declaration:
    """What a check declares a figure to be (its ``nr_figures`` entry)."""
    kind: str                 # one of KINDS, or UNDECLARED
    label: str                # how a person reads it ('8 B latency (nr-mpitest)'); the raw name when undeclared
    better: str | None        # 'higher' or 'lower'; None when undeclared

    @property
    def declared(self) -> bool:
        return self.kind != UNDECLARED


def declaration(tc: Mapping, var: str) -> Declaration:
    """The declaration of figure ``var`` (with its '@size') of ``tc``; ``undeclared`` (raw name ``<test> <var>``)
    when the case carries none for it (a report that predates ``nr_figures``) or the entry is malformed."""
    decls = tc.get(DECLARATIONS)
    entry = decls.get(var) if isinstance(decls, Mapping) else None
    if isinstance(entry, Mapping) and entry.get('kind') in KINDS and entry.get('better') in ('higher', 'lower'):
        return Declaration(str(entry['kind']), str(entry.get('label') or f'{test_name(tc)} {var}'),
                           str(entry['better']))
    return Declaration(UNDECLARED, f'{test_name(tc)} {var}', None)
