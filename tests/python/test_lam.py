"""LAM/MPI 7.1 as the `lam7` environment: settings, interconnect rows, transport report, the user switch, lamrun."""
import os
import subprocess
import time
from types import SimpleNamespace

import pytest

from netregress.measure import launch, provenance, site, spack_build

# the vcluster system is a site (config/sites/vcluster): loaded through the layer, as a centre's is
pytestmark = pytest.mark.usefixtures('vcluster_site')


def lam_env(system):
    """The lam7 environment of ``system`` and the launcher its partitions start it with (netregress.site)."""
    found = [e for e in site.environments(system) if e['name'] == 'lam7']
    assert len(found) == 1, f'one lam7 environment on {system}'
    part = site.partitions(system)[0]
    return found[0], ((part.get('extras') or {}).get('launch') or {}).get('lam7') or found[0]['extras']['launch']


@pytest.mark.parametrize('system', ['local', 'vcluster'])
def test_lam7_environment(repo_root, system):
    env, launcher = lam_env(system)
    extras = env['extras']
    assert env['cc'] == 'mpicc.lam' and extras['mpicc'] == 'mpicc.lam'
    assert extras['mpi_family'] == 'lam'
    assert extras['run_as'] and extras['run_as'] != 'root'
    assert extras['spack_mpi'] == 'none'
    assert 'mpi' in env['features']
    assert launcher[0].endswith('tools/lamrun') and os.access(launcher[0], os.X_OK)
    assert launcher[-2:] == ['-np', '{ntasks}']
    # locally lamrun switches user itself; under Slurm the job is submitted as the user (sbatch --uid)
    assert ('--user' in launcher) == (system == 'local')


def test_lam_paths_force_the_rpi(table):
    shm = table.path('shm', 'lam', {})
    assert shm.env == {'LAM_MPI_SSI_rpi': 'usysv'}
    assert shm.report == {'LAM_MPI_SSI_rpi_verbose': '1'}
    for ic, ctx in (('tcp', {'iface': 'lo', 'subnet': '127.0.0.0/8'}),
                    ('fast', {'iface': 'eth0', 'subnet': '10.92.1.0/24'}),
                    ('gige', {'iface': 'eth0', 'subnet': '10.92.2.0/24'})):
        path = table.path(ic, 'lam', ctx)
        assert path.env == {'LAM_MPI_SSI_rpi': 'tcp'}, ic
        assert path.launcher == ['--subnet', ctx['subnet']], ic
        assert provenance.check_transports({'lam:tcp'}, path.transport) == []
        assert provenance.check_transports({'lam:usysv'}, path.transport), f'{ic}: shared memory must fail'
    assert provenance.check_transports({'lam:tcp'}, shm.transport), 'shm: tcp must fail'
    assert provenance.check_transports({'lam:usysv'}, shm.transport) == []


# What two ranks print with LAM_MPI_SSI_rpi_verbose=1 (measured here; the usysv module lists the tcp module's
# parameters too, because it uses tcp between nodes: they name no choice).
USYSV_OUTPUT = """\
n0<31882> ssi:rpi:usysv: module initializing
n0<31882> ssi:rpi:usysv:pollyield: 1
n0<31882> ssi:rpi:usysv:short: 8192 bytes
n0<31882> ssi:rpi:tcp:short: 65536 bytes
n0<31882> ssi:rpi:tcp:sockbuf: 65536 bytes
n0<31883> ssi:rpi:usysv: module initializing
n0<31883> ssi:rpi:tcp:sockbuf: 65536 bytes
vm(Master-node) <--> vm(Secondary-node)
"""
TCP_OUTPUT = """\
n1<2084> ssi:rpi:tcp: module initializing
n1<2084> ssi:rpi:tcp:short: 65536 bytes
n0<2083> ssi:rpi:tcp: module initializing
"""


def test_lam_transport_report():
    assert provenance.transports(USYSV_OUTPUT) == {'lam:usysv'}
    assert provenance.transports(TCP_OUTPUT) == {'lam:tcp'}
    assert provenance.transports('lamrun: node n0 fast1 10.92.1.11\n') == set()


def fake_check(tmp_path, scheduler, run_as='nobody'):
    job = SimpleNamespace(options=[])
    return SimpleNamespace(
        current_environ=SimpleNamespace(name='lam7', extras={'run_as': run_as} if run_as else {}),
        current_partition=SimpleNamespace(scheduler=SimpleNamespace(registered_name=scheduler)),
        job=job, stagedir=str(tmp_path))


@pytest.mark.parametrize('scheduler,uid_option', [('slurm', True), ('squeue', True), ('local', False)])
def test_run_unprivileged_as_root(tmp_path, monkeypatch, scheduler, uid_option):
    chowned = []
    monkeypatch.setattr(launch.os, 'geteuid', lambda: 0)
    monkeypatch.setattr(launch.os, 'chown', lambda path, uid, gid: chowned.append((path, uid, gid)))
    check = fake_check(tmp_path, scheduler)
    launch.run_unprivileged(check)
    assert (check.job.options == ['--uid=nobody']) == uid_option
    assert [c[0] for c in chowned] == [str(tmp_path)]


def test_run_unprivileged_needs_root_and_run_as(tmp_path, monkeypatch):
    monkeypatch.setattr(launch.os, 'chown', lambda *a: pytest.fail('nothing to hand over'))
    monkeypatch.setattr(launch.os, 'geteuid', lambda: 1000)
    check = fake_check(tmp_path, 'slurm')
    launch.run_unprivileged(check)              # an ordinary user runs LAM as itself
    assert check.job.options == []
    monkeypatch.setattr(launch.os, 'geteuid', lambda: 0)
    check = fake_check(tmp_path, 'slurm', run_as=None)
    launch.run_unprivileged(check)              # other MPI builds are untouched
    assert check.job.options == []


def test_run_unprivileged_unknown_user(tmp_path, monkeypatch):
    monkeypatch.setattr(launch.os, 'geteuid', lambda: 0)
    with pytest.raises(ValueError, match="user 'no-such-user-nr'.*tools/bootstrap"):
        launch.run_unprivileged(fake_check(tmp_path, 'slurm', run_as='no-such-user-nr'))


def test_spack_is_left_out_for_lam():
    lam = SimpleNamespace(name='lam7', extras={'spack_mpi': 'none'})
    assert 'Spack has no package' in spack_build.no_spack_mpi_reason(lam)
    assert spack_build.no_spack_mpi_reason(SimpleNamespace(name='mpich5', extras={})) is None


@pytest.mark.parametrize('args,code,message', [
    (['-np', 'x', 'prog'], 2, "-np needs a positive number of ranks, got 'x'"),
    (['-np', '0', 'prog'], 2, '-np needs a positive number'),
    (['--subnet', '10.1.2.0', '-np', '2', 'prog'], 2, '--subnet takes an IPv4 CIDR'),
    (['-np', '2'], 2, 'no program to run'),
    (['--bogus', '-np', '2', 'prog'], 2, "unknown option '--bogus'"),
])
def test_lamrun_usage_errors(repo_root, args, code, message):
    proc = subprocess.run([str(repo_root / 'tools' / 'lamrun'), *args], capture_output=True, text=True, timeout=30)
    assert proc.returncode == code, proc.stderr
    assert message in proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason='the root case')
def test_lamrun_refuses_root_without_user(repo_root):
    if subprocess.run(['sh', '-c', 'command -v lamboot'], capture_output=True).returncode:
        pytest.skip('LAM/MPI not installed')
    proc = subprocess.run([str(repo_root / 'tools' / 'lamrun'), '-np', '2', 'true'], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 1
    assert 'refuses to run as root' in proc.stderr


# What a LAM 7.1.4 rank did in MPI_Init (strace): writev() to its lamd with a second, zero-length iovec entry
# whose base was stack leftovers (0x2020202020202020 seen); Linux refuses it with EFAULT whatever the length.
STALE_IOVEC_PROGRAM = r'''
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
int main(void) {
    int p[2];
    char data[8] = "message", back[16] = {0};
    if (pipe(p)) return 2;
    struct iovec out[2] = {{data, 8}, {(void *)0x2020202020202020, 0}};
    if (writev(p[1], out, 2) != 8) { printf("writev: %s\n", strerror(errno)); return 1; }
    struct iovec in[2] = {{back, 8}, {(void *)0x2020202020202020, 0}};
    if (readv(p[0], in, 2) != 8) { printf("readv: %s\n", strerror(errno)); return 1; }
    printf("%s\n", back);
    return 0;
}
'''


def test_the_lam_filter_passes_what_linux_refused(repo_root, tmp_path):
    """src/mpi/lam_iovec.c (tools/lamrun preloads it into LAM's ranks) turns LAM's failing writev into one that
    works: without it the call fails with EFAULT, with it the data arrives."""
    (tmp_path / 'stale.c').write_text(STALE_IOVEC_PROGRAM)
    subprocess.run(['cc', '-O2', str(tmp_path / 'stale.c'), '-o', str(tmp_path / 'stale')], check=True)
    subprocess.run(['cc', '-O2', '-shared', '-fPIC', '-D_GNU_SOURCE', str(repo_root / 'src' / 'mpi' / 'lam_iovec.c'),
                    '-o', str(tmp_path / 'filter.so'), '-ldl'], check=True)
    bare = subprocess.run([str(tmp_path / 'stale')], capture_output=True, text=True, timeout=30)
    assert bare.returncode == 1 and 'writev: Bad address' in bare.stdout
    filtered = subprocess.run([str(tmp_path / 'stale')], capture_output=True, text=True, timeout=30,
                              env={**os.environ, 'LD_PRELOAD': str(tmp_path / 'filter.so')})
    assert filtered.returncode == 0 and filtered.stdout == 'message\n', filtered.stdout


def fake_lam(tmp_path, repo_root, mpirun_body: str) -> tuple[dict, list[str]]:
    """LAM's tools as stand-ins on PATH (`id` says an ordinary user, as under Slurm's --uid; tkill logs each call
    to TMPDIR/stops) and a one-node lamrun command line: (environment, argv)."""
    fakes = {
        'id': 'echo 1000',
        'lamboot': 'exit 0', 'lamhalt': 'exit 0', 'lamwipe': 'exit 0', 'tkill': 'echo tkill >>"$TMPDIR/stops"',
        'lamnodes': 'printf "n0\\tlocalhost:1:origin,this_node\\n"',
        'mpirun.lam': mpirun_body,
    }
    for name, body in fakes.items():
        (tmp_path / name).write_text(f'#!/bin/sh\n{body}\n')
        (tmp_path / name).chmod(0o755)
    env = {**os.environ, 'PATH': f'{tmp_path}:{os.environ["PATH"]}', 'NETREGRESS_LAM_PRELOAD': '/dev/null',
           'TMPDIR': str(tmp_path)}
    env.pop('SLURM_JOB_ID', None)
    return env, [str(repo_root / 'tools' / 'lamrun'), '-np', '2', 'true']


def test_lamrun_fails_when_mpirun_could_not_start_a_rank(repo_root, tmp_path):
    """mpirun.lam prints 'cannot start PROG on nN' and still exits 0 (seen on the vcluster): lamrun fails the run."""
    env, argv = fake_lam(tmp_path, repo_root, 'echo "mpirun: cannot start sh on n1: invalid address tag" >&2; exit 0')
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 1, proc.stderr
    assert 'could not start the program on every node' in proc.stderr
    (tmp_path / 'mpirun.lam').write_text('#!/bin/sh\necho ran\n')         # the same run when every rank started
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0 and proc.stdout == 'ran\n', proc.stderr
    # a one-node universe is taken down by LAM's tkill (lamhalt would pause 1 s first), once per run
    assert (tmp_path / 'stops').read_text() == 'tkill\ntkill\n'


def test_lamrun_stops_a_rank_that_failed_in_mpi_init(repo_root, tmp_path):
    """LAM 7.1.4's MPI_Init failure leaves the other ranks waiting forever: lamrun sees it in the output, stops the
    run at once and fails."""
    env, argv = fake_lam(tmp_path, repo_root,
                         'echo "The selected RPI failed to initialize during MPI_INIT." >&2; exec sleep 60')
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 1 and 'a rank failed in MPI_Init' in proc.stderr, proc.stderr
    assert time.monotonic() - t0 < 10, 'the hung run was not stopped'


def test_a_private_directory_on_the_way_to_the_kernels_is_named():
    """LAM's jobs run as another user: a directory it may not search (a private NETREGRESS_DEPS parent) is found
    before the job runs, not reported by the job as 'Permission denied' on every rank."""
    import pwd
    import shutil
    import tempfile
    from pathlib import Path
    user = pwd.getpwnam('nobody')
    top = Path(tempfile.mkdtemp(dir='/var/tmp'))       # pytest's own base directory is private
    try:
        kernels = top / 'state' / 'deps' / 'kernels' / 'lam7' / 'bin'
        kernels.mkdir(parents=True)
        for d in [top, *[top / p for p in kernels.relative_to(top).parents], kernels]:
            d.chmod(0o755)
        assert launch.unreachable_dir(str(kernels), user) is None
        (top / 'state').chmod(0o700)
        assert launch.unreachable_dir(str(kernels), user) == str(top / 'state')
    finally:
        shutil.rmtree(top)
