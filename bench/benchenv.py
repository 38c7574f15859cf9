"""The bench scripts run under the project's Python, as the tools do (tools/lib/common.sh): the venv tools/bootstrap
made, with numpy, ReFrame and the library. Started by another Python (``bench/x.py`` finds /usr/bin/python3 through
its #! line), a script starts itself again under the venv's; without a venv it goes on, and its imports say what is
missing."""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def use_project_python() -> None:
    venv = Path(os.environ.get('NETREGRESS_DEPS') or ROOT / '.deps') / 'venv'
    python = venv / 'bin' / 'python'
    if os.path.realpath(sys.prefix) == os.path.realpath(venv) or not os.access(python, os.X_OK):
        return
    os.execv(str(python), [str(python), *sys.argv])
