"""The snapshot manifest of a source mirror is data, never code (netregress.snapshots, tools/spack-snapshot,
tools/spack-env mirror): every entry checked, one line naming a bad one, the recipes fixed text reading their
versions from a data file, every path inside its directory."""
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from netregress.setup import snapshots

ROOT = Path(__file__).resolve().parents[2]
SHA = 'ab' * 32
GOOD = {'package': 'osu-micro-benchmarks', 'version': '7.4', 'sha256': SHA,
        'archive': f'_source-cache/archive/ab/{SHA}.tar.gz'}


def entry(**kw):
    return {**GOOD, **kw}


MALICIOUS = [
    ('version-code', entry(version='7.4", sha256="0"*64)\n    import os; os.system("touch PWNED")\n    version("7.4'),
     "snapshots[0]: version '7.4\", sha256=", 'is not a Spack version'),
    ('version-quote', entry(version='7.4"'), 'snapshots[0]: version', 'is not a Spack version'),
    ('version-number', entry(version=7.4), 'snapshots[0]: version 7.4', 'a number, not text'),
    ('version-empty', entry(version=''), 'snapshots[0]: version', 'is not a Spack version'),
    ('package-escape', entry(package='../../../../escaped'), "package '../../../../escaped'", 'lower-case Spack'),
    ('package-code', entry(package='x(_Builtin):\n    import os'), 'snapshots[0]: package', 'lower-case Spack'),
    ('package-upper', entry(package='Bad_Name'), "package 'Bad_Name'", 'lower-case Spack'),
    ('package-keyword-ok-not', entry(package='-x'), "package '-x'", 'lower-case Spack'),
    ('sha-short', entry(sha256='ab' * 31), 'snapshots[0]: sha256', '64 lower-case hex'),
    ('sha-upper', entry(sha256='AB' * 32), 'snapshots[0]: sha256', '64 lower-case hex'),
    ('sha-code', entry(sha256='"+__import__("os").system("id")+"'), 'snapshots[0]: sha256', '64 lower-case hex'),
    ('archive-escape', entry(archive='../../../etc/passwd'), "archive '../../../etc/passwd'", 'must be'),
    ('archive-absolute', entry(archive='/etc/passwd'), "archive '/etc/passwd'", 'must be'),
    ('archive-other-digest', entry(archive=f'_source-cache/archive/00/{"0" * 64}.tar.gz'), 'archive', 'must be'),
    ('missing', {'package': 'osu-micro-benchmarks'}, 'snapshots[0]: missing', 'version, sha256, archive'),
    ('not-mapping', 'osu', 'snapshots[0]: expected a mapping', ''),
    ('duplicate', [GOOD, dict(GOOD)], 'snapshots[1]: osu-micro-benchmarks@7.4', 'listed twice'),
]


def write_manifest(mirror, entries):
    mirror.mkdir(parents=True, exist_ok=True)
    (mirror / '_source-cache' / 'archive').mkdir(parents=True, exist_ok=True)
    entries = entries if isinstance(entries, list) else [entries]
    (mirror / snapshots.MANIFEST).write_text(yaml.safe_dump({'snapshots': entries}))


@pytest.fixture
def fake_spack(tmp_path):
    """tools/spack-env's environment with a Spack stand-in that logs its calls; the user scope says nothing, so
    a good manifest is registered and its recipes written."""
    deps = tmp_path / 'deps'
    fake = deps / 'spack' / 'bin' / 'spack'
    fake.parent.mkdir(parents=True)
    fake.write_text('#!/bin/sh\necho "$*" >> "$SPACK_LOG"\nexit 0\n')
    fake.chmod(0o755)
    log = tmp_path / 'calls.log'
    log.write_text('')
    env = {**os.environ, 'NETREGRESS_DEPS': str(deps), 'SPACK_LOG': str(log)}
    return deps, log, env


@pytest.mark.parametrize('name, entries, where, message', MALICIOUS, ids=[m[0] for m in MALICIOUS])
def test_spack_env_refuses_a_malicious_manifest_entry_writing_nothing(tmp_path, fake_spack, name, entries, where,
                                                                     message):
    deps, log, env = fake_spack
    mirror = tmp_path / 'mirror'
    write_manifest(mirror, entries)
    out = subprocess.run([str(ROOT / 'tools' / 'spack-env'), 'mirror', str(mirror)], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count('\n') == 1 and out.stderr.startswith(f'spack-env: {mirror / snapshots.MANIFEST}: ')
    assert where in out.stderr and message in out.stderr and 'nothing registered' in out.stderr
    assert log.read_text() == ''                                       # Spack never asked, nothing registered
    assert sorted(p.name for p in (deps / 'spack').iterdir()) == ['bin']   # no recipe, nothing escaped
    assert not list(tmp_path.rglob('escaped')) and not list(tmp_path.rglob('PWNED'))


@pytest.mark.parametrize('text, message', [
    ('', 'empty (truncated?)'), ('- 1\n', 'expected a mapping with a list "snapshots"'),
    ('snapshots: {a: 1}\n', 'expected a mapping with a list'), ('snapshots: [\n', 'not valid YAML')])
def test_a_malformed_manifest_is_one_line(tmp_path, text, message):
    (tmp_path / snapshots.MANIFEST).write_text(text)
    with pytest.raises(snapshots.SnapshotError, match=re.escape(message)) as err:
        snapshots.load(tmp_path)
    assert '\n' not in str(err.value)


def test_a_symlinked_manifest_is_refused(tmp_path):
    (tmp_path / 'elsewhere.yaml').write_text(yaml.safe_dump({'snapshots': [GOOD]}))
    (tmp_path / snapshots.MANIFEST).symlink_to(tmp_path / 'elsewhere.yaml')
    with pytest.raises(snapshots.SnapshotError, match='symbolic link'):
        snapshots.load(tmp_path)
    with pytest.raises(snapshots.SnapshotError, match='symbolic link'):
        snapshots.save(tmp_path, [GOOD])
    assert yaml.safe_load((tmp_path / 'elsewhere.yaml').read_text()) == {'snapshots': [GOOD]}


def import_recipe(path: Path, builtin_module: str, builtin_class: str):
    """Import a generated recipe against stubs of spack.package (version() records) and the builtin recipe."""
    calls = []
    stubs = {'spack': types.ModuleType('spack'), 'spack.package': types.ModuleType('spack.package')}
    stubs['spack.package'].version = lambda v, **kw: calls.append((v, kw))
    stubs['spack.package'].__all__ = ['version']
    for name in ('spack_repo', 'spack_repo.builtin', 'spack_repo.builtin.packages',
                 f'spack_repo.builtin.packages.{builtin_module}'):
        stubs[name] = types.ModuleType(name)
    builtin = types.ModuleType(f'spack_repo.builtin.packages.{builtin_module}.package')
    setattr(builtin, builtin_class, type(builtin_class, (), {}))
    stubs[builtin.__name__] = builtin
    saved = {k: sys.modules.get(k) for k in stubs}
    sys.modules.update(stubs)
    try:
        namespace = {'__file__': str(path), '__name__': 'generated_recipe'}
        exec(compile(path.read_text(), str(path), 'exec'), namespace)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return namespace, calls


def test_the_recipe_is_fixed_text_and_reads_its_versions_as_data(tmp_path, fake_spack):
    deps, log, env = fake_spack
    mirror = tmp_path / 'mirror'
    other = 'cd' * 32
    write_manifest(mirror, [GOOD, entry(version='7.5', sha256=other, archive=f'_source-cache/archive/cd/{other}.tgz'),
                            entry(package='intel-mpi-benchmarks', version='2021.7')])
    out = subprocess.run([str(ROOT / 'tools' / 'spack-env'), 'mirror', str(mirror)], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    packages = deps / 'spack' / 'snapshot-repo' / 'spack_repo' / 'netregress_snapshots' / 'packages'
    assert sorted(p.name for p in packages.iterdir()) == ['intel_mpi_benchmarks', 'osu_micro_benchmarks']
    osu = packages / 'osu_micro_benchmarks'
    text = (osu / 'package.py').read_text()
    assert '7.4' not in text and '7.5' not in text and SHA not in text and other not in text   # no data in code
    assert 'class OsuMicroBenchmarks(_Builtin):' in text
    assert json.loads((osu / 'snapshots.json').read_text())['versions'] == [
        {'version': '7.4', 'sha256': SHA}, {'version': '7.5', 'sha256': other}]
    namespace, calls = import_recipe(osu / 'package.py', 'osu_micro_benchmarks', 'OsuMicroBenchmarks')
    assert calls == [('7.4', {'sha256': SHA}), ('7.5', {'sha256': other})]
    assert issubclass(namespace['OsuMicroBenchmarks'], namespace['_Builtin'])
    # the two recipes differ only in their names and the digest of their data
    imb = (packages / 'intel_mpi_benchmarks' / 'package.py').read_text()
    assert 'class IntelMpiBenchmarks(_Builtin):' in imb
    assert 'repo add' in log.read_text()


def test_recipe_paths_stay_inside_the_repository(tmp_path):
    with pytest.raises(snapshots.SnapshotError, match='lower-case Spack'):
        snapshots.write_recipes(tmp_path, [entry(package='../../escaped')])
    with pytest.raises(snapshots.SnapshotError, match='leaves'):
        snapshots.confined(tmp_path, '../x')
    (tmp_path / 'packages').mkdir()
    (tmp_path / 'packages' / 'osu_micro_benchmarks').symlink_to(tmp_path.parent)
    with pytest.raises(snapshots.SnapshotError, match='leaves'):
        snapshots.write_recipes(tmp_path, [GOOD])


def test_snapshot_find_refuses_an_archive_outside_the_mirror(tmp_path):
    mirror = tmp_path / 'mirror'
    write_manifest(mirror, entry(archive='../../../etc/passwd'))
    out = subprocess.run([str(ROOT / 'tools' / 'spack-snapshot'), 'find', 'osu-micro-benchmarks', '7.4', str(mirror)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "archive '../../../etc/passwd'" in out.stderr and out.stdout == ''
    out = subprocess.run([str(ROOT / 'tools' / 'spack-snapshot'), 'find', 'osu-micro-benchmarks', '7.4', str(mirror),
                          '--sha256', '../*'], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--sha256 '../*'" in out.stderr


def test_concurrent_snapshot_adds_keep_every_entry(tmp_path):
    mirror = tmp_path / 'mirror'
    procs = []
    for i in range(4):
        src = tmp_path / f'src{i}' / f'pkg-1.{i}'
        src.mkdir(parents=True)
        (src / 'f').write_text(str(i))
        procs.append(subprocess.Popen([str(ROOT / 'tools' / 'spack-snapshot'), 'add', str(mirror), 'pkg', f'1.{i}',
                                       str(src)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    assert all(p.wait(timeout=60) == 0 for p in procs)
    assert sorted(e['version'] for e in snapshots.load(mirror)) == ['1.0', '1.1', '1.2', '1.3']


def test_the_spack_wrapper_quotes_every_path(tmp_path):
    """tools/spack-setup's wrapper: a path is one shell word whatever it holds; control characters are refused."""
    import importlib.machinery
    import importlib.util
    deps = tmp_path / 'deps $(touch PWNED) "q"'
    os.environ['NETREGRESS_DEPS'], saved = str(deps), os.environ.get('NETREGRESS_DEPS')
    try:
        loader = importlib.machinery.SourceFileLoader('nr_spack_setup_q', str(ROOT / 'tools' / 'spack-setup'))
        tool = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
        loader.exec_module(tool)
    finally:
        os.environ.pop('NETREGRESS_DEPS') if saved is None else os.environ.update(NETREGRESS_DEPS=saved)
    spack_root = tmp_path / "spack'root"
    (spack_root / 'bin').mkdir(parents=True)
    (spack_root / 'bin' / 'spack').write_text('#!/bin/sh\necho "$SPACK_PYTHON|$SPACK_USER_CONFIG_PATH|$1"\n')
    (spack_root / 'bin' / 'spack').chmod(0o755)
    python = tmp_path / 'py; echo injected'
    tool.write_wrapper(spack_root, python)
    out = subprocess.run([str(tool.WRAPPER), 'arg'], capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert out.stdout == f'{python}|{tool.USER_SCOPE}|arg\n' and not (tmp_path / 'PWNED').exists()
    with pytest.raises(tool.SetupError, match='control characters'):
        tool.write_wrapper(spack_root, tmp_path / 'py\nrm -rf /')
