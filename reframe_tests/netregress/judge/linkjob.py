"""What is kept of one link-test job, and the job's output judged by hand.

``links.json`` (the summaries, the suspect directions and what they were blamed on), ``links.txt`` (the same for
people), ``linkmatrix.bin`` (every direction) and nr-linkmap's ``result.json`` without its per-pair lists: the check
(:mod:`netregress.measure.allpairs`) and the simulated centre write the same files, and the report page reads them.
``python -m netregress.judge.linkjob RESULT.json`` judges a job's output by hand (the scale benchmark too).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from .linkmatrix import MATRIX_FILE, LinkData, LinkMatrixError, from_result, write_matrix
from .linknames import Fabric, phrase
from .linkverdict import LINKS_JSON, LINKS_TABLE, Verdict, failed_problems, judge, slow_problems
from ..measure.contention import plan_contention

#: nr-linkmap's result as the check names it (measure.base.RESULT_FILE).
RESULT_JSON = 'result.json'
#: Suspect directions links.json keeps in full (the rest counted; the matrix has every one).
MAX_LISTED = 50_000


def suspects_json(v: Verdict, limit: int = MAX_LISTED) -> dict:
    """The suspect directions in full (at most ``limit`` of each kind, the slowest first) and the named elements."""
    def rows(d: Mapping[str, np.ndarray], slow: bool) -> list[dict]:
        out = []
        for i in range(min(limit, len(d['src']))):
            a, b = int(d['src'][i]), int(d['dst'][i])
            entry = {'src': a, 'dst': b, 'src_host': v.nodes[a], 'dst_host': v.nodes[b]}
            if slow:
                entry.update(mbps=round(float(d['mbps'][i]), 3), share=round(float(d['share'][i]), 4),
                             contention=int(d['contention'][i]))
                if v.rate_mbps:
                    entry['of_rate'] = round(float(d['of_rate'][i]), 4)
            else:
                entry['error'] = v.errors.get((a, b), 'moved nothing')
            out.append(entry)
        return out

    return {'slow': rows(v.slow, True), 'slow_count': int(len(v.slow['src'])),
            'failed': rows(v.failed, False), 'failed_count': int(len(v.failed['src'])),
            'named_slow': [x.as_dict() for x in v.slow_named], 'named_failed': [x.as_dict() for x in v.failed_named]}


def format_table(v: Verdict, limit: int = MAX_LISTED) -> str:
    """The table for people (``links.txt``): the named elements, then the suspect directions (at most ``limit``
    of each kind, the slowest first; links.json and linkmatrix.bin have the rest)."""
    lines = []
    for title, named in (('failed', v.failed_named), ('slow', v.slow_named)):
        for x in named:
            if x.kind != 'link':
                lines.append(f'{title}: {phrase(x, title == "slow")}')
    rows = [('direction', 'Mbit/s', 'share', 'contention', 'problem')]
    for i in range(min(limit, len(v.failed['src']))):
        a, b = int(v.failed['src'][i]), int(v.failed['dst'][i])
        rows.append((f'{v.nodes[a]}->{v.nodes[b]}', '-', '-', '-', f'failed: {v.errors.get((a, b), "moved nothing")}'))
    for i in range(min(limit, len(v.slow['src']))):
        a, b = int(v.slow['src'][i]), int(v.slow['dst'][i])
        rows.append((f'{v.nodes[a]}->{v.nodes[b]}', f'{v.slow["mbps"][i]:.1f}', f'{v.slow["share"][i]:.3f}',
                     str(int(v.slow['contention'][i])), 'slow'))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    table = '\n'.join('  '.join(c.ljust(w) for c, w in zip(r[:-1], widths)) + '  ' + r[-1] for r in rows)
    left = max(0, len(v.failed['src']) - limit) + max(0, len(v.slow['src']) - limit)
    stats = v.summary()
    tail = '\n'.join(f'{k} = {val:.3f}' if k == 'min_to_median' else f'{k} = {val:.1f}' for k, val in stats.items())
    head = (f'{v.directions} directions measured, {len(v.slow["src"])} slow, {len(v.failed["src"])} failed, '
            f'{v.rechecked} measured again alone; listed: the suspect ones only (linkmatrix.bin has every one)')
    more = [f'{left} more suspect directions not listed (the slowest {limit} of each kind are)'] if left else []
    return '\n'.join([head, *lines, '', table, *more, '', tail]).rstrip() + '\n'


# --- by hand: judge a job's output ----------------------------------------------------------------------------

def compact_result(doc: Mapping) -> dict:
    """nr-linkmap's result without what linkmatrix.bin and links.json hold (every pair of every round, the N x N
    matrix): what is kept of it."""
    out = {k: v for k, v in doc.items() if k != 'matrix_mbps'}
    out['rounds'] = [{k: v for k, v in r.items() if k != 'pairs'} for r in doc.get('rounds') or []
                     if isinstance(r, Mapping)]
    out['compacted'] = f'every pair of every round and matrix_mbps: in {MATRIX_FILE} and {LINKS_JSON}'
    return out


def write_link_files(where: str, doc: Mapping, data: LinkData, verdict: Verdict, about: Mapping) -> None:
    """What is kept of one link-test job in directory ``where``: ``linkmatrix.bin`` (where the kernel did not
    write it), ``links.json`` (``about`` the run: partition, plan, the order of the switch tree...; the summaries,
    the suspect directions and what they were blamed on), ``links.txt``, and nr-linkmap's ``result.json`` without
    its per-pair lists (:func:`compact_result`)."""
    if not os.path.exists(os.path.join(where, MATRIX_FILE)):
        write_matrix(os.path.join(where, MATRIX_FILE), data.matrix)
    links = {**about, 'nodes': data.nodes, 'matrix': MATRIX_FILE, 'summary': verdict.summary(),
             'directions': verdict.directions, 'rechecked': verdict.rechecked, 'per_node': verdict.per_node,
             'switches': verdict.switches, **suspects_json(verdict)}
    with open(os.path.join(where, LINKS_JSON), 'w') as fp:
        fp.write(json.dumps(links, separators=(',', ':')))        # dumps: the C encoder (dump is Python's)
    with open(os.path.join(where, LINKS_TABLE), 'w') as fp:
        fp.write(format_table(verdict))
    if 'compacted' not in doc and (any(isinstance(r, Mapping) and r.get('pairs') for r in doc.get('rounds') or [])
                                   or 'matrix_mbps' in doc):
        with open(os.path.join(where, RESULT_JSON), 'w') as fp:
            fp.write(json.dumps(compact_result(doc)))


def main(argv: Sequence[str] | None = None) -> int:
    """Judge an nr-linkmap result (and its linkmatrix.bin) and print the verdicts, the time and peak memory; with
    --keep also write what the link check keeps (a simulated job's output becomes a report's link map)."""
    from ..measure import linkplan
    ap = argparse.ArgumentParser(prog='python -m netregress.judge.linkjob', description=main.__doc__)
    ap.add_argument('result', type=Path, help="nr-linkmap's JSON result (linkmatrix.bin beside it)")
    ap.add_argument('--topology', type=Path, help="Slurm's topology.conf (or scontrol show topology output)")
    ap.add_argument('--routing', choices=linkplan.ROUTINGS, default='balanced')
    ap.add_argument('--uplinks', type=int, help='uplink cables a leaf has (default: one per spine)')
    ap.add_argument('--taper', type=float, help='nodes of a leaf per uplink (instead of --uplinks)')
    ap.add_argument('--plan', choices=('full', 'sample', 'topology'),
                    help='the plan the job ran (with --topology: the contention its rounds met is expected)')
    ap.add_argument('--sample', type=int, nargs=3, metavar=('PER_RUN', 'RUN', 'SEED'), help='the sample plan')
    ap.add_argument('--min-fraction', type=float, default=0.85)
    ap.add_argument('--rate', type=float, help='the payload a link carries, Mbit/s')
    ap.add_argument('--rate-fraction', type=float, default=0.95)
    ap.add_argument('--keep', action='store_true',
                    help='keep what the link check keeps beside the result: links.json, links.txt, the compact '
                         'result.json (tools/report then draws it)')
    args = ap.parse_args(argv)
    if (args.plan or args.sample) and not args.topology:
        ap.error('--plan and --sample need --topology: the contention of a plan follows the switch tree')
    started = time.perf_counter()
    try:
        try:
            doc = json.loads(args.result.read_text())
        except ValueError as err:
            raise LinkMatrixError(f'{args.result}: not JSON ({err})') from None
        if not isinstance(doc, dict):
            raise LinkMatrixError(f'{args.result}: not an nr-linkmap result (a JSON object)')
        data = from_result(doc, args.result.parent)
        fabric = contention = None
        if args.topology:
            options = {'routing': args.routing, **({'uplinks': args.uplinks} if args.uplinks else {}),
                       **({'taper': args.taper} if args.taper else {})}
            topology = linkplan.Topology.from_text(args.topology.read_text(), options, str(args.topology))
            fabric = Fabric.of(topology, data.nodes)
            if args.plan:
                per_run, run_index, seed = args.sample or (1, 0, 1)
                plans: dict[str, Callable[[], linkplan.LinkPlan]] = {
                    'full': lambda: linkplan.full_plan(data.nodes, topology),
                    'topology': lambda: linkplan.topology_plan(topology, data.nodes),
                    'sample': lambda: linkplan.sample_plan(data.nodes, per_run, run_index, seed, topology)}
                plan = plans[args.plan]()
                at = {h: i for i, h in enumerate(data.nodes)}
                contention = plan_contention(plan, topology, [at[h] for h in plan.nodes], data.n)
    except (OSError, ValueError, LinkMatrixError) as err:
        print(f'linkjob: {err}', file=sys.stderr)
        return 2
    v = judge(data, min_fraction=args.min_fraction, rate_mbps=args.rate, rate_fraction=args.rate_fraction,
              fabric=fabric, contention=contention)
    problems = failed_problems(v) + slow_problems(v)
    if args.keep:
        order = linkplan.topology_order(data.nodes, fabric.topology if fabric else None)
        at = {h: i for i, h in enumerate(data.nodes)}
        try:
            write_link_files(str(args.result.parent), doc, data, v, {
                'plan': args.plan, 'order': [at[h] for h in order], 'rate_mbps': args.rate,
                'topology': fabric.topology.describe() if fabric else None, 'min_link_fraction': args.min_fraction,
                'min_rate_fraction': args.rate_fraction})
        except OSError as err:
            print(f'linkjob: --keep: {err}', file=sys.stderr)
            return 2
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for p in problems:
        print(f'FAILED {p}')
    print(f'linkjob: {data.n} nodes, {v.directions} directions, {len(v.slow["src"])} slow, '
          f'{len(v.failed["src"])} failed; {time.perf_counter() - started:.1f} s, peak {peak:.0f} MB')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
