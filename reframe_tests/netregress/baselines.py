"""Host baselines: the reference performance of the machine an embedded system (``local``, ``vcluster``) runs on.

The committed files in ``reference_values/`` describe a site's own system and are strict: a missing entry fails.
An embedded system instead runs on whatever host the user has, so its references are that host's own history,
kept outside the repository in the state directory (``NETREGRESS_STATE``, default ``run/state``)::

    <state>/baselines/<system>/<host id>.yaml

The host id is a hash of a stable fingerprint (CPU model, cores, memory, kernel release, virtualisation); the file
also records what measured it (:func:`measurement_version`: the kernel sources, the checks and the library code
that launches, pins and reads them, the settings and interconnect table), and a baseline measured otherwise is
stale: pinning a TCP pair to one CPU moved a loopback round trip 10x without touching ``src/``.

A baseline keeps, per performance variable, the figures of its last ``window`` passing runs. The reference value is
their median and the band is derived from their spread: each side is ``spread_factor`` x the largest relative
deviation of a run from the median, at least the metric kind's ``floor`` and at most ``cap`` (both from
``config/interconnects.yaml`` ``baselines:``). Fewer than ``min_runs`` runs say little about spread (the largest
deviation among two runs is about one standard deviation): until then the band is the cap. Every entry
says in its comment which runs it came from.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

import yaml

from . import paths, references

SCHEMA = 'netregress-baseline/1'


class BaselineError(Exception):
    """A baseline file is unreadable or malformed."""


# -- where and for which host -----------------------------------------------------------------------------------

def state_dir() -> Path:
    """Where host state lives: ``NETREGRESS_STATE`` or ``run/state`` of this checkout."""
    env = os.environ.get('NETREGRESS_STATE')
    return Path(env).resolve() if env else paths.run_dir() / 'state'


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


def measurement_version(root: Path | None = None) -> str:
    """Hash of everything that decides how a figure is measured: the kernel sources (``src/``), the checks and the
    library that launches, pins and reads them, ``config/settings.py``, the virtual cluster (``tools/vcluster`` and its
    ``config/vcluster.env``) and the interconnect table (its band rules excluded: they judge figures, they do not
    make them). Figures measured by another version are not comparable."""
    root = root or paths.repo_root()
    files = [p for p in sorted((root / 'src').rglob('*')) if p.is_file()]
    # the measuring package and the checks; the post-run package (netregress_postrun) reads runs, it makes no figure
    files += sorted((root / 'reframe_tests' / 'netregress').rglob('*.py'))
    files += sorted((root / 'reframe_tests' / 'checks').rglob('*.py'))
    digest = hashlib.sha256()
    # the settings, and the virtual cluster's fabric (shaping, congestion control) that the vcluster figures measure
    config = [root / 'config' / 'settings.py', root / 'config' / 'vcluster.env', root / 'tools' / 'vcluster']
    files += [p for p in config if p.exists()]
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b'\0' + path.read_bytes() + b'\0')
    table = yaml.safe_load((root / 'config' / 'interconnects.yaml').read_text()) or {}
    measuring = {k: v for k, v in table.items() if k not in ('baselines', 'fixed_bands')}
    digest.update(json.dumps(measuring, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:12]


def baseline_path(system: str, directory: Path | None = None, host: str | None = None) -> Path:
    return (directory or state_dir()) / 'baselines' / system / f'{host or host_id()}.yaml'


# -- bands ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BandRules:
    """``config/interconnects.yaml`` ``baselines:`` block."""
    window: int
    min_runs: int
    spread_factor: float
    floor: Mapping[str, float]
    cap: tuple[float, float]

    @classmethod
    def from_table(cls, data: Mapping | None) -> 'BandRules':
        data = data or {}
        try:
            lo, hi = data.get('cap', [-0.33, 0.5])
            return cls(window=int(data.get('window', 5)), min_runs=int(data.get('min_runs', 3)),
                       spread_factor=float(data.get('spread_factor', 4.0)),
                       floor={k: float(v) for k, v in (data.get('floor') or {}).items()},
                       cap=(float(lo), float(hi)))
        except (TypeError, ValueError) as err:
            raise BaselineError(f'config/interconnects.yaml baselines: malformed ({err})') from None

    def band(self, samples: list[float], kind: str) -> tuple[float, float, float, str]:
        """(value, lower, upper, comment) for the figures of a metric's runs."""
        center = statistics.median(samples)
        lo_cap, hi_cap = self.cap
        if len(samples) < max(self.min_runs, 2) or center == 0:
            return center, lo_cap, hi_cap, (f'{len(samples)} run(s): widest band ({1 + lo_cap:.2f}x..'
                                            f'{1 + hi_cap:.2f}x) until {self.min_runs} runs measure the spread')
        dev = max(abs(v - center) for v in samples) / abs(center)
        floor = self.floor.get(kind, self.floor.get('default', 0.05))
        half = max(self.spread_factor * dev, floor)
        lower, upper = -min(half, -lo_cap), min(half, hi_cap)
        comment = (f'{len(samples)} runs, largest deviation from their median {100 * dev:.1f}%: '
                   f'{self.spread_factor:g} x that, floor {100 * floor:.0f}% ({kind}), cap '
                   f'{1 + lo_cap:.2f}x..{1 + hi_cap:.2f}x')
        return center, lower, upper, comment


# -- the file ---------------------------------------------------------------------------------------------------

class Baseline:
    """One host's baseline of one system: samples per (partition, environ, interconnect, test, metric)."""

    def __init__(self, system: str, path: Path, data: Mapping | None = None):
        self.system = system
        self.path = path
        data = dict(data or {})
        if data and data.get('schema') != SCHEMA:
            raise BaselineError(f'{path}: schema must be {SCHEMA!r}, got {data.get("schema")!r}')
        self.host: dict = dict(data.get('host') or host_facts())
        self.host_id: str = str(data.get('host_id') or host_id(self.host))
        self.measured_by: str = str(data.get('measured_by') or '')
        self.runs: list = list(data.get('runs') or [])
        # (part, env, ic, test, metric) -> {'unit': str, 'kind': str, 'samples': [float]}
        self.entries: dict[tuple, dict] = {}
        for part, envs in (data.get('metrics') or {}).items():
            for env, ics in (envs or {}).items():
                for ic, tests in (ics or {}).items():
                    for test, metrics in (tests or {}).items():
                        for metric, entry in (metrics or {}).items():
                            samples = entry.get('samples') if isinstance(entry, Mapping) else None
                            if not isinstance(samples, list) or not samples:
                                raise BaselineError(f'{path}: {part}/{env}/{ic}/{test}/{metric}: no samples')
                            self.entries[(part, env, ic, test, str(metric))] = {
                                'unit': str(entry.get('unit', '')), 'kind': str(entry.get('kind', 'throughput')),
                                'samples': [float(s) for s in samples]}

    @classmethod
    def load(cls, system: str, directory: Path | None = None, host: str | None = None) -> 'Baseline | None':
        """This host's baseline of ``system``, or None when there is none."""
        path = baseline_path(system, directory, host)
        if not path.exists():
            return None
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            raise BaselineError(f'{path}: not valid YAML: {err}') from None
        return cls(system, path, data)

    def stale_reason(self, version: str | None = None) -> str | None:
        """Why this baseline cannot be compared with (None: it can)."""
        version = version or measurement_version()
        if self.measured_by != version:
            return (f'{self.path} was measured by another version of the kernels, checks or settings '
                    f'({self.measured_by or "unknown"}, now {version}): its figures do not describe this one')
        return None

    def add(self, measurements: Iterable, rules: BandRules, source: str) -> int:
        """Append one run's figures (``refstool.Measurement``); keep the last ``rules.window`` per metric."""
        n = 0
        for m in measurements:
            if m.system != self.system:
                continue
            entry = self.entries.setdefault((m.partition, m.environ, m.interconnect, m.test, m.metric),
                                            {'unit': m.unit, 'kind': m.kind, 'samples': []})
            entry['samples'] = (entry['samples'] + [float(f'{m.value:.5g}')])[-rules.window:]
            entry['unit'], entry['kind'] = m.unit, m.kind
            n += 1
        if n:
            self.runs = (self.runs + [{'recorded_utc': datetime.datetime.now(datetime.timezone.utc)
                                       .strftime('%Y-%m-%dT%H:%M:%SZ'), 'report': source, 'figures': n}])[-20:]
        return n

    def to_dict(self) -> dict:
        metrics: dict = {}
        for (part, env, ic, test, metric), entry in sorted(self.entries.items()):
            metrics.setdefault(part, {}).setdefault(env, {}).setdefault(ic, {}).setdefault(test, {})[metric] = entry
        return {'schema': SCHEMA, 'system': self.system, 'host_id': self.host_id, 'host': self.host,
                'measured_by': self.measured_by, 'runs': self.runs, 'metrics': metrics}

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix('.tmp')
        tmp.write_text(f'# netregress host baseline of {self.system!r} on host {self.host_id} (tools/refs show)\n'
                       + yaml.safe_dump(self.to_dict(), sort_keys=False, width=118))
        tmp.replace(self.path)

    def reference_set(self, rules: BandRules) -> references.ReferenceSet:
        """The baseline as references (value = median of the runs, band from their spread)."""
        tree: dict = {}
        for (part, env, ic, test, metric), entry in self.entries.items():
            value, lower, upper, comment = rules.band(entry['samples'], entry['kind'])
            base, size = references.split_metric(metric)
            node = tree.setdefault(part, {}).setdefault(env, {}).setdefault(ic, {}).setdefault(test, {})
            ref = {'value': value, 'lower': lower, 'upper': upper, 'unit': entry['unit'],
                   'comment': f'host baseline {self.host_id}: {comment}; runs: {entry["samples"]}'}
            if size is None:
                node[base] = ref
            else:
                node.setdefault(base, {'unit': entry['unit'], 'comment': 'host baseline', 'sizes': {}})
                node[base]['sizes'][size] = ref
        return references.ReferenceSet({'schema': references.SCHEMA, 'system': self.system, 'references': tree},
                                       self.system, source=str(self.path))
