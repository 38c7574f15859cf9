"""The link test's plans: rounds of directed pairs that one nr-linkmap job measures.

:func:`round_robin` pairs the nodes (circle method); :func:`full_plan`, :func:`sample_plan` and
:func:`topology_plan` turn that and Slurm's switch tree into rounds (:class:`LinkPlan`, whose text is nr-linkmap's
plan file); :func:`estimate` is the cost model ``ci/post-maintenance --plan`` prints. ``netregress.allpairs``
describes the method, ``netregress.linkverdict`` reads what the job wrote.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Mapping, Sequence

#: Runs one task on a named node of the job when the partition has no ``on_named_node`` extra (Slurm).
SLURM_ON_NAMED_NODE = ['srun', '--mpi=none', '--overlap', '--nodes=1', '--ntasks=1', '--nodelist={node}']


# --- pairing -------------------------------------------------------------------------------------------------------

def round_robin(nodes: Sequence[str]) -> list[list[tuple[str, str]]]:
    """Rounds of disjoint pairs covering every pair of ``nodes`` exactly once (circle method).

    The first node stays in place while the others rotate one position per round; position i plays position n-1-i.
    Even N: N-1 rounds of N/2 pairs. Odd N: a placeholder makes it even, so there are N rounds of (N-1)/2 pairs and
    each node sits out (has a bye in) exactly one round. Within a pair the node earlier in ``nodes`` comes first.
    """
    nodes = list(nodes)
    if len(set(nodes)) != len(nodes):
        raise ValueError(f'duplicate node names in {nodes}')
    if len(nodes) < 2:
        return []
    order = {n: i for i, n in enumerate(nodes)}
    circle: list[str | None] = nodes + ([None] if len(nodes) % 2 else [])
    n = len(circle)
    rounds = []
    for _ in range(n - 1):
        pairs = []
        for i in range(n // 2):
            x, y = circle[i], circle[n - 1 - i]
            if x is not None and y is not None:
                pairs.append((x, y) if order[x] < order[y] else (y, x))
        rounds.append(sorted(pairs, key=lambda p: order[p[0]]))
        circle = [circle[0], circle[-1]] + circle[1:-1]
    return rounds


# --- plans for nr-linkmap: rounds of directed pairs, one MPI job for all of them ------------------------------------

@dataclass(frozen=True)
class LinkPlan:
    """The rounds one nr-linkmap job runs: each round a list of directed (sender, receiver) pairs in which every
    node sends at most once and receives at most once, all at the same time."""
    name: str
    nodes: tuple[str, ...]
    rounds: tuple[tuple[tuple[str, str], ...], ...]
    note: str = ''

    @property
    def pairs(self) -> int:
        """Directed streams the plan runs (a pair in two passes counts twice)."""
        return sum(len(r) for r in self.rounds)

    def links(self) -> set[frozenset[str]]:
        """The node pairs (links) the plan measures, in at least one direction."""
        return {frozenset(p) for r in self.rounds for p in r}

    def passes(self, count: int) -> LinkPlan:
        """The rounds run ``count`` times, every other pass in reverse round order, so that a direction's two
        measurements lie far apart in time; the link verdict takes each direction's best (``collect_links``): a
        stream starved for a moment by the host's scheduler no longer fails a good link, a slow link is slow in
        every pass. ``count`` 1: the plan itself."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f'link passes must be a whole number of at least 1, not {count!r}')
        if count == 1:
            return self
        rounds = [r for k in range(count) for r in (self.rounds if k % 2 == 0 else self.rounds[::-1])]
        note = f'{self.note + "; " if self.note else ""}{count} passes, each direction\'s best counts'
        return LinkPlan(self.name, self.nodes, tuple(rounds), note)

    def text(self) -> str:
        """The plan file nr-linkmap reads (``--plan-file``): one round per line of ``SRC>DST`` by host name."""
        head = f'# netregress link plan {self.name}: {len(self.nodes)} nodes, {len(self.rounds)} rounds, ' \
               f'{self.pairs} directed streams{"; " + self.note if self.note else ""}\n'
        return head + ''.join(' '.join(f'{a}>{b}' for a, b in r) + '\n' for r in self.rounds)


def _duplex(pairs: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Both directions of every pair of a matching: each node sends to and receives from its partner at once."""
    return tuple(d for a, b in pairs for d in ((a, b), (b, a)))


def split_rounds(rounds: Sequence[Sequence[tuple[str, str]]], max_streams: int | None) -> list[tuple]:
    """Rounds cut so that at most ``max_streams`` directed pairs stream at a time: where nodes share a host's CPUs,
    concurrent streams measure the CPU, not the links (1: one stream at a time, as a single-pair test would)."""
    if not max_streams:
        return [tuple(r) for r in rounds]
    return [tuple(r[i:i + max_streams]) for r in rounds for i in range(0, len(r), max_streams)]


def full_plan(nodes: Sequence[str], max_streams: int | None = None) -> LinkPlan:
    """Every link, both directions at once: the N-1 (N odd: N) perfect matchings of :func:`round_robin`."""
    rounds = split_rounds([_duplex(r) for r in round_robin(nodes)], max_streams)
    return LinkPlan('full', tuple(nodes), tuple(rounds), 'every link, both directions at once')


def sample_plan(nodes: Sequence[str], per_run: int, run_index: int, seed: int,
                max_streams: int | None = None) -> LinkPlan:
    """``per_run`` perfect matchings of this run: the tournament of the nodes in an order fixed by ``seed``, run
    ``run_index`` taking its matchings ``run_index * per_run ...`` (cyclically), so that ``runs_to_cover`` runs in a
    row measure every link."""
    order = list(nodes)
    random.Random(seed).shuffle(order)
    matchings = round_robin(order)
    if not matchings:
        return LinkPlan('sample', tuple(nodes), ())
    k = max(1, min(per_run, len(matchings)))
    start = (run_index * k) % len(matchings)
    chosen = [matchings[(start + i) % len(matchings)] for i in range(k)]
    runs = -(-len(matchings) // k)
    note = (f'matchings {start + 1}-{start + k} of {len(matchings)} (seed {seed}); every link within {runs} runs '
            f'in a row')
    return LinkPlan('sample', tuple(nodes), tuple(split_rounds([_duplex(r) for r in chosen], max_streams)), note)


def runs_to_cover(nodes: int, per_run: int) -> int:
    """Runs of :func:`sample_plan` in a row that measure every link of ``nodes`` nodes."""
    matchings = nodes - 1 if nodes % 2 == 0 else nodes
    return -(-max(1, matchings) // max(1, per_run))


def topology_plan(leaves: Mapping[str, Sequence[str]], max_streams: int | None = None) -> LinkPlan:
    """From the switch tree: the links inside every leaf switch (all leaves at once, round robin), then the leaves
    against each other, every node of leaf i with its counterpart in leaf i+s (s = 1 .. L-1) at the same time, so
    that every uplink carries as many streams as its smaller leaf has nodes (Netgauge's effective bisection
    bandwidth, switch by switch) and a slow uplink shows on every pair that crosses it."""
    names = [n for n in leaves if leaves[n]]
    nodes = tuple(n for leaf in names for n in leaves[leaf])
    inside = [round_robin(leaves[leaf]) for leaf in names]
    rounds = []
    for i in range(max((len(r) for r in inside), default=0)):
        rounds.append(_duplex([p for r in inside if i < len(r) for p in r[i]]))
    for s in range(1, len(names)):
        pairs = []
        for i, leaf in enumerate(names):
            other = names[(i + s) % len(names)]
            pairs += list(zip(leaves[leaf], leaves[other]))        # this leaf sends up, the other receives
        rounds.append(tuple(pairs))
    note = f'{len(names)} leaf switches: {len(rounds) - len(names) + 1} rounds inside them, {len(names) - 1} across'
    return LinkPlan('topology', nodes, tuple(split_rounds(rounds, max_streams)), note)


# --- what a plan costs ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CostModel:
    """Wall time of one link-test job: ``start_s + per_node_s x N`` to get N ranks going (allocation, launch, MPI
    start-up, TCP endpoints), then per round its streaming time plus ``round_s`` of coordination, plus
    ``rtt_pair_s`` per link whose round trip is measured. Fitted to the vcluster's post-maintenance runs at
    several sizes (docs/validation.md, "The link test at scale": bench/linktest_scale.py, 8-32 nodes)."""
    start_s: float = 2.0
    per_node_s: float = 0.0     # not told from zero by 8-32 nodes; rank 0 coordinates every rank each round
    round_s: float = 0.094
    rtt_pair_s: float = 0.02    # a guess: the round trips are off by default (netregress.allpairs)

    def estimate_s(self, nodes: int, rounds: int, round_time_s: float, rtt_links: int = 0) -> float:
        return (self.start_s + self.per_node_s * nodes + rounds * (round_time_s + self.round_s)
                + self.rtt_pair_s * rtt_links)


#: Job steps of one link test, whatever the plan: the counters before, the nr-linkmap job, the counters after.
STEPS_PER_JOB = 3


def describe(plan: LinkPlan, round_time_s: float, rtt: bool = False, model: CostModel = CostModel()) -> str:
    """One line for ``ci/post-maintenance --plan``: what the plan measures and what it costs."""
    est = model.estimate_s(len(plan.nodes), len(plan.rounds), round_time_s, len(plan.links()) if rtt else 0)
    return (f'{plan.name}: {len(plan.nodes)} nodes, {len(plan.rounds)} rounds, {plan.pairs} directed streams '
            f'({len(plan.links())} links), {STEPS_PER_JOB} job steps, about {est / 60:.1f} min'
            f'{"; " + plan.note if plan.note else ""}')
