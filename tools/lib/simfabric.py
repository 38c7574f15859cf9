"""The simulated centre's fabric (tools/simcentre, docs/scale.md): a two-level fat tree and its faults, written as a
SimGrid platform (a FAT_TREE cluster), the faults nr-simfabric (simfabric.c) sets on its links, and Slurm's
topology.conf, from which the link test's plans and verdict read the tree."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence


class UsageError(Exception):
    """A wrong option, tree or fault: one line naming it, exit 2."""


@dataclass(frozen=True)
class FatTree:
    """A two-level fat tree: ``leaves`` leaf switches of ``per_leaf`` nodes, ``spines`` spines, one cable from every
    leaf to every spine; ``names`` the nodes in the tree's order (default node0 .., as SimGrid names its hosts)."""
    leaves: int
    per_leaf: int
    spines: int
    link_gbps: float = 100.0
    latency_ns: float = 500.0
    names: tuple[str, ...] = ()
    leaf_names: tuple[str, ...] = ()
    spine_names: tuple[str, ...] = ()

    def __post_init__(self):
        for what in ('leaves', 'per_leaf', 'spines'):
            if getattr(self, what) < 1:
                raise UsageError(f'{what.replace("_", "-")} must be at least 1, not {getattr(self, what)}')
        if self.spines > self.per_leaf:
            raise UsageError(f'{self.spines} spines above leaves of {self.per_leaf} nodes: more uplinks than nodes')
        if not (self.link_gbps > 0 and self.latency_ns >= 0):
            raise UsageError(f'link-gbps must be > 0 and latency-ns >= 0, not {self.link_gbps}, {self.latency_ns}')
        n = self.leaves * self.per_leaf
        defaults = (('names', 'node', n), ('leaf_names', 'leaf', self.leaves), ('spine_names', 'spine', self.spines))
        for attr, prefix, count in defaults:
            if not getattr(self, attr):
                object.__setattr__(self, attr, tuple(f'{prefix}{i}' for i in range(count)))
            elif len(getattr(self, attr)) != count:
                raise UsageError(f'{attr}: {len(getattr(self, attr))} names for {count}')

    @property
    def n(self) -> int:
        return self.leaves * self.per_leaf

    @property
    def taper(self) -> float:
        return self.per_leaf / self.spines

    @property
    def link_bytes_per_s(self) -> float:
        return self.link_gbps * 1e9 / 8

    def describe(self) -> str:
        return (f'{self.n} nodes: {self.leaves} leaves of {self.per_leaf}, {self.spines} spines '
                f'({self.taper:g}:1), {self.link_gbps:g} Gbit/s, {self.latency_ns:g} ns a cable')

    def xml(self) -> str:
        """The healthy fabric as SimGrid's FAT_TREE cluster (hosts node0 .. node<n-1> in the tree's order)."""
        return (f"<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
                f'<platform version="4.1">\n'
                f'  <cluster id="fabric" prefix="node" suffix="" radical="0-{self.n - 1}" speed="1Gf"\n'
                f'           bw="{self.link_bytes_per_s:.6g}Bps" lat="{self.latency_ns:g}ns" '
                f'sharing_policy="SPLITDUPLEX"\n'
                f'           topology="FAT_TREE" '
                f'topo_parameters="2;{self.per_leaf},{self.leaves};1,{self.spines};1,1"/>\n'
                f'</platform>\n')

    def topology_conf(self) -> str:
        """The tree as Slurm's topology.conf (each leaf's nodes, each spine above every leaf)."""
        from netregress.measure.slurm import abbrev
        lines = [f'# {self.describe()} (tools/simcentre)']
        for leaf in range(self.leaves):
            members = self.names[leaf * self.per_leaf:(leaf + 1) * self.per_leaf]
            lines.append(f'SwitchName={self.leaf_names[leaf]} Nodes={abbrev(members)}')
        lines += [f'SwitchName={s} Switches={abbrev(self.leaf_names)}' for s in self.spine_names]
        return '\n'.join(lines) + '\n'

    # SimGrid's names of the cluster's links (FatTreeZone): node i is element i, leaf l element 2n-1-l, spine s
    # element 2n-1-L-s; the k-th cable made is numbered k, the nodes' first, then each leaf's to spines 0 .. S-1;
    # _UP leads towards the spines. nr-simfabric refuses a name the fabric does not have.
    def cable_link(self, node: int, way: str) -> str:
        return f'link_from_{node}_{2 * self.n - 1 - node // self.per_leaf}_{node}_{way}'

    def uplink_link(self, leaf: int, spine: int, way: str) -> str:
        n = self.n
        return f'link_from_{2 * n - 1 - leaf}_{2 * n - 1 - self.leaves - spine}_{n + leaf * self.spines + spine}_{way}'

    @classmethod
    def from_topology(cls, text: str, source: str, link_gbps: float, latency_ns: float) -> FatTree:
        """A regular two-level tree from Slurm's topology.conf."""
        from netregress.measure.linkplan import TopologyError, parse_topology
        try:
            leaves, children = parse_topology(text, source)
        except TopologyError as err:
            raise UsageError(str(err)) from None
        sizes = {len(v) for v in leaves.values()}
        if not leaves or len(sizes) != 1:
            raise UsageError(f'{source}: a simulated tree needs leaves of one size, not {sorted(sizes) or "none"}')
        spines = [s for s, below in children.items() if any(c in leaves for c in below)]
        lacking = [s for s in spines if set(children[s]) != set(leaves)]
        if not spines or lacking:
            raise UsageError(f'{source}: every spine must be above every leaf'
                             + (f' ({lacking[0]} is not)' if lacking else ' (no spine lists the leaves)'))
        return cls(len(leaves), sizes.pop(), len(spines), link_gbps, latency_ns,
                   tuple(n for v in leaves.values() for n in v), tuple(leaves), tuple(spines))


@dataclass(frozen=True)
class Fault:
    """One injected fault (tools/simcentre --fault: simcentre.py's module doc) and what the verdict must name for it."""
    kind: str
    where: tuple[int, ...]
    fraction: float = 1.0

    KINDS = {'cable': (1, 0.6), 'downgrade': (1, 0.5), 'uplink': (2, 0.6), 'spine': (1, 0.6), 'down': (1, None)}

    @classmethod
    def parse(cls, spec: str, tree: FatTree) -> Fault:
        parts = spec.split(':')
        if parts[0] not in cls.KINDS:
            raise UsageError(f'--fault {spec!r}: unknown kind {parts[0]!r} ({", ".join(cls.KINDS)})')
        places, default = cls.KINDS[parts[0]]
        if len(parts) not in (1 + places, 2 + places) or (default is None and len(parts) != 1 + places):
            raise UsageError(f'--fault {spec!r}: {parts[0]} takes {places} place(s)'
                             + ('' if default is None else ' and an optional fraction'))
        tables = {'cable': [tree.names], 'downgrade': [tree.names], 'down': [tree.names],
                  'uplink': [tree.leaf_names, tree.spine_names], 'spine': [tree.spine_names]}[parts[0]]
        where = []
        for name, table in zip(parts[1:1 + places], tables):
            if name not in table:
                raise UsageError(f'--fault {spec!r}: the tree has no {name!r}')
            where.append(table.index(name))
        fraction = default or 1.0
        if len(parts) == 2 + places:
            try:
                fraction = float(parts[-1])
            except ValueError:
                fraction = -1.0
            if not 0 < fraction < 1:
                raise UsageError(f'--fault {spec!r}: the fraction must be between 0 and 1, not {parts[-1]!r}')
        return cls(parts[0], tuple(where), fraction)

    def links(self, tree: FatTree) -> list[str]:
        """The SimGrid links it slows."""
        if self.kind == 'cable':
            return [tree.cable_link(self.where[0], 'UP')]
        if self.kind == 'downgrade':
            return [tree.cable_link(self.where[0], way) for way in ('UP', 'DOWN')]
        if self.kind == 'uplink':
            return [tree.uplink_link(*self.where, way) for way in ('UP', 'DOWN')]
        if self.kind == 'spine':
            return [tree.uplink_link(leaf, self.where[0], way) for leaf in range(tree.leaves) for way in ('UP', 'DOWN')]
        return []

    def expected(self, tree: FatTree) -> str:
        """What the verdict names for it (in the form of simcentre.named)."""
        if self.kind == 'down':
            return f'left out: {tree.names[self.where[0]]}'
        if self.kind in ('cable', 'downgrade'):
            return f'slow node: node {tree.names[self.where[0]]} ({"out" if self.kind == "cable" else "both"})'
        if self.kind == 'uplink':
            leaf, spine = self.where
            return (f'slow uplink: uplink {spine} of leaf switch {tree.leaf_names[leaf]} (to '
                    f'{tree.spine_names[spine]}) (both)')
        return f'slow spine: spine switch {tree.spine_names[self.where[0]]}'


def write_fabric(tree: FatTree, faults: Sequence[Fault], out: Path) -> None:
    """fabric.xml, faults.txt (nr-simfabric's: LINK BYTES/S) and topology.conf in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / 'fabric.xml').write_text(tree.xml())
    (out / 'topology.conf').write_text(tree.topology_conf())
    lines = [f'{link} {f.fraction * tree.link_bytes_per_s:.6g}  # {f.kind}' for f in faults for link in f.links(tree)]
    (out / 'faults.txt').write_text(''.join(line + '\n' for line in lines))
