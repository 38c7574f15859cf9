"""Figure declarations (netregress.figures): every performance variable of every check declares its kind, label and
better direction, and the declared kinds are what the name guess they replaced returned."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip('reframe')

import reframe.utility.sanity as sn  # noqa: E402

from netregress.judge import figures, references  # noqa: E402
from netregress.measure.allpairs import AllPairsLinkCheck  # noqa: E402
from netregress.measure.nodeprobe import NodeLoopbackCheck  # noqa: E402
from netregress.measure.osu_npb import OSU_BENCHMARKS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
REFRAME = Path(sys.executable).parent / 'reframe'
sys.path.insert(0, str(ROOT / 'reframe_tests' / 'checks'))

COLL_TESTS = ['p2p', 'bcast', 'bcast_cycled', 'reduce', 'allreduce', 'gather', 'allgather', 'scatter', 'alltoall',
              'bcast_gather', 'scatter_gather', 'reduce_scatter', 'right_shift', 'left_right_shift']

#: (ref_test, metric) -> (kind, better): what the name guesses ``figures.metric_kind`` and
#: ``references.lower_is_better`` (as of commit eb479bb; both removed since) returned for every performance variable of every check on local and vcluster
#: (dry runs) and of the OSU, NAS, all-pairs and node checks (every benchmark and size). Frozen when the checks
#: began to declare their figures: the declarations must give the same bands.
FROZEN = {
    ('ebb', 'ebb_mibps'): ('cpu_bound', 'higher'),
    ('imb.pingpong', 'bandwidth_mbs'): ('cpu_bound', 'higher'),
    ('imb.pingpong', 'latency_us'): ('latency', 'lower'),
    ('iperf3.stream', 'fraction_of_link'): ('ratio', 'higher'),
    ('iperf3.stream', 'throughput_mbps'): ('throughput', 'higher'),
    ('links.allpairs', 'fraction_of_link'): ('ratio', 'higher'),
    ('links.allpairs', 'max_rtt_us'): ('latency', 'lower'),
    ('links.allpairs', 'median_link_mbps'): ('cpu_bound', 'higher'),
    ('links.allpairs', 'min_link_mbps'): ('cpu_bound', 'higher'),
    ('links.allpairs', 'min_to_median'): ('ratio', 'higher'),
    ('mpitest.latency', 'peer_rtt_us'): ('latency', 'lower'),
    ('mpitest.latency', 'ratio_to_peer'): ('cpu_bound', 'lower'),
    ('mpitest.latency', 'rtt_us'): ('latency', 'lower'),
    ('mpitest.latency', 'yardstick_rtt_us'): ('latency', 'lower'),
    # the duet ratio: a ratio over TCP, a CPU-bound figure over shared memory (checks/mpi_p2p.py)
    ('mpitest.latency', 'ratio_to_yardstick', 'tcp'): ('ratio', 'lower'),
    ('mpitest.latency', 'ratio_to_yardstick', 'shm'): ('cpu_bound', 'lower'),
    ('mpitest.pingpong.blocking', 'throughput_mbps'): ('cpu_bound', 'higher'),
    ('mpitest.pingpong.nonblocking', 'throughput_mbps'): ('cpu_bound', 'higher'),
    ('mpitest.stream.blocking', 'fraction_of_link'): ('ratio', 'higher'),
    ('mpitest.stream.blocking', 'iperf3_mbps'): ('throughput', 'higher'),
    ('mpitest.stream.blocking', 'ratio_to_iperf3'): ('ratio', 'higher'),
    ('mpitest.stream.blocking', 'throughput_mbps'): ('throughput', 'higher'),
    ('mpitest.stream.blocking', 'yardstick_mbps'): ('cpu_bound', 'higher'),
    ('mpitest.stream.blocking', 'ratio_to_yardstick', 'tcp'): ('cpu_bound', 'higher'),
    ('mpitest.stream.blocking', 'ratio_to_yardstick', 'shm'): ('cpu_bound', 'higher'),
    ('mpitest.stream.nonblocking', 'throughput_mbps'): ('throughput', 'higher'),
    ('mpitest.sweep.pingpong', 'throughput_mbps'): ('cpu_bound', 'higher'),
    ('netpipe.mpi', 'latency_us'): ('latency', 'lower'),
    ('netpipe.mpi', 'max_throughput_mbps'): ('cpu_bound', 'higher'),
    ('netpipe.tcp', 'latency_us'): ('latency', 'lower'),
    ('netpipe.tcp', 'max_throughput_mbps'): ('cpu_bound', 'higher'),
    ('nodes.loopback', 'median_node_mbps'): ('cpu_bound', 'higher'),
    ('nodes.loopback', 'min_node_mbps'): ('cpu_bound', 'higher'),
    ('nodes.loopback', 'min_to_median'): ('ratio', 'higher'),
    ('npb.*', 'mops_total'): ('cpu_bound', 'higher'),
    ('osu.allreduce', 'latency_us'): ('latency', 'lower'),
    ('osu.alltoall', 'latency_us'): ('latency', 'lower'),
    ('osu.bcast', 'latency_us'): ('latency', 'lower'),
    ('osu.bibw', 'bandwidth_mbs'): ('cpu_bound', 'higher'),
    ('osu.bw', 'bandwidth_mbs'): ('cpu_bound', 'higher'),
    ('osu.latency', 'latency_us'): ('latency', 'lower'),
    ('osu.mbw_mr', 'bandwidth_mbs'): ('cpu_bound', 'higher'),
    ('osu.mbw_mr', 'message_rate'): ('cpu_bound', 'higher'),
    ('tcp.pingpong.blocking', 'throughput_mbps'): ('cpu_bound', 'higher'),
    ('tcp.pingpong.nonblocking', 'throughput_mbps'): ('cpu_bound', 'higher'),
    ('tcp.rtt', 'peer_rtt_us'): ('latency', 'lower'),
    ('tcp.rtt', 'ratio_to_peer'): ('cpu_bound', 'lower'),
    ('tcp.rtt', 'rtt_us'): ('latency', 'lower'),
    ('tcp.stream.blocking', 'fraction_of_link'): ('ratio', 'higher'),
    ('tcp.stream.blocking', 'iperf3_mbps'): ('throughput', 'higher'),
    ('tcp.stream.blocking', 'ratio_to_iperf3'): ('ratio', 'higher'),
    ('tcp.stream.blocking', 'throughput_mbps'): ('throughput', 'higher'),
    ('tcp.stream.nonblocking', 'fraction_of_link'): ('ratio', 'higher'),
    ('tcp.stream.nonblocking', 'throughput_mbps'): ('throughput', 'higher'),
    ('tcp.sweep.pingpong', 'throughput_mbps'): ('cpu_bound', 'higher'),
    ('tcp.sweep.stream', 'throughput_mbps'): ('cpu_bound', 'higher'),
    **{('mpicoll', f'{t}_rate_kBps'): ('cpu_bound', 'higher') for t in COLL_TESTS},
}


def frozen(ref_test: str, var: str, interconnect: str = '') -> tuple[str, str]:
    key = 'npb.*' if ref_test.startswith('npb.') else ref_test
    name = references.split_metric(var)[0]
    return FROZEN.get((key, name, 'shm' if interconnect == 'shm' else 'tcp')) or FROZEN[(key, name)]


# -- the declaration type ------------------------------------------------------------------------------------------

def test_a_figure_checks_its_kind_and_direction():
    with pytest.raises(figures.FigureError, match='kind'):
        figures.Figure('bandwidth', 'x')
    with pytest.raises(figures.FigureError, match='better'):
        figures.Figure('latency', 'x', 'smaller')
    with pytest.raises(figures.FigureError, match='throughput figures only'):
        figures.Figure('latency', 'x', 'lower', cpu_bound_below=65536)
    assert figures.latency('rtt').as_dict() == {'kind': 'latency', 'label': 'rtt', 'better': 'lower'}


def test_a_size_suffixed_variable_takes_its_metrics_figure_and_small_sizes_can_be_cpu_bound():
    declared = {'throughput_mbps': figures.throughput('stream', cpu_bound_below=figures.LINK_BOUND_BYTES),
                'rtt_us': figures.latency('round trip')}
    assert figures.resolve(declared, 'throughput_mbps@1048576').as_dict() == {
        'kind': 'throughput', 'label': 'stream, 1 MiB', 'better': 'higher'}
    assert figures.resolve(declared, 'throughput_mbps@65536').kind == 'throughput'
    assert figures.resolve(declared, 'throughput_mbps@4096').kind == 'cpu_bound'
    assert figures.resolve(declared, 'throughput_mbps').kind == 'throughput'
    assert figures.resolve(declared, 'rtt_us@8').kind == 'latency'
    assert figures.resolve(declared, 'bandwidth_mbs@8') is None
    # an exact declaration wins over its metric's
    assert figures.resolve({**declared, 'throughput_mbps@8': figures.ratio('odd')}, 'throughput_mbps@8').kind == 'ratio'


def test_an_undeclared_variable_is_an_error_naming_the_check_and_the_variable():
    declared = {'rtt_us': figures.latency('round trip')}
    with pytest.raises(figures.FigureError, match=r"my_check: performance variable\(s\) peer_rtt_us, zz "):
        figures.describe('my_check', ['rtt_us', 'zz', 'peer_rtt_us'], declared)
    assert figures.describe('c', ['rtt_us'], declared) == {'rtt_us': figures.latency('round trip').as_dict()}


# -- every check: a dry run on local sets up every case that runs here ---------------------------------------------

@pytest.fixture(scope='module')
def dry_run(tmp_path_factory):
    if not REFRAME.exists():
        pytest.skip(f'no reframe next to {sys.executable}')
    tmp = tmp_path_factory.mktemp('figures')
    report = tmp / 'report.json'
    env = {**os.environ, 'NETREGRESS_STATE': str(tmp / 'state'), 'RFM_ENABLE_RESULTS_STORAGE': '0'}
    out = subprocess.run([str(REFRAME), '-C', str(ROOT / 'config' / 'settings.py'), '-c', str(ROOT / 'reframe_tests'),
                          '--system', 'local', '--prefix', str(tmp / 'run'), '--dry-run', '--report-file', str(report)],
                         capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    return out, json.loads(report.read_text())


def test_every_case_set_up_here_records_a_declared_figure_per_performance_variable(dry_run):
    out, report = dry_run
    text = re.sub(r'\x1b\[[0-9;]*m', '', out.stdout)
    assert ' FAIL ' not in text and out.returncode == 0, text[-3000:]
    cases = {(tc['hashcode'], f'{tc["system"]}:{tc["partition"]}+{tc["environ"]}'): tc
             for run in report['runs'] for tc in run['testcases']}
    seen, current = 0, None
    for line in text.splitlines():
        m = re.match(r'^\[\s+OK\s+\] \(\d+/\d+\) (\w+) .*/(\w+) @(\S+)$', line)
        if m:
            current = cases[(m.group(2), m.group(3))]
            continue
        m = re.match(r'^P: (\S+): ', line)
        if m and current is not None:
            var = m.group(1)
            entry = current['nr_figures'][var]            # declared, under the name the report uses
            assert set(entry) == {'kind', 'label', 'better'} and entry['label']
            assert (entry['kind'], entry['better']) == frozen(current['ref_test'], var, current.get('interconnect')), \
                (current['name'], var)
            seen += 1
    assert seen > 100        # the local system sets up tcp, mpi, netpipe and iperf3 cases


# -- the checks a dry run cannot set up here (Spack builds, Slurm partitions): their declaring hooks ---------------

class Stub:
    """Just enough of a check for a hook that defines performance variables."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs, stagedir='/nonexistent', stdout='rfm_job.out', perf_variables={},
                             fixed_references={})

    def declare_figure(self, name, figure):
        self.declared = {**getattr(self, 'declared', {}), name: figure}

    def add_figure(self, name, function, figure):
        self.perf_variables[name] = function
        self.declare_figure(name, figure)

    def recorded(self) -> dict:
        return figures.describe('stub', self.perf_variables, self.declared)


def assert_frozen(ref_test, recorded):
    assert recorded
    for var, entry in recorded.items():
        assert (entry['kind'], entry['better']) == frozen(ref_test, var), (ref_test, var)


@pytest.mark.parametrize('benchmark', sorted(OSU_BENCHMARKS))
def test_osu_declares_every_size_of_every_benchmark(benchmark):
    from osu import osu
    stub = Stub(benchmark=benchmark, sizes=[1 << e for e in range(21)])
    osu.osu_metrics(stub)
    assert_frozen(f'osu.{benchmark[4:]}', stub.recorded())


def test_nas_declares_its_rate():
    from nas import nas
    stub = Stub(npb_class='W', bench='bt', num_ranks=4)
    nas.choose_class(stub)
    assert_frozen(stub.ref_test, stub.recorded())


def test_allpairs_and_node_checks_declare_their_figures():
    for rtt in (False, True):                 # the round trip is a figure only when it is measured
        stub = Stub(measure_rtt=rtt, _figure=lambda name: sn.defer(1.0))
        AllPairsLinkCheck.link_figures(stub)
        assert ('max_rtt_us' in stub.perf_variables) == rtt
        assert_frozen('links.allpairs', stub.recorded())
    stub = Stub(_summary=lambda name: sn.defer(1.0))
    NodeLoopbackCheck.node_figures(stub)
    assert_frozen('nodes.loopback', stub.recorded())
