"""What one link-test job measured: the directed-pair rates, read once, in 4 bytes a direction of N x N or in 8 bytes
a direction measured.

``linkmatrix.bin`` (nr-linkmap writes it beside its JSON result; :func:`write_matrix` for today's kernels, from
the JSON's rounds) has two forms, little-endian. nr-linkmap writes whichever is smaller: the dense one for a plan
that runs most directions (the full plan), the sparse one for a plan that runs a small part of N x N (the
topology and sample plans). The dense form::

    8 bytes   magic  "NRLMAT1\\0"
    uint32    n      ranks
    uint32    flags  0
    n x n     float32 Mbit/s, row = sender rank, column = receiver rank; NaN: not measured (the diagonal too),
              -1.0: the direction failed or moved nothing in a round that ran it

The sparse form, the measured directions only (a row of offsets, then a column of receivers and one of figures)::

    8 bytes   magic  "NRLMAT2\\0"
    uint32    n      ranks
    uint32    layout 1 (sparse)
    uint64    count  directions listed
    n + 1 x uint64   row offsets: sender s's directions are entries offsets[s] .. offsets[s + 1] - 1
    count x uint32   their receivers, ascending within a row, never the sender
    count x float32  their figures, Mbit/s (-1.0 failed, as above; never NaN: a direction not measured is not listed)

The sparse file is 24 + 8 x (n + 1) + 8 x count bytes: a plan of 2,880,000 directions at 10,000 nodes 23 MB where
the dense one is 400 MB (16 + 4 x n x n; 4 MB at 1,000 nodes). A direction's figure is its best round (its rate
after the warm-up where the stream had one, else its whole rate), so a plan's passes and a recheck count their
best; a round that failed fails the direction whatever the others read. Either form is read as memory maps
(:func:`read_matrix`), not parsed: the dense one as an (n, n) array, the sparse one as :class:`SparseMatrix`, whose
arrays are the file's own; nothing N x N is built for it.

:class:`LinkData` is the matrix with what the JSON result adds about its directions: the host of each rank, the
error of each failed direction, the directions measured again alone (``recheck.pairs`` whose ``streams`` is 1, or
that have none), those measured again with every switch cable of their way to themselves (alone, or in a batch
nr-linkmap built from the switch tree: ``recheck.batches`` ``cables``) and the bytes each node moved.
:func:`from_result` reads both forms: the result that keeps the matrix in ``linkmatrix.bin`` and only the suspect
directions in full, and the older one that lists every pair of every round. :func:`cells` gives the verdict and the
report one way through either form: by blocks of rows, of links, of columns.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping, Union

import numpy as np

MATRIX_FILE = 'linkmatrix.bin'
MAGIC = b'NRLMAT1\0'
SPARSE_MAGIC = b'NRLMAT2\0'
HEADER = struct.Struct('<8sII')
SPARSE_HEADER = struct.Struct('<8sIIQ')
#: The sparse form's layout word.
SPARSE = 1
#: The figure of a direction that failed or moved nothing.
FAILED = -1.0
#: Rows (dense) read at once, and entries (sparse) worked on at once: a block's arrays stay a few MB.
BLOCK_ROWS, BLOCK_CELLS = 64, 1 << 20


class LinkMatrixError(Exception):
    """A matrix file or result that cannot be read; the message names the file and what is wrong."""


def sparse_smaller(n: int, count: int) -> bool:
    """True when ``count`` directions of ``n`` ranks take fewer bytes in the sparse form than in the dense one (the
    rule nr-linkmap's writer follows, lm_sparse_smaller)."""
    return SPARSE_HEADER.size + 8 * (n + 1) + 8 * count < HEADER.size + 4 * n * n


@dataclass(frozen=True)
class SparseMatrix:
    """The measured directions of n ranks: sender s's at entries ``offsets[s]`` .. ``offsets[s + 1] - 1``, their
    ``receivers`` (ascending within a row) and ``values`` (Mbit/s, :data:`FAILED`), as the sparse file holds them
    (memory maps when read from one). Reads like the dense matrix through :func:`cells`; :meth:`get` looks
    directions up by binary search over the entries' keys (sender x n + receiver, ascending)."""
    n: int
    offsets: np.ndarray
    receivers: np.ndarray
    values: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    @property
    def count(self) -> int:
        return len(self.values)

    def senders(self, i0: int = 0, i1: int | None = None) -> np.ndarray:
        """The sender of each entry from ``i0`` to ``i1`` (default: all)."""
        i1 = self.count if i1 is None else i1
        first = int(np.searchsorted(self.offsets, i0, side='right')) - 1
        last = int(np.searchsorted(self.offsets, i1, side='left'))
        bounds = np.clip(np.asarray(self.offsets[first:last + 1], dtype=np.int64), i0, i1)
        return np.repeat(np.arange(first, first + len(bounds) - 1, dtype=np.int64), np.diff(bounds))

    def keys(self, i0: int = 0, i1: int | None = None) -> np.ndarray:
        i1 = self.count if i1 is None else i1
        return self.senders(i0, i1) * self.n + np.asarray(self.receivers[i0:i1], dtype=np.int64)

    def get(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """The figures of directions ``src`` -> ``dst`` (NaN where not measured): per direction a binary search
        within its sender's row."""
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        offsets = np.asarray(self.offsets, dtype=np.int64)
        lo, end = offsets[src], offsets[src + 1]
        hi = end.copy()
        out = np.full(len(src), np.nan, dtype=np.float32)
        # a vectorised binary search: every lookup halves its own range [lo, hi) until it is empty
        while True:
            live = lo < hi
            if not live.any():
                break
            mid = (lo + hi) // 2
            below = np.zeros(len(src), dtype=bool)
            below[live] = np.asarray(self.receivers[mid[live]], dtype=np.int64) < dst[live]
            lo = np.where(live & below, mid + 1, lo)
            hi = np.where(live & ~below, mid, hi)
        there = lo < end
        found = np.zeros(len(src), dtype=bool)
        found[there] = np.asarray(self.receivers[lo[there]], dtype=np.int64) == dst[there]
        out[found] = self.values[lo[found]]
        return out

    @classmethod
    def from_dense(cls, matrix: np.ndarray) -> SparseMatrix:
        """The directions of a dense matrix that have a figure (not NaN, off the diagonal)."""
        m = np.array(matrix, dtype=np.float32)
        np.fill_diagonal(m, np.nan)
        s, d = np.nonzero(~np.isnan(m))
        offsets = np.zeros(len(m) + 1, dtype=np.uint64)
        offsets[1:] = np.cumsum(np.bincount(s, minlength=len(m)))
        return cls(len(m), offsets, d.astype(np.uint32), m[s, d])

    def dense(self) -> np.ndarray:
        """The (n, n) matrix (small matrices: tests)."""
        m = np.full((self.n, self.n), np.nan, dtype=np.float32)
        m[self.senders(), np.asarray(self.receivers, dtype=np.int64)] = self.values
        return m


Matrix = Union[np.ndarray, SparseMatrix]


class DenseCells:
    """The dense matrix read by blocks (:func:`cells`)."""

    def __init__(self, matrix: np.ndarray):
        self.m, self.n = matrix, matrix.shape[0]

    def rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(index into ``rows``, receiver, figure) of every measured direction from the ranks ``rows``."""
        raw = np.asarray(self.m[rows])
        r, c = np.nonzero(~np.isnan(raw))
        return r, c, raw[r, c]

    def links(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Blocks of (a, b, a -> b, b -> a): every link with a positive figure in one direction at least, once."""
        m, n = self.m, self.n
        for i0 in range(0, n, BLOCK_ROWS):
            i1 = min(n, i0 + BLOCK_ROWS)
            rows, cols = np.asarray(m[i0:i1]), np.asarray(m[:, i0:i1]).T
            upper = np.arange(n)[None, :] > np.arange(i0, i1)[:, None]
            r, c = np.nonzero(((rows > 0) | (cols > 0)) & upper)
            yield i0 + r, c, rows[r, c], cols[r, c]

    def columns(self) -> Iterator[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]:
        """Blocks of (j0, j1, sender, receiver - j0, figure): the positive directions into ranks j0 .. j1 - 1."""
        for j0 in range(0, self.n, BLOCK_ROWS):
            j1 = min(self.n, j0 + BLOCK_ROWS)
            raw = np.asarray(self.m[:, j0:j1])
            r, c = np.nonzero(raw > 0)
            yield j0, j1, r, c, raw[r, c]


class SparseCells:
    """The sparse matrix read by blocks of entries (:func:`cells`): the same blocks as :class:`DenseCells`, each in
    time and memory linear in its entries."""

    def __init__(self, matrix: SparseMatrix):
        self.m, self.n = matrix, matrix.n

    def rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        off = np.asarray(self.m.offsets, dtype=np.int64)
        rows = np.asarray(rows, dtype=np.int64)
        lengths = off[rows + 1] - off[rows]
        r = np.repeat(np.arange(len(rows)), lengths)
        # each entry's place: its row's first entry plus its rank within the row
        at = np.repeat(off[rows], lengths) + np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths,
                                                                                         lengths)
        c, v = np.asarray(self.m.receivers[at], dtype=np.int64), np.asarray(self.m.values[at])
        keep = ~np.isnan(v)
        return r[keep], c[keep], v[keep]

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(sender, receiver, figure) of every entry, :data:`BLOCK_CELLS` at a time."""
        for i0 in range(0, self.m.count, BLOCK_CELLS):
            i1 = min(self.m.count, i0 + BLOCK_CELLS)
            v = np.asarray(self.m.values[i0:i1])
            keep = ~np.isnan(v)
            yield (self.m.senders(i0, i1)[keep], np.asarray(self.m.receivers[i0:i1], dtype=np.int64)[keep],
                   v[keep])

    def links(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        # a link from its entry a -> b with a < b, or from b -> a where a -> b is not listed
        for s, d, v in self.blocks():
            back = self.m.get(d, s)
            once = (s < d) | ((s > d) & np.isnan(back))
            keep = once & ((v > 0) | (back > 0))
            yield s[keep], d[keep], v[keep], back[keep]

    def columns(self) -> Iterator[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]:
        for s, d, v in self.blocks():
            ok = v > 0
            yield 0, self.n, s[ok], d[ok], v[ok]


def cells(matrix: Matrix) -> DenseCells | SparseCells:
    """Either form of the matrix, read by blocks of rows, links and columns."""
    return SparseCells(matrix) if isinstance(matrix, SparseMatrix) else DenseCells(matrix)


def read_matrix(path: Path | str, nodes: int | None = None) -> Matrix:
    """The matrix of ``path`` as read-only memory maps: the dense form as an (n, n) float32 array, the sparse one as
    :class:`SparseMatrix` (its offsets, receivers and keys checked in one pass: ascending, inside the matrix, off
    the diagonal); :class:`LinkMatrixError` naming the file when its magic, layout, size or entries are wrong, or
    when it holds another number of ranks than ``nodes``."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with path.open('rb') as fp:
            head = fp.read(SPARSE_HEADER.size)
    except OSError as err:
        raise LinkMatrixError(f'{path}: cannot read ({err.strerror or err})') from None
    if len(head) < HEADER.size:
        raise LinkMatrixError(f'{path}: {size} bytes, shorter than the {HEADER.size}-byte header')
    magic, n, flags = HEADER.unpack(head[:HEADER.size])
    if magic not in (MAGIC, SPARSE_MAGIC):
        raise LinkMatrixError(f'{path}: not a link matrix (magic {magic!r}, expected {MAGIC!r} or {SPARSE_MAGIC!r})')
    if nodes is not None and n != nodes:
        raise LinkMatrixError(f'{path}: {n} ranks, but the result names {nodes} nodes')
    if magic == SPARSE_MAGIC:
        return _read_sparse(path, size, head, n, flags)
    if flags != 0:
        raise LinkMatrixError(f'{path}: flags {flags:#x} unknown to this reader (0 expected)')
    if size != HEADER.size + 4 * n * n:
        raise LinkMatrixError(f'{path}: {size} bytes, but {n} ranks need {HEADER.size + 4 * n * n}')
    if n == 0:
        return np.zeros((0, 0), dtype=np.float32)
    return np.memmap(path, dtype='<f4', mode='r', offset=HEADER.size, shape=(n, n))


def _read_sparse(path: Path, size: int, head: bytes, n: int, layout: int) -> SparseMatrix:
    if layout != SPARSE:
        raise LinkMatrixError(f'{path}: layout {layout:#x} unknown to this reader ({SPARSE} expected: sparse)')
    if len(head) < SPARSE_HEADER.size:
        raise LinkMatrixError(f'{path}: {size} bytes, shorter than the {SPARSE_HEADER.size}-byte sparse header')
    count = SPARSE_HEADER.unpack(head)[3]
    want = SPARSE_HEADER.size + 8 * (n + 1) + 8 * count
    if size != want:
        raise LinkMatrixError(f'{path}: {size} bytes, but {n} ranks and {count} directions need {want}')
    at = SPARSE_HEADER.size
    offsets = np.memmap(path, dtype='<u8', mode='r', offset=at, shape=(n + 1,))
    receivers = np.memmap(path, dtype='<u4', mode='r', offset=at + 8 * (n + 1), shape=(count,)) if count else \
        np.zeros(0, dtype=np.uint32)
    values = np.memmap(path, dtype='<f4', mode='r', offset=at + 8 * (n + 1) + 4 * count, shape=(count,)) if count \
        else np.zeros(0, dtype=np.float32)
    if offsets[0] != 0 or offsets[n] != count or (np.diff(offsets.astype(np.int64)) < 0).any():
        raise LinkMatrixError(f'{path}: its row offsets do not run from 0 up to its {count} directions')
    m = SparseMatrix(n, offsets, receivers, values)
    last = -1
    for i0 in range(0, count, BLOCK_CELLS):     # keys ascending: rows in order, no direction twice
        i1 = min(count, i0 + BLOCK_CELLS)
        s, keys = m.senders(i0, i1), m.keys(i0, i1)
        d = keys - s * n
        bad = (d >= n) | (d == s) | (np.diff(keys, prepend=last) <= 0)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise LinkMatrixError(f'{path}: direction {i0 + k} ({int(s[k])} -> {int(d[k])}) is not a new '
                                  f'receiver of its sender below {n}, in ascending order')
        last = int(keys[-1]) if len(keys) else last
    return m


def write_matrix(path: Path | str, matrix: Matrix) -> None:
    """Write ``matrix`` ((n, n) array or :class:`SparseMatrix`) in the smaller form of :func:`read_matrix` (the
    directions with a figure)."""
    if not isinstance(matrix, SparseMatrix):
        dense = np.asarray(matrix, dtype='<f4')
        if dense.ndim != 2 or dense.shape[0] != dense.shape[1]:
            raise ValueError(f'a link matrix is square, not {dense.shape}')
        off_diagonal = int(np.count_nonzero(~np.isnan(dense)) - np.count_nonzero(~np.isnan(np.diagonal(dense))))
        if not sparse_smaller(len(dense), off_diagonal):
            with open(path, 'wb') as fp:
                fp.write(HEADER.pack(MAGIC, dense.shape[0], 0))
                dense.tofile(fp)
            return
        matrix = SparseMatrix.from_dense(dense)
    with open(path, 'wb') as fp:
        fp.write(SPARSE_HEADER.pack(SPARSE_MAGIC, matrix.n, SPARSE, matrix.count))
        np.asarray(matrix.offsets, dtype='<u8').tofile(fp)
        np.asarray(matrix.receivers, dtype='<u4').tofile(fp)
        np.asarray(matrix.values, dtype='<f4').tofile(fp)


@dataclass
class LinkData:
    """One job's measurements: the matrix by rank (:func:`read_matrix`: dense ``matrix[src, dst]``, or sparse), the
    host of each rank, and from the JSON result the failed directions' errors, the directions measured again alone
    (``rechecked``: they confirm what they name), those measured again without sharing a switch cable
    (``uncontended``: the alone ones and a tree-built batch's; None: the alone ones) and each host's bytes."""
    nodes: list[str]
    matrix: Matrix
    errors: dict[tuple[int, int], str] = field(default_factory=dict)
    rechecked: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))
    bytes_per_host: dict[str, float] = field(default_factory=dict)
    uncontended: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.nodes)


def _figure(pair: Mapping) -> float:
    """A pair's rate as the verdict reads it: after the warm-up where the stream had one, else its whole rate;
    :data:`FAILED` for a pair that failed or moved nothing."""
    mbps = pair.get('steady_mbps')
    if not isinstance(mbps, (int, float)) or not mbps > 0:       # a stream too short for a warm-up
        mbps = pair.get('mbps')
    if pair.get('status') != 'ok' or not isinstance(mbps, (int, float)) or not mbps > 0 or math.isinf(mbps):
        return FAILED
    return float(mbps)


def _rank(value, n: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n:
        raise LinkMatrixError(f'{what}: rank {value!r} is not one of the {n} ranks')
    return value


def matrix_from_rounds(doc: Mapping, n: int) -> tuple[np.ndarray, dict[tuple[int, int], str], dict[int, float]]:
    """(matrix, errors, bytes per rank) from today's result, which lists every pair of every round."""
    matrix = np.full((n, n), np.nan, dtype=np.float32)
    errors: dict[tuple[int, int], str] = {}
    moved = np.zeros(n)
    for rnd in doc.get('rounds') or []:
        index = rnd.get('index', '?')
        for p in rnd.get('pairs') or []:
            src, dst = _rank(p.get('src'), n, f'round {index}'), _rank(p.get('dst'), n, f'round {index}')
            value, cell = _figure(p), matrix[src, dst]
            if value == FAILED:
                matrix[src, dst] = FAILED
                errors.setdefault((src, dst), f'round {index}: {p.get("error") or "moved nothing"}')
            elif not cell == FAILED and not value <= cell:          # NaN or slower so far
                matrix[src, dst] = value
            try:
                moved[[src, dst]] += float(p.get('bytes') or 0)
            except (TypeError, ValueError):
                pass
    return matrix, errors, {r: float(b) for r, b in enumerate(moved)}


def from_result(doc: Mapping, where: Path | str) -> LinkData:
    """The measurements of an nr-linkmap result ``doc`` whose files are in directory ``where``: the matrix from
    ``linkmatrix.bin`` there when the result lists no rounds of pairs (the compact form), else from the rounds
    (today's form). :class:`LinkMatrixError` naming what does not fit."""
    nodes = [str(h) for h in (doc.get('nodes') or doc.get('hosts') or [])]
    n = len(nodes)
    listed = any(rnd.get('pairs') for rnd in doc.get('rounds') or [] if isinstance(rnd, Mapping))
    matrix: Matrix
    if listed:
        matrix, errors, per_rank = matrix_from_rounds(doc, n)
    else:
        matrix = read_matrix(Path(where) / MATRIX_FILE, n)
        per_rank = {}
        errors = {}
        for p in doc.get('suspects') or []:
            if isinstance(p, Mapping) and p.get('error'):
                src, dst = _rank(p.get('src'), n, 'suspects'), _rank(p.get('dst'), n, 'suspects')
                errors[src, dst] = f'round {p.get("round", "?")}: {p["error"]}'
        for entry in doc.get('per_node') or []:
            try:
                per_rank[_rank(entry.get('rank'), n, 'per_node')] = (float(entry.get('sent_bytes') or 0)
                                                                     + float(entry.get('received_bytes') or 0))
            except (TypeError, ValueError, AttributeError):
                raise LinkMatrixError(f'per_node: {entry!r} has no numeric sent_bytes/received_bytes') from None
    for p in (doc.get('summary') or {}).get('failed') or doc.get('failed') or []:
        if isinstance(p, Mapping) and isinstance(p.get('src'), int) and isinstance(p.get('dst'), int):
            key = (_rank(p['src'], n, 'failed'), _rank(p['dst'], n, 'failed'))
            errors.setdefault(key, f'round {p.get("round", "?")}: {p.get("error") or "moved nothing"}')
    # a recheck counts as alone when its round ran it by itself (``streams`` 1, or an older kernel: always) and it
    # was recorded; as uncontended also in a batch nr-linkmap built to share no switch cable (``batches`` ``cables``)
    recheck = doc.get('recheck') or {}
    alone, uncontended = [], []
    for x in recheck.get('pairs') or []:
        if not isinstance(x, Mapping) or x.get('outcome') == 'pending':
            continue
        key = (_rank(x.get('src'), n, 'recheck'), _rank(x.get('dst'), n, 'recheck'))
        if x.get('streams', 1) == 1:
            alone.append(key)
        if x.get('streams', 1) == 1 or recheck.get('batches') == 'cables':
            uncontended.append(key)
    hosts: dict[str, float] = {}
    for rank, moved in per_rank.items():
        hosts[nodes[rank]] = hosts.get(nodes[rank], 0.0) + moved
    return LinkData(nodes, matrix, errors, _pairs(alone), hosts, _pairs(uncontended))


def _pairs(keys: list[tuple[int, int]]) -> np.ndarray:
    return np.array(keys, dtype=np.int64).reshape(-1, 2)
