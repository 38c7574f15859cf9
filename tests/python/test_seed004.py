"""netregress_postrun.seed004: the seed's tables from a run's figures (who leads, half round trips, LAM's row, NAS)."""
from netregress_postrun import report as rpt
from netregress_postrun import seed004


def _row(key, better, values, missing=None):
    metric = rpt.Metric(key=key, label=key, unit='', better=better, order=())
    cells = {env: rpt.Cell(figure=rpt.Figure(metric, env, v, None, None, None, 'pass', {}))
             for env, v in values.items()}
    for env, why in (missing or {}).items():
        cells[env] = rpt.Cell(missing=why)
    return rpt.Row(metric, cells)


def cells(line):
    """The cells of a Markdown table line, stripped (tabulate pads them to the column's width)."""
    return [c.strip() for c in line.strip().strip('|').split('|')]


def _section(envs, rows):
    return rpt.Section('vcluster', 'gige', 'gige', tables=[rpt.Table('MPI builds', envs, rows)], environs=envs)


def test_micro_table_halves_round_trips_names_the_leader_and_why_a_cell_is_empty():
    rows = [_row('mpitest.latency:rtt_us', 'lower', {'openmpi4': 12.0, 'lam7': 80.0},
                 missing={'mpich4': 'skipped: known fault'}),
            _row('tcp.rtt:rtt_us', 'lower', {'gnu': 9.0}),
            _row('mpitest.stream.blocking:throughput_mbps', 'higher', {'openmpi4': 950.0, 'lam7': 957.0})]
    lines = seed004.micro_table(_section(['openmpi4', 'mpich4', 'lam7', 'gnu'], rows))
    assert len({len(line) for line in lines}) == 1                          # aligned columns
    assert cells(lines[2])[:2] == ['TCP (nr-tcptest, NPtcp)', '4.50']        # 9 us round trip -> 4.5 one-way
    assert cells(lines[3]) == ['openmpi4', '6.00', '-', '-', '950.0', '-']
    assert cells(lines[4])[:2] == ['mpich4', 'skipped: known fault']
    assert cells(lines[5])[:2] == ['lam7', '40.00']
    assert not any(cells(line)[0] == 'LAM/MPI 7.1.4' for line in lines)     # measured: no placeholder row
    assert any(cells(line)[0] == 'MPI/PRO 1.6.4' and cells(line)[1].startswith('impossible') for line in lines)
    assert cells(lines[-1]) == ['**leads**', 'openmpi4', '-', '-', 'lam7', '-']


def test_a_run_without_lam_says_so_and_nas_lists_only_builds_with_a_figure():
    sec = _section(['openmpi4', 'intelmpi'],
                   [_row('npb.bt.W.np4:mops_total', 'higher', {'openmpi4': 7418.0, 'intelmpi': 1770.0}),
                    _row('npb.is.W.np2:mops_total', 'higher', {'intelmpi': 169.8})])
    assert any(cells(line)[0] == 'LAM/MPI 7.1.4' and cells(line)[1].startswith('not in this run')
               for line in seed004.micro_table(sec))
    nas = seed004.nas_table(sec)
    assert cells(nas[0]) == ['kernel (Mop/s)', 'openmpi4', 'intelmpi', 'leads']
    assert cells(nas[2]) == ['BT.W.NP4', '7,418', '1,770', 'openmpi4']
    assert cells(nas[3]) == ['IS.W.NP2', '-', '169.8', 'intelmpi']
