"""``tools/refs accept``: after a deliberate change (a new MPI release, a firmware update), replace the references
of one environment, partition or interconnect of a system from the runs that measured it, say why, and keep that
beside the references.

    tools/refs accept REPORT... --reason TEXT --environ openmpi5 [--partition P] [--interconnect I] [--system S]
                                [--dir D] [--dry-run]

At least one selector (``--environ``, ``--partition``, ``--interconnect``) names the scope; the figures of the
reports inside it replace the reference file's values there (several reports: their median; an entry that exists
keeps its tolerance and comment, a new one gets the interconnect's default band, as ``tools/refs write`` does),
entries in the scope the new runs no longer measure are removed, and every entry outside the scope is left as it
was. Figures of cases that failed in the performance stage are taken: leaving the old band is what a deliberate
change does. It prints a unified diff and the entries it removed, and appends to the file's ``changes:`` list
(docs/references.md) when, who, the reason, the scope, the reports and every entry changed, added or removed;
``tools/report`` shows the latest. It refuses, writing nothing:

* a case in the scope that failed anywhere but the performance stage (an error, a failed sanity check: the MPI
  library on the wrong transport, traffic that missed the interconnect, a crash), or failed so and passed on a
  retry, naming each with its reason: that is a fault, not a change;
* figures that are not finite numbers >= 0, and figures whose check did not declare what they are (a report from
  before ``nr_figures``);
* a scope the reports do not measure at all (nothing to accept: the selector is probably misspelt);
* no reason, or one of more than one line.

The file is read, changed and written holding the reference directory's lock (:func:`.refswrite.locked`), and
written atomically: a temporary file in the same directory, flushed and fsynced, then ``os.replace``; on any error
the old file is intact. Reference files may hold one-sided bands (``lower`` or ``upper`` null: unbounded on that
side); accept keeps them as they are.
"""
from __future__ import annotations

import copy
import datetime
import getpass
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from netregress import datafiles
from netregress.judge import references
from netregress.measure import interconnects
from . import runreport
from .refswrite import (Measurement, RefsError, check_figures, check_report, dump, locked, measurements, merge,
                        read_reference_text, reference_path, refuse_undeclared, unified_diff, validate_text,
                        write_reference_file)

#: The longest reason accept keeps (one line of the audit trail).
REASON_MAX = 500


@dataclass(frozen=True)
class Scope:
    """Which references accept replaces: every selector given must match (None: any)."""
    environ: str | None = None
    partition: str | None = None
    interconnect: str | None = None

    def __post_init__(self) -> None:
        if not (self.environ or self.partition or self.interconnect):
            raise RefsError('accept needs a scope: --environ, --partition or --interconnect (at least one)')
        for option, value in self.selectors().items():
            try:
                datafiles.checked_name(value, f'--{option}')
            except datafiles.UnsafeName as err:
                raise RefsError(str(err)) from None

    def selectors(self) -> dict[str, str]:
        """The selectors given, {'partition'|'environ'|'interconnect': name}."""
        return {k: v for k, v in (('partition', self.partition), ('environ', self.environ),
                                  ('interconnect', self.interconnect)) if v}

    def holds(self, partition: str | None, environ: str | None, interconnect: str | None) -> bool:
        return ((self.partition is None or partition == self.partition)
                and (self.environ is None or environ == self.environ)
                and (self.interconnect is None or interconnect == self.interconnect))

    def __str__(self) -> str:
        return ', '.join(f'{k} {v}' for k, v in self.selectors().items())


def changed_by_design(tc: Mapping) -> bool:
    """A case whose figures accept takes: it passed, or it failed only in the performance stage (its figures left
    the old band, or had none). Fixtures never."""
    if tc.get('fixture'):
        return False
    return tc.get('result') == 'pass' or (tc.get('result') == 'fail' and tc.get('fail_phase') == 'performance')


def failed_cases(reps: Iterable[runreport.RunReport], system: str, scope: Scope | None = None) -> list[str]:
    """'<case>: <reason>' of every case in the scope (None: all) whose failure is a fault, not a change: it failed
    (or was aborted) outside the performance stage, or failed so and passed on a retry."""
    out = []
    for rep in reps:
        for tc in rep.cases:
            if tc.get('system') != system or not tc.get('interconnect') or tc.get('fixture'):
                continue
            if scope and not scope.holds(tc.get('partition'), tc.get('environ'), tc.get('interconnect')):
                continue
            if tc.get('result') in ('fail', 'abort') and not changed_by_design(tc):
                out.append(f'{runreport.case_name(tc)} ({rep.path.name}): {runreport.failure(tc)}')
        for tc in rep.hidden.values():
            if tc.get('system') == system and (not scope or scope.holds(tc.get('partition'), tc.get('environ'),
                                                                        tc.get('interconnect'))):
                out.append(f'{runreport.case_name(tc)} ({rep.path.name}): failed, then passed on a retry: '
                           f'{runreport.failure(tc)}')
    return out


def _leaves(tree: Mapping) -> Iterable[tuple[str, str, str, str, str, int | None]]:
    """(partition, environ, interconnect, test, metric, size or None) of every entry of a reference tree."""
    for part, envs in (tree or {}).items():
        for env, ics in (envs or {}).items():
            for ic, tests in (ics or {}).items():
                for test, metrics in (tests or {}).items():
                    for metric, spec in (metrics or {}).items():
                        sizes = spec.get('sizes') if isinstance(spec, Mapping) else None
                        if sizes:
                            for size in sizes:
                                yield part, env, ic, test, metric, size
                        else:
                            yield part, env, ic, test, metric, None


def _values(doc: Mapping, scope: Scope) -> dict[str, str]:
    """{'part/env/ic/test/metric[@size]': 'value unit'} of the entries of ``doc`` in ``scope``."""
    tree = doc.get('references') or {}
    out = {}
    for part, env, ic, test, metric, size in _leaves(tree):
        if scope.holds(part, env, ic):
            spec = tree[part][env][ic][test][metric]
            entry = spec['sizes'][size] if size is not None else spec
            unit = entry.get('unit') or spec.get('unit') or ''
            out[f'{part}/{env}/{ic}/{test}/{references.metric_name(metric, size)}'] = \
                f'{entry.get("value")} {unit}'.strip()
    return out


def remove_stale(doc: dict, scope: Scope, measured: set[tuple]) -> list[str]:
    """Remove from ``doc`` the entries in ``scope`` that are not ``measured`` ((part, env, ic, test, metric@size)
    keys); return them as 'part/env/ic/test/metric[@size]', pruning emptied levels."""
    tree = doc.get('references') or {}
    removed = []
    for part, env, ic, test, metric, size in list(_leaves(tree)):
        name = references.metric_name(metric, size)
        if not scope.holds(part, env, ic) or (part, env, ic, test, name) in measured:
            continue
        node = tree[part][env][ic][test]
        if size is None:
            del node[metric]
        else:
            del node[metric]['sizes'][size]
            if not node[metric]['sizes']:
                del node[metric]
        removed.append(f'{part}/{env}/{ic}/{test}/{name}')
        for path in ((part, env, ic, test), (part, env, ic), (part, env), (part,)):
            parent = tree
            for key in path[:-1]:
                parent = parent[key]
            if not parent[path[-1]]:
                del parent[path[-1]]
    return removed


def check_entries(doc: Mapping, where: str) -> None:
    """Every entry has a numeric value, a unit and a comment, and lower <= 0 <= upper where bounded (null: an
    unbounded side); :class:`RefsError` naming the first that does not."""
    for part, env, ic, test, metric, size in _leaves(doc.get('references') or {}):
        spec = doc['references'][part][env][ic][test][metric]
        entry = spec['sizes'][size] if size is not None else spec
        name = f'{where}: {part}/{env}/{ic}/{test}/{references.metric_name(metric, size)}'
        if not isinstance(entry.get('value'), (int, float)) or isinstance(entry.get('value'), bool):
            raise RefsError(f'{name}: value {entry.get("value")!r} is not a number')
        lower, upper = entry.get('lower'), entry.get('upper')
        if (lower is not None and not lower <= 0) or (upper is not None and not upper >= 0):
            raise RefsError(f'{name}: need lower <= 0 <= upper (or null), got {lower}, {upper}')
        if not (entry.get('unit') or spec.get('unit')) or not (entry.get('comment') or spec.get('comment')):
            raise RefsError(f'{name}: no unit or no comment')


def checked_reason(reason: str | None, option: str = '--reason') -> str:
    """The reason of a change given as ``option``, one line of text (:class:`RefsError` for none, several lines,
    or too long)."""
    text = (reason or '').strip()
    if not text:
        raise RefsError(f'accept needs {option}: why the references change (a new MPI release, a firmware update)')
    if any(ch in text for ch in '\n\r') or not text.isprintable():
        raise RefsError(f'{option}: one line of printable text')
    if len(text) > REASON_MAX:
        raise RefsError(f'{option}: {len(text)} characters, at most {REASON_MAX}')
    return text


def who() -> str:
    """'user@host' of whoever accepts (under sudo, the user who ran it)."""
    try:
        user = os.environ.get('SUDO_USER') or getpass.getuser()
    except (KeyError, OSError):
        user = 'unknown'
    return f'{user}@{socket.gethostname()}'


def audit_entry(before: Mapping, after: Mapping, scope: Scope, reason: str, reports: list[Path],
                author: str, when: str) -> dict | None:
    """The ``changes:`` entry of an accepted change (None when no value in the scope changes): when, who, why,
    the scope, the reports and every entry changed ('old -> new'), added or removed."""
    old, new = _values(before, scope), _values(after, scope)
    figures = ([f'{k}: {old[k]} -> {new[k]}' for k in sorted(old.keys() & new.keys()) if old[k] != new[k]]
               + [f'{k}: added, {new[k]}' for k in sorted(new.keys() - old.keys())]
               + [f'{k}: removed, was {old[k]}' for k in sorted(old.keys() - new.keys())])
    if not figures:
        return None
    return {'when': when, 'who': author, 'reason': reason, 'scope': scope.selectors(),
            'reports': [str(p) for p in reports], 'figures': figures}


def _accepted(path: Path, system: str, found: list[Measurement], table: interconnects.InterconnectTable,
              scope: Scope, reason: str, reports: list[Path], author: str, when: str
              ) -> tuple[str, str, list[str]]:
    """(text before, text after, removed entries) of the reference file with the scope replaced and the change
    appended to its ``changes:``."""
    before, data = read_reference_text(path)
    doc = copy.deepcopy(data or {})
    measured = {(m.partition, m.environ, m.interconnect, m.test, m.metric) for m in found}
    try:
        removed = remove_stale(doc, scope, measured)
        new = merge(doc, system, found, table)
        entry = audit_entry(data or {}, new, scope, reason, reports, author, when)
        if entry is not None:
            new['changes'] = [*(new.get('changes') or []), entry]
        after = dump(new)
    except (AttributeError, TypeError, KeyError) as err:
        raise RefsError(f'{path}: malformed reference tree ({err}): fix it by hand') from None
    check_entries(references.load_yaml(after), str(path))
    validate_text(after, system, path)
    return before, after, removed


def accept(reports: list[Path], directory: Path, table: interconnects.InterconnectTable, scope: Scope, *,
           reason: str | None, system: str | None = None, dry_run: bool = False, author: str | None = None,
           when: str | None = None) -> tuple[str, list[str], int]:
    """Replace the references of ``scope`` in the system's reference file from ``reports`` and record why; return
    (unified diff, removed entries, figures used). :class:`RefsError` (nothing written) on a refusal."""
    reason = checked_reason(reason)
    reps = [runreport.load(p) for p in reports]
    found: list[Measurement] = []
    for rep in reps:
        check_report(rep.path, rep.data, changed_by_design)
        got = measurements(rep.data, changed_by_design)
        check_figures(rep.path, got)
        found += got
    systems = sorted({str(tc['system']) for rep in reps for tc in rep.cases
                      if tc.get('system') and tc.get('interconnect')})
    if system is None:
        if len(systems) != 1:
            raise RefsError(f'the reports measure {len(systems)} systems ({", ".join(systems) or "none"}): name '
                            f'one with --system')
        system = systems[0]
    path = reference_path(system, directory)
    failed = failed_cases(reps, system, scope)
    if failed:
        raise RefsError('\n'.join(f'refusing the figures of failed test case {line} (a fault, not a change: only '
                                  f'a performance failure is accepted)' for line in failed))
    found = [m for m in found if m.system == system and scope.holds(m.partition, m.environ, m.interconnect)]
    if not found:
        raise RefsError(f'the reports measure nothing of {system} in the scope {scope}: nothing to accept')
    refuse_undeclared(found)
    author = author or who()
    when = when or datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')
    args = (path, system, found, table, scope, reason, reports, author, when)
    before, after, removed = _accepted(*args)
    if not dry_run and after != before:
        with locked(directory):
            before, after, removed = _accepted(*args)     # again: another writer may have changed it meanwhile
            if after != before:
                write_reference_file(path, after)
    return unified_diff(path, before, after), removed, len(found)
