"""One Spack environment per MPI build, concretized side by side (set-up only: tools/spack-env).

A description whose specs are one matrix with a ``$^NAME`` row (every root depends on one entry of definition
NAME: our MPI builds) is one independent DAG per entry. Solving them as one environment costs one process doing
every round (``unify: when_possible``): 375-382 s on 2 CPUs here; five parts two at a time took 142 s with the same
hashes. The environment Spack installs and the checks read includes the parts' concrete specs through Spack's
``include_concrete`` (0.22 or later), so everything that reads ``concretized_specs()`` sees the same roots.

Side by side, the solves share what Spack keeps for every process of one user: its misc cache (the indexes of the
package repositories, the compilers' probed facts, the binary mirrors' index), each entry written under a lock
that a reader waits for at most 120 s (``spack.util.file_cache``). On a cold cache the first solve holds the
repositories' index lock while it imports every recipe to build them; a fresh clone's second part gave up after
120 s. So those entries are filled first, by one ``spack python`` process alone (:data:`WARM_UP`), and a solve
that still gives up on a lock (another Spack of the same user, say) is run again, with the reason said.
Standard library only: tools/spack-env runs before the venv exists.
"""
from __future__ import annotations

import copy
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Callable, Sequence

LOG = 'concretize.log'
WARM_LOG = 'warm-up.log'
#: Spack's own words when it gave up waiting for a lock (spack.util.lock.LockTimeoutError)
LOCK_TIMEOUT = re.compile(r'Timed out waiting for a (?:read|write) lock[^\n]*')
#: runs a solve gets when it loses a lock race: each waits at most Spack's 120 s for the lock
ATTEMPTS = 3
#: What every solve would otherwise fill on a cold cache, run once before them (``spack -e PART python -c``):
#: one index of a repository builds all three (providers, tags, patches: spack.repo.RepoIndex) of every repository
#: the environment sees; a compiler's probed facts (spack.compilers.libraries.COMPILER_CACHE, asked by the solver
#: for its libc); the index of every binary mirror (asked for reuse: fetched here; each solve still rewrites Spack's
#: short list of them, indices/contents.json, under a lock held for milliseconds). Then a solve writes only its own
#: concretization-cache entry (a byte-range lock of its own) and reads the store's database.
WARM_UP = '; '.join([
    'import spack.repo, spack.compilers.config as cc, spack.compilers.libraries as cl, spack.binary_distribution as bd',
    '_ = spack.repo.PATH.provider_index, spack.repo.PATH.tag_index, spack.repo.PATH.patch_index',
    '_ = [cl.CompilerPropertyDetector(c).default_libc() for c in cc.all_compilers(init_config=False)]',
    '_ = bd.update_cache_and_get_specs()',
])


def parts_dir(env: Path) -> Path:
    """Where the parts of environment directory ``env`` live: beside it, never inside (Spack owns that)."""
    return env.parent / f'{env.name}.parts'


def split_by_dependency(body: dict) -> tuple[str, list] | None:
    """(NAME, entries) when the description's specs are one matrix with a row ``$^NAME`` and definition NAME has
    two entries or more, unconditionally. None otherwise: the environment is concretized whole."""
    specs = body.get('specs')
    if not (isinstance(specs, list) and len(specs) == 1 and isinstance(specs[0], dict)
            and list(specs[0]) == ['matrix'] and isinstance(specs[0]['matrix'], list)):
        return None
    deps = [row[0][2:] for row in specs[0]['matrix'] if isinstance(row, list) and len(row) == 1
            and isinstance(row[0], str) and row[0].startswith('$^')]
    defs = [d for d in body.get('definitions') or [] if isinstance(d, dict) and len(deps) == 1 and deps[0] in d]
    if len(defs) != 1 or 'when' in defs[0] or not isinstance(defs[0][deps[0]], list) or len(defs[0][deps[0]]) < 2:
        return None
    return deps[0], defs[0][deps[0]]


def split(doc: dict, parts: Path) -> tuple[list[tuple[Path, dict, str]], dict] | None:
    """The documents of a split environment: ([(part directory, its spack.yaml document, what it holds)], the
    environment's own document including them), or None when ``doc`` does not split. ``doc`` is left as it is."""
    body = doc['spack']
    found = split_by_dependency(body)
    if not found:
        return None
    name, entries = found
    out = []
    for i, entry in enumerate(entries):
        part = copy.deepcopy(doc)
        part['spack']['definitions'] = [{name: [entry]} if name in d else d for d in body['definitions']]
        out.append((parts / str(i), part, f'one {name} entry: {entry}'))
    whole = copy.deepcopy(doc)
    whole['spack'].pop('specs')
    whole['spack']['include_concrete'] = [str(p) for p, _, _ in out]
    return out, whole


def has_include_concrete(version: str) -> bool:
    """Whether ``spack --version`` names a Spack that includes concrete environments (0.22 or later)."""
    return bool(re.match(r'(0\.(2[2-9]|[3-9]\d)|[1-9]\d*)\.\d', version))


def run(cmd: Sequence[str], log: Path, what: str, say: Callable[[str], None] = print) -> int:
    """``cmd`` with its output into ``log``; run again, up to :data:`ATTEMPTS` in all, while it fails on a lock
    Spack gave up waiting for (each attempt appended to the log, the reason said). Its exit status."""
    log.write_text('')
    for attempt in range(1, ATTEMPTS + 1):
        start = log.stat().st_size
        with open(log, 'a') as out:
            rc = subprocess.run(list(cmd), stdout=out, stderr=subprocess.STDOUT).returncode
        with open(log, errors='replace') as out:
            out.seek(start)
            lost = LOCK_TIMEOUT.findall(out.read())
        if rc == 0 or not lost or attempt == ATTEMPTS:
            return rc
        say(f'spack-env: {what} lost a lock race ({lost[-1].strip()}): attempt {attempt + 1} of {ATTEMPTS}')
        with open(log, 'a') as out:
            out.write(f'\n==> netregress: attempt {attempt + 1} of {ATTEMPTS} (the last one timed out on a lock)\n')
    return rc


def warm(spack: str, part: Path, say: Callable[[str], None] = print) -> int:
    """Fill Spack's shared caches for the environment of ``part`` (:data:`WARM_UP`), alone; its exit status."""
    start = time.monotonic()
    rc = run([spack, '-e', str(part), 'python', '-c', WARM_UP], part / WARM_LOG, "the warm-up of Spack's caches", say)
    done = f"Spack's caches warmed in {time.monotonic() - start:.0f} s (exit {rc}"
    with open(part / WARM_LOG, 'a') as log:      # its last line, and its time the warm-up's end
        log.write(f'==> netregress: {done})\n')
    say(f'spack-env: {done}; {part / WARM_LOG})')
    return rc


def concretize(spack: str, parts: Sequence[Path], flags: Sequence[str],
               say: Callable[[str], None] = print, jobs: int | None = None) -> list[Path]:
    """``spack -e PART concretize FLAGS`` of every part, ``jobs`` at once (default: as many as this process may
    use CPUs; a solve is one process), each into its own log, after Spack's shared caches were warmed alone
    (:func:`warm`). The logs of what failed, each one's tail said: the parts' (``PART/concretize.log``), or the
    warm-up's alone (then no part was tried)."""
    jobs = jobs or max(1, len(os.sched_getaffinity(0)))
    if parts and jobs > 1 and len(parts) > 1 and warm(spack, parts[0], say):
        say((parts[0] / WARM_LOG).read_text()[-3000:])
        return [parts[0] / WARM_LOG]

    def one(part: Path) -> tuple[Path, int, float]:
        start = time.monotonic()
        rc = run([spack, '-e', str(part), 'concretize', *flags], part / LOG, f'part {part.name}', say)
        return part, rc, time.monotonic() - start

    failed = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for done in as_completed([pool.submit(one, p) for p in parts]):
            part, rc, took = done.result()
            say(f'spack-env: part {part.name} {"NOT " if rc else ""}concretized in {took:.0f} s (exit {rc}; '
                f'{part / LOG})')
            if rc:
                failed.append(part / LOG)
                say((part / LOG).read_text()[-3000:])
    return sorted(failed)


def why(log: Path) -> str:
    """The last error line of a Spack log (``==> Error: ...``), else its last line: what a one-line report says."""
    try:
        lines = [line.strip() for line in log.read_text(errors='replace').splitlines() if line.strip()]
    except OSError as err:
        return f'no log ({err.strerror})'
    errors = [line for line in lines if 'Error' in line]
    return (errors or lines or ['(empty log)'])[-1]
