"""The fault drill's pure parts (netregress_postrun.drill)."""
from netregress_postrun import drill


def test_the_switch_tree_faults_exist_only_on_a_cluster_with_leaves(monkeypatch, tmp_path):
    keys = [f.key for f in drill.faults(tmp_path / 'report.json')]
    assert keys == list('abcdef')                              # the flat 8-node cluster
    monkeypatch.setitem(drill.VC, 'VC_GIGE_LEAVES', '4')
    monkeypatch.setitem(drill.VC, 'VC_GIGE_COUNT', '32')
    by_key = {f.key: f for f in drill.faults(tmp_path / 'report.json')}
    assert by_key['u'].expect == ['uplink of leaf switch gige-leaf2']
    assert by_key['n'].expect == ['node gige32'] and 'link_allpairs.plan=topology' in by_key['n'].select
