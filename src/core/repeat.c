/* The repetition count: fixed, or the sequential stopping rule on the median's interval (see nr/repeat.h). */
#include "nr/repeat.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nr/error.h"
#include "nr/json.h"
#include "nr/opt.h"
#include "nr/stats.h"

static int nr__cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One count of -r: a decimal within the option's limits. */
static int nr__count(const char *s, size_t len, const struct nr_opt *opt, int *out, struct nr_error *err)
{
    char name[64], text[32];
    nr_opt_name(opt, name, sizeof name);
    if (len == 0 || len >= sizeof text)
        return nr_error_set(err, NR_E_PARSE, "%s: expected N or MIN:MAX, got '%s'", name, s);
    memcpy(text, s, len);
    text[len] = '\0';
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (*end || end == text || text[0] == '+' || text[0] == '-' || text[0] == ' ' || errno)
        return nr_error_set(err, NR_E_PARSE, "%s: '%s' is not a count (N or MIN:MAX)", name, text);
    if (v < (long)opt->min || v > (long)opt->max)
        return nr_error_set(err, NR_E_RANGE, "%s: %ld is outside the allowed range [%.0f, %.0f]", name, v, opt->min,
                            opt->max);
    *out = (int)v;
    return NR_OK;
}

int nr_repeat_parse_opt(const char *arg, void *dest, const struct nr_opt *opt, struct nr_error *err)
{
    struct nr_repeat *r = dest;
    const char *colon = strchr(arg, ':');
    int lo = 0, hi = 0, rc;
    if ((rc = nr__count(arg, colon ? (size_t)(colon - arg) : strlen(arg), opt, &lo, err)) < 0)
        return rc;
    hi = lo;
    if (colon && (rc = nr__count(colon + 1, strlen(colon + 1), opt, &hi, err)) < 0)
        return rc;
    if (lo > hi) {
        char name[64];
        return nr_error_set(err, NR_E_PARSE, "%s: MIN %d > MAX %d in '%s'", nr_opt_name(opt, name, sizeof name), lo,
                            hi, arg);
    }
    r->min = lo, r->max = hi;
    return NR_OK;
}

bool nr_repeat_sequential(const struct nr_repeat *r)
{
    return r->min < r->max;
}

int nr_repeat_check(struct nr_repeat *r, const char *opt_r, const char *opt_precision, struct nr_error *err)
{
    if (r->precision != 0 && !nr_repeat_sequential(r))
        return nr_error_set(err, NR_E_USAGE, "%s goes with %s MIN:MAX (a fixed count of %d stops at %d)", opt_precision,
                            opt_r, r->max, r->max);
    if (r->precision == 0)
        r->precision = NR_REPEAT_PRECISION_DEFAULT;
    return NR_OK;
}

/* log P(Bin(n, 1/2) = i) */
static double nr__log_pmf(size_t n, size_t i)
{
    return lgamma((double)n + 1) - lgamma((double)i + 1) - lgamma((double)(n - i) + 1) - (double)n * log(2.0);
}

bool nr_median_ci(const double *x, size_t n, double conf, double *low, double *high, double *coverage)
{
    const double tail = (1 - conf) / 2;
    /* k: the largest with P(B <= k - 1) <= tail; cdf accumulates P(B <= k - 1) as k grows */
    size_t k = 0;
    double cdf = 0;
    for (size_t c = 1; c <= (n + 1) / 2; c++) {
        double next = cdf + exp(nr__log_pmf(n, c - 1));
        if (next > tail)
            break;
        cdf = next, k = c;
    }
    if (k == 0)
        return false;
    double *s = malloc(n * sizeof *s);
    if (!s)
        return false;
    memcpy(s, x, n * sizeof *s);
    qsort(s, n, sizeof *s, nr__cmp_double);
    *low = s[k - 1];
    *high = s[n - k];
    *coverage = 1 - 2 * cdf; /* cdf = P(B <= k - 1) of the k kept */
    free(s);
    return true;
}

bool nr_repeat_more(struct nr_repeat *r, const double *x, size_t n)
{
    r->ran = (int)n;
    r->reason = NR_REPEAT_RUNNING;
    r->have_ci = false;
    struct nr_stats st;
    if (nr_stats_compute(x, n, &st) == NR_OK) {
        r->median = st.median;
        r->have_ci = nr_median_ci(x, n, NR_REPEAT_CONFIDENCE, &r->ci_low, &r->ci_high, &r->coverage);
    }
    r->half_width = INFINITY;
    if (r->have_ci && r->median != 0) {
        double below = r->median - r->ci_low, above = r->ci_high - r->median;
        r->half_width = (below > above ? below : above) / fabs(r->median);
    }
    if ((int)n >= r->max) {
        r->reason = nr_repeat_sequential(r) ? NR_REPEAT_MAX : NR_REPEAT_FIXED;
        if (nr_repeat_sequential(r) && r->have_ci && r->half_width <= r->precision)
            r->reason = NR_REPEAT_PRECISION; /* reached it with the last one allowed */
        return false;
    }
    if (nr_repeat_sequential(r) && (int)n >= r->min && r->have_ci && r->half_width <= r->precision) {
        r->reason = NR_REPEAT_PRECISION;
        return false;
    }
    return true;
}

const char *nr_repeat_reason_name(enum nr_repeat_reason reason)
{
    switch (reason) {
    case NR_REPEAT_FIXED:
        return "fixed";
    case NR_REPEAT_PRECISION:
        return "precision";
    case NR_REPEAT_MAX:
        return "max";
    default:
        return "running";
    }
}

const char *nr_repeat_describe(const struct nr_repeat *r, char *buf, size_t len)
{
    if (!nr_repeat_sequential(r)) {
        snprintf(buf, len, "%d", r->ran); /* the Hpcbench header's plain count */
        return buf;
    }
    char within[96] = "no interval yet";
    if (r->have_ci && isfinite(r->half_width))
        snprintf(within, sizeof within, "median within +-%.2f %% at %.0f %% confidence", 100 * r->half_width,
                 100 * NR_REPEAT_CONFIDENCE);
    snprintf(buf, len, "%d of %d..%d: %s (%s, target %.2f %%)", r->ran, r->min, r->max,
             r->reason == NR_REPEAT_PRECISION ? "precision reached" : "maximum count reached", within,
             100 * r->precision);
    return buf;
}

void nr_repeat_json(struct nr_json *j, const struct nr_repeat *r)
{
    nr_json_key(j, "repetitions_rule");
    nr_json_begin_object(j);
    nr_json_kv_int(j, "min", r->min);
    nr_json_kv_int(j, "max", r->max);
    nr_json_key(j, "precision");
    if (nr_repeat_sequential(r))
        nr_json_double(j, r->precision);
    else
        nr_json_null(j);
    nr_json_kv_double(j, "confidence", NR_REPEAT_CONFIDENCE);
    nr_json_kv_int(j, "ran", r->ran);
    nr_json_kv_string(j, "stopped", nr_repeat_reason_name(r->reason));
    nr_json_kv_double(j, "median", r->median);
    nr_json_key(j, "median_ci");
    if (r->have_ci) {
        nr_json_begin_array(j);
        nr_json_double(j, r->ci_low);
        nr_json_double(j, r->ci_high);
        nr_json_end_array(j);
    } else {
        nr_json_null(j);
    }
    nr_json_key(j, "ci_coverage");
    if (r->have_ci)
        nr_json_double(j, r->coverage);
    else
        nr_json_null(j);
    nr_json_key(j, "half_width");
    if (r->have_ci && isfinite(r->half_width))
        nr_json_double(j, r->half_width);
    else
        nr_json_null(j);
    nr_json_end_object(j);
}
