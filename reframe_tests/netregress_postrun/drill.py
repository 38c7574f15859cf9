"""The validator validated: inject one known fault at a time into the vcluster and check the suite catches it.

``make drill`` (``tools/drill``) brings the virtual cluster up if needed, runs a short selection of checks clean,
then for each fault: inject it, run the checks that should catch it, restore, and judge. A fault counts as caught
when at least one test case failed (or, for a crashed node, the node check failed) and the failure names the right
node, link, path or reference. It prints a table and exits non-zero unless the clean run passed and every fault was
caught and named.

Faults (docs/validation.md, "The drill"):
  a. one gige link throttled to 70%        tbf on the host side of gige2's veth (traffic towards gige2)
  b. one fast node's CPU capped at half    cgroup v1 cpu quota over fast3's slurmd (job steps inherit it)
  c. a node crashed mid-run                kill -9 of every process in fast2's namespace while checks run
  d. an MPI forced onto another transport  MPICH 5 over UCX with UCX_TLS=all on fast (UCX still carries the
                                           payload over eth0: named by the netmod MPICH's debug summary reports)
  e. a reference deleted (site system)     committed references (NETREGRESS_REFERENCES) with one entry removed
  f. a corrupted payload                   a test build of nr-mpitest with the PMPI fault layer flipping a bit
  u. a slow switch uplink                  (a cluster with a switch tree, VC_GIGE_LEAVES >= 2) tools/vcluster
                                           shape-uplink gige-leaf2 500mbit; the link test's topology plan names it
  n. a slow node link                      (the same) shape-node of the gige fabric's last node; named as the node
  g. an MPI slowed by its own tuning file   Open MPI 4 given an MCA parameter file that cuts every TCP message into
                                           1 KiB fragments: the transport stays right, the stream falls
  h. an MPI latency regression of 2x       a test build of nr-mpitest whose PMPI layer busy-waits before every send,
                                           half the clean run's round trip (MPICH 5: Debian's MPICH 4 is a known
                                           fault over TCP, skipped there)

g and h run on the vcluster and on ``local`` (clean runs of their selection record the drill's baselines, as many
as a band from their spread needs: min_runs): each must fail naming the MPI build and the interconnect. The drill
keeps its own baseline (run/drill/state): it never adds to or reads this host's real baseline.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml

from netregress.judge import bandrules
from netregress import paths
from netregress.measure import site, slurm
from . import runreport

ROOT = paths.repo_root()
DRILL = paths.run_dir() / 'drill'
CGROUP = Path('/sys/fs/cgroup/cpu/netregress-drill')
#: Seconds one drill step's ReFrame run may take before it is stopped (its whole process group).
RUN_TIMEOUT_S = 900


#: How tools/vcluster builds the cluster: config/vcluster.env, then the file NETREGRESS_VCLUSTER_ENV names (a larger
#: cluster, a switch tree: docs/vcluster.md), as tools/vcluster reads them.
VC = {**site.read_env_file(paths.config_dir() / 'vcluster.env'),
      **(site.read_env_file(Path(os.environ['NETREGRESS_VCLUSTER_ENV']))
         if os.environ.get('NETREGRESS_VCLUSTER_ENV') else {})}
VCLUSTER = str(ROOT / 'tools' / 'vcluster')


def sh(*argv: str, check: bool = True, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    """Run a command to its end, even through Ctrl-C: a cluster half up or half down, or a fault half mended, is
    what an interrupted drill must never leave. The command has a session of its own (the terminal's interrupt
    does not reach it) and an interrupt is raised once it has finished (subprocess.run would SIGKILL it, cutting
    its own clean-up short: measured, vcluster up interrupted at 2 s left munged, mariadbd and 8 namespaces)."""
    deadline = time.monotonic() + timeout
    interrupted = False
    with subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True, **kw) as proc:
        while True:
            try:
                out, err = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
                break
            except KeyboardInterrupt:
                interrupted = True
                print(f'tools/drill: interrupted; letting {" ".join(argv[:2])} finish first', file=sys.stderr,
                      flush=True)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                raise
    if interrupted:
        raise KeyboardInterrupt
    if check and proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, list(argv), out, err)
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


@dataclass
class Fault:
    """One drill step: what to run, how to break and mend the cluster, and what the failure must name."""
    key: str
    title: str
    select: list[str]                       # reframe selection options
    expect: list[str]                       # every string must appear in one failure reason
    inject: Callable[[], object] = lambda: None     # what they return is not used
    restore: Callable[[], object] = lambda: None
    options: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    during: Callable[[], None] | None = None   # run in parallel with reframe (a crash mid-run)
    node_check: list[str] = field(default_factory=list)   # partitions whose nodes must be checked afterwards
    system: str = 'vcluster'


class Drill:
    def __init__(self, out: Path):
        self.out = out
        self.reframe = str(paths.deps_dir() / 'venv' / 'bin' / 'reframe')
        self.rows: list[tuple[str, str, str, str]] = []
        self.ok = True

    # -- running checks -------------------------------------------------------------------------------------
    def run_checks(self, name: str, fault: Fault) -> tuple[dict, str]:
        report = self.out / f'report-{name}.json'
        system = fault.system
        env = {**os.environ, 'NETREGRESS_STATE': str(DRILL / 'state'), 'TMPDIR': str(paths.run_dir() / 'tmp'),
               'OMPI_ALLOW_RUN_AS_ROOT': '1', 'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1', **fault.env}
        argv = [self.reframe, *site.reframe_args(), '-c', str(ROOT / 'reframe_tests'),
                '--system', system, '--exec-policy', 'serial', '--max-retries', '0',
                '--report-file', str(report), *fault.select, *fault.options, '-r',
                # each run's failed cases (a core, the job's files) stay with its log, not overwritten by the next
                '--stage', str(self.out / 'stage' / name)]
        with open(self.out / f'reframe-{name}.log', 'w') as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                    start_new_session=True)
            try:
                if fault.during:
                    fault.during()
                proc.wait(timeout=RUN_TIMEOUT_S)
            except BaseException:               # a timeout or Ctrl-C: ReFrame and its jobs' launchers go too
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                raise
        try:
            return runreport.read(report), str(report)
        except runreport.RunReportError as err:
            return {}, f'no report ({err})'

    def step(self, fault: Fault) -> None:
        print(f'== {fault.key}: {fault.title} ({fault.system})', flush=True)
        t0 = time.monotonic()
        try:
            fault.inject()
            report, _ = self.run_checks(f'{fault.key}-{fault.system}', fault)
        finally:
            fault.restore()
        res = runreport.analyse(report)
        failed = [tc for tc in res['final'].values() if tc.get('result') == 'fail']
        reasons = [runreport.failure_line(tc) for tc in failed]
        for part in fault.node_check:
            reasons += [f'node check: {p}' for p in slurm.node_problems([part], wait_s=45)]
        if fault.key.startswith('clean'):
            caught = bool(res['final']) and not reasons
            verdict = 'passed' if caught else 'FAILED'
            named = f'{len(res["final"])} test cases'
        else:
            naming = [r for r in reasons if all(e in r for e in fault.expect)]
            caught = bool(naming)
            verdict = 'caught' if caught else ('caught, NOT named' if reasons else 'MISSED')
            named = (naming or reasons or ['nothing'])[0]
        self.ok &= caught
        failed_names = sorted({runreport.case_name(tc).split(' @')[0] for tc in failed}) or ['-']
        self.rows.append((f'{fault.key}. {fault.title} ({fault.system})', f'{len(failed)}: {", ".join(failed_names)}',
                          named, f'{verdict} ({time.monotonic() - t0:.0f} s)'))
        print(f'   {verdict}: {named[:300]}', flush=True)

    def table(self) -> str:
        lines = ['| fault | failed test cases | first failure naming it | verdict |', '|---|---|---|---|']
        for fault, failed, named, verdict in self.rows:
            named = named.replace('|', '/')
            lines.append(f'| {fault} | {failed} | {named[:400]} | {verdict} |')
        return '\n'.join(lines)


# -- faults ---------------------------------------------------------------------------------------------------

def _slurmd_pid(node: str) -> int:
    return int((ROOT / VC['VC_STATE_DIR'] / 'pids' / f'slurmd-{node}.pid').read_text().split()[0])


def _cap_node_cpu(node: str, quota_us: int) -> None:
    CGROUP.mkdir(exist_ok=True)
    (CGROUP / 'cpu.cfs_period_us').write_text('100000')
    (CGROUP / 'cpu.cfs_quota_us').write_text(str(quota_us))
    (CGROUP / 'tasks').write_text(str(_slurmd_pid(node)))


def _uncap() -> None:
    if not CGROUP.exists():
        return
    for pid in (CGROUP / 'tasks').read_text().split():
        try:
            (CGROUP.parent / 'tasks').write_text(pid)
        except OSError:
            pass            # the process ended meanwhile
    for _ in range(20):
        try:
            CGROUP.rmdir()
            return
        except OSError:
            time.sleep(0.5)


def _crash_later(node: str, delay_s: float) -> Callable[[], None]:
    def crash():
        time.sleep(delay_s)
        pids = sh('ip', 'netns', 'pids', f'{VC["VC_NS_PREFIX"]}{node}', check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        print(f'   killed {len(pids)} processes of {node}', flush=True)
    return crash


def _restart_cluster() -> None:
    sh(str(ROOT / 'tools' / 'vcluster'), 'down', check=False, timeout=120)
    sh(str(ROOT / 'tools' / 'vcluster'), 'up', timeout=300)


def _site_references(clean_report: Path, missing: tuple[str, ...]) -> Path:
    """Committed-style references from the clean run (tools/refs write), one entry removed."""
    refs = DRILL / 'references'
    shutil.rmtree(refs, ignore_errors=True)
    refs.mkdir(parents=True)
    env = {**os.environ, 'PYTHONPATH': str(ROOT / 'reframe_tests')}
    sh(sys.executable, '-c', 'import sys; from netregress_postrun.refstool import main; sys.exit(main(sys.argv[1:]))',
       'write', '--dir', str(refs), '--system', 'vcluster', str(clean_report), env=env)
    path = refs / 'vcluster.yaml'
    doc = yaml.safe_load(path.read_text())
    node = doc['references']
    for key in missing[:-1]:
        node = node[key]
    del node[missing[-1]]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return refs


def _faulty_kernels(env: str, mpicc: str) -> Path:
    """Our kernels for ``env`` with nr-mpitest replaced by its test build carrying the PMPI fault layer."""
    build = paths.repo_root() / 'build' / f'drill-{env}'
    sh('cmake', '-S', str(ROOT), '-B', str(build), '-DCMAKE_BUILD_TYPE=Release', f'-DMPI_C_COMPILER={mpicc}')
    sh('cmake', '--build', str(build), '--target', 'nr-mpitest-faulty', timeout=600)
    real = paths.kernels_bin(env)
    fake = DRILL / 'kernels' / env / 'bin'
    shutil.rmtree(fake.parent, ignore_errors=True)
    fake.mkdir(parents=True)
    for exe in real.iterdir():
        (fake / exe.name).symlink_to(exe)
    (fake / 'nr-mpitest').unlink()
    shutil.copy(next(build.rglob('nr-mpitest-faulty')), fake / 'nr-mpitest')
    return DRILL / 'kernels'


def _vcluster_fault(kind: str, name: str, what: str) -> Callable[[], object]:
    """``tools/vcluster shape-node|shape-uplink NAME WHAT`` (both directions; ``clear`` restores the fabric's own)."""
    return lambda: sh(VCLUSTER, f'shape-{kind}', name, what)


def _leaves(fabric: str) -> int:
    return int(VC.get(f'VC_{fabric.upper()}_LEAVES') or 0)


#: Open MPI's own tuning file (MCA parameters) that the drill's fault g hands it: every TCP message in 1 KiB pieces.
SLOW_OMPI_TUNING = '''# netregress drill, fault g: a broken tuning file
btl_tcp_max_send_size = 1024
btl_tcp_rdma_pipeline_frag_size = 1024
btl_tcp_rdma_pipeline_send_length = 1024
btl_tcp_min_rdma_pipeline_size = 1024
'''

#: Per system: the interconnect faults g and h slow (a fabric between nodes; TCP over loopback on ``local``).
MPI_FAULT_PATH = {'vcluster': 'fast', 'local': 'tcp'}


def _tuning_file() -> Path:
    path = DRILL / 'openmpi-mca-params.conf'
    path.write_text(SLOW_OMPI_TUNING)
    return path


def _round_trip_us(report: Path, system: str, environ: str, interconnect: str) -> float:
    """The clean run's MPI round trip (mpi_latency rtt_us) of ``environ`` on ``interconnect``."""
    res = runreport.analyse(runreport.read(report))
    for tc in res['final'].values():
        if (tc.get('system'), tc.get('environ'), tc.get('interconnect')) == (system, environ, interconnect) \
                and str(tc.get('display_name', '')).startswith('mpi_latency'):
            for pv in runreport.perfvalues(tc):
                if pv.var == 'rtt_us' and pv.value:
                    return pv.value
    raise RuntimeError(f'{report}: no mpi_latency rtt_us of {environ} on {system}:{interconnect} '
                       f'(the clean run of fault h)')


def mpi_faults(system: str, clean_report: Path, kern_holder: dict) -> list[Fault]:
    """Faults g and h on ``system``: an MPI stack slowed on its right transport, named with its interconnect."""
    ic = MPI_FAULT_PATH[system]
    stream = "mode == 'stream' and io == 'blocking'"
    g = Fault('g', 'Open MPI 4 slowed by its own tuning file (every TCP message in 1 KiB fragments)',
              ['-n', '^mpi_throughput', '-E', f"interconnect == '{ic}' and {stream}", '-p', '^openmpi4$'],
              ['openmpi4', f'interconnect={ic}'], system=system,
              options=['-S', f'extra_env_vars=OMPI_MCA_mca_base_param_files:{DRILL / "openmpi-mca-params.conf"}'],
              inject=_tuning_file)
    h = Fault('h', 'MPICH 5 latency regression of 2x (a PMPI layer busy-waits half a round trip before each send)',
              ['-n', '^mpi_latency', '-E', f"interconnect == '{ic}'", '-p', '^mpich5$'],
              ['mpich5', f'interconnect={ic}'], system=system,
              env={'NETREGRESS_KERNELS': str(DRILL / 'kernels' / '{env}' / 'bin')})

    def slow_sends():
        # each round trip is two sends: half the clean round trip before each doubles it
        delay = _round_trip_us(clean_report, system, 'mpich5', ic) / 2
        h.options = ['-S', f'extra_env_vars=NR_FAULT_DELAY_US:{delay:.3f}']
        kern_holder.setdefault('mpich5', _faulty_kernels('mpich5', str(paths.deps_dir() / 'mpi' / 'mpich5' / 'bin' /
                                                                       'mpicc')))
    h.inject = slow_sends
    return [g, h]


def faults(clean_report: Path) -> list[Fault]:
    links_gige = ['-n', '^link_allpairs', '-E', "interconnect == 'gige'"]
    # the switch-tree faults (a cluster with VC_GIGE_LEAVES >= 2), measured with the topology plan on the shaped
    # fabric (the unshaped one's streams are the shared CPUs' at scale): the last node, the second leaf's uplink
    gige_nodes = int(VC.get('VC_GIGE_COUNT') or len(VC.get('VC_GIGE_NODES', '').split()) or 4)
    topology = ['-n', '^link_allpairs', '-E', "interconnect == 'gige'", '-S', 'link_allpairs.plan=topology']
    refs_holder: dict[str, Path] = {}
    kern_holder: dict[str, Path] = {}
    local_clean = clean_report.with_name('report-clean-local.json')
    return [
        Fault('a', 'gige link to gige2 throttled to 70% (tbf 700mbit)', links_gige, ['gige2'],
              inject=_vcluster_fault('node', 'gige2', '700mbit'), restore=_vcluster_fault('node', 'gige2', 'clear')),
        Fault('b', "fast3's CPU capped at half (cgroup cpu quota 50%)",
              ['-n', '^(link_allpairs|node_loopback)', '-E', "interconnect == 'fast'"], ['fast3'],
              inject=lambda: _cap_node_cpu('fast3', 50000), restore=_uncap),
        Fault('c', 'fast2 crashed mid-run (kill -9 of its namespace)',
              ['-n', '^link_allpairs|^mpi_latency', '-E', "interconnect == 'fast'", '-p', '^(gnu|openmpi4)$'],
              ['fast2'], during=_crash_later('fast2', 8), restore=_restart_cluster, node_check=['fast']),
        Fault('d', 'MPICH 5 moved onto UCX with every transport allowed (UCX_TLS=all) on fast',
              ['-n', '^mpi_latency', '-E', "interconnect == 'fast'", '-p', '^mpich5$'],
              ['MPI took another path', 'ucx-netmod'],
              options=['-S', 'extra_env_vars=MPIR_CVAR_CH4_NETMOD:ucx,UCX_TLS:all']),
        Fault('e', 'a reference deleted (committed references, as on a site system)',
              ['-n', '^tcp_throughput', '-E', "interconnect == 'gige' and mode == 'stream' and io == 'blocking'"],
              ['no reference for vcluster:gige gnu gige tcp.stream.blocking throughput_mbps'],
              inject=lambda: refs_holder.setdefault('dir', _site_references(
                  clean_report, ('gige', 'gnu', 'gige', 'tcp.stream.blocking', 'throughput_mbps'))),
              env={'NETREGRESS_REFERENCES': str(DRILL / 'references')}),
        Fault('f', 'a corrupted payload (one bit flipped per message by a PMPI layer)',
              ['-n', '^mpi_throughput', '-E', "interconnect == 'gige' and mode == 'stream' and io == 'blocking'",
               '-p', '^openmpi4$'], ['payload mismatch'],
              inject=lambda: kern_holder.setdefault('openmpi4', _faulty_kernels('openmpi4', 'mpicc.openmpi')),
              options=['-S', 'extra_env_vars=NR_FAULT_CORRUPT:1'],
              env={'NETREGRESS_KERNELS': str(DRILL / 'kernels' / '{env}' / 'bin')}),
        *([Fault('u', 'the uplink of leaf switch gige-leaf2 slowed to 500 Mbit/s (topology plan)', topology,
                 # one uplink or several, as the verdict can tell them apart on this tree: the leaf switch named
                 ['uplink', 'of leaf switch gige-leaf2'], inject=_vcluster_fault('uplink', 'gige-leaf2', '500mbit'),
                 restore=_vcluster_fault('uplink', 'gige-leaf2', 'clear')),
           Fault('n', f'gige{gige_nodes}\'s link slowed to 500 Mbit/s (topology plan)', topology,
                 [f'node gige{gige_nodes}'], inject=_vcluster_fault('node', f'gige{gige_nodes}', '500mbit'),
                 restore=_vcluster_fault('node', f'gige{gige_nodes}', 'clear'))] if _leaves('gige') >= 2 else []),
        *mpi_faults('vcluster', clean_report, kern_holder),
        *mpi_faults('local', local_clean, kern_holder),
    ]


CLEAN = Fault('clean', 'no fault: the drill selection on a healthy cluster',
              ['-n', r'^(link_allpairs|node_loopback|mpi_latency|tcp_throughput|mpi_throughput)\b', '-E',
               "interconnect in ('fast', 'gige') and locals().get('mode', 'stream') == 'stream' "
               "and locals().get('io', 'blocking') == 'blocking'", '-p', '^(gnu|openmpi4|mpich4|mpich5)$'], [])

def _clean_gh(system: str, key: str = 'clean') -> Fault:
    """A clean run of the selection of faults g and h on ``system`` (their checks, MPI builds and path)."""
    return Fault(key, f'no fault: the selection of faults g and h on {system}',
                 ['-n', r'^(mpi_latency|mpi_throughput)\b', '-E',
                  f"interconnect == '{MPI_FAULT_PATH[system]}' and locals().get('mode', 'stream') == 'stream' "
                  "and locals().get('io', 'blocking') == 'blocking'", '-p', '^(openmpi4|mpich5)$'], [],
                 system=system)


#: The clean run on ``local`` that faults g and h compare with there.
CLEAN_LOCAL = _clean_gh('local')


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog='tools/drill', description=__doc__.split('\n\n')[0])
    ap.add_argument('--only', default='abcdefungh',
                    help='fault letters to inject (default: all; u and n only on a cluster with a switch tree)')
    ap.add_argument('--no-clean', action='store_true',
                    help='skip the clean run (make test: its CI subset ran clean just before)')
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print('tools/drill: needs root (tc, cgroups, namespaces)')
        return 2
    out = DRILL / time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())
    out.mkdir(parents=True)
    shutil.rmtree(DRILL / 'state', ignore_errors=True)
    (paths.run_dir() / 'tmp').mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    vcluster = str(ROOT / 'tools' / 'vcluster')
    started = sh(vcluster, 'status', check=False).returncode != 0
    drill = Drill(out)
    try:        # an interrupt or a failure from here on, even during `up`, takes down what this drill started
        if started:
            print('== bringing the virtual cluster up', flush=True)
            sh(vcluster, 'up', timeout=300)
        return _run(drill, out, args.only, t0, clean=not args.no_clean)
    finally:
        _uncap()
        if started:
            sh(vcluster, 'down', check=False, timeout=120)


def _run(drill: Drill, out: Path, only: str, t0: float, clean: bool = True) -> int:
    # the clean run records the drill's own baseline, which the fault runs compare with
    rep = out / 'report-clean-vcluster.json'
    if clean:
        steps = [CLEAN]
        if set(only) & set('gh'):
            # g and h are judged by bands from the spread of the clean runs (on shared CPUs a CPU-bound figure
            # has one only from min_runs runs on): their selection runs that often, the first run doing double duty
            runs = bandrules.load().min_runs
            steps += [CLEAN_LOCAL] + [_clean_gh(system, f'clean{i}') for i in range(2, runs + 1)
                                      for system in MPI_FAULT_PATH]
        for step in steps:
            drill.step(step)
            sh(str(ROOT / 'tools' / 'refs'), 'record', '--system', step.system,
               str(out / f'report-{step.key}-{step.system}.json'), check=False,
               env={**os.environ, 'NETREGRESS_STATE': str(DRILL / 'state')})
    elif set(only) & set('efgh'):
        print('tools/drill: faults e, f, g and h need the clean run (its references, baseline and round trips)')
        return 2
    for fault in faults(rep):
        if fault.key in only:
            drill.step(fault)
    print()
    print(drill.table())
    (out / 'drill.md').write_text(drill.table() + '\n')
    print(f'\n== drill {"PASSED" if drill.ok else "FAILED"} in {time.monotonic() - t0:.0f} s (logs: {out})')
    return 0 if drill.ok else 1


if __name__ == '__main__':
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print('tools/drill: interrupted; the fault in hand was mended and the cluster it started taken down',
              file=sys.stderr)
        sys.exit(130)
    except subprocess.CalledProcessError as err:
        tail = '\n'.join(f'  {line}' for line in (err.stderr or err.stdout or '').strip().splitlines()[-10:])
        print(f'tools/drill: {" ".join(map(str, err.cmd))} failed (exit {err.returncode}):\n{tail}', file=sys.stderr)
        sys.exit(1)
