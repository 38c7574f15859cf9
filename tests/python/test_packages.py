"""The borders between packages: nothing in ``netregress`` (or a check) imports ``netregress_postrun``, so the
measurement version, which hashes the measuring code, does not change when a report or a tool does
(test_measurement shows that); and no two modules import each other, directly or through others."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / 'reframe_tests'


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_the_measuring_package_imports_nothing_of_the_post_run_package():
    files = sorted((ROOT / 'reframe_tests' / 'netregress').rglob('*.py'))
    files += sorted((ROOT / 'reframe_tests' / 'checks').glob('*.py'))
    assert len(files) > 20
    leaks = {f.relative_to(ROOT).as_posix(): sorted(m for m in imported_modules(f)
                                                      if m.split('.')[0] == 'netregress_postrun')
             for f in files}
    assert not {f: m for f, m in leaks.items() if m}



def module_name(path: Path) -> str:
    parts = path.relative_to(LIB).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports anywhere in it (relative imports resolved)."""
    package = module_name(path) if path.name == '__init__.py' else module_name(path).rpartition('.')[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                parts = package.split('.')[:len(package.split('.')) - node.level + 1]
                base = '.'.join(parts + ([node.module] if node.module else []))
            out.update(f'{base}.{alias.name}' if f'{base}.{alias.name}' in modules else base for alias in node.names)
    return out & modules


def test_no_import_cycles():
    files = {module_name(p): p for p in LIB.rglob('*.py') if p.name != '__init__.py'}
    graph = {name: imports_of(path, set(files)) - {name} for name, path in files.items()}
    assert graph['netregress_postrun.refstool'] >= {'netregress_postrun.refswrite'}   # the walk sees imports

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                if nxt == goal:
                    return True
                seen.add(nxt)
                todo.append(nxt)
        return False

    cycles = sorted(f'{a} <-> {b}' for a in graph for b in graph[a] if a < b and reaches(b, a))
    assert not cycles
