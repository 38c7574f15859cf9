"""The CPU cgroup a measurement ran in, and when the machine's quota rather than a node decided its figures.

A stream between processes is as fast as the CPU lets it be. When every node's processes ran under one and the same
CPU quota (a container's CPU limit, or tools/slow-machine) and the quota throttled them, a stream reads what the
shared quota left it at that moment, for every node alike: comparing one node or link with another then compares
moments (under 0.5 CPU here a node's loopback stream read 6-14 Gbit/s per pass, now and then 31; under 1 CPU the
links of the vcluster's veth fabric read 0.46-0.55 x their median, its shaped gigabit links 0.93-0.95 of the rate).
The checks record such a comparison instead of asserting it, and say why (:func:`shared_cpu_quota`); a node under a
quota its peers lack is a fault of that node, named with it (:func:`own_cpu_quotas`).

Readings come from the job itself: :data:`CPU_LIMIT_SH` in a shell step (the node probe), or nr-linkmap's
``cpu_limits`` (its ranks read their cgroup at start and at every report, nr/cpulimit.h): the cgroup v1 ``cpu``
controller's group, else the v2 group, its quota and how long it throttled the process.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class CpuLimit:
    """The CPU cgroup one measurement ran in: its path, quota in CPUs (None: none) and the seconds the quota
    throttled the group during the measurement."""
    cgroup: str
    quota_cpus: float | None
    throttled_s: float


#: Shell: one line ``cgroup=PATH quota_us=Q period_us=P throttled_ns=T`` for the CPU cgroup this shell runs in
#: (cgroup v1 ``cpu`` controller, else v2; quota -1: none); written before and after a measurement.
CPU_LIMIT_SH = (
    "awk -F: '$2 ~ /(^|,)cpu(,|$)/ {v1=$3} $1 == 0 {v2=$3} "
    "END {p = v1 != \"\" ? v1 : v2; d = v1 != \"\" ? \"/sys/fs/cgroup/cpu\" v1 : \"/sys/fs/cgroup\" v2; "
    "q = -1; per = 100000; t = 0; "
    "if ((getline l < (d \"/cpu.cfs_quota_us\")) > 0) q = l; "
    "if ((getline l < (d \"/cpu.cfs_period_us\")) > 0) per = l; "
    "if ((getline l < (d \"/cpu.max\")) > 0) {split(l, m, \" \"); q = m[1] == \"max\" ? -1 : m[1]; per = m[2]} "
    "while ((getline l < (d \"/cpu.stat\")) > 0) {split(l, m, \" \"); "
    "if (m[1] == \"throttled_time\") t = m[2]; if (m[1] == \"throttled_usec\") t = m[2] * 1000} "
    "printf \"cgroup=%s quota_us=%s period_us=%s throttled_ns=%s\\n\", p, q, per, t}' /proc/self/cgroup")


def _limit(cgroup: str, quota_us: int, period_us: int, throttled_ns: float) -> CpuLimit:
    return CpuLimit(cgroup, quota_us / period_us if quota_us > 0 and period_us > 0 else None,
                    max(0.0, throttled_ns / 1e9))


def read_cpu_limit(path: str) -> CpuLimit | None:
    """The two lines :data:`CPU_LIMIT_SH` wrote before and after a measurement; None if missing or garbled."""
    try:
        with open(path) as fp:
            rows = [dict(kv.split('=', 1) for kv in line.split()) for line in fp if line.strip()]
        before, after = rows[0], rows[-1]
        return _limit(after['cgroup'], int(after['quota_us']), int(after['period_us']),
                      int(after['throttled_ns']) - int(before['throttled_ns']))
    except (OSError, IndexError, KeyError, ValueError):
        return None


def from_linkmap(doc: Mapping) -> dict[str, list[CpuLimit | None]]:
    """host -> the readings of its ranks in an nr-linkmap result (``cpu_limits``: one per rank, null where a rank
    sent no report or found no cgroup); {} for a result without them (a kernel older than the field)."""
    hosts, entries = doc.get('hosts') or [], doc.get('cpu_limits')
    if not isinstance(entries, list):
        return {}
    out: dict[str, list[CpuLimit | None]] = {}
    for rank, entry in enumerate(entries):
        host = str(hosts[rank]) if rank < len(hosts) else f'rank {rank}'
        try:
            limit = _limit(str(entry['cgroup']), int(entry['quota_us']), int(entry['period_us']),
                           float(entry['throttled_ns']))
        except (TypeError, KeyError, ValueError):
            limit = None
        out.setdefault(host, []).append(limit)
    return out


def shared_cpu_quota(limits: Mapping[str, list[CpuLimit | None]], *, one_machine: bool, unit: str = 'passes',
                     consequence: str = 'the nodes\' ratio is recorded, not asserted') -> str | None:
    """Why the nodes cannot be compared, if so: every reading of every node is of one cgroup whose CPU quota
    throttled at least one of them (the machine's limit, not a node's); None otherwise, or when a reading is
    missing (then nothing is known about the others either). Only where the nodes share ``one_machine``'s CPUs
    (the partition extra ``host_cpus``): on a cluster the same path on two nodes (Slurm's
    ``/.../job_N/step_0``) names two groups, each node's own."""
    readings = [c for per_node in limits.values() for c in per_node]
    if not one_machine or len(limits) < 2 or not readings or any(c is None for c in readings):
        return None
    groups = {(c.cgroup, c.quota_cpus) for c in readings}
    (cgroup, quota), throttled = next(iter(groups)), sum(c.throttled_s > 0 for c in readings)
    if len(groups) != 1 or quota is None or not throttled:
        return None
    return (f'every node ran under one CPU quota (cgroup {cgroup}: {quota:g} CPU), which throttled {throttled} of '
            f'{len(readings)} {unit}: this machine\'s limit, not a node\'s; {consequence}')


def own_cpu_quotas(limits: Mapping[str, list[CpuLimit | None]]) -> dict[str, str]:
    """Nodes that ran under a CPU quota not every node ran under: node -> what to add to its verdict."""
    quotas = {n: {(c.cgroup, c.quota_cpus) for c in per_node if c and c.quota_cpus} for n, per_node in limits.items()}
    everywhere = set.intersection(*quotas.values()) if quotas else set()
    return {n: ', '.join(f'under a CPU quota of {q:g} CPU (cgroup {g}) that not every node has'
                         for g, q in sorted(own - everywhere))
            for n, own in quotas.items() if own - everywhere}
