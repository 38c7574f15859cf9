"""Private state directories, atomic writes and the state lock (netregress.statefiles)."""
import json
import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from netregress import statefiles

ROOT = Path(__file__).resolve().parents[2]


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_new_state_directory_is_private(tmp_path):
    path = statefiles.private_dir(tmp_path / 'a' / 'state')
    assert path.is_dir() and mode(path) == 0o700


@pytest.mark.parametrize('bits', [0o770, 0o707, 0o777])
def test_a_directory_others_may_write_is_refused(tmp_path, bits):
    path = tmp_path / 'state'
    path.mkdir()
    path.chmod(bits)
    with pytest.raises(statefiles.StateError, match=r'writable by group or others .*chmod 700'):
        statefiles.private_dir(path)


def test_a_symlinked_state_directory_is_refused(tmp_path):
    (tmp_path / 'real').mkdir(mode=0o700)
    (tmp_path / 'state').symlink_to(tmp_path / 'real')
    with pytest.raises(statefiles.StateError, match='symbolic link'):
        statefiles.private_dir(tmp_path / 'state')


def test_a_state_directory_under_a_file_is_one_line(tmp_path):
    (tmp_path / 'file').write_text('')
    with pytest.raises(statefiles.StateError, match=r'file/state: state directory cannot be used \(Not a directory\)'):
        statefiles.private_dir(tmp_path / 'file' / 'state')


@pytest.mark.skipif(os.geteuid() != 0, reason='needs root to give a directory to another user')
def test_a_directory_of_another_user_is_refused(tmp_path):
    path = tmp_path / 'state'
    path.mkdir(mode=0o700)
    os.chown(path, 65534, 65534)
    with pytest.raises(statefiles.StateError, match=r'owned by uid 65534, not by this user'):
        statefiles.private_dir(path)


def test_atomic_write_never_writes_through_a_symlink(tmp_path):
    victim = tmp_path / 'victim'
    victim.write_text('keep me\n')
    (tmp_path / 'file.yaml').symlink_to(victim)
    with pytest.raises(statefiles.StateError, match='symbolic link'):
        statefiles.atomic_write(tmp_path / 'file.yaml', 'new\n')
    assert victim.read_text() == 'keep me\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['file.yaml', 'victim']     # no temporary file left


def test_atomic_write_to_dev_full_symlink_is_refused(tmp_path):
    (tmp_path / 'x.tmp').symlink_to('/dev/full')
    (tmp_path / 'x.yaml').symlink_to('/dev/full')
    with pytest.raises(statefiles.StateError, match='symbolic link'):
        statefiles.atomic_write(tmp_path / 'x.yaml', 'data')
    statefiles.atomic_write(tmp_path / 'y.yaml', 'data')             # a fixed name's symlink is never followed
    assert (tmp_path / 'y.yaml').read_text() == 'data' and (tmp_path / 'x.tmp').is_symlink()


def test_atomic_write_keeps_the_mode_and_leaves_nothing_on_failure(tmp_path, monkeypatch):
    path = tmp_path / 'f'
    path.write_text('old')
    path.chmod(0o640)
    statefiles.atomic_write(path, 'new')
    assert path.read_text() == 'new' and mode(path) == 0o640

    def full(src, dst):
        raise OSError(28, 'No space left on device')
    monkeypatch.setattr(os, 'replace', full)
    with pytest.raises(statefiles.StateError, match='No space left on device.*old one is intact'):
        statefiles.atomic_write(path, 'newer')
    assert path.read_text() == 'new' and [p.name for p in tmp_path.iterdir()] == ['f']


WRITER = textwrap.dedent('''
    import sys
    sys.path.insert(0, sys.argv[2])
    from netregress import statefiles
    texts = [('A' * 999 + '\\n') * 2000, ('B' * 999 + '\\n') * 3000]
    i = 0
    print('ready', flush=True)
    while True:
        statefiles.atomic_write(sys.argv[1], texts[i % 2])
        i += 1
''')


def test_a_kill_during_writes_leaves_the_file_whole(tmp_path):
    """A writer replacing a 2-3 MB file in a loop, killed at random moments (SIGKILL): every time the file is one
    of the two complete texts, never a part."""
    path = tmp_path / 'baseline.yaml'
    good = {('A' * 999 + '\n') * 2000, ('B' * 999 + '\n') * 3000}
    rng = random.Random(29)
    for _ in range(12):
        proc = subprocess.Popen([sys.executable, '-c', WRITER, str(path), str(ROOT / 'reframe_tests')],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline() == 'ready\n'
        time.sleep(rng.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        if path.exists():
            assert path.read_text() in good
    assert path.read_text() in good


def test_the_lock_serialises_writers(tmp_path):
    script = textwrap.dedent('''
        import sys, time
        sys.path.insert(0, sys.argv[2])
        from pathlib import Path
        from netregress import statefiles
        counter = Path(sys.argv[1]) / 'counter'
        with statefiles.locked(Path(sys.argv[1])):
            n = int(counter.read_text()) if counter.exists() else 0
            time.sleep(0.05)
            statefiles.atomic_write(counter, str(n + 1))
    ''')
    procs = [subprocess.Popen([sys.executable, '-c', script, str(tmp_path), str(ROOT / 'reframe_tests')])
             for _ in range(8)]
    assert all(p.wait() == 0 for p in procs)
    assert (tmp_path / 'counter').read_text() == '8'
    assert mode(tmp_path / '.lock') == 0o600


def test_a_symlinked_lock_file_is_refused(tmp_path):
    (tmp_path / '.lock').symlink_to(tmp_path / 'elsewhere')
    with pytest.raises(statefiles.StateError, match='cannot open the lock file'):
        with statefiles.locked(tmp_path):
            pass
    assert not (tmp_path / 'elsewhere').exists()


def test_temporary_files_of_killed_baseline_saves_are_removed_by_the_next_writer(tmp_path):
    """tools/refs record killed (SIGKILL) during its baseline save, after the temporary file was written and
    before the rename: the next writer removes the MB the killed one left (a killed one too), the record after
    the kills keeps its run, and a live writer's temporary file is not touched."""
    state, rep = tmp_path / 'state', tmp_path / 'r.json'
    cases = [{'result': 'pass', 'environ': 'gnu', 'interconnect': 'gige', 'ref_test': 'tcp.stream', 'system': 'vc',
              'partition': 'gige', 'unique_name': f'c{i}',
              'nr_figures': {f'bw{i}_mbps': {'kind': 'throughput', 'label': 'x', 'better': 'higher'}},
              'perfvalues': {f'vc:gige:bw{i}_mbps': [940.0, 0, None, None, 'Mbit/s', 'pass']}} for i in range(6000)]
    rep.write_text(json.dumps({'runs': [{'testcases': cases}]}))
    env = {**os.environ, 'NETREGRESS_STATE': str(state)}
    killed = textwrap.dedent('''
        import os, sys, time
        sys.path.insert(0, sys.argv[1])
        from pathlib import Path
        from netregress_postrun import refsbaseline
        from netregress.measure import interconnects
        def stalled(src, dst):
            print('renaming', flush=True)
            time.sleep(60)
        os.replace = stalled
        refsbaseline.record([Path(sys.argv[2])], 'vc', interconnects.load())
    ''')
    folder = state / 'baselines' / 'vc'
    for _ in range(2):                  # the second killed writer removed the first one's leftover
        proc = subprocess.Popen([sys.executable, '-c', killed, str(ROOT / 'reframe_tests'), str(rep)], env=env,
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline() == 'renaming\n'
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        left = sorted(folder.glob('.*.tmp'))
        assert len(left) == 1 and left[0].stat().st_size > 500_000, left
    live = folder / f'{left[0].name.split(".tmp")[0].rsplit(".", 2)[0]}.{os.getpid()}.live.tmp'
    live.write_text('a writer still at work\n')
    out = subprocess.run([str(ROOT / 'tools' / 'refs'), 'record', '--system', 'vc', str(rep)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and '6000 figures added; 6000 variables, 1 runs' in out.stdout, out.stdout
    assert sorted(p.name for p in folder.glob('.*.tmp')) == [live.name]
    assert statefiles.remove_leftovers(folder / 'x.yaml') == []
