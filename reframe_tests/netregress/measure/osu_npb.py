"""Parsers for the OSU Micro-Benchmarks and NAS Parallel Benchmarks (MPI) text output, parsed here once.

OSU (7.x, MPI benchmarks; ``-c`` turns data validation on)::

    # OSU MPI Latency Test v7.4
    # Datatype: MPI_CHAR.
    # Size          Latency (us)          Validation
    1                       1.63                Pass

The header names the columns (``Latency (us)``, ``Bandwidth (MB/s)``, ``MB/s`` + ``Messages/s`` for osu_mbw_mr,
``Avg Latency(us)`` [+ ``Min Latency(us)``, ``Max Latency(us)``, ``Iterations`` with ``-f``] for collectives,
``Validation`` with ``-c``); every row is a message size followed by those columns. A validation failure prints
``Fail`` in its row and rank 0 then ends with ``DATA VALIDATION ERROR: <argv0> exited with status 1 on message size
N.`` A run cut short (killed, timed out, crashed rank) simply stops after some size: :func:`osu_problems` compares
the last size with the ``-m`` maximum the check asked for.

NPB (3.4, MPI; the Fortran/C ``print_results``)::

     CG Benchmark Completed.
     Class           =                        S
     Size            =                     1400
     Iterations      =                       15
     Time in seconds =                     0.05
     Total processes =                        4
     Active processes=                        4
     Mop/s total     =                  1234.56
     Mop/s/process   =                   308.64
     Operation type  =           floating point
     Verification    =               SUCCESSFUL
     Version         =                    3.4.1

Units in key names: ``latency_us``, ``bandwidth_mbs`` (OSU's MB/s = 10^6 bytes/s), ``message_rate`` (messages/s),
``mops_total``.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import reframe.utility.sanity as sn
from reframe.core.exceptions import SanityError

# -- OSU -------------------------------------------------------------------------------------------------------

#: OSU column header -> our key (units in the key name).
OSU_COLUMNS = {
    'latency (us)': 'latency_us',
    'avg latency(us)': 'latency_us',
    'min latency(us)': 'min_latency_us',
    'max latency(us)': 'max_latency_us',
    'iterations': 'iterations',
    'bandwidth (mb/s)': 'bandwidth_mbs',
    'mb/s': 'bandwidth_mbs',
    'messages/s': 'message_rate',
    'transmit size': 'transmit_bytes',
    'validation': 'validation',
}

#: Benchmarks the suite runs: executable -> (subdirectory under libexec/osu-micro-benchmarks/mpi, metrics, ranks)
#: ``ranks`` is the fixed number of processes the benchmark needs (None: any number >= 2).
OSU_BENCHMARKS = {
    'osu_latency': ('pt2pt', ('latency_us',), 2),
    'osu_bw': ('pt2pt', ('bandwidth_mbs',), 2),
    'osu_bibw': ('pt2pt', ('bandwidth_mbs',), 2),
    'osu_mbw_mr': ('pt2pt', ('bandwidth_mbs', 'message_rate'), None),
    'osu_allreduce': ('collective', ('latency_us',), None),
    'osu_alltoall': ('collective', ('latency_us',), None),
    'osu_bcast': ('collective', ('latency_us',), None),
}

#: The benchmarks that send a window of 64 messages per iteration.
OSU_WINDOW_BENCHMARKS = ('osu_bw', 'osu_bibw', 'osu_mbw_mr')
#: OSU 7.x's own measured iterations (small, large) when no ``-i`` is given (c/util/osu_util.h ``BW_LOOP_*``,
#: ``LAT_LOOP_*``, ``COLL_LOOP_*``): a benchmark switches to the large count above ``LARGE_MESSAGE_SIZE`` (8 KiB),
#: but osu_mbw_mr keeps the small one at every size.
OSU_WINDOW_ITERATIONS = (100, 20)
OSU_LATENCY_ITERATIONS = (10000, 1000)
OSU_COLLECTIVE_ITERATIONS = (1000, 100)
OSU_LARGE_MESSAGE = 8192


def osu_default_iterations(benchmark: str, size: int) -> int:
    """Measured iterations OSU itself runs of ``benchmark`` at message ``size`` (no ``-i``)."""
    if benchmark not in OSU_BENCHMARKS:
        raise ValueError(f'{benchmark} is not an OSU benchmark this suite runs ({", ".join(OSU_BENCHMARKS)})')
    if benchmark in OSU_WINDOW_BENCHMARKS:
        small, large = OSU_WINDOW_ITERATIONS
    elif OSU_BENCHMARKS[benchmark][0] == 'collective':
        small, large = OSU_COLLECTIVE_ITERATIONS
    else:
        small, large = OSU_LATENCY_ITERATIONS
    return large if size > OSU_LARGE_MESSAGE and benchmark != 'osu_mbw_mr' else small


_OSU_TITLE = re.compile(r'^#\s*(OSU MPI.*?)(?:\s+v(\d[\w.\-]*))?\s*$')
_OSU_HEADER = re.compile(r'^#\s*Size\s{2,}(.*\S)\s*$')
_OSU_ROW = re.compile(r'^\s*(\d+)\s+(\S.*?)\s*$')
_OSU_VALIDATION_ERROR = re.compile(r'DATA VALIDATION ERROR:.*?message size\s+(\d+)', re.I)


@dataclass
class OsuResult:
    """One OSU run: title, version, column keys and one dict per message size (in output order)."""
    title: str = ''
    version: str = ''
    columns: list[str] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    #: Message sizes named by ``DATA VALIDATION ERROR`` lines.
    validation_errors: list[int] = field(default_factory=list)

    @property
    def validated(self) -> bool:
        """The run had validation on (``-c``): a Validation column."""
        return 'validation' in self.columns

    @property
    def sizes(self) -> list[int]:
        return [r['size_bytes'] for r in self.rows]

    def value(self, key: str, size: int) -> float:
        """``key`` at message size ``size``; SanityError naming what is there instead."""
        for row in self.rows:
            if row['size_bytes'] == size:
                if key not in row:
                    raise SanityError(f'OSU output has no {key} column (columns: {", ".join(self.columns)})')
                return float(row[key])
        raise SanityError(f'OSU output has no row for {size} bytes (sizes: {_span(self.sizes)})')

    def failed_sizes(self) -> list[int]:
        return [r['size_bytes'] for r in self.rows if r.get('validation', 'Pass') != 'Pass']


def _span(sizes: list[int]) -> str:
    return f'{sizes[0]}..{sizes[-1]}' if sizes else 'none'


def _column_key(name: str) -> str:
    name = name.strip()
    return OSU_COLUMNS.get(name.lower(), re.sub(r'[^a-z0-9]+', '_', name.lower()).strip('_'))


def parse_osu(text: str) -> OsuResult:
    """Parse OSU output (stdout of rank 0). Only the first table (first datatype) is read."""
    res = OsuResult()
    in_table = False
    for line in text.splitlines():
        m = _OSU_TITLE.match(line)
        if m and not res.title:
            res.title, res.version = m.group(1).strip(), m.group(2) or ''
            continue
        m = _OSU_HEADER.match(line)
        if m:
            if res.columns:          # a second table (another datatype): not ours
                break
            res.columns = [_column_key(c) for c in re.split(r'\s{2,}', m.group(1))]
            in_table = True
            continue
        m = _OSU_VALIDATION_ERROR.search(line)
        if m:
            res.validation_errors.append(int(m.group(1)))
            continue
        if not in_table:
            continue
        m = _OSU_ROW.match(line)
        if not m:
            continue
        fields = m.group(2).split()
        if len(fields) < len(res.columns):       # a row cut off mid-line
            continue
        row: dict = {'size_bytes': int(m.group(1))}
        try:
            for key, raw in zip(res.columns, fields):
                row[key] = raw if key == 'validation' else float(raw)
        except ValueError:
            continue                              # interleaved diagnostics, not a data row
        res.rows.append(row)
    return res


def osu_problems(res: OsuResult, *, max_size: int | None = None, validate: bool = True,
                 metrics: tuple[str, ...] = ()) -> list[str]:
    """Everything wrong with an OSU run, as messages (empty list: sane)."""
    if not res.columns:
        return ['OSU printed no result table (no "# Size" header): the benchmark did not start']
    problems = []
    if not res.rows:
        problems.append('OSU printed a header but no result rows')
    for key in metrics:
        if key not in res.columns:
            problems.append(f'OSU table has no {key} column (columns: {", ".join(res.columns)})')
    if validate and not res.validated:
        problems.append('OSU ran without data validation (no Validation column; run with -c)')
    failed = res.failed_sizes()
    if failed:
        problems.append(f'OSU data validation failed at {len(failed)} size(s): {", ".join(map(str, failed))} bytes')
    for size in res.validation_errors:
        if size not in failed:
            problems.append(f'OSU reported DATA VALIDATION ERROR at {size} bytes')
    if max_size is not None and res.rows and res.sizes[-1] < max_size:
        problems.append(f'OSU output ends at {res.sizes[-1]} bytes, expected up to {max_size}: output truncated '
                        f'(benchmark killed or crashed)')
    return problems


def read_text(path: str) -> str:
    try:
        with open(path, errors='replace') as fp:
            return fp.read()
    except FileNotFoundError:
        raise SanityError(f'{os.path.basename(path)} was not written') from None


@sn.deferrable
def osu_value(path: str, key: str, size: int) -> float:
    """Deferred: ``key`` at ``size`` from the OSU output in ``path``."""
    return parse_osu(read_text(path)).value(key, size)


# -- NPB -------------------------------------------------------------------------------------------------------

#: NPB kernels and pseudo-applications the suite runs.
NPB_NAMES = ('is', 'ep', 'cg', 'mg', 'ft', 'lu', 'bt', 'sp')
#: Benchmarks that need a square number of processes (the others: a power of two).
NPB_SQUARE = ('bt', 'sp')

_NPB_FIELD = re.compile(r'^\s*([A-Za-z/ ]+?)\s*=\s*(.*?)\s*$')
_NPB_COMPLETED = re.compile(r'^\s*([A-Z]{2})\s+Benchmark Completed', re.M)
_NPB_KEYS = {
    'class': 'class', 'size': 'size', 'iterations': 'iterations', 'time in seconds': 'time_s',
    'total processes': 'total_processes', 'active processes': 'active_processes',
    'mop/s total': 'mops_total', 'mop/s/process': 'mops_per_process', 'operation type': 'operation_type',
    'verification': 'verification', 'version': 'version',
}
_NPB_NUMERIC = {'iterations': int, 'time_s': float, 'total_processes': int, 'active_processes': int,
                'mops_total': float, 'mops_per_process': float}


def npb_accepts(name: str, nprocs: int) -> bool:
    """Whether NPB benchmark ``name`` runs on ``nprocs`` processes (BT/SP: square; others: power of two)."""
    if nprocs < 1:
        return False
    if name.lower() in NPB_SQUARE:
        root = int(round(nprocs ** 0.5))
        return root * root == nprocs
    return nprocs & (nprocs - 1) == 0


#: NPB 3.4 MPI benchmarks written in C (the others are Fortran and need the MPI's Fortran bindings).
NPB_C = ('is',)


def npb_cases(procs: tuple[int, ...]) -> list[tuple[str, int]]:
    """(benchmark, processes) per NPB benchmark: the smallest of ``procs`` it accepts (none accepted: left out)."""
    return [(name, next(n for n in procs if npb_accepts(name, n))) for name in NPB_NAMES
            if any(npb_accepts(name, n) for n in procs)]


def parse_npb(text: str) -> dict:
    """The ``<XX> Benchmark Completed.`` block as a dict (empty when the run never got there)."""
    m = _NPB_COMPLETED.search(text)
    if not m:
        return {}
    out: dict = {'benchmark': m.group(1).lower()}
    for line in text[m.end():].splitlines():
        fm = _NPB_FIELD.match(line)
        if not fm:
            continue
        key = _NPB_KEYS.get(fm.group(1).strip().lower())
        if key is None or key in out:
            continue
        value = fm.group(2)
        conv = _NPB_NUMERIC.get(key)
        try:
            out[key] = conv(value) if conv else value
        except ValueError:
            out[key] = value
    if 'size' in out:
        out['size'] = re.sub(r'\s+', '', out['size'])      # '64x  64x  64' -> '64x64x64'
    return out


def npb_problems(res: dict, *, name: str, npb_class: str, nprocs: int) -> list[str]:
    """Everything wrong with an NPB run (empty list: sane)."""
    if not res:
        return [f'NPB {name.upper()} printed no "Benchmark Completed" block: run aborted or output truncated']
    problems = []
    if res.get('benchmark') != name.lower():
        problems.append(f'output is from NPB {res.get("benchmark", "?").upper()}, expected {name.upper()}')
    verification = res.get('verification')
    if verification is None:
        problems.append(f'NPB {name.upper()} printed no Verification line: output truncated')
    elif verification != 'SUCCESSFUL':
        problems.append(f'NPB {name.upper()} class {res.get("class", "?")} verification {verification}')
    if res.get('class') != npb_class:
        problems.append(f'NPB ran class {res.get("class")}, expected {npb_class}')
    if res.get('total_processes') not in (None, nprocs):
        problems.append(f'NPB ran on {res["total_processes"]} processes, expected {nprocs}')
    if 'mops_total' not in res:
        problems.append('NPB printed no "Mop/s total"')
    return problems


@sn.deferrable
def npb_value(path: str, key: str = 'mops_total') -> float:
    """Deferred: a numeric field of the NPB result block in ``path``."""
    res = parse_npb(read_text(path))
    if key not in res:
        raise SanityError(f'NPB output has no {key}')
    return float(res[key])
