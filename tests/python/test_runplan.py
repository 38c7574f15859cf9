"""The link plan a run takes (netregress.measure.runplan): the sample plan's rotation in the state directory."""
import pytest

from netregress.judge import baselines
from netregress.measure import runplan


def test_a_plan_that_only_looks_writes_nothing_and_sees_the_rotation_runs_keep(tmp_path, monkeypatch):
    state = tmp_path / 'state'
    monkeypatch.setenv('NETREGRESS_STATE', str(state))
    assert runplan.sample_rotation('c:ib:ib', advance=False)[1] == 0
    assert not state.exists()                                    # ci/post-maintenance --plan: nothing created
    seed, runs = runplan.sample_rotation('c:ib:ib')              # a run: counted, its seed kept
    assert runs == 0
    for _ in range(2):                                           # looking changes nothing
        assert runplan.sample_rotation('c:ib:ib', advance=False) == (seed, 1)
    assert runplan.sample_rotation('c:ib:ib') == (seed, 1)
    assert sorted(p.name for p in (state / 'link-samples').iterdir()) == ['.lock', 'c-ib-ib.json']
    # a state directory the user cannot create: a look is no error, a run says so in one line
    (tmp_path / 'file').write_text('')
    monkeypatch.setenv('NETREGRESS_STATE', str(tmp_path / 'file' / 'state'))
    assert runplan.sample_rotation('c:ib:ib', advance=False)[1] == 0
    with pytest.raises(baselines.BaselineError, match='file/state: state directory cannot be used'):
        runplan.sample_rotation('c:ib:ib')
