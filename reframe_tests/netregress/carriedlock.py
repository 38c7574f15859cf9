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
import subprocess
from pathlib import Path
from typing import Collection, Mapping


def lock_targets(lock: Path) -> set[str]:
    """The CPU targets the lock's built (non-external) specs are compiled for."""
    try:
        specs = json.loads(lock.read_text()).get('concrete_specs', {}).values()
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
