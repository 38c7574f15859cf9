/* Calibration of an iteration count to a time budget (the same rule for every kernel), and the record of what
 * the measured runs then achieved.
 *
 * Probing. Probe runs grow the count (x2 .. x16 per step, aimed at 1.2 x a tenth of the target) until one lasts
 * at least a tenth of target_s. One probe is never trusted alone: a scheduling stall of 60 ms in a 1-iteration
 * probe once made a 0.5-s target come out as 9 iterations. So the count that reached the tenth is probed again:
 * two probes that agree within 25 % give their mean, otherwise a third probe is run and the median of the three
 * decides (NR_CALIB_CONFIRM extra probes at most), so neither one stalled nor one lucky probe sets the count; when
 * that rate falls below half the tenth, the first probe was inflated and growing resumes from the agreed rate.
 * The count is then scaled linearly to target_s and capped. The probes are not results and are not the warm-up
 * either: kernels run their warm-up before calibrating.
 *
 * Re-checking. A measured run with a calibrated count is a longer, better measurement of the rate than any probe,
 * and load can let up after the probes: when any measured run lasts less than NR_CALIB_SHORT of the target (and
 * the count is not the cap), the kernel discards it, rescales the count with its rate (nr_calib_recheck) and runs
 * it again, at most NR_CALIB_RECHECKS times per run; the rescaled count holds for the runs that follow.
 *
 * Reporting. Every measured run is recorded (nr_calib_record); a run shorter than NR_CALIB_SHORT of its target
 * is counted as short, one shorter than NR_CALIB_FAR of it as far short. nr_calib_json() writes the "calibration"
 * object of the result JSON with a "warning" whenever a run fell short: a machine whose load changes during the
 * test can make later runs two or three times faster than the calibration saw, and that is reported, not failed.
 * nr_calib_verdict() fails the test (NR_E_VALIDATE) when most runs fell far short: a count off by a factor of ten
 * or more is a calibration that went wrong (the stalled probe made runs of milliseconds for a 0.5-s target).
 *
 * Every rank or side that calls these with the same probe outcomes gets the same answers (nothing here is random
 * or clock-dependent beyond the elapsed times passed in), which lets MPI ranks calibrate in step when the probe
 * and the re-check use rank 0's time.
 */
#ifndef NR_CALIB_H
#define NR_CALIB_H

#include <stdbool.h>
#include <stdint.h>

struct nr_error;
struct nr_json;

#define NR_CALIB_CONFIRM 2    /* extra probes of the count that first reached a tenth of the target */
#define NR_CALIB_SHORT 0.5    /* a measured run shorter than this fraction of its target is short (a warning) */
#define NR_CALIB_FAR 0.1      /* ... and this far short counts towards failing the test */
#define NR_CALIB_RECHECKS 2   /* most re-runs of a first measured run that fell short */

/* One probe: run n iterations and report the elapsed seconds. Returns 0 or a negative NR_E_*. */
typedef int (*nr_probe_fn)(void *ctx, uint64_t n, double *elapsed_s, struct nr_error *err);

/* The calibration of one test and what its measured runs achieved (the JSON "calibration" object). */
struct nr_calib {
    double target_s;          /* time each measured run is calibrated to; 0 = a fixed count (--iterations) */
    uint64_t cap;             /* largest count allowed */
    unsigned probes;          /* probe runs, over the whole test */
    unsigned recalibrations;  /* measured runs discarded because they fell short (NR_CALIB_SHORT), and run again */
    unsigned runs;            /* measured runs recorded */
    unsigned short_runs;      /* recorded runs shorter than NR_CALIB_SHORT x target (runs at the cap excepted) */
    unsigned far_short_runs;  /* of them, shorter than NR_CALIB_FAR x target */
    unsigned capped_runs;     /* recorded runs whose count was the cap */
    double achieved_min_s;    /* shortest recorded run */
    double achieved_sum_s;    /* sum of the recorded runs' elapsed times */
};

/* Start a record: target_s 0 means a fixed count (nothing is calibrated, no run is ever short). cap >= 1. */
void nr_calib_init(struct nr_calib *c, double target_s, uint64_t cap);

/* Iterations that take about c->target_s (at least 1, at most c->cap). Returns 0, the probe's error, or
 * NR_E_INTERNAL when 64 probes did not reach a tenth of the target. Counts its probes in c->probes. */
int nr_calibrate(nr_probe_fn probe, void *ctx, struct nr_calib *c, uint64_t *iterations, struct nr_error *err);

/* After a measured run of `iterations` that lasted elapsed_s: 1 when it fell short (shorter than
 * NR_CALIB_SHORT of the target, count below the cap, calibrated test, fewer than NR_CALIB_RECHECKS re-runs so far
 * for this count) and must be run again with *next iterations (the count rescaled with the run's rate; counted in
 * c->recalibrations); 0 to keep the run. *rechecks counts the re-runs of this count (start it at 0). */
int nr_calib_recheck(struct nr_calib *c, uint64_t iterations, double elapsed_s, int *rechecks, uint64_t *next);

/* Record a measured run of `iterations` that lasted elapsed_s. */
void nr_calib_record(struct nr_calib *c, uint64_t iterations, double elapsed_s);

/* NR_E_VALIDATE (with the figures in err) when most recorded runs fell far short of the target, else 0. */
int nr_calib_verdict(const struct nr_calib *c, struct nr_error *err);

/* "calibration": {"target_s", "fixed_count", "probes", "recalibrations", "runs", "short_runs", "far_short_runs",
 * "capped_runs", "achieved_min_s", "achieved_mean_s", "warning" (only when a run fell short)}. */
void nr_calib_json(struct nr_json *j, const struct nr_calib *c);

#endif
