"""The one helper through which sanity and performance read a kernel's JSON result.

Every netregress kernel writes one JSON object with ``--json FILE`` (docs/DEVELOPING.md, docs/json-schema.md):
``schema``, ``tool``, ``status`` ("ok" | "error"), ``error`` on failure, and the measured records. Checks never
parse kernel output themselves; they call :func:`kernel_ok` (sanity) and :func:`value` / :func:`find` (performance)
with a key path into the document, so a schema change is adapted here once.

Key paths: dotted names, ``[N]`` list indices, and ``[key=value]`` selectors on lists of records, e.g.
``summary.throughput_mbps.median`` or ``sweep[size_bytes=1048576].throughput_mbps``.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import reframe.utility.sanity as sn
from reframe.core.exceptions import SanityError

SCHEMA_PREFIX = 'netregress-result/'
# a usage error where the check wrote the options itself: most often a prebuilt kernel older than the checkout
EXIT_CODES = {0: 'ok', 1: 'runtime failure', 3: 'validation failure (payload mismatch)',
              2: 'usage error (its message in the job\'s stderr; prebuilt kernels older than the checkout? '
                 'tools/bootstrap rebuilds them)'}
EXIT_MARK = 'netregress-exit:'
#: What a check writes into a failure that matches a declared known fault of its environment (the ``failure``
#: pattern of an environment's ``known_faults``): netregress_postrun.runreport does not fail a run for such a
#: case if it passed on a retry.
KNOWN_FAILURE_MARK = 'declared known fault of'
_TOKEN = re.compile(r'([^.\[\]]+)|\[(\d+)\]|\[([^=\]]+)=([^\]]+)\]')


class KernelResultError(Exception):
    """The result file is missing, not JSON, or not a netregress result."""


def load_result(path: str | Path) -> dict:
    """Parse a kernel result file; raise :class:`KernelResultError` with a readable cause."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise KernelResultError(f'kernel wrote no result file {path.name} (crashed, killed or never started?)') \
            from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise KernelResultError(f'{path.name} is not valid JSON ({err}); kernel interrupted?') from None
    if not isinstance(doc, dict):
        raise KernelResultError(f'{path.name}: top level is not an object')
    schema = str(doc.get('schema', ''))
    if not schema.startswith(SCHEMA_PREFIX):
        raise KernelResultError(f'{path.name}: schema {schema!r} is not {SCHEMA_PREFIX}*')
    return doc


def _parse_key(keypath: str) -> list[tuple]:
    tokens, pos = [], 0
    while pos < len(keypath):
        if keypath[pos] == '.':
            pos += 1
            continue
        m = _TOKEN.match(keypath, pos)
        if not m:
            raise KeyError(f'bad key path {keypath!r} at {pos}')
        if m.group(1) is not None:
            tokens.append(('key', m.group(1)))
        elif m.group(2) is not None:
            tokens.append(('index', int(m.group(2))))
        else:
            tokens.append(('select', m.group(3), m.group(4)))
        pos = m.end()
    return tokens


def _same(a: Any, b: str) -> bool:
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        try:
            return float(a) == float(b)
        except ValueError:
            return False
    return str(a) == b


def get(doc: Any, keypath: str) -> Any:
    """Follow ``keypath`` into ``doc``; raise KeyError naming the first missing step."""
    node, walked = doc, []
    for tok in _parse_key(keypath):
        if tok[0] == 'key':
            if not isinstance(node, dict) or tok[1] not in node:
                raise KeyError(f'{".".join(walked) or "<top>"} has no key {tok[1]!r}')
            node = node[tok[1]]
            walked.append(tok[1])
        elif tok[0] == 'index':
            if not isinstance(node, list) or tok[1] >= len(node):
                raise KeyError(f'{".".join(walked)} has no element [{tok[1]}]')
            node = node[tok[1]]
            walked.append(f'[{tok[1]}]')
        else:
            _, key, want = tok
            matches = [r for r in (node if isinstance(node, list) else [])
                       if isinstance(r, dict) and key in r and _same(r[key], want)]
            if len(matches) != 1:
                raise KeyError(f'{".".join(walked)}: {len(matches)} records with {key}={want} (need exactly 1)')
            node = matches[0]
            walked.append(f'[{key}={want}]')
    return node


def has(doc: Any, keypath: str) -> bool:
    try:
        get(doc, keypath)
        return True
    except KeyError:
        return False


_CANCELLED = re.compile(r'\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+ (DUE TO [A-Z ]+?) \*\*\*')


def scheduler_cancellation(stderr_text: str) -> str | None:
    """Slurm's reason for ending a job early (``DUE TO TIME LIMIT``, ``DUE TO NODE FAILURE``), or None."""
    m = _CANCELLED.search(stderr_text)
    return m.group(1) if m else None


_TASK_FAILED = re.compile(r'^srun: error: (\S+): (tasks? [\d,-]+): (.+?)\s*$', re.M)
# what --kill-on-bad-exit does to the other tasks once one has failed: a consequence, not a cause
_TASK_KILLED = ('Terminated', 'Killed')


def failed_tasks(stderr_text: str) -> list[str]:
    """srun's account of tasks that ended abnormally (``fast2 task 1: Segmentation fault``), causes first."""
    found = [f'{node} {tasks}: {what}' for node, tasks, what in _TASK_FAILED.findall(stderr_text)]
    causes = [f for f in found if not f.endswith(_TASK_KILLED)]
    return causes + [f for f in found if f not in causes]


_CORE_FILE = re.compile(r'^core(\.\d+)?$')


def core_files(directory: str | Path) -> list[str]:
    """Core files a crashed process left in ``directory`` (its working directory: the stage directory, kept for a
    failed test; the job script lifts the core size limit). Names ``core`` or ``core.PID``, the kernel's defaults."""
    try:
        return sorted(str(Path(directory) / n) for n in os.listdir(directory) if _CORE_FILE.match(n))
    except OSError:
        return []


def exit_status(stdout: str | Path) -> int:
    """The benchmark's exit status recorded by the job script (see :data:`EXIT_MARK`); SanityError if absent."""
    text = Path(stdout).read_text(errors='replace') if Path(stdout).exists() else ''
    codes = re.findall(rf'^{EXIT_MARK}\s*(\d+)', text, re.M)
    if not codes:
        raise SanityError('benchmark exit status not recorded: the job script died before the benchmark returned '
                          '(time limit, node failure or launcher error)')
    return int(codes[-1])


def describe_exit(code: int) -> str:
    """Meaning of an exit status: the kernels' own codes, 128+N for signal N, else the launcher's own code."""
    if code in EXIT_CODES:
        return EXIT_CODES[code]
    if 128 < code <= 128 + 64:
        return f'killed by signal {code - 128}'
    return 'launcher or MPI runtime failure'


@sn.deferrable
def kernel_ok(path: str | Path, stdout: str | Path | None = None, tool: str | None = None) -> bool:
    """Sanity: the kernel exited 0 (when ``stdout`` carries the exit mark), wrote a result, and says ok."""
    if stdout is not None:
        code = exit_status(stdout)
        if code != 0:
            msg = f'kernel exited with {code} ({describe_exit(code)})'
            try:
                doc = load_result(path)
                if doc.get('error'):
                    msg += f': {doc["error"]}'
            except KernelResultError:
                pass
            raise SanityError(msg)
    try:
        doc = load_result(path)
    except KernelResultError as err:
        raise SanityError(str(err)) from None
    if tool is not None and doc.get('tool') != tool:
        raise SanityError(f'result was written by {doc.get("tool")!r}, expected {tool!r}')
    if doc.get('status') != 'ok':
        raise SanityError(f'kernel reports status {doc.get("status")!r}: {doc.get("error", "no error message")}')
    return True


@sn.deferrable
def value(path: str | Path, keypath: str) -> float:
    """Performance: one number from the result; a missing key is an error naming it."""
    doc = load_result(path)
    try:
        val = get(doc, keypath)
    except KeyError as err:
        raise SanityError(f'result {Path(path).name}: {err.args[0]}') from None
    if isinstance(val, bool) or not isinstance(val, (int, float)):
        raise SanityError(f'result {Path(path).name}: {keypath} is {val!r}, not a number')
    return float(val)


@sn.deferrable
def find(path: str | Path, keypath: str) -> Any:
    """Any value from the result (for derived quantities and provenance)."""
    doc = load_result(path)
    try:
        return get(doc, keypath)
    except KeyError as err:
        raise SanityError(f'result {Path(path).name}: {err.args[0]}') from None


def payload_bytes(doc: dict) -> float:
    """Bytes the kernel says it moved between the ranks (a lower bound for the interface counters).

    In order: a top-level ``payload_bytes`` or ``bytes_moved`` number (nr-mpitest); the ``bytes`` object
    (``{role: N}``, each side's own count over all measured repetitions / sweep points, nr-tcptest; the smaller
    count is taken); otherwise the sum of: the first ``bytes_<role>`` of every ``repetitions`` entry,
    ``size_bytes * iterations`` of the ``sweep`` points, two messages per ``latency`` round trip, the bytes the
    paper's formula counts for every nr-mpicoll point (total rate x time per operation x iterations), and one
    message per nr-ebb connection.
    """
    for key in ('payload_bytes', 'bytes_moved'):
        if isinstance(doc.get(key), (int, float)) and not isinstance(doc.get(key), bool):
            return float(doc[key])
    counted = doc.get('bytes')
    if isinstance(counted, dict):
        values = [float(v) for v in counted.values() if isinstance(v, (int, float))]
        if values:
            return min(values)
    total = 0.0
    for rep in doc.get('repetitions') or []:
        moved = [v for k, v in rep.items() if k.startswith('bytes_') and isinstance(v, (int, float))]
        if moved:
            total += float(moved[0])
    for point in doc.get('sweep') or []:
        total += float(point.get('size_bytes', 0)) * float(point.get('iterations', 0))
    lat = doc.get('latency')
    if isinstance(lat, dict):
        total += 2.0 * float(lat.get('size_bytes', 0)) * float(lat.get('iterations', 0))
    for test in doc.get('tests') or []:                     # nr-mpicoll
        for p in test.get('points') or []:
            kbps, t_us, n = p.get('total_rate_kbps'), p.get('time_per_op_us'), p.get('iterations')
            if all(isinstance(v, (int, float)) for v in (kbps, t_us, n)):
                total += kbps * 1000.0 * t_us * 1e-6 * n
    sizes = doc.get('sizes')
    if isinstance(sizes, list):                             # nr-ebb
        for s in sizes:
            if isinstance(s, dict):
                total += float(s.get('size_bytes', 0)) * float(s.get('connections', 0))
    return total


def hosts(doc: dict) -> list[str]:
    """Distinct host names the kernel ran on (``hosts`` is ``{role: name}``; a list of names is accepted too)."""
    raw = doc.get('hosts') or {}
    names = raw.values() if isinstance(raw, dict) else raw
    out: list[str] = []
    for name in names:
        if isinstance(name, str) and name and name not in out:
            out.append(name)
    return out
