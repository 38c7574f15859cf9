"""This host's baseline, the references of the embedded systems (``tools/refs record|show|reset|bands``): a passing
run's figures added under the state directory's lock, the baseline shown with its band widths and a run against it,
a measurement version's baseline forgotten. The conversion of reports into committed references is
:mod:`.refswrite`'s.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import tabulate

from netregress.judge import bandrules, baselines, references
from netregress.measure import interconnects, site
from netregress import datafiles, measurement
from netregress.judge.figures import asserted
from . import refsaccept, runreport
from .refswrite import RefsError, check_figures, check_report, measurements, refuse_undeclared, usable


def band_table(bands: Iterable[tuple[float | None, float | None]]) -> str:
    """How wide bands are: count per bucket of the wider side's factor (1.5 = 0.67x..1.5x)."""
    edges = [1.1, 1.25, 1.5, 2.0, 4.0, 10.0, float('inf')]
    counts = [0] * len(edges)
    for lower, upper in bands:
        width = max(1 + upper if upper is not None else float('inf'),
                    1 / (1 + lower) if lower is not None and lower > -1 else float('inf'))
        counts[next(i for i, e in enumerate(edges) if width <= e + 1e-9)] += 1
    total = sum(counts) or 1
    labels = ['<= 1.10x', '<= 1.25x', '<= 1.50x', '<= 2x', '<= 4x', '<= 10x', '> 10x / open']
    rows = [[label, n, f'{100 * n / total:.1f}%'] for label, n in zip(labels, counts)]
    return tabulate.tabulate(rows, headers=['widest side', 'bands', 'share'], tablefmt='simple',
                             colalign=('right', 'right', 'right'), disable_numparse=True)


def _reference_bands(refset: references.ReferenceSet) -> list[tuple[float, float]]:
    return [(ref.lower, ref.upper) for _, ref in refset.entries()]


def checked_system(system: str) -> str:
    """``--system``, a name (:func:`netregress.datafiles.checked_name`), checked before the state directory is
    touched; :class:`baselines.BaselineError` otherwise."""
    try:
        return datafiles.checked_name(system, 'system')
    except datafiles.UnsafeName as err:
        raise baselines.BaselineError(str(err)) from None


def throttled_cases(doc) -> list[str]:
    """The test cases of a run report that said a CPU quota shared by every node throttled them (the checks'
    ``cpu_quota_note``: a container's CPU limit, tools/slow-machine): ``name: note`` each."""
    return [f'{runreport.case_name(tc)}: {tc["cpu_quota_note"]}' for tc in runreport.testcases(doc)
            if tc.get('cpu_quota_note')]


def record(reports: list[Path], system: str, table: interconnects.InterconnectTable,
           accept: str | None = None) -> str:
    """Add the passing figures of ``reports`` to this host's baseline of ``system`` at the current measurement
    version; return what was done. With ``accept`` (the reason, one line), a deliberate decision: the figures
    of cases that failed only in the performance stage are taken too, each replacing its figure's earlier
    samples (a change accepted, or an earlier run found to be the outlier), and a case that failed anywhere
    else refuses the whole record (a fault, as ``tools/refs accept`` refuses it); the reason and who are kept
    in the baseline's run list. Every report is read and checked first; the baseline is read, extended and
    written under the state directory's lock (concurrent records queue), atomically; a baseline of an earlier
    version stays as it is beside the new one. Nothing is written on an error. A run whose checks said a shared CPU
    quota throttled them is left out: every CPU-bound figure of it measured the quota, and in the baseline it would
    widen the bands or shift the medians of the runs on the whole machine (a run under tools/slow-machine 1 put
    MPICH's gige round-trip ratio at 2.42 where the machine reads 1.22)."""
    checked_system(system)
    rules = bandrules.BandRules.from_table(table.baselines)
    found_per_report, skipped = [], []
    takes = refsaccept.changed_by_design if accept is not None else usable
    if accept is not None:
        accept = refsaccept.checked_reason(accept, '--accept')
    docs = [(path, runreport.read(path)) for path in reports]            # each report parsed once
    if accept is not None:
        failed = refsaccept.failed_cases([runreport.RunReport.from_data(doc, path) for path, doc in docs], system)
        if failed:
            raise RefsError('\n'.join(f'refusing the figures of failed test case {line} (a fault, not a change: '
                                      f'only a performance failure is accepted)' for line in failed))
    for path, doc in docs:
        check_report(path, doc, takes)
        found = [m for m in measurements(doc, takes) if m.system == system]
        refuse_undeclared(found)
        check_figures(path, found)
        throttled = throttled_cases(doc)
        if throttled:
            skipped.append(f'{path}: not recorded, it ran under a shared CPU quota ({throttled[0]}'
                           f'{f"; {len(throttled) - 1} more cases" if len(throttled) > 1 else ""})')
            continue
        replaced = frozenset((m.partition, m.environ, m.interconnect, m.test, m.metric)
                             for m in measurements(doc, _failed_in_performance) if m.system == system)
        found_per_report.append((path, found, replaced if accept is not None else frozenset()))
    if not found_per_report:
        return '\n'.join(skipped)
    files = measurement.measured_files()
    version = measurement.version_of(files)
    note = ''
    # the baselines read once before the lock too: a malformed one is refused before anything (the lock file) is made
    baselines.Baseline.load(system, version=version)
    baselines.Baseline.all_versions(system)
    with baselines.locked():
        base = baselines.Baseline.load(system, version=version)
        if base is None:
            base = baselines.Baseline(system, baselines.baseline_path(system, version=version))
            older = [b for b in baselines.Baseline.all_versions(system) if b.measured_by != version]
            if older:
                note = (f'a new measurement version ({version}): starting a new baseline beside '
                        f'{older[-1].path} (kept; {older[-1].what_changed(files)})\n')
        base.measured_by, base.measured_files = version, files
        why = f' (accepted by {refsaccept.who()}: {accept})' if accept is not None else ''
        added = sum(base.add(found, rules, f'{path}{why}', replace) for path, found, replace in found_per_report)
        if added:
            base.save()
    replaced_n = sum(len(r) for _, _, r in found_per_report)
    replacing = f' ({replaced_n} replacing their earlier samples)' if replaced_n else ''
    return ''.join(f'{s}\n' for s in skipped) + (f'{note}host baseline {base.path}: {added} figures added{replacing}; '
                                                 f'{len(base.entries)} variables, {len(base.runs)} runs')


def _failed_in_performance(tc) -> bool:
    return tc.get('result') == 'fail' and refsaccept.changed_by_design(tc)


def reset(system: str) -> str:
    """Forget this host's baseline of ``system`` at the current measurement version (earlier versions' are kept)."""
    checked_system(system)
    with baselines.locked():
        base = baselines.Baseline.load(system)
        if base is None:
            return f'no baseline of {system!r} at this measurement version ({measurement.measurement_version()})'
        base.path.unlink()
        kept = [b.path for b in baselines.Baseline.all_versions(system)]
        return f'removed {base.path}' + (f' (kept, other versions: {", ".join(map(str, kept))})' if kept else '')


def show(system: str, table: interconnects.InterconnectTable, report: Path | None = None) -> str:
    """This host's baseline: facts, runs, band widths; with a report, each of its figures against the bands."""
    checked_system(system)
    rules = bandrules.BandRules.from_table(table.baselines)
    base, warning = baselines.Baseline.for_run(system, rules)
    if base is None:
        return (f'no baseline of {system!r} for this host ({baselines.host_id()}: '
                f'{json.dumps(baselines.host_facts())}) under {baselines.state_dir()}')
    refset, shared = base.reference_set(rules), base.reference_set(rules, shared_cpu=True)
    extras = site.partition_extras(system)

    def is_asserted(part: str, ic: str, kind: str) -> bool:
        try:
            link_rate = bool(table.interconnect(ic).payload_mbps)
        except interconnects.InterconnectError:
            link_rate = False
        return asserted(kind, (extras.get(part) or {}).get('assert_cpu_bound', True), link_rate)

    def band_of(key: tuple) -> references.Reference | None:
        """The band a run judges the figure by (the wide one where the partition's CPUs are shared), as
        netregress.judge.bands does; None where it has none (a figure that read 0 on shared CPUs)."""
        host = (extras.get(key[0]) or {}).get('references') == 'host'
        which = refset if not host or is_asserted(key[0], key[2], base.entries[key]['kind']) else shared
        try:
            return which.lookup(*key)
        except references.MissingReferenceError:
            return None

    judged = {key: ref for key in base.entries if (ref := band_of(key)) is not None}
    early = sum(len(base.entries[key]['samples']) < max(rules.min_runs, 2) for key in judged)
    lines = [f'host baseline {base.path}', f'  host {base.host_id}: {json.dumps(base.host)}',
             f'  measured by {base.measured_by}' + (f' (WARNING: {warning})' if warning else ''),
             f'  {len(base.runs)} runs recorded, {len(base.entries)} performance variables: {len(judged)} with a '
             f'band ({early} of them by a prior band, seen in fewer than {rules.min_runs} runs: docs/validation.md, '
             f'"Before a figure\'s spread is measured"), {len(base.entries) - len(judged)} without one']
    others = [b for b in baselines.Baseline.all_versions(system) if b.path != base.path]
    lines += [f'  also kept: {b.path} (measured by {b.measured_by or "unknown"}, {len(b.runs)} runs)' for b in others]
    lines += ['', band_table((ref.lower, ref.upper) for ref in judged.values())]
    if report:
        # every case's figures, failed ones too: a run that failed on a band is what this is asked about
        found = [m for m in measurements(runreport.read(report), accepts=lambda tc: not tc.get('fixture'))
                 if m.system == system]
        out, seen = 0, 0
        for m in found:
            ref = judged.get((m.partition, m.environ, m.interconnect, m.test, m.metric))
            if ref is None:
                continue
            seen += 1
            ref = ref.as_judged(m.better)   # as the run judged it (netregress.judge.bands)
            lo = ref.value * (1 + ref.lower) if ref.lower is not None else float('-inf')
            hi = ref.value * (1 + ref.upper) if ref.upper is not None else float('inf')
            if not lo <= m.value <= hi:
                out += 1
                lines.append(f'  OUT {m.partition}/{m.environ}/{m.interconnect}/{m.test}/{m.metric}: {m.value:.4g} '
                             f'{m.unit}, band {lo:.4g}..{hi:.4g} (median {ref.value:.4g})')
        lines.append(f'{report}: {out} of {seen} figures outside this baseline\'s bands ({len(found) - seen} '
                     f'without one)')
    return '\n'.join(lines)
