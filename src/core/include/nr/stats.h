/* Summary statistics and bucket histograms over a set of samples.
 *
 * nr_stats_compute() gives min/avg/max/median/stddev of n samples; stddev is the sample standard deviation
 * (divisor n-1; 0 for a single sample). The median of an even count is the mean of the two middle values.
 * nr_buckets_compute() counts samples in equal-width buckets between the sample minimum and maximum (the
 * "bucket data" of Netgauge's ebb: the first bucket starts at the minimum, the last one ends at the maximum
 * and includes it).
 */
#ifndef NR_STATS_H
#define NR_STATS_H

#include <stddef.h>
#include <stdint.h>

struct nr_stats {
    size_t n;      /* number of samples */
    double min;    /* smallest sample */
    double avg;    /* arithmetic mean */
    double max;    /* largest sample */
    double median; /* middle value (mean of the two middle ones for even n) */
    double stddev; /* sample standard deviation (n-1), 0 when n < 2 */
};

/* Statistics of x[0..n-1]. n == 0 gives all-zero stats and NR_E_RANGE; otherwise returns 0.
 * Allocates a scratch copy for the median (NR_E_NOMEM if that fails). x is not modified. */
int nr_stats_compute(const double *x, size_t n, struct nr_stats *out);

/* Equal-width histogram of x[0..n-1] into nbuckets buckets spanning [min, max] of the data.
 * lower_edge[i] receives the lower bound of bucket i (may be NULL), count[i] its number of samples.
 * All samples equal: everything lands in bucket 0. Returns 0, or NR_E_RANGE if n or nbuckets is 0. */
int nr_buckets_compute(const double *x, size_t n, size_t nbuckets, double *lower_edge, uint64_t *count);

#endif
