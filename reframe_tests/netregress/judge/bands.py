"""References and bands of a check's figures: where each performance variable's reference comes from.

:func:`apply` is the body of ``NetregressCheck.apply_references`` (the order of the sources is documented there);
:func:`reference_source` picks a partition's host baseline or committed references; :func:`fraction_of` divides a
figure by a denominator known only when it is evaluated (a fraction of a link's rate, a ratio to a peer measured
in the same job): the baseline-free bands of :attr:`NetregressCheck.fixed_references`.
"""
from __future__ import annotations

import functools
import inspect
import os
from pathlib import Path

import reframe.utility.sanity as sn
from reframe.core.exceptions import PerformanceError, SanityError

from . import bandrules, baselines, references
from .. import measurement, paths


def apply(check) -> None:
    """Set ``check.reference`` (and ``nr_reference_source``, ``nr_recorded_only``, ``missing_references``) for
    every performance variable of ``check`` (see ``NetregressCheck.apply_references``). None in a dry run: ReFrame
    runs the performance stage's hooks, but nothing was measured to judge."""
    if check.is_dry_run():
        check.missing_references = []
        return
    system, part = check.current_system.name, check.current_partition.name
    env = check.current_environ.name
    refs, check.missing_references, recorded_only, shared_band, worse_only = {}, [], [], [], []
    host_refs = check.current_partition.extras.get('references') == 'host'
    try:
        refset, shared_refs, check.nr_reference_source = reference_source(system, check.current_partition.extras)
    except (references.ReferenceError, baselines.BaselineError) as err:
        raise PerformanceError(str(err)) from None
    # a host-baseline system's committed references (the machine-independent figures the checkout ships for its
    # own systems, docs/references.md): after the check's fixed bands, before the host baseline, so an entry
    # there is judged from the first run on any machine
    try:
        committed = references.load(system) if host_refs else None
    except references.ReferenceError as err:
        raise PerformanceError(str(err)) from None
    from_file = []
    own_file = _check_file(check)
    remeasured = host_refs and refset is not None and own_file in _changed_since(system)
    if remeasured:
        # an earlier version's baseline, and this check's own file measures otherwise now (new options, a new
        # size): its figures are not those figures, so they are judged against this version's own baseline (its
        # prior bands, narrowing as its runs arrive), or recorded while that has none
        current = _current_baseline(system)
        if current is None:
            check.nr_reference_source += f'; {own_file} changed since it: its figures recorded, not judged'
        else:
            refset, shared_refs, runs = current
            remeasured = False
            check.nr_reference_source += (f'; {own_file} changed since it: its figures judged against this '
                                          f'version\'s own baseline ({runs} run(s))')
    for name, fn in check.perf_variables.items():
        if name in check.recorded_only():
            refs[name] = (0, None, None, fn.unit)
            recorded_only.append(name)
            continue
        if name in check.fixed_references:
            refs[name] = (*check.fixed_references[name], fn.unit)
            continue
        if committed is not None:
            try:
                refs[name] = committed.lookup(part, env, check.interconnect, check.ref_test, name).as_reframe()
                from_file.append(name)
                continue
            except references.MissingReferenceError:
                pass
            except references.ReferenceError as err:
                raise PerformanceError(str(err)) from None
        if remeasured:
            refs[name] = (0, None, None, fn.unit)
            recorded_only.append(name)
            continue
        if refset is None:
            refs[name] = (0, None, None, fn.unit)
            continue
        if host_refs and not check.asserted_absolute(name):
            # a CPU-bound figure on shared CPUs: the wide band its measured spread supports (its prior band until
            # that is measured, judged on the worse side only; recorded only while the baseline has not seen it)
            try:
                ref = shared_refs.lookup(part, env, check.interconnect, check.ref_test, name)
                if ref.prior:
                    worse_only.append(name)
                refs[name] = ref.as_judged(check.nr_figures[name]['better']).as_reframe()
                shared_band.append(name)
            except references.MissingReferenceError:
                refs[name] = (0, None, None, fn.unit)
                recorded_only.append(name)
            except references.ReferenceError as err:
                raise PerformanceError(str(err)) from None
            continue
        try:
            refs[name] = refset.lookup(part, env, check.interconnect, check.ref_test, name).as_reframe()
        except references.MissingReferenceError as err:
            if check.current_partition.extras.get('references') != 'host':
                check.missing_references.append(str(err))
            refs[name] = (0, None, None, fn.unit)
        except references.ReferenceError as err:
            raise PerformanceError(str(err)) from None
    if not refs:
        raise PerformanceError(f'{check.unique_name} defines no performance variables')
    if from_file:
        check.nr_reference_source += (f'; {", ".join(from_file)} against committed '
                                      f'{references.reference_file(system)}')
    if worse_only:
        check.nr_reference_source += (f'; {len(worse_only)} figure(s) on shared CPUs judged on their worse side '
                                      f'only until their baseline holds their spread')
    check.nr_recorded_only = ','.join(recorded_only)
    check.nr_shared_cpu_band = ','.join(shared_band)
    check.reference = {f'{system}:{part}': refs}


@sn.deferrable
def fraction_of(check, name: str, denominator: float) -> float:
    """check.perf_variables[name] / denominator, looked up when evaluated (leaves define ``name`` later)."""
    try:
        own = check.perf_variables[name]
    except KeyError:
        raise SanityError(f'{check.unique_name} has no {name} to compare') from None
    return float(own.evaluate()) / float(sn.evaluate(denominator))


def reference_source(system: str, extras) -> tuple:
    """(ReferenceSet or None, shared-CPU ReferenceSet or None, description) for a partition: its host baseline
    (with the wide bands of :meth:`bandrules.BandRules.shared_cpu_band` for CPU-bound figures on shared CPUs) or
    the committed references."""
    if extras.get('references') != 'host':
        return references.load(system), None, f'committed {references.reference_file(system)}'
    found = _host_baseline(system, str(baselines.state_dir() / 'baselines' / system))
    if found is None:
        return None, None, f'no baseline for host {baselines.host_id()} yet: recording'
    return found[:3]


@functools.lru_cache(maxsize=8)
def _host_baseline_cached(system: str, path: str, mtime: float, version: str):
    rules = bandrules.load()
    # this measurement version's baseline; until it has min_runs runs, an earlier version's, with the warning
    base, warning = baselines.Baseline.for_run(system, rules, version=version)
    if base is None:
        return None
    source = f'host baseline {base.host_id} ({len(base.runs)} runs)'
    # the measuring files changed since an earlier version's baseline (none for this version's own)
    changed = frozenset(measurement.changed_files(base.measured_files, measurement.measured_files())
                        if base.measured_by != version and base.measured_files else ())
    current = None
    if base.measured_by != version:
        own = baselines.Baseline.load(system, version=version)
        if own is not None and own.entries:
            current = (own.reference_set(rules), own.reference_set(rules, shared_cpu=True), len(own.runs))
    return (base.reference_set(rules), base.reference_set(rules, shared_cpu=True),
            source + (f'; WARNING: {warning}' if warning else ''), changed, current)


def _check_file(check) -> str:
    """The check's own file relative to the repository (as :func:`measurement.measured_files` names it)."""
    try:
        return str(Path(inspect.getfile(type(check))).resolve().relative_to(paths.repo_root().resolve()))
    except (TypeError, ValueError, OSError):
        return ''


def _changed_since(system: str) -> frozenset[str]:
    """The measuring files changed since the host baseline a run of ``system`` compares with: none when that is
    this version's own."""
    found = _host_baseline(system, str(baselines.state_dir() / 'baselines' / system))
    return found[3] if found else frozenset()


def _current_baseline(system: str) -> tuple | None:
    """(ReferenceSet, shared-CPU ReferenceSet, runs) of this measurement version's own baseline when a run compares
    with an earlier version's and this version's holds figures; else None."""
    found = _host_baseline(system, str(baselines.state_dir() / 'baselines' / system))
    return found[4] if found else None


def _host_baseline(system: str, path: str):
    """Cached while the baselines' directory (every write renames into it) and the measurement version hold."""
    mtime = os.stat(path).st_mtime_ns if os.path.exists(path) else -1
    return _host_baseline_cached(system, path, mtime, measurement.measurement_version())
