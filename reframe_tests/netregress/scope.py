"""One scope for every entry point: which system, partitions and nodes a run, a node check or a summary is about.

A scope is the site (``NETREGRESS_SITE`` / ``--site``, taken by the tools before anything else), the system, its
partitions, a Slurm reservation, a node list and nodes excluded. Every entry point takes the same options
(:func:`add_options`): ``tools/validate``, ``ci/post-maintenance``, the CI templates' jobs (through those two),
``netregress_postrun.coverage`` and ``jobtime``; ``tools/validate`` also reads the scope out of ReFrame options
given after ``--`` (``-J reservation=maint``, ``-J exclude=...``, ``--system S:P``), so either spelling scopes the
node checks as well as the jobs.

What a scope becomes:

* the nodes it covers, per ReFrame partition (:func:`node_sets`): the Slurm partition's nodes, inside the
  reservation, inside the node list, less the exclusions;
* ReFrame options (:func:`reframe_options`): ``--system S[:P]``, ``-J reservation=R`` and one ``-J exclude=`` for
  every node of the partitions outside the set (a node list becomes exclusions, so that a job takes as many nodes
  of the set as it needs, not all of them; a 1,000-node partition's slice is one short host-list expression). The
  all-node checks read the same ``-J`` options (netregress.measure.slurm.allocate_scoped_nodes) and ask Slurm for
  exactly the nodes in scope.

``python -m netregress.scope reframe-args --system S [scope options] [--exclude-file F] -- [REFRAME ARGS]`` prints
the ReFrame arguments one per line: those given, with their scope options replaced by the scope's (one
``-J exclude=`` however many sources it has: sbatch keeps only the last of several). ``tools/validate`` runs it.
Cost: one ``sinfo`` and one ``scontrol show hostnames`` per Slurm partition, one ``scontrol show reservation``;
sets of 10,000 nodes are a few hundred kilobytes of text.
"""
from __future__ import annotations

import argparse
import getpass
import os
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping, Sequence

from .measure import site, slurm

#: What no name of a system, partition, reservation or host list may hold (they reach sbatch and shell lines).
UNSAFE = re.compile(r'[\s;&|`$<>()\\\'"]')


class ScopeError(Exception):
    """A scope that cannot be used (bad or contradictory options, a node in no partition): a usage error, exit 2."""


class ReservationRefused(ScopeError):
    """The reservation does not admit a user who would submit the run's jobs: nothing of the run could start."""


class SlurmUnavailable(ScopeError):
    """Slurm cannot say which nodes a partition or reservation has."""


@dataclass(frozen=True)
class Scope:
    """What an entry point is about. ``nodes`` and ``exclude`` are expanded host names."""
    system: str
    partitions: tuple[str, ...] = ()
    reservation: str | None = None
    nodes: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        """``system`` or ``system:partition,...``."""
        return self.system + (f':{",".join(self.partitions)}' if self.partitions else '')

    def describe(self) -> str:
        where = self.where
        what = ([f'reservation {self.reservation}'] if self.reservation else []) + \
               ([f'nodes {slurm.abbrev(self.nodes)}'] if self.nodes else []) + \
               ([f'excluding {slurm.abbrev(self.exclude)}'] if self.exclude else [])
        return f'{where} ({", ".join(what)})' if what else where


@dataclass
class NodeSets:
    """The nodes a scope covers, per ReFrame partition, and what the run must keep away from."""
    cover: dict[str, list[str]] = field(default_factory=dict)     # ReFrame partition -> nodes in scope
    outside: list[str] = field(default_factory=list)              # nodes of the partitions outside the scope
    partial: list[str] = field(default_factory=list)              # partitions of which the scope holds only part
    notes: list[str] = field(default_factory=list)

    def nodes(self) -> list[str]:
        return list(dict.fromkeys(n for part in self.cover.values() for n in part))


# -- options ------------------------------------------------------------------------------------------------------

def add_options(ap: argparse.ArgumentParser, *, partition_repeatable: bool = True) -> None:
    """The scope options, the same on every entry point."""
    ap.add_argument('--system', help='ReFrame system, or SYSTEM:PARTITION (default: the one ReFrame selects '
                                     'here from our settings and the site\'s)')
    ap.add_argument('--partition', action='append' if partition_repeatable else 'store', default=None,
                    help='only this ReFrame partition of the system' + (' (repeatable)' if partition_repeatable
                                                                         else ''))
    ap.add_argument('--reservation', help='Slurm reservation: every job inside it, its nodes the set to cover')
    ap.add_argument('--nodes', help="Slurm host list ('n[001-016]'): the set to cover; jobs take what they need")
    ap.add_argument('--exclude', help="Slurm host list of nodes no job uses and none needs to cover")


def hostlist(expr: str, option: str) -> tuple[str, ...]:
    """The nodes of host list ``expr``; :class:`ScopeError` naming ``option`` when it is malformed or empty."""
    if not expr.strip() or UNSAFE.search(expr):
        raise ScopeError(f'{option} {expr!r}: empty, or contains spaces or shell metacharacters')
    try:
        nodes = tuple(slurm.expand_hostlist(expr))
    except ValueError as err:
        raise ScopeError(f'{option} {expr!r} is not a Slurm host list ({err})') from None
    if not nodes:
        raise ScopeError(f'{option} {expr!r} names no node')
    return nodes


def _name(value: str, option: str) -> str:
    if not value.strip() or UNSAFE.search(value):
        raise ScopeError(f'{option} {value!r}: empty, or contains spaces or shell metacharacters')
    return value


#: ReFrame options that carry a scope (and take a value): -J/--job-option, --system.
_JOB_OPTS = ('-J', '--job-option')


def split_reframe_args(args: Sequence[str]) -> tuple[list[str], list[str], str | None]:
    """(the ``-J`` values that scope nodes, every other argument, the ``--system`` value or None) of ReFrame
    arguments; other ``-J`` values (``--time=...``) stay with the others."""
    scoped, rest, system = [], [], None
    args = list(args)
    i = 0
    while i < len(args):
        arg = args[i]
        value = None
        if arg in _JOB_OPTS and i + 1 < len(args):
            value, i = args[i + 1], i + 1
        elif arg.startswith('--job-option='):
            value = arg.split('=', 1)[1]
        elif arg.startswith('-J') and len(arg) > 2:
            value = arg[2:]
        elif arg == '--system' and i + 1 < len(args):
            system, i = args[i + 1], i + 1
        elif arg.startswith('--system='):
            system = arg.split('=', 1)[1]
        else:
            rest.append(arg)
            i += 1
            continue
        if value is not None:
            try:
                scoping = bool(slurm.node_scope([value]))
            except ValueError:               # a malformed host list: from_options names it
                scoping = True
            if scoping:
                scoped.append(value)
            else:
                rest += ['-J', value]
        i += 1
    return scoped, rest, system


def from_options(ns: argparse.Namespace, reframe_args: Sequence[str] = ()) -> Scope:
    """The scope of parsed :func:`add_options` and of ReFrame arguments (``-J``, ``--system``) given with them;
    the same kind given both ways must agree. :class:`ScopeError` naming what is wrong."""
    scoped, _, rfm_system = split_reframe_args(reframe_args)
    try:
        from_rfm = slurm.node_scope(scoped)
    except ValueError as err:
        raise ScopeError(f'-J {" ".join(scoped)}: not a Slurm host list ({err})') from None
    reservation = getattr(ns, 'reservation', None)
    if reservation and from_rfm.reservation and reservation != from_rfm.reservation:
        raise ScopeError(f'--reservation {reservation} and the ReFrame option -J reservation='
                         f'{from_rfm.reservation} disagree')
    reservation = reservation or from_rfm.reservation
    if reservation:
        _name(reservation, '--reservation')
    nodes = hostlist(ns.nodes, '--nodes') if getattr(ns, 'nodes', None) else ()
    if nodes and from_rfm.nodelist and set(nodes) != set(from_rfm.nodelist):
        raise ScopeError('--nodes and the ReFrame option -J nodelist= disagree')
    nodes = nodes or from_rfm.nodelist
    exclude = hostlist(ns.exclude, '--exclude') if getattr(ns, 'exclude', None) else ()
    exclude = tuple(dict.fromkeys((*exclude, *from_rfm.exclude)))
    if nodes and not [n for n in nodes if n not in exclude]:
        raise ScopeError(f'--exclude leaves no node of --nodes {slurm.abbrev(nodes)}')

    system = getattr(ns, 'system', None)
    if system and rfm_system and system != rfm_system:
        raise ScopeError(f'--system {system} and the ReFrame option --system {rfm_system} disagree')
    system = system or rfm_system
    partitions = getattr(ns, 'partition', None) or ()
    partitions = (partitions,) if isinstance(partitions, str) else tuple(partitions)
    if system and ':' in system:
        system, part = system.split(':', 1)
        partitions = tuple(dict.fromkeys((*partitions, part)))
    for part in partitions:
        _name(part, '--partition')
    if partitions and not system:
        raise ScopeError('--partition needs --system')
    if system:
        _name(system, '--system')
    else:
        try:
            system = site.selected_system()
        except site.SiteError as err:
            raise ScopeError(f'{err}: give --system') from None
    return Scope(system=system, partitions=partitions, reservation=reservation, nodes=nodes, exclude=exclude)


def excluding(scope: Scope, nodes: Sequence[str]) -> Scope:
    """``scope`` with ``nodes`` excluded too (drained ones the node check left out)."""
    return replace(scope, exclude=tuple(dict.fromkeys((*scope.exclude, *nodes))))


# -- what a scope holds -------------------------------------------------------------------------------------------

def partition_configs(scope: Scope) -> list[Mapping]:
    """The ReFrame partitions of the scope's system that it names (all when it names none); :class:`ScopeError`
    for a partition the system does not have."""
    try:
        parts = site.partitions(scope.system)
    except site.SiteError as err:
        raise ScopeError(str(err)) from None
    names = [p['name'] for p in parts]
    unknown = [p for p in scope.partitions if p not in names]
    if unknown:
        raise ScopeError(f'{scope.system} has no partition {", ".join(unknown)} (it has: {", ".join(names)})')
    return [p for p in parts if not scope.partitions or p['name'] in scope.partitions]


def job_users(scope: Scope) -> dict[str, str]:
    """{user: why} of everyone who submits a job of the scope's partitions: whoever runs the suite and, when that is
    root, the ``run_as`` user of each environment those partitions run (LAM/MPI refuses root: measure/launch.py)."""
    me = getpass.getuser()
    users = {me: 'runs the suite'}
    if os.geteuid() != 0:
        return users
    environs = {e for p in partition_configs(scope) for e in p.get('environs') or ()}
    try:
        envs = site.environments(scope.system)
    except site.SiteError as err:
        raise ScopeError(str(err)) from None
    for env in envs:
        user = (env.get('extras') or {}).get('run_as')
        if env['name'] in environs and isinstance(user, str) and user and user != me:
            users.setdefault(user, f'the jobs of {env["name"]} run as {user} (extras.run_as)')
    return users


def slurm_partitions(scope: Scope) -> dict[str, str]:
    """{ReFrame partition: Slurm partition} of the scope's Slurm partitions."""
    return {p['name']: slurm.slurm_partition(p.get('access') or [], p['name'])
            for p in partition_configs(scope) if p.get('scheduler') in ('slurm', 'squeue')}


def fabrics(config: Mapping) -> list[str]:
    """The interconnects a ReFrame partition offers (its ``ic-<name>`` features), shared memory aside."""
    return [f[3:] for f in config.get('features') or [] if f.startswith('ic-') and f != 'ic-shm']


def node_sets(scope: Scope, *, runner: slurm.Runner = slurm.run_command) -> NodeSets:
    """The nodes the scope covers per Slurm-scheduled ReFrame partition, and the partitions' nodes outside it.

    :class:`SlurmUnavailable` when Slurm cannot say; :class:`ScopeError` when the system has no Slurm partition
    in scope but nodes were named, or a named node is in none of them."""
    parts = slurm_partitions(scope)
    if not parts:
        given = [o for o, v in (('--nodes', scope.nodes), ('--reservation', scope.reservation),
                                ('--exclude', scope.exclude)) if v]
        if given:
            raise ScopeError(f'{given[0]} needs Slurm partitions; system {scope.where} has none')
        return NodeSets()
    reserved: set[str] | None = None
    if scope.reservation:
        try:
            held = slurm.reservation(scope.reservation, runner=runner)
        except slurm.SlurmQueryError as err:
            raise SlurmUnavailable(f'reservation {scope.reservation}: {err}') from None
        reserved, users = set(held.nodes), job_users(scope)
        refused = held.refuses(sorted(users))
        if refused:
            # found here, not as one sbatch "Access denied to requested reservation" per case after the run began
            why = '; '.join(f'{u}: {users[u]}' for u in refused)
            raise ReservationRefused(f'reservation {scope.reservation} does not admit {", ".join(refused)}, who would '
                                     f'submit jobs of this run ({why}): scontrol update '
                                     f'reservation={scope.reservation} users+={",".join(refused)}')
    sets = NodeSets()
    known: set[str] = set()
    wanted, excluded, outside = set(scope.nodes), set(scope.exclude), set()     # sets: 10,000 nodes stay linear
    asked: dict[str, list[str]] = {}        # one query per Slurm partition: the rails of a dual-rail one share it
    for part, slurm_part in parts.items():
        if slurm_part not in asked:
            try:
                asked[slurm_part] = slurm.partition_nodes(slurm_part, runner=runner)
            except slurm.SlurmQueryError as err:
                raise SlurmUnavailable(f'partition {part}: {err}') from None
        nodes = asked[slurm_part]
        known.update(nodes)
        inside = [n for n in nodes if (reserved is None or n in reserved)
                  and (not wanted or n in wanted) and n not in excluded]
        sets.cover[part] = inside
        if not inside:
            sets.notes.append(f'{part}: none of its {len(nodes)} nodes is in scope: its checks cannot run')
        elif len(inside) < len(nodes):
            sets.partial.append(part)
            sets.notes.append(f'{part}: {len(inside)} of its {len(nodes)} nodes in scope: every check there, the '
                              f'all-node ones too, uses only {slurm.abbrev(inside)}')
        members = set(inside)
        for n in nodes:
            if n not in members and n not in outside:
                outside.add(n)
                sets.outside.append(n)
    unknown = [n for n in scope.nodes if n not in known]
    if unknown:
        raise ScopeError(f'--nodes names nodes in no partition of {scope.where}: {", ".join(unknown)}')
    if scope.exclude:
        sets.notes.append(f'excluded: {slurm.abbrev([n for n in scope.exclude if n in known]) or "none of ours"}')
    return sets


def reframe_options(scope: Scope, sets: NodeSets | None) -> list[str]:
    """ReFrame options that keep every job inside the scope: ``--system``, the reservation, and one
    ``-J exclude=`` of the exclusions and, with a node list, of every node of the partitions outside it."""
    if len(scope.partitions) > 1:
        raise ScopeError(f'ReFrame runs one partition of a system or all of them, not {", ".join(scope.partitions)}')
    opts = ['--system', scope.system + (f':{scope.partitions[0]}' if scope.partitions else '')]
    if scope.reservation:
        opts += ['-J', f'reservation={scope.reservation}']
    exclude = list(dict.fromkeys(scope.exclude))
    if scope.nodes and sets is not None:
        exclude = list(dict.fromkeys(exclude + sets.outside))
    if exclude:
        opts += ['-J', f'exclude={slurm.abbrev(exclude)}']
    return opts


def read_hostfile(path: Path) -> list[str]:
    """Nodes listed in ``path`` (host lists, one or more per line); none when the file is missing or empty."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [n for word in text.split() for n in hostlist(word, str(path))]


# -- command line -------------------------------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None, *, runner: slurm.Runner = slurm.run_command) -> int:
    """``reframe-args``: print the ReFrame arguments of a scope, one per line; ``others``: the ReFrame arguments
    given that are not the scope's, one per line (what narrows the checks that run); ``describe``: one line;
    ``system``: the system (the one ReFrame selects here when none is given); ``run-dir``: where its runs write
    (netregress.measure.site.run_dir). A scope that cannot be used: one line, exit 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    rfm = argv[argv.index('--') + 1:] if '--' in argv else []
    argv = argv[:argv.index('--')] if '--' in argv else argv
    ap = argparse.ArgumentParser(prog='python -m netregress.scope', description=__doc__.split('\n\n')[0])
    ap.add_argument('action', choices=['reframe-args', 'others', 'describe', 'system', 'run-dir'])
    add_options(ap)
    ap.add_argument('--exclude-file', type=Path, help='more nodes to exclude, one host list per line (those the '
                                                      'node check before a run left out)')
    args = ap.parse_args(argv)
    if args.action == 'others':
        print(''.join(f'{arg}\n' for arg in split_reframe_args(rfm)[1]), end='')
        return 0
    try:
        scope = from_options(args, rfm)
        if args.exclude_file:
            scope = excluding(scope, read_hostfile(args.exclude_file))
        if args.action in ('describe', 'system', 'run-dir'):
            print({'describe': scope.describe, 'system': lambda: scope.system,
                   'run-dir': lambda: site.run_dir(scope.system)}[args.action]())
            return 0
        sets = None
        if scope.nodes:
            sets = node_sets(scope, runner=runner)
        _, rest, _ = split_reframe_args(rfm)
        print('\n'.join(reframe_options(scope, sets) + rest))
    except (ScopeError, site.SiteError) as err:
        print(f'scope: {err}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
