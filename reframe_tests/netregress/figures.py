"""What a figure is: its kind decides the band it is judged by and whether it is asserted where CPUs are shared.

Kinds: 'latency' (times), 'ratio' (to a yardstick measured in the same job), 'throughput' (link-bound) and
'cpu_bound' (throughput that the CPU, the scheduler or a token-bucket burst decides).
"""
from __future__ import annotations

from . import references


#: Messages at least this large are link-bound; smaller ones are CPU/latency-bound.
LINK_BOUND_BYTES = 65536
#: Tests whose throughput is a peak over a curve (CPU, scheduler and token-bucket bursts decide it).
PEAK_TESTS = ('netpipe.', 'imb.')
#: Ratios of two CPU-bound figures from separate launches (a kernel's round trip to its peer's in the same job):
#: where the CPUs are shared the two launches can see different hosts (docs/validation.md), so they are judged
#: like the figures they divide.
CPU_BOUND_RATIOS = ('ratio_to_peer',)


def metric_kind(metric: str, unit: str, test: str = '') -> str:
    """Tolerance kind of a metric: 'latency', 'ratio', 'throughput' (link-bound) or 'cpu_bound'.

    Link-bound: streams (``*.stream*``, iperf3) of at least :data:`LINK_BOUND_BYTES`; a ping-pong alternates
    directions and waits a round trip per message, so its rate depends on latency and scheduling too. Sweep
    points are never link-bound: each lasts a fraction of a second (a handful of 1 MiB messages on 1 Gbit/s),
    so start-up and the shaper's queue decide them (a gige 1 MiB stream point: 952 then 532 Mbit/s).
    """
    base, size = references.split_metric(metric)
    if unit in ('us', 'ms', 's', 'ns') or base.endswith(('_us', '_s')):
        return 'latency'
    if base in CPU_BOUND_RATIOS:
        return 'cpu_bound'
    if unit == 'ratio' or base.startswith('ratio_'):
        return 'ratio'
    streaming = ('.stream' in test and '.sweep' not in test) or test.startswith('iperf3')
    if test.startswith(PEAK_TESTS) or not streaming or (size is not None and size < LINK_BOUND_BYTES):
        return 'cpu_bound'
    return 'throughput'


def asserted(kind: str, assert_cpu_bound: bool, link_rate: bool) -> bool:
    """Whether a figure of ``kind`` is asserted against its reference on a partition: always, unless the
    partition's extra ``assert_cpu_bound`` is False; then only ratios, and link-bound streams on a fabric with a
    line rate (``link_rate``). Rationale: base.NetregressCheck.asserted_absolute."""
    return assert_cpu_bound or kind == 'ratio' or (kind == 'throughput' and link_rate)
