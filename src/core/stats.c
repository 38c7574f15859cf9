/* Summary statistics and equal-width buckets (see nr/stats.h). */
#include "nr/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nr/error.h"

static int nr__cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int nr_stats_compute(const double *x, size_t n, struct nr_stats *out)
{
    memset(out, 0, sizeof *out);
    if (n == 0)
        return NR_E_RANGE;
    double *sorted = malloc(n * sizeof *sorted);
    if (!sorted)
        return NR_E_NOMEM;
    memcpy(sorted, x, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, nr__cmp_double);

    /* Welford's update: numerically stable mean and variance in one pass. */
    double mean = 0, m2 = 0;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - mean;
        mean += d / (double)(i + 1);
        m2 += d * (x[i] - mean);
    }
    out->n = n;
    out->min = sorted[0];
    out->max = sorted[n - 1];
    out->avg = mean;
    out->median = (n % 2) ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    out->stddev = n > 1 ? sqrt(m2 / (double)(n - 1)) : 0.0;
    free(sorted);
    return NR_OK;
}

int nr_buckets_compute(const double *x, size_t n, size_t nbuckets, double *lower_edge, uint64_t *count)
{
    if (n == 0 || nbuckets == 0)
        return NR_E_RANGE;
    double lo = x[0], hi = x[0];
    for (size_t i = 1; i < n; i++) {
        if (x[i] < lo)
            lo = x[i];
        if (x[i] > hi)
            hi = x[i];
    }
    double width = (hi - lo) / (double)nbuckets;
    for (size_t b = 0; b < nbuckets; b++) {
        count[b] = 0;
        if (lower_edge)
            lower_edge[b] = lo + width * (double)b;
    }
    for (size_t i = 0; i < n; i++) {
        size_t b = width > 0 ? (size_t)((x[i] - lo) / width) : 0;
        if (b >= nbuckets)
            b = nbuckets - 1; /* the maximum itself belongs to the last bucket */
        count[b]++;
    }
    return NR_OK;
}
