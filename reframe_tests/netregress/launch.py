"""A job launcher built from the programming environment's launch template.

Every MPI build needs its own launcher, and on Slurm not even the same one (``srun --mpi=pmix`` for Open MPI,
``--mpi=pmi2`` for MPICH 5 / Intel MPI, Hydra's ``mpiexec -launcher slurm`` for Debian MPICH, see
shared/notes/slurm-vcluster.md). ReFrame binds launchers to partitions, so the environment carries the command as a
template in its ``extras.launch`` list and :func:`launcher_for` turns it into a launcher for the test's job.

Template placeholders: ``{ntasks}``, ``{ntasks_per_node}``, ``{nodes}``.
"""
from __future__ import annotations

import math
from typing import Sequence

from reframe.core.launchers import JobLauncher


class TemplateLauncher(JobLauncher):
    """Launch with a fixed command template (no registration needed: checks assign it to ``job.launcher``)."""

    def __init__(self, template: Sequence[str]):
        super().__init__()
        self._template = list(template)

    def command(self, job) -> list[str]:
        ntasks = job.num_tasks or 1
        per_node = job.num_tasks_per_node or ntasks
        ctx = {'ntasks': ntasks, 'ntasks_per_node': per_node, 'nodes': max(1, math.ceil(ntasks / per_node))}
        try:
            return [tok.format(**ctx) for tok in self._template]
        except KeyError as err:
            raise ValueError(f'launch template {self._template}: unknown placeholder {err} '
                             f'(known: {", ".join(ctx)})') from None


def launcher_for(environ, partition) -> JobLauncher | None:
    """The launcher the environment asks for on this partition, or None to keep the partition's own."""
    template = environ.extras.get('launch')
    if not template:
        return None
    return TemplateLauncher(template)
