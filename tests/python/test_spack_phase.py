"""The set-up's Spack phase under concurrency: parts solved side by side on a cold cache (netregress.spackparts),
and a solve that loses a lock race. Spack is a stand-in throughout."""
import os
import sys
from pathlib import Path

import pytest

from netregress import spackparts


#: Spack's misc-cache protocol for the index of a package repository (spack.repo.RepoIndex on a
#: spack.util.file_cache.FileCache): a process that finds no index takes the write lock and builds it, slowly (Spack
#: imports every recipe: minutes); a process that finds one reads it under a shared lock. Either gives up after
#: TIMEOUT seconds of waiting, with Spack's own words. Writers are recorded in MISC/writers.
INDEXED_SPACK = '''#!{python}
import fcntl, os, sys, time
from pathlib import Path
misc, hold, timeout = Path(sys.argv[0]).parent / 'misc', {hold}, {timeout}
args = sys.argv[1:]
if args == ['--version']:
    print('1.1.0')
    sys.exit(0)
index = misc / 'providers' / 'builtin-specfile_v5-index.json'
lock = index.with_name('.' + index.name + '.lock')
index.parent.mkdir(parents=True, exist_ok=True)


def locked(kind):
    fd, attempts, deadline = os.open(lock, os.O_RDWR | os.O_CREAT), 0, time.monotonic() + timeout
    while True:
        attempts += 1
        try:
            fcntl.lockf(fd, kind | fcntl.LOCK_NB)
            return fd
        except OSError:
            if time.monotonic() > deadline:
                print(f"==> Error: Timed out waiting for a {{'write' if kind == fcntl.LOCK_EX else 'read'}} lock "
                      f"after {{timeout}}s. Made {{attempts}} attempts on file: {{lock}}")
                sys.exit(3)
            time.sleep(0.02)


if index.exists():
    fd = locked(fcntl.LOCK_SH)
    index.read_text()
else:
    fd = locked(fcntl.LOCK_EX)
    if not index.exists():
        time.sleep(hold)
        index.write_text('{{}}')
        with open(misc / 'writers', 'a') as out:
            out.write(args[2] + '\\n')
os.close(fd)
if args[2] == 'concretize':
    (Path(args[1]) / 'spack.lock').write_text('{{}}')
'''


def parts_of(tmp_path: Path, count: int) -> list[Path]:
    parts = [tmp_path / 'envs' / 'local.parts' / str(i) for i in range(count)]
    for part in parts:
        part.mkdir(parents=True)
        (part / 'spack.yaml').write_text('spack: {}\n')
    return parts


def stand_in(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def test_parts_solved_at_once_on_a_cold_cache_are_all_concretized(tmp_path, monkeypatch):
    """Five parts at once on a cold cache, with a Spack whose first process holds the index lock 2 s while others
    give up after 0.5 s (a fresh clone: 276 s against Spack's 120): every part is concretized, and the index is
    built once, by the warm-up alone, never by a solve."""
    spack = stand_in(tmp_path / 'bin' / 'spack', INDEXED_SPACK.format(python=sys.executable, hold=2.0, timeout=0.5))
    parts = parts_of(tmp_path, 5)
    monkeypatch.setattr(os, 'sched_getaffinity', lambda pid: set(range(len(parts))))     # all five at once
    said = []
    assert spackparts.concretize(spack, parts, [], say=said.append) == [], said
    assert all((part / 'spack.lock').exists() for part in parts)
    assert (tmp_path / 'bin' / 'misc' / 'writers').read_text().split() == ['python']
    assert not any('lost a lock race' in line for line in said)


def test_a_solve_that_loses_a_lock_race_is_run_again_and_only_that(tmp_path):
    """Spack gave up on a lock: the part is solved again (the reason said, both attempts in its log), at most
    ATTEMPTS times in all; a solve that failed for another reason is not repeated."""
    spack = stand_in(tmp_path / 'spack', '''#!/bin/sh
[ "$3" = python ] && exit 0
runs=$(($(cat "$2/runs" 2>/dev/null || echo 0) + 1)); echo $runs > "$2/runs"
case $2 in
  */1) if [ $runs = 1 ]; then echo "==> Error: Timed out waiting for a write lock after 120.022s."
                              echo "    Made 265 attempts on file: /c/misc/providers/.builtin-index.json.lock"; exit 3; fi ;;
  */2) echo "==> Error: Timed out waiting for a read lock after 120.001s. Made 9 attempts on file: /c/x.lock"; exit 3 ;;
  */3) echo "==> Error: concretization failed"; exit 1 ;;
esac
echo "solved $2 (run $runs)"
''')
    parts = parts_of(tmp_path, 4)
    said = []
    failed = spackparts.concretize(spack, parts, [], say=said.append)
    assert failed == [parts[2] / spackparts.LOG, parts[3] / spackparts.LOG]
    assert [int((p / 'runs').read_text()) for p in parts] == [1, 2, spackparts.ATTEMPTS, 1]
    assert 'spack-env: part 1 lost a lock race (Timed out waiting for a write lock after 120.022s.): attempt 2 of 3' \
        in said
    log = (parts[1] / spackparts.LOG).read_text()
    assert 'Timed out waiting for a write lock' in log and log.rstrip().endswith(f'solved {parts[1]} (run 2)')
    assert spackparts.why(parts[3] / spackparts.LOG) == '==> Error: concretization failed'
