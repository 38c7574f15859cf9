"""A site adds itself without editing netregress: one directory (NETREGRESS_SITE) holding its ReFrame settings,
interconnects, references and Spack environments, loaded by netregress.site and honoured by every entry point.
config/sites/example/ is what these tests load; the ``ib`` paths cover every MPI family we ship."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip('reframe')
from netregress.measure import interconnects, site, spack_build  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / 'config' / 'sites' / 'example'
REFRAME = ROOT / '.deps' / 'venv' / 'bin' / 'reframe'


@pytest.fixture
def at_site(monkeypatch):
    """Point the site layer at a directory; every cache of it is cleared before and after."""
    def use(path):
        monkeypatch.setenv(site.ENV, str(path))
        clear()
    def clear():
        site._config.cache_clear()
        interconnects._load_cached.cache_clear()
        spack_build._load_yaml.cache_clear()
    yield use
    monkeypatch.delenv(site.ENV, raising=False)
    clear()


def test_ib_paths_cover_every_mpi_family_we_ship():
    table = interconnects.load(ROOT / 'config' / 'interconnects.yaml')
    families = {e['extras']['mpi_family'] for e in site.environments('local') if 'mpi_family' in e.get('extras', {})}
    families = (families - {'lam'}) | {'openmpi-ucx'}        # LAM/MPI has no ib path; the example's Open MPI
    missing = sorted(f for f in families if f not in table.families('ib'))
    assert not missing, f'ib has no path for {missing}'
    for family in families:
        path = table.path('ib', family, {'iface': 'mlx5_0:1'})
        assert path.transport and path.env, family


def test_the_example_site_loads_through_the_layer(at_site):
    at_site(EXAMPLE)
    assert site.settings_files() == [ROOT / 'config' / 'settings.py', EXAMPLE / 'settings.py']
    assert site.reframe_args() == ['-C', str(ROOT / 'config' / 'settings.py'), '-C', str(EXAMPLE / 'settings.py')]
    assert [p['name'] for p in site.partitions('site-example')] == ['ib', 'eth']
    envs = [e['name'] for e in site.environments('site-example')]
    assert envs == ['site-gnu', 'ompi4', 'ompi5', 'mpich', 'impi']       # two fabrics, four MPI stacks
    assert site.partition_extras('site-example')['ib']['interconnects'] == {'ib': {'iface': 'mlx5_0:1'}}
    assert site.reference_dir() == ROOT / 'reference_values'          # a site the checkout ships
    assert spack_build.source_dir('site-example') == EXAMPLE / 'spack' / 'site-example'
    assert spack_build.source_dir('local') == ROOT / 'config' / 'spack' / 'local'
    assert 'local' in site.systems() and 'vcluster' not in site.systems()     # ours stay; the vcluster is a site
    with pytest.raises(site.SiteError, match="system 'nosuch' is not defined in .*example/settings.py"):
        site.system('nosuch')


def test_the_vcluster_is_a_site_that_matches_the_cluster_tools_vcluster_builds(at_site):
    """config/sites/vcluster describes the cluster config/vcluster.env builds: partition names, interfaces, subnets,
    the license every job takes; its MPI builds are the embedded environments, started the Slurm way."""
    vc_site = ROOT / 'config' / 'sites' / 'vcluster'
    at_site(vc_site)
    vc = site.read_env_file(ROOT / 'config' / 'vcluster.env')
    assert site.selected_system() == 'vcluster'
    parts = {p['name']: p for p in site.partitions('vcluster')}
    assert sorted(parts) == sorted([vc['VC_PARTITION_FAST'], vc['VC_PARTITION_GIGE']])
    for name, part in parts.items():
        fabric = part['extras']['interconnects'][name]
        assert fabric['iface'] == vc[f'VC_{name.upper()}_IFACE']
        assert fabric['subnet'] == vc[f'VC_{name.upper()}_SUBNET']
        assert f'--licenses={vc["VC_HOST_LICENSE"]}:1' in part['access']
        assert f'--partition={name}' in part['access']
        assert set(part['extras']['launch']) == set(part['environs']) - {'gnu'}
    assert {e['name'] for e in site.environments('vcluster')} == {e['name'] for e in site.environments('local')}
    assert site.spack_system_dir('vcluster') == vc_site / 'spack' / 'vcluster'
    assert spack_build.source_dir('vcluster') == ROOT / 'config' / 'spack' / 'local'   # built from local's
    assert site.modes()['full'] and '--exec-policy=async' in site.modes()['full']


def test_without_a_site_its_systems_are_not_there_and_say_how(at_site):
    with pytest.raises(site.SiteError, match='NETREGRESS_SITE=<site directory>'):
        site.system('site-example')


def test_a_bad_site_directory_is_named(at_site, tmp_path):
    at_site(tmp_path / 'nope')
    with pytest.raises(site.SiteError, match='no such directory'):
        site.directory()
    at_site(tmp_path)
    with pytest.raises(site.SiteError, match='has no settings.py'):
        site.directory()
    (tmp_path / 'settings.py').write_text('site_configuration = {"systems": [\n')
    with pytest.raises(site.SiteError, match='cannot load the ReFrame configuration'):
        site.systems()


def test_site_interconnects_merge_replace_and_remove(at_site, tmp_path):
    base = interconnects.load(ROOT / 'config' / 'interconnects.yaml')
    assert 'mpich-ucx' in base.families('eth')
    assert base.path('ib', 'mpich-ofi', {'iface': 'x'}).env['MPIR_CVAR_CH4_NETMOD'] == 'ucx'
    at_site(EXAMPLE)
    table = interconnects.load()
    # $replace: true takes the site's MPICH off UCX on ib (merging would have kept UCX_TLS and UCX_NET_DEVICES)
    path = table.path('ib', 'mpich-ofi', {'iface': 'mlx5_0:1'})
    assert path.env == {'MPIR_CVAR_CH4_NETMOD': 'ofi', 'FI_PROVIDER': 'verbs'} and path.transport == '^ofi:verbs'
    assert 'mpich-ucx' not in table.families('eth')                         # null removed it
    # a mapping without the marker merges key by key: ours stay where the site says nothing
    assert table.path('gige', 'openmpi4', {'iface': 'eth0'}).env['OMPI_MCA_btl'] == 'self,tcp'
    assert table.path('ib', 'intelmpi', {'iface': 'x'}).env['FI_PROVIDER'] == 'mlx'


def test_overlay_rules():
    base = {'a': {'x': 1, 'y': 2}, 'b': 3, 'c': [1]}
    assert site.overlay(base, {'a': {'y': 5}}) == {'a': {'x': 1, 'y': 5}, 'b': 3, 'c': [1]}
    assert site.overlay(base, {'a': {'$replace': True, 'z': 0}}) == {'a': {'z': 0}, 'b': 3, 'c': [1]}
    assert site.overlay(base, {'b': None, 'c': [2]}) == {'a': {'x': 1, 'y': 2}, 'c': [2]}
    assert site.overlay(base, {'d': None}) == base
    with pytest.raises(site.SiteError, match=r'a\.b: \$replace must be true'):
        site.overlay({'a': {'b': {}}}, {'a': {'b': {'$replace': 'yes'}}})


def test_a_bad_site_table_is_named(at_site, tmp_path):
    shutil.copy(EXAMPLE / 'settings.py', tmp_path / 'settings.py')
    (tmp_path / 'interconnects.yaml').write_text('- not a mapping\n')
    at_site(tmp_path)
    with pytest.raises(interconnects.InterconnectError, match=r'interconnects.yaml: a mapping with interconnects'):
        interconnects.load()


def test_the_site_spack_description_is_found_outside_the_repository(at_site, tmp_path):
    shutil.copytree(EXAMPLE, tmp_path / 'site')
    at_site(tmp_path / 'site')
    assert spack_build.source_dir('site-example') == tmp_path / 'site' / 'spack' / 'site-example'
    assert spack_build.package_spec('site-example', 'npb').endswith('classes=C')


@pytest.mark.skipif(not REFRAME.exists(), reason='no ReFrame venv (tools/bootstrap)')
def test_reframe_and_the_tools_see_the_site(tmp_path):
    env = {**os.environ, 'NETREGRESS_SITE': str(EXAMPLE), 'TMPDIR': str(tmp_path), 'RFM_PREFIX': str(tmp_path)}
    out = subprocess.run([str(REFRAME), *['-C', str(ROOT / 'config' / 'settings.py'), '-C', str(EXAMPLE / 'settings.py')],
                          '-c', str(ROOT / 'reframe_tests' / 'checks' / 'mpi_p2p.py'), '--system', 'site-example',
                          '-n', 'mpi_latency', '-l'], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert '%interconnect=ib' in out.stdout and '%interconnect=eth' in out.stdout
    assert '~site-example:ib+ompi5' in out.stdout and '~site-example:eth+impi' in out.stdout
    # a tool given --site checks it first and names what is wrong
    bad = subprocess.run([str(ROOT / 'tools' / 'refs'), '--site', str(tmp_path / 'nope'), 'check'],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and 'no such directory' in bad.stderr
    # the post-maintenance command line carries the site's settings and the maintenance mode
    dry = subprocess.run([str(ROOT / 'ci' / 'post-maintenance'), '--site', str(EXAMPLE), '--system', 'site-example',
                          '--reservation', 'maint', '--dry-run'], capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert f'-C {EXAMPLE}/settings.py' in dry.stdout and '--mode maintenance' in dry.stdout
