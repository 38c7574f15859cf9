#!/usr/bin/env python3
"""The post-maintenance link and node checks at several cluster sizes, and the cost model fitted to them.

For each size N a virtual cluster of its own (tools/vcluster with NETREGRESS_VCLUSTER_ENV: N gige nodes under leaf
switches, beside any other cluster on the machine) runs ``ci/post-maintenance --nodes gige[1-N] --partition gige
--tags links --links PLAN`` through a copy of the vcluster site. The gige fabric, because its links are shaped to
1 Gbit/s: on the unshaped fabric the 2 shared CPUs decide every stream, and with 32 ranks on them a stream read
0.38-1 x the median (the link test at scale measures the host there, not the links). Per run it prints the wall
time of the whole post-maintenance run and of each check's job, the link plan's rounds, and the job steps Slurm
counted (sacct).
Then it fits ``job = start + per_node x N + rounds x (round_time + per_round)`` to the link jobs (least squares)
and prints what the model says for 400 and 1,000 nodes, next to the srun-per-test link check it replaced
(3 tests x 2 passes per pair, one job step each: 3N(N-1) steps at the 0.9 s per step measured on this machine).

    bench/linktest_scale.py [--sizes 8,16,32] [--plan full|topology|sample] [--out DIR] [--drill] [--cost FILE] (root)

With ``--drill`` the largest cluster also runs the drill's switch-tree faults (tools/drill --only un: a slow
uplink and a slow node, each to be named) before it goes down.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

if __name__ == '__main__':          # under the project's venv, whichever Python the #! line found
    import benchenv
    benchenv.use_project_python()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'reframe_tests'))

from netregress.measure import linkplan  # noqa: E402
from netregress.measure.runplan import ROUND_TIME_S, sample_matchings_for  # noqa: E402

#: The scale clusters' own names, subnets, ports and state: they run beside the default cluster (docs/vcluster.md).
SCALE_ENV = '''VC_STATE_DIR={state}
VC_CLUSTER=nrsc
VC_NS_PREFIX=nrsc-
VC_FAST_SUBNET=10.94.1.0/24
VC_FAST_GATEWAY=10.94.1.1
VC_GIGE_SUBNET=10.94.2.0/24
VC_GIGE_GATEWAY=10.94.2.1
VC_SLURMCTLD_PORT=6957
VC_SLURMD_PORT=6958
VC_SLURMDBD_PORT=6959
VC_MARIADB_PORT=6960
VC_GIGE_COUNT={n}
VC_GIGE_LEAVES={leaves}
VC_FAST_COUNT=2
'''
#: Seconds one srun job step of the replaced link check took on this machine (tests/site, 2026-11-26).
OLD_STEP_S = 0.9


def sh(*argv, env=None, check=True, timeout=3600) -> subprocess.CompletedProcess:
    return subprocess.run(list(map(str, argv)), env=env, capture_output=True, text=True, check=check,
                          timeout=timeout)


def run_size(n: int, plan: str, out: Path, drill: bool = False) -> dict:
    work = out / f'n{n}'
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    envfile = work / 'vc.env'
    envfile.write_text(SCALE_ENV.format(state=work / 'state', n=n, leaves=2 if n <= 8 else 4))
    site = work / 'site'
    shutil.copytree(ROOT / 'config' / 'sites' / 'vcluster', site)
    text = (site / 'settings.py').read_text().replace('10.92.', '10.94.')
    (site / 'settings.py').write_text(text)
    env = {**os.environ, 'NETREGRESS_VCLUSTER_ENV': str(envfile), 'NETREGRESS_SITE': str(site),
           'NETREGRESS_STATE': str(work / 'nrstate'), 'OMPI_ALLOW_RUN_AS_ROOT': '1',
           'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1'}
    vcluster = ROOT / 'tools' / 'vcluster'
    t0 = time.monotonic()
    sh(vcluster, 'up', env=env)
    up_s = time.monotonic() - t0
    for line in sh(vcluster, 'env', env=env).stdout.splitlines():      # export NAME=VALUE
        name, _, value = line.removeprefix('export ').partition('=')
        env[name] = value
    try:
        t0 = time.monotonic()
        pm = sh(ROOT / 'ci' / 'post-maintenance', '--nodes', f'gige[1-{n}]', '--system', 'vcluster', '--partition',
                'gige', '--tags', 'links', '--links', plan, '--no-compare', '--output', work / 'pm', env=env,
                check=False)
        wall = time.monotonic() - t0
        (work / 'pm.log').write_text(pm.stdout + pm.stderr)
        report = json.loads((work / 'pm' / 'report-maintenance.json').read_text())
        jobs = {}
        # every attempt, the last one of a check wins (a retry is a run of its own in the report)
        for tc in (tc for run in report['runs'] for tc in run['testcases']):
            if tc.get('result') == 'skip' or 'KernelBuild' in str(tc.get('display_name')):
                continue
            name = str(tc.get('display_name')).split()[0]
            # the job's own run time, as Slurm saw it (ReFrame's time_run includes the wait for the host's license)
            acct = sh('sacct', '-n', '-P', '-j', tc['jobid'], '-o', 'JobID,ElapsedRaw', env=env,
                      check=False).stdout.split()
            steps = [a for a in acct if '.' in a.split('|')[0] and not a.split('|')[0].endswith(('.batch', '.extern'))]
            elapsed = next((float(a.split('|')[1]) for a in acct if '.' not in a.split('|')[0]), None)
            stage = Path(tc.get('stagedir') or '')
            rounds = linkmap_s = None
            for where in (stage, Path(tc.get('outputdir') or '')):
                if (where / 'result.json').exists() and name == 'link_allpairs':
                    result = json.loads((where / 'result.json').read_text())
                    rounds, linkmap_s = result.get('rounds_run'), result.get('elapsed_s')   # rechecks included
            jobs[name] = {'result': tc.get('result'), 'run_s': elapsed, 'rounds': rounds, 'steps': len(steps),
                          'linkmap_s': linkmap_s}
        verdict = next((ln for ln in pm.stdout.splitlines() if ln.startswith('RESULT:')), '?')
        row = {'nodes': n, 'plan': plan, 'up_s': up_s, 'wall_s': wall, 'jobs': jobs, 'verdict': verdict}
        if drill:
            d = sh(ROOT / 'tools' / 'drill', '--only', 'un', '--no-clean', env=env, check=False)
            (work / 'drill.log').write_text(d.stdout + d.stderr)
            row['drill'] = [ln for ln in d.stdout.splitlines() if ln.startswith(('| u.', '| n.', '== drill'))]
        return row
    finally:
        sh(vcluster, 'down', env=env, check=False)


def fit(rows: list[dict]) -> linkplan.CostModel:
    """Least squares of the link jobs' time (Slurm's elapsed) on (1, N, rounds) after taking out the streaming
    time; a coefficient the data cannot tell from zero comes out negative and is taken as zero."""
    import numpy as np
    a, b = [], []
    for r in rows:
        job = r['jobs'].get('link_allpairs')
        if not job or job['run_s'] is None or not job['rounds']:
            continue
        a.append([1.0, r['nodes'], job['rounds']])
        b.append(job['run_s'] - job['rounds'] * ROUND_TIME_S)
    (start, per_node, per_round), *_ = np.linalg.lstsq(np.array(a), np.array(b), rcond=None)
    sizes = '/'.join(str(r['nodes']) for r in rows if r['jobs'].get('link_allpairs'))
    return linkplan.CostModel(name='vcluster', fitted=f'bench/linktest_scale.py: vcluster, {len(a)} link jobs of '
                                                      f'{sizes} nodes on 2 CPUs, one stream a round',
                              start_s=max(0.0, start), per_node_s=max(0.0, per_node), round_s=max(0.0, per_round),
                              rtt_pair_s=0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--sizes', default='8,16,32')
    ap.add_argument('--plan', default='full', choices=('full', 'topology', 'sample'))
    ap.add_argument('--out', type=Path, default=Path('/tmp/netregress-linktest-scale'))
    ap.add_argument('--drill', action='store_true', help="the drill's switch-tree faults on the largest cluster")
    ap.add_argument('--cost', type=Path, help='put the fit into this cost file (netregress-linkcost/1: '
                                               'config/linkcost.yaml), beside the fits of other sources')
    args = ap.parse_args()
    if os.geteuid() != 0:
        print('bench/linktest_scale.py: needs root (a virtual cluster of its own)', file=sys.stderr)
        return 2
    rows = []
    sizes = [int(x) for x in args.sizes.split(',')]
    for n in sizes:
        row = run_size(n, args.plan, args.out, drill=args.drill and n == max(sizes))
        rows.append(row)
        print(json.dumps(row), flush=True)
    print('\n| nodes | plan | post-maintenance wall s | link job s | rounds | link steps | node probe s | node steps | '
          'verdict | replaced link check: steps, est. s |')
    print('|---|---|---|---|---|---|---|---|---|---|')
    for r in rows:
        link, node = r['jobs'].get('link_allpairs', {}), r['jobs'].get('node_loopback', {})
        old_steps = 3 * r['nodes'] * (r['nodes'] - 1)
        print(f"| {r['nodes']} | {r['plan']} | {r['wall_s']:.0f} | {link.get('run_s') or 0:.0f} | "
              f"{link.get('rounds')} | {link.get('steps')} | {node.get('run_s') or 0:.0f} | {node.get('steps')} | "
              f"{r['verdict']} | {old_steps}, {old_steps * OLD_STEP_S:.0f} |")
    model = fit(rows)
    print(f'\nfitted: {model}')
    if args.cost:
        print(f'bench: wrote {linkplan.save_cost_model(model, args.cost)}')
    for n in (400, 1000):
        names = [f'n{i}' for i in range(n)]
        for plan in (linkplan.full_plan(names), linkplan.sample_plan(names, sample_matchings_for(n), 0, 1),
                     linkplan.topology_plan(linkplan.Topology({f'leaf{j}': tuple(names[j * 40:(j + 1) * 40])
                                                               for j in range(n // 40)}))):
            est = model.estimate_s(n, len(plan.rounds), ROUND_TIME_S)
            print(f'{n} nodes, {plan.name}: {len(plan.rounds)} rounds, 3 job steps, {est / 60:.1f} min '
                  f'(replaced check: {3 * n * (n - 1)} steps, {3 * n * (n - 1) * OLD_STEP_S / 86400:.1f} days)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
