"""The fault drill's pure parts (netregress_postrun.drill)."""
from netregress_postrun import drill


def test_the_switch_tree_faults_exist_only_on_a_cluster_with_leaves(monkeypatch, tmp_path):
    keys = [(f.key, f.system) for f in drill.faults(tmp_path / 'report.json')]
    # the flat 8-node cluster; g and h on both systems
    assert keys == [(k, 'vcluster') for k in 'abcdefgh'] + [('g', 'local'), ('h', 'local')]
    monkeypatch.setitem(drill.VC, 'VC_GIGE_LEAVES', '4')
    monkeypatch.setitem(drill.VC, 'VC_GIGE_COUNT', '32')
    by_key = {f.key: f for f in drill.faults(tmp_path / 'report.json')}
    assert by_key['u'].expect == ['uplink', 'of leaf switch gige-leaf2']
    assert by_key['n'].expect == ['node gige32'] and 'link_allpairs.plan=topology' in by_key['n'].select


def test_the_mpi_faults_name_the_build_and_the_interconnect(tmp_path, monkeypatch):
    """g and h fail the run naming the MPI build and the interconnect; h doubles the clean run's round trip."""
    faults = {(f.key, f.system): f for f in drill.faults(tmp_path / 'report-clean-vcluster.json')}
    assert faults[('g', 'vcluster')].expect == ['openmpi4', 'interconnect=fast']
    assert faults[('h', 'local')].expect == ['mpich5', 'interconnect=tcp']
    assert 'OMPI_MCA_mca_base_param_files' in ' '.join(faults[('g', 'local')].options)
    monkeypatch.setattr(drill, '_round_trip_us', lambda report, system, env, ic: 30.0)
    monkeypatch.setattr(drill, '_faulty_kernels', lambda env, mpicc: tmp_path)
    faults[('h', 'vcluster')].inject()
    assert faults[('h', 'vcluster')].options == ['-S', 'extra_env_vars=NR_FAULT_DELAY_US:15.000']
    # to the nanosecond: the PMPI layer reads a fraction (half of 13.9 once became 6 when it read whole ones)
    monkeypatch.setattr(drill, '_round_trip_us', lambda report, system, env, ic: 13.9)
    faults[('h', 'local')].inject()
    assert faults[('h', 'local')].options == ['-S', 'extra_env_vars=NR_FAULT_DELAY_US:6.950']
