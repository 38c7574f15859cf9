"""Shared pytest setup and small factories for test data.

The tests import this checkout's library (pyproject.toml's pytest ``pythonpath``), installed or not; ReFrame and
the tools a test starts get it through PYTHONPATH, whichever checkout the venv has installed.
"""
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
os.environ['PYTHONPATH'] = os.pathsep.join(filter(None, [str(ROOT / 'reframe_tests'), os.environ.get('PYTHONPATH')]))


@pytest.fixture(autouse=True)
def fresh_caches():
    """Every test starts from the files as they are: the library caches what it read (settings, interconnect
    tables, baselines, references) for one process, and a test that loaded a site's must not decide another's."""
    from netregress.judge import bands, references
    from netregress.measure import interconnects, site
    for cached in (site._config, interconnects._load_cached, bands._host_baseline_cached, references._load_cached):
        cached.cache_clear()
    yield


@pytest.fixture
def repo_root() -> Path:
    return ROOT


@pytest.fixture
def table():
    """The real interconnect table."""
    from netregress.measure import interconnects
    return interconnects.load(ROOT / 'config' / 'interconnects.yaml')


def net_dev(**ifaces) -> str:
    """A /proc/net/dev text with the given {iface: (rx_bytes, tx_bytes)}."""
    lines = ['Inter-|   Receive                                                |  Transmit',
             ' face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls '
             'carrier compressed']
    for name, (rx, tx) in ifaces.items():
        lines.append(f'{name:>6}: {rx} 10 0 0 0 0 0 0 {tx} 10 0 0 0 0 0 0')
    return '\n'.join(lines) + '\n'


@pytest.fixture
def make_net_dev():
    return net_dev


#: The virtual cluster's site directory: tests of the vcluster system load it the way a centre loads its own.
VCLUSTER_SITE = ROOT / 'config' / 'sites' / 'vcluster'


@pytest.fixture
def vcluster_site(monkeypatch) -> Path:
    """NETREGRESS_SITE set to the vcluster's site (for this process and every tool a test starts)."""
    monkeypatch.setenv('NETREGRESS_SITE', str(VCLUSTER_SITE))
    return VCLUSTER_SITE
