/* The test table and rate formulas of seed 003: see coll_rates.h. */
#include "coll_rates.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const struct nr_coll_test nr_coll_tests[NR_COLL_NTESTS] = {
    {"1", 1, "p2p", "mpi_send/mpi_recv", NR_OP_P2P, 2, NR_VOL_ONE, NR_NORM_NONE, 0, "2*8n/t"},
    {"2a", 2, "bcast", "mpi_bcast (fixed root)", NR_OP_BCAST, 1, NR_VOL_PM1, NR_NORM_PM1, 0, "8n(p-1)/t/(p-1)"},
    {"2b", 2, "bcast_cycled", "mpi_bcast (root cycled)", NR_OP_BCAST_CYCLED, 1, NR_VOL_PM1, NR_NORM_PM1, 0,
     "8n(p-1)/t/(p-1)"},
    {"2c", 2, "bcast_cycled_log", "mpi_bcast (root cycled)", NR_OP_BCAST_CYCLED, 1, NR_VOL_PM1, NR_NORM_LOG2P, 0,
     "8n(p-1)/t/log2(p)"},
    {"3", 3, "reduce", "mpi_reduce (sum)", NR_OP_REDUCE, 1, NR_VOL_PM1, NR_NORM_LOG2P, 0, "8n(p-1)/t/log2(p)"},
    {"4", 4, "allreduce", "mpi_allreduce (sum)", NR_OP_ALLREDUCE, 2, NR_VOL_PM1, NR_NORM_LOG2P, 0,
     "2*8n(p-1)/t/log2(p)"},
    {"5", 5, "gather", "mpi_gather", NR_OP_GATHER, 1, NR_VOL_PM1, NR_NORM_LOG2P, 1, "8n(p-1)/t/log2(p)"},
    {"6", 6, "allgather", "mpi_allgather", NR_OP_ALLGATHER, 2, NR_VOL_PM1, NR_NORM_LOG2P, 1, "2*8n(p-1)/t/log2(p)"},
    {"7", 7, "scatter", "mpi_scatter", NR_OP_SCATTER, 1, NR_VOL_PM1, NR_NORM_LOG2P, 1, "8n(p-1)/t/log2(p)"},
    {"8", 8, "alltoall", "mpi_alltoall", NR_OP_ALLTOALL, 1, NR_VOL_PPM1, NR_NORM_P, 1, "8n(p-1)p/t/p"},
    {"9", 9, "bcast_gather", "mpi_bcast + mpi_gather", NR_OP_BCAST_GATHER, 2, NR_VOL_PM1, NR_NORM_LOG2P, 1,
     "2*8n(p-1)/t/log2(p)"},
    {"10", 10, "scatter_gather", "mpi_scatter + mpi_gather", NR_OP_SCATTER_GATHER, 2, NR_VOL_PM1, NR_NORM_LOG2P, 1,
     "2*8n(p-1)/t/log2(p)"},
    {"11", 11, "reduce_scatter", "mpi_reduce_scatter (sum)", NR_OP_REDUCE_SCATTER, 1, NR_VOL_PM1, NR_NORM_LOG2P, 0,
     "8n(p-1)/t/log2(p)"},
    {"12", 12, "right_shift", "mpi_cart_shift + mpi_sendrecv", NR_OP_RIGHT_SHIFT, 1, NR_VOL_P, NR_NORM_P, 0,
     "8np/t/p"},
    {"13", 13, "left_right_shift", "mpi_cart_shift + 2 mpi_sendrecv", NR_OP_LEFT_RIGHT_SHIFT, 2, NR_VOL_P,
     NR_NORM_P, 0, "2*8np/t/p"},
};

double nr_coll_total_rate_kBps(const struct nr_coll_test *t, uint64_t msg_bytes, int p, double op_time_s)
{
    if (op_time_s <= 0 || p < 1)
        return 0;
    double m = (double)msg_bytes, volume = m;
    switch (t->volume) {
    case NR_VOL_ONE: volume = m; break;
    case NR_VOL_PM1: volume = m * (p - 1); break;
    case NR_VOL_P: volume = m * p; break;
    case NR_VOL_PPM1: volume = m * (p - 1) * p; break;
    }
    return t->directions * volume / op_time_s / 1000.0;
}

double nr_coll_rate_kBps(const struct nr_coll_test *t, uint64_t msg_bytes, int p, double op_time_s)
{
    double total = nr_coll_total_rate_kBps(t, msg_bytes, p, op_time_s);
    switch (t->norm) {
    case NR_NORM_NONE: return total;
    case NR_NORM_PM1: return p > 1 ? total / (p - 1) : 0;
    case NR_NORM_P: return total / p;
    case NR_NORM_LOG2P: return p > 1 ? total / log2((double)p) : 0;
    }
    return total;
}

const char *nr_coll_norm_name(enum nr_coll_norm n)
{
    switch (n) {
    case NR_NORM_NONE: return "rate";
    case NR_NORM_PM1: return "normalized rate (p-1)";
    case NR_NORM_P: return "normalized rate (p)";
    case NR_NORM_LOG2P: return "log-normalized rate (log2 p)";
    }
    return "rate";
}

int nr_coll_select(const char *word, int selected[NR_COLL_NTESTS])
{
    int hits = 0;
    char *end;
    long num = strtol(word, &end, 10);
    int numeric = *word && *end == '\0';
    for (int i = 0; i < NR_COLL_NTESTS; i++) {
        const struct nr_coll_test *t = &nr_coll_tests[i];
        if (!strcmp(word, t->name) || !strcmp(word, t->id) || (numeric && num == t->number)) {
            selected[i] = 1;
            hits++;
        }
    }
    return hits;
}
