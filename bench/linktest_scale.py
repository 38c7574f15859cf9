#!/usr/bin/env python3
"""The post-maintenance link and node checks at several cluster sizes, and the cost model fitted to them.

For each size N a virtual cluster of its own (tools/vcluster with NETREGRESS_VCLUSTER_ENV: N fast nodes under leaf
switches, beside any other cluster on the machine) runs ``ci/post-maintenance --nodes fast[1-N] --partition fast
--tags links --links PLAN`` through a copy of the vcluster site. Per run it prints the wall time of the whole
post-maintenance run and of each check's job, the link plan's rounds, and the job steps Slurm counted (sacct).
Then it fits ``job = start + per_node x N + rounds x (round_time + per_round)`` to the link jobs (least squares)
and prints what the model says for 400 and 1,000 nodes, next to the srun-per-test link check it replaced
(3 tests x 2 passes per pair, one job step each: 3N(N-1) steps at the 0.9 s per step measured on this machine).

    bench/linktest_scale.py [--sizes 8,16,32] [--plan full|topology|sample] [--out DIR]      (root)
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'reframe_tests'))

from netregress import linkplan  # noqa: E402
from netregress.allpairs import ROUND_TIME_S  # noqa: E402

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
VC_FAST_COUNT={n}
VC_FAST_LEAVES={leaves}
VC_GIGE_COUNT=2
'''
#: Seconds one srun job step of the replaced link check took on this machine (tests/site, 2026-11-26).
OLD_STEP_S = 0.9


def sh(*argv, env=None, check=True, timeout=3600) -> subprocess.CompletedProcess:
    return subprocess.run(list(map(str, argv)), env=env, capture_output=True, text=True, check=check,
                          timeout=timeout)


def run_size(n: int, plan: str, out: Path) -> dict:
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
        pm = sh(ROOT / 'ci' / 'post-maintenance', '--nodes', f'fast[1-{n}]', '--system', 'vcluster', '--partition',
                'fast', '--tags', 'links', '--links', plan, '--no-compare', '--output', work / 'pm', env=env,
                check=False)
        wall = time.monotonic() - t0
        (work / 'pm.log').write_text(pm.stdout + pm.stderr)
        report = json.loads((work / 'pm' / 'report-maintenance.json').read_text())
        jobs = {}
        for tc in report['runs'][-1]['testcases']:
            if tc.get('result') == 'skip' or 'KernelBuild' in str(tc.get('display_name')):
                continue
            name = str(tc.get('display_name')).split()[0]
            steps = sh('sacct', '-n', '-P', '-j', tc['jobid'], '-o', 'JobID', env=env, check=False).stdout.split()
            stage = Path(tc.get('outputdir') or tc.get('stagedir') or '')
            rounds = None
            if (stage / 'links.json').exists():
                rounds = len(json.loads((stage / 'links.json').read_text())['rounds'])
            jobs[name] = {'result': tc.get('result'), 'run_s': tc.get('time_run'), 'rounds': rounds,
                          'steps': len([s for s in steps if '.' in s and not s.endswith(('.batch', '.extern'))])}
        verdict = next((ln for ln in pm.stdout.splitlines() if ln.startswith('RESULT:')), '?')
        return {'nodes': n, 'plan': plan, 'up_s': up_s, 'wall_s': wall, 'jobs': jobs, 'verdict': verdict}
    finally:
        sh(vcluster, 'down', env=env, check=False)


def fit(rows: list[dict]) -> linkplan.CostModel:
    """Least squares of the link jobs' time on (1, N, rounds x 1) after taking out the streaming time."""
    import numpy as np
    a, b = [], []
    for r in rows:
        job = r['jobs'].get('link_allpairs')
        if not job or job['run_s'] is None or not job['rounds']:
            continue
        a.append([1.0, r['nodes'], job['rounds']])
        b.append(job['run_s'] - job['rounds'] * ROUND_TIME_S)
    (start, per_node, per_round), *_ = np.linalg.lstsq(np.array(a), np.array(b), rcond=None)
    return linkplan.CostModel(start_s=max(0.0, start), per_node_s=max(0.0, per_node), round_s=max(0.0, per_round),
                              rtt_pair_s=0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--sizes', default='8,16,32')
    ap.add_argument('--plan', default='full', choices=('full', 'topology', 'sample'))
    ap.add_argument('--out', type=Path, default=Path('/tmp/netregress-linktest-scale'))
    args = ap.parse_args()
    if os.geteuid() != 0:
        print('bench/linktest_scale.py: needs root (a virtual cluster of its own)', file=sys.stderr)
        return 2
    rows = []
    for n in (int(x) for x in args.sizes.split(',')):
        row = run_size(n, args.plan, args.out)
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
    for n in (400, 1000):
        names = [f'n{i}' for i in range(n)]
        for plan in (linkplan.full_plan(names), linkplan.sample_plan(names, 34, 0, 1),
                     linkplan.topology_plan({f'leaf{j}': names[j * 40:(j + 1) * 40] for j in range(n // 40)})):
            est = model.estimate_s(n, len(plan.rounds), ROUND_TIME_S)
            print(f'{n} nodes, {plan.name}: {len(plan.rounds)} rounds, 3 job steps, {est / 60:.1f} min '
                  f'(replaced check: {3 * n * (n - 1)} steps, {3 * n * (n - 1) * OLD_STEP_S / 86400:.1f} days)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
