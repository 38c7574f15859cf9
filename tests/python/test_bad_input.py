"""Bad input to every reader: one line naming the file (or the option) and the fault, exit 2, nothing written, no
traceback, under 5 s.

The table "Bad input" of docs/validation.md, grown into cases, one per row of :data:`CASES`: reference files
(``tools/refs check``, ``bands``, ``write``, ``accept``), run reports (``tools/refs write``, ``record``, ``accept``,
``tools/report``, ``runsummary``), host baselines (``tools/refs record``, ``show``), the snapshot manifest of a
source mirror (``tools/spack-snapshot list``), site files (``python -m netregress.sitecheck``) and command-line
values. The tools run in this process through their ``main`` (the snapshot tool, which needs no venv, as a
process), with the state, run and reference directories inside the test's own directory; its whole tree (names,
sizes, modification times) is compared before and after.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from netregress import measurement, statefiles
from netregress.judge import baselines, references
from netregress_postrun import refswrite

ROOT = Path(__file__).resolve().parents[2]
LIMIT_S = 5.0
SHA = 'ab' * 32


# -- inputs -----------------------------------------------------------------------------------------------------------

def case(value=940.0, *, metric='bw_mbps', system='vc', part='gige', env='gnu', ic='gige', test='tcp.stream',
         ref=0, lower=None, upper=None, kind='throughput', **extra) -> dict:
    """A passing test case of one figure, as ReFrame 4.10 writes it; ``extra`` replaces any key."""
    tc = {'display_name': f'{test} %interconnect={ic}', 'unique_name': f'{test}_{ic}_{env}', 'system': system,
          'partition': part, 'environ': env, 'interconnect': ic, 'ref_test': test, 'result': 'pass',
          'fail_phase': None, 'fail_reason': None,
          'nr_figures': {metric: {'kind': kind, 'label': metric, 'better': 'higher'}},
          'perfvalues': {f'{system}:{part}:{metric}': [value, ref, lower, upper, 'Mbit/s', 'pass']}}
    tc.update(extra)
    return tc


def report(*cases) -> str:
    return json.dumps({'session_info': {'hostname': 'vm'}, 'runs': [{'testcases': list(cases or [case()])}]})


def nested_json(depth: int) -> str:
    return '{"runs": [{"testcases": [{"x": ' + '[' * depth + ']' * depth + '}]}]}'


REF_HEADER = refswrite.HEADER.format(system='vc', schema=references.SCHEMA)


def ref_file(entry: str = '{value: 940.0, lower: -0.05, upper: 0.05, unit: Mbit/s, comment: c}', *, part='gige',
             metric='bw_mbps', top: str = '', schema: str = references.SCHEMA, system: str = 'vc') -> str:
    """A reference file of one entry; ``entry`` is its YAML, ``top`` more top-level keys."""
    return (f'{REF_HEADER}schema: {schema}\nsystem: {system}\n{top}references:\n  {part}:\n    gnu:\n      gige:\n'
            f'        tcp.stream:\n          {metric}: {entry}\n')


def alias_bomb(fanout: int = 40) -> str:
    """A reference file of about 3 KB whose aliases make every level of the tree (partitions, environments,
    interconnects, tests, metrics, sizes) ``fanout`` wide: ``fanout``^6 references (four billion) to whoever walks
    it."""
    def level(name: str, child: str) -> str:
        return f'{name}: &{name} {{' + ', '.join(f'{name}{i}: *{child}' for i in range(fanout)) + '}\n'
    sizes = '{' + ', '.join(f'{2 ** i}: *band' for i in range(fanout)) + '}'
    return (f'schema: {references.SCHEMA}\nsystem: vc\nx:\n'
            f'  band: &band {{value: 1, lower: -0.1, upper: 0.1}}\n'
            f'  metric: &metric {{unit: us, comment: c, sizes: {sizes}}}\n'
            + ''.join('  ' + level(name, child) for name, child in
                      (('t', 'metric'), ('i', 't'), ('e', 'i'), ('p', 'e')))
            + 'references: {' + ', '.join(f'p{i}: *p' for i in range(fanout)) + '}\n')


def deep_block_yaml(depth: int) -> str:
    return ''.join(f'{"  " * i}k{i}:\n' for i in range(depth)) + f'{"  " * depth}x\n'


def baseline_text(samples: str = '[940.0, 941.0, 939.0]', schema: str = baselines.SCHEMA) -> str:
    return (f'# netregress host baseline\nschema: {schema}\nsystem: vc\nhost_id: h\nmeasured_by: v\n'
            f'runs:\n- {{recorded_utc: "2026-01-01T00:00:00Z", report: r.json, figures: 1}}\n'
            f'metrics:\n  gige:\n    gnu:\n      gige:\n        tcp.stream:\n          bw_mbps: {{unit: Mbit/s, '
            f'kind: throughput, samples: {samples}}}\n')


def sealed(samples: str = '[940.0, 941.0, 939.0]', schema: str = baselines.SCHEMA):
    """A baseline as tools/refs writes it (statefiles.sealed), made when the case runs."""
    return lambda: statefiles.sealed(baseline_text(samples, schema))


def cut_baseline():
    """A sealed baseline cut where a line ends: still valid YAML, its figures gone."""
    def make() -> str:
        text = statefiles.sealed(baseline_text())
        return text[:text.index('metrics:')]
    return make


def manifest(**entry) -> str:
    good = {'package': 'osu-micro-benchmarks', 'version': '7.4', 'sha256': SHA,
            'archive': f'_source-cache/archive/ab/{SHA}.tar.gz'}
    return json.dumps({'snapshots': [{**good, **entry}]})          # JSON is YAML


SETTINGS = (ROOT / 'config' / 'sites' / 'example' / 'settings.py').read_text()


@dataclass
class Case:
    """One bad input: ``files`` (path under the test's directory -> text or bytes; ``{baseline}`` is this host's
    baseline of system vc), the command (``{d}``: the test's directory), the file the line names (``{d}``-relative;
    for a command-line value the option) and the fault it says."""
    id: str
    tool: str                   # refs | report | runsummary | sitecheck | snapshot
    files: dict                 # the text, bytes, or a function making it when the case runs
    argv: list
    names: str
    fault: str
    env: dict = field(default_factory=dict)


GOOD = {'good.json': report()}
REFS = ['check', '--dir', '{d}/refs']
WRITE = ['write', '{d}/r.json', '--dir', '{d}/refs']
RECORD = ['record', '--system', 'vc', '{d}/good.json']
ACCEPT = ['accept', '{d}/good.json', '--environ', 'gnu', '--reason', 'a new MPI release', '--dir', '{d}/refs']
LIST = ['list', '{d}/mirror']
MANIFEST = 'mirror/netregress-snapshots.yaml'
TRAVERSAL = '../../../tmp/x/evil'


def refcase(id, text, fault, argv=REFS):
    return Case(f'reference-{id}', 'refs', {'refs/vc.yaml': text, **GOOD}, argv, '{d}/refs/vc.yaml', fault)


def runcase(id, text, fault, argv=WRITE, tool='refs'):
    return Case(f'report-{id}', tool, {'r.json': text, 'refs/.keep': ''}, argv, '{d}/r.json', fault)


def basecase(id, text, fault, argv=RECORD):
    return Case(f'baseline-{id}', 'refs', {'{baseline}': text, **GOOD}, argv, '{baseline}', fault)


def mancase(id, text, fault):
    return Case(f'manifest-{id}', 'snapshot', {MANIFEST: text}, LIST, '{d}/' + MANIFEST, fault)


def sitecase(id, files, fault, names='{d}/site/interconnects.yaml'):
    return Case(f'site-{id}', 'sitecheck', {'site/settings.py': SETTINGS, **files}, [], names, fault,
                env={'NETREGRESS_SITE': '{d}/site'})


def cli(id, argv, names, fault, tool='refs', files=GOOD):
    return Case(f'option-{id}', tool, dict(files), argv, names, fault)


CASES = [
    # reference files: tools/refs check (every other file still checked), bands, write and accept over one
    refcase('empty', '', 'no references (an empty file'),
    refcase('header-only', REF_HEADER, 'no references (an empty file, or one cut to its header)'),
    refcase('not-yaml', '{unclosed', 'not valid YAML'),
    refcase('top-list', '- 1\n', 'top level must be a mapping'),
    refcase('schema', ref_file(schema='netregress-references/0'), "schema must be 'netregress-references/1'"),
    refcase('other-system', ref_file(system='other'), "file is for system 'other', not 'vc'"),
    refcase('references-list', f'schema: {references.SCHEMA}\nreferences: [1]\n', 'references: expected a mapping'),
    refcase('nan', ref_file('{value: .nan, lower: -0.05, upper: 0.05, unit: u, comment: c}'),
            'value: expected a finite number, got nan'),
    refcase('inf', ref_file('{value: .inf, lower: -0.05, upper: 0.05, unit: u, comment: c}'),
            'value: expected a finite number, got inf'),
    refcase('negative', ref_file('{value: -940, lower: -0.05, upper: 0.05, unit: u, comment: c}'),
            'value: -940 is negative'),
    refcase('text', ref_file('{value: fast, lower: -0.05, upper: 0.05, unit: u, comment: c}'),
            "value: expected a number, got 'fast'"),
    refcase('lower-below-minus-one', ref_file('{value: 1, lower: -2, upper: 0.05, unit: u, comment: c}'),
            'lower: -2 is below -1'),
    refcase('open-band', ref_file('{value: 1, lower: null, upper: null, unit: u, comment: c}'),
            'lower and upper are both null'),
    refcase('lower-positive', ref_file('{value: 1, lower: 0.5, upper: 0.6, unit: u, comment: c}'),
            'need lower <= 0 <= upper'),
    refcase('no-unit', ref_file('{value: 1, lower: -0.1, upper: 0.1, comment: c}'), 'no unit'),
    refcase('no-comment', ref_file('{value: 1, lower: -0.1, upper: 0.1, unit: u}'), 'no comment'),
    refcase('no-value', ref_file('{lower: -0.1, upper: 0.1, unit: u, comment: c}'), 'missing value'),
    refcase('integer-key', ref_file(part='5'), 'partition 5: expected a name (text), got int'),
    refcase('size-abc', ref_file('{unit: us, comment: c, sizes: {abc: {value: 1, lower: -0.1, upper: 0.1}}}'),
            "size 'abc' is not a whole number of bytes"),
    refcase('traversal-key', ref_file(part='"../../x"'), "partition '../../x': not a name"),
    refcase('alias-bomb', alias_bomb() + ref_file(), 'aliases are not allowed'),
    refcase('deep-flow', '[' * 5000 + ']' * 5000 + '\n', 'maximum nesting depth'),
    refcase('deep-block', deep_block_yaml(40), 'nested deeper than 32 levels'),
    refcase('unknown-key', ref_file(top='owner: me\n'), "('owner' was unexpected)"),
    refcase('change-without-reason', ref_file() + 'changes:\n- {when: "2026-01-01T00:00:00Z", who: a@b, '
                                                  'scope: {environ: gnu}, figures: [x]}\n',
            "changes/0: 'reason' is a required property"),
    refcase('not-utf8', b'\xff\xfe schema', 'unreadable'),
    refcase('bands-nan', ref_file('{value: .nan, lower: -0.05, upper: 0.05, unit: u, comment: c}'),
            'expected a finite number, got nan', argv=['bands', '{d}/refs/vc.yaml']),
    refcase('write-over-list', '- 1\n', 'top level is list', argv=['write', '{d}/good.json', '--dir', '{d}/refs']),
    refcase('accept-over-bomb', alias_bomb(), 'aliases are not allowed', argv=ACCEPT),
    # run reports: tools/refs write, record and accept, tools/report, runsummary
    runcase('empty', '', 'empty file, not a run report'),
    runcase('truncated', report()[:60], 'truncated JSON'),
    runcase('malformed', report().replace(':', ';', 1), 'malformed JSON'),
    runcase('list', '[1, 2]', 'no "runs" list'),
    runcase('runs-number', '{"runs": 5}', 'no "runs" list'),
    runcase('case-number', '{"runs": [{"testcases": [5]}]}', 'runs[0].testcases[0]: expected an object'),
    runcase('perfvalues-list', '{"runs": [{"testcases": [{"perfvalues": [1]}]}]}', 'perfvalues: expected an object'),
    runcase('deep-json', '[' * 100000 + ']' * 100000, 'nested deeper than 32 levels'),
    runcase('deep-valid-json', nested_json(40), 'nested deeper than 32 levels'),
    runcase('unique-name-list', report(case(unique_name=['a'])), "unique_name ['a']: expected text, got list"),
    runcase('no-environ', report({k: v for k, v in case().items() if k != 'environ'}), 'no environ'),
    runcase('system-traversal', report(case(perfvalues={f'{TRAVERSAL}:gige:rtt_us': [5.0, 0, None, None, 'us',
                                                                                    'pass']})),
            f"system '{TRAVERSAL}': not a name"),
    runcase('environ-traversal', report(case(env='../../x')), "environ '../../x': not a name"),
    runcase('partition-slash', report(case(part='a/b')), "partition 'a/b': not a name"),
    runcase('test-traversal', report(case(test='../t')), "ref_test '../t': not a name"),
    runcase('interconnect-long', report(case(ic='i' * 200)), 'not a name'),
    runcase('system-number', report(case(system=5)), 'system 5: expected a name (text), got int'),
    runcase('kind-traversal', report(case(kind='../k')), "kind '../k': not a name"),
    runcase('nan', report(case(float('nan'))), 'bw_mbps: nan is not a finite figure'),
    runcase('inf', report(case(float('inf'))), 'bw_mbps: inf is not a finite figure'),
    runcase('negative', report(case(-940.0)), 'bw_mbps: -940 is negative'),
    runcase('text', report(case('fast')), "bw_mbps: 'fast' is not a finite figure"),
    runcase('not-utf8', b'{"runs": [\xff]}', 'unreadable run report'),
    runcase('record-traversal', report(case(env='../e')), "environ '../e': not a name",
            argv=['record', '--system', 'vc', '{d}/r.json']),
    runcase('accept-traversal', report(case(ic='../i')), "interconnect '../i': not a name",
            argv=['accept', '{d}/r.json', '--environ', 'gnu', '--reason', 'r', '--dir', '{d}/refs']),
    runcase('report-null-reference', report(case(ref=None, lower=-0.1, upper=0.1)),
            'a band (-0.1, 0.1) without a reference value', argv=['{d}/r.json', '--no-history'], tool='report'),
    runcase('report-text-reference', report(case(ref='abc', lower=-0.1, upper=0.1)),
            "reference 'abc' is not a number", argv=['{d}/r.json', '--no-history'], tool='report'),
    runcase('report-traversal', report(case(env='../../../tmp/x/e')), 'not a name',
            argv=['{d}/r.json', '--no-history'], tool='report'),
    runcase('summary-malformed', '{"runs": [', 'truncated JSON', argv=['report', '{d}/r.json'],
            tool='runsummary'),
    Case('report-directory', 'refs', {'r.json/x': ''}, WRITE, '{d}/r.json', 'a directory, not a run report'),
    Case('report-missing', 'refs', {'refs/.keep': ''}, WRITE, '{d}/r.json', 'no such run report'),
    Case('report-run-dir', 'report', {'run1/report-vc.json': report()[:50]}, ['{d}/run1', '--no-history'],
         '{d}/run1/report-vc.json', 'truncated JSON'),
    # host baselines: tools/refs record and show; the file is kept as it is (the tree is compared)
    basecase('cut-at-a-line', cut_baseline(), 'truncated baseline'),
    basecase('seal-miscounted', lambda: sealed()().replace('samples: [940.0,', 'samples: [940.0, 1.0,'),
             'where its last line says'),
    basecase('not-yaml', 'schema: [\n', 'not valid YAML'),
    basecase('alias-bomb', alias_bomb(), 'aliases are not allowed'),
    basecase('deep', deep_block_yaml(40), 'nested deeper than 32 levels'),
    basecase('nan-sample', sealed('[.nan]'), 'NaN is not a figure'),
    basecase('top-list', '- 1\n', 'not a baseline (top level is list'),
    basecase('schema', sealed(schema='netregress-baseline/9'), 'schema must be'),
    basecase('empty', '', 'empty baseline'),
    basecase('show-cut', cut_baseline(), 'truncated baseline', argv=['show', '--system', 'vc']),
    # the snapshot manifest of a source mirror: tools/spack-snapshot list
    mancase('not-yaml', 'snapshots: [', 'not valid YAML'),
    mancase('empty', '', 'empty (truncated?)'),
    mancase('alias-bomb', alias_bomb() + 'snapshots: []\n', 'aliases are not allowed'),
    mancase('deep', deep_block_yaml(40), 'nested deeper than 32 levels'),
    mancase('no-list', 'snapshots: 5\n', 'expected a mapping with a list "snapshots"'),
    mancase('package-traversal', manifest(package='../../x'), "package '../../x'"),
    mancase('version-code', manifest(version='7.4"); import os; ("'), 'is not a Spack version'),
    mancase('sha-short', manifest(sha256='ab' * 31), 'not a sha256'),
    mancase('archive-escape', manifest(archive='../../../etc/passwd'), 'must be _source-cache/archive/'),
    # site files: python -m netregress.sitecheck (what every tool runs on --site first)
    Case('site-missing', 'sitecheck', {}, [], '{d}/nosite', 'no such directory',
         env={'NETREGRESS_SITE': '{d}/nosite'}),
    Case('site-no-settings', 'sitecheck', {'site/interconnects.yaml': 'paths: {}\n'}, [], '{d}/site',
         'the site has no settings.py', env={'NETREGRESS_SITE': '{d}/site'}),
    sitecase('interconnects-list', {'site/interconnects.yaml': '- 1\n'}, 'a mapping with interconnects:'),
    sitecase('interconnects-unknown-key', {'site/interconnects.yaml': 'fabrics: {}\n'},
             'a mapping with interconnects:'),
    sitecase('line-rate-text', {'site/interconnects.yaml': 'interconnects:\n  gige: {payload_mbps: fast}\n'},
             'must be a positive number of Mbit/s'),
    # command-line values, checked before any file is touched
    cli('accept-system', [*ACCEPT, '--system', '../x'], "'../x'", "system '../x': not a name"),
    cli('accept-environ', ['accept', '{d}/good.json', '--environ', '../x', '--reason', 'r', '--dir', '{d}/refs'],
        '--environ', "--environ '../x': not a name"),
    cli('accept-partition', ['accept', '{d}/good.json', '--partition', 'a b', '--reason', 'r', '--dir', '{d}/refs'],
        '--partition', "--partition 'a b': not a name"),
    cli('accept-no-reason', ACCEPT[:4] + ACCEPT[6:], '--reason', 'accept needs --reason'),
    cli('accept-empty-reason', ACCEPT[:5] + ['  '] + ACCEPT[6:], '--reason', 'accept needs --reason'),
    cli('accept-reason-lines', ACCEPT[:5] + ['one\ntwo'] + ACCEPT[6:], '--reason', 'one line of printable text'),
    cli('write-system', [*WRITE[:1], '{d}/good.json', *WRITE[2:], '--system', '../x'], "'../x'",
        "system '../x': not a name"),
    cli('record-system', ['record', '--system', '../../x', '{d}/good.json'], "'../../x'", 'not a name'),
    cli('show-system', ['show', '--system', 'a/b'], "'a/b'", "system 'a/b': not a name"),
    cli('reset-system', ['reset', '--system', '..'], "'..'", "system '..': not a name"),
    cli('check-dir', ['check', '--dir', '{d}/nothing'], '{d}/nothing', 'no such reference directory'),
    cli('baseline-status-system', ['baseline-status', '--system', '../x'], "'../x'", 'not defined',
        tool='runsummary'),
]


# -- running one ------------------------------------------------------------------------------------------------------

def tree(top: Path) -> dict[str, tuple]:
    """Every file and directory under ``top``: mode, size, modification time."""
    out = {}
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(folder) / name
            st = os.lstat(path)
            out[str(path.relative_to(top))] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def run_tool(tool: str, argv: list[str], capsys) -> tuple[int, str]:
    """Exit status and every line the tool printed (stdout and stderr)."""
    if tool == 'snapshot':
        out = subprocess.run([sys.executable, str(ROOT / 'tools' / 'spack-snapshot'), *argv], capture_output=True,
                             text=True, timeout=LIMIT_S * 2)
        return out.returncode, out.stdout + out.stderr
    if tool == 'refs':
        from netregress_postrun.refstool import main
    elif tool == 'report':
        from netregress_postrun.report import main
    elif tool == 'runsummary':
        from netregress_postrun.runsummary import main
    else:
        from netregress.sitecheck import main
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize('bad', CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_exit_2_nothing_written(bad: Case, tmp_path, monkeypatch, capsys):
    d = tmp_path / 'work'
    (d / 'state').mkdir(parents=True, mode=0o700)
    monkeypatch.delenv('NETREGRESS_SITE', raising=False)
    monkeypatch.setenv('NETREGRESS_REFERENCES', str(d / 'references'))     # where a default would write
    monkeypatch.setenv('NETREGRESS_STATE', str(d / 'state'))
    monkeypatch.setenv('RFM_PREFIX', str(d / 'run'))
    baseline = baselines.baseline_path('vc', d / 'state', version=measurement.measurement_version())

    def fill(text: str) -> str:
        return text.replace('{baseline}', str(baseline)).replace('{d}', str(d))

    for name, content in bad.files.items():
        path = Path(fill(name)) if name.startswith('{') else d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        content = content() if callable(content) else content
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    for key, value in bad.env.items():
        monkeypatch.setenv(key, fill(value))
    monkeypatch.chdir(d)
    before = tree(tmp_path)
    start = time.monotonic()
    code, out = run_tool(bad.tool, [fill(a) for a in bad.argv], capsys)
    took = time.monotonic() - start
    lines = [line for line in out.splitlines() if line != 'tools/refs: nothing written']
    assert 'Traceback' not in out, out
    assert code == 2, out
    assert len(lines) == 1, out
    assert fill(bad.names) in lines[0] and bad.fault in lines[0], lines[0]
    after = tree(tmp_path)
    if bad.tool == 'sitecheck':
        # importing config/settings.py makes $RFM_PREFIX/logs (empty): not this reader's doing (issue 49)
        made = {k for k in after.keys() - before.keys()}
        assert made <= {'work/run', 'work/run/logs'} and not any((d / 'run' / 'logs').glob('*')), made
        after = {k: v for k, v in after.items() if k not in made and k != 'work'}
        before = {k: v for k, v in before.items() if k != 'work'}
    assert after == before
    assert took < LIMIT_S, f'{took:.1f} s'
    assert not Path('/tmp/x/evil.yaml').exists()


def test_the_table_has_at_least_sixty_cases_over_every_reader():
    kinds = {c.id.split('-')[0] for c in CASES}
    assert kinds == {'reference', 'report', 'baseline', 'manifest', 'site', 'option'}
    assert len(CASES) >= 60 and len({c.id for c in CASES}) == len(CASES)


def test_a_name_from_data_is_checked_by_one_pattern():
    """The one function every reader calls before a name becomes part of a path."""
    from netregress import datafiles
    for good in ('vcluster', 'gige', 'openmpi4', 'intel-mpi', 'mpitest.stream.blocking', 'npb.is.A.np2', '_x'):
        assert datafiles.checked_name(good, 'name') == good
    for bad in ('..', '../x', 'a/b', '/abs', '', '.hidden', 'a..b', 'x' * 101, 'a b', 'a\nb', 5, None, ['a']):
        with pytest.raises(datafiles.UnsafeName):
            datafiles.checked_name(bad, 'name')
