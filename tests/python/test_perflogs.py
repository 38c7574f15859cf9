"""Performance logs to a centre's own store: a site's settings add ReFrame's httpjson handler (netregress.perflogs);
a real ReFrame run of one cheap check on `local` posts its document to a receiver on loopback, and our file perflog
is still written."""
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from netregress import perflogs

ROOT = Path(__file__).resolve().parents[2]
REFRAME = Path(sys.executable).parent / 'reframe'

CHECK = '''
import reframe as rfm
from reframe.core.builtins import performance_function, sanity_function


@rfm.simple_test
class perflog_probe(rfm.RunOnlyRegressionTest):
    """Cheap: echo a figure, report it."""
    valid_systems = ['local']
    valid_prog_environs = ['gnu']
    executable = 'echo'
    executable_opts = ['bw 42.5']
    reference = {'local': {'bw_mbps': (40.0, -0.1, 0.1, 'Mbit/s')}}

    @sanity_function
    def said(self):
        return True

    @performance_function('Mbit/s')
    def bw_mbps(self):
        return 42.5
'''


class Receiver(http.server.BaseHTTPRequestHandler):
    posts: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers['Content-Length']))
        type(self).posts.append((self.path, dict(self.headers), json.loads(body)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    Receiver.posts = []
    server = http.server.HTTPServer(('127.0.0.1', 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def test_the_document_of_a_test_case():
    record = SimpleNamespace(check_result='fail', check_system='orion', check_partition='ib', check_environ='ompi5',
                             check_name='mpi_throughput', check_display_name='mpi_throughput %mode=stream',
                             check_job_completion_time='2026-11-28T22:00:00+00:00', check_interconnect='ib',
                             check_job_nodelist=['n1', 'n2'], check_jobid='77', check_fail_phase='performance',
                             check_perfvalues={'orion:ib:bw_mbps': (float('nan'), 97000, -0.1, 0.1, 'Mbit/s',
                                                                    'fail')})
    doc = json.loads(perflogs.document(record, {'cluster': 'orion', 'system': 'not-this'}, ()))
    assert doc['schema'] == perflogs.SCHEMA and doc['system'] == 'orion' and doc['cluster'] == 'orion'
    assert doc['nodes'] == ['n1', 'n2'] and doc['fail_phase'] == 'performance' and doc['interconnect'] == 'ib'
    assert doc['perf'] == {'bw_mbps': {'value': None, 'unit': 'Mbit/s', 'ref': 97000, 'lower': -0.1, 'upper': 0.1,
                                       'result': 'fail'}}
    assert perflogs.document(SimpleNamespace(check_result=None), {}, ()) is None      # not a test case's result


@pytest.mark.skipif(not REFRAME.exists(), reason='no ReFrame beside this Python')
def test_a_reframe_run_posts_to_the_centres_store_and_keeps_our_file(receiver, tmp_path):
    url = f'http://127.0.0.1:{receiver.server_address[1]}/netregress/ingest'
    site = tmp_path / 'site'
    site.mkdir()
    (site / 'settings.py').write_text(
        'from netregress.perflogs import send_to\n'
        f"site_configuration = {{'logging': [send_to({url!r}, ['local'], extras={{'cluster': 'test'}}, "
        f"headers={{'Authorization': 'Token t0k'}})]}}\n")
    (tmp_path / 'checks').mkdir()
    (tmp_path / 'checks' / 'probe.py').write_text(CHECK)
    env = {**os.environ, 'NETREGRESS_SITE': str(site), 'RFM_ENABLE_RESULTS_STORAGE': '0', 'TMPDIR': str(tmp_path),
           'PYTHONPATH': str(ROOT / 'reframe_tests')}
    res = subprocess.run([str(REFRAME), '-C', str(ROOT / 'config' / 'settings.py'), '-C', str(site / 'settings.py'),
                          '--system', 'local', '--prefix', str(tmp_path / 'run'), '-c', str(tmp_path / 'checks'),
                          '-r'], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert len(Receiver.posts) == 1, res.stdout[-3000:]
    path, headers, doc = Receiver.posts[0]
    assert path == '/netregress/ingest' and headers['Authorization'] == 'Token t0k'
    assert headers['Content-type'] == 'application/json'
    assert (doc['system'], doc['partition'], doc['environ'], doc['check'], doc['result']) == \
        ('local', 'default', 'gnu', 'perflog_probe', 'pass')
    assert doc['perf'] == {'bw_mbps': {'value': 42.5, 'unit': 'Mbit/s', 'ref': 40.0, 'lower': -0.1, 'upper': 0.1,
                                       'result': 'pass'}}
    assert doc['cluster'] == 'test' and doc['timestamp'] and doc['schema'] == perflogs.SCHEMA
    filelog = (tmp_path / 'run' / 'perflogs' / 'local' / 'default' / 'perflog_probe.log').read_text()
    assert '|pass|local:default|gnu|perflog_probe|' in filelog and 'bw_mbps=42.5 Mbit/s' in filelog
