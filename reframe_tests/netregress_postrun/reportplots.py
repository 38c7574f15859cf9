"""The run report's figures (matplotlib, Agg): size curves, collective bars, ebb histogram, the link map.

Each reads the section's figures or the files a test case left behind in its output or stage directory
(``result.json``; the link test's ``links.json`` and ``linkmatrix.bin``); a file written after the run ended
belongs to a later run and is not used. Each figure is appended to the section's ``images`` with its caption; a
missing piece leaves a note, never an error. The link map is no figure: its PNG has one pixel per direction at any
size, and its caption carries what the page lists beside it (:class:`LinkMapCaption`).
"""
from __future__ import annotations

import collections
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from . import runreport
from .runreport import case_name
from .reportmodel import (NOT_MEASURED, _COLL, Section, case_figures, case_status, size_label, split_var,
                          test_name)

#: Seconds an output file may be younger than the end of the run and still belong to it.
FRESH_SLACK_S = 60.0


# -- files a test case left behind ----------------------------------------------------------------------------------

def case_file(tc: Mapping, name: str, run_end: float | None, notes: list[str]) -> Path | None:
    """``name`` in the case's output directory (passed) or stage directory (failed), if it belongs to this run."""
    for key in ('outputdir', 'stagedir'):
        d = tc.get(key)
        if not d:
            continue
        path = Path(d) / name
        try:
            mtime = path.stat().st_mtime
        except OSError:
            continue
        if run_end is not None and mtime > run_end + FRESH_SLACK_S:
            notes.append(f'{path} was written after this run ended (a later run): not used')
            continue
        return path
    return None


def read_json(path: Path | None, notes: list[str]) -> Mapping | None:
    if path is None:
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        notes.append(f'{path}: unreadable ({err}); not used')
        return None
    return doc if isinstance(doc, dict) else None


def sweep_series(tc: Mapping, run_end: float | None, notes: list[str]) -> tuple[list[int], list[float], str]:
    """(sizes, Mbit/s, source) of a sweep case: every point of its result.json when kept, else the asserted
    points from the report."""
    doc = read_json(case_file(tc, 'result.json', run_end, notes), notes)
    points = []
    for p in (doc or {}).get('sweep') or []:
        try:
            size, mbps = int(p['size_bytes']), float(p['throughput_mbps'])
        except (KeyError, TypeError, ValueError):
            continue
        if size > 0 and mbps > 0:
            points.append((size, mbps))
    source = 'result.json'
    if not points:
        source = 'report'
        for pv in runreport.perfvalues(tc):
            name, at = split_var(pv.var)
            if name == 'throughput_mbps' and at and pv.value is not None and pv.value > 0:
                points.append((at, pv.value))
    points.sort()
    return [p[0] for p in points], [p[1] for p in points], source


# -- figures --------------------------------------------------------------------------------------------------------

def _pyplot():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


@dataclass
class Curve:
    """One line of the size figure: a build's benchmark, points (bytes, value)."""
    label: str
    environ: str
    kind: str                # 'latency' (us, half round trip) or 'bandwidth' (Mbit/s)
    points: list[tuple[int, float]]
    source: str              # 'result.json' or 'report'
    style: dict


def osu_series(tc: Mapping) -> dict[str, list[tuple[int, float]]]:
    """OSU's every-size figures: 'latency' (us) from ``latency_us@N``, 'bandwidth' (Mbit/s) from
    ``bandwidth_mbs@N`` (MB/s x 8)."""
    out: dict[str, list[tuple[int, float]]] = collections.defaultdict(list)
    for pv in runreport.perfvalues(tc):
        name, size = split_var(pv.var)
        value = pv.value
        if not size or value is None or not value > 0:
            continue
        if name == 'latency_us':
            out['latency'].append((size, value))
        elif name == 'bandwidth_mbs':
            out['bandwidth'].append((size, value * 8.0))
    return {k: sorted(v) for k, v in out.items()}


def size_curves(sec: Section, run_end: float | None) -> list[Curve]:
    """Latency and bandwidth against message size of a section: our sweeps (a ping-pong sweep's half round trip
    is 8 x size / its throughput, NetPIPE's one-way time; a stream sweep gives bandwidth only) and OSU."""
    curves = []
    for tc in sorted((t for t in sec.cases if t.get('result') in ('pass', 'fail')),
                     key=lambda t: sec.order.env_key(t.get('environ') or '')):
        env, name = tc.get('environ') or '?', test_name(tc)
        if name.startswith(('mpitest.sweep', 'tcp.sweep')):
            sizes, mbps, source = sweep_series(tc, run_end, sec.figure_notes)
            if not sizes:
                continue
            kind = name.split('.')[-1]
            tcp = name.startswith('tcp.')
            style = {'linestyle': '--' if tcp else '-', 'marker': 's' if tcp else 'o'}
            label = f'{env} {"nr-tcptest" if tcp else "nr-mpitest"} {kind}'
            points = list(zip(sizes, mbps))
            curves.append(Curve(label, env, 'bandwidth', points, source, style))
            if kind == 'pingpong':
                curves.append(Curve(label, env, 'latency', [(s, 8.0 * s / v) for s, v in points], source, style))
        elif name.startswith('osu.'):
            for kind, points in osu_series(tc).items():
                curves.append(Curve(f'{env} OSU {name.split(".", 1)[1]}', env, kind, points, 'report',
                                    {'linestyle': ':', 'marker': '^'}))
    return curves


def _plain(value: float, _pos=None) -> str:
    """Tick label of a log axis: 200, not 2 x 10^2 (minor ticks between decades only where they fit)."""
    return f'{value:g}' if value > 0 else ''


def plot_sweeps(sec: Section, out: Path, run_end: float | None) -> None:
    """Latency and bandwidth against message size per build, log axes, one figure per section (NetPIPE's two
    graphs, seed 004's figure)."""
    curves = size_curves(sec, run_end)
    if not curves:
        return
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), layout='constrained')
    sizes = [s for c in curves for s, _ in c.points]
    lo, hi = min(sizes), max(sizes)
    ticks = [2 ** e for e in range(0, 41, 2) if lo <= 2 ** e <= hi]
    ticks = ticks[::2] if len(ticks) > 8 else ticks
    for ax, kind, ylabel in ((axes[0], 'latency', 'half round trip (us)'),
                             (axes[1], 'bandwidth', 'throughput (Mbit/s)')):
        shown = [c for c in curves if c.kind == kind]
        for c in shown:
            ax.plot([p[0] for p in c.points], [p[1] for p in c.points], **c.style,
                    markersize=3 if c.source == 'result.json' else 5, color=sec.order.colour(c.environ), label=c.label)
        ax.set_xscale('log', base=2)
        ax.set_yscale('log')
        ax.set_xticks(ticks, [size_label(t) for t in ticks])
        ys = [v for c in shown for _, v in c.points]
        ax.yaxis.set_major_formatter(_plain)
        if ys and max(ys) / min(ys) > 30:          # minor labels only where they fit (under 1.5 decades)
            ax.yaxis.set_minor_formatter('')
        else:
            ax.yaxis.set_minor_formatter(_plain)
        ax.set_xlabel('message size')
        ax.set_ylabel(ylabel)
        ax.grid(True, which='both', alpha=0.3)
        if shown:
            ax.legend(fontsize='x-small')
        else:
            ax.tick_params(axis='y', which='both', left=False, labelleft=False)
            ax.text(0.5, 0.5, f'no {kind} curve measured here', transform=ax.transAxes, ha='center', color='grey')
        ax.set_title({'latency': 'Latency', 'bandwidth': 'Bandwidth'}[kind], fontsize=10)
    fig.suptitle(f'Latency and bandwidth against message size: {sec.title}')
    name = f'sweep-{sec.slug}.png'
    fig.savefig(out / name, dpi=90)
    plt.close(fig)
    sources = sorted({c.source for c in curves})
    sec.images.append((name, f'Latency (half round trip of the ping-pong sweeps, 8 x size / throughput; OSU '
                             f'latency) and bandwidth against message size per MPI build ({sec.title}; points from '
                             f'{" and ".join(sources)})'))


def plot_collectives(sec: Section, out: Path) -> None:
    by_size: dict[int, dict[str, dict[str, float]]] = collections.defaultdict(lambda: collections.defaultdict(dict))
    tests: dict[int, list[str]] = collections.defaultdict(list)
    for row in sec.rows:
        if not row.metric.key.startswith('mpicoll:'):
            continue
        name, size = split_var(row.metric.key.split(':', 1)[1])
        m = _COLL.match(name)
        if not (m and size):
            continue
        tests[size].append(m['test'])
        for env, cell in row.cells.items():
            if cell.figure is not None:
                by_size[size][env][m['test']] = cell.figure.value
    if not by_size:
        return
    plt = _pyplot()
    envs = [e for e in sec.environs if any(e in by_size[s] for s in by_size)]
    sizes = sorted(by_size)
    fig, axes = plt.subplots(len(sizes), 1, figsize=(11, 1.0 + 3.3 * len(sizes)), layout='constrained',
                             squeeze=False)
    width = 0.8 / max(1, len(envs))
    for ax, size in zip(axes[:, 0], sizes):
        names = tests[size]
        for i, env in enumerate(envs):
            xs = [j + (i - (len(envs) - 1) / 2) * width for j in range(len(names))]
            ys = [by_size[size][env].get(t, float('nan')) for t in names]
            ax.bar(xs, ys, width, label=env, color=sec.order.colour(env))
        ax.set_xticks(range(len(names)), names, rotation=30, ha='right')
        ax.set_yscale('log')
        ax.set_ylabel('rate (KB/s)')
        ax.set_title(f'{size_label(size)} messages', fontsize=10)
        ax.grid(True, axis='y', which='both', alpha=0.3)
    axes[0, 0].legend(fontsize='small', ncols=min(6, len(envs)))
    fig.suptitle(f'Collective tests, normalised rate (KB = 1000 B): {sec.title}')
    name = f'collectives-{sec.slug}.png'
    fig.savefig(out / name, dpi=90)
    plt.close(fig)
    sec.images.append((name, f'Luecke & Coyle collective tests per MPI build, '
                             f'{", ".join(size_label(s) for s in sizes)} ({sec.title}; a missing bar: not measured)'))


def ebb_connection_mibps(doc: Mapping) -> tuple[int, list[float]]:
    """(message size, bandwidth of every connection in MiB/s) of an nr-ebb result: each rank's block time of
    each round (``sizes[].rounds[].pairs[].time_us``) as size x exchanges / time, the quantity the kernel's
    buckets count (docs/mpi.md)."""
    for entry in doc.get('sizes') or []:
        try:
            size = int(entry['size_bytes'])
            reps = int(entry.get('exchanges_per_round') or (doc.get('options') or {})['exchanges_per_round'])
        except (KeyError, TypeError, ValueError):
            continue
        values = []
        for rnd in entry.get('rounds') or []:
            for pair in rnd.get('pairs') or []:
                for t in pair.get('time_us') or []:
                    if isinstance(t, (int, float)) and t > 0:
                        values.append(size * reps / (t * 1e-6) / 2 ** 20)
        if values:
            return size, values
    return 0, []


def plot_ebb(sec: Section, out: Path, run_end: float | None) -> None:
    """Histogram of the per-connection bandwidth of every ebb case of the section, one outline per build, its
    effective bisection bandwidth marked."""
    series = []
    for tc in sorted((t for t in sec.cases if test_name(t) == 'ebb' and t.get('result') in ('pass', 'fail')),
                     key=lambda t: sec.order.env_key(t.get('environ') or '')):
        doc = read_json(case_file(tc, 'result.json', run_end, sec.figure_notes), sec.figure_notes)
        size, values = ebb_connection_mibps(doc or {})
        if not values:
            sec.figure_notes.append(f'ebb histogram of {case_name(tc)}: {NOT_MEASURED} (no result.json of this run '
                                    f'with connection times; case {case_status(tc)})')
            continue
        ebb = next((f.value for f in case_figures(tc) if f.metric.key == 'ebb:ebb_mibps'), None)
        series.append((tc.get('environ') or '?', size, values, ebb))
    if not series:
        return
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2), layout='constrained')
    everything = [v for _, _, values, _ in series for v in values]
    lo, hi = min(everything), max(everything)
    bins = [lo + (hi - lo) * k / 20 for k in range(21)] if hi > lo else 10
    for env, _, values, ebb in series:
        ax.hist(values, bins=bins, histtype='step', linewidth=1.8, color=sec.order.colour(env),
                label=f'{env} ({len(values)} connections)')
        if ebb is not None:
            ax.axvline(ebb, color=sec.order.colour(env), linestyle='--', linewidth=1)
    ax.set_xlabel('bandwidth of one connection (MiB/s, size x exchanges / block time)')
    ax.set_ylabel('connections')
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize='small')
    sizes = sorted({size for _, size, _, _ in series})
    ax.set_title(f'Effective bisection bandwidth, {", ".join(size_label(s) for s in sizes)} messages: {sec.title}',
                 fontsize=10)
    name = f'ebb-{sec.slug}.png'
    fig.savefig(out / name, dpi=90)
    plt.close(fig)
    sec.images.append((name, f'nr-ebb bucket histogram per MPI build ({sec.title}): every rank\'s block time of '
                             f'every random bisection round as a bandwidth, 20 equal-width buckets; dashed: the '
                             f'effective bisection bandwidth (ebb_mibps)'))


#: The link map's palette: 0 not measured (grey), 1 failed (black), 2 suspect (magenta), then 3..255 the share of
#: the median link from 0 to :data:`MAP_SHARE_TOP` (viridis: dark is slow, yellow fast).
MAP_NOT_MEASURED, MAP_FAILED, MAP_SUSPECT, MAP_FIRST = 0, 1, 2, 3
MAP_SHARE_TOP = 1.2
#: Suspect directions and switches the page lists beside a link map (all are in links.json and links.txt).
MAP_LISTED, MAP_SWITCHES = 30, 12
#: Widest a link map is shown on the page (CSS pixels; the PNG itself has one pixel per direction, the page links it).
MAP_SHOWN_PX = 900


class LinkMapCaption(str):
    """A link map's caption that also carries what the page lists beside the map (``listing``: the named elements,
    the suspect directions and switches, the nodes left out, the legend); the Markdown sees only the caption."""
    listing: dict

    def __new__(cls, text: str, listing: Mapping):
        obj = super().__new__(cls, text)
        obj.listing = dict(listing)
        return obj

    def __reduce__(self):                      # drawn in another process: the listing travels with the caption
        return LinkMapCaption, (str(self), self.listing)


def link_palette() -> list[int]:
    """The 256 RGB colours of a link map (:data:`MAP_NOT_MEASURED` ...), flat, as PIL's putpalette takes them."""
    import matplotlib
    ramp = matplotlib.colormaps['viridis'].resampled(256 - MAP_FIRST)
    colours: list[tuple[int, ...]] = [(221, 221, 221), (0, 0, 0), (255, 0, 255)]
    colours += [tuple(int(round(255 * c)) for c in ramp(i)[:3]) for i in range(256 - MAP_FIRST)]
    return [v for rgb in colours for v in rgb]


def link_map_pixels(matrix, order, median: float, suspects=(), block: int = 256):
    """(n, n) uint8 palette indices of a link matrix (:func:`netregress.judge.linkmatrix.read_matrix`, by rank: dense or
    sparse) with rows and columns in ``order`` (rank indices, the switch tree's order): each direction's share of
    the ``median`` link, failed and not measured apart, ``suspects`` (rank pairs) marked. The dense matrix a block
    of rows at a time; the sparse one a block of its entries at a time, onto a picture that is "not measured"
    everywhere else (the picture, n x n bytes, is all that is N x N)."""
    import numpy as np
    from netregress.judge.linkmatrix import SparseCells, SparseMatrix
    order = np.asarray(order, dtype=np.int64)
    n = len(order)
    steps = 256 - MAP_FIRST

    def colours(raw):
        share = np.clip(np.nan_to_num(raw / median, nan=0.0) if median > 0 else raw * 0, 0, MAP_SHARE_TOP)
        idx = (MAP_FIRST + np.minimum(share / MAP_SHARE_TOP * steps, steps - 1)).astype(np.uint8)
        idx[np.isnan(raw)] = MAP_NOT_MEASURED
        idx[raw < 0] = MAP_FAILED
        return idx

    where = np.empty(n, dtype=np.int64)
    where[order] = np.arange(n)
    if isinstance(matrix, SparseMatrix):
        out = np.full((n, n), MAP_NOT_MEASURED, dtype=np.uint8)
        for src, dst, raw in SparseCells(matrix).blocks():
            out[where[src], where[dst]] = colours(raw)
    else:
        out = np.empty((n, n), dtype=np.uint8)
        for i0 in range(0, n, block):
            out[i0:i0 + block] = colours(np.asarray(matrix[order[i0:i0 + block]])[:, order])
    if len(suspects):
        pairs = np.asarray(suspects, dtype=np.int64).reshape(-1, 2)
        out[where[pairs[:, 0]], where[pairs[:, 1]]] = MAP_SUSPECT
    return out


def write_png(path: Path, pixels, palette: list[int]) -> None:
    """A palette PNG of ``pixels``, one pixel each (no figure, no scaling: any size at one byte a pixel)."""
    from PIL import Image
    image = Image.fromarray(pixels, mode='P')
    image.putpalette(palette)
    image.save(path, optimize=False)


def link_listing(doc: Mapping) -> dict:
    """What the page lists beside a link map, from links.json: the elements named (failed, then slow), the first
    suspect directions, the switches with a suspect direction, the nodes left out."""
    from netregress.judge.linknames import Named, phrase
    named = []
    for key, slow in (('named_failed', False), ('named_slow', True)):
        for x in doc.get(key) or []:
            try:
                entry = Named(**x)
            except TypeError:
                continue
            named.append(('slow' if slow else 'failed', phrase(entry, slow)))
    rows = [(f'{x.get("src_host")}->{x.get("dst_host")}', 'failed', x.get('error', ''))
            for x in doc.get('failed') or []][:MAP_LISTED]
    for x in (doc.get('slow') or [])[:MAP_LISTED - len(rows)]:
        shared = x.get('contention', 1)
        rows.append((f'{x.get("src_host")}->{x.get("dst_host")}', f'{x.get("mbps", 0):.0f} Mbit/s',
                     f'{x.get("share", 0):.2f} x the median'
                     + (f', its uplink shared by {shared}' if shared > 1 else '')))
    total = int(doc.get('slow_count') or 0) + int(doc.get('failed_count') or 0)
    switches = []
    tree = doc.get('switches') or {}
    for kind, key, ways in (('leaf switch', 'leaf', ('up', 'down')), ('spine', 'spine', ('',)),
                            ('uplink', 'leaf', ('up', 'down'))):
        for entry in tree.get({'leaf switch': 'leaves', 'spine': 'spines', 'uplink': 'uplinks'}[kind]) or []:
            for way in ways:
                block = entry.get(way) if way else entry
                if not isinstance(block, Mapping) or not (block.get('slow') or block.get('failed')):
                    continue
                name = f'{kind} {entry.get(key)}' + (f' cable {entry.get("cable")}' if kind == 'uplink' else '')
                switches.append((name + (f' ({way})' if way else ''), block.get('ok', 0), block.get('slow', 0),
                                 block.get('failed', 0), block.get('median_share')))
    # the most suspect first: a slow element's own switch before those its destinations are seen from
    switches.sort(key=lambda x: -(x[2] + x[3]) / max(1, x[1] + x[3]))
    return {'named': named, 'suspects': rows, 'more': max(0, total - len(rows)),
            'switches': switches[:MAP_SWITCHES], 'more_switches': max(0, len(switches) - MAP_SWITCHES),
            'left_out': list(doc.get('nodes_left_out') or [])}


def plot_links(sec: Section, out: Path, run_end: float | None) -> None:
    """The link map of every link-test case of the section: its linkmatrix.bin as a picture of one pixel per
    direction, sorted by the switch tree, with the named elements, suspect directions and switches beside it."""
    from netregress.judge.linkmatrix import MATRIX_FILE, LinkMatrixError, read_matrix
    for tc in sec.cases:
        if test_name(tc) != 'links.allpairs' and tc.get('basename') != 'link_allpairs':
            continue
        doc = read_json(case_file(tc, 'links.json', run_end, sec.figure_notes), sec.figure_notes)
        path = case_file(tc, MATRIX_FILE, run_end, sec.figure_notes)
        if doc is None or path is None:
            sec.figure_notes.append(f'link map of {case_name(tc)}: {NOT_MEASURED} (no links.json and '
                                    f'{MATRIX_FILE} of this run; case {case_status(tc)})')
            continue
        nodes = [str(n) for n in doc.get('nodes') or []]
        try:
            matrix = read_matrix(path, len(nodes))
        except LinkMatrixError as err:
            sec.figure_notes.append(f'link map of {case_name(tc)}: {err}; not drawn')
            continue
        order = doc.get('order') or list(range(len(nodes)))
        if sorted(order) != list(range(len(nodes))):
            sec.figure_notes.append(f'link map of {case_name(tc)}: links.json order is not a permutation of its '
                                    f'{len(nodes)} nodes; drawn in rank order')
            order = list(range(len(nodes)))
        median = (doc.get('summary') or {}).get('median_link_mbps')
        median = float(median) if isinstance(median, (int, float)) and median > 0 else 0.0
        suspects = [(x['src'], x['dst']) for x in doc.get('slow') or [] if isinstance(x, Mapping)
                    and isinstance(x.get('src'), int) and isinstance(x.get('dst'), int)
                    and 0 <= x['src'] < len(nodes) and 0 <= x['dst'] < len(nodes)]
        stem = f'links-{sec.slug}-{tc.get("environ") or "env"}'
        palette = link_palette()
        write_png(out / f'{stem}.png', link_map_pixels(matrix, order, median, suspects), palette)
        import numpy as np
        write_png(out / f'{stem}-legend.png', np.tile(np.arange(MAP_FIRST, 256, dtype=np.uint8), (12, 1)), palette)
        listing = link_listing(doc)
        listing.update(legend=f'{stem}-legend.png', top=MAP_SHARE_TOP, size=len(nodes),
                       width=min(MAP_SHOWN_PX, max(300, len(nodes))),
                       first=[nodes[i] for i in order[:1]], last=[nodes[i] for i in order[-1:]])
        caption = (f'Link map of {sec.title} ({doc.get("plan", "?")} plan, case {case_status(tc)}): one pixel per '
                   f'direction, {len(nodes)} x {len(nodes)}, rows the senders and columns the receivers, both in the '
                   f'order of the switch tree{" (" + doc["topology"] + ")" if doc.get("topology") else ""}; colour: '
                   f'the rate as a share of the median link ({median:.0f} Mbit/s), dark slow to yellow '
                   f'{MAP_SHARE_TOP:g} x, grey not measured, black failed, magenta suspect '
                   f'({int(doc.get("slow_count") or 0)} slow, {int(doc.get("failed_count") or 0)} failed of '
                   f'{int(doc.get("directions") or 0)} directions). Where the plan made streams share an uplink '
                   f'(a tapered tree) they read their share, which the verdict expects')
        sec.images.append((f'{stem}.png', LinkMapCaption(caption, listing)))
