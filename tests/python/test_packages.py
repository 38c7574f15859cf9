"""The border between the measuring library and the post-run code is the package border: nothing in
``netregress`` (or a check) imports ``netregress_postrun``, so the host baseline's measurement version, which hashes
the measuring package, does not change when a report or a tool does (test_baselines shows that)."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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

