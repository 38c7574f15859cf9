"""``python -m netregress.sitecheck``: the site against the code and against the cluster this host can see.

``check`` (the default) names every problem, one line each with the file and the value:

* against the code (:func:`static_problems`, no command run): every environment's ``mpi_family`` is a row of the
  interconnect table; every partition feature ``ic-<name>`` and every key of its ``extras.interconnects`` is an
  interconnect of the table, and each fabric a partition offers has a path for the MPI family of every environment
  it runs; a partition's environments are defined; the environments of the site's Spack ``reframe.yaml`` are
  environments of its system;
* against the cluster (:func:`cluster_problems`): the environments' modules are known to the module system
  (Lmod: ``$LMOD_CMD`` or ``lmod`` on PATH; Tcl modules: ``modulecmd``), the MPI specs of ``reframe.yaml`` parse
  and name packages Spack knows (``spack`` on PATH), the Slurm partitions and ``--reservation`` exist (``sinfo``,
  ``scontrol``). What cannot be asked here is said (``modules: not checked: ...``), never passed in silence.

Exit 0: no problem; 1: problems (listed); 2: the site cannot be loaded at all (one line). ``load`` only loads the
site and prints what it defines: the tools run it on ``--site DIR`` before anything else (tools/lib/common.sh),
quickly. ReFrame itself warns about the static problems on every ``--list``, ``--dry-run`` and run
(reframe_tests/checks/site_layer.py), so ``tools/validate`` (``--warn-as-error`` before it measures) stops on them.
It lives outside :mod:`.measure.site` so that the site layer and the interconnect table do not import each other.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from typing import Sequence

from .measure import interconnects, site, slurm

#: Seconds one module, Spack or Slurm query may take.
QUERY_TIMEOUT_S = 60.0


def _settings_of(system_name: str) -> str:
    """The settings file that defines ``system_name``."""
    files = site.settings_files()
    return str(files[-1] if system_name in site.own_systems() else files[0])


def static_problems(systems: Sequence[str] | None = None) -> list[str]:
    """What the site says that the code cannot use (module docstring), one line each."""
    table = interconnects.load()
    tables = ' + '.join(str(f) for f in site.interconnect_files())
    known_families = sorted({f for ic in table.names for f in table.families(ic)})
    out: list[str] = []
    envs_all = {e['name'] for e in site.config()['environments']}
    for name in systems if systems is not None else site.own_systems():
        where = _settings_of(name)
        envs = {e['name']: e for e in site.environments(name)}
        for env in envs.values():
            family = (env.get('extras') or {}).get('mpi_family')
            if 'mpi' in (env.get('features') or []) and not family:
                out.append(f'{where}: environment {env["name"]}: an MPI environment (feature mpi) without '
                           f'extras.mpi_family')
            elif family and family not in known_families:
                out.append(f'{where}: environment {env["name"]}: mpi_family {family!r} is no MPI family of '
                           f'{tables} (known: {", ".join(known_families)})')
        for part in site.partitions(name):
            pname = f'{name}:{part["name"]}'
            missing = [e for e in part.get('environs') or [] if e not in envs_all]
            if missing:
                out.append(f'{where}: partition {pname}: environs {", ".join(missing)} defined nowhere')
            fabrics = [f[3:] for f in part.get('features') or [] if f.startswith('ic-')]
            for fabric in fabrics:
                if fabric not in table.names:
                    out.append(f'{where}: partition {pname}: feature ic-{fabric} names no interconnect of '
                               f'{tables} (known: {", ".join(table.names)})')
            for fabric in ((part.get('extras') or {}).get('interconnects') or {}):
                if fabric not in table.names:
                    out.append(f'{where}: partition {pname}: extras.interconnects.{fabric} names no interconnect '
                               f'of {tables}')
                elif fabric not in fabrics:
                    out.append(f'{where}: partition {pname}: extras.interconnects.{fabric} but no feature '
                               f'ic-{fabric}: no check selects it there')
            for fabric in (f for f in fabrics if f in table.names):
                for env_name in part.get('environs') or []:
                    family = (envs.get(env_name, {}).get('extras') or {}).get('mpi_family')
                    if family in known_families and family not in table.families(fabric):
                        out.append(f'{where}: partition {pname}: {fabric} has no path for mpi_family {family!r} '
                                   f'(environment {env_name}) in {tables}: its MPI checks there cannot run '
                                   f'(families with a path: {", ".join(table.families(fabric)) or "none"})')
        reframe_yaml = site.spack_system_dir(name) / 'reframe.yaml'
        if reframe_yaml.exists():
            from .measure import spack_build
            for env_name in spack_build.environment_map(name):
                if env_name not in envs:
                    out.append(f'{reframe_yaml}: environments.{env_name} is no environment of system {name} '
                               f'(its partitions run: {", ".join(envs) or "none"})')
    return out


# -- against the cluster --------------------------------------------------------------------------------------------

def _run(argv: Sequence[str], stdin: str | None = None) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=QUERY_TIMEOUT_S, check=False,
                              input=stdin)
    except (OSError, subprocess.TimeoutExpired):
        return None


def module_command(kind: str) -> list[str] | None:
    """How to ask the module system ``kind`` (lmod, tmod4, tmod...) what it has: ``[cmd, args...]`` before
    ``-t avail NAME``; None when it is not here."""
    if kind == 'lmod':
        lmod = os.environ.get('LMOD_CMD') or shutil.which('lmod')
        return [lmod, 'bash'] if lmod else None
    if kind.startswith('tmod') or kind == 'envmod':
        cmd = shutil.which('modulecmd')
        return [cmd, 'bash'] if cmd else None
    return None


def module_problems(name: str) -> list[str]:
    sysconf = site.system(name)
    kind = sysconf.get('modules_system') or 'nomod'
    modules = {m if isinstance(m, str) else m.get('name'): e['name']
               for e in site.environments(name) for m in e.get('modules') or []}
    if not modules or kind == 'nomod':
        return []
    cmd = module_command(kind)
    if cmd is None:
        why = 'LMOD_CMD unset, no lmod on PATH' if kind == 'lmod' else 'no modulecmd on PATH'
        return [f'{name}: modules not checked: no {kind} command here ({why})']
    out = []
    for module, env in modules.items():
        res = _run([*cmd, '-t', 'avail', module])
        if res is None:
            return [f'{name}: modules not checked: {cmd[0]} did not answer']
        listed = {line.strip().split('(')[0] for line in (res.stderr + res.stdout).splitlines()}
        if module not in listed and not any(m.startswith(f'{module}/') for m in listed):
            out.append(f'{_settings_of(name)}: environment {env}: module {module!r} is not available '
                       f'({" ".join(cmd[:1])} -t avail {module})')
    return out


#: Run by ``spack python`` with one spec a line on stdin: each parses and names a package Spack knows; prints
#: {spec: problem or ''}.
_SPACK_PROBE = '''
import json, sys
import spack.repo, spack.spec
out = {}
for text in filter(None, sys.stdin.read().splitlines()):
    try:
        spec = spack.spec.Spec(text)
        repos = ', '.join(r.namespace for r in spack.repo.PATH.repos) or 'none'
        out[text] = '' if spack.repo.PATH.exists(spec.name) else f'no Spack package {spec.name} (repositories: {repos})'
    except Exception as err:
        out[text] = ' '.join(str(err).split())
print(json.dumps(out))
'''


def spack_problems(name: str) -> list[str]:
    from .measure import spack_build
    reframe_yaml = site.spack_system_dir(name) / 'reframe.yaml'
    specs = {spec: env for env, spec in spack_build.environment_map(name).items()}
    if not specs:
        return []
    exe = shutil.which('spack')
    if exe is None:
        return [f'{name}: Spack specs not checked: no spack on PATH']
    # one statement: `spack python -c` compiles its command as a single interactive statement
    res = _run([exe, 'python', '-c', f'exec({_SPACK_PROBE!r})'], stdin=''.join(f'{spec}\n' for spec in specs))
    try:
        answer = json.loads((res.stdout if res else '').strip().splitlines()[-1])
    except (ValueError, IndexError):
        why = (res.stderr.strip().splitlines() or ['no answer'])[-1] if res else 'did not answer'
        return [f'{name}: Spack specs not checked: spack python failed ({why})']
    return [f'{reframe_yaml}: environments.{specs[spec]}: {spec!r}: {why}' for spec, why in answer.items() if why]


def slurm_problems(name: str, reservation: str | None = None, *,
                   runner: slurm.Runner = slurm.run_command) -> list[str]:
    parts = {p['name']: slurm.slurm_partition(p.get('access') or [], p['name']) for p in site.slurm_partitions(name)}
    if not parts and not reservation:
        return []
    if shutil.which('sinfo') is None and runner is slurm.run_command:
        return [f'{name}: Slurm not checked: no sinfo on PATH']
    try:
        have = set(slurm.query(['sinfo', '-h', '-o', '%R'], runner, slurm.QUERY_TIMEOUT_S).split())
    except slurm.SlurmQueryError as err:
        return [f'{name}: Slurm not checked: {err}']
    out = [f'{_settings_of(name)}: partition {name}:{p}: Slurm has no partition {sp!r} (sinfo lists: '
           f'{", ".join(sorted(have)) or "none"})' for p, sp in parts.items() if sp not in have]
    if reservation:
        try:
            slurm.reservation_nodes(reservation, runner=runner)
        except slurm.SlurmQueryError as err:
            out.append(f'reservation {reservation}: {err}')
    return out


def cluster_problems(systems: Sequence[str], reservation: str | None = None) -> list[str]:
    """What the cluster this host sees says about the site (module docstring), one line each; what could not be
    asked is a line too (``... not checked: ...``)."""
    out = []
    for name in systems:
        out += module_problems(name) + spack_problems(name) + slurm_problems(name, reservation)
    return out


# -- command line ---------------------------------------------------------------------------------------------------

def describe() -> list[str]:
    where = site.directory()
    table = interconnects.load()
    return [f'site: {where or "none (the embedded configuration)"}',
            f'  ReFrame settings: {" + ".join(str(f) for f in site.settings_files())}; '
            f'systems: {", ".join(site.systems())}',
            f'  interconnects: {" + ".join(str(f) for f in site.interconnect_files())} ({", ".join(table.names)})',
            f'  references: {site.reference_dir()}']


def main(argv: list[str] | None = None) -> int:
    """``load``: print what the site defines (2 naming what is wrong); ``check``: that, then every problem."""
    ap = argparse.ArgumentParser(prog='python -m netregress.sitecheck', description=__doc__.split('\n\n')[0])
    ap.add_argument('action', choices=['check', 'load'], nargs='?', default='check')
    ap.add_argument('--system', action='append', help='only this system (repeatable; default: the site\'s)')
    ap.add_argument('--reservation', help='a Slurm reservation that must exist')
    ap.add_argument('--static', action='store_true', help='against the code only: run no module, Spack or Slurm '
                                                          'command')
    ap.add_argument('--run-dir', action='store_true', help='load: print only where a tool that names no system '
                                                           'writes (netregress.measure.site.default_run_dir)')
    args = ap.parse_args(argv)
    try:
        lines = describe()
        if args.action == 'load':
            print(site.default_run_dir() if args.run_dir else '\n'.join(lines))
            return 0
        systems = args.system or site.own_systems()
        for name in systems:
            site.system(name)
        found = static_problems(systems)
        checked = [] if args.static else cluster_problems(systems, args.reservation)
    except (site.SiteError, interconnects.InterconnectError) as err:
        print(f'site: {err}', file=sys.stderr)
        return 2
    notes = [p for p in checked if ' not checked: ' in p]
    problems = found + [p for p in checked if p not in notes]
    print('\n'.join(lines + [f'  systems checked: {", ".join(systems)}']))
    for line in notes:
        print(f'note: {line}')
    for line in problems:
        print(f'PROBLEM: {line}')
    print(f'site check: {len(problems)} problem(s)' + (f', {len(notes)} thing(s) not checked here' if notes else ''))
    return 1 if problems else 0


def warn_in_reframe(logger) -> None:
    """Every static problem of the site as a ReFrame warning (reframe_tests/checks/site_layer.py)."""
    try:
        problems = static_problems()
    except (site.SiteError, interconnects.InterconnectError) as err:
        problems = [str(err)]
    for line in problems:
        logger.warning(f'site: {line}')


if __name__ == '__main__':
    raise SystemExit(main())
