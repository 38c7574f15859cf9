/* Luecke & Coyle's communication tests (seed 003): the table of tests and their data-rate formulas.
 *
 * Every rate is bytes moved per operation over the wall-clock time of one operation, in KBytes/s (KB = 1000
 * bytes, as in the paper; hence kBps in the names), then normalised the way the paper's table for that test is:
 * not at all (point-to-point), by p-1 or by p (normalized rate), or by log2(p) (log-normalized rate). Test 2 has
 * three tables: 2-a fixed root / (p-1), 2-b cycled root / (p-1), 2-c the same cycled-root runs / log2 p (its
 * p = 2 row equals 2-b's). Pure functions, so the formulas are unit-tested with the paper's own numbers.
 */
#ifndef NR_COLL_RATES_H
#define NR_COLL_RATES_H

#include <stddef.h>
#include <stdint.h>

enum nr_coll_volume { /* bytes moved per operation, in units of the message size m = 8n */
    NR_VOL_ONE,       /* m           */
    NR_VOL_PM1,       /* m (p-1)     */
    NR_VOL_P,         /* m p         */
    NR_VOL_PPM1       /* m (p-1) p   */
};
enum nr_coll_norm { NR_NORM_NONE, NR_NORM_PM1, NR_NORM_P, NR_NORM_LOG2P };

enum nr_coll_op {
    NR_OP_P2P, NR_OP_BCAST, NR_OP_BCAST_CYCLED, NR_OP_REDUCE, NR_OP_ALLREDUCE, NR_OP_GATHER, NR_OP_ALLGATHER,
    NR_OP_SCATTER, NR_OP_ALLTOALL, NR_OP_BCAST_GATHER, NR_OP_SCATTER_GATHER, NR_OP_REDUCE_SCATTER,
    NR_OP_RIGHT_SHIFT, NR_OP_LEFT_RIGHT_SHIFT
};

struct nr_coll_test {
    const char *id;        /* the paper's table ("2a", "2b", "2c" are the broadcast tables of test 2) */
    int number;            /* the paper's test number */
    const char *name;      /* option and JSON name */
    const char *routines;  /* MPI routines timed */
    enum nr_coll_op op;
    int directions;        /* 2 when the data crosses the network twice (there and back) */
    enum nr_coll_volume volume;
    enum nr_coll_norm norm;
    int capped;            /* the paper used 1 MB instead of 10 MB (memory): sizes above the cap are capped */
    const char *formula;   /* for the table heading */
};

#define NR_COLL_NTESTS 15
extern const struct nr_coll_test nr_coll_tests[NR_COLL_NTESTS];

/* Total data rate in KB/s: directions * volume(m, p) / t / 1000. */
double nr_coll_total_rate_kBps(const struct nr_coll_test *t, uint64_t msg_bytes, int p, double op_time_s);
/* The paper's (normalised) rate in KB/s for the test. */
double nr_coll_rate_kBps(const struct nr_coll_test *t, uint64_t msg_bytes, int p, double op_time_s);
/* "normalized (p-1)", "log-normalized (log2 p)", ... */
const char *nr_coll_norm_name(enum nr_coll_norm n);
/* Find tests by name, id or number ("bcast", "2b", "2"): marks selected[i]; returns matches (0 = unknown). */
int nr_coll_select(const char *word, int selected[NR_COLL_NTESTS]);

#endif
