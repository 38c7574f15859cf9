/* nr-ebb: effective bisection bandwidth (Netgauge's ebb pattern, seed 001) on an even number of ranks.
 *
 * Each round rank 0 draws a random bisection pairing of all ranks (a random permutation read as consecutive
 * pairs; xorshift64* seeded by --seed, printed so a run can be repeated) and broadcasts it. Every pair first
 * exchanges one untimed message (the warm-up: connection set-up between ranks that have not met yet), then after a
 * barrier every rank times a block of -n back-to-back exchanges (MPI_Sendrecv of SIZE bytes each way) with its
 * partner, all pairs at once: one connection sample per rank, P per round. Timing a block rather than one
 * exchange is what Netgauge does: a single small exchange is dominated by barrier-exit skew and the timer's
 * resolution. The figures are the seed's: bandwidth = SIZE x exchanges / block time, printed in bytes per
 * microsecond under the seed's label "MiB/s" (seed 001: 1048576 x 20 / 65525.545 us = 320.05); the JSON gives the
 * same figure as bandwidth_mb_per_s and in true MiB/s as bandwidth_mibps. Per-round lines give the average block
 * time over the P ranks; the bucket statistics (-b) count the P x ROUNDS block times in equal-width buckets; the
 * last line is the effective bisection bandwidth (over the average block time). The JSON records every round's
 * pairs with both ranks' times and every rank's host, so a slow link can be located. --relative also times a
 * lone pair (ranks 0 and P/2, the other ranks idle) and prints the ratio. With -r MIN:MAX the rounds of a size stop
 * once the median of the rounds' bandwidths is known to --precision (nr/repeat.h; rank 0 decides, every rank
 * follows), else at MAX.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nr_mpi.h"

#define NR__PROG "nr-ebb"
#define NR__MIB (1024.0 * 1024.0)
#define NR__TAG 7
#define NR__REPS_DEFAULT 20 /* exchanges per round: the seed's figures are size x 20 / time */

struct nr__opts {
    struct nr_size_list sizes; /* -s MIN-MAX */
    struct nr_repeat rounds;   /* -r N | MIN:MAX, --precision */
    int reps;                  /* -n: exchanges per round and connection */
    int buckets;               /* -b */
    uint64_t seed;             /* --seed */
    int relative;              /* --relative */
    const char *json;          /* --json */
    double deadline_s;         /* --deadline: seconds a round may last (0: from the planned bytes) */
};

/* A round's deadline unless --deadline: its exchanges at NR__FLOOR_BPS per pair, ten times over, and half a minute
 * for the connections a first exchange may set up. */
#define NR__FLOOR_BPS 1e6
static double g_budget;

struct nr__size_result {
    uint64_t size_bytes;
    double *conn_us;      /* rounds x P block times, rank order within a round (rank 0) */
    int *perm;            /* rounds x P: the round's permutation, pairs (perm[2k], perm[2k+1]) (rank 0) */
    double *round_avg_us;
    double *round_bw;     /* each round's bandwidth: what the repetition rule reads (rank 0) */
    int rounds;           /* rounds run */
    struct nr_repeat rule; /* how many rounds ran and why they stopped (rank 0's decision) */
    double lone_us;       /* --relative: average lone-pair block time */
};

static uint64_t nr__rand(uint64_t *s)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

/* Bytes per microsecond: the number Netgauge prints (with the label MiB/s); equal to MB/s with MB = 10^6. */
static double nr__seed_bw(uint64_t bytes, int reps, double us)
{
    return us > 0 ? (double)bytes * reps / us : 0;
}

/* MiB/s (2^20 bytes per second). */
static double nr__mibps(uint64_t bytes, int reps, double us)
{
    return nr__seed_bw(bytes, reps, us) * 1e6 / NR__MIB;
}

/* Time `reps` exchanges of `bytes` with `partner` (nothing when partner < 0): one untimed exchange first, then a
 * barrier so every pair starts together. The outcome is agreed on by all ranks. A barrier that reports an error
 * still synchronised: the block runs anyway, so no partner is left waiting, and the error is agreed on after. */
static int nr__exchange(const struct nr__opts *o, const struct nr_mpi *m, char *sbuf, char *rbuf, uint64_t bytes,
                        int partner, double *us, struct nr_error *err)
{
    const int n = (int)bytes;
    int rc = MPI_SUCCESS;
    char phase[96];
    snprintf(phase, sizeof phase, "a round of %d %llu-byte exchanges%s", o->reps, (unsigned long long)bytes,
             partner >= 0 ? "" : " (this rank idle)");
    nr_mpi_watch(phase, g_budget);
    if (partner >= 0)
        rc = MPI_Sendrecv(sbuf, n, MPI_BYTE, partner, NR__TAG, rbuf, n, MPI_BYTE, partner, NR__TAG, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE);
    if ((rc = nr_mpi_agree(nr_mpi_check(rc, "MPI_Sendrecv (warm-up)", err), err)) < 0)
        return rc;
    int brc = MPI_Barrier(MPI_COMM_WORLD), k = 0;
    double t0 = MPI_Wtime();
    for (; k < o->reps && partner >= 0 && rc == MPI_SUCCESS; k++)
        rc = MPI_Sendrecv(sbuf, n, MPI_BYTE, partner, NR__TAG, rbuf, n, MPI_BYTE, partner, NR__TAG, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE);
    *us = (MPI_Wtime() - t0) * 1e6;
    if (rc != MPI_SUCCESS) {
        /* The partner is still inside its block of exchanges: no agreement can be reached, end every rank. */
        char what[128];
        snprintf(what, sizeof what, "MPI_Sendrecv with rank %d (exchange %d of %d, %llu bytes)", partner, k, o->reps,
                 (unsigned long long)bytes);
        nr_mpi_check(rc, what, err);
        nr_mpi_fail_loop(m, err);
    }
    return nr_mpi_agree(nr_mpi_check(brc, "MPI_Barrier", err), err);
}

/* Rank 0: the round's random bisection (Fisher-Yates on the identity). */
static void nr__draw(uint64_t *rng, int *perm, int p)
{
    for (int i = 0; i < p; i++)
        perm[i] = i;
    for (int i = p - 1; i > 0; i--) {
        int j = (int)(nr__rand(rng) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
}

static int nr__run_size(const struct nr__opts *o, const struct nr_mpi *m, uint64_t *rng, char *sbuf, char *rbuf,
                        struct nr__size_result *res, struct nr_error *err)
{
    const int p = m->size;
    int *perm = malloc(sizeof *perm * (size_t)p);
    double *mine_all = m->rank == 0 ? malloc(sizeof(double) * (size_t)p) : NULL;
    int rc = perm && (m->rank || mine_all) ? NR_OK : nr_error_set(err, NR_E_NOMEM, "out of memory");
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        goto out;
    res->rule = o->rounds;
    for (int r = 0, more = 1; more; r++) {
        if (m->rank == 0)
            nr__draw(rng, perm, p);
        rc = nr_mpi_check(MPI_Bcast(perm, p, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast (pairing)", err);
        if ((rc = nr_mpi_agree(rc, err)) < 0)
            goto out;
        int partner = -1;
        for (int i = 0; i < p; i += 2) {
            if (perm[i] == m->rank)
                partner = perm[i + 1];
            else if (perm[i + 1] == m->rank)
                partner = perm[i];
        }
        double us;
        if ((rc = nr__exchange(o, m, sbuf, rbuf, res->size_bytes, partner, &us, err)) < 0)
            goto out;
        rc = nr_mpi_check(MPI_Gather(&us, 1, MPI_DOUBLE, mine_all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD),
                          "MPI_Gather (times)", err);
        if ((rc = nr_mpi_agree(rc, err)) < 0)
            goto out;
        if (m->rank == 0) {
            double sum = 0;
            for (int i = 0; i < p; i++) {
                sum += mine_all[i];
                res->conn_us[(size_t)r * (size_t)p + (size_t)i] = mine_all[i];
                res->perm[(size_t)r * (size_t)p + (size_t)i] = perm[i];
            }
            res->round_avg_us[r] = sum / p;
            res->round_bw[r] = nr__seed_bw(res->size_bytes, o->reps, res->round_avg_us[r]);
            printf("size: %llu, round %d: num: %d average: %f us (%f MiB/s)\n", (unsigned long long)res->size_bytes,
                   r, p, res->round_avg_us[r], res->round_bw[r]);
            fflush(stdout);
            more = nr_repeat_more(&res->rule, res->round_bw, (size_t)r + 1);
        }
        res->rounds = r + 1;
        /* rank 0 decides whether another round follows, and every rank follows */
        rc = nr_mpi_check(MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast (another round)", err);
        if ((rc = nr_mpi_agree(rc, err)) < 0)
            goto out;
    }
    if (o->relative) {
        /* The lone pair: ranks 0 and P/2 (different nodes under block placement), everyone else idle. */
        double sum = 0, us;
        int partner = m->rank == 0 ? p / 2 : m->rank == p / 2 ? 0 : -1;
        for (int r = 0; r < res->rounds; r++) {
            if ((rc = nr__exchange(o, m, sbuf, rbuf, res->size_bytes, partner, &us, err)) < 0)
                goto out;
            sum += us;
        }
        res->lone_us = sum / res->rounds;
    }
out:
    free(perm);
    free(mine_all);
    return rc;
}

static void nr__report(const struct nr__opts *o, int p, const struct nr__size_result *res)
{
    size_t n = (size_t)p * (size_t)res->rounds;
    double lower[1024];
    uint64_t count[1024];
    char line[192];
    if (nr_repeat_sequential(&o->rounds))
        printf("# Info: (0): size %llu: rounds %s\n", (unsigned long long)res->size_bytes,
               nr_repeat_describe(&res->rule, line, sizeof line));
    printf("# Info: (0): ---- bucket data ----\n");
    if (nr_buckets_compute(res->conn_us, n, (size_t)o->buckets, lower, count) == 0)
        for (int b = 0; b < o->buckets; b++)
            printf("size: %llu %f (%f MiB/s): %llu\n", (unsigned long long)res->size_bytes, lower[b],
                   nr__seed_bw(res->size_bytes, o->reps, lower[b]), (unsigned long long)count[b]);
    struct nr_stats s;
    nr_stats_compute(res->conn_us, n, &s);
    printf("size: %llu num: %zu average: %f (%f MiB/s)\n", (unsigned long long)res->size_bytes, n, s.avg,
           nr__seed_bw(res->size_bytes, o->reps, s.avg));
    if (o->relative)
        printf("size: %llu lone pair: %f us (%f MiB/s) relative effective bisection bandwidth: %.4f\n",
               (unsigned long long)res->size_bytes, res->lone_us, nr__seed_bw(res->size_bytes, o->reps, res->lone_us),
               res->lone_us > 0 ? res->lone_us / s.avg : 0);
    fflush(stdout);
}

/* Both seed units of a block time: bandwidth_mb_per_s (bytes/us, the figure the seed prints) and MiB/s. */
static void nr__json_bw(struct nr_json *j, const struct nr__opts *o, uint64_t bytes, double us)
{
    nr_json_kv_double(j, "bandwidth_mb_per_s", nr__seed_bw(bytes, o->reps, us));
    nr_json_kv_double(j, "bandwidth_mibps", nr__mibps(bytes, o->reps, us));
}

/* rounds: [{round, average_us, bandwidth..., pairs: [{ranks: [a, b], time_us: [ta, tb]}, ...]}, ...] */
static void nr__json_rounds(struct nr_json *j, const struct nr__opts *o, int p, const struct nr__size_result *r)
{
    nr_json_key(j, "rounds");
    nr_json_begin_array(j);
    for (int i = 0; i < r->rounds; i++) {
        const int *perm = r->perm + (size_t)i * (size_t)p;
        const double *us = r->conn_us + (size_t)i * (size_t)p;
        nr_json_begin_object(j);
        nr_json_kv_int(j, "round", i);
        nr_json_kv_double(j, "average_us", r->round_avg_us[i]);
        nr__json_bw(j, o, r->size_bytes, r->round_avg_us[i]);
        nr_json_key(j, "pairs");
        nr_json_begin_array(j);
        for (int k = 0; k + 1 < p; k += 2) {
            nr_json_begin_object(j);
            nr_json_key(j, "ranks");
            nr_json_begin_array(j);
            nr_json_int(j, perm[k]);
            nr_json_int(j, perm[k + 1]);
            nr_json_end_array(j);
            nr_json_key(j, "time_us");
            nr_json_begin_array(j);
            nr_json_double(j, us[perm[k]]);
            nr_json_double(j, us[perm[k + 1]]);
            nr_json_end_array(j);
            nr_json_end_object(j);
        }
        nr_json_end_array(j);
        nr_json_end_object(j);
    }
    nr_json_end_array(j);
}

static int nr__write_json(const struct nr__opts *o, const struct nr_mpi *m, char (*hosts)[NR_HOST_MAX],
                          const struct nr__size_result *res, size_t nres, time_t started, int status,
                          const struct nr_error *failure)
{
    struct nr_json j;
    FILE *f = nr_mpi_json_begin(&j, o->json, NR__PROG, "ebb", started, status, failure);
    if (!f)
        return -1;
    if (hosts) {
        nr_json_key(&j, "hosts"); /* every rank's host, in rank order: where the ranks of a pair ran */
        nr_json_begin_array(&j);
        for (int i = 0; i < m->size; i++)
            nr_json_string(&j, hosts[i]);
        nr_json_end_array(&j);
    }
    nr_json_key(&j, "options");
    nr_json_begin_object(&j);
    nr_json_kv_int(&j, "processes", m->size);
    nr_json_kv_int(&j, "rounds", o->rounds.max);
    nr_json_kv_int(&j, "rounds_min", o->rounds.min);
    nr_json_kv_int(&j, "exchanges_per_round", o->reps);
    nr_json_kv_int(&j, "buckets", o->buckets);
    nr_json_kv_uint(&j, "seed", o->seed);
    nr_json_kv_bool(&j, "relative", o->relative);
    nr_json_end_object(&j);
    size_t most = (size_t)m->size * (size_t)o->rounds.max;
    double *mbps = malloc(sizeof(double) * (most ? most : 1));
    uint64_t payload = 0;
    nr_json_key(&j, "sizes");
    nr_json_begin_array(&j);
    for (size_t k = 0; k < nres && mbps; k++) {
        const struct nr__size_result *r = &res[k];
        const size_t n = (size_t)m->size * (size_t)r->rounds;
        struct nr_stats s;
        nr_stats_compute(r->conn_us, n, &s);
        payload += r->size_bytes * (uint64_t)o->reps * n;
        nr_json_begin_object(&j);
        nr_json_kv_uint(&j, "size_bytes", r->size_bytes);
        nr_json_kv_uint(&j, "connections", n);
        nr_json_kv_int(&j, "rounds_run", r->rounds);
        nr_json_kv_int(&j, "exchanges_per_round", o->reps);
        nr_repeat_json(&j, &r->rule);
        double avg_us = s.avg; /* s is reused for the bandwidth statistics below */
        nr_json_kv_double(&j, "average_us", avg_us);
        nr__json_bw(&j, o, r->size_bytes, avg_us);
        nr__json_rounds(&j, o, m->size, r);
        double lower[1024];
        uint64_t count[1024];
        nr_json_key(&j, "buckets");
        nr_json_begin_array(&j);
        if (nr_buckets_compute(r->conn_us, n, (size_t)o->buckets, lower, count) == 0)
            for (int b = 0; b < o->buckets; b++) {
                nr_json_begin_object(&j);
                nr_json_kv_double(&j, "lower_us", lower[b]);
                nr__json_bw(&j, o, r->size_bytes, lower[b]);
                nr_json_kv_uint(&j, "count", count[b]);
                nr_json_end_object(&j);
            }
        nr_json_end_array(&j);
        for (size_t i = 0; i < n; i++)
            mbps[i] = nr__seed_bw(r->size_bytes, o->reps, r->conn_us[i]) * 8;
        nr_stats_compute(mbps, n, &s);
        nr_json_kv_stats(&j, "connection_bandwidth_mbps", &s);
        if (o->relative) {
            nr_json_kv_double(&j, "lone_pair_us", r->lone_us);
            /* bandwidth ratio ebb / lone pair = lone-pair time / average connection time */
            nr_json_kv_double(&j, "relative_ebb", r->lone_us > 0 && avg_us > 0 ? r->lone_us / avg_us : 0);
        }
        nr_json_end_object(&j);
    }
    nr_json_end_array(&j);
    /* The summary is the largest size's: what the checks compare with references. */
    if (nres && mbps) {
        const struct nr__size_result *r = &res[nres - 1];
        const size_t n = (size_t)m->size * (size_t)r->rounds;
        struct nr_stats s;
        for (size_t i = 0; i < n; i++)
            mbps[i] = nr__seed_bw(r->size_bytes, o->reps, r->conn_us[i]) * 8;
        nr_stats_compute(mbps, n, &s);
        nr_json_key(&j, "summary");
        nr_json_begin_object(&j);
        nr_json_kv_stats(&j, "bandwidth_mbps", &s);
        nr_json_end_object(&j);
    }
    /* Bytes every rank sent in the timed blocks (each direction once; warm-up and lone pair not counted). */
    nr_json_kv_uint(&j, "payload_bytes", payload);
    free(mbps);
    return nr_mpi_json_end(&j, f);
}

int main(int argc, char **argv)
{
    struct nr_error err = {0};
    struct nr_mpi mpi;
    struct nr__opts o = {.rounds = {.min = 10, .max = 10}, .reps = NR__REPS_DEFAULT, .buckets = 1, .seed = 0};
    o.sizes.n = 1, o.sizes.bytes[0] = 1048576;
    const struct nr_opt opts[] = {
        {NR_OPT_SIZE_LIST, 's', "sizes", &o.sizes, "MIN-MAX", "message sizes (a range doubles from MIN to MAX)", 1, (double)INT32_MAX, NULL, "1048576"},
        {NR_OPT_CALL, 'r', "rounds", &o.rounds, "N|MIN:MAX", "random bisection patterns per size: N, or from MIN to MAX until the median round is known to --precision", 1, 1000000, nr_repeat_parse_opt, "10"},
        {NR_OPT_DOUBLE, 0, "precision", &o.rounds.precision, "FRACTION", "with -r MIN:MAX: stop once the median's 90 % interval is within FRACTION of it", 0.0001, 0.5, NULL, "0.025"},
        {NR_OPT_INT, 'n', "exchanges", &o.reps, "N", "timed back-to-back exchanges per round and pair", 1, 1000000, NULL, NULL},
        {NR_OPT_INT, 'b', "buckets", &o.buckets, "N", "bucket statistics of the connection times", 1, 1024, NULL, NULL},
        {NR_OPT_SIZE, 0, "seed", &o.seed, "N", "random seed (0: from the clock; printed either way)", 0, 0, NULL, "0"},
        {NR_OPT_FLAG, 0, "relative", &o.relative, NULL, "also time a lone pair: relative effective bisection bandwidth", 0, 0, NULL, NULL},
        {NR_OPT_DOUBLE, 0, "deadline", &o.deadline_s, "SECONDS", "a round not done by then fails the job, naming the ranks that did not answer", 0, 86400, NULL, "30 + 10 x its bytes at 1 MB/s"},
        {NR_OPT_STRING, 0, "json", &o.json, "FILE", "machine-readable results (docs/mpi.md)", 0, 0, NULL, NULL},
        {NR_OPT_END, 0, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL},
    };
    const struct nr_opt_set set = {NR__PROG, "[OPTIONS]",
                                   "Effective bisection bandwidth: random bisection pairings exchange messages at "
                                   "once (Netgauge's ebb pattern). Needs an even number of ranks.",
                                   opts, "Example:\n  mpirun -np 8 nr-ebb -s 1048576-1048576 -r 10 -b 5    (20 exchanges per round)\n"};
    struct nr__size_result res[NR_SIZE_LIST_MAX];
    size_t nres = 0;
    char *sbuf = NULL, *rbuf = NULL;
    char (*hosts)[NR_HOST_MAX] = NULL;
    int rc = nr_mpi_start(&argc, &argv, &set, &o.json, "ebb", &mpi, &err);
    if (rc == NR_OK)
        rc = nr_mpi_agree(nr_repeat_check(&o.rounds, "-r/--rounds", "--precision", &err), &err);
    if (rc == NR_OK) {
        uint64_t largest = 0;
        for (size_t i = 0; i < o.sizes.n; i++)
            largest = o.sizes.bytes[i] > largest ? o.sizes.bytes[i] : largest;
        if (mpi.size < 2 || mpi.size % 2)
            rc = nr_error_set(&err, NR_E_USAGE, "needs an even number of MPI ranks (pairs), got %d", mpi.size);
        else if (2 * largest > nr_mpi_memory_budget(&mpi))
            rc = nr_error_set(&err, NR_E_RANGE, "size %llu needs more memory than this node allows a rank",
                              (unsigned long long)largest);
        else if (!(sbuf = malloc(largest)) || !(rbuf = malloc(largest)) ||
                 !(hosts = calloc((size_t)mpi.size, sizeof *hosts)))
            rc = nr_error_set(&err, NR_E_NOMEM, "cannot allocate 2 x %llu bytes", (unsigned long long)largest);
        if (rc == NR_OK) { /* written before anything runs: no shared zero page in any transfer */
            nr_buffer_fill(sbuf, largest, (uint32_t)mpi.rank);
            nr_buffer_fill(rbuf, largest, (uint32_t)mpi.rank + 1000u);
        }
        rc = nr_mpi_agree(rc, &err);
        g_budget = o.deadline_s > 0 ? o.deadline_s : 30 + 10 * 2.0 * (double)largest * o.reps / NR__FLOOR_BPS;
        if (rc == NR_OK)
            rc = nr_mpi_watch_start(&mpi, g_budget, "start-up (host names, the seed)", &err);
    }
    if (rc == NR_OK) {
        rc = nr_mpi_check(MPI_Allgather(mpi.host, NR_HOST_MAX, MPI_CHAR, hosts, NR_HOST_MAX, MPI_CHAR, MPI_COMM_WORLD),
                          "MPI_Allgather (host names)", &err);
        rc = nr_mpi_agree(rc, &err);
    }
    if (rc == NR_OK) {
        if (o.seed == 0)
            o.seed = nr_now_ns() | 1;
        rc = nr_mpi_check(MPI_Bcast(&o.seed, 1, NR_MPI_UINT64, 0, MPI_COMM_WORLD), "MPI_Bcast (seed)", &err);
        rc = nr_mpi_agree(rc, &err);
        if (rc == NR_OK && mpi.rank == 0) {
            char rounds[32];
            snprintf(rounds, sizeof rounds, nr_repeat_sequential(&o.rounds) ? "%d..%d" : "%d", o.rounds.min,
                     o.rounds.max);
            printf("# Info: (0): nr-ebb %s (P=%d) seed %llu, %s rounds of %d exchanges, %d buckets\n", nr_version(),
                   mpi.size, (unsigned long long)o.seed, rounds, o.reps, o.buckets);
            fflush(stdout);
        }
    }
    uint64_t rng = o.seed;
    for (size_t i = 0; rc == NR_OK && i < o.sizes.n; i++) {
        struct nr__size_result *r = &res[nres];
        memset(r, 0, sizeof *r);
        r->size_bytes = o.sizes.bytes[i];
        if (mpi.rank == 0) {
            r->conn_us = calloc((size_t)mpi.size * (size_t)o.rounds.max, sizeof(double));
            r->perm = calloc((size_t)mpi.size * (size_t)o.rounds.max, sizeof(int));
            r->round_avg_us = calloc((size_t)o.rounds.max, sizeof(double));
            r->round_bw = calloc((size_t)o.rounds.max, sizeof(double));
        }
        rc = mpi.rank == 0 && (!r->conn_us || !r->perm || !r->round_avg_us || !r->round_bw)
                 ? nr_error_set(&err, NR_E_NOMEM, "out of memory")
                 : NR_OK;
        nres++;
        if ((rc = nr_mpi_agree(rc, &err)) == NR_OK)
            rc = nr__run_size(&o, &mpi, &rng, sbuf, rbuf, r, &err);
        if (rc == NR_OK && mpi.rank == 0)
            nr__report(&o, mpi.size, r);
    }
    if (rc <= 0 && mpi.rank == 0 && o.json &&
        nr__write_json(&o, &mpi, hosts, res, rc == NR_OK ? nres : 0, mpi.started, rc, &err) != 0 && rc == NR_OK)
        rc = nr_error_sys(&err, NR_E_IO, "cannot write '%s'", o.json);
    for (size_t i = 0; i < nres; i++)
        free(res[i].conn_us), free(res[i].perm), free(res[i].round_avg_us), free(res[i].round_bw);
    free(sbuf), free(rbuf), free(hosts);
    return nr_mpi_finish(NR__PROG, rc, &err);
}
