"""What one link-test job measured: the N x N matrix of directed-pair rates, read once, in 4 bytes a direction.

``linkmatrix.bin`` (nr-linkmap writes it beside its JSON result; :func:`write_matrix` for today's kernels, from
the JSON's rounds), little-endian::

    8 bytes   magic  "NRLMAT1\\0"
    uint32    n      ranks
    uint32    flags  0
    n x n     float32 Mbit/s, row = sender rank, column = receiver rank; NaN: not measured (the diagonal too),
              -1.0: the direction failed or moved nothing in a round that ran it

A direction's figure is its best round (its rate after the warm-up where the stream had one, else its whole rate),
so a plan's passes and a recheck count their best; a round that failed fails the direction whatever the others
read. At 1,000 nodes the file is 4 MB; it is read as a memory map (:func:`read_matrix`), not parsed.

:class:`LinkData` is the matrix with what the JSON result adds about its directions: the host of each rank, the
error of each failed direction, the directions measured again alone (``recheck.pairs`` whose ``streams`` is 1, or
that have none), those measured again with every switch cable of their way to themselves (alone, or in a batch
nr-linkmap built from the switch tree: ``recheck.batches`` ``cables``) and the bytes each node moved.
:func:`from_result` reads both forms: the result that keeps the matrix in ``linkmatrix.bin`` and only the suspect
directions in full, and the older one that lists every pair of every round.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

MATRIX_FILE = 'linkmatrix.bin'
MAGIC = b'NRLMAT1\0'
HEADER = struct.Struct('<8sII')
#: The figure of a direction that failed or moved nothing.
FAILED = -1.0


class LinkMatrixError(Exception):
    """A matrix file or result that cannot be read; the message names the file and what is wrong."""


def read_matrix(path: Path | str, nodes: int | None = None) -> np.ndarray:
    """The (n, n) float32 matrix of ``path`` as a read-only memory map; :class:`LinkMatrixError` naming the file
    when its magic, flags or size is wrong, or when it holds another number of ranks than ``nodes``."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with path.open('rb') as fp:
            head = fp.read(HEADER.size)
    except OSError as err:
        raise LinkMatrixError(f'{path}: cannot read ({err.strerror or err})') from None
    if len(head) < HEADER.size:
        raise LinkMatrixError(f'{path}: {size} bytes, shorter than the {HEADER.size}-byte header')
    magic, n, flags = HEADER.unpack(head)
    if magic != MAGIC:
        raise LinkMatrixError(f'{path}: not a link matrix (magic {magic!r}, expected {MAGIC!r})')
    if flags != 0:
        raise LinkMatrixError(f'{path}: flags {flags:#x} unknown to this reader (0 expected)')
    if size != HEADER.size + 4 * n * n:
        raise LinkMatrixError(f'{path}: {size} bytes, but {n} ranks need {HEADER.size + 4 * n * n}')
    if nodes is not None and n != nodes:
        raise LinkMatrixError(f'{path}: {n} ranks, but the result names {nodes} nodes')
    if n == 0:
        return np.zeros((0, 0), dtype=np.float32)
    return np.memmap(path, dtype='<f4', mode='r', offset=HEADER.size, shape=(n, n))


def write_matrix(path: Path | str, matrix: np.ndarray) -> None:
    """Write ``matrix`` (n, n) in the format of :func:`read_matrix`."""
    matrix = np.asarray(matrix, dtype='<f4')
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f'a link matrix is square, not {matrix.shape}')
    with open(path, 'wb') as fp:
        fp.write(HEADER.pack(MAGIC, matrix.shape[0], 0))
        matrix.tofile(fp)


@dataclass
class LinkData:
    """One job's measurements: ``matrix[src, dst]`` by rank (:func:`read_matrix`), the host of each rank, and from
    the JSON result the failed directions' errors, the directions measured again alone (``rechecked``: they confirm
    what they name), those measured again without sharing a switch cable (``uncontended``: the alone ones and a
    tree-built batch's; None: the alone ones) and each host's bytes."""
    nodes: list[str]
    matrix: np.ndarray
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
