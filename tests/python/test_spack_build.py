"""The Spack path without Spack where possible: the seam (netregress.spack_build), the environment descriptions,
tools/spack-env, tools/spack-snapshot, tools/spack-setup. Tests that need a real Spack skip with "no Spack here"
(CI has none); the project's Spack is found as the fixtures find it (the wrapper under $NETREGRESS_DEPS, else PATH).
"""
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import subprocess
import types
from pathlib import Path

import pytest

pytest.importorskip('reframe')
yaml = pytest.importorskip('yaml')
from reframe.core.buildsystems import CustomBuild, Spack  # noqa: E402
from reframe.core.exceptions import BuildSystemError  # noqa: E402

from netregress.setup import carriedlock, spackparts  # noqa: E402
from netregress.measure import spack_build  # noqa: E402

# the vcluster system is a site (config/sites/vcluster): loaded through the layer, as a centre's is
ROOT = Path(__file__).resolve().parents[2]
#: Every system with a Spack description, and the site it belongs to (None: the embedded configuration).
SITES = {'local': None, 'vcluster': ROOT / 'config' / 'sites' / 'vcluster',
         'site-example': ROOT / 'config' / 'sites' / 'example'}
SYSTEMS = tuple(SITES)


@pytest.fixture(autouse=True)
def use_site(monkeypatch):
    """``use_site(system)``: NETREGRESS_SITE set to the site of ``system``; the vcluster's until then."""
    from netregress.measure import site

    def use(system):
        monkeypatch.setenv('NETREGRESS_SITE', str(SITES[system] or SITES['vcluster']))
        site._config.cache_clear()
        spack_build._load_yaml.cache_clear()
    use('vcluster')
    yield use
    site._config.cache_clear()
needs_spack = pytest.mark.skipif(spack_build.spack_exe() is None, reason='no Spack here (spack not on PATH, no '
                                 'project wrapper): tools/bootstrap sets one up')


def load_tool(name: str) -> types.ModuleType:
    loader = importlib.machinery.SourceFileLoader(f'nr_tool_{name.replace("-", "_")}', str(ROOT / 'tools' / name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


class FakeFixture:
    """What configure() touches on a ReFrame build fixture."""

    def __init__(self, system, env, stagedir, extras=None):
        self.current_system = types.SimpleNamespace(name=system)
        self.current_environ = types.SimpleNamespace(name=env, extras=extras or {})
        self.stagedir = str(stagedir)
        self.postbuild_cmds = []
        self.env_vars = {}
        self._bs = None

    @property
    def build_system(self):
        return self._bs

    @build_system.setter
    def build_system(self, name):
        assert name in ('Spack', 'CustomBuild')
        self._bs = Spack() if name == 'Spack' else CustomBuild()


def lock(deps: Path, system: str, source_sha: str | None = None) -> Path:
    """A (dummy) concretized environment of ``system`` under ``deps`` (the one it builds from), made from the current
    description."""
    env = deps / 'spack' / 'envs' / spack_build.env_dir(system).name
    env.mkdir(parents=True, exist_ok=True)
    (env / 'spack.lock').write_text('{}')
    sha = source_sha or hashlib.sha256((spack_build.source_dir(system) / 'spack.yaml').read_bytes()).hexdigest()
    (env / 'netregress.yaml').write_text(yaml.safe_dump({'source_sha256': sha}))
    return env


@pytest.fixture
def deps(monkeypatch, tmp_path):
    """An empty state directory (NETREGRESS_DEPS) and a (pretend) Spack."""
    d = tmp_path / 'deps'
    d.mkdir()
    monkeypatch.setenv('NETREGRESS_DEPS', str(d))
    monkeypatch.setattr(spack_build, 'spack_exe', lambda: '/opt/spack/bin/spack')
    spack_build._load_yaml.cache_clear()
    yield d
    spack_build._load_yaml.cache_clear()


def test_every_description_pins_each_mpi_and_lists_the_packages(use_site):
    for system in SYSTEMS:
        use_site(system)
        specs = spack_build.root_specs(system)
        names = [s.split('@')[0].split()[0] for s in specs]
        assert names == ['netregress', 'netpipe', 'osu-micro-benchmarks', 'npb', 'intel-mpi-benchmarks'], system
        text = (spack_build.source_dir(system) / 'spack.yaml').read_text()
        # machine-wide settings come from the project's Spack user scope, never from the committed description
        doc = yaml.safe_load(text)['spack']
        # one DAG per MPI build: never one unified DAG (it cannot hold a package twice)
        assert '[$^mpis]' in text and doc['concretizer']['unify'] in (False, 'when_possible'), system
        assert 'include' not in doc and 'config' not in doc and '.deps' not in text, system
        for env, mpi in spack_build.environment_map(system).items():
            assert re.search(rf'^    - {re.escape(mpi)}\s*(#.*)?$', text, re.M), f'{system}: {env} -> {mpi} not in mpis'


def test_site_template_names_agree_with_settings_and_ci(use_site):
    """The example system is `site-example` in the example site's settings and Spack description (the CI templates
    take the system as an input)."""
    from netregress.measure import site
    for system in SYSTEMS:
        use_site(system)
        assert system in site.systems(), f'the Spack description of {system} names no ReFrame system'
    envs = {e['name'] for e in site.environments('site-example')}
    assert set(spack_build.environment_map('site-example')) == envs


def test_npb_names_and_class_per_system():
    """local and the vcluster build from one environment (one concretization, one install) with both classes, and
    each runs its own."""
    assert spack_build.env_dir('vcluster') == spack_build.env_dir('local')
    assert spack_build.source_dir('vcluster') == spack_build.source_dir('local') == ROOT / 'config' / 'spack' / 'local'
    for system, npb_class in (('local', 'S'), ('vcluster', 'W')):
        assert spack_build.spec_variant(spack_build.package_spec(system, 'npb'), 'classes') == ['S', 'W']
        assert spack_build.system_settings(system)['npb_class'] == npb_class
        assert spack_build.environment_map(system)['mpich4'] == 'mpich@4.0'
    names = spack_build.spec_variant(spack_build.package_spec('local', 'npb'), 'names')
    assert sorted(names) == sorted(['is', 'ep', 'cg', 'mg', 'ft', 'lu', 'bt', 'sp'])
    with pytest.raises(BuildSystemError, match='not in config/spack/local'):
        spack_build.package_spec('local', 'hpl')


def test_configure_uses_the_locked_environment_under_deps_without_concretizing(deps, tmp_path):
    env = str(lock(deps, 'local'))
    fx = FakeFixture('local', 'mpich4', tmp_path / 'stage')
    spack_build.configure(fx)
    bs = fx.build_system
    assert bs.environment == env and bs.specs == [] and not bs.emit_load_cmds
    cmds = bs.emit_build_commands(None)
    assert cmds == [f'spack -e {env} install --fail-fast netregress@develop +mpi ^mpich@4.0']
    assert not any(' add ' in c or 'concretize' in c or 'env create' in c for c in cmds)
    assert fx.env_vars['PATH'] == '/opt/spack/bin:$PATH'          # the Spack that concretized it
    assert fx.kernels_dir == os.path.join(str(tmp_path / 'stage'), 'spack-prefix', 'bin')
    assert f'spack -e {env} location -i netregress@develop +mpi ^mpich@4.0' in fx.postbuild_cmds[0]


def test_environment_extra_overrides_the_map(deps, tmp_path):
    lock(deps, 'local')
    fx = FakeFixture('local', 'openmpi4', tmp_path, extras={'spack_mpi': 'openmpi@4.1.4'})
    spack_build.configure_package(fx, 'osu-micro-benchmarks@7.4', 'libexec/osu-micro-benchmarks/mpi')
    assert fx.build_system.install_opts[-1] == 'osu-micro-benchmarks@7.4 ^openmpi@4.1.4'
    assert fx.kernels_dir.endswith('spack-prefix/libexec/osu-micro-benchmarks/mpi')


def fake_spack(tmp_path: Path, answer: str, status: int = 0) -> str:
    """A `spack` that, asked `-e ENV python SCRIPT SPEC...`, records its arguments and prints ``answer`` (on stderr
    when it fails, as Spack prints its errors)."""
    exe = tmp_path / 'bin' / 'spack'
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/spack-args\n'
                   f'echo \'{answer}\' >&{2 if status else 1}\nexit {status}\n')
    exe.chmod(0o755)
    return str(exe)


def test_an_installed_package_is_linked_not_installed_again(deps, tmp_path, monkeypatch):
    """Spack says the environment's root for this MPI is installed: the fixture links its prefix (no `spack
    install`, no `spack location`); one `spack python` call answers for every package and MPI of the system."""
    env = lock(deps, 'local')
    prefix = tmp_path / 'opt' / 'osu-7.4-abc'
    (prefix / 'libexec').mkdir(parents=True)
    osu = spack_build.package_spec('local', 'osu-micro-benchmarks')
    exe = fake_spack(tmp_path, json.dumps({f'{osu} ^openmpi@4.1': str(prefix), f'{osu} ^mpich@4.0': ''}))
    monkeypatch.setattr(spack_build, 'spack_exe', lambda: exe)
    spack_build.installed_prefixes.cache_clear()

    def configured(environ, extras=None, reuse=True):
        fx = FakeFixture('local', environ, tmp_path / 'stage', extras=extras)
        spack_build.configure_package(fx, osu, 'libexec', reuse_installed=reuse)
        return fx
    try:
        fx = configured('openmpi4')
        assert isinstance(fx.build_system, CustomBuild) and fx.postbuild_cmds == []
        args = (tmp_path / 'spack-args').read_text().splitlines()
        assert args[:4] == ['-e', str(env), 'python', str(ROOT / 'reframe_tests/netregress/measure/spack_installed.py')]
        asked = args[4:]
        assert f'{osu} ^openmpi@4.1' in asked and f'{osu} ^mpich@5.0' in asked
        assert not any(a.startswith('netregress@') for a in asked)   # a develop spec always goes through install
        assert len(asked) == len(set(asked)) == 4 * len(set(spack_build.environment_map('local').values()))
        (tmp_path / 'stage').mkdir()
        subprocess.run(['sh', '-ec', '; '.join(fx.build_system.emit_build_commands(None))], check=True,
                       cwd=tmp_path / 'stage')
        assert os.path.realpath(fx.kernels_dir) == str(prefix / 'libexec')
        assert fx.spack_spec == f'{osu} ^openmpi@4.1'
        shutil.rmtree(prefix)                      # a prefix gone since Spack answered: the build fails, naming it
        gone = subprocess.run(['sh', '-ec', '; '.join(fx.build_system.emit_build_commands(None))],
                              cwd=tmp_path / 'stage', capture_output=True, text=True)
        assert gone.returncode == 1 and f'{prefix}: no such directory' in gone.stderr
        # not installed, not asked (another MPI spec), not to be reused (the kernels' path), or no answer at all:
        # the full install path
        for fx in (configured('mpich4'), configured('openmpi4', extras={'spack_mpi': 'openmpi@4.1.4'}),
                   configured('openmpi4', reuse=False)):
            assert isinstance(fx.build_system, Spack) and fx.build_system.install_opts[-1] == fx.spack_spec
            assert 'location -i' in fx.postbuild_cmds[0]
        spack_build.installed_prefixes.cache_clear()
        monkeypatch.setattr(spack_build, 'spack_exe', lambda: fake_spack(tmp_path, 'Error: no env', 1))
        warnings = []
        monkeypatch.setattr(spack_build, 'getlogger', lambda: types.SimpleNamespace(warning=warnings.append))
        assert spack_build.installed_prefixes('local') == {}
        assert len(warnings) == 1 and 'could not say which packages of local are installed' in warnings[0]
        assert warnings[0].endswith(': Error: no env): every package fixture runs spack install')
    finally:
        spack_build.installed_prefixes.cache_clear()


def test_absent_spack_is_a_skip_reason_and_every_fixable_cause_a_problem(deps, monkeypatch, use_site):
    assert spack_build.absent_reason() is None
    assert 'tools/spack-env concretize local' in spack_build.problem('vcluster')   # it builds from local's
    use_site('site-example')                                    # a site's own environment: the command names it
    assert f"tools/spack-env --site {SITES['site-example']} concretize site-example" in \
        spack_build.problem('site-example')
    use_site('vcluster')
    assert 'no Spack environment config/spack/nosuch/' in spack_build.problem('nosuch')
    lock(deps, 'local')
    assert spack_build.problem('local', ('npb', 'osu-micro-benchmarks', 'netpipe', 'intel-mpi-benchmarks')) is None
    assert 'hpl is not in' in spack_build.problem('local', ('hpl',))
    lock(deps, 'vcluster', source_sha='0' * 64)               # concretized from an older description
    assert 'changed since' in spack_build.problem('vcluster')
    monkeypatch.setattr(spack_build, 'spack_exe', lambda: None)
    assert 'Spack is not set up' in spack_build.absent_reason()
    assert 'Spack is not set up' in spack_build.unavailable_reason('local')


def test_unknown_environment_and_missing_lock_fail_clearly(deps, tmp_path, monkeypatch):
    with pytest.raises(BuildSystemError, match='tools/spack-env concretize local'):
        spack_build.configure(FakeFixture('vcluster', 'mpich4', tmp_path))
    lock(deps, 'local')
    with pytest.raises(BuildSystemError, match='no Spack MPI for environment nompi on local'):
        spack_build.configure(FakeFixture('local', 'nompi', tmp_path))
    # the vcluster builds from local's environment: its lock serves both
    fx = FakeFixture('vcluster', 'mpich4', tmp_path)
    spack_build.configure(fx)
    assert fx.build_system.environment == str(spack_build.env_dir('local')) and spack_build.problem('vcluster') is None
    monkeypatch.setattr(spack_build, 'spack_exe', lambda: None)
    with pytest.raises(BuildSystemError, match='build path spack: Spack is not set up'):
        spack_build.configure(FakeFixture('local', 'mpich4', tmp_path))


def test_status_names_exactly_what_a_run_without_spack_leaves_out(deps, monkeypatch):
    text, ok = spack_build.status('vcluster')
    assert not ok and 'NOT usable for vcluster' in text and 'NETREGRESS_SPACK=none make validate' in text
    lock(deps, 'vcluster')
    text, ok = spack_build.status('vcluster')
    assert ok and 'built through it for every MPI build' in text
    monkeypatch.setattr(spack_build, 'spack_exe', lambda: None)
    text, ok = spack_build.status('vcluster')
    assert ok and text.startswith('NO Spack: ')
    envs = [e['name'] for e in spack_build._system_environments('vcluster')]
    assert {'openmpi4', 'mpich4', 'openmpi5', 'mpich5', 'intelmpi'} <= set(envs)
    assert f'osu (every case: {", ".join(envs)})' in text
    # Debian ships NPmpi for its own two MPIs; the Intel MPI wheel ships IMB-MPI1: they are not in the lists
    no_np = text.split('netpipe_mpi for ')[1].split(' (')[0].split(', ')
    no_imb = text.split('imb_pingpong for ')[1].split(' (')[0].split(', ')
    assert {'openmpi5', 'mpich5', 'intelmpi'} <= set(no_np) and not {'openmpi4', 'mpich4'} & set(no_np)
    assert {'openmpi4', 'mpich4', 'openmpi5', 'mpich5'} <= set(no_imb) and 'intelmpi' not in no_imb
    # NAS without Spack only where tools/bootstrap built NPB outside it (LAM/MPI, extras.npb_dir)
    no_npb = text.split('nas for ')[1].split(' (')[0].split(', ')
    assert {'openmpi4', 'mpich4', 'openmpi5', 'mpich5', 'intelmpi'} <= set(no_npb)
    has_npb = {e['name'] for e in spack_build._system_environments('vcluster') if e['extras'].get('npb_dir')}
    assert not has_npb & set(no_npb)


def test_variant_prints_what_the_nas_check_reads(capsys):
    """tools/bootstrap builds LAM's NPB in these classes: the same parsing as nas.system_class, every system."""
    assert spack_build.main(['variant', 'npb', 'classes', 'vcluster', 'local']) == 0
    assert capsys.readouterr().out.split() == ['S', 'W']        # local's class S, vcluster's W (config/spack/)
    assert spack_build.main(['variant', 'npb', 'classes', 'no-such-system']) == 1
    assert 'npb is not in config/spack/no-such-system/spack.yaml' in capsys.readouterr().err


def test_prepare_generates_the_environment_outside_the_checkout(tmp_path, use_site):
    tool = str(ROOT / 'tools' / 'spack-env')
    for site_dir in set(SITES.values()) - {None}:
        env = {**os.environ, 'NETREGRESS_DEPS': str(tmp_path), 'NETREGRESS_SITE': str(site_dir)}
        out = subprocess.run([tool, 'prepare', '--all'], capture_output=True, text=True, env=env, timeout=60)
        assert out.returncode == 0, out.stderr
    env = {**os.environ, 'NETREGRESS_DEPS': str(tmp_path)}
    for system in SYSTEMS:
        use_site(system)
        gen = yaml.safe_load((tmp_path / 'spack' / 'envs' / spack_build.env_dir(system).name / 'spack.yaml')
                             .read_text())['spack']
        assert gen['repos'] == {'netregress': str(ROOT / 'spack_repo' / 'netregress')}
        assert gen['develop']['netregress']['path'] == str(ROOT)
        assert 'include' not in gen and 'config' not in gen
        assert gen['definitions'] == yaml.safe_load(
            (spack_build.source_dir(system) / 'spack.yaml').read_text())['spack']['definitions']
    # a lock made from another description is reported stale
    (tmp_path / 'spack' / 'envs' / 'local' / 'spack.lock').write_text('{}')
    out = subprocess.run([tool, 'prepare', 'local'], capture_output=True, text=True, env=env, timeout=60)
    assert 'STALE' in out.stdout and 'tools/spack-env concretize local' in out.stdout


def test_prepare_splits_the_roots_into_one_environment_per_mpi_build(tmp_path):
    """The environment the checks use includes the concrete specs of one part per MPI build (concretized side by
    side); each part is the description with that one MPI build. A description without one ``$^NAME`` row of two
    entries or more, or with a conditional one, stays whole."""
    env = {**os.environ, 'NETREGRESS_DEPS': str(tmp_path)}
    out = subprocess.run([str(ROOT / 'tools' / 'spack-env'), 'prepare', 'local'], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    source = yaml.safe_load((ROOT / 'config' / 'spack' / 'local' / 'spack.yaml').read_text())['spack']
    mpis = next(d['mpis'] for d in source['definitions'] if 'mpis' in d)
    envs = tmp_path / 'spack' / 'envs'
    whole = yaml.safe_load((envs / 'local' / 'spack.yaml').read_text())['spack']
    assert 'specs' not in whole
    assert whole['include_concrete'] == [str(envs / 'local.parts' / str(i)) for i in range(len(mpis))]
    for i, mpi in enumerate(mpis):
        part = yaml.safe_load((envs / 'local.parts' / str(i) / 'spack.yaml').read_text())['spack']
        assert part['specs'] == source['specs'] and part['develop'] == whole['develop']
        assert part['definitions'] == [{'mpis': [mpi]} if 'mpis' in d else d for d in source['definitions']]
    split = spackparts.split_by_dependency
    matrix = {'specs': [{'matrix': [['$pkgs'], ['$^mpis']]}]}
    assert split({**matrix, 'definitions': [{'pkgs': ['a']}, {'mpis': ['m1', 'm2']}]}) == ('mpis', ['m1', 'm2'])
    assert split({**matrix, 'definitions': [{'mpis': ['m1']}]}) is None
    assert split({**matrix, 'definitions': [{'mpis': ['m1', 'm2'], 'when': 'True'}]}) is None
    assert split({'specs': ['a ^m1', 'a ^m2'], 'definitions': [{'mpis': ['m1', 'm2']}]}) is None
    assert split({'specs': [{'matrix': [['$^x'], ['$^mpis']]}], 'definitions': [{'mpis': ['m1', 'm2']}]}) is None


def test_parts_are_concretized_each_into_its_log_and_a_failed_one_is_named(tmp_path):
    """Every part is solved (side by side) with the flags given; a part whose solve fails is returned with its
    log's tail said, the others still run. Spack is a stand-in failing for part 1."""
    fake = tmp_path / 'spack'
    fake.write_text('#!/bin/sh\necho "solving $2 $4"\ncase $2 in */1) echo "no solution" >&2; exit 1;; esac\n')
    fake.chmod(0o755)
    parts = [tmp_path / str(i) for i in range(3)]
    for part in parts:
        part.mkdir()
    said = []
    failed = spackparts.concretize(str(fake), parts, ['-f'], say=said.append)
    assert failed == [parts[1] / spackparts.LOG]
    assert all((p / 'concretize.log').read_text().startswith(f'solving {p} -f') for p in parts)
    assert any('part 1 NOT concretized' in line and 'exit 1' in line for line in said)
    assert any('no solution' in line for line in said)


def test_a_spack_without_include_concrete_is_named(tmp_path):
    """Concretizing one part per MPI build needs Spack's include_concrete (0.22): an older Spack on PATH is named
    before anything is concretized."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'spack').write_text('#!/bin/sh\necho 0.21.2\n')
    (bin_dir / 'spack').chmod(0o755)
    env = {**os.environ, 'PATH': f'{bin_dir}:/usr/bin:/bin', 'NETREGRESS_DEPS': str(tmp_path / 'deps')}
    out = subprocess.run([str(ROOT / 'tools' / 'spack-env'), 'concretize', 'local'], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 2 and 'is Spack 0.21.2' in out.stderr and 'Spack 0.22 or later' in out.stderr
    assert all(spackparts.has_include_concrete(v) for v in ('0.22.0', '0.23.1', '1.1.0 (2e907202bc)', '10.0.1'))
    assert not any(spackparts.has_include_concrete(v) for v in ('0.21.2', '0.9.1', '', 'spack: not found'))


def test_spack_env_usage_errors(tmp_path):
    tool = str(ROOT / 'tools' / 'spack-env')
    env = {**os.environ, 'PATH': '/usr/bin:/bin', 'NETREGRESS_DEPS': str(tmp_path)}
    out = subprocess.run([tool, 'concretize', 'nosuch'], capture_output=True, text=True, env=env)
    assert out.returncode == 2 and "no Spack environment for system 'nosuch'" in out.stderr
    out = subprocess.run([tool, 'install', 'local'], capture_output=True, text=True, env=env)
    assert out.returncode == 2 and 'not concretized' in out.stderr and 'concretize local' in out.stderr
    out = subprocess.run([tool, 'systems'], capture_output=True, text=True)
    assert out.stdout.split() == ['local']          # the embedded one; the vcluster site builds from it
    out = subprocess.run([tool, '--site', str(SITES['vcluster']), 'environment', 'vcluster'], capture_output=True,
                         text=True)
    assert out.stdout.split() == ['local']


def _prepared_with_logging_spack(tmp_path):
    """(tools/spack-env, its environment, the lock path of `local`, the log) after ``prepare local``, with a
    stand-in Spack that logs its calls."""
    deps = tmp_path / 'deps'
    fake = deps / 'spack' / 'bin' / 'spack'
    fake.parent.mkdir(parents=True)
    log = tmp_path / 'calls.log'
    fake.write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    fake.chmod(0o755)
    env = {**os.environ, 'NETREGRESS_DEPS': str(deps)}
    tool = str(ROOT / 'tools' / 'spack-env')
    assert subprocess.run([tool, 'prepare', 'local'], capture_output=True, env=env, timeout=60).returncode == 0
    return tool, env, deps / 'spack' / 'envs' / 'local' / 'spack.lock', log


def test_install_takes_the_lock_as_it_is(tmp_path):
    """``spack install`` alone solves the environment again on its way; for an environment that includes its parts'
    concrete specs and whose lock came from a build cache (the parts have no lock here) that solve drops every root.
    tools/spack-env install never concretizes: ``--only-concrete``. Spack is a stand-in that logs its calls."""
    tool, env, lock, log = _prepared_with_logging_spack(tmp_path)
    lock.write_text('{}')
    for extra in ([], ['osu-micro-benchmarks']):
        log.write_text('')
        out = subprocess.run([tool, 'install', 'local', *extra], capture_output=True, text=True, env=env, timeout=60)
        assert out.returncode == 0, out.stderr
        assert log.read_text().split() == ['-e', str(lock.parent), 'install', '--only-concrete',
                                           *(['--fail-fast', *extra] if extra else [])]


def _lock_doc(roots: dict, parts: list[dict]) -> dict:
    """A lock shaped like tools/spack-env's: roots {name: developed?} in the main document or in included parts."""
    def doc(names):
        specs = {f'h{n}': {'name': n, 'parameters': {'dev_path': '/src'} if dev else {}}
                 for n, dev in names.items()}
        specs['hdep'] = {'name': 'gcc-runtime', 'parameters': {}}          # a dependency, not a root
        return {'roots': [{'hash': f'h{n}', 'spec': n} for n in names], 'concrete_specs': specs}
    top = doc(roots)
    top['include_concrete'] = {f'/envs/local.parts/{i}': doc(p) for i, p in enumerate(parts)}
    return top


def test_released_roots_are_every_root_but_the_developed_ones():
    """Our kernels (a develop spec) are built by what runs them, never by the bootstrap's Spack install as well."""
    doc = _lock_doc({}, [{'netregress': True, 'osu-micro-benchmarks': False},
                         {'netregress': True, 'npb': False, 'osu-micro-benchmarks': False}])
    assert carriedlock.released_roots(doc) == ['npb', 'osu-micro-benchmarks']
    assert carriedlock.released_roots(_lock_doc({'netregress': True}, [])) == []
    assert [s['name'] for s in carriedlock.concrete_specs(doc) if carriedlock.is_develop(s)] == ['netregress'] * 2


def test_install_released_names_every_root_but_the_developed_ones(tmp_path):
    """tools/bootstrap's install: the released packages of the lock by name, the whole DAG of each, no --fail-fast
    (as the whole environment's install: what can be built is); a lock that is no lock is named."""
    tool, env, lock, log = _prepared_with_logging_spack(tmp_path)
    lock.write_text(json.dumps(_lock_doc({}, [{'netregress': True, 'osu-micro-benchmarks': False,
                                               'intel-mpi-benchmarks': False}])))
    log.write_text('')
    out = subprocess.run([tool, 'install', 'local', '--released'], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert log.read_text().split() == ['-e', str(lock.parent), 'install', '--only-concrete', 'intel-mpi-benchmarks',
                                       'osu-micro-benchmarks']
    lock.write_text(json.dumps(_lock_doc({'netregress': True}, [])))
    log.write_text('')
    out = subprocess.run([tool, 'install', 'local', '--released'], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0 and 'no root but developed ones' in out.stdout and log.read_text() == ''
    out = subprocess.run([tool, 'install', 'local', 'npb', '--released'], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 2 and 'SPEC... or --released, not both' in out.stderr
    for bad in ('[1, 2', '[1, 2]', '{"roots": [{"hash": "a"}], "concrete_specs": {"a": {}}}'):
        lock.write_text(bad)
        out = subprocess.run([tool, 'install', 'local', '--released'], capture_output=True, text=True, env=env,
                             timeout=60)
        assert out.returncode == 1 and 'not a Spack lock' in out.stderr and 'Traceback' not in out.stderr, bad
    assert log.read_text() == ''


def test_mirror_registers_only_what_is_missing(tmp_path):
    """tools/spack-env mirror asks Spack's user scope once; registered as wanted, it changes nothing there (each
    Spack call costs seconds, and every bootstrap asks); otherwise it replaces our mirror and snapshot repo.
    Spack is a stand-in that logs its calls and answers the user-scope question from a file."""
    deps, mirror = tmp_path / 'deps', tmp_path / 'mirror'
    (mirror / '_source-cache' / 'archive').mkdir(parents=True)
    fake = deps / 'spack' / 'bin' / 'spack'
    fake.parent.mkdir(parents=True)
    fake.write_text('#!/bin/sh\necho "$*" >> "$SPACK_LOG"\n'
                    '[ "$1" = python ] && cat "$SPACK_STATE"\nexit 0\n')
    fake.chmod(0o755)
    state, log = tmp_path / 'state.json', tmp_path / 'calls.log'
    env = {**os.environ, 'NETREGRESS_DEPS': str(deps), 'SPACK_LOG': str(log), 'SPACK_STATE': str(state)}
    tool = str(ROOT / 'tools' / 'spack-env')

    def run(*args: str) -> list[str]:
        log.write_text('')
        out = subprocess.run([tool, 'mirror', *args], capture_output=True, text=True, env=env, timeout=60)
        assert out.returncode == 0, out.stderr
        return [line.split()[0] + ' ' + line.split()[1] for line in log.read_text().splitlines()]

    url = f'file://{mirror}'
    state.write_text(json.dumps({'mirrors': {'netregress-local': {'url': url}}, 'repos': {'builtin': '/b'}}))
    assert run(str(mirror)) == ['python -c']                       # as wanted: only the question
    state.write_text(json.dumps({'mirrors': {'netregress-local': 'file:///elsewhere'}, 'repos': {}}))
    assert run(str(mirror)) == ['python -c', 'mirror remove', 'mirror add']
    state.write_text(json.dumps({'mirrors': {'netregress-local': {'url': url}}, 'repos': {}}))
    assert run('--off') == ['python -c', 'mirror remove']
    state.write_text(json.dumps({'mirrors': {}, 'repos': {}}))
    assert run('--off') == ['python -c']
    state.write_text('')                                            # Spack could not say: register again
    assert run(str(mirror)) == ['python -c', 'mirror remove', 'repo remove', 'mirror add']


def test_snapshot_packs_reproducibly_under_its_own_digest(tmp_path):
    src = tmp_path / 'src' / 'osu-micro-benchmarks-7.4'
    (src / 'c').mkdir(parents=True)
    (src / 'configure').write_text('#!/bin/sh\n')
    (src / 'c' / 'osu_latency.c').write_text('int main(void) { return 0; }\n')
    tool = str(ROOT / 'tools' / 'spack-snapshot')
    digests = []
    for mirror in (tmp_path / 'm1', tmp_path / 'm2'):
        os.utime(src / 'configure', (1e9 + len(digests), 1e9 + len(digests)))    # mtimes do not matter
        (src / 'c' / 'osu_latency.c').chmod(0o664 if digests else 0o644)       # nor does the umask of a checkout
        out = subprocess.run([tool, 'add', str(mirror), 'osu-micro-benchmarks', '7.4', str(src)],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        manifest = yaml.safe_load((mirror / 'netregress-snapshots.yaml').read_text())['snapshots']
        assert [(e['package'], e['version']) for e in manifest] == [('osu-micro-benchmarks', '7.4')]
        digest = manifest[0]['sha256']
        archive = mirror / '_source-cache' / 'archive' / digest[:2] / f'{digest}.tar.gz'
        assert hashlib.sha256(archive.read_bytes()).hexdigest() == digest
        listing = subprocess.run(['tar', 'tzf', str(archive)], capture_output=True, text=True).stdout.split()
        assert 'osu-micro-benchmarks-7.4/c/osu_latency.c' in listing
        digests.append(digest)
    assert digests[0] == digests[1]
    # the same package and version again replaces its entry
    out = subprocess.run([tool, 'add', str(tmp_path / 'm1'), 'osu-micro-benchmarks', '7.4', str(src)],
                         capture_output=True, text=True, timeout=60)
    assert len(yaml.safe_load((tmp_path / 'm1' / 'netregress-snapshots.yaml').read_text())['snapshots']) == 1


def test_snapshot_find_returns_a_verified_archive_and_refuses_a_replaced_one(tmp_path):
    """What tools/bootstrap builds against LAM/MPI comes from here: the upstream archive under the recipe's sha256,
    else a recorded snapshot; a file whose bytes do not match its digest is an error, never used."""
    tool = str(ROOT / 'tools' / 'spack-snapshot')
    src = tmp_path / 'NPB3.4.1'
    src.mkdir()
    (src / 'README').write_text('npb\n')
    mirror = tmp_path / 'm'
    assert subprocess.run([tool, 'add', str(mirror), 'npb', '3.4.1', str(src)], capture_output=True).returncode == 0
    snap = yaml.safe_load((mirror / 'netregress-snapshots.yaml').read_text())['snapshots'][0]
    upstream_sha = hashlib.sha256(b'upstream').hexdigest()

    def find(*args):
        return subprocess.run([tool, 'find', *args], capture_output=True, text=True, timeout=60)

    out = find('npb', '3.4.1', '--sha256', upstream_sha, str(tmp_path / 'absent'), str(mirror))
    assert out.returncode == 0 and out.stdout.strip() == str(mirror / snap['archive'])
    upstream = mirror / '_source-cache' / 'archive' / upstream_sha[:2] / f'{upstream_sha}.tar.gz'
    upstream.parent.mkdir(parents=True)
    upstream.write_bytes(b'upstream')
    assert find('npb', '3.4.1', '--sha256', upstream_sha, str(mirror)).stdout.strip() == str(upstream)
    out = find('npb', '3.4.2', str(mirror))
    assert out.returncode == 1 and f'no archive of npb@3.4.2 in {mirror}' in out.stderr
    (mirror / snap['archive']).write_bytes(b'replaced')
    out = find('npb', '3.4.1', str(mirror))
    assert out.returncode == 1 and 'expected ' + snap['sha256'] in out.stderr


@pytest.mark.parametrize('args, message', [
    (['Bad_Name', '1.0', 'SRC'], 'lower-case Spack names'),
    (['osu-micro-benchmarks', '1.0 beta', 'SRC'], 'is not a Spack version'),
    (['osu-micro-benchmarks', '7.4', 'MISSING'], 'does not exist'),
    (['osu-micro-benchmarks', '7.4', 'FILE'], 'neither a directory nor an archive'),
])
def test_snapshot_rejects_bad_input(tmp_path, args, message):
    (tmp_path / 'SRC').mkdir()
    (tmp_path / 'FILE').write_text('x')
    args = [str(tmp_path / a) if a in ('SRC', 'MISSING', 'FILE') else a for a in args]
    out = subprocess.run([str(ROOT / 'tools' / 'spack-snapshot'), 'add', str(tmp_path / 'm'), *args],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and message in out.stderr


def test_snapshot_recipe_declares_the_snapshot_digest_on_the_builtin_recipe(tmp_path):
    """The recipe subclasses the builtin one; versions and digests are data beside it, never code (issue 29:
    tests/python/test_spack_snapshots.py imports it against stubs and feeds it malicious manifests)."""
    tool = load_tool('spack-env')
    entries = [{'package': 'osu-micro-benchmarks', 'version': '7.4', 'sha256': 'ab' * 32,
                'archive': f'_source-cache/archive/ab/{"ab" * 32}.tar.gz'}]
    tool.snapshots.write_recipes(tmp_path, entries)
    text = (tmp_path / 'packages' / 'osu_micro_benchmarks' / 'package.py').read_text()
    assert 'from spack_repo.builtin.packages.osu_micro_benchmarks.package import OsuMicroBenchmarks as _Builtin' \
        in text
    assert 'class OsuMicroBenchmarks(_Builtin):' in text and '7.4' not in text
    data = json.loads((tmp_path / 'packages' / 'osu_micro_benchmarks' / 'snapshots.json').read_text())
    assert data['versions'] == [{'version': '7.4', 'sha256': 'ab' * 32}]
    compile(text, 'package.py', 'exec')
    assert 'class IntelMpiBenchmarks(' in tool.snapshots.recipe('intel-mpi-benchmarks', '{}')


def test_spack_setup_without_checkouts_says_why(tmp_path):
    (tmp_path / 'venv' / 'bin').mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith('NETREGRESS_SPACK')}
    env.update(NETREGRESS_DEPS=str(tmp_path))
    out = subprocess.run([str(ROOT / 'tools' / 'spack-setup'), '--no-clone'], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 1 and 'no spack checkout' in out.stderr and 'not cloning' in out.stderr
    env.update(NETREGRESS_SPACK=str(tmp_path))
    out = subprocess.run([str(ROOT / 'tools' / 'spack-setup')], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 1 and f'NETREGRESS_SPACK={tmp_path} is not a spack checkout' in out.stderr


def test_externals_helper_prints_packages_yaml(tmp_path):
    out = subprocess.run([str(ROOT / 'tools' / 'spack-externals'), '--print'], capture_output=True, text=True,
                         timeout=60, env={**os.environ, 'NETREGRESS_DEPS': str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith('# Written by tools/spack-externals')
    doc = yaml.safe_load(out.stdout)['packages']
    assert all(p['buildable'] is False for p in doc.values())
    if os.path.exists('/usr/bin/mpicc.mpich'):
        mpich = [e for e in doc['mpich']['externals'] if e['spec'].startswith('mpich@4')]
        assert mpich and mpich[0]['prefix'] == str(tmp_path / 'spack' / 'mpi-prefixes' / 'mpich4')


@needs_spack
def test_spack_answers_which_roots_are_installed():
    """spack_installed.py under the real Spack: an answer for every package root and MPI of the environment, and
    a prefix only where it is an installed directory."""
    if spack_build.problem('local') is not None:
        pytest.skip(f'the local environment cannot be used here: {spack_build.problem("local")}')
    spack_build.installed_prefixes.cache_clear()
    answer = spack_build.installed_prefixes('local')
    packages = [p for p in spack_build.root_specs('local') if not p.startswith('netregress@')]
    assert len(answer) == len(packages) * len(set(spack_build.environment_map('local').values()))
    assert all(os.path.isdir(prefix) for prefix in answer.values() if prefix)


@needs_spack
def test_generated_environment_loads_in_real_spack():
    env = spack_build.env_dir('local')
    subprocess.run([str(ROOT / 'tools' / 'spack-env'), 'prepare', 'local'], check=True, capture_output=True)
    out = subprocess.run([spack_build.spack_exe(), '-e', str(env), 'config', 'get', 'repos'],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert str(ROOT / 'spack_repo' / 'netregress') in out.stdout


def test_lock_targets_are_the_built_specs_targets(tmp_path):
    """adopt-lock reads the CPU targets of a carried lock's built specs (externals are the host's, not built)."""
    lock = tmp_path / 'spack.lock'
    lock.write_text(json.dumps({'concrete_specs': {
        'a': {'name': 'osu-micro-benchmarks', 'arch': {'target': {'name': 'zen3', 'features': ['avx2']}}},
        'b': {'name': 'npb', 'arch': {'target': 'x86_64_v3'}},
        'c': {'name': 'openmpi', 'external': {'path': '/usr'}, 'arch': {'target': 'icelake'}}}}))
    assert carriedlock.lock_targets(lock) == {'zen3', 'x86_64_v3'}
    # an environment of parts (tools/spack-env): the specs of the included environments, nested ones too
    part = {'roots': [], 'concrete_specs': {'d': {'name': 'imb', 'arch': {'target': 'icelake'}}}}
    lock.write_text(json.dumps({'concrete_specs': {}, 'include_concrete': {
        '/p/0': part, '/p/1': {'concrete_specs': {}, 'include_concrete': {'/p/2': {'concrete_specs': {
            'e': {'name': 'npb', 'arch': {'target': 'zen3'}}}}}}}}))
    assert carriedlock.lock_targets(lock) == {'icelake', 'zen3'}
    lock.write_text('not json')
    assert carriedlock.lock_targets(lock) == set()


def test_a_carried_lock_names_why_it_is_not_adopted(tmp_path):
    """Description, $NETREGRESS_DEPS and checkout are compared before the CPU (no Spack call for those)."""
    stamp = {'source_sha256': 'abc', 'deps': '/d', 'checkout': '/c'}
    assert carriedlock.refusal(tmp_path, stamp, ('abc', 'old'), Path('/d'), Path('/c'), 'spack') == 'none carried'
    (tmp_path / 'spack.lock').write_text('{}')
    assert carriedlock.refusal(tmp_path, stamp, ('xyz', 'old'), Path('/d'), Path('/c'), 'spack') == \
        'made from another description'
    assert 'NETREGRESS_DEPS=/d, here /e' in carriedlock.refusal(tmp_path, stamp, ('abc', 'old'), Path('/e'),
                                                                Path('/c'), 'spack')
    assert 'checkout /c' in carriedlock.refusal(tmp_path, stamp, ('abc', 'old'), Path('/d'), Path('/x'), 'spack')
    # a lock without built specs: nothing for this CPU to run, adopted without asking Spack
    assert carriedlock.refusal(tmp_path, stamp, ('abc', 'old'), Path('/d'), Path('/c'), '/nonexistent/spack') == ''


def test_a_description_is_current_by_its_meaning_not_its_comments(tmp_path):
    """A reworded comment or another indentation keeps every lock made from the description; a changed value does
    not. Locks made before recorded the bytes' digest, which stays accepted while the bytes are the same."""
    from netregress.measure import site
    desc = tmp_path / 'spack.yaml'
    desc.write_text('spack:\n  # one DAG per MPI\n  concretizer:\n    unify: when_possible\n  specs: [a, b]\n')
    meaning, raw = site.spack_description_digests(desc)
    assert raw == hashlib.sha256(desc.read_bytes()).hexdigest()
    desc.write_text('spack:\n  # a reworded comment\n  concretizer: {unify: when_possible}\n  specs:\n  - a\n  - b\n')
    assert site.spack_description_digests(desc)[0] == meaning
    desc.write_text('spack:\n  concretizer: {unify: false}\n  specs: [a, b]\n')
    assert site.spack_description_digests(desc)[0] != meaning
    desc.write_text('spack: [unclosed\n')
    with pytest.raises(site.SiteError, match='spack.yaml: not YAML'):
        site.spack_description_digests(desc)


@needs_spack
def test_a_lock_built_for_another_cpu_is_not_adopted():
    """Spack's archspec decides: this host runs its own generic level, not a microarchitecture of another vendor."""
    host, _ = carriedlock.foreign_targets(spack_build.spack_exe(), set())
    if not host.startswith(('x86_64', 'zen', 'icelake', 'skylake', 'cascadelake', 'sapphirerapids', 'haswell',
                            'broadwell')) or host == 'x86_64':
        pytest.skip(f'a test for x86-64 microarchitectures; this host is {host}')
    other_vendor = 'icelake' if host.startswith('zen') else 'zen3'
    host, foreign = carriedlock.foreign_targets(spack_build.spack_exe(),
                                                {host, 'x86_64', other_vendor, 'no-such-target'})
    assert foreign == sorted({other_vendor, 'no-such-target'}), (host, foreign)


def test_bootstrap_honours_netregress_deps(tmp_path):
    """Everything bootstrap checks or makes is under NETREGRESS_DEPS, the Spack phase included."""
    deps = tmp_path / 'state'
    out = subprocess.run([str(ROOT / 'tools' / 'bootstrap'), '--check', '--for', 'test', '--no-kernels'],
                         capture_output=True, text=True, timeout=120, env={**{k: v for k, v in os.environ.items() if k != 'NETREGRESS_SITE'}, 'NETREGRESS_DEPS': str(deps)})
    assert out.returncode == 1
    assert f'{deps}/venv (-e {ROOT}[dev]' in out.stdout and f'{deps}/mpi/openmpi5' in out.stdout
    assert f'Spack: set up after the venv ({deps}/venv) exists' in out.stdout
    assert '/.deps' not in out.stdout


@pytest.mark.skipif(not (ROOT / '.deps' / 'mpi' / 'mpich5' / 'lib' / 'libmpi.so').exists(), reason='no PyPI MPICH 5')
def test_externals_give_the_mpich5_wheel_the_library_name_spack_looks_for(tmp_path):
    """Spack's mpich recipe finds libmpich; the wheel has libmpi only (NPB failed with NoLibrariesError)."""
    deps = tmp_path / 'deps'
    (deps / 'mpi').mkdir(parents=True)
    (deps / 'mpi' / 'mpich5').symlink_to(ROOT / '.deps' / 'mpi' / 'mpich5')
    out = subprocess.run([str(ROOT / 'tools' / 'spack-externals'), '--print'], capture_output=True, text=True,
                         timeout=60, env={**os.environ, 'NETREGRESS_DEPS': str(deps)})
    assert out.returncode == 0, out.stderr
    prefix = deps / 'spack' / 'mpi-prefixes' / 'mpich5'
    assert os.path.realpath(prefix / 'lib' / 'libmpich.so') == os.path.realpath(deps / 'mpi' / 'mpich5' / 'lib' /
                                                                                'libmpi.so')
    mpich = [e for e in yaml.safe_load(out.stdout)['packages']['mpich']['externals'] if e['spec'].startswith('mpich@5')]
    assert mpich[0]['prefix'] == str(prefix)


@pytest.mark.parametrize('registered, args, calls', [
    ({'url': 'file://{cache}', 'binary': True, 'source': False}, ['{cache}'], []),      # as wanted: Spack not asked
    ({'url': 'file:///elsewhere', 'binary': True}, ['{cache}'], ['remove', 'add']),
    (None, ['{cache}'], ['remove', 'add']),
    ({'url': 'file://{cache}', 'binary': True}, ['--off'], ['remove'])])
def test_the_build_cache_is_registered_only_when_it_is_not_already(tmp_path, monkeypatch, registered, args, calls):
    tool = load_tool('spack-env')
    cache = tmp_path / 'cache'
    cache.mkdir()
    scope = {'mirrors': {tool.CACHE_NAME: {k: (v.format(cache=cache) if isinstance(v, str) else v)
                                           for k, v in registered.items()}} if registered else {}}
    asked = []
    monkeypatch.setattr(tool, 'user_scope', lambda: scope)
    monkeypatch.setattr(tool, 'spack', lambda *a, quiet=False: asked.append(a[1]) or 0)
    monkeypatch.setattr(tool, 'take_repo_index', lambda cache: 0)
    assert tool.main(['buildcache', *[a.format(cache=cache) for a in args]]) == 0 and asked == calls


def test_a_build_cache_that_is_no_directory_leaves_the_registration_alone(tmp_path, monkeypatch, capsys):
    tool = load_tool('spack-env')
    asked = []
    monkeypatch.setattr(tool, 'spack', lambda *a, quiet=False: asked.append(a) or 0)
    assert tool.main(['buildcache', str(tmp_path / 'missing')]) == 2
    assert asked == [] and capsys.readouterr().err == f'spack-env: {tmp_path / "missing"} is not a directory ' \
        '(tools/spack-env buildcache-push SYSTEM DIR makes one)\n'


def test_a_runner_takes_the_repository_index_of_exactly_its_own_recipes(tmp_path, monkeypatch):
    """Spack indexes its package repositories before its first install (85-100 s of a fresh runner's install from
    the build cache): the cache carries that index under the digest of the recipes, and a runner takes it only
    where its own recipes are the same, never over an index Spack already keeps."""
    recipes = tmp_path / 'builtin'
    (recipes / 'packages' / 'zlib').mkdir(parents=True)
    (recipes / 'packages' / 'zlib' / 'package.py').write_text('class Zlib: pass\n')
    cache = tmp_path / 'cache'
    cache.mkdir()

    def runner(name):
        deps = tmp_path / name
        (deps / 'spack' / 'bin').mkdir(parents=True)
        (deps / 'spack' / 'bin' / 'spack').write_text('#!/bin/sh\n')
        (deps / 'spack' / 'bin' / 'spack').chmod(0o755)
        (deps / 'spack' / 'user').mkdir()
        (deps / 'spack' / 'user' / 'repos.yaml').write_text(yaml.safe_dump({'repos': {'builtin': str(recipes)}}))
        monkeypatch.setenv('NETREGRESS_DEPS', str(deps))
        return load_tool('spack-env'), deps / 'spack' / 'user-cache' / 'misc'

    first, misc = runner('first')
    (misc / 'providers').mkdir(parents=True)
    (misc / 'providers' / 'builtin-specfile_v5-index.json').write_text('{"provider_index": {}}')
    (misc / 'tags').mkdir()
    (misc / 'tags' / 'builtin-specfile_v5-index.json').write_text('{"tags": {}}')
    (misc / 'tags' / 'a_site_repo-specfile_v5-index.json').write_text('{"tags": {}}')    # not in the digest
    assert first.push_repo_index(cache) == 2
    second, misc2 = runner('second')
    assert second.take_repo_index(cache) == 2
    assert (misc2 / 'providers' / 'builtin-specfile_v5-index.json').read_text() == '{"provider_index": {}}'
    assert second.take_repo_index(cache) == 0                     # Spack's own index is never replaced
    (recipes / 'packages' / 'zlib' / '__pycache__').mkdir()
    (recipes / 'packages' / 'zlib' / '__pycache__' / 'package.cpython-311.pyc').write_bytes(b'\0')
    third, misc3 = runner('third')
    assert third.take_repo_index(cache) == 2                      # a bytecode cache is not a recipe
    (recipes / 'packages' / 'zlib' / 'package.py').write_text('class Zlib: version = 2\n')
    fourth, misc4 = runner('fourth')
    assert fourth.take_repo_index(cache) == 0 and not misc4.exists()   # other recipes: Spack indexes them itself
    fifth, misc5 = runner('fifth')
    (tmp_path / 'fifth' / 'spack' / 'user' / 'repos.yaml').unlink()    # a user scope that names no repositories
    assert fifth.take_repo_index(cache) == 0 and not misc5.exists()
