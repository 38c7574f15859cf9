"""The Spack build path: build fixtures against the pre-concretized environment ``config/spack/<system>/``.

Contract with :mod:`netregress.build` (docs/validation.md, "The Spack seam"): :func:`configure` receives a build
fixture before its compile stage (``current_system``, ``current_partition``, ``current_environ`` and ``stagedir``
set) and sets ``fixture.build_system`` and ``fixture.kernels_dir``.

How a build works (no re-concretization: concretizing costs 25-175 s per spec on 2 cores, shared/notes):

* ReFrame's ``Spack`` build system with ``environment = config/spack/<system>`` and no ``specs``, so ReFrame neither
  creates an environment nor runs ``spack add`` (which would re-concretize);
* ``spack -e <env> install <root spec>`` installs only the environment root for this MPI build, e.g.
  ``netregress@develop +mpi ^openmpi@4.1`` (already installed: a no-op taking seconds);
* a post-build step links the installed prefix into the fixture's stage directory (``spack-prefix``), so the
  executables' directory is a fixed path the consumer checks read (``kernels_dir``), as on the cmake path;
* the environment must have been concretized on this machine (``tools/spack-env concretize <system>``; the lock
  holds machine-specific external prefixes and is never committed). Without the lock the fixture fails with that
  instruction rather than concretizing inside a test.

Which MPI spec a ReFrame programming environment maps to comes from ``config/spack/<system>/reframe.yaml``
(``environments: {openmpi4: openmpi@4.1, ...}``), overridden by the environment's ``extras.spack_mpi``.
OSU and NAS fixtures (``reframe_tests/checks/osu.py``, ``nas.py``) use :func:`configure_package` the same way.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
from pathlib import Path

from reframe.core.exceptions import BuildSystemError

from . import paths

PREFIX_LINK = 'spack-prefix'
KERNEL_SPEC = 'netregress@develop +mpi'


def env_dir(system: str) -> Path:
    """``config/spack/<system>/``."""
    return paths.config_dir() / 'spack' / system


def spack_exe() -> str | None:
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
    """ReFrame environment name -> MPI spec (``config/spack/<system>/reframe.yaml``)."""
    return dict((_load_yaml(str(env_dir(system) / 'reframe.yaml')).get('environments') or {}))


def mpi_spec(system: str, environ) -> str:
    """The MPI spec the packages for ``environ`` are built with (``^`` not included)."""
    spec = (getattr(environ, 'extras', None) or {}).get('spack_mpi') or environment_map(system).get(environ.name)
    if not spec:
        raise BuildSystemError(f'no Spack MPI for environment {environ.name} on {system}: add it to '
                               f'config/spack/{system}/reframe.yaml (environments) or set extras.spack_mpi')
    return spec


def root_specs(system: str) -> list[str]:
    """The package specs of ``config/spack/<system>/spack.yaml`` (the ``packages`` definition)."""
    doc = (_load_yaml(str(env_dir(system) / 'spack.yaml')).get('spack') or {})
    for d in doc.get('definitions') or []:
        if 'packages' in d:
            return [str(s) for s in d['packages']]
    return [str(s) for s in doc.get('specs') or [] if isinstance(s, str)]


def package_spec(system: str, package: str) -> str:
    """The environment's spec for ``package`` (e.g. ``npb@3.4.1 implementation=mpi names=... classes=S``)."""
    for spec in root_specs(system):
        if re.match(rf'{re.escape(package)}(?=[@+~\s]|$)', spec):
            return spec
    raise BuildSystemError(f'{package} is not in config/spack/{system}/spack.yaml (definitions: packages)')


def spec_variant(spec: str, name: str) -> list[str]:
    """Values of variant ``name`` in a spec string (``classes=S,W`` -> ``['S', 'W']``)."""
    m = re.search(rf'(?:^|\s){re.escape(name)}=(\S+)', spec)
    return m.group(1).split(',') if m else []


def unavailable_reason(system: str, packages: tuple[str, ...] = ()) -> str | None:
    """Why the Spack path cannot work here (None: it can). Checks use it for a clean ``skip_if``."""
    env = env_dir(system)
    if spack_exe() is None:
        return 'spack is not on PATH: OSU/NAS are built through Spack (docs/spack.md)'
    if not (env / 'spack.yaml').exists():
        return f'no Spack environment config/spack/{system}/ for system {system}'
    if not (env / 'spack.lock').exists():
        return (f'config/spack/{system}/ is not concretized on this machine: run tools/spack-env concretize '
                f'{system} (once; the lock is not committed)')
    specs = root_specs(system)
    for package in packages:
        if not any(re.match(rf'{re.escape(package)}(?=[@+~\s]|$)', s) for s in specs):
            return f'{package} is not in config/spack/{system}/spack.yaml'
    return None


def configure_package(fixture, package_spec_str: str, subdir: str = 'bin') -> None:
    """Set ``fixture`` up to install ``<package_spec_str> ^<mpi>`` from the environment and point
    ``fixture.kernels_dir`` at ``<prefix>/<subdir>`` (through the ``spack-prefix`` link in its stage)."""
    system = fixture.current_system.name
    env = env_dir(system)
    reason = unavailable_reason(system)
    if reason is not None:
        raise BuildSystemError(f'build path spack: {reason}')
    spec = f'{package_spec_str} ^{mpi_spec(system, fixture.current_environ)}'
    fixture.build_system = 'Spack'
    fixture.build_system.environment = str(env)
    fixture.build_system.specs = []                  # no `spack add`: the environment is already concretized
    fixture.build_system.emit_load_cmds = False
    fixture.build_system.install_opts = ['--fail-fast', spec]
    fixture.spack_spec = spec
    link = os.path.join(fixture.stagedir, PREFIX_LINK)
    fixture.postbuild_cmds = [
        f'ln -sfn "$(spack -e {env} location -i {spec})" {link}',
        f'test -d {link} || {{ echo "spack location -i {spec} found no prefix" >&2; exit 1; }}',
    ] + list(fixture.postbuild_cmds)
    fixture.kernels_dir = os.path.join(link, subdir)


def configure(fixture) -> None:
    """The seam called by :class:`netregress.build.KernelBuild` for ``build_path == 'spack'``."""
    configure_package(fixture, KERNEL_SPEC, 'bin')
