"""ci/post-maintenance as an HPC centre runs it, not as our root-owned virtual cluster does.

The centre: a fat tree of 10 leaf switches of 40 nodes (Slurm partition ``compute``, the example site's ``ib``
partition), a maintenance reservation of all 400 in which Slurm has drained one node (with a reason) and from which
the admin excludes another (``--exclude``); the site directory a copy of config/sites/example outside the checkout
(``--site``), its MPI stacks Lmod modules (``modules_system: lmod``, as docs/site.md step 2 says); everything a run
writes under ``--prefix``, the state directory too (no NETREGRESS_STATE). Slurm and Lmod are the stand-ins of
tests/python/standins.py, ReFrame's run the stand-in there or the real ReFrame's ``--dry-run``.

Then the same as an ordinary user, ``nobody`` when the test runs as root (setpriv), else the user running it, from a
read-only copy of the checkout, with the site readable but not writable (the centre's) and HOME and the prefix of
that user's own. Nothing may be written into the checkout, the site or HOME; everything the run wrote is under the
prefix. Those tests need a venv that user may run (NETREGRESS_DEPS): one whose interpreter lives in root's private
home is not, and they are skipped saying so.
"""
from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from netregress import paths
from netregress.measure import runplan, slurm
from netregress_postrun import runreport
from reports_fixture import T0, case, report
import standins

ROOT = Path(__file__).resolve().parents[2]

NODES = [f'cn{i:04d}' for i in range(1, 401)]
LEAVES = {f'leaf{j:02d}': NODES[40 * (j - 1):40 * j] for j in range(1, 11)}
DRAINED, EXCLUDED, REASON = 'cn0123', 'cn0321', 'bad cable, ticket 4711'
RESERVATION = 'maint_2026_11'
CLUSTER = standins.Cluster(partitions={'compute': NODES, 'eth': [f'en{i:02d}' for i in range(1, 17)]},
                           drained={DRAINED: REASON}, reservations={RESERVATION: NODES}, leaves=LEAVES)
IN_PLAN = [n for n in NODES if n not in (DRAINED, EXCLUDED)]
SCOPE = ['--site', '{site}', '--system', 'site-example', '--reservation', RESERVATION, '--exclude', EXCLUDED,
         '--prefix', '{prefix}']


# -- the centre's directories, and who runs the suite there ----------------------------------------------------------

def centre_user() -> pwd.struct_passwd | None:
    """Whom the suite runs as: ``nobody`` when this is root, else None (the user running the test)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam('nobody')
    except KeyError:
        pytest.skip('running as root and there is no user nobody to run the suite as')


def as_user(argv: list[str], user: pwd.struct_passwd | None) -> list[str]:
    if user is None:
        return argv
    if not shutil.which('setpriv'):
        pytest.skip('running as root and setpriv (util-linux) is not installed to drop to nobody')
    return ['setpriv', f'--reuid={user.pw_uid}', f'--regid={user.pw_gid}', '--clear-groups', *argv]


def python_of_the_tools() -> str:
    """The Python the front end runs (tools/lib/common.sh): the venv's of NETREGRESS_DEPS, else this one."""
    venv = paths.deps_dir() / 'venv' / 'bin' / 'python'
    return str(venv) if os.access(venv, os.X_OK) else sys.executable


def copy_of_checkout(dest: Path) -> Path:
    """What a run needs of this checkout (the front ends, the library, the configuration), as a shared install
    holds it: readable by everyone, writable by no one."""
    for part in ('ci', 'config', 'reframe_tests', 'tools'):
        shutil.copytree(ROOT / part, dest / part, symlinks=True,
                        ignore=shutil.ignore_patterns('__pycache__', '*.pyc', '.*_cache'))
    shutil.copy2(ROOT / 'pyproject.toml', dest / 'pyproject.toml')
    for path in [dest, *dest.rglob('*')]:
        if not path.is_symlink():
            mode = path.stat().st_mode
            path.chmod((mode | 0o444 | (0o111 if path.is_dir() or mode & 0o100 else 0)) & ~0o222)
    return dest


def listing(top: Path) -> dict[str, tuple]:
    """Every entry under ``top`` with its type, size, mode and modification time."""
    out = {}
    for path in [top, *top.rglob('*')]:
        st = path.lstat()
        out[str(path.relative_to(top))] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mode, st.st_mtime_ns)
    return out


def files_under(top: Path) -> set[str]:
    return {str(p.relative_to(top)) for p in top.rglob('*') if p.is_file()}


@pytest.fixture(scope='module')
def centre() -> Iterator[dict]:
    """The centre's directories in one temporary directory everyone may enter: ``site`` (the example site with
    its MPI stacks from Lmod, the centre's own), ``bin`` (the Slurm and Lmod stand-ins), ``checkout`` (a read-only
    copy), and per test those of the user (:func:`user_dirs`)."""
    top = Path(tempfile.mkdtemp(prefix='nr-centre-'))
    top.chmod(0o755)
    try:
        shutil.copytree(ROOT / 'config' / 'sites' / 'example', top / 'site')
        settings = (top / 'site' / 'settings.py').read_text()
        assert "'modules_system': 'nomod'," in settings, 'the example site names its modules system otherwise now'
        (top / 'site' / 'settings.py').write_text(settings.replace("'modules_system': 'nomod',",
                                                                   "'modules_system': 'lmod',"))
        CLUSTER.install(top / 'bin')
        standins.install_lmod(top / 'bin')
        copy_of_checkout(top / 'checkout')
        yield {'top': top, 'site': top / 'site', 'bin': top / 'bin', 'checkout': top / 'checkout'}
    finally:
        for path in [top, *top.rglob('*')]:
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        shutil.rmtree(top)


@pytest.fixture
def user_dirs(centre, request) -> dict:
    """HOME, TMPDIR, the prefix and a working directory of one test, owned by the user the suite runs as."""
    user = centre_user()
    base = centre['top'] / request.node.name.replace('[', '-').replace(']', '')
    dirs = {'home': base / 'home', 'tmp': base / 'tmp', 'prefix': base / 'prefix', 'work': base / 'work'}
    for path in (base, *dirs.values()):
        path.mkdir()
        if user is not None:
            os.chown(path, user.pw_uid, user.pw_gid)
    return dirs


def centre_env(centre, dirs, **extra) -> dict[str, str]:
    """The user's environment: the stand-ins first on PATH, the site's Lmod, HOME and TMPDIR of their own, no
    state, prefix or site of ours."""
    env = {k: v for k, v in os.environ.items()
           if k not in ('NETREGRESS_STATE', 'NETREGRESS_SITE', 'RFM_PREFIX', 'PYTHONPATH', 'XDG_STATE_HOME')}
    env.update(PATH=f'{centre["bin"]}:{os.environ["PATH"]}', HOME=str(dirs['home']), TMPDIR=str(dirs['tmp']),
               LMOD_CMD=str(centre['bin'] / 'lmod'), NETREGRESS_DEPS=str(paths.deps_dir()),
               NETREGRESS_PYTHON=sys.executable)
    return {**env, **extra}


def front_end(checkout: Path, centre, dirs, *args: str, user=None, **extra) -> subprocess.CompletedProcess:
    argv = [str(checkout / 'ci' / 'post-maintenance'),
            *(a.format(site=centre['site'], prefix=dirs['prefix']) for a in SCOPE), *args]
    return subprocess.run(as_user(argv, user), capture_output=True, text=True, timeout=120, cwd=dirs['work'],
                          env=centre_env(centre, dirs, **extra))


# -- 1. the plan of a 400-node reservation -------------------------------------------------------------------------

def expected_minutes(nodes: int, rounds: int) -> dict[str, float]:
    """{fit: minutes} of one link-test job by every fit of config/linkcost.yaml: start-up, per node, and per round
    its streaming time plus coordination (the model netregress.measure.linkplan.CostModel documents)."""
    doc = yaml.safe_load((ROOT / 'config' / 'linkcost.yaml').read_text())
    return {m['name']: (m['start_s'] + m['per_node_s'] * nodes
                        + rounds * (runplan.ROUND_TIME_S + m['round_s'] + m['round_node_s'] * nodes)) / 60
            for m in doc['models']}


@pytest.mark.parametrize('links', ['full', 'sample', 'topology'])
def test_the_plan_of_a_400_node_reservation_leaves_out_the_drained_and_the_excluded_node(centre, user_dirs, links):
    res = front_end(ROOT, centre, user_dirs, '--links', links, '--plan')
    assert res.returncode == 0, res.stdout + res.stderr
    # the drained node named with its reason and left out, as the run leaves it out
    assert (f'post-maintenance: {DRAINED} (ib): drained (drained; reason: {REASON}): left out '
            f'(--strict fails the run for it)') in res.stderr.splitlines(), res.stderr
    (ib,) = [ln for ln in res.stdout.splitlines() if ln.startswith('link test site-example:ib ib: ')]
    assert 'link test site-example:eth eth: 0 node in scope, no link to test' in res.stdout
    m = re.match(rf'link test site-example:ib ib: {links}: (\d+) nodes, (\d+) rounds, (\d+) directed streams '
                 r'\((\d+) links\), 3 job steps, ', ib)
    assert m, ib
    nodes, rounds, streams, links_measured = map(int, m.groups())
    n = len(IN_PLAN)
    assert nodes == n == 398
    if links == 'full':              # every direction: the N-1 shifts, N streams each
        assert (rounds, streams, links_measured) == (n - 1, n * (n - 1), n * (n - 1) // 2)
    elif links == 'topology':        # shifts inside the largest leaf (40 nodes), then the 10 leaves against each other
        assert rounds == (40 - 1) + (len(LEAVES) - 1), ib
        assert ib.endswith(f'{len(LEAVES)} leaf switches: 39 rounds inside them, 9 across')
    else:                            # every link within 30 runs: ceil(199 link sets / 30) sets, a shift and its opposite
        sets = -(-(n // 2) // runplan.SAMPLE_COVER_RUNS)
        assert rounds in (2 * sets - 1, 2 * sets) and streams == n * rounds, ib
        assert f'every link within {-(-(n // 2) // sets)} runs in a row' in ib
    # the time printed is the cost model's for these nodes and rounds, fit by fit
    printed = {fit: float(mins) for mins, fit in re.findall(r'about ([\d.]+) min by the (\S+) fit', ib)}
    expected = expected_minutes(nodes, rounds)
    assert printed.keys() == expected.keys(), ib
    for fit, minutes in expected.items():
        assert printed[fit] == pytest.approx(minutes, abs=0.051), (fit, ib)     # printed to 0.1 min
    # nothing ran and nothing was written, the sample plan's rotation state included
    assert list(user_dirs['home'].iterdir()) == [] and list(user_dirs['prefix'].iterdir()) == []


# -- 2. as an ordinary user, from a checkout that user cannot write -------------------------------------------------

@pytest.fixture
def ordinary_user(centre, user_dirs):
    """Whom the suite runs as, after checking that user can run the tools' Python with its packages and reach the
    centre's directories; a skip naming what is missing otherwise."""
    user = centre_user()
    py = python_of_the_tools()
    probe = subprocess.run(as_user(['sh', '-c', '"$0" -c "import reframe, numpy, yaml" && test -r "$1" && '
                                    'test -w "$2" && ! test -w "$3"',
                                    py, str(centre['site'] / 'settings.py'), str(user_dirs['prefix']),
                                    str(centre['checkout'] / 'ci')], user),
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        who = user.pw_name if user else 'this user'
        pytest.skip(f'{who} cannot run {py} with ReFrame, NumPy and PyYAML, or cannot read the site, or can write '
                    f'the checkout copy ({probe.stderr.strip() or "exit " + str(probe.returncode)}): point '
                    f'NETREGRESS_DEPS at a venv {who} may run')
    return user


def link_report(path: Path) -> Path:
    """A maintenance run's report: the link test of the ib fabric passed on every node of the plan."""
    report(path, T0, [case('link_allpairs %interconnect=ib', 'ompi4', part='ib', system='site-example',
                           nodes=tuple(IN_PLAN), ic='ib', ref_test='linkmap.links',
                           perf={'min_link_mbps': (95000.0, 95000.0, 'Mbit/s')})])
    path.chmod(0o644)
    return path


def test_an_ordinary_user_runs_it_from_a_read_only_checkout_and_writes_only_under_the_prefix(
        centre, user_dirs, ordinary_user):
    checkout, prefix = centre['checkout'], user_dirs['prefix']
    before = {what: listing(centre[what]) for what in ('checkout', 'site')}
    # the run: ReFrame's stand-in writes the report of a passing link test and stores it as ReFrame would
    stand_in = standins.install_reframe(user_dirs['work'] / 'bin')
    res = front_end(checkout, centre, user_dirs, user=ordinary_user, REFRAME=str(stand_in),
                    FAKE_REPORT=str(link_report(user_dirs['work'] / 'now.json')),
                    FAKE_ARGS=str(prefix / 'reframe-args'), FAKE_PYTHON=python_of_the_tools())
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines[-2] == f'RESULT: PASS (1/1 test cases passed, 0 failed, 0 skipped; 1 node(s) left out: {DRAINED})'
    out = Path(lines[-1].split()[1]).parent
    assert out.parent == prefix / 'post-maintenance', lines[-1]
    # compared with the runs before, from the results database and the baselines of the prefix's state directory
    assert '== what changed since the last passing run (before the maintenance): 0 of 1 figures moved' in res.stdout
    assert "against this host's baseline: 0 of 0 figures moved" in res.stdout
    assert f'{prefix}/state/baselines/site-example/' in res.stdout, res.stdout
    args = shlex.split((prefix / 'reframe-args').read_text())
    assert ['-J', f'reservation={RESERVATION}', '-J', f'exclude={slurm.abbrev([DRAINED, EXCLUDED])}'] == \
        args[args.index('-J'):args.index('-J') + 4]
    assert f'-C {checkout}/config/settings.py -C {centre["site"]}/settings.py' in ' '.join(args)
    # nothing written into the checkout, the site, HOME or TMPDIR (ReFrame's start-up logs); the run's files, its
    # state included, under the prefix
    assert {what: listing(centre[what]) for what in ('checkout', 'site')} == before
    assert files_under(user_dirs['home']) == set() and files_under(user_dirs['tmp']) == set()
    written = files_under(prefix)
    stamp = str(out.relative_to(prefix))
    assert {f'{stamp}/report-maintenance.json', f'{stamp}/reframe.log', f'{stamp}/report/index.html',
            'state/reframe/results.db'} <= written, sorted(written)
    if ordinary_user is not None:
        assert {p.stat().st_uid for p in prefix.rglob('*')} == {ordinary_user.pw_uid}


# -- 3. as far as ReFrame goes without submitting: its --dry-run of the run's command line --------------------------

def test_reframe_dry_run_of_the_link_test_as_an_ordinary_user(centre, user_dirs, ordinary_user):
    """The command line the front end prints (``--dry-run``), run by the real ReFrame with ``--dry-run`` instead
    of ``-r``: the checks load with the centre's site, the link test asks Slurm (the stand-ins) for its nodes and
    writes its job script, loading the site's MPI module, all under the prefix."""
    checkout, prefix = centre['checkout'], user_dirs['prefix']
    before = listing(checkout)
    dry = front_end(checkout, centre, user_dirs, '--tags', 'links', '--dry-run', user=ordinary_user)
    assert dry.returncode == 0, dry.stderr
    assert files_under(prefix) == set()                 # the front end's dry run writes nothing
    cmd = shlex.split(dry.stdout)
    report_file = Path(cmd[cmd.index('--report-file') + 1])
    assert report_file.parent.parent == prefix / 'post-maintenance'
    cmd[cmd.index('-r')] = '--dry-run'
    # the environment the front end gives ReFrame (tools/lib/common.sh, postmaint.main)
    (prefix / 'tmp').mkdir()
    if ordinary_user is not None:
        os.chown(prefix / 'tmp', ordinary_user.pw_uid, ordinary_user.pw_gid)
    env = centre_env(centre, user_dirs, RFM_PREFIX=str(prefix), NETREGRESS_SITE=str(centre['site']),
                     PYTHONPATH=str(checkout / 'reframe_tests'), TMPDIR=str(prefix / 'tmp'))
    res = subprocess.run(as_user(cmd, ordinary_user), capture_output=True, text=True, timeout=300,
                         cwd=user_dirs['work'], env=env)
    assert f"stage directory:   '{prefix}/stage'" in res.stdout, res.stdout[:2000] + res.stderr
    # every case set up, none failed: a dry run judges nothing (no references, no ports read, no link measured)
    cases = runreport.analyse(runreport.read(report_file))['final'].values()
    assert {tc['name'] for tc in cases} >= {'link_allpairs %interconnect=ib', 'node_loopback %interconnect=ib'}
    assert not [tc['name'] for tc in cases if tc['result'] == 'fail'], res.stdout[-3000:]
    assert res.returncode == 0, res.stdout[-3000:]
    scripts = [p for p in (prefix / 'stage' / 'site-example' / 'ib' / 'ompi4').glob('link_allpairs_*/rfm_job.sh')
               if '_retry' not in p.parent.name]
    assert len(scripts) == 1, res.stdout[-3000:]
    job = scripts[0].read_text()
    # every usable node of the reservation but the excluded one, by name: the drained one left out
    assert f'#SBATCH --nodes={len(IN_PLAN)}\n' in job
    (nodelist,) = re.findall(r'^#SBATCH --nodelist=(\S+)$', job, re.M)
    assert slurm.expand_hostlist(nodelist) == IN_PLAN and len(nodelist) < 100     # a host list, not 398 names
    assert f'#SBATCH --reservation={RESERVATION}\n' in job and '#SBATCH --partition=compute\n' in job
    assert '\nmodule load openmpi/4.1.6\n' in job                 # the site's MPI build, its Lmod module
    assert listing(checkout) == before and files_under(user_dirs['home']) == set()
    assert files_under(user_dirs['tmp']) == set()
