"""EXAMPLE site: a Slurm cluster with two fabrics (InfiniBand, Ethernet) and four MPI stacks from Lmod modules.

Copy this directory outside the netregress checkout (e.g. /etc/netregress), adapt it, then
    export NETREGRESS_SITE=/etc/netregress     # or --site /etc/netregress on every tool
    tools/validate --system site-example       # reframe -C config/settings.py -C $NETREGRESS_SITE/settings.py ...
docs/site.md walks through it; tests/python/test_site_layer.py loads this directory, so it stays valid.
"""
SRUN_ON_NODE = ['srun', '--overlap', '--nodes=1', '--ntasks=1', '--relative={index}']
SRUN_ON_EACH = ['srun', '--overlap', '--label', '--nodes={nodes}', '--ntasks={nodes}', '--ntasks-per-node=1']
PMIX, PMI2 = (['srun', '--kill-on-bad-exit=1', f'--mpi={pmi}'] for pmi in ('pmix', 'pmi2'))  # a dead rank ends the step
MPIS = {  # environment: (Lmod module, mpi_family row of interconnects.yaml, launcher, where our kernels are)
    'ompi4': ('openmpi/4.1.6', 'openmpi-ucx', PMIX, '/opt/netregress/ompi4/bin'),
    'ompi5': ('openmpi/5.0.5', 'openmpi-ucx', PMIX, '/opt/netregress/ompi5/bin'),
    'mpich': ('mpich/4.2.3', 'mpich-ofi', PMI2, '/opt/netregress/mpich/bin'),
    'impi': ('intel-oneapi-mpi/2021.13', 'intelmpi', PMI2, '/opt/netregress/impi/bin'),
}


def partition(name, slurm_partition, fabric, iface, subnet=None):
    return {
        'name': name, 'descr': f'compute nodes on {fabric}', 'scheduler': 'slurm', 'launcher': 'srun',
        'access': [f'--partition={slurm_partition}', '--exclusive'],
        'environs': ['site-gnu', *MPIS], 'max_jobs': 8, 'features': ['ic-shm', f'ic-{fabric}'],
        'extras': {'interconnects': {fabric: {'iface': iface, **({'subnet': subnet} if subnet else {})}},
                   'on_node': SRUN_ON_NODE, 'on_each_node': SRUN_ON_EACH},
    }


site_configuration = {
    'systems': [{
        'name': 'site-example',
        'descr': 'EXAMPLE: Slurm, InfiniBand and Ethernet node sets',
        'hostnames': [r'^login\d+\.example\.org$'],
        'modules_system': 'nomod',         # a real site: 'lmod' (the environments' modules are loaded per job)
        'partitions': [partition('ib', 'compute', 'ib', 'mlx5_0:1'),
                       partition('eth', 'eth', 'eth', 'eth0', '10.0.0.0/16')],
    }],
    'environments': [
        {'name': 'site-gnu', 'cc': 'gcc', 'features': ['tcp', 'kernels'], 'target_systems': ['site-example'],
         'extras': {'kernels': '/opt/netregress/bin'}},
        *({'name': env, 'modules': [module], 'cc': 'mpicc', 'features': ['mpi', 'kernels'],
           'target_systems': ['site-example'],
           'extras': {'mpi_family': family, 'mpicc': 'mpicc', 'launch': launch, 'kernels': kernels}}
          for env, (module, family, launch, kernels) in MPIS.items()),
    ],
}
