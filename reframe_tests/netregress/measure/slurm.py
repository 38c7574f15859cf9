"""Slurm as the checks see it: which nodes of a partition Slurm cannot use, and the nodes of a partition.

:func:`node_problems`, :func:`unusable_nodes`
    Slurm's view (``sinfo``): every node of the given partitions that is down, drained, draining, failed, in an
    unknown state or not responding (state suffix ``*``), e.g. ``fast2: not responding (down*)``. States that a
    healthy node passes through (not responding or unknown right after a restart, rebooting, powering up) are polled
    for at most ``wait_s`` seconds.
:func:`partition_nodes`, :func:`node_states`
    every node of a Slurm partition, in Slurm's order; its nodes' states in one line.
:func:`slurm_partition`
    the Slurm partition a ReFrame partition submits to (the ``--partition=`` of its ``access``).
:func:`node_scope`, :func:`scoped_nodes`, :func:`allocate_scoped_nodes`
    the nodes a run was limited to by its jobs' Slurm options (a reservation, a node list, exclusions: ReFrame's
    ``-J``, as ci/post-maintenance passes them), so that every all-node check asks for just those Slurm can use,
    and names the others.
:func:`switch_tree`
    Slurm's switch tree (``scontrol show topology``), for the link test's plans.

Commands are run through an injectable *runner* (``runner(argv, timeout_s) -> CompletedProcess``), so tests feed
canned ``sinfo`` / ``scontrol`` output and no cluster is needed. Host lists are expanded by ReFrame's own
``nodelist_expand``.
"""
from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, Collection, Mapping, Sequence

from reframe.utility import nodelist_abbrev, nodelist_expand

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


def run_command(argv: Sequence[str], timeout_s: float,
                env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """Default runner: ``argv`` with captured text output, killed after ``timeout_s``; ``env`` added to ours."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False,
                          env={**os.environ, **env} if env else None)


class SlurmQueryError(Exception):
    """sinfo/scontrol failed, timed out or is not installed; the message says which and why."""


def query(argv: Sequence[str], runner: Runner, timeout_s: float) -> str:
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
    text = query(['sinfo', '-h', '-N', '-p', ','.join(partitions), '-o', '%P|%N|%T|%E'], runner, timeout_s)
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


def _problems_once(partitions: Sequence[str], runner: Runner, timeout_s: float,
                   only: Collection[str] | None = None, reserved_ok: bool = False
                   ) -> tuple[list[tuple[str | None, str]], bool]:
    """One sinfo pass: ((node or None, problem) pairs, whether every problem may still pass by itself); ``only``:
    judge just these nodes; ``reserved_ok``: a maintenance reservation's state is no problem (the jobs run inside
    it)."""
    try:
        rows = _sinfo_nodes(partitions, runner, timeout_s)
    except SlurmQueryError as err:
        return [(None, f'partitions {", ".join(partitions)}: {STATES_UNKNOWN}: {err}')], False
    problems: list[tuple[str | None, str]] = []
    transient = True
    seen: set[str] = set()
    for part in partitions:
        mine = [r for r in rows if r[0] == part]
        if not mine:
            problems.append((None, f'partition {part}: sinfo lists no nodes (no such partition, or it is empty)'))
            transient = False
        for _, node, state, reason in mine:
            if only is not None and node not in only:
                continue
            if reserved_ok:
                state = '+'.join(w for w in state.split('+') if split_state(w)[0] != 'maint') or 'idle'
            what, passing = describe_state(state)
            if what is None or node in seen:
                continue
            seen.add(node)
            why = f'; reason: {reason}' if reason and reason.lower() != 'not responding' else ''
            problems.append((node, f'{node}: {what} ({state}{why})'))
            transient = transient and passing
    return problems, transient and bool(problems)


def node_problems(partitions: list[str], wait_s: float, *, runner: Runner = run_command,
                  clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                  poll_s: float = POLL_S, query_timeout_s: float = QUERY_TIMEOUT_S,
                  only: Collection[str] | None = None, reserved_ok: bool = False) -> list[str]:
    """Nodes of ``partitions`` that Slurm cannot run jobs on, one message each (empty: all usable).

    A node down, drained, draining, failed, in an unknown state or not responding (``*``) is named with its sinfo
    state and reason, e.g. ``fast2: not responding (down*)``. While every problem is one a healthy node passes
    through (not responding, unknown, rebooting, powering up), sinfo is asked again every ``poll_s`` seconds, but
    never after ``wait_s`` seconds from the start; a query started after that is not made, and each query's own
    timeout is cut to the time left (at least one second), so the call returns within about ``wait_s +
    query_timeout_s``. When sinfo itself fails or does not answer, that is the one message. ``only`` and
    ``reserved_ok``: see :func:`_problems_once` (a run scoped to some nodes, or inside a reservation).
    """
    return [text for _, text in _node_problems(partitions, wait_s, runner=runner, clock=clock, sleep=sleep,
                                                poll_s=poll_s, query_timeout_s=query_timeout_s, only=only,
                                                reserved_ok=reserved_ok)]


def _node_problems(partitions: list[str], wait_s: float, *, runner: Runner, clock: Callable[[], float],
                   sleep: Callable[[float], None], poll_s: float, query_timeout_s: float,
                   only: Collection[str] | None, reserved_ok: bool) -> list[tuple[str | None, str]]:
    if not partitions:
        return []
    deadline = clock() + max(0.0, wait_s)
    timeout_s = query_timeout_s
    while True:
        problems, transient = _problems_once(partitions, runner, timeout_s, only, reserved_ok)
        left = deadline - clock()
        if not transient or left <= 0:
            return problems
        sleep(min(poll_s, left))
        left = deadline - clock()
        if left <= 0:
            return problems
        timeout_s = max(1.0, min(query_timeout_s, left))


def unusable_nodes(partitions: list[str], wait_s: float, *, runner: Runner = run_command,
                   only: Collection[str] | None = None, reserved_ok: bool = False,
                   **polling) -> tuple[dict[str, str], list[str]]:
    """({node: why Slurm cannot use it}, problems that name no node, as sinfo not answering): what
    :func:`node_problems` finds, by node."""
    found = _node_problems(partitions, wait_s, runner=runner, only=only, reserved_ok=reserved_ok,
                           clock=polling.get('clock', time.monotonic), sleep=polling.get('sleep', time.sleep),
                           poll_s=polling.get('poll_s', POLL_S),
                           query_timeout_s=polling.get('query_timeout_s', QUERY_TIMEOUT_S))
    return {node: text for node, text in found if node}, [text for node, text in found if not node]


# --- host lists and partitions -------------------------------------------------------------------------------------

def abbrev(nodes: Sequence[str]) -> str:
    """A Slurm host list of ``nodes`` (``fast1, fast2, gige3`` -> ``fast[1-2],gige3``); '' for none."""
    return nodelist_abbrev(list(nodes)) if nodes else ''


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm host list (``fast[1-3,5],gige1`` -> fast1, fast2, fast3, fast5, gige1) without Slurm."""
    return list(nodelist_expand(expr))


def slurm_partition(access: Sequence[str], name: str) -> str:
    """The Slurm partition a ReFrame partition submits to: the ``--partition=X``, ``--partition X`` or ``-p X`` of
    its ``access`` options; ``name`` (the ReFrame partition's) where access names none."""
    access = list(access or [])
    for i, opt in enumerate(access):
        if opt.startswith('--partition='):
            return opt.split('=', 1)[1]
        if opt in ('-p', '--partition') and i + 1 < len(access):
            return access[i + 1]
    return name


def partition_nodes(partition: str, *, runner: Runner = run_command,
                    timeout_s: float = QUERY_TIMEOUT_S) -> list[str]:
    """Every node of Slurm partition ``partition`` in Slurm's order (``sinfo %N`` expanded by ``scontrol``).

    :class:`SlurmQueryError` when Slurm cannot be asked or the partition has no nodes.
    """
    compressed = query(['sinfo', '-h', '-p', partition, '-o', '%N'], runner, timeout_s).split()
    if not compressed:
        raise SlurmQueryError(f'sinfo lists no nodes in partition {partition} (no such partition, or it is empty)')
    nodes: dict[str, None] = {}           # ordered and unique: a list's `in` made 10,000 nodes take 1.3 s
    for expr in compressed:
        nodes.update(dict.fromkeys(query(['scontrol', 'show', 'hostnames', expr], runner, timeout_s).split()))
    return list(nodes)


def node_states(partition: str, *, runner: Runner = run_command, timeout_s: float = QUERY_TIMEOUT_S) -> str:
    """``partition P nodes STATE:NODES, ...`` (``sinfo``), what a job that never started is reported with; where
    Slurm cannot be asked, why."""
    try:
        states = query(['sinfo', '-h', '-p', partition, '-o', '%T:%N'], runner, timeout_s).split()
    except SlurmQueryError as err:
        return f'partition {partition}: node states unknown ({err})'
    return f'partition {partition} nodes {", ".join(states) or "none"}'


# --- the nodes a job may use: what the run was scoped to (reservation, node list, exclusions) ----------------------

@dataclass(frozen=True)
class NodeScope:
    """The nodes a run asked its jobs to use, from their Slurm options (ReFrame's ``-J``, ci/post-maintenance)."""
    reservation: str | None = None
    nodelist: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.reservation or self.nodelist or self.exclude)

    def describe(self) -> str:
        what = ([f'reservation {self.reservation}'] if self.reservation else []) + \
               ([f'nodes {",".join(self.nodelist)}'] if self.nodelist else []) + \
               ([f'excluding {",".join(self.exclude)}'] if self.exclude else [])
        return ', '.join(what) or 'the whole partition'


_SCOPE_KEYS = {'reservation': 'reservation', 'nodelist': 'nodelist', 'w': 'nodelist', 'exclude': 'exclude',
               'x': 'exclude'}


def node_scope(options: Sequence[str]) -> NodeScope:
    """The scope named by Slurm job options as ReFrame passes them (``reservation=R``, ``--reservation=R``,
    ``--nodelist=L``, ``-w L``, ``exclude=L``, ``-x L``; a later option of a kind replaces an earlier one)."""
    found: dict[str, str] = {}
    for opt in options or []:
        words = str(opt).split(None, 1)
        key, sep, value = words[0].lstrip('-').partition('=')
        if not sep and len(words) == 2:
            value = words[1].strip()
        kind = _SCOPE_KEYS.get(key)
        if kind and value:
            found[kind] = value
    return NodeScope(reservation=found.get('reservation'),
                     nodelist=tuple(expand_hostlist(found['nodelist'])) if 'nodelist' in found else (),
                     exclude=tuple(expand_hostlist(found['exclude'])) if 'exclude' in found else ())


@dataclass(frozen=True)
class Reservation:
    """A Slurm reservation as ``scontrol show reservation`` describes it."""
    nodes: list[str]
    #: its ``Users=`` as Slurm lists them (``a,b`` admits those only, ``-a,-b`` everyone but them); () names none
    users: tuple[str, ...] = ()

    def refuses(self, users: Sequence[str]) -> list[str]:
        """Which of ``users`` it refuses: none when it names no users (its accounts decide, which only sbatch
        can tell)."""
        if self.users and all(u.startswith('-') for u in self.users):
            return [u for u in users if f'-{u}' in self.users]
        return [u for u in users if self.users and u not in self.users]


def reservation(name: str, *, runner: Runner = run_command, timeout_s: float = QUERY_TIMEOUT_S) -> Reservation:
    """Slurm reservation ``name``; :class:`SlurmQueryError` when Slurm cannot say or the reservation holds no
    nodes."""
    text = query(['scontrol', 'show', 'reservation', name], runner, timeout_s)
    m = re.search(r'\bNodes=(\S+)', text)
    if not m or m.group(1) == '(null)':
        raise SlurmQueryError(f'reservation {name} holds no nodes (scontrol show reservation {name})')
    users = re.search(r'\bUsers=(\S+)', text)
    return Reservation(expand_hostlist(m.group(1)),
                       tuple(users.group(1).split(',')) if users and users.group(1) != '(null)' else ())


def reservation_nodes(name: str, *, runner: Runner = run_command, timeout_s: float = QUERY_TIMEOUT_S) -> list[str]:
    """The nodes of Slurm reservation ``name`` (:func:`reservation`)."""
    return reservation(name, runner=runner, timeout_s=timeout_s).nodes


def scoped_nodes(partition_nodes_: Sequence[str], scope: NodeScope, *, runner: Runner = run_command) -> list[str]:
    """The nodes of a partition (``partition_nodes_``, in Slurm's order) a run scoped by ``scope`` may use."""
    nodes = list(partition_nodes_)
    if scope.reservation:
        inside = set(reservation_nodes(scope.reservation, runner=runner))
        nodes = [n for n in nodes if n in inside]
    if scope.nodelist:
        nodes = [n for n in nodes if n in scope.nodelist]
    return [n for n in nodes if n not in scope.exclude]


def allocate_scoped_nodes(check, wait_s: float, *, runner: Runner = run_command) -> tuple[list[str], dict[str, str]]:
    """The nodes an all-node check runs on: every node of its Slurm partition that the run's scope allows
    (:func:`node_scope` of the job's ``-J`` options) and Slurm can use, asked for by name. Returns (the nodes in
    Slurm's order, {node in scope left out: why}): a node that is down, drained or not responding is left out and
    named, so that the check measures the rest and says which it could not. Sets the job's node options.
    ``SanityError`` naming the partition and scope when Slurm cannot say."""
    from reframe.core.exceptions import SanityError
    part = check.current_partition
    slurm_part = slurm_partition(part.access, part.name)
    scope = node_scope([*check.job.cli_options, *check.job.options])
    where = f'partition {slurm_part}' + (f' ({scope.describe()})' if scope else '')
    try:
        nodes = scoped_nodes(partition_nodes(slurm_part, runner=runner), scope, runner=runner)
    except SlurmQueryError as err:
        raise SanityError(f'{where}: {err}') from None
    left_out, unknown = unusable_nodes([slurm_part], wait_s, runner=runner, only=set(nodes),
                                       reserved_ok=bool(scope.reservation))
    if unknown:
        raise SanityError(f'{where}: {"; ".join(unknown)}')
    nodes = [n for n in nodes if n not in left_out]
    if nodes:
        # a host list, not every name: 10,000 nodes are a line of 70 KB in the job script, a partition's ranges a few
        check.job.options += [f'--nodes={len(nodes)}', f'--nodelist={abbrev(nodes)}']
    return nodes, left_out


def switch_tree(*, runner: Runner = run_command, timeout_s: float = QUERY_TIMEOUT_S) -> str:
    """Slurm's switch tree as ``scontrol show topology`` prints it (netregress.measure.linkplan.parse_topology reads
    it); :class:`SlurmQueryError` when Slurm cannot say or has none (no TopologyPlugin=topology/tree)."""
    text = query(['scontrol', 'show', 'topology'], runner, timeout_s)
    if not re.search(r'\bSwitchName=\S+.*\bNodes=(?!\(null\))\S+', text):
        raise SlurmQueryError('Slurm knows no switch tree (scontrol show topology lists no leaf switch; '
                              'TopologyPlugin=topology/tree and topology.conf)')
    return text
