"""bench/simcentre_scale.py's own logic, without a simulation (no SimGrid needed): a run that wrote nothing fails
the benchmark, named; the cost model's round fit."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    """bench/simcentre_scale.py as a module (not __main__: it stays in this Python)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location('simcentre_scale', ROOT / 'bench' / 'simcentre_scale.py')
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_the_bench_exits_1_naming_a_run_without_figures(tmp_path, monkeypatch, capsys):
    """bench/simcentre_scale.py: a run that wrote no simcentre.json fails the benchmark, named in one line; the
    others are still run and tabled."""
    bench = _bench()
    ran = []

    def fake_run(argv, **kw):
        ran.append(argv[1:3])
        return subprocess.CompletedProcess(argv, 0 if argv[1] == 'build' else 1)

    monkeypatch.setattr(bench.subprocess, 'run', fake_run)
    monkeypatch.setattr(sys, 'argv', ['simcentre_scale.py', '--sizes', '128', '--plans', 'topology', '--faults',
                                      'healthy,cable', '--out', str(tmp_path)])
    assert bench.main() == 1
    err = [x for x in capsys.readouterr().err.splitlines() if x]
    assert len(err) == 2 and all('produced no figures (tools/simcentre exit 1)' in x for x in err), err
    assert 'run 128-topology-healthy' in err[0] and 'run 128-topology-cable' in err[1]
    assert [x[0] for x in ran] == ['build', 'run', 'run']


def test_the_round_fit_never_makes_a_round_cheaper_with_more_nodes():
    """The cost model's per-node term is a least-squares slope, but never below 0: a falling scatter (10,000 nodes a
    hair cheaper a round than 128) is fitted as the mean, not as rounds that cost less than nothing at 100,000."""
    fit = _bench().fit
    rows = [{'nodes': n, 'round_overhead_s': y} for n, y in ((128, 0.012), (1000, 0.013), (10000, 0.011))]
    assert fit(rows) == (pytest.approx(0.012), 0.0)
    rows = [{'nodes': n, 'round_overhead_s': 0.01 + 1e-6 * n} for n in (128, 1000, 10000)]
    assert fit(rows) == (pytest.approx(0.01), pytest.approx(1e-6))


def test_the_round_fit_takes_the_healthy_runs_only():
    """A slow link's streams finish late and lengthen their rounds: streaming, not the coordination the model's
    round_s stands for, so a faulty run is no point of the fit."""
    fit = _bench().fit
    rows = [{'nodes': n, 'faults': [], 'round_overhead_s': 0.006} for n in (128, 1000)] + \
        [{'nodes': 1000, 'faults': ['uplink:leaf12:spine13'], 'round_overhead_s': 0.02}]
    assert fit(rows) == (pytest.approx(0.006), 0.0)
