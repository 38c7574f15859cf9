"""A job launcher built from the programming environment's launch template.

Every MPI build needs its own launcher, and on Slurm not even the same one (``srun --mpi=pmix`` for Open MPI,
``--mpi=pmi2`` for MPICH 5 / Intel MPI, Hydra's ``mpiexec -launcher slurm`` for Debian MPICH, see
docs/vcluster.md). ReFrame binds launchers to partitions, not to (partition, environment) pairs, so the command is
a template: the partition's ``extras.launch[<environment>]`` (how this cluster starts that MPI), else the
environment's ``extras.launch`` (how the MPI starts itself); :func:`launcher_for` turns it into the job's launcher.

Template placeholders: ``{ntasks}``, ``{ntasks_per_node}``, ``{nodes}``.
"""
from __future__ import annotations

import math
import os
import pwd
from typing import Any, Sequence

from reframe.core.launchers import JobLauncher


class TemplateLauncher(JobLauncher):
    """Launch with a fixed command template (no registration needed: checks assign it to ``job.launcher``)."""

    def __init__(self, template: Sequence[str]) -> None:
        super().__init__()
        self._template = list(template)

    def command(self, job: Any) -> list[str]:
        ntasks = job.num_tasks or 1
        per_node = job.num_tasks_per_node or ntasks
        ctx = {'ntasks': ntasks, 'ntasks_per_node': per_node, 'nodes': max(1, math.ceil(ntasks / per_node))}
        try:
            return [tok.format(**ctx) for tok in self._template]
        except KeyError as err:
            raise ValueError(f'launch template {self._template}: unknown placeholder {err} '
                             f'(known: {", ".join(ctx)})') from None


def launcher_for(environ: Any, partition: Any) -> JobLauncher | None:
    """The launcher the partition (first) or the environment asks for, or None to keep the partition's own."""
    per_env = (partition.extras or {}).get('launch') or {}
    if not isinstance(per_env, dict):
        raise ValueError(f'partition {partition.fullname}: extras.launch must map environment names to launcher '
                         f'templates, not {type(per_env).__name__}')
    template = per_env.get(environ.name) or environ.extras.get('launch')
    if not template:
        return None
    return TemplateLauncher(template)


def run_as_user(environ: Any) -> str | None:
    """The user this environment's jobs must run as: ``extras.run_as`` while the suite runs as root, else None.

    LAM/MPI refuses to run as root. On a real cluster the suite runs as an ordinary user and nothing changes; on
    the vcluster, whose set-up needs root, LAM jobs alone switch to the unprivileged user tools/bootstrap creates.
    """
    user = (environ.extras or {}).get('run_as')
    if not user or os.geteuid() != 0:
        return None
    return str(user)


def run_unprivileged(check: Any) -> None:
    """Make the check's job run as :func:`run_as_user` when the environment asks for it.

    Slurm: the job is submitted with ``--uid=USER`` (root may do so), so the job script, every step and the lamd
    daemons run as USER; local: the launcher (tools/lamrun ``--user``) switches user itself. Either way the job
    writes its output, ``result.json`` and the counter snapshots into the stage directory, which is handed to
    USER here. A user that does not exist is an error naming the fix, not a job that fails obscurely."""
    user = run_as_user(check.current_environ)
    if user is None:
        return
    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        raise ValueError(f'environment {check.current_environ.name} runs its jobs as user {user!r} (extras.run_as), '
                         f'which does not exist: run tools/bootstrap as root to create it') from None
    kernels = getattr(getattr(check, 'kernels', None), 'kernels_dir', None)
    blocked = kernels and unreachable_dir(kernels, pw)
    if blocked:
        st = os.stat(blocked)
        raise ValueError(f'environment {check.current_environ.name} runs its jobs as user {user!r} (extras.run_as), '
                         f'who cannot reach its kernels {kernels}: {blocked} is mode {st.st_mode & 0o777:04o}, owner '
                         f'uid {st.st_uid} (let others search it, chmod o+x, or keep NETREGRESS_DEPS out of a '
                         f'private directory)')
    if check.current_partition.scheduler.registered_name in ('slurm', 'squeue'):
        check.job.options += [f'--uid={user}']
    os.chown(check.stagedir, pw.pw_uid, pw.pw_gid)


def unreachable_dir(path: str, pw: pwd.struct_passwd) -> str | None:
    """The first directory on the way to ``path`` that user ``pw`` may not search (no x bit for it), or None."""
    groups = set(os.getgrouplist(pw.pw_name, pw.pw_gid))
    here = '/'
    for part in os.path.abspath(path).strip('/').split('/'):
        try:
            st = os.stat(here)
        except OSError:
            return None                 # a path that does not exist fails later, with its own message
        bit = 0o100 if st.st_uid == pw.pw_uid else 0o010 if st.st_gid in groups else 0o001
        if not st.st_mode & bit:
            return here
        here = os.path.join(here, part)
    return None
