"""Node coverage of a validation run: which nodes Slurm cannot use, and which nodes no passing check used.

A post-maintenance run proves a partition only for the nodes its checks ran on. ReFrame's flexible node allocation
and Slurm's scheduling silently work around a node that is down, drained or not responding, so a run can pass while
a node was never touched. This module names those nodes:

:func:`node_problems`
    Slurm's view (``sinfo``): every node of the given partitions that is down, drained, draining, failed, in an
    unknown state or not responding (state suffix ``*``), e.g. ``fast2: not responding (down*)``. States that a
    healthy node passes through (not responding or unknown right after a restart, rebooting, powering up) are polled
    for at most ``wait_s`` seconds.
:func:`uncovered_nodes`
    the run's view (a ReFrame JSON run report): every node of a partition that no passing test case ran on, e.g.
    ``gige4: used by no passing check``.
:func:`overlapping_jobs`
    where the nodes share one host's CPUs (the vcluster: partition extra ``host_cpus``), the run's jobs must have run
    one at a time (Slurm keeps them so with a license, not ReFrame): every pair that ``sacct`` shows running at the
    same time, e.g. ``jobs 3012 (osu ... @vcluster:fast+openmpi4) and 3013 (...) ran at the same time``.
:func:`main`
    ``python -m netregress.coverage --system vcluster --report REPORT.json --wait 30`` prints every kind of problem
    and exits 1 when there is any (2 on a usage error, 3 when Slurm did not answer at all).

Commands are run through an injectable *runner* (``runner(argv, timeout_s) -> CompletedProcess``), so tests feed
canned ``sinfo`` / ``scontrol`` output and no cluster is needed.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import re
import subprocess
import sys
import time
from typing import Callable, Iterable, Mapping, Sequence

Runner = Callable[[Sequence[str], float], subprocess.CompletedProcess]

#: Seconds one ``sinfo`` / ``scontrol`` call may take (a dead slurmctld otherwise blocks for MessageTimeout x retries).
QUERY_TIMEOUT_S = 10.0
#: Seconds between two polls while a node is in a transient state.
POLL_S = 2.0

# Base states (sinfo %T, lower case, suffix flags removed) that make a node unusable, and how to name them.
_BAD_STATES = {
    'down': 'down',
    'drained': 'drained',
    'draining': 'draining',
    'drain': 'drained',
    'fail': 'failed',
    'failing': 'failing',
    'unknown': 'state unknown',
    'unk': 'state unknown',
    'inval': 'invalid registration',
    'future': 'not yet in service (future)',
    'reboot': 'rebooting',
    'reboot_issued': 'rebooting',
    'reboot_requested': 'reboot requested',
    'maint': 'in a maintenance reservation',
    'no_respond': 'not responding',
}
# Base states a healthy node passes through: worth polling for.
_TRANSIENT_STATES = {'unknown', 'unk', 'reboot', 'reboot_issued'}
# Suffix flags of sinfo %T (man sinfo, NODE STATE CODES) that make a node unusable for now; '*' is transient
# (slurmd restarting), '#'/'^'/'@' are power-up and reboot steps. '~' (powered off, resumed on demand), '%', '!'
# (power saving), '-' (planned) and '$' alone are not problems.
_FLAG_PROBLEMS = {'*': 'not responding', '#': 'powering up', '^': 'rebooting', '@': 'reboot pending'}
_FLAGS = '*~#%!$@^-'


def run_command(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess:
    """Default runner: ``argv`` with captured text output, killed after ``timeout_s``."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)


class SlurmQueryError(Exception):
    """sinfo/scontrol failed, timed out or is not installed; the message says which and why."""


def _query(argv: Sequence[str], runner: Runner, timeout_s: float) -> str:
    """stdout of ``argv``; :class:`SlurmQueryError` naming the command on any failure."""
    name = argv[0]
    try:
        out = runner(argv, timeout_s)
    except subprocess.TimeoutExpired:
        raise SlurmQueryError(f'{name} did not answer within {timeout_s:g} s (slurmctld down or unreachable?): '
                              f'{" ".join(argv)}') from None
    except FileNotFoundError:
        raise SlurmQueryError(f'{name} not found: Slurm client commands are not installed or not on PATH') from None
    except OSError as err:
        raise SlurmQueryError(f'{name} could not run: {err}') from None
    if out.returncode != 0:
        detail = (out.stderr or out.stdout or '').strip().splitlines()
        raise SlurmQueryError(f'{name} failed (exit {out.returncode}): {detail[-1] if detail else "no message"}')
    return out.stdout or ''


def split_state(state: str) -> tuple[str, str]:
    """``'down*'`` -> ``('down', '*')``; ``'mixed-'`` -> ``('mixed', '-')``; compound ``'idle+drain'`` stays."""
    state = state.strip().lower()
    base = state.rstrip(_FLAGS)
    return base, state[len(base):]


def describe_state(state: str) -> tuple[str | None, bool]:
    """What makes a node in sinfo state ``state`` (``%T``) unusable (None: nothing), and whether that may pass by
    itself (a restarting slurmd, a reboot) so that waiting is worth it.

    Compound states (``idle+drain``, ``down+drain``) are judged by every part. ``down*`` is a node whose slurmd
    stopped answering: it is named "not responding" (the cause; Slurm set it down for that) and counts as
    passing, since with ``ReturnToService`` it comes back once slurmd answers again.
    """
    base, flags = split_state(state)
    bad = [w for w in base.split('+') if w in _BAD_STATES]
    causes = [_FLAG_PROBLEMS[f] for f in flags if f in _FLAG_PROBLEMS]
    if '*' in flags:
        bad = [w for w in bad if w != 'down']       # down because it does not respond: one cause, named once
    for word in bad:
        if _BAD_STATES[word] not in causes:
            causes.append(_BAD_STATES[word])
    if not causes:
        return None, False
    return ', '.join(causes), all(w in _TRANSIENT_STATES for w in bad)


def _sinfo_nodes(partitions: Sequence[str], runner: Runner, timeout_s: float) -> list[tuple[str, str, str, str]]:
    """(partition, node, state, reason) for every node of ``partitions`` (one ``sinfo -N`` call)."""
    text = _query(['sinfo', '-h', '-N', '-p', ','.join(partitions), '-o', '%P|%N|%T|%E'], runner, timeout_s)
    rows = []
    for line in text.splitlines():
        parts = line.split('|', 3)
        if len(parts) < 3:
            continue
        part, node, state = (p.strip() for p in parts[:3])
        reason = parts[3].strip() if len(parts) > 3 else ''
        rows.append((part.rstrip('*'), node, state, '' if reason.lower() in ('none', '(null)') else reason))
    return rows


#: What a problem says when Slurm did not answer at all (main exits 3 then: tools/validate runs nothing there).
STATES_UNKNOWN = 'node states unknown'


def _problems_once(partitions: Sequence[str], runner: Runner, timeout_s: float) -> tuple[list[str], bool]:
    """One sinfo pass: (problems, whether every problem may still pass by itself)."""
    try:
        rows = _sinfo_nodes(partitions, runner, timeout_s)
    except SlurmQueryError as err:
        return [f'partitions {", ".join(partitions)}: {STATES_UNKNOWN}: {err}'], False
    problems: list[str] = []
    transient = True
    seen: set[str] = set()
    for part in partitions:
        mine = [r for r in rows if r[0] == part]
        if not mine:
            problems.append(f'partition {part}: sinfo lists no nodes (no such partition, or it is empty)')
            transient = False
        for _, node, state, reason in mine:
            what, passing = describe_state(state)
            if what is None or node in seen:
                continue
            seen.add(node)
            why = f'; reason: {reason}' if reason and reason.lower() != 'not responding' else ''
            problems.append(f'{node}: {what} ({state}{why})')
            transient = transient and passing
    return problems, transient and bool(problems)


def node_problems(partitions: list[str], wait_s: float, *, runner: Runner = run_command,
                  clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                  poll_s: float = POLL_S, query_timeout_s: float = QUERY_TIMEOUT_S) -> list[str]:
    """Nodes of ``partitions`` that Slurm cannot run jobs on, one message each (empty: all usable).

    A node down, drained, draining, failed, in an unknown state or not responding (``*``) is named with its sinfo
    state and reason, e.g. ``fast2: not responding (down*)``. While every problem is one a healthy node passes
    through (not responding, unknown, rebooting, powering up), sinfo is asked again every ``poll_s`` seconds, but
    never after ``wait_s`` seconds from the start; a query started after that is not made, and each query's own
    timeout is cut to the time left (at least one second), so the call returns within about ``wait_s +
    query_timeout_s``. When sinfo itself fails or does not answer, that is the one message.
    """
    if not partitions:
        return []
    deadline = clock() + max(0.0, wait_s)
    timeout_s = query_timeout_s
    while True:
        problems, transient = _problems_once(partitions, runner, timeout_s)
        left = deadline - clock()
        if not transient or left <= 0:
            return problems
        sleep(min(poll_s, left))
        left = deadline - clock()
        if left <= 0:
            return problems
        timeout_s = max(1.0, min(query_timeout_s, left))


# --- host lists ---------------------------------------------------------------------------------------------------

_BRACKET = re.compile(r'^(.*?)\[([^\]]+)\](.*)$')


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm host list (``fast[1-3,5],gige1`` -> fast1, fast2, fast3, fast5, gige1) without Slurm.

    Handles zero-padded ranges (``n[001-003]``) and several bracket groups per name; for lists from a live
    cluster prefer :func:`partition_nodes` (``scontrol show hostnames``), which knows every corner of the syntax.
    """
    names: list[str] = []
    for item in _split_top(expr):
        names += _expand_one(item)
    return names


def _split_top(expr: str) -> list[str]:
    items, depth, cur = [], 0, ''
    for ch in expr.strip():
        if ch == '[':
            depth += 1
        elif ch == ']':
            depth -= 1
        if ch == ',' and depth == 0:
            items.append(cur)
            cur = ''
        else:
            cur += ch
    items.append(cur)
    return [i.strip() for i in items if i.strip()]


def _expand_one(item: str) -> list[str]:
    m = _BRACKET.match(item)
    if not m:
        return [item]
    head, body, tail = m.groups()
    out = []
    for rng in body.split(','):
        lo, _, hi = rng.partition('-')
        if not hi:
            values = [lo]
        else:
            width = len(lo) if lo.startswith('0') else 0
            values = [str(i).zfill(width) for i in range(int(lo), int(hi) + 1)]
        for v in values:
            out += [head + v + rest for rest in _expand_one(tail)] if '[' in tail else [head + v + tail]
    return out


def partition_nodes(partition: str, *, runner: Runner = run_command,
                    timeout_s: float = QUERY_TIMEOUT_S) -> list[str]:
    """Every node of Slurm partition ``partition`` in Slurm's order (``sinfo %N`` expanded by ``scontrol``).

    :class:`SlurmQueryError` when Slurm cannot be asked or the partition has no nodes.
    """
    compressed = _query(['sinfo', '-h', '-p', partition, '-o', '%N'], runner, timeout_s).split()
    if not compressed:
        raise SlurmQueryError(f'sinfo lists no nodes in partition {partition} (no such partition, or it is empty)')
    nodes: list[str] = []
    for expr in compressed:
        for node in _query(['scontrol', 'show', 'hostnames', expr], runner, timeout_s).split():
            if node not in nodes:
                nodes.append(node)
    return nodes


# --- coverage of a run ----------------------------------------------------------------------------------------------

def _testcases(report: Mapping) -> Iterable[Mapping]:
    for run in report.get('runs') or []:
        yield from run.get('testcases') or []


def _nodelist(tc: Mapping) -> list[str]:
    raw = tc.get('job_nodelist', tc.get('nodelist'))
    if isinstance(raw, str):
        return expand_hostlist(raw)
    if isinstance(raw, (list, tuple)):
        return [str(n) for n in raw]
    return []


def covered_nodes(report: Mapping, *, system: str | None = None) -> dict[str, set[str]]:
    """Per partition: the nodes at least one passing test case ran on (every run of the report, retries too)."""
    used: dict[str, set[str]] = {}
    for tc in _testcases(report):
        if tc.get('result') != 'pass':
            continue
        if system is not None and tc.get('system') not in (system, None):
            continue
        used.setdefault(str(tc.get('partition')), set()).update(_nodelist(tc))
    return used


def uncovered_nodes(report: dict, partition_nodes: dict[str, list[str]], *, system: str | None = None) -> list[str]:
    """Nodes of each partition that no passing test case of ``report`` ran on: ``gige4: used by no passing check``.

    ``report`` is a ReFrame JSON run report (test cases carry ``system``, ``partition``, ``result`` and
    ``job_nodelist``); ``partition_nodes`` maps ReFrame partition names to their nodes. ``system`` limits the
    test cases to one system (a report normally holds one).
    """
    used = covered_nodes(report, system=system)
    problems = []
    for part, nodes in partition_nodes.items():
        for node in nodes:
            if node not in used.get(part, set()):
                problems.append(f'{node}: used by no passing check')
    return problems


def _sacct_time(text: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:                  # Unknown, None: not started or not ended
        return None


def overlapping_jobs(report: Mapping, *, system: str | None = None, runner: Runner = run_command,
                     timeout_s: float = QUERY_TIMEOUT_S) -> list[str]:
    """Pairs of the report's Slurm jobs that ran at the same time, as ``sacct`` saw them (whole seconds: an
    overlap under a second can go unseen). For nodes that share one host's CPUs, where two benchmarks at once
    measure each other."""
    names = {str(tc['jobid']): f'{tc.get("name")} @{tc.get("system")}:{tc.get("partition")}+{tc.get("environ")}'
             for tc in _testcases(report)
             if tc.get('jobid') and tc.get('scheduler') in ('slurm', 'squeue')
             and (system is None or tc.get('system') in (system, None))}
    if not names:
        return []
    out = _query(['sacct', '-X', '-P', '-n', '-j', ','.join(names), '-o', 'JobID,Start,End'], runner, timeout_s)
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

def slurm_partition_configs(system: str, settings_path: str | None = None) -> list[Mapping]:
    """The Slurm partitions of ``system`` in ``config/settings.py``."""
    from . import paths
    path = settings_path or str(paths.config_dir() / 'settings.py')
    spec = importlib.util.spec_from_file_location('netregress_settings', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for sysconf in module.site_configuration['systems']:
        if sysconf['name'] == system:
            return [p for p in sysconf['partitions'] if p.get('scheduler') in ('slurm', 'squeue')]
    raise SystemExit(f'coverage: system {system!r} is not defined in {path}')


def slurm_names(configs: Iterable[Mapping]) -> dict[str, str]:
    """ReFrame partition name -> Slurm partition name (the ``--partition=`` of ``access``; the ReFrame name where
    access names none)."""
    out = {}
    for part in configs:
        names = [a.split('=', 1)[1] for a in part.get('access', []) if a.startswith('--partition=')]
        out[part['name']] = names[0] if names else part['name']
    return out


def slurm_partitions(system: str, settings_path: str | None = None) -> dict[str, str]:
    """:func:`slurm_names` of the Slurm partitions of ``system`` in ``config/settings.py``."""
    return slurm_names(slurm_partition_configs(system, settings_path))


def shares_host_cpus(configs: Iterable[Mapping]) -> bool:
    """Whether these Slurm partitions' nodes share one host's CPUs (partition extra ``host_cpus``)."""
    return any((p.get('extras') or {}).get('host_cpus') for p in configs)


def main(argv: Sequence[str] | None = None, *, runner: Runner = run_command) -> int:
    """Print the nodes Slurm cannot use and, with ``--report``, the nodes no passing check used; 1 if any."""
    ap = argparse.ArgumentParser(prog='python -m netregress.coverage', description=__doc__.split('\n\n')[0])
    ap.add_argument('--system', default='vcluster', help='system in config/settings.py (default: vcluster)')
    ap.add_argument('--report', help='ReFrame JSON run report of that system')
    ap.add_argument('--wait', type=float, default=30.0,
                    help='seconds to wait for nodes in passing states (not responding, unknown) (default: 30)')
    ap.add_argument('--partition', action='append', default=None,
                    help='ReFrame partition to check (repeatable; default: every Slurm partition of the system)')
    args = ap.parse_args(argv)

    configs = slurm_partition_configs(args.system)
    parts = slurm_names(configs)
    if args.partition:
        unknown = [p for p in args.partition if p not in parts]
        if unknown:
            ap.error(f'unknown partition(s) {", ".join(unknown)} of {args.system} (have: {", ".join(parts)})')
        parts = {p: parts[p] for p in args.partition}
    if not parts:
        print(f'coverage: system {args.system} has no Slurm partitions: nothing to check')
        return 0
    problems = node_problems(list(dict.fromkeys(parts.values())), args.wait, runner=runner)
    nodes: dict[str, list[str]] = {}
    serial = ''
    if args.report:
        try:
            with open(args.report) as fp:
                report = json.load(fp)
        except (OSError, json.JSONDecodeError) as err:
            print(f'coverage: cannot read report {args.report}: {err}', file=sys.stderr)
            return 2
        for rfm_part, slurm_part in parts.items():
            try:
                nodes[rfm_part] = partition_nodes(slurm_part, runner=runner)
            except SlurmQueryError as err:
                problems.append(f'partition {rfm_part}: node list unknown: {err}')
        problems += [p for p in uncovered_nodes(report, nodes, system=args.system) if p not in problems]
        if shares_host_cpus(configs):
            serial = ', its jobs one at a time'
            try:
                problems += overlapping_jobs(report, system=args.system, runner=runner)
            except SlurmQueryError as err:
                problems.append(f'jobs of the run: not known whether they ran one at a time: {err}')
    for p in problems:
        print(p)
    if not problems:
        counted = f'{sum(map(len, nodes.values()))} nodes' if nodes else 'every node'
        print(f'coverage: {counted} of {", ".join(parts)} usable'
              + (' and used by a passing check' if args.report else '') + serial)
    if any(STATES_UNKNOWN in p for p in problems):
        return 3
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
