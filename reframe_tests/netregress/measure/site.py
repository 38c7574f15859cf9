"""The site layer: one directory of a centre's own files, layered over netregress's, loaded by one module.

A site keeps everything that is its own in one directory outside the checkout, named by ``NETREGRESS_SITE`` (the
tools also take ``--site DIR``, which sets it)::

    $NETREGRESS_SITE/settings.py          ReFrame configuration: systems, partitions, environments, modes (required)
    $NETREGRESS_SITE/interconnects.yaml   interconnects and MPI paths, merged over config/interconnects.yaml
    $NETREGRESS_SITE/references/          committed references, <system>.yaml (tools/refs write/accept writes here)
    $NETREGRESS_SITE/spack/<system>/      the Spack environment of a system (spack.yaml, reframe.yaml; or
                                          reframe.yaml naming another system's environment)
    $NETREGRESS_SITE/checks/              the site's own ReFrame checks, loaded beside ours (optional)

Without a site the embedded configuration (``config/``) is used alone. The ReFrame files are loaded by ReFrame's
own loader, in the order ReFrame is given them (``-C config/settings.py -C $NETREGRESS_SITE/settings.py``), so a
system, environment or mode of the same name in the site replaces ours exactly as it does in ``reframe`` itself.

Override rules of interconnects.yaml (docs/site.md): mappings merge key by key, recursively; any other value
replaces ours; a key set to ``null`` removes ours; a mapping holding ``$replace: true`` replaces ours whole.

Nothing else in netregress imports a settings file or reads ``config/vcluster.env``: they ask this module.
"""
from __future__ import annotations

import functools
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Mapping

from .. import paths

#: The environment variable that names the site directory.
ENV = 'NETREGRESS_SITE'
#: The marker that makes a site's mapping replace ours instead of merging into it.
REPLACE = '$replace'


class SiteError(Exception):
    """The site directory or one of its files is missing or wrong; the message names the file."""


def directory() -> Path | None:
    """The site directory (``$NETREGRESS_SITE``), or None for the embedded configuration alone."""
    value = os.environ.get(ENV, '').strip()
    if not value:
        return None
    path = Path(value).expanduser().resolve()
    if not path.is_dir():
        raise SiteError(f'{ENV}={value}: no such directory')
    if not (path / 'settings.py').is_file():
        raise SiteError(f'{ENV}={value}: the site has no settings.py (its ReFrame configuration)')
    return path


def settings_files() -> list[Path]:
    """The ReFrame configuration files, in the order ReFrame loads them: ours, then the site's."""
    site = directory()
    return [paths.config_dir() / 'settings.py'] + ([site / 'settings.py'] if site else [])


def reframe_args() -> list[str]:
    """``-C FILE`` for every configuration file, and ``-c`` of the site's own checks (``checks/``) when it has
    them: the start of every ReFrame command line a tool builds."""
    site = directory()
    checks = ['-c', str(site / 'checks')] if site and (site / 'checks').is_dir() else []
    return [arg for f in settings_files() for arg in ('-C', str(f))] + checks


@functools.lru_cache(maxsize=4)
def _config(files: tuple[str, ...]) -> Any:
    from reframe.core import config
    from reframe.core.exceptions import ConfigError
    # ReFrame imports a Python settings file once per process and keeps the module; ours reads NETREGRESS_SITE when
    # imported (whether `local` matches every host), so a load for another site must import it afresh
    for name, module in list(sys.modules.items()):
        if getattr(module, '__file__', None) in files:
            del sys.modules[name]
    try:
        return config.load_config(*files)
    except (ConfigError, OSError, SyntaxError) as err:
        raise SiteError(f'cannot load the ReFrame configuration {" + ".join(files)}: {err}') from None


def config() -> Any:
    """The merged ReFrame configuration (ReFrame's ``load_config``; no system selected)."""
    return _config(tuple(str(f) for f in settings_files()))


def selected_system() -> str:
    """The system ReFrame selects on this machine (its own hostname rules, on a fresh load of the settings)."""
    from reframe.core.exceptions import ConfigError
    cfg = _config.__wrapped__(tuple(str(f) for f in settings_files()))
    try:
        cfg.select_subconfig()
    except ConfigError as err:
        raise SiteError(f'no system of {" + ".join(str(f) for f in settings_files())} matches this host: '
                        f'{err}') from None
    name = cfg.get('systems/0/name')
    if name in _builtin_systems():       # ReFrame's own fallback: none of ours matched this host
        import socket
        raise SiteError(f'no system of {" + ".join(str(f) for f in settings_files())} matches this host '
                        f'({socket.gethostname()}: a system\'s `hostnames` are regular expressions matched '
                        f'against it)')
    return name


def _builtin_systems() -> set[str]:
    from reframe.core import settings as builtin
    return {s['name'] for s in builtin.site_configuration['systems']}


def systems() -> dict[str, Mapping]:
    """Every system by name; where two files define one name, the one loaded last (the site's) wins."""
    out: dict[str, Mapping] = {}
    builtin = _builtin_systems()
    for sysconf in config()['systems']:
        if sysconf['name'] not in builtin:             # ReFrame's own `generic`, chosen when nothing matches
            out.setdefault(sysconf['name'], sysconf)   # ReFrame puts a later file's systems first
    return out


def system(name: str) -> Mapping:
    """The configuration of system ``name``; :class:`SiteError` naming the files searched when it is not there."""
    try:
        return systems()[name]
    except KeyError:
        files = ', '.join(str(f) for f in settings_files())
        raise SiteError(f'system {name!r} is not defined in {files} (defined: {", ".join(systems())}); '
                        f'a site\'s own system needs {ENV}=<site directory>') from None


def partitions(name: str) -> list[Mapping]:
    return list(system(name)['partitions'])


def partition_extras(name: str) -> dict[str, Mapping]:
    """``{partition: extras}`` of system ``name``."""
    return {p['name']: dict(p.get('extras') or {}) for p in partitions(name)}


def slurm_partitions(name: str) -> list[Mapping]:
    """The partitions of system ``name`` that Slurm schedules."""
    return [p for p in partitions(name) if p.get('scheduler') in ('slurm', 'squeue')]


def environments(name: str) -> list[Mapping]:
    """The programming environments the partitions of system ``name`` use, in the order they are defined (the
    last definition of a name for this system wins, as in ReFrame)."""
    used = {env for part in partitions(name) for env in part.get('environs') or []}
    out: dict[str, Mapping] = {}
    for env in config()['environments']:
        targets = env.get('target_systems') or ['*']
        if env['name'] in used and (name in targets or '*' in targets):
            out[env['name']] = env
    return list(out.values())


def modes() -> dict[str, list[str]]:
    """ReFrame modes by name (``--mode NAME``): the option sets every tool uses instead of spelling them out."""
    return {m['name']: list(m.get('options') or []) for m in config()['modes']} if 'modes' in config() else {}


# -- the site's other files ------------------------------------------------------------------------------------

def interconnect_files() -> list[Path]:
    """The interconnect tables, ours first; a site's is merged over it (:func:`overlay`)."""
    site = directory()
    extra = [site / 'interconnects.yaml'] if site and (site / 'interconnects.yaml').exists() else []
    return [paths.interconnect_table()] + extra


def reference_dir() -> Path:
    """Committed references: ``$NETREGRESS_REFERENCES`` (a drill's, a test's), else the site's ``references/``
    (a site the checkout ships, under ``config/sites/``, keeps them in the checkout's), else ``reference_values/``."""
    env = os.environ.get('NETREGRESS_REFERENCES')
    if env:
        return Path(env).resolve()
    site = directory()
    if site and not site.is_relative_to((paths.config_dir() / 'sites').resolve()):
        return site / 'references'
    return paths.repo_root() / 'reference_values'


def own_systems() -> list[str]:
    """The systems the site defines (every system without a site)."""
    if directory() is None:
        return list(systems())
    ours = {sysconf['name'] for sysconf in _config((str(settings_files()[0]),))['systems']}
    return [name for name in systems() if name not in ours]


def default_run_dir() -> Path:
    """Where a tool that names no system writes and reads runs (tools/report's history, tools/refs): the explicit
    prefix; else, for a site outside the checkout, :func:`run_dir` of the system ReFrame selects here or of the
    site's only system, else ``$XDG_STATE_HOME/netregress``; else ``run/`` of the checkout."""
    explicit = paths.explicit_run_dir()
    where = directory()
    if explicit or where is None or paths.repo_root() in where.parents:
        return explicit or paths.run_dir()
    try:
        return run_dir(selected_system())
    except SiteError:
        mine = own_systems()
        return run_dir(mine[0]) if len(mine) == 1 else _xdg_state() / 'netregress'


def _xdg_state() -> Path:
    return Path(os.environ.get('XDG_STATE_HOME') or Path.home() / '.local' / 'state').resolve()


def run_dir(system_name: str) -> Path:
    """Where a run of ``system_name`` writes (ReFrame's prefix: stage, output, perflogs, reports, logs, and the
    state unless ``NETREGRESS_STATE``): ``--prefix``/``RFM_PREFIX`` when given; else the system's ``prefix`` in its
    settings (ReFrame's own key: where a site says its runs go); else ``run/`` of the checkout for the systems it
    ships (``local``, the sites under ``config/sites/``); else ``$XDG_STATE_HOME/netregress/<system>``
    (``~/.local/state``): a site's run never writes into the checkout it runs from."""
    explicit = paths.explicit_run_dir()
    if explicit:
        return explicit
    prefix = system(system_name).get('prefix')
    if prefix:
        return Path(os.path.expandvars(str(prefix))).expanduser().resolve()
    where = directory()
    if where is None or paths.repo_root() in where.parents:
        return paths.run_dir()
    return _xdg_state() / 'netregress' / system_name


def spack_system_dir(system_name: str) -> Path:
    """A system's Spack directory (``reframe.yaml``, and ``spack.yaml`` unless it builds from another system's
    environment): the site's ``spack/<system>/`` when it has one, else ``config/spack/<system>/``."""
    site = directory()
    if site and any((site / 'spack' / system_name / f).exists() for f in ('spack.yaml', 'reframe.yaml')):
        return site / 'spack' / system_name
    return paths.config_dir() / 'spack' / system_name


def spack_environment(system_name: str) -> str:
    """The Spack environment a system builds from: its own, or the one its ``reframe.yaml`` names
    (``environment: <system>``): systems that build the same packages against the same MPI builds share one
    concretization and one install (the embedded ``vcluster`` builds from ``local``'s, NPB class aside).
    :class:`SiteError` when the name is malformed or names an environment that itself points elsewhere."""
    import yaml
    path = spack_system_dir(system_name) / 'reframe.yaml'
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        return system_name
    except (OSError, yaml.YAMLError) as err:
        raise SiteError(f'{path}: unreadable ({" ".join(str(err).split())})') from None
    name = doc.get('environment', system_name) if isinstance(doc, Mapping) else system_name
    if not isinstance(name, str) or not name.replace('-', '').replace('_', '').isalnum():
        raise SiteError(f'{path}: environment: {name!r} is not a system name')
    if name != system_name and not (spack_system_dir(name) / 'spack.yaml').exists():
        raise SiteError(f'{path}: environment: {name!r} has no spack.yaml of its own '
                        f'({spack_system_dir(name)}/spack.yaml)')
    return name


def spack_env_source(system_name: str) -> Path:
    """The directory of the ``spack.yaml`` a system's packages are built from (:func:`spack_environment`)."""
    return spack_system_dir(spack_environment(system_name))


def spack_description_digests(path: Path) -> tuple[str, str]:
    """(digest of what a Spack description means, digest of its bytes). A lock records the first: a reworded
    comment or a reindented list must not make every machine concretize again (a comment changed in the embedded
    description cost each machine and runner with kept state a 7-minute solve, and the build cache's lock was
    refused). The second is what locks made before recorded; they stay valid while the bytes are unchanged.
    :class:`SiteError` naming the file when it is not YAML."""
    import hashlib
    import json
    import yaml
    raw = path.read_bytes()
    try:
        meaning = json.dumps(yaml.safe_load(raw), sort_keys=True, default=str)
    except yaml.YAMLError as err:
        raise SiteError(f'{path}: not YAML ({" ".join(str(err).split())})') from None
    return hashlib.sha256(meaning.encode()).hexdigest(), hashlib.sha256(raw).hexdigest()


def overlay(base: Mapping, site: Mapping, where: str = '') -> dict:
    """``site`` merged over ``base``: mappings key by key (recursively), other values replaced, ``null`` removes
    a key, and a mapping with ``$replace: true`` replaces ours whole."""
    out = dict(base)
    for key, value in site.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and value.get(REPLACE) is True:
            out[key] = {k: v for k, v in value.items() if k != REPLACE}
        elif isinstance(value, Mapping) and REPLACE in value:
            raise SiteError(f'{where}{key}: {REPLACE} must be true (or absent), not {value[REPLACE]!r}')
        elif isinstance(value, Mapping) and isinstance(base.get(key), Mapping):
            out[key] = overlay(base[key], value, f'{where}{key}.')
        else:
            out[key] = value
    return out


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines in shell syntax (``config/vcluster.env``); a missing file is empty."""
    out = {}
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return out
    for line in lines:
        line = line.strip()
        if not line or line.startswith('#') or '=' not in line:
            continue
        key, _, value = line.partition('=')
        key = key.strip().removeprefix('export ').strip()
        words = shlex.split(value, comments=True)
        out[key] = ' '.join(words)
    return out

