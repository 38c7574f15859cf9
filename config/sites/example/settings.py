"""EXAMPLE of a site's own ReFrame configuration, layered over netregress's without editing it.

Copy this file (and ``interconnects.yaml`` beside it) OUTSIDE the netregress checkout, e.g. to /etc/netregress/,
rename the system and adapt it, then run

    reframe -C config/settings.py -C /etc/netregress/settings.py -c reframe_tests --system mysite -r
    # or in CI: NR_SITE_CONFIG=/etc/netregress/settings.py (ci/gitlab-ci.yml, ci/github-actions.yml)

ReFrame merges the files left to right: systems and environments defined here are added to ours (one with the
same name replaces ours). What else a site keeps of its own, outside this repository:

* interconnects and MPI paths: ``NETREGRESS_INTERCONNECTS=/etc/netregress/interconnects.yaml`` (an absolute
  path; merged over
  config/interconnects.yaml; here a RoCE fabric, ``ic-roce``);
* references: ``NETREGRESS_REFERENCES=/etc/netregress/references`` (``tools/refs write`` writes
  ``<system>.yaml`` there from a checked run; a missing reference fails);
* the Spack environment: ``NETREGRESS_SPACK_ENVS=/etc/netregress/spack`` holding ``mysite/spack.yaml`` and
  ``mysite/reframe.yaml`` (start from config/spack/site-example/), concretized once with
  ``tools/spack-env concretize mysite``.

Every name below that the checks read (partition features ``ic-*``, ``extras``) is documented in
docs/validation.md. This example is loaded by tests/python/test_site_layer.py, so it stays valid.
"""

site_configuration = {
    'systems': [{
        'name': 'mysite',
        'descr': 'EXAMPLE site: Slurm, InfiniBand and RoCE node sets',
        'hostnames': ['^mysite-login\\d+$'],
        'modules_system': 'nomod',              # a real site: 'lmod'
        'partitions': [
            {
                'name': 'ib',
                'descr': 'compute nodes on InfiniBand (UCX)',
                'scheduler': 'slurm',
                'launcher': 'srun',
                'access': ['--partition=compute', '--exclusive'],
                'environs': ['site-gnu', 'site-ompi', 'site-mpich'],
                'features': ['ic-shm', 'ic-ib'],
                'extras': {
                    'interconnects': {'ib': {'iface': 'mlx5_0:1'}},
                    'on_node': ['srun', '--overlap', '--nodes=1', '--ntasks=1', '--relative={index}'],
                    'on_each_node': ['srun', '--overlap', '--label', '--nodes={nodes}', '--ntasks={nodes}',
                                     '--ntasks-per-node=1'],
                },
            },
            {
                'name': 'roce',
                'descr': 'nodes on 100 GbE RoCE',
                'scheduler': 'slurm',
                'launcher': 'srun',
                'access': ['--partition=roce', '--exclusive'],
                'environs': ['site-gnu', 'site-ompi', 'site-mpich'],
                'features': ['ic-shm', 'ic-roce'],
                'extras': {
                    'interconnects': {'roce': {'iface': 'mlx5_2:1'}},
                    'on_node': ['srun', '--overlap', '--nodes=1', '--ntasks=1', '--relative={index}'],
                    'on_each_node': ['srun', '--overlap', '--label', '--nodes={nodes}', '--ntasks={nodes}',
                                     '--ntasks-per-node=1'],
                },
            },
        ],
    }],
    'environments': [
        {'name': 'site-gnu', 'cc': 'gcc', 'features': ['tcp', 'kernels'], 'target_systems': ['mysite'],
         'extras': {'kernels': '/opt/netregress/bin'}},
        {'name': 'site-ompi', 'modules': ['openmpi/5.0.5'], 'cc': 'mpicc', 'features': ['mpi', 'kernels'],
         'target_systems': ['mysite'],
         'extras': {'mpi_family': 'openmpi-ucx', 'mpicc': 'mpicc', 'launch': ['srun', '--mpi=pmix'],
                    'kernels': '/opt/netregress/ompi/bin', 'spack_mpi': 'openmpi@5.0'}},
        {'name': 'site-mpich', 'modules': ['mpich/4.2.3'], 'cc': 'mpicc', 'features': ['mpi', 'kernels'],
         'target_systems': ['mysite'],
         'extras': {'mpi_family': 'mpich-ucx', 'mpicc': 'mpicc', 'launch': ['srun', '--mpi=pmi2'],
                    'kernels': '/opt/netregress/mpich/bin', 'spack_mpi': 'mpich@4.2'}},
    ],
}
