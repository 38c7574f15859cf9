"""Loader for the interconnect x MPI-family table (``config/interconnects.yaml``).

The table says, for an interconnect and an MPI family, which environment variables force that path, which make the
library report the transport it chose, and which transports are acceptable. A pair missing from the table is an
error (:class:`InterconnectError`): a check must never run an MPI over a path nobody declared.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import yaml

from . import site

SCHEMA = 'netregress-interconnects/1'
COUNTER_KINDS = ('none', 'interface', 'infiniband')
#: Tolerance kinds an interconnect may leave out (its 'throughput' band then applies).
FALLBACK_KINDS = ('cpu_bound', 'ratio', 'oversubscribed')


class InterconnectError(Exception):
    """The table is malformed or lacks an (interconnect, MPI family) entry."""


@dataclass(frozen=True)
class Interconnect:
    """One interconnect: how many nodes it spans and how provenance is checked."""
    name: str
    description: str
    nodes: int
    counters: str
    tolerance: Mapping[str, object]
    #: Configured line rate (Mbit/s) of a link-bound fabric.
    rate_mbps: float | None = None
    #: The most TCP payload one of its links carries (Mbit/s): the line rate less framing (``payload_mbps`` in the
    #: table, else the line rate). Link-bound streams are asserted as a fraction of it.
    payload_mbps: float | None = None


@dataclass(frozen=True)
class MpiPath:
    """How to force one MPI family onto one interconnect, with placeholders already filled."""
    interconnect: str
    family: str
    env: dict[str, str] = field(default_factory=dict)
    launcher: list[str] = field(default_factory=list)
    report: dict[str, str] = field(default_factory=dict)
    transport: str | None = None

    def all_env(self) -> dict[str, str]:
        """Forcing variables plus the transport-report variables."""
        return {**self.env, **self.report}


def _fill(value: str, context: Mapping[str, str], where: str) -> str:
    try:
        return value.format_map(dict(context))
    except KeyError as err:
        raise InterconnectError(
            f'{where}: placeholder {err} is not defined for this partition '
            f'(known: {", ".join(sorted(context)) or "none"}); add it to the partition\'s '
            f'extras.interconnects block in config/settings.py') from None


def _rate(spec: Mapping, key: str, name: str, source: str) -> float | None:
    value = spec.get(key)
    if value is None:
        return None
    try:
        rate = float(value)
    except (TypeError, ValueError):
        rate = 0.0
    if rate <= 0:
        raise InterconnectError(f'{source}: interconnect {name!r}: {key} must be a positive number of Mbit/s, '
                                f'not {value!r}')
    return rate


class InterconnectTable:
    """The parsed table. Construct with :func:`load` (cached) or directly from a mapping (tests)."""

    def __init__(self, data: Mapping, source: str = '<memory>') -> None:
        self.source = source
        if not isinstance(data, Mapping) or data.get('schema') != SCHEMA:
            raise InterconnectError(f'{source}: not a {SCHEMA} table (schema key missing or different)')
        self._ics: dict[str, Interconnect] = {}
        for name, spec in (data.get('interconnects') or {}).items():
            counters = spec.get('counters', 'interface')
            if counters not in COUNTER_KINDS:
                raise InterconnectError(f'{source}: interconnect {name!r}: counters must be one of '
                                        f'{COUNTER_KINDS}, not {counters!r}')
            self._ics[name] = Interconnect(name=name, description=spec.get('description', ''),
                                           nodes=int(spec.get('nodes', 1)), counters=counters,
                                           tolerance=spec.get('tolerance') or {},
                                           rate_mbps=_rate(spec, 'rate_mbps', name, source),
                                           payload_mbps=_rate(spec, 'payload_mbps', name, source)
                                           or _rate(spec, 'rate_mbps', name, source))
        self._paths: Mapping = data.get('paths') or {}
        self.baselines: Mapping = data.get('baselines') or {}
        self.fixed: Mapping = data.get('fixed_bands') or {}
        self._oversubscribed: Mapping = data.get('oversubscribed') or {}
        if self._oversubscribed and 'tolerance' not in self._oversubscribed:
            raise InterconnectError(f'{source}: oversubscribed.tolerance missing ([lower, upper])')
        for ic in self._paths:
            if ic not in self._ics:
                raise InterconnectError(f'{source}: paths.{ic}: interconnect not declared under interconnects')

    @property
    def names(self) -> list[str]:
        """All declared interconnects, in table order."""
        return list(self._ics)

    def interconnect(self, name: str) -> Interconnect:
        try:
            return self._ics[name]
        except KeyError:
            raise InterconnectError(f'{self.source}: unknown interconnect {name!r} '
                                    f'(declared: {", ".join(self._ics)})') from None

    def families(self, interconnect: str) -> list[str]:
        """MPI families that have a path on ``interconnect``."""
        return list((self._paths.get(interconnect) or {}))

    def path(self, interconnect: str, family: str, context: Mapping[str, str] | None = None) -> MpiPath:
        """The forcing settings for ``family`` on ``interconnect``; placeholders filled from ``context``."""
        self.interconnect(interconnect)
        entry = (self._paths.get(interconnect) or {}).get(family)
        if entry is None:
            raise InterconnectError(
                f'{self.source}: no path for MPI family {family!r} on interconnect {interconnect!r} '
                f'(families with a path there: {", ".join(self.families(interconnect)) or "none"})')
        ctx = dict(context or {})
        where = f'{self.source}: paths.{interconnect}.{family}'
        env = {k: _fill(str(v), ctx, where) for k, v in (entry.get('env') or {}).items()}
        report = {k: _fill(str(v), ctx, where) for k, v in (entry.get('report') or {}).items()}
        launcher = [_fill(str(v), ctx, where) for v in (entry.get('launcher') or [])]
        transport = entry.get('transport')
        if transport is not None:
            transport = _fill(transport, {k: re.escape(str(v)) for k, v in ctx.items()}, where)
            re.compile(transport)
        return MpiPath(interconnect=interconnect, family=family, env=env, launcher=launcher,
                       report=report, transport=transport)

    def oversubscribed_env(self, family: str) -> dict[str, str]:
        """Variables that make an idle rank of ``family`` yield its CPU (empty: the family has none)."""
        return {k: str(v) for k, v in ((self._oversubscribed.get('env') or {}).get(family) or {}).items()}

    def fixed_band(self, name: str) -> tuple[float, float]:
        """A baseline-free band (``fixed_bands.<name>``: [lower, upper] as fractions of 1.0)."""
        try:
            lower, upper = self.fixed[name]
            return float(lower), float(upper)
        except (KeyError, TypeError, ValueError):
            raise InterconnectError(f'{self.source}: fixed_bands.{name} must be [lower, upper]') from None

    def tolerance(self, interconnect: str, kind: str) -> tuple[float, float, str]:
        """Default (lower, upper, comment) tolerance for a metric ``kind``.

        Kinds: 'throughput', 'latency', and 'cpu_bound' / 'ratio' / 'oversubscribed', which fall back to
        'throughput' where an interconnect does not distinguish them.
        """
        tol = self.interconnect(interconnect).tolerance
        if kind == 'oversubscribed' and self._oversubscribed:
            tol = {kind: self._oversubscribed['tolerance'], 'comment': self._oversubscribed.get('comment', '')}
        key = kind if kind in tol or kind not in FALLBACK_KINDS else 'throughput'
        try:
            lower, upper = tol[key]
        except (KeyError, TypeError, ValueError):
            raise InterconnectError(f'{self.source}: interconnects.{interconnect}.tolerance.{key} '
                                    f'must be [lower, upper]') from None
        return float(lower), float(upper), str(tol.get('comment', '')).strip()


@functools.lru_cache(maxsize=8)
def _load_cached(*files: str) -> InterconnectTable:
    with open(files[0]) as fp:
        doc = yaml.safe_load(fp)
    for extra_path in files[1:]:
        try:
            with open(extra_path) as fp:
                extra = yaml.safe_load(fp) or {}
        except (OSError, yaml.YAMLError) as err:
            raise InterconnectError(f'{extra_path}: {err}') from None
        if not isinstance(extra, dict) or not set(extra) <= {'schema', 'interconnects', 'paths', 'oversubscribed'}:
            raise InterconnectError(f'{extra_path}: a mapping with interconnects: and paths: (and schema:) expected')
        try:
            doc = site.overlay(doc, extra)
        except site.SiteError as err:
            raise InterconnectError(f'{extra_path}: {err}') from None
    return InterconnectTable(doc, source=' + '.join(files))


def load(path: Path | str | None = None) -> InterconnectTable:
    """Load (once per path) the table; default ``config/interconnects.yaml`` with the site's own table
    (``$NETREGRESS_SITE/interconnects.yaml``) merged over it (netregress.measure.site.overlay)."""
    if path is not None:
        return _load_cached(str(path))
    return _load_cached(*(str(f) for f in site.interconnect_files()))
