#!/usr/bin/env python3
"""Does the duet yardstick divide the host's state out of a round trip? A polling and a sleeping TCP yardstick beside
an MPI build that sleeps while it waits (LAM/MPI's tcp RPI) and one that polls, in several host states.

    bench/duet_wait.py [--rounds N (3)] [--builds lam7,mpich5] [--kernels DIR ($NETREGRESS_DEPS/kernels)] [--json FILE]

Each round runs, for every build, yardstick (polling, ``--duet tcp``; sleeping, ``--duet tcp --duet-sleep``) and
host state, one ``nr-mpitest -A 8 -r 5 -t 0.2 --duet tcp`` over loopback (TCP between the two ranks; LAM's tcp RPI
forced). Host states: ``idle``; ``one busy``, a process spinning on the host beside the two ranks; ``two busy``, one
spinner a CPU. A change of state is what a shared host does to a benchmark between two runs; the ratio
MPI / yardstick should not follow it. Printed per build and yardstick: the median MPI round trip, the yardstick's,
and the ratio in each state, and the ratio's spread over the states (largest median / smallest). The order of the
launches is shuffled in each round. A script, not a test: it asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __name__ == '__main__':          # under the project's venv, whichever Python the #! line found
    import benchenv
    benchenv.use_project_python()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'reframe_tests'))

from netregress.measure import interconnects, mpibuilds  # noqa: E402

DEPS = Path(os.environ.get('NETREGRESS_DEPS') or ROOT / '.deps')
STATES = ('idle', 'one busy', 'two busy')
YARDSTICKS = {'polls': [], 'sleeps': ['--duet-sleep']}


def launcher(build: str) -> tuple[list[str], dict[str, str]]:
    """How the checks start two ranks of ``build`` on this host over TCP on loopback: its local launch and job
    environment (config/mpi_builds.toml) and its family's path on ``tcp`` (config/interconnects.yaml), with
    the interface and subnet of the ``local`` system's loopback (config/settings.py)."""
    builds = mpibuilds.load()
    if build not in builds:
        raise SystemExit(f'duet_wait: no MPI build {build!r} in {mpibuilds.table_file()} '
                         f'(there: {", ".join(builds)})')
    entry = builds[build]
    try:
        path = interconnects.load().path('tcp', entry.family, {'iface': 'lo', 'subnet': '127.0.0.0/8'})
    except interconnects.InterconnectError as err:
        raise SystemExit(f'duet_wait: {err}') from None
    cmd = [word.format(ntasks=2, ntasks_per_node=2, nodes=1) for word in entry.launch['local']]
    return cmd, {**entry.env, **path.env}


def spinners(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, '-c', 'while True: pass']) for _ in range(count)]


def run_once(build: str, kernels: Path, extra: list[str], out: Path) -> dict:
    cmd, env = launcher(build)
    kernel = kernels / build / 'bin' / 'nr-mpitest'
    if not kernel.exists():
        raise SystemExit(f'duet_wait: {kernel} not found (tools/bootstrap builds the kernels)')
    out.unlink(missing_ok=True)
    os.chmod(out.parent, 0o777)
    proc = subprocess.run(cmd + [str(kernel), '-A', '8', '-r', '5', '-t', '0.2', '--duet', 'tcp', *extra,
                                 '--json', str(out)], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=300, cwd=out.parent)
    if proc.returncode or not out.exists():
        raise SystemExit(f'duet_wait: {build} {" ".join(extra)} failed (exit {proc.returncode}):\n'
                         f'{proc.stdout[-2000:]}{proc.stderr[-2000:]}')
    doc = json.loads(out.read_text())
    return {'mpi_us': doc['latency']['min_us'], 'yard_us': doc['duet']['figures']['yardstick']['min_us'],
            'ratio': doc['duet']['ratio']['median'], 'sleeps': doc['duet']['sleeps']}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--builds', default='lam7,mpich5')
    ap.add_argument('--kernels', type=Path, default=DEPS / 'kernels')
    ap.add_argument('--json', type=Path)
    args = ap.parse_args(argv)
    builds = args.builds.split(',')
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix='duet-wait-') as tmp:
        out = Path(tmp) / 'r.json'
        for rnd in range(args.rounds):
            for state in STATES:
                spin = spinners(STATES.index(state))
                try:
                    time.sleep(0.5)
                    jobs = [(b, y) for b in builds for y in YARDSTICKS]
                    random.shuffle(jobs)
                    for build, yard in jobs:
                        r = run_once(build, args.kernels, YARDSTICKS[yard], out)
                        rows.append({'round': rnd, 'state': state, 'build': build, 'yardstick': yard, **r})
                        print(f'round {rnd + 1} {state:8s} {build:8s} yardstick {yard:6s}: MPI {r["mpi_us"]:8.2f} us,'
                              f' yardstick {r["yard_us"]:8.2f} us, ratio {r["ratio"]:.3f}', flush=True)
                finally:
                    for p in spin:
                        p.kill()
                        p.wait()
    print('\nper build and yardstick: median over the rounds in each state (MPI us / yardstick us / ratio), and the '
          'ratio\'s spread over the states')
    for build in builds:
        for yard in YARDSTICKS:
            cells, ratios = [], []
            for state in STATES:
                sel = [r for r in rows if (r['build'], r['yardstick'], r['state']) == (build, yard, state)]
                med = {k: statistics.median(r[k] for r in sel) for k in ('mpi_us', 'yard_us', 'ratio')}
                ratios.append(med['ratio'])
                cells.append(f'{state}: {med["mpi_us"]:.1f} / {med["yard_us"]:.1f} / {med["ratio"]:.2f}')
            print(f'{build:8s} {yard:6s}  ' + ';  '.join(cells) + f';  spread x{max(ratios) / min(ratios):.2f}')
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == '__main__':
    sys.exit(main())
