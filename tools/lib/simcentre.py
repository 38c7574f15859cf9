"""tools/simcentre: the link test of a centre's fabric, run on a simulated one (SimGrid's SMPI, docs/scale.md).

A two-level fat tree (leaf switches of H nodes, S spines, one cable from every leaf to every spine; S < H is a
tapered tree) is written as a SimGrid platform: a FAT_TREE cluster, whose routing is static and destination-based
(d-mod-k: a stream to the node at position d of the tree leaves its leaf towards spine d mod S), plus the faults, set
on its links by the platform loader nr-simfabric (tools/lib/simfabric.c) after SimGrid has read the XML. The same
tree is written as Slurm's topology.conf, from which the link test's plans and verdict read it
(netregress.measure.linkplan, netregress.judge.linkverdict). Our own nr-linkmap, built with smpicc (CMake
NR_SMPI), then runs under smpirun on one simulated host per node, one rank each, and its result is judged by the
link check's own verdict.

    tools/simcentre build                      nr-linkmap and nr-simfabric under smpicc, in build/smpi
    tools/simcentre run --out DIR [TREE] [--fault F ...] [--plan full|sample|topology] [...]
                                               write the fabric, run the plan, judge it; a line of figures
    tools/simcentre verdict DIR                judge DIR's result again (its own time and peak memory)
    tools/simcentre report DIR                 the run report page of DIR's result (tools/report), its time and
                                               peak memory added to DIR/simcentre.json

TREE: ``--leaves L --per-leaf H --spines S`` (default 8 x 16, 16 spines), or ``--topology FILE`` (Slurm's
topology.conf of a regular two-level tree: every leaf the same size, every spine above every leaf); ``--link-gbps``
(100) and ``--latency-ns`` (500) per cable. Faults (``--fault``, repeatable):

    cable:NODE[:F]        the node's cable slow from the node (its transmit side) at F (0.6) of the link
    downgrade:NODE[:F]    the node's link trained to a lower speed: both ways at F (0.5)
    uplink:LEAF:SPINE[:F] the cable between a leaf and a spine, both ways at F (0.6)
    spine:SPINE[:F]       every cable of a spine, both ways at F (0.6)
    down:NODE             Slurm has the node down: left out of the job (measure.slurm.unusable_nodes) and named

Exit: 0 the verdict found nothing, 1 it named something (or the simulation failed), 2 usage.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

from simfabric import FatTree, Fault, UsageError, write_fabric

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / 'build' / 'smpi'
KERNEL = BUILD / 'src' / 'mpi' / 'nr-linkmap'
LOADER = BUILD / 'nr-simfabric.so'
#: The SMPI settings under which a simulated stream reads what its links carry (docs/scale.md, "Faithful rates").
SMPI_CONFIG = (
    'smpi/simulate-computation:no',   # the kernel's own code costs no simulated time
    'smpi/test:0', 'smpi/wtime:0',     # polling neither: nr-linkmap's idle loops sleep LM_SIM_POLL_S instead
    'smpi/grow-injected-times:no',
    'network/model:CM02',              # max-min sharing, no size-dependent bandwidth and latency factors
    'network/TCP-gamma:0',             # no TCP window bound on a stream (InfiniBand has none)
    'network/crosstraffic:0',          # no 5 % of each stream on the reverse links (TCP's acknowledgements)
    'smpi/shared-malloc:local',        # every rank's payload one block the simulator does not copy
    # SMPI's default gather and reduce wait on N requests N times (hours at 10,000 ranks): tree algorithms
    'smpi/gather:ompi_binomial', 'smpi/allreduce:rdb', 'smpi/reduce:ompi_binomial', 'smpi/bcast:binomial_tree',
    'smpi/display-timing:yes',         # the simulated time, on stderr
)
ROUND_TIME_S = 0.02                    # -t: two messages of -m per stream at the link's rate
MIN_LINK_FRACTION = 0.85               # the link check's defaults (netregress.measure.allpairs)
RATE_FRACTION = 0.95
SAMPLE_SEED = 1
#: What the link check keeps of a run. A plan file (netregress.measure.linkplan.PLAN_FILE: the rounds that are not
#: whole shifts) is nr-linkmap's input only: removed when the simulation ends, as `verdict` makes the plan again,
#: exactly, from run.json and topology.conf (its contention is all it needs).
KEPT = ('result.json', 'linkmatrix.bin', 'links.json', 'links.txt')


class SimulationError(Exception):
    """The simulation or the verdict failed: one line saying how, exit 1."""


# --- a run ---------------------------------------------------------------------------------------------------------

@dataclass
class RunSpec:
    """What `run` did, kept as run.json so that `verdict` can judge the result again."""
    tree: dict
    faults: list[str]
    plan: str
    left_out: dict[str, str] = field(default_factory=dict)
    sample: tuple[int, int, int] = (0, 0, SAMPLE_SEED)   # per run, run index, seed
    rate_mbps: float | None = None
    kernel_opts: list[str] = field(default_factory=list)
    shuffle: int | None = None      # full plan: the nodes in an order shuffled by this seed, not the tree's


def topology_of(out: Path):
    from netregress.measure.linkplan import Topology
    return Topology.from_text((out / 'topology.conf').read_text(), {'routing': 'd-mod-k'},
                              str(out / 'topology.conf'))


def make_plan(spec: RunSpec, nodes: list[str], topology):
    """The link check's plan over ``nodes`` in the tree's order (netregress.measure.linkplan); the full plan also in
    a shuffled order (``spec.shuffle``)."""
    from netregress.measure import linkplan
    if spec.plan == 'sample':
        return linkplan.sample_plan(nodes, *spec.sample, topology)
    if spec.plan == 'topology':
        return linkplan.topology_plan(topology, nodes)
    if spec.shuffle is not None:    # an order that ignores the tree (Slurm's, before issue 47): streams collide
        order = list(nodes)
        random.Random(spec.shuffle).shuffle(order)
        return linkplan.full_plan(order)
    return linkplan.full_plan(nodes, topology)


def left_out_by_slurm(tree: FatTree, down: Sequence[str]) -> dict[str, str]:
    """What the link check leaves out when sinfo says ``down`` are down (netregress.measure.slurm.unusable_nodes)."""
    from netregress.measure import slurm
    rows = ''.join(f'sim|{n}|{"down" if n in down else "idle"}|{"simulated fault" if n in down else ""}\n'
                   for n in tree.names)

    def sinfo(argv, timeout_s):
        return subprocess.CompletedProcess(argv, 0, rows, '')

    left, unknown = slurm.unusable_nodes(['sim'], 0, runner=sinfo, only=set(tree.names))
    if unknown:
        raise UsageError(f'the simulated sinfo: {"; ".join(unknown)}')
    return left


def message_size(tree: FatTree) -> str:
    """-m: the power of two nearest half a round's worth at the link's rate (two messages a stream)."""
    return f'{2 ** round(math.log2(tree.link_bytes_per_s * ROUND_TIME_S / 2 / 2 ** 20))}M'


def time_v(text: str) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) from /usr/bin/time -v's report."""
    wall = re.search(r'Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)', text)
    cpu = sum(float(x) for x in re.findall(r'(?:User|System) time \(seconds\): ([\d.]+)', text))
    rss = re.search(r'Maximum resident set size \(kbytes\): (\d+)', text)
    seconds = (int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3))) if wall else math.nan
    return seconds, cpu, int(rss.group(1)) / 1024 if rss else math.nan


def simulate(tree: FatTree, out: Path, hosts: Sequence[str], opts: Sequence[str]) -> dict:
    """nr-linkmap under smpirun on the fabric written in ``out``, one rank per node of ``hosts`` (the tree's names, in
    rank order), with kernel options ``opts``; its result is out/result.json. Returns the simulation's figures
    (wall and CPU time, peak memory, simulated time, exit status)."""
    if not KERNEL.exists() or not LOADER.exists():
        raise UsageError(f'{KERNEL} or {LOADER} missing: run tools/simcentre build first')
    sim_host = {name: f'node{i}' for i, name in enumerate(tree.names)}
    (out / 'hostfile').write_text(''.join(sim_host[n] + '\n' for n in hosts))
    cmd = ['nice', '-n', '10', '/usr/bin/time', '-v', 'smpirun', '-no-privatize', '-np', str(len(hosts)),
           '-platform', str(LOADER), '-hostfile', str(out / 'hostfile'), *[f'--cfg={c}' for c in SMPI_CONFIG],
           str(KERNEL), *opts, '--json', str(out / 'result.json')]
    (out / 'result.json').unlink(missing_ok=True)
    with open(out / 'linkmap.out', 'w') as stdout, open(out / 'smpirun.err', 'w') as stderr:
        proc = subprocess.run(cmd, stdout=stdout, stderr=stderr, env={**os.environ, 'NR_SIMFABRIC': str(out)})
    err = (out / 'smpirun.err').read_text()
    wall, cpu, peak = time_v(err)
    simulated = re.findall(r'Simulated time: ([\d.e+-]+) seconds', err)
    if not (out / 'result.json').exists():
        lines = [x for x in err.splitlines() if x.strip() and 'Configuration change' not in x]
        tail = [x for x in lines if 'CRITICAL' in x or 'rror' in x][:3] or lines[-3:]
        raise SimulationError(f'the simulation wrote no result (exit {proc.returncode}): {" | ".join(tail)}')
    result = json.loads((out / 'result.json').read_text())
    recheck = {k: result.get('recheck', {}).get(k) for k in ('below_count', 'taken', 'rounds', 'cleared', 'slow',
                                                               'failed', 'left')}
    return {'nodes': len(hosts), 'rounds': result.get('rounds_run'), 'recheck': recheck,
            'simulated_s': float(simulated[-1]) if simulated else None, 'wall_s': wall, 'cpu_s': cpu,
            'peak_mb': peak, 'kernel_exit': proc.returncode}


def run(args: argparse.Namespace) -> int:
    tree = tree_of(args)
    faults = [Fault.parse(f, tree) for f in args.fault]
    out = Path(args.out)
    write_fabric(tree, faults, out)
    from netregress.measure.linkplan import ORDER_FILE, PLAN_FILE, write_tree
    for stale in KEPT + (PLAN_FILE, 'run.json', 'simcentre.json', ORDER_FILE, 'tree.txt'):
        (out / stale).unlink(missing_ok=True)
    down = [tree.names[f.where[0]] for f in faults if f.kind == 'down']
    rate = tree.link_gbps * 1000 if args.rate_mbps is None else args.rate_mbps or None
    if args.shuffle is not None and args.plan != 'full':
        raise UsageError(f'--shuffle goes with --plan full, not {args.plan}')
    spec = RunSpec(asdict(tree), list(args.fault), args.plan, left_out_by_slurm(tree, down) if down else {},
                   rate_mbps=rate, shuffle=args.shuffle)
    topology = topology_of(out)
    nodes = [n for n in tree.names if n not in spec.left_out]
    if spec.plan == 'sample':
        from netregress.measure.runplan import sample_matchings_for
        spec.sample = (args.sample_sets or sample_matchings_for(len(nodes)), args.sample_run, SAMPLE_SEED)
    plan = make_plan(spec, nodes, topology)
    with open(out / 'tree.txt', 'w') as fp:      # recheck batches that share no uplink cable
        write_tree(fp, topology, plan.nodes, by_rank=True)     # the ranks' hosts are SimGrid's names
    opts = ['-t', str(ROUND_TIME_S), '-m', message_size(tree), '-w', '1', '--recheck-below',
            f'{MIN_LINK_FRACTION / max(1.0, tree.taper):.6g}', '--recheck-rounds', str(args.recheck_rounds),
            '--recheck-streams', str(args.recheck_streams), '--tree', str(out / 'tree.txt')]
    # as the check passes it: whole shifts as an order and a list, computed by rank 0; other rounds as a plan file
    opts += plan.kernel_options(out, order_by_rank=True)
    spec.kernel_opts = opts
    (out / 'run.json').write_text(json.dumps(asdict(spec), indent=1) + '\n')
    print(f'simcentre: {tree.describe()}; plan {spec.plan} ({len(plan.rounds)} rounds over {len(plan.nodes)} nodes)'
          + (f'; faults {", ".join(args.fault)}' if args.fault else ''), flush=True)
    try:
        figures = {**simulate(tree, out, plan.nodes, opts), 'plan': spec.plan, 'faults': list(args.fault)}
    finally:
        (out / PLAN_FILE).unlink(missing_ok=True)
    verdict = subprocess.run([sys.executable, __file__, 'verdict', str(out)], capture_output=True, text=True)
    if verdict.returncode == 2 or not verdict.stdout.strip():
        why = verdict.stderr.strip().splitlines()
        raise SimulationError(f'the verdict failed: {why[-1] if why else f"exit {verdict.returncode}"}')
    figures.update(json.loads(verdict.stdout.splitlines()[-1]))
    (out / 'simcentre.json').write_text(json.dumps(figures, indent=1) + '\n')
    print(summary_line(figures))
    return 1 if figures['named'] else 0


def summary_line(f: dict) -> str:
    return (f"simcentre: {f['nodes']} nodes, plan {f['plan']}, {', '.join(f['faults']) or 'healthy'}: {f['rounds']} "
            f"rounds, {f['simulated_s']:.3f} s simulated, {f['wall_s']:.0f} s wall ({f['cpu_s']:.0f} s CPU), peak "
            f"{f['peak_mb']:.0f} MB; "
            f"kept {f['kept_bytes'] / 1e6:.2f} MB; verdict {f['verdict_s']:.2f} s, peak {f['verdict_peak_mb']:.0f} MB; "
            f"named: {'; '.join(f['named']) or 'nothing'}")


# --- the verdict ---------------------------------------------------------------------------------------------------

def named(v, left_out: dict[str, str]) -> list[str]:
    """What the verdict names, one string each: left out nodes, then failed and slow elements
    (netregress.judge.linknames Named: kind, name, direction)."""
    out = [f'left out: {node}' for node in left_out]
    for what, elements in (('failed', v.failed_named), ('slow', v.slow_named)):
        out += [f'{what} {x.kind}: {x.name}' + (f' ({x.direction})' if x.direction else '') for x in elements]
    return out


def verdict(out: Path) -> int:
    """Judge ``out``'s result as the link check does and print one JSON line of figures (this process's time and
    peak memory are the verdict's)."""
    from netregress.judge import linkmatrix, linknames, linkverdict
    from netregress.judge.linkjob import write_link_files
    started = time.perf_counter()
    spec = RunSpec(**json.loads((out / 'run.json').read_text()))
    tree = FatTree(**{k: tuple(v) if isinstance(v, list) else v for k, v in spec.tree.items()})
    doc = json.loads((out / 'result.json').read_text())
    data = linkmatrix.from_result(doc, out)
    sim_name = {f'node{i}': name for i, name in enumerate(tree.names)}   # SimGrid's hosts -> the tree's names
    data = dataclasses.replace(data, nodes=[sim_name.get(h, h) for h in data.nodes])
    topology = topology_of(out)
    nodes = [n for n in tree.names if n not in spec.left_out]
    plan = make_plan(spec, nodes, topology)
    from netregress.measure.contention import plan_contention
    at = {h: i for i, h in enumerate(data.nodes)}
    contention = plan_contention(plan, topology, [at[h] for h in plan.nodes], data.n)
    fabric = linknames.Fabric.of(topology, data.nodes)
    v = linkverdict.judge(data, min_fraction=MIN_LINK_FRACTION, rate_mbps=spec.rate_mbps, rate_fraction=RATE_FRACTION,
                          fabric=fabric, contention=contention if contention.max() > 1 else None)
    write_link_files(str(out), doc, data, v, {'plan': spec.plan, 'order': [at[h] for h in plan.nodes],
                                              'rate_mbps': spec.rate_mbps, 'topology': topology.describe(),
                                              'nodes_left_out': list(spec.left_out.values()),
                                              'min_link_fraction': MIN_LINK_FRACTION,
                                              'min_rate_fraction': RATE_FRACTION})
    took = time.perf_counter() - started
    figures = {'named': named(v, spec.left_out),
               'problems': linkverdict.failed_problems(v) + linkverdict.slow_problems(v),
               'median_link_mbps': v.median_link_mbps, 'directions': v.directions, 'verdict_s': round(took, 3),
               'verdict_peak_mb': round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
               'kept_bytes': sum((out / f).stat().st_size for f in KEPT if (out / f).exists())}
    print(json.dumps(figures))
    return 0


# --- the report page -----------------------------------------------------------------------------------------------

def run_report(out: Path, figures: dict, finished: float) -> dict:
    """The ReFrame JSON run report of one link_allpairs case whose output directory is ``out``, as the link check's
    run would leave it (failed in sanity, the verdict's problems its reason, when something was named)."""
    spec = json.loads((out / 'run.json').read_text())
    names = [n for n in spec['tree']['names'] if n not in spec['left_out']]     # the job's nodes
    failed = bool(figures['named'])
    case = {'name': 'link_allpairs %interconnect=simulated', 'display_name': 'link_allpairs %interconnect=simulated',
            'unique_name': 'link_allpairs_simulated', 'basename': 'link_allpairs', 'ref_test': 'links.allpairs',
            'system': 'simcentre', 'partition': 'fabric', 'environ': 'smpi', 'interconnect': 'simulated',
            'result': 'fail' if failed else 'pass', 'fail_phase': 'sanity' if failed else None,
            'fail_reason': 'sanity error: ' + '; '.join(figures['problems']) if failed else None,
            'perfvalues': {}, 'job_nodelist': names, 'outputdir': str(out), 'stagedir': None,
            'job_completion_time_unix': finished, 'time_total': figures['wall_s'], 'uuid': 'simcentre:0:0',
            'session_uuid': 'simcentre'}
    stamp = time.strftime('%Y%m%dT%H%M%S+0000', time.gmtime(finished))
    return {'session_info': {'hostname': 'simcentre', 'version': '4.10.4', 'uuid': 'simcentre', 'time_start': stamp,
                             'time_start_unix': finished, 'time_end': stamp, 'time_end_unix': finished,
                             'num_failures': int(failed)},
            'runs': [{'run_index': 0, 'testcases': [case], 'num_failures': int(failed)}]}


def report(out: Path) -> int:
    """tools/report on ``out``'s judged result (its page in out/report/), timed; the figures join simcentre.json."""
    done = out / 'simcentre.json'
    if not done.exists():
        raise UsageError(f'{done}: no judged run there (tools/simcentre run first)')
    figures = json.loads(done.read_text())
    finished = max((out / f).stat().st_mtime for f in KEPT if (out / f).exists())
    (out / 'report-simcentre.json').write_text(json.dumps(run_report(out, figures, finished)))
    page = out / 'report'
    shutil.rmtree(page, ignore_errors=True)
    p = subprocess.run(['/usr/bin/time', '-v', sys.executable, '-m', 'netregress_postrun.report',
                        str(out / 'report-simcentre.json'), '--out', str(page), '--no-history'],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SimulationError(f'tools/report failed (exit {p.returncode}): {p.stderr.strip().splitlines()[-1:]}')
    wall, cpu, peak = time_v(p.stderr)
    figures.update(report_s=wall, report_cpu_s=cpu, report_peak_mb=peak,
                   report_bytes=sum(f.stat().st_size for f in page.iterdir()))
    done.write_text(json.dumps(figures, indent=1) + '\n')
    print(f"simcentre: report page {page / 'index.html'}: {wall:.1f} s ({cpu:.1f} s CPU), peak {peak:.0f} MB, "
          f"{figures['report_bytes'] / 1e6:.2f} MB")
    return 0


# --- the command line ----------------------------------------------------------------------------------------------

def tree_of(args: argparse.Namespace) -> FatTree:
    if args.topology:
        try:
            text = Path(args.topology).read_text()
        except OSError as err:
            raise UsageError(f'--topology {args.topology}: {err.strerror}') from None
        return FatTree.from_topology(text, args.topology, args.link_gbps, args.latency_ns)
    return FatTree(args.leaves, args.per_leaf, args.spines, args.link_gbps, args.latency_ns)


def build() -> int:
    """nr-linkmap and nr-simfabric under smpicc (tools/build-kernels, CMake NR_SMPI)."""
    if not shutil.which('smpicc'):
        raise UsageError('smpicc not found: apt-get install libsimgrid-dev (tools/bootstrap --for test)')
    return subprocess.run([str(ROOT / 'tools' / 'build-kernels'), '--mpicc', 'smpicc', '--build', str(BUILD), '--type',
                           'RelWithDebInfo', '--jobs', '2', '--',
                           '-DCMAKE_C_COMPILER=smpicc', '-DNR_SMPI=ON']).returncode


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog='tools/simcentre', description=__doc__.split('\n\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest='command', required=True)
    sub.add_parser('build', help='nr-linkmap and nr-simfabric under smpicc')
    r = sub.add_parser('run', help='write the fabric, run a plan on it, judge the result')
    r.add_argument('--out', required=True, help='directory for the fabric and the results')
    r.add_argument('--leaves', type=int, default=8)
    r.add_argument('--per-leaf', type=int, default=16)
    r.add_argument('--spines', type=int, default=16)
    r.add_argument('--topology', help="Slurm's topology.conf of a regular two-level tree (instead of the shape)")
    r.add_argument('--link-gbps', type=float, default=100.0)
    r.add_argument('--latency-ns', type=float, default=500.0)
    r.add_argument('--fault', action='append', default=[], help='cable:NODE[:F], downgrade:NODE[:F], '
                   'uplink:LEAF:SPINE[:F], spine:SPINE[:F], down:NODE')
    r.add_argument('--plan', choices=('full', 'sample', 'topology'), default='topology')
    r.add_argument('--sample-sets', type=int, help='sample: link sets per run (default: every link in 30 runs)')
    r.add_argument('--sample-run', type=int, default=0, help='sample: the run in the rotation')
    r.add_argument('--rate-mbps', type=float,
                   help='the line rate the verdict holds links to (default the link; 0: none)')
    r.add_argument('--recheck-rounds', type=int, default=64,
                   help='recheck rounds at most (nr-linkmap --recheck-rounds)')
    r.add_argument('--recheck-streams', type=int, default=0,
                   help='streams in a recheck round at most (nr-linkmap --recheck-streams; 1: each alone)')
    r.add_argument('--shuffle', type=int, metavar='SEED',
                   help='full plan: the nodes in a shuffled order (as Slurm lists them), not the tree\'s')
    v = sub.add_parser('verdict', help="judge a run's result again")
    v.add_argument('dir')
    p = sub.add_parser('report', help="the run report page of a judged run, timed")
    p.add_argument('dir')
    args = ap.parse_args(argv)
    try:
        if args.command == 'build':
            return build()
        if args.command == 'verdict':
            return verdict(Path(args.dir))
        if args.command == 'report':
            return report(Path(args.dir))
        return run(args)
    except UsageError as err:
        print(f'simcentre: {err}', file=sys.stderr)
        return 2
    except SimulationError as err:
        print(f'simcentre: {err}', file=sys.stderr)
        return 1
    except OSError as err:      # the output directory removed or unwritable under a run
        print(f'simcentre: {err.filename or args.command}: {err.strerror or err}', file=sys.stderr)
        return 1


if __name__ == '__main__':
    sys.exit(main())
