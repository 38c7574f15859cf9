"""Slurm as the checks see it: which nodes of a partition Slurm cannot use, and the nodes of a partition.

:func:`node_problems`
    Slurm's view (``sinfo``): every node of the given partitions that is down, drained, draining, failed, in an
    unknown state or not responding (state suffix ``*``), e.g. ``fast2: not responding (down*)``. States that a
    healthy node passes through (not responding or unknown right after a restart, rebooting, powering up) are polled
    for at most ``wait_s`` seconds.
:func:`partition_nodes`
    every node of a Slurm partition, in Slurm's order.
:func:`slurm_partition`
    the Slurm partition a ReFrame partition submits to (the ``--partition=`` of its ``access``).

Commands are run through an injectable *runner* (``runner(argv, timeout_s) -> CompletedProcess``), so tests feed
canned ``sinfo`` / ``scontrol`` output and no cluster is needed. Host lists are expanded by ReFrame's own
``nodelist_expand``.
"""
from __future__ import annotations

import subprocess
import time
from typing import Callable, Sequence

from reframe.utility import nodelist_expand

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


# --- host lists and partitions -------------------------------------------------------------------------------------

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
    nodes: list[str] = []
    for expr in compressed:
        for node in query(['scontrol', 'show', 'hostnames', expr], runner, timeout_s).split():
            if node not in nodes:
                nodes.append(node)
    return nodes
