"""The per-node loopback probe's judgement and job script (netregress.nodeprobe)."""
from netregress import nodeprobe


def test_a_node_at_half_the_median_is_named():
    problems = nodeprobe.slow_nodes({'fast1': 23800.0, 'fast2': 24100.0, 'fast3': 12800.0, 'fast4': 23500.0}, 0.8)
    assert len(problems) == 1 and problems[0].startswith('node fast3:') and 'slow' in problems[0]


def test_healthy_nodes_pass_and_a_missing_node_is_named():
    healthy = {'a': 100.0, 'b': 90.0, 'c': 95.0}
    assert nodeprobe.unmeasured_nodes(healthy) == [] and nodeprobe.slow_nodes(healthy, 0.8) == []
    problems = nodeprobe.unmeasured_nodes({'a': 100.0, 'b': None, 'c': 95.0})
    assert problems == ['node b: loopback stream not measured (see nodes/b.*.err)']


def test_driver_visits_every_node_in_turn_on_its_own_port():
    script = nodeprobe.driver_script(['n1', 'n2'], {'n1': 'srun -w n1', 'n2': 'srun -w n2'}, '/k', ['-r', '3'], 2)
    lines = [line for line in script.splitlines() if line.startswith('srun')]
    assert [line.split()[2] for line in lines] == ['n1', 'n2', 'n2', 'n1']      # the second pass rotates
    assert len({line.split('-p ')[1].split()[0] for line in lines}) == 4         # a port per step
    assert 'nodes/n2.1.json' in lines[2] and 'netregress-node: n2 pass=1 status=$?' in lines[2]


def test_a_slow_node_is_a_performance_verdict_a_missing_one_a_sanity_failure():
    figures = {'fast1': 21000.0, 'fast2': None, 'fast3': 7000.0, 'fast4': 20000.0}
    assert nodeprobe.unmeasured_nodes(figures) == ['node fast2: loopback stream not measured (see nodes/fast2.*.err)']
    (slow,) = nodeprobe.slow_nodes(figures, 0.8)
    assert slow.startswith('node fast3: loopback stream 7000 Mbit/s is 0.35 x the median node')
