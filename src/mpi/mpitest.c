/* nr-mpitest: MPI point-to-point throughput and latency between two ranks (Hpcbench mpitest parity, seed 000).
 *
 * Rank 0 is the master, rank 1 the secondary. Experiments: stream (default) or ping-pong (-i); blocking
 * MPI_Send/MPI_Recv (default) or non-blocking MPI_Isend/MPI_Irecv completed with MPI_Wait (-n; in the -i -n
 * throughput test both sides send and receive at once, as Hpcbench; the latency test stays a strict round trip
 * with -n: the secondary returns each message only after it arrived); fixed-size repetitions (-r, -m) or an
 * exponential sweep (-e N, 1 .. 2^N bytes in one buffer of the largest size); round-trip latency (-a: 64 bytes,
 * -A SIZE).
 *
 * Methodology. Both buffers are written (a non-zero pattern) before anything runs, so no transfer reads the
 * kernel's shared zero page. One untimed message (per size in a sweep) is the warm-up: it pays connection
 * set-up and first-touch costs whether the count is calibrated or fixed (--iterations). Each measured run is:
 * barrier (the handshake), process times and clock read, the timed loop that does nothing but move messages,
 * clock and process times again. A stream run ends when the secondary's zero-byte acknowledgement of the last
 * message arrives, so the master's time covers delivery. Before the measured repetitions the master calibrates
 * the iteration count: probe runs with a growing count until one lasts a tenth of the test time, then the count
 * is scaled to the test time (-t) (nr/calib.h: the count that reached a tenth is probed again and the agreed
 * (median) probe decides, and a run shorter than half the target is run again with the count its own rate
 * gives; a test whose runs mostly lasted less than a tenth of the target fails with exit 3). Throughput counts
 * payload in both directions for ping-pong (as Hpcbench does). The secondary ships its times (and its system log,
 * -c) to the master after each run, outside the timed part. Every MPI call is checked and its outcome agreed on by
 * both ranks. --duet pairs every repetition with a run of a yardstick outside MPI, in random order (duet.h).
 * -r MIN:MAX stops the repetitions once their median is known to --precision (nr/repeat.h: rank 0 decides on its
 * own clock's figures and broadcasts it); every run has a deadline (--deadline, nr_mpi.h "Deadlines").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duet.h"
#include "nr_mpi.h"

#define NR__PROG "nr-mpitest"
#define NR__LATENCY_DEFAULT_BYTES 64
#define NR__MAX_EXPONENT 30
#define NR__MAX_REPS 10000
#define NR__TAG_DATA 1
#define NR__TAG_ACK 2
#define NR__VERIFY_SEED 0x5au

/* Options: one field per flag. */
struct nr__opts {
    int pingpong;        /* -i */
    int nonblocking;     /* -n */
    struct nr_repeat reps; /* -r N | MIN:MAX, --precision: repetitions, or latency trials */
    uint64_t msg_size;   /* -m */
    double test_time_s;  /* -t: each run is calibrated to this */
    int exponent;        /* -e N (-1: off) */
    int latency;         /* -a */
    uint64_t lat_size;   /* -A SIZE (0: off) */
    int iterations;      /* --iterations: fixed count, no calibration */
    const char *out;     /* -o FILE */
    int syslog;          /* -c */
    int plot;            /* -P */
    const char *json;    /* --json FILE */
    int verify;          /* --verify */
    int duet;            /* --duet: NR_DUET_* */
    const char *duet_iface; /* --duet-iface */
    int duet_sleep;      /* --duet-sleep */
    double deadline_s;   /* --deadline: seconds each run may last (0: from the target) */
};

struct nr__run {
    enum nr_run_kind kind;
    const char *mode;     /* JSON mode */
    uint64_t size;        /* fixed and latency size */
    uint64_t iterations;  /* fixed and latency count */
    struct nr_rep *reps;  /* one per repetition / sweep point / latency trial */
    size_t nreps;
    double *rtt_us;
    double *samples;      /* each repetition's figure (throughput, round trip): what the repetition rule reads */
    char peer_host[NR_HOST_MAX];
    struct nr_sysmon *mon;
    struct nr_sysmon_log peer_log;
    struct nr_calib calib;  /* the calibration and what the measured runs achieved (rank 0's clock) */
    struct nr_repeat rule;  /* how many repetitions ran and why they stopped (rank 0's decision) */
    struct nr_duet duet;    /* --duet: the yardstick and the pairs */
};

static struct nr_mpi *g_mpi;
static double g_budget; /* the deadline of a run of a calibrated count (nr_mpi_watch) */

/* A run's deadline: --deadline; or for a calibrated count ten times the target, and half a minute for start-up
 * costs a run pays (connections); a fixed count (--iterations) has no target, so its messages are planned at a
 * millisecond each plus their bytes at 1 MB/s, ten times over. */
static double nr__run_budget(const struct nr__opts *o, uint64_t size, uint64_t iters)
{
    if (o->deadline_s > 0 || !o->iterations)
        return g_budget;
    return 30 + 10 * (double)iters * (1e-3 + (double)size / 1e6);
}

/* The byte pattern of --verify: depends on position and iteration so stale or shifted data is caught. */
static unsigned char nr__pattern(uint64_t i, uint64_t iter)
{
    return (unsigned char)((i * 131u + iter * 7u + NR__VERIFY_SEED) & 0xffu);
}

static void nr__fill(unsigned char *b, uint64_t n, uint64_t iter)
{
    for (uint64_t i = 0; i < n; i++)
        b[i] = nr__pattern(i, iter);
}

static int nr__check(const unsigned char *b, uint64_t n, uint64_t iter, struct nr_error *err)
{
    for (uint64_t i = 0; i < n; i++)
        if (b[i] != nr__pattern(i, iter))
            return nr_error_set(err, NR_E_VALIDATE,
                                "--verify: byte %llu of message %llu (%llu bytes) is 0x%02x, expected 0x%02x",
                                (unsigned long long)i, (unsigned long long)iter, (unsigned long long)n, b[i],
                                nr__pattern(i, iter));
    return NR_OK;
}

/* How the two ranks move messages in one run. */
enum nr__pattern_kind { /* the values --duet's yardsticks know them by */
    NR__STREAM = NR_DUET_STREAM,      /* master sends, secondary receives; the secondary's zero-byte ack ends it */
    NR__EXCHANGE = NR_DUET_EXCHANGE,  /* -i -n: both ranks send and receive at once (Hpcbench's non-blocking -i) */
    NR__ROUNDTRIP = NR_DUET_ROUNDTRIP /* -i, every latency test: the secondary returns each message once it arrived */
};

/* Move `iters` messages of `size` bytes; only MPI calls inside. Verification (when on) checks the last message
 * after the clock stopped, so it never perturbs the measurement. A round trip stays one even with -n: the master
 * may pre-post its receive, but the secondary sends only after its receive completed, so the master's wait ends
 * one full round trip after its send. Both ranks send from their send buffer, as IMB and OSU do, not from the
 * buffer they just received into (NetPIPE's default cache mode has one buffer): on a 2-vCPU VM sending freshly
 * received data made a 1 MiB shared-memory round trip 1.4x slower (bench/mpi_vs_peers). */
static int nr__transfer(const struct nr__opts *o, enum nr__pattern_kind how, unsigned char *sbuf,
                        unsigned char *rbuf, uint64_t size, uint64_t iters, struct nr_error *err)
{
    const int me = g_mpi->rank, peer = 1 - me;
    const int n = (int)size;
    const MPI_Comm w = MPI_COMM_WORLD;
    int rc = MPI_SUCCESS;
    MPI_Request rq[2];
    uint64_t k = 0;
    for (; k < iters && rc == MPI_SUCCESS; k++) {
        if (how == NR__STREAM) {
            if (me == 0)
                rc = o->nonblocking ? MPI_Isend(sbuf, n, MPI_BYTE, peer, NR__TAG_DATA, w, rq)
                                    : MPI_Send(sbuf, n, MPI_BYTE, peer, NR__TAG_DATA, w);
            else
                rc = o->nonblocking ? MPI_Irecv(rbuf, n, MPI_BYTE, peer, NR__TAG_DATA, w, rq)
                                    : MPI_Recv(rbuf, n, MPI_BYTE, peer, NR__TAG_DATA, w, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS && o->nonblocking)
                rc = MPI_Wait(rq, MPI_STATUS_IGNORE);
        } else if (how == NR__EXCHANGE || (o->nonblocking && me == 0)) {
            /* -i -n: both ranks; a non-blocking round trip: the master, with its receive pre-posted. */
            rc = MPI_Irecv(rbuf, n, MPI_BYTE, peer, NR__TAG_DATA, w, &rq[0]);
            if (rc == MPI_SUCCESS)
                rc = MPI_Isend(sbuf, n, MPI_BYTE, peer, NR__TAG_DATA, w, &rq[1]);
            if (rc == MPI_SUCCESS)
                rc = MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS)
                rc = MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
        } else if (o->nonblocking) {
            /* Non-blocking round trip, secondary: return the message only once it has arrived. */
            rc = MPI_Irecv(rbuf, n, MPI_BYTE, peer, NR__TAG_DATA, w, &rq[0]);
            if (rc == MPI_SUCCESS)
                rc = MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS)
                rc = MPI_Isend(sbuf, n, MPI_BYTE, peer, NR__TAG_DATA, w, &rq[1]);
            if (rc == MPI_SUCCESS)
                rc = MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
        } else if (me == 0) {
            rc = MPI_Send(sbuf, n, MPI_BYTE, peer, NR__TAG_DATA, w);
            if (rc == MPI_SUCCESS)
                rc = MPI_Recv(rbuf, n, MPI_BYTE, peer, NR__TAG_DATA, w, MPI_STATUS_IGNORE);
        } else {
            rc = MPI_Recv(rbuf, n, MPI_BYTE, peer, NR__TAG_DATA, w, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS)
                rc = MPI_Send(sbuf, n, MPI_BYTE, peer, NR__TAG_DATA, w);
        }
    }
    /* Stream: the master's clock stops when the secondary confirms the last message arrived. */
    bool ack = false;
    if (rc == MPI_SUCCESS && how == NR__STREAM) {
        ack = true;
        rc = me == 0 ? MPI_Recv(NULL, 0, MPI_BYTE, peer, NR__TAG_ACK, w, MPI_STATUS_IGNORE)
                     : MPI_Send(NULL, 0, MPI_BYTE, peer, NR__TAG_ACK, w);
    }
    if (rc != MPI_SUCCESS) {
        /* The peer is still inside the loop, waiting for a message this rank will not send or receive: no
         * agreement can be reached, end both ranks. */
        static const char *const names[] = {"stream", "exchange", "round trip"};
        char what[192];
        if (ack)
            snprintf(what, sizeof what, "%s (the end-of-stream acknowledgement)", me == 0 ? "MPI_Recv" : "MPI_Send");
        else
            snprintf(what, sizeof what, "%s (%s %s with rank %d, message %llu of %llu, %llu bytes)",
                     o->nonblocking ? "MPI_Isend/MPI_Irecv/MPI_Wait" : "MPI_Send/MPI_Recv",
                     o->nonblocking ? "non-blocking" : "blocking", names[how], peer, (unsigned long long)k,
                     (unsigned long long)iters, (unsigned long long)size);
        nr_mpi_check(rc, what, err);
        nr_mpi_fail_loop(g_mpi, err);
    }
    return NR_OK;
}

/* One timed run on both ranks, over MPI or with via over --duet's yardstick; the master gets the secondary's times
 * in rep->peer. */
static int nr__run_once(const struct nr__opts *o, enum nr__pattern_kind how, struct nr_duet *via, unsigned char *sbuf,
                        unsigned char *rbuf, uint64_t size, uint64_t iters, struct nr_rep *rep, struct nr_error *err)
{
    const int pingpong = how != NR__STREAM;
    char phase[96];
    snprintf(phase, sizeof phase, "a run of %llu %llu-byte messages%s", (unsigned long long)iters,
             (unsigned long long)size, via ? " (--duet's yardstick)" : "");
    nr_mpi_watch(phase, nr__run_budget(o, size, iters));
    if (o->verify) {
        nr__fill(sbuf, size, iters);
        memset(rbuf, 0, size);
    }
    int rc = nr_mpi_agree(nr_mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier", err), err);
    if (rc < 0)
        return rc;
    struct nr_cpu_times c0, c1;
    nr_cpu_times_now(&c0);
    double t0 = MPI_Wtime();
    rc = via ? nr_duet_transfer(via, (enum nr_duet_pattern)how, sbuf, rbuf, size, iters)
             : nr__transfer(o, how, sbuf, rbuf, size, iters, err);
    double t1 = MPI_Wtime();
    nr_cpu_times_now(&c1);
    /* Who received data: the secondary in stream tests, both in ping-pong (the master gets it back). */
    if (rc == NR_OK && o->verify && iters > 0 && (pingpong || g_mpi->rank == 1))
        rc = nr__check(rbuf, size, iters, err);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    struct nr_cpu_times d = nr_cpu_times_diff(c1, c0);
    uint64_t moved = size * iters * (pingpong ? 2u : 1u);
    double mine[4] = {t1 - t0, d.user_s, d.sys_s, (double)moved};
    double theirs[4] = {0};
    if (g_mpi->rank == 1)
        rc = nr_mpi_check(MPI_Send(mine, 4, MPI_DOUBLE, 0, NR__TAG_ACK, MPI_COMM_WORLD), "sending times", err);
    else
        rc = nr_mpi_check(MPI_Recv(theirs, 4, MPI_DOUBLE, 1, NR__TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                          "receiving times", err);
    memset(rep, 0, sizeof *rep);
    rep->size_bytes = size;
    rep->iterations = iters;
    rep->bytes_local = moved;
    rep->bytes_peer = (uint64_t)theirs[3];
    rep->local = (struct nr_side_times){mine[0], mine[1], mine[2]};
    rep->peer = (struct nr_side_times){theirs[0], theirs[1], theirs[2]};
    rep->throughput_mbps = nr_mbps(moved, mine[0]);
    return nr_mpi_agree(rc, err);
}

/* One calibration probe on both ranks: the master's elapsed time is broadcast, so both ranks calibrate in step. */
struct nr__probe {
    const struct nr__opts *o;
    enum nr__pattern_kind how;
    struct nr_duet *via;
    unsigned char *sbuf, *rbuf;
    uint64_t size;
};

static int nr__probe_run(void *ctx, uint64_t n, double *elapsed_s, struct nr_error *err)
{
    const struct nr__probe *p = ctx;
    struct nr_rep probe;
    int rc = nr__run_once(p->o, p->how, p->via, p->sbuf, p->rbuf, p->size, n, &probe, err);
    if (rc < 0)
        return rc;
    *elapsed_s = probe.local.elapsed_s;
    rc = nr_mpi_check(MPI_Bcast(elapsed_s, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Bcast (calibration)", err);
    return nr_mpi_agree(rc, err);
}

/* The message count of one run (nr_calibrate, the same rule as nr-tcptest). */
static int nr__calibrate(const struct nr__opts *o, enum nr__pattern_kind how, struct nr_duet *via,
                         unsigned char *sbuf, unsigned char *rbuf, uint64_t size, struct nr_calib *cal,
                         uint64_t *iters, struct nr_error *err)
{
    struct nr__probe p = {o, how, via, sbuf, rbuf, size};
    return nr_calibrate(nr__probe_run, &p, cal, iters, err);
}

/* One measured run of *n messages into rep, with the system-monitor row around it (an MPI run's). A run of a
 * calibrated count is re-checked against the target on rank 0's clock (nr_calib_recheck): when it lasted less than
 * half the target, rank 0 broadcasts the rescaled count and both ranks discard the run and run it again. With via,
 * a run of --duet's yardstick, calibrated and recorded on its own. */
static int nr__measured_run(const struct nr__opts *o, enum nr__pattern_kind how, struct nr_duet *via,
                            unsigned char *sbuf, unsigned char *rbuf, uint64_t size, uint64_t *n,
                            struct nr__run *r, struct nr_rep *rep, struct nr_error *err)
{
    struct nr_calib *cal = via ? &via->calib : &r->calib;
    struct nr_sysmon *mon = via ? NULL : r->mon;
    int rechecks = 0, rc;
    for (;;) {
        if (mon && (rc = nr_mpi_agree(nr_sysmon_mark(mon, err), err)) < 0)
            return rc;
        if ((rc = nr__run_once(o, how, via, sbuf, rbuf, size, *n, rep, err)) < 0)
            return rc;
        uint64_t next = 0; /* 0: keep the run */
        if (g_mpi->rank == 0 && !nr_calib_recheck(cal, *n, rep->local.elapsed_s, &rechecks, &next))
            next = 0;
        rc = nr_mpi_check(MPI_Bcast(&next, 1, NR_MPI_UINT64, 0, MPI_COMM_WORLD), "MPI_Bcast (re-check)", err);
        if ((rc = nr_mpi_agree(rc, err)) < 0)
            return rc;
        if (!next)
            break;
        *n = next;
    }
    nr_calib_record(cal, *n, rep->local.elapsed_s);
    if (mon && (rc = nr_mpi_agree(nr_sysmon_record(mon, err), err)) < 0)
        return rc;
    return NR_OK;
}

/* -c: the secondary sends its serialised system log to the master. */
static int nr__ship_log(struct nr__run *r, struct nr_error *err)
{
    int rc = NR_OK;
    if (g_mpi->rank == 1) {
        size_t len = 0;
        char *text = nr_sysmon_log_serialize(nr_sysmon_get_log(r->mon), &len);
        uint64_t n = text ? len : 0;
        rc = nr_mpi_check(MPI_Send(&n, 1, NR_MPI_UINT64, 0, NR__TAG_ACK, MPI_COMM_WORLD), "sending the log", err);
        if (rc == NR_OK && n)
            rc = nr_mpi_check(MPI_Send(text, (int)n, MPI_CHAR, 0, NR__TAG_ACK, MPI_COMM_WORLD), "sending the log", err);
        free(text);
    } else {
        uint64_t n = 0;
        rc = nr_mpi_check(MPI_Recv(&n, 1, NR_MPI_UINT64, 1, NR__TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                          "receiving the secondary's log", err);
        if (rc == NR_OK && n > (uint64_t)1 << 30)
            rc = nr_error_set(err, NR_E_PROTO, "secondary's system log is implausibly large (%llu bytes)",
                              (unsigned long long)n);
        char *text = rc == NR_OK && n ? malloc(n) : NULL;
        if (rc == NR_OK && n && !text)
            rc = nr_error_set(err, NR_E_NOMEM, "out of memory for the secondary's log");
        if (rc == NR_OK && n)
            rc = nr_mpi_check(MPI_Recv(text, (int)n, MPI_CHAR, 1, NR__TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                              "receiving the secondary's log", err);
        if (rc == NR_OK && n)
            rc = nr_sysmon_log_parse(text, n, &r->peer_log, err);
        free(text);
    }
    return rc;
}

static const char *nr__mode_line(const struct nr__opts *o, const struct nr__run *r)
{
    static char line[128];
    if (r->kind == NR_RUN_LATENCY)
        return "MPI communication Round Trip Time (latency) test";
    snprintf(line, sizeof line, "%s %s %s test", r->kind == NR_RUN_SWEEP ? "Exponential" : "Fixed-size",
             o->nonblocking ? "non-blocking" : "blocking",
             o->pingpong ? "ping-pong (bidirectional)" : "stream (unidirectional)");
    return line;
}

static void nr__print_run(const struct nr__run *r, size_t i)
{
    if (r->kind == NR_RUN_LATENCY)
        printf("MPI Round Trip Time (%zu) : %.3f usec\n", i + 1, r->rtt_us[i]);
    else if (r->kind == NR_RUN_SWEEP)
        printf(" (%zu) : %f Mbps\n", i + 1, r->reps[i].throughput_mbps);
    else
        printf("(%zu) Throughput(Mbps): %.4f  Message-size(Bytes): %llu  Test-time: %.2f\n", i + 1,
               r->reps[i].throughput_mbps, (unsigned long long)r->reps[i].size_bytes, r->reps[i].local.elapsed_s);
    fflush(stdout);
}

/* -o FILE in the seed's layout. */
static int nr__write_output(const struct nr__opts *o, const struct nr__run *r, struct nr_error *err)
{
    FILE *f = fopen(o->out, "w");
    if (!f)
        return nr_error_sys(err, NR_E_IO, "cannot write '%s'", o->out);
    char when[64], line[192];
    fprintf(f, "# MPI communication test -- %s\n", nr_time_ctime(time(NULL), when, sizeof when));
    if (r->kind == NR_RUN_LATENCY)
        fprintf(f, "# Test mode: Round Trip Time (latency) test\n");
    else
        fprintf(f, "# Test mode: %s %s test\n", r->kind == NR_RUN_SWEEP ? "Exponential" : "Fixed-size",
                o->pingpong ? "ping-pong (bidirectional)" : "stream (unidirectional)");
    fprintf(f, "# Hosts: %s <----> %s\n", g_mpi->host, r->peer_host);
    fprintf(f, "# %s communication (%s)\n", o->nonblocking ? "Non-blocking" : "Blocking",
            o->nonblocking ? "MPI_Isend/MPI_Irecv" : "MPI_Send/MPI_Recv");
    if (r->kind == NR_RUN_LATENCY) {
        fprintf(f, "# Message size (Bytes): %llu\n", (unsigned long long)r->size);
        nr_table_counts_line(f, "# Iteration : ", r->reps, r->nreps, 1);
        fprintf(f, "# Test repetition: %s\n#\n", nr_repeat_describe(&r->rule, line, sizeof line));
        for (size_t i = 0; i < r->nreps; i++)
            fprintf(f, "%-6zu %12.3f\n", i + 1, r->rtt_us[i]);
        struct nr_stats s;
        nr_stats_compute(r->rtt_us, r->nreps, &s);
        fprintf(f, "# MPI RTT min/avg/max = %.3f/%.3f/%.3f usec\n", s.min, s.avg, s.max);
    } else if (r->kind == NR_RUN_FIXED) {
        nr_table_counts_line(f, "# Total data size of each test (Bytes): ", r->reps, r->nreps, r->size);
        fprintf(f, "# Message size (Bytes): %llu\n", (unsigned long long)r->size);
        nr_table_counts_line(f, "# Iteration : ", r->reps, r->nreps, 1);
        fprintf(f, "# Test time: %f\n# Test repetition: %s\n#\n", o->test_time_s,
                nr_repeat_describe(&r->rule, line, sizeof line));
        static const struct nr_table_col cols[] = {
            {{"Overall", "Throughput", "Mbps"}, 13, 4},     {{"Master-node", "Elapsed-time", "Seconds"}, 13, 2},
            {{"M-process", "User-mode", "Seconds"}, 11, 2}, {{"M-process", "Sys-mode", "Seconds"}, 11, 2},
            {{"Slave-node", "Elapsed-time", "Seconds"}, 13, 2}, {{"S-process", "User-mode", "Seconds"}, 11, 2},
            {{"S-process", "Sys-mode", "Seconds"}, 11, 2}};
        nr_table_header(f, 1, cols, 7);
        double tp[NR__MAX_REPS];
        for (size_t i = 0; i < r->nreps; i++) {
            const struct nr_rep *p = &r->reps[i];
            double v[7] = {p->throughput_mbps, p->local.elapsed_s, p->local.user_s, p->local.sys_s,
                           p->peer.elapsed_s, p->peer.user_s, p->peer.sys_s};
            char label[24];
            snprintf(label, sizeof label, "%zu", i + 1);
            nr_table_row(f, label, 1, cols, 7, v);
            tp[i] = p->throughput_mbps;
        }
        struct nr_stats s;
        nr_stats_compute(tp, r->nreps, &s);
        fputc('\n', f);
        nr_table_stats_line(f, "Throughput", &s);
    } else {
        fprintf(f, "#\n");
        static const struct nr_table_col cols[] = {
            {{"Message", "Size", "Bytes"}, 10, 0},          {{"Overall", "Throughput", "Mbps"}, 12, 4},
            {{"", "Iteration", ""}, 10, 0},                 {{"Master-node", "Elapsed-time", "Seconds"}, 13, 2},
            {{"M-process", "User-mode", "Seconds"}, 11, 2}, {{"M-process", "Sys-mode", "Seconds"}, 11, 2},
            {{"Slave-node", "Elapsed-time", "Seconds"}, 13, 2}, {{"S-process", "User-mode", "Seconds"}, 11, 2},
            {{"S-process", "Sys-mode", "Seconds"}, 11, 2}};
        nr_table_header(f, 1, cols, 9);
        for (size_t i = 0; i < r->nreps; i++) {
            const struct nr_rep *p = &r->reps[i];
            double v[9] = {(double)p->size_bytes, p->throughput_mbps, (double)p->iterations, p->local.elapsed_s,
                           p->local.user_s, p->local.sys_s, p->peer.elapsed_s, p->peer.user_s, p->peer.sys_s};
            nr_table_row(f, "", 1, cols, 9, v);
        }
    }
    if (fclose(f) != 0)
        return nr_error_sys(err, NR_E_IO, "writing '%s'", o->out);
    return NR_OK;
}

static int nr__write_logs(const struct nr__opts *o, const struct nr__run *r, struct nr_error *err)
{
    const struct nr_sysmon_log *logs[2] = {nr_sysmon_get_log(r->mon), &r->peer_log};
    const char *suffix[2] = {"m_log", "s_log"};
    for (int k = 0; k < 2; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%s", o->out, suffix[k]);
        FILE *f = fopen(path, "w");
        if (!f)
            return nr_error_sys(err, NR_E_IO, "cannot write '%s'", path);
        nr_sysmon_log_write(f, logs[k]);
        if (fclose(f) != 0)
            return nr_error_sys(err, NR_E_IO, "writing '%s'", path);
    }
    return NR_OK;
}

static int nr__write_plot(const struct nr__opts *o, const struct nr__run *r, struct nr_error *err)
{
    return nr_plot_throughput(o->out, "MPI communication test", "MPI throughput", r->kind == NR_RUN_SWEEP, err);
}

static int nr__write_json(const struct nr__opts *o, const struct nr__run *r, time_t started, int status,
                          const struct nr_error *failure)
{
    struct nr_json j;
    FILE *f = nr_mpi_json_begin(&j, o->json, NR__PROG, r->mode, started, status, failure);
    if (!f)
        return -1;
    nr_json_key(&j, "hosts");
    nr_json_begin_object(&j);
    nr_json_kv_string(&j, "master", g_mpi->host);
    nr_json_kv_string(&j, "secondary", r->peer_host);
    nr_json_end_object(&j);
    nr_json_key(&j, "options");
    nr_json_begin_object(&j);
    nr_json_kv_bool(&j, "pingpong", o->pingpong || r->kind == NR_RUN_LATENCY);
    nr_json_kv_bool(&j, "blocking", !o->nonblocking);
    nr_json_kv_int(&j, "repetitions", o->reps.max);
    nr_json_kv_int(&j, "repetitions_min", o->reps.min);
    nr_json_kv_uint(&j, "message_size_bytes", r->kind == NR_RUN_SWEEP ? 0 : r->size);
    nr_json_kv_int(&j, "exponent", o->exponent);
    nr_json_kv_double(&j, "test_time_s", o->test_time_s);
    nr_json_kv_bool(&j, "verify", o->verify);
    nr_json_kv_string(&j, "duet", o->duet ? nr_duet_name(o->duet) : NULL);
    nr_json_kv_int(&j, "ranks", g_mpi->size);
    nr_json_end_object(&j);
    if (r->kind == NR_RUN_FIXED && r->nreps) {
        nr_result_json_reps(&j, r->reps, r->nreps, "master", "secondary");
        double tp[NR__MAX_REPS];
        uint64_t bytes = 0;
        for (size_t i = 0; i < r->nreps; i++)
            tp[i] = r->reps[i].throughput_mbps, bytes += r->reps[i].bytes_local;
        struct nr_stats s;
        nr_stats_compute(tp, r->nreps, &s);
        nr_json_key(&j, "summary");
        nr_json_begin_object(&j);
        nr_json_kv_stats(&j, "throughput_mbps", &s);
        nr_json_end_object(&j);
        nr_json_kv_uint(&j, "bytes_moved", bytes);
    } else if (r->kind == NR_RUN_SWEEP && r->nreps) {
        nr_result_json_sweep(&j, r->reps, r->nreps, "master", "secondary");
    } else if (r->kind == NR_RUN_LATENCY && r->nreps) {
        struct nr_stats s;
        nr_stats_compute(r->rtt_us, r->nreps, &s);
        nr_result_json_latency(&j, r->size, r->reps, r->rtt_us, r->nreps, &s);
    }
    if (r->kind != NR_RUN_SWEEP && r->nreps)
        nr_repeat_json(&j, &r->rule);
    nr_duet_json(&j, &r->duet);
    if (r->calib.runs)
        nr_calib_json(&j, &r->calib);
    if (r->mon) {
        nr_json_key(&j, "syslog");
        nr_json_begin_object(&j);
        nr_sysmon_log_json(&j, "master", nr_sysmon_get_log(r->mon));
        nr_sysmon_log_json(&j, "secondary", &r->peer_log);
        nr_json_end_object(&j);
    }
    return nr_mpi_json_end(&j, f);
}

static int nr__validate(const struct nr__opts *o, struct nr__run *r, struct nr_error *err)
{
    if (g_mpi->size != 2)
        return nr_error_set(err, NR_E_USAGE, "needs exactly 2 MPI ranks (master and secondary), got %d",
                            g_mpi->size);
    int kinds = (o->exponent >= 0) + (o->latency || o->lat_size);
    if (kinds > 1)
        return nr_error_set(err, NR_E_USAGE, "-e and -a/-A are different experiments: give one of them");
    if ((o->syslog || o->plot) && !o->out)
        return nr_error_set(err, NR_E_USAGE, "%s needs -o FILE (the logs and plot are named after it)",
                            o->syslog ? "-c" : "-P");
    r->kind = o->exponent >= 0 ? NR_RUN_SWEEP : (o->latency || o->lat_size) ? NR_RUN_LATENCY : NR_RUN_FIXED;
    if (r->kind == NR_RUN_SWEEP && nr_repeat_sequential(&o->reps))
        return nr_error_set(err, NR_E_USAGE, "-r MIN:MAX stops repetitions of one size; -e runs each size once");
    if (r->kind == NR_RUN_LATENCY && o->plot)
        return nr_error_set(err, NR_E_USAGE, "-P plots throughput tests; the latency test has nothing to plot");
    if (o->duet && r->kind == NR_RUN_SWEEP)
        return nr_error_set(err, NR_E_USAGE, "--duet pairs the repetitions of a fixed-size or latency test, not -e");
    if (o->duet_iface && o->duet != NR_DUET_TCP)
        return nr_error_set(err, NR_E_USAGE, "--duet-iface goes with --duet tcp");
    if (o->duet_sleep && o->duet != NR_DUET_TCP)
        return nr_error_set(err, NR_E_USAGE, "--duet-sleep goes with --duet tcp");
    r->size = r->kind == NR_RUN_LATENCY ? (o->lat_size ? o->lat_size : NR__LATENCY_DEFAULT_BYTES) : o->msg_size;
    uint64_t largest = r->kind == NR_RUN_SWEEP ? (uint64_t)1 << o->exponent : r->size;
    if (largest > (uint64_t)INT32_MAX)
        return nr_error_set(err, NR_E_RANGE, "message size %llu exceeds the MPI count limit %d",
                            (unsigned long long)largest, INT32_MAX);
    if (2 * largest > nr_mpi_memory_budget(g_mpi))
        return nr_error_set(err, NR_E_RANGE, "message size %llu needs more memory than this node allows a rank "
                            "(%llu bytes)", (unsigned long long)largest,
                            (unsigned long long)nr_mpi_memory_budget(g_mpi));
    r->mode = r->kind == NR_RUN_LATENCY ? "latency"
              : r->kind == NR_RUN_SWEEP ? (o->pingpong ? "pingpong-exp" : "stream-exp")
                                     : (o->pingpong ? "pingpong" : "stream");
    return NR_OK;
}

static int nr__main(const struct nr__opts *o, struct nr__run *r, struct nr_error *err)
{
    int rc = nr__validate(o, r, err);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    g_mpi->mode = r->mode;
    double run_s = r->kind == NR_RUN_LATENCY ? o->test_time_s / o->reps.min : o->test_time_s;
    g_budget = o->deadline_s > 0 ? o->deadline_s : 10 * run_s + 30;
    if ((rc = nr_mpi_watch_start(g_mpi, g_budget, "start-up (host names, buffers, the yardstick)", err)) < 0)
        return rc;
    /* Exchange host names (for the banner, -o and JSON). */
    char hosts[2][NR_HOST_MAX];
    rc = nr_mpi_check(MPI_Allgather(NR_MPI_IN(g_mpi->host), NR_HOST_MAX, MPI_CHAR, hosts, NR_HOST_MAX, MPI_CHAR,
                                    MPI_COMM_WORLD),
                      "MPI_Allgather (host names)", err);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    snprintf(r->peer_host, sizeof r->peer_host, "%s", hosts[1 - g_mpi->rank]);
    if (g_mpi->rank == 0) {
        printf("%s(Master-node) <--> %s(Secondary-node)\n%s\n", hosts[0], hosts[1], nr__mode_line(o, r));
        fflush(stdout);
    }
    enum nr__pattern_kind how = r->kind == NR_RUN_LATENCY ? NR__ROUNDTRIP
                                : !o->pingpong        ? NR__STREAM
                                : o->nonblocking      ? NR__EXCHANGE
                                                      : NR__ROUNDTRIP;
    uint64_t largest = r->kind == NR_RUN_SWEEP ? (uint64_t)1 << o->exponent : r->size;
    unsigned char *sbuf = malloc(largest ? largest : 1), *rbuf = malloc(largest ? largest : 1);
    rc = sbuf && rbuf ? NR_OK : nr_error_set(err, NR_E_NOMEM, "cannot allocate 2 x %llu bytes",
                                            (unsigned long long)largest);
    if (rc == NR_OK) { /* written before anything runs: no shared zero page, no first-touch faults when timed */
        nr_buffer_fill(sbuf, largest ? largest : 1, 1);
        nr_buffer_fill(rbuf, largest ? largest : 1, 2);
    }
    r->nreps = 0;
    size_t nruns = r->kind == NR_RUN_SWEEP ? (size_t)o->exponent + 1 : (size_t)o->reps.max;
    if (rc == NR_OK && !(r->reps = calloc(nruns, sizeof *r->reps)))
        rc = nr_error_set(err, NR_E_NOMEM, "out of memory");
    if (rc == NR_OK && r->kind == NR_RUN_LATENCY && !(r->rtt_us = calloc(nruns, sizeof *r->rtt_us)))
        rc = nr_error_set(err, NR_E_NOMEM, "out of memory");
    if (rc == NR_OK && r->kind != NR_RUN_SWEEP && !(r->samples = calloc(nruns, sizeof *r->samples)))
        rc = nr_error_set(err, NR_E_NOMEM, "out of memory");
    if (rc == NR_OK && o->syslog && (rc = nr_sysmon_open(&r->mon, err)) == NR_OK)
        rc = nr_sysmon_mark(r->mon, err);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        goto out;
    struct nr_duet *duet = o->duet ? &r->duet : NULL;
    if (duet)
        duet->sleep = o->duet_sleep;
    if (duet && (rc = nr_duet_open(duet, o->duet, o->duet_iface, g_mpi, r->peer_host, nruns,
                                   r->kind == NR_RUN_LATENCY, err)) < 0)
        goto out;
    /* Pre-test system-log row: an idle interval before anything is measured. */
    if (r->mon) {
        nr_sleep_s(o->test_time_s < 1 ? o->test_time_s : 1);
        if ((rc = nr_mpi_agree(nr_sysmon_record(r->mon, err), err)) < 0)
            goto out;
    }
    uint64_t iters = (uint64_t)o->iterations, yiters = iters;
    /* a latency test's -t is the whole test at the minimum count of trials */
    double target = iters ? 0 : r->kind == NR_RUN_LATENCY ? o->test_time_s / o->reps.min : o->test_time_s;
    r->rule = o->reps;
    nr_calib_init(&r->calib, target, (uint64_t)1 << 40);
    nr_calib_init(&r->duet.calib, target, (uint64_t)1 << 40);
    struct nr_rep warm;
    /* Warm-up: one untimed message before anything timed (connection set-up, registration, first faults). */
    if (r->kind != NR_RUN_SWEEP && (rc = nr__run_once(o, how, NULL, sbuf, rbuf, r->size, 1, &warm, err)) < 0)
        goto out;
    if (r->kind != NR_RUN_SWEEP && iters == 0 &&
        (rc = nr__calibrate(o, how, NULL, sbuf, rbuf, r->size, &r->calib, &iters, err)) < 0)
        goto out;
    /* The yardstick: its own warm-up, and its own count for the same target. */
    if (duet && ((rc = nr__run_once(o, how, duet, sbuf, rbuf, r->size, 1, &warm, err)) < 0 ||
                 (yiters == 0 && (rc = nr__calibrate(o, how, duet, sbuf, rbuf, r->size, &duet->calib, &yiters,
                                                     err)) < 0)))
        goto out;
    for (size_t i = 0; i < nruns; i++) {
        uint64_t size = r->kind == NR_RUN_SWEEP ? (uint64_t)1 << i : r->size, n = iters;
        if (r->kind == NR_RUN_SWEEP && (rc = nr__run_once(o, how, NULL, sbuf, rbuf, size, 1, &warm, err)) < 0)
            goto out;
        if (r->kind == NR_RUN_SWEEP && n == 0 &&
            (rc = nr__calibrate(o, how, NULL, sbuf, rbuf, size, &r->calib, &n, err)) < 0)
            goto out;
        /* --duet: the pair's yardstick run before or after the MPI run, as rank 0's coin fell */
        bool yard_first = duet && duet->yard_first[i];
        if (yard_first && (rc = nr__measured_run(o, how, duet, sbuf, rbuf, size, &yiters, r, &duet->reps[i],
                                                 err)) < 0)
            goto out;
        if ((rc = nr__measured_run(o, how, NULL, sbuf, rbuf, size, &n, r, &r->reps[i], err)) < 0)
            goto out;
        if (duet && !yard_first && (rc = nr__measured_run(o, how, duet, sbuf, rbuf, size, &yiters, r,
                                                          &duet->reps[i], err)) < 0)
            goto out;
        if (r->kind != NR_RUN_SWEEP)
            iters = n;    /* a re-checked count holds for the runs that follow */
        r->iterations = iters;
        if (r->kind == NR_RUN_LATENCY)
            r->rtt_us[i] = r->reps[i].local.elapsed_s / (double)n * 1e6;
        if (r->kind != NR_RUN_SWEEP)
            r->samples[i] = r->kind == NR_RUN_LATENCY ? r->rtt_us[i] : r->reps[i].throughput_mbps;
        if (duet)
            nr_duet_record(duet, r->kind == NR_RUN_LATENCY ? r->rtt_us[i] : r->reps[i].throughput_mbps,
                           r->kind == NR_RUN_LATENCY ? duet->reps[i].local.elapsed_s / (double)yiters * 1e6
                                                     : duet->reps[i].throughput_mbps);
        r->nreps = i + 1;
        if (g_mpi->rank == 0) {
            nr__print_run(r, i);
            if (duet)
                nr_duet_print_pair(duet, i);
        }
        if (r->kind == NR_RUN_SWEEP)
            continue;
        /* rank 0 decides whether another repetition runs (on its own clock's figures), and every rank follows */
        int more = g_mpi->rank == 0 && nr_repeat_more(&r->rule, r->samples, r->nreps);
        rc = nr_mpi_check(MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast (another repetition)", err);
        if ((rc = nr_mpi_agree(rc, err)) < 0 || !more)
            break;
    }
    if (rc < 0)
        goto out;
    if (g_mpi->rank == 0 && r->kind != NR_RUN_SWEEP) {
        char line[192];
        printf("Repetitions: %s\n", nr_repeat_describe(&r->rule, line, sizeof line));
        fflush(stdout);
    }
    if (r->mon) {
        nr_sysmon_mark(r->mon, err);
        nr_sleep_s(o->test_time_s < 1 ? o->test_time_s : 1);
        if ((rc = nr_mpi_agree(nr_sysmon_record(r->mon, err), err)) < 0 ||
            (rc = nr_mpi_agree(nr__ship_log(r, err), err)) < 0)
            goto out;
    }
    /* The runs mostly fell far short of the time target: the results are written, and the test fails (exit 3). */
    int verdict = g_mpi->rank == 0 ? nr_calib_verdict(&r->calib, err) : NR_OK;
    if (verdict == NR_OK && duet && g_mpi->rank == 0)
        verdict = nr_duet_verdict(duet, err);
    if (g_mpi->rank == 0) {
        if (r->kind == NR_RUN_LATENCY) {
            struct nr_stats s;
            nr_stats_compute(r->rtt_us, r->nreps, &s);
            printf("Message size (Bytes) : %llu\nMPI RTT min/avg/max = %.3f/%.3f/%.3f usec\n",
                   (unsigned long long)r->size, s.min, s.avg, s.max);
        }
        if (duet)
            nr_duet_print_summary(duet);
        if (o->out) {
            rc = nr__write_output(o, r, err);
            if (rc == NR_OK && o->plot)
                rc = nr__write_plot(o, r, err);
            if (rc == NR_OK && o->syslog)
                rc = nr__write_logs(o, r, err);
            if (rc == NR_OK) {
                printf("Test result: \"%s\"\n", o->out);
                if (o->syslog)
                    printf("Master node's syslog: \"%s.m_log\"\nSecondary node's syslog: \"%s.s_log\"\n", o->out,
                           o->out);
            }
        }
        if (rc == NR_OK && verdict == NR_OK)
            printf("Test done!\n");
    }
    rc = nr_mpi_agree(rc < 0 ? rc : verdict, err);
out:
    free(sbuf);
    free(rbuf);
    return rc;
}

int main(int argc, char **argv)
{
    struct nr_error err = {0};
    struct nr_mpi mpi;
    g_mpi = &mpi;
    struct nr__opts o = {.reps = {.min = 10, .max = 10}, .msg_size = 1048576, .test_time_s = 5.0, .exponent = -1};
    const struct nr_opt opts[] = {
        {NR_OPT_SECTION, 0, NULL, NULL, NULL, "Experiment", 0, 0, NULL, NULL},
        {NR_OPT_FLAG, 'i', "pingpong", &o.pingpong, NULL, "ping-pong (bidirectional) instead of stream", 0, 0, NULL, NULL},
        {NR_OPT_FLAG, 'n', "nonblocking", &o.nonblocking, NULL, "MPI_Isend/MPI_Irecv + MPI_Wait instead of MPI_Send/MPI_Recv", 0, 0, NULL, NULL},
        {NR_OPT_CALL, 'r', "repetitions", &o.reps, "N|MIN:MAX", "repetitions, or latency trials: N, or from MIN to MAX until the median is known to --precision", 1, NR__MAX_REPS, nr_repeat_parse_opt, "10"},
        {NR_OPT_DOUBLE, 0, "precision", &o.reps.precision, "FRACTION", "with -r MIN:MAX: stop once the median's 90 % interval is within FRACTION of it", 0.0001, 0.5, NULL, "0.025"},
        {NR_OPT_SIZE, 'm', "message-size", &o.msg_size, "SIZE", "message size of fixed-size tests", 1, (double)INT32_MAX, NULL, NULL},
        {NR_OPT_DOUBLE, 't', "test-time", &o.test_time_s, "SECONDS", "time each run is calibrated to", 0.001, 3600, NULL, NULL},
        {NR_OPT_INT, 'e', "exponential", &o.exponent, "N", "sweep message sizes 1, 2, 4 .. 2^N bytes", 0, NR__MAX_EXPONENT, NULL, "off"},
        {NR_OPT_FLAG, 'a', "latency", &o.latency, NULL, "round-trip time with 64-byte messages", 0, 0, NULL, NULL},
        {NR_OPT_SIZE, 'A', "latency-size", &o.lat_size, "SIZE", "round-trip time with SIZE-byte messages", 1, (double)INT32_MAX, NULL, "off"},
        {NR_OPT_INT, 0, "iterations", &o.iterations, "N", "fixed message count per run (no calibration)", 1, 1e9, NULL, "calibrated"},
        {NR_OPT_FLAG, 0, "verify", &o.verify, NULL, "fill a pattern and check every received message's last copy", 0, 0, NULL, NULL},
        {NR_OPT_CALL, 0, "duet", &o.duet, "tcp|shm", "pair each repetition with a run outside MPI (TCP, shared memory), in random order: ratio MPI/yardstick", 0, 0, nr_duet_parse_kind, "off"},
        {NR_OPT_STRING, 0, "duet-iface", &o.duet_iface, "IFACE", "interface --duet tcp runs over", 0, 0, NULL, "loopback, ranks on one host"},
        {NR_OPT_FLAG, 0, "duet-sleep", &o.duet_sleep, NULL, "--duet tcp waits in poll(), for an MPI library that sleeps while it waits (LAM/MPI's tcp RPI)", 0, 0, NULL, NULL},
        {NR_OPT_DOUBLE, 0, "deadline", &o.deadline_s, "SECONDS", "a run not done by then fails the job, naming the ranks that did not answer", 0, 86400, NULL, "from -t or --iterations"},
        {NR_OPT_SECTION, 0, NULL, NULL, NULL, "Output", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 'o', "output", &o.out, "FILE", "write the results table (Hpcbench layout)", 0, 0, NULL, NULL},
        {NR_OPT_FLAG, 'c', "syslog", &o.syslog, NULL, "system logs FILE.m_log and FILE.s_log (needs -o)", 0, 0, NULL, NULL},
        {NR_OPT_FLAG, 'P', "plot", &o.plot, NULL, "gnuplot script FILE.plot (needs -o)", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "json", &o.json, "FILE", "machine-readable results (docs/json-schema.md)", 0, 0, NULL, NULL},
        {NR_OPT_END, 0, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL},
    };
    const struct nr_opt_set set = {NR__PROG, "[OPTIONS]",
                                   "MPI point-to-point throughput and round-trip time between rank 0 (master) and "
                                   "rank 1 (secondary), as Hpcbench's mpitest. Run with exactly 2 ranks.",
                                   opts, "Examples:\n  mpirun -np 2 nr-mpitest -r 5 -o output\n"
                                         "  mpirun -np 2 nr-mpitest -i -e 20 -o sweep -P\n"
                                         "  mpirun -np 2 nr-mpitest -A 8 -r 10 --json rtt.json\n"
                                         "  mpirun -np 2 nr-mpitest -A 8 -r 9 -t 0.2 --duet shm --json duet.json\n"};
    struct nr__run r;
    memset(&r, 0, sizeof r);
    nr_sysmon_log_init(&r.peer_log);
    r.mode = "stream";
    int rc = nr_mpi_start(&argc, &argv, &set, &o.json, r.mode, &mpi, &err); /* the mode is set again once known */
    if (rc == NR_OK)
        rc = nr_repeat_check(&o.reps, "-r/--repetitions", "--precision", &err);
    if (rc == NR_OK)
        rc = nr__main(&o, &r, &err);
    if (rc <= 0 && mpi.rank == 0 && o.json && nr__write_json(&o, &r, mpi.started, rc, &err) != 0 && rc == NR_OK)
        rc = nr_error_sys(&err, NR_E_IO, "cannot write '%s'", o.json);
    nr_sysmon_close(r.mon);
    nr_duet_close(&r.duet);
    nr_sysmon_log_free(&r.peer_log);
    free(r.reps);
    free(r.rtt_us);
    free(r.samples);
    return nr_mpi_finish(NR__PROG, rc, &err);
}
