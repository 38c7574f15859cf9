/* Calibration of an iteration count to a time budget (the same rule for every kernel).
 *
 * Probe runs with a growing count (x2 .. x16 per step, aimed at 1.2 x a tenth of the target) until one lasts at
 * least a tenth of target_s; the count is then scaled linearly to target_s and capped. The probes are not
 * results and are not the warm-up either: kernels run their warm-up before calibrating. Every rank or side that
 * calls this with the same probe outcomes gets the same count (nothing here is random or clock-dependent beyond
 * the probe's elapsed time), which lets MPI ranks calibrate in step when the probe shares rank 0's time.
 */
#ifndef NR_CALIB_H
#define NR_CALIB_H

#include <stdint.h>

struct nr_error;

/* One probe: run n iterations and report the elapsed seconds. Returns 0 or a negative NR_E_*. */
typedef int (*nr_probe_fn)(void *ctx, uint64_t n, double *elapsed_s, struct nr_error *err);

/* Iterations that take about target_s (at least 1, at most cap). Returns 0, the probe's error, or
 * NR_E_INTERNAL when 64 probes did not reach a tenth of the target. */
int nr_calibrate(nr_probe_fn probe, void *ctx, double target_s, uint64_t cap, uint64_t *iterations,
                 struct nr_error *err);

#endif
