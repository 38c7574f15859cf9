"""Provenance arithmetic: counter parsing and deltas, the crossed/not-crossed decision, transport reports."""
from netregress.measure import provenance
from netregress.measure.provenance import Counters, check_counters, check_transports, transports


def snapshots(make_net_dev, before, after):
    text = ''
    for when, per_host in (('before', before), ('after', after)):
        for host, ifaces in per_host.items():
            text += f'{provenance.MARK} host={host} when={when}\n' + make_net_dev(**ifaces)
    return provenance.parse_snapshots(text)


def test_parse_net_dev(make_net_dev):
    got = provenance.parse_net_dev(make_net_dev(lo=(100, 200), eth0=(5, 7)))
    assert got == {'lo': Counters(100, 200), 'eth0': Counters(5, 7)}


def test_parse_infiniband_words_are_four_bytes():
    got = provenance.parse_net_dev('ib:mlx5_0:1 xmit_words=10 rcv_words=5\n')
    assert got['ib:mlx5_0:1'] == Counters(rx_bytes=20, tx_bytes=40)


def test_deltas_per_host_and_interface(make_net_dev):
    snaps = snapshots(make_net_dev,
                      {'n1': {'eth0': (1000, 2000), 'lo': (0, 0)}, 'n2': {'eth0': (0, 0)}},
                      {'n1': {'eth0': (1500, 9000), 'lo': (10, 10)}, 'n2': {'eth0': (7000, 500)}})
    d = provenance.deltas(snaps['before'], snaps['after'])
    assert d['n1']['eth0'] == Counters(500, 7000)
    assert d['n1']['eth0'].total == 7500
    assert d['n2']['eth0'].total == 7500


def test_interleaved_labelled_snapshots(make_net_dev):
    """srun --label output of two nodes printing at once is regrouped per task."""
    a = [f'{provenance.MARK} host=n1 when=before'] + make_net_dev(eth0=(1, 2)).splitlines()
    b = [f'{provenance.MARK} host=n2 when=before'] + make_net_dev(eth0=(3, 4)).splitlines()
    mixed = []
    for x, y in zip(a, b):
        mixed += [f'0: {x}', f'1: {y}']
    snaps = provenance.parse_snapshots('\n'.join(mixed))
    assert snaps['before']['n1']['eth0'] == Counters(1, 2)
    assert snaps['before']['n2']['eth0'] == Counters(3, 4)


def test_payload_crossed_the_interface():
    delta = {'n1': {'eth0': Counters(100, 1_000_100)}, 'n2': {'eth0': Counters(1_000_100, 100)}}
    assert check_counters(delta, kind='interface', iface='eth0', hosts=['n1', 'n2'], payload_bytes=1e6) == []


def test_payload_took_another_interface_fails_naming_it():
    delta = {'n1': {'eth0': Counters(10, 10), 'eth1': Counters(0, 2_000_000)},
             'n2': {'eth0': Counters(10, 10), 'eth1': Counters(2_000_000, 0)}}
    problems = check_counters(delta, kind='interface', iface='eth0', hosts=['n1', 'n2'], payload_bytes=1e6)
    assert len(problems) == 2
    assert 'eth0 carried 20 B' in problems[0] and 'busiest interface was eth1' in problems[0]


def test_fraction_lowers_the_bar():
    delta = {'n1': {'eth0': Counters(0, 300)}}
    assert check_counters(delta, kind='interface', iface='eth0', hosts=['n1'], payload_bytes=1000, fraction=0.25) == []
    assert check_counters(delta, kind='interface', iface='eth0', hosts=['n1'], payload_bytes=1000, fraction=0.5)


def test_shared_memory_must_not_touch_the_network():
    quiet = {'n1': {'lo': Counters(500, 500), 'eth0': Counters(100, 100)}}
    assert check_counters(quiet, kind='none', iface=None, hosts=['n1'], payload_bytes=1e6) == []
    loud = {'n1': {'lo': Counters(2_000_000, 2_000_000)}}
    problems = check_counters(loud, kind='none', iface=None, hosts=['n1'], payload_bytes=2e6)
    assert problems and 'not shm' in problems[0]


def test_missing_host_or_interface_is_a_failure():
    delta = {'n1': {'eth0': Counters(5e6, 5e6)}}
    assert 'n2: no counter snapshots' in check_counters(delta, kind='interface', iface='eth0', hosts=['n1', 'n2'],
                                                        payload_bytes=1e6)[0]
    assert 'not found' in check_counters(delta, kind='interface', iface='ib0', hosts=['n1'], payload_bytes=1)[0]
    assert check_counters({}, kind='interface', iface='eth0', hosts=[], payload_bytes=1)


def test_shm_small_payload_below_launcher_chatter_is_not_judged():
    chatter = {'n1': {'lo': Counters(30_000, 27_000)}}          # PMI/Slurm traffic during an 8-byte latency run
    assert check_counters(chatter, kind='none', iface=None, hosts=['n1'], payload_bytes=38_752) == []


def test_no_payload_cannot_pass():
    delta = {'n1': {'eth0': Counters(5e6, 5e6)}}
    assert 'no payload' in check_counters(delta, kind='interface', iface='eth0', hosts=['n1'], payload_bytes=0)[0]


def test_infiniband_counters():
    delta = {'n1': {'ib:mlx5_0:1': Counters(4e6, 4e6), 'eth0': Counters(0, 0)}}
    assert check_counters(delta, kind='infiniband', iface='mlx5_0:1', hosts=['n1'], payload_bytes=1e6) == []
    assert check_counters(delta, kind='infiniband', iface='mlx5_0:1', hosts=['n1'], payload_bytes=1e7)


def test_error_counters_that_rose_during_the_run_fail_naming_the_port():
    """/proc/net/dev's rx/tx errs and an HCA port's error counters (symbol errors, link downed ...) are read before
    and after; any increase on the interface under test fails, named."""
    line = 'eth0: 100 10 3 0 0 0 0 0 200 10 2 0 0 0 0 0\n'
    assert provenance.parse_net_dev(line)['eth0'] == Counters(100, 200, errors=5)
    ib = 'ib:mlx5_0:1 xmit_words=10 rcv_words=5 errors=7\n'
    assert provenance.parse_net_dev(ib)['ib:mlx5_0:1'].errors == 7
    before = {'n1': {'ib:mlx5_0:1': Counters(0, 0, errors=7)}, 'n2': {'ib:mlx5_0:1': Counters(0, 0, errors=1)}}
    after = {'n1': {'ib:mlx5_0:1': Counters(4e6, 4e6, errors=7)}, 'n2': {'ib:mlx5_0:1': Counters(4e6, 4e6, errors=4)}}
    delta = provenance.deltas(before, after)
    problems = check_counters(delta, kind='infiniband', iface='mlx5_0:1', hosts=['n1', 'n2'], payload_bytes=1e6)
    assert problems == ['n2: ib:mlx5_0:1 counted 3 new errors during the run (rx/tx errors; symbol, link-downed, '
                        'receive errors ...): a bad port, cable or NIC']
    assert 'port_rcv_errors' in provenance.snapshot_command('before')


OMPI_OUT = """[vm:06203] mca: bml: Using vader btl for send to [[29896,1],1] on node vm
[vm:06203] mca: bml: Using self btl for send to [[29896,1],0] on node vm
"""
UCX_OUT = """[1795346494.368157] [vm:6335 :0]      ucp_worker.c:1763 UCX  INFO    ep_cfg[0]: tag(self/memory0 tcp/lo) rma(self/memory0) am(self/memory0 tcp/lo)
[1795346494.368301] [vm:6336 :0]      ucp_worker.c:1763 UCX  INFO    ep_cfg[0]: tag(tcp/lo) rma_am(tcp/lo) am(tcp/lo)
"""


def test_transports_from_open_mpi_and_ucx():
    assert transports(OMPI_OUT) == {'btl:vader'}
    assert transports(UCX_OUT) == {'ucx:tcp/lo'}
    assert transports('nothing here') == set()


def test_transport_check(table):
    assert check_transports({'btl:vader'}, table.path('shm', 'openmpi4').transport) == []
    wrong = check_transports({'btl:tcp'}, table.path('shm', 'openmpi4').transport)
    assert wrong and 'another path' in wrong[0] and 'btl:tcp' in wrong[0]
    assert check_transports({'ucx:tcp/eth0'}, table.path('fast', 'mpich-ucx', {'iface': 'eth0'}).transport) == []
    # UCX quietly on shared memory between namespace nodes: the classic silent fallback
    assert check_transports({'ucx:sysv/memory', 'ucx:tcp/eth0'},
                            table.path('fast', 'mpich-ucx', {'iface': 'eth0'}).transport)
    assert 'reported no transport' in check_transports(set(), '^btl:tcp$')[0]
    assert check_transports(set(), None) == []


MPICH_OFI_OUT = """provider: tcp, score = 4, pref = 0, FI_SOCKADDR_IN [16] 127.0.0.1
provider: sockets, score = 4, pref = 0, FI_SOCKADDR_IN [16] 127.0.0.1
==== Capability set configuration ====
libfabric provider: tcp - 127.0.0.1/32
MPIDI_OFI_ENABLE_DATA: 1
"""
IMPI_OFI_OUT = """[0] MPI startup(): libfabric version: 2.4.0-impi
[0] MPI startup(): libfabric provider: tcp
[0] MPI startup(): I_MPI_FABRICS=ofi
"""
IMPI_SHM_OUT = """[0] MPI startup(): Load tuning file: "/x/opt/mpi/etc/tuning_generic_shm.dat"
[0] MPI startup(): I_MPI_FABRICS=shm
"""


MPICH_UCX_SUMMARY = """==== Various sizes and limits ====
sizeof(MPIDI_per_vci_t): 128
==== UCX netmod Capability ====
MPIDI_UCX_CONTEXT_ID_BITS: 16
"""


def test_mpich_moved_onto_ucx_is_named(table):
    """MPICH's debug summary names the UCX netmod where UCX itself was not asked to report (drill fault d)."""
    found = transports(MPICH_UCX_SUMMARY)
    assert found == {'mpich:ucx-netmod'}
    wrong = check_transports(found, table.path('tcp', 'mpich-ofi', {'iface': 'lo'}).transport)
    assert wrong and 'another path' in wrong[0] and 'ucx-netmod' in wrong[0]
    assert transports(MPICH_UCX_SUMMARY + UCX_OUT) == {'ucx:tcp/lo'}     # UCX's own report is the finer one


def test_transports_from_mpich_ofi_and_intel_mpi(table):
    assert transports(MPICH_OFI_OUT) == {'ofi:tcp'}       # candidates are not the choice
    assert transports(IMPI_OFI_OUT) == {'impi:tcp'}
    assert transports(IMPI_SHM_OUT) == {'impi:shm'}
    assert check_transports(transports(IMPI_SHM_OUT), table.path('shm', 'intelmpi').transport) == []
    assert check_transports(transports(IMPI_OFI_OUT), table.path('shm', 'intelmpi').transport)
    assert check_transports(transports(MPICH_OFI_OUT), table.path('tcp', 'mpich-ofi', {'iface': 'lo'}).transport) == []
