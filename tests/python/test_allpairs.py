"""The link test: plans that follow the switch tree, the matrix file, the verdict that names the smallest element,
what the check keeps. Synthetic fabrics and the real job output come from tests/python/linkfabric.py."""
import itertools
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from netregress.measure import allpairs, contention, cpulimit, linkplan, runplan, slurm  # noqa: E402
from netregress.judge import linkjob, linkmatrix, linknames, linkverdict  # noqa: E402
from linkfabric import FIXTURE, LINE, alone, keep_fixture, measure, tree  # noqa: E402

def directions(plan):
    return [d for r in plan.named_rounds() for d in r]


def assert_rounds_valid(plan):
    for r in plan.iter_rounds():
        assert len(set(r[:, 0])) == len(r) and len(set(r[:, 1])) == len(r), 'a node sends or receives twice'
        assert (r[:, 0] != r[:, 1]).all()


# --- plans ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('n', [2, 3, 4, 7, 8, 16])
def test_full_plan_measures_every_direction_once_in_n_minus_1_shifts(n):
    nodes = [f'n{i}' for i in range(n)]
    plan = linkplan.full_plan(nodes)
    assert len(plan.rounds) == n - 1 and plan.pairs == n * (n - 1)
    assert sorted(directions(plan)) == sorted(itertools.permutations(nodes, 2))
    assert_rounds_valid(plan)
    assert plan.link_count() == n * (n - 1) // 2


def test_full_plan_follows_the_switch_tree_not_slurms_order():
    topo = tree(2, 2, 2)
    plan = linkplan.full_plan(['n0004', 'n0001', 'n0003', 'n0002'], topo)
    assert plan.nodes == ('n0001', 'n0002', 'n0003', 'n0004')
    assert plan.named_rounds()[0] == [('n0001', 'n0002'), ('n0002', 'n0003'), ('n0003', 'n0004'), ('n0004', 'n0001')]


def test_plans_in_tree_order_share_no_switch_link_on_a_1_to_1_tree_while_the_old_orders_did():
    topo = tree(8, 8, 8)
    nodes = topo.order
    for plan in (linkplan.full_plan(nodes, topo), linkplan.topology_plan(topo),
                 linkplan.sample_plan(nodes, 4, 3, 11, topo)):
        assert contention.plan_collisions(plan, topo) == (0, 0), plan.name
    shuffled = list(nodes)
    random.Random(5).shuffle(shuffled)
    streams, rounds = contention.plan_collisions(linkplan.full_plan(shuffled), topo)
    assert streams > 1000 and rounds > 50              # a shuffled order (the sample plan's before) collides


def test_a_tapered_tree_gives_crossing_streams_their_share_and_the_taper_is_expected():
    topo = tree(4, 8, 4)                                 # 8 nodes a leaf, 4 uplinks: 2:1
    assert topo.uplinks == 4
    nodes = topo.order
    plan = linkplan.topology_plan(topo)
    least = contention.plan_contention(plan, topo, range(len(nodes)), len(nodes)).dense()
    leaf, _ = topo.arrays(nodes)
    ran = np.zeros(least.shape, dtype=bool)
    for r in plan.iter_rounds():
        ran[r[:, 0], r[:, 1]] = True
    cross = leaf[:, None] != leaf[None, :]
    assert (least[ran & cross] == 2).all() and (least[ran & ~cross] == 1).all() and (ran & cross).sum() == 96
    # the full plan too: whatever crosses under full load reads its share, and no healthy direction is called slow
    full = linkplan.full_plan(nodes, topo)
    m = measure(topo, full, nodes)
    v = linkverdict.judge(linkmatrix.LinkData(nodes, m), min_fraction=0.85,
                          fabric=linknames.Fabric.of(topo, nodes),
                          contention=contention.plan_contention(full, topo, range(len(nodes)), len(nodes)))
    assert np.nanmin(m) < 0.6 * LINE and linkverdict.slow_problems(v) == []
    # ... while without the plan's contention the same matrix fails against the line rate (the median link sank
    # with it: most directions cross)
    along_plan = contention.plan_contention(full, topo, range(len(nodes)), len(nodes))
    for least, problems in ((None, True), (along_plan, False)):
        v = linkverdict.judge(linkmatrix.LinkData(nodes, m), min_fraction=0.85, rate_mbps=LINE, rate_fraction=0.9,
                              contention=least)
        assert bool(linkverdict.slow_problems(v)) == problems


def test_the_tree_file_gives_each_node_its_leaf_and_the_cable_of_a_stream_to_it():
    """nr-linkmap --tree: under d-mod-k the cable is the node's position in the tree mod the uplinks; where the rule
    is not known one cable for all (every crossing stream may meet any other); nodes the tree lacks are left out."""
    import io
    topo = tree(3, 4, 2)
    nodes = ['x9'] + topo.order[5:]
    for routing, cables in (('d-mod-k', [p % 2 for p in range(5, 12)]), ('balanced', [0] * 7)):
        fp = io.StringIO()
        linkplan.write_tree(fp, linkplan.Topology(topo.leaves, topo.spines, 2, routing), nodes)
        lines = fp.getvalue().splitlines()
        assert lines[0].startswith('#') and lines[1:] == [f'{n} {p // 4} {u}' for n, p, u in
                                                           zip(topo.order[5:], range(5, 12), cables)], lines
    fp = io.StringIO()
    linkplan.write_tree(fp, topo, nodes, by_rank=True)
    assert [x.split()[0] for x in fp.getvalue().splitlines()[1:]] == [str(r) for r in range(1, 8)]


def test_concurrency_cuts_rounds_and_passes_repeat_them_every_other_in_reverse():
    nodes = [f'n{i}' for i in range(6)]
    plan = linkplan.full_plan(nodes, max_streams=4)
    assert all(len(r) <= 4 for r in plan.iter_rounds()) and plan.pairs == 30
    assert sorted(directions(plan)) == sorted(itertools.permutations(nodes, 2))
    base = linkplan.full_plan(nodes)
    twice = base.passes(2)
    assert twice.rounds == base.rounds + base.rounds[::-1] and '2 passes' in twice.note
    assert base.passes(1) is base
    with pytest.raises(ValueError, match='whole number of at least 1'):
        base.passes(0)


def test_sample_plan_measures_both_ways_and_covers_every_link_within_the_stated_runs():
    topo = tree(4, 5, 5)
    nodes = topo.order
    per_run = 3
    runs = linkplan.runs_to_cover(len(nodes), per_run)
    seen = set()
    for run in range(runs):
        plan = linkplan.sample_plan(nodes, per_run, run, seed=42, topology=topo)
        assert_rounds_valid(plan)
        got = set(directions(plan))
        assert all((b, a) in got for a, b in got), 'each link of a run is measured both ways'
        seen |= got
    assert seen == set(itertools.permutations(nodes, 2))
    assert runplan.sample_matchings_for(1000) == 17 and linkplan.runs_to_cover(1000, 17) == 30


def test_topology_plan_tests_inside_each_leaf_and_loads_every_uplink():
    topo = tree(3, 4, 4)
    plan = linkplan.topology_plan(topo, [n for n in topo.order if n != 'n0012'])
    assert_rounds_valid(plan)
    got = set(directions(plan))
    for leaf in topo.leaves.values():
        inside = [n for n in leaf if n != 'n0012']
        assert set(itertools.permutations(inside, 2)) <= got
    across = plan.named_rounds()[3:]
    assert [len(r) for r in across] == [10, 10]             # every node at once, each leaf to another
    with pytest.raises(linkplan.TopologyError, match='under no leaf switch of the switch tree: x9'):
        linkplan.topology_plan(topo, ['n0001', 'x9'])


def test_plan_file_is_one_round_per_line_by_host_name():
    plan = linkplan.full_plan(['a', 'b', 'c'])
    lines = plan.text().splitlines()
    assert lines[0].startswith('# netregress link plan full: 3 nodes, 2 rounds, 6 directed streams')
    assert lines[1:] == ['a>b b>c c>a', 'a>c b>a c>b']


# --- the switch tree ---------------------------------------------------------------------------------------------

TOPOLOGY_CONF = '''# two leaves under two spines
SwitchName=leaf1 Nodes=fast[1-4]
SwitchName=leaf2 Nodes=fast[5-8] LinkSpeed=100
SwitchName=s1 Switches=leaf[1-2]
SwitchName=s2 Switches=leaf[1-2]
'''
SCONTROL = ('SwitchName=s1 Level=1 LinkSpeed=1 Nodes=fast[1-8] Switches=leaf[1-2]\n'
            'SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=fast[1-4]\n'
            'SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=fast[5-8]\n')


def test_switch_tree_from_topology_conf_and_scontrol_show_topology():
    for text, spines in ((TOPOLOGY_CONF, ('s1', 's2')), (SCONTROL, ('s1',))):
        topo = linkplan.Topology.from_text(text)
        assert dict(topo.leaves) == {'leaf1': tuple(f'fast{i}' for i in range(1, 5)),
                                     'leaf2': tuple(f'fast{i}' for i in range(5, 9))}
        assert topo.spines == spines and topo.uplinks == len(spines) and topo.routing == 'balanced'
    topo = linkplan.Topology.from_text(TOPOLOGY_CONF, {'routing': 'd-mod-k', 'taper': 2})
    assert (topo.uplinks, topo.spine_of_cable(1), topo.position('fast6')) == (2, 's2', 5)
    for options, message in (({'routing': 'ecmp'}, "routing 'ecmp' is not one of d-mod-k, balanced"),
                             ({'uplinks': 2, 'taper': 2}, 'uplinks or taper, not both'),
                             ({'taper': 0.5}, 'taper must be 1 or more'), ({'spines': 2}, 'unknown key')):
        with pytest.raises(linkplan.TopologyError, match=message):
            linkplan.Topology.from_text(TOPOLOGY_CONF, options)
    with pytest.raises(linkplan.TopologyError, match='no leaf switch'):
        linkplan.Topology.from_text('SwitchName=s1 Switches=leaf1\n', source='topology.conf')


def test_slurm_switch_tree_and_its_absence():
    runner = lambda argv, t: subprocess.CompletedProcess(argv, 0, SCONTROL, '')  # noqa: E731
    assert slurm.switch_tree(runner=runner) == SCONTROL
    flat = lambda argv, t: subprocess.CompletedProcess(argv, 0, '', '')  # noqa: E731
    with pytest.raises(slurm.SlurmQueryError, match='no switch tree'):
        slurm.switch_tree(runner=flat)


# --- the matrix file --------------------------------------------------------------------------------------------

def test_matrix_file_round_trip_and_one_line_errors(tmp_path):
    m = np.array([[np.nan, 950.0, -1.0], [940.0, np.nan, 10.0], [np.nan, 930.0, np.nan]], dtype=np.float32)
    path = tmp_path / linkmatrix.MATRIX_FILE
    linkmatrix.write_matrix(path, m)                       # 5 of 6 directions: the dense form is the smaller
    assert path.stat().st_size == 16 + 9 * 4 and path.read_bytes()[:8] == b'NRLMAT1\0'
    back = linkmatrix.read_matrix(path, 3)
    assert np.array_equal(np.asarray(back), m, equal_nan=True)
    bad = tmp_path / 'bad.bin'
    for content, message in ((b'NRLMAT3\0' + bytes(8), 'not a link matrix'),
                             (b'NRLMAT2\0' + bytes(8), 'layout 0x0 unknown'),
                             (path.read_bytes()[:-4], '48 bytes, but 3 ranks need 52'),
                             (b'NRLM', 'shorter than the 16-byte header'),
                             (b'NRLMAT1\0' + (0).to_bytes(4, 'little') + (1).to_bytes(4, 'little'), 'flags 0x1')):
        bad.write_bytes(content)
        with pytest.raises(linkmatrix.LinkMatrixError, match=message) as err:
            linkmatrix.read_matrix(bad)
        assert str(err.value).startswith(str(bad)) and '\n' not in str(err.value)
    with pytest.raises(linkmatrix.LinkMatrixError, match='3 ranks, but the result names 4 nodes'):
        linkmatrix.read_matrix(path, 4)
    with pytest.raises(linkmatrix.LinkMatrixError, match='cannot read'):
        linkmatrix.read_matrix(tmp_path / 'none.bin')


def sparse_bytes(n, rows):
    """A sparse matrix file by hand: ``rows`` {sender: [(receiver, Mbit/s), ...]} as given (any order)."""
    import struct
    offsets, receivers, values = [0], [], []
    for s in range(n):
        for d, v in rows.get(s, []):
            receivers.append(d)
            values.append(v)
        offsets.append(len(receivers))
    count = len(receivers)
    return (b'NRLMAT2\0' + struct.pack('<IIQ', n, 1, count) + struct.pack(f'<{n + 1}Q', *offsets)
            + struct.pack(f'<{count}I', *receivers) + struct.pack(f'<{count}f', *values))


def test_a_partial_plan_keeps_the_sparse_form_read_without_a_dense_matrix(tmp_path):
    """A few directions of many ranks: the sparse form (8 bytes a direction, 8 a rank), read as memory maps; its
    entries checked; the same figures as the dense matrix they came from."""
    n = 50
    m = np.full((n, n), np.nan, dtype=np.float32)
    for s in range(n):                                     # shifts 1 and -1: 100 of 2,450 directions
        m[s, (s + 1) % n], m[s, (s - 1) % n] = 900.0 + s, 800.0 + s
    m[3, 4] = -1.0
    path = tmp_path / linkmatrix.MATRIX_FILE
    linkmatrix.write_matrix(path, m)
    assert path.read_bytes()[:8] == b'NRLMAT2\0' and path.stat().st_size == 24 + 8 * (n + 1) + 8 * 100
    assert path.stat().st_size < 16 + 4 * n * n
    back = linkmatrix.read_matrix(path, n)
    assert isinstance(back, linkmatrix.SparseMatrix) and isinstance(back.values, np.memmap)
    assert back.count == 100 and np.array_equal(back.dense(), m, equal_nan=True)
    assert back.get(np.array([3, 0, 0, 49]), np.array([4, 1, 2, 0])).tolist()[:2] == [-1.0, 900.0]
    assert np.isnan(back.get(np.array([0]), np.array([2]))).all() and back.get(np.array([49]), [0])[0] == 949.0
    # hand-written files: the same as what write_matrix wrote, and each wrong one refused in one line
    good = {0: [(1, 900.0), (2, 800.0)], 2: [(0, 700.0)]}
    bad = tmp_path / 'bad.bin'
    bad.write_bytes(sparse_bytes(3, good))
    assert linkmatrix.read_matrix(bad, 3).dense()[0, 2] == 800.0
    for rows, message in (({0: [(2, 1.0), (1, 1.0)]}, 'direction 1 \\(0 -> 1\\) is not a new receiver'),
                          ({1: [(1, 1.0)]}, r'\(1 -> 1\)'), ({2: [(3, 1.0)]}, r'\(2 -> 3\)'),
                          ({0: [(1, 1.0), (1, 2.0)]}, r'direction 1 \(0 -> 1\)')):
        bad.write_bytes(sparse_bytes(3, rows))
        with pytest.raises(linkmatrix.LinkMatrixError, match=message) as err:
            linkmatrix.read_matrix(bad, 3)
        assert str(err.value).startswith(str(bad)) and '\n' not in str(err.value)
    whole = sparse_bytes(3, good)
    for content, message in ((whole[:-4], 'but 3 ranks and 3 directions need'),
                             (whole[:24] + (5).to_bytes(8, 'little') + whole[32:], 'row offsets do not run from 0'),
                             (whole[:12] + (2).to_bytes(4, 'little') + whole[16:], 'layout 0x2 unknown'),
                             (whole[:20], 'shorter than the 24-byte sparse header')):
        bad.write_bytes(content)
        with pytest.raises(linkmatrix.LinkMatrixError, match=message):
            linkmatrix.read_matrix(bad, 3)


@pytest.mark.parametrize('plan', ['full', 'topology', 'sample'])
def test_both_forms_read_alike_block_by_block(plan):
    """The verdict's and the report's blocks (rows, links, columns) list the same directions from either form."""
    topo = tree(4, 8, 4)
    nodes = topo.order
    p = {'full': lambda: linkplan.full_plan(nodes, topo), 'topology': lambda: linkplan.topology_plan(topo),
         'sample': lambda: linkplan.sample_plan(nodes, 3, 0, 7, topo)}[plan]()
    m = measure(topo, p, nodes, (('cable', 'n0005', 0.5),))
    m[1, 2] = -1.0
    dense, sparse = linkmatrix.cells(m), linkmatrix.cells(linkmatrix.SparseMatrix.from_dense(m))
    rows = np.array([3, 9, 0, 31])
    a, b = dense.rows(rows), sparse.rows(rows)
    assert sorted(zip(rows[a[0]], a[1], a[2])) == sorted(zip(rows[b[0]], b[1], b[2]))

    def listed(blocks, width):
        out = set()
        for block in blocks:
            out |= {tuple(float(x) if i >= width else int(x) for i, x in enumerate(t)) for t in zip(*block)}
        return out

    def links(blocks):
        return {(min(a, b), max(a, b), min(x, y) if x > 0 and y > 0 else x if x > 0 else y)
                for a, b, x, y in listed(blocks, 2)}

    assert links(dense.links()) == links(sparse.links()) and len(links(dense.links())) > 0
    cols = [{(int(s), int(j0 + c), float(v)) for s, c, v in zip(r, cc, vv)} for j0, _, r, cc, vv in dense.columns()]
    assert set().union(*cols) == {(int(s), int(c), float(v)) for _, _, s, c, v in sparse.columns() for s, c, v in
                                  zip(s, c, v)}


@pytest.mark.parametrize('fault', [(), (('cable', 'n0005', 0.5),), (('uplink', 'leaf1', 2, 0.5),),
                                   (('spine', 'spine1', 0.6),)])
@pytest.mark.parametrize('plan', ['topology', 'sample'])
def test_the_verdict_on_the_sparse_form_is_the_verdict_on_the_dense_one(tmp_path, plan, fault):
    """The same directions judged from the sparse file and from the dense matrix: the same verdict, figure for
    figure (a failed direction and the rechecks included)."""
    topo = tree(4, 8, 4)
    nodes = topo.order
    p = linkplan.topology_plan(topo) if plan == 'topology' else linkplan.sample_plan(nodes, 3, 0, 7, topo)
    m = measure(topo, p, nodes, fault)
    ran = np.argwhere(~np.isnan(m))
    m[tuple(ran[5])] = -1.0
    linkmatrix.write_matrix(tmp_path / linkmatrix.MATRIX_FILE, m)
    sparse = linkmatrix.read_matrix(tmp_path / linkmatrix.MATRIX_FILE, len(nodes))
    assert isinstance(sparse, linkmatrix.SparseMatrix)
    fabric = linknames.Fabric.of(topo, nodes)
    least = contention.plan_contention(p, topo, range(len(nodes)), len(nodes))
    rechecked = ran[least.of(ran[:, 0], ran[:, 1]) == 1][:3]         # measured again alone: as read
    v = [linkverdict.judge(linkmatrix.LinkData(nodes, matrix, rechecked=rechecked), min_fraction=0.85,
                           rate_mbps=LINE, rate_fraction=0.9, fabric=fabric, contention=least)
         for matrix in (m, sparse)]
    assert v[0].directions == v[1].directions == len(ran) and v[0].links == v[1].links
    for kind in ('slow', 'failed'):
        a, b = getattr(v[0], kind), getattr(v[1], kind)
        order_a, order_b = (np.lexsort((x['dst'], x['src'])) for x in (a, b))
        for key in a:
            assert np.array_equal(a[key][order_a], b[key][order_b], equal_nan=True), (kind, key)
    assert v[0].summary() == v[1].summary() and v[0].per_node == v[1].per_node and v[0].switches == v[1].switches
    assert [x.as_dict() for x in v[0].slow_named] == [x.as_dict() for x in v[1].slow_named]
    assert linkverdict.slow_problems(v[0]) == linkverdict.slow_problems(v[1])
    assert linkverdict.failed_problems(v[0]) == linkverdict.failed_problems(v[1])
    assert not fault or 'the slow links all involve' in linkverdict.slow_problems(v[1])[0]


def test_the_plans_contention_keeps_only_what_is_shared():
    """plan_contention holds the directions above 1 only: none on a 1:1 tree, the crossing ones on a 2:1 tree; a
    direction another round ran alone counts 1; reordered and cleared as the verdict needs."""
    flat = tree(4, 8, 8)
    assert len(contention.plan_contention(linkplan.topology_plan(flat), flat, range(32), 32).keys) == 0
    topo = tree(4, 8, 4)
    plan = linkplan.topology_plan(topo)
    least = contention.plan_contention(plan, topo, range(32), 32)
    assert len(least.keys) == 96 and least.max() == 2
    twice = linkplan.LinkPlan('t', plan.nodes, plan.rounds + (np.array([[0, 8]]),))    # 0 -> 8 once alone
    again = contention.plan_contention(twice, topo, range(32), 32)
    assert least.of([0], [8])[0] == 2 and again.of([0], [8])[0] == 1 and len(again.keys) == 95
    order = list(reversed(range(32)))
    moved = least.reordered(order)
    assert np.array_equal(moved.dense(), least.dense()[np.ix_(order, order)])
    assert least.cleared(np.array([[0, 8]])).of([0, 1], [8, 9]).tolist() == [1, 2]
    assert np.array_equal(contention.Contention.from_dense(least.dense()).keys, least.keys)


def today_doc(speeds, failed=(), passes=1):
    """An nr-linkmap result in today's form (every pair of every round) for {(src, dst): Mbit/s} by rank."""
    hosts = sorted({h for pair in speeds for h in pair})
    rank = {h: i for i, h in enumerate(hosts)}
    rounds = []
    for k in range(passes):
        pairs = [{'src': rank[s], 'dst': rank[d], 'src_host': s, 'dst_host': d, 'bytes': 10 ** 8,
                  'mbps': v * 0.9, 'steady_mbps': v + k, 'status': 'ok'} for (s, d), v in speeds.items()]
        for p in pairs:
            if (p['src_host'], p['dst_host']) in failed and k == 0:
                p.update(status='failed', error='round timeout: the receiver got nothing', steady_mbps=0.0)
        rounds.append({'index': k, 'pairs': pairs})
    return {'hosts': hosts, 'rounds': rounds, 'status': 'ok'}


def test_todays_result_becomes_the_matrix_best_round_steady_rate_and_a_failure_stands(tmp_path):
    speeds = {('a', 'b'): 900.0, ('b', 'a'): 800.0, ('a', 'c'): 700.0}
    data = linkmatrix.from_result(today_doc(speeds, failed={('a', 'c')}, passes=2), tmp_path)
    m = data.matrix
    assert data.nodes == ['a', 'b', 'c'] and m[0, 1] == 901.0 and m[1, 0] == 801.0      # the better pass
    assert m[0, 2] == -1.0 and data.errors == {(0, 2): 'round 0: round timeout: the receiver got nothing'}
    assert np.isnan(m[2, 0]) and np.isnan(m[0, 0])
    assert data.bytes_per_host == {'a': 6e8, 'b': 4e8, 'c': 2e8}
    doc = today_doc(speeds)
    doc['rounds'][0]['pairs'][0]['steady_mbps'] = None                  # a stream too short for a warm-up
    assert linkmatrix.from_result(doc, tmp_path).matrix[0, 1] == pytest.approx(810.0)
    doc['rounds'][0]['pairs'][0]['src'] = 7
    with pytest.raises(linkmatrix.LinkMatrixError, match='round 0: rank 7 is not one of the 3 ranks'):
        linkmatrix.from_result(doc, tmp_path)


def test_the_compact_result_reads_the_matrix_file_and_its_suspects(tmp_path):
    m = np.full((3, 3), 950.0, dtype=np.float32)
    np.fill_diagonal(m, np.nan)
    m[2, 0] = -1.0
    linkmatrix.write_matrix(tmp_path / linkmatrix.MATRIX_FILE, m)
    doc = {'nodes': ['a', 'b', 'c'], 'rounds': [{'index': 0, 'wall_s': 0.5, 'failed_pairs': 1}],
           'suspects': [{'src': 2, 'dst': 0, 'round': 1, 'error': 'stalled'}],
           'recheck': {'pairs': [{'src': 0, 'dst': 1, 'round': 3}, {'src': 1, 'dst': 2, 'round': 4, 'streams': 2},
                                 {'src': 1, 'dst': 2, 'round': 5, 'streams': 1, 'outcome': 'slow'},
                                 {'src': 2, 'dst': 1, 'round': 5, 'streams': 1, 'outcome': 'pending'}]},
           'per_node': [{'rank': r, 'sent_bytes': 10, 'received_bytes': 5} for r in range(3)]}
    data = linkmatrix.from_result(doc, tmp_path)
    assert data.errors == {(2, 0): 'round 1: stalled'} and data.rechecked.tolist() == [[0, 1], [1, 2]]
    assert data.uncontended.tolist() == [[0, 1], [1, 2]]         # a batch of 2 built without the tree: contended
    doc['recheck']['batches'] = 'cables'                         # built from the tree: every recorded one as read
    data = linkmatrix.from_result(doc, tmp_path)
    assert data.rechecked.tolist() == [[0, 1], [1, 2]] and data.uncontended.tolist() == [[0, 1], [1, 2], [1, 2]]
    assert data.bytes_per_host == {'a': 15.0, 'b': 15.0, 'c': 15.0}
    with pytest.raises(linkmatrix.LinkMatrixError, match='2 nodes'):
        linkmatrix.from_result({**doc, 'nodes': ['a', 'b']}, tmp_path)


# --- the verdict -----------------------------------------------------------------------------------------------------

def judged(topo, faults=(), plan='full', noise=0.02, rate=None, **kw):
    nodes = topo.order
    p = {'full': lambda: linkplan.full_plan(nodes, topo), 'topology': lambda: linkplan.topology_plan(topo),
         'sample': lambda: linkplan.sample_plan(nodes, 3, 0, 7, topo)}[plan]()
    m = measure(topo, p, nodes, faults, noise)
    return linkverdict.judge(linkmatrix.LinkData(nodes, m), min_fraction=0.85, rate_mbps=rate,
                             fabric=linknames.Fabric.of(topo, nodes),
                             contention=contention.plan_contention(p, topo, range(len(nodes)), len(nodes)), **kw)


def one_message(v):
    problems = linkverdict.failed_problems(v) + linkverdict.slow_problems(v)
    assert len(problems) == 1, problems
    return problems[0]


@pytest.mark.parametrize('taper', [1, 2])
@pytest.mark.parametrize('plan', ['full', 'topology', 'sample'])
def test_each_fault_is_named_by_its_smallest_element_in_every_plan(plan, taper):
    topo = tree(6, 8, 8 // taper)
    assert linkverdict.failed_problems(judged(topo, plan=plan)) == []
    assert linkverdict.slow_problems(judged(topo, plan=plan)) == []            # healthy: no false alarm
    cases = [((('cable', 'n0010', 0.5),), 'the slow links all involve node n0010 (its cable, port or NIC, both ways'),
             ((('in', 'n0020', 0.6),), 'node n0020 (its cable, port or NIC, every direction towards it'),
             ((('uplink', 'leaf2', 1, 0.5),), 'all involve uplink 1 of leaf switch leaf2 (to spine1) (both ways'),
             ((('spine', 'spine3', 0.4),), 'all involve spine switch spine3 (every pair routed through it'),
             ((('down', 'n0030'),), 'all involve node n0030 (its cable, port or NIC, both ways'),
             ((('cable', 'n0040', 0.5),), 'a stable rate: a link running at a lower speed?')]
    for faults, expected in cases:
        v = judged(topo, faults, plan, noise=0.0 if 'stable' in expected else 0.02)
        if plan == 'sample' and taper == 2 and faults[0][0] in ('in', 'cable'):
            # a node's own link capped at the taper's share or above shows only inside its leaf, where a sample
            # run measures a direction or two: they are named, the node when there are two of them
            assert faults[0][1] in one_message(v)
            continue
        assert expected in one_message(v), (faults, one_message(v))
    assert 'the node is down or unreachable' in one_message(judged(topo, (('down', 'n0030'),), plan))


def test_a_recheck_batch_from_the_tree_is_judged_as_read_so_a_colliding_plans_share_hides_no_slow_spine():
    """A full plan in an order that ignores the tree collides (up to 3 streams a cable); a slow spine's directions
    read their share there. nr-linkmap measures the suspects again in batches that share no cable (--tree): each
    reads its own rate, 0.6 of the line. Judged with the plan's share (x 2 or 3) they would pass and the spine go
    unnamed; judged as read, as a recheck alone is, the spine is named."""
    topo = tree(4, 8, 8)
    nodes = topo.order
    shuffled = list(nodes)
    random.Random(5).shuffle(shuffled)
    plan = linkplan.full_plan(shuffled)
    faults = (('spine', 'spine3', 0.6),)
    m = measure(topo, plan, nodes, faults)
    least = contention.plan_contention(plan, topo, [nodes.index(x) for x in plan.nodes], len(nodes))
    links = np.fmin(m, m.T)[np.triu_indices(len(nodes), 1)]
    suspects = np.argwhere(m < 0.85 * np.sort(links)[len(links) // 2])     # nr-linkmap's rule, the raw median
    assert least.max() == 3 and len(suspects) > 64
    rechecked = m.copy()
    s, d = suspects[:, 0], suspects[:, 1]
    rechecked[s, d] = np.fmax(m[s, d], alone(topo, nodes, faults)[s, d])
    fabric = linknames.Fabric.of(topo, nodes)
    problems = [linkverdict.slow_problems(linkverdict.judge(linkmatrix.LinkData(nodes, rechecked, **kw),
                                                            min_fraction=0.85, fabric=fabric, contention=least))
                for kw in ({}, {'uncontended': suspects})]
    assert 'spine switch spine3' not in ' '.join(problems[0])
    assert len(problems[1]) == 1 and 'the slow links all involve spine switch spine3' in problems[1][0], problems[1]


def test_with_many_leaves_a_cable_is_named_not_the_node_it_alone_serves_in_the_topology_plan():
    """The topology plan sends across only from place p to place p: with one cable a node (K = leaf size), uplink
    cable p of a leaf carries exactly that node's crossing directions, most of its own: the cable, whose every
    direction is slow, is named, not the node whose directions inside the leaf are fine."""
    topo = tree(30, 4, 4)
    message = one_message(judged(topo, (('uplink', 'leaf3', 2, 0.5),), 'topology'))
    assert 'all involve uplink 2 of leaf switch leaf3 (to spine2) (both ways: 58 of 58 directions' in message, message


def test_a_downgraded_link_is_stable_a_slow_one_need_not_be():
    topo = tree(4, 4, 4)
    noisy = linkverdict.judge(linkmatrix.LinkData(topo.order, alone(topo, topo.order, (('cable', 'n0005', 0.5),),
                                                                    noise=0.15)), min_fraction=0.85)
    assert 'node n0005' in one_message(noisy) and 'stable' not in one_message(noisy)


def test_a_fabric_wide_slowdown_fails_against_the_line_rate_only():
    topo = tree(4, 4, 4)
    nodes = topo.order
    m = alone(topo, nodes) * 0.5
    data = linkmatrix.LinkData(nodes, m)
    assert linkverdict.slow_problems(linkverdict.judge(data, min_fraction=0.85)) == []
    v = linkverdict.judge(data, min_fraction=0.85, rate_mbps=LINE * 0.98, rate_fraction=0.95)
    message = one_message(v)
    assert 'all involve the whole fabric (every direction: 240 of 240 directions' in message
    assert '0.51 x the line rate' in message and '0.95 x the 980 Mbit/s a link carries' in message


def test_a_single_slow_direction_is_named_itself_and_an_element_needs_most_of_its_directions():
    topo = tree(4, 4, 4)
    m = alone(topo, topo.order)
    m[0, 5] = 300.0
    m[3, 7] = 400.0
    message = one_message(linkverdict.judge(linkmatrix.LinkData(topo.order, m), min_fraction=0.85))
    assert message.startswith('2 of 240 directions below 0.85 x the median link (')
    assert re.search(r'each against what its round let it read: n0001->n0006 at 0.3\d x; n0004->n0008 at 0.4\d x$',
                     message)


def test_two_leaves_seen_only_against_each_other_are_named_together():
    topo = tree(2, 4, 1)
    m = alone(topo, topo.order, (('uplink', 'leaf1', 0, 0.4),))
    # more directions cross than stay inside: the median link sinks with them, the line rate does not
    message = one_message(linkverdict.judge(linkmatrix.LinkData(topo.order, m), min_fraction=0.85, rate_mbps=LINE,
                                            rate_fraction=0.9, fabric=linknames.Fabric.of(topo, topo.order)))
    assert re.search(r'all involve the uplink of leaf switch leaf0 \(to spine0\) \(both ways: 32 of 32 directions '
                     r'.*\), or the uplink of leaf switch leaf1 \(to spine0\) \(both ways\), or spine switch spine0$',
                     message), message
    # three leaves tell them apart
    topo = tree(3, 4, 1)
    m = alone(topo, topo.order, (('uplink', 'leaf1', 0, 0.4),))
    message = one_message(linkverdict.judge(linkmatrix.LinkData(topo.order, m), min_fraction=0.85,
                                            fabric=linknames.Fabric.of(topo, topo.order)))
    assert 'all involve the uplink of leaf switch leaf1 (to spine0) (both ways: 64 of 64 directions' in message
    assert ', or' not in message


def test_without_the_tree_a_slow_node_is_still_named_even_when_it_spoils_half_the_links():
    nodes = ['a', 'b', 'c', 'd']
    m = np.full((4, 4), 950.0, dtype=np.float32)
    np.fill_diagonal(m, np.nan)
    m[1, :] = m[:, 1] = 600.0
    m[1, 1] = np.nan
    v = linkverdict.judge(linkmatrix.LinkData(nodes, m), min_fraction=0.85)
    assert v.summary()['median_link_mbps'] == 950.0           # the upper median: 3 of 6 links are slow
    assert 'the slow links all involve node b (its cable, port or NIC, both ways: 6 of 6 directions at 0.63 x' \
        in one_message(v)


def test_failed_directions_are_a_sanity_failure_with_their_first_error_and_many_are_counted():
    nodes = [f'g{i}' for i in range(8)]
    m = np.full((8, 8), 950.0, dtype=np.float32)
    np.fill_diagonal(m, np.nan)
    for i, j in ((0, 3), (4, 1), (2, 6), (5, 7), (6, 0), (7, 2), (1, 5), (3, 4)):
        m[i, j] = -1.0
    data = linkmatrix.LinkData(nodes, m, errors={(0, 3): 'round 2: round timeout: the receiver got nothing'})
    (message,) = linkverdict.failed_problems(linkverdict.judge(data, min_fraction=0.85))
    assert message.startswith('8 of 56 directions not measured (the first: g0->g3: round 2: round timeout: the '
                              'receiver got nothing): g0->g3; ')
    assert message.endswith(f'{8 - linkverdict.MAX_NAMED} more (all in links.txt)')
    empty = linkverdict.judge(linkmatrix.LinkData(['a', 'b'], np.full((2, 2), np.nan, np.float32)), min_fraction=0.85)
    assert linkverdict.failed_problems(empty) == ['no link was measured'] and empty.summary() == {}


def test_the_table_and_the_json_keep_the_suspects_only():
    topo = tree(3, 4, 4)
    v = judged(topo, (('out', 'n0002', 0.5),), 'full')
    text = linkjob.format_table(v)
    lines = text.splitlines()
    assert lines[0].startswith('132 directions measured, 11 slow, 0 failed')
    assert sum(1 for x in lines if x.startswith('n0002->')) == 11 and 'n0001->n0003' not in text
    assert 'median_link_mbps = ' in text
    doc = linkjob.suspects_json(v, limit=5)
    assert doc['slow_count'] == 11 and len(doc['slow']) == 5 and doc['slow'][0]['src_host'] == 'n0002'
    assert doc['named_slow'][0]['name'] == 'node n0002' and doc['named_slow'][0]['direction'] == 'out'
    assert v.per_node['slow_out'][1] == 11 and v.per_node['median_share_out'][1] == pytest.approx(0.5, abs=0.03)
    leaf0 = v.switches['leaves'][0]
    assert leaf0['leaf'] == 'leaf0' and leaf0['up']['slow'] == 8 and leaf0['nodes'] == 4


def test_infiniband_ports_below_the_line_rate_or_not_active_are_named():
    text = ('port n1 mlx5_0/1 rate=200 Gb/sec (4X HDR)|state=4: ACTIVE\n'
            'port n2 mlx5_0/1 rate=100 Gb/sec (4X EDR)|state=4: ACTIVE\n'
            'port n3 mlx5_0/1 rate=200 Gb/sec (4X HDR)|state=1: DOWN\n'
            'port n3 mlx5_1/1 rate=200 Gb/sec (4X HDR)|state=4: ACTIVE\nnoise line\n')
    problems = linkverdict.port_problems(text, ['n1', 'n2', 'n3', 'n4'], 'mlx5_0:1', 200000.0)
    assert problems == [
        "node n2: port mlx5_0/1 runs at 100 Gb/sec (4X EDR), below the fabric's line rate of 200 Gb/sec: its link "
        'trained to a lower width or speed (cable or port)',
        'node n3: port mlx5_0/1 is 1: DOWN (not ACTIVE)',
        'node n4: no InfiniBand port mlx5_0:1 in /sys/class/infiniband']
    assert linkverdict.port_problems(text, ['n1'], None, None) == []
    assert 'port $(hostname -s) ${d%%/ports/*}/${p##*/} rate=$(cat $p/rate)|state=$(cat $p/state)' in \
        allpairs.PORTS_CMD


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


# --- what a real job's output becomes ----------------------------------------------------------------------------

def test_a_real_jobs_output_is_kept_compact_and_read_back_the_same(tmp_path):
    doc = keep_fixture(tmp_path)
    kept = json.loads((tmp_path / 'result.json').read_text())
    assert 'matrix_mbps' not in kept and all('pairs' not in r for r in kept['rounds'])
    assert kept['hosts'] == doc['hosts'] and kept['recheck'] == doc['recheck'] and kept['compacted']
    links = json.loads((tmp_path / 'links.json').read_text())
    assert links['nodes'] == ['node1', 'node2', 'node3', 'node4'] and links['matrix'] == 'linkmatrix.bin'
    m = linkmatrix.read_matrix(tmp_path / 'linkmatrix.bin', 4)
    best = max(p['steady_mbps'] for r in doc['rounds'] for p in r['pairs'] if (p['src'], p['dst']) == (3, 1))
    assert m[3, 1] == pytest.approx(best)              # the recheck's round (node4->node2 alone) is its best
    assert links['slow_count'] == len(links['slow']) > 0 and links['rechecked'] == 4
    assert {(x['src'], x['dst']) for x in links['slow']} == {tuple(map(int, ij)) for ij in
                                                             np.argwhere(np.asarray(m) < 0.85 * links['summary']
                                                                         ['median_link_mbps'])}
    table = (tmp_path / 'links.txt').read_text()
    assert all(f'{x["src_host"]}->{x["dst_host"]}' in table for x in links['slow'])
    # the compact result (kept) is read back with the matrix file: the same verdict, nothing parsed twice
    again = linkmatrix.from_result(kept, tmp_path)
    assert np.array_equal(np.asarray(again.matrix), np.asarray(m), equal_nan=True)


def test_by_hand_the_verdict_reads_a_job_output_and_bad_input_is_one_line(tmp_path, capsys):
    keep_fixture(tmp_path)
    (tmp_path / 'links.json').unlink()
    assert linkjob.main([str(tmp_path / 'result.json'), '--keep']) == 1
    out = capsys.readouterr().out
    assert out.startswith('FAILED ') and 'linkjob: 4 nodes, 12 directions' in out
    assert json.loads((tmp_path / 'links.json').read_text())['slow_count'] == 6
    (tmp_path / 'linkmatrix.bin').write_bytes(b'junk')
    assert linkjob.main([str(tmp_path / 'result.json')]) == 2
    err = capsys.readouterr().err
    assert err.startswith('linkjob: ') and 'shorter than the 16-byte header' in err and err.count('\n') == 1
    for text, said in (('{"hosts": ', 'result.json: not JSON'), ('[1, 2]', 'not an nr-linkmap result')):
        (tmp_path / 'result.json').write_text(text)
        assert linkjob.main([str(tmp_path / 'result.json')]) == 2
        err = capsys.readouterr().err
        assert err.startswith('linkjob: ') and said in err and err.count('\n') == 1, err
    with pytest.raises(SystemExit) as stop:
        linkjob.main([str(tmp_path / 'result.json'), '--plan', 'full'])
    assert stop.value.code == 2 and '--plan and --sample need --topology' in capsys.readouterr().err


def test_by_hand_a_directory_it_cannot_keep_in_is_one_line_not_a_traceback(tmp_path, capsys, monkeypatch):
    keep_fixture(tmp_path)

    def refused(*a, **kw):
        raise PermissionError(13, 'Permission denied', str(tmp_path / 'links.json'))
    monkeypatch.setattr(linkjob, 'write_link_files', refused)
    assert linkjob.main([str(tmp_path / 'result.json'), '--keep']) == 2
    assert capsys.readouterr().err == f'linkjob: --keep: [Errno 13] Permission denied: \'{tmp_path}/links.json\'\n'


@pytest.mark.parametrize('plan, extra, expected', [
    ('full', [], 'full'), ('topology', [], 'topology'),
    ('sample', [], ('sample', 1, 0, 1)), ('sample', ['--sample', '2', '1', '9'], ('sample', 2, 1, 9))])
def test_by_hand_with_a_tree_the_verdict_expects_the_contention_of_the_plan_named(tmp_path, capsys, monkeypatch,
                                                                                plan, extra, expected):
    """--topology with --plan: the plan is built (the sample plan from --sample PER_RUN RUN SEED, else 1 0 1) and
    its contention handed to the verdict."""
    keep_fixture(tmp_path)
    (tmp_path / 'topology.conf').write_text('SwitchName=s1 Nodes=node[1-2]\nSwitchName=s2 Nodes=node[3-4]\n'
                                            'SwitchName=top Switches=s[1-2]\n')
    built, judged = [], []
    sample_plan, judge = linkplan.sample_plan, linkverdict.judge
    monkeypatch.setattr(linkplan, 'sample_plan', lambda nodes, per_run, run_index, seed, topology=None:
                        built.append((per_run, run_index, seed)) or sample_plan(nodes, per_run, run_index, seed,
                                                                                  topology))
    monkeypatch.setattr(linkjob, 'judge', lambda *a, **kw: judged.append(kw['contention']) or judge(*a, **kw))
    argv = [str(tmp_path / 'result.json'), '--topology', str(tmp_path / 'topology.conf'), '--plan', plan, *extra]
    assert linkjob.main(argv) == 1
    assert 'linkjob: 4 nodes, 12 directions' in capsys.readouterr().out
    assert built == ([expected[1:]] if plan == 'sample' else [])
    (least,) = judged
    assert least is not None and least.shape == (4, 4) and least.max() > 1

# --- the cost model ---------------------------------------------------------------------------------------------

def test_the_cost_model_reads_fitted_constants_and_says_which(tmp_path):
    assert [m.name for m in linkplan.cost_models(tmp_path / 'none.yaml')] == ['built-in']
    path = tmp_path / 'linkcost.yaml'
    path.write_text('schema: netregress-linkcost/1\nmodels:\n'
                    '  - {name: simgrid, fitted: "SimGrid fat trees, 128-10,000 nodes", start_s: 30, per_node_s: 0.01,'
                    ' round_s: 0.05, round_node_s: 0.0002}\n'
                    '  - {name: vcluster, fitted: "8-32 nodes", start_s: 2, round_s: 0.094}\n')
    models = linkplan.cost_models(path)
    assert [m.name for m in models] == ['simgrid', 'vcluster']
    assert models[0].estimate_s(1000, 999, 0.5) == pytest.approx(30 + 10 + 999 * (0.5 + 0.05 + 0.2))
    line = linkplan.describe(linkplan.full_plan([f'n{i}' for i in range(10)]), 0.5, models=models)
    assert 'by the simgrid fit (SimGrid fat trees, 128-10,000 nodes: start 30 s + 0.01 s a node' in line
    assert 'by the vcluster fit (8-32 nodes' in line and '9 rounds, 90 directed streams (45 links)' in line
    path.write_text('schema: netregress-linkcost/1\nmodels:\n  - {name: x, round_s: fast}\n')
    with pytest.raises(ValueError, match=r'linkcost.yaml: models\[0\] \(x\): the constants must be numbers'):
        linkplan.cost_models(path)
    path.write_text('models: []\n')
    with pytest.raises(ValueError, match='not a netregress-linkcost/1 file'):
        linkplan.cost_models(path)


def test_the_checkouts_cost_file_is_read_with_both_fits(repo_root):
    """config/linkcost.yaml (the default cost file: --plan prints every fit of it) holds the vcluster's fit and
    the simulator's, each saying where it was fitted."""
    assert linkplan.COST_FILE == repo_root / 'config' / 'linkcost.yaml'
    models = {m.name: m for m in linkplan.cost_models()}
    assert sorted(models) == ['simulator', 'vcluster'] and all(m.fitted and m.round_s > 0 for m in models.values())


def test_each_bench_puts_its_own_fit_into_the_cost_file(tmp_path):
    path = tmp_path / 'linkcost.yaml'
    linkplan.save_cost_model(linkplan.CostModel(name='vcluster', fitted='8-32 nodes', start_s=2.5, round_s=0.1), path)
    linkplan.save_cost_model(linkplan.CostModel(name='simulator', fitted='128-10,000', round_s=0.0116,
                                                round_node_s=4.1e-7), path)
    linkplan.save_cost_model(linkplan.CostModel(name='vcluster', fitted='8-32 nodes again', round_s=0.2), path)
    models = {m.name: m for m in linkplan.cost_models(path)}
    assert sorted(models) == ['simulator', 'vcluster']
    assert models['vcluster'].round_s == 0.2 and models['vcluster'].fitted == '8-32 nodes again'
    assert models['simulator'].round_node_s == pytest.approx(4.1e-7) and not list(tmp_path.glob('*.tmp'))


def test_slurm_partition_name():
    assert slurm.slurm_partition(['--partition=gige', '--overcommit'], 'x') == 'gige'
    assert slurm.slurm_partition(['-p', 'eth'], 'x') == 'eth'
    assert slurm.slurm_partition([], 'fast') == 'fast'


def test_the_checks_sanity_and_performance_judge_a_real_job_once_and_name_the_nodes_left_out(tmp_path):
    """The check's own methods on a real job's stage directory (no ReFrame run, no Slurm): sanity judges every
    direction and keeps the files, the node Slurm could not use fails it by name with the slow directions beside it,
    the performance stage names the same slow directions; result.json is read once and kept compact."""
    from types import SimpleNamespace

    from reframe.core.exceptions import PerformanceError

    class Stub(SimpleNamespace):
        def is_dry_run(self):
            return False

    for name in ('measurements', 'verdict', 'recorded_only', 'aligned', 'contention', 'write_links', 'links_witness',
                 'name_slow_links', 'port_witness', 'payload_bytes', 'kernel_witness'):
        setattr(Stub, name, getattr(allpairs.AllPairsLinkCheck, name))
    (tmp_path / 'result.json').write_text(FIXTURE.read_text())
    nodes = ['node1', 'node2', 'node3', 'node4']
    stub = Stub(stagedir=str(tmp_path), result_path=str(tmp_path / 'result.json'), nodes=nodes,
                nodes_left_out=['node5: not responding (down*)'], interconnect='gige', rate_mbps=None,
                current_partition=SimpleNamespace(extras={}, fullname='vcluster:gige'), min_link_fraction=0.85,
                min_rate_fraction=0.95, link_plan=linkplan.full_plan(nodes), topology=None, display_name='links',
                cpu_quota_note='', ic=SimpleNamespace(counters='interface'))
    problems = stub.links_witness()
    assert problems[0] == 'node node5: not responding (down*) (left out of the link test)'
    assert problems[1].startswith('6 of 12 directions below 0.85 x the median link')
    assert stub.payload_bytes() == pytest.approx(sum(p['bytes'] for r in json.loads(FIXTURE.read_text())['rounds']
                                                     for p in r['pairs']))
    kept = json.loads((tmp_path / 'result.json').read_text())
    assert kept['compacted'] and (tmp_path / 'linkmatrix.bin').stat().st_size == 16 + 16 * 4
    assert json.loads((tmp_path / 'links.json').read_text())['nodes_left_out'] == ['node5: not responding (down*)']
    with pytest.raises(PerformanceError, match='6 of 12 directions below 0.85 x the median link'):
        stub.name_slow_links()


def test_ranks_are_named_as_slurm_names_their_nodes_where_the_hosts_say_so():
    m = np.zeros((3, 3), dtype=np.float32)
    data = linkmatrix.LinkData(['n2.cluster', 'n1.cluster', 'n3'], m, bytes_per_host={'n3': 1.0})
    named = allpairs.by_slurm_names(data, ['n1', 'n2', 'n3'])
    assert named.nodes == ['n2', 'n1', 'n3'] and named.bytes_per_host == {'n3': 1.0}
    for hosts in (['vm', 'vm', 'vm'], ['n1', 'x', 'n3']):       # ranks on one machine; a host Slurm does not name
        assert allpairs.by_slurm_names(linkmatrix.LinkData(hosts, m), ['n1', 'n2', 'n3']).nodes == hosts


def test_the_table_lists_at_most_the_slowest_suspects_of_each_kind():
    topo = tree(3, 4, 4)
    v = judged(topo, (('out', 'n0002', 0.5),), 'full')
    text = linkjob.format_table(v, limit=4)
    assert sum(1 for x in text.splitlines() if x.startswith('n0002->')) == 4
    assert '7 more suspect directions not listed (the slowest 4 of each kind are)' in text


def test_the_check_expects_the_taper_its_plan_met_on_the_switch_tree(tmp_path):
    """The check's own methods with Slurm's switch tree (2:1, d-mod-k): the plan's contention goes into the verdict
    in the job's rank order, and nr-linkmap is asked to recheck only what is slow even at its share."""
    from types import SimpleNamespace

    class Stub(SimpleNamespace):
        pass

    for name in ('measurements', 'verdict', 'recorded_only', 'aligned', 'contention', 'write_links', 'links_witness',
                 'set_linkmap_options'):
        setattr(Stub, name, getattr(allpairs.AllPairsLinkCheck, name))
    topo = tree(4, 8, 4)                                     # 2:1
    ranks = list(reversed(topo.order))                       # the job's rank order is not the tree's
    plan = linkplan.full_plan(ranks, topo)
    m = measure(topo, plan, ranks, (('cable', 'n0013', 0.5),))
    linkmatrix.write_matrix(tmp_path / 'linkmatrix.bin', m)
    (tmp_path / 'result.json').write_text(json.dumps({'schema': 'netregress-result/1', 'tool': 'nr-linkmap',
                                                      'status': 'ok', 'nodes': ranks, 'rounds': []}))
    stub = Stub(stagedir=str(tmp_path), result_path=str(tmp_path / 'result.json'), nodes=ranks, nodes_left_out=[],
                interconnect='ib', rate_mbps=None, current_partition=SimpleNamespace(extras={}, fullname='site:ib'),
                min_link_fraction=0.85, min_rate_fraction=0.95, link_plan=plan, topology=topo, display_name='links',
                cpu_quota_note='', round_time_s=0.5, message_size='1M', round_timeout_s=10.0, recheck_max=64, time_limit=600,
                link_transport='mpi', measure_rtt=False, ic=SimpleNamespace(counters='infiniband'))
    assert stub.links_witness() == []
    (message,) = linkverdict.slow_problems(stub.verdict())
    assert 'the slow links all involve node n0013 (its cable, port or NIC, both ways' in message
    stub.set_linkmap_options()
    assert stub.kernel_opts[stub.kernel_opts.index('--recheck-below') + 1] == '0.425'
    opt = {k: v for k, v in zip(stub.kernel_opts, stub.kernel_opts[1:]) if k.startswith('--recheck') or k in
           ('--tree', '--time-limit')}
    assert opt == {'--recheck-below': '0.425', '--recheck-rounds': '64', '--recheck-streams': '0',
                   '--time-limit': str(600 - allpairs.STARTUP_S), '--tree': allpairs.TREE_FILE}, opt
    leaf, pos = topo.arrays(ranks)           # the tree in the job's names: the leaf, the cable of a stream to it
    assert (tmp_path / allpairs.TREE_FILE).read_text().splitlines()[1:] == \
        [f'{n} {ell} {p % 4}' for n, ell, p in zip(ranks, leaf, pos)]
    # the full plan is whole shifts: nr-linkmap gets the tree's order and the shifts, no plan file
    assert stub.kernel_opts[:6] == ['--plan', 'shift', '--order', linkplan.ORDER_FILE, '--shifts', '1-31']
    assert (tmp_path / linkplan.ORDER_FILE).read_text().split() == list(plan.nodes) == sorted(ranks)
    assert not (tmp_path / linkplan.PLAN_FILE).exists()


def test_a_plan_of_whole_shifts_goes_to_nr_linkmap_as_an_order_and_a_list_any_other_as_a_plan_file(tmp_path):
    """At 10,000 nodes the full plan's file is about 2 GB of text (and minutes of Python writing it); as an order
    and a shift list it is the nodes' names. Rounds cut for nodes that share CPUs, and the topology plan, are not
    whole shifts: a plan file, as before."""
    assert linkplan.shift_list([1, 2, 3, 9, 8, 10, 11]) == '1-3,9,8,10-11' and linkplan.shift_list([5]) == '5'
    topo = tree(4, 8, 4)
    nodes = list(topo.order)
    sample = linkplan.sample_plan(nodes, 2, 0, 7, topo)
    opts = sample.kernel_options(tmp_path)
    listed = [int(x) for x in opts[opts.index('--shifts') + 1].split(',')]
    assert listed == list(sample.rounds) and opts[:4] == ['--plan', 'shift', '--order', str(tmp_path / 'order.txt')]
    assert len(listed) == 4 and listed[0] + listed[1] == 32 == listed[2] + listed[3]   # 2 sets: s and N-s each
    # two passes: the second in reverse, each shift listed
    twice = linkplan.full_plan(nodes, topo).passes(2).kernel_options(tmp_path, order_by_rank=True)
    assert twice[-1] == '1-31,' + ','.join(map(str, range(31, 0, -1)))
    assert (tmp_path / 'order.txt').read_text().split() == [str(i) for i in range(32)]
    for plan in (linkplan.full_plan(nodes, topo, max_streams=3), linkplan.topology_plan(topo)):
        assert plan.kernel_options(tmp_path, relative=True) == ['--plan-file', 'plan.txt']
        assert (tmp_path / 'plan.txt').read_text() == plan.text() and not (tmp_path / 'order.txt').exists()
    # a list too long for one argument: the plan file
    many = linkplan.LinkPlan('full', tuple(nodes), tuple([3, 1] * 20000))
    assert many.kernel_options(tmp_path)[0] == '--plan-file'
