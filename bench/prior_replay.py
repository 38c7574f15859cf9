#!/usr/bin/env python3
"""Would a prior band per test and interconnect judge a second run better than the pooled shared-CPU prior?

    bench/prior_replay.py --first A.json --derive B.json --judge C.json[:FAULTED_BUILD] [--judge ...]

Replays real vcluster run reports (``report-vcluster.json``) through the band rules of the interconnect table in
force (:class:`netregress.judge.bandrules.BandRules`): ``--first`` is a fresh state directory's first run (the
baseline a second run is judged by: one run); ``--derive`` a clean run whose steps from the first give each test and
interconnect its own prior (``shared_cpu.pool_factor`` x the largest |log step| in log space, between the
shared-CPU floor and cap); each ``--judge`` run is judged against the first with the committed prior
(``shared_cpu.prior``), with that prior on the worse side only (the better side open, as a run judges a figure
its baseline holds fewer than ``min_runs`` runs of) and with the per-test one. Figures of ``FAULTED_BUILD`` (a
build slowed on purpose in that run) count as detections, the others as false alarms. Only the CPU-bound figures
the shared-CPU band judges are replayed (ratios and link-bound streams keep their own bands). A script, not a
test: it asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

if __name__ == '__main__':          # under the project's venv, whichever Python the #! line found
    import benchenv
    benchenv.use_project_python()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'reframe_tests'))

from netregress.judge import bandrules  # noqa: E402
from netregress_postrun import refswrite  # noqa: E402


def shared_cpu_figures(path: Path, better: dict[tuple, str] | None = None) -> dict[tuple, float]:
    """{(partition, environ, interconnect, test, metric): value} of the figures the shared-CPU band judges;
    ``better`` gets each one's declared better direction."""
    doc = json.loads(path.read_text())
    found = [m for m in refswrite.measurements(doc, accepts=lambda tc: not tc.get('fixture'))
             if not m.fixed and m.kind in ('cpu_bound', 'latency', 'oversubscribed') and m.value > 0]
    if better is not None:
        better.update(((m.partition, m.environ, m.interconnect, m.test, m.metric), m.better or 'higher')
                      for m in found)
    return {(m.partition, m.environ, m.interconnect, m.test, m.metric): m.value for m in found}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--first', type=Path, required=True)
    ap.add_argument('--derive', type=Path, required=True)
    ap.add_argument('--judge', action='append', required=True, metavar='REPORT[:FAULTED_BUILD]')
    args = ap.parse_args(argv)
    rules = bandrules.load()
    first, derive = shared_cpu_figures(args.first), shared_cpu_figures(args.derive)
    steps: dict[tuple, list[float]] = defaultdict(list)
    for key, value in first.items():
        if key in derive:
            steps[(key[2], key[3])].append(abs(math.log(derive[key] / value)))
    per_test = {k: min(max(math.exp(rules.shared_pool_factor * max(v)), rules.shared_floor), rules.shared_cap)
                for k, v in steps.items()}
    print(f'per-test priors from {len(steps)} tests x interconnects: x{min(per_test.values()):.1f} to '
          f'x{max(per_test.values()):.1f} (committed prior: x{rules.shared_prior:g})')
    for spec in args.judge:
        path, _, faulted = spec.partition(':')
        better: dict[tuple, str] = {}
        run = shared_cpu_figures(Path(path), better)
        # 'worse side': the committed prior with the better side open, as a run judges a figure seen once
        for name in ('committed', 'worse side', 'per test'):
            alarms = clean = caught = slowed = 0
            for key, value in run.items():
                if key not in first:
                    continue
                prior = per_test.get((key[2], key[3]), rules.shared_prior) if name == 'per test' \
                    else rules.shared_prior
                _, lower, upper, _ = rules.shared_cpu_band([first[key]], prior=prior)
                low, high = (1 + lower) * first[key], (1 + upper) * first[key]
                if name == 'worse side':
                    low, high = (low, math.inf) if better[key] == 'higher' else (0.0, high)
                outside = not low <= value <= high
                if faulted and key[1] == faulted:
                    slowed, caught = slowed + 1, caught + outside
                else:
                    clean, alarms = clean + 1, alarms + outside
            fault = f'; {faulted}: {caught} of {slowed} outside' if faulted else ''
            print(f'{Path(path).parent.name} {name:10s}: false alarms {alarms} of {clean} '
                  f'({1000 * alarms / max(clean, 1):.1f} per 1,000){fault}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
