"""ReFrame 4.10 run reports for the history and post-maintenance tests: sessions with passing, failing and skipped
cases, written the way ReFrame writes them (results 'pass'/'fail'/'skip', perfvalues tuples, job node lists)."""
import json
import time
import uuid as uuidlib

T0 = 1_790_000_000.0          # the first fake session's start (unix time)


def case(name, env, *, part='gige', system='vcluster', nodes=('gige1', 'gige2'), result='pass', perf=None,
         reason=None, phase=None, ref_test='mpitest.latency', ic='gige'):
    """One test case; ``perf`` maps a variable to (value, reference, unit)."""
    pv = {}
    for var, (value, ref, unit) in (perf or {}).items():
        pv[f'{system}:{part}:{var}'] = [value, ref, -0.1, 0.1, unit, 'fail' if result == 'fail' else 'pass']
    return {'name': name, 'display_name': name, 'unique_name': f'{name}_{env}', 'system': system, 'partition': part,
            'environ': env, 'result': result, 'fail_reason': reason, 'fail_phase': phase,
            'job_nodelist': list(nodes) if result != 'skip' else [], 'perfvalues': pv, 'ref_test': ref_test,
            'interconnect': ic, 'time_total': 2.0,
            # as the checks declare them (netregress.figures): times lower, rates higher
            'nr_figures': {var: {'kind': 'latency' if unit == 'us' else 'throughput', 'label': var,
                                 'better': 'lower' if unit == 'us' else 'higher'}
                           for var, (_, _, unit) in (perf or {}).items()}}


def report(path, start, cases, retry=None):
    """Write a run report of one session started at ``start``; returns its session uuid."""
    sid = str(uuidlib.uuid4())
    runs = []
    for idx, tcs in enumerate([cases] + ([retry] if retry else [])):
        tcs = [dict(tc) for tc in tcs]
        for i, tc in enumerate(tcs):
            tc.update(uuid=f'{sid}:{idx}:{i}', session_uuid=sid, run_index=idx,
                      job_completion_time_unix=None if tc['result'] == 'skip' else start + 10 * idx + i + 1)
        runs.append({'num_cases': len(tcs), 'num_failures': sum(t['result'] == 'fail' for t in tcs),
                     'num_aborted': 0, 'num_skipped': sum(t['result'] == 'skip' for t in tcs), 'run_index': idx,
                     'testcases': tcs})
    info = {'uuid': sid, 'data_version': '4.2', 'hostname': 'vm', 'version': '4.10.4',
            'time_start': time.strftime('%Y%m%dT%H%M%S+0000', time.gmtime(start)), 'time_start_unix': start,
            'time_end': time.strftime('%Y%m%dT%H%M%S+0000', time.gmtime(start + 300)), 'time_end_unix': start + 300,
            'time_elapsed': 300.0, 'num_cases': len(cases), 'num_failures': runs[-1]['num_failures'],
            'num_aborted': 0, 'num_skipped': runs[-1]['num_skipped']}
    path.write_text(json.dumps({'session_info': info, 'runs': runs, 'restored_cases': []}))
    return sid


LAT = 'mpi_latency %interconnect=gige'
BW = 'mpi_throughput %mode=stream %io=blocking %interconnect=gige'


def history_reports(tmp):
    """Three sessions before the one under test and the one under test (``now``):

    * ``r1`` passed: openmpi4 10 us, mpich4 12 us, stream 940 Mbit/s;
    * ``r2`` failed (mpich4 at 30 us): not a passing run, never the comparison's "last pass";
    * ``r3`` passed: openmpi4 11 us, mpich4 12.5 us, stream 950 Mbit/s;
    * ``now``: openmpi4 15.4 us (+40% against r3), mpich4 12.5 (unchanged), stream 760 (-20%), a new check
      (no earlier value), and a failing case.
    """
    def lat(o4, m4, fail_m4=False):
        return [case(LAT, 'openmpi4', perf={'rtt_us': (o4, 10.0, 'us')}),
                case(LAT, 'mpich4', perf={'rtt_us': (m4, 12.0, 'us')}, result='fail' if fail_m4 else 'pass',
                     phase='performance' if fail_m4 else None,
                     reason='performance error: failed to meet reference: rtt_us=30' if fail_m4 else None)]
    paths = {name: tmp / f'{name}.json' for name in ('r1', 'r2', 'r3', 'now')}
    report(paths['r1'], T0, lat(10.0, 12.0) + [
        case(BW, 'openmpi4', perf={'throughput_mbps': (940.0, 950.0, 'Mbit/s')}, ref_test='mpitest.stream.blocking')])
    report(paths['r2'], T0 + 1000, lat(11.0, 30.0, fail_m4=True))
    report(paths['r3'], T0 + 2000, lat(11.0, 12.5) + [
        case(BW, 'openmpi4', perf={'throughput_mbps': (950.0, 950.0, 'Mbit/s')}, ref_test='mpitest.stream.blocking')])
    report(paths['now'], T0 + 3000, lat(15.4, 12.5) + [
        case(BW, 'openmpi4', perf={'throughput_mbps': (760.0, 950.0, 'Mbit/s')}, ref_test='mpitest.stream.blocking',
             nodes=('gige3', 'gige1')),
        case('mpi_ebb %interconnect=gige', 'openmpi4', perf={'ebb_mibps': (40.0, 40.0, 'MiB/s')}, ref_test='ebb',
             nodes=('gige1', 'gige2', 'gige3')),          # gige4: no passing check ran there
        case('tcp_rtt %interconnect=gige', 'gnu', result='fail', phase='sanity', nodes=('gige2', 'gige3'),
             reason='\nsanity error: kernel exited with 1 (runtime failure): connection refused'),
        case('osu %case=latency %interconnect=gige', 'openmpi4', result='skip', reason='no Spack on this system'),
    ])
    return paths
