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
    CHECK_NEAR(nr_coll_rate_kbps(nr__find("p2p"), m, 2, t), 2 * 1000.0 / t / 1000, 1e-9);    /* 2000 KB/s */
    CHECK_NEAR(nr_coll_rate_kbps(nr__find("bcast"), m, 8, t), 1000.0 * 7 / t / 1000 / 7, 1e-9);
    CHECK_NEAR(nr_coll_total_rate_kbps(nr__find("bcast"), m, 8, t), 7000, 1e-9);
    CHECK_NEAR(nr_coll_rate_kbps(nr__find("bcast_cycled"), m, 8, t), 7000.0 / 3, 1e-9);     /* log2 8 = 3 */
    CHECK_NEAR(nr_coll_rate_kbps(nr__find("reduce"), m, 4, t), 3000.0 / 2, 1e-9);
    CHECK_NEAR(nr_coll_rate_kbps(nr__find("allreduce"), m, 4, t), 6000.0 / 2, 1e-9);
    CHECK_NEAR(nr_coll_rate_kbps(nr__find("gather"), m, 16, t), 15000.0 / 4, 1e-9);
    CHECK_NEAR(nr_coll_rate_kbps(nr__find("allgather"), m, 16, t), 30000.0 / 4, 1e-9);
    CHECK_NEAR(nr_coll_rate_kbps(nr__find("scatter"), m, 2, t), 1000.0, 1e-9);
    CHECK_NEAR(nr_coll_rate_kbps(nr__find("alltoall"), m, 4, t), 1000.0 * 3 * 4 / 4, 1e-9);  /* normalised by p */
    CHECK_NEAR(nr_coll_rate_kbps(nr__find("bcast_gather"), m, 4, t), 6000.0 / 2, 1e-9);
    CHECK_NEAR(nr_coll_rate_kbps(nr__find("scatter_gather"), m, 4, t), 6000.0 / 2, 1e-9);
    CHECK_NEAR(nr_coll_rate_kbps(nr__find("reduce_scatter"), m, 4, t), 3000.0 / 2, 1e-9);
    CHECK_NEAR(nr_coll_rate_kbps(nr__find("right_shift"), m, 4, t), 4000.0 / 4, 1e-9);
    CHECK_NEAR(nr_coll_rate_kbps(nr__find("left_right_shift"), m, 4, t), 8000.0 / 4, 1e-9);
    /* No time, no rate (never a division by zero). */
    CHECK(nr_coll_rate_kbps(nr__find("bcast"), m, 4, 0) == 0);
}

static void table(void)
{
    int numbers[14] = {0};
    for (int i = 0; i < NR_COLL_NTESTS; i++) {
        CHECK(nr_coll_tests[i].number >= 1 && nr_coll_tests[i].number <= 13);
        numbers[nr_coll_tests[i].number]++;
    }
    for (int k = 1; k <= 13; k++)
        CHECK(numbers[k] == (k == 2 ? 2 : 1)); /* all 13 tests; test 2 is the fixed and the cycled broadcast */
    /* The paper capped these at 1 MB. */
    const char *capped[] = {"gather", "allgather", "scatter", "alltoall", "bcast_gather", "scatter_gather"};
    for (size_t i = 0; i < sizeof capped / sizeof *capped; i++)
        CHECK(nr__find(capped[i])->capped);
    CHECK(!nr__find("bcast")->capped && !nr__find("reduce_scatter")->capped);
}

static void selection(void)
{
    int sel[NR_COLL_NTESTS] = {0};
    CHECK(nr_coll_select("2", sel) == 2);
    CHECK(nr_coll_select("2b", sel) == 1);
    CHECK(nr_coll_select("alltoall", sel) == 1);
    CHECK(nr_coll_select("14", sel) == 0);
    CHECK(nr_coll_select("bogus", sel) == 0);
    CHECK(nr_coll_select("", sel) == 0);
}

int main(int argc, char **argv)
{
    static const struct nr_test_case cases[] = {{"formulas", formulas}, {"table", table}, {"selection", selection},
                                                {NULL, NULL}};
    return nr_test_main(cases, argc, argv);
}
