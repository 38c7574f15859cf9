"""tools/report on a small fake run: the CSV and Markdown a person reads, bad input, and the page in a browser.

The run directory is made here: ReFrame JSON run reports with passed, failed (performance and sanity), skipped and
retried cases, a sweep whose result.json is still in its output directory, a link_allpairs case with links.json in
its stage directory, and a case whose output directory is gone. When Debian's ``chromium`` is on PATH the page is
rendered headless: a screenshot must show something, and every figure must load in the browser.
"""
import csv
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from netregress import paths
from netregress_postrun import history, report
from linkfabric import keep_fixture

# the vcluster system is a site (config/sites/vcluster): loaded through the layer, as a centre's is
pytestmark = pytest.mark.usefixtures('vcluster_site')

ROOT = paths.repo_root()
TOOL = ROOT / 'tools' / 'report'
END = 1_800_000_000.0            # the fake run's end (unix time); files it wrote are older
XSS = '<script>alert("x")</script> & friends'


def declare(ref_test, var):
    """The nr_figures entry a check declares for ``var`` (netregress.figures: kind, label, better)."""
    name, _, size = var.partition('@')
    at = f' @ {report.size_label(int(size))}' if size else ''
    if ref_test == 'mpitest.latency' and name == 'rtt_us':
        return {'kind': 'latency', 'label': '8 B latency (nr-mpitest)', 'better': 'lower'}
    if ref_test == 'mpicoll':
        return {'kind': 'cpu_bound', 'label': f'{name.split("_")[0]} rate{at}', 'better': 'higher'}
    if ref_test.startswith('osu.'):
        return {'kind': 'latency', 'label': f'OSU {ref_test[4:]} {name}{at}', 'better': 'lower'}
    if name.endswith('_us'):
        return {'kind': 'latency', 'label': f'{ref_test} {name}{at}', 'better': 'lower'}
    return {'kind': 'throughput', 'label': f'{ref_test} {name}{at}', 'better': 'higher'}


def case(basename, env, ic, *, perf=None, result='pass', system='vcluster', part='fast', ref_test=None, mpi=True,
         transports='', reason=None, phase=None, outputdir=None, stagedir=None, declared=True, **extra):
    """One test case as ReFrame 4.10 writes it into a run report (the keys tools/report reads); ``declared``:
    with the checks' figure declarations (nr_figures), as runs since they were added carry them."""
    pv = {f'{system}:{part}:{var}': list(entry) for var, entry in (perf or {}).items()}
    if declared:
        extra.setdefault('nr_figures', {var: declare(ref_test or basename, var) for var in perf or {}})
    tc = {'display_name': f'{basename} %interconnect={ic}', 'name': f'{basename} %interconnect={ic}',
          'unique_name': f'{basename}_{ic}_{extra.get("mode", "")}', 'job_completion_time_unix': END - 30,
          'basename': basename, 'system': system, 'partition': part, 'environ': env, 'result': result,
          'fail_phase': phase, 'fail_reason': reason, 'perfvalues': pv, 'interconnect': ic,
          'ref_test': ref_test or basename, 'nr_transports': transports, 'nr_wire': '', 'job_nodelist': 'fast1',
          'outputdir': outputdir, 'stagedir': stagedir, 'time_total': 1.0, **extra}
    if mpi:
        tc['check_transport'] = True
    return tc


def band(value, ref, result='pass', unit='us'):
    return [value, ref, -0.5, 0.5, unit, result]


def write_report(run_dir, cases, system='vcluster', retry=None, start=END - 600, name=None):
    sid = str(uuid.uuid4())
    runs = []
    for idx, tcs in enumerate([cases] + ([retry] if retry else [])):
        tcs = [dict(tc, uuid=f'{sid}:{idx}:{i}', session_uuid=sid) for i, tc in enumerate(tcs)]
        runs.append({'run_index': idx, 'testcases': tcs, 'num_failures': sum(t['result'] == 'fail' for t in tcs)})
    doc = {'session_info': {'hostname': 'vm', 'version': '4.10.4', 'uuid': sid, 'time_start_unix': start,
                            'time_start': time.strftime('%Y%m%dT%H%M%S+0000', time.gmtime(start)),
                            'time_end': '20260101T001000+0000', 'time_end_unix': END,
                            'num_failures': runs[-1]['num_failures']},
           'runs': runs}
    path = run_dir / (name or f'report-{system}.json')
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def fake_run(tmp_path, monkeypatch):
    monkeypatch.setenv('NETREGRESS_STATE', str(tmp_path / 'state'))      # a scratch results database
    run_dir = tmp_path / 'run' / 'validate' / '20260101T000000Z-full'
    run_dir.mkdir(parents=True)
    out = tmp_path / 'run' / 'output'

    ebb_out = out / 'openmpi4' / 'mpi_ebb'
    ebb_out.mkdir(parents=True)
    rounds = [{'round': r, 'pairs': [{'ranks': [0, 2], 'time_us': [70000.0 + 1000 * r, 71000.0]},
                                     {'ranks': [1, 3], 'time_us': [90000.0, 65000.0 + 500 * r]}]} for r in range(10)]
    (ebb_out / 'result.json').write_text(json.dumps({'sizes': [{'size_bytes': 1048576, 'exchanges_per_round': 20,
                                                                'rounds': rounds, 'buckets': []}]}))
    os.utime(ebb_out / 'result.json', (END - 100, END - 100))

    sweep_out = out / 'openmpi4' / 'mpi_sweep'
    sweep_out.mkdir(parents=True)
    sizes = [2 ** e for e in range(0, 21)]
    (sweep_out / 'result.json').write_text(json.dumps(
        {'sweep': [{'size_bytes': s, 'throughput_mbps': 0.4 * s ** 0.8} for s in sizes]}))
    os.utime(sweep_out / 'result.json', (END - 100, END - 100))

    links_stage = tmp_path / 'run' / 'stage' / 'gnu' / 'link_allpairs'
    links_stage.mkdir(parents=True)
    keep_fixture(links_stage)                  # a real nr-linkmap output, kept as the link check keeps it
    for kept in links_stage.iterdir():
        os.utime(kept, (END - 50, END - 50))

    lat = 'mpitest.latency'
    cases = [
        case('mpi_latency', 'openmpi4', 'shm', ref_test=lat, transports='btl:vader',
             perf={'rtt_us': band(0.5, 0.5)}),
        case('mpi_latency', 'mpich4', 'shm', ref_test=lat, transports='ucx:sysv/memory',
             perf={'rtt_us': band(1.0, 0.9)}),
        case('mpi_latency', 'intelmpi', 'shm', ref_test=lat, transports='impi:shm', result='fail',
             phase='performance', reason='performance error: failed to meet reference(s): rtt_us=4.0 us',
             perf={'rtt_us': band(4.0, 1.0, 'fail')}),
        case('mpi_latency', 'openmpi5', 'shm', ref_test=lat, result='fail', phase='sanity',
             reason=f'\nsanity error: MPI took another path: {XSS}'),
        case('mpi_latency', 'mpich5', 'shm', ref_test=lat, result='skip', reason='no kernels for mpich5'),
        case('mpi_throughput', 'openmpi4', 'shm', ref_test='mpitest.stream.blocking', mode='stream', io='blocking',
             transports='btl:vader', perf={'throughput_mbps': [20000.0, 0, None, None, 'Mbit/s', 'pass']}),
        case('mpi_sweep', 'openmpi4', 'shm', ref_test='mpitest.sweep.pingpong', outputdir=str(sweep_out),
             transports='btl:vader', perf={'throughput_mbps@1': band(0.4, 0.4, unit='Mbit/s'),
                                            'throughput_mbps@1048576': band(26000.0, 25000.0, unit='Mbit/s')}),
        case('mpi_sweep', 'mpich4', 'shm', ref_test='mpitest.sweep.pingpong', outputdir=str(out / 'gone'),
             transports='ucx:sysv/memory', perf={'throughput_mbps@1': band(0.3, 0.3, unit='Mbit/s'),
                                                  'throughput_mbps@1048576': band(30000.0, 29000.0, unit='Mbit/s')}),
        case('mpi_collectives', 'openmpi4', 'shm', ref_test='mpicoll', transports='btl:vader',
             perf={'bcast_rate_kBps@1000000': band(2.0e6, 2.0e6, unit='KB/s'),
                   'reduce_rate_kBps@1000000': band(6.0e5, 6.0e5, unit='KB/s')}),
        case('mpi_collectives', 'mpich4', 'shm', ref_test='mpicoll', transports='ucx:sysv/memory',
             perf={'bcast_rate_kBps@1000000': band(1.0e6, 1.0e6, unit='KB/s'),
                   'reduce_rate_kBps@1000000': band(9.0e5, 9.0e5, unit='KB/s')}),
        case('mpi_ebb', 'openmpi4', 'shm', ref_test='ebb', outputdir=str(ebb_out), transports='btl:vader',
             perf={'ebb_mibps': band(280.0, 280.0, unit='MiB/s')}),
        case('osu', 'intelmpi', 'shm', ref_test='osu.latency', transports='impi:shm',
             perf={f'latency_us@{s}': band(0.3 + s / 5000, 1.0) for s in (1, 8, 64, 512, 4096, 32768)}),
        case('osu', 'openmpi4', 'shm', ref_test='osu.latency', result='skip', reason='no Spack on this system'),
        case('osu', 'mpich4', 'shm', ref_test='osu.latency', result='skip', reason='no Spack on this system'),
        case('mpi_latency', 'openmpi4', 'gige', part='gige', ref_test=lat, transports='btl:tcp',
             perf={'rtt_us': band(17.0, 16.0)}),
        case('tcp_rtt', 'gnu', 'gige', part='gige', ref_test='tcp.rtt', mpi=False,
             perf={'rtt_us': band(29.0, 30.0)}),
        case('link_allpairs', 'gnu', 'gige', part='gige', ref_test='links.allpairs', mpi=False, result='fail',
             phase='sanity', reason='sanity error: link gige1-gige2 at 600 Mbit/s; slow links all involve gige2',
             stagedir=str(links_stage), outputdir=str(out / 'gone')),
        {'display_name': 'MpiKernelBuild ~vcluster:fast+openmpi4', 'name': 'MpiKernelBuild ~vcluster:fast+openmpi4',
         'basename': 'MpiKernelBuild', 'job_completion_time_unix': None, 'job_nodelist': [],
         'system': 'vcluster', 'partition': 'fast', 'environ': 'openmpi4', 'result': 'pass', 'perfvalues': {}},
    ]
    # the first attempt of mpich4's 1 MiB stream failed on performance; the retry (last attempt) passed
    first = case('mpi_throughput', 'mpich4', 'shm', ref_test='mpitest.stream.blocking', mode='stream',
                 io='blocking', result='fail', phase='performance', reason='performance error: slow',
                 perf={'throughput_mbps': band(100.0, 20000.0, 'fail', 'Mbit/s')})
    retry = [dict(first, result='pass', fail_phase=None, fail_reason=None,
                  perfvalues={'vcluster:fast:throughput_mbps': band(25000.0, 20000.0, unit='Mbit/s')})]
    # the run before this one (passed; openmpi4's latency was 0.4 us): stored with ReFrame's storage as it would
    # have stored it, and this run too
    def before_value(tc, key, entry):
        mine = (tc['environ'], tc['interconnect'], key) == ('openmpi4', 'shm', 'vcluster:fast:rtt_us')
        return entry[0] * 0.8 if mine else entry[0]
    earlier = [dict(tc, perfvalues={k: [before_value(tc, k, v), *v[1:]] for k, v in tc['perfvalues'].items()})
               for tc in cases if tc['result'] == 'pass']
    before = write_report(tmp_path, earlier, start=END - 7200, name='earlier.json')
    now = write_report(run_dir, cases + [first], retry=retry)
    history.store_reports([before, now])
    return run_dir


FIGURES = ['collectives-vcluster-fast-shm.png', 'ebb-vcluster-fast-shm.png', 'history-vcluster-fast-shm.png',
           'history-vcluster-gige-gige.png', 'links-vcluster-gige-gige-gnu-legend.png',
           'links-vcluster-gige-gige-gnu.png', 'sweep-vcluster-fast-shm.png']


def run_tool(*args):
    return subprocess.run([str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=300)


def read_csv(path):
    with open(path, newline='') as fp:
        return list(csv.DictReader(fp))


def pick(rows, **want):
    found = [r for r in rows if all(r[k] == v for k, v in want.items())]
    assert len(found) == 1, (want, found)
    return found[0]


def test_report_tables_as_a_person_reads_them(fake_run):
    res = run_tool(fake_run)
    assert res.returncode == 0, res.stderr
    out = fake_run / 'report'
    assert f'{out / "index.html"}' in res.stdout

    rows = read_csv(out / 'summary.csv')
    shm = dict(system='vcluster', partition='fast', interconnect='shm')
    lat = {'metric': 'mpitest.latency:rtt_us', **shm}
    best = pick(rows, environ='openmpi4', **lat)
    assert (best['value'], best['ratio_to_best'], best['verdict']) == ('0.5', '1.0000', 'pass')
    assert best['transports'] == 'btl:vader' and best['unit'] == 'us'
    assert float(best['lower_bound']) == pytest.approx(0.25) and float(best['upper_bound']) == pytest.approx(0.75)
    assert pick(rows, environ='mpich4', **lat)['ratio_to_best'] == '0.5000'          # latency: best / value
    assert pick(rows, environ='intelmpi', **lat)['verdict'] == 'fail'
    assert pick(rows, environ='openmpi5', **lat)['verdict'] == 'failed'              # sanity failure: no figure
    assert pick(rows, environ='mpich5', **lat)['verdict'] == 'skipped'
    stream = {'metric': 'mpitest.stream.blocking:throughput_mbps', **shm}
    assert pick(rows, environ='openmpi4', **stream)['verdict'] == 'no reference'
    retried = pick(rows, environ='mpich4', **stream)                                 # the last attempt decides
    assert (retried['value'], retried['verdict'], retried['ratio_to_best']) == ('25000', 'pass', '1.0000')
    assert pick(rows, environ='openmpi4', **stream)['ratio_to_best'] == '0.8000'     # throughput: value / best
    assert pick(rows, environ='intelmpi', **stream)['verdict'] == 'not measured'
    bcast = pick(rows, environ='mpich4', metric='mpicoll:bcast_rate_kBps@1000000', **shm)
    assert bcast['ratio_to_best'] == '0.5000' and bcast['label'] == 'bcast rate @ 1 MB'
    gige = [r for r in rows if r['interconnect'] == 'gige']
    assert {r['environ'] for r in gige} == {'openmpi4', 'gnu'}
    assert pick(gige, environ='gnu', metric='tcp.rtt:rtt_us')['ratio_to_best'] == ''  # nobody to compare with

    md = (out / 'summary.md').read_text()
    assert '## shm on vcluster:fast' in md and '## gige on vcluster:gige' in md
    assert '| MPI builds | openmpi4 | mpich4 | openmpi5 | mpich5 | intelmpi |' in md
    assert '| transports used | btl:vader | ucx:sysv/memory | none reported | none reported | impi:shm |' in md
    assert '| 8 B latency (nr-mpitest) (us) | 0.500 (1.00) pass | 1.00 (0.50) pass | failed | skipped | ' \
           '4.00 (0.12) fail |' in md
    assert '| TCP kernels and peers (no MPI) | gnu |' in md
    assert '| OSU latency latency_us @ 8 B (us) | skipped | skipped | not measured | not measured | 0.302 pass |' in md
    assert '- 2 x no Spack on this system' in md and '- 1 x no kernels for mpich5' in md
    # every failure once, on one line, with its reason; the performance retry named
    assert re.search(r'^- mpi_latency %interconnect=shm @vcluster:fast\+openmpi5: sanity error: MPI took another '
                     r'path: <script>', md, re.M)
    assert 'passed on a retry (a performance failure, or a declared known fault): mpi_throughput' in md
    assert 'slow links all involve gige2' in md

    page = (out / 'index.html').read_text()
    assert '<script>alert' not in page and '&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; friends' in page
    figures = sorted(p.name for p in out.glob('*.png'))
    assert figures == FIGURES
    assert 'points from report and result.json' in md        # openmpi4's full sweep, mpich4's asserted points
    # the size curves: openmpi4's 21 sweep points, mpich4's 2 asserted ones, intelmpi's OSU latency
    curves = {(c.label, c.kind): c for c in report.size_curves(report.collect(fake_run).sections[0], END)}
    assert len(curves['openmpi4 nr-mpitest pingpong', 'latency'].points) == 21
    assert curves['mpich4 nr-mpitest pingpong', 'latency'].points[-1] == (2 ** 20, pytest.approx(8 * 2 ** 20 / 30000))
    assert curves['intelmpi OSU latency', 'latency'].points[0] == (1, pytest.approx(0.3002))
    # what changed: openmpi4's latency was 0.4 us in the run before, now 0.5 (+25%, worse); mpich4 unchanged
    assert '### report-vcluster.json' in md
    assert re.search(r'against the last passing run \(`reframe --performance-compare .*num_failures==0/last:/'
                     r'\+presult.`\): 1 of \d+ figures moved by 5% or more', md)
    assert '| mpi_latency %interconnect=shm @vcluster:fast+openmpi4 | rtt_us (us) | 0.500 | 0.400 | +25.0% worse | ' \
           'pass |' in md
    changes = read_csv(out / 'changes.csv')
    lat = [r for r in changes if r['figure'] == 'rtt_us' and r['sysenv'] == 'vcluster:fast+openmpi4']
    assert [(r['against'], r['now'], r['before'], r['change_pct'], r['worse']) for r in lat] == \
        [('last pass', '0.5', '0.4', '25.00', 'True')]
    hist = read_csv(out / 'history.csv')
    assert sorted(float(r['value']) for r in hist if r['metric'] == 'mpitest.latency:rtt_us'
                  and r['environ'] == 'openmpi4' and r['partition'] == 'fast') == [0.4, 0.5]
    for name in figures:
        assert (out / name).read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_the_link_map_has_one_pixel_per_direction_from_what_the_check_keeps(tmp_path):
    """The link map of a real nr-linkmap job as the check keeps it: one pixel per direction, in the tree's order,
    the suspects marked; at 1,000 nodes the same (1,000 x 1,000 pixels, no figure around it)."""
    import numpy as np
    from PIL import Image
    from netregress.judge import linkmatrix
    from netregress_postrun import reportplots
    keep_fixture(tmp_path)
    links = json.loads((tmp_path / 'links.json').read_text())
    matrix = linkmatrix.read_matrix(tmp_path / 'linkmatrix.bin', 4)
    median = links['summary']['median_link_mbps']
    suspects = [(x['src'], x['dst']) for x in links['slow']]
    order = [3, 2, 1, 0]
    pixels = reportplots.link_map_pixels(matrix, order, median, suspects)
    assert pixels.shape == (4, 4) and list(np.diag(pixels)) == [reportplots.MAP_NOT_MEASURED] * 4
    for i, a in enumerate(order):
        for j, b in enumerate(order):
            if a == b:
                continue
            if (a, b) in suspects:
                assert pixels[i, j] == reportplots.MAP_SUSPECT
            else:                     # the colour ramp: the share of the median link, 0 .. MAP_SHARE_TOP
                share = min(matrix[a, b] / median, reportplots.MAP_SHARE_TOP)
                assert pixels[i, j] == reportplots.MAP_FIRST + min(int(share / reportplots.MAP_SHARE_TOP * 253), 252)
    path = tmp_path / 'map.png'
    reportplots.write_png(path, pixels, reportplots.link_palette())
    with Image.open(path) as img:
        assert img.size == (4, 4) and img.mode == 'P'
        assert img.convert('RGB').getpixel((0, 0)) == (221, 221, 221)
    listing = reportplots.link_listing(links)
    assert [d for d, *_ in listing['suspects']] == [f'{x["src_host"]}->{x["dst_host"]}' for x in links['slow']]
    assert listing['left_out'] == ['node5: not responding (down*)']
    import pickle
    caption = reportplots.LinkMapCaption('a link map', listing)    # drawn in another process: the listing travels
    again = pickle.loads(pickle.dumps(caption))
    assert again == 'a link map' and isinstance(again, reportplots.LinkMapCaption) and again.listing == listing
    big = np.full((1000, 1000), 950.0, dtype=np.float32)
    big[7, :] = -1.0
    big[np.arange(1000), np.arange(1000)] = np.nan
    pixels = reportplots.link_map_pixels(big, range(1000), 950.0, [(3, 4)])
    reportplots.write_png(path, pixels, reportplots.link_palette())
    with Image.open(path) as img:
        assert img.size == (1000, 1000)
    assert (pixels[7, :7] == reportplots.MAP_FAILED).all() and pixels[7, 7] == reportplots.MAP_NOT_MEASURED
    assert pixels[3, 4] == reportplots.MAP_SUSPECT
    # a partial plan's sparse file: the same picture as from its dense matrix, drawn from its entries
    part = np.full((1000, 1000), np.nan, dtype=np.float32)
    part[np.arange(1000), (np.arange(1000) + 1) % 1000] = np.linspace(500, 1200, 1000)
    part[5, 6] = -1.0
    linkmatrix.write_matrix(tmp_path / 'sparse.bin', part)
    sparse = linkmatrix.read_matrix(tmp_path / 'sparse.bin', 1000)
    assert isinstance(sparse, linkmatrix.SparseMatrix) and sparse.count == 1000
    order = np.random.default_rng(3).permutation(1000)
    drawn = reportplots.link_map_pixels(sparse, order, 950.0, [(3, 4)])
    assert np.array_equal(drawn, reportplots.link_map_pixels(part, order, 950.0, [(3, 4)]))
    assert (drawn == reportplots.MAP_NOT_MEASURED).sum() == 1000 * 1000 - 1000     # all but the shift (3 -> 4 too)


def test_report_pieces_and_helpers():
    assert [report.size_label(s) for s in (8, 1000, 4096, 10 ** 6, 2 ** 20)] == \
        ['8 B', '1 kB', '4 KiB', '1 MB', '1 MiB']
    lat = {'ref_test': 'mpitest.latency', 'nr_figures': {
        'rtt_us': {'kind': 'latency', 'label': '8 B latency (nr-mpitest)', 'better': 'lower'},
        'ratio_to_peer': {'kind': 'ratio', 'label': '8 B latency: ratio to NetPIPE', 'better': 'lower'}}}
    m = report.describe(lat, 'rtt_us', 'us', 0)
    assert (m.better, m.label, m.kind) == ('lower', '8 B latency (nr-mpitest)', 'latency')
    assert m.key == 'mpitest.latency:rtt_us'
    assert report.ratio_to_best(m, {'x': 2.0, 'y': 4.0}) == {'x': 1.0, 'y': 0.5}
    ratio = report.describe(lat, 'ratio_to_peer', 'ratio', 2)
    assert ratio.better is None and report.ratio_to_best(ratio, {'x': 1.0, 'y': 0.9}) == {}   # a ratio: not ranked
    # a report from before the declarations: the raw name, not ranked, whatever the name suggests
    old = report.describe({'ref_test': 'mpitest.latency'}, 'rtt_us', 'us', 0)
    assert (old.label, old.kind, old.better) == ('mpitest.latency rtt_us', 'undeclared', None)
    osu = report.case_figures({'ref_test': 'osu.latency', 'environ': 'e', 'perfvalues': {
        f's:p:latency_us@{s}': [1.0 + s, 0, None, None, 'us', 'pass'] for s in (1, 2, 4, 8, 16)},
        'nr_figures': {f'latency_us@{s}': declare('osu.latency', f'latency_us@{s}') for s in (1, 2, 4, 8, 16)}})
    assert [f.metric.key for f in osu] == ['osu.latency:latency_us@8']


def test_missing_pieces_say_not_measured(tmp_path):
    run_dir = tmp_path / 'run'
    run_dir.mkdir()
    write_report(run_dir, [
        case('mpi_collectives', 'openmpi4', 'fast', ref_test='mpicoll', result='skip', reason='needs 2 nodes'),
        case('link_allpairs', 'gnu', 'fast', ref_test='links.allpairs', mpi=False, result='fail', phase='run',
             reason='the job never started', outputdir=str(tmp_path / 'nowhere'), stagedir=None),
        case('mpi_latency', 'openmpi4', 'fast', ref_test='mpitest.latency', result='abort',
             reason='aborted due to KeyboardInterrupt'),
    ])
    # a later run overwrote this case's links.json: it is not this run's
    later = tmp_path / 'later'
    later.mkdir()
    (later / 'links.json').write_text(json.dumps({'nodes': ['x', 'y'], 'links': []}))
    os.utime(later / 'links.json', (END + 3600, END + 3600))
    write_report(run_dir, [case('link_allpairs', 'gnu', 'fast', ref_test='links.allpairs', mpi=False,
                                outputdir=str(later))], system='local')
    assert report.main([str(run_dir)]) == 0
    md = (run_dir / 'report' / 'summary.md').read_text()
    assert 'No figure measured here (not measured).' in md
    assert '- mpitest.latency: aborted: openmpi4' in md
    assert 'mpicoll: skipped: openmpi4' in md
    assert 'not measured (no links.json and linkmatrix.bin of this run; case failed)' in md
    assert 'was written after this run ended (a later run): not used' in md
    assert not list((run_dir / 'report').glob('*.png'))
    assert read_csv(run_dir / 'report' / 'summary.csv') == []


@pytest.mark.parametrize('setup, message', [
    (lambda d: d / 'missing', 'no such file or directory'),
    (lambda d: d, 'no ReFrame run report (report-*.json) in it'),
    (lambda d: (d / 'report-x.json').write_text('{"runs": [') and d, 'unreadable run report'),
    (lambda d: (d / 'report-x.json').write_text('[1, 2]') and d, 'not a ReFrame run report'),
])
def test_bad_input_exits_2(tmp_path, setup, message):
    res = run_tool(setup(tmp_path))
    assert res.returncode == 2 and message in res.stderr and res.stdout == ''


class _Images(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.srcs = []

    def handle_starttag(self, tag, attrs):
        if tag == 'img':
            self.srcs.append(dict(attrs).get('src'))


#: Appended to a copy of the page: after the load event, the browser writes which images failed to decode.
_PROBE = '''<script>window.addEventListener('load', () => {
  const bad = [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'));
  const p = document.createElement('pre'); p.id = 'probe';
  p.textContent = 'IMAGES ' + document.images.length + ' BROKEN ' + JSON.stringify(bad);
  document.body.appendChild(p); });</script>'''


def test_page_in_headless_chromium(fake_run, tmp_path):
    browser = shutil.which('chromium')
    if browser is None:
        pytest.skip('chromium not on PATH (Debian package: apt-get install chromium): the page is not rendered')
    assert report.main([str(fake_run)]) == 0
    out = fake_run / 'report'
    page = out / 'index.html'
    parser = _Images()
    parser.feed(page.read_text())
    assert sorted(parser.srcs) == FIGURES
    for src in parser.srcs:
        assert src and (out / src).is_file(), f'<img src="{src}"> has no file'

    flags = [browser, '--headless', '--no-sandbox', '--disable-gpu', f'--user-data-dir={tmp_path / "profile"}']
    shot = tmp_path / 'page.png'
    res = subprocess.run(flags + [f'--screenshot={shot}', '--window-size=1280,2000', page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    from PIL import Image
    with Image.open(shot) as img:
        assert img.size == (1280, 2000)
        colours = img.convert('RGB').getcolors(maxcolors=1 << 20)
    assert colours is None or len(colours) > 100, 'the screenshot is (nearly) blank'

    probe = out / 'probe.html'
    probe.write_text(page.read_text().replace('</body>', _PROBE + '</body>'))
    res = subprocess.run(flags + ['--virtual-time-budget=10000', '--dump-dom', probe.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert f'IMAGES {len(FIGURES)} BROKEN []' in res.stdout, res.stdout[-2000:]


def test_builds_name_the_mpi_library_their_kernels_reported_in_the_configuration_order(tmp_path, monkeypatch):
    """The library string of each build comes from its kernels' result.json (``mpi.library``), never from dpkg or
    pip; a build whose kernels recorded none is 'unknown'. Builds follow the configuration's environments (vcluster:
    gnu, openmpi4, mpich4, openmpi5, mpich5, lam7, intelmpi), interconnects the partition's ic-<name> features."""
    real_run = subprocess.run

    def run(argv, *args, **kwargs):
        assert os.path.basename(str(argv[0])) not in ('dpkg-query', 'dpkg', 'pip', 'pip3'), argv
        return real_run(argv, *args, **kwargs)
    monkeypatch.setattr(subprocess, 'run', run)
    run_dir = tmp_path / 'run'
    run_dir.mkdir()
    out = tmp_path / 'out4'
    out.mkdir()
    (out / 'result.json').write_text(json.dumps({'mpi': {'library': 'Open MPI v4.1.4, package: Debian OpenMPI\n'
                                                         'more lines', 'standard': '3.1'}}))
    os.utime(out / 'result.json', (END - 100, END - 100))
    lat = {'rtt_us': band(1.0, 1.0)}
    write_report(run_dir, [
        case('mpi_latency', 'intelmpi', 'fast', ref_test='mpitest.latency', perf=lat),
        case('mpi_latency', 'lam7', 'fast', ref_test='mpitest.latency', perf=lat),
        case('mpi_latency', 'openmpi4', 'fast', ref_test='mpitest.latency', perf=lat, outputdir=str(out)),
        case('mpi_latency', 'openmpi4', 'shm', ref_test='mpitest.latency', perf=lat, outputdir=str(out)),
        case('tcp_rtt', 'gnu', 'fast', ref_test='tcp.rtt', mpi=False, perf=lat),
    ])
    rep = report.collect(run_dir)
    assert [(b['environ'], b['library']) for b in rep.builds] == [
        ('gnu', report.NO_MPI), ('openmpi4', 'Open MPI v4.1.4, package: Debian OpenMPI'), ('lam7', 'unknown'),
        ('intelmpi', 'unknown')]
    assert [s.title for s in rep.sections] == ['shm on vcluster:fast', 'fast on vcluster:fast']   # ic-shm, ic-fast
    assert rep.sections[1].tables[0].environs == ['openmpi4', 'lam7', 'intelmpi']


def test_a_system_the_configuration_lacks_keeps_the_order_of_the_report(tmp_path):
    run_dir = tmp_path / 'run'
    run_dir.mkdir()
    lat = {'rtt_us': band(1.0, 1.0)}
    write_report(run_dir, [case('mpi_latency', env, ic, system='elsewhere', ref_test='mpitest.latency', perf=lat)
                           for ic in ('ib', 'eth') for env in ('zmpi', 'ampi')], system='elsewhere')
    rep = report.collect(run_dir)
    assert [s.interconnect for s in rep.sections] == ['ib', 'eth']
    assert rep.sections[0].environs == ['zmpi', 'ampi']


def test_a_report_without_declarations_shows_raw_names_unranked(tmp_path):
    run_dir = tmp_path / 'run'
    run_dir.mkdir()
    write_report(run_dir, [case('mpi_latency', env, 'shm', ref_test='mpitest.latency', declared=False,
                                perf={'rtt_us': band(v, v)}) for env, v in (('openmpi4', 1.0), ('mpich4', 2.0))])
    assert report.main([str(run_dir), '--no-history']) == 0
    md = (run_dir / 'report' / 'summary.md').read_text()
    assert '| mpitest.latency rtt_us (us) | 1.00 pass | 2.00 pass |' in md


def test_any_reframe_run_report_file_is_reported_beside_it(tmp_path):
    ci = tmp_path / 'run' / 'ci'
    ci.mkdir(parents=True)
    path = write_report(ci, [case('mpi_latency', 'openmpi4', 'shm', ref_test='mpitest.latency',
                                  perf={'rtt_us': band(1.0, 1.0)})], name='report.json')
    res = run_tool(path, '--no-history')
    assert res.returncode == 0, res.stderr
    assert (ci / 'report-report' / 'summary.csv').is_file() and str(ci / 'report-report' / 'index.html') in res.stdout
    other = tmp_path / 'notes.txt'
    other.write_text('hello')
    res = run_tool(other)
    assert res.returncode == 2 and res.stderr.strip() == f'tools/report: {other}: unreadable run report: malformed ' \
        f'JSON (Expecting value at line 1 column 1; a run that stopped while ReFrame wrote it?)'


if __name__ == '__main__':
    sys.exit(pytest.main([__file__, '-v']))
