/* Iteration-count calibration and the record of what the measured runs achieved (see nr/calib.h). */
#include "nr/calib.h"

#include <math.h>
#include <stdio.h>

#include "nr/error.h"
#include "nr/json.h"

#define NR__PROBES_MAX 64
#define NR__AGREE 1.25        /* two probes of one count agree when the slower took at most this x the faster */
#define NR__MIN_ELAPSED_S 1e-9

void nr_calib_init(struct nr_calib *c, double target_s, uint64_t cap)
{
    *c = (struct nr_calib){0};
    c->target_s = target_s > 0 ? target_s : 0;
    c->cap = cap < 1 ? 1 : cap;
}

/* n x target / e, at least 1 and at most the cap. */
static uint64_t nr__scale(const struct nr_calib *c, uint64_t n, double e)
{
    double want = ceil((double)n * c->target_s / (e < NR__MIN_ELAPSED_S ? NR__MIN_ELAPSED_S : e));
    return want < 1 ? 1 : (want >= (double)c->cap ? c->cap : (uint64_t)want);
}

/* Median of k <= 3 values (the mean of two). */
static double nr__median(const double *t, int k)
{
    if (k == 1)
        return t[0];
    if (k == 2)
        return (t[0] + t[1]) / 2;
    double lo = t[0] < t[1] ? t[0] : t[1], hi = t[0] < t[1] ? t[1] : t[0];
    return t[2] < lo ? lo : (t[2] > hi ? hi : t[2]);
}

int nr_calibrate(nr_probe_fn probe, void *ctx, struct nr_calib *c, uint64_t *iterations, struct nr_error *err)
{
    const double goal = c->target_s / 10.0;
    uint64_t n = 1;
    int left = NR__PROBES_MAX;
    while (left > 0) {
        double e = 0;
        int rc = probe(ctx, n, &e, err);
        left--, c->probes++;
        if (rc < 0)
            return rc;
        if (e < NR__MIN_ELAPSED_S)
            e = NR__MIN_ELAPSED_S;
        if (e >= goal || n >= c->cap / 16 + 1) {
            /* Probe this count again: two probes that agree within NR__AGREE give their mean, otherwise a third
             * is run and the median of the three decides, so one stalled (or one lucky) probe cannot. */
            double t[1 + NR_CALIB_CONFIRM] = {e};
            int k = 1;
            while (k < 1 + NR_CALIB_CONFIRM && left > 0) {
                rc = probe(ctx, n, &t[k], err);
                left--, c->probes++;
                if (rc < 0)
                    return rc;
                if (t[k] < NR__MIN_ELAPSED_S)
                    t[k] = NR__MIN_ELAPSED_S;
                k++;
                if (k == 2 && t[1] <= NR__AGREE * t[0] && t[0] <= NR__AGREE * t[1])
                    break;
            }
            double rate_e = nr__median(t, k);
            if (rate_e >= goal / 2 || n >= c->cap / 16 + 1) {
                *iterations = nr__scale(c, n, rate_e);
                return NR_OK;
            }
            e = rate_e; /* the probe that reached the goal was inflated: grow again from the agreed rate */
        }
        double grow = goal / e * 1.2;
        grow = grow < 2 ? 2 : (grow > 16 ? 16 : grow);
        n = (uint64_t)ceil((double)n * grow);
        if (n > c->cap)
            n = c->cap;
    }
    return nr_error_set(err, NR_E_INTERNAL, "calibration did not converge in %d probes", NR__PROBES_MAX);
}

int nr_calib_recheck(struct nr_calib *c, uint64_t iterations, double elapsed_s, int *rechecks, uint64_t *next)
{
    *next = iterations;
    if (c->target_s <= 0 || iterations >= c->cap || *rechecks >= NR_CALIB_RECHECKS ||
        elapsed_s >= NR_CALIB_SHORT * c->target_s)
        return 0;
    uint64_t n = nr__scale(c, iterations, elapsed_s);
    if (n <= iterations)
        return 0;
    *next = n;
    (*rechecks)++;
    c->recalibrations++;
    return 1;
}

void nr_calib_record(struct nr_calib *c, uint64_t iterations, double elapsed_s)
{
    if (c->runs == 0 || elapsed_s < c->achieved_min_s)
        c->achieved_min_s = elapsed_s;
    c->runs++;
    c->achieved_sum_s += elapsed_s;
    if (c->target_s <= 0)
        return;
    if (iterations >= c->cap)
        c->capped_runs++;
    else if (elapsed_s < NR_CALIB_SHORT * c->target_s)
        c->short_runs++, c->far_short_runs += elapsed_s < NR_CALIB_FAR * c->target_s;
}

int nr_calib_verdict(const struct nr_calib *c, struct nr_error *err)
{
    if (c->target_s <= 0 || c->runs == 0 || 2 * c->far_short_runs <= c->runs)
        return NR_OK;
    return nr_error_set(err, NR_E_VALIDATE,
                        "calibration: %u of %u measured runs lasted less than %.0f %% of the %.3g-s target "
                        "(shortest %.3g s): the runs did not measure what was asked for",
                        c->far_short_runs, c->runs, NR_CALIB_FAR * 100, c->target_s, c->achieved_min_s);
}

void nr_calib_json(struct nr_json *j, const struct nr_calib *c)
{
    nr_json_key(j, "calibration");
    nr_json_begin_object(j);
    nr_json_kv_double(j, "target_s", c->target_s);
    nr_json_kv_bool(j, "fixed_count", c->target_s <= 0);
    nr_json_kv_uint(j, "probes", c->probes);
    nr_json_kv_uint(j, "recalibrations", c->recalibrations);
    nr_json_kv_uint(j, "runs", c->runs);
    nr_json_kv_uint(j, "short_runs", c->short_runs);
    nr_json_kv_uint(j, "far_short_runs", c->far_short_runs);
    nr_json_kv_uint(j, "capped_runs", c->capped_runs);
    nr_json_kv_double(j, "achieved_min_s", c->runs ? c->achieved_min_s : 0);
    nr_json_kv_double(j, "achieved_mean_s", c->runs ? c->achieved_sum_s / c->runs : 0);
    if (c->short_runs) {
        char w[256];
        snprintf(w, sizeof w, "%u of %u measured runs lasted less than %.0f %% of the %.3g-s target (shortest %.3g s)",
                 c->short_runs, c->runs, NR_CALIB_SHORT * 100, c->target_s, c->achieved_min_s);
        nr_json_kv_string(j, "warning", w);
    }
    nr_json_end_object(j);
}
