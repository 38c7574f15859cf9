"""The measurement version: what can change a figure, hashed, so that figures measured differently are never
compared as if they were alike (netregress.judge.baselines keeps one baseline per version).

What measures is decided by folder, not by a list of names: everything under :data:`MEASURING_DIRS` (the kernel
sources, the checks, ``netregress/measure/``), the settings and MPI builds that say how each build is started
(:data:`MEASURING_FILES`), the virtual cluster's fabric (:func:`fabric_files`: ``tools/vcluster`` and every file it
sources) and the measuring part of the interconnect table. ``netregress/judge/``, ``netregress/setup/``, the
post-run package and the modules at the package root read, judge, set up or locate; they make no figure.

Each file is hashed by its :func:`meaning` (Python without docstrings, C without comments, shell without comment
lines: a reworded comment changes nothing). ``python -m netregress.measurement`` prints the version, the map, or
the fabric's own version, which ``tools/vcluster`` records for the cluster it starts (standard library only, so the
shell tools need no venv for it).
"""
from __future__ import annotations

import argparse
import ast
import functools
import hashlib
import json
import re
import sys
import tomllib
from pathlib import Path
from typing import Mapping

from . import paths

#: Folders whose every file measures (relative to the repository root).
MEASURING_DIRS = ('src', 'reframe_tests/netregress/measure', 'reframe_tests/checks')
#: Files outside those folders that decide how a figure is made: how each MPI build is started and configured.
MEASURING_FILES = ('config/settings.py', 'config/mpi_builds.toml', 'config/sites/vcluster/settings.py')
#: The virtual cluster's script: it and what it sources build the fabric the vcluster figures measure.
FABRIC_SCRIPT = 'tools/vcluster'
#: The interconnect table: its band rules (``baselines``, ``fixed_bands``) judge figures, the rest makes them.
TABLE = 'config/interconnects.yaml'
TABLE_KEY = f'{TABLE} (measuring part)'
_JUDGING_TABLE_KEYS = ('baselines', 'fixed_bands')


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
    out: list[str] = []
    code: list[str] = []
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
    comments, shell/CMake/env files without comment lines, YAML and TOML as their data; anything else (or what does not
    parse) byte for byte."""
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
    if suffix in ('.yaml', '.yml'):
        return _yaml_meaning(text)
    if suffix == '.toml':
        try:
            return json.dumps(tomllib.loads(text), sort_keys=True, default=str).encode()
        except tomllib.TOMLDecodeError:
            return raw
    return raw


#: ``. "$ROOT/path"`` or ``source "$ROOT/path"``: a file a script sources by a path fixed in the checkout
_SOURCED = re.compile(r'^\s*(?:\.|source)\s+"?\$\{?ROOT\}?/([^"\s;]+)"?', re.M)


def fabric_files(root: Path) -> list[Path]:
    """``tools/vcluster`` and, transitively, every file of the checkout it sources (``. "$ROOT/..."``): the
    cluster's settings and the scripts that shape its links and pick their congestion control."""
    todo, seen = [root / FABRIC_SCRIPT], []
    while todo:
        path = todo.pop(0)
        if path in seen or not path.is_file():
            continue
        seen.append(path)
        todo += [root / rel for rel in _SOURCED.findall(path.read_text(errors='replace'))]
    return seen


def _measuring_files(root: Path) -> list[Path]:
    files: list[Path] = []
    for folder in MEASURING_DIRS:
        files += sorted(p for p in (root / folder).rglob('*') if p.is_file() and '__pycache__' not in p.parts)
    files += [root / rel for rel in MEASURING_FILES if (root / rel).is_file()]
    return files + [p for p in fabric_files(root) if p not in files]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def _yaml_meaning(text: str) -> bytes:
    import yaml     # PyYAML only here: the fabric's version (tools/vcluster) needs the standard library alone
    try:
        return json.dumps(yaml.safe_load(text), sort_keys=True, default=str).encode()
    except yaml.YAMLError:
        return text.encode()


def _table_digest(path: Path) -> str:
    """The digest of the interconnect table without its band rules."""
    import yaml
    try:
        table = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        table = {}
    if isinstance(table, Mapping):
        table = {k: v for k, v in table.items() if k not in _JUDGING_TABLE_KEYS}
    return _digest(json.dumps(table, sort_keys=True, default=str).encode())


@functools.lru_cache(maxsize=8)
def _measured_files_cached(root: str, signature: tuple) -> tuple:
    base = Path(root)
    out = {p.relative_to(base).as_posix(): _digest(meaning(p)) for p in _measuring_files(base)}
    out[TABLE_KEY] = _table_digest(base / TABLE)
    return tuple(sorted(out.items()))


def measured_files(root: Path | None = None) -> dict[str, str]:
    """{file relative to the root: 12-hex digest of its :func:`meaning`} of everything that decides how a figure is
    measured (see the module's description). Cached while no file changes."""
    base = Path(root or paths.repo_root()).resolve()
    signature = []
    for p in _measuring_files(base) + [base / TABLE]:
        try:
            st = p.stat()
            signature.append((str(p), st.st_mtime_ns, st.st_size))
        except OSError:
            signature.append((str(p), 0, -1))
    return dict(_measured_files_cached(str(base), tuple(signature)))


def version_of(files: Mapping[str, str]) -> str:
    """The measurement version of a :func:`measured_files` map."""
    return _digest(json.dumps(dict(sorted(files.items()))).encode())


def measurement_version(root: Path | None = None) -> str:
    """Hash of :func:`measured_files`: figures measured by another version are not comparable."""
    return version_of(measured_files(root))


def changed_files(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """The files whose meaning differs between two :func:`measured_files` maps (added, removed or changed)."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def fabric_version(root: Path | None = None, extra: Path | None = None) -> str:
    """The version of the virtual cluster's fabric (:func:`fabric_files`, plus a cluster's own settings file
    ``extra``): ``tools/vcluster`` refuses to serve a cluster started by another."""
    base = Path(root or paths.repo_root()).resolve()
    files = {p.relative_to(base).as_posix(): _digest(meaning(p)) for p in fabric_files(base)}
    if extra is not None:
        files[f'extra:{extra}'] = _digest(meaning(extra))
    return version_of(files)


def main(argv: list[str] | None = None) -> int:
    """``python -m netregress.measurement version|files|fabric [--extra FILE]``; 2 naming a bad argument."""
    ap = argparse.ArgumentParser(prog='python -m netregress.measurement', description=__doc__.split('\n\n')[0])
    ap.add_argument('what', choices=['version', 'files', 'fabric'],
                    help='the measurement version, the files it hashes, or the virtual cluster fabric\'s version')
    ap.add_argument('--root', type=Path, default=None, help='the checkout (default: this one)')
    ap.add_argument('--extra', type=Path, default=None, help='fabric: the cluster\'s own settings file')
    args = ap.parse_args(argv)
    try:
        if args.what == 'version':
            print(measurement_version(args.root))
        elif args.what == 'files':
            for name, digest in measured_files(args.root).items():
                print(f'{digest}  {name}')
        else:
            print(fabric_version(args.root, args.extra))
    except OSError as err:
        print(f'measurement: {err.filename or ""}: {err.strerror}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
