/* Result records and the common parts of the result JSON (schema "netregress-result/1", docs/json-schema.md).
 *
 * Kernels measure into records first (one struct nr_rep per repetition or per sweep point, an array of RTTs for
 * latency) and write every format from the records afterwards. The two sides of a test are "local" (the side
 * that reports: TCP client, MPI master) and "peer" (TCP server, MPI secondary); the JSON names them with the
 * role names the kernel passes ("client"/"server", "master"/"secondary").
 *
 * Throughput is in Mbps = 10^6 bits per second, as in Hpcbench.
 */
#ifndef NR_RESULT_H
#define NR_RESULT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct nr_json;
struct nr_stats;

#define NR_RESULT_SCHEMA "netregress-result/1"

/* The package version ("0.1.0"), from the CMake project version. */
const char *nr_version(void);

/* The three kinds of run every point-to-point kernel offers (Hpcbench): fixed-size repetitions, an exponential
 * sweep of message sizes, round-trip latency trials. */
enum nr_run_kind { NR_RUN_FIXED, NR_RUN_SWEEP, NR_RUN_LATENCY };

/* Elapsed wall time and process times of one side over one repetition. */
struct nr_side_times {
    double elapsed_s; /* monotonic wall time of the timed part */
    double user_s;    /* process user-mode time over the repetition (getrusage) */
    double sys_s;     /* process system-mode time over the repetition */
};

/* One repetition of a fixed-size test, or one point of a sweep. */
struct nr_rep {
    uint64_t size_bytes;      /* message size */
    uint64_t iterations;      /* messages sent (stream) or exchanged (ping-pong) */
    uint64_t bytes_local;     /* payload bytes the local side moved (sent + received) */
    uint64_t bytes_peer;      /* payload bytes the peer moved, as the peer reported them */
    double throughput_mbps;   /* payload throughput */
    struct nr_side_times local;
    struct nr_side_times peer;
};

/* bytes over seconds in Mbps (0 when seconds <= 0). */
double nr_mbps(uint64_t bytes, double seconds);

/* Identification of a result document. */
struct nr_result_meta {
    const char *tool;      /* "nr-tcptest" */
    const char *mode;      /* the experiment, e.g. "stream", "pingpong-exp", "latency" */
    time_t started;        /* wall-clock start (started_utc) */
    int status;            /* 0 = ok, else the NR_E_* code of the failure */
    const char *error;     /* the failure message (written only when status != 0) */
};

/* Open the top-level object and write schema, tool, version, mode, status, error (on failure) and started_utc.
 * The caller adds its own keys and closes the object with nr_json_end_object(). */
void nr_result_json_begin(struct nr_json *j, const struct nr_result_meta *m);

/* key: {"elapsed_s":..,"user_s":..,"sys_s":..} */
void nr_result_json_side(struct nr_json *j, const char *key, const struct nr_side_times *t);

/* "repetitions": [{index, size_bytes, iterations, throughput_mbps, bytes_<local_role>, bytes_<peer_role>,
 *                  <local_role>: side times, <peer_role>: side times}, ...] */
void nr_result_json_reps(struct nr_json *j, const struct nr_rep *reps, size_t n, const char *local_role,
                         const char *peer_role);

/* "sweep": [{size_bytes, throughput_mbps, elapsed_s, iterations, bytes_<local_role>, bytes_<peer_role>}, ...]
 * (elapsed_s is the local side's). */
void nr_result_json_sweep(struct nr_json *j, const struct nr_rep *points, size_t n, const char *local_role,
                          const char *peer_role);

/* "latency": {size_bytes, iterations, trial_iterations: [...], rtt_us: [...], min_us, avg_us, max_us, median_us,
 * stddev_us}: trials[i] is trial i's record (its round trips, which a re-checked calibration may change between
 * trials: trial_iterations lists them, iterations is the last trial's). */
void nr_result_json_latency(struct nr_json *j, uint64_t size_bytes, const struct nr_rep *trials, const double *rtt_us,
                            size_t n, const struct nr_stats *s);

#endif
