"""What a figure is, as each check declares it with its performance variables.

A :class:`Figure` says once what a performance variable measures: its kind, a label for people, and which
direction is better. The kind decides the band it is judged by (``config/interconnects.yaml``) and whether it is
asserted where CPUs are shared (:func:`asserted`). Kinds:

``throughput``  a stream the link bounds (iperf3, a large-message stream of ours);
``cpu_bound``   throughput that the CPU, the scheduler or a token-bucket burst decides (ping-pong, sweep points,
                peaks over a curve, collectives, application rates);
``latency``     times;
``ratio``       a ratio to a yardstick measured in the same job, or a fraction of a link's rate.

A check declares a figure where it defines the performance variable (``NetregressCheck.add_figure``,
``KernelMixin.add_metric``, ``NetregressCheck.declare_figure``); the declaration of ``name`` covers ``name@size``
too, where ``cpu_bound_below`` may make the small sizes CPU-bound. Every case records what its performance
variables are in the loggable variable ``nr_figures`` (ReFrame's run report: ``testcase['nr_figures'][var] =
{'kind', 'label', 'better'}``, the contract with netregress_postrun); a performance variable without a declaration
fails the case at setup, naming it. Nothing is guessed from test or variable names: renaming a test does not
change its band.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from . import references

KINDS = ('throughput', 'cpu_bound', 'latency', 'ratio')
BETTER = ('higher', 'lower')

#: Messages at least this large can be link-bound; smaller ones are CPU/latency-bound (``cpu_bound_below``).
LINK_BOUND_BYTES = 65536


class FigureError(ValueError):
    """A figure declaration is malformed, or a performance variable has none."""


@dataclass(frozen=True)
class Figure:
    """What one performance variable (or every ``name@size`` of it) is."""

    #: One of :data:`KINDS`.
    kind: str
    #: For people: what was measured (``'TCP stream throughput, blocking'``); a size is appended per size.
    label: str
    #: ``'higher'`` or ``'lower'``: which direction of the value is the better one.
    better: str = 'higher'
    #: For per-size variables (``name@size``) of a ``throughput`` figure: sizes below this many bytes are
    #: ``cpu_bound`` (e.g. :data:`LINK_BOUND_BYTES`); 0: every size has ``kind``.
    cpu_bound_below: int = 0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise FigureError(f'figure {self.label!r}: kind {self.kind!r} is not one of {", ".join(KINDS)}')
        if self.better not in BETTER:
            raise FigureError(f'figure {self.label!r}: better {self.better!r} is not one of {", ".join(BETTER)}')
        if not self.label:
            raise FigureError('a figure needs a label')
        if self.cpu_bound_below and self.kind != 'throughput':
            raise FigureError(f'figure {self.label!r}: cpu_bound_below applies to throughput figures only')

    def at(self, size: int | None) -> Figure:
        """The figure of variable ``name@size`` (``size`` None: ``name`` itself)."""
        if size is None:
            return self
        kind = 'cpu_bound' if size < self.cpu_bound_below else self.kind
        return replace(self, kind=kind, label=f'{self.label}, {size_text(size)}', cpu_bound_below=0)

    def as_dict(self) -> dict[str, str]:
        """The ``nr_figures`` entry: ``{'kind', 'label', 'better'}``."""
        return {'kind': self.kind, 'label': self.label, 'better': self.better}


def latency(label: str) -> Figure:
    """A time (lower is better)."""
    return Figure('latency', label, 'lower')


def throughput(label: str, cpu_bound_below: int = 0) -> Figure:
    """A stream the link bounds (higher is better); per-size variables below ``cpu_bound_below`` are CPU-bound."""
    return Figure('throughput', label, 'higher', cpu_bound_below)


def cpu_bound(label: str, better: str = 'higher') -> Figure:
    """A figure the CPU, the scheduler or a burst decides."""
    return Figure('cpu_bound', label, better)


def ratio(label: str, better: str = 'higher') -> Figure:
    """A ratio to a yardstick in the same job or a fraction of a link's rate."""
    return Figure('ratio', label, better)


def size_text(size: int) -> str:
    """``1048576`` -> ``'1 MiB'``, ``4096`` -> ``'4 KiB'``, ``1000`` -> ``'1000 B'``."""
    for unit, scale in (('GiB', 1 << 30), ('MiB', 1 << 20), ('KiB', 1 << 10)):
        if size >= scale and size % scale == 0:
            return f'{size // scale} {unit}'
    return f'{size} B'


def resolve(declared: Mapping[str, Figure], name: str) -> Figure | None:
    """The figure of performance variable ``name``: its own declaration, else its metric's (``name`` without
    ``@size``) at that size; None when neither is declared."""
    if name in declared:
        return declared[name]
    base, size = references.split_metric(name)
    if size is not None and base in declared:
        return declared[base].at(size)
    return None


def describe(check: str, names, declared: Mapping[str, Figure]) -> dict[str, dict[str, str]]:
    """``nr_figures`` of a case: ``{name: {'kind', 'label', 'better'}}`` for every performance variable in
    ``names``; :class:`FigureError` naming ``check`` and every variable without a declaration."""
    out, missing = {}, []
    for name in names:
        figure = resolve(declared, name)
        if figure is None:
            missing.append(name)
        else:
            out[name] = figure.as_dict()
    if missing:
        raise FigureError(f'{check}: performance variable(s) {", ".join(sorted(missing))} have no figure '
                          f'declaration (kind, label, better): declare each where it is defined '
                          f'(netregress.figures)')
    return out


def asserted(kind: str, assert_cpu_bound: bool, link_rate: bool) -> bool:
    """Whether a figure of ``kind`` is asserted against its reference on a partition: always, unless the
    partition's extra ``assert_cpu_bound`` is False; then only ratios, and link-bound streams on a fabric with a
    line rate (``link_rate``). Rationale: base.NetregressCheck.asserted_absolute."""
    return assert_cpu_bound or kind == 'ratio' or (kind == 'throughput' and link_rate)
