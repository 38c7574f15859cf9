"""``tools/refs accept``: after a deliberate change (a new MPI version, a new fabric driver), replace the references
of one environment, partition or interconnect of a system from passing run reports, and nothing else.

    tools/refs accept REPORT... --environ openmpi5 [--partition P] [--interconnect I] [--system S] [--dir D]
                                [--dry-run]

At least one selector (``--environ``, ``--partition``, ``--interconnect``) names the scope; the figures of the
reports inside it replace the reference file's values there (several reports: their median; an entry that exists
keeps its tolerance and comment, a new one gets the interconnect's default band, as ``tools/refs write`` does),
entries in the scope the new runs no longer measure are removed, and every entry outside the scope is left as it
was. It prints a unified diff and the entries it removed. It refuses, writing nothing:

* figures of failed test cases, naming each case (a case that passed only on a retry after failing outside the
  performance stage counts as failed; a case whose only failure is a missing reference is a new figure and
  is accepted, as ``tools/refs write`` accepts it);
* figures whose check did not declare what they are (a report from before ``nr_figures``);
* a scope the reports do not measure at all (nothing to accept: the selector is probably misspelt).

The file is written atomically: a temporary file in the same directory, flushed and fsynced, then
``os.replace``; on any error the old file is intact. Reference files may hold one-sided bands (``lower`` or
``upper`` null: unbounded on that side); accept keeps them as they are.
"""
from __future__ import annotations

import copy
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

import yaml

from netregress.measure import interconnects
from netregress.judge import references
from . import runreport
from .refswrite import (Measurement, RefsError, usable, check_figures, check_report, dump, measurements, merge,
                        read_reference_text, refuse_undeclared, validate_text, write_reference_file)


@dataclass(frozen=True)
class Scope:
    """Which references accept replaces: every selector given must match (None: any)."""
    environ: str | None = None
    partition: str | None = None
    interconnect: str | None = None

    def __post_init__(self) -> None:
        if not (self.environ or self.partition or self.interconnect):
            raise RefsError('accept needs a scope: --environ, --partition or --interconnect (at least one)')

    def holds(self, partition: str | None, environ: str | None, interconnect: str | None) -> bool:
        return ((self.partition is None or partition == self.partition)
                and (self.environ is None or environ == self.environ)
                and (self.interconnect is None or interconnect == self.interconnect))

    def __str__(self) -> str:
        return ', '.join(f'{k} {v}' for k, v in (('partition', self.partition), ('environ', self.environ),
                                                  ('interconnect', self.interconnect)) if v)


def failed_cases(reps: Iterable[runreport.RunReport], system: str, scope: Scope) -> list[str]:
    """'<case>: <reason>' of every case in the scope whose figures may not become references."""
    out = []
    for rep in reps:
        for tc in rep.cases:
            if tc.get('system') != system or not tc.get('interconnect') or tc.get('fixture'):
                continue
            if not scope.holds(tc.get('partition'), tc.get('environ'), tc.get('interconnect')):
                continue
            if tc.get('result') in ('fail', 'abort') and not usable(tc):
                out.append(f'{runreport.case_name(tc)} ({rep.path.name}): {runreport.failure(tc)}')
        for tc in rep.hidden.values():
            if tc.get('system') == system and scope.holds(tc.get('partition'), tc.get('environ'),
                                                          tc.get('interconnect')):
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


def write_atomically(path: Path, text: str) -> None:
    """``text`` into ``path`` by a temporary file in its directory, fsync and ``os.replace``: readers see the old
    file or the new one, never a part; a symlink is refused (:func:`netregress.statefiles.atomic_write`)."""
    write_reference_file(path, text)


def accept(reports: list[Path], directory: Path, table: interconnects.InterconnectTable, scope: Scope, *,
           system: str | None = None, dry_run: bool = False) -> tuple[str, list[str], int]:
    """Replace the references of ``scope`` in the system's reference file from ``reports``; return (unified diff,
    removed entries, figures used). :class:`RefsError` (nothing written) on a refusal."""
    reps = [runreport.load(p) for p in reports]
    found: list[Measurement] = []
    for rep in reps:
        check_report(rep.path, rep.data)
        got = measurements(rep.data)
        check_figures(rep.path, got)
        found += got
    systems = sorted({str(tc['system']) for rep in reps for tc in rep.cases
                      if tc.get('system') and tc.get('interconnect')})
    if system is None:
        if len(systems) != 1:
            raise RefsError(f'the reports measure {len(systems)} systems ({", ".join(systems) or "none"}): name '
                            f'one with --system')
        system = systems[0]
    failed = failed_cases(reps, system, scope)
    if failed:
        raise RefsError('\n'.join(f'refusing the figures of failed test case {line}' for line in failed))
    found = [m for m in found if m.system == system and scope.holds(m.partition, m.environ, m.interconnect)]
    if not found:
        raise RefsError(f'the reports measure nothing of {system} in the scope {scope}: nothing to accept')
    refuse_undeclared(found)
    path = references.reference_file(system, directory)
    before, data = read_reference_text(path)
    doc = copy.deepcopy(data or {})
    measured = {(m.partition, m.environ, m.interconnect, m.test, m.metric) for m in found}
    try:
        removed = remove_stale(doc, scope, measured)
        after = dump(merge(doc, system, found, table))
    except (AttributeError, TypeError, KeyError) as err:
        raise RefsError(f'{path}: malformed reference tree ({err}): fix it by hand') from None
    check_entries(yaml.safe_load(after), str(path))
    validate_text(after, system, path)
    diff = ''.join(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                        fromfile=f'{path} (before)', tofile=f'{path} (after)'))
    if not dry_run and after != before:
        write_atomically(path, after)
    return diff, removed, len(found)
