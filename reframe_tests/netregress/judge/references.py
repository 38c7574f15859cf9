"""Committed reference performance: ``<system>.yaml`` of the reference directory (docs/references.md:
``$NETREGRESS_REFERENCES``, else the site's ``references/``, else the checkout's ``reference_values/``).

Layout (one file per system; PyYAML ships with ReFrame; the JSON Schema: ``config/references.schema.json``)::

    schema: netregress-references/1
    system: vcluster
    references:
      <partition>:
        <environment>:
          <interconnect>:
            <test>:
              <metric>:                       # one value
                {value: 941.2, lower: -0.05, upper: 0.05, unit: Mbit/s, comment: why this tolerance}
              <metric>:                       # a value per message size (bytes)
                unit: us
                comment: why this tolerance
                sizes: {8: {value: 12.1, lower: -0.6, upper: 1.5}, 1048576: {...}}
    changes: [...]                            # tools/refs accept's audit trail (when, who, reason, ...)

``lower``/``upper`` are fractions of ``value`` (ReFrame's convention: -0.05 = 5% below). A performance variable of a
check is named ``<metric>`` or ``<metric>@<size>``. Every lookup either returns a complete reference or raises
:class:`MissingReferenceError` naming the exact key path and the file: a missing reference is a failure, never a
silent pass (ReFrame itself would accept an unreferenced variable).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

import yaml

from .. import datafiles, paths
from ..measure import site


def load_yaml(text: str):
    """``yaml.safe_load`` of ``text`` through libyaml where available, aliases refused and nesting bounded
    (:func:`netregress.datafiles.load_yaml`: a ``yaml.YAMLError`` for either)."""
    return datafiles.load_yaml(text)


#: libyaml's emitter where PyYAML was built with it (3,000 figures dump in 0.3 s instead of 1.7 s), the safe
#: representer, and never an alias (an object met twice is written twice: readers refuse aliases)
_Dumper = type('_Dumper', (getattr(yaml, 'CSafeDumper', yaml.SafeDumper),),
               {'ignore_aliases': lambda self, data: True})



def dump_yaml(data) -> str:
    """``yaml.safe_dump`` of ``data`` in block style, keys in their order, lines up to 118 columns."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=118)


SCHEMA = 'netregress-references/1'


class ReferenceError(Exception):
    """A reference file is malformed."""


class MissingReferenceError(ReferenceError):
    """No reference stored for a (system, partition, environment, interconnect, test, metric[, size])."""


@dataclass(frozen=True)
class Reference:
    value: float
    lower: float | None          # None: open on that side (a one-sided band)
    upper: float | None
    unit: str
    comment: str
    #: the band is still a prior (the figure's own spread is not measured yet): only its worse side is judged
    #: (:meth:`as_judged`); set by a host baseline's shared-CPU references, never by a file
    prior: bool = False

    def as_reframe(self) -> tuple:
        """The tuple ReFrame's ``reference`` dict wants: (value, lower, upper, unit)."""
        return (self.value, self.lower, self.upper, self.unit)

    def worse_side(self, better: str) -> 'Reference':
        """This band with its better side open (``better``: ``'higher'`` or ``'lower'``, as the figure declares)."""
        if better not in ('higher', 'lower'):
            raise ReferenceError(f'better must be higher or lower, got {better!r}')
        return replace(self, upper=None) if better == 'higher' else replace(self, lower=None)

    def as_judged(self, better: str | None) -> 'Reference':
        """The band a run judges: a prior's worse side only, when the figure declares which side is ``better``
        (a first run's sample on shared CPUs can be 16-23x slow; a later run that reads far better is no
        regression, and what reads implausibly fast is provenance's to catch, not a band's)."""
        return self.worse_side(better) if self.prior and better else self


def split_metric(name: str) -> tuple[str, int | None]:
    """``'latency_us@8'`` -> ``('latency_us', 8)``; ``'bw_mbps'`` -> ``('bw_mbps', None)``."""
    metric, sep, size = name.partition('@')
    if not sep:
        return metric, None
    try:
        return metric, int(size)
    except ValueError:
        raise ReferenceError(f'performance variable {name!r}: size after "@" must be an integer') from None


def metric_name(metric: str, size: int | None = None) -> str:
    """Inverse of :func:`split_metric`."""
    return metric if size is None else f'{metric}@{int(size)}'


def reference_file(system: str, directory: Path | None = None) -> Path:
    """``<directory>/<system>.yaml`` (default: the site's reference directory); :class:`ReferenceError` for a
    system that is not a name (:func:`netregress.datafiles.checked_name`)."""
    try:
        datafiles.checked_name(system, 'system')
    except datafiles.UnsafeName as err:
        raise ReferenceError(str(err)) from None
    return (directory or site.reference_dir()) / f'{system}.yaml'


def _number(value, where: str) -> float:
    """A finite number; :class:`ReferenceError` naming ``where`` for anything else (NaN, infinity, text)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReferenceError(f'{where}: expected a number, got {value!r}')
    if not math.isfinite(float(value)):
        raise ReferenceError(f'{where}: expected a finite number, got {value!r}')
    return float(value)


def _entry(spec: Mapping, parent: Mapping, where: str) -> Reference:
    if not isinstance(spec, Mapping):
        raise ReferenceError(f'{where}: expected a mapping with value/lower/upper/unit/comment')
    missing = [k for k in ('value', 'lower', 'upper') if k not in spec]
    if missing:
        raise ReferenceError(f'{where}: missing {", ".join(missing)}')
    unit = spec.get('unit', parent.get('unit'))
    comment = spec.get('comment', parent.get('comment'))
    if not unit:
        raise ReferenceError(f'{where}: no unit')
    if not comment:
        raise ReferenceError(f'{where}: no comment saying where the tolerance comes from')
    value = _number(spec['value'], f'{where}.value')
    if value < 0:
        raise ReferenceError(f'{where}.value: {value:g} is negative (no figure netregress measures is)')
    # a one-sided band: null leaves that side open (ReFrame's own reading of a None bound); never both sides
    lower = None if spec['lower'] is None else _number(spec['lower'], f'{where}.lower')
    upper = None if spec['upper'] is None else _number(spec['upper'], f'{where}.upper')
    if lower is None and upper is None:
        raise ReferenceError(f'{where}: lower and upper are both null: a band open on both sides can never fail')
    if (lower is not None and lower > 0) or (upper is not None and upper < 0):
        raise ReferenceError(f'{where}: need lower <= 0 <= upper (fractions of value), got {lower}, {upper}')
    if lower is not None and lower < -1:
        raise ReferenceError(f'{where}.lower: {lower:g} is below -1 (a bound under zero; null leaves the side open)')
    return Reference(value=value, lower=lower, upper=upper, unit=str(unit), comment=str(comment).strip())


#: Where a figure sits in a reference file: (partition, environ, interconnect, test, metric[@size]).
FigureKey = tuple[str, str, str, str, str]


class ReferenceSet:
    """All references of one system."""

    def __init__(self, data: Mapping | None, system: str, source: str = '<memory>',
                 priors: frozenset[FigureKey] = frozenset()):
        self.system = system
        self.source = source
        #: the (partition, environ, interconnect, test, metric[@size]) whose band is still a prior
        #: (:attr:`Reference.prior`): given by a host baseline, never read from a file
        self.priors = priors
        if data is None:
            data = {}
        self.data = data
        if not isinstance(data, Mapping):
            raise ReferenceError(f'{source}: top level must be a mapping')
        if data and data.get('schema') != SCHEMA:
            raise ReferenceError(f'{source}: schema must be {SCHEMA!r}, got {data.get("schema")!r}')
        if data and data.get('system') not in (None, system):
            raise ReferenceError(f'{source}: file is for system {data.get("system")!r}, not {system!r}')
        self.tree: Mapping = data.get('references') or {}
        if not isinstance(self.tree, Mapping):
            raise ReferenceError(f'{source}: references: expected a mapping, got {type(self.tree).__name__}')
        #: the audit trail of ``tools/refs accept``, oldest first (docs/references.md)
        self.changes: list = data.get('changes') or []
        if not isinstance(self.changes, list):
            raise ReferenceError(f'{source}: changes: expected a list, got {type(self.changes).__name__}')

    def entries(self):
        """Every (partition, environ, interconnect, test, metric[@size]) and its validated reference;
        :class:`ReferenceError` naming the first level that is not a mapping, or a key that is not a name (a size
        that is not a whole number of bytes)."""
        def level(node, keys, what=None):
            where = f'{self.source}: {"/".join(map(str, keys)) or "references"}'
            if not isinstance(node, Mapping):
                raise ReferenceError(f'{where}: expected a mapping, got {type(node).__name__}')
            for key in node:
                if what is None:
                    if isinstance(key, bool) or not isinstance(key, int) or key < 0:
                        raise ReferenceError(f'{where}: size {key!r} is not a whole number of bytes')
                    continue
                try:
                    datafiles.checked_name(key, what)
                except datafiles.UnsafeName as err:
                    raise ReferenceError(f'{where}: {err}') from None
            return node.items()

        for part, envs in level(self.tree, [], 'partition'):
            for env, ics in level(envs, [part], 'environment'):
                for ic, tests in level(ics, [part, env], 'interconnect'):
                    for test, metrics in level(tests, [part, env, ic], 'test'):
                        for metric, spec in level(metrics, [part, env, ic, test], 'metric'):
                            sizes = spec.get('sizes') if isinstance(spec, Mapping) else None
                            if sizes is not None:
                                list(level(sizes, [part, env, ic, test, metric, 'sizes']))
                            for name in ([metric_name(metric, s) for s in sizes] if sizes else [metric]):
                                yield (part, env, ic, test, name), self.lookup(part, env, ic, test, name)

    def count(self) -> int:
        """Number of (metric[, size]) references, validating each one."""
        return sum(1 for _ in self.entries())

    def lookup(self, partition: str, environ: str, interconnect: str, test: str, metric: str) -> Reference:
        """The reference for one performance variable (``metric`` may carry ``@size``)."""
        base, size = split_metric(metric)
        keys = [partition, environ, interconnect, test, base]
        node = self.tree
        for depth, key in enumerate(keys):
            if not isinstance(node, Mapping) or key not in node:
                have = sorted(map(str, node)) if isinstance(node, Mapping) else []
                path = '/'.join([self.system, *keys[:depth + 1]])
                raise MissingReferenceError(
                    f'no reference for {self.system}:{partition} {environ} {interconnect} {test} {metric}: '
                    f'{path!r} missing in {self.source} (present at that level: {", ".join(have) or "nothing"}); '
                    f'baseline with tools/refs from a good run\'s report')
            node = node[key]
        where = f'{self.source}: {"/".join(keys)}'
        if size is None:
            if 'sizes' in node:
                raise ReferenceError(f'{where}: per-size reference, but the check asked for {metric!r} '
                                     f'without a size')
            ref = _entry(node, {}, where)
        else:
            sizes = node.get('sizes') if isinstance(node, Mapping) else None
            if not isinstance(sizes, Mapping) or size not in sizes:
                have = sorted(sizes) if isinstance(sizes, Mapping) else []
                raise MissingReferenceError(
                    f'no reference for {self.system}:{partition} {environ} {interconnect} {test} {metric}: '
                    f'size {size} missing in {where} (sizes present: {", ".join(map(str, have)) or "none"}); '
                    f'baseline with tools/refs from a good run\'s report')
            ref = _entry(sizes[size], node, f'{where}.sizes.{size}')
        return replace(ref, prior=True) if (partition, environ, interconnect, test, metric) in self.priors else ref


#: The JSON Schema of a reference file, in the checkout (docs/references.md describes it).
SCHEMA_FILE = 'config/references.schema.json'


def check_schema(data: Mapping, source: str) -> None:
    """:class:`ReferenceError` naming the first place where a reference document breaks the file format's JSON
    Schema (``config/references.schema.json``, described in docs/references.md): unknown keys, a malformed
    ``changes:`` entry, anything the entries' own checks (:meth:`ReferenceSet.count`) leave out."""
    import jsonschema  # type: ignore[import-untyped]
    validator = jsonschema.Draft202012Validator(_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(_string_keys(data)))
    if error is not None:
        where = '/'.join(map(str, error.absolute_path)) or 'top level'
        message = ' '.join(error.message.split())
        message = message if len(message) <= 200 else f'{message[:197]}...'
        raise ReferenceError(f'{source}: {where}: {message} ({SCHEMA_FILE})')


@functools.lru_cache(maxsize=1)
def _schema() -> dict:
    import json
    return json.loads((paths.repo_root() / SCHEMA_FILE).read_text())


def _string_keys(node):
    """``node`` with every mapping key as text (YAML reads a size as an integer; JSON Schema names are text)."""
    if isinstance(node, Mapping):
        return {str(k): _string_keys(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_string_keys(v) for v in node]
    return node


def load_file(path: Path, system: str, *, require: bool = False) -> ReferenceSet:
    """Parse one reference file; a file that does not exist is an empty set (every lookup then fails) unless
    ``require``. A file that exists but holds no document (cut to its header) is a :class:`ReferenceError`."""
    path = Path(path)
    if not path.exists():
        if require:
            raise ReferenceError(f'{path}: no such reference file')
        return ReferenceSet({}, system, source=str(path))
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ReferenceError(f'{path}: unreadable ({err})') from None
    try:
        data = load_yaml(text)
    except yaml.YAMLError as err:
        raise ReferenceError(f'{path}: not valid YAML ({" ".join(str(err).split())})') from None
    if data is None:
        raise ReferenceError(f'{path}: no references (an empty file, or one cut to its header)')
    return ReferenceSet(data, system, source=str(path))


def check_file(path: Path, system: str) -> int:
    """Every entry of the reference file ``path`` validated, and the whole against the schema; its number of
    references (:class:`ReferenceError` naming the file and the fault, also for a file that holds none)."""
    refset = load_file(path, system, require=True)
    n = refset.count()
    if not n:
        raise ReferenceError(f'{path}: no references (an empty tree: a reference file asserts nothing)')
    check_schema(refset.data, str(path))
    return n


@functools.lru_cache(maxsize=16)
def _load_cached(path: str, system: str, mtime: float) -> ReferenceSet:
    return load_file(Path(path), system)


def load(system: str, directory: Path | None = None) -> ReferenceSet:
    """The references of ``system`` from the reference directory (re-read when the file changes)."""
    path = reference_file(system, directory)
    mtime = path.stat().st_mtime if path.exists() else -1.0
    return _load_cached(str(path), system, mtime)
