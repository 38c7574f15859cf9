"""Node coverage of a validation run: which nodes Slurm cannot use, and which nodes no passing check used.

A post-maintenance run proves a partition only for the nodes its checks ran on. ReFrame's flexible node allocation
and Slurm's scheduling silently work around a node that is down, drained or not responding, so a run can pass while
a node was never touched. This module names those nodes:

Slurm's view (which nodes are down, drained or not responding) is :func:`netregress.slurm.node_problems`.

:func:`uncovered_nodes`
    the run's view (a ReFrame JSON run report): every node of a partition that no passing test case moved payload
    over the fabric on, e.g. ``gige4: no passing check moved payload over its fabric there``, with why the all-node
    checks left it out where they did (Slurm could not use it: :func:`left_out_nodes`).
:func:`overlapping_jobs`
    where the nodes share one host's CPUs (the vcluster: partition extra ``host_cpus``), the run's jobs must have run
    one at a time (Slurm keeps them so with a license, not ReFrame): every pair that ``sacct`` shows running at the
    same time, e.g. ``jobs 3012 (osu ... @vcluster:fast+openmpi4) and 3013 (...) ran at the same time``.
:func:`main`
    ``python -m netregress_postrun.coverage [--site DIR] --system vcluster [--reservation R] [--nodes L]
    [--exclude L] [--report REPORT.json] [--strict] --wait 30 [-- REFRAME OPTIONS]`` judges only the nodes in scope
    (netregress.scope: the same options as every entry point, or ReFrame's ``-J reservation=...`` after ``--``). A
    node Slurm cannot use is named with the fabrics it serves and left out (``--left-out-file`` lists them for the
    run to exclude), a failure only with ``--strict``; nodes no passing check used are one line per partition and
    fabric. Exit 1 when there is a problem (2 on a usage error, 3 when Slurm did not answer at all).

Slurm is asked through netregress.slurm's injectable *runner*, so tests feed canned output and need no cluster.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path
from typing import Collection, Iterable, Mapping, Sequence

from netregress import scope
from netregress.measure import interconnects, site, slurm
from . import runreport

# --- coverage of a run ----------------------------------------------------------------------------------------------

def covered_nodes(report: Mapping, *, system: str | None = None) -> dict[str, set[str]]:
    """Per partition: the nodes at least one passing test case moved payload over its fabric on (every run of the
    report, retries too; :func:`moved_payload_over_fabric`)."""
    used: dict[str, set[str]] = {}
    for tc in runreport.testcases(report):
        if tc.get('result') != 'pass' or not moved_payload_over_fabric(tc):
            continue
        if system is not None and tc.get('system') not in (system, None):
            continue
        used.setdefault(str(tc.get('partition')), set()).update(runreport.job_nodes(tc))
    return used


def moved_payload_over_fabric(tc: Mapping) -> bool:
    """Whether a test case moved payload between nodes over its interconnect: a fabric spanning nodes, and a
    check that does not measure inside each node (``nr_fabric_payload``; a report without it: yes). Shared memory,
    loopback TCP and the node loopback probe cover no node."""
    if tc.get('nr_fabric_payload') is False:
        return False
    name = tc.get('interconnect')
    if not name:
        return True                     # not one of our checks: nothing to tell it by
    try:
        return interconnects.load().interconnect(str(name)).nodes >= 2
    except interconnects.InterconnectError:
        return False


def uncovered_nodes(report: dict, partition_nodes: dict[str, list[str]], *, system: str | None = None) -> list[str]:
    """Nodes of each partition that no passing test case of ``report`` ran on:
    ``gige4: no passing check moved payload over its fabric there``.

    ``report`` is a ReFrame JSON run report (test cases carry ``system``, ``partition``, ``result`` and
    ``job_nodelist``); ``partition_nodes`` maps ReFrame partition names to their nodes. ``system`` limits the
    test cases to one system (a report normally holds one).
    """
    used = covered_nodes(report, system=system)
    why = left_out_nodes(report)
    problems = []
    for part, nodes in partition_nodes.items():
        for node in nodes:
            if node not in used.get(part, set()):
                problems.append(f'{node}: no passing check moved payload over its fabric there'
                                + (f' (the all-node checks left it out: {why[node]})' if node in why else ''))
    return problems


def left_out_nodes(report: Mapping) -> dict[str, str]:
    """{node: why} for the nodes in scope that an all-node check (links, node probe) left out because Slurm could
    not use them (their ``nodes_left_out``: ``node: why`` each)."""
    out: dict[str, str] = {}
    for tc in runreport.testcases(report):
        for entry in tc.get('nodes_left_out') or []:
            node, _, why = str(entry).partition(': ')
            out.setdefault(node, why or 'unusable')
    return out


def _sacct_time(text: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:                  # Unknown, None: not started or not ended
        return None


def overlapping_jobs(report: Mapping, *, system: str | None = None, runner: slurm.Runner = slurm.run_command,
                     timeout_s: float = slurm.QUERY_TIMEOUT_S) -> list[str]:
    """Pairs of the report's Slurm jobs that ran at the same time, as ``sacct`` saw them (whole seconds: an
    overlap under a second can go unseen). For nodes that share one host's CPUs, where two benchmarks at once
    measure each other."""
    names = {str(tc['jobid']): f'{tc.get("name")} @{tc.get("system")}:{tc.get("partition")}+{tc.get("environ")}'
             for tc in runreport.testcases(report)
             if tc.get('jobid') and tc.get('scheduler') in ('slurm', 'squeue')
             and (system is None or tc.get('system') in (system, None))}
    if not names:
        return []
    out = slurm.query(['sacct', '-X', '-P', '-n', '-j', ','.join(names), '-o', 'JobID,Start,End'], runner, timeout_s)
    spans = []
    for line in out.splitlines():
        fields = line.strip().split('|')
        if len(fields) != 3:
            continue
        start, end = _sacct_time(fields[1]), _sacct_time(fields[2])
        if start and end:
            spans.append((start, end, fields[0]))
    problems, ahead = [], None           # ahead: the job that ends last of those started so far
    for start, end, jid in sorted(spans):
        if ahead and start < ahead[0]:
            problems.append(f'jobs {ahead[1]} ({names.get(ahead[1], "?")}) and {jid} ({names.get(jid, "?")}) ran at '
                            f'the same time ({start:%H:%M:%S}-{min(end, ahead[0]):%H:%M:%S}) on CPUs their nodes '
                            f'share: each measured the other')
        if ahead is None or end > ahead[0]:
            ahead = (end, jid)
    return problems


# --- command line -------------------------------------------------------------------------------------------------

def slurm_names(configs: Iterable[Mapping]) -> dict[str, str]:
    """ReFrame partition name -> Slurm partition name (netregress.slurm.slurm_partition)."""
    return {part['name']: slurm.slurm_partition(part.get('access') or [], part['name']) for part in configs}


def slurm_partitions(system: str) -> dict[str, str]:
    """:func:`slurm_names` of the Slurm partitions of ``system``."""
    return slurm_names(site.slurm_partitions(system))


def shares_host_cpus(configs: Iterable[Mapping]) -> bool:
    """Whether these Slurm partitions' nodes share one host's CPUs (partition extra ``host_cpus``)."""
    return any((p.get('extras') or {}).get('host_cpus') for p in configs)


def by_node(problems: Sequence[str], nodes: Collection[str]) -> tuple[dict[str, str], list[str]]:
    """({node: its problem}, problems naming no node of ``nodes``) of :func:`netregress.slurm.node_problems`'s
    lines (``node: what (state...)``)."""
    named: dict[str, str] = {}
    other = []
    for line in problems:
        node = line.split(':', 1)[0]
        if node in nodes:
            named.setdefault(node, line.split(':', 1)[1].strip())
        else:
            other.append(line)
    return named, other


def unusable_in_scope(where: scope.Scope, nodes: Mapping[str, list[str]], wait_s: float, *,
                      runner: slurm.Runner = slurm.run_command) -> tuple[dict[str, str], list[str]]:
    """({node in scope Slurm cannot use: ``node (fabrics): what (state; reason)``}, problems naming no node, as a
    partition sinfo does not list or Slurm not answering) of the scope's node sets ``nodes``
    (:func:`netregress.scope.node_sets`)."""
    configs = {p['name']: p for p in scope.partition_configs(where)}
    in_scope = {n for members in nodes.values() for n in members}
    found = slurm.node_problems(list(dict.fromkeys(slurm_names(configs[p] for p in nodes).values())), wait_s,
                                runner=runner, only=in_scope, reserved_ok=bool(where.reservation))
    unusable, other = by_node(found, in_scope)
    named = {}
    for node, what in unusable.items():
        fabrics = [f for p, members in nodes.items() if node in members for f in scope.fabrics(configs[p])]
        named[node] = f'{node} ({", ".join(dict.fromkeys(fabrics)) or "no fabric"}): {what}'
    return named, other


def main(argv: Sequence[str] | None = None, *, runner: slurm.Runner = slurm.run_command) -> int:
    """Print the nodes in scope Slurm cannot use (left out, named; a failure with ``--strict``) and, with
    ``--report``, the nodes in scope no passing check used, per partition and fabric; 1 if any problem."""
    ap = argparse.ArgumentParser(prog='python -m netregress_postrun.coverage', description=__doc__.split('\n\n')[0])
    ap.add_argument('--site', help='the site directory (NETREGRESS_SITE; docs/site.md)')
    scope.add_options(ap)
    ap.add_argument('--report', help='ReFrame JSON run report of that system')
    ap.add_argument('--wait', type=float, default=30.0,
                    help='seconds to wait for nodes in passing states (not responding, unknown) (default: 30)')
    ap.add_argument('--strict', action='store_true',
                    help='a node in scope that Slurm cannot use fails the check (default: named and left out)')
    ap.add_argument('--left-out-file', type=Path,
                    help='write the nodes left out (one host list) here, for the run to exclude')
    args, rfm_args = ap.parse_known_args(argv)
    if rfm_args and rfm_args[0] == '--':
        rfm_args = rfm_args[1:]
    elif rfm_args:
        ap.error(f'unrecognized arguments: {" ".join(rfm_args)}')
    if args.site:
        os.environ[site.ENV] = args.site
    try:
        where = scope.from_options(args, rfm_args)
        configs = [p for p in scope.partition_configs(where) if p.get('scheduler') in ('slurm', 'squeue')]
    except (scope.ScopeError, site.SiteError) as err:
        ap.error(str(err))
    parts = slurm_names(configs)
    fabric = {p['name']: ', '.join(scope.fabrics(p)) or 'no fabric' for p in configs}
    label = {p: f'{where.system}:{p} ({fabric[p]})' for p in parts}
    narrowed = bool(where.reservation or where.nodes or where.exclude)
    try:
        nodes = scope.node_sets(where, runner=runner).cover
    except scope.SlurmUnavailable as err:
        print(f'{slurm.STATES_UNKNOWN}: {err}')
        return 3
    except scope.ScopeError as err:
        ap.error(str(err))
    if not parts:
        print(f'coverage: {where.describe()} has no Slurm partitions: nothing to check')
        return 0
    in_scope = {n for part in nodes.values() for n in part}
    unusable, problems = unusable_in_scope(where, nodes, args.wait, runner=runner)
    if any(slurm.STATES_UNKNOWN in p for p in problems):
        print('\n'.join(problems))
        return 3
    if args.strict:
        problems += list(unusable.values())
    else:
        print(''.join(f'{line}: left out\n' for line in unusable.values()), end='')
    for part, members in nodes.items():
        if members and not [n for n in members if n not in unusable]:
            problems.append(f'{label[part]}: no node in scope Slurm can use')
    if args.left_out_file:                # --strict leaves nothing out: the run fails for the node instead
        left_out = [] if args.strict else list(unusable)
        args.left_out_file.write_text(slurm.abbrev(left_out) + '\n' if left_out else '')
    serial = ''
    if args.report:
        try:
            report = runreport.read(args.report)
        except runreport.RunReportError as err:
            print(f'coverage: {err}', file=sys.stderr)
            return 2
        used = covered_nodes(report, system=where.system)
        for part, members in nodes.items():
            missing = [n for n in members if n not in unusable and n not in used.get(part, set())]
            if missing:
                problems.append(f'{label[part]}: no passing check moved payload over {fabric[part]} on '
                                f'{len(missing)} node(s) in scope: {slurm.abbrev(missing)}')
        if shares_host_cpus(configs):
            serial = ', its jobs one at a time'
            try:
                problems += overlapping_jobs(report, system=where.system, runner=runner)
            except slurm.SlurmQueryError as err:
                problems.append(f'jobs of the run: not known whether they ran one at a time: {err}')
    for p in problems:
        print(p)
    if not problems:
        usable = [n for n in in_scope if n not in unusable]
        print(f'coverage: {len(usable)} nodes of {", ".join(label.values())}'
              + (f' in {where.describe()}' if narrowed else '') + ' usable'
              + (' and used by a passing check' if args.report else '') + serial
              + (f'; left out: {slurm.abbrev(list(unusable))}' if unusable else ''))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
