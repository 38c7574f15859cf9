"""The measurement version: what can change a figure, hashed, so that figures measured differently are never
compared as if they were alike (netregress.baselines keeps one baseline per version).

:func:`measured_files` maps every file that decides how a figure is measured (kernel sources, the checks and the
measuring library, the settings, the virtual cluster's fabric, the measuring part of the interconnect table) to a
digest of its :func:`meaning` (Python without docstrings, C without comments, shell without comment lines: a changed
comment changes nothing); :func:`version_of` hashes that map, :func:`changed_files` says what differs.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import json
import re
from pathlib import Path
from typing import Mapping

import yaml

from . import paths


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return tree


#: C string and character literals (kept), // and /* */ comments (dropped)
_C_TOKENS = re.compile(r'(?P<string>"(?:\\.|[^"\\\n])*"|' r"'(?:\\.|[^'\\\n])*')"
                       r'|(?P<line>//[^\n]*)|(?P<block>/\*.*?\*/)', re.S)


#: C tokens: literals, identifiers and numbers, multi-character operators, any other character
_C_LEX = re.compile(r'"(?:\\.|[^"\\\n])*"|' r"'(?:\\.|[^'\\\n])*'"
                    r'|[A-Za-z0-9_.]+|->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||##|[-+*/%&|^!=]=|\S')


def _c_meaning(text: str) -> str:
    """C source as its tokens: comments dropped (string and character literals kept), spacing and line breaks
    normalised (a preprocessor directive keeps its own line)."""
    text = _C_TOKENS.sub(lambda m: m.group('string') or ' ', text).replace('\\\n', ' ')
    out, code = [], []
    for line in text.splitlines():
        if line.lstrip().startswith('#'):
            out += [' '.join(code), ' '.join(_C_LEX.findall(line))]
            code = []
        else:
            code += _C_LEX.findall(line)
    return '\n'.join(x for x in out + [' '.join(code)] if x)


def _hash_meaning(text: str) -> str:
    """Shell, CMake, env files: without comment lines (a shebang kept), blank lines and indentation."""
    return '\n'.join(line.strip() for line in text.splitlines()
                     if line.strip() and not (line.lstrip().startswith('#') and not line.startswith('#!')))


def meaning(path: Path) -> bytes:
    """What of a file can change a figure: Python as its syntax tree without docstrings or positions, C without
    comments, shell/CMake/env files without comment lines; anything else (or what does not parse) byte for byte."""
    raw = path.read_bytes()
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return raw
    suffix = path.suffix
    if suffix == '.py':
        try:
            return ast.dump(_strip_docstrings(ast.parse(text)), include_attributes=False).encode()
        except (SyntaxError, ValueError):
            return raw
    if suffix in ('.c', '.h', '.cc', '.cpp', '.hpp', '.cxx'):
        return _c_meaning(text).encode()
    if suffix in ('.sh', '.bash', '.env', '.cmake', '') or path.name == 'CMakeLists.txt':
        return _hash_meaning(text).encode()
    return raw


#: Modules of the measuring package that judge figures and keep them, and make none: a new band rule must not
#: start a new baseline (the band is computed from the kept samples when a run reads them).
JUDGING_MODULES = frozenset({'bandrules.py', 'bands.py', 'baselines.py', 'figures.py', 'linkverdict.py',
                             'references.py', 'statefiles.py'})
#: Modules of set-up alone (what a runner takes from a build cache, the source snapshots' recipes, how an
#: environment is split for concretizing): they make no figure either; what is built is the Spack description's,
#: and the builds are the kernels' and the checks' business.
SETUP_MODULES = frozenset({'carriedlock.py', 'snapshots.py', 'spackparts.py'})
#: This module: it says which files are hashed, and makes no figure. A file it adds to or takes from the hashed
#: set changes the map's keys, and a change of :func:`meaning` changes the digests, so the version follows either
#: way; what stays out is an edit to the lists above for a module that is already out (it must not restart every
#: baseline).
VERSION_MODULES = frozenset({'measurement.py'})


def _measuring_files(root: Path) -> list[Path]:
    files = [p for p in sorted((root / 'src').rglob('*')) if p.is_file()]
    # the measuring package and the checks; the post-run package (netregress_postrun) reads runs, it makes no figure
    files += sorted(p for p in (root / 'reframe_tests' / 'netregress').rglob('*.py')
                    if p.name not in JUDGING_MODULES | SETUP_MODULES | VERSION_MODULES)
    files += sorted((root / 'reframe_tests' / 'checks').rglob('*.py'))
    # the settings, and the virtual cluster's fabric (shaping, congestion control) that the vcluster figures measure
    # (the embedded vcluster is a site of this checkout: its settings say how each MPI build starts under Slurm)
    config = [root / 'config' / 'settings.py', root / 'config' / 'vcluster.env', root / 'tools' / 'vcluster',
              root / 'config' / 'sites' / 'vcluster' / 'settings.py']
    return files + [p for p in config if p.exists()]


TABLE_KEY = 'config/interconnects.yaml (measuring part)'


@functools.lru_cache(maxsize=8)
def _measured_files_cached(root: str, signature: tuple) -> tuple:
    base = Path(root)
    out = {str(p.relative_to(base)): hashlib.sha256(meaning(p)).hexdigest()[:12] for p in _measuring_files(base)}
    try:
        table = yaml.safe_load((base / 'config' / 'interconnects.yaml').read_text()) or {}
    except (OSError, yaml.YAMLError):
        table = {}
    if isinstance(table, Mapping):
        table = {k: v for k, v in table.items() if k not in ('baselines', 'fixed_bands')}
    out[TABLE_KEY] = hashlib.sha256(json.dumps(table, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return tuple(sorted(out.items()))


def measured_files(root: Path | None = None) -> dict[str, str]:
    """{file relative to the root: 12-hex digest of its :func:`meaning`} of everything that decides how a figure is
    measured: the kernel sources (``src/``), the checks and the library that launches, pins and reads them (not its
    :data:`JUDGING_MODULES`),
    ``config/settings.py``, the virtual cluster (``tools/vcluster``, ``config/vcluster.env`` and its site's
    ``config/sites/vcluster/settings.py``) and the interconnect table (its band rules excluded: they judge figures,
    they do not make them). Cached while no file changes."""
    root = Path(root or paths.repo_root()).resolve()
    signature = []
    for p in _measuring_files(root) + [root / 'config' / 'interconnects.yaml']:
        try:
            st = p.stat()
            signature.append((str(p), st.st_mtime_ns, st.st_size))
        except OSError:
            signature.append((str(p), 0, -1))
    return dict(_measured_files_cached(str(root), tuple(signature)))


def version_of(files: Mapping[str, str]) -> str:
    """The measurement version of a :func:`measured_files` map."""
    return hashlib.sha256(json.dumps(dict(sorted(files.items()))).encode()).hexdigest()[:12]


def measurement_version(root: Path | None = None) -> str:
    """Hash of :func:`measured_files`: figures measured by another version are not comparable."""
    return version_of(measured_files(root))


def changed_files(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """The files whose meaning differs between two :func:`measured_files` maps (added, removed or changed)."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
