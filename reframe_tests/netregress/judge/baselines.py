"""Host baselines: the reference performance of the machine an embedded system (``local``, ``vcluster``) runs on.

The committed files in ``reference_values/`` describe a site's own system and are strict: a missing entry fails.
An embedded system instead runs on whatever host the user has, so its references are that host's own history,
kept outside the repository in the state directory (:func:`state_dir`: ``NETREGRESS_STATE``, else ``<prefix>/state``
= ``run/state``; ``make clean`` keeps it)::

    <state>/baselines/<system>/<host id>.<measurement version>.yaml

The host id is a hash of a stable fingerprint (CPU model, cores, memory, kernel release, virtualisation); the
measurement version (netregress.measurement) a hash of what can change a figure: the kernel sources, the
checks and the library code that launches, pins and reads them, the settings and interconnect table, each read
for its meaning (Python as its syntax tree without docstrings, C without comments, shell without comment lines):
pinning a TCP pair to one CPU moved a loopback round trip 10x without touching ``src/``, a reworded comment moves
nothing. A new measurement version starts a new baseline beside the old ones, which are never deleted; until the
new one has ``min_runs`` runs a run compares with the newest older one and says what changed
(:meth:`Baseline.for_run`). A file of the earlier layout, ``<host id>.yaml``, is read as one more baseline.

A baseline keeps, per performance variable, the figures of its last ``window`` passing runs. The reference value is
their median and the band is derived from their spread: each side is ``spread_factor`` x the largest relative
deviation of a run from the median, at least the metric kind's ``floor`` and at most ``cap`` (both from
``config/interconnects.yaml`` ``baselines:``). Fewer than ``min_runs`` runs say little about spread (the largest
deviation among two runs is about one standard deviation): until then the band narrows from a prior band toward
the figure's own by run count (the rules: :mod:`.bandrules`; docs/validation.md, "Before a figure's spread is
measured"). Every entry says in its comment which runs it came from.

The state directory is private (:mod:`.statefiles`: created 0700, refused when another user owns it or group or
others may write it); a baseline is written atomically, never through a symlink, and sealed (its last line counts
its bytes: one cut at a line boundary is refused and kept as it is, :func:`netregress.statefiles.check_sealed`),
and :func:`locked` serialises read-modify-write (``tools/refs record``).
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import math
import os
import platform
import re
import statistics
from pathlib import Path
from typing import Iterable, Iterator, Mapping

import yaml

from .. import datafiles, paths, statefiles
from . import references
from .. import measurement
from .bandrules import BandRules, BaselineError

SCHEMA = 'netregress-baseline/2'
#: the schema of baselines written before their seal (statefiles.sealed): read as they are, sealed when next saved
UNSEALED_SCHEMA = 'netregress-baseline/1'


# -- where and for which host -----------------------------------------------------------------------------------

def state_dir(create: bool = True) -> Path:
    """Where host state lives (baselines, ReFrame's results database): ``NETREGRESS_STATE``, else ``state/`` under
    the run directory (:func:`netregress.paths.run_dir`: ``--prefix``, ``RFM_PREFIX``, else ``run/``). Created 0700
    when missing; :class:`BaselineError` (one line) when it belongs to someone else or group/others may write it."""
    env = os.environ.get('NETREGRESS_STATE')
    # absolute, not resolved: a symlink as the state directory itself is refused (statefiles.check_private)
    path = Path(os.path.abspath(env)) if env else paths.run_dir() / 'state'
    if create:
        try:
            statefiles.private_dir(path)
        except statefiles.StateError as err:
            raise BaselineError(str(err)) from None
    return path


@contextlib.contextmanager
def locked(directory: Path | None = None) -> Iterator[Path]:
    """The state directory, locked (``flock`` on its ``.lock``) for a read-modify-write of its baselines."""
    directory = directory or state_dir()
    try:
        lock = statefiles.locked(directory)
        lock.__enter__()
    except statefiles.StateError as err:
        raise BaselineError(str(err)) from None
    try:
        yield directory
    finally:
        lock.__exit__(None, None, None)


def _cpuinfo() -> tuple[str, str]:
    """(CPU model name, hypervisor vendor or 'none') from /proc/cpuinfo and /sys."""
    model, hypervisor = platform.processor() or 'unknown', 'none'
    try:
        text = Path('/proc/cpuinfo').read_text(errors='replace')
    except OSError:
        return model, hypervisor
    for line in text.splitlines():
        key, _, value = line.partition(':')
        key = key.strip()
        if key in ('model name', 'Model', 'cpu model') and value.strip():
            model = value.strip()
        elif key == 'flags' and ' hypervisor' in f' {value} ':
            hypervisor = 'vm'
    try:
        hypervisor = Path('/sys/hypervisor/type').read_text().strip() or hypervisor
    except OSError:
        pass
    return model, hypervisor


def host_facts() -> dict:
    """The stable facts that identify a host's performance class (no host name: clones of a VM image match)."""
    model, virt = _cpuinfo()
    try:
        mem_kb = next(int(line.split()[1]) for line in Path('/proc/meminfo').read_text().splitlines()
                      if line.startswith('MemTotal:'))
        mem_gib = round(mem_kb / 2 ** 20)
    except (OSError, StopIteration, ValueError, IndexError):
        mem_gib = 0
    return {'cpu_model': model, 'cores': os.cpu_count() or 0, 'mem_gib': mem_gib,
            'kernel': platform.release(), 'virtualisation': virt, 'arch': platform.machine()}


def host_id(facts: Mapping | None = None) -> str:
    """Short hash of :func:`host_facts`."""
    text = json.dumps(dict(facts or host_facts()), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _safe(name: str, what: str) -> str:
    """A name that may become one path component (a system, a host id, a version): :func:`datafiles.checked_name`."""
    try:
        return datafiles.checked_name(name, what)
    except datafiles.UnsafeName as err:
        raise BaselineError(str(err)) from None


def baseline_path(system: str, directory: Path | None = None, host: str | None = None,
                  version: str | None = None) -> Path:
    """``<state>/baselines/<system>/<host id>.<measurement version>.yaml``."""
    return (directory or state_dir()) / 'baselines' / _safe(system, 'system') / \
        f'{_safe(host or host_id(), "host id")}.{_safe(version or measurement.measurement_version(), "version")}.yaml'


def legacy_path(system: str, directory: Path | None = None, host: str | None = None) -> Path:
    """The earlier layout's one baseline of a host, ``<state>/baselines/<system>/<host id>.yaml`` (read, kept)."""
    return (directory or state_dir()) / 'baselines' / _safe(system, 'system') / \
        f'{_safe(host or host_id(), "host id")}.yaml'


# -- the file ---------------------------------------------------------------------------------------------------

def figure_value(value, where: str) -> float:
    """A figure that may enter a baseline: a finite number >= 0; :class:`BaselineError` naming it otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BaselineError(f'{where}: {value!r} is not a number')
    v = float(value)
    if math.isnan(v):
        raise BaselineError(f'{where}: NaN is not a figure')
    if math.isinf(v):
        raise BaselineError(f'{where}: {v} is not a finite figure')
    if v < 0:
        raise BaselineError(f'{where}: {v:g} is negative (no figure netregress measures is)')
    return v


def _mapping(value, where: str) -> Mapping:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BaselineError(f'{where}: expected a mapping, got {type(value).__name__}')
    return value


_TOP_METRICS = re.compile(r'^metrics:', re.M)
_TOP_LEVEL = re.compile(r'^[^\s#]', re.M)
_COMMENT_LINE = re.compile(r'^#.*$', re.M)


def _header(text: str) -> tuple[str, bool] | None:
    """(the text before the top-level ``metrics:``, whether figures follow it) of a baseline as :meth:`Baseline.save`
    writes it (metrics last); None when the file is laid out otherwise (it is then read whole)."""
    found = _TOP_METRICS.search(text)
    if found is None:
        return None
    rest = text[found.end():]
    if _TOP_LEVEL.search(rest):       # another top-level key after the figures
        return None
    figures = _COMMENT_LINE.sub('', rest).strip()          # less the seal (statefiles.sealed)
    return text[:found.start()], figures not in ('', '{}', 'null', '~')


class Baseline:
    """One host's baseline of one system at one measurement version: samples per (partition, environ,
    interconnect, test, metric)."""

    def __init__(self, system: str, path: Path, data: Mapping | None = None):
        self.system = system
        self.path = path
        if data is not None and not isinstance(data, Mapping):
            raise BaselineError(f'{path}: not a baseline (top level is {type(data).__name__}, not a mapping)')
        data = dict(data or {})
        if data and data.get('schema') not in (SCHEMA, UNSEALED_SCHEMA):
            raise BaselineError(f'{path}: schema must be {SCHEMA!r}, got {data.get("schema")!r}')
        self.host: dict = dict(_mapping(data.get('host'), f'{path}: host') or host_facts())
        self.host_id: str = str(data.get('host_id') or host_id(self.host))
        self.measured_by: str = str(data.get('measured_by') or '')
        #: {file: digest} of what measured it (measured_files); empty in a baseline of the earlier layout
        self.measured_files: dict = {str(k): str(v) for k, v in
                                     _mapping(data.get('measured_files'), f'{path}: measured_files').items()}
        runs = data.get('runs') or []
        if not isinstance(runs, list) or not all(isinstance(r, Mapping) for r in runs):
            raise BaselineError(f'{path}: runs: expected a list of mappings')
        self.runs: list = list(runs)
        #: False for a baseline read for its header only: it cannot be judged against, added to or saved
        self.complete = True
        # (part, env, ic, test, metric) -> {'unit': str, 'kind': str, 'samples': [float]}
        self.entries: dict[tuple, dict] = {}
        for part, envs in _mapping(data.get('metrics'), f'{path}: metrics').items():
            for env, ics in _mapping(envs, f'{path}: {part}').items():
                for ic, tests in _mapping(ics, f'{path}: {part}/{env}').items():
                    for test, metrics in _mapping(tests, f'{path}: {part}/{env}/{ic}').items():
                        for metric, entry in _mapping(metrics, f'{path}: {part}/{env}/{ic}/{test}').items():
                            where = f'{path}: {part}/{env}/{ic}/{test}/{metric}'
                            samples = entry.get('samples') if isinstance(entry, Mapping) else None
                            if not isinstance(samples, list) or not samples:
                                raise BaselineError(f'{where}: no samples')
                            self.entries[(part, env, ic, test, str(metric))] = {
                                'unit': str(entry.get('unit', '')), 'kind': str(entry.get('kind', 'throughput')),
                                'samples': [figure_value(s, f'{where} sample {i + 1}')
                                            for i, s in enumerate(samples)]}
        self.has_figures = bool(self.entries)

    @classmethod
    def read(cls, system: str, path: Path, header_only: bool = False) -> 'Baseline':
        """The baseline in ``path`` (a symlink refused, a malformed file a one-line :class:`BaselineError`).
        ``header_only``: its facts, version and runs without its figures (:attr:`complete` False, :attr:`has_figures`
        still right), which is what choosing among versions needs: a whole file is 0.4 s of YAML here per 3,000
        figures, and every measurement version leaves one."""
        if path.is_symlink():
            raise BaselineError(f'{path}: a symbolic link (to {os.readlink(path)}), not a baseline: refusing it')
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as err:
            raise BaselineError(f'{path}: unreadable baseline ({err})') from None
        head = _header(text) if header_only else None
        try:
            data = references.load_yaml(text if head is None else head[0])
        except yaml.YAMLError as err:
            raise BaselineError(f'{path}: not valid YAML ({" ".join(str(err).split())})') from None
        if data is None:
            raise BaselineError(f'{path}: empty baseline (truncated?); move it away to start a new one')
        if isinstance(data, Mapping) and data.get('schema') == SCHEMA:
            try:
                statefiles.check_sealed(text, path, 'baseline')
            except statefiles.StateError as err:
                raise BaselineError(str(err)) from None
        base = cls(system, path, data)
        if head is not None:
            base.complete, base.has_figures = False, head[1]
        return base

    @classmethod
    def load(cls, system: str, directory: Path | None = None, host: str | None = None,
             version: str | None = None, header_only: bool = False) -> 'Baseline | None':
        """This host's baseline of ``system`` at the current measurement version (``version``), or None when
        there is none (a file of the earlier layout counts when it was measured by this version)."""
        version = version or measurement.measurement_version()
        path = baseline_path(system, directory, host, version)
        if path.exists() or path.is_symlink():
            return cls.read(system, path, header_only)
        legacy = legacy_path(system, directory, host)
        if legacy.exists() or legacy.is_symlink():
            base = cls.read(system, legacy, header_only)
            if base.measured_by == version:
                return base
        return None

    @classmethod
    def all_versions(cls, system: str, directory: Path | None = None, host: str | None = None) -> list['Baseline']:
        """Every baseline of this host and ``system``, whatever measured it, oldest last run first: their headers
        (:meth:`read` ``header_only``), so a state directory that kept many versions costs what one does."""
        folder = (directory or state_dir()) / 'baselines' / _safe(system, 'system')
        host = host or host_id()
        found = [cls.read(system, p, header_only=True) for p in sorted(folder.glob(f'{host}.*yaml'))
                 if p.name == f'{host}.yaml' or re.fullmatch(rf'{re.escape(host)}\.[A-Za-z0-9_.+-]+\.yaml', p.name)]
        return sorted(found, key=lambda b: (b.last_recorded(), b.path.name))

    def last_recorded(self) -> str:
        return str(self.runs[-1].get('recorded_utc', '')) if self.runs else ''

    @classmethod
    def for_run(cls, system: str, rules: BandRules, directory: Path | None = None, host: str | None = None,
                version: str | None = None, files: Mapping[str, str] | None = None
                ) -> tuple['Baseline | None', str | None]:
        """(baseline a run compares with, warning or None). This version's baseline once it has ``min_runs`` runs;
        before that the newest baseline of an earlier version (the newest with ``min_runs`` runs, if any), with a
        warning naming what changed since; else this version's (any runs) or None. ``files``: :func:`measured_files`
        of now (default: this checkout's)."""
        files = measurement.measured_files() if files is None else files
        version = version or measurement.version_of(files)
        current = cls.load(system, directory, host, version, header_only=True)
        if current is not None and len(current.runs) >= rules.min_runs:
            return cls.read(system, current.path), None
        older = [b for b in cls.all_versions(system, directory, host) if b.measured_by != version and b.has_figures]
        if not older:
            return (cls.read(system, current.path) if current else None), None
        # the newest that measured its spread (min_runs runs), else the newest; read whole (only this one)
        old = cls.read(system, ([b for b in older if len(b.runs) >= rules.min_runs] or older)[-1].path)
        have = f'{len(current.runs)} run(s)' if current else 'none yet'
        return old, (f'comparing with the baseline of an earlier measurement version ({old.measured_by or "unknown"}'
                     f', {len(old.runs)} runs, {old.path}): {old.what_changed(files)}; this version\'s ({version}) has '
                     f'{have}, it is used from {rules.min_runs} runs on')

    def what_changed(self, files: Mapping[str, str] | None = None) -> str:
        """'changed since: a, b (and N more)', the files whose meaning differs from what measured this baseline."""
        if not self.measured_files:
            return 'changed since: not known (the baseline predates the per-file record)'
        now = files if files is not None else measurement.measured_files()
        changed = measurement.changed_files(self.measured_files, now)
        if not changed:
            return 'changed since: nothing that measures'
        shown = ', '.join(changed[:6]) + (f' (and {len(changed) - 6} more)' if len(changed) > 6 else '')
        return f'changed since: {shown}'

    def stale_reason(self, version: str | None = None) -> str | None:
        """Why this baseline's figures were measured otherwise than now (None: by this version)."""
        version = version or measurement.measurement_version()
        if self.measured_by != version:
            return (f'{self.path} was measured by another version of the kernels, checks or settings '
                    f'({self.measured_by or "unknown"}, now {version}; {self.what_changed()})')
        return None

    def add(self, measurements: Iterable, rules: BandRules, source: str, replace: frozenset = frozenset()) -> int:
        """Append one run's figures (``refswrite.Measurement``); keep the last ``rules.window`` per metric; a metric
        whose key (partition, environ, interconnect, test, metric) is in ``replace`` starts again from this run's
        figure (an accepted change). :class:`BaselineError` (nothing added) for a figure that is not a finite
        number >= 0."""
        self._require_complete('take figures')
        mine = [m for m in measurements if m.system == self.system]
        for m in mine:
            figure_value(m.value, f'{source}: {m.partition}/{m.environ}/{m.interconnect}/{m.test}/{m.metric}')
        for m in mine:
            entry = self.entries.setdefault((m.partition, m.environ, m.interconnect, m.test, m.metric),
                                            {'unit': m.unit, 'kind': m.kind, 'samples': []})
            key = (m.partition, m.environ, m.interconnect, m.test, m.metric)
            kept = [] if key in replace else entry['samples']
            entry['samples'] = (kept + [float(f'{m.value:.5g}')])[-rules.window:]
            entry['unit'], entry['kind'] = m.unit, m.kind
        if mine:
            self.runs = (self.runs + [{'recorded_utc': datetime.datetime.now(datetime.timezone.utc)
                                       .strftime('%Y-%m-%dT%H:%M:%SZ'), 'report': source, 'figures': len(mine)}])[-20:]
        return len(mine)

    def _require_complete(self, what: str) -> None:
        if not self.complete:
            raise BaselineError(f'{self.path}: read for its header only, cannot {what}')

    def to_dict(self) -> dict:
        self._require_complete('be written')
        metrics: dict = {}
        for (part, env, ic, test, metric), entry in sorted(self.entries.items()):
            metrics.setdefault(part, {}).setdefault(env, {}).setdefault(ic, {}).setdefault(test, {})[metric] = entry
        return {'schema': SCHEMA, 'system': self.system, 'host_id': self.host_id, 'host': self.host,
                'measured_by': self.measured_by, 'measured_files': dict(sorted(self.measured_files.items())),
                'runs': self.runs, 'metrics': metrics}

    def save(self) -> None:
        """Write the file atomically (mkstemp beside it, fsync, rename; never through a symlink), its directories
        private. Hold :func:`locked` around the load-add-save."""
        try:
            folder = self.path.parent
            statefiles.private_dir(folder.parent.parent, 'state directory')
            statefiles.private_dir(folder.parent, 'baselines directory')
            statefiles.private_dir(folder, 'baselines directory')
            statefiles.atomic_write(self.path, statefiles.sealed(
                f'# netregress host baseline of {self.system!r} on host {self.host_id} (tools/refs show)\n'
                + references.dump_yaml(self.to_dict())), mode=0o600, what='baseline')
        except statefiles.StateError as err:
            raise BaselineError(str(err)) from None

    def shared_pools(self, rules: BandRules) -> dict[tuple[str, str], tuple[float, float | None]]:
        """{(partition, interconnect): (host swing, prior band or None)} of the CPU-bound figures on shared CPUs,
        pooled over every figure but the ratios (a ratio to a yardstick of the same job has the host's state divided
        out) measured in two runs or more (a figure that read 0 has no log). The host swing
        (:meth:`BandRules.host_swing`) of every run's |log(run / median)|; the prior band of the same from
        |log(run / the run before)| of each pair of consecutive runs (what a one-run centre faces), None where that
        pool is too small and the committed prior stands (:attr:`BandRules.shared_prior`)."""
        pooled: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
        for (part, _env, ic, _test, _metric), entry in self.entries.items():
            samples = entry['samples']
            if entry['kind'] == 'ratio' or len(samples) < 2 or min(samples) <= 0:
                continue
            center = statistics.median(samples)
            devs, steps = pooled.setdefault((part, ic), ([], []))
            devs.extend(abs(math.log(v / center)) for v in samples)
            steps.extend(abs(math.log(b / a)) for a, b in zip(samples, samples[1:]))
        return {key: (rules.host_swing(devs),
                      rules.host_swing(steps) if len(steps) >= rules.shared_pool_min else None)
                for key, (devs, steps) in pooled.items()}

    def sibling_deviations(self, rules: BandRules) -> dict[tuple[str, str, str, str], float]:
        """{(partition, interconnect, test, metric): the largest relative deviation of a run from its median} over
        the ratios of every MPI build (two at least, each with two runs or more). A ratio to a yardstick of the same
        job is one figure of every build on the path, and three runs of one build say little of its spread: over
        11 runs of this 2-vCPU VM the TCP round-trip ratios of the builds spanned 0.63x-1.49x of their medians,
        while LAM/MPI's three baseline runs on loopback lay within 2.4% (a band of +-9.6% that the next run left
        at +17%); the six builds' runs together lay within 12.3%."""
        pooled: dict[tuple[str, str, str, str], list[float]] = {}
        for (part, _env, ic, test, metric), entry in self.entries.items():
            samples = entry['samples']
            if entry['kind'] != 'ratio' or len(samples) < 2:
                continue
            center = statistics.median(samples)
            if center:
                pooled.setdefault((part, ic, test, metric), []).append(
                    max(abs(v - center) for v in samples) / abs(center))
        return {key: max(devs) for key, devs in pooled.items() if len(devs) >= 2}

    def reference_set(self, rules: BandRules, shared_cpu: bool = False) -> references.ReferenceSet:
        """The baseline as references (value = median of the runs, band from their spread); ``shared_cpu``: the
        bands :meth:`BandRules.shared_cpu_band` gives (a figure that was 0 in a run has none), marked ``prior``
        while a figure's runs are fewer than ``min_runs``."""
        self._require_complete('give references')
        tree: dict = {}
        priors: set[references.FigureKey] = set()
        pools = self.shared_pools(rules) if shared_cpu else {}
        siblings = {} if shared_cpu else self.sibling_deviations(rules)
        for (part, env, ic, test, metric), entry in self.entries.items():
            if shared_cpu:
                band = rules.shared_cpu_band(entry['samples'], *pools.get((part, ic), (1.0, None)))
                if band is None:
                    continue
                value, lower, upper, comment = band
            else:
                value, lower, upper, comment = rules.band(entry['samples'], entry['kind'],
                                                          siblings.get((part, ic, test, metric), 0.0))
            base, size = references.split_metric(metric)
            node = tree.setdefault(part, {}).setdefault(env, {}).setdefault(ic, {}).setdefault(test, {})
            ref = {'value': value, 'lower': lower, 'upper': upper, 'unit': entry['unit'],
                   'comment': f'host baseline {self.host_id}: {comment}; runs: {entry["samples"]}'}
            if shared_cpu and len(entry['samples']) < max(rules.min_runs, 2):
                # its own spread is not measured yet: the check judges only the worse side (bands.apply)
                priors.add((part, env, ic, test, metric))
            if size is None:
                node[base] = ref
            else:
                node.setdefault(base, {'unit': entry['unit'], 'comment': 'host baseline', 'sizes': {}})
                node[base]['sizes'][size] = ref
        return references.ReferenceSet({'schema': references.SCHEMA, 'system': self.system, 'references': tree},
                                       self.system, source=str(self.path), priors=frozenset(priors))
