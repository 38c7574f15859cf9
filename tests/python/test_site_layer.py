"""A site adds itself without editing netregress: its ReFrame configuration layered over ours (``-C ours -C
theirs``), its interconnects merged over ours (NETREGRESS_INTERCONNECTS), its Spack environment description
(NETREGRESS_SPACK_ENVS). The example in config/site/ is what these tests load; and the ``ib`` paths cover every MPI
family any environment in config/settings.py uses."""
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip('reframe')
from netregress import interconnects, spack_build  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / 'config' / 'site'
REFRAME = ROOT / '.deps' / 'venv' / 'bin' / 'reframe'


def settings_families() -> set[str]:
    spec = importlib.util.spec_from_file_location('nr_settings_families', ROOT / 'config' / 'settings.py')
    settings = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(settings)
    return {e['extras']['mpi_family'] for e in settings.site_configuration['environments']
            if 'mpi_family' in e.get('extras', {})}


def test_ib_paths_cover_every_mpi_family_we_ship():
    table = interconnects.load(ROOT / 'config' / 'interconnects.yaml')
    # the five MPI builds and the site template's Open MPI (LAM/MPI, being added beside them, has no ib path yet)
    families = {'openmpi4', 'openmpi5', 'mpich-ucx', 'mpich-ofi', 'intelmpi', 'openmpi-ucx'}
    assert families <= settings_families()
    missing = sorted(f for f in families if f not in table.families('ib'))
    assert not missing, f'ib has no path for {missing}'
    for family in families:
        path = table.path('ib', family, {'iface': 'mlx5_0:1'})
        assert path.transport and path.env, family


def test_site_interconnects_merge_over_ours(monkeypatch):
    monkeypatch.setenv('NETREGRESS_INTERCONNECTS', str(SITE / 'interconnects.yaml'))
    interconnects._load_cached.cache_clear()
    try:
        table = interconnects.load()
        assert 'roce' in table.names and 'ib' in table.names and 'gige' in table.names
        assert table.interconnect('roce').counters == 'infiniband'
        path = table.path('roce', 'openmpi-ucx', {'iface': 'mlx5_2:1'})
        assert path.env['UCX_NET_DEVICES'] == 'mlx5_2:1'
        # ours are untouched where the site says nothing
        assert table.path('gige', 'openmpi4', {'iface': 'eth0'}).env['OMPI_MCA_btl'] == 'self,tcp'
    finally:
        interconnects._load_cached.cache_clear()


def test_a_bad_site_table_is_named(monkeypatch, tmp_path):
    bad = tmp_path / 'ic.yaml'
    bad.write_text('- not a mapping\n')
    for value, message in ((str(bad), 'a mapping with interconnects'), (str(tmp_path / 'nope.yaml'), 'No such file')):
        monkeypatch.setenv('NETREGRESS_INTERCONNECTS', value)
        interconnects._load_cached.cache_clear()
        with pytest.raises(interconnects.InterconnectError, match=message):
            interconnects.load()
    interconnects._load_cached.cache_clear()


def test_site_spack_description_is_found_outside_the_repository(monkeypatch, tmp_path):
    shutil.copytree(ROOT / 'config' / 'spack' / 'site-example', tmp_path / 'mysite')
    monkeypatch.setenv('NETREGRESS_SPACK_ENVS', str(tmp_path))
    spack_build._load_yaml.cache_clear()
    try:
        assert spack_build.source_dir('mysite') == tmp_path / 'mysite'
        assert spack_build.source_dir('vcluster') == ROOT / 'config' / 'spack' / 'vcluster'
        assert spack_build.package_spec('mysite', 'npb').endswith('classes=C')
    finally:
        spack_build._load_yaml.cache_clear()


@pytest.mark.skipif(not REFRAME.exists(), reason='no ReFrame venv (tools/bootstrap)')
def test_reframe_layers_the_site_configuration_over_ours(tmp_path):
    env = {**os.environ, 'NETREGRESS_INTERCONNECTS': str(SITE / 'interconnects.yaml'), 'TMPDIR': str(tmp_path)}
    out = subprocess.run([str(REFRAME), '-C', str(ROOT / 'config' / 'settings.py'), '-C', str(SITE / 'settings.py'),
                          '-c', str(ROOT / 'reframe_tests' / 'checks' / 'mpi_p2p.py'), '--system', 'mysite',
                          '-n', 'mpi_latency', '-l'], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert '%interconnect=roce' in out.stdout and '%interconnect=ib' in out.stdout
    assert '~mysite:roce+site-ompi' in out.stdout and '~mysite:ib+site-mpich' in out.stdout
    # our own systems are still there under the same configuration
    out = subprocess.run([str(REFRAME), '-C', str(ROOT / 'config' / 'settings.py'), '-C', str(SITE / 'settings.py'),
                          '-c', str(ROOT / 'reframe_tests' / 'checks' / 'mpi_p2p.py'), '--system', 'local',
                          '-n', 'mpi_latency', '-l'], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0 and '~local:default+openmpi4' in out.stdout
