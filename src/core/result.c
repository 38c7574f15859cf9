/* Result records and the common JSON skeleton (see nr/result.h). */
#include "nr/result.h"

#include <stdio.h>

#include "nr/host.h"
#include "nr/json.h"
#include "nr/stats.h"

#ifndef NR_VERSION_STRING
#define NR_VERSION_STRING "unknown"
#endif

const char *nr_version(void)
{
    return NR_VERSION_STRING;
}

double nr_mbps(uint64_t bytes, double seconds)
{
    return seconds > 0 ? (double)bytes * 8.0 / seconds / 1e6 : 0.0;
}

void nr_result_json_begin(struct nr_json *j, const struct nr_result_meta *m)
{
    char when[64];
    nr_json_begin_object(j);
    nr_json_kv_string(j, "schema", NR_RESULT_SCHEMA);
    nr_json_kv_string(j, "tool", m->tool);
    nr_json_kv_string(j, "version", nr_version());
    nr_json_kv_string(j, "mode", m->mode);
    nr_json_kv_string(j, "status", m->status == 0 ? "ok" : "error");
    if (m->status != 0)
        nr_json_kv_string(j, "error", m->error ? m->error : "unknown error");
    nr_json_kv_string(j, "started_utc", nr_time_utc_iso(m->started, when, sizeof when));
}

void nr_result_json_side(struct nr_json *j, const char *key, const struct nr_side_times *t)
{
    nr_json_key(j, key);
    nr_json_begin_object(j);
    nr_json_kv_double(j, "elapsed_s", t->elapsed_s);
    nr_json_kv_double(j, "user_s", t->user_s);
    nr_json_kv_double(j, "sys_s", t->sys_s);
    nr_json_end_object(j);
}

void nr_result_json_reps(struct nr_json *j, const struct nr_rep *reps, size_t n, const char *local_role,
                         const char *peer_role)
{
    char key[64];
    nr_json_key(j, "repetitions");
    nr_json_begin_array(j);
    for (size_t i = 0; i < n; i++) {
        const struct nr_rep *r = &reps[i];
        nr_json_begin_object(j);
        nr_json_kv_uint(j, "index", i + 1);
        nr_json_kv_uint(j, "size_bytes", r->size_bytes);
        nr_json_kv_uint(j, "iterations", r->iterations);
        nr_json_kv_double(j, "throughput_mbps", r->throughput_mbps);
        snprintf(key, sizeof key, "bytes_%s", local_role);
        nr_json_kv_uint(j, key, r->bytes_local);
        snprintf(key, sizeof key, "bytes_%s", peer_role);
        nr_json_kv_uint(j, key, r->bytes_peer);
        nr_result_json_side(j, local_role, &r->local);
        nr_result_json_side(j, peer_role, &r->peer);
        nr_json_end_object(j);
    }
    nr_json_end_array(j);
}

void nr_result_json_sweep(struct nr_json *j, const struct nr_rep *points, size_t n, const char *local_role,
                          const char *peer_role)
{
    char key[64];
    nr_json_key(j, "sweep");
    nr_json_begin_array(j);
    for (size_t i = 0; i < n; i++) {
        nr_json_begin_object(j);
        nr_json_kv_uint(j, "size_bytes", points[i].size_bytes);
        nr_json_kv_double(j, "throughput_mbps", points[i].throughput_mbps);
        nr_json_kv_double(j, "elapsed_s", points[i].local.elapsed_s);
        nr_json_kv_uint(j, "iterations", points[i].iterations);
        snprintf(key, sizeof key, "bytes_%s", local_role);
        nr_json_kv_uint(j, key, points[i].bytes_local);
        snprintf(key, sizeof key, "bytes_%s", peer_role);
        nr_json_kv_uint(j, key, points[i].bytes_peer);
        nr_json_end_object(j);
    }
    nr_json_end_array(j);
}

void nr_result_json_latency(struct nr_json *j, uint64_t size_bytes, const struct nr_rep *trials, const double *rtt_us,
                            size_t n, const struct nr_stats *s)
{
    nr_json_key(j, "latency");
    nr_json_begin_object(j);
    nr_json_kv_uint(j, "size_bytes", size_bytes);
    nr_json_kv_uint(j, "iterations", n ? trials[n - 1].iterations : 0);
    nr_json_key(j, "trial_iterations");
    nr_json_begin_array(j);
    for (size_t i = 0; i < n; i++)
        nr_json_uint(j, trials[i].iterations);
    nr_json_end_array(j);
    nr_json_key(j, "rtt_us");
    nr_json_begin_array(j);
    for (size_t i = 0; i < n; i++)
        nr_json_double(j, rtt_us[i]);
    nr_json_end_array(j);
    nr_json_kv_double(j, "min_us", s->min);
    nr_json_kv_double(j, "avg_us", s->avg);
    nr_json_kv_double(j, "max_us", s->max);
    nr_json_kv_double(j, "median_us", s->median);
    nr_json_kv_double(j, "stddev_us", s->stddev);
    nr_json_end_object(j);
}
