"""tools/validate as a CI runner and a centre drive it: a signal stops it within seconds (issue 48, finding 5), a
check file that does not load stops it before anything is measured (ReFrame's --warn-as-error), and the scope
reaches ReFrame as one set of options. ReFrame is a stand-in script except where a real one is named."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import standins

ROOT = Path(__file__).resolve().parents[2]
VENV_PY = Path(sys.executable)
REAL_REFRAME = VENV_PY.parent / 'reframe'

FAKE_REFRAME = r'''#!/bin/bash
# stand-in ReFrame: --list answers at once; a run records its pid and its child's, says so, then waits forever
# (FAKE_SLEEP set) or ends at once
echo "$*" >> "$FAKE_DIR/calls"
for a in "$@"; do [ "$a" = --list ] && { echo "Found 3 check(s)"; exit 0; }; done
[ -n "${FAKE_SLEEP:-}" ] || exit 0
sleep 600 &
echo "$$ $!" > "$FAKE_DIR/pids"
echo running
wait
'''
#: Slurm of a cluster `cl`: partitions fast[1-2] and gige[1-2]; reservation maint holds gige[1-2]; gige2 drained
CLUSTER = standins.Cluster(partitions={p: [f'{p}1', f'{p}2'] for p in ('fast', 'gige')}, drained={'gige2': 'fan'},
                           reservations={'maint': ['gige1', 'gige2']})
SITE = '''
def part(name):
    return {'name': name, 'scheduler': 'slurm', 'launcher': 'srun', 'access': [f'--partition={name}'],
            'environs': ['gnu'], 'features': ['ic-shm', 'ic-eth'], 'extras': {'interconnects': {'eth': {'iface': 'x'}}}}
site_configuration = {'systems': [{'name': 'cl', 'hostnames': ['^cl-login$'], 'partitions': [part('fast'), part('gige')]}]}
'''


@pytest.fixture
def fake(tmp_path):
    """A deps directory whose Python is this venv's (the tools' library) and a stand-in ReFrame."""
    deps = tmp_path / 'deps' / 'venv' / 'bin'
    deps.mkdir(parents=True)
    (deps / 'python').write_text(f'#!/bin/sh\nexec {VENV_PY} "$@"\n')
    (deps / 'python').chmod(0o755)
    (tmp_path / 'reframe').write_text(FAKE_REFRAME)
    (tmp_path / 'reframe').chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ('NETREGRESS_SITE', 'RFM_PREFIX', 'NETREGRESS_STATE')}
    env.update(NETREGRESS_DEPS=str(tmp_path / 'deps'), NETREGRESS_REFRAME=str(tmp_path / 'reframe'),
               NETREGRESS_SPACK='none', RFM_PREFIX=str(tmp_path / 'prefix'), FAKE_DIR=str(tmp_path),
               NETREGRESS_STOP_GRACE_S='5')
    yield env
    pids = tmp_path / 'pids'                            # a test that failed half-way leaves no stand-in behind
    for pid in map(int, pids.read_text().split() if pids.exists() else []):
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize('sig,code', [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_the_run_within_seconds_and_leaves_no_process(fake, tmp_path, sig, code):
    # no stdin, as a CI runner gives none (a pytest-xdist worker's is its channel to the controller); the signal's
    # default disposition, as a runner starts its job with: a shell that runs make test in the background ignores
    # SIGINT, and bash can neither trap nor reset a signal ignored when it starts
    proc = subprocess.Popen([str(ROOT / 'tools' / 'validate'), '--system', 'local'], env={**fake, 'FAKE_SLEEP': '1'},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))
    pids = tmp_path / 'pids'
    deadline = time.monotonic() + 240                   # the set-up before ReFrame (python per step) on a busy host
    while not pids.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pids.exists(), proc.communicate(timeout=30)[0]
    time.sleep(0.5)
    sent = time.monotonic()
    os.kill(proc.pid, sig)                              # to the top process only, as a CI runner or systemd does
    out, _ = proc.communicate(timeout=30)
    took = time.monotonic() - sent
    assert took < 10, f'{took:.1f} s\n{out}'
    assert proc.returncode == code, out
    assert f'== {sig.name[3:]}: stopping ReFrame' in out, out
    assert not [p for p in map(int, pids.read_text().split()) if alive(p)]       # ReFrame and its child
    left = subprocess.run(['pgrep', '-s', str(proc.pid)], capture_output=True, text=True).stdout.split()
    assert left == [], left                                                      # nothing of the run's session


@pytest.mark.skipif(not REAL_REFRAME.exists(), reason='no ReFrame beside this Python')
def test_a_check_file_that_does_not_load_stops_the_run_before_measuring(fake, tmp_path):
    broken = tmp_path / 'broken_check.py'
    broken.write_text('import reframe as rfm\nimport no_such_module_of_ours\n\n\n@rfm.simple_test\n'
                      'class broken(rfm.RunOnlyRegressionTest):\n    pass\n')
    env = {**fake, 'NETREGRESS_REFRAME': str(REAL_REFRAME)}
    res = subprocess.run([str(ROOT / 'tools' / 'validate'), '--system', 'local', '--', '-c', str(broken)],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 1, res.stdout + res.stderr
    assert '== validation FAILED before measuring: the checks of local do not load' in res.stdout
    assert "skipping test file" in res.stdout and 'no_such_module_of_ours' in res.stdout
    assert '== reframe on local' not in res.stdout                 # nothing was measured


def test_the_scope_reaches_reframe_as_one_set_of_options(fake, tmp_path):
    res = subprocess.run([str(ROOT / 'tools' / 'validate'), '--system', 'local', '--reservation', 'maint'],
                         env=fake, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and '--reservation needs Slurm partitions; system local has none' in res.stderr
    assert not (tmp_path / 'calls').exists()                       # ReFrame never started


def test_a_drained_node_in_scope_is_named_and_left_out_of_the_run_unless_strict(fake, tmp_path):
    bin_dir = CLUSTER.install(tmp_path / 'slurm')
    (tmp_path / 'site').mkdir()
    (tmp_path / 'site' / 'settings.py').write_text(SITE)
    env = {**fake, 'PATH': f'{bin_dir}:{fake["PATH"]}', 'NETREGRESS_SITE': str(tmp_path / 'site')}
    res = subprocess.run([str(ROOT / 'tools' / 'validate'), '--system', 'cl', '--', '-J', 'reservation=maint'],
                         env=env, capture_output=True, text=True, timeout=600)
    assert '   gige2 (eth): drained (drained; reason: fan): left out' in res.stdout, res.stdout + res.stderr
    run = [c for c in (tmp_path / 'calls').read_text().splitlines() if ' -r' in c][-1].split()
    assert run[run.index('reservation=maint') - 1:run.index('reservation=maint') + 3] == \
        ['-J', 'reservation=maint', '-J', 'exclude=gige2']
    (tmp_path / 'calls').unlink()
    res = subprocess.run([str(ROOT / 'tools' / 'validate'), '--system', 'cl', '--reservation', 'maint', '--strict'],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 1 and '   gige2 (eth): drained (drained; reason: fan)' in res.stdout
    assert 'exclude=' not in (tmp_path / 'calls').read_text()
