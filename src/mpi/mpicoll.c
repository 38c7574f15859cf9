/* nr-mpicoll: Luecke & Coyle's 13 MPI communication tests (seed 003) on any number of ranks.
 *
 * Messages are arrays of n 8-byte reals (message size m = 8n bytes; KB = 1000 and MB = 10^6 bytes as in the
 * paper). Default sizes 8 B, 1 KB, 100 KB and 10 MB; the tests the paper capped (gather, allgather, scatter,
 * alltoall, broadcast-gather, scatter-gather) use at most --cap bytes (1 MB).
 *
 * Methodology. Every buffer is written (ordinary non-zero doubles) before anything runs, so no operation reads
 * the kernel's shared zero page. For each test and size one untimed operation is the warm-up; then the operation
 * is repeated k times between two barriers and the clock is read right after each barrier; k is calibrated by the
 * rule every kernel shares (nr/calib.h: growing probes, the one that reaches a tenth of the target confirmed by a
 * second or third, the median deciding), aimed at 1.25 x the minimum time (-t, 1 s) so the loops last at least
 * the minimum, and a timed run shorter than half that target is run again with the count its rate gives. Then -r
 * runs of k operations are timed and the best (smallest) time per operation is the result, as the paper does
 * ("five runs were made and the best performance results are reported"); every run's time and their median go to
 * the JSON too, so jitter is visible. With -r MIN:MAX the runs of a point stop once the median time per operation
 * is known to --precision (nr/repeat.h; rank 0 decides, every rank follows), else at MAX. Tables 2-b and 2-c are
 * the same cycled-root runs normalised two ways: measured once. Rates come from the per-test formula table in
 * coll_rates.c. Every MPI call is checked and agreed on by all ranks. Every timed loop has a deadline (--deadline,
 * nr_mpi.h "Deadlines").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_rates.h"
#include "nr/calib.h"
#include "nr_mpi.h"

#define NR__PROG "nr-mpicoll"
#define NR__MAX_RUNS 1000
#define NR__MAX_ITERS (1u << 30)
#define NR__TARGET 1.25 /* the runs are calibrated to this x the minimum loop time */

struct nr__opts {
    double min_time_s;         /* -t */
    struct nr_repeat runs;     /* -r N | MIN:MAX, --precision */
    struct nr_size_list sizes; /* -s */
    uint64_t cap;              /* --cap */
    const char *tests;         /* -T */
    const char *json;          /* --json */
    double deadline_s;         /* --deadline: seconds a timed loop may last (0: from -t) */
};

static double g_budget; /* the deadline of one timed loop (nr_mpi_watch) */

struct nr__point {
    uint64_t size_bytes;
    double op_time_s;     /* best run: the paper's result */
    double median_op_s;   /* median of the runs */
    double *run_op_s;     /* every run's time per operation (runs entries, rank 0's clock) */
    uint64_t *run_iters;  /* every run's operation count (a re-check may grow it between runs) */
    int runs;
    uint64_t iterations;  /* operations per timed run (the last run's, when a re-check grew the count) */
    struct nr_repeat rule; /* how many runs ran and why they stopped */
    struct nr_calib calib; /* the count's calibration and what the runs achieved (rank 0's clock) */
};

struct nr__ctx {
    const struct nr_mpi *mpi;
    MPI_Comm ring;        /* periodic 1-d Cartesian communicator (reorder on) for the shift tests */
    int left, right;      /* neighbours in the ring */
    double *a, *b, *c;    /* message buffers */
};

/* One operation of test t with n reals; iteration number it (the cycled root uses it). */
static int nr__op(const struct nr__ctx *x, const struct nr_coll_test *t, int n, uint64_t it)
{
    const int p = x->mpi->size, me = x->mpi->rank;
    MPI_Comm w = MPI_COMM_WORLD;
    int rc = MPI_SUCCESS;
    switch (t->op) {
    case NR_OP_P2P:
        if (me == 0) {
            rc = MPI_Send(x->a, n, MPI_DOUBLE, 1, 0, w);
            if (rc == MPI_SUCCESS)
                rc = MPI_Recv(x->b, n, MPI_DOUBLE, 1, 0, w, MPI_STATUS_IGNORE);
        } else if (me == 1) {
            rc = MPI_Recv(x->b, n, MPI_DOUBLE, 0, 0, w, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS)
                rc = MPI_Send(x->b, n, MPI_DOUBLE, 0, 0, w);
        }
        return rc;
    case NR_OP_BCAST: return MPI_Bcast(x->a, n, MPI_DOUBLE, 0, w);
    case NR_OP_BCAST_CYCLED: return MPI_Bcast(x->a, n, MPI_DOUBLE, (int)(it % (uint64_t)p), w);
    case NR_OP_REDUCE: return MPI_Reduce(x->a, x->b, n, MPI_DOUBLE, MPI_SUM, 0, w);
    case NR_OP_ALLREDUCE: return MPI_Allreduce(x->a, x->b, n, MPI_DOUBLE, MPI_SUM, w);
    case NR_OP_GATHER: return MPI_Gather(x->a, n, MPI_DOUBLE, x->c, n, MPI_DOUBLE, 0, w);
    case NR_OP_ALLGATHER: return MPI_Allgather(x->a, n, MPI_DOUBLE, x->c, n, MPI_DOUBLE, w);
    case NR_OP_SCATTER: return MPI_Scatter(x->c, n, MPI_DOUBLE, x->a, n, MPI_DOUBLE, 0, w);
    case NR_OP_ALLTOALL: return MPI_Alltoall(x->c, n, MPI_DOUBLE, x->b, n, MPI_DOUBLE, w);
    case NR_OP_BCAST_GATHER:
        rc = MPI_Bcast(x->a, n, MPI_DOUBLE, 0, w);
        return rc == MPI_SUCCESS ? MPI_Gather(x->a, n, MPI_DOUBLE, x->c, n, MPI_DOUBLE, 0, w) : rc;
    case NR_OP_SCATTER_GATHER:
        rc = MPI_Scatter(x->c, n, MPI_DOUBLE, x->a, n, MPI_DOUBLE, 0, w);
        return rc == MPI_SUCCESS ? MPI_Gather(x->a, n, MPI_DOUBLE, x->c, n, MPI_DOUBLE, 0, w) : rc;
    case NR_OP_REDUCE_SCATTER: {
        /* n reals on every rank, the reduced array split as evenly as possible among the ranks */
        int counts[1024];
        for (int i = 0; i < p; i++)
            counts[i] = n / p + (i < n % p);
        return MPI_Reduce_scatter(x->a, x->b, counts, MPI_DOUBLE, MPI_SUM, w);
    }
    case NR_OP_RIGHT_SHIFT:
        return MPI_Sendrecv(x->a, n, MPI_DOUBLE, x->right, 1, x->b, n, MPI_DOUBLE, x->left, 1, x->ring,
                            MPI_STATUS_IGNORE);
    case NR_OP_LEFT_RIGHT_SHIFT:
        rc = MPI_Sendrecv(x->a, n, MPI_DOUBLE, x->right, 1, x->b, n, MPI_DOUBLE, x->left, 1, x->ring,
                          MPI_STATUS_IGNORE);
        return rc == MPI_SUCCESS ? MPI_Sendrecv(x->a, n, MPI_DOUBLE, x->left, 2, x->b, n, MPI_DOUBLE, x->right, 2,
                                                x->ring, MPI_STATUS_IGNORE)
                                 : rc;
    }
    return MPI_ERR_OTHER;
}

/* k operations between barriers; returns rank 0's elapsed time on every rank. */
static int nr__timed(const struct nr__ctx *x, const struct nr_coll_test *t, int n, uint64_t k, double *elapsed,
                     struct nr_error *err)
{
    char phase[96];
    snprintf(phase, sizeof phase, "test %s: a loop of %llu operations on %d reals", t->name, (unsigned long long)k, n);
    nr_mpi_watch(phase, g_budget);
    /* A barrier that reports an error still synchronised: the loop runs anyway (no rank is left inside a
     * collective the others skipped) and the error is agreed on after the second barrier. */
    int brc = MPI_Barrier(MPI_COMM_WORLD), rc = MPI_SUCCESS;
    double t0 = MPI_Wtime();
    uint64_t it = 0;
    for (; it < k && rc == MPI_SUCCESS; it++)
        rc = nr__op(x, t, n, it);
    if (rc != MPI_SUCCESS) {
        /* The other ranks are still inside the loop's operations: no agreement can be reached, end every rank. */
        char what[192];
        snprintf(what, sizeof what, "%s (test %s, operation %llu of %llu, %d reals)", t->routines, t->name,
                 (unsigned long long)it, (unsigned long long)k, n);
        nr_mpi_check(rc, what, err);
        nr_mpi_fail_loop(x->mpi, err);
    }
    int erc2 = MPI_Barrier(MPI_COMM_WORLD);
    double e = MPI_Wtime() - t0;
    if (rc == MPI_SUCCESS)
        rc = brc != MPI_SUCCESS ? brc : erc2;
    int erc = nr_mpi_agree(nr_mpi_check(rc, t->routines, err), err);
    if (erc < 0)
        return erc;
    erc = nr_mpi_check(MPI_Bcast(&e, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Bcast (loop time)", err);
    if ((erc = nr_mpi_agree(erc, err)) < 0)
        return erc;
    *elapsed = e;
    return NR_OK;
}

/* One calibration probe: k operations between barriers on rank 0's clock (nr__timed broadcasts it), so every rank
 * takes the same calibration decisions. */
struct nr__probe {
    const struct nr__ctx *x;
    const struct nr_coll_test *t;
    int n;
};

static int nr__probe_run(void *ctx, uint64_t k, double *elapsed_s, struct nr_error *err)
{
    const struct nr__probe *p = ctx;
    return nr__timed(p->x, p->t, p->n, k, elapsed_s, err);
}

static int nr__measure(const struct nr__ctx *x, const struct nr__opts *o, const struct nr_coll_test *t,
                       uint64_t bytes, struct nr__point *pt, struct nr_error *err)
{
    int n = (int)(bytes / 8);
    char phase[96];
    snprintf(phase, sizeof phase, "test %s: the warm-up operation on %d reals", t->name, n);
    nr_mpi_watch(phase, g_budget);
    int rc = nr_mpi_agree(nr_mpi_check(nr__op(x, t, n, 0), t->routines, err), err); /* warm-up, untimed */
    if (rc < 0)
        return rc;
    double *runs = malloc(sizeof *runs * (size_t)o->runs.max);
    uint64_t *iters = malloc(sizeof *iters * (size_t)o->runs.max);
    if ((rc = nr_mpi_agree(runs && iters ? NR_OK : nr_error_set(err, NR_E_NOMEM, "out of memory"), err)) < 0) {
        free(runs);
        free(iters);
        return rc;
    }
    /* The paper's loops last at least the minimum time; the shared rule aims at its target, so the target is
     * NR__TARGET x the minimum, and a run shorter than half the target is run again with the count its own rate
     * gives (nr_calib_recheck), on rank 0's clock like the probes. */
    struct nr__probe probe = {x, t, n};
    uint64_t k = 1;
    nr_calib_init(&pt->calib, NR__TARGET * o->min_time_s, NR__MAX_ITERS);
    rc = nr_calibrate(nr__probe_run, &probe, &pt->calib, &k, err);
    pt->rule = o->runs;
    int nruns = 0;
    for (int more = 1; rc == NR_OK && more; nruns++) {
        double e = 0;
        int rechecks = 0;
        uint64_t next = k;
        do {
            k = next;
            rc = nr__timed(x, t, n, k, &e, err);
        } while (rc == NR_OK && nr_calib_recheck(&pt->calib, k, e, &rechecks, &next));
        if (rc == NR_OK) {
            nr_calib_record(&pt->calib, k, e);
            runs[nruns] = e / (double)k, iters[nruns] = k;
            /* rank 0 decides whether another run follows, and every rank follows */
            more = x->mpi->rank == 0 && nr_repeat_more(&pt->rule, runs, (size_t)nruns + 1);
            rc = nr_mpi_check(MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast (another run)", err);
            rc = nr_mpi_agree(rc, err);
        }
    }
    if (rc < 0) {
        free(runs);
        free(iters);
        return rc;
    }
    struct nr_stats st;
    nr_stats_compute(runs, (size_t)nruns, &st);
    pt->size_bytes = bytes, pt->op_time_s = st.min, pt->median_op_s = st.median;
    pt->run_op_s = runs, pt->run_iters = iters, pt->runs = nruns, pt->iterations = k;
    return NR_OK;
}

/* Per-rank buffer bytes the test needs for m-byte messages (a, b, c). */
static void nr__buffers(const struct nr_coll_test *t, uint64_t m, int p, uint64_t len[3])
{
    len[0] = m, len[1] = m, len[2] = 0;
    switch (t->op) {
    case NR_OP_GATHER: case NR_OP_ALLGATHER: case NR_OP_SCATTER: case NR_OP_BCAST_GATHER:
    case NR_OP_SCATTER_GATHER: len[2] = m * (uint64_t)p; break;
    case NR_OP_ALLTOALL: len[1] = m * (uint64_t)p, len[2] = m * (uint64_t)p; break;
    default: break;
    }
}

static uint64_t nr__effective_size(const struct nr__opts *o, const struct nr_coll_test *t, uint64_t s)
{
    return t->capped && s > o->cap ? o->cap : s;
}

static int nr__validate(const struct nr__opts *o, const struct nr_mpi *m, int selected[NR_COLL_NTESTS],
                        struct nr_error *err)
{
    if (m->size < 2)
        return nr_error_set(err, NR_E_USAGE, "needs at least 2 MPI ranks, got %d", m->size);
    if (m->size > 1024)
        return nr_error_set(err, NR_E_RANGE, "at most 1024 ranks are supported, got %d", m->size);
    for (size_t i = 0; i < o->sizes.n; i++)
        if (o->sizes.bytes[i] % 8)
            return nr_error_set(err, NR_E_RANGE, "-s/--sizes: %llu bytes is not a whole number of 8-byte reals",
                                (unsigned long long)o->sizes.bytes[i]);
    if (o->cap % 8)
        return nr_error_set(err, NR_E_RANGE, "--cap: %llu bytes is not a whole number of 8-byte reals",
                            (unsigned long long)o->cap);
    if (o->tests) {
        char list[1024];
        snprintf(list, sizeof list, "%s", o->tests);
        for (char *save = NULL, *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save))
            if (!nr_coll_select(w, selected))
                return nr_error_set(err, NR_E_USAGE, "-T/--tests: unknown test '%s' (names: p2p bcast bcast_cycled "
                                    "reduce allreduce gather allgather scatter alltoall bcast_gather scatter_gather "
                                    "reduce_scatter right_shift left_right_shift bcast_cycled_log, or 1-13, 2a 2b 2c)", w);
    } else {
        for (int i = 0; i < NR_COLL_NTESTS; i++)
            selected[i] = 1;
    }
    uint64_t budget = nr_mpi_memory_budget(m);
    for (int i = 0; i < NR_COLL_NTESTS; i++)
        for (size_t s = 0; selected[i] && s < o->sizes.n; s++) {
            uint64_t len[3], eff = nr__effective_size(o, &nr_coll_tests[i], o->sizes.bytes[s]);
            nr__buffers(&nr_coll_tests[i], eff, m->size, len);
            if (len[0] + len[1] + len[2] > budget || eff / 8 > INT32_MAX || len[2] / 8 > INT32_MAX)
                return nr_error_set(err, NR_E_RANGE, "test %s with %llu-byte messages on %d ranks needs %llu bytes "
                                    "per rank, more than this node allows a rank (%llu bytes)",
                                    nr_coll_tests[i].name, (unsigned long long)eff, m->size,
                                    (unsigned long long)(len[0] + len[1] + len[2]), (unsigned long long)budget);
        }
    return NR_OK;
}

static void nr__print_table(const struct nr_coll_test *t, const struct nr__point *pts, size_t n, int p)
{
    printf("\n# Test %s: %s (%s) -- %s = %s, KBytes/s (KB = 1000 bytes)\n", t->id, t->name, t->routines,
           nr_coll_norm_name(t->norm), t->formula);
    printf("# %14s %10s %16s %16s %12s\n", "Size(Bytes)", "Processors", "Rate(KB/s)", "Time/op(usec)",
           "Iterations");
    for (size_t i = 0; i < n; i++)
        printf("  %14llu %10d %16.1f %16.3f %12llu\n", (unsigned long long)pts[i].size_bytes, p,
               nr_coll_rate_kBps(t, pts[i].size_bytes, p, pts[i].op_time_s), pts[i].op_time_s * 1e6,
               (unsigned long long)pts[i].iterations);
    fflush(stdout);
}

static int nr__write_json(const struct nr__opts *o, const struct nr_mpi *m, const int selected[NR_COLL_NTESTS],
                          struct nr__point pts[NR_COLL_NTESTS][NR_SIZE_LIST_MAX], const size_t npts[NR_COLL_NTESTS],
                          time_t started, int status, const struct nr_error *failure)
{
    struct nr_json j;
    FILE *f = nr_mpi_json_begin(&j, o->json, NR__PROG, "collectives", started, status, failure);
    if (!f)
        return -1;
    nr_json_key(&j, "hosts");
    nr_json_begin_object(&j);
    nr_json_kv_string(&j, "root", m->host);
    nr_json_end_object(&j);
    nr_json_key(&j, "options");
    nr_json_begin_object(&j);
    nr_json_kv_int(&j, "processes", m->size);
    nr_json_kv_double(&j, "min_time_s", o->min_time_s);
    nr_json_kv_int(&j, "runs", o->runs.max);
    nr_json_kv_int(&j, "runs_min", o->runs.min);
    nr_json_kv_uint(&j, "cap_bytes", o->cap);
    nr_json_key(&j, "sizes_bytes");
    nr_json_begin_array(&j);
    for (size_t s = 0; s < o->sizes.n; s++)
        nr_json_uint(&j, o->sizes.bytes[s]);
    nr_json_end_array(&j);
    nr_json_end_object(&j);
    nr_json_key(&j, "tests");
    nr_json_begin_array(&j);
    for (int i = 0; i < NR_COLL_NTESTS; i++) {
        if (!selected[i])
            continue;
        const struct nr_coll_test *t = &nr_coll_tests[i];
        nr_json_begin_object(&j);
        nr_json_kv_string(&j, "id", t->id);
        nr_json_kv_int(&j, "number", t->number);
        nr_json_kv_string(&j, "name", t->name);
        nr_json_kv_string(&j, "routines", t->routines);
        nr_json_kv_string(&j, "normalization", nr_coll_norm_name(t->norm));
        nr_json_kv_string(&j, "formula", t->formula);
        nr_json_key(&j, "points");
        nr_json_begin_array(&j);
        for (size_t k = 0; k < npts[i]; k++) {
            const struct nr__point *p = &pts[i][k];
            nr_json_begin_object(&j);
            nr_json_kv_uint(&j, "size_bytes", p->size_bytes);
            nr_json_kv_int(&j, "processes", m->size);
            double rate = nr_coll_rate_kBps(t, p->size_bytes, m->size, p->op_time_s);
            double total = nr_coll_total_rate_kBps(t, p->size_bytes, m->size, p->op_time_s);
            nr_json_kv_double(&j, "rate_kBps", rate);
            nr_json_kv_double(&j, "total_rate_kBps", total);
            nr_json_kv_double(&j, "rate_kbps", rate);       /* old names of the same KB/s values */
            nr_json_kv_double(&j, "total_rate_kbps", total);
            nr_json_kv_double(&j, "time_per_op_us", p->op_time_s * 1e6);
            nr_json_kv_double(&j, "median_time_per_op_us", p->median_op_s * 1e6);
            nr_json_kv_double(&j, "median_rate_kBps", nr_coll_rate_kBps(t, p->size_bytes, m->size, p->median_op_s));
            nr_json_key(&j, "runs_time_per_op_us");
            nr_json_begin_array(&j);
            for (int r = 0; r < p->runs; r++)
                nr_json_double(&j, p->run_op_s[r] * 1e6);
            nr_json_end_array(&j);
            nr_json_kv_uint(&j, "iterations", p->iterations);
            nr_json_key(&j, "runs_iterations");
            nr_json_begin_array(&j);
            for (int r = 0; r < p->runs; r++)
                nr_json_uint(&j, p->run_iters[r]);
            nr_json_end_array(&j);
            nr_repeat_json(&j, &p->rule);
            nr_calib_json(&j, &p->calib);
            nr_json_end_object(&j);
        }
        nr_json_end_array(&j);
        nr_json_end_object(&j);
    }
    nr_json_end_array(&j);
    return nr_mpi_json_end(&j, f);
}

static struct nr__point g_pts[NR_COLL_NTESTS][NR_SIZE_LIST_MAX];

/* An earlier selected test that runs the same operation and already measured `bytes` (2-b for 2-c), or NULL. */
static const struct nr__point *nr__measured(const int selected[NR_COLL_NTESTS], const size_t npts[NR_COLL_NTESTS],
                                            int i, uint64_t bytes)
{
    for (int k = 0; k < i; k++)
        if (selected[k] && nr_coll_tests[k].op == nr_coll_tests[i].op)
            for (size_t s = 0; s < npts[k]; s++)
                if (g_pts[k][s].size_bytes == bytes)
                    return &g_pts[k][s];
    return NULL;
}

int main(int argc, char **argv)
{
    struct nr_error err = {0};
    struct nr_mpi mpi;
    struct nr__opts o = {.min_time_s = 1.0, .runs = {.min = 5, .max = 5}, .cap = 1000000};
    o.sizes.n = 4;
    o.sizes.bytes[0] = 8, o.sizes.bytes[1] = 1000, o.sizes.bytes[2] = 100000, o.sizes.bytes[3] = 10000000;
    const struct nr_opt opts[] = {
        {NR_OPT_DOUBLE, 't', "min-time", &o.min_time_s, "SECONDS", "minimum wall time of each timed loop", 1e-4, 3600, NULL, NULL},
        {NR_OPT_CALL, 'r', "runs", &o.runs, "N|MIN:MAX", "timed runs per test and size, the best reported: N, or from MIN to MAX until the median is known to --precision", 1, NR__MAX_RUNS, nr_repeat_parse_opt, "5"},
        {NR_OPT_DOUBLE, 0, "precision", &o.runs.precision, "FRACTION", "with -r MIN:MAX: stop once the median's 90 % interval is within FRACTION of it", 0.0001, 0.5, NULL, "0.025"},
        {NR_OPT_SIZE_LIST, 's', "sizes", &o.sizes, "SIZES", "message sizes, comma list (8-byte multiples)", 8, 1e10, NULL, "8,1000,100000,10000000"},
        {NR_OPT_SIZE, 0, "cap", &o.cap, "SIZE", "largest size of the tests the paper capped", 8, 1e10, NULL, "1000000"},
        {NR_OPT_STRING, 'T', "tests", &o.tests, "TESTS", "comma list of test names or numbers (default: all)", 0, 0, NULL, NULL},
        {NR_OPT_DOUBLE, 0, "deadline", &o.deadline_s, "SECONDS", "a timed loop not done by then fails the job, naming the ranks that did not answer", 0, 86400, NULL, "12.5 x -t + 30"},
        {NR_OPT_STRING, 0, "json", &o.json, "FILE", "machine-readable results (docs/mpi.md)", 0, 0, NULL, NULL},
        {NR_OPT_END, 0, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL},
    };
    const struct nr_opt_set set = {NR__PROG, "[OPTIONS]",
                                   "Luecke & Coyle's 13 MPI communication tests: point-to-point, broadcast (fixed and "
                                   "cycled root), reduce, allreduce, gather, allgather, scatter, alltoall, "
                                   "broadcast-gather, scatter-gather, reduce-scatter, right shift and left-right "
                                   "shift. Rates in KBytes/s (KB = 1000 bytes) as the paper defines them.",
                                   opts, "Example:\n  mpirun -np 4 nr-mpicoll -t 0.2 -r 3 -s 8,1000,100000 -T bcast,alltoall\n"};
    int selected[NR_COLL_NTESTS] = {0};
    size_t npts[NR_COLL_NTESTS] = {0};
    struct nr__ctx x = {&mpi, MPI_COMM_NULL, 0, 0, NULL, NULL, NULL};
    int rc = nr_mpi_start(&argc, &argv, &set, &o.json, "collectives", &mpi, &err);
    if (rc == NR_OK)
        rc = nr_mpi_agree(nr_repeat_check(&o.runs, "-r/--runs", "--precision", &err), &err);
    if (rc == NR_OK)
        rc = nr_mpi_agree(nr__validate(&o, &mpi, selected, &err), &err);
    /* a timed loop's deadline: ten times its target, and half a minute for what a first operation pays */
    g_budget = o.deadline_s > 0 ? o.deadline_s : 10 * NR__TARGET * o.min_time_s + 30;
    if (rc == NR_OK)
        rc = nr_mpi_watch_start(&mpi, g_budget, "start-up (buffers, the ring)", &err);
    if (rc == NR_OK) {
        uint64_t amax = 8, bmax = 8, cmax = 8;
        for (int i = 0; i < NR_COLL_NTESTS; i++)
            for (size_t s = 0; selected[i] && s < o.sizes.n; s++) {
                uint64_t len[3];
                nr__buffers(&nr_coll_tests[i], nr__effective_size(&o, &nr_coll_tests[i], o.sizes.bytes[s]),
                            mpi.size, len);
                amax = len[0] > amax ? len[0] : amax, bmax = len[1] > bmax ? len[1] : bmax;
                cmax = len[2] > cmax ? len[2] : cmax;
            }
        x.a = malloc(amax), x.b = malloc(bmax), x.c = malloc(cmax);
        if (x.a && x.b && x.c) { /* written before anything runs: no shared zero page in any operation */
            nr_buffer_fill_doubles(x.a, amax / 8, (uint32_t)mpi.rank);
            nr_buffer_fill_doubles(x.b, bmax / 8, (uint32_t)mpi.rank + 7u);
            nr_buffer_fill_doubles(x.c, cmax / 8, (uint32_t)mpi.rank + 13u);
        }
        int dims[1] = {mpi.size}, periods[1] = {1};
        rc = !x.a || !x.b || !x.c ? nr_error_set(&err, NR_E_NOMEM, "cannot allocate the message buffers")
                                  : nr_mpi_check(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 1, &x.ring),
                                                 "MPI_Cart_create", &err);
        if (rc == NR_OK)
            rc = nr_mpi_check(MPI_Cart_shift(x.ring, 0, 1, &x.left, &x.right), "MPI_Cart_shift", &err);
        rc = nr_mpi_agree(rc, &err);
    }
    if (rc == NR_OK && mpi.rank == 0) {
        char runs[64];
        snprintf(runs, sizeof runs, nr_repeat_sequential(&o.runs) ? "%d..%d runs (to %.3g of the median)" : "%d runs",
                 o.runs.min, o.runs.max, o.runs.precision);
        printf("# Luecke & Coyle MPI communication tests: %d processes, minimum loop time %g s, best of %s\n",
               mpi.size, o.min_time_s, runs);
        fflush(stdout);
    }
    for (int i = 0; rc == NR_OK && i < NR_COLL_NTESTS; i++) {
        if (!selected[i])
            continue;
        const struct nr_coll_test *t = &nr_coll_tests[i];
        for (size_t s = 0; rc == NR_OK && s < o.sizes.n; s++) {
            uint64_t eff = nr__effective_size(&o, t, o.sizes.bytes[s]);
            if (npts[i] && g_pts[i][npts[i] - 1].size_bytes == eff)
                continue; /* a capped size already measured */
            const struct nr__point *same = nr__measured(selected, npts, i, eff);
            if (same) { /* 2-c: 2-b's runs, normalised by log2 p */
                struct nr__point *p = &g_pts[i][npts[i]];
                *p = *same;
                p->run_op_s = malloc(sizeof *p->run_op_s * (size_t)same->runs);
                p->run_iters = malloc(sizeof *p->run_iters * (size_t)same->runs);
                rc = nr_mpi_agree(p->run_op_s && p->run_iters ? NR_OK
                                                              : nr_error_set(&err, NR_E_NOMEM, "out of memory"), &err);
                if (rc == NR_OK) {
                    memcpy(p->run_op_s, same->run_op_s, sizeof *p->run_op_s * (size_t)same->runs);
                    memcpy(p->run_iters, same->run_iters, sizeof *p->run_iters * (size_t)same->runs);
                }
            } else {
                rc = nr__measure(&x, &o, t, eff, &g_pts[i][npts[i]], &err);
            }
            if (rc == NR_OK)
                npts[i]++;
        }
        if (rc == NR_OK && mpi.rank == 0)
            nr__print_table(t, g_pts[i], npts[i], mpi.size);
    }
    /* Most runs of a point far shorter than the minimum: the calibration went wrong. Results are written, the run
     * fails (exit 3). Every rank holds the same record (rank 0's clock), so every rank reaches the same verdict. */
    for (int i = 0; rc == NR_OK && i < NR_COLL_NTESTS; i++)
        for (size_t k = 0; rc == NR_OK && k < npts[i]; k++)
            if (nr_calib_verdict(&g_pts[i][k].calib, &err) < 0) {
                char why[sizeof err.detail];
                snprintf(why, sizeof why, "%s", err.detail);
                rc = nr_error_set(&err, NR_E_VALIDATE, "test %s, %llu-byte messages: %s", nr_coll_tests[i].name,
                                  (unsigned long long)g_pts[i][k].size_bytes, why);
            }
    if (rc <= 0 && mpi.rank == 0 && o.json &&
        nr__write_json(&o, &mpi, selected, g_pts, npts, mpi.started, rc, &err) != 0 && rc == NR_OK)
        rc = nr_error_sys(&err, NR_E_IO, "cannot write '%s'", o.json);
    if (x.ring != MPI_COMM_NULL)
        MPI_Comm_free(&x.ring);
    free(x.a), free(x.b), free(x.c);
    for (int i = 0; i < NR_COLL_NTESTS; i++)
        for (size_t k = 0; k < npts[i]; k++)
            free(g_pts[i][k].run_op_s), free(g_pts[i][k].run_iters);
    return nr_mpi_finish(NR__PROG, rc, &err);
}
