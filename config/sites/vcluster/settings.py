"""The virtual cluster (tools/vcluster) described as a site, the way a centre describes its own Slurm cluster.

    eval "$(tools/vcluster env)"                  # SLURM_CONF of the cluster (a real cluster has its own default)
    export NETREGRESS_SITE=$PWD/config/sites/vcluster   # or --site config/sites/vcluster on every tool
    tools/validate --system vcluster              # reframe -C config/settings.py -C $NETREGRESS_SITE/settings.py

tools/validate and tools/drill use this site when they bring the cluster up. Two Slurm partitions, one per fabric
(fast: unshaped veth; gige: veth shaped to 1 Gbit/s); the MPI builds are this machine's (the environments of
config/settings.py, made by tools/bootstrap), started the Slurm way per build (`launch` below). The names here must
match config/vcluster.env, which builds the cluster (tests/python/test_site_layer.py compares them).
References: this host's baseline (netregress/judge/baselines.py), after the machine-independent entries of the
checkout's reference_values/vcluster.yaml (a site the checkout ships keeps its references there; docs/references.md).
docs/site.md walks through a site.
"""
import os
from pathlib import Path

from netregress.measure import mpibuilds, site
from netregress.paths import repo_root, run_dir

# Host baselines, judged first by the machine-independent entries the checkout commits (reference_values/
# vcluster.yaml); NETREGRESS_REFERENCES (a drill's directory) makes the partitions strict like a site system's.
REFERENCES = 'committed' if os.environ.get('NETREGRESS_REFERENCES') else 'host'

# How each MPI build starts ranks under Slurm (config/mpi_builds.toml, `launch.slurm`): Open MPIs via PMIx, Debian
# MPICH through its own Hydra, MPICH 5 and Intel MPI via PMI-2, LAM through its Slurm boot module;
# --kill-on-bad-exit: a rank that dies ends the step at once instead of leaving its partner blocked until the job's
# time limit. The build's environment (its `env`) is the same whichever launcher starts it.
LAUNCH = {name: list(b.launch['slurm']) for name, b in mpibuilds.load(mpibuilds.table_file(repo_root())).items()}

# --overlap: helper steps (servers, counter snapshots) run beside other steps of the job (Slurm >= 20.11 gives steps
# exclusive CPUs otherwise); --label: the per-node snapshots arrive interleaved and are told apart by task label.
ON_NODE = ['srun', '--mpi=none', '--overlap', '--nodes=1', '--ntasks=1', '--relative={index}']
ON_EACH_NODE = ['srun', '--mpi=none', '--overlap', '--label', '--nodes={nodes}', '--ntasks={nodes}',
                '--ntasks-per-node=1']


# The cluster as tools/vcluster builds it (config/vcluster.env, then NETREGRESS_VCLUSTER_ENV: a larger one).
VC = {**site.read_env_file(repo_root() / 'config' / 'vcluster.env'),
      **(site.read_env_file(Path(os.environ['NETREGRESS_VCLUSTER_ENV']))
         if os.environ.get('NETREGRESS_VCLUSTER_ENV') else {})}


def nodes(fabric):
    """The nodes of one fabric: VC_<FABRIC>_COUNT, else its node list."""
    count = VC.get(f'VC_{fabric.upper()}_COUNT', '').strip()
    return int(count) if count else len(VC.get(f'VC_{fabric.upper()}_NODES', '').split())


def pending_s(fabric):
    """How long a job may wait in Slurm's queue: behind the one job that holds the host's license, which on this
    fabric's N nodes may be an all-node job (the link test one stream a round, so rounds grow as N^2: 110 s at 16
    nodes, 184 s at 32; the node probe 168 s at 32). An idle 4-node cluster starts a job within 2 minutes or never
    (a request it cannot meet), so 120 s plus N^2 s."""
    return 120 + nodes(fabric) ** 2


def partition(name, subnet, shm=False, **fabric):
    return {
        'name': name,
        'descr': f'vcluster nodes linked by the {name} fabric',
        'scheduler': 'slurm',
        'launcher': 'srun',
        # --overcommit: the 4-rank collectives on one 2-CPU node (shm) need more tasks than CPUs; --licenses: all
        # nodes share this machine's CPUs, so one job at a time on the whole cluster (Slurm keeps the order)
        'access': [f'--partition={name}', '--overcommit', '--licenses=host_cpus:1'],
        'environs': ['gnu', *LAUNCH],
        'max_jobs': 2,               # the next job waits in Slurm's queue for the license, not in ReFrame
        'features': (['ic-shm'] if shm else []) + [f'ic-{name}'],
        'extras': {
            'launch': LAUNCH,
            'references': REFERENCES,
            # the slowest case takes 35 s (the all-node checks set their own); the wait: pending_s
            'time_limit': '90s',
            'max_pending_time': f'{pending_s(name)}s',
            'host_cpus': os.cpu_count(),     # the nodes share this host's CPUs (oversubscription, base.py)
            'pin_ranks': True,               # MPI rank r on CPU r mod host_cpus (shm runs were bimodal unpinned)
            'pair_cpu': 0,                   # both ends of a TCP pair on one CPU (unpinned runs were bimodal)
            'assert_cpu_bound': False,       # the host baseline asserts ratios and link-bound streams only
            # the link test one stream at a time: 4 MPI streams at once on the 2 CPUs read 880-905 of the 956 Mbit/s
            # a gige link carries (one at a time: 945-956)
            'link_concurrency': 1,
            # and twice, each direction's best pass judged: a fast stream alone once read 0.40-0.48 x the median
            # link in CI (the host's scheduler, no quota, no fault), in one of its two directions and one attempt;
            # best of two still read 0.55 and 0.60 x in both attempts of one run in 15 (G13), so the directions
            # left below the floor are measured again, alone, at the end (allpairs.py recheck_max)
            'link_passes': 2,
            # the MPI build whose ranks run the link test: Debian's Open MPI 4.1.4 crashed in MPI_Init (its TCP
            # BTL, a NULL callback while a peer connected during the modex) in 3 of about 80 4-node jobs and in a
            # 16-node link job; MPICH 5 ran them clean
            'link_environ': 'mpich5',
            'interconnects': {name: {'iface': 'eth0', 'subnet': subnet, **fabric}},
            'on_node': ON_NODE,
            'on_each_node': ON_EACH_NODE,
        },
    }


ASYNC = ['-c', str(repo_root() / 'reframe_tests'), '-R', '--performance-report', '--max-retries=1',
         '--exec-policy=async']
site_configuration = {
    'systems': [{
        'name': 'vcluster',
        'descr': 'Slurm cluster of network-namespace nodes on this machine (tools/vcluster)',
        'hostnames': ['.*'],
        'modules_system': 'nomod',
        'prefix': str(run_dir()),     # --prefix / RFM_PREFIX, else run/ of the checkout, as the local system
        'partitions': [
            # shared memory is measured once, on the fast nodes (same CPUs and kernel as gige's). Unshaped veth is
            # bounded by the shared CPUs, not the link: its links moved 0.5-0.98x of the median link with the load
            # of other jobs, so a link fails there only below 0.6x (a slow node is node_loopback's to catch)
            partition('fast', '10.92.1.0/24', shm=True, min_link_fraction=0.6),
            partition('gige', '10.92.2.0/24'),
        ],
    }],
    # ReFrame may queue the next job (async): every job takes the one license, so Slurm starts it the moment the
    # last one ends (1.2 s a job sooner than ReFrame's poll); the other modes are config/settings.py's
    'modes': [{'name': 'full', 'options': ASYNC, 'target_systems': ['vcluster']},
              {'name': 'ci', 'options': ASYNC + ['--tag=ci'], 'target_systems': ['vcluster']}],
}
