#!/usr/bin/env python3
"""Kill a writer of a state file at random moments: how often is the file left torn?

    bench/state_kill_write.py [TRIES]     # default 50 per way of writing

Two ways of replacing a 2-3 MB file in a loop, each killed (SIGKILL) TRIES times after a random 0-150 ms:
``plain`` opens the target and writes it (what Baseline.save's fixed .tmp and tools/refs write did through
Path.write_text), ``atomic`` is netregress.statefiles.atomic_write (mkstemp beside it, fsync, rename). After each
kill the file must be one of the two complete texts; prints how many tries left it torn (shorter, mixed or empty).
"""
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

if __name__ == '__main__':          # under the project's venv, whichever Python the #! line found
    import benchenv
    benchenv.use_project_python()
ROOT = Path(__file__).resolve().parents[1]
TEXTS = [('A' * 999 + '\n') * 2000, ('B' * 999 + '\n') * 3000]

WRITER = textwrap.dedent('''
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from netregress import statefiles
    texts = [('A' * 999 + '\\n') * 2000, ('B' * 999 + '\\n') * 3000]
    path, how, i = Path(sys.argv[1]), sys.argv[2], 0
    print('ready', flush=True)
    while True:
        if how == 'plain':
            path.write_text(texts[i % 2])
        else:
            statefiles.atomic_write(path, texts[i % 2])
        i += 1
''')


def trial(how: str, tries: int, rng: random.Random) -> tuple[int, int]:
    """(torn, kills) for one way of writing."""
    torn = 0
    with tempfile.TemporaryDirectory(prefix='nr-killwrite-') as tmp:
        path = Path(tmp) / 'baseline.yaml'
        path.write_text(TEXTS[0])
        for _ in range(tries):
            proc = subprocess.Popen([sys.executable, '-c', WRITER, str(path), how, str(ROOT / 'reframe_tests')],
                                    stdout=subprocess.PIPE, text=True)
            proc.stdout.readline()
            time.sleep(rng.uniform(0.0, 0.15))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
            if path.read_text() not in TEXTS:
                torn += 1
    return torn, tries


def main() -> int:
    tries = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    rng = random.Random(29)
    for how in ('plain', 'atomic'):
        torn, n = trial(how, tries, rng)
        print(f'{how:7s} {torn:3d} of {n} kills left the file torn')
    return 0


if __name__ == '__main__':
    sys.exit(main())
