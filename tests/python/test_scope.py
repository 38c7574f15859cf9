"""One scope for every entry point (netregress.scope): options and ReFrame's -J spell the same scope, the nodes it
covers on a dual-rail site (InfiniBand and Ethernet on one Slurm partition), the ReFrame options it becomes, the node
check before a run (drained nodes named and left out unless --strict), and a site's runs kept out of the checkout.
Slurm is a fake runner or fake sinfo/scontrol scripts; no cluster."""
import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip('reframe')
from netregress import scope  # noqa: E402
from netregress.measure import interconnects, site, slurm  # noqa: E402
from netregress_postrun import coverage  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
N = 1000

#: a dual-rail cluster: every node on one Slurm partition `compute`, reached over InfiniBand and over Ethernet
DUO = '''
def part(name, fabric, iface):
    return {'name': name, 'scheduler': 'slurm', 'launcher': 'srun', 'access': ['--partition=compute'],
            'environs': ['duo-gnu'], 'features': ['ic-shm', f'ic-{fabric}'],
            'extras': {'interconnects': {fabric: {'iface': iface}}}}
site_configuration = {
    'systems': [{'name': 'duo', 'hostnames': [r'^duo-login$'], 'modules_system': 'nomod',
                 'partitions': [part('ib', 'ib', 'mlx5_0:1'), part('eth', 'eth', 'ens1f0')]}],
    'environments': [{'name': 'duo-gnu', 'cc': 'gcc', 'target_systems': ['duo']}],
}
'''


def clear():
    site._config.cache_clear()
    interconnects._load_cached.cache_clear()


@pytest.fixture
def duo(tmp_path, monkeypatch):
    (tmp_path / 'duo').mkdir()
    (tmp_path / 'duo' / 'settings.py').write_text(DUO)
    monkeypatch.setenv(site.ENV, str(tmp_path / 'duo'))
    monkeypatch.delenv('RFM_PREFIX', raising=False)
    clear()
    yield tmp_path / 'duo'
    clear()


class Slurm:
    """sinfo/scontrol of a 1,000-node partition `compute` (node0001..node1000), a reservation `maint` of
    node[0001-0016] and the states given."""

    def __init__(self, states=None, users='(null)'):
        self.states = states or {}
        self.users = users
        self.calls = []

    def __call__(self, argv, timeout_s):
        self.calls.append(list(argv))
        nodes = [f'node{i:04d}' for i in range(1, N + 1)]
        if argv[:3] == ['scontrol', 'show', 'hostnames']:
            out = '\n'.join(slurm.expand_hostlist(argv[3]))
        elif argv[:3] == ['scontrol', 'show', 'reservation']:
            out = (f'ReservationName=maint Nodes=node[0001-0016] NodeCnt=16\n   Users={self.users} Groups=(null)'
                   if argv[3] == 'maint' else '')
            if not out:
                return subprocess.CompletedProcess(argv, 1, '', f'Reservation {argv[3]} not found')
        elif '%N' in argv:
            out = 'node[0001-1000]'
        else:
            out = '\n'.join(f'compute|{n}|{self.states.get(n, ("idle", "none"))[0]}|'
                            f'{self.states.get(n, ("idle", "none"))[1]}' for n in nodes)
        return subprocess.CompletedProcess(argv, 0, out + '\n', '')


def options(*argv, reframe=()):
    ap = argparse.ArgumentParser()
    scope.add_options(ap)
    return scope.from_options(ap.parse_args(list(argv)), reframe)


def test_options_and_reframe_job_options_spell_the_same_scope(duo):
    a = options('--system', 'duo', '--reservation', 'maint', '--exclude', 'node[0003-0004]')
    b = options(reframe=['--system', 'duo', '-J', 'reservation=maint', '-J', '--exclude=node0003,node0004',
                         '-J', '--time=10'])
    assert a == b == scope.Scope('duo', (), 'maint', (), ('node0003', 'node0004'))
    assert options('--system', 'duo:eth').partitions == ('eth',)
    for argv, reframe, message in [
            (['--reservation', 'a', '--system', 'duo'], ['-J', 'reservation=b'], 'disagree'),
            (['--nodes', 'n[1-'], [], 'not a Slurm host list'),
            (['--nodes', 'n1;reboot'], [], 'shell metacharacters'),
            (['--partition', 'ib'], [], '--partition needs --system'),
            (['--system', 'duo', '--nodes', 'n1', '--exclude', 'n1'], [], '--exclude leaves no node'),
            (['--system', 'duo'], ['-J', 'exclude=n[1-'], 'not a Slurm host list')]:
        with pytest.raises(scope.ScopeError, match=message):
            options(*argv, reframe=reframe)


def another_site(duo: Path, settings: str) -> Path:
    """A second site directory beside ``duo`` (ReFrame keeps a settings file it loaded by its path)."""
    other = duo.with_name(f'{duo.name}-{len(list(duo.parent.iterdir()))}')
    other.mkdir()
    (other / 'settings.py').write_text(settings)
    return other


def test_a_site_system_that_matches_no_host_is_named_and_local_never_stands_in(duo, monkeypatch):
    # `local` matches any host only without a site: with one, the site's system or an error naming the host
    with pytest.raises(site.SiteError, match='no system of .* matches this host'):
        site.selected_system()
    with pytest.raises(scope.ScopeError, match='give --system'):
        options()
    monkeypatch.setenv(site.ENV, str(another_site(duo, DUO.replace(r"r'^duo-login$'", "'.*'"))))
    clear()
    assert site.selected_system() == 'duo' and options().system == 'duo'
    assert 'generic' not in site.systems()           # ReFrame's own fallback is not one of ours


def test_a_slice_of_a_1000_node_partition_becomes_one_short_exclusion(duo):
    fake = Slurm()
    where = options('--system', 'duo:ib', '--nodes', 'node[0101-0116]')
    sets = scope.node_sets(where, runner=fake)
    assert sets.cover == {'ib': [f'node{i:04d}' for i in range(101, 117)]} and sets.partial == ['ib']
    opts = scope.reframe_options(where, sets)
    assert opts == ['--system', 'duo:ib', '-J', 'exclude=node[0001-0100,0117-1000]']
    assert set(slurm.node_scope([opts[-1]]).exclude) == {f'node{i:04d}' for i in range(1, N + 1)} - set(sets.cover['ib'])
    # both rails of a dual-rail partition from one sinfo and one scontrol
    fake.calls.clear()
    sets = scope.node_sets(options('--system', 'duo', '--reservation', 'maint', '--exclude', 'node0002'), runner=fake)
    assert list(sets.cover) == ['ib', 'eth'] and sets.cover['ib'] == sets.cover['eth']
    assert [c[:2] for c in fake.calls] == [['scontrol', 'show'], ['sinfo', '-h'], ['scontrol', 'show']]
    assert len(sets.cover['ib']) == 15 and 'node0002' not in sets.cover['ib']
    with pytest.raises(scope.ScopeError, match='nodes in no partition of duo: nowhere1'):
        scope.node_sets(options('--system', 'duo', '--nodes', 'node0001,nowhere1'), runner=fake)
    with pytest.raises(scope.SlurmUnavailable, match='reservation gone'):
        scope.node_sets(options('--system', 'duo', '--reservation', 'gone'), runner=fake)


def test_a_reservation_that_refuses_a_job_user_is_named_before_the_run(duo, tmp_path, monkeypatch):
    """A reservation made for root only, on a site whose LAM jobs run as another user: one line naming the user, why
    they submit, and the fix, before anything runs (on the vcluster: three sbatch "Access denied" failures)."""
    (duo / 'settings.py').write_text(DUO.replace("'environs': ['duo-gnu']", "'environs': ['duo-gnu', 'duo-lam']")
                                     .replace("'target_systems': ['duo']}]", "'target_systems': ['duo']}, "
                                              "{'name': 'duo-lam', 'cc': 'mpicc', 'extras': {'run_as': 'lamuser'}}]"))
    clear()
    monkeypatch.setattr(os, 'geteuid', lambda: 0)
    monkeypatch.setattr('getpass.getuser', lambda: 'root')
    where = options('--system', 'duo', '--reservation', 'maint')
    with pytest.raises(scope.ScopeError, match=r'reservation maint does not admit lamuser, who would submit jobs of '
                       r'this run \(lamuser: the jobs of duo-lam run as lamuser \(extras.run_as\)\): scontrol update '
                       r'reservation=maint users\+=lamuser'):
        scope.node_sets(where, runner=Slurm(users='root'))
    assert scope.node_sets(where, runner=Slurm(users='root,lamuser')).cover['ib'][0] == 'node0001'
    assert scope.node_sets(where, runner=Slurm(users='-someone')).cover['ib'][0] == 'node0001'
    assert scope.node_sets(where, runner=Slurm()).cover['ib'][0] == 'node0001'     # accounts decide: sbatch will tell
    with pytest.raises(scope.ScopeError, match='does not admit lamuser'):
        scope.node_sets(where, runner=Slurm(users='-lamuser'))
    # not root: the suite submits as its own user only
    monkeypatch.setattr(os, 'geteuid', lambda: 1000)
    monkeypatch.setattr('getpass.getuser', lambda: 'alice')
    with pytest.raises(scope.ScopeError, match=r'does not admit alice, who would submit jobs of this run \(alice: '
                       r'runs the suite\)'):
        scope.node_sets(where, runner=Slurm(users='root,lamuser'))
    with pytest.raises(SystemExit) as stop:         # the node check before a run: a usage error, exit 2
        coverage.main(['--system', 'duo', '--reservation', 'maint', '--wait', '0'], runner=Slurm(users='root'))
    assert stop.value.code == 2


def test_reframe_args_keep_one_exclusion_however_many_sources(duo, tmp_path, capsys):
    left = tmp_path / 'left-out'
    left.write_text('node0007\n')
    assert scope.main(['reframe-args', '--system', 'duo', '--exclude-file', str(left), '--',
                       '-J', 'reservation=maint', '-J', 'exclude=node0003', '-n', 'osu', '-J', '--time=10'],
                      runner=Slurm()) == 0
    args = capsys.readouterr().out.split('\n')[:-1]
    assert args == ['--system', 'duo', '-J', 'reservation=maint', '-J', 'exclude=node[0003,0007]',
                    '-n', 'osu', '-J', '--time=10']
    assert scope.main(['reframe-args', '--system', 'duo', '--reservation', 'x', '--', '-J', 'reservation=y']) == 2
    assert 'disagree' in capsys.readouterr().err


def test_the_node_check_judges_the_scope_names_fabrics_and_leaves_drained_nodes_out(duo, tmp_path, capsys):
    fake = Slurm({'node0005': ('drained', 'DIMM'), 'node0500': ('down*', 'none')})
    left = tmp_path / 'left'
    # the reservation holds node0005, not node0500: only the first is judged, named with both rails
    rc = coverage.main(['--system', 'duo', '--wait', '0', '--left-out-file', str(left), '--',
                        '-J', 'reservation=maint'], runner=fake)
    out = capsys.readouterr().out.splitlines()
    assert rc == 0, out
    assert out[0] == 'node0005 (ib, eth): drained (drained; reason: DIMM): left out'
    assert out[1] == ('coverage: 15 nodes of duo:ib (ib), duo:eth (eth) in duo (reservation maint) usable; '
                      'left out: node0005')
    assert left.read_text() == 'node0005\n'
    assert coverage.main(['--system', 'duo', '--reservation', 'maint', '--wait', '0', '--strict'], runner=fake) == 1
    assert capsys.readouterr().out.splitlines() == ['node0005 (ib, eth): drained (drained; reason: DIMM)']


def test_nodes_nothing_used_are_one_line_per_rail_not_one_per_node(duo, tmp_path, capsys):
    import json
    report = tmp_path / 'r.json'
    case = {'name': 'link_allpairs', 'system': 'duo', 'partition': 'ib', 'environ': 'duo-gnu', 'result': 'pass',
            'interconnect': 'ib', 'job_nodelist': ['node0001', 'node0002']}
    report.write_text(json.dumps({'runs': [{'testcases': [case]}]}))
    assert coverage.main(['--system', 'duo', '--wait', '0', '--report', str(report)], runner=Slurm()) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == ['duo:ib (ib): no passing check moved payload over ib on 998 node(s) in scope: node[0003-1000]',
                   'duo:eth (eth): no passing check moved payload over eth on 1000 node(s) in scope: node[0001-1000]']


def test_reading_the_settings_writes_nothing_and_a_sites_runs_go_where_it_says(duo, tmp_path, monkeypatch):
    # a checkout of its own (the parts the tools need), never run from before
    clean = tmp_path / 'checkout'
    for part in ('config', 'reframe_tests', 'tools'):
        shutil.copytree(ROOT / part, clean / part, ignore=shutil.ignore_patterns('__pycache__'))
    env = {k: v for k, v in os.environ.items() if k not in ('RFM_PREFIX', 'NETREGRESS_STATE', 'PYTHONPATH')}
    env['NETREGRESS_DEPS'] = str(Path(sys.executable).parents[2])       # the venv's python: <deps>/venv/bin
    res = subprocess.run([str(clean / 'tools' / 'refs'), '--site', str(duo), 'check'], capture_output=True,
                         text=True, env=env, timeout=300)
    assert 'Traceback' not in res.stderr and 'no such reference directory' in res.stdout + res.stderr, res.stderr
    assert not (clean / 'run').exists(), sorted(p.name for p in (clean / 'run').iterdir())
    monkeypatch.setenv('XDG_STATE_HOME', str(tmp_path / 'xdg'))
    assert site.run_dir('duo') == tmp_path / 'xdg' / 'netregress' / 'duo'
    monkeypatch.setenv(site.ENV, str(another_site(duo, DUO.replace("'modules_system'",
                                                                   "'prefix': '/scratch/nr', 'modules_system'"))))
    clear()
    assert site.run_dir('duo') == Path('/scratch/nr')
    monkeypatch.setenv('RFM_PREFIX', str(tmp_path / 'p'))
    assert site.run_dir('duo') == tmp_path / 'p'
