"""The Spack build path: build fixtures against the pre-concretized environment of the system.

Contract with :mod:`netregress.build` (docs/validation.md, "The Spack seam"): :func:`configure` receives a build
fixture before its compile stage (``current_system``, ``current_partition``, ``current_environ`` and ``stagedir``
set) and sets ``fixture.build_system`` and ``fixture.kernels_dir``.

Where things are (docs/spack.md): the committed description of a system's environment is
``config/spack/<system>/spack.yaml`` (+ ``reframe.yaml``: ReFrame environment -> MPI spec); the environment Spack
uses is generated from it under ``$NETREGRESS_DEPS/spack/envs/<system>/`` (``tools/spack-env prepare``), where its
``spack.lock`` lives too, outside the checkout. Spack itself is the project's wrapper
``$NETREGRESS_DEPS/spack/bin/spack`` (``tools/spack-setup``, run by ``tools/bootstrap``), else ``spack`` on PATH.

How a build works (no re-concretization: concretizing costs 25-175 s per spec on 2 cores, docs/spack.md):

* ReFrame's ``Spack`` build system with ``environment = <that env dir>`` and no ``specs``, so ReFrame neither
  creates an environment nor runs ``spack add`` (which would re-concretize);
* ``spack -e <env> install <root spec>`` installs only the environment root for this MPI build, e.g.
  ``netregress@develop +mpi ^openmpi@4.1`` (already installed: a no-op taking seconds); a package fixture whose
  root Spack reports installed (:func:`installed_prefixes`, one ``spack python`` call per system and run) skips it;
* a post-build step links the installed prefix into the fixture's stage directory (``spack-prefix``), so the
  executables' directory is a fixed path the consumer checks read (``kernels_dir``), as on the cmake path.

Two kinds of "cannot": :func:`absent_reason` (no Spack here at all: a declared limit of this machine; the fixtures
skip, and ``tools/validate`` says so before the run) and :func:`problem` (Spack is here but the system's
environment is missing, not concretized, concretized from an older description, or lacks the package: each has a
fix, so the fixture FAILS with it instead of skipping).
"""
from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Mapping

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_before, sanity_function, variable
from reframe.core.exceptions import BuildSystemError
from reframe.core.logging import getlogger

from .. import paths
from . import site

PREFIX_LINK = 'spack-prefix'
KERNEL_PACKAGE = 'netregress'
KERNEL_SPEC = f'{KERNEL_PACKAGE}@develop +mpi'


def source_dir(system: str) -> Path:
    """The description of the environment ``system`` builds from (its spack.yaml): netregress.site.spack_env_source
    (another system's when ``system``'s reframe.yaml names it: one concretization for both)."""
    return site.spack_env_source(system)


def env_dir(system: str) -> Path:
    """``$NETREGRESS_DEPS/spack/envs/<environment>/``: the environment Spack uses for ``system``
    (netregress.site.spack_environment; generated; holds the lock)."""
    return paths.deps_dir() / 'spack' / 'envs' / site.spack_environment(system)


def system_settings(system: str) -> dict:
    """``system``'s own reframe.yaml (its MPI map, its NPB class), else that of the environment it builds from."""
    own = _load_yaml(str(site.spack_system_dir(system) / 'reframe.yaml'))
    shared = _load_yaml(str(source_dir(system) / 'reframe.yaml'))
    return {**shared, **own}


def spack_exe() -> str | None:
    """The project's Spack wrapper when tools/spack-setup made one, else ``spack`` on PATH, else None (and None
    when the run is without Spack by request, NETREGRESS_SPACK=none)."""
    if os.environ.get('NETREGRESS_SPACK') == 'none':
        return None
    wrapper = paths.deps_dir() / 'spack' / 'bin' / 'spack'
    if os.access(wrapper, os.X_OK):
        return str(wrapper)
    return shutil.which('spack')


@functools.lru_cache(maxsize=None)
def _load_yaml(path: str) -> dict:
    import yaml
    try:
        with open(path) as fp:
            return yaml.safe_load(fp) or {}
    except FileNotFoundError:
        return {}


def environment_map(system: str) -> dict[str, str]:
    """ReFrame environment name -> MPI spec (``config/spack/<system>/reframe.yaml``, else that of the environment
    the system builds from)."""
    return dict(system_settings(system).get('environments') or {})


def mpi_spec(system: str, environ) -> str:
    """The MPI spec the packages for ``environ`` are built with (``^`` not included)."""
    spec = (getattr(environ, 'extras', None) or {}).get('spack_mpi') or environment_map(system).get(environ.name)
    if not spec:
        raise BuildSystemError(f'no Spack MPI for environment {environ.name} on {system}: add it to '
                               f'config/spack/{system}/reframe.yaml (environments) or set extras.spack_mpi')
    return spec


def no_spack_mpi_reason(environ) -> str | None:
    """Why Spack cannot build for this environment's MPI at all (extras ``spack_mpi: none``, e.g. LAM/MPI, which
    Spack has no package for and so cannot even describe as an external), or None."""
    if ((getattr(environ, 'extras', None) or {}).get('spack_mpi') or '') != 'none':
        return None
    return (f'Spack has no package for the MPI of {environ.name} (extras.spack_mpi: none): nothing can be built '
            f'through Spack with it')


def not_built_reason(environ) -> str | None:
    """Why the Spack path gives ``environ`` nothing at all: no Spack here, or none for its MPI (None: it can)."""
    return absent_reason() or no_spack_mpi_reason(environ)


def root_specs(system: str) -> list[str]:
    """The package specs of ``config/spack/<system>/spack.yaml`` (the ``packages`` definition)."""
    doc = (_load_yaml(str(source_dir(system) / 'spack.yaml')).get('spack') or {})
    for d in doc.get('definitions') or []:
        if 'packages' in d:
            return [str(s) for s in d['packages']]
    return [str(s) for s in doc.get('specs') or [] if isinstance(s, str)]


def package_spec(system: str, package: str) -> str:
    """The environment's spec for ``package`` (e.g. ``npb@3.4.1 implementation=mpi names=... classes=S``)."""
    for spec in root_specs(system):
        if spec_of(spec, package):
            return spec
    raise BuildSystemError(f'{package} is not in config/spack/{system}/spack.yaml (definitions: packages)')


def spec_of(spec: str, package: str) -> bool:
    """Whether spec string ``spec`` is one of ``package`` (``npb@3.4.1 ...`` is npb's, ``npbx`` is not)."""
    return re.match(rf'{re.escape(package)}(?=[@+~\s]|$)', spec) is not None


def spec_variant(spec: str, name: str) -> list[str]:
    """Values of variant ``name`` in a spec string (``classes=S,W`` -> ``['S', 'W']``)."""
    m = re.search(rf'(?:^|\s){re.escape(name)}=(\S+)', spec)
    return m.group(1).split(',') if m else []


def absent_reason() -> str | None:
    """Why there is no Spack for this run at all (None: there is one)."""
    if os.environ.get('NETREGRESS_SPACK') == 'none':
        return 'NETREGRESS_SPACK=none: this run is without Spack, as asked'
    if spack_exe() is None:
        return ('Spack is not set up on this machine (tools/bootstrap: NETREGRESS_SPACK/NETREGRESS_SPACK_PACKAGES '
                'checkouts or network; docs/spack.md)')
    return None


def spack_env_command(system: str, action: str) -> str:
    """The tools/spack-env command doing ``action`` for the environment ``system`` builds from, as a user types it:
    an embedded environment (config/spack/) by its name, a site's with its --site."""
    src = source_dir(system)
    if src.parent == paths.config_dir() / 'spack':
        return f'tools/spack-env {action} {src.name}'
    return f'tools/spack-env --site {site.directory()} {action} {system}'


def problem(system: str, packages: tuple[str, ...] = ()) -> str | None:
    """Why Spack, although present, cannot build for ``system`` here: each reason names its fix (None: it can)."""
    src, env = source_dir(system), env_dir(system)
    if not (src / 'spack.yaml').exists():
        return (f'no Spack environment config/spack/{system}/ for system {system} (copy config/spack/site-example/ '
                f'there or to $NETREGRESS_SITE/spack/{system}/)')
    if not (env / 'spack.lock').exists():
        return (f'the Spack environment of {system} is not concretized on this machine: run '
                f'{spack_env_command(system, "concretize")} (once; the lock stays in {env})')
    stamp = _load_yaml.__wrapped__(str(env / 'netregress.yaml'))
    try:
        current = site.spack_description_digests(src / 'spack.yaml')
    except site.SiteError as err:
        return str(err)
    if stamp.get('source_sha256') not in current:
        return (f'{src}/spack.yaml changed since {env}/spack.lock was made: run '
                f'{spack_env_command(system, "concretize")}')
    specs = root_specs(system)
    for package in packages:
        if not any(spec_of(s, package) for s in specs):
            return f'{package} is not in config/spack/{system}/spack.yaml (definitions: packages)'
    return None


def unavailable_reason(system: str, packages: tuple[str, ...] = ()) -> str | None:
    """Either reason why the Spack path cannot work here (None: it can); for callers that only fall back."""
    return absent_reason() or problem(system, packages)


@functools.lru_cache(maxsize=None)
def installed_prefixes(system: str) -> dict[str, str]:
    """Every package root of ``system``'s environment for every MPI of its reframe.yaml, as the build fixtures
    spell it (:func:`with_mpi`) -> its prefix when Spack has it installed, else ''.

    One ``spack python`` call per system and session (spack_installed.py): a no-op ``spack install`` plus
    ``spack location`` cost 3-4 s per fixture here, 70 fixtures a full run. The kernels (``netregress@develop``)
    are never asked: Spack rebuilds a develop spec whose source changed, so they always go through install.
    Anything Spack does not answer ({} on failure, with a warning saying why) takes the full install path."""
    specs = [with_mpi(package, mpi) for package in root_specs(system) if not spec_of(package, KERNEL_PACKAGE)
             for mpi in sorted(set(environment_map(system).values()))]
    exe = spack_exe()
    if not exe or not specs:
        return {}
    try:
        out = subprocess.run([exe, '-e', str(env_dir(system)), 'python', str(Path(__file__).with_name(
            'spack_installed.py')), *specs], capture_output=True, text=True, timeout=300, check=True).stdout
        answer = json.loads(out.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as err:
        detail = (getattr(err, 'stderr', None) or '').strip().splitlines()
        getlogger().warning(f'Spack could not say which packages of {system} are installed ({err}'
                            f'{": " + detail[-1] if detail else ""}): every package fixture runs spack install')
        return {}
    return {spec: prefix for spec, prefix in answer.items() if isinstance(prefix, str)}


def with_mpi(package_spec_str: str, mpi: str) -> str:
    """The environment root of a package for one MPI build (``osu-micro-benchmarks@7.4 ^openmpi@4.1``)."""
    return f'{package_spec_str} ^{mpi}'


def configure_package(fixture, package_spec_str: str, subdir: str = 'bin', reuse_installed: bool = False) -> None:
    """Set ``fixture`` up to install ``<package_spec_str> ^<mpi>`` from the environment and point
    ``fixture.kernels_dir`` at ``<prefix>/<subdir>`` (through the ``spack-prefix`` link in its stage).
    ``reuse_installed``: where Spack reports that root installed (:func:`installed_prefixes`), only link it."""
    system = fixture.current_system.name
    env = env_dir(system)
    reason = unavailable_reason(system)
    if reason is not None:
        raise BuildSystemError(f'build path spack: {reason}')
    spec = with_mpi(package_spec_str, mpi_spec(system, fixture.current_environ))
    fixture.spack_spec = spec
    link = os.path.join(fixture.stagedir, PREFIX_LINK)
    fixture.kernels_dir = os.path.join(link, subdir)
    installed = installed_prefixes(system).get(spec) if reuse_installed else None
    if installed:
        fixture.build_system = 'CustomBuild'
        fixture.build_system.commands = [f'echo "installed by Spack: {spec} -> {installed}"',
                                         *link_commands(shlex.quote(installed), link,
                                                        f'{installed}: no such directory')]
        return
    exe = spack_exe()
    fixture.build_system = 'Spack'
    fixture.build_system.environment = str(env)
    fixture.build_system.specs = []                  # no `spack add`: the environment is already concretized
    fixture.build_system.emit_load_cmds = False
    fixture.build_system.install_opts = ['--fail-fast', spec]
    # ReFrame's Spack build system runs `spack`: the same Spack that concretized the environment
    fixture.env_vars['PATH'] = f'{os.path.dirname(exe)}:$PATH'
    fixture.postbuild_cmds = link_commands(f'"$(spack -e {env} location -i {spec})"', link,
                                           f'spack location -i {spec} found no prefix') + list(fixture.postbuild_cmds)


def link_commands(prefix: str, link: str, missing: str) -> list[str]:
    """Shell commands pointing ``link`` at ``prefix`` (a shell word: a quoted path or a command substitution) and
    failing with ``missing`` where that is no directory."""
    return [f'ln -sfn {prefix} {link}', f'test -d {link} || {{ echo {shlex.quote(missing)} >&2; exit 1; }}']


def configure(fixture) -> None:
    """The seam called by :class:`netregress.build.KernelBuild` for ``build_path == 'spack'``."""
    configure_package(fixture, KERNEL_SPEC, 'bin')


class SpackPackageBuild(rfm.CompileOnlyRegressionTest):
    """A package of the system's Spack environment, built for the current MPI environment (environment fixture).

    Without Spack on the machine (:func:`absent_reason`) the fixture is skipped with that reason, or, when
    ``optional``, passes with an empty ``kernels_dir`` so its check can fall back to another build of the tool.
    With Spack present, every :func:`problem` fails the fixture: a fixable cause is never a skip."""

    #: Spack package name (its spec comes from the ``packages`` definition of the system's environment).
    #:
    #: :type: :class:`str`
    package = variable(str, value='')

    #: Directory under the install prefix that holds the executables.
    #:
    #: :type: :class:`str`
    #: :default: ``'bin'``
    subdir = variable(str, value='bin')

    #: Executables (relative to ``kernels_dir``) that must exist after the build.
    #:
    #: :type: :class:`List[str]`
    #: :default: ``[]``
    executables = variable(typ.List[str], value=[])

    #: Without Spack: pass with an empty ``kernels_dir`` instead of skipping (the check has a fallback).
    #:
    #: :type: :class:`bool`
    #: :default: ``False``
    optional = variable(typ.Bool, value=False)

    #: ``<prefix>/<subdir>`` once built ('' when Spack is absent and the fixture is optional).
    #:
    #: :type: :class:`str`
    kernels_dir = variable(str, value='', loggable=True)

    #: The spec installed (e.g. ``osu-micro-benchmarks@7.4 ^openmpi@4.1``).
    #:
    #: :type: :class:`str`
    spack_spec = variable(str, value='', loggable=True)

    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    build_locally = True
    sourcesdir = None

    @run_before('compile')
    def use_spack_environment(self):
        absent = not_built_reason(self.current_environ)
        if absent is not None:
            self.skip_if(not self.optional, absent)
            self.build_system = 'CustomBuild'
            self.build_system.commands = ['true']
            self.kernels_dir = ''
            return
        system = self.current_system.name
        reason = problem(system, (self.package,))
        if reason is not None:
            raise BuildSystemError(f'{self.package} for {self.current_environ.name}: {reason}')
        configure_package(self, package_spec(system, self.package), self.subdir, reuse_installed=True)

    @sanity_function
    def executables_present(self):
        """Every executable the checks run exists in the installed prefix (nothing to check without Spack)."""
        if not self.kernels_dir:
            return sn.assert_true(self.optional, msg=f'{self.package}: no kernels_dir')
        return sn.all([sn.assert_true(os.access(os.path.join(self.kernels_dir, exe), os.X_OK),
                                      msg=f'{exe} not in {self.kernels_dir} ({self.spack_spec})')
                       for exe in self.executables])


def _system_environments(system: str) -> list[Mapping]:
    """The MPI environments (``+mpi``) of ``system``."""
    return [e for e in site.environments(system) if 'mpi' in (e.get('features') or [])]


def status(system: str) -> tuple[str, bool]:
    """(one paragraph for the start of a run, ok). Without Spack it names exactly what the run leaves out; with
    Spack present but unusable for ``system``, one line naming the fix and the way to run without Spack, not ok
    (tools/validate stops on it: those checks would fail)."""
    absent = absent_reason()
    if absent is None:
        issue = problem(system, ('osu-micro-benchmarks', 'npb', 'netpipe', 'intel-mpi-benchmarks'))
        if issue is not None:
            return (f'Spack present ({spack_exe()}) but NOT usable for {system}: {issue}; then run again, or run '
                    f'without Spack (its checks skipped): NETREGRESS_SPACK=none make validate', False)
        none = [e['name'] for e in _system_environments(system)
                if ((e.get('extras') or {}).get('spack_mpi') or '') == 'none']
        return (f'Spack ({spack_exe()}), environment {env_dir(system)}: OSU, NAS, NPmpi and IMB built through it '
                f'for every MPI build' + (f' except {", ".join(none)} (Spack has no package for its MPI: OSU and IMB '
                                          f'skipped, NPmpi and NAS from tools/bootstrap\'s builds where they exist)'
                                          if none else ''), True)
    envs = _system_environments(system)
    names = [e['name'] for e in envs]
    no_np = [e['name'] for e in envs if not (e.get('extras') or {}).get('netpipe_mpi')]
    no_npb = [e['name'] for e in envs if not (e.get('extras') or {}).get('npb_dir')]
    no_imb = [e['name'] for e in envs if not (e.get('extras') or {}).get('imb')]
    left_out = [f'osu (every case: {", ".join(names)}) and its OsuSpackBuild fixtures',
                f'nas for {", ".join(no_npb)} (no NPB build without Spack)']
    if no_np:
        left_out.append(f'netpipe_mpi for {", ".join(no_np)} (no NetPIPE MPI module without Spack)')
    if no_imb:
        left_out.append(f'imb_pingpong for {", ".join(no_imb)} (no IMB-MPI1 without Spack)')
    return f'NO Spack: {absent}. Skipped for that (where selected): ' + '; '.join(left_out), True


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    ap = argparse.ArgumentParser(prog='python -m netregress.measure.spack_build')
    sub = ap.add_subparsers(dest='cmd', required=True)
    st = sub.add_parser('status', help='what the Spack path gives a run on SYSTEM (exit 1: present but unusable)')
    st.add_argument('--system', required=True)
    va = sub.add_parser('variant', help="the values of a variant of PACKAGE's spec on each SYSTEM, one per line "
                                        "(tools/bootstrap: the NPB classes it builds against LAM/MPI)")
    va.add_argument('package')
    va.add_argument('variant')
    va.add_argument('systems', nargs='+', metavar='SYSTEM')
    args = ap.parse_args(argv)
    if args.cmd == 'variant':
        try:
            values = {v for system in args.systems for v in spec_variant(package_spec(system, args.package),
                                                                            args.variant)}
        except BuildSystemError as err:
            print(f'spack_build variant: {err}', file=sys.stderr)
            return 1
        print('\n'.join(sorted(values)))
        return 0
    text, ok = status(args.system)
    print(text)
    sys.stdout.flush()
    return 0 if ok else 1


if __name__ == '__main__':
    raise SystemExit(main())
