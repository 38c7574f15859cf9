"""The command line of ``tools/refs``: committed references and host baselines from ReFrame run reports.

``write``/``diff`` merge reports into ``reference_values/<system>.yaml`` (:mod:`.refswrite`), printing the diff;
``accept`` replaces one scope's references after a deliberate change (:mod:`.refsaccept`); ``check`` parses every
reference file; ``record``, ``show``, ``reset`` and ``bands`` are the host baseline's (:mod:`.refsbaseline`).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from netregress import paths
from netregress.judge import baselines, references
from netregress.measure import interconnects, site

from . import refsaccept, runreport
from .refsbaseline import _reference_bands, band_table, record, reset, show
from .refswrite import RefsError, latest_report, write


def main(argv: list[str] | None = None) -> int:
    """Command line of tools/refs; its exit status (2: bad input, nothing written)."""
    ap = argparse.ArgumentParser(prog='tools/refs', description=__doc__.split('\n\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    for name, helptext in (('write', 'committed references: write/refresh reference files from run reports'),
                           ('diff', 'committed references: show what write would change, write nothing')):
        p = sub.add_parser(name, help=helptext)
        p.add_argument('reports', nargs='*', type=Path,
                       help='ReFrame JSON run reports (default: the newest in run/reports/)')
        p.add_argument('--system', help='only this system')
        p.add_argument('--reset-tolerance', action='store_true',
                       help='replace tolerances and comments with the interconnect defaults')
        p.add_argument('--dir', type=Path, default=None, help='reference directory (default reference_values/)')
    acc = sub.add_parser('accept', help='committed references: after a deliberate change, replace one '
                                        "environment's, partition's or interconnect's from passing run reports")
    acc.add_argument('reports', nargs='+', type=Path, help='ReFrame JSON run reports of passing runs')
    acc.add_argument('--environ', help='replace the references of this environment (MPI build)')
    acc.add_argument('--partition', help='... of this partition')
    acc.add_argument('--interconnect', help='... of this interconnect (selectors combine: all must match)')
    acc.add_argument('--system', help='the system (default: the one the reports measured)')
    acc.add_argument('--dir', type=Path, default=None, help='reference directory (default: the site\'s, '
                                                            'netregress.measure.site.reference_dir())')
    acc.add_argument('--dry-run', action='store_true', help='print the diff, write nothing')
    chk = sub.add_parser('check', help='parse every reference file (schema, units, tolerances, comments)')
    chk.add_argument('--dir', type=Path, default=None)
    rec = sub.add_parser('record', help="host baseline: add a run's passing figures (tools/validate does it)")
    rec.add_argument('reports', nargs='+', type=Path)
    rec.add_argument('--system', required=True)
    shw = sub.add_parser('show', help="host baseline: host, runs, band widths; --report: a run against it")
    shw.add_argument('--system', required=True)
    shw.add_argument('--report', type=Path)
    rst = sub.add_parser('reset', help="host baseline: delete this host's baseline of a system")
    rst.add_argument('--system', required=True)
    bds = sub.add_parser('bands', help='band widths of committed reference files')
    bds.add_argument('files', nargs='+', type=Path)
    args = ap.parse_args(argv)
    try:
        table = interconnects.load()
    except interconnects.InterconnectError as err:
        print(f'tools/refs: {err}')
        return 2
    try:
        if args.cmd == 'record':
            print(record(args.reports, args.system, table))
            return 0
        if args.cmd == 'show':
            print(show(args.system, table, args.report))
            return 0
        if args.cmd == 'reset':
            print(reset(args.system))
            return 0
    except (baselines.BaselineError, OSError, runreport.RunReportError, RefsError, site.SiteError,
            references.ReferenceError) as err:
        for line in str(err).splitlines():
            print(f'tools/refs: {line}')
        if args.cmd != 'show':
            print('tools/refs: nothing written')
        return 1
    if args.cmd == 'bands':
        for path in args.files:
            try:
                refset = references.load_file(path, _system_of(path), require=True)
                refset.count()
                print(f'{path}:')
                print(band_table(_reference_bands(refset)))
            except references.ReferenceError as err:
                print(f'tools/refs: {err}')
                return 1
        return 0
    directory = args.dir or site.reference_dir()
    if args.cmd == 'accept':
        return _accept(args, directory, table)
    if args.cmd == 'check':
        bad = 0
        files = sorted(directory.glob('*.yaml'))
        for path in files:
            try:
                n = references.load_file(path, path.stem, require=True).count()
                if not n:
                    raise references.ReferenceError(f'{path}: no references (an empty tree: a reference file '
                                                    f'asserts nothing)')
                print(f'{path}: ok ({n} references)')
            except references.ReferenceError as err:
                print(f'tools/refs: {err}')
                bad += 1
        if not files:
            print(f'tools/refs: no reference files (*.yaml) in {directory}')
        return 1 if bad else 0
    reports = args.reports or [r for r in [latest_report(paths.run_dir())] if r]
    if not reports:
        print('tools/refs: no report given and none in run/reports/', flush=True)
        return 2
    try:
        diff, used = write(reports, directory, table, system=args.system,
                           dry_run=args.cmd == 'diff', reset_tolerance=args.reset_tolerance)
    except (runreport.RunReportError, RefsError) as err:
        for line in str(err).splitlines():
            print(f'tools/refs: {line}')
        print('tools/refs: nothing written')
        return 2
    print(diff or 'no change')
    verb = 'would use' if args.cmd == 'diff' else 'used'
    print(f'tools/refs: {verb} {used} measurements from {", ".join(map(str, reports))}')
    return 0


def _accept(args: argparse.Namespace, directory: Path, table: interconnects.InterconnectTable) -> int:
    """tools/refs accept: the diff, what was removed; exit 2 (nothing written) on a refusal."""
    try:
        scope = refsaccept.Scope(args.environ, args.partition, args.interconnect)
        diff, removed, used = refsaccept.accept(args.reports, directory, table, scope, system=args.system,
                                                dry_run=args.dry_run)
    except (runreport.RunReportError, RefsError, OSError) as err:
        for line in str(err).splitlines():
            print(f'tools/refs: {line}')
        print('tools/refs: nothing written')
        return 2
    print(diff or 'no change')
    for entry in removed:
        print(f'tools/refs: removed (the new runs no longer measure it): {entry}')
    verb = 'would replace' if args.dry_run else 'replaced'
    print(f'tools/refs: {verb} the references of {scope} from {used} figures of {", ".join(map(str, args.reports))}')
    return 0


def _system_of(path: Path) -> str:
    """The system a reference file says it is for (its name when it does not say or cannot be read)."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return path.stem
    return str(data.get('system') or path.stem) if isinstance(data, dict) else path.stem


if __name__ == '__main__':
    raise SystemExit(main())
