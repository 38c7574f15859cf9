"""Band rules of host baselines: how a reference band is drawn from the runs a baseline keeps.

:class:`BandRules` is the ``baselines:`` block of ``config/interconnects.yaml``: the normal band (a multiple of the
largest deviation of a run from the median, between a floor per kind and the cap) and the wide band of CPU-bound
figures on shared CPUs (a factor either side, from the figure's own spread or its host's swing). Until a figure's
own runs number ``min_runs`` its band starts from a prior band and narrows toward its own by run count
(:meth:`BandRules.narrowed`; the rule: docs/validation.md, "Before a figure's spread is measured"). It judges
figures and makes none, so a change here starts no new measurement version (netregress.measurement).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Mapping

from ..measure import interconnects


class BaselineError(Exception):
    """A baseline file, or the band rules it is judged by, is unreadable or malformed."""


@dataclass(frozen=True)
class BandRules:
    """``config/interconnects.yaml`` ``baselines:`` block."""
    window: int
    min_runs: int
    spread_factor: float
    floor: Mapping[str, float]
    cap: tuple[float, float]
    #: the ``shared_cpu`` band of a CPU-bound figure where nodes share a VM's CPUs: log-space spread factor, and the
    #: least and most factor either side (:meth:`shared_cpu_band`)
    shared_spread_factor: float = 4.0
    shared_floor: float = 4.0
    shared_cap: float = 15.0
    #: the host's swing (:meth:`host_swing`): this quantile of every figure's |log(run / median)| of a partition
    #: and interconnect, times ``shared_pool_factor`` in log space, from ``shared_pool_min`` deviations on
    shared_pool_quantile: float = 0.999
    shared_pool_factor: float = 1.5
    shared_pool_min: int = 1000
    #: the prior band of a figure whose own spread is not measured yet, per kind: a fraction either side (as
    #: ``floor``), for the normal band (:meth:`band`)
    prior: Mapping[str, float] = field(default_factory=dict)
    #: the prior band of the shared-CPU band, a factor either side (:meth:`shared_cpu_band`)
    shared_prior: float = 15.0

    @classmethod
    def from_table(cls, data: Mapping | None, source: str = 'config/interconnects.yaml') -> 'BandRules':
        """The rules of a ``baselines:`` block; :class:`BaselineError` naming the key for a value out of range:
        window and min_runs whole numbers >= 1, spread_factor > 0, floors in [0, 1), cap [lower, upper] with
        -1 < lower <= 0 <= upper, every number finite."""
        where = f'{source} baselines'
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise BaselineError(f'{where}: expected a mapping, got {type(data).__name__}')

        def number(key, value, lo, hi, lo_open=False, hi_open=False, whole=False):
            ok_type = isinstance(value, int) if whole else isinstance(value, (int, float))
            if isinstance(value, bool) or not ok_type:
                raise BaselineError(f'{where}.{key}: expected {"a whole number" if whole else "a number"}, '
                                    f'got {value!r}')
            v = float(value)
            if not math.isfinite(v) or v < lo or (lo_open and v == lo) or v > hi or (hi_open and v == hi):
                rng = f'{"(" if lo_open else "["}{lo:g}, {hi:g}{")" if hi_open else "]"}'
                raise BaselineError(f'{where}.{key}: {value!r} is out of range {rng}')
            return int(value) if whole else v

        cap = data.get('cap', [-0.33, 0.5])
        if not isinstance(cap, (list, tuple)) or len(cap) != 2:
            raise BaselineError(f'{where}.cap: expected [lower, upper], got {cap!r}')
        floor = data.get('floor') or {}
        if not isinstance(floor, Mapping):
            raise BaselineError(f'{where}.floor: expected a mapping of kind: fraction, got {floor!r}')
        shared = data.get('shared_cpu') or {}
        if not isinstance(shared, Mapping):
            raise BaselineError(f'{where}.shared_cpu: expected a mapping (spread_factor, floor, cap), got {shared!r}')
        shared_floor = number('shared_cpu.floor', shared.get('floor', 4.0), 1, 1000)
        prior = data.get('prior') or {}
        if not isinstance(prior, Mapping):
            raise BaselineError(f'{where}.prior: expected a mapping of kind: fraction, got {prior!r}')
        return cls(window=number('window', data.get('window', 5), 1, 1000, whole=True),
                   min_runs=number('min_runs', data.get('min_runs', 3), 1, 1000, whole=True),
                   spread_factor=number('spread_factor', data.get('spread_factor', 4.0), 0, 1000, lo_open=True),
                   floor={str(k): number(f'floor.{k}', v, 0, 1, hi_open=True) for k, v in floor.items()},
                   cap=(number('cap[0]', cap[0], -1, 0, lo_open=True), number('cap[1]', cap[1], 0, 1000)),
                   shared_spread_factor=number('shared_cpu.spread_factor', shared.get('spread_factor', 4.0), 0, 1000,
                                               lo_open=True),
                   shared_floor=shared_floor,
                   shared_cap=number('shared_cpu.cap', shared.get('cap', 15.0), shared_floor, 1000),
                   shared_pool_quantile=number('shared_cpu.pool_quantile', shared.get('pool_quantile', 0.999), 0, 1,
                                               lo_open=True, hi_open=True),
                   shared_pool_factor=number('shared_cpu.pool_factor', shared.get('pool_factor', 1.5), 0, 1000,
                                             lo_open=True),
                   shared_pool_min=number('shared_cpu.pool_min', shared.get('pool_min', 1000), 1, 10 ** 9,
                                          whole=True),
                   prior={str(k): number(f'prior.{k}', v, 0, 1000, lo_open=True) for k, v in prior.items()},
                   shared_prior=number('shared_cpu.prior', shared.get('prior', 15.0), 1, 1000))

    def narrowed(self, runs: int, prior: float, own: float) -> float:
        """The band of a figure measured in ``runs`` runs, from its ``prior`` band and the band its ``own`` runs
        support (both as the width of one side: a fraction for the normal band, a log factor for the shared-CPU
        band): from ``min_runs`` runs (two at least) its own; before, the two weighted by run count,
        ``min_runs - runs`` for the prior and ``runs - 1`` for its own (one run measures no spread), never narrower
        than its own."""
        full = max(self.min_runs, 2)
        if runs >= full:
            return own
        return max(((full - runs) * prior + (runs - 1) * own) / (full - 1), own)

    def prior_band(self, kind: str) -> float:
        """The committed prior band of ``kind`` (a fraction either side): ``prior`` of the kind, else its
        ``default``, else the cap's upper side."""
        return self.prior.get(kind, self.prior.get('default', self.cap[1]))

    def band(self, samples: list[float], kind: str, sibling_dev: float = 0.0,
             prior: float | None = None) -> tuple[float, float, float, str]:
        """(value, lower, upper, comment) for the figures of a metric's runs; ``sibling_dev``: the largest relative
        deviation of the same figure of the other MPI builds on the same path (:meth:`Baseline.sibling_deviations`),
        used where it is larger than the figure's own; ``prior``: its prior band (a fraction either side), default
        its kind's (:attr:`prior`), narrowed toward its own band until ``min_runs`` runs (:meth:`narrowed`)."""
        center = statistics.median(samples)
        lo_cap, hi_cap = self.cap
        if center == 0:
            # a figure of 0: no fraction of it is a band, and what reads 0 must read 0 again
            return center, -0.75, 3.0, f'{len(samples)} run(s) with median 0: only 0 passes'
        own = max(abs(v - center) for v in samples) / abs(center)
        dev = max(own, sibling_dev)
        floor = self.floor.get(kind, self.floor.get('default', 0.05))
        half = max(self.spread_factor * dev, floor)
        sibling = f' (its siblings\' on other MPI builds; its own {100 * own:.1f}%)' if sibling_dev > own else ''
        spread = (f'largest deviation from their median {100 * dev:.1f}%{sibling}: {self.spread_factor:g} x that, '
                  f'floor {100 * floor:.0f}% ({kind})')
        if len(samples) < max(self.min_runs, 2):
            if prior is None:
                prior = self.prior_band(kind)
            half = self.narrowed(len(samples), prior, half)
            spread = (f'its spread not measured yet: the prior band {100 * prior:.0f}% ({kind}) narrowed by run '
                      f'count toward its own ({spread}) to {100 * half:.0f}%')
        lower, upper = -min(half, -lo_cap), min(half, hi_cap)
        comment = f'{len(samples)} run(s), {spread}, cap {1 + lo_cap:.2f}x..{1 + hi_cap:.2f}x'
        return center, lower, upper, comment

    def host_swing(self, deviations: list[float]) -> float:
        """The factor by which the host's state moves a CPU-bound figure of one partition and interconnect:
        ``shared_pool_quantile`` of the pooled |log(run / median)| of all its figures, that log-spread times
        ``shared_pool_factor``; 1 (no say) below ``shared_pool_min`` deviations. Three runs of one figure miss the
        rare deep swing that a few thousand figures of the same host catch (five clean runs on a 2-vCPU VM: 15 of
        16,000 readings more than 10x from their figure's median, the worst 30x), so each band stands on the pool."""
        if len(deviations) < self.shared_pool_min:
            return 1.0
        ranked = sorted(deviations)
        q = ranked[min(len(ranked) - 1, int(self.shared_pool_quantile * len(ranked)))]
        return math.exp(self.shared_pool_factor * q)

    def shared_cpu_band(self, samples: list[float], host_swing: float = 1.0,
                        prior: float | None = None) -> tuple[float, float, float, str] | None:
        """(value, lower, upper, comment) of a CPU-bound figure on CPUs shared with the host's other work: a factor
        either side of the median, from the spread of the runs in log space (a swing of 2-6x is symmetric as a
        factor, not as a difference) or the ``host_swing`` of its partition and interconnect if wider, between
        ``shared_floor`` and ``shared_cap``. Until ``min_runs`` runs measured the spread it narrows from its prior
        band (``prior``, default :attr:`shared_prior`) toward that, in log space (:meth:`narrowed`): one run is
        no centre here (a single OSU shared-memory point of the first run read 41.6 us at 16 B where the next read
        0.21), so the prior is wide. None (recorded, not judged) when a run's figure is 0: no factor of it means
        anything."""
        if min(samples) <= 0:
            return None
        center = statistics.median(samples)
        dev = max(abs(math.log(v / center)) for v in samples)
        own = math.exp(self.shared_spread_factor * dev)
        factor = min(max(own, host_swing, self.shared_floor), self.shared_cap)
        spread = (f'largest deviation from their median x{math.exp(dev):.2f}: band /{factor:.2f}..x{factor:.2f} '
                  f'(the wider of its log-spread x{self.shared_spread_factor:g} and the host swing '
                  f'x{host_swing:.2f}, at least x{self.shared_floor:g}, at most x{self.shared_cap:g})')
        if len(samples) < max(self.min_runs, 2):
            if prior is None:
                prior = self.shared_prior
            factor = min(math.exp(self.narrowed(len(samples), math.log(prior), math.log(factor))), self.shared_cap)
            spread = (f'its spread not measured yet: the prior band x{prior:.2f} narrowed by run count toward its '
                      f'own ({spread}) to /{factor:.2f}..x{factor:.2f}')
        return center, 1 / factor - 1, factor - 1, f'{len(samples)} run(s) on shared CPUs, {spread}'


def load() -> BandRules:
    """The band rules of the interconnect table in force (``config/interconnects.yaml``, a site's over it)."""
    return BandRules.from_table(interconnects.load().baselines)
