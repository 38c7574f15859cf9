#!/usr/bin/env python3
"""The link test at a centre's scale, simulated: tools/simcentre on fat trees of 128, 1,000 and 10,000 nodes, every
plan, healthy and with each fault, and the cost model's per-round constants fitted to what the simulator says.

Per run (one at a time, each a simulation of its own under nice -n 10): the rounds, the simulated time, the wall
and CPU time of the simulation and its peak memory (/usr/bin/time -v), what the link check's verdict named, the
bytes the check keeps (result.json, linkmatrix.bin, links.json, links.txt), the verdict's own time and
peak memory, and the time and peak memory of the run report page drawn from it (tools/simcentre report). A line per
run as it ends, then the table (docs/scale.md) and the fit:
``round_s + round_node_s x N`` (least squares) to each run's mean simulated round overhead (rank 0's `wall_s` of a
plan round less -t), the simulated set-up (the simulated time outside the rounds) beside it.

    bench/simcentre_scale.py [--sizes 128,1000] [--plans full,topology,sample] [--faults healthy,cable,...]
                             [--taper 2] [--out DIR] [--cost FILE] [--table-only]
    bench/simcentre_scale.py --schedules [--sizes 1000] [--taper 2] [--rounds 8]

``--schedules`` measures which schedules collide under the tree's static routing: the first --rounds rounds of
each, every node streaming, on a healthy tree; per schedule the streams, their slowest, median and fastest figure
and how many read below 0.85 x the fastest. Schedules: ``shift-tree`` (shift k in the tree's order, nr-linkmap
--order), ``shift-shuffled`` (the same in a shuffled order), ``round-robin`` (the circle method's matchings, both
directions at once: the full plan before issue 47) and, on a tapered tree, ``shift-split`` (each shift in the tree's
order cut in taper rounds by the destination's place in its leaf, place // spines, so that no leaf sends more
streams up than it has uplinks, nor through one uplink twice).

Sizes are trees of 40-node leaves above 128 nodes (1,000: 25 leaves, 40 spines; 10,000: 250 leaves, 40 spines), of
16 below. A run whose simcentre.json is in DIR already is read, not run again (a long benchmark resumes);
--table-only runs nothing and tables what DIR holds. --cost FILE
writes the fit as a netregress-linkcost/1 model (netregress.measure.linkplan.cost_models reads config/linkcost.yaml).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

if __name__ == '__main__':          # under the project's venv, whichever Python the #! line found
    import benchenv
    benchenv.use_project_python()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'tools' / 'lib'))
sys.path.insert(0, str(ROOT / 'reframe_tests'))

import simcentre  # noqa: E402
from netregress.measure import linkplan  # noqa: E402
from simcentre import ROUND_TIME_S, summary_line  # noqa: E402
from simfabric import FatTree, Fault, write_fabric  # noqa: E402

FAULTS = ('healthy', 'cable', 'downgrade', 'uplink', 'spine', 'down')


class NoFigures(Exception):
    """A run that ended without its simcentre.json: the benchmark goes on, and exits 1 naming it."""


def tree_for(nodes: int, taper: float) -> FatTree:
    per_leaf = 16 if nodes <= 256 else 40
    if nodes % per_leaf:
        raise SystemExit(f'bench/simcentre_scale.py: {nodes} nodes are no whole number of {per_leaf}-node leaves')
    return FatTree(nodes // per_leaf, per_leaf, max(1, int(per_leaf / taper)))


def fault_spec(kind: str, tree: FatTree) -> list[str]:
    """One fault of ``kind`` somewhere in the middle of ``tree`` (none for healthy)."""
    node, leaf, spine = tree.names[tree.n // 3 + 5], tree.leaf_names[tree.leaves // 2], tree.spine_names[-2]
    return {'healthy': [], 'cable': [f'cable:{node}'], 'downgrade': [f'downgrade:{tree.names[tree.n // 2 + 1]}'],
            'uplink': [f'uplink:{leaf}:{tree.spine_names[tree.spines // 3]}'], 'spine': [f'spine:{spine}'],
            'down': [f'down:{tree.names[tree.n // 4]}']}[kind]


def one(out: Path, tree: FatTree, plan: str, faults: list[str], table_only: bool = False) -> dict | None:
    done = out / 'simcentre.json'
    if table_only and not done.exists():
        return None
    if not done.exists():
        args = ['--leaves', str(tree.leaves), '--per-leaf', str(tree.per_leaf), '--spines', str(tree.spines),
                '--plan', plan, *[x for f in faults for x in ('--fault', f)]]
        p = subprocess.run([str(ROOT / 'tools' / 'simcentre'), 'run', '--out', str(out), *args], text=True)
        if not done.exists():
            raise NoFigures(f'bench/simcentre_scale.py: run {out.name} ({out}) produced no figures (tools/simcentre '
                            f'exit {p.returncode})')
    if 'report_s' not in json.loads(done.read_text()) and not table_only:
        subprocess.run([str(ROOT / 'tools' / 'simcentre'), 'report', str(out)])
    figures = json.loads(done.read_text())
    figures['tree'] = f'{tree.taper:g}:1'
    figures['exact'] = figures['named'] == [Fault.parse(f, tree).expected(tree) for f in faults]
    result = json.loads((out / 'result.json').read_text())
    plan_rounds = [r['wall_s'] for r in result['rounds'] if r['index'] < result['rounds_planned']]
    figures['round_overhead_s'] = sum(plan_rounds) / len(plan_rounds) - ROUND_TIME_S if plan_rounds else None
    figures['setup_s'] = figures['simulated_s'] - result['elapsed_s'] if figures['simulated_s'] else None
    print(summary_line(figures), flush=True)
    return figures


def schedule_rounds(name: str, tree: FatTree, rounds: int) -> list[list[tuple[int, int]]]:
    """The first ``rounds`` rounds of schedule ``name`` (module doc) as (sender, receiver) tree positions."""
    import random
    n = tree.n
    if name == 'round-robin':
        circle, out = list(range(n)), []
        for _ in range(rounds):
            pairs = [(circle[i], circle[n - 1 - i]) for i in range(n // 2)]
            out.append([d for a, b in pairs for d in ((a, b), (b, a))])
            circle = [circle[0], circle[-1]] + circle[1:-1]
        return out
    if name == 'shift-split':
        return [[(i, (i + k) % n) for i in range(n) if ((i + k) % n) % tree.per_leaf // tree.spines == part]
                for k in range(1, rounds + 1) for part in range(-(-tree.per_leaf // tree.spines))][:rounds]
    order = list(range(n))
    if name == 'shift-shuffled':
        random.Random(1).shuffle(order)
    return [[(order[i], order[(i + k) % n]) for i in range(n)] for k in range(1, rounds + 1)]


def schedules(tree: FatTree, rounds: int, out: Path) -> None:
    """Each schedule's first rounds on the healthy ``tree``: how many streams read below 0.85 x the fastest."""
    names = ['shift-tree', 'shift-shuffled', 'round-robin'] + (['shift-split'] if tree.taper > 1 else [])
    print(f'| schedule ({tree.describe()}) | rounds | streams | slowest / median / fastest Gbit/s | below 0.85 x '
          f'the fastest | wall s |\n|---|---|---|---|---|---|')
    for name in names:
        where = out / f'schedule-{tree.n}-{tree.spines}-{name}'
        write_fabric(tree, [], where)
        plan = schedule_rounds(name, tree, rounds)
        (where / 'plan.txt').write_text(''.join(' '.join(f'{a}>{b}' for a, b in r) + '\n' for r in plan))
        figures = simcentre.simulate(tree, where, tree.names, ['-t', str(ROUND_TIME_S), '-m',
                                                               simcentre.message_size(tree), '-w', '1', '--plan-file',
                                                               str(where / 'plan.txt')])
        from netregress.judge.linkmatrix import SparseMatrix, read_matrix
        m = read_matrix(where / 'linkmatrix.bin')
        v = sorted(float(x) for x in (m.values if isinstance(m, SparseMatrix) else m.ravel()) if x > 0)
        fastest = v[-1]
        below = sum(x < 0.85 * fastest for x in v)
        print(f'| {name} | {len(plan)} | {len(v)} | '
              f'{v[0] / 1e3:.1f} / {v[len(v) // 2] / 1e3:.1f} / {fastest / 1e3:.1f} '
              f'| {below} ({below / len(v):.1%}) | {figures["wall_s"]:.0f} |', flush=True)


def fit(rows: list[dict]) -> tuple[float, float]:
    """round_s, round_node_s: least squares of the healthy runs' round overhead against the nodes (a slow link's
    streams finish later and lengthen their rounds: that is streaming, not coordination), the per-node term at least
    0 (a round does not get cheaper with more nodes, and a negative slope would make the cost model go below zero
    for a larger fabric)."""
    pts = [(r['nodes'], r['round_overhead_s']) for r in rows
           if r.get('round_overhead_s') is not None and not r.get('faults')]
    n = len(pts)
    if n < 2 or len({x for x, _ in pts}) < 2:
        return (pts[0][1] if pts else 0.0), 0.0
    mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
    # to a picosecond a node: equal overheads leave a slope of rounding error (1e-19), not a cost
    slope = round(sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts), 12)
    return (my - slope * mx, slope) if slope > 0 else (my, 0.0)


def table(rows: list[dict]) -> str:
    head = ('| nodes | tree | plan | fault | rounds | simulated s | wall s (CPU s) | peak MB | named | kept MB | '
            'verdict s (peak MB) | report page s (peak MB) |\n|---|---|---|---|---|---|---|---|---|---|---|---|')
    lines = [f"| {r['nodes']} | {r['tree']} | {r['plan']} | {', '.join(r['faults']) or 'healthy'} | {r['rounds']} | "
             f"{r['simulated_s']:.3f} | {r['wall_s']:.0f} ({r['cpu_s']:.0f}) | {r['peak_mb']:.0f} | "
             f"{'; '.join(r['named']) or 'nothing'}{'' if r['exact'] else ' (NOT as injected)'} | "
             f"{r['kept_bytes'] / 1e6:.2f} | {r['verdict_s']:.2f} "
             f"({r['verdict_peak_mb']:.0f}) | "
             + (f"{r['report_s']:.1f} ({r['report_peak_mb']:.0f}) |" if 'report_s' in r else '- |') for r in rows]
    return '\n'.join([head, *lines])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--sizes', default='128,1000')
    ap.add_argument('--plans', default='topology,sample,full')
    ap.add_argument('--faults', default=','.join(FAULTS))
    ap.add_argument('--taper', type=float, default=1.0, help='nodes of a leaf per uplink (2: a 2:1 tree)')
    ap.add_argument('--out', default=str(ROOT / 'run' / 'simcentre'))
    ap.add_argument('--cost', help='write the round fit to this file (netregress-linkcost/1)')
    ap.add_argument('--schedules', action='store_true', help='which schedules collide (module doc)')
    ap.add_argument('--rounds', type=int, default=8, help='--schedules: rounds of each')
    ap.add_argument('--table-only', action='store_true', help='run nothing: the table and fit of what --out holds')
    args = ap.parse_args()
    faults = args.faults.split(',')
    unknown = set(faults) - set(FAULTS)
    if unknown:
        print(f'bench/simcentre_scale.py: unknown fault(s) {", ".join(sorted(unknown))} ({", ".join(FAULTS)})',
              file=sys.stderr)
        return 2
    if not args.table_only and subprocess.run([str(ROOT / 'tools' / 'simcentre'), 'build']).returncode:
        return 1
    if args.schedules:
        for nodes in (int(x) for x in args.sizes.split(',')):
            schedules(tree_for(nodes, args.taper), args.rounds, Path(args.out))
        return 0
    rows, lacking = [], []
    for nodes in (int(x) for x in args.sizes.split(',')):
        tree = tree_for(nodes, args.taper)
        for plan in args.plans.split(','):
            for kind in faults:
                tag = f'{nodes}-{plan}-{kind}' + (f'-taper{args.taper:g}' if args.taper != 1 else '')
                try:
                    figures = one(Path(args.out) / tag, tree, plan, fault_spec(kind, tree), args.table_only)
                except NoFigures as err:
                    print(err, file=sys.stderr, flush=True)
                    lacking.append(tag)
                    continue
                if figures:
                    rows.append(figures)
    print(table(rows))
    round_s, round_node_s = fit(rows)
    setups = sorted({(r['nodes'], round(r['setup_s'], 4)) for r in rows if r.get('setup_s') is not None})
    print(f'fit: a plan round costs -t + {round_s * 1e3:.3f} ms + {round_node_s * 1e6:.3f} us a node of simulated '
          f'time; simulated set-up (nodes, s): {setups}')
    if args.cost:
        sizes = sorted({r['nodes'] for r in rows})
        linkplan.save_cost_model(linkplan.CostModel(
            name='simulator', fitted=f'SimGrid SMPI fat trees, healthy, {min(sizes)}-{max(sizes)} nodes, every node '
                                     f'streaming (docs/scale.md); start-up is the launcher\'s, not simulated',
            start_s=0.0, per_node_s=0.0, round_s=round_s, round_node_s=round_node_s, rtt_pair_s=0.02), args.cost)
        print(f'bench: wrote {args.cost}')
    return 1 if lacking else 0


if __name__ == '__main__':
    sys.exit(main())
