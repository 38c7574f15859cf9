/* Unit tests of the rate formulas of Luecke & Coyle's tests (src/mpi/coll_rates.c) on known byte counts and
 * times, and of test selection by name, id and number. */
#include <math.h>

#include "../c/check.h"
#include "coll_rates.h"

static const struct nr_coll_test *nr__find(const char *name)
{
    for (int i = 0; i < NR_COLL_NTESTS; i++)
        if (!strcmp(nr_coll_tests[i].name, name))
            return &nr_coll_tests[i];
    return NULL;
}

static void formulas(void)
{
    /* 1 KB message (n = 125 reals), 1 ms per operation. */
    const uint64_t m = 1000;
    const double t = 1e-3;
    CHECK_NEAR(nr_coll_rate_kBps(nr__find("p2p"), m, 2, t), 2 * 1000.0 / t / 1000, 1e-9);    /* 2000 KB/s */
    CHECK_NEAR(nr_coll_rate_kBps(nr__find("bcast"), m, 8, t), 1000.0 * 7 / t / 1000 / 7, 1e-9);
    CHECK_NEAR(nr_coll_total_rate_kBps(nr__find("bcast"), m, 8, t), 7000, 1e-9);
    CHECK_NEAR(nr_coll_rate_kBps(nr__find("bcast_cycled"), m, 8, t), 7000.0 / 7, 1e-9);     /* table 2-b: p-1 */
    CHECK_NEAR(nr_coll_rate_kBps(nr__find("bcast_cycled_log"), m, 8, t), 7000.0 / 3, 1e-9); /* 2-c: log2 8 = 3 */
    CHECK_NEAR(nr_coll_rate_kBps(nr__find("reduce"), m, 4, t), 3000.0 / 2, 1e-9);
    CHECK_NEAR(nr_coll_rate_kBps(nr__find("allreduce"), m, 4, t), 6000.0 / 2, 1e-9);
    CHECK_NEAR(nr_coll_rate_kBps(nr__find("gather"), m, 16, t), 15000.0 / 4, 1e-9);
    CHECK_NEAR(nr_coll_rate_kBps(nr__find("allgather"), m, 16, t), 30000.0 / 4, 1e-9);
    CHECK_NEAR(nr_coll_rate_kBps(nr__find("scatter"), m, 2, t), 1000.0, 1e-9);
    CHECK_NEAR(nr_coll_rate_kBps(nr__find("alltoall"), m, 4, t), 1000.0 * 3 * 4 / 4, 1e-9);  /* normalised by p */
    CHECK_NEAR(nr_coll_rate_kBps(nr__find("bcast_gather"), m, 4, t), 6000.0 / 2, 1e-9);
    CHECK_NEAR(nr_coll_rate_kBps(nr__find("scatter_gather"), m, 4, t), 6000.0 / 2, 1e-9);
    CHECK_NEAR(nr_coll_rate_kBps(nr__find("reduce_scatter"), m, 4, t), 3000.0 / 2, 1e-9);
    CHECK_NEAR(nr_coll_rate_kBps(nr__find("right_shift"), m, 4, t), 4000.0 / 4, 1e-9);
    CHECK_NEAR(nr_coll_rate_kBps(nr__find("left_right_shift"), m, 4, t), 8000.0 / 4, 1e-9);
    /* No time, no rate (never a division by zero). */
    CHECK(nr_coll_rate_kBps(nr__find("bcast"), m, 4, 0) == 0);
}

/* The paper's own numbers (seed 003, T3E-900 column, 1 KB messages on 8 processors, 3 significant digits). For
 * each table the time per operation is recovered from the paper's text formula for that test, written out here
 * independently of coll_rates.c; the kernel's formula must then give the table's number back. A formula that
 * counts the wrong volume or normalises differently from the table (as 2-b did: log2 p instead of p-1) fails. */
static void paper(void)
{
    const double m = 1000, p = 8, kb = 1000, l2 = 3; /* log2 8 */
    struct {
        const char *name;
        double table_kBps;   /* the paper's table entry */
        double text_bytes;   /* bytes per operation in the paper's text formula */
        double text_norm;    /* the divisor the table's heading names */
    } rows[] = {
        {"p2p", 30100, 2 * m, 1},                         /* table 1: 2*8n/t (t = round trip) */
        {"bcast", 19100, m * (p - 1), p - 1},             /* 2-a: 8n(p-1)/t / (p-1), fixed root */
        {"bcast_cycled", 18400, m * (p - 1), p - 1},      /* 2-b: 8n(p-1)/t / (p-1), root cycled */
        {"bcast_cycled_log", 43000, m * (p - 1), l2},     /* 2-c: 8n(p-1)/t / log2 p, root cycled */
        {"reduce", 25000, m * (p - 1), l2},               /* 3 */
        {"allreduce", 44700, 2 * m * (p - 1), l2},        /* 4: 2*[8n(p-1)]/t / log2 p */
        {"gather", 19900, m * (p - 1), l2},               /* 5 */
        {"allgather", 27200, 2 * m * (p - 1), l2},        /* 6 */
        {"scatter", 25500, m * (p - 1), l2},              /* 7 */
        {"alltoall", 36900, m * (p - 1) * p, p},          /* 8: 8n(p-1)p/t / p */
        {"bcast_gather", 32100, 2 * m * (p - 1), l2},     /* 9 */
        {"scatter_gather", 21900, 2 * m * (p - 1), l2},   /* 10 */
        {"reduce_scatter", 15600, m * (p - 1), l2},       /* 11 */
        {"right_shift", 28100, m * p, p},                 /* 12: 8np/t / p */
        {"left_right_shift", 28500, 2 * m * p, p},        /* 13: 2*8np/t / p */
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        const struct nr_coll_test *t = nr__find(rows[i].name);
        CHECK(t != NULL);
        if (!t)
            continue;
        double op_s = rows[i].text_bytes / (rows[i].table_kBps * kb * rows[i].text_norm);
        double got = nr_coll_rate_kBps(t, (uint64_t)m, (int)p, op_s);
        if (fabs(got - rows[i].table_kBps) > 1e-9 * rows[i].table_kBps)
            fprintf(stderr, "test %s (%s): %.1f KB/s, the paper's table says %.0f\n", t->id, t->name, got,
                    rows[i].table_kBps);
        CHECK_NEAR(got, rows[i].table_kBps, 1e-9 * rows[i].table_kBps);
    }
    /* Tables 2-b and 2-c are the same cycled-root runs normalised two ways (equal at p = 2: 637, 178, 415 in
     * both, 545 in 2-a): 2-b's time per operation must give 2-c's entries within the paper's rounding. */
    struct { double p, b, c; } cyc[] = {{4, 387, 580}, {8, 287, 669}, {16, 247, 926}, {32, 211, 1310}};
    for (size_t i = 0; i < sizeof cyc / sizeof *cyc; i++) {
        double op_s = 8 * (cyc[i].p - 1) / (cyc[i].b * kb * (cyc[i].p - 1)); /* 8-byte message, table 2-b */
        CHECK_NEAR(nr_coll_rate_kBps(nr__find("bcast_cycled"), 8, (int)cyc[i].p, op_s), cyc[i].b, 1e-9 * cyc[i].b);
        double c = nr_coll_rate_kBps(nr__find("bcast_cycled_log"), 8, (int)cyc[i].p, op_s);
        CHECK(fabs(c - cyc[i].c) <= 0.005 * cyc[i].c);
    }
    CHECK(nr__find("bcast_cycled_log") && nr__find("bcast_cycled_log")->op == NR_OP_BCAST_CYCLED);
}

static void table(void)
{
    int numbers[14] = {0};
    for (int i = 0; i < NR_COLL_NTESTS; i++) {
        CHECK(nr_coll_tests[i].number >= 1 && nr_coll_tests[i].number <= 13);
        numbers[nr_coll_tests[i].number]++;
    }
    for (int k = 1; k <= 13; k++)
        CHECK(numbers[k] == (k == 2 ? 3 : 1)); /* all 13 tests; test 2 is tables 2-a, 2-b and 2-c */
    /* The paper capped these at 1 MB. */
    const char *capped[] = {"gather", "allgather", "scatter", "alltoall", "bcast_gather", "scatter_gather"};
    for (size_t i = 0; i < sizeof capped / sizeof *capped; i++)
        CHECK(nr__find(capped[i])->capped);
    CHECK(!nr__find("bcast")->capped && !nr__find("reduce_scatter")->capped);
}

static void selection(void)
{
    int sel[NR_COLL_NTESTS] = {0};
    CHECK(nr_coll_select("2", sel) == 3);
    CHECK(nr_coll_select("2c", sel) == 1);
    CHECK(nr_coll_select("2b", sel) == 1);
    CHECK(nr_coll_select("alltoall", sel) == 1);
    CHECK(nr_coll_select("14", sel) == 0);
    CHECK(nr_coll_select("bogus", sel) == 0);
    CHECK(nr_coll_select("", sel) == 0);
}

int main(int argc, char **argv)
{
    static const struct nr_test_case cases[] = {{"formulas", formulas}, {"table", table}, {"selection", selection},
                                                {"paper", paper}, {NULL, NULL}};
    return nr_test_main(cases, argc, argv);
}
