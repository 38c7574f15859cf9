"""Reference lookup: complete entries are returned, anything missing raises, malformed files are rejected."""
import pytest
import yaml

from netregress.judge import references
from netregress.judge.references import MissingReferenceError, ReferenceError, ReferenceSet

DOC = {
    'schema': references.SCHEMA,
    'system': 'vc',
    'references': {'fast': {'openmpi4': {'fast': {
        'mpi.pingpong': {
            'bw_mbps': {'value': 900.0, 'lower': -0.05, 'upper': 0.05, 'unit': 'Mbit/s', 'comment': 'shaped'},
            'lat_us': {'unit': 'us', 'comment': 'cpu bound', 'sizes': {
                8: {'value': 10.0, 'lower': -0.5, 'upper': 1.0},
                1024: {'value': 20.0, 'lower': -0.5, 'upper': 1.0, 'comment': 'own comment'}}},
        }}}}},
}


def refset(doc=DOC):
    return ReferenceSet(doc, 'vc', source='test.yaml')


def test_scalar_lookup():
    ref = refset().lookup('fast', 'openmpi4', 'fast', 'mpi.pingpong', 'bw_mbps')
    assert ref.as_reframe() == (900.0, -0.05, 0.05, 'Mbit/s')
    assert ref.comment == 'shaped'


def test_per_size_lookup_inherits_unit_and_comment():
    ref = refset().lookup('fast', 'openmpi4', 'fast', 'mpi.pingpong', 'lat_us@8')
    assert ref.value == 10.0 and ref.unit == 'us' and ref.comment == 'cpu bound'
    assert refset().lookup('fast', 'openmpi4', 'fast', 'mpi.pingpong', 'lat_us@1024').comment == 'own comment'


@pytest.mark.parametrize('key, missing', [
    (('gige', 'openmpi4', 'fast', 'mpi.pingpong', 'bw_mbps'), 'vc/gige'),
    (('fast', 'mpich4', 'fast', 'mpi.pingpong', 'bw_mbps'), 'vc/fast/mpich4'),
    (('fast', 'openmpi4', 'shm', 'mpi.pingpong', 'bw_mbps'), 'vc/fast/openmpi4/shm'),
    (('fast', 'openmpi4', 'fast', 'mpi.stream', 'bw_mbps'), 'vc/fast/openmpi4/fast/mpi.stream'),
    (('fast', 'openmpi4', 'fast', 'mpi.pingpong', 'rtt_us'), 'vc/fast/openmpi4/fast/mpi.pingpong/rtt_us'),
])
def test_missing_reference_names_the_missing_level(key, missing):
    with pytest.raises(MissingReferenceError) as err:
        refset().lookup(*key)
    assert repr(missing) in str(err.value)
    assert 'tools/refs' in str(err.value)


def test_missing_size_is_an_error():
    with pytest.raises(MissingReferenceError, match='size 4096 missing'):
        refset().lookup('fast', 'openmpi4', 'fast', 'mpi.pingpong', 'lat_us@4096')


def test_size_required_for_per_size_reference():
    with pytest.raises(ReferenceError, match='per-size'):
        refset().lookup('fast', 'openmpi4', 'fast', 'mpi.pingpong', 'lat_us')


def test_missing_file_means_every_lookup_fails(tmp_path):
    refs = references.load('nosuchsystem', tmp_path)
    with pytest.raises(MissingReferenceError):
        refs.lookup('p', 'e', 'i', 't', 'm')


@pytest.mark.parametrize('bad, message', [
    ({'value': 1.0, 'lower': 0.1, 'upper': 0.2, 'unit': 'x', 'comment': 'c'}, 'lower <= 0 <= upper'),
    ({'value': 1.0, 'lower': -0.1, 'upper': 0.2, 'unit': 'x'}, 'no comment'),
    ({'value': 1.0, 'lower': -0.1, 'upper': 0.2, 'comment': 'c'}, 'no unit'),
    ({'value': 'fast', 'lower': -0.1, 'upper': 0.2, 'unit': 'x', 'comment': 'c'}, 'expected a number'),
    ({'lower': -0.1, 'upper': 0.2, 'unit': 'x', 'comment': 'c'}, 'missing value'),
])
def test_malformed_entries_are_rejected(bad, message):
    doc = {'schema': references.SCHEMA, 'references': {'p': {'e': {'i': {'t': {'m': bad}}}}}}
    with pytest.raises(ReferenceError, match=message):
        refset(doc).lookup('p', 'e', 'i', 't', 'm')


def test_wrong_schema_or_system_rejected():
    with pytest.raises(ReferenceError, match='schema'):
        ReferenceSet({'schema': 'other/1', 'references': {}}, 'vc')
    with pytest.raises(ReferenceError, match='for system'):
        ReferenceSet({'schema': references.SCHEMA, 'system': 'local', 'references': {}}, 'vc')


def test_metric_names_round_trip():
    assert references.split_metric(references.metric_name('bw', 1048576)) == ('bw', 1048576)
    assert references.split_metric('bw') == ('bw', None)
    with pytest.raises(ReferenceError):
        references.split_metric('bw@big')


def test_stored_reference_files_are_valid(repo_root):
    for path in sorted((repo_root / 'reference_values').glob('*.yaml')):
        assert references.check_file(path, path.stem) > 0, path
        assert yaml.safe_load(path.read_text())['system'] == path.stem


def test_the_page_describes_the_schema_and_its_example_is_valid(repo_root, tmp_path):
    """docs/references.md and config/references.schema.json agree: every key the schema allows is in the page's
    table, and the page's example is a file tools/refs check passes."""
    import json
    import re
    page = (repo_root / 'docs' / 'references.md').read_text()
    schema = json.loads((repo_root / 'config' / 'references.schema.json').read_text())
    keys = set(schema['properties'])
    for name in ('entry', 'sized', 'change'):
        keys |= set(schema['$defs'][name]['properties'])
    keys |= set(schema['$defs']['change']['properties']['scope']['properties'])
    documented = set(re.findall(r'`([a-z_]+)`', '\n'.join(line for line in page.splitlines() if line.startswith('|'))))
    assert keys <= documented, keys - documented
    example = re.search(r'```yaml\n(.*?)```', page, re.S).group(1)
    example = example.replace('<partition>', 'hdr').replace('<environment>', 'ompi5').replace(
        '<interconnect>', 'ib').replace('<test>', 'mpitest.latency')
    example = example.replace('<metric>:                      # one value', 'rtt_us:').replace(
        '<metric>:                      # a value per message size in bytes', 'latency_us:')
    (tmp_path / 'orion.yaml').write_text(example)
    assert references.check_file(tmp_path / 'orion.yaml', 'orion') == 3


def test_a_one_sided_band_is_allowed_and_a_band_open_on_both_sides_is_not():
    from netregress.judge.references import ReferenceError as RefError, _entry
    ref = _entry({'value': 900.0, 'lower': -0.05, 'upper': None, 'unit': 'Mbit/s', 'comment': 'not slower than'},
                 {}, 'x')
    assert ref.as_reframe() == (900.0, -0.05, None, 'Mbit/s')       # ReFrame: no upper bound
    with pytest.raises(RefError, match='both null'):
        _entry({'value': 1.0, 'lower': None, 'upper': None, 'unit': 'us', 'comment': 'c'}, {}, 'x')
