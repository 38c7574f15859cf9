"""The command line of ``tools/refs``: committed references and host baselines from ReFrame run reports.

``write``/``diff`` merge reports into ``<system>.yaml`` of the reference directory (docs/references.md:
``$NETREGRESS_REFERENCES``, else the site's ``references/``, else ``reference_values/``; :mod:`.refswrite`),
printing the diff; ``accept`` replaces one scope's references after a deliberate change and records why
(:mod:`.refsaccept`); ``check`` validates every reference file; ``record``, ``show``, ``reset`` and ``bands`` are the
host baseline's (:mod:`.refsbaseline`). Bad input is one line per reason and exit 2, nothing written.
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
from .refswrite import RefsError, latest_report, reference_path, write


#: The --dir of every subcommand that reads or writes committed references (docs/references.md).
DIR_HELP = ("reference directory (default: the site's references/ with --site or NETREGRESS_SITE, a site the "
            "checkout ships and none: the checkout's reference_values/; docs/references.md)")

#: What a subcommand raises for bad input (a report, reference file, baseline, site or value it cannot use).
BAD_INPUT = (baselines.BaselineError, OSError, runreport.RunReportError, RefsError, site.SiteError,
             references.ReferenceError, interconnects.InterconnectError)


def main(argv: list[str] | None = None) -> int:
    """Command line of tools/refs; its exit status (2: bad input, one line per reason, nothing written)."""
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
        p.add_argument('--dir', type=Path, default=None, help=DIR_HELP)
        p.add_argument('--machine-independent', action='store_true',
                       help='only the figures that hold on any machine (link-bound streams on a fabric with a line '
                            'rate): the committed file of a system judged by host baselines')
    acc = sub.add_parser('accept', help='committed references: after a deliberate change, replace one '
                                        "environment's, partition's or interconnect's from run reports, saying why")
    acc.add_argument('reports', nargs='+', type=Path, help='ReFrame JSON run reports of the runs after the change '
                                                           '(cases failed in the performance stage are taken)')
    acc.add_argument('--reason', help='why the references change (required; kept in the file\'s changes: list)')
    acc.add_argument('--environ', help='replace the references of this environment (MPI build)')
    acc.add_argument('--partition', help='... of this partition')
    acc.add_argument('--interconnect', help='... of this interconnect (selectors combine: all must match)')
    acc.add_argument('--system', help='the system (default: the one the reports measured)')
    acc.add_argument('--dir', type=Path, default=None, help=DIR_HELP)
    acc.add_argument('--dry-run', action='store_true', help='print the diff, write nothing')
    chk = sub.add_parser('check', help='validate every reference file (its entries and the schema, '
                                       'docs/references.md)')
    chk.add_argument('--dir', type=Path, default=None, help=DIR_HELP)
    rec = sub.add_parser('record', help="host baseline: add a run's passing figures (tools/validate does it)")
    rec.add_argument('reports', nargs='+', type=Path)
    rec.add_argument('--system', required=True)
    rec.add_argument('--accept', metavar='REASON',
                     help='a deliberate decision (one line why): also take the figures that failed their band only, '
                          'each replacing its earlier samples (a change, or an earlier run that was the outlier); '
                          'any other failure refuses the record')
    shw = sub.add_parser('show', help="host baseline: host, runs, band widths; --report: a run against it")
    shw.add_argument('--system', required=True)
    shw.add_argument('--report', type=Path)
    rst = sub.add_parser('reset', help="host baseline: delete this host's baseline of a system")
    rst.add_argument('--system', required=True)
    bds = sub.add_parser('bands', help='band widths of committed reference files')
    bds.add_argument('files', nargs='+', type=Path)
    args = ap.parse_args(argv)
    try:
        return _run(args)
    except BAD_INPUT as err:
        for line in str(err).splitlines():
            print(f'tools/refs: {line}')
        if args.cmd not in ('show', 'check', 'bands', 'diff') and not getattr(args, 'dry_run', False):
            print('tools/refs: nothing written')
        return 2


def _run(args: argparse.Namespace) -> int:
    """The subcommand; bad input raises one of :data:`BAD_INPUT`."""
    table = interconnects.load()
    if args.cmd == 'record':
        print(record(args.reports, args.system, table, accept=args.accept))
        return 0
    if args.cmd == 'show':
        print(show(args.system, table, args.report))
        return 0
    if args.cmd == 'reset':
        print(reset(args.system))
        return 0
    if args.cmd == 'bands':
        for path in args.files:
            refset = references.load_file(path, _system_of(path), require=True)
            refset.count()
            print(f'{path}:')
            print(band_table(_reference_bands(refset)))
        return 0
    directory = args.dir or site.reference_dir()
    if args.cmd == 'accept':
        return _accept(args, directory, table)
    if args.cmd == 'check':
        return _check(directory)
    if args.system:
        reference_path(args.system, directory)
    reports = args.reports or [r for r in [latest_report(paths.run_dir())] if r]
    if not reports:
        raise RefsError('no report given and none in run/reports/')
    diff, used = write(reports, directory, table, system=args.system,
                       dry_run=args.cmd == 'diff', reset_tolerance=args.reset_tolerance,
                       only_machine_independent=args.machine_independent)
    print(diff or 'no change')
    verb = 'would use' if args.cmd == 'diff' else 'used'
    print(f'tools/refs: {verb} {used} measurements from {", ".join(map(str, reports))}')
    return 0


def _check(directory: Path) -> int:
    """tools/refs check: every reference file of ``directory`` (each bad one named in one line; the others still
    checked); 2 when one is bad."""
    if not directory.is_dir():
        raise RefsError(f'{directory}: no such reference directory')
    bad = 0
    files = sorted(directory.glob('*.yaml'))
    for path in files:
        try:
            print(f'{path}: ok ({references.check_file(path, path.stem)} references)')
        except references.ReferenceError as err:
            print(f'tools/refs: {err}')
            bad += 1
    if not files:
        print(f'tools/refs: no reference files (*.yaml) in {directory}')
    return 2 if bad else 0


def _accept(args: argparse.Namespace, directory: Path, table: interconnects.InterconnectTable) -> int:
    """tools/refs accept: the diff, what was removed."""
    scope = refsaccept.Scope(args.environ, args.partition, args.interconnect)
    diff, removed, used = refsaccept.accept(args.reports, directory, table, scope, reason=args.reason,
                                            system=args.system, dry_run=args.dry_run)
    print(diff or 'no change')
    for entry in removed:
        print(f'tools/refs: removed (the new runs no longer measure it): {entry}')
    verb = 'would replace' if args.dry_run else 'replaced'
    print(f'tools/refs: {verb} the references of {scope} from {used} figures of {", ".join(map(str, args.reports))}'
          f' ({args.reason.strip()})')
    return 0


def _system_of(path: Path) -> str:
    """The system a reference file says it is for (its name when it does not say or cannot be read)."""
    try:
        data = references.load_yaml(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return path.stem
    return str(data.get('system') or path.stem) if isinstance(data, dict) else path.stem


if __name__ == '__main__':
    raise SystemExit(main())
