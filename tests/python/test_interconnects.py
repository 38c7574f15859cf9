"""The interconnect x MPI table: complete for every partition/environment pair, placeholders checked."""
import pytest

from netregress.measure import site
from netregress.measure.interconnects import InterconnectError, InterconnectTable, SCHEMA

# the vcluster system is a site (config/sites/vcluster): loaded through the layer, as a centre's is
pytestmark = pytest.mark.usefixtures('vcluster_site')


def launch_templates():
    """(system:partition, environment, template) of every MPI environment of every system, through the site layer
    (the partition's ``launch`` first, as netregress.launch does)."""
    out = []
    for name in site.systems():
        for part in site.partitions(name):
            per_part = (part.get('extras') or {}).get('launch') or {}
            for env in site.environments(name):
                if env['name'] in part['environs'] and 'mpi' in (env.get('features') or []):
                    out.append((f'{name}:{part["name"]}', env['name'],
                                per_part.get(env['name']) or env['extras']['launch']))
    return out


def test_table_declares_the_documented_interconnects(table):
    assert set(table.names) >= {'shm', 'tcp', 'fast', 'gige', 'ib', 'eth'}
    assert table.interconnect('shm').counters == 'none'
    assert table.interconnect('gige').nodes == 2
    assert table.interconnect('ib').counters == 'infiniband'


def test_every_partition_has_a_path_for_every_mpi_it_offers(table, repo_root):
    """For each system partition, each ic-<name> feature, each MPI environment there: a complete path."""
    checked = 0
    for name in site.systems():
        envs = {e['name']: e for e in site.environments(name)}
        for part in site.partitions(name):
            ics = [f[3:] for f in part.get('features', []) if f.startswith('ic-')]
            ctx_all = part.get('extras', {}).get('interconnects', {})
            for ic in ics:
                table.interconnect(ic)
                if table.interconnect(ic).counters != 'none':
                    assert ctx_all.get(ic, {}).get('iface'), f'{name}:{part["name"]} has no iface for {ic}'
                for env_name in part['environs']:
                    env = envs[env_name]
                    family = env.get('extras', {}).get('mpi_family')
                    if not family:
                        continue
                    path = table.path(ic, family, ctx_all.get(ic, {}))
                    assert path.env or family == 'mpich-ofi'
                    assert path.report, f'{ic}/{family} has no transport report variables'
                    checked += 1
    assert checked >= 5 * 3 + 5 * 2   # local: 5 MPIs x (shm, tcp); vcluster: 5 x (shm, fast) + 5 x (shm, gige)


def test_placeholders_are_filled(table):
    path = table.path('fast', 'openmpi4', {'iface': 'eth1', 'subnet': '10.0.0.0/24'})
    assert path.env['OMPI_MCA_btl_tcp_if_include'] == 'eth1'
    assert path.all_env()['OMPI_MCA_btl_base_verbose'] == '1'
    ucx = table.path('fast', 'mpich-ucx', {'iface': 'eth1.5'})
    assert ucx.env['UCX_NET_DEVICES'] == 'eth1.5'
    assert ucx.transport == r'^ucx:tcp/eth1\.5$'     # escaped inside the regular expression


def test_missing_placeholder_is_an_error(table):
    with pytest.raises(InterconnectError, match='placeholder'):
        table.path('tcp', 'openmpi4', {})


def test_unknown_family_or_interconnect(table):
    with pytest.raises(InterconnectError, match='no path for MPI family'):
        table.path('shm', 'lam-mpi')
    with pytest.raises(InterconnectError, match='unknown interconnect'):
        table.path('myrinet', 'openmpi4')


def test_tolerances_exist_and_are_ordered(table):
    for ic in table.names:
        for kind in ('throughput', 'latency'):
            lower, upper, comment = table.tolerance(ic, kind)
            assert lower <= 0 <= upper and comment
    assert table.tolerance('gige', 'throughput')[1] < table.tolerance('shm', 'throughput')[1]


def test_malformed_tables():
    with pytest.raises(InterconnectError, match='schema'):
        InterconnectTable({'interconnects': {}})
    with pytest.raises(InterconnectError, match='not declared'):
        InterconnectTable({'schema': SCHEMA, 'interconnects': {}, 'paths': {'shm': {}}})
    with pytest.raises(InterconnectError, match='counters'):
        InterconnectTable({'schema': SCHEMA, 'interconnects': {'x': {'counters': 'magic'}}})


def test_oversubscription_settings_exist_only_for_known_families(table):
    assert table.oversubscribed_env('openmpi4') == {'OMPI_MCA_mpi_yield_when_idle': '1'}
    assert table.oversubscribed_env('mpich-ucx') == {}          # no such setting: nothing is invented
    families = {f for ic in table.names for f in table.families(ic)}
    assert set(table._oversubscribed['env']) <= families
    lower, upper, comment = table.tolerance('gige', 'oversubscribed')
    assert (lower, upper) == (-0.9, 9.0) and 'oversubscribed' in comment


def test_link_fraction_is_of_the_payload_a_link_carries():
    from netregress.measure import interconnects
    table = interconnects.load()
    gige = table.interconnect('gige')
    assert gige.rate_mbps == 1000 and gige.payload_mbps == pytest.approx(1000 * 1448 / 1514, abs=0.05)
    assert table.interconnect('fast').payload_mbps is None           # unshaped: no rate to assert
    data = {'schema': SCHEMA, 'interconnects': {'eth': {'nodes': 2, 'rate_mbps': 100}}}
    assert InterconnectTable(data).interconnect('eth').payload_mbps == 100     # default: the rate
    data['interconnects']['eth']['payload_mbps'] = 'fast'
    with pytest.raises(InterconnectError, match="eth.*payload_mbps must be a positive number"):
        InterconnectTable(data)


def test_mpich4_ucx_tcp_finalize_hang_is_declared_on_every_tcp_path_not_on_shm(repo_root):
    from netregress.measure.knownfaults import known_fault
    faults = next(e for e in site.environments('local') if e['name'] == 'mpich4')['extras']['known_faults']
    for ic in ('tcp', 'fast', 'gige'):                  # the hang was measured on one node (lo) and across nodes
        assert 'MPI_Finalize' in known_fault(faults, 'mpi_throughput', ic, oversubscribed=False)
    assert known_fault(faults, 'mpi_throughput', 'shm', oversubscribed=False) is None
    assert known_fault(faults, 'tcp_throughput', 'tcp', oversubscribed=False) is None       # not an MPI check
    assert 'yield' in known_fault(faults, 'mpi_collectives', 'shm', oversubscribed=True)


@pytest.mark.parametrize('build', ['openmpi4', 'openmpi5'])
def test_open_mpi_start_up_crash_is_declared_as_a_failure_not_a_skip(repo_root, build):
    """Open MPI 4.1.4's and 5.0.11's SIGSEGV in MPI_Init marks a failure (a retry may excuse it); it never skips a
    check."""
    from netregress.measure.knownfaults import known_failure, known_fault
    faults = next(e for e in site.environments('local') if e['name'] == build)['extras']['known_faults']
    for check in ('mpi_latency', 'osu', 'nas'):
        assert known_fault(faults, check, 'gige', oversubscribed=True) is None
    assert 'MPI_Init' in known_failure(faults, ['x', 'gige1 task 0: Segmentation fault (core dumped) (srun)'])
    assert known_failure(faults, ['gige1 task 0: Terminated (srun)', 'OSU printed no result table']) is None


def test_every_srun_launch_ends_the_step_when_a_rank_dies(repo_root):
    """Without --kill-on-bad-exit a crashed rank leaves its partner blocked until the job's time limit, and the
    reason reads only 'DUE TO TIME LIMIT'."""
    launches = [t for t in launch_templates() if t[2][0] == 'srun']
    assert len(launches) >= 4
    for where, env, launch in launches:
        assert '--kill-on-bad-exit=1' in launch, f'{env} on {where}: {launch}'
