"""The Spack environments of netregress as tools/spack-env makes them: where they live, the site lookups, finding and
calling Spack, generating an environment from its description and what its lock was made from.

The committed description of an environment is config/spack/<system>/spack.yaml, or a site's
$NETREGRESS_SITE/spack/<system>/spack.yaml (--site DIR), which wins; a system whose reframe.yaml says
`environment: <other system>` builds from that one's (one concretization and one install for both: the vcluster
builds from local's). `prepare` turns it into the environment Spack uses, $NETREGRESS_DEPS/spack/envs/<environment>/
(yaml.safe_dump, absolute paths to this checkout's package repository and kernel sources), so the lock and everything
else a machine writes stay out of the checkout (a CI `git clean` keeps them when NETREGRESS_DEPS is outside it). The
environment records the sha256 of what the description it was made from means (netregress.yaml: its parsed YAML, so
a reworded comment keeps the lock); a lock made from a description that means something else is stale and the checks
say so instead of building from it.
One matrix over `$^mpis` is split into one environment per MPI build, solved side by side once Spack's shared
caches are warmed alone (netregress.setup.spackparts).
Spack is the project's wrapper ($NETREGRESS_DEPS/spack/bin/spack) when tools/spack-setup made one, else `spack` on
PATH.

What cannot be done is a :class:`SpackEnvError`: one line and the exit status tools/spack-env ends with. The
locations under $NETREGRESS_DEPS are functions, read when called (one process may work for several: the tests load
the tool once per $NETREGRESS_DEPS). Standard library and PyYAML only: tools/spack-env runs without the venv.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable, Mapping

from .. import paths, statefiles
from ..measure import site
from . import carriedlock, snapshots, spackparts

#: this checkout: its package repository and kernel sources are what the generated environments name
ROOT = Path(__file__).resolve().parents[3]
SOURCES = ROOT / 'config' / 'spack'
MIRROR_NAME = 'netregress-local'
CACHE_NAME = 'netregress-cache'
#: where a build cache directory carries the locks of the environments pushed into it
CACHE_LOCKS = 'netregress-locks'
STAMP = 'netregress.yaml'


class SpackEnvError(Exception):
    """What tools/spack-env cannot do: a one-line message and ``code``, its exit status (2 a usage or input error:
    unknown system, spack missing, bad arguments; 1 Spack failed)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def deps_dir() -> Path:
    """$NETREGRESS_DEPS, resolved (netregress.paths.deps_dir)."""
    return paths.deps_dir().resolve()


def spack_dir() -> Path:
    return deps_dir() / 'spack'


def envs_dir() -> Path:
    return spack_dir() / 'envs'


def snapshot_repo() -> Path:
    return spack_dir() / 'snapshot-repo' / 'spack_repo' / 'netregress_snapshots'


def _site_spack() -> Path | None:
    """The site's Spack descriptions, ``$NETREGRESS_SITE/spack/`` (netregress.measure.site), if it has any."""
    site_dir = os.environ.get('NETREGRESS_SITE', '').strip()
    if not site_dir:
        return None
    if not (Path(site_dir) / 'settings.py').is_file():
        raise SpackEnvError(f'NETREGRESS_SITE={site_dir}: not a site directory (no settings.py)')
    return Path(site_dir).resolve() / 'spack'


def systems() -> list[str]:
    dirs = [SOURCES] + [d for d in [_site_spack()] if d]
    return sorted({p.parent.name for d in dirs for p in d.glob('*/spack.yaml')})


def env_name(system: str) -> str:
    """The environment ``system`` builds from (netregress.measure.site.spack_environment): its own or another
    system's."""
    try:
        return site.spack_environment(system)
    except site.SiteError as err:
        raise SpackEnvError(str(err)) from None


def source_of(system: str) -> Path:
    """The description ``system`` builds from: the site's $NETREGRESS_SITE/spack/<environment>/spack.yaml first,
    else config/spack/<environment>/ (netregress.measure.site.spack_env_source)."""
    path = site.spack_system_dir(env_name(system)) / 'spack.yaml'
    if not path.exists():
        raise SpackEnvError(f'no Spack environment for system {system!r} (have: {", ".join(systems())})')
    return path


def digests(system: str) -> tuple[str, str]:
    """The digests a lock of ``system`` may carry to be current: its description's meaning first (what a new lock
    records), its bytes second (what locks made before recorded): site.spack_description_digests."""
    try:
        return site.spack_description_digests(source_of(system))
    except site.SiteError as err:
        raise SpackEnvError(str(err)) from None


def lock_is_stale(stamp: dict, system: str) -> bool:
    """Whether a lock with ``stamp`` was made from another description than ``system``'s current one."""
    return stamp.get('source_sha256') not in digests(system)


def spack_exe() -> str:
    wrapper = spack_dir() / 'bin' / 'spack'
    if wrapper.exists():
        return str(wrapper)
    exe = shutil.which('spack')
    if not exe and os.environ.get('SPACK_ROOT'):
        candidate = Path(os.environ['SPACK_ROOT']) / 'bin' / 'spack'
        exe = str(candidate) if candidate.exists() else None
    if not exe:
        raise SpackEnvError('no Spack: run tools/bootstrap (its Spack phase, tools/spack-setup), or put spack on PATH '
                            '(docs/spack.md)')
    return exe


def spack(*args: str, quiet: bool = False) -> int:
    cmd = [spack_exe(), *args]
    if not quiet:
        print('+', ' '.join(cmd), flush=True)
    start = time.monotonic()
    code = subprocess.call(cmd, stdout=subprocess.DEVNULL if quiet else None,
                           stderr=subprocess.DEVNULL if quiet else None)
    if not quiet:
        print(f'spack-env: {args[0] if args[0] != "-e" else args[2]} took {time.monotonic() - start:.1f} s '
              f'(exit {code})', flush=True)
    return code


def load_yaml(path: Path) -> dict:
    import yaml
    try:
        return yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise SpackEnvError(f'{path}: not valid YAML: {e}') from None


def dump_yaml(path: Path, doc: dict, header: str) -> None:
    import yaml
    path.parent.mkdir(parents=True, exist_ok=True)
    text = f'# {header}\n' + yaml.safe_dump(doc, default_flow_style=False, sort_keys=False)
    if not path.exists() or path.read_text() != text:
        try:
            statefiles.atomic_write(path, text, what='Spack environment file')
        except statefiles.StateError as err:
            raise SpackEnvError(str(err)) from None


def prepare(system: str) -> Path:
    """Generate the environment of ``system`` from its committed description; returns its directory."""
    src = source_of(system)
    doc = load_yaml(src)
    body = doc.get('spack')
    if not isinstance(body, dict):
        raise SpackEnvError(f'{src}: no top-level `spack:` mapping')
    # Machine-wide settings (store, externals, mirrors, builtin repo) come from the user scope, never from here.
    for key in ('include', 'config'):
        body.pop(key, None)
    repos = {}
    for name, path in (body.get('repos') or {}).items():      # a site description may name its own repositories,
        if name != 'netregress':                               # searched before ours
            repos[name] = str((src.parent / str(path)).resolve()) if not str(path).startswith(('/', '$')) else path
    repos['netregress'] = str(ROOT / 'spack_repo' / 'netregress')
    body['repos'] = repos
    for name, dev in (body.get('develop') or {}).items():
        if isinstance(dev, dict):
            dev['path'] = str(ROOT) if name == 'netregress' else str((src.parent / dev.get('path', '.')).resolve())
    env = envs_dir() / env_name(system)
    header = f'Generated by tools/spack-env prepare from {src}: edit that file, not this'
    parts = spackparts.parts_dir(env)
    split = spackparts.split(doc, parts)
    if split:
        part_docs, doc = split
        for where, part, holds in part_docs:
            dump_yaml(where / 'spack.yaml', part, f'{header} ({holds})')
        for extra in set(parts.glob('*')) - {where for where, _, _ in part_docs}:
            shutil.rmtree(extra)
    elif parts.exists():
        shutil.rmtree(parts)
    dump_yaml(env / 'spack.yaml', doc, header)
    return env


def stamp_of(env: Path) -> dict:
    path = env / STAMP
    return load_yaml(path) if path.exists() else {}


def env_for(system: str, need_lock: bool = True) -> Path:
    env = envs_dir() / env_name(system)
    if not (env / 'spack.yaml').exists():
        env = prepare(system)
    if need_lock and not (env / 'spack.lock').exists():
        raise SpackEnvError(f'{system} is not concretized on this machine: run tools/spack-env concretize {system}')
    return env


def write_snapshot_repo(entries: list[dict]) -> None:
    """The machine-local repository overriding snapshot versions (snapshots.write_repo); a package with a recipe of
    our own keeps it (its checksum is the upstream archive's: netpipe from Debian)."""
    try:
        for package in snapshots.write_repo(snapshot_repo(), entries,
                                            ROOT / 'spack_repo' / 'netregress' / 'packages'):
            print(f'{package}: recipe of this repository, archive verified against it (no override)')
    except snapshots.SnapshotError as err:
        raise SpackEnvError(str(err)) from None


def user_scope() -> dict:
    """The mirrors and repos of Spack's user scope, asked in one Spack call (each call costs 1.3-2.5 s here);
    {} when Spack cannot say."""
    code = ('import json, spack.config as c; '
            'print(json.dumps({k: c.get(k, scope="user") or {} for k in ("mirrors", "repos")}, default=str))')
    proc = subprocess.run([spack_exe(), 'python', '-c', code], capture_output=True, text=True)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {}
    except (IndexError, ValueError):
        return {}


def _carry_repo_index(step: Callable[[Path, Path, Mapping[str, Path]], int], cache: Path) -> int:
    """carriedlock.carry_repo_index for the project's Spack: its wrapper's misc cache and its user scope's
    repositories; nothing for another (a site's) Spack."""
    spack_home = spack_dir()
    if spack_exe() != str(spack_home / 'bin' / 'spack') or not (spack_home / 'user' / 'repos.yaml').exists():
        return 0
    roots = carriedlock.repo_roots(load_yaml(spack_home / 'user' / 'repos.yaml').get('repos') or {},
                                   {'netregress': ROOT / 'spack_repo' / 'netregress'})
    return carriedlock.carry_repo_index(step, cache, spack_home / 'user-cache' / 'misc', roots,
                                        say=lambda line: print(f'spack-env: {line}'))


def take_repo_index(cache: Path) -> int:
    return _carry_repo_index(carriedlock.take_repo_index, cache)


def push_repo_index(cache: Path) -> int:
    return _carry_repo_index(carriedlock.push_repo_index, cache)


def installed_non_develop(env: Path) -> list[str]:
    """/hash of every installed, non-external spec of the environment but the develop ones (rebuilt from the
    checkout, never cached)."""
    code = ('import json, spack.environment as ev; e = ev.active_environment(); dev = set(e.dev_specs); '
            'print(json.dumps(["/" + s.dag_hash() for _, s in e.concretized_specs() for s in s.traverse() '
            'if s.installed and not s.external and s.name not in dev]))')
    proc = subprocess.run([spack_exe(), '-e', str(env), 'python', '-c', code], capture_output=True, text=True)
    try:
        return sorted(set(json.loads(proc.stdout.strip().splitlines()[-1])))
    except (IndexError, ValueError):
        raise SpackEnvError(f'spack could not list the installed specs of {env} ({proc.stderr.strip()[-200:]})',
                            1) from None
