"""The set-up's Spack phase under concurrency and failure: parts solved side by side on a cold cache
(netregress.setup.spackparts), a solve that loses a lock race, and what `make validate` does when the phase failed or
when the run is without Spack (tools/bootstrap, tools/validate). Spack is a stand-in throughout."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip('reframe')
from netregress.measure import spack_build  # noqa: E402
from netregress.setup import spackparts  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: the last line of tools/validate, passed or failed
TIMES = re.compile(r'^validate: time set-up (\d+) s, measurement (\d+) s, post-run (\d+) s, total (\d+) s$')

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


# --- tools/bootstrap and tools/validate -------------------------------------------------------------------------

#: Enough of Spack for tools/spack-setup and tools/spack-env: every command works, but no solve does.
FAILING_SPACK = '''#!/bin/sh
case "$*" in
  --version) echo 1.1.0 ;;
  *" concretize"*) echo "==> Error: Timed out waiting for a write lock after 120.022s. Made 265 attempts on file: x"
                   exit 3 ;;
esac
exit 0
'''


def current_venv(deps: Path, env: dict) -> None:
    """``deps/venv``: this test's venv (its Python and packages, linked) with the stamp tools/bootstrap wants for this
    checkout (asked of ``bootstrap --check``, which names it), so bootstrap takes it as current and builds none."""
    venv = Path(sys.executable).parents[1]
    if not (venv / 'pyvenv.cfg').exists():
        pytest.skip(f'{sys.executable} is not a venv\'s')
    (deps / 'venv' / 'bin').mkdir(parents=True)
    (deps / 'venv' / 'pyvenv.cfg').write_bytes((venv / 'pyvenv.cfg').read_bytes())
    (deps / 'venv' / 'bin' / 'python').symlink_to(venv / 'bin' / 'python')
    (deps / 'venv' / 'lib').symlink_to(venv / 'lib')
    out = subprocess.run([str(ROOT / 'tools' / 'bootstrap'), '--check', '--for', 'validate', '--no-spack'],
                         capture_output=True, text=True, env=env, timeout=120).stdout
    wanted = re.search(rf'^  - {re.escape(str(deps / "venv"))} \((.*)\)$', out, re.M)
    assert wanted, out
    (deps / 'venv' / '.netregress-stamp').write_text(wanted.group(1) + '\n')


@pytest.fixture
def failing_spack_phase(tmp_path):
    """(environment, tmp deps): tools/bootstrap for the vcluster site (no Debian packages, no kernels) with this
    test's venv, and Spack and spack-packages checkouts whose Spack fails every solve."""
    deps = tmp_path / 'deps'
    stand_in(tmp_path / 'spack' / 'bin' / 'spack', FAILING_SPACK)
    (tmp_path / 'packages' / 'repos' / 'spack_repo' / 'builtin').mkdir(parents=True)
    (tmp_path / 'packages' / 'repos' / 'spack_repo' / 'builtin' / 'repo.yaml').write_text('repo: {}\n')
    # clingo comes from a carried-in bootstrap mirror (the stand-in needs none): the test venv may lack it, as in CI
    (tmp_path / 'bootstrap-mirror' / 'metadata' / 'sources').mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(('NETREGRESS_', 'RFM_'))}
    # PIP_NO_INDEX: should bootstrap build a venv after all, it fails here at once instead of downloading one
    env.update(NETREGRESS_DEPS=str(deps), NETREGRESS_SPACK=str(tmp_path / 'spack'), PIP_NO_INDEX='1',
               NETREGRESS_SPACK_PACKAGES=str(tmp_path / 'packages'),
               NETREGRESS_SPACK_BOOTSTRAP_MIRROR=str(tmp_path / 'bootstrap-mirror'),
               NETREGRESS_SITE=str(ROOT / 'config' / 'sites' / 'vcluster'))
    current_venv(deps, env)
    return env, deps


def test_a_failed_spack_phase_stops_bootstrap_with_one_line(failing_spack_phase):
    env, deps = failing_spack_phase
    out = subprocess.run([str(ROOT / 'tools' / 'bootstrap'), '--for', 'validate'], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    line = lines[0]
    assert line.startswith('bootstrap: Spack phase FAILED: Spack environment local not concretized: parts 0, 1, 2, '
                           '3, 4 failed; ==> Error: Timed out waiting for a write lock')
    assert f'(log {deps}/spack/envs/local.parts/4/concretize.log). Retry: ' in line
    assert f'Retry: tools/spack-env --site {env["NETREGRESS_SITE"]} concretize vcluster, then make validate' in line
    assert line.endswith('or run without Spack: NETREGRESS_SPACK=none make validate')


def test_make_validate_stops_on_a_failed_set_up_before_measuring(failing_spack_phase, tmp_path):
    """`make validate` is `tools/validate --bootstrap`: the failed Spack phase's one line, then the times, exit 1,
    nothing measured (no run directory at all)."""
    out = subprocess.run(['make', '-n', '-C', str(ROOT), 'validate'], capture_output=True, text=True)
    assert [line for line in out.stdout.splitlines() if not line.startswith('make')] == ['tools/validate --bootstrap']
    env, deps = failing_spack_phase
    prefix = tmp_path / 'run'
    out = subprocess.run([str(ROOT / 'tools' / 'validate'), '--bootstrap', '--prefix', str(prefix)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    assert [line for line in out.stderr.splitlines() if 'FAILED' in line] == out.stderr.strip().splitlines()[-1:]
    assert out.stderr.strip().startswith('bootstrap: Spack phase FAILED: Spack environment local not concretized')
    times = TIMES.match(out.stdout.strip().splitlines()[-1])
    assert times and times.group(2, 3) == ('0', '0') and times.group(1) == times.group(4)
    assert not prefix.exists()


def run_validate(tmp_path: Path, **extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    """tools/validate --system local with a stand-in Spack (present, nothing concretized) and a stand-in ReFrame
    that records it ran; the marker it leaves."""
    deps = tmp_path / 'deps'
    stand_in(deps / 'spack' / 'bin' / 'spack', '#!/bin/sh\nexit 0\n')
    marker = tmp_path / 'reframe-ran'
    reframe = stand_in(tmp_path / 'reframe', f'#!/bin/sh\nsleep 1\necho ran >> {marker}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(('NETREGRESS_', 'RFM_'))}
    env.update(NETREGRESS_DEPS=str(deps), NETREGRESS_PYTHON=sys.executable, NETREGRESS_REFRAME=reframe, **extra)
    out = subprocess.run([str(ROOT / 'tools' / 'validate'), '--system', 'local', '--prefix', str(tmp_path / 'run')],
                         capture_output=True, text=True, env=env, timeout=300)
    return out, marker


def test_spack_present_but_unusable_stops_validate_before_measuring(tmp_path):
    out, marker = run_validate(tmp_path)
    assert out.returncode == 1 and not marker.exists(), out.stdout + out.stderr
    failed = [line for line in out.stdout.splitlines() if 'FAILED' in line]
    assert len(failed) == 1 and failed[0].startswith('== validation FAILED before measuring: Spack present (')
    assert 'not concretized on this machine: run tools/spack-env concretize local' in failed[0]
    assert failed[0].endswith('NETREGRESS_SPACK=none make validate')
    times = TIMES.match(out.stdout.strip().splitlines()[-1])
    assert times and times.group(2) == '0', out.stdout


def test_without_spack_by_request_validate_measures_and_lists_what_it_skips(tmp_path, monkeypatch):
    """NETREGRESS_SPACK=none with a Spack set up: no Spack for the run, each check that needs it a declared skip,
    listed before the run; the run measures (the stand-in ReFrame ran) and ends with its times."""
    out, marker = run_validate(tmp_path, NETREGRESS_SPACK='none')
    assert marker.exists(), out.stdout + out.stderr
    assert '== Spack on local: NO Spack: NETREGRESS_SPACK=none: this run is without Spack, as asked. Skipped for ' \
           'that (where selected): osu (every case: ' in out.stdout
    times = TIMES.match(out.stdout.strip().splitlines()[-1])
    assert times, out.stdout
    setup, measurement, post, total = map(int, times.groups())
    assert measurement >= 1 and setup + measurement + post == total
    monkeypatch.setenv('NETREGRESS_DEPS', str(tmp_path / 'deps'))
    monkeypatch.setenv('NETREGRESS_SPACK', 'none')
    assert spack_build.spack_exe() is None
    assert spack_build.not_built_reason(type('Env', (), {'extras': {}})()).startswith('NETREGRESS_SPACK=none')
    assert spack_build.status('local')[1]
