"""Seed 004 again: the seed's micro and macro benchmark comparison (NetPIPE latency and throughput, NAS Mop/s per
MPI implementation) made from one validation run of this project (docs/seed004.md).

    python -m netregress_postrun.seed004 run/validate/<stamp>-full [--interconnect gige --interconnect fast]

prints, per interconnect, one Markdown table of the MPI builds side by side (the figures tools/report shows, picked
and put in the seed's terms) and which build leads each column. Latencies are one-way (half the round trip), as
NetPIPE reports them and the seed's table gives them. Nothing is estimated: a figure the run did not measure is
``-``.
"""
from __future__ import annotations

import argparse
import sys
from typing import Mapping, Sequence

import tabulate

from . import report as rpt

#: (column, metric key of report.py, factor): the seed's columns in this project's figures. Which build leads
#: a column is decided by the direction its check declared better (``nr_figures``), not by its name.
COLUMNS = [
    ('8 B latency, us (nr-mpitest, half round trip)', 'mpitest.latency:rtt_us', 0.5),
    ('NetPIPE latency, us', 'netpipe.mpi:latency_us', 1.0),
    ('1 MiB ping-pong, Mbit/s (nr-mpitest)', 'mpitest.pingpong.blocking:throughput_mbps', 1.0),
    ('1 MiB stream, Mbit/s (nr-mpitest)', 'mpitest.stream.blocking:throughput_mbps', 1.0),
    ('NetPIPE peak, Mbit/s', 'netpipe.mpi:max_throughput_mbps', 1.0),
]
#: The raw TCP row (the seed's first line): our TCP kernel and NPtcp on the same fabric.
TCP_COLUMNS = {'mpitest.latency:rtt_us': ('tcp.rtt:rtt_us', 0.5),
               'netpipe.mpi:latency_us': ('netpipe.tcp:latency_us', 1.0),
               'mpitest.pingpong.blocking:throughput_mbps': ('tcp.pingpong.blocking:throughput_mbps', 1.0),
               'mpitest.stream.blocking:throughput_mbps': ('tcp.stream.blocking:throughput_mbps', 1.0),
               'netpipe.mpi:max_throughput_mbps': ('netpipe.tcp:max_throughput_mbps', 1.0)}
#: Rows the seed has that this project cannot measure, or that a run without LAM/MPI leaves empty.
EXTRA_ROWS = [('LAM/MPI 7.1.4', 'not in this run (the lam7 environment: Debian lam-runtime, lam4-dev)'),
              ('MPI/PRO 1.6.4', 'impossible: commercial (MPI Software Technology), discontinued, no build exists')]


def better(section: rpt.Section, key: str) -> str | None:
    """The better direction of figure ``key`` as its check declared it; None when undeclared (nobody leads)."""
    return next((row.metric.better for row in section.rows if row.metric.key == key), None)


def figures(section: rpt.Section) -> dict[str, dict[str, float]]:
    """metric key -> environ -> value of a section (both of its tables)."""
    out: dict[str, dict[str, float]] = {}
    for row in section.rows:
        for env, cell in row.cells.items():
            if cell.figure is not None:
                out.setdefault(row.metric.key, {})[env] = cell.figure.value
    return out


def _fmt(v: float | None) -> str:
    return '-' if v is None else rpt.fmt_number(v)


def missing(section: rpt.Section, key: str, env: str) -> str:
    """Why ``env`` has no figure ``key`` in the section: skipped, failed, ... or '-' (not measured)."""
    for row in section.rows:
        if row.metric.key == key and env in row.cells and row.cells[env].figure is None:
            return row.cells[env].missing if row.cells[env].missing != rpt.NOT_MEASURED else '-'
    return '-'


def leader(values: Mapping[str, float], better: str | None) -> str:
    if not values or better not in ('lower', 'higher'):
        return '-'
    pick = min if better == 'lower' else max
    return pick(values, key=lambda name: values[name])


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown (pipe) table, one line each, by tabulate (cells as given: no number parsing)."""
    return tabulate.tabulate(rows, headers=header, tablefmt='github', disable_numparse=True).splitlines()


def micro_table(section: rpt.Section) -> list[str]:
    fig = figures(section)
    envs = [e for e in section.environs if e != 'gnu']
    rows = []
    tcp = []
    for _, key, _ in COLUMNS:
        tkey, tfactor = TCP_COLUMNS[key]
        v = fig.get(tkey, {}).get('gnu')
        tcp.append(_fmt(None if v is None else v * tfactor))
    rows.append(['TCP (nr-tcptest, NPtcp)', *tcp])
    for env in envs:
        cells = []
        for _, key, factor in COLUMNS:
            v = fig.get(key, {}).get(env)
            cells.append(missing(section, key, env) if v is None else _fmt(v * factor))
        rows.append([env, *cells])
    leads = [leader({e: v for e, v in fig.get(key, {}).items() if e in envs}, better(section, key))
             for _, key, _ in COLUMNS]
    for name, text in EXTRA_ROWS:
        if name.startswith('LAM') and any(e.startswith('lam') for e in envs):
            continue                      # measured in this run: its own row above
        rows.append([name, text] + [''] * (len(COLUMNS) - 1))
    rows.append(['**leads**', *leads])
    return markdown(['build'] + [c[0] for c in COLUMNS], rows)


def macro_table(section: rpt.Section, size: int = 1000000) -> list[str]:
    """The multi-rank figures (4 ranks on 4 nodes): effective bisection bandwidth and the 13 collective tests at
    one message size, who leads each, and how many each build leads (the seed's "no clear winner" question)."""
    rows = [row for row in section.rows
            if row.metric.key == 'ebb:ebb_mibps'
            or (row.metric.key.startswith('mpicoll:') and rpt.split_var(row.metric.key)[1] == size)]
    envs = [e for e in section.environs if e != 'gnu']
    if not rows:
        return ['No multi-rank figure in this run on this interconnect.']
    table = []
    wins = {e: 0 for e in envs}
    for row in rows:
        values = {e: c.figure.value for e, c in row.cells.items() if c.figure is not None and e in envs}
        best = leader(values, row.metric.better)
        if best in wins:
            wins[best] += 1
        cells = [_fmt(values[e]) if e in values else missing(section, row.metric.key, e) for e in envs]
        table.append([rpt.row_label(row.metric), *cells, best])
    table.append([f'**figures led** (of {len(rows)})', *(str(wins[e]) for e in envs), ''])
    return markdown(['figure', *envs, 'leads'], table)


def nas_table(section: rpt.Section) -> list[str]:
    fig = figures(section)
    keys = sorted(k for k in fig if k.startswith('npb.') and k.endswith(':mops_total'))
    if not keys:
        return ['No NAS figure in this run on this interconnect.']
    envs = [e for e in section.environs if any(e in fig[k] for k in keys)]
    rows = [[key.split(':')[0][len('npb.'):].upper(), *(_fmt(fig[key].get(e)) for e in envs),
             leader(fig[key], better(section, key))] for key in keys]
    return markdown(['kernel (Mop/s)', *envs, 'leads'], rows)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog='python -m netregress_postrun.seed004', description=__doc__.split('\n\n')[0])
    ap.add_argument('run_dir', type=rpt.Path)
    ap.add_argument('--interconnect', action='append', help='default: gige and fast')
    args = ap.parse_args(argv)
    wanted = args.interconnect or ['gige', 'fast']
    try:
        report = rpt.collect(args.run_dir)
    except rpt.ReportError as err:
        print(f'seed004: {err}', file=sys.stderr)
        return 2
    found = False
    for sec in report.sections:
        if sec.interconnect not in wanted:
            continue
        found = True
        print(f'### {sec.title}\n')
        print('\n'.join(micro_table(sec)))
        print()
        print('\n'.join(macro_table(sec)))
        print()
        print('\n'.join(nas_table(sec)))
        print()
    if not found:
        print(f'seed004: no section for {", ".join(wanted)} in {args.run_dir}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
