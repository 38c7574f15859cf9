/* Iteration-count calibration (see nr/calib.h). */
#include "nr/calib.h"

#include <math.h>

#include "nr/error.h"

#define NR__PROBES_MAX 64

int nr_calibrate(nr_probe_fn probe, void *ctx, double target_s, uint64_t cap, uint64_t *iterations,
                 struct nr_error *err)
{
    const double goal = target_s / 10.0;
    uint64_t n = 1;
    if (cap < 1)
        cap = 1;
    for (int step = 0; step < NR__PROBES_MAX; step++) {
        double e = 0;
        int rc = probe(ctx, n, &e, err);
        if (rc < 0)
            return rc;
        if (e < 1e-9)
            e = 1e-9;
        if (e >= goal || n >= cap / 16 + 1) {
            double want = ceil((double)n * target_s / e);
            *iterations = want < 1 ? 1 : (want > (double)cap ? cap : (uint64_t)want);
            return NR_OK;
        }
        double grow = goal / e * 1.2;
        grow = grow < 2 ? 2 : (grow > 16 ? 16 : grow);
        n = (uint64_t)ceil((double)n * grow);
    }
    return nr_error_set(err, NR_E_INTERNAL, "calibration did not converge");
}
