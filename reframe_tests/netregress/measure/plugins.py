"""Plugins of the checks: the benchmark's exit status, exponential sweeps, and our kernels' build and result.

``ExitStatusPlugin``
    the benchmark's exit status recorded in stdout for sanity (every check that runs one executable).
``SweepPlugin``
    exponential sweeps of our kernels (``-e max_exp -t point_time_s``), throughput asserted at a few sizes.
``KernelMixin``
    the kernel build fixture and the JSON result (``--json result.json``) read through ``netregress.measure.results``.
"""
from __future__ import annotations

import os

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import fixture, run_after, run_before, variable
from reframe.core.exceptions import SanityError

from ..judge import figures, references
from . import results
from .base import RESULT_FILE, stage_file
from .build import MpiKernelBuild


class ExitStatusPlugin(rfm.RegressionTestPlugin):
    """Records the benchmark's exit status in stdout (first post-run command) for sanity."""

    @run_before('run')
    def mark_exit_status(self) -> None:
        self.postrun_cmds = [f'echo "{results.EXIT_MARK} $?"'] + self.postrun_cmds

    def exit_witness(self) -> list[str]:
        try:
            code = results.exit_status(stage_file(self, self.stdout))
        except SanityError as err:
            return [str(err)]
        return [] if code == 0 else [f'{self.executable} exited with {code} ({results.describe_exit(code)})']


class SweepPlugin(rfm.RegressionTestPlugin):
    """Exponential sweeps of our kernels (``-e max_exp -t point_time_s``): throughput asserted at a few sizes."""

    #: Largest message is 2**max_exp bytes.
    #:
    #: :type: :class:`int`
    #: :default: ``20``
    max_exp = variable(int, value=20)

    #: Seconds each size is calibrated to (``-t``); 21 sizes x 0.05 s keeps the sweep near 1.5 s.
    #:
    #: :type: :class:`float`
    #: :default: ``0.05``
    point_time_s = variable(float, value=0.05)

    #: Sizes whose throughput is asserted against references: latency-bound (1 B, 64 B), one page, 64 KiB and
    #: 1 MiB (every size stays in result.json; 21 bands on a shared 2-core machine failed somewhere in most runs
    #: by chance alone).
    #:
    #: :type: :class:`List[int]`
    #: :default: ``[1, 64, 4096, 65536, 1048576]``
    asserted_sizes = variable(typ.List[int], value=[1, 64, 4096, 65536, 1048576])

    #: What the sweep is, for people (``'TCP stream sweep throughput'``); the size is appended per point.
    #:
    #: :type: :class:`str`
    #: :default: ``'sweep throughput'``
    sweep_label = variable(str, value='sweep throughput')

    def sweep_opts(self) -> list[str]:
        return ['-e', str(self.max_exp), '-t', str(self.point_time_s)]

    @run_after('setup')
    def add_sweep_metrics(self) -> None:
        # CPU-bound at every size: each point lasts a fraction of a second (a handful of 1 MiB messages on 1 Gbit/s),
        # so start-up and the shaper's queue decide it (a gige 1 MiB stream point: 952 then 532 Mbit/s)
        figure = figures.cpu_bound(self.sweep_label)
        for size in (s for s in self.asserted_sizes if s <= 2 ** self.max_exp):
            self.add_metric(references.metric_name('throughput_mbps', size),
                            f'sweep[size_bytes={size}].throughput_mbps', 'Mbit/s', figure.at(size))


class KernelMixin(ExitStatusPlugin):
    """Our kernels: build fixture, exit-status mark and the JSON result."""

    #: The build fixture providing the kernels (MPI kernels; TCP checks use TcpKernelBuild).
    kernels = fixture(MpiKernelBuild, scope='environment')

    @run_after('init')
    def keep_result(self) -> None:
        """A passed case keeps the kernel's JSON in its output directory (tools/report draws every size of a sweep
        and the ebb histogram from it); the check's own ``keep_files`` stay."""
        if RESULT_FILE not in self.keep_files:
            self.keep_files = [*self.keep_files, RESULT_FILE]

    def kernel(self, name: str) -> str:
        return os.path.join(self.kernels.kernels_dir, name)

    @property
    def result_path(self) -> str:
        return os.path.join(self.stagedir, RESULT_FILE)

    def kernel_witness(self) -> list[str]:
        try:
            results.kernel_ok(self.result_path, stage_file(self, self.stdout)).evaluate()
        except SanityError as err:
            return [str(err)]
        return []

    def payload_bytes(self) -> float:
        return results.payload_bytes(results.load_result(self.result_path))

    def add_metric(self, name: str, keypath: str, unit: str, figure: figures.Figure) -> None:
        """Define performance variable ``name`` read from the result at ``keypath``, and what it is."""
        self.add_figure(name, sn.make_performance_function(results.value(self.result_path, keypath), unit), figure)
