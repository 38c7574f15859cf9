"""The link test: plans (full, sample, topology), nr-linkmap's result read into links, and the baseline-free
judgement that names the slow link, node or uplink (no cluster)."""
import itertools
import subprocess

import pytest

pytest.importorskip('reframe')
from netregress.measure import allpairs, cpulimit, linkplan, slurm  # noqa: E402
from netregress.judge import linkverdict  # noqa: E402


def nodes(n, prefix='n'):
    return [f'{prefix}{i}' for i in range(1, n + 1)]


# --- plans ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('n', range(2, 12))
def test_round_robin_covers_every_link_once_in_disjoint_rounds(n):
    rounds = linkplan.round_robin(nodes(n))
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    seen = [frozenset(p) for r in rounds for p in r]
    assert len(seen) == len(set(seen)) == n * (n - 1) // 2
    for r in rounds:
        used = [x for p in r for x in p]
        assert len(used) == len(set(used))


def check_rounds(plan):
    """Every round: each node sends at most once and receives at most once (nr-linkmap's rule)."""
    for r in plan.rounds:
        senders, receivers = [a for a, _ in r], [b for _, b in r]
        assert len(senders) == len(set(senders)) and len(receivers) == len(set(receivers)), r
        assert all(a != b for a, b in r)


@pytest.mark.parametrize('n', [2, 3, 8, 9, 32])
def test_full_plan_measures_every_link_both_ways_in_n_minus_1_rounds(n):
    plan = linkplan.full_plan(nodes(n))
    check_rounds(plan)
    assert len(plan.rounds) == (n - 1 if n % 2 == 0 else n)
    assert plan.pairs == n * (n - 1)                                      # every directed pair once
    assert len(plan.links()) == n * (n - 1) // 2
    text = plan.text().splitlines()
    assert text[0].startswith(f'# netregress link plan full: {n} nodes, {len(plan.rounds)} rounds')
    assert text[1].split()[:2] == [f'n1>n{n if n % 2 == 0 else n}', f'n{n if n % 2 == 0 else n}>n1'] or n % 2


def test_concurrency_cuts_rounds_into_that_many_streams():
    plan = linkplan.full_plan(nodes(8), max_streams=1)
    check_rounds(plan)
    assert len(plan.rounds) == 56 and all(len(r) == 1 for r in plan.rounds)        # one stream at a time
    assert len(linkplan.full_plan(nodes(8), max_streams=3).rounds) == 7 * 3


def test_passes_repeat_the_rounds_every_other_pass_in_reverse():
    plan = linkplan.full_plan(nodes(4), max_streams=1)
    twice = plan.passes(2)
    assert twice.rounds == plan.rounds + plan.rounds[::-1] and twice.pairs == 24 and twice.links() == plan.links()
    assert len(plan.passes(3).rounds) == 36 and plan.passes(3).rounds[24:] == plan.rounds
    assert plan.passes(1) is plan and twice.note.endswith("2 passes, each direction's best counts")
    assert twice.text().splitlines()[0].startswith('# netregress link plan full: 4 nodes, 24 rounds, 24 directed')
    for bad in (0, -1, 1.5, '2', True):
        with pytest.raises(ValueError, match='link passes must be a whole number'):
            plan.passes(bad)
    with pytest.raises(ValueError, match='partition extra link_passes'):
        allpairs.make_plan('full', nodes(4), 'x', {'link_passes': 0})
    plan, leaves = allpairs.make_plan('full', nodes(4), 'x', {'link_concurrency': 1, 'link_passes': 2})
    assert plan == twice and leaves is None


def test_sample_plan_rotates_so_that_every_link_is_covered_within_the_stated_runs():
    for n, k in ((8, 2), (9, 2), (16, 3), (400, 8)):
        runs = linkplan.runs_to_cover(n, k)
        covered = set()
        for run in range(runs):
            plan = linkplan.sample_plan(nodes(n), k, run, seed=7)
            check_rounds(plan)
            assert len(plan.rounds) == k
            covered |= plan.links()
        assert len(covered) == n * (n - 1) // 2, (n, k)
    assert linkplan.runs_to_cover(1000, 34) == 30        # 999 matchings, 34 a night: within 30 nights
    assert allpairs.sample_matchings_for(1000) == 34 and allpairs.sample_matchings_for(8) == 1
    assert 'every link within 4 runs' in linkplan.sample_plan(nodes(8), 2, 0, seed=1).note
    assert linkplan.sample_plan(nodes(8), 2, 0, 1).rounds != linkplan.sample_plan(nodes(8), 2, 1, 1).rounds


def test_topology_plan_loads_every_uplink_and_tests_inside_each_leaf():
    leaves = {'leaf1': nodes(4, 'a'), 'leaf2': nodes(4, 'b'), 'leaf3': nodes(3, 'c')}
    plan = linkplan.topology_plan(leaves)
    check_rounds(plan)
    inside = [r for r in plan.rounds if all(a[0] == b[0] for a, b in r)]
    across = [r for r in plan.rounds if all(a[0] != b[0] for a, b in r)]
    assert len(inside) == 3 and len(across) == 2 and len(plan.rounds) == 5
    for leaf in leaves.values():                        # every link inside a leaf
        assert all(frozenset(p) in plan.links() for p in itertools.combinations(leaf, 2))
    for r in across:                                    # every leaf sends up and receives from another leaf at once
        assert {a[0] for a, _ in r} == {'a', 'b', 'c'} and {b[0] for _, b in r} == {'a', 'b', 'c'}


# --- nr-linkmap's result -> links -> verdicts -----------------------------------------------------------------------

def linkmap_doc(mbps, rtt=20.0, failed=()):
    """An nr-linkmap result: one round per link, both directions, ``mbps(src, dst)``."""
    rounds = []
    hosts = sorted({h for pair in mbps for h in pair})
    for i, (a, b) in enumerate(itertools.combinations(hosts, 2)):
        pairs = []
        for src, dst in ((a, b), (b, a)):
            bad = (src, dst) in failed
            pairs.append({'src_host': src, 'dst_host': dst, 'bytes': 0 if bad else 10 ** 8, 'seconds': 0.5,
                          'mbps': 0.0 if bad else mbps[(src, dst)], 'status': 'failed' if bad else 'ok',
                          **({'error': 'round timeout: the receiver got nothing'} if bad else {'rtt_us': rtt})})
        rounds.append({'index': i + 1, 'wall_s': 0.6, 'pairs': pairs})
    return {'rounds': rounds}


def fabric(n, speed=lambda src, dst: 955.0, prefix='gige'):
    names = nodes(n, prefix)
    return {(a, b): speed(a, b) for a in names for b in names if a != b}


def test_a_directions_figure_is_its_rate_after_the_warm_up():
    """A 4 MB token bucket lets a short stream start at wire speed: 1,010 Mbit/s over a 956 Mbit/s link in all,
    955 after the warm-up; the steady rate is the link's, the whole-stream rate the fallback."""
    doc = linkmap_doc(fabric(2, lambda s, d: 1010.0))
    for p in doc['rounds'][0]['pairs']:
        p['steady_mbps'] = 955.0
    doc['rounds'][0]['pairs'][1]['steady_mbps'] = None              # a stream that ended inside its warm-up
    (link,) = linkverdict.collect_links(doc)
    assert link.directions == {'gige1->gige2': 955.0, 'gige2->gige1': 1010.0}


def test_a_direction_measured_in_several_passes_counts_its_best_and_a_failed_pass_fails_it():
    """Two passes: a stream starved once (0.43 x, as CI's fast fabric saw) is judged by its other pass; a slow
    link is slow in both and still named; a pass that failed fails the link whatever the other measured."""
    speed = fabric(4)
    doc = linkmap_doc(speed)
    again = linkmap_doc(speed)
    again['rounds'][0]['pairs'][0]['mbps'] = 0.43 * 955
    both = {'rounds': doc['rounds'] + [dict(r, index=r['index'] + 6) for r in again['rounds']]}
    links = linkverdict.collect_links(both)
    assert len(links) == 6 and links[0].directions['gige1->gige2'] == 955.0 and links[0].rounds == [1, 7]
    assert linkverdict.slow_links(links, min_fraction=0.85) == []
    slow = fabric(4, lambda s, d: 668 if d == 'gige2' else 955)
    links = linkverdict.collect_links({'rounds': linkmap_doc(slow)['rounds'] * 2})
    (msg,) = linkverdict.slow_links(links, min_fraction=0.85)
    assert 'the slow links all involve node gige2' in msg
    failed = linkmap_doc(speed, failed={('gige1', 'gige2')})
    links = linkverdict.collect_links({'rounds': doc['rounds'] + [dict(r, index=r['index'] + 6)
                                                                 for r in failed['rounds']]})
    (msg,) = linkverdict.unmeasured_links(links)
    assert msg.startswith('link gige1-gige2 not measured: gige1->gige2 (round 7)'), msg


def test_healthy_fabric_passes():
    links = linkverdict.collect_links(linkmap_doc(fabric(4, lambda s, d: 950 + int(s[-1]) + int(d[-1]))))
    assert len(links) == 6 and linkverdict.unmeasured_links(links) == []
    assert linkverdict.slow_links(links, min_fraction=0.85, rate_mbps=1000, rate_fraction=0.95) == []
    stats = linkverdict.summary(links)
    assert stats['min_link_mbps'] == 953 and stats['median_link_mbps'] == 955
    assert stats['max_rtt_us'] == 20.0


def test_slow_node_is_named_even_when_it_spoils_half_the_links():
    # tbf 700 Mbit/s towards gige2: its three links (half of the six) are slow in the direction into it
    links = linkverdict.collect_links(linkmap_doc(fabric(4, lambda s, d: 668 if d == 'gige2' else 955)))
    (msg,) = linkverdict.slow_links(links, min_fraction=0.85)
    assert msg.startswith('link gige1-gige2 at 668 Mbit/s (gige1->gige2) is 0.70 x the median 955 Mbit/s')
    assert 'gige2-gige3' in msg and 'gige2-gige4' in msg
    assert msg.endswith('(min_link_fraction 0.85); the slow links all involve node gige2')


def test_single_slow_link_is_named_without_blaming_a_node():
    links = linkverdict.collect_links(linkmap_doc(fabric(4, lambda s, d: 600 if (s, d) == ('gige3', 'gige2')
                                                         else 955)))
    assert linkverdict.slow_links(links, min_fraction=0.85) == [
        'link gige2-gige3 at 600 Mbit/s (gige3->gige2) is 0.63 x the median 955 Mbit/s (min_link_fraction 0.85)']


def test_line_rate_is_checked_for_every_link():
    links = linkverdict.collect_links(linkmap_doc(fabric(2, lambda s, d: 669.5)))
    assert linkverdict.slow_links(links, min_fraction=0.85) == []           # one link is its own median
    (msg,) = linkverdict.slow_links(links, min_fraction=0.85, rate_mbps=956.4, rate_fraction=0.95)
    assert msg == ('link gige1-gige2 at 670 Mbit/s (gige1->gige2) is 0.700 x the 956.4 Mbit/s a link carries '
                   '(min_rate_fraction 0.95)')


def test_linkmap_cpu_limits_tell_when_one_throttled_quota_decided_every_stream():
    """nr-linkmap's cpu_limits (one entry per rank, a delta over the job) as under tools/slow-machine 1: every rank
    in one throttled group is the machine's limit; a rank without a reading, another group, or no throttling is
    not (the links are then judged as always)."""
    hosts = ['gige1', 'gige2', 'gige3', 'gige4']
    entry = {'cgroup': '/netregress-slow-9', 'quota_us': 100000, 'period_us': 100000, 'throttled_ns': 4e8}
    doc = {'hosts': hosts, 'cpu_limits': [dict(entry, rank=r, host=h) for r, h in enumerate(hosts)]}
    limits = cpulimit.from_linkmap(doc)
    assert limits['gige1'] == [cpulimit.CpuLimit('/netregress-slow-9', 1.0, 0.4)]
    note = cpulimit.shared_cpu_quota(limits, one_machine=True, unit='ranks', consequence='recorded')
    assert note.startswith('every node ran under one CPU quota (cgroup /netregress-slow-9: 1 CPU), which throttled '
                           '4 of 4 ranks') and note.endswith('; recorded')
    assert cpulimit.shared_cpu_quota(cpulimit.from_linkmap({**doc, 'cpu_limits': doc['cpu_limits'][:3] + [None]}),
                                     one_machine=True) is None
    unthrottled = [dict(e, throttled_ns=0) for e in doc['cpu_limits']]
    assert cpulimit.shared_cpu_quota(cpulimit.from_linkmap({**doc, 'cpu_limits': unthrottled}),
                                     one_machine=True) is None
    own = doc['cpu_limits'][:3] + [dict(entry, cgroup='/drill')]
    assert cpulimit.shared_cpu_quota(cpulimit.from_linkmap({**doc, 'cpu_limits': own}), one_machine=True) is None
    assert cpulimit.from_linkmap({'hosts': hosts}) == {}                    # a kernel older than the field
    assert cpulimit.from_linkmap({'hosts': hosts, 'cpu_limits': [{'cgroup': '/'}]}) == {'gige1': [None]}


def test_a_slow_uplink_is_named_as_the_uplink_not_as_nodes():
    leaves = {'leaf1': ['a1', 'a2'], 'leaf2': ['b1', 'b2'], 'leaf3': ['c1', 'c2'], 'leaf4': ['d1', 'd2']}
    names = [n for leaf in leaves.values() for n in leaf]
    speed = {(s, d): 400.0 if (s[0] == 'a') != (d[0] == 'a') else 950.0 for s in names for d in names if s != d}
    links = linkverdict.collect_links(linkmap_doc(speed))
    (msg,) = linkverdict.slow_links(links, min_fraction=0.85, leaves=leaves)
    assert msg.endswith('the slow links all involve the uplink of leaf switch leaf1')
    # the same slow links without the tree: no single node explains them
    (msg,) = linkverdict.slow_links(links, min_fraction=0.85)
    assert 'involve' not in msg


def test_failed_pairs_are_sanity_failures_named_with_their_round_and_node():
    speed = fabric(4)
    failed = {(s, 'gige3') for s in ('gige1', 'gige2', 'gige4')}
    links = linkverdict.collect_links(linkmap_doc(speed, failed=failed))
    (msg,) = linkverdict.unmeasured_links(links)
    assert msg.startswith('link gige1-gige3 not measured: gige1->gige3 (round 2): round timeout: the receiver got '
                          'nothing')
    assert msg.endswith('; the failed links all involve node gige3')
    assert linkverdict.unmeasured_links([]) == ['no link was measured']
    assert linkverdict.payload_per_host(linkmap_doc(speed, failed=failed))['gige3'] == 3 * 10 ** 8


def test_many_failures_are_counted_not_listed():
    speed = fabric(6)
    links = linkverdict.collect_links(linkmap_doc(speed, failed=set(speed)))
    (msg,) = linkverdict.unmeasured_links(links)
    assert msg.count('not measured: ') == linkverdict.MAX_NAMED_LINKS
    assert f'{15 - linkverdict.MAX_NAMED_LINKS} more links not measured' in msg
    assert linkverdict.summary(links) == {}


def test_format_table_lists_every_link():
    links = linkverdict.collect_links(linkmap_doc(fabric(3), failed={('gige3', 'gige1')}))
    text = linkverdict.format_table(links, linkverdict.summary(links))
    lines = text.splitlines()
    assert lines[0].split()[:4] == ['rounds', 'link', 'Mbit/s', 'RTT']
    assert lines[1].split()[:3] == ['1', 'gige1-gige2', '955.0']
    assert 'gige3->gige1 (round 2)' in text and 'min_to_median = 1.000' in text


# --- Slurm's switch tree --------------------------------------------------------------------------------------------

def test_leaf_switches_from_scontrol_show_topology():
    text = ('SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=fast[1-4]\n'
            'SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=fast[5-8]\n'
            'SwitchName=spine Level=1 LinkSpeed=1 Nodes=fast[1-8] Switches=leaf[1-2]\n')
    runner = lambda argv, t: subprocess.CompletedProcess(argv, 0, text, '')  # noqa: E731
    assert slurm.leaf_switches(['fast2', 'fast5', 'fast6', 'fast1'], runner=runner) == {
        'leaf1': ['fast2', 'fast1'], 'leaf2': ['fast5', 'fast6']}
    with pytest.raises(slurm.SlurmQueryError, match='under no leaf switch .*gige1'):
        slurm.leaf_switches(['gige1'], runner=runner)
    flat = lambda argv, t: subprocess.CompletedProcess(argv, 0, '', '')  # noqa: E731
    with pytest.raises(slurm.SlurmQueryError, match='no switch tree'):
        slurm.leaf_switches(['fast1'], runner=flat)


def test_slurm_partition_name():
    assert slurm.slurm_partition(['--partition=gige', '--overcommit'], 'x') == 'gige'
    assert slurm.slurm_partition(['-p', 'eth'], 'x') == 'eth'
    assert slurm.slurm_partition([], 'fast') == 'fast'
