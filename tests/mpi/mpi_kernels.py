#!/usr/bin/env python3
"""Integration cases of the MPI kernels, one per ctest entry: run a kernel under the configured MPI launcher and
assert what could be wrong (rows, byte counts, statistics against rows, the rate formula against the measured time
per operation, bucket counts, error exits on every rank). Runs are tiny: correctness, not performance."""
import argparse
import json
import math
import os
import re
import shlex
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ARGS = None


def run(kernel, np, *opts, expect=0, env=None, timeout=180):
    """Run a kernel; nr-*-faulty are the test builds with the PMPI fault layer (tests/mpi/fault_shim.c)."""
    where = ARGS.test_bin if kernel.endswith('-faulty') else ARGS.bin
    cmd = [ARGS.mpiexec, ARGS.np_flag, str(np)] + shlex.split(ARGS.preflags) + [os.path.join(where, kernel)]
    cmd += [str(o) for o in opts]
    e = dict(os.environ, **(env or {}))
    # its own session: on a timeout the launcher's proxies and ranks go too (a rank left spinning would slow every
    # later test), and what they printed so far is kept for the failure message
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            os.killpg(proc.pid, signal.SIGKILL)
            exc.stdout, exc.stderr = proc.communicate()
            raise
    p = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    ok = p.returncode == expect if expect is not None else p.returncode != 0
    if not ok:
        sys.exit(f'FAIL: {" ".join(cmd)} exited {p.returncode}, expected {expect}\nstdout:\n{p.stdout}\n'
                 f'stderr:\n{p.stderr}')
    return p


def check(cond, what):
    if not cond:
        sys.exit(f'FAIL: {what}')


def load(path):
    with open(path) as f:
        return json.load(f)


def rows(path):
    with open(path) as f:
        return [line for line in f if line.strip() and not line.startswith('#')]


def case_mpitest_stream(d):
    out, js = os.path.join(d, 'out'), os.path.join(d, 'out.json')
    p = run('nr-mpitest', 2, '-r', 3, '-t', 0.05, '-m', '64k', '-o', out, '-P', '--json', js)
    check('(Master-node) <--> ' in p.stdout and 'Test done!' in p.stdout, 'banner and Test done! on stdout')
    check(f'Test result: "{out}"' in p.stdout, 'Test result line')
    check(len(rows(out)) == 3, f'3 repetition rows in -o, got {len(rows(out))}')
    check(os.path.exists(out + '.plot'), '-P writes FILE.plot')
    r = load(js)
    check(r['status'] == 'ok' and r['mode'] == 'stream', 'status ok, mode stream')
    reps = r['repetitions']
    check(len(reps) == 3, '3 repetitions in JSON')
    for rep in reps:
        # The secondary received exactly what the master sent.
        check(rep['bytes_master'] == rep['bytes_secondary'] == rep['size_bytes'] * rep['iterations'],
              f'bytes moved agree on both ranks: {rep}')
        mbps = rep['size_bytes'] * rep['iterations'] * 8 / rep['master']['elapsed_s'] / 1e6
        check(math.isclose(mbps, rep['throughput_mbps'], rel_tol=1e-6), 'throughput = bytes / master time')
    tp = [rep['throughput_mbps'] for rep in reps]
    s = r['summary']['throughput_mbps']
    check(math.isclose(s['avg'], sum(tp) / 3, rel_tol=1e-9) and s['min'] == min(tp) and s['max'] == max(tp),
          'summary statistics match the rows')
    check(r['bytes_moved'] == sum(rep['bytes_master'] for rep in reps), 'bytes_moved is the sum of repetitions')


def case_mpitest_modes(d):
    for flags, mode, factor in ((['-i'], 'pingpong', 2), (['-n'], 'stream', 1), (['-i', '-n'], 'pingpong', 2)):
        js = os.path.join(d, 'm.json')
        run('nr-mpitest', 2, *flags, '-r', 2, '-t', 0.05, '-m', '4k', '--json', js, '--verify')
        r = load(js)
        check(r['mode'] == mode and r['options']['blocking'] == ('-n' not in flags), f'{flags}: mode and blocking')
        for rep in r['repetitions']:
            check(rep['bytes_master'] == factor * rep['size_bytes'] * rep['iterations'],
                  f'{flags}: ping-pong counts both directions')


def case_mpitest_sweep(d):
    out, js = os.path.join(d, 'sweep'), os.path.join(d, 'sweep.json')
    run('nr-mpitest', 2, '-i', '-e', 8, '-t', 0.01, '-o', out, '--json', js)
    check(len(rows(out)) == 9, f'-e 8 gives 9 rows (1 .. 256 bytes), got {len(rows(out))}')
    sizes = [p['size_bytes'] for p in load(js)['sweep']]
    check(sizes == [2 ** k for k in range(9)], f'sweep sizes 1..256, got {sizes}')


def case_mpitest_latency(d):
    js = os.path.join(d, 'lat.json')
    p = run('nr-mpitest', 2, '-A', 8, '-r', 4, '-t', 0.1, '--json', js)
    lines = re.findall(r'MPI Round Trip Time \((\d+)\) : ([\d.]+) usec', p.stdout)
    check(len(lines) == 4, f'4 round-trip lines, got {len(lines)}')
    m = re.search(r'MPI RTT min/avg/max = ([\d.]+)/([\d.]+)/([\d.]+) usec', p.stdout)
    check(m and float(m[1]) <= float(m[2]) <= float(m[3]), 'min <= avg <= max')
    lat = load(js)['latency']
    check(lat['size_bytes'] == 8 and len(lat['rtt_us']) == 4, 'latency JSON: size and trials')
    check(math.isclose(lat['avg_us'], sum(lat['rtt_us']) / 4, rel_tol=1e-9), 'avg_us is the mean of the trials')
    check(all(x > 0 for x in lat['rtt_us']), 'positive round-trip times')


def case_mpitest_syslog(d):
    out = os.path.join(d, 'sys')
    p = run('nr-mpitest', 2, '-c', '-r', 2, '-t', 0.05, '-m', '4k', '-o', out)
    for suffix in ('m_log', 's_log'):
        path = f'{out}.{suffix}'
        check(os.path.exists(path), f'{path} written')
        text = open(path).read()
        m = re.search(r'# Watch times: (\d+)', text)
        check(m and int(m[1]) == 4, f'{suffix}: pre-test + 2 repetitions + post-test samples')
    check('Secondary node\'s syslog' in p.stdout, 'syslog lines on stdout')


def case_mpitest_verify(d):
    for flags in ([], ['-n'], ['-i'], ['-i', '-n']):
        p = run('nr-mpitest-faulty', 2, '--verify', *flags, '-r', 1, '-t', 0.02, '-m', '1k', expect=3,
                env={'NR_FAULT_CORRUPT': '1'})
        check('--verify' in p.stderr and 'expected' in p.stderr, f'{flags}: the mismatch is named')
    run('nr-mpitest', 2, '--verify', '-r', 1, '-t', 0.02, '-m', '1k')   # and without the corruption it passes


def case_mpitest_latency_nonblocking(d):
    """-a -n times a round trip: the secondary returns each message after it arrived (never sends first)."""
    js = os.path.join(d, 'lat.json')
    for flags in (['-a', '-n'], ['-A', '4k', '-n'], ['-a']):
        p = run('nr-mpitest-faulty', 2, *flags, '-r', 2, '-t', 0.02, '--json', js, env={'NR_FAULT_ORDER': '1'})
        check('NR_FAULT_ORDER' not in p.stderr, f'{flags}: the secondary sent before it received: {p.stderr}')
        check(load(js)['mode'] == 'latency', f'{flags}: latency mode')
    # The layer itself sees an exchange: -i -n throughput is Hpcbench's simultaneous send and receive.
    p = run('nr-mpitest-faulty', 2, '-i', '-n', '-r', 1, '-t', 0.02, '-m', '1k', env={'NR_FAULT_ORDER': '1'})
    check('NR_FAULT_ORDER' in p.stderr, 'the order check sees an exchange')


def case_mpi_buffers_written(d):
    """No kernel sends an untouched buffer: all-zero pages are the kernel's shared zero page, which a shared-memory
    or single-copy transport reads from cache (nr-mpitest 1 MiB shm bandwidth was 1.3 x NetPIPE's)."""
    env = {'NR_FAULT_ZERO': '1'}
    # Sizes above malloc's mmap threshold: such a buffer is fresh zero pages until written.
    runs = (('nr-mpitest-faulty', 2, '-r', 1, '-t', 0.02, '-m', '1M'),
            ('nr-mpitest-faulty', 2, '-i', '-r', 1, '-t', 0.02, '-m', '1M'),
            ('nr-mpitest-faulty', 2, '-e', 20, '-t', 0.005),
            ('nr-mpicoll-faulty', 2, '-t', 0.005, '-r', 1, '-s', '1000000', '-T', 'p2p,bcast,right_shift'),
            ('nr-ebb-faulty', 4, '-s', '1048576-1048576', '-r', 1, '-n', 2),
            ('nr-linkmap-faulty', 2, '-t', 0.02, '-m', '1M', '--rtt', '--rtt-size', '8k', '--rtt-trials', 2))
    for kernel, np, *opts in runs:
        p = run(kernel, np, *opts, env=env)
        check('NR_FAULT_ZERO' not in p.stderr, f'{kernel} {opts}: sends untouched memory: {p.stderr[:300]}')


def _fault(d, kernel, np, fault, *opts):
    """An MPI call that fails on rank 0 while the others succeed: every rank exits 1, the JSON says error."""
    js = os.path.join(d, 'fault.json')
    p = run(kernel, np, *opts, '--json', js, expect=1, env={'NR_FAULT': fault})
    check(p.stderr.count('MPI') >= 1, f'{kernel} {fault}: the MPI failure is reported: {p.stderr}')
    r = load(js)
    check(r['status'] != 'ok' and r.get('error'), f'{kernel} {fault}: status {r["status"]}, error {r.get("error")}')


def case_mpi_return_codes(d):
    # Calls whose failure leaves no peer waiting inside a timed loop (collectives, warm-up exchanges). A point-to-
    # point call failing on one side only in the middle of a timed loop cannot be agreed on without a check per
    # message; real transport failures reach both sides.
    # Only calls that happen in every run (under load a single calibration probe may be enough: one MPI_Bcast).
    for fault in ('Bcast:1', 'Barrier:1', 'Barrier:3', 'Allgather:1'):
        _fault(d, 'nr-mpitest-faulty', 2, fault, '-r', 2, '-t', 0.02, '-m', '1k')
    for fault in ('Bcast:1', 'Barrier:1', 'Barrier:2', 'Sendrecv:1'):
        _fault(d, 'nr-mpicoll-faulty', 2, fault, '-t', 0.005, '-r', 2, '-s', '8', '-T', 'bcast,right_shift')
    for fault in ('Bcast:1', 'Bcast:2', 'Gather:1', 'Allgather:1', 'Sendrecv:1', 'Barrier:1'):
        _fault(d, 'nr-ebb-faulty', 4, fault, '-s', '1024-1024', '-r', 2)


def _fault_in_loop(d, kernel, np, fault, call, *opts, bound=60, env=None, rank=1):
    """An MPI call fails on rank 1 alone inside a timed loop, while its partner (or every other rank) is inside the
    loop's next call: every rank must end within `bound` seconds (it used to hang for good), the job must exit 1,
    and stderr and the JSON must name the failing rank and call. Another fault: `env`, and the `rank` that fails."""
    js = os.path.join(d, 'loop.json')
    env = env or {'NR_FAULT': fault, 'NR_FAULT_RANK': '1'}
    t0 = time.monotonic()
    try:
        p = run(kernel, np, *opts, '--json', js, expect=None, env=env, timeout=bound + 60)
    except subprocess.TimeoutExpired as exc:
        sys.exit(f'FAIL: {kernel} {env}: still running after {bound + 60} s (a rank waits forever)\n'
                 f'stdout:\n{exc.stdout}\nstderr:\n{exc.stderr}')
    took = time.monotonic() - t0
    print(f'{kernel} -np {np} {" ".join(map(str, opts))}, {env}: rank {rank} failed, every rank ended {took:.2f} s '
          f'after the start, exit {p.returncode}')
    check(took < bound, f'{kernel} {fault}: the job took {took:.1f} s to end (bound {bound} s)\n{p.stderr}')
    check(p.returncode == 1, f'{kernel} {fault}: exit {p.returncode}, expected 1\n{p.stderr}')
    check(f'rank {rank}' in p.stderr and call in p.stderr, f'{kernel} {fault}: rank and call named: {p.stderr}')
    r = load(js)
    check(r['status'] == 'error' and f'rank {rank}' in r['error'] and call in r['error'] and
          r['failed_rank'] == rank, f'{kernel} {fault}: the error document names the rank and the call: {r}')
    check(r['tool'] == kernel.replace('-faulty', ''), f'tool {r["tool"]}')
    return p


def case_ebb_fault_in_loop(d):
    # Sendrecv 1 is the warm-up; 5 is the fourth of the timed block's 20 exchanges.
    _fault_in_loop(d, 'nr-ebb-faulty', 4, 'Sendrecv:5', 'MPI_Sendrecv', '-s', '1024-1024', '-r', 2)


def case_mpitest_fault_in_loop(d):
    # Every Recv and Wait of the secondary is a data message of the timed loop (warm-up, probes, runs; it sends its
    # times with MPI_Send); 1-MiB messages leave the master blocked in MPI_Send (rendezvous) once the secondary
    # stops receiving, and in MPI_Recv in a round trip.
    _fault_in_loop(d, 'nr-mpitest-faulty', 2, 'Recv:6', 'MPI_Send/MPI_Recv', '-r', 3, '-t', 0.2, '-m', '1M')
    _fault_in_loop(d, 'nr-mpitest-faulty', 2, 'Recv:8', 'MPI_Send/MPI_Recv', '-i', '-r', 3, '-t', 0.2, '-m', '1M')
    _fault_in_loop(d, 'nr-mpitest-faulty', 2, 'Wait:9', 'MPI_Isend/MPI_Irecv/MPI_Wait', '-n', '-r', 3, '-t', 0.2,
                   '-m', '1M')


def case_mpicoll_fault_in_loop(d):
    # p2p: the secondary's sends are all in the test's loops (warm-up is its first); right_shift: every rank's
    # MPI_Sendrecv is (the ring's neighbours then wait inside theirs). Not bcast: MPI_Bcast also shares each loop's
    # time, so which call the 5th is depends on how many loops the machine's speed takes (a 1-CPU quota: that one).
    _fault_in_loop(d, 'nr-mpicoll-faulty', 2, 'Send:2', 'mpi_send/mpi_recv', '-t', 0.05, '-r', 2, '-s', '100000',
                   '-T', 'p2p')
    _fault_in_loop(d, 'nr-mpicoll-faulty', 4, 'Sendrecv:2', 'mpi_sendrecv', '-t', 0.05, '-r', 2, '-s', '100000',
                   '-T', 'right_shift')


# ---- nr-mpitest --duet: every repetition paired with a yardstick run outside MPI ----

# The first mode calibrates both counts (the delay case calibrates a latency test); the others run fixed counts, so a
# host whose speed swings many times over (a loaded 2-vCPU VM) cannot fail them on the calibration verdict.
DUET_MODES = ((('-m', '64k', '-t', 0.1), 'stream'), (('-m', '64k', '-n', '--iterations', 50), 'stream'),
              (('-m', '64k', '-i', '--iterations', 50), 'pingpong'),
              (('-m', '64k', '-i', '-n', '--iterations', 50), 'pingpong'), (('-A', 8, '--iterations', 200), 'latency'))


def _duet_check(r, yardstick, reps):
    """A duet document: a pair per repetition, each pair's ratio MPI / yardstick, statistics that match; returns the
    ratios."""
    d = r['duet']
    check(r['status'] == 'ok' and r['options']['duet'] == yardstick == d['yardstick'], f'status, yardstick: {d}')
    check(len(d['order']) == reps and set(d['order']) <= {'mpi', 'yardstick'}, f'the order of each pair: {d}')
    lat = r['mode'] == 'latency'
    mpi, yard = d['figures']['mpi'], d['figures']['yardstick']
    values = (lambda side: side['rtt_us']) if lat else (lambda side: side['values_mbps'])
    check(values(mpi) == (r['latency']['rtt_us'] if lat else [x['throughput_mbps'] for x in r['repetitions']]),
          'the MPI figures are the main result\'s')
    ratios = d['ratio']['values']
    check(len(ratios) == reps and all(math.isfinite(x) and x > 0 for x in ratios), f'ratios: {ratios}')
    for m, y, q in zip(values(mpi), values(yard), ratios):
        check(math.isclose(q, m / y, rel_tol=1e-9), f'ratio {q} = MPI {m} / yardstick {y}')
    check(d['ratio']['min'] == min(ratios) and d['ratio']['max'] == max(ratios) and
          math.isclose(d['ratio']['median'], statistics.median(ratios), rel_tol=1e-12), f'ratio statistics: {d}')
    if lat:
        check(yard['min_us'] == min(values(yard)) and r['latency']['min_us'] == mpi['min_us'], 'latency statistics')
    else:
        check(math.isclose(yard['throughput_mbps']['median'], statistics.median(values(yard)), rel_tol=1e-12) and
              mpi['throughput_mbps'] == r['summary']['throughput_mbps'], 'throughput statistics')
    check(d['iterations'] >= 1 and d['calibration']['runs'] == reps, f'the yardstick\'s count and calibration: {d}')
    if yardstick == 'tcp':
        check(d['iface'] and d['address'] and d['port'] > 0 and isinstance(d['sleeps'], bool),
              f'the TCP endpoint: {d}')
    return ratios


def _duet(d, yardstick):
    for flags, mode in DUET_MODES:
        js = os.path.join(d, 'duet.json')
        p = run('nr-mpitest', 2, *flags, '-r', 3, '--duet', yardstick, '--verify', '--json', js)
        r = load(js)
        check(r['mode'] == mode, f'{flags}: mode {r["mode"]}')
        ratios = _duet_check(r, yardstick, 3)
        lines = re.findall(rf'^  duet \(\d\): {yardstick} [\d.]+ (?:usec|Mbps), MPI/{yardstick} [\d.]+, '
                           rf'(?:MPI|{yardstick}) first$', p.stdout, re.M)
        check(len(lines) == 3 and f'Duet MPI/{yardstick} ratio min/median/max = ' in p.stdout, f'text:\n{p.stdout}')
        print(f'--duet {yardstick} {" ".join(map(str, flags))}: MPI/{yardstick} per pair '
              f'{[round(x, 4) for x in ratios]}, first {r["duet"]["order"]}')


def case_mpitest_duet_tcp(d):
    _duet(d, 'tcp')


def case_mpitest_duet_tcp_sleep(d):
    """--duet-sleep: the TCP yardstick waits in poll (for a library that sleeps, LAM/MPI's tcp RPI), says so in its
    text and JSON, and pairs every repetition as the polling one does; without it the document says it polled."""
    js = os.path.join(d, 'sleep.json')
    for sleep in (True, False):
        extra = ['--duet-sleep'] if sleep else []
        p = run('nr-mpitest', 2, '-A', 8, '--iterations', 200, '-r', 3, '--duet', 'tcp', *extra, '--json', js)
        r = load(js)
        ratios = _duet_check(r, 'tcp', 3)
        check(r['duet']['sleeps'] is sleep and ('waits sleep in poll' in p.stdout) is sleep,
              f'--duet-sleep {sleep}: {r["duet"]}\n{p.stdout}')
        print(f'--duet tcp{" --duet-sleep" if sleep else ""}: MPI/tcp per pair {[round(x, 3) for x in ratios]}')


def case_mpitest_duet_shm(d):
    _duet(d, 'shm')


def case_mpitest_duet_delay(d):
    """NR_FAULT_DELAY_US: every MPI send on both ranks busy-waits first, an MPI stack whose per-message latency
    regressed. With a delay at least the clean run's slowest round trip (200 us at the least, some hundred times a
    loopback MPI round trip on an idle host) every round trip grows by two delays, and the duet ratio against the
    TCP yardstick must at least double against a clean run of the same test build. A host whose state moves several
    times over between two runs (spinning ranks starved on a loaded 2-vCPU VM) gets three attempts."""
    js = os.path.join(d, 'delay.json')

    def measure(delay):
        # spelt 2.005e2 for 200.5: a reader of whole microseconds (atol) would take 2, and the check below fail
        run('nr-mpitest-faulty', 2, '-A', 8, '-r', 5, '-t', 0.2, '--duet', 'tcp', '--json', js,
            env={'NR_FAULT_DELAY_US': f'{delay / 100:g}e2'})
        r = load(js)
        _duet_check(r, 'tcp', 5)
        lat, q = r['latency'], r['duet']['ratio']
        print(f'NR_FAULT_DELAY_US={delay}: MPI RTT min/max {lat["min_us"]:.2f}/{lat["max_us"]:.2f} us, tcp RTT min '
              f'{r["duet"]["figures"]["yardstick"]["min_us"]:.2f} us, MPI/tcp min/median/max '
              f'{q["min"]:.3f}/{q["median"]:.3f}/{q["max"]:.3f}')
        return lat, q

    # a typo is an error, not a run without the fault
    for env, said in (({'NR_FAULT_DELAY_US': '7us'}, 'NR_FAULT_DELAY_US: 7us is not a number of microseconds'),
                      ({'NR_FAULT_DELAY_US': '7', 'NR_FAULT_RANK': 'one'}, 'NR_FAULT_RANK: one is not a rank'),
                      ({'NR_FAULT_STALL': 'Send:2:60ms'}, 'NR_FAULT_STALL: Send:2:60ms is not NAME:N:MS')):
        p = run('nr-mpitest-faulty', 2, '-A', 8, '-r', 1, '-t', 0.02, expect=None, env=env)
        check(p.returncode != 0 and said in p.stderr, f'{env}: exit {p.returncode}, {p.stderr}')
    for attempt in range(3):
        clean, q0 = measure(0)
        delay = max(200, math.ceil(clean['max_us'])) + 0.5      # a fraction of a microsecond is kept
        slow, q1 = measure(delay)
        check(slow['min_us'] >= 2 * delay, f'every round trip carries the two delays: {slow["min_us"]} us')
        if q1['median'] >= 2 * q0['median']:
            return
        print(f'attempt {attempt + 1}: the ratio went from {q0["median"]:.3f} to {q1["median"]:.3f} only')
    check(False, 'the duet ratio did not double with the delay in three attempts')


def case_mpitest_duet_errors(d):
    """Wrong --duet use: one error line, exit 2 for usage, 1 for an interface that is not there."""
    for opts, words, code in ((('--duet', 'udp'), "--duet: 'udp' is neither tcp nor shm", 2),
                              (('--duet-iface', 'lo'), '--duet-iface goes with --duet tcp', 2),
                              (('--duet', 'shm', '--duet-iface', 'lo'), '--duet-iface goes with --duet tcp', 2),
                              (('--duet', 'shm', '--duet-sleep'), '--duet-sleep goes with --duet tcp', 2),
                              (('--duet', 'tcp', '-e', 4), 'not -e', 2),
                              (('--duet', 'tcp', '--duet-iface', 'nonexistent0'), "no interface 'nonexistent0'", 1)):
        js = os.path.join(d, 'err.json')
        p = run('nr-mpitest', 2, '--json', js, '-r', 1, '-t', 0.02, *opts, expect=code)
        errs = [x for x in p.stderr.splitlines() if 'nr-mpitest: error' in x]
        check(len(errs) == 1 and words in errs[0], f'{opts}: one error line naming {words!r}: {p.stderr}')
        if code == 1:
            r = load(js)
            check(r['status'] == 'error' and words in r['error'], f'{opts}: the error document: {r}')
    print('--duet shm with the ranks on two hosts: not tested here (one host)')


def case_mpitest_duet_fault_in_loop(d):
    """Failures inside the duet loop end every rank in bounded time, named: an MPI receive that fails on rank 1 in
    the second MPI repetition; a yardstick that hangs on rank 1 (rank 0 gives up at the run's deadline, 10 x its
    expected time + 10 s); a TCP yardstick that rank 1 resets (rank 0 sees it at once)."""
    # --iterations: nothing calibrated, so the calls can be counted: rank 1's Recv 1 is the MPI warm-up, 2-6 the
    # first MPI repetition; yardstick run 1 is its warm-up, 3 the second pair's.
    fixed = ('-r', 4, '-m', '64k', '--iterations', 5)
    for y in ('tcp', 'shm'):
        _fault_in_loop(d, 'nr-mpitest-faulty', 2, 'Recv:9', 'MPI_Send/MPI_Recv', *fixed, '--duet', y)
        # the stalled rank wakes after 80 s, before the 100-s hard timeout: a launcher that fails to end it shows
        # as a job of 80 s with its output, not as a hang with none
        p = _fault_in_loop(d, 'nr-mpitest-faulty', 2, 'stall', f'--duet {y} yardstick', *fixed, '--duet', y,
                           bound=40, env={'NR_DUET_FAULT': 'stall:1:3:80'}, rank=0)
        check('timed out' in p.stderr, p.stderr)
    p = _fault_in_loop(d, 'nr-mpitest-faulty', 2, 'reset', '--duet tcp yardstick', *fixed, '--duet', 'tcp',
                       '-i', bound=20, env={'NR_DUET_FAULT': 'reset:1:3'}, rank=0)
    check('reset' in p.stderr.lower() or 'connection closed' in p.stderr, p.stderr)


def case_mpitest_calibration_stall(d):
    """A 60-ms stall in the first calibration probe (one 1-KiB message) of a 0.5-s target: the calibration must not
    shrink the count to a handful of messages (runs must last about the target) and the JSON records target and
    achieved times."""
    js = os.path.join(d, 'stall.json')
    run('nr-mpitest-faulty', 2, '-r', 3, '-t', 0.5, '-m', '1k', '--json', js, env={'NR_FAULT_STALL': 'Send:2:60'})
    r = load(js)
    cal = r['calibration']
    times = [rep['master']['elapsed_s'] for rep in r['repetitions']]
    print(f'stalled first probe: {r["repetitions"][0]["iterations"]} messages per run, runs {times} s, '
          f'{cal["probes"]} probes')
    # The stalled probe alone gave 9 messages (0.5 s / 0.06 s): every run a millisecond long. A machine under load
    # can still make one run fall short (its probes were slowed too): most runs, and the median, must not.
    check(cal['target_s'] == 0.5 and cal['runs'] == 3 and 2 * cal['short_runs'] < cal['runs'],
          f'calibration record: {cal}')
    check(sorted(times)[1] >= 0.25, f'the median run lasts at least half the 0.5-s target: {times}')
    check(cal['short_runs'] == 0 or 'warning' in cal, f'a short run is reported: {cal}')


def case_mpitest_calibration_slow_phase(d):
    """The probes and the first run on a busy machine, then the load lets up: with the count calibrated for the busy
    machine the later runs lasted a few percent of the target and the test failed (exit 3). Every run is re-checked
    now: the first that falls short is run again with the count its own rate gives, and that count holds on."""
    js, out = os.path.join(d, 'slow.json'), os.path.join(d, 'slow')
    # The injected slow phase must dwarf this machine's own round trip, or nothing falls short (a loaded host's
    # 24-47 ms round trips drowned a fixed 2-ms stall): the stall is ten times the slowest unstalled round trip, at
    # least 2 ms, and the run's target scales with it, so the stalled phase always covers the same messages.
    run('nr-mpitest', 2, '-a', '-A', '1k', '-r', 2, '--iterations', 20, '--json', js)
    stall_ms = max(2, math.ceil(10 * max(load(js)['latency']['rtt_us']) / 1000))
    # stall_ms before each of rank 0's first 33 sends: the warm-up, the probes and the first run (about 24 round
    # trips: each run's target, the test time over -r 4, is 25 stalls)
    run('nr-mpitest-faulty', 2, '-a', '-A', '1k', '-r', 4, '-t', round(0.1 * stall_ms, 3), '--json', js, '-o', out,
        env={'NR_FAULT_STALL': f'Send:1:{stall_ms}:33'})
    r = load(js)
    cal, lat = r['calibration'], r['latency']
    # every trial's own count, in the JSON and in the -o header (not only the last one)
    counts = lat['trial_iterations']
    check(len(counts) == 4 and counts[-1] == lat['iterations'], f'one count per trial: {counts}')
    header = re.search(r'^# Iteration : ([\d ]+)', open(out).read(), re.M)
    listed = [int(x) for x in header[1].split()] if header else []
    check(listed == (counts if len(set(counts)) > 1 else counts[:1]), f'-o header {listed} against {counts}')
    print(f'slow phase ({stall_ms} ms stalls): round trips {[round(t, 1) for t in lat["rtt_us"]]} us, '
          f'{cal["recalibrations"]} re-runs, {lat["iterations"]} per run at the end, shortest run '
          f'{cal["achieved_min_s"]:.4f} s')
    check(cal['runs'] == 4 and cal['recalibrations'] >= 1, f'a short run was run again: {cal}')
    check(cal['far_short_runs'] == 0 and 2 * cal['short_runs'] < cal['runs'], f'no run far short of the target: {cal}')


def ci_of_median(xs):
    """The interval the repetition rule must use: the k-th smallest and largest sample, k from the binomial tails
    at 90 % (None below 5 samples)."""
    n, xs = len(xs), sorted(xs)
    ks = [c for c in range(1, (n + 1) // 2 + 1) if sum(math.comb(n, i) for i in range(c)) / 2 ** n <= 0.05]
    return (xs[max(ks) - 1], xs[n - max(ks)]) if ks else None


def half_width(xs):
    ci, med = ci_of_median(xs), statistics.median(xs)
    return max(med - ci[0], ci[1] - med) / med if ci else math.inf


def stopped_first(xs, lo, hi, precision, rule):
    """The rule stopped at the first count from lo that met the precision, else at hi, and says which."""
    n = len(xs)
    check(all(half_width(xs[:k]) > precision for k in range(lo, n)), f'{n} ran: an earlier count met it')
    check(n == hi or half_width(xs) <= precision, f'{n} of {lo}..{hi} ran without the precision')
    check(rule['ran'] == n and (rule['stopped'] == 'precision') == (half_width(xs) <= precision),
          f'why it stopped: {rule} for {xs}')


def case_mpitest_repetition_rule(d):
    """-r MIN:MAX: rank 0 stops the repetitions once the median's 90 % interval (order statistics) is within
    --precision of it, or at MAX; both ranks follow its decision, and the JSON and -o say how many ran and why."""
    def rule(*opts):
        js, out = os.path.join(d, 'r.json'), os.path.join(d, 'r')
        p = run('nr-mpitest', 2, *opts, '-t', 0.02, '-m', '4k', '--json', js, '-o', out)
        doc = load(js)
        return doc, doc['repetitions_rule'], p.stdout, open(out).read()

    # a loose precision: stops once an interval exists, unless the machine is wildly noisy (then at the maximum)
    doc, rr, stdout, text = rule('-r', '5:9', '--precision', 0.5)
    tp = [rep['throughput_mbps'] for rep in doc['repetitions']]
    stopped_first(tp, 5, 9, 0.5, rr)
    reason = 'precision reached' if rr['stopped'] == 'precision' else 'maximum count reached'
    check(rr['median'] == doc['summary']['throughput_mbps']['median'], f'the median: {rr}')
    lo, hi = ci_of_median(tp)
    check(math.isclose(rr['median_ci'][0], lo) and math.isclose(rr['median_ci'][1], hi), f'{rr} against {lo}, {hi}')
    check(f'Repetitions: {len(tp)} of 5..9: {reason}' in stdout and
          f'# Test repetition: {len(tp)} of 5..9: {reason}' in text, 'stdout and -o say why it stopped')
    print(f'-r 5:9 --precision 0.5: {len(tp)} ran, {rr["stopped"]}, +-{100 * rr["half_width"]:.1f} %')
    # a precision no machine reaches: runs to the maximum and says so
    doc, rr, stdout, text = rule('-r', '2:6', '--precision', 1e-4)
    check(rr['stopped'] == 'max' and rr['ran'] == 6 == len(doc['repetitions']), f'stopped at the maximum: {rr}')
    check('maximum count reached' in stdout and '# Test repetition: 6 of 2..6: maximum count reached' in text, text)
    # the latency test: trials are the repetitions
    js = os.path.join(d, 'l.json')
    run('nr-mpitest', 2, '-A', 8, '-r', '5:7', '--precision', 0.5, '-t', 0.05, '--json', js)
    doc = load(js)
    rtt = doc['latency']['rtt_us']
    stopped_first(rtt, 5, 7, 0.5, doc['repetitions_rule'])
    check(len(rtt) == doc['repetitions_rule']['ran'] == len(doc['latency']['trial_iterations']),
          f'latency trials: {doc["repetitions_rule"]}')
    # a fixed count is today's -r N, unchanged
    doc, rr, stdout, text = rule('-r', 3)
    check(rr['stopped'] == 'fixed' and rr['precision'] is None and len(doc['repetitions']) == 3 and
          '# Test repetition: 3\n' in text, f'fixed count: {rr}')
    for bad, why in ((['-r', '3', '--precision', '0.1'], '--precision goes with'), (['-r', '6:5'], 'MIN 6 > MAX 5'),
                     (['-r', '0:5'], 'outside the allowed range'), (['-e', 4, '-r', '3:5'], '-e runs each size once')):
        p = run('nr-mpitest', 2, *bad, expect=2)
        check(why in p.stderr, f'{bad}: {p.stderr}')


def case_coll_ebb_repetition_rule(d):
    """nr-mpicoll's runs of a point and nr-ebb's rounds of a size follow the same rule (-r MIN:MAX, --precision):
    every point's runs, their operation counts and the rule's outcome in the JSON; every rank stops together."""
    js = os.path.join(d, 'c.json')
    run('nr-mpicoll', 2, '-t', 0.005, '-r', '5:7', '--precision', 0.5, '-s', '8,1000', '-T', 'bcast,allreduce',
        '--json', js)
    for t in load(js)['tests']:
        for p in t['points']:
            times, rule = p['runs_time_per_op_us'], p['repetitions_rule']
            stopped_first(times, 5, 7, 0.5, rule)
            check(len(p['runs_iterations']) == len(times) and all(k >= 1 for k in p['runs_iterations']) and
                  p['runs_iterations'][-1] == p['iterations'], f'{t["name"]}: one count per run: {p}')
            check(math.isclose(p['time_per_op_us'], min(times)), f'{t["name"]}: the best of the runs that ran')
    js = os.path.join(d, 'e.json')
    run('nr-ebb', 2, '-s', '4096-8192', '-r', '5:8', '--precision', 0.5, '-n', 4, '--json', js)
    for size in load(js)['sizes']:
        bw = [r['bandwidth_mb_per_s'] for r in size['rounds']]
        stopped_first(bw, 5, 8, 0.5, size['repetitions_rule'])
        check(size['rounds_run'] == len(bw) and size['connections'] == 2 * len(bw), f'P x rounds connections: {size}')
    p = run('nr-ebb', 2, '-r', '3', '--precision', '0.1', expect=2)
    check('--precision goes with -r/--rounds MIN:MAX' in p.stderr, p.stderr)


def stop_one_rank(d, kernel, np, victim, opts, ready, deadline, slack):
    """Start the test build of kernel, SIGSTOP rank `victim` once stdout shows `ready`, and check the job ends within
    the deadline plus slack seconds, exit status 1, naming the stopped rank and its node."""
    piddir = tempfile.mkdtemp(dir=d)
    out_path, js = os.path.join(piddir, 'stdout'), os.path.join(piddir, 'r.json')
    cmd = [ARGS.mpiexec, ARGS.np_flag, str(np)] + shlex.split(ARGS.preflags) + \
        [os.path.join(ARGS.test_bin, kernel + '-faulty')] + [str(o) for o in opts] + \
        ['--deadline', str(deadline), '--json', js]
    env = dict(os.environ, NR_FAULT_PIDDIR=piddir)
    victim_pid = None
    with open(out_path, 'w') as out, subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True, env=env,
                                                       start_new_session=True) as proc:
        try:
            t_start = time.monotonic()
            while not re.search(ready, open(out_path).read()):
                if proc.poll() is not None or time.monotonic() - t_start > 120:
                    sys.exit(f'FAIL: {kernel}: never reached {ready!r} (exit {proc.poll()}): '
                             f'{open(out_path).read()}\n{proc.stderr.read() if proc.poll() is not None else ""}')
                time.sleep(0.05)
            victim_pid = int(open(os.path.join(piddir, f'rank.{victim}')).read())
            os.kill(victim_pid, signal.SIGSTOP)
            stopped = time.monotonic()
            _, err = proc.communicate(timeout=deadline + slack + 60)
            took = time.monotonic() - stopped
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            sys.exit(f'FAIL: {kernel}: rank {victim} stopped, the job still ran {deadline + slack + 60} s later')
        finally:
            if victim_pid:   # the launcher normally kills it; never leave a stopped rank behind
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.kill(victim_pid, sig)
                    except ProcessLookupError:
                        break
    host = socket.gethostname().split('.')[0]
    print(f'{kernel}: rank {victim} stopped: exit {proc.returncode} after {took:.1f} s '
          f'(deadline {deadline} s); {err.strip().splitlines()[0] if err.strip() else "(no stderr)"}')
    check(proc.returncode == 1, f'{kernel}: exit status {proc.returncode}, expected 1:\n{err}')
    check(took <= deadline + slack, f'{kernel}: ended {took:.1f} s after the stop, deadline {deadline} + {slack} s')
    named = re.search(rf'rank {victim} \(node ([^)]+)\) did not answer', err)
    check(named and named[1] == host, f'{kernel}: the stopped rank and its node named:\n{err}')
    check(err.count('did not answer') == 1, f'{kernel}: one error line, not one per rank:\n{err}')
    doc = load(js)
    check(doc['status'] == 'error' and f'rank {victim} (node {host}) did not answer' in doc['error'],
          f'{kernel}: the error document names it: {doc.get("error")}')


def case_watchdog_mpitest(d):
    """A stopped rank (SIGSTOP) in the middle of nr-mpitest's repetitions: rank 0 finds it silent when its run's
    deadline passes and ends the job, naming it (3 of 3)."""
    for _ in range(3):
        stop_one_rank(d, 'nr-mpitest', 2, 1, ['-r', 1000, '-t', 0.05, '-m', '4k'], r'\(1\) Throughput', 5, 8)
    # a slow run is not a stopped rank: rank 0 stalls 3 s in one send of a run whose deadline is 2 s; every rank
    # answers the probe, so rank 0 says so and waits, and the test ends well
    js = os.path.join(d, 'slow.json')
    p = run('nr-mpitest-faulty', 2, '--iterations', 5, '-r', 2, '-m', '1k', '--deadline', 2, '--json', js,
            env={'NR_FAULT_STALL': 'Send:3:3000'})
    check('every rank answers: waiting' in p.stderr and load(js)['status'] == 'ok', f'slow, not stopped: {p.stderr}')


def case_watchdog_mpicoll(d):
    """A stopped rank in nr-mpicoll's timed loops of MPI_Allreduce on 3 ranks (3 of 3)."""
    for _ in range(3):
        stop_one_rank(d, 'nr-mpicoll', 3, 2, ['-t', 0.05, '-r', 1000, '-s', 8, '-T', 'allreduce'], r'Luecke', 5, 8)


def case_watchdog_ebb(d):
    """A stopped rank 0 in nr-ebb's rounds on 4 ranks: rank 1 waits for rank 0 to report, then probes it and names
    it (3 of 3); and a stopped rank 3, which rank 0 names."""
    for _ in range(3):
        stop_one_rank(d, 'nr-ebb', 4, 0, ['-s', '4096-4096', '-r', 100000, '-n', 20], r'round 0:', 5, 25)
    stop_one_rank(d, 'nr-ebb', 4, 3, ['-s', '4096-4096', '-r', 100000, '-n', 20], r'round 0:', 5, 8)


def case_mpi_library_version(d):
    """Every MPI kernel names the MPI library it runs with (MPI_Get_library_version's first line) and the MPI
    standard version (MPI_Get_version)."""
    launcher = os.path.realpath(ARGS.mpiexec).lower()
    expect = 'Open MPI' if 'openmpi' in launcher or 'orterun' in launcher else 'MPICH' if 'mpich' in launcher \
        or 'hydra' in launcher else None
    seen = set()
    for kernel, np, *opts in (('nr-mpitest', 2, '-r', 1, '-t', 0.02, '-m', '1k'),
                              ('nr-mpicoll', 2, '-t', 0.005, '-r', 1, '-s', '8', '-T', 'bcast'),
                              ('nr-ebb', 2, '-s', '1024-1024', '-r', 1, '-n', 2),
                              ('nr-linkmap', 2, '-t', 0.02, '-m', '4k')):
        js = os.path.join(d, 'v.json')
        run(kernel, np, *opts, '--json', js)
        m = load(js)['mpi']
        lib, std = m['library'], m['standard']
        print(f'{kernel}: mpi.library = {lib!r}, mpi.standard = {std!r}')
        check(isinstance(lib, str) and lib.strip() == lib and lib and '\n' not in lib and '\t' not in lib,
              f'{kernel}: one trimmed line: {lib!r}')
        check(re.fullmatch(r'\d+\.\d+', std or '') is not None, f'{kernel}: standard {std!r}')
        check(expect is None or expect in lib, f'{kernel}: {expect} expected in {lib!r} ({ARGS.mpiexec})')
        seen.add((lib, std))
    check(len(seen) == 1, f'the kernels name the same library: {seen}')


def case_mpitest_bad_ranks(d):
    for np in (1, 3):
        p = run('nr-mpitest', np, '-r', 1, expect=None)
        check('exactly 2 MPI ranks' in p.stderr, f'{np} ranks: clear error')
        check(p.stderr.count('needs exactly 2') == 1, 'reported once (rank 0)')


def case_mpitest_bad_options(d):
    for opts, words in ((['-m', '12q'], '-m'), (['-r', '0'], '-r'), (['-e', '40'], '-e'), (['-c'], '-o'),
                        (['--bogus'], 'bogus')):
        p = run('nr-mpitest', 2, *opts, expect=2)
        check(words in p.stderr, f'{opts}: error names {words}: {p.stderr}')


def _coll(d, np):
    js = os.path.join(d, 'coll.json')
    p = run('nr-mpicoll', np, '-t', 0.005, '-r', 2, '-s', '8,1000,100000', '--cap', 1000, '--json', js)
    r = load(js)
    names = [t['name'] for t in r['tests']]
    check(len(names) == 15 and len({t['number'] for t in r['tests']}) == 13, 'all 13 tests (tables 2-a, 2-b, 2-c)')
    norm = {'rate': lambda p: 1, 'normalized rate (p-1)': lambda p: p - 1, 'normalized rate (p)': lambda p: p,
            'log-normalized rate (log2 p)': lambda p: math.log2(p)}
    by_name = {t['name']: t for t in r['tests']}
    check(by_name['bcast_cycled']['normalization'] == 'normalized rate (p-1)', 'table 2-b: normalised by p-1')
    for t in r['tests']:
        sizes = [pt['size_bytes'] for pt in t['points']]
        capped = t['name'] in ('gather', 'allgather', 'scatter', 'alltoall', 'bcast_gather', 'scatter_gather')
        check(sizes == ([8, 1000] if capped else [8, 1000, 100000]), f'{t["name"]}: sizes {sizes}')
        check(f'# Test {t["id"]}: {t["name"]}' in p.stdout, f'table of test {t["id"]} printed')
        for pt in t['points']:
            check(pt['processes'] == np and pt['time_per_op_us'] > 0, 'processes and time per op')
            # The reported rate is the total rate normalised the way the paper's table is (KB/s, two spellings).
            expect = pt['total_rate_kBps'] / norm[t['normalization']](np)
            check(math.isclose(pt['rate_kBps'], expect, rel_tol=1e-9), f'{t["name"]}: normalisation')
            check(pt['rate_kbps'] == pt['rate_kBps'] and pt['total_rate_kbps'] == pt['total_rate_kBps'],
                  'old key names carry the same values')
            # Best of the runs (the paper's rule), every run and the median beside it.
            runs = pt['runs_time_per_op_us']
            check(len(runs) == 2, f'{t["name"]}: one time per run')
            check(math.isclose(pt['time_per_op_us'], min(runs), rel_tol=1e-12), 'result = best run')
            check(math.isclose(pt['median_time_per_op_us'], sum(runs) / 2, rel_tol=1e-12), 'median of 2 runs')
    # Table 2-c is table 2-b's runs normalised by log2 p: one measurement, two rates.
    for b, c in zip(by_name['bcast_cycled']['points'], by_name['bcast_cycled_log']['points']):
        check(b['runs_time_per_op_us'] == c['runs_time_per_op_us'], '2-b and 2-c share their runs')
        check(math.isclose(c['rate_kBps'] * math.log2(np), b['rate_kBps'] * (np - 1), rel_tol=1e-9),
              '2-c = 2-b x (p-1) / log2 p')


def case_mpicoll_calibration_overshoot(d):
    """A probe that lasted far more than the minimum loop time sets no count: one 200-ms stall in the first probe
    (one operation; the warm-up is rank 0's first send) left runs of one operation (1-15 us), in a later probe
    (16 operations) runs of 16, each far below the 0.02-s minimum. The overshooting probe is probed again at the
    count it aims at, and the runs last about the minimum."""
    for first in (2, 10):
        js = os.path.join(d, f'overshoot{first}.json')
        run('nr-mpicoll-faulty', 2, '-T', 'p2p', '-s', '8', '-t', 0.02, '-r', 3, '--json', js,
            env={'NR_FAULT_STALL': f'Send:{first}:200'})
        pt = load(js)['tests'][0]['points'][0]
        runs_s = sorted(t * pt['iterations'] / 1e6 for t in pt['runs_time_per_op_us'])
        print(f'stall in send {first}: {pt["iterations"]} operations per run, runs {[round(t, 4) for t in runs_s]} s')
        check(runs_s[1] >= 0.01, f'stall in send {first}: the median run lasts at least half the minimum: {runs_s}')


def case_mpicoll_2(d):
    _coll(d, 2)


def case_mpicoll_4(d):
    _coll(d, 4)


def case_mpicoll_8(d):
    _coll(d, 8)


def case_mpicoll_bad_test(d):
    p = run('nr-mpicoll', 2, '-T', 'bcast,bogus', expect=2)
    check("unknown test 'bogus'" in p.stderr, 'unknown test named')


def case_mpicoll_too_large(d):
    p = run('nr-mpicoll', 2, '-s', '8000000000', '-T', 'bcast', expect=2)
    check('more than this node allows' in p.stderr, 'memory limit named')


def _ebb(d, np):
    js = os.path.join(d, 'ebb.json')
    p = run('nr-ebb', np, '-s', '4096-16384', '-r', 3, '-b', 4, '--seed', 42, '--relative', '--json', js)
    check('seed 42' in p.stdout and '3 rounds of 20 exchanges' in p.stdout, 'seed and block size printed')
    rounds = re.findall(r'size: (\d+), round (\d+): num: (\d+) average: ([\d.]+) us \(([\d.]+) MiB/s\)', p.stdout)
    check(len(rounds) == 9 and all(int(n) == np for _, _, n, _, _ in rounds), '3 sizes x 3 rounds, num = P')
    # The seed's arithmetic: size x exchanges per round / average block time in us (1048576 x 20 / 65525.545
    # = 320.05 in seed 001), printed with the seed's label.
    for size, _, _, avg, bw in rounds:
        check(math.isclose(float(bw), int(size) * 20 / float(avg), rel_tol=1e-5), f'seed arithmetic: {size} {avg} {bw}')
    r = load(js)
    check(r['options']['exchanges_per_round'] == 20, 'default: 20 exchanges per round, as in seed 001')
    check([s['size_bytes'] for s in r['sizes']] == [4096, 8192, 16384], 'sizes double from MIN to MAX')
    check(isinstance(r['hosts'], list) and len(r['hosts']) == np, 'every rank\'s host')
    check(r['payload_bytes'] == sum(s['size_bytes'] * 20 * np * 3 for s in r['sizes']), 'payload bytes')
    for s in r['sizes']:
        check(sum(b['count'] for b in s['buckets']) == np * 3 == s['connections'], 'buckets sum to P x rounds')
        check(len(s['buckets']) == 4, '-b 4 buckets')
        check(s['relative_ebb'] > 0, 'relative ebb measured')
        check(math.isclose(s['bandwidth_mb_per_s'], s['size_bytes'] * 20 / s['average_us'], rel_tol=1e-9) and
              math.isclose(s['bandwidth_mibps'], s['bandwidth_mb_per_s'] * 1e6 / 2 ** 20, rel_tol=1e-9),
              'bandwidth in the seed unit and in MiB/s')
        for rd in s['rounds']:
            ranks = sorted(x for pair in rd['pairs'] for x in pair['ranks'])
            check(ranks == list(range(np)), f'round {rd["round"]}: the pairs are a bisection of all ranks')
            times = [t for pair in rd['pairs'] for t in pair['time_us']]
            check(math.isclose(sum(times) / np, rd['average_us'], rel_tol=1e-9), 'round average from pair times')
    finals = re.findall(r'size: (\d+) num: (\d+) average', p.stdout)
    check(len(finals) == 3 and all(int(n) == np * 3 for _, n in finals), 'final lines num = P x rounds')
    check(r['options']['seed'] == 42, 'seed in JSON')
    # Same seed, same pairings: the run is reproducible (the pattern, not the timings).
    js2 = os.path.join(d, 'ebb2.json')
    run('nr-ebb', np, '-s', '4096-16384', '-r', 3, '-n', 2, '--seed', 42, '--json', js2)
    r2 = load(js2)
    pairs = [[p['ranks'] for p in rd['pairs']] for s in r['sizes'] for rd in s['rounds']]
    pairs2 = [[p['ranks'] for p in rd['pairs']] for s in r2['sizes'] for rd in s['rounds']]
    check(pairs == pairs2, 'the same seed gives the same pairings')
    check(r2['options']['exchanges_per_round'] == 2, '-n sets the exchanges per round')


def case_ebb_2(d):
    _ebb(d, 2)


def case_ebb_4(d):
    _ebb(d, 4)


def case_ebb_8(d):
    _ebb(d, 8)


def case_ebb_odd_ranks(d):
    p = run('nr-ebb', 3, '-r', 1, expect=2)
    check('even number of MPI ranks' in p.stderr, 'odd rank count named')



# ---- nr-linkmap: the link test of a whole partition as one job ----

TCP_LO = ('--transport', 'tcp', '--bind-iface', 'lo')


def _linkmap_matrix(js, name='linkmatrix.bin', form=None):
    """The N x N matrix nr-linkmap wrote beside its JSON (docs/json-schema.md), as rows of floats (NaN not measured,
    -1 failed), from either form: dense (NRLMAT1: rows of float32) or sparse (NRLMAT2 layout 1: the count of cells,
    N + 1 row offsets, the receivers, the figures). ``form`` 'dense' or 'sparse': the one the file must have."""
    with open(os.path.join(os.path.dirname(js), name), 'rb') as f:
        data = f.read()
    magic, n, flags = struct.unpack('<8sII', data[:16])
    if magic == b'NRLMAT1\0':
        check(form in (None, 'dense') and flags == 0 and len(data) == 16 + 4 * n * n,
              f'{name}: dense header {magic} {n} {flags}, {len(data)} bytes (wanted {form})')
        cells = struct.unpack(f'<{n * n}f', data[16:])
        return [list(cells[i * n:(i + 1) * n]) for i in range(n)]
    check(magic == b'NRLMAT2\0' and flags == 1 and form in (None, 'sparse'),
          f'{name}: header {magic} {n} {flags} (wanted {form})')
    count, = struct.unpack('<Q', data[16:24])
    check(len(data) == 24 + 8 * (n + 1) + 8 * count, f'{name}: {len(data)} bytes for {n} ranks, {count} cells')
    offsets = struct.unpack(f'<{n + 1}Q', data[24:24 + 8 * (n + 1)])
    at = 24 + 8 * (n + 1)
    receivers = struct.unpack(f'<{count}I', data[at:at + 4 * count])
    figures = struct.unpack(f'<{count}f', data[at + 4 * count:])
    check(offsets[0] == 0 and offsets[n] == count and all(a <= b for a, b in zip(offsets, offsets[1:])),
          f'{name}: row offsets {offsets}')
    m = [[math.nan] * n for _ in range(n)]
    for s in range(n):
        row = receivers[offsets[s]:offsets[s + 1]]
        check(list(row) == sorted(set(row)) and s not in row and all(r < n for r in row),
              f'{name}: row {s} receivers {row}')
        for i in range(offsets[s], offsets[s + 1]):
            check(not math.isnan(figures[i]), f'{name}: a sparse cell without a figure: {s}->{receivers[i]}')
            m[s][receivers[i]] = figures[i]
    return m


def _upper_median(values):
    values = sorted(values)
    return values[len(values) // 2]


def _f32(x):
    """x as the matrix stores it (float32)."""
    return struct.unpack('<f', struct.pack('<f', x))[0]


def _linkmap_check(r, js, np, transport, rtt=False):
    """A finished shift-plan run: N-1 rounds of N streams, every direction in the matrix once, the summaries read
    from it."""
    check(r['status'] == 'ok' and r['tool'] == 'nr-linkmap' and r['mode'] == 'linkmap', f'status/tool/mode: {r}')
    check(r['plan'] == 'shift' and r['rounds_planned'] == np - 1 and r['rounds_run'] == np - 1, 'N-1 shift rounds')
    check(len(r['hosts']) == np and all(isinstance(h, str) and h for h in r['hosts']), 'a host per rank')
    check(r['options']['transport'] == transport and r['options']['processes'] == np, 'options')
    check(isinstance(r['mpi']['library'], str) and r['mpi']['library'], 'mpi.library')
    check(all('pairs' not in rd for rd in r['rounds']) and 'matrix_mbps' not in r, 'nothing N x N in the JSON')
    limits = r['cpu_limits']
    check(len(limits) == np and all(c is None or (c['rank'] == i and c['host'] == r['hosts'][i]
                                                  and c['cgroup'].startswith('/') and c['period_us'] > 0
                                                  and c['throttled_ns'] >= 0)
                                    for i, c in enumerate(limits)), f'a CPU cgroup reading per rank: {limits}')
    for rd in r['rounds']:
        check(rd['wall_s'] > 0 and rd['failed_pairs'] == 0 and rd['streams'] == np and
              0 < rd['min_mbps'] <= rd['max_mbps'], f'round {rd["index"]}: {rd}')
    m = _linkmap_matrix(js, form='dense')      # every direction: the dense form is the smaller
    check(r['matrix_file'] == os.path.join(os.path.dirname(js), 'linkmatrix.bin'), f'matrix_file {r["matrix_file"]}')
    check(len(m) == np and all(math.isnan(m[i][i]) for i in range(np)), 'NaN diagonal')
    cells = [m[a][b] for a in range(np) for b in range(np) if a != b]
    check(all(v > 0 for v in cells), f'every direction measured once: {m}')
    lo = min(rd['min_mbps'] for rd in r['rounds'])
    hi = max(rd['max_mbps'] for rd in r['rounds'])
    check(min(cells) == _f32(lo) and max(cells) == _f32(hi), f'the rounds\' extremes are the matrix\'s: {lo} {hi}')
    for node in r['per_node']:
        i = node['rank']
        row, col = [m[i][b] for b in range(np) if b != i], [m[a][i] for a in range(np) if a != i]
        check(node['host'] == r['hosts'][i] and node['sends'] == node['receives'] == np - 1 and
              node['failed_sends'] == node['failed_receives'] == 0 and node['sent_bytes'] > 0 and
              node['received_bytes'] > 0 and node['send_median_mbps'] == _upper_median(row) and
              node['recv_median_mbps'] == _upper_median(col), f'per_node[{i}]: {node}')
    check(sum(x['sent_bytes'] for x in r['per_node']) == sum(x['received_bytes'] for x in r['per_node']),
          'every byte counted once as sent, once as received')
    links = [min(m[a][b], m[b][a]) for a in range(np) for b in range(a + 1, np)]
    rule = r['suspect_rule']
    check(rule['below'] == 0.85 and rule['median_link_mbps'] == _upper_median(links) and
          rule['total'] == sum(v < rule['threshold_mbps'] for v in cells) == rule['listed'] == len(r['suspects']),
          f'suspects: {rule}')
    check([x['mbps'] for x in r['suspects']] == sorted(x['mbps'] for x in r['suspects']) and
          all(x['status'] == 'slow' and m[x['src']][x['dst']] == x['mbps'] for x in r['suspects']), 'suspects listed')
    s = r['summary']
    check(s['pairs'] == s['ok_pairs'] == s['streams'] == np * (np - 1) and s['failed_pairs'] == 0 and
          s['failed'] == [], f'summary {s}')
    check(s['mbps']['min'] == min(cells) and s['mbps']['max'] == max(cells) and
          math.isclose(s['mbps']['median'], statistics.median(cells), rel_tol=1e-6), 'summary min/median/max')
    check([x['mbps'] for x in s['slowest']] == sorted(cells)[:5], 'slowest directions, slowest first')
    if rtt:
        check(s['rtt_us']['min'] > 0 and r['rtt_matrix_file'].endswith('linkrtt.bin'), 'rtt summary')
        t = _linkmap_matrix(js, 'linkrtt.bin', form='dense')
        check(all(t[a][b] > 0 for a in range(np) for b in range(np) if a != b), f'a round trip per direction: {t}')
    if transport == 'tcp':
        check(len(r['tcp']['endpoints']) == np and r['tcp']['rejected_connections'] == 0, f'tcp: {r["tcp"]}')


def _linkmap(d, np):
    for transport, extra in (('mpi', ()), ('tcp', TCP_LO)):
        js = os.path.join(d, f'lm-{transport}.json')
        t0 = time.monotonic()
        p = run('nr-linkmap', np, '-t', 0.1, '-m', '64k', *extra, '--json', js)
        took = time.monotonic() - t0
        r = load(js)
        print(f'nr-linkmap -np {np} {transport}: {took:.2f} s for {np - 1} rounds of 0.1 s, round walls '
              f'{[round(x["wall_s"], 3) for x in r["rounds"]]}')
        _linkmap_check(r, js, np, transport)
        rows = [line for line in p.stdout.splitlines() if re.match(r'\s+\d+ ', line)]
        check(len(rows) == np and all(len(row.split()) == np + 2 for row in rows), f'matrix table:\n{p.stdout}')
        check(len(re.findall(r'^# round \d+ \(\d+ of \d+\)', p.stdout, re.M)) == np - 1, 'a line per round')
    js = os.path.join(d, 'lm-rtt.json')   # the serial round trips, on both transports
    run('nr-linkmap', np, '-t', 0.05, '-m', '16k', '--rtt', '--rtt-trials', 5, '--json', js)
    _linkmap_check(load(js), js, np, 'mpi', rtt=True)
    run('nr-linkmap', np, '-t', 0.05, '-m', '16k', '--rtt', '--rtt-trials', 5, *TCP_LO, '--json', js)
    _linkmap_check(load(js), js, np, 'tcp', rtt=True)


def case_linkmap_2(d):
    _linkmap(d, 2)


def case_linkmap_3(d):
    _linkmap(d, 3)


def case_linkmap_4(d):
    _linkmap(d, 4)


def case_linkmap_tcp_btl(d):
    """The TCP transport when MPI itself runs over TCP (Open MPI's ob1 + TCP BTL, as across hosts): the BTL opens its
    connection to a peer at the first message, and only the sender's progress makes it. Rank 0's GO to rank 3 (the
    one rank no set-up collective had talked to at 4 ranks) waited while rank 0 ran its TCP transfer without calling
    MPI: rank 3 never started round 0 and the round failed at its timeout (on the vcluster: "rank 3 (fast4) did not
    end its transfers"). Every round must end in about -t, every pair ok, with and without --rtt and with a plan file.
    The OMPI_MCA_* variables mean nothing to MPICH, where the case is the plain TCP run again."""
    env = {'OMPI_MCA_pml': 'ob1', 'OMPI_MCA_btl': 'self,tcp'}
    plan = os.path.join(d, 'plan.txt')
    with open(plan, 'w') as f:
        f.write('3>0 2>1\n0>3 1>2\n')
    for np, extra in ((4, ()), (4, ('--rtt', '--rtt-trials', 5)), (5, ()), (4, ('--plan-file', plan))):
        js = os.path.join(d, 'btl.json')
        t0 = time.monotonic()
        p = run('nr-linkmap', np, '-t', 0.1, '-m', '64k', '--round-timeout', 10, *TCP_LO, *extra, '--json', js,
                env=env, timeout=120)
        took = time.monotonic() - t0
        r = load(js)
        walls = [round(x['wall_s'], 3) for x in r['rounds']]
        print(f'nr-linkmap -np {np} {" ".join(map(str, extra))} over the TCP BTL: {took:.2f} s, round walls {walls}')
        if '--plan-file' in extra:
            check(r['status'] == 'ok' and r['summary']['ok_pairs'] == 4 and r['summary']['failed_pairs'] == 0,
                  f'plan file: {r["summary"]}\n{p.stdout}')
        else:
            _linkmap_check(r, js, np, 'tcp', rtt='--rtt' in extra)
        # a round waits on the control messages only as long as the transfer: far below the 10-s round timeout
        check(max(walls) < 5, f'{extra}: a round waited for its control messages: {walls}')


def _measured(m):
    return {(a, b) for a, row in enumerate(m) for b, v in enumerate(row) if not math.isnan(v)}


def case_linkmap_plan_file(d):
    """Rounds given by the caller: comments, blank lines, a plan name, rank numbers; split rounds run as given; the
    shift plan in a given order and with given shifts."""
    plan = os.path.join(d, 'plan.txt')
    with open(plan, 'w') as f:
        f.write('# sample plan: two rounds, the second split\nplan sample-1\n\n0>1 2>3   # a comment\n'
                '1>0\n3>2 2>1\n')
    for transport, extra in (('mpi', ()), ('tcp', TCP_LO)):
        js = os.path.join(d, 'plan.json')
        run('nr-linkmap', 4, '--plan-file', plan, '-t', 0.05, '-m', '16k', *extra, '--json', js)
        r = load(js)
        check(r['status'] == 'ok' and r['plan'] == 'sample-1' and r['options']['plan_file'] == plan, 'plan named')
        check([rd['streams'] for rd in r['rounds']] == [2, 1, 2], f'{transport}: the rounds of the file: {r["rounds"]}')
        m = _linkmap_matrix(js)
        check(_measured(m) == {(0, 1), (2, 3), (1, 0), (3, 2), (2, 1)} and all(m[a][b] > 0 for a, b in _measured(m)),
              f'{transport}: the directions of the file, the others not measured (NaN): {m}')
    # a pair again in a later round (passes of the link test): the matrix has the faster
    with open(plan, 'w') as f:
        f.write('0>1\n1>0\n0>1\n')
    js = os.path.join(d, 'again.json')
    run('nr-linkmap', 2, '--plan-file', plan, '-t', 0.05, '-m', '16k', '--json', js)
    r = load(js)
    twice = [r['rounds'][0]['min_mbps'], r['rounds'][2]['min_mbps']]
    m = _linkmap_matrix(js)
    check(m[0][1] == _f32(max(twice)) and r['summary']['streams'] == 3 and r['summary']['pairs'] == 2,
          f'0>1 twice: {twice}, {m}')
    # host names: on one machine every rank runs on the same host, which must then be refused as ambiguous
    host = r['hosts'][0]
    with open(plan, 'w') as f:
        f.write(f'{host}>1\n')
    p = run('nr-linkmap', 2, '--plan-file', plan, '-t', 0.05, expect=2)
    check(f"host '{host}' runs 2 ranks" in p.stderr and 'line 1' in p.stderr, p.stderr)
    # the shift plan in a given order (rank numbers, any white space, comments), two of its shifts
    order = os.path.join(d, 'order.txt')
    with open(order, 'w') as f:
        f.write('# the switch tree\n2 0\n3\t1\n')
    js = os.path.join(d, 'order.json')
    p = run('nr-linkmap', 4, '--order', order, '--shifts', '1,3', '-t', 0.05, '-m', '16k', '--json', js)
    r = load(js)
    want = {(2, 0), (0, 3), (3, 1), (1, 2)} | {(0, 2), (3, 0), (1, 3), (2, 1)}
    check(r['status'] == 'ok' and r['plan'] == 'shift' and r['rounds_planned'] == 2 and
          r['options']['order'] == order and r['options']['shifts'] == '1,3' and _measured(_linkmap_matrix(js)) == want,
          f'shifts 1 and 3 in the order 2 0 3 1: {_measured(_linkmap_matrix(js))}')
    check(f'plan shift in the order of {order} (2 rounds)' in p.stdout, p.stdout)


def _linkmap_sparse_agrees(r, m, want, what):
    """A run's JSON says what its matrix (read back from the sparse file) holds: the directions ``want`` measured and
    no other, per node the counts and upper medians of its row and column, the median link, the summary."""
    n = len(m)
    check(_measured(m) == want and all(m[a][b] > 0 for a, b in want), f'{what}: the plan\'s directions: {_measured(m)}')
    for node in r['per_node']:
        i = node['rank']
        row = [m[i][b] for b in range(n) if (i, b) in want]
        col = [m[a][i] for a in range(n) if (a, i) in want]
        check(node['sends'] == len(row) and node['receives'] == len(col) and
              node['send_median_mbps'] == _upper_median(row) and node['recv_median_mbps'] == _upper_median(col),
              f'{what}: per_node[{i}] {node}, row {row}, column {col}')
    links = {}
    for a, b in want:
        links[min(a, b), max(a, b)] = min(m[a][b], links.get((min(a, b), max(a, b)), math.inf))
    cells = [m[a][b] for a, b in want]
    s = r['summary']
    check(r['suspect_rule']['median_link_mbps'] == _upper_median(links.values()) and s['pairs'] == s['ok_pairs'] ==
          len(want) and s['mbps']['min'] == min(cells) and s['mbps']['max'] == max(cells) and
          [x['mbps'] for x in s['slowest']] == sorted(cells)[:5], f'{what}: summary {s}, {r["suspect_rule"]}')
    check(all(m[x['src']][x['dst']] == x['mbps'] for x in r['suspects'] + s['slowest']),
          f'{what}: the suspects and slowest name their cells')


def case_linkmap_sparse(d):
    """A plan that runs few of the directions keeps its matrix sparse (docs/json-schema.md): 8 ranks, shifts +1 and
    -1 (16 of 56 directions). On rank 0 the matrix holds the plan's directions only; rank 0 slow in every round is
    rechecked there and named; the file lists the 16 measured directions, and the JSON agrees with it. A plan of
    more streams than the sparse form pays for (a round run twice: 24) keeps the dense matrix on rank 0 and still
    writes the file sparse, the round-trip matrix too; the full shift plan writes the dense form (linkmap_2..4)."""
    plan = os.path.join(d, 'plan.txt')
    ring = [(i, (i + 1) % 8) for i in range(8)]
    back = [(b, a) for a, b in ring]
    want = set(ring) | set(back)
    with open(plan, 'w') as f:
        f.write(' '.join(f'{a}>{b}' for a, b in ring) + '\n' + ' '.join(f'{a}>{b}' for a, b in back) + '\n')
    js = os.path.join(d, 'sparse.json')
    run('nr-linkmap-faulty', 8, '--plan-file', plan, '-t', 0.1, '-m', '64k', '--recheck-below', 0.6, '--json', js,
        env={'NR_LINKMAP_FAULT': 'slow:0:-1:20'})
    r = load(js)
    m = _linkmap_matrix(js, form='sparse')
    size = os.path.getsize(os.path.join(d, 'linkmatrix.bin'))
    check(r['status'] == 'ok' and size == 24 + 8 * 9 + 8 * 16, f'sparse: {size} bytes, {r.get("error")}')
    _linkmap_sparse_agrees(r, m, want, 'sparse, rank 0 slow')
    rc = r['recheck']
    slow = {(x['src'], x['dst']) for x in rc['pairs'] if x['outcome'] == 'slow'}
    reads = {}
    for x in rc['pairs']:
        reads.setdefault((x['src'], x['dst']), [_f32(x['mbps_before'])]).append(_f32(x['mbps_after']))
    check({(0, 1), (0, 7)} <= slow and all(m[a][b] == max(v) for (a, b), v in reads.items()),
          f'sparse: rank 0\'s directions named slow alone, the matrix the best of each: {rc}')
    print(f'nr-linkmap 8 ranks, 16 directions: linkmatrix.bin {size} bytes (dense: {16 + 4 * 64}); rechecked '
          f'{len(rc["pairs"])}, slow alone {sorted(slow)}')
    with open(plan, 'a') as f:
        f.write(' '.join(f'{a}>{b}' for a, b in ring) + '\n')
    js = os.path.join(d, 'twice.json')
    run('nr-linkmap', 8, '--plan-file', plan, '-t', 0.05, '-m', '16k', '--rtt', '--rtt-trials', 3, '--json', js)
    r = load(js)
    m = _linkmap_matrix(js, form='sparse')
    check(r['status'] == 'ok' and r['summary']['streams'] == 24, f'twice: {r.get("error")} {r["summary"]}')
    _linkmap_sparse_agrees(r, m, want, 'a round twice')
    t = _linkmap_matrix(js, 'linkrtt.bin', form='sparse')
    check(_measured(t) == want and all(t[a][b] > 0 for a, b in want), f'twice: a round trip per direction: {t}')


def case_linkmap_bad_plans(d):
    """A wrong plan file is refused before anything runs: one line on stderr naming the line, exit 2."""
    plan = os.path.join(d, 'bad.txt')
    cases = (('0>1\n1>0 1>2\n', 'line 2', 'sends twice'),
             ('0>2 1>2\n', 'line 1', 'receives twice'),
             ('# c\n\n1>1\n', 'line 3', 'self pair'),
             ('0>9\n', 'line 1', 'rank 9 does not exist'),
             ('0>nosuchhost\n', 'line 1', "no rank runs on host 'nosuchhost'"),
             ('0-1\n', 'line 1', "'0-1' is not SRC>DST"),
             ('plan a b\n', 'line 1', "'plan' takes one name"),
             ('# nothing\n', None, 'has no rounds'))
    for text, line, words in cases:
        with open(plan, 'w') as f:
            f.write(text)
        js = os.path.join(d, 'bad.json')
        p = run('nr-linkmap', 3, '--plan-file', plan, '--json', js, expect=2)
        errs = [x for x in p.stderr.splitlines() if 'nr-linkmap: error' in x]
        check(len(errs) == 1 and words in errs[0] and (line is None or f'{plan}\' {line}:' in errs[0]),
              f'{text!r}: one error naming {line} and {words!r}: {p.stderr}')
        r = load(js)
        check(r['status'] == 'error' and words in r['error'], f'the error document: {r}')
    p = run('nr-linkmap', 2, '--plan-file', os.path.join(d, 'missing.txt'), expect=2)
    check('cannot read plan file' in p.stderr, p.stderr)
    for opts, words in ((['--transport', 'udp'], 'neither mpi nor tcp'), (['--transport', 'tcp'], '--bind-iface'),
                        (['--bind-iface', 'lo'], 'go with --transport tcp'), (['--plan', 'ring'], "unknown plan"),
                        (['-t', '2', '--round-timeout', '1'], 'must be longer than -t'), (['-m', '8'], '-m'),
                        (['--transport', 'tcp', '--bind-addr', 'x.y'], 'not an IPv4 address'),
                        (['--recheck-below', '1.5'], '--recheck-below'),
                        (['--recheck-below', '-0.1'], '--recheck-below'),
                        (['--recheck-max', '100001'], '--recheck-max'),
                        (['--recheck-rounds', '-1'], '--recheck-rounds'), (['--time-limit', '-1'], '--time-limit'),
                        (['--suspect-below', '2'], '--suspect-below'),
                        (['--plan-file', plan, '--order', plan], '--order and --shifts shape --plan shift'),
                        (['--shifts', '0'], "--shifts '0'"), (['--shifts', '1-2'], "--shifts '1-2'"),
                        (['--shifts', '1,x'], "--shifts '1,x'"),
                        (['--order', os.path.join(d, 'missing.txt')], 'cannot read order file')):
        p = run('nr-linkmap', 2, *opts, expect=2)
        check(words in p.stderr and p.stderr.count('nr-linkmap: error') == 1, f'{opts}: {p.stderr}')
    order = os.path.join(d, 'order.txt')
    for text, words in (('0 1 0\n', ("line 1: rank 0 (", 'listed twice (first on line 1)')),
                        ('2\n0\n', ("order file '", 'lists 2 of the 3 ranks: rank 1 (')),
                        ('0 1 5\n', ('line 1', 'rank 5 does not exist'))):
        with open(order, 'w') as f:
            f.write(text)
        p = run('nr-linkmap', 3, '--order', order, expect=2)
        errs = [x for x in p.stderr.splitlines() if 'nr-linkmap: error' in x]
        check(len(errs) == 1 and all(w in errs[0] for w in words), f'--order {text!r}: {words}: {p.stderr}')
    p = run('nr-linkmap', 2, '--transport', 'tcp', '--bind-iface', 'nosuch0', expect=1)
    check("no interface 'nosuch0'" in p.stderr, p.stderr)


def _linkmap_fault(d, np, env, *opts, bound):
    js = os.path.join(d, 'fault.json')
    t0 = time.monotonic()
    try:
        p = run('nr-linkmap-faulty', np, '-m', '64k', *opts, '--json', js, expect=None, env=env, timeout=bound + 60)
    except subprocess.TimeoutExpired:
        sys.exit(f'FAIL: nr-linkmap {env}: still running after {bound + 60} s (a rank waits forever)')
    took = time.monotonic() - t0
    print(f'nr-linkmap -np {np} {" ".join(map(str, opts))} with {env}: every rank ended {took:.2f} s after the '
          f'start, exit {p.returncode}')
    check(took < bound, f'{env}: the job took {took:.1f} s to end (bound {bound} s)')
    check(p.returncode == 1, f'{env}: exit {p.returncode}, expected 1\n{p.stdout}\n{p.stderr}')
    return p, load(js)


def case_linkmap_fault_in_loop(d):
    """A pair that fails or stalls inside a round is recorded as failed, named, and the other rounds still run; a
    hung rank ends the job within the round timeout plus grace, after rank 0 wrote what it knows."""
    rt = ('-t', 0.2, '--round-timeout', 2)
    # MPI: the 5th MPI_Isend on rank 1 fails (its hello is the 1st): the round's data messages to rank 2
    p, r = _linkmap_fault(d, 4, {'NR_FAULT': 'Isend:5', 'NR_FAULT_RANK': '1'}, *rt, bound=30)
    check('rank 1' in p.stderr and 'rank 2' in p.stderr and 'MPI_Isend' in p.stderr, p.stderr)
    f = r['summary']['failed']
    check(r['status'] == 'error' and r['rounds_run'] == 3 and [(x['src'], x['dst']) for x in f] == [(1, 2)] and
          f[0]['round'] == 0 and 'MPI_Isend' in f[0]['error'], f'the failed pair named, the rounds run: {r}')
    # a sender that stops sending (no data, no end): the receiver stalls until the round timeout, both transports
    for extra in ((), TCP_LO):
        p, r = _linkmap_fault(d, 4, {'NR_LINKMAP_FAULT': 'stall:1:1'}, *rt, *extra, bound=30)
        f = r['summary']['failed']
        check([(x['src'], x['dst'], x['round']) for x in f] == [(1, 3, 1)] and 'stalled' in f[0]['error'] and
              r['rounds_run'] == 3 and r['summary']['ok_pairs'] == 11, f'{extra}: stalled pair: {r["summary"]}')
        check('round 1, rank 1 (' in p.stderr and 'stalled' in p.stderr, p.stderr)
        rd = r['rounds'][1]
        check(2 <= rd['wall_s'] < 2 + 3.5, f'the stalled round lasted the round timeout: {rd["wall_s"]}')
    # a hung rank: no report; rank 0 writes the document with the pairs it knows and ends the job
    for extra in ((), TCP_LO):
        p, r = _linkmap_fault(d, 4, {'NR_LINKMAP_FAULT': 'hang:2:1:120'}, *rt, *extra, bound=30)
        check(r['status'] == 'error' and 'no report from 1 rank(s)' in r['error'] and '2 (' in r['error'] and
              r['rounds_run'] == 2, f'{extra}: the hung rank named: {r.get("error")}')
        failed = {(x['src'], x['dst']) for x in r['summary']['failed']}
        check(failed == {(2, 0), (0, 2)}, f'{extra}: the pairs of the hung rank (shift 2) failed: {failed}')
        check('no report' in p.stderr and 'ending every rank' in p.stderr, p.stderr)
    # rank 0 hung: every other rank gives up on it in time and one of them writes the error document
    p, r = _linkmap_fault(d, 3, {'NR_LINKMAP_FAULT': 'hang:0:0:120'}, *rt, bound=30)
    check(r['status'] == 'error' and 'rank 0' in r['error'] and 'hung or dead' in r['error'] and
          r['failed_rank'] in (1, 2), f'rank 0 hung: {r}')


def _linkmap_best(m, recheck=()):
    """Each direction's figure (the matrix, by rank: on one machine every rank runs on the same host), as it was
    before the rechecks when their pairs are given (their mbps_before), and the upper median link."""
    best = {(a, b): v for a, row in enumerate(m) for b, v in enumerate(row) if v > 0}
    for x in recheck:
        best[x['src'], x['dst']] = _f32(x['mbps_before'])
    links = {}
    for (a, b), v in best.items():
        links[min(a, b), max(a, b)] = min(v, links.get((min(a, b), max(a, b)), math.inf))
    return best, _upper_median(links.values())


def _linkmap_recheck_run(d, fault, *opts, extra=(), np=4):
    js = os.path.join(d, 'recheck.json')
    p = run('nr-linkmap-faulty', np, '-t', 0.1, '-m', '64k', *opts, *extra, '--json', js,
            env={'NR_LINKMAP_FAULT': fault})
    r = load(js)
    check(r['status'] == 'ok' and r['summary']['failed_pairs'] == 0 and r['rounds_planned'] == np - 1,
          f'{fault} {opts} {extra}: a slow sender is slow, not failed: {r.get("error")}')
    return p, r, _linkmap_matrix(js)


def _linkmap_rechecked(p, r, m, what, slowed, tree=None):
    """The rechecks of a shift run with --recheck-below 0.6 as the rule says: the directions below 0.6 x the upper
    median link after the plan's rounds taken, slowest first; each recheck round a batch whose directions share no
    node (with ``tree``, {rank: (leaf, cable)}, no uplink cable either way); a direction that reads the line or more
    is cleared, one slow in a batch of m is measured again in a batch of at most m // 2, and only one slow alone is
    named slow; the matrix keeps each direction's best. ``slowed`` are among the directions taken. Returns each
    taken direction's measurements in order."""
    rc = r['recheck']
    planned = r['rounds_planned']
    best, median = _linkmap_best(m, rc['pairs'])
    line = 0.6 * median
    below = sorted((v, a, b) for (a, b), v in best.items() if v < line)
    taken = [(a, b) for _, a, b in below[:rc['max']]]
    check(rc['median_link_mbps'] == median and rc['below_count'] == len(below) and rc['taken'] == len(taken),
          f'{what}: the median link and the directions below 0.6 x it: {below}, {rc}')
    check(set(slowed) <= set(taken), f'{what}: {slowed} are taken: {taken}')
    per_round, seen = {}, {}
    for x in rc['pairs']:
        check(x['src_host'] == r['hosts'][x['src']] and x['dst_host'] == r['hosts'][x['dst']] and
              _f32(x['mbps_before']) == best[x['src'], x['dst']], f'{what}: a measurement: {x}')
        per_round.setdefault(x['round'], []).append(x)
        seen.setdefault((x['src'], x['dst']), []).append(x)
    check(sorted(per_round) == list(range(planned, planned + rc['rounds'])) and
          r['rounds_run'] == planned + rc['rounds'] and set(seen) <= set(taken), f'{what}: the rounds: {rc}')
    for k, batch in per_round.items():
        nodes = [n for x in batch for n in (x['src'], x['dst'])]
        check(len(nodes) == len(set(nodes)) and r['rounds'][k]['streams'] == len(batch) and
              all(x['streams'] == len(batch) for x in batch), f'{what}: round {k} shares a node: {batch}')
        if tree:   # a crossing stream leaves its leaf and enters the destination's on the destination's cable
            ways = [w for x in batch if tree[x['src']][0] != tree[x['dst']][0]
                    for w in (('up', tree[x['src']][0], tree[x['dst']][1]), ('down',) + tree[x['dst']])]
            check(len(ways) == len(set(ways)), f'{what}: round {k} shares an uplink cable: {batch}')
    for key, ms in seen.items():
        for i, x in enumerate(ms):
            want = 'cleared' if x['mbps_after'] >= line else 'slow' if x['streams'] == 1 else 'split'
            check(x['outcome'] == want, f'{what}: {key} read {x["mbps_after"]} in a batch of {x["streams"]} '
                  f'(the line {line:.1f}): {x["outcome"]}, not {want}')
            check(want == 'split' or i == len(ms) - 1, f'{what}: {key} measured again after {want}: {ms}')
            check(i == 0 or x['streams'] <= ms[i - 1]['streams'] // 2, f'{what}: {key} not halved: {ms}')
        check(m[key[0]][key[1]] == _f32(max([best[key]] + [x['mbps_after'] for x in ms])),
              f'{what}: the matrix keeps the best of the plan and the rechecks: {key} {ms}')
    left = [(x['src'], x['dst']) for x in rc['left_pairs']]
    open_ = [k for k in taken if k not in seen or seen[k][-1]['outcome'] == 'split']
    check(sorted(left) == sorted(open_) and rc['left'] == len(left), f'{what}: left: {left}, unresolved: {open_}')
    outcome = [ms[-1]['outcome'] for ms in seen.values()]
    check((rc['cleared'], rc['slow'], rc['failed']) ==
          (outcome.count('cleared'), outcome.count('slow'), outcome.count('failed')), f'{what}: the counts: {rc}')
    check(f'# recheck: {len(taken)} direction(s) below 0.6 x the median link ({median:.1f} Mbit/s)' in p.stdout and
          f'# recheck: {rc["rounds"]} round(s): {rc["cleared"]} cleared, {rc["slow"]} slow alone' in p.stdout,
          f'{what}: the recheck on stdout:\n{p.stdout}')
    others = [f'{a}>{b} {best[a, b]:.1f}' for a, b in taken if (a, b) not in slowed]
    if others:   # a healthy stream the host's scheduler starved: what the rechecks are for
        print(f'{what}: also rechecked {", ".join(others)} Mbit/s (median link {median:.1f})')
    return seen


def case_linkmap_recheck(d):
    """--recheck-below: a direction that read slow once (rank 0 napping 20 ms between messages in round 0 only) is
    measured again after the plan, and its best round is then a healthy link's; without the option, or with
    --recheck-max 0, nothing more runs; a rank hung in a recheck round ends the job as in a plan round."""
    for transport, extra in (('mpi', ()), ('tcp', TCP_LO)):
        p, r, m = _linkmap_recheck_run(d, 'slow:0:0:20', '--recheck-below', 0.6, extra=extra)
        dst = 1   # round 0 of the shift plan: 0>1
        rc = r['recheck']
        check(r['options']['recheck_below'] == rc['below'] == 0.6 and r['options']['recheck_max'] == rc['max'] ==
              10000 and r['options']['recheck_rounds'] == rc['rounds_max'] == 64 and rc['batches'] == 'nodes',
              f'{transport}: the options: {r["options"]}, {rc}')
        seen = _linkmap_rechecked(p, r, m, transport, [(0, dst)])
        best, median = _linkmap_best(m)
        print(f'nr-linkmap {transport} slow:0:0:20: 0>{dst} {seen[0, dst][0]["mbps_before"]:.1f} Mbit/s before, '
              f'{best[0, dst]:.1f} after the recheck; median link {rc["median_link_mbps"]:.1f} before, {median:.1f} '
              f'after')
        check(seen[0, dst][-1]['outcome'] == 'cleared' and best[0, dst] >= 0.6 * median,
              f'{transport}: 0>{dst} passes its recheck: {best[0, dst]} vs {median}')
        # off (the default), and --recheck-max 0: the slow direction stays as read, no round more
        for opts, median_known in (((), False), (('--recheck-below', 0.6, '--recheck-max', 0), True)):
            p, r, m = _linkmap_recheck_run(d, 'slow:0:0:20', *opts, extra=extra)
            rc = r['recheck']
            check(r['rounds_run'] == 3 and rc['pairs'] == [] and rc['left_pairs'] == [] and
                  '# recheck' not in p.stdout and (rc['median_link_mbps'] is not None) == median_known,
                  f'{transport} {opts}: no recheck: {rc}')
            check(rc['below'] == (0.6 if opts else 0) and rc['max'] == (0 if opts else 10000), f'{opts}: {rc}')
            slow = [x for x in r['suspects'] if (x['src'], x['dst']) == (0, dst)]
            check(r['suspect_rule']['below'] == (0.6 if opts else 0.85) and len(slow) == 1 and
                  slow[0]['mbps'] == m[0][dst] and slow[0]['share'] < 0.6, f'{opts}: 0>{dst} a suspect: {r["suspects"]}')
    # below 1 x the median: the slower directions of the links under the median are rechecked; rank 2 hangs in the
    # first recheck round (idle or not, it sends no report): what was not measured is left, saying so
    p, r = _linkmap_fault(d, 4, {'NR_LINKMAP_FAULT': 'hang:2:3:120'}, '-t', 0.2, '--round-timeout', 2,
                          '--recheck-below', 1, bound=30)
    rc = r['recheck']
    check(r['status'] == 'error' and 'round 3: no report from 1 rank(s)' in r['error'] and '2 (' in r['error'] and
          r['rounds_run'] == 4 and rc['taken'] >= 3 and rc['pairs'] and all(x['round'] == 3 for x in rc['pairs']) and
          r['rounds'][3]['index'] == 3 and len(rc['left_pairs']) == rc['taken'] - len(rc['pairs']) and
          all(x['reason'] == 'the job ended' for x in rc['left_pairs']),
          f'a rank hung in a recheck round: {r.get("error")}, {rc}')
    check('no report' in p.stderr and 'ending every rank' in p.stderr, p.stderr)


def case_linkmap_recheck_slow_link(d):
    """A slow link stays slow: rank 0 napping in every round (a slow NIC) is rechecked and still reads slow, alone."""
    for transport, extra in (('mpi', ()), ('tcp', TCP_LO)):
        p, r, m = _linkmap_recheck_run(d, 'slow:0:-1:20', '--recheck-below', 0.6, extra=extra)
        slow = [(0, 1), (0, 2), (0, 3)]
        seen = _linkmap_rechecked(p, r, m, transport, slow)
        best, median = _linkmap_best(m)
        before = ', '.join(f'{a}>{b} {seen[a, b][0]["mbps_before"]:.1f}' for a, b in slow)
        after = ', '.join(f'{a}>{b} {best[a, b]:.1f}' for a, b in slow)
        print(f'nr-linkmap {transport} slow:0:-1:20: {before} Mbit/s before, {after} after the rechecks; median link '
              f'{median:.1f}')
        check(all(best[x] < 0.6 * median and seen[x][-1]['outcome'] == 'slow' and seen[x][-1]['streams'] == 1
                  for x in slow), f'{transport}: still slow after the recheck, alone: {seen}')


def case_linkmap_recheck_batches(d):
    """The rechecks in batches, 8 ranks: every rank napping in round 0 makes its 8 directions slow once; 4 recheck
    rounds clear all 8 (one direction a round would clear 4). With rank 0 also slow in every round, its 7 directions
    are named slow, each alone after a batch that halved, and the others cleared: nothing left. With --tree, no batch
    shares an uplink cable. With --time-limit shorter than the plan, no recheck round runs and all are left, saying
    why."""
    round0 = [(i, (i + 1) % 8) for i in range(8)]
    p, r, m = _linkmap_recheck_run(d, 'slow:-1:0:20', '--recheck-below', 0.6, '--recheck-rounds', 4, np=8)
    seen = _linkmap_rechecked(p, r, m, 'round 0 slow', round0)
    rc = r['recheck']
    cleared = [k for k in round0 if seen.get(k) and seen[k][-1]['outcome'] == 'cleared']
    print(f'nr-linkmap 8 ranks, slow:-1:0:20, --recheck-rounds 4: {rc["taken"]} taken, {rc["cleared"]} cleared in '
          f'{rc["rounds"]} rounds, batches of {[x["streams"] for x in r["rounds"][7:]]}')
    check(rc['rounds'] <= 4 and len(cleared) == 8 > rc['rounds'], f'the 8 cleared in at most 4 rounds: {rc}')
    p, r, m = _linkmap_recheck_run(d, 'slow:-1:0:20,slow:0:-1:20', '--recheck-below', 0.6, np=8)
    from0 = [(0, k) for k in range(1, 8)]
    seen = _linkmap_rechecked(p, r, m, 'round 0 and rank 0 slow', round0 + from0)
    rc = r['recheck']
    print(f'nr-linkmap 8 ranks, slow:-1:0:20,slow:0:-1:20: {rc["taken"]} taken: {rc["cleared"]} cleared, '
          f'{rc["slow"]} slow alone in {rc["rounds"]} rounds; 0>k batches: {[[x["streams"] for x in seen[k]] for k in from0]}')
    check(rc['left'] == 0 and all(seen[k][-1]['outcome'] == 'slow' for k in from0) and
          all(seen[k][-1]['outcome'] == 'cleared' for k in round0 if k[0] != 0) and
          any(len(seen[k]) > 1 for k in from0), f'rank 0 named, the others cleared, a batch halved: {rc}')
    tree = {k: (k // 4, k % 2) for k in range(8)}
    path = os.path.join(d, 'tree.txt')
    with open(path, 'w') as f:
        f.write('# rank leaf cable\n' + ''.join(f'{k} {leaf} {cable}\n' for k, (leaf, cable) in tree.items()))
    p, r, m = _linkmap_recheck_run(d, 'slow:-1:0:20', '--recheck-below', 0.6, '--tree', path, np=8)
    seen = _linkmap_rechecked(p, r, m, '--tree', round0, tree=tree)
    check(r['recheck']['batches'] == 'cables' and r['options']['tree'] == path and r['recheck']['left'] == 0,
          f'--tree: {r["recheck"]}')
    p, r, m = _linkmap_recheck_run(d, 'slow:-1:0:20', '--recheck-below', 0.6, '--time-limit', 0.3, np=8)
    rc = r['recheck']
    check(rc['rounds'] == 0 and rc['taken'] >= 8 and len(rc['left_pairs']) == rc['taken'] and
          all(x['reason'] == '--time-limit' and x['last_streams'] == 0 for x in rc['left_pairs']) and
          f'{rc["taken"]} left (--time-limit)' in p.stdout, f'--time-limit: {rc}')
    for text, words in (('0 0\n', 'line 1: expected NODE LEAF CABLE'), ('0 0 0\n0 1 1\n', 'line 2: rank 0 ('),
                        ('9 0 0\n', 'rank 9 does not exist'), ('1 x 0\n', 'expected NODE LEAF CABLE')):
        with open(path, 'w') as f:
            f.write(text)
        p = run('nr-linkmap', 2, '--tree', path, expect=2)
        check(p.stderr.count('nr-linkmap: error') == 1 and words in p.stderr, f'{text!r}: {p.stderr}')
    p = run('nr-linkmap', 2, '--tree', os.path.join(d, 'missing.txt'), expect=2)
    check('cannot read tree file' in p.stderr, p.stderr)


def case_linkmap_token(d):
    """Only ranks of the job can take a slot: connections without the job's token are closed and counted, and the
    measurement goes on."""
    js = os.path.join(d, 'tok.json')
    where = ARGS.bin
    cmd = [ARGS.mpiexec, ARGS.np_flag, '3'] + shlex.split(ARGS.preflags) + [
        os.path.join(where, 'nr-linkmap'), '-t', '1', '-m', '64k', *TCP_LO, '--json', js]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    strangers, eps = [], []
    try:
        for line in proc.stdout:
            m = re.match(r'# tcp: rank \d+ \(.*\) listens on ([\d.]+):(\d+)', line)
            if m:
                eps.append((m[1], int(m[2])))
            if len(eps) == 3:
                break
        check(len(eps) == 3, 'the endpoints are printed')
        for host, port in eps:
            s1 = socket.create_connection((host, port), timeout=5)
            s1.sendall(b'NRLM' + bytes(28))        # the right magic, a wrong token
            s2 = socket.create_connection((host, port), timeout=5)
            s2.sendall(b'GET / HTTP/1.0\r\n\r\n' + bytes(14))
            strangers += [s1, s2]
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        for s in strangers:
            s.close()
    check(proc.returncode == 0, f'exit {proc.returncode}: {err}')
    r = load(js)
    check(r['status'] == 'ok' and r['summary']['ok_pairs'] == 6, 'every pair measured')
    check(r['tcp']['rejected_connections'] >= 6, f'the strangers were refused: {r["tcp"]}')


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--test-bin', required=True)
    ap.add_argument('--mpiexec', required=True)
    ap.add_argument('--np-flag', default='-n')
    ap.add_argument('--preflags', default='')
    ap.add_argument('case')
    ARGS = ap.parse_args()
    # Open MPI's mpirun, once a rank exits non-zero or calls MPI_Abort, sends the others SIGTERM and waits a second
    # before SIGKILL, even when every rank has already gone: a second more per failing job (over a minute in all
    # here). No kernel handles SIGTERM, so the wait buys nothing. MPICH ignores the variable.
    os.environ.setdefault('OMPI_MCA_odls_base_sigkill_timeout', '0')
    fn = globals().get('case_' + ARGS.case)
    if not fn:
        sys.exit(f'unknown case {ARGS.case}')
    with tempfile.TemporaryDirectory(prefix='nr-mpi-') as d:
        fn(d)
    print(f'{ARGS.case}: ok')


if __name__ == '__main__':
    main()
