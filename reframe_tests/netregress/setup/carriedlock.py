"""Whether a Spack lock carried in a build cache may be used on this runner instead of concretizing
(tools/spack-env adopt-lock), and the identity of the package repositories whose index the cache carries beside
it. Standard library only: tools/spack-env runs without the venv.

A lock names the external MPI prefixes (under ``$NETREGRESS_DEPS``), the checkout our kernels build from, and the
CPU target every built spec was compiled for; a runner adopts it only where all of them hold for it.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Collection, Mapping


def concrete_specs(doc: Mapping) -> list:
    """The specs of a lock's ``concrete_specs``, and of every environment it includes (Spack's ``include_concrete``:
    tools/spack-env's environment of one part per MPI build), however deep."""
    specs = list((doc.get('concrete_specs') or {}).values())
    for included in (doc.get('include_concrete') or {}).values():
        specs += concrete_specs(included) if isinstance(included, Mapping) else []
    return specs


def is_develop(spec: Mapping) -> bool:
    """A spec built from a checkout (Spack's ``develop``: our kernels), never from an archive or a build cache."""
    return 'dev_path' in (spec.get('parameters') or {})


def released_roots(doc: Mapping) -> list[str]:
    """The package names of a lock's roots (its included environments' too) that are not developed: what a system
    needs of Spack when its kernels come from elsewhere."""
    by_hash, roots = {}, []

    def walk(d: Mapping):
        by_hash.update(d.get('concrete_specs') or {})
        roots.extend(r.get('hash') for r in d.get('roots') or [] if isinstance(r, Mapping))
        for included in (d.get('include_concrete') or {}).values():
            if isinstance(included, Mapping):
                walk(included)
    walk(doc)
    return sorted({by_hash[h]['name'] for h in roots if h in by_hash and not is_develop(by_hash[h])})


def lock_targets(lock: Path) -> set[str]:
    """The CPU targets the lock's built (non-external) specs are compiled for."""
    try:
        specs = concrete_specs(json.loads(lock.read_text()))
    except (OSError, ValueError, AttributeError):
        return set()
    out = set()
    for spec in specs:
        target = (spec.get('arch') or {}).get('target') if isinstance(spec, dict) else None
        name = target.get('name') if isinstance(target, dict) else target
        if name and not spec.get('external'):
            out.add(str(name))
    return out


def foreign_targets(spack_exe: str, targets: set[str]) -> tuple[str, list[str]]:
    """(this host's microarchitecture, the targets of ``targets`` it cannot run), by Spack's own archspec: a host
    runs code built for its own microarchitecture or an ancestor of it (zen3 runs x86_64_v3, not icelake). Where
    Spack cannot answer, every target counts as foreign (the runner then concretizes for itself)."""
    names = sorted(t for t in targets if t.replace('_', '').isalnum())     # archspec's names; the lock is carried in
    odd = sorted(set(targets) - set(names))
    code = ('import json, spack.vendor.archspec.cpu as c; h = c.host(); '
            f'print(json.dumps([h.name, [t for t in {names!r} if t not in c.TARGETS or not h >= c.TARGETS[t]]]))')
    proc = subprocess.run([spack_exe, 'python', '-c', code], capture_output=True, text=True)
    try:
        host, foreign = json.loads(proc.stdout.strip().splitlines()[-1])
        return host, sorted(foreign + odd)
    except (IndexError, ValueError):
        return f'not comparable by spack python: {proc.stderr.strip()[-200:]}', sorted(targets)


def refusal(carried: Path, stamp: Mapping, source_digests: Collection[str], deps: Path, checkout: Path,
            spack_exe: str) -> str:
    """Why the lock in ``carried`` (with its ``stamp``) may not be adopted here, or '' when it may;
    ``source_digests``: the description digests a current lock may carry (site.spack_description_digests)."""
    if not (carried / 'spack.lock').exists():
        return 'none carried'
    if stamp.get('source_sha256') not in source_digests:
        return 'made from another description'
    if stamp.get('deps') != str(deps):
        return f'made for NETREGRESS_DEPS={stamp.get("deps")}, here {deps}'
    if stamp.get('checkout') != str(checkout):
        return f'made for the checkout {stamp.get("checkout")} (our kernels build from it), here {checkout}'
    # a runner pool of mixed CPUs: binaries built for another machine's microarchitecture may not run here
    targets = lock_targets(carried / 'spack.lock')
    host, foreign = foreign_targets(spack_exe, targets) if targets else ('', [])
    if foreign:
        return (f'its specs are built for {", ".join(foreign)}, which this host ({host}) cannot run '
                f'(concretizer:targets:granularity:generic in the description gives portable targets)')
    return ''


def repositories_digest(roots: list[Path]) -> str:
    """sha256 of the package repositories under ``roots`` (in order): every file's path in its repository and
    content, caches aside. Two runners with the same digest index the same recipes (1.2 s for Spack's 10,700
    builtin files)."""
    out = hashlib.sha256()
    for i, root in enumerate(roots):
        out.update(f'{i}\0'.encode())
        for base, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != '__pycache__')
            for name in sorted(files):
                path = Path(base, name)
                out.update(str(path.relative_to(root)).encode() + b'\0')
                out.update(hashlib.sha256(path.read_bytes()).digest())
    return out.hexdigest()


#: DIR/<this>/<digest of the package repositories>/<providers|tags|patches>/<namespace>-...-index.json: Spack's index
#: of the repositories, which it builds by importing all 8,700 recipes before its first install or solve (85-100 s
#: of a fresh runner's install from the cache, 2026-11-27); content-addressed, so a runner takes only its own.
CACHE_REPO_INDEX = 'netregress-repo-index'
REPO_INDEXES = ('providers', 'tags', 'patches')


def _index_files(base: Path, namespaces) -> list[Path]:
    """The index files under ``base`` of these namespaces only (a site's own repository is not in the digest)."""
    return sorted(p for kind in REPO_INDEXES for p in (base / kind).glob('*-index.json')
                  if any(p.name.startswith(f'{ns}-') for ns in namespaces))


def _copy_atomically(src: Path, dest: Path) -> None:
    """Through a temporary file beside ``dest``: a reader (Spack, another runner) sees the whole file or none."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f'.{dest.name}.{os.getpid()}')
    shutil.copyfile(src, tmp)
    os.replace(tmp, dest)


def _carried_dir(cache: Path, roots: Mapping[str, Path]) -> Path:
    return cache / CACHE_REPO_INDEX / repositories_digest([roots[ns] for ns in sorted(roots)])


def take_repo_index(cache: Path, misc: Path, roots: Mapping[str, Path]) -> int:
    """Copy the cache's index of exactly these repositories (namespace -> directory) into Spack's misc cache where
    Spack has none yet; the count taken. Spack's own mtime check still holds: a recipe changed after the copy is
    indexed again. OSError where a recipe cannot be read."""
    if all(any((misc / kind).glob(f'{ns}-*-index.json')) for kind in REPO_INDEXES for ns in roots):
        return 0        # Spack keeps its own (every later set-up): no 1.2 s digest of the recipes for nothing
    taken = 0
    for src in _index_files(_carried_dir(cache, roots), roots):
        dest = misc / src.parent.name / src.name
        if not dest.exists():
            _copy_atomically(src, dest)
            taken += 1
    return taken


def push_repo_index(cache: Path, misc: Path, roots: Mapping[str, Path]) -> int:
    """Copy Spack's index of these repositories from its misc cache into the cache under their digest; the count."""
    out = _carried_dir(cache, roots)
    files = _index_files(misc, roots)
    for src in files:
        _copy_atomically(src, out / src.parent.name / src.name)
    return len(files)


def repo_roots(listed, own: Mapping[str, Path]) -> dict[str, Path] | None:
    """Namespace -> directory of the repositories whose index may travel: those Spack's user scope lists (``listed``,
    its ``repos``: builtin, the source snapshots) and ``own``; None where the scope does not name them by
    namespace."""
    if not isinstance(listed, Mapping):
        return None
    return {**{str(ns): Path(p) for ns, p in listed.items()}, **own}


def carry_repo_index(step, cache: Path, misc: Path, roots: Mapping[str, Path] | None, say=print) -> int:
    """``step`` (:func:`take_repo_index`, :func:`push_repo_index`) between ``cache`` and Spack's misc cache ``misc``
    where the repositories are named by namespace (``roots``, :func:`repo_roots`); else 0, and 0 where a recipe
    cannot be read (said, never fatal: the index only saves time)."""
    if roots is None:
        return 0
    try:
        return step(cache, misc, roots)
    except OSError as err:
        say(f'Spack\'s repository index not carried ({err})')
        return 0
