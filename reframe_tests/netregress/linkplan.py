"""The all-pairs link test's plan: rounds of disjoint pairs, and the scripts the job runs to measure them.

:func:`round_robin` pairs the nodes (circle method); :func:`serve_script` is the one job step that starts a server
on every node; :func:`driver_script` is the job script visiting every link, each test a job step on its client
node. ``netregress.allpairs`` describes the method, ``netregress.linkverdict`` reads what the job wrote.
"""
from __future__ import annotations

import os
import shlex
from typing import Mapping, Sequence

from . import provenance
from .base import COUNTERS_FILE

DRIVER = 'allpairs.sh'
SERVE = 'serve.sh'
LINK_DIR = 'links'
TEST_MARK = 'netregress-test:'
#: Runs one task on a named node of the job when the partition has no ``on_named_node`` extra (Slurm).
SLURM_ON_NAMED_NODE = ['srun', '--mpi=none', '--overlap', '--nodes=1', '--ntasks=1', '--nodelist={node}']


# --- pairing -------------------------------------------------------------------------------------------------------

def round_robin(nodes: Sequence[str]) -> list[list[tuple[str, str]]]:
    """Rounds of disjoint pairs covering every pair of ``nodes`` exactly once (circle method).

    The first node stays in place while the others rotate one position per round; position i plays position n-1-i.
    Even N: N-1 rounds of N/2 pairs. Odd N: a placeholder makes it even, so there are N rounds of (N-1)/2 pairs and
    each node sits out (has a bye in) exactly one round. Within a pair the node earlier in ``nodes`` comes first.
    """
    nodes = list(nodes)
    if len(set(nodes)) != len(nodes):
        raise ValueError(f'duplicate node names in {nodes}')
    if len(nodes) < 2:
        return []
    order = {n: i for i, n in enumerate(nodes)}
    circle: list[str | None] = nodes + ([None] if len(nodes) % 2 else [])
    n = len(circle)
    rounds = []
    for _ in range(n - 1):
        pairs = []
        for i in range(n // 2):
            x, y = circle[i], circle[n - 1 - i]
            if x is not None and y is not None:
                pairs.append((x, y) if order[x] < order[y] else (y, x))
        rounds.append(sorted(pairs, key=lambda p: order[p[0]]))
        circle = [circle[0], circle[-1]] + circle[1:-1]
    return rounds


# --- the job's driver script ---------------------------------------------------------------------------------------

def link_tests(a: str, b: str, both_directions: bool) -> list[tuple[str, str, str]]:
    """(kind, client, server) of the tests measuring link (a, b), in the order they run: RTT first (on idle
    queues), then the stream b -> a and, optionally, a -> b (nr-tcptest's client sends to the server)."""
    tests = [('rtt', b, a), ('stream', b, a)]
    if both_directions:
        tests.append(('stream', a, b))
    return tests


def test_tag(kind: str, client: str, server: str, pass_: int = 1) -> str:
    """File name stem of one test's output under ``links/``."""
    return f'{kind}.{client}.{server}.p{pass_}'


def sessions_per_server(rounds: Sequence[Sequence[tuple[str, str]]], both_directions: bool,
                        passes: int = 1) -> dict[str, int]:
    """How many tests each node's server serves over the whole job (it exits after the last one)."""
    count: dict[str, int] = {}
    for pairs in rounds:
        for a, b in pairs:
            for _, _, server in link_tests(a, b, both_directions):
                count[server] = count.get(server, 0) + passes
    return count


def serve_script(kernels_dir: str, iface: str, sessions: Mapping[str, int]) -> str:
    """Run as one task per node: write the node's address on ``iface``, then serve its ``sessions`` link tests
    (a node missing from ``sessions`` serves until it is killed)."""
    lines = [
        '#!/bin/sh',
        "# netregress all-pairs: this node's endpoint, then nr-tcpserver until its last test",
        'node=${SLURMD_NODENAME:-$(hostname)}',
        f'exec > "{LINK_DIR}/server-$node.out" 2>&1',
        f'addr=$(ip -4 -o addr show dev {shlex.quote(iface)} | awk \'{{split($4, a, "/"); print a[1]; exit}}\')',
        'echo "netregress-endpoint: node=$node host=$(hostname) addr=$addr"',
        f'test -n "$addr" || {{ echo "no IPv4 address on {iface} of $node"; exit 1; }}',
        'case $node in',
    ]
    lines += [f'  {shlex.quote(node)}) n={int(n)} ;;' for node, n in sessions.items()]
    lines += [
        '  *) n=0 ;;',
        'esac',
        f'exec {shlex.quote(os.path.join(kernels_dir, "nr-tcpserver"))} -p 0 -v --max-tests "$n"',
        '',
    ]
    return '\n'.join(lines)


def driver_script(rounds: Sequence[Sequence[tuple[str, str]]], *, nodes: Sequence[str], kernels_dir: str,
                  on_named_node: Mapping[str, str], on_every_node: str, stream_opts: Sequence[str],
                  rtt_opts: Sequence[str], both_directions: bool = True, concurrent: bool = False,
                  passes: int = 1, step_timeout_s: int = 60, server_wait_s: int = 10) -> str:
    """The bash script the job runs on its first node.

    ``on_named_node`` maps every node to the command prefix running one task there; ``on_every_node`` runs one
    task on each node of the job. Steps: counter snapshot on every node; one step starting a server on every node
    (``serve.sh``); ``passes`` times over the rounds (in the same order, so a link's passes lie one pass apart),
    per pair the tests of :func:`link_tests`, each a step on its client node bounded by
    ``step_timeout_s`` and reported as a ``netregress-test:`` line with its exit status (``noserver`` when the
    server node never said where it listens); servers stopped; counter snapshot again.
    """
    nodes = list(nodes)
    q = shlex.quote
    nlinks = sum(len(r) for r in rounds)
    lines = [
        '#!/bin/bash',
        f'# netregress all-pairs link test: {len(nodes)} nodes, {nlinks} links in {len(rounds)} rounds, '
        f'{passes} pass(es), pairs {"concurrent" if concurrent else "one after the other"} '
        '(generated by netregress.allpairs)',
        f'K={q(kernels_dir)}',
        f'mkdir -p {LINK_DIR} && rm -f {LINK_DIR}/*',
        '',
        'on_node() {  # NODE COMMAND...: COMMAND as one task on NODE',
        '  local node=$1; shift',
        '  case $node in',
    ]
    for node in nodes:
        lines.append(f'    {q(node)}) timeout -k 5 {int(step_timeout_s)} {on_named_node[node]} "$@" ;;')
    lines += [
        '    *) echo "on_node: $node is not a node of this job" >&2; return 127 ;;',
        '  esac',
        '}',
        'endpoint() {  # NODE: "ADDRESS PORT" of the server on NODE (nothing until it listens)',
        f'  local f={LINK_DIR}/server-$1.out addr port',
        '  addr=$(sed -n \'s/^netregress-endpoint: .* addr=\\([0-9.]*\\)$/\\1/p\' "$f" 2>/dev/null)',
        '  port=$(sed -n \'s/.*listening on port \\[\\([0-9]*\\)\\].*/\\1/p\' "$f" 2>/dev/null | head -1)',
        '  [ -n "$addr" ] && [ -n "$port" ] && echo "$addr $port"',
        '}',
        'measure() {  # PASS KIND CLIENT SERVER OPTIONS...: nr-tcptest on CLIENT against the server on SERVER',
        '  local pass=$1 kind=$2 client=$3 server=$4 ep status; shift 4',
        '  local tag=$kind.$client.$server.p$pass',
        '  ep=$(endpoint "$server")',
        '  if [ -z "$ep" ]; then status=noserver; else',
        f'    on_node "$client" "$K/nr-tcptest" -h "${{ep% *}}" -p "${{ep#* }}" "$@" --json {LINK_DIR}/$tag.json \\',
        f'      > {LINK_DIR}/$tag.out 2>&1',
        '    status=$?',
        '  fi',
        f'  echo "{TEST_MARK} pass=$pass kind=$kind client=$client server=$server status=$status"',
        '}',
        'link() {  # PASS A B: every test of the link between A and B',
    ]
    for kind, client, server in link_tests('$2', '$3', both_directions):
        opts = ' '.join(q(o) for o in (rtt_opts if kind == 'rtt' else stream_opts))
        lines.append(f'  measure "$1" {kind} "{client}" "{server}" {opts}')
    snapshot = 'sh -c ' + q(provenance.snapshot_command('{when}'))
    lines += [
        '}',
        '',
        f': > {COUNTERS_FILE}',
        f'{on_every_node} {snapshot.replace("{when}", "before")} >> {COUNTERS_FILE} 2>&1',
        f'{on_every_node} sh {SERVE} &',
        'SERVERS=$!',
        f'for i in $(seq {10 * int(server_wait_s)}); do',
        '  up=0',
        f'  for n in {" ".join(q(n) for n in nodes)}; do endpoint "$n" > /dev/null && up=$((up + 1)); done',
        f'  [ $up -eq {len(nodes)} ] && break',
        '  kill -0 $SERVERS 2>/dev/null || break',
        '  sleep 0.1',
        'done',
        f'echo "netregress-servers: $up of {len(nodes)} listening"',
    ]
    for pass_ in range(1, passes + 1):
        for index, pairs in enumerate(rounds, start=1):
            lines.append(f'echo "netregress-round: pass {pass_} round {index} '
                         f'{" ".join(f"{a}-{b}" for a, b in pairs)}"')
            if concurrent:
                lines.append('pids=')
                lines += [f'link {pass_} {q(a)} {q(b)} & pids="$pids $!"' for a, b in pairs]
                lines.append('wait $pids')
            else:
                lines += [f'link {pass_} {q(a)} {q(b)}' for a, b in pairs]
    lines += [
        '# each server exits after its last test; one still waiting for a test that failed is stopped',
        f'for i in $(seq {10 * int(server_wait_s)}); do kill -0 $SERVERS 2>/dev/null || break; sleep 0.1; done',
        'kill $SERVERS 2>/dev/null; wait $SERVERS 2>/dev/null',
        f'{on_every_node} {snapshot.replace("{when}", "after")} >> {COUNTERS_FILE} 2>&1',
        'exit 0',
        '',
    ]
    return '\n'.join(lines)
