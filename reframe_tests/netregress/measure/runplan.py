"""The link plan a run of the link test takes: the plan by name, Slurm's switch tree, the sample's rotation.

Every plan follows Slurm's switch tree where it has one (``scontrol show topology``; the partition extra
``link_topology`` says how the fabric routes: ``routing`` d-mod-k or balanced, ``uplinks`` or ``taper``), and the
rounds themselves come from :mod:`.linkplan`:

* ``full``: every direction, in the N-1 shifts of mpiGraph (round k: position i sends to i+k, every node at once),
  free of contention on a fat tree with destination-based routing;
* ``sample``: a share of those shifts per run (a shift and its opposite: every link at one distance, both ways),
  rotated across runs (the rotation and its seed are kept in the state directory), so that every link is measured
  within 30 runs in a row (``sample_matchings``);
* ``topology``: the links inside every leaf switch, then the leaves against each other, every node at once, so that
  each uplink carries load and a slow one stands out.

:func:`make_plan` is what the check (:mod:`.allpairs`) runs and what ``ci/post-maintenance --plan`` prints.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Mapping

from ..judge import baselines
from .. import statefiles
from . import slurm
from .linkplan import LinkPlan, Topology, TopologyError, full_plan, sample_plan, topology_plan

PLANS = ('full', 'sample', 'topology')
#: Runs in a row in which the ``sample`` plan measures every link (its link sets per run follow from it), and
#: seconds each round streams (the check's defaults).
SAMPLE_COVER_RUNS = 30
ROUND_TIME_S = 0.5


def sample_matchings_for(nodes: int, cover_runs: int = SAMPLE_COVER_RUNS) -> int:
    """Link sets (a shift and its opposite) per ``sample`` run so that ``cover_runs`` runs in a row measure every
    link: 1,000 nodes, 17 of 500 (34 rounds)."""
    return max(1, -(-max(1, nodes // 2) // cover_runs))


def sample_rotation(key: str, advance: bool = True) -> tuple[int, int]:
    """(seed, run index) of the ``sample`` plan for ``key`` (system:partition:fabric), kept in the state directory
    under its lock; ``advance`` counts this run. Without ``advance`` (a plan that only looks: ``ci/post-maintenance
    --plan``) nothing is created or locked: the file is only ever replaced whole, so a plain read sees one version,
    and a state directory the caller may not create is no error."""
    directory = baselines.state_dir(create=advance) / 'link-samples'
    path = directory / f'{key.replace(":", "-").replace("/", "_")}.json'
    if not advance:
        return _rotation(path)
    statefiles.private_dir(directory)
    with statefiles.locked(directory):
        seed, runs = _rotation(path)
        statefiles.atomic_write(path, json.dumps({'seed': seed, 'runs': runs + 1}) + '\n', what='sample rotation')
    return seed, runs


def _rotation(path: Path) -> tuple[int, int]:
    """(seed, runs) kept in ``path``; a new seed and no run when it holds none."""
    try:
        state = json.loads(path.read_text())
        return int(state['seed']), int(state['runs'])
    except (OSError, ValueError, KeyError, TypeError):
        return random.SystemRandom().randrange(1, 2 ** 31), 0


def switch_topology(extras: Mapping, runner: slurm.Runner = slurm.run_command) -> Topology:
    """Slurm's switch tree with the partition extra ``link_topology`` (routing, uplinks or taper);
    :class:`slurm.SlurmQueryError` when Slurm has none, :class:`TopologyError` when it or the extra is unusable."""
    return Topology.from_text(slurm.switch_tree(runner=runner), extras.get('link_topology') or {},
                              'scontrol show topology')


def make_plan(name: str, nodes: list[str], key: str, extras: Mapping | None = None, per_run: int | None = None,
              advance: bool = True, runner: slurm.Runner = slurm.run_command) -> tuple[LinkPlan, Topology | None]:
    """(the link plan ``name`` over ``nodes``, the switch tree it follows or None): what the check runs and what
    ``ci/post-maintenance --plan`` prints. Every plan follows Slurm's switch tree where it has one; the topology
    plan needs it (:class:`slurm.SlurmQueryError` or :class:`TopologyError` otherwise). ``extras`` (the
    partition's) may cut rounds (``link_concurrency``), repeat them (``link_passes``) and describe the tree
    (``link_topology``). ``key`` (system:partition:fabric) names the sample rotation; ``advance`` counts this run."""
    extras = extras or {}
    concurrency, passes = extras.get('link_concurrency'), extras.get('link_passes', 1)
    try:
        topology = switch_topology(extras, runner)
    except (slurm.SlurmQueryError, TopologyError):
        if name == 'topology':
            raise
        topology = None
    if name == 'sample':
        seed, run = sample_rotation(key, advance)
        plan = sample_plan(nodes, per_run or sample_matchings_for(len(nodes)), run, seed, topology, concurrency)
    elif name == 'topology':
        plan = topology_plan(topology, nodes, concurrency)
    else:
        plan = full_plan(nodes, topology, concurrency)
    try:
        return plan.passes(passes), topology
    except ValueError as err:
        raise ValueError(f'partition extra link_passes: {err}') from None
