"""The link test's plans: rounds of directed pairs that one nr-linkmap job measures, and the switch tree they follow.

:class:`Topology` is the switch tree (Slurm's topology.conf or ``scontrol show topology``, read by
:func:`parse_topology`) with the routing rule of the fabric; :func:`full_plan`, :func:`sample_plan` and
:func:`topology_plan` make rounds (:class:`LinkPlan`, whose text is nr-linkmap's plan file) that follow it so that,
under static routing, concurrent streams share no switch link the fabric does not make them share;
:mod:`netregress.measure.contention` says how many streams share the busiest link of each stream (what the verdict
expects of a tapered tree); :class:`CostModel` (its constants fitted in config/linkcost.yaml where present,
:func:`cost_models`) is what :func:`describe` prints for ``ci/post-maintenance --plan``;
:mod:`netregress.measure.runplan` picks a run's plan, ``netregress.measure.allpairs`` describes the method,
``netregress.judge.linkverdict`` judges what the job wrote.

Why shifts. mpiGraph's pattern (round k: the node at position i sends to position i+k, every node at once) in the
order of the switch tree is free of contention on a fat tree with destination-mod-k routing: the nodes of a leaf send
to consecutive positions, so to distinct uplinks, and every node receives from one sender only. The pairings of a
round-robin tournament (the plans before) put two streams on one uplink in most rounds of a 1,000-node tree (a
model: 0.5 % of the full plan's streams, 60 % of a shuffled sample), and each read at most half the median link.
"""
from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterator, Mapping, Sequence

import numpy as np
import yaml

#: Runs one task on a named node of the job when the partition has no ``on_named_node`` extra (Slurm).
SLURM_ON_NAMED_NODE = ['srun', '--mpi=none', '--overlap', '--nodes=1', '--ntasks=1', '--nodelist={node}']

#: Routing rules the contention model knows (:class:`Topology`).
ROUTINGS = ('d-mod-k', 'balanced')


# --- the switch tree --------------------------------------------------------------------------------------------

class TopologyError(ValueError):
    """A switch tree or its description (partition extra ``link_topology``) that cannot be used; the message names
    it."""


def parse_topology(text: str, source: str = 'topology') -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(leaf switch -> its nodes, switch -> the switches under it), both in the order of ``text``: Slurm's
    topology.conf or ``scontrol show topology`` (the same ``SwitchName=S Nodes=... Switches=...`` fields; ``#``
    starts a comment). A leaf is a switch with nodes and no switches under it (scontrol lists every node under a
    spine too); a node listed under two leaves stays under the first."""
    from .slurm import expand_hostlist

    def members(line: str, key: str, number: int) -> list[str]:
        found = re.search(rf'\b{key}=(\S+)', line)
        if not found or found.group(1) == '(null)':
            return []
        try:
            return expand_hostlist(found.group(1))
        except Exception as err:            # ReFrame's expander raises its own errors on a malformed list
            raise TopologyError(f'{source} line {number}: {key}={found.group(1)}: {err}') from None

    leaves: dict[str, list[str]] = {}
    children: dict[str, list[str]] = {}
    placed: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split('#', 1)[0]
        name = re.search(r'\bSwitchName=(\S+)', line)
        if not name:
            continue
        below = members(line, 'Switches', number)
        if below:
            children.setdefault(name.group(1), []).extend(below)
            continue
        nodes = [n for n in members(line, 'Nodes', number) if n not in placed]
        placed.update(nodes)
        if nodes:
            leaves.setdefault(name.group(1), []).extend(nodes)
    return leaves, children


@dataclass(frozen=True)
class Topology:
    """A two-level switch tree: leaf switches with their nodes, the spine switches above them, and how traffic
    crosses it.

    ``uplinks`` (K) is the number of cables from every leaf up (at least 1; default one per spine); cable u goes to
    spine u mod S. ``routing``:

    * ``d-mod-k``: static destination-based routing (InfiniBand's ftree/updn with LIDs in topology order, Zahavi's
      D-mod-K, SimGrid's fat-tree zone): a stream to the node at position d of the tree (the leaves in the order of
      topology.conf, each leaf's nodes in its order, counting every node of the tree) leaves its leaf on cable
      d mod K and enters the destination's leaf on its cable d mod K, through spine (d mod K) mod S. Which spine a
      pair crosses is a function of the destination alone.
    * ``balanced`` (the default: the rule is not known, or adaptive): the streams that leave a leaf spread evenly
      over its K uplinks; a slow element can then be named down to a leaf's uplinks, not to one cable or a spine.

    Every node of a tapered tree (more nodes under a leaf than uplinks) cannot stream across at once at full rate:
    under full load a pair that crosses gets K / (streams crossing) of its line rate, and
    :func:`netregress.measure.contention.round_contention` tells the verdict so.
    """
    leaves: Mapping[str, tuple[str, ...]]
    spines: tuple[str, ...] = ()
    uplinks: int = 1
    routing: str = 'balanced'
    _index: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        if self.routing not in ROUTINGS:
            raise TopologyError(f'routing {self.routing!r} is not one of {", ".join(ROUTINGS)}')
        if self.uplinks < 1:
            raise TopologyError(f'uplinks must be at least 1, not {self.uplinks}')
        order = [n for nodes in self.leaves.values() for n in nodes]
        self._index['position'] = {n: i for i, n in enumerate(order)}
        self._index['leaf'] = {n: leaf for leaf, nodes in self.leaves.items() for n in nodes}

    @property
    def order(self) -> list[str]:
        """Every node of the tree, leaf after leaf."""
        return list(self._index['position'])

    def position(self, node: str) -> int | None:
        return self._index['position'].get(node)

    def leaf_of(self, node: str) -> str | None:
        return self._index['leaf'].get(node)

    def spine_of_cable(self, u: int) -> str | None:
        """The spine cable ``u`` of every leaf goes to (None where the tree names no spine)."""
        return self.spines[u % len(self.spines)] if self.spines else None

    def describe(self) -> str:
        sizes = sorted({len(v) for v in self.leaves.values()})
        return (f'{len(self.leaves)} leaf switches of {"-".join(map(str, sizes[::max(1, len(sizes) - 1)]))} nodes, '
                f'{len(self.spines) or "no"} spines, {self.uplinks} uplinks a leaf, routing {self.routing}')

    @classmethod
    def from_text(cls, text: str, options: Mapping | None = None, source: str = 'topology') -> Topology:
        """The tree of ``text`` (:func:`parse_topology`) with ``options``, the partition extra ``link_topology``:
        ``routing`` (:data:`ROUTINGS`), and ``uplinks`` (cables a leaf has up) or ``taper`` (nodes of the largest
        leaf per uplink, e.g. 2 for a 2:1 tree); neither: one uplink per spine."""
        leaves, children = parse_topology(text, source)
        if not leaves:
            raise TopologyError(f'{source}: no leaf switch (no SwitchName=... Nodes=... line)')
        options = dict(options or {})
        unknown = set(options) - {'routing', 'uplinks', 'taper'}
        if unknown:
            raise TopologyError(f'link_topology: unknown key(s) {", ".join(sorted(unknown))} (routing, uplinks, '
                                f'taper)')
        spines = tuple(s for s, below in children.items() if any(c in leaves for c in below))
        try:
            if 'uplinks' in options and 'taper' in options:
                raise TopologyError('link_topology: give uplinks or taper, not both')
            if 'taper' in options:
                taper = float(options['taper'])
                if not taper >= 1:
                    raise TopologyError(f'link_topology: taper must be 1 or more, not {options["taper"]!r}')
                uplinks = max(1, math.ceil(max(len(v) for v in leaves.values()) / taper))
            else:
                uplinks = int(options.get('uplinks') or len(spines) or 1)
        except (TypeError, ValueError) as err:
            raise TopologyError(f'link_topology: {err}') from None
        return cls({k: tuple(v) for k, v in leaves.items()}, spines, uplinks, str(options.get('routing', 'balanced')))

    def arrays(self, nodes: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(leaf index, position in the tree) of each of ``nodes`` (-1 for a node the tree does not list)."""
        names = list(self.leaves)
        leaf_index = {leaf: i for i, leaf in enumerate(names)}
        leaf = np.array([leaf_index.get(self.leaf_of(n), -1) for n in nodes], dtype=np.int32)
        pos = np.array([-1 if self.position(n) is None else self.position(n) for n in nodes], dtype=np.int64)
        return leaf, pos


def topology_order(nodes: Sequence[str], topology: Topology | None) -> list[str]:
    """``nodes`` in the order of the switch tree (nodes it does not list last, in their order)."""
    if topology is None:
        return list(nodes)
    last = len(topology.order)
    return sorted(nodes, key=lambda n: (topology.position(n) if topology.position(n) is not None else last))


# --- plans for nr-linkmap: rounds of directed pairs, one MPI job for all of them ------------------------------------

@dataclass(frozen=True, eq=False)
class LinkPlan:
    """The rounds one nr-linkmap job runs, every pair of a round at the same time; in each round a node sends at
    most once and receives at most once. A round is a shift (an int s: position i sends to (i + s) mod N, every
    node at once, N = len(nodes)) or an array of (sender, receiver) positions into ``nodes``, shape (k, 2). Shifts
    cost nothing to hold at any size; arrays only where a plan needs them."""
    name: str
    nodes: tuple[str, ...]
    rounds: tuple = ()
    note: str = ''

    def round_pairs(self, spec) -> np.ndarray:
        """The (sender, receiver) positions of one round."""
        if isinstance(spec, (int, np.integer)):
            i = np.arange(len(self.nodes), dtype=np.int64)
            return np.stack([i, (i + int(spec)) % len(self.nodes)], axis=1)
        return spec

    def iter_rounds(self) -> Iterator[np.ndarray]:
        for spec in self.rounds:
            yield self.round_pairs(spec)

    @property
    def pairs(self) -> int:
        """Directed streams the plan runs (a direction in two passes counts twice)."""
        return sum(len(self.nodes) if isinstance(s, (int, np.integer)) else len(s) for s in self.rounds)

    def named_rounds(self) -> list[list[tuple[str, str]]]:
        """The rounds as (sender, receiver) host names (small plans: tests, the vcluster)."""
        return [[(self.nodes[a], self.nodes[b]) for a, b in r] for r in self.iter_rounds()]

    def links(self) -> set[frozenset[str]]:
        """The node pairs (links) the plan measures, in at least one direction (small plans)."""
        return {frozenset(p) for r in self.named_rounds() for p in r}

    def link_count(self) -> int:
        """Links measured in at least one direction, counted without listing them."""
        n = len(self.nodes)
        seen = np.zeros(n * n, dtype=bool)
        for r in self.iter_rounds():
            a, b = np.minimum(r[:, 0], r[:, 1]), np.maximum(r[:, 0], r[:, 1])
            seen[a * n + b] = True
        return int(seen.sum())

    def passes(self, count: int) -> LinkPlan:
        """The rounds run ``count`` times, every other pass in reverse round order, so that a direction's two
        measurements lie far apart in time; the verdict takes each direction's best: a stream starved for a moment
        by the host's scheduler no longer fails a good link, a slow link is slow in every pass. ``count`` 1: the
        plan itself."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f'link passes must be a whole number of at least 1, not {count!r}')
        if count == 1:
            return self
        rounds = tuple(r for k in range(count) for r in (self.rounds if k % 2 == 0 else self.rounds[::-1]))
        note = f'{self.note + "; " if self.note else ""}{count} passes, each direction\'s best counts'
        return LinkPlan(self.name, self.nodes, rounds, note)

    def header(self) -> str:
        return (f'# netregress link plan {self.name}: {len(self.nodes)} nodes, {len(self.rounds)} rounds, '
                f'{self.pairs} directed streams{"; " + self.note if self.note else ""}\n')

    def write(self, fp: IO[str]) -> None:
        """The plan file nr-linkmap reads (``--plan-file``): one round per line of ``SRC>DST`` by host name,
        written a round at a time (999 rounds of 1,000 nodes: about 15 MB, never all in memory)."""
        fp.write(self.header())
        names = np.array(self.nodes, dtype=object)
        for r in self.iter_rounds():
            fp.write(' '.join(names[r[:, 0]] + '>' + names[r[:, 1]]) + '\n')

    def text(self) -> str:
        import io
        out = io.StringIO()
        self.write(out)
        return out.getvalue()

    def kernel_options(self, directory: Path, relative: bool = False, order_by_rank: bool = False) -> list[str]:
        """nr-linkmap's options for this plan, the one file they name written into ``directory`` (named as in
        ``directory`` when ``relative``: the job runs there). A plan of whole shifts goes as its nodes' order and
        its shifts, ``--plan shift --order order.txt --shifts LIST``: N names whatever the rounds (the full plan
        at 10,000 nodes: about 100 KB against a 2 GB plan file, and no minutes of Python writing it). Any other
        (rounds cut for ``max_streams``, the topology plan) as the plan file. ``order_by_rank``: the order file
        lists rank numbers, the nodes being the ranks in their order."""
        shifts = [int(spec) for spec in self.rounds if isinstance(spec, (int, np.integer))]
        listed = shift_list(shifts) if shifts and len(shifts) == len(self.rounds) else ''
        if listed and len(listed) <= MAX_SHIFT_LIST:
            names = range(len(self.nodes)) if order_by_rank else self.nodes
            (directory / ORDER_FILE).write_text('\n'.join(map(str, names)) + '\n')
            (directory / PLAN_FILE).unlink(missing_ok=True)
            return ['--plan', 'shift', '--order', ORDER_FILE if relative else str(directory / ORDER_FILE),
                    '--shifts', listed]
        with open(directory / PLAN_FILE, 'w') as fp:
            self.write(fp)
        (directory / ORDER_FILE).unlink(missing_ok=True)
        return ['--plan-file', PLAN_FILE if relative else str(directory / PLAN_FILE)]


#: The files of :meth:`LinkPlan.kernel_options`.
PLAN_FILE, ORDER_FILE = 'plan.txt', 'order.txt'
#: A ``--shifts`` list longer than this goes as a plan file instead (Linux takes at most 128 KiB an argument;
#: two passes of 10,000 nodes' full plan list the second one's 9,999 shifts one by one, about 49 KB).
MAX_SHIFT_LIST = 65536


def shift_list(shifts: Sequence[int]) -> str:
    """nr-linkmap's ``--shifts``: the shifts in their order, a run of consecutive ascending ones as a range
    (``[1, 2, 3, 9, 8]`` -> ``'1-3,9,8'``)."""
    parts: list[str] = []
    i = 0
    while i < len(shifts):
        j = i
        while j + 1 < len(shifts) and shifts[j + 1] == shifts[j] + 1:
            j += 1
        parts.append(f'{shifts[i]}-{shifts[j]}' if j > i else str(shifts[i]))
        i = j + 1
    return ','.join(parts)


def split_rounds(rounds: Sequence, nodes: int, max_streams: int | None) -> tuple:
    """Rounds cut so that at most ``max_streams`` directed pairs stream at a time: where nodes share a host's CPUs,
    concurrent streams measure the CPU, not the links (1: one stream at a time, as a single-pair test would)."""
    if not max_streams:
        return tuple(rounds)
    out = []
    for spec in rounds:
        pairs = LinkPlan('', ('',) * nodes).round_pairs(spec) if isinstance(spec, (int, np.integer)) else spec
        out += [pairs[i:i + max_streams] for i in range(0, len(pairs), max_streams)]
    return tuple(out)


def full_plan(nodes: Sequence[str], topology: Topology | None = None, max_streams: int | None = None) -> LinkPlan:
    """Every direction: the N-1 shifts of the nodes in the order of the switch tree (mpiGraph's pattern)."""
    order = topology_order(nodes, topology)
    rounds = split_rounds(tuple(range(1, len(order))), len(order), max_streams)
    where = 'in the order of the switch tree' if topology else 'in Slurm\'s order'
    return LinkPlan('full', tuple(order), rounds, f'every direction: shifts 1-{len(order) - 1} {where}')


def shift_classes(nodes: int) -> list[tuple[int, ...]]:
    """The shifts grouped by link: shift s and N-s measure the same links in opposite directions (N/2 of an even N
    both at once), so each group measures its links both ways."""
    return [(s,) if 2 * s == nodes else (s, nodes - s) for s in range(1, nodes // 2 + 1)]


def sample_plan(nodes: Sequence[str], per_run: int, run_index: int, seed: int, topology: Topology | None = None,
                max_streams: int | None = None) -> LinkPlan:
    """``per_run`` link sets (a shift and its opposite: every node's links at one distance, both ways) of this
    run, in an order of the distances fixed by ``seed``; run ``run_index`` takes sets ``run_index * per_run ...``
    (cyclically), so that :func:`runs_to_cover` runs in a row measure every link. Each round is a whole shift in
    the order of the switch tree, as in the full plan."""
    order = topology_order(nodes, topology)
    classes = shift_classes(len(order))
    if not classes:
        return LinkPlan('sample', tuple(order))
    random.Random(seed).shuffle(classes)
    k = max(1, min(per_run, len(classes)))
    start = (run_index * k) % len(classes)
    chosen = [s for i in range(k) for s in classes[(start + i) % len(classes)]]
    runs = runs_to_cover(len(order), k)
    note = (f'link sets {start + 1}-{start + k} of {len(classes)} (seed {seed}); every link within {runs} '
            f'run{"s" if runs > 1 else ""} in a row')
    return LinkPlan('sample', tuple(order), split_rounds(chosen, len(order), max_streams), note)


def runs_to_cover(nodes: int, per_run: int) -> int:
    """Runs of :func:`sample_plan` in a row that measure every link of ``nodes`` nodes."""
    return -(-max(1, nodes // 2) // max(1, per_run))


def topology_plan(topology: Topology, nodes: Sequence[str] | None = None,
                  max_streams: int | None = None) -> LinkPlan:
    """From the switch tree (the ``nodes`` in scope, default all): the directions inside every leaf switch (all
    leaves at once, shift s inside each leaf), then the leaves against each other, the node at place p of leaf i
    sending to the node at place p of leaf i+s (s = 1 .. L-1) at the same time, so that every uplink carries as many
    streams as its leaf has nodes (Netgauge's effective bisection bandwidth, switch by switch) and a slow uplink
    shows on every pair that crosses it. Under d-mod-k routing on a 1:1 tree no two streams share a cable; on a
    tapered one each cable carries the taper's share, which the verdict expects."""
    scope = set(topology.order if nodes is None else nodes)
    missing = [] if nodes is None else [n for n in nodes if topology.position(n) is None]
    if missing:
        raise TopologyError(f'nodes under no leaf switch of the switch tree: {", ".join(missing[:8])}'
                            f'{" ..." if len(missing) > 8 else ""}')
    members = [[n for n in leaf if n in scope] for leaf in topology.leaves.values()]
    members = [m for m in members if m]
    order = [n for m in members for n in m]
    sizes = np.array([len(m) for m in members], dtype=np.int64)
    starts = np.cumsum(sizes) - sizes
    place = np.arange(sizes.max(initial=0))[None, :]
    here = place < sizes[:, None]                       # (leaf, place) holds a node
    grid = np.where(here, starts[:, None] + place, -1)  # its position in ``order``
    rounds = []
    for s in range(1, int(sizes.max(initial=0))):
        inside = here & (sizes[:, None] > s)
        rounds.append(np.stack([grid[inside], (starts[:, None] + (place + s) % np.maximum(sizes, 1)[:, None])[inside]],
                               axis=1))
    for s in range(1, len(members)):
        other = grid[(np.arange(len(members)) + s) % len(members)]
        both = (grid >= 0) & (other >= 0)
        rounds.append(np.stack([grid[both], other[both]], axis=1))
    inside = max((len(m) for m in members), default=1) - 1
    note = f'{len(members)} leaf switches: {inside} rounds inside them, {len(members) - 1} across'
    return LinkPlan('topology', tuple(order), split_rounds(rounds, len(order), max_streams), note)


# --- what the fabric makes concurrent streams share --------------------------------------------------------------

def write_tree(fp: IO[str], topology: Topology, nodes: Sequence[str], by_rank: bool = False) -> None:
    """The switch tree as nr-linkmap's ``--tree`` reads it, for ``nodes`` (the tree's other nodes and the nodes it
    does not list are left out; ``by_rank``: each named by its index in ``nodes``, the job's rank where MPI names
    the hosts otherwise): ``NODE LEAF CABLE`` a line, the leaf's index and the uplink cable a stream to NODE
    takes out of its sender's leaf and into NODE's (d-mod-k: its position mod the uplinks; else one cable, 0, for
    all: where the rule is not known every crossing stream of a leaf may meet any other). Recheck batches built from
    it share no cable, as :func:`netregress.measure.contention.round_contention` counts them."""
    leaf, pos = topology.arrays(nodes)
    cable = pos % topology.uplinks if topology.routing == 'd-mod-k' else np.zeros(len(nodes), dtype=np.int64)
    fp.write('# nr-linkmap --tree: node, leaf switch, uplink cable of a stream to it\n')
    for rank, (name, ell, u) in enumerate(zip(nodes, leaf, cable)):
        if ell >= 0:
            fp.write(f'{rank if by_rank else name} {ell} {u}\n')


# --- what a plan costs ----------------------------------------------------------------------------------------------

#: The fitted constants when present (``netregress-linkcost/1``: a list ``models`` of named fits), else the
#: built-in vcluster fit.
COST_FILE = Path(__file__).resolve().parents[3] / 'config' / 'linkcost.yaml'
COST_SCHEMA = 'netregress-linkcost/1'


@dataclass(frozen=True)
class CostModel:
    """Wall time of one link-test job: ``start_s + per_node_s x N`` to get N ranks going (allocation, launch, MPI
    start-up, TCP endpoints), then per round its streaming time plus ``round_s + round_node_s x N`` of coordination
    (rank 0 tells every rank and hears from every rank each round), plus ``rtt_pair_s`` per link whose round trip
    is measured. ``name`` and ``fitted`` say where the constants come from."""
    name: str = 'built-in'
    fitted: str = 'vcluster, 8-32 nodes on 2 CPUs, one stream a round (docs/validation.md)'
    start_s: float = 2.0
    per_node_s: float = 0.0
    round_s: float = 0.094
    round_node_s: float = 0.0
    rtt_pair_s: float = 0.02    # a guess: the round trips are off by default (netregress.measure.allpairs)

    def estimate_s(self, nodes: int, rounds: int, round_time_s: float, rtt_links: int = 0) -> float:
        return (self.start_s + self.per_node_s * nodes + rounds * (round_time_s + self.round_s + self.round_node_s *
                                                                    nodes) + self.rtt_pair_s * rtt_links)


def cost_models(path: Path | str | None = None) -> list[CostModel]:
    """The fits of ``path`` (default :data:`COST_FILE`) when it exists, else the built-in one; :class:`ValueError`
    naming the file and the entry when it is malformed."""
    path = Path(path) if path is not None else COST_FILE
    if not path.exists():
        return [CostModel()]
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f'{path}: {err}') from None
    if not isinstance(doc, dict) or doc.get('schema') != COST_SCHEMA or not isinstance(doc.get('models'), list):
        raise ValueError(f'{path}: not a {COST_SCHEMA} file (schema and a list of models expected)')
    known = set(CostModel.__dataclass_fields__)
    out = []
    for i, entry in enumerate(doc['models']):
        if not isinstance(entry, dict) or 'name' not in entry or set(entry) - known:
            raise ValueError(f'{path}: models[{i}]: a mapping with name and only {", ".join(sorted(known))}')
        try:
            out.append(CostModel(**{k: (str(v) if k in ('name', 'fitted') else float(v)) for k, v in entry.items()}))
        except (TypeError, ValueError):
            raise ValueError(f'{path}: models[{i}] ({entry.get("name")}): the constants must be numbers') from None
    return out or [CostModel()]


def save_cost_model(model: CostModel, path: Path | str | None = None) -> Path:
    """Put ``model`` into the fits of ``path`` (default :data:`COST_FILE`) under its name, keeping the others (a
    bench writes its own fit: the vcluster's, the simulator's); written whole to a temporary file, then renamed."""
    path = Path(path) if path is not None else COST_FILE
    models = [m for m in (cost_models(path) if path.exists() else []) if m.name not in (model.name, 'built-in')]
    entries = [{k: (v if k in ('name', 'fitted') else float(f'{v:.6g}')) for k, v in vars(m).items()}
               for m in sorted([*models, model], key=lambda m: m.name)]
    text = ('# The link test\'s cost model (netregress.measure.linkplan.cost_models), one fit a source: written by\n'
            '# bench/linktest_scale.py --cost (the vcluster) and bench/simcentre_scale.py --cost (SimGrid).\n'
            + yaml.safe_dump({'schema': COST_SCHEMA, 'models': entries}, sort_keys=False, width=118))
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_text(text)
    tmp.replace(path)
    return path


#: Job steps of one link test, whatever the plan: the counters before, the nr-linkmap job, the counters after.
STEPS_PER_JOB = 3


def describe(plan: LinkPlan, round_time_s: float, rtt: bool = False,
             models: Sequence[CostModel] | None = None) -> str:
    """One line for ``ci/post-maintenance --plan``: what the plan measures and what it costs by each fit."""
    links = plan.link_count()
    costs = '; '.join(
        f'about {m.estimate_s(len(plan.nodes), len(plan.rounds), round_time_s, links if rtt else 0) / 60:.1f} min '
        f'by the {m.name} fit ({m.fitted}: start {m.start_s:g} s + {m.per_node_s:g} s a node, {m.round_s:g} s + '
        f'{m.round_node_s:g} s a node per round)' for m in (models or cost_models()))
    return (f'{plan.name}: {len(plan.nodes)} nodes, {len(plan.rounds)} rounds, {plan.pairs} directed streams '
            f'({links} links), {STEPS_PER_JOB} job steps, {costs}{"; " + plan.note if plan.note else ""}')
