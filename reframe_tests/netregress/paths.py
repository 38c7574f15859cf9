"""Repository-relative locations used by the library and the tools.

Everything is resolved from this file's location, so a clone works wherever it lives. ``NETREGRESS_ROOT`` overrides
the root (tests use it to point the library at a scratch tree).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path


def repo_root() -> Path:
    """The repository root (the directory holding ``config/`` and ``reframe_tests/``)."""
    env = os.environ.get('NETREGRESS_ROOT')
    if env:
        return Path(env).resolve()
    return Path(__file__).resolve().parents[2]


def config_dir() -> Path:
    return repo_root() / 'config'


def interconnect_table() -> Path:
    return config_dir() / 'interconnects.yaml'


def run_dir() -> Path:
    """Where a run writes (stage, output, perflogs, reports, the default state directory): ReFrame's ``--prefix``
    (on this process's command line) or ``RFM_PREFIX``, else ``run/`` of this checkout. ReFrame has no placeholder
    for its prefix in report_file or a log file's name, so config/settings.py and the library read it this way.
    The tools pick a site's own (netregress.measure.site.run_dir) and pass it as ``RFM_PREFIX``."""
    return explicit_run_dir() or (repo_root() / 'run').resolve()


def explicit_run_dir() -> Path | None:
    """ReFrame's ``--prefix`` on this process's command line, else ``RFM_PREFIX``; None when neither is given."""
    for i, arg in enumerate(sys.argv):
        if arg == '--prefix' and i + 1 < len(sys.argv):
            return Path(sys.argv[i + 1]).resolve()
        if arg.startswith('--prefix='):
            return Path(arg.split('=', 1)[1]).resolve()
    return Path(os.environ['RFM_PREFIX']).resolve() if os.environ.get('RFM_PREFIX') else None


def deps_dir() -> Path:
    """What tools/bootstrap installs (venvs, MPI builds, kernels, Spack): ``NETREGRESS_DEPS``, else ``.deps``."""
    env = os.environ.get('NETREGRESS_DEPS')
    return Path(env).resolve() if env else repo_root() / '.deps'


def kernels_bin(environ: str) -> Path:
    """Where ``tools/bootstrap`` installs our kernels built with MPI build ``environ``."""
    return deps_dir() / 'kernels' / environ / 'bin'
