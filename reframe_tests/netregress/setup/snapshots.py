"""The snapshot manifest of a local Spack source mirror, ``<mirror>/netregress-snapshots.yaml``, read and written in
one place (``tools/spack-snapshot`` writes it, ``tools/spack-env mirror`` turns it into a machine-local package
repository).

A mirror can come from anywhere (a USB disk, another site), and ``tools/spack-env`` runs Spack, often as root, on
what it generates from it, so every entry is checked before anything is made of it, and nothing of it ever
becomes code:

* ``package``: a Spack package name, ``[a-z][a-z0-9]*(-[a-z0-9]+)*`` (at most 100 characters);
* ``version``: ``[A-Za-z0-9]+([._-][A-Za-z0-9]+)*`` (at most 64 characters: ``7.4``, ``3.4.1``, ``2021.10.0``);
* ``sha256``: 64 lower-case hex digits;
* ``archive``: exactly ``_source-cache/archive/<first 2 hex>/<sha256>.<ext>``, inside the mirror.

A malformed entry is a :class:`SnapshotError` whose one line names the manifest, the entry and what is wrong. The
recipes :func:`recipe` writes are one fixed text per package whose only variable parts are the module and class
names of a checked package name; the versions and digests are data, ``snapshots.json`` beside the recipe, which
the recipe reads when Spack imports it. Paths made from names are checked to stay inside their directory.

Standard library only (and PyYAML when a manifest is read or written): the Spack helpers import it before the venv
exists.
"""
from __future__ import annotations

import hashlib
import json
import keyword
import re
import shutil
from pathlib import Path

from .. import datafiles, statefiles

MANIFEST = 'netregress-snapshots.yaml'
DATA_FILE = 'snapshots.json'
PACKAGE_RE = re.compile(r'[a-z][a-z0-9]*(?:-[a-z0-9]+)*')
VERSION_RE = re.compile(r'[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*')
SHA256_RE = re.compile(r'[0-9a-f]{64}')
ARCHIVE_EXTS = ('tar.gz', 'tgz', 'tar.bz2', 'tar.xz', 'tar.zst', 'tar', 'zip')


class SnapshotError(Exception):
    """A manifest or an entry that may not be used; the message is one line."""


def check_package(name, where: str = 'package') -> str:
    if not isinstance(name, str) or len(name) > 100 or not PACKAGE_RE.fullmatch(name):
        raise SnapshotError(f'{where} {name!r}: lower-case Spack names only (letters, digits and single "-", '
                            f'starting with a letter: osu-micro-benchmarks)')
    return name


def check_version(version, where: str = 'version') -> str:
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        raise SnapshotError(f'{where} {version!r}: a number, not text (YAML read it as one: quote it)')
    if not isinstance(version, str) or len(version) > 64 or not VERSION_RE.fullmatch(version):
        raise SnapshotError(f'{where} {version!r} is not a Spack version (letters and digits separated by single '
                            f'".", "_" or "-": 7.4, 3.4.1)')
    return version


def check_sha256(digest, where: str = 'sha256') -> str:
    if not isinstance(digest, str) or not SHA256_RE.fullmatch(digest):
        raise SnapshotError(f'{where} {digest!r}: not a sha256 (64 lower-case hex digits)')
    return digest


def archive_path(digest: str, ext: str) -> str:
    """Where Spack looks for an archive of that digest: ``_source-cache/archive/<2 hex>/<sha256>.<ext>``."""
    if ext not in ARCHIVE_EXTS:
        raise SnapshotError(f'archive extension {ext!r}: not one of {", ".join(ARCHIVE_EXTS)}')
    return f'_source-cache/archive/{check_sha256(digest)[:2]}/{digest}.{ext}'


def confined(base: Path, rel: str | Path, what: str = 'path') -> Path:
    """``base / rel``, which must not leave ``base`` (no absolute path, no ``..`` out, no symlink out)."""
    base_real = Path(base).resolve()
    target = (Path(base) / rel)
    if Path(rel).is_absolute() or not target.resolve().is_relative_to(base_real):
        raise SnapshotError(f'{what} {str(rel)!r} leaves {base}')
    return target


def check_entry(entry, where: str) -> dict:
    """A manifest entry, checked; a copy with exactly the known keys."""
    if not isinstance(entry, dict):
        raise SnapshotError(f'{where}: expected a mapping with package, version, sha256, archive')
    missing = [k for k in ('package', 'version', 'sha256', 'archive') if k not in entry]
    if missing:
        raise SnapshotError(f'{where}: missing {", ".join(missing)}')
    package = check_package(entry['package'], f'{where}: package')
    version = check_version(entry['version'], f'{where}: version')
    digest = check_sha256(entry['sha256'], f'{where}: sha256')
    archive = entry['archive']
    allowed = [archive_path(digest, ext) for ext in ARCHIVE_EXTS]
    if archive not in allowed:
        raise SnapshotError(f'{where}: archive {archive!r}: must be _source-cache/archive/{digest[:2]}/{digest}.<ext> '
                            f'(the mirror\'s layout for its sha256)')
    out = {'package': package, 'version': version, 'sha256': digest, 'archive': archive}
    source = entry.get('source')
    if source is not None:
        if not isinstance(source, str) or '\n' in source:
            raise SnapshotError(f'{where}: source: expected one line of text')
        out['source'] = source
    return out


def load(mirror: Path) -> list[dict]:
    """The checked entries of ``<mirror>/netregress-snapshots.yaml`` ([] when there is none); aliases and deep
    nesting refused (:func:`netregress.datafiles.load_yaml`)."""
    import yaml
    path = Path(mirror) / MANIFEST
    if not path.exists() and not path.is_symlink():
        return []
    if path.is_symlink():
        raise SnapshotError(f'{path}: a symbolic link: refusing it')
    try:
        doc = datafiles.load_yaml(path.read_text())
    except (OSError, UnicodeDecodeError) as err:
        raise SnapshotError(f'{path}: unreadable ({err})') from None
    except yaml.YAMLError as err:
        raise SnapshotError(f'{path}: not valid YAML ({" ".join(str(err).split())})') from None
    if doc is None:
        raise SnapshotError(f'{path}: empty (truncated?)')
    if not isinstance(doc, dict) or not isinstance(doc.get('snapshots'), list):
        raise SnapshotError(f'{path}: expected a mapping with a list "snapshots"')
    entries, seen = [], set()
    for i, entry in enumerate(doc['snapshots']):
        e = check_entry(entry, f'{path}: snapshots[{i}]')
        key = (e['package'], e['version'])
        if key in seen:
            raise SnapshotError(f'{path}: snapshots[{i}]: {e["package"]}@{e["version"]} listed twice')
        seen.add(key)
        entries.append(e)
    return entries


def dump(entries: list[dict]) -> str:
    import yaml
    return ('# Written by tools/spack-snapshot: source snapshots in this mirror, each under its own sha256\n'
            + yaml.safe_dump({'snapshots': entries}, default_flow_style=False, sort_keys=False))


def save(mirror: Path, entries: list[dict]) -> None:
    """Write the manifest atomically (never through a symlink), every entry checked first."""
    path = Path(mirror) / MANIFEST
    checked = [check_entry(e, f'{path}: snapshots[{i}]') for i, e in enumerate(entries)]
    try:
        statefiles.atomic_write(path, dump(checked), what='snapshot manifest')
    except statefiles.StateError as err:
        raise SnapshotError(str(err)) from None


# -- the machine-local recipes ---------------------------------------------------------------------------------

def registered_mirror(scope: dict, name: str) -> str | None:
    """URL of mirror ``name`` in a Spack scope (``scope``: its ``mirrors`` and ``repos``), or None."""
    mirror = (scope.get('mirrors') or {}).get(name)
    return mirror.get('url') if isinstance(mirror, dict) else mirror


def repo_registered(scope: dict, repo: Path) -> bool:
    """Whether a Spack scope (``scope``: its ``mirrors`` and ``repos``) lists package repository ``repo``."""
    repos = scope.get('repos') or {}
    return str(repo) in {str(v) for v in (repos.values() if isinstance(repos, dict) else repos)}


def module_name(package: str) -> str:
    """Spack's module (directory) name of a package: ``osu-micro-benchmarks`` -> ``osu_micro_benchmarks``."""
    name = check_package(package).replace('-', '_')
    return f'_{name}' if keyword.iskeyword(name) else name


def class_name(package: str) -> str:
    """Spack's class name of a package: ``osu-micro-benchmarks`` -> ``OsuMicroBenchmarks``."""
    return ''.join(part.capitalize() for part in check_package(package).split('-'))


RECIPE = '''\
# Generated by tools/spack-env mirror: the builtin recipe of {package_repr}, plus the version(s) of the source
# snapshot(s) in the local mirror with their own sha256 (tools/spack-snapshot). Not committed. The versions and
# digests are data: {data_file} beside this file.
import json as _json
import os as _os

from spack_repo.builtin.packages.{module}.package import {cls} as _Builtin

from spack.package import *

with open(_os.path.join(_os.path.dirname(__file__), {data_file_repr})) as _fp:
    _SNAPSHOTS = _json.load(_fp)


class {cls}(_Builtin):
    """The builtin recipe with the versions of local source snapshots (netregress-snapshots.yaml in the mirror)."""

    _netregress_snapshots = {digest_repr}

    _snapshot = None
    for _snapshot in _SNAPSHOTS["versions"]:
        version(_snapshot["version"], sha256=_snapshot["sha256"])
    del _snapshot
'''


def recipe_data(package: str, entries: list[dict]) -> str:
    """The JSON data file of a package's recipe: its snapshot versions and digests (entries checked again)."""
    versions = [{'version': check_version(e['version']), 'sha256': check_sha256(e['sha256'])} for e in entries
                if check_package(e['package']) == package]
    return json.dumps({'package': package, 'versions': versions}, indent=2) + '\n'


def recipe(package: str, data: str) -> str:
    """The recipe text: fixed, but for the module and class names of the checked ``package`` (identifiers) and
    the reprs of that name, the data file's name and its digest."""
    module, cls = module_name(package), class_name(package)
    if not (module.isidentifier() and cls.isidentifier()):
        raise SnapshotError(f'package {package!r}: no Python identifier for it')
    return RECIPE.format(package_repr=repr(package), data_file=DATA_FILE, data_file_repr=repr(DATA_FILE),
                         module=module, cls=cls, digest_repr=repr(hashlib.sha256(data.encode()).hexdigest()))


def write_repo(repo: Path, entries: list[dict], own_packages: Path) -> list[str]:
    """The machine-local repository (namespace ``netregress_snapshots``) written afresh at ``repo``: one fixed recipe
    per package reading its versions and digests from a data file (nothing of the manifest becomes code, every path
    inside the repository), but for packages with a recipe in ``own_packages``; returns those left to it."""
    shutil.rmtree(repo, ignore_errors=True)
    (Path(repo) / 'packages').mkdir(parents=True)
    (Path(repo) / 'repo.yaml').write_text('repo:\n  namespace: netregress_snapshots\n  api: v2.2\n')
    own = sorted(p for p in {check_package(e['package']) for e in entries} if (own_packages / module_name(p)).is_dir())
    write_recipes(repo, entries, skip=lambda package: package in own)
    return own


def write_recipes(repo: Path, entries: list[dict], skip=lambda package: False) -> list[str]:
    """Write ``<repo>/packages/<module>/{package.py, snapshots.json}`` for every package of ``entries`` (those
    ``skip`` says not); returns the packages written. Every directory is checked to stay inside ``repo/packages``."""
    packages_dir = Path(repo) / 'packages'
    written = []
    for package in sorted({check_package(e['package']) for e in entries}):
        if skip(package):
            continue
        folder = confined(packages_dir, module_name(package), 'recipe directory')
        folder.mkdir(parents=True, exist_ok=True)
        data = recipe_data(package, entries)
        try:
            statefiles.atomic_write(folder / DATA_FILE, data, what='recipe data')
            statefiles.atomic_write(folder / 'package.py', recipe(package, data), what='recipe')
        except statefiles.StateError as err:
            raise SnapshotError(str(err)) from None
        written.append(package)
    return written
