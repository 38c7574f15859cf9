#!/usr/bin/env python3
"""The link test's verdict and report page at a centre's size, on a synthetic matrix: time, peak memory, bytes kept.

Makes a two-level fat tree (``--leaves`` x ``--per-leaf`` nodes under ``--spines`` spines, d-mod-k routing) as
topology.conf, the N x N matrix the plan would read on it with one fault (tests/python/linkfabric.py: a model of
our own, not the simulator; ``--plan full|sample|topology`` streams every round of that plan through the model,
``--plan alone`` builds every direction as measured alone: every direction at 10,000 nodes), and nr-linkmap's
compact result beside it. Then, each in a process of its own and measured by /usr/bin/time, what a run does with
a job's output:

1. ``python -m netregress.judge.linkjob result.json --topology ... --plan PLAN --keep``: read, the plan's
   contention, judge, keep (links.json, links.txt);
2. ``tools/report`` on a run report holding that one link case: the page with its link map.

    bench/linkverdict_scale.py --leaves 42 --per-leaf 24 --spines 24 --fault spine [--plan full] [--dir DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

if __name__ == '__main__':          # under the project's venv, whichever Python the #! line found
    import benchenv
    benchenv.use_project_python()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'reframe_tests'))
sys.path.insert(0, str(ROOT / 'tests' / 'python'))

from linkfabric import alone, measure, tree  # noqa: E402
from netregress.judge import linkmatrix  # noqa: E402
from netregress.measure import linkplan  # noqa: E402
from netregress.measure.runplan import sample_matchings_for  # noqa: E402

FAULTS = {'none': lambda t: (), 'cable': lambda t: (('cable', t.order[7], 0.5),),
          'uplink': lambda t: (('uplink', list(t.leaves)[1], 1, 0.5),),
          'spine': lambda t: (('spine', t.spines[-1], 0.5),), 'down': lambda t: (('down', t.order[-3]),)}


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """(wall seconds, peak resident MB, stdout) of ``cmd`` under /usr/bin/time."""
    started = time.monotonic()
    env = {**os.environ, 'PYTHONPATH': str(ROOT / 'reframe_tests')}
    res = subprocess.run(['/usr/bin/time', '-v', *cmd], capture_output=True, text=True, env=env)
    wall = time.monotonic() - started
    peak = re.search(r'Maximum resident set size \(kbytes\): (\d+)', res.stderr)
    if peak is None or res.returncode not in (0, 1):           # the verdict exits 1 when it names a fault
        raise SystemExit(f'{" ".join(cmd[:3])} failed (exit {res.returncode}): {res.stderr[-2000:]}')
    return wall, int(peak.group(1)) / 1024, res.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--leaves', type=int, default=42)
    ap.add_argument('--per-leaf', type=int, default=24)
    ap.add_argument('--spines', type=int, default=24)
    ap.add_argument('--fault', choices=sorted(FAULTS), default='spine')
    ap.add_argument('--plan', choices=('full', 'sample', 'topology', 'alone'), default='full')
    ap.add_argument('--dir', type=Path, default=Path('/tmp/netregress-linkverdict-scale'))
    args = ap.parse_args()
    topo = tree(args.leaves, args.per_leaf, args.spines)
    nodes = topo.order
    stage = args.dir / 'stage'
    stage.mkdir(parents=True, exist_ok=True)
    for old in stage.iterdir():
        old.unlink()
    conf = args.dir / 'topology.conf'
    conf.write_text(''.join(f'SwitchName={leaf} Nodes={",".join(members)}\n' for leaf, members in topo.leaves.items())
                    + ''.join(f'SwitchName={s} Switches={",".join(topo.leaves)}\n' for s in topo.spines))
    started = time.monotonic()
    faults = FAULTS[args.fault](topo)
    sample = (sample_matchings_for(len(nodes)), 0, 1)              # per run, run index, seed
    plans = {'full': lambda: linkplan.full_plan(nodes, topo), 'topology': lambda: linkplan.topology_plan(topo),
             'sample': lambda: linkplan.sample_plan(nodes, *sample, topo)}
    if args.plan == 'alone':
        matrix = alone(topo, nodes, faults)
    else:
        matrix = measure(topo, plans[args.plan](), nodes, faults)
    linkmatrix.write_matrix(stage / linkmatrix.MATRIX_FILE, matrix)
    del matrix
    doc = {'schema': 'netregress-result/1', 'tool': 'nr-linkmap', 'status': 'ok', 'nodes': nodes,
           'rounds': [], 'per_node': [{'rank': r, 'sent_bytes': 1e9, 'received_bytes': 1e9} for r in range(len(nodes))]}
    (stage / 'result.json').write_text(json.dumps(doc))
    print(f'{len(nodes)} nodes ({args.leaves} leaves of {args.per_leaf}, {args.spines} spines, d-mod-k), fault '
          f'{args.fault} {faults}, matrix made in {time.monotonic() - started:.0f} s ({args.plan})')

    verdict = [sys.executable, '-m', 'netregress.judge.linkjob', str(stage / 'result.json'),
               '--topology', str(conf),
               '--routing', 'd-mod-k', '--keep'] + ([] if args.plan == 'alone' else ['--plan', args.plan]) + \
        (['--sample', *map(str, sample)] if args.plan == 'sample' else [])
    wall, peak, out = timed(verdict)
    print(f'verdict: {wall:.1f} s, peak {peak:.0f} MB: {" ".join(verdict[1:])}')
    for line in out.splitlines():
        print(f'  {line[:400]}')
    kept = {p.name: p.stat().st_size for p in stage.iterdir() if p.name in
            ('linkmatrix.bin', 'links.json', 'links.txt', 'result.json')}
    print(f'kept: {sum(kept.values()) / 1e6:.1f} MB ({", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in kept.items())})')

    run_dir = args.dir / 'run'
    run_dir.mkdir(exist_ok=True)
    end = time.time()
    case = {'name': 'link_allpairs %interconnect=ib', 'display_name': 'link_allpairs %interconnect=ib',
            'unique_name': 'link_allpairs_ib', 'basename': 'link_allpairs', 'system': 'sim', 'partition': 'fat',
            'environ': 'openmpi5', 'result': 'fail', 'fail_phase': 'performance', 'fail_reason': out.splitlines()[0],
            'perfvalues': {}, 'interconnect': 'ib', 'ref_test': 'links.allpairs', 'job_nodelist': nodes,
            'stagedir': str(stage), 'outputdir': None, 'job_completion_time_unix': end, 'time_total': 1.0}
    (run_dir / 'report-sim.json').write_text(json.dumps({
        'session_info': {'hostname': 'vm', 'version': '4.10.4', 'uuid': 'scale', 'time_start_unix': end - 60,
                         'time_start': time.strftime('%Y%m%dT%H%M%S+0000', time.gmtime(end - 60)),
                         'time_end_unix': end + 60, 'time_end': time.strftime('%Y%m%dT%H%M%S+0000',
                                                                                time.gmtime(end + 60)),
                         'num_failures': 1},
        'runs': [{'run_index': 0, 'num_failures': 1, 'testcases': [dict(case, uuid='scale:0:0')]}]}))
    wall, peak, out = timed([str(ROOT / 'tools' / 'report'), str(run_dir), '--no-history'])
    page = run_dir / 'report'
    png = next(page.glob('links-*[!d].png'))
    print(f'report page: {wall:.1f} s, peak {peak:.0f} MB: tools/report {run_dir} --no-history; {png.name} '
          f'{png.stat().st_size / 1e6:.1f} MB, {page / "index.html"}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
