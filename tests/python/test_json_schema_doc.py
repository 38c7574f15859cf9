"""docs/json-schema.md against what the kernels really write.

The real kernels run on loopback (nr-tcptest against nr-tcpserver; nr-mpitest (also with ``--duet``), nr-mpicoll,
nr-ebb and nr-linkmap under ``mpirun.openmpi -np 2 --oversubscribe``; nr-linkmap also with 3 ranks, over TCP on lo,
and as its test build with a stalled pair and with a slow one rechecked when the build tree has it) in every mode
whose keys the document lists, and a failing run of each gives the error keys. Two assertions per kernel: every key
path in its JSON is documented in the kernel's tables (or the common ones), and every key the document marks
**stable** (what the ReFrame checks read) appears in at least one of its runs.

The kernels are found in ``$NETREGRESS_KERNELS_DIR`` (an install's ``bin`` or a build tree with ``src/tcp`` and
``src/mpi``), else in ``build/ci-openmpi`` (tools/run-tests); without them the tests are skipped, saying so.
``$NETREGRESS_MPIEXEC`` replaces ``mpirun.openmpi --oversubscribe`` for an MPI build of another library.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / 'docs' / 'json-schema.md'
KERNELS = ('nr-tcptest', 'nr-mpitest', 'nr-mpicoll', 'nr-ebb', 'nr-linkmap')
#: What a placeholder in a documented key path may stand for (one path segment, or the part of it it replaces).
PLACEHOLDERS = {'role': r'(?:client|server|master|secondary)', 'ifname': r'[^.\[\]]+'}
RUN_TIMEOUT_S = 120


# ---- the document ----

def parse_doc(text: str) -> dict[str, list[tuple[str, bool]]]:
    """{kernel: [(key path, stable), ...]} from the tables: a row ``| `path` | ... |`` belongs to the kernels named
    (in backticks) by the ``##`` heading above it; **stable** anywhere in the row marks it."""
    rows: dict[str, list[tuple[str, bool]]] = {k: [] for k in KERNELS}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith('## '):
            current = [k for k in re.findall(r'`(nr-[a-z]+)`', line) if k in rows]
            continue
        m = re.match(r'^\|\s*`([^`]+)`\s*\|', line)
        if m and current:
            for k in current:
                rows[k].append((m.group(1), '**stable**' in line))
    return rows


def pattern(path: str) -> re.Pattern:
    """A documented path as a regular expression over written paths (placeholders as PLACEHOLDERS says)."""
    out, pos = '', 0
    for m in re.finditer(r'<([a-z]+)>', path):
        out += re.escape(path[pos:m.start()]) + PLACEHOLDERS.get(m.group(1), r'[^.\[\]]+')
        pos = m.end()
    return re.compile(out + re.escape(path[pos:]) + r'\Z')


def key_paths(doc, prefix: str = '') -> set[str]:
    """Every key path of a JSON value: objects join keys with '.', arrays add '[]' (and their elements' paths)."""
    out: set[str] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            p = f'{prefix}.{k}' if prefix else k
            out.add(p)
            out |= key_paths(v, p)
    elif isinstance(doc, list):
        for v in doc:
            out |= key_paths(v, prefix + '[]')
    return out


def undocumented(paths: set[str], documented: list[tuple[str, bool]]) -> list[str]:
    pats = [pattern(p) for p, _ in documented]
    return sorted(p for p in paths if not any(r.match(p) for r in pats))


def missing_stable(paths: set[str], documented: list[tuple[str, bool]]) -> list[str]:
    return sorted(p for p, stable in documented if stable and not any(pattern(p).match(w) for w in paths))


# ---- the document and the matcher on their own (no kernels needed) ----

def test_doc_tables_parse():
    rows = parse_doc(DOC.read_text())
    for kernel in KERNELS:
        paths = [p for p, _ in rows[kernel]]
        assert len(paths) > 20, f'{kernel}: only {len(paths)} documented keys: is the table format intact?'
        assert len(paths) == len(set(paths)), f'{kernel}: a key documented twice'
        for common in ('schema', 'tool', 'mode', 'status', 'error'):
            assert (common, True) in rows[kernel], f'{kernel}: common stable key {common}'
    # The drift this test was written for: the checks read the median and the best trial; nr-mpicoll's KB/s rate.
    assert ('summary.throughput_mbps.median', True) in rows['nr-tcptest']
    assert ('latency.min_us', True) in rows['nr-mpitest']
    assert ('tests[].points[].rate_kBps', True) in rows['nr-mpicoll']
    assert ('sizes[].bandwidth_mibps', True) in rows['nr-ebb']
    assert ('suspects[].status', True) in rows['nr-linkmap'] and ('matrix_file', True) in rows['nr-linkmap']
    assert any(p == 'mpi.library' for p, _ in rows['nr-ebb']) and not any(p == 'mpi.library' for p, _ in
                                                                          rows['nr-tcptest'])


def test_matcher_finds_drift():
    doc = ('## `nr-tcptest`\n| key | type | meaning |\n|---|---|---|\n| `a` | object | |\n| `a.b` | number | **stable** |\n'
           '| `r[].bytes_<role>` | number | |\n| `n.<ifname>.x` | number | |\n')
    rows = parse_doc(doc)['nr-tcptest']
    written = key_paths({'a': {'b': 1, 'c': 2}, 'r': [{'bytes_client': 1, 'bytes_other': 2}], 'n': {'eth0': {'x': 1}}})
    assert undocumented(written, rows) == ['a.c', 'n', 'n.eth0', 'r', 'r[].bytes_other']
    assert missing_stable(key_paths({'a': {}}), rows) == ['a.b']
    assert missing_stable(written, rows) == []


# ---- the kernels ----

def _find(name: str) -> str | None:
    bases = []
    if os.environ.get('NETREGRESS_KERNELS_DIR'):
        bases.append(Path(os.environ['NETREGRESS_KERNELS_DIR']).resolve())
    else:
        bases.append(ROOT / 'build' / 'ci-openmpi')
    for base in bases:
        for sub in ('', 'bin', 'src/tcp', 'src/mpi', 'tests/mpi'):
            exe = base / sub / name
            if exe.is_file() and os.access(exe, os.X_OK):
                return str(exe)
    return None


def _where() -> str:
    return os.environ.get('NETREGRESS_KERNELS_DIR') or str(ROOT / 'build' / 'ci-openmpi')


def _run(cmd: list[str], json_path: Path, expect_ok: bool = True) -> dict:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')
    env.setdefault('OMPI_MCA_btl_tcp_if_include', 'lo')
    env.setdefault('OMPI_MCA_oob_tcp_if_include', 'lo')
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env, cwd=json_path.parent)
    if expect_ok:
        assert p.returncode == 0, f'{shlex.join(cmd)}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}'
    else:
        assert p.returncode != 0, f'{shlex.join(cmd)} was to fail'
    doc = json.loads(json_path.read_text())
    assert doc['status'] == ('ok' if expect_ok else 'error'), doc.get('error')
    return doc


@pytest.fixture(scope='module')
def written(tmp_path_factory) -> dict[str, list[dict]]:
    """{kernel: [result documents]} from runs in every mode the document describes, one failing run each."""
    tcptest, tcpserver = _find('nr-tcptest'), _find('nr-tcpserver')
    if not tcptest or not tcpserver:
        pytest.skip(f'no nr-tcptest/nr-tcpserver built under {_where()} (make test builds build/ci-openmpi; or set '
                    f'NETREGRESS_KERNELS_DIR)')
    d = tmp_path_factory.mktemp('schema')
    out: dict[str, list[dict]] = {k: [] for k in KERNELS}
    server = subprocess.Popen([tcpserver, '-p', '0', '-B', '127.0.0.1', '--insecure'], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        m = re.search(r'\[(\d+)\]', server.stdout.readline())
        assert m, 'nr-tcpserver did not print its port'
        port = m.group(1)
        base = [tcptest, '-h', '127.0.0.1', '-p', port]
        for i, opts in enumerate((['-r', '2', '-t', '0.1', '-c'], ['-i', '-n', '-r', '1', '-t', '0.1'],
                                  ['-a', '-r', '2', '-t', '0.1'], ['-e', '3', '-t', '0.02'],
                                  ['-i', '-e', '2', '-t', '0.02'])):
            js = d / f'tcp{i}.json'
            out['nr-tcptest'].append(_run(base + opts + ['--json', str(js)], js))
    finally:
        server.terminate()
        server.wait(timeout=10)
    js = d / 'tcp-error.json'   # the server is gone: connection refused
    out['nr-tcptest'].append(_run(base + ['-r', '1', '-t', '0.1', '--json', str(js)], js, expect_ok=False))

    mpitest, mpicoll, ebb = _find('nr-mpitest'), _find('nr-mpicoll'), _find('nr-ebb')
    launcher = shlex.split(os.environ.get('NETREGRESS_MPIEXEC', '')) or (
        [shutil.which('mpirun.openmpi'), '--oversubscribe'] if shutil.which('mpirun.openmpi') else [])
    if mpitest and mpicoll and ebb and launcher:
        mpirun = launcher + ['-np', '2']
        for i, opts in enumerate((['-r', '2', '-t', '0.05', '-m', '4k', '-c', '-o', str(d / 'out')],
                                  ['-a', '-r', '2', '-t', '0.05'], ['-i', '-e', '3', '-t', '0.01'],
                                  ['-r', '2', '-t', '0.05', '-m', '4k', '--duet', 'shm'],
                                  ['-A', '8', '-r', '2', '-t', '0.05', '--duet', 'tcp'])):
            js = d / f'mpitest{i}.json'
            out['nr-mpitest'].append(_run(mpirun + [mpitest] + opts + ['--json', str(js)], js))
        js = d / 'mpitest-error.json'
        out['nr-mpitest'].append(_run(mpirun + [mpitest, '-e', '5', '-a', '--json', str(js)], js,
                                      expect_ok=False))
        js = d / 'mpicoll.json'
        out['nr-mpicoll'].append(_run(mpirun + [mpicoll, '-t', '0.005', '-r', '2', '-s', '8,1000', '-T',
                                                'p2p,bcast,bcast_cycled_log', '--json', str(js)], js))
        js = d / 'mpicoll-error.json'
        out['nr-mpicoll'].append(_run(mpirun + [mpicoll, '-s', '8000000000', '-T', 'bcast', '--json', str(js)], js,
                                      expect_ok=False))
        js = d / 'ebb.json'
        out['nr-ebb'].append(_run(mpirun + [ebb, '-s', '1024-2048', '-r', '2', '-n', '2', '-b', '2', '--relative',
                                            '--json', str(js)], js))
        js = d / 'ebb-error.json'
        out['nr-ebb'].append(_run(mpirun + [ebb, '--json', str(js), '-s', '8000000000'], js, expect_ok=False))
    linkmap = _find('nr-linkmap')
    if linkmap and launcher:
        for i, (np, opts) in enumerate(((2, ['-t', '0.05', '-m', '16k']),
                                        (3, ['-t', '0.05', '-m', '16k', '--rtt', '--rtt-trials', '3', '--transport',
                                             'tcp', '--bind-iface', 'lo']))):
            js = d / f'linkmap{i}.json'
            out['nr-linkmap'].append(_run(launcher + ['-np', str(np), linkmap] + opts + ['--json', str(js)], js))
        js = d / 'linkmap-error.json'
        out['nr-linkmap'].append(_run(launcher + ['-np', '2', linkmap, '--plan-file', str(d / 'none.txt'), '--json',
                                                  str(js)], js, expect_ok=False))
        faulty = _find('nr-linkmap-faulty')
        if faulty:  # a pair that stalls: the failed pair's keys
            js = d / 'linkmap-failed.json'
            env = dict(os.environ, NR_LINKMAP_FAULT='stall:1:0')
            p = subprocess.run(launcher + ['-np', '2', faulty, '-t', '0.05', '--round-timeout', '1', '--json', str(js)],
                               capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                               env=dict(env, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1'))
            assert p.returncode == 1, p.stderr
            doc = json.loads(js.read_text())
            assert doc['status'] == 'error' and doc['summary']['failed'], doc.get('error')
            out['nr-linkmap'].append(doc)
            js = d / 'linkmap-recheck.json'  # a direction slow in round 0: the recheck's keys
            env = dict(os.environ, NR_LINKMAP_FAULT='slow:0:0:20')
            p = subprocess.run(launcher + ['-np', '3', faulty, '-t', '0.05', '-m', '16k', '--recheck-below', '0.6',
                                           '--json', str(js)], capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                               env=dict(env, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1'))
            assert p.returncode == 0, p.stderr
            doc = json.loads(js.read_text())
            assert doc['status'] == 'ok' and doc['recheck']['pairs'], doc['recheck']
            out['nr-linkmap'].append(doc)
    return out


def _docs_of(written, kernel):
    if not written[kernel]:
        pytest.skip(f'{kernel} not built under {_where()} or no mpirun.openmpi (set NETREGRESS_MPIEXEC)')
    return written[kernel]


def _written_and_documented(written, kernel):
    """(every key path the kernel's runs wrote, the document's rows for the kernel)."""
    paths = set().union(*(key_paths(doc) for doc in _docs_of(written, kernel)))
    return paths, parse_doc(DOC.read_text())[kernel]


@pytest.mark.parametrize('kernel', KERNELS)
def test_every_written_key_is_documented(written, kernel):
    missing = undocumented(*_written_and_documented(written, kernel))
    assert not missing, f'{kernel} writes keys docs/json-schema.md does not list: {missing}'


@pytest.mark.parametrize('kernel', KERNELS)
def test_every_stable_key_is_written(written, kernel):
    missing = missing_stable(*_written_and_documented(written, kernel))
    assert not missing, f'docs/json-schema.md marks keys stable that no {kernel} run wrote: {missing}'


def test_new_keys_carry_values(written):
    """The keys added with the calibration and MPI-version issues hold what the document says."""
    for doc in _docs_of(written, 'nr-tcptest'):
        if doc['status'] == 'ok':
            cal = doc['calibration']
            assert cal['runs'] >= 1 and cal['target_s'] > 0 and cal['achieved_min_s'] > 0, cal
    for kernel in ('nr-mpitest', 'nr-mpicoll', 'nr-ebb', 'nr-linkmap'):
        for doc in _docs_of(written, kernel):
            assert isinstance(doc['mpi']['library'], str) and doc['mpi']['library'].strip(), doc['mpi']
            assert re.fullmatch(r'\d+\.\d+', doc['mpi']['standard']), doc['mpi']
