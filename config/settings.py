"""ReFrame configuration of netregress.

    reframe -C config/settings.py -c reframe_tests -r                                    # the local system
    reframe -C config/settings.py -C $NETREGRESS_SITE/settings.py -c reframe_tests -r    # a site's system

The embedded system, ``local``: any machine, no root: local scheduler, shared memory and TCP loopback. Every
cluster, the virtual one too, is a site layered over this file (docs/site.md): config/sites/vcluster/ (the Slurm
cluster of network-namespace nodes made by tools/vcluster) and config/sites/example/ (a template for a real
centre). A site's systems are loaded after this file, so ReFrame selects them first; ``--system`` always wins.

Everything is resolved from this file's location: MPI builds and kernels under .deps/ (made by tools/bootstrap),
everything a run writes under run/. One programming environment per MPI build of config/mpi_builds.toml, plus
``gnu`` (no MPI: TCP kernels, NPtcp, iperf3). The netregress package must be importable by ReFrame's Python
(tools/bootstrap installs it into its venv; the tools also put the checkout's on PYTHONPATH).

Environment extras read by the library (reframe_tests/netregress):
  mpi_family   row of config/interconnects.yaml that forces this MPI onto an interconnect
  launch       launcher command template ({ntasks}, {ntasks_per_node}, {nodes}); a partition's extra
               ``launch: {environment: template}`` wins: on Slurm each MPI needs its own PMI
  mpicc        MPI C compiler for the cmake build path
  kernels      directory with prebuilt kernels (tools/bootstrap: .deps/kernels/<env>/bin)
  netpipe_mpi  NetPIPE MPI module built against this MPI (absent: none exists, the check says so)
  imb          IMB-MPI1 executable (Intel MPI ships one)
  run_as       user the environment's jobs run as when the suite runs as root (LAM/MPI refuses root): Slurm jobs
               are submitted with sbatch --uid=USER and the stage directory is handed to USER (measure/launch.py)
  spack_mpi    'none': Spack has no package for this MPI; its Spack-built tools are skipped with that reason
  no_fortran   why the build cannot compile Fortran MPI programs (NAS's Fortran benchmarks skip with it)
  mpi_waits    'sleep': the library sleeps while it waits (LAM/MPI's tcp RPI); nr-mpitest's TCP yardstick then
               sleeps too (--duet-sleep), so the ratio divides the host's wake-up latency out
  known_faults defects of this build that checks skip, visibly, with the reason: [{checks: [check names],
               interconnects: [names] (only runs on these), oversubscribed: true (only runs with more ranks
               than CPUs), reason: '...'}]; an entry with ``failure`` (a regular expression) skips nothing: a
               failed run whose problems match it is marked as that fault, and if the case then passes on
               ReFrame's retry the run is not failed for it (netregress_postrun/runreport.py). How each known
               fault was found: docs/history.md.
Partition extras:
  launch       {environment: launcher template} (above)
  references   'host': this host's baseline (kept under run/state or $NETREGRESS_STATE, judge/baselines.py),
               after the entries the system's committed file holds (docs/references.md); absent: the committed
               file alone (the reference directory's <system>.yaml), where a missing reference fails
  time_limit, max_pending_time   per job (ReFrame's defaults where absent)
  interconnects {ic: {iface, subnet}}
  on_node, on_each_node          command prefixes that run a task on one / every node of the job
  build_path   prebuilt | cmake | spack (docs/validation.md)
  host_cpus    CPUs that nodes sharing one host have between them: oversubscription is judged against it; on
               Slurm, tools/validate fails a run whose jobs overlapped in time (netregress_postrun/coverage.py)
  pin_ranks    with host_cpus: MPI rank r runs on CPU r mod host_cpus
  pair_cpu     both ends of a TCP pair (our kernels, iperf3, NPtcp) run on this CPU (measure/base.py)
  assert_cpu_bound  False: against a host baseline, CPU-bound absolute figures are recorded, not asserted
Partition features ``ic-<name>`` say which interconnects a partition offers; checks select partitions by them.
"""
import os
import sys
from pathlib import Path

try:
    from netregress import perflogs
    from netregress.judge.baselines import BaselineError, state_dir
    from netregress.measure import mpibuilds
    from netregress.paths import run_dir
except ImportError as err:    # one line, not a trace, when ReFrame's Python lacks the package
    sys.exit(f'config/settings.py: {err}: install netregress into the Python that runs ReFrame '
             f'(pip install -e . in the checkout; tools/bootstrap does it)')

ROOT = Path(__file__).resolve().parents[1]
DEPS = Path(os.environ.get('NETREGRESS_DEPS') or ROOT / '.deps')   # override: a developer's scratch tree
#: This run against the last stored value of each figure from a session that passed (num_failures == 0).
PERF_REPORT_SPEC = '19700101T000000+0000:now?num_failures==0/last:/+job_nodelist+result'

#: Where a run writes: ReFrame's --prefix or RFM_PREFIX, else run/ (netregress.paths.run_dir).
RUN = run_dir()
#: Whether ReFrame itself is loading this file to run: only then are directories made. The tools load it to read
#: it (netregress.measure.site), and reading must write nothing (a read-only or shared checkout stays clean).
RUNNING = 'reframe.frontend.cli' in sys.modules
#: Host state kept across runs (baselines, ReFrame's results database): NETREGRESS_STATE, else RUN/state.
try:
    STATE = state_dir(create=RUNNING)
except BaselineError as err:              # someone else's or a world-writable state directory: one line, not a trace
    sys.exit(f'config/settings.py: {err}')
# Nothing of a run lands in the checkout, not even the checks' byte code (a read-only or shared checkout works too)
sys.dont_write_bytecode = True


def _kernels(env):
    return str(DEPS / 'kernels' / env / 'bin')


# The embedded systems compare with this host's baseline; NETREGRESS_REFERENCES (a directory of committed reference
# files, e.g. a site's private ones or a drill's) makes them strict like a site system: a missing reference fails.
EMBEDDED_REFERENCES = 'committed' if os.environ.get('NETREGRESS_REFERENCES') else 'host'

#: The MPI builds of this machine (config/mpi_builds.toml: how each is installed, compiled against, started and
#: configured, its known faults); one ReFrame environment each.
try:
    MPI_BUILDS = mpibuilds.load(ROOT / 'config' / 'mpi_builds.toml', mpibuilds.Places.here(ROOT))
except mpibuilds.MpiBuildError as err:
    sys.exit(f'config/settings.py: {err}')
#: How each build starts ranks on one machine.
LOCAL_LAUNCH = {name: list(b.launch['local']) for name, b in MPI_BUILDS.items()}


def _environments(launch):
    """One environment per MPI build of this machine, for any system that lists it (a site's partitions may too,
    with its own way of starting ranks: the partition extra ``launch``, netregress/measure/launch.py)."""
    envs = [{
        'name': 'gnu',
        'cc': 'gcc',
        'features': ['tcp', 'kernels'],
        'extras': {'kernels': _kernels('openmpi4')},   # TCP kernels do not link MPI: any build's copy works
    }]
    for name, b in MPI_BUILDS.items():
        features = ['mpi', 'kernels'] + (['imb'] if 'imb' in b.extras else [])
        faults = {'known_faults': [dict(f) for f in b.known_faults]} if b.known_faults else {}
        envs.append({
            'name': name,
            'cc': b.cc,
            'features': features,
            'env_vars': b.env_vars,
            'extras': {'mpi_family': b.family, 'mpicc': b.cc, 'launch': launch[name],
                       'kernels': _kernels(name), **b.extras, **faults},
        })
    return envs


ENV_NAMES = ['gnu'] + list(MPI_BUILDS)

local = {
    'name': 'local',
    'descr': 'this machine, no root: shared memory and TCP loopback',
    # any host, unless a site is loaded: then only a site's system that matches the host is chosen, never `local`
    # silently on a cluster's login node (--system local still works; with no match the tools stop naming the host)
    'hostnames': ['(?!)'] if os.environ.get('NETREGRESS_SITE') else ['.*'],
    'modules_system': 'nomod',
    'prefix': str(RUN),               # stage/ and output/ under it: ReFrame's defaults, so --prefix moves them
    'partitions': [{
        'name': 'default',
        'descr': 'one node: shm and TCP over lo',
        'scheduler': 'local',
        'launcher': 'local',
        'environs': ENV_NAMES,
        'max_jobs': 1,                  # 2 cores: concurrent benchmarks would measure each other
        'features': ['ic-shm', 'ic-tcp'],
        'extras': {
            'interconnects': {'tcp': {'iface': 'lo', 'subnet': '127.0.0.0/8'}},
            'on_node': [],
            'on_each_node': [],
            'private_netns': True,      # each job in its own network namespace: lo counters are its own
            'references': EMBEDDED_REFERENCES,
            'time_limit': '90s',
            'host_cpus': os.cpu_count(),    # no more ranks than CPUs (oversubscribed runs measure the scheduler)
            'pin_ranks': True,              # MPI rank r on CPU r mod host_cpus (base.py)
            'pair_cpu': 0,                  # TCP client and server on one CPU (base.py: unpinned runs were bimodal)
            'assert_cpu_bound': False,      # its host baseline asserts ratios and link-bound streams only (base.py)
        },
    }],
}


CHECKS = str(ROOT / 'reframe_tests')
#: The option sets of every entry point, once (``reframe --mode NAME``): tools/validate (full, ci), the CI templates
#: (ci) and ci/post-maintenance (maintenance, its tag filter added by itself). A failed case is run once more; the
#: comparison with the last passing run is printed. A site may define its own for its systems (the vcluster's are
#: asynchronous).
_RUN = ['-c', CHECKS, '-R', '--performance-report', '--max-retries=1']
MODES = [
    {'name': 'full', 'options': _RUN + ['--exec-policy=serial']},
    {'name': 'ci', 'options': _RUN + ['--exec-policy=serial', '--tag=ci']},
    {'name': 'maintenance', 'options': _RUN},
]

site_configuration = {
    'systems': [local],
    'environments': _environments(LOCAL_LAUNCH),
    'modes': MODES,
    'general': [{
        'check_search_path': [str(ROOT / 'reframe_tests')],
        'check_search_recursive': True,
        'report_file': str(RUN / 'reports' / 'run-report-{sessionid}.json'),
        'perf_info_level': 'info',
        'remote_detect': False,
        'topology_prefix': str(RUN / 'topology'),
        'perf_report_spec': PERF_REPORT_SPEC,
        # ReFrame looks at a job 10 times a second at first and then ever more rarely, up to 10 s apart
        # (poll_rate_min 0.1): 20 s into a job the looks are 2.3 s apart, so it is seen finished 1.2 s late on
        # average. Never more than 0.5 s apart: one look (sacct) takes 0.09 s and 9.5 ms of CPU in all (sacct,
        # slurmdbd, MariaDB) on the vcluster, 1 % of a CPU at two a second.
        'poll_rate_min': 2,
    }],
    # ReFrame's results storage: every session's report goes into one SQLite file in the state directory (beside
    # the host baselines, so it survives across runs on a machine and a drill or a test with its own
    # NETREGRESS_STATE keeps its sessions apart). `--performance-report` then compares each run with the last
    # value of every figure from a session that passed; `netregress_postrun.history` and ci/post-maintenance query it.
    'storage': [{'enable': True, 'sqlite_db_file': str(STATE / 'reframe' / 'results.db')}],
    'logging': [{
        'level': 'debug',
        'handlers': [
            {'type': 'stream', 'name': 'stdout', 'level': 'info', 'format': '%(message)s'},
            {'type': 'file', 'name': str(RUN / 'logs' / 'reframe.log'), 'timestamp': '%Y%m%dT%H%M%S',
             'level': 'debug', 'append': False,
             'format': '[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s'},
        ],
        # our file per system and partition; a site adds its own store for its systems (netregress.perflogs)
        'handlers_perflog': [perflogs.file_handler(RUN)],
    }],
}

if RUNNING:
    os.makedirs(RUN / 'logs', exist_ok=True)
