"""The bench scripts run under the project's Python, picked as the tools pick it (tools/lib/common.sh
``nr_pick_python``: the venv tools/bootstrap made, with numpy, ReFrame and the library; else ``NETREGRESS_PYTHON``,
a site's own). Started by another Python (``bench/x.py`` finds /usr/bin/python3 through its #! line), a script
starts itself again under that one, once; with neither, it goes on where this Python has what the scripts import,
and stops with one line saying how to get it where not."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: set for the script started again: an interpreter that reports another prefix than its venv's is not asked twice
AGAIN = 'NETREGRESS_BENCH_REEXEC'


def project_python() -> str | None:
    """The first of the venv's Python and ``NETREGRESS_PYTHON`` that can run (the order of nr_pick_python)."""
    venv_python = Path(os.environ.get('NETREGRESS_DEPS') or ROOT / '.deps') / 'venv' / 'bin' / 'python'
    for candidate in (str(venv_python), os.environ.get('NETREGRESS_PYTHON', '')):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def use_project_python() -> None:
    if os.environ.pop(AGAIN, None):          # started again already; what this script starts may ask anew
        return
    python = project_python()
    if python is None:
        lacking = [m for m in ('numpy', 'yaml') if importlib.util.find_spec(m) is None]
        if lacking:
            print(f'{Path(sys.argv[0]).name}: {sys.executable} has no {", ".join(lacking)} and there is no project '
                  f'venv: run tools/bootstrap, or name a Python that has them in NETREGRESS_PYTHON', file=sys.stderr)
            sys.exit(2)
        return
    if os.path.abspath(sys.executable) == os.path.abspath(python):
        return
    os.environ[AGAIN] = '1'
    os.execv(python, [python, *sys.argv])
