"""Where performance logs go: our file per system and partition, and a centre's own store over HTTP.

Every system logs each test case's figures to ``<prefix>/perflogs/<system>/<partition>/<check>.log``
(:func:`file_handler`, config/settings.py). A site that keeps its figures in its own database
(Elasticsearch/OpenSearch, Loki, InfluxDB, anything behind an HTTP endpoint that takes JSON) adds ReFrame's
``httpjson`` handler for its systems, in its ``settings.py``::

    from netregress.perflogs import send_to
    site_configuration = {..., 'logging': [send_to('https://metrics.example.org/netregress', ['orion'],
                                                   extras={'cluster': 'orion'})]}

That keeps our file and adds one HTTP POST per test case of one JSON document (:func:`document`, described field
by field in docs/site.md for a Grafana panel). ReFrame skips the handler with a warning when the endpoint does not
accept a connection at the start of a run, and warns when a post fails: the run's verdict never depends on it.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

#: One line per test case in the file: when, verdict, where, which MPI, which check, its witnesses and its figures.
FILE_FORMAT = ('%(check_job_completion_time)s|%(check_result)s|%(check_system)s:%(check_partition)s|'
               '%(check_environ)s|%(check_display_name)s|%(check_interconnect)s|%(check_ref_test)s|'
               'transports=%(check_nr_transports)s|wire=%(check_nr_wire)s|%(check_jobid)s|%(check_perfvalues)s')
FILE_FORMAT_PERFVARS = ('%(check_perf_var)s=%(check_perf_value)s %(check_perf_unit)s '
                        '(ref %(check_perf_ref)s %(check_perf_lower_thres)s..%(check_perf_upper_thres)s)|')
#: The version of :func:`document`'s layout, sent with every document.
SCHEMA = 'netregress-perflog/1'


def file_handler(run: Path) -> dict:
    """Our perflog file handler: ``<run>/perflogs/<system>/<partition>/<check>.log``, appended to."""
    return {'type': 'filelog', 'basedir': str(run / 'perflogs'), 'prefix': '%(check_system)s/%(check_partition)s',
            'level': 'info', 'format': FILE_FORMAT, 'format_perfvars': FILE_FORMAT_PERFVARS, 'append': True}


def _name(var: str) -> str:
    """A figure's name as a field name (``bw_mbps``; ReFrame keys it ``system:partition:name``)."""
    return re.sub(r'\W', '_', var.split(':')[-1])


def _number(value: Any) -> Any:
    """JSON has no NaN or infinity: a figure that is not a finite number goes as null."""
    if isinstance(value, float) and (value != value or value in (float('inf'), float('-inf'))):
        return None
    return value


def document(record: Any, extras: Mapping[str, Any] | None, ignore_keys: Any) -> str | None:
    """ReFrame ``httpjson`` ``json_formatter``: the JSON document of one test case's log record (None: not a test
    case's result, nothing sent). Fields: docs/site.md, "Performance logs in the centre's database"."""
    if getattr(record, 'check_result', None) is None:
        return None
    nodes = getattr(record, 'check_job_nodelist', None) or []
    doc: dict[str, Any] = {
        'schema': SCHEMA,
        'timestamp': getattr(record, 'check_job_completion_time', None),
        'system': getattr(record, 'check_system', None),
        'partition': getattr(record, 'check_partition', None),
        'environ': getattr(record, 'check_environ', None),
        'check': getattr(record, 'check_name', None),
        'name': getattr(record, 'check_display_name', None),
        'result': record.check_result,
        'fail_phase': getattr(record, 'check_fail_phase', None),
        'fail_reason': getattr(record, 'check_fail_reason', None),
        'interconnect': getattr(record, 'check_interconnect', None),
        'ref_test': getattr(record, 'check_ref_test', None),
        'transports': getattr(record, 'check_nr_transports', None),
        'wire': getattr(record, 'check_nr_wire', None),
        'jobid': getattr(record, 'check_jobid', None),
        'nodes': list(nodes) if not isinstance(nodes, str) else [nodes],
        'host': getattr(record, 'hostname', None),
        'reframe': getattr(record, 'version', None),
        'perf': {},
    }
    for var, info in (getattr(record, 'check_perfvalues', None) or {}).items():
        value, ref, lower, upper, unit, result = info
        doc['perf'][_name(var)] = {'value': _number(value), 'unit': unit, 'ref': _number(ref),
                                   'lower': _number(lower), 'upper': _number(upper), 'result': result}
    for key, value in (extras or {}).items():
        doc.setdefault(key, value)
    return json.dumps({k: v for k, v in doc.items() if k not in (ignore_keys or ())}, default=str)


def http_handler(url: str, *, extras: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None,
                 retry_timeout: float = 0) -> dict:
    """ReFrame's ``httpjson`` perflog handler posting :func:`document` to ``url``; ``extras`` are added to every
    document (the cluster's name, a data version), ``headers`` to every request (an API token)."""
    return {'type': 'httpjson', 'url': url, 'level': 'info', 'extras': dict(extras or {}),
            'extra_headers': dict(headers or {}), 'json_formatter': document, 'retry_timeout': retry_timeout}


def send_to(url: str, systems: Sequence[str], *, extras: Mapping[str, Any] | None = None,
            headers: Mapping[str, str] | None = None, run: Path | None = None) -> dict:
    """A ``logging`` entry for a site's ``settings.py``: for ``systems``, our file handler and the centre's
    endpoint (:func:`http_handler`); the rest of our logging stays as it is (ReFrame merges the entries key by
    key, the one naming the system first)."""
    from .paths import run_dir
    return {'target_systems': list(systems),
            'handlers_perflog': [file_handler(run or run_dir()), http_handler(url, extras=extras, headers=headers)]}
