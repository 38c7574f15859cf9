"""Band rules of host baselines: how a reference band is drawn from the runs a baseline keeps.

:class:`BandRules` is the ``baselines:`` block of ``config/interconnects.yaml``: the normal band (a multiple of the
largest deviation of a run from the median, between a floor per kind and the cap) and the wide band of CPU-bound
figures on shared CPUs (a factor either side, from the figure's own spread or its host's swing). It judges figures
and makes none, so a change here starts no new measurement version (netregress.measurement).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
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
                                          whole=True))

    def band(self, samples: list[float], kind: str,
             sibling_dev: float = 0.0) -> tuple[float, float, float, str]:
        """(value, lower, upper, comment) for the figures of a metric's runs; ``sibling_dev``: the largest relative
        deviation of the same figure of the other MPI builds on the same path (:meth:`Baseline.sibling_deviations`),
        used where it is larger than the figure's own."""
        center = statistics.median(samples)
        lo_cap, hi_cap = self.cap
        if len(samples) < max(self.min_runs, 2) or center == 0:
            # No spread measured yet, so no sharp band: one run is no centre (Open MPI 5's gige round-trip ratio
            # read 0.93 in a host's first run, then 1.30-2.02 in five more; the cap around 0.93 failed the second
            # and third). Until then only a collapse fails: the factor of the shared-CPU floor either side.
            factor = self.shared_floor
            return center, 1 / factor - 1, factor - 1, (
                f'{len(samples)} run(s): the spread is not measured yet, so only a collapse fails (/{factor:g}..'
                f'x{factor:g}) until {self.min_runs} runs measure it')
        own = max(abs(v - center) for v in samples) / abs(center)
        dev = max(own, sibling_dev)
        floor = self.floor.get(kind, self.floor.get('default', 0.05))
        half = max(self.spread_factor * dev, floor)
        lower, upper = -min(half, -lo_cap), min(half, hi_cap)
        sibling = f' (its siblings\' on other MPI builds; its own {100 * own:.1f}%)' if sibling_dev > own else ''
        comment = (f'{len(samples)} runs, largest deviation from their median {100 * dev:.1f}%{sibling}: '
                   f'{self.spread_factor:g} x that, floor {100 * floor:.0f}% ({kind}), cap '
                   f'{1 + lo_cap:.2f}x..{1 + hi_cap:.2f}x')
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

    def shared_cpu_band(self, samples: list[float],
                        host_swing: float = 1.0) -> tuple[float, float, float, str] | None:
        """(value, lower, upper, comment) of a CPU-bound figure on CPUs shared with the host's other work: a factor
        either side of the median, from the spread of the runs in log space (a swing of 2-6x is symmetric as a
        factor, not as a difference) or the ``host_swing`` of its partition and interconnect if wider, between
        ``shared_floor`` and ``shared_cap``. None (recorded, not judged) until ``min_runs`` runs measured the
        spread: one run is no centre here (a single OSU shared-memory point of the first run read 41.6 us at 16 B
        where the next read 0.21), and 28 cases of the first run judged against a one-run baseline failed for it;
        None too when a run's figure is 0 (no factor of it means anything)."""
        if len(samples) < max(self.min_runs, 2) or min(samples) <= 0:
            return None
        center = statistics.median(samples)
        dev = max(abs(math.log(v / center)) for v in samples)
        own = math.exp(self.shared_spread_factor * dev)
        factor = min(max(own, host_swing, self.shared_floor), self.shared_cap)
        comment = (f'{len(samples)} runs on shared CPUs, largest deviation from their median x{math.exp(dev):.2f}: '
                   f'band /{factor:.2f}..x{factor:.2f} (the wider of its log-spread x{self.shared_spread_factor:g} '
                   f'and the host swing x{host_swing:.2f}, at least x{self.shared_floor:g}, at most '
                   f'x{self.shared_cap:g})')
        return center, 1 / factor - 1, factor - 1, comment


def load() -> BandRules:
    """The band rules of the interconnect table in force (``config/interconnects.yaml``, a site's over it)."""
    return BandRules.from_table(interconnects.load().baselines)
