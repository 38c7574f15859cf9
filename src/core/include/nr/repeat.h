/* How many repetitions a kernel runs: a fixed count (-r N), or a sequential stopping rule (-r MIN:MAX with
 * --precision FRACTION) that stops once the median of the repetitions is known well enough.
 *
 * The rule. After each repetition the distribution-free confidence interval of the median is drawn from the order
 * statistics (nr_median_ci: the k-th smallest and k-th largest sample, k the largest whose binomial tail keeps the
 * interval's coverage at NR_REPEAT_CONFIDENCE or more; it needs no assumption about the shape of the noise). The
 * repetitions stop when at least MIN ran and the interval reaches no further than FRACTION of the median on either
 * side (reason "precision"), or when MAX ran (reason "max": the figure is as noisy as it is, and says so). With
 * fewer than NR_REPEAT_MIN_CI samples no interval reaches the confidence, so a MIN below that only lowers the
 * floor of a rule that cannot stop there. A fixed count (MIN == MAX) never looks at the samples (reason "fixed").
 *
 * Every rank or side that passes the same samples gets the same decision; an MPI kernel lets rank 0 decide and
 * broadcasts it, so ranks never disagree on whether another repetition runs.
 */
#ifndef NR_REPEAT_H
#define NR_REPEAT_H

#include <stdbool.h>
#include <stddef.h>

struct nr_error;
struct nr_json;
struct nr_opt;

#define NR_REPEAT_CONFIDENCE 0.90 /* coverage of the median's interval the rule asks for */
#define NR_REPEAT_MIN_CI 5        /* fewest samples with such an interval: [min, max] of 5 covers 93.75 % */
#define NR_REPEAT_PRECISION_DEFAULT 0.025 /* --precision when -r MIN:MAX is given without it */

enum nr_repeat_reason { NR_REPEAT_RUNNING = 0, NR_REPEAT_FIXED, NR_REPEAT_PRECISION, NR_REPEAT_MAX };

/* The plan (from the options) and the outcome (from nr_repeat_more). */
struct nr_repeat {
    int min, max;              /* repetitions: at least, at most (equal: a fixed count) */
    double precision;          /* --precision: the interval's largest distance from the median, as a fraction of it;
                                  0 = not given (nr_repeat_check puts the default in) */
    /* outcome */
    enum nr_repeat_reason reason;
    int ran;                   /* repetitions the decision saw */
    bool have_ci;              /* the interval exists (ran >= NR_REPEAT_MIN_CI) */
    double median, ci_low, ci_high, coverage; /* the median, its interval and the interval's exact coverage */
    double half_width;         /* max(median - low, high - median) / |median| (inf when the median is 0) */
};

/* Parser of -r for the option table (NR_OPT_CALL, dest a struct nr_repeat): "N" (a fixed count) or "MIN:MAX",
 * each within [opt->min, opt->max]; MIN <= MAX. */
int nr_repeat_parse_opt(const char *arg, void *dest, const struct nr_opt *opt, struct nr_error *err);

/* After parsing: --precision only with MIN:MAX (NR_E_USAGE naming the options), the default precision otherwise.
 * opt_r and opt_precision are how the error names the two options ("-r/--repetitions"). */
int nr_repeat_check(struct nr_repeat *r, const char *opt_r, const char *opt_precision, struct nr_error *err);

/* A sequential rule (MIN < MAX), not a fixed count. */
bool nr_repeat_sequential(const struct nr_repeat *r);

/* The distribution-free interval of the median of x[0..n-1] at confidence `conf`: [x_(k), x_(n+1-k)] for the
 * largest k with 2 P(Bin(n, 1/2) <= k - 1) <= 1 - conf; *coverage gets that interval's exact coverage. Returns
 * false (nothing written) when even [min, max] does not reach conf, or on an allocation failure. */
bool nr_median_ci(const double *x, size_t n, double conf, double *low, double *high, double *coverage);

/* Decide after the n-th repetition, x[0..n-1] its samples (the figure each repetition gives): true = run another.
 * Fills the outcome (reason stays NR_REPEAT_RUNNING while it returns true). */
bool nr_repeat_more(struct nr_repeat *r, const double *x, size_t n);

/* "fixed", "precision", "max" ("running" before the end). */
const char *nr_repeat_reason_name(enum nr_repeat_reason reason);

/* One line for the -o header and stdout: "5" (a fixed count) or "9 of 5..20: precision reached (median within
 * +-1.8 % at 90 % confidence, target 2.5 %)". Returns buf. */
const char *nr_repeat_describe(const struct nr_repeat *r, char *buf, size_t len);

/* "repetitions_rule": {"min", "max", "precision" (null for a fixed count), "confidence", "ran", "stopped"
 * ("fixed" | "precision" | "max"), "median", "median_ci": [low, high] (null without one), "ci_coverage",
 * "half_width"}. */
void nr_repeat_json(struct nr_json *j, const struct nr_repeat *r);

#endif
