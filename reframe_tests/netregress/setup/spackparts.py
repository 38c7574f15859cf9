"""One Spack environment per MPI build, concretized side by side (set-up only: tools/spack-env).

A description whose specs are one matrix with a ``$^NAME`` row (every root depends on one entry of definition
NAME: our MPI builds) is one independent DAG per entry. Solving them as one environment costs one process doing
every round (``unify: when_possible``): 375-382 s on 2 CPUs here; five parts two at a time took 142 s with the same
hashes. The environment Spack installs and the checks read includes the parts' concrete specs through Spack's
``include_concrete`` (0.22 or later), so everything that reads ``concretized_specs()`` sees the same roots.
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


def concretize(spack: str, parts: Sequence[Path], flags: Sequence[str],
               say: Callable[[str], None] = print) -> list[Path]:
    """``spack -e PART concretize FLAGS`` of every part, as many at once as this process may use CPUs (a solve is
    one process), each into its own log; the parts that failed (their log's tail said)."""
    def one(part: Path) -> tuple[Path, int, float]:
        start = time.monotonic()
        with open(part / LOG, 'w') as log:
            rc = subprocess.run([spack, '-e', str(part), 'concretize', *flags], stdout=log,
                                stderr=subprocess.STDOUT).returncode
        return part, rc, time.monotonic() - start

    failed = []
    with ThreadPoolExecutor(max_workers=max(1, len(os.sched_getaffinity(0)))) as pool:
        for done in as_completed([pool.submit(one, p) for p in parts]):
            part, rc, took = done.result()
            say(f'spack-env: part {part.name} concretized in {took:.0f} s (exit {rc}; {part / LOG})')
            if rc:
                failed.append(part)
                say((part / LOG).read_text()[-3000:])
    return failed
