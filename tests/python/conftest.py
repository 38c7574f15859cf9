"""Shared pytest setup: import the ReFrame library as `netregress`, and small factories for test data."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / 'reframe_tests'))


@pytest.fixture
def repo_root() -> Path:
    return ROOT


@pytest.fixture
def table():
    """The real interconnect table."""
    from netregress import interconnects
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
