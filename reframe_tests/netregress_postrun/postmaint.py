"""Post-maintenance acceptance run (``ci/post-maintenance``): the suite on the nodes that came back, its verdict for
the maintenance ticket, and what changed since before the maintenance.

* Which nodes: ``--reservation NAME`` (every job inside the reservation; its nodes are the set to cover) or
  ``--nodes LIST`` (a Slurm host list): the set to cover. Jobs may use only those nodes (``--exclude`` of every other
  node of the system's Slurm partitions) and take as many as they need (a 2-node check gets 2 of them, not the
  whole list); afterwards every node of the set must have run at least one passing check
  (:mod:`netregress_postrun.coverage`).
  The all-node checks (links, node loopback) ask by name for exactly the nodes of their partition inside the set
  (netregress.slurm.allocate_scoped_nodes reads the same ``-J`` options); a node of the set that Slurm cannot use
  is left out of them and named, and stays uncovered. ``--exclude LIST`` takes nodes out of the set (either way):
  no job uses them, none needs to be covered.
* The verdict counts ReFrame 4's results (``pass``, ``fail``, ``abort``, ``skip``; the last attempt of each case
  decides, a failure outside the performance stage is never excused by a retry: :mod:`netregress_postrun.runsummary`)
  and names every failing case with its reason.
* What changed: each figure against its last value from an earlier passing session and against this host's
  baseline, both through ReFrame's ``--performance-compare`` on its results storage (:mod:`netregress_postrun.history`).

The last two lines are for the ticket::

    RESULT: PASS|FAIL (<passed>/<total> test cases passed, <failed> failed, <skipped> skipped)
    REPORT: <DIR>/report-maintenance.json   (console log: <DIR>/reframe.log)

Exit status: 0 pass, 1 fail (a case failed, a node was not covered, or ReFrame could not run), 2 usage error.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from netregress import paths, scope, sitecheck
from netregress.measure import interconnects, site, slurm
from . import coverage, history, runreport, runsummary

REPORT_NAME = 'report-maintenance.json'
JUNIT_NAME = 'junit-maintenance.xml'
LINK_PLANS = ('full', 'sample', 'topology')
#: Changes smaller than this (percent) are counted, not listed, unless --threshold says otherwise.
DEFAULT_THRESHOLD_PCT = 5.0
#: Minutes a post-maintenance ReFrame run may take (a maintenance window is hours; a hung run must not outlast it).
DEFAULT_TIMEOUT_MIN = 240.0


class UsageError(Exception):
    """Bad arguments (exit status 2)."""


@dataclass
class Plan:
    """Which nodes the run may use and must cover."""
    cover: dict[str, list[str]] = field(default_factory=dict)    # ReFrame partition -> nodes to cover
    exclude: list[str] = field(default_factory=list)             # nodes of the system outside the set
    partial: list[str] = field(default_factory=list)             # partitions of which the set holds only part
    notes: list[str] = field(default_factory=list)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        m = re.match(r'argument (\S+): expected one argument', message)
        raise UsageError(f'{m.group(1)} needs a value' if m else message)


def _minutes(text: str) -> float:
    value = runreport.percent(text)           # a finite number >= 0 ...
    if value <= 0:                            # ... and more than none
        raise argparse.ArgumentTypeError(f'{text!r}: a timeout is a positive number of minutes')
    return value


def _directory(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError('an empty directory name')
    return Path(text)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    ap = _Parser(prog='ci/post-maintenance', description=__doc__.split('\n\n')[0])
    ap.add_argument('--reservation', help='Slurm reservation holding the nodes that came back')
    ap.add_argument('--nodes', help="Slurm host list of the nodes that came back ('n[001-016]'): the set to cover")
    ap.add_argument('--system', help='ReFrame system (default: the one config/settings.py selects)')
    ap.add_argument('--partition', help='only this partition of the system (needs --system)')
    ap.add_argument('--exclude', help="Slurm host list of nodes of the set not to use nor cover ('n[003,007]')")
    ap.add_argument('--tags', default='ci', help="ReFrame tag filter (default: ci; 'all' for the whole suite)")
    ap.add_argument('--output', type=Path,
                    help='where the report goes (default: <run directory>/post-maintenance/<UTC stamp>)')
    ap.add_argument('--prefix', type=_directory,
                    help="where everything of the run is written, ReFrame's --prefix (default: RFM_PREFIX, else "
                         "the system's run directory: run/ for ours, the site's prefix for its own)")
    ap.add_argument('--threshold', type=runreport.percent, default=DEFAULT_THRESHOLD_PCT,
                    help=f'list changes of at least this many percent (default {DEFAULT_THRESHOLD_PCT:g})')
    ap.add_argument('--no-compare', action='store_true', help='skip the comparison with earlier runs')
    ap.add_argument('--timeout', type=_minutes, default=DEFAULT_TIMEOUT_MIN,
                    help=f'minutes the ReFrame run may take before it is stopped (default {DEFAULT_TIMEOUT_MIN})')
    ap.add_argument('--dry-run', action='store_true', help='print the reframe command, run nothing')
    ap.add_argument('--strict', action='store_true',
                    help='a node of the set that Slurm cannot use (drained, down) fails the run; by default it is '
                         'named and left out')
    ap.add_argument('--links', choices=LINK_PLANS, default='full',
                    help='which links the link test measures: full (every pair, default), sample (a rotating '
                         'share per run), topology (inside every leaf switch and across uplinks)')
    ap.add_argument('--plan', action='store_true',
                    help="print the link test's rounds, job steps and estimated time per partition, run nothing")
    args, unknown = ap.parse_known_args(argv)
    if unknown:
        raise UsageError(f'unknown argument: {unknown[0]}')
    if args.reservation and args.nodes:
        raise UsageError('give --reservation or --nodes, not both')
    if not args.reservation and not args.nodes:
        raise UsageError('which nodes? give --reservation NAME or --nodes NODELIST')
    if args.partition and not args.system:
        raise UsageError('--partition needs --system')
    for what in ('reservation', 'nodes', 'exclude', 'system', 'partition', 'tags'):
        value = getattr(args, what)
        if value is not None and (not value.strip() or (what != 'tags' and scope.UNSAFE.search(value))):
            raise UsageError(f'--{what} {value!r}: empty, or contains spaces or shell metacharacters')
    return args


USAGE = ('usage: ci/post-maintenance (--reservation NAME | --nodes NODELIST) [--exclude NODELIST] [--system NAME] '
         '[--partition NAME] [--tags EXPR] [--links full|sample|topology] [--plan] [--output DIR] [--prefix DIR] '
         '[--threshold PCT] [--no-compare] [--dry-run]')


def node_plan(where: scope.Scope, *, runner: slurm.Runner = slurm.run_command) -> Plan:
    """The partitions' nodes against the scope's node set: what to exclude and what to cover (netregress.scope)."""
    try:
        sets = scope.node_sets(where, runner=runner)
    except scope.SlurmUnavailable:
        raise
    except scope.ScopeError as err:
        raise UsageError(str(err)) from None
    return Plan(cover={p: n for p, n in sets.cover.items() if n}, exclude=sets.outside, partial=sets.partial,
                notes=sets.notes)


def reservation_nodes(name: str, *, runner: slurm.Runner = slurm.run_command) -> list[str]:
    """The nodes of Slurm reservation ``name``; [] when Slurm cannot say."""
    try:
        return slurm.reservation_nodes(name, runner=runner)
    except slurm.SlurmQueryError:
        return []


def link_plans(where: scope.Scope, args: argparse.Namespace, plan: Plan | None, *,
               runner: slurm.Runner = slurm.run_command) -> list[str]:
    """``--plan``: per partition and fabric in scope, the link test's plan and what it costs (nothing runs), over
    the nodes the run would use: those of the reservation or node list less ``where.exclude`` (``--exclude`` and
    the nodes Slurm cannot use, as the node check before the run leaves them out)."""
    from netregress.measure import interconnects, linkplan, runplan
    system = where.system
    table = interconnects.load()
    try:
        models = linkplan.cost_models()
    except ValueError as err:
        raise UsageError(f'link cost constants: {err}') from None
    wanted = set(reservation_nodes(args.reservation, runner=runner)) if args.reservation else None
    if wanted is not None:
        wanted -= set(where.exclude)
    lines = []
    for part in site.slurm_partitions(system):
        if args.partition and part['name'] != args.partition:
            continue
        slurm_part = slurm.slurm_partition(part.get('access') or [], part['name'])
        try:
            nodes = slurm.partition_nodes(slurm_part, runner=runner)
        except slurm.SlurmQueryError as err:
            lines.append(f'{system}:{part["name"]}: {err}')
            continue
        if wanted is not None:
            nodes = [n for n in nodes if n in wanted]
        elif plan is not None:
            nodes = [n for n in nodes if n in plan.cover.get(part['name'], [])]
        fabrics = [f[3:] for f in part.get('features') or [] if f.startswith('ic-') and f[3:] in table.names
                   and table.interconnect(f[3:]).nodes >= 2]
        extras = part.get('extras') or {}
        for fabric in fabrics:
            label = f'{system}:{part["name"]} {fabric}'
            if len(nodes) < 2:
                lines.append(f'{label}: {len(nodes)} node in scope, no link to test')
                continue
            try:
                lp, _ = runplan.make_plan(args.links, nodes, f'{system}:{part["name"]}:{fabric}', extras,
                                           advance=False, runner=runner)
            except (slurm.SlurmQueryError, ValueError) as err:
                lines.append(f'{label}: no {args.links} plan: {err}')
                continue
            lines.append(f'{label}: {linkplan.describe(lp, runplan.ROUND_TIME_S, models=models)}')
    return lines


#: run_bounded's status when the command ran out of time.
TIMED_OUT = 124


def run_bounded(cmd: Sequence[str], out, timeout_s: float) -> int:
    """``cmd`` with its output to ``out``, in a session of its own that is stopped as a whole (TERM, then KILL
    after 30 s) when it runs longer than ``timeout_s`` or on Ctrl-C; :data:`TIMED_OUT` after a timeout."""
    import signal
    try:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT, cwd=paths.repo_root(),
                                start_new_session=True)
    except OSError as err:
        out.write(f'cannot run {cmd[0]}: {err}\n')
        return 127
    try:
        return proc.wait(timeout=timeout_s)
    except (subprocess.TimeoutExpired, KeyboardInterrupt) as stop:
        for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, None)):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=wait_s)
                break
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue
        if isinstance(stop, KeyboardInterrupt):
            raise
        return TIMED_OUT


#: Seconds the node check before the run waits for nodes in passing states (restarting, rebooting).
NODE_WAIT_S = 30.0


def leave_out_unusable(where: scope.Scope, strict: bool, *, runner: slurm.Runner = slurm.run_command,
                       wait_s: float = NODE_WAIT_S) -> dict[str, str]:
    """{node in scope Slurm cannot use: why}, each named on stderr: left out of the run and of what must be
    covered, or with ``strict`` kept in (it then fails the run, uncovered). Slurm that cannot say is named and
    nothing is left out (the run's own checks then tell)."""
    try:
        sets = scope.node_sets(where, runner=runner)
        unusable, other = coverage.unusable_in_scope(where, sets.cover, wait_s, runner=runner)
    except scope.ReservationRefused as err:
        raise UsageError(str(err)) from None
    except scope.ScopeError as err:
        print(f'post-maintenance: node states not checked before the run: {err}', file=sys.stderr)
        return {}
    for line in other:
        print(f'post-maintenance: before the run: {line}', file=sys.stderr)
    for line in unusable.values():
        print(f'post-maintenance: {line}: ' + ('--strict: kept in scope, it must be covered' if strict
                                                else 'left out (--strict fails the run for it)'), file=sys.stderr)
    return unusable


def reframe_command(args: argparse.Namespace, where: scope.Scope, plan: Plan | None, report: Path) -> list[str]:
    """The ReFrame command line: the maintenance mode, the scope's options (netregress.scope.reframe_options: the
    system, the reservation, one ``-J exclude=`` of the nodes outside the set), the tags and the link plan."""
    cmd = [os.environ.get('REFRAME') or history.reframe_exe(), *site.reframe_args(), '--mode', 'maintenance']
    outside = scope.NodeSets(outside=plan.exclude) if plan is not None else None
    cmd += scope.reframe_options(where, outside)
    if args.tags != 'all':
        cmd += ['-t', args.tags]
    if args.links != 'full':
        cmd += ['-S', f'link_allpairs.plan={args.links}']
    return cmd + ['-r', '--report-file', str(report), '--report-junit', str(report.with_name(JUNIT_NAME))]


# -- after the run ------------------------------------------------------------------------------------------------

def counts(report: Mapping) -> collections.Counter:
    """The last attempt of every test case, by ReFrame 4's result ('pass', 'fail', 'abort', 'skip')."""
    return collections.Counter(tc.get('result') for tc in runreport.analyse(report)['final'].values())


#: ReFrame's warning for a check file it could not load: its tests vanish from the run without failing it.
UNLOADED = re.compile(r"skipping test file '([^']+)'")


def unloaded_check_files(log_text: str) -> list[str]:
    """Check files ReFrame skipped because they failed to load (its console log)."""
    return sorted(set(UNLOADED.findall(log_text)))


def verdict(report: Mapping, rc: int, uncovered: Sequence[str], unloaded: Sequence[str] = (),
            left_out: Sequence[str] = ()) -> tuple[bool, str]:
    """(passed, the RESULT line); ``left_out``: nodes of the set Slurm could not use, named in it either way."""
    n = counts(report)
    hidden = runreport.analyse(report)['hidden']
    total, failed = sum(n.values()), n['fail'] + n['abort']
    ok = rc == 0 and failed == 0 and not hidden and not uncovered and not unloaded and n['pass'] > 0
    why = [f'{len(unloaded)} check file(s) did not load'] if unloaded else []
    if hidden:
        why.append(f'{len(hidden)} failed before passing on a retry')
    if uncovered:
        why.append(f'{len(uncovered)} node(s) not covered')
    if rc != 0:
        why.append(f'reframe exit {rc}')
    if n['pass'] == 0:
        why.append('nothing passed')
    note = f'; {len(left_out)} node(s) left out: {slurm.abbrev(list(left_out))}' if left_out else ''
    line = (f'RESULT: {"PASS" if ok else "FAIL"} ({n["pass"]}/{total} test cases passed, {failed} failed, '
            f'{n["skip"]} skipped{"; " + "; ".join(why) if why and not ok else ""}{note})')
    return ok, line


def failing_cases(report: Mapping) -> list[str]:
    res = runreport.analyse(report)
    lines = [f'FAILED {runreport.failure_line(tc)}'
             for tc in res['final'].values() if tc.get('result') in ('fail', 'abort')]
    lines += [f'FAILED (then passed on a retry) {runreport.failure_line(tc)}'
              for tc in res['hidden'].values()]
    lines += [f'passed on a retry after a declared known fault: {runreport.failure_line(tc)}'
              for tc in res['excused'].values()]
    return lines


def comparison(report_path: Path, threshold: float) -> list[str]:
    """What changed: this run against the last passing run and against the baseline (netregress_postrun.history)."""
    try:
        session = history.session_of(report_path)
        lines = []
        last = history.against_last_pass(session)
        base, which = history.against_baseline(session)
        for title, changes, rhs, source in (
                ('since the last passing run (before the maintenance)', last, history.RHS_LAST,
                 f"reframe --performance-compare '{history.last_pass_spec(session)}'"),
                ("against this host's baseline", base, history.RHS_BASE, f'median of {which}')):
            moved = [c for c in changes if c.pdiff is not None and abs(c.pdiff) >= threshold]
            fresh = [c for c in changes if c.pdiff is None]
            lines.append(f'== what changed {title}: {len(moved)} of {len(changes)} figures moved by '
                         f'{threshold:g}% or more, {len(fresh)} without an earlier value ({source})')
            if moved:
                lines += ['   ' + ln for ln in history.format_changes(moved, rhs)]
        return lines
    except history.HistoryError as err:
        return [f'== no comparison with earlier runs: {err}']


def main(argv: Sequence[str] | None = None, *, runner: slurm.Runner = slurm.run_command) -> int:
    try:
        args = parse_args(list(sys.argv[1:] if argv is None else argv))
        if args.prefix:       # ReFrame's prefix, the state directory's (unless NETREGRESS_STATE), the report's
            os.environ['RFM_PREFIX'] = str(args.prefix.resolve())
        try:
            where = scope.from_options(args)
        except scope.ScopeError as err:
            raise UsageError(str(err)) from None
        system = where.system
        # a plan is a forecast: it names the nodes Slurm cannot use now and plans without them, waiting for none
        left_out = leave_out_unusable(where, args.strict, runner=runner, wait_s=0.0 if args.plan else NODE_WAIT_S)
        where = scope.excluding(where, [] if args.strict else list(left_out))
        plan = None
        if args.nodes:
            try:
                plan = node_plan(where, runner=runner)
            except scope.SlurmUnavailable as err:
                if not args.dry_run:
                    raise UsageError(str(err)) from None
                print(f'post-maintenance: dry run: {err}; the real run excludes every node of the partitions '
                      f'outside --nodes', file=sys.stderr)
        # a site's run goes where its settings say (netregress.measure.site.run_dir), ReFrame's too
        run_root = site.run_dir(system)
    except (UsageError, site.SiteError) as err:
        print(f'post-maintenance: {err}\n{USAGE}', file=sys.stderr)
        return 2
    os.environ.setdefault('RFM_PREFIX', str(run_root))
    out = args.output or run_root / 'post-maintenance' / datetime.datetime.now(
        datetime.timezone.utc).strftime('%Y%m%dT%H%M%SZ')
    report = out / REPORT_NAME
    cmd = reframe_command(args, where, plan, report)
    print(f'post-maintenance: {"reservation " + args.reservation if args.reservation else "nodes " + args.nodes}, '
          f'tags {args.tags}', file=sys.stderr)
    for note in (plan.notes if plan else []):
        print(f'post-maintenance: {note}', file=sys.stderr)
    if args.plan or args.dry_run:         # nothing runs, so ReFrame does not say what the site gets wrong: we do
        try:
            for line in sitecheck.static_problems([system]):
                print(f'post-maintenance: WARNING: site: {line}', file=sys.stderr)
        except (site.SiteError, interconnects.InterconnectError) as err:
            print(f'post-maintenance: WARNING: site: {err}', file=sys.stderr)
    if args.plan:
        try:
            for line in link_plans(where, args, plan, runner=runner):
                print(f'link test {line}')
        except (UsageError, site.SiteError) as err:
            print(f'post-maintenance: {err}', file=sys.stderr)
            return 2
        return 0
    if args.dry_run:
        print(shlex.join(cmd))
        return 0
    # ReFrame keeps a log of its start in $TMPDIR (rfm-*.log, the run's and each comparison's): under the run
    # directory with everything else of the run, as tools/validate does
    tmp = run_root / 'tmp'
    for directory in (out, tmp):
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            print(f'post-maintenance: cannot create {directory}: {err}', file=sys.stderr)
            return 1
    os.environ['TMPDIR'] = str(tmp)
    log = out / 'reframe.log'
    with log.open('w') as fp:
        rc = run_bounded(cmd, fp, args.timeout * 60)
    if rc == TIMED_OUT:
        print(f'post-maintenance: ReFrame did not finish within --timeout {args.timeout:g} min: stopped (its jobs '
              f'with it); what it reported so far is judged')
    try:
        data = runreport.read(report)
    except runreport.RunReportError as err:
        print(f'post-maintenance: no readable report ({err})')
        print(f'RESULT: FAIL (ReFrame exited {rc} and wrote no readable report; see {log})')
        print(f'REPORT: {log}')
        return 1

    systems = sorted({tc.get('system') for run in data['runs'] for tc in run.get('testcases') or []} - {None})
    used = set().union(set(), *coverage.covered_nodes(data).values())
    if args.reservation:
        nodes = [n for n in reservation_nodes(args.reservation, runner=runner) if n not in where.exclude]
        if nodes:      # a reservation's node is covered when a passing check of any partition used it
            uncovered = [f'{n}: no passing check moved payload over its fabric there' for n in nodes if n not in used]
        else:
            print(f'post-maintenance: the nodes of reservation {args.reservation} are unknown (scontrol): '
                  f'node coverage not checked')
            uncovered = []
    else:
        cover = plan.cover if plan else {}
        nodes = [n for part_nodes in cover.values() for n in part_nodes]
        uncovered = coverage.uncovered_nodes(data, cover, system=systems[0] if len(systems) == 1 else None)
    asked = f'reservation {args.reservation}' if args.reservation else f'--nodes {args.nodes}'
    ran_on = used | {n for tc in runreport.testcases(data) for n in runreport.job_nodes(tc)}
    print(f'== nodes of {asked}: {slurm.abbrev(nodes) or "unknown"}; '
          f'jobs ran on {slurm.abbrev(sorted(ran_on)) or "none"}; '
          f'covered by a passing check: {slurm.abbrev([n for n in nodes if n in used]) or "none"}')

    try:                                  # ReFrame's JSON keeps no reason for a skip; its console log does
        log_text = log.read_text(errors='replace')
    except OSError:
        log_text = ''
    skips = runsummary.skip_reasons(log_text)
    unloaded = unloaded_check_files(log_text)
    text, _ok = runsummary.summarise(data, name=f'post-maintenance run on {",".join(systems) or "?"}', skips=skips)
    print(text)
    for line in failing_cases(data):
        print(line)
    for line in uncovered:
        print(f'NOT COVERED {line}')
    for path in unloaded:
        print(f'NOT LOADED {path}: ReFrame skipped this check file (its error is in {log})')
    if not args.no_compare:
        for line in comparison(report, args.threshold):
            print(line)
    try:                                  # the MPI builds side by side, figures, history (tools/report)
        from . import report as run_report
        page = run_report.write_report(out, with_history=not args.no_compare) / 'index.html'
        print(f'== report page: {page}')
    except Exception as err:              # the page is an extra: its failure must not hide the verdict
        print(f'== no report page: {err}')
    ok, line = verdict(data, rc, uncovered, unloaded, [] if args.strict else list(left_out))
    print(line)
    junit = report.with_name(JUNIT_NAME)
    print(f'REPORT: {report}   (console log: {log}{"; JUnit: " + str(junit) if junit.exists() else ""})')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
