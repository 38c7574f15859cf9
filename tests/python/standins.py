"""Stand-ins for the commands the tools call, on PATH, for the tests that drive the tools as a centre does.

* :class:`Cluster`: ``sinfo`` and ``scontrol`` answering for a Slurm cluster of any size (partitions, node states
  with reasons, reservations, the switch tree) from files :meth:`Cluster.install` writes beside them.
* :data:`REFRAME`: ReFrame's run, writing a given report where ``--report-file`` says and storing it in the
  results database as ReFrame would (:func:`install_reframe`).
* :data:`LMOD`: a site's Lmod as ReFrame's ``lmod`` modules system asks it (``$LMOD_CMD``): its version, and
  Python code that changes nothing for a load (:func:`install_lmod`).

Plain ``sh`` and ``awk``, so that any user the test runs a tool as (``nobody``) can run them, and a 10,000-node
cluster costs no more than a 4-node one per call. What the Slurm ones answer, as Slurm does::

    sinfo -h -p PART -o %N                      one host list per state group (the usable nodes, then the drained)
    sinfo -h -p PART -o %T:%N                   the same groups with their state (idle:n[1-3] drained:n4)
    sinfo -h -o %R                              the partitions
    sinfo -h -N -p PART[,PART] -o '%P|%N|%T|%E' a node a line: partition, node, state, reason
    scontrol show hostnames LIST                a node a line (the lists sinfo printed)
    scontrol show reservation NAME              ReservationName=... Nodes=... NodeCnt=... Users=...
    scontrol show topology                      SwitchName=... Nodes=... (leaves), SwitchName=... Switches=... (spines)

Anything else exits 1 with Slurm's kind of message (an unknown partition or reservation, no switch tree).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from netregress.measure import slurm

SINFO = r'''#!/bin/sh
# sinfo for the cluster in $(dirname $0)/slurm (tests/python/standins.py)
data=$(dirname "$0")/slurm
while [ $# -gt 0 ]; do case $1 in -p) parts=$2 ;; -N) rows=1 ;; -o) format=$2 ;; esac; shift; done
[ "${format:-}" = %R ] && { cat "$data/partitions"; exit 0; }
for part in $(echo "${parts:-}" | tr , ' '); do
  [ -f "$data/$part.rows" ] || { echo "sinfo: error: invalid partition specified: $part" >&2; exit 1; }
  if [ -n "${rows:-}" ]; then cat "$data/$part.rows"
  elif [ "${format:-}" = %T:%N ]; then cat "$data/$part.lists"
  else cut -d: -f2- "$data/$part.lists"; fi
done
'''
SCONTROL = r'''#!/bin/sh
# scontrol show hostnames|reservation|topology for the cluster in $(dirname $0)/slurm (tests/python/standins.py)
data=$(dirname "$0")/slurm
[ "${1:-}" = show ] || { echo "scontrol: fake: only show" >&2; exit 1; }
case ${2:-} in
  hostnames) awk -F'\t' -v e="${3:-}" '$1 == e { n = split($2, a, " "); for (i = 1; i <= n; i++) print a[i]; f = 1 }
                END { if (!f) { print "scontrol: error: unknown host list " e > "/dev/stderr"; exit 1 } }' \
               "$data/hostnames" ;;
  reservation) [ -f "$data/reservation.${3:-}" ] || { echo "Reservation ${3:-} not found" >&2; exit 1; }
               cat "$data/reservation.$3" ;;
  topology) [ -f "$data/topology" ] || { echo "No topology information available" >&2; exit 1; }
            cat "$data/topology" ;;
  *) echo "scontrol: fake: cannot show ${2:-}" >&2; exit 1 ;;
esac
'''


@dataclass(frozen=True)
class Cluster:
    """What the stand-ins answer: Slurm partitions and their nodes in Slurm's order, nodes drained with a reason,
    reservations (nodes, and the users they admit: () for ``Users=(null)``), and the switch tree (leaf switch ->
    its nodes, under ``spines`` spine switches that connect every leaf; none: Slurm knows no tree)."""
    partitions: Mapping[str, Sequence[str]]
    drained: Mapping[str, str] = field(default_factory=dict)
    reservations: Mapping[str, Sequence[str]] = field(default_factory=dict)
    reservation_users: Mapping[str, Sequence[str]] = field(default_factory=dict)
    leaves: Mapping[str, Sequence[str]] = field(default_factory=dict)
    spines: int = 2

    def but(self, **changes) -> Cluster:
        """This cluster with ``changes`` (e.g. ``drained={'gige3': 'bad cable'}``)."""
        return dataclasses.replace(self, **changes)

    def install(self, bin_dir: Path) -> Path:
        """``sinfo`` and ``scontrol`` in ``bin_dir`` (put it first on PATH) answering for this cluster, their data
        in ``bin_dir/slurm`` (rewritten whole: install again after a change). Returns ``bin_dir``."""
        data = bin_dir / 'slurm'
        data.mkdir(parents=True, exist_ok=True)
        for old in data.iterdir():
            old.unlink()
        expansions: dict[str, Sequence[str]] = {}
        for part, nodes in self.partitions.items():
            usable = [n for n in nodes if n not in self.drained]
            groups = [g for g in (usable, [n for n in nodes if n in self.drained]) if g]
            lists = [slurm.abbrev(g) for g in groups]
            expansions.update(zip(lists, groups))
            (data / f'{part}.lists').write_text(''.join(
                f'{"drained" if g[0] in self.drained else "idle"}:{x}\n' for x, g in zip(lists, groups)))
            (data / f'{part}.rows').write_text(''.join(
                f'{part}|{n}|{"drained" if n in self.drained else "idle"}|{self.drained.get(n) or "none"}\n'
                for n in nodes))
        (data / 'partitions').write_text(''.join(f'{p}\n' for p in self.partitions))
        (data / 'hostnames').write_text(''.join(f'{x}\t{" ".join(n)}\n' for x, n in expansions.items()))
        for name, nodes in self.reservations.items():
            users = ','.join(self.reservation_users.get(name) or ()) or '(null)'
            (data / f'reservation.{name}').write_text(
                f'ReservationName={name} StartTime=now EndTime=later Nodes={slurm.abbrev(list(nodes))} '
                f'NodeCnt={len(nodes)} Flags=MAINT,SPEC_NODES Users={users}\n')
        if self.leaves:
            everyone = [n for nodes in self.leaves.values() for n in nodes]
            lines = [f'SwitchName={leaf} Level=0 LinkSpeed=1 Nodes={slurm.abbrev(list(nodes))}\n'
                     for leaf, nodes in self.leaves.items()]
            lines += [f'SwitchName=spine{s} Level=1 LinkSpeed=1 Nodes={slurm.abbrev(everyone)} '
                      f'Switches={",".join(self.leaves)}\n' for s in range(1, self.spines + 1)]
            (data / 'topology').write_text(''.join(lines))
        for name, text in (('sinfo', SINFO), ('scontrol', SCONTROL)):
            (bin_dir / name).write_text(text)
            (bin_dir / name).chmod(0o755)
        return bin_dir


REFRAME = r'''#!/bin/sh
# ReFrame's run: records its arguments in $FAKE_ARGS (and the prefix it was given, RFM_PREFIX, in $FAKE_ARGS.env),
# prints $FAKE_LOG, writes $FAKE_REPORT where --report-file says and stores it like ReFrame's results storage (with
# $FAKE_PYTHON), exits $FAKE_RC
echo "$@" > "$FAKE_ARGS"
echo "RFM_PREFIX=${RFM_PREFIX:-}" > "$FAKE_ARGS.env"
[ -n "${FAKE_LOG:-}" ] && echo "$FAKE_LOG"
while [ $# -gt 0 ]; do [ "$1" = --report-file ] && out=$2; shift; done
[ -n "$FAKE_REPORT" ] && cp "$FAKE_REPORT" "$out" && "$FAKE_PYTHON" -m netregress_postrun.history import "$out" >/dev/null
exit ${FAKE_RC:-0}
'''


def install_reframe(bin_dir: Path) -> Path:
    """:data:`REFRAME` as ``bin_dir/reframe``; its path (the tools run it as ``$REFRAME``)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / 'reframe').write_text(REFRAME)
    (bin_dir / 'reframe').chmod(0o755)
    return bin_dir / 'reframe'


LMOD = r'''#!/bin/sh
# Lmod as ReFrame's modules system asks it: $LMOD_CMD --version (on stderr), $LMOD_CMD python load|unload ... (the
# Python code that would change the environment: none)
[ "${1:-}" = --version ] && echo 'Modules based on Lua: Version 8.7.32 2023-08-28 (stand-in)' >&2
exit 0
'''


def install_lmod(bin_dir: Path) -> Path:
    """:data:`LMOD` as ``bin_dir/lmod``; its path (for ``LMOD_CMD``)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / 'lmod').write_text(LMOD)
    (bin_dir / 'lmod').chmod(0o755)
    return bin_dir / 'lmod'
