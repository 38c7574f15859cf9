"""All-pairs link test: pairing, driver script, result collection and the baseline-free judgement (no cluster)."""
import itertools
import json
import shutil
import subprocess

import pytest

pytest.importorskip('reframe')
from netregress import linkplan, linkverdict, slurm  # noqa: E402
from netregress.linkverdict import LinkResult  # noqa: E402


def nodes(n, prefix='n'):
    return [f'{prefix}{i}' for i in range(1, n + 1)]


# --- pairing --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('n', range(2, 12))
def test_round_robin_covers_every_link_once_in_disjoint_rounds(n):
    names = nodes(n)
    rounds = linkplan.round_robin(names)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    links = [frozenset(p) for r in rounds for p in r]
    assert len(links) == n * (n - 1) // 2
    assert set(links) == {frozenset(p) for p in itertools.combinations(names, 2)}
    for r in rounds:
        used = [x for p in r for x in p]
        assert len(used) == len(set(used)), f'a node plays twice in round {r}'
        assert len(r) == n // 2
    if n % 2:
        sitting_out = [set(names) - {x for p in r for x in p} for r in rounds]
        assert sorted(x for s in sitting_out for x in s) == sorted(names)   # one bye per node


def test_round_robin_orders_pairs_by_node_order_and_handles_trivial_cases():
    rounds = linkplan.round_robin(['gige1', 'gige2', 'gige3', 'gige4'])
    assert rounds[0] == [('gige1', 'gige4'), ('gige2', 'gige3')]
    assert all(list(pair) == sorted(pair, key=['gige1', 'gige2', 'gige3', 'gige4'].index) for r in rounds for pair in r)
    assert linkplan.round_robin(['a']) == []
    assert linkplan.round_robin([]) == []
    with pytest.raises(ValueError, match='duplicate'):
        linkplan.round_robin(['a', 'b', 'a'])


def test_sessions_per_server_counts_every_test_a_node_serves():
    rounds = linkplan.round_robin(nodes(4))
    both = linkplan.sessions_per_server(rounds, both_directions=True)
    # each node is in 3 links; as first node it serves RTT + one stream, as second node one stream
    assert sum(both.values()) == 6 * 3
    assert set(both) == set(nodes(4))
    one = linkplan.sessions_per_server(rounds, both_directions=False)
    assert sum(one.values()) == 6 * 2
    assert linkplan.sessions_per_server(rounds, True, passes=2) == {n: 2 * c for n, c in both.items()}


# --- driver script ----------------------------------------------------------------------------------------------------

def _script(concurrent=False, both=True, passes=1):
    names = ['gige1', 'gige2', 'gige3']
    rounds = linkplan.round_robin(names)
    return rounds, linkplan.driver_script(
        rounds, nodes=names, kernels_dir='/opt/nr bin',
        on_named_node={n: f'srun --overlap -w {n}' for n in names}, on_every_node='srun --overlap -N3 -n3',
        stream_opts=['-r', '5', '-t', '0.3', '-m', '1M'], rtt_opts=['-A', '8'], both_directions=both,
        concurrent=concurrent, passes=passes, step_timeout_s=45)


@pytest.mark.skipif(not shutil.which('bash'), reason='needs bash')
@pytest.mark.parametrize('concurrent', [False, True])
def test_driver_script_is_valid_bash_and_visits_the_rounds_in_order(concurrent):
    rounds, text = _script(concurrent, passes=2)
    subprocess.run(['bash', '-n'], input=text, text=True, check=True)
    calls = [ln.split()[1:4] for ln in text.splitlines() if ln.startswith('link ')]
    # every pass visits the rounds in the same order: the two measurements of any link lie one pass apart
    assert calls == [[str(p), a, b] for p in (1, 2) for r in rounds for a, b in r]
    assert "K='/opt/nr bin'" in text
    assert 'gige2) timeout -k 5 45 srun --overlap -w gige2 "$@" ;;' in text
    assert text.count('snapshot') == 0 and 'when=before' in text and 'when=after' in text
    assert ('wait $pids' in text) == concurrent


def test_driver_script_link_tests_rtt_first_then_both_directions():
    _, text = _script(both=True)
    body = text[text.index('link() {'):text.index('}', text.index('link() {'))]
    assert body.index('measure "$1" rtt "$3" "$2"') < body.index('measure "$1" stream "$3" "$2"') \
        < body.index('measure "$1" stream "$2" "$3"')
    _, one_way = _script(both=False)
    assert 'stream "$2" "$3"' not in one_way
    assert linkplan.link_tests('a', 'b', True) == [('rtt', 'b', 'a'), ('stream', 'b', 'a'), ('stream', 'a', 'b')]


def test_serve_script_serves_exactly_its_tests():
    text = linkplan.serve_script('/k', 'eth0', {'n1': 5, 'n2': 4})
    assert 'n1) n=5 ;;' in text and '*) n=0 ;;' in text
    assert text.rstrip().endswith('--max-tests "$n"')
    assert 'dev eth0' in text


# --- collecting results -----------------------------------------------------------------------------------------------

def _write_result(directory, kind, client, server, value=None, status='ok', error=None, moved=1000, pass_=1):
    doc = {'schema': 'netregress-result/1', 'tool': 'nr-tcptest', 'status': status,
           'hosts': {'client': client, 'server': server}, 'bytes': {'client': moved, 'server': moved}}
    if error:
        doc['error'] = error
    if kind == 'rtt':
        doc['latency'] = {'min_us': value}
    else:
        doc['summary'] = {'throughput_mbps': {'median': value}}
    (directory / f'{linkplan.test_tag(kind, client, server, pass_)}.json').write_text(json.dumps(doc))


def test_parse_test_lines():
    text = ('noise\nnetregress-test: pass=1 kind=rtt client=n2 server=n1 status=0\n'
            'netregress-test: pass=2 kind=stream client=n1 server=n2 status=noserver\n')
    assert linkverdict.parse_test_lines(text) == {('rtt', 'n2', 'n1', 1): '0', ('stream', 'n1', 'n2', 2): 'noserver'}


def test_collect_links_reads_figures_and_names_every_failure(tmp_path):
    rounds = [[('n1', 'n2')], [('n1', 'n3')], [('n2', 'n3')]]
    statuses = {}
    for (a, b), fast in (((('n1', 'n2')), 950.0), (('n1', 'n3'), 940.0)):
        for kind, client, server in linkplan.link_tests(a, b, True):
            _write_result(tmp_path, kind, client, server, 30.0 if kind == 'rtt' else fast - (client == a))
            statuses[(kind, client, server, 1)] = '0'
    # link n2-n3: RTT fine, one stream failed with the kernel's message, the other server never listened
    _write_result(tmp_path, 'rtt', 'n3', 'n2', 41.0)
    statuses[('rtt', 'n3', 'n2', 1)] = '0'
    _write_result(tmp_path, 'stream', 'n3', 'n2', status='error', error='connection reset by peer')
    statuses[('stream', 'n3', 'n2', 1)] = '1'
    statuses[('stream', 'n2', 'n3', 1)] = 'noserver'
    links, docs = linkverdict.collect_links(rounds, str(tmp_path), statuses, True, step_timeout_s=60)
    assert [x.name for x in links] == ['n1-n2', 'n1-n3', 'n2-n3']
    assert links[0].directions == {'n2->n1': 950.0, 'n1->n2': 949.0}
    assert links[0].throughput_mbps == 949.0 and links[0].slower_direction == 'n1->n2'
    assert links[0].rtt_us == 30.0 and links[0].ok
    bad = links[2]
    assert not bad.ok and bad.rtt_us == 41.0
    assert bad.errors == ['stream n3->n2: exited with 1 (runtime failure): connection reset by peer',
                          'stream n2->n3: no server listening there (serve step failed or the node did not answer)']
    assert len(docs) == 7
    payload = linkverdict.payload_per_host(docs)
    assert payload == {'n1': 6000.0, 'n2': 4000.0, 'n3': 4000.0}


def test_best_pass_counts_so_one_busy_pass_does_not_make_a_slow_link(tmp_path):
    rounds = [[('n1', 'n2')]]
    statuses = {}
    for pass_, (ab, ba) in enumerate(((838.0, 954.0), (954.8, 922.8)), start=1):
        _write_result(tmp_path, 'stream', 'n1', 'n2', ab, pass_=pass_)
        _write_result(tmp_path, 'stream', 'n2', 'n1', ba, pass_=pass_)
        _write_result(tmp_path, 'rtt', 'n2', 'n1', 20.0 + pass_, pass_=pass_)
        statuses.update({(k, c, sv, pass_): '0' for k, c, sv in linkplan.link_tests('n1', 'n2', True)})
    (x,), docs = linkverdict.collect_links(rounds, str(tmp_path), statuses, True, passes=2)
    assert x.directions == {'n2->n1': 954.0, 'n1->n2': 954.8}
    assert x.rtt_us == 21.0 and len(docs) == 6
    # a failed second pass fails the link, named with its pass
    statuses[('rtt', 'n2', 'n1', 2)] = '1'
    (x,), _ = linkverdict.collect_links(rounds, str(tmp_path), statuses, True, passes=2)
    assert x.errors and x.errors[0].startswith('RTT n2->n1 (pass 2): exited with 1 (runtime failure)')
    assert x.rtt_us is None and not x.ok


def test_read_test_timeout_and_missing(tmp_path):
    _, _, err = linkverdict.read_test(str(tmp_path), 'stream', 'a', 'b', '124', step_timeout_s=60)
    assert err == 'stream a->b: timed out after 60 s'
    _, _, err = linkverdict.read_test(str(tmp_path), 'rtt', 'a', 'b', None)
    assert err == 'RTT a->b: not run (the job ended before it)'
    _, _, err = linkverdict.read_test(str(tmp_path), 'stream', 'a', 'b', '0')
    assert 'kernel wrote no result file' in err


# --- judgement --------------------------------------------------------------------------------------------------------

def link(a, b, mbps, rtt=30.0, r=1, slow_dir=None):
    directions = {f'{b}->{a}': mbps, f'{a}->{b}': mbps + 2}
    if slow_dir:
        directions = {slow_dir: mbps, 'other': mbps + 200}
    return LinkResult(round=r, a=a, b=b, directions=directions, rtt_us=rtt)


def gige(n):
    return f'gige{n}'


def test_healthy_fabric_passes():
    links = [link(gige(a), gige(b), 950 + a + b) for a, b in itertools.combinations(range(1, 5), 2)]
    assert linkverdict.unmeasured_links(links) == []
    assert linkverdict.slow_links(links, min_fraction=0.85, rate_mbps=1000, rate_fraction=0.95) == []
    stats = linkverdict.summary(links)
    assert stats['min_link_mbps'] == 953
    assert stats['median_link_mbps'] == 955          # upper median of 953, 954, 955, 955, 956, 957
    assert stats['min_to_median'] == pytest.approx(953 / 955)
    assert stats['max_rtt_us'] == 30.0


def test_slow_node_is_named_even_when_it_spoils_half_the_links():
    # tbf 700 Mbit/s towards gige2: its three links (half of the six) are slow; the mean median would be 811
    links = [link(gige(a), gige(b), 668 if 2 in (a, b) else 955, slow_dir=f'gige{b if a == 2 else a}->gige2')
             for a, b in itertools.combinations(range(1, 5), 2)]
    problems = linkverdict.slow_links(links, min_fraction=0.85)
    assert len(problems) == 1
    msg = problems[0]
    assert msg.startswith('link gige1-gige2 at 668 Mbit/s (gige1->gige2) is 0.70 x the median 955 Mbit/s')
    assert 'gige2-gige3' in msg and 'gige2-gige4' in msg
    assert msg.endswith('(min_link_fraction 0.85); slow links all involve gige2')


def test_single_slow_link_is_named_without_blaming_a_node():
    links = [link(gige(a), gige(b), 600 if (a, b) == (2, 3) else 955)
             for a, b in itertools.combinations(range(1, 5), 2)]
    problems = linkverdict.slow_links(links, min_fraction=0.85)
    assert problems == ['link gige2-gige3 at 600 Mbit/s (gige3->gige2) is 0.63 x the median 955 Mbit/s '
                        '(min_link_fraction 0.85)']


def test_slow_links_without_a_common_node_name_none():
    links = [link(gige(a), gige(b), 600 if (a, b) in ((1, 2), (3, 4)) else 955)
             for a, b in itertools.combinations(range(1, 5), 2)]
    (msg,) = linkverdict.slow_links(links, min_fraction=0.85)
    assert 'gige1-gige2' in msg and 'gige3-gige4' in msg and 'involve' not in msg


def test_line_rate_is_checked_for_every_link():
    links = [link(gige(a), gige(b), 900 if b == 4 else 955) for a, b in itertools.combinations(range(1, 5), 2)]
    assert linkverdict.slow_links(links, min_fraction=0.85) == []            # 900/955 = 0.94: no rate, no problem
    (msg,) = linkverdict.slow_links(links, min_fraction=0.85, rate_mbps=956.4, rate_fraction=0.95)
    assert msg.startswith('link gige1-gige4 at 900 Mbit/s (gige4->gige1) is 0.941 x the 956.4 Mbit/s a link carries')
    assert msg.endswith('(min_rate_fraction 0.95); slow links all involve gige4')


def test_failed_links_are_named_with_their_node():
    links = [link(gige(a), gige(b), 955) for a, b in itertools.combinations(range(1, 5), 2)]
    for x in links:
        if 'gige3' in (x.a, x.b):
            x.directions, x.rtt_us = {}, None
            x.errors = [f'RTT {x.b}->{x.a}: timed out after 60 s', 'stream: not run (the job ended before it)']
    problems = linkverdict.unmeasured_links(links)
    assert len(problems) == 1
    assert problems[0].startswith('link gige1-gige3 not measured: RTT gige3->gige1: timed out after 60 s '
                                  '(and 1 more tests)')
    assert problems[0].endswith('; failed links all involve gige3')
    assert linkverdict.summary(links)['min_link_mbps'] == 955


def test_many_failures_are_counted_not_listed():
    links = [LinkResult(round=1, a=f'n{i}', b=f'n{i + 1}', errors=['x: not run']) for i in range(10)]
    (msg,) = linkverdict.unmeasured_links(links)
    assert msg.count('not measured: x: not run') == linkverdict.MAX_NAMED_LINKS
    assert f'{10 - linkverdict.MAX_NAMED_LINKS} more of the 10 links not measured' in msg
    assert linkverdict.summary(links) == {}


def test_common_nodes_and_upper_median():
    a = LinkResult(1, 'n1', 'n2')
    b = LinkResult(1, 'n2', 'n3')
    assert linkverdict.common_nodes([a, b]) == ['n2']
    assert linkverdict.common_nodes([a]) == ['n1', 'n2']
    assert linkverdict.common_nodes([]) == []
    assert linkverdict.upper_median([3, 1, 2]) == 2
    assert linkverdict.upper_median([1, 2, 3, 4]) == 3
    with pytest.raises(ValueError):
        linkverdict.upper_median([])


def test_format_table_lists_every_link():
    links = [link('n1', 'n2', 955.04, rtt=21.5), LinkResult(2, 'n1', 'n3', errors=['RTT n3->n1: timed out'])]
    text = linkverdict.format_table(links, linkverdict.summary(links))
    lines = text.splitlines()
    assert lines[0].split()[:4] == ['round', 'link', 'Mbit/s', 'RTT']
    assert lines[1].split()[:4] == ['1', 'n1-n2', '955.0', '21.5']
    assert 'RTT n3->n1: timed out' in lines[2]
    assert 'min_to_median = 1.000' in text


def test_slurm_partition_name():
    assert slurm.slurm_partition(['--partition=gige', '--overcommit'], 'x') == 'gige'
    assert slurm.slurm_partition(['-p', 'eth'], 'x') == 'eth'
    assert slurm.slurm_partition([], 'fast') == 'fast'


def test_a_slow_link_is_a_performance_verdict_a_missing_one_a_sanity_failure():
    # a retry may measure a slow link again; a link that was not measured is a broken path, not a figure
    links = [link(gige(a), gige(b), 600 if b == 4 else 955) for a, b in itertools.combinations(range(1, 5), 2)]
    assert linkverdict.unmeasured_links(links) == []
    (slow,) = linkverdict.slow_links(links, min_fraction=0.85)
    assert 'gige4' in slow
    links[0].errors.append('nr-tcptest exited with 1')
    (missing,) = linkverdict.unmeasured_links(links)
    assert missing.startswith('link gige1-gige2 not measured') and linkverdict.unmeasured_links([]) == [
        'no link was measured']
