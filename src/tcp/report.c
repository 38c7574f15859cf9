/* nr-tcptest writers: stdout lines, the Hpcbench result file (-o), system logs (-c), gnuplot script (-P) and JSON
 * (--json), all from the result records (see tcptest.h). Layouts follow the Hpcbench TCP page (docs/tcp.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tcp.h"
#include "tcptest.h"

/* The two closing lines of a latency test (stdout and -o file). */
static void nr__latency_summary(FILE *f, const struct nr_tcptest_result *r)
{
    struct nr_stats s;
    if (nr_stats_compute(r->rtt_us, r->nrtt, &s) != 0)
        return;
    fprintf(f, "%zu trials with message size %llu Bytes.\n", r->nrtt, (unsigned long long)r->size_bytes);
    fprintf(f, "TCP RTT min/avg/max = %.3f/%.3f/%.3f usec\n", s.min, s.avg, s.max);
}

void nr_tcptest_print_run(const struct nr_tcptest_result *r, size_t i)
{
    if (r->kind == NR_RUN_LATENCY)
        printf("TCP Round Trip Time (%zu) : %.3f usec\n", i + 1, r->rtt_us[i]);
    else
        printf(" (%zu) : %f Mbps\n", i + 1, r->reps[i].throughput_mbps);
    fflush(stdout);
}

void nr_tcptest_print_end(const struct nr_tcptest_result *r)
{
    char line[192];
    if (r->kind == NR_RUN_LATENCY)
        nr__latency_summary(stdout, r);
    if (r->kind != NR_RUN_SWEEP)
        printf("Repetitions: %s\n", nr_repeat_describe(&r->rule, line, sizeof line));
    fflush(stdout);
}

static const char *nr__onoff(bool v)
{
    return v ? "ON" : "OFF";
}

static const char *nr__mode_text(const struct nr_tcptest *o, const struct nr_tcptest_result *r)
{
    if (r->kind == NR_RUN_SWEEP)
        return o->pingpong ? "ping-pong(bidirectional) exponential throughput test"
                           : "stream(unidirectional) exponential throughput test";
    return o->pingpong ? "ping-pong(bidirectional) throughput test" : "stream(unidirectional) throughput test";
}

static void nr__header(FILE *f, const struct nr_tcptest *o, const struct nr_tcptest_result *r)
{
    char when[64], cs[NR_HOST_MAX], ss[NR_HOST_MAX], t1[16], t2[16];
    const struct nr_tcp_sockinfo *c = &r->sock_client, *s = &r->sock_server;
    fprintf(f, "# TCP communication test -- %s\n", nr_time_ctime(r->started, when, sizeof when));
    fprintf(f, "# Hosts: %s (client) <----> %s (server)\n", nr_hostname_short(r->client_host, cs, sizeof cs),
            nr_hostname_short(r->server_host, ss, sizeof ss));
    fprintf(f, "# TCP test mode: %s\n", nr__mode_text(o, r));
    fprintf(f, "# Socket Recv-buffer (Bytes) -- client: %u  server: %u\n", c->rcvbuf_bytes, s->rcvbuf_bytes);
    fprintf(f, "# Socket Send-buffer (Bytes) -- client: %u  server: %u\n", c->sndbuf_bytes, s->sndbuf_bytes);
    fprintf(f, "# Socket blocking option -- client: %s  server: %s\n", nr__onoff(c->blocking), nr__onoff(s->blocking));
    fprintf(f, "# TCP_NODELAY option -- client: %s  server: %s\n", nr__onoff(c->nodelay), nr__onoff(s->nodelay));
    fprintf(f, "# TCP_CORK option -- client: %s  server: %s\n", nr__onoff(c->cork), nr__onoff(s->cork));
    fprintf(f, "# TCP Maximum-segment-size(MSS) (Bytes) -- client: %u  server: %u\n", c->mss_bytes, s->mss_bytes);
    fprintf(f, "# IP TOS type -- client: %s server: %s\n", nr_tcp_tos_name(c->tos, t1, sizeof t1),
            nr_tcp_tos_name(s->tos, t2, sizeof t2));
}

/* Columns of the repetition table (Hpcbench TCP layout). */
static const struct nr_table_col nr__rep_cols[] = {
    {{"Network", "Throughput", "(Mbps)"}, 15, 3},
    {{"Client", "Elapsed-time", "(Seconds)"}, 14, 2},
    {{"C-process", "User-mode", "(Seconds)"}, 12, 2},
    {{"C-process", "System-mode", "(Seconds)"}, 13, 2},
    {{"Server", "Elapsed-time", "(Seconds)"}, 14, 2},
    {{"S-process", "User-mode", "(Seconds)"}, 12, 2},
    {{"S-process", "System-mode", "(Seconds)"}, 13, 2},
};
#define NR__NREP_COLS (sizeof nr__rep_cols / sizeof nr__rep_cols[0])

static void nr__write_fixed(FILE *f, const struct nr_tcptest *o, const struct nr_tcptest_result *r)
{
    nr__header(f, o, r);
    fprintf(f, "# Data size of each read/write (Bytes): %llu\n", (unsigned long long)r->io_bytes);
    char line[192];
    nr_table_counts_line(f, "# Total data size sent of each test (Bytes): ", r->reps, r->nreps, r->size_bytes);
    fprintf(f, "# Message size (Bytes): %llu\n", (unsigned long long)r->size_bytes);
    nr_table_counts_line(f, "# Iteration: ", r->reps, r->nreps, 1);
    fprintf(f, "# Test Repetition: %s\n\n", nr_repeat_describe(&r->rule, line, sizeof line));
    nr_table_header(f, 1, nr__rep_cols, NR__NREP_COLS);
    double *tp = malloc((r->nreps ? r->nreps : 1) * sizeof *tp);
    for (size_t i = 0; i < r->nreps; i++) {
        const struct nr_rep *p = &r->reps[i];
        double v[NR__NREP_COLS] = {p->throughput_mbps, p->local.elapsed_s, p->local.user_s, p->local.sys_s,
                                   p->peer.elapsed_s,  p->peer.user_s,    p->peer.sys_s};
        char label[24];
        snprintf(label, sizeof label, "%zu", i + 1);
        nr_table_row(f, label, 1, nr__rep_cols, NR__NREP_COLS, v);
        if (tp)
            tp[i] = p->throughput_mbps;
    }
    struct nr_stats s;
    if (tp && nr_stats_compute(tp, r->nreps, &s) == 0) {
        fputc('\n', f);
        nr_table_stats_line(f, "Throughput", &s);
    }
    free(tp);
}

static void nr__write_sweep(FILE *f, const struct nr_tcptest *o, const struct nr_tcptest_result *r)
{
    nr__header(f, o, r);
    fprintf(f, "\n# Data-size  Network-throughput   Elapsed-time   Iteration\n");
    fprintf(f, "#  (Bytes)        (Mbps)           (Seconds)\n");
    for (size_t i = 0; i < r->nreps; i++) {
        const struct nr_rep *p = &r->reps[i];
        fprintf(f, "%10llu %14.4f %17.5f %10llu\n", (unsigned long long)p->size_bytes, p->throughput_mbps,
                p->local.elapsed_s, (unsigned long long)p->iterations);
    }
}

static void nr__write_latency(FILE *f, const struct nr_tcptest_result *r)
{
    char when[64], cs[NR_HOST_MAX], ss[NR_HOST_MAX];
    fprintf(f, "# TCP roundtrip time test %s\n", nr_time_ctime(r->started, when, sizeof when));
    fprintf(f, "# %s <--> %s\n", nr_hostname_short(r->client_host, cs, sizeof cs),
            nr_hostname_short(r->server_host, ss, sizeof ss));
    fprintf(f, "# TCP-send-buffer: %u TCP-recv-buffer: %u\n", r->sock_client.sndbuf_bytes, r->sock_client.rcvbuf_bytes);
    char line[192], label[64];
    snprintf(label, sizeof label, "# Message-size: %llu Iteration: ", (unsigned long long)r->size_bytes);
    nr_table_counts_line(f, label, r->reps, r->nrtt, 1);
    fprintf(f, "# Trials: %s\n", nr_repeat_describe(&r->rule, line, sizeof line));
    for (size_t i = 0; i < r->nrtt; i++)
        fprintf(f, "TCP Round Trip Time (%zu) : %.3f usec\n", i + 1, r->rtt_us[i]);
    nr__latency_summary(f, r);
}

/* fopen for writing, with the error captured. */
static FILE *nr__open(const char *path, struct nr_error *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        nr_error_sys(err, NR_E_IO, "cannot write '%s'", path);
    return f;
}

static int nr__close(FILE *f, const char *path, struct nr_error *err)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return nr_error_sys(err, NR_E_IO, "writing '%s' failed", path);
    return NR_OK;
}

int nr_tcptest_write_output(const char *path, const struct nr_tcptest *o, const struct nr_tcptest_result *r,
                            struct nr_error *err)
{
    FILE *f = nr__open(path, err);
    if (!f)
        return NR_E_IO;
    if (r->kind == NR_RUN_LATENCY)
        nr__write_latency(f, r);
    else if (r->kind == NR_RUN_SWEEP)
        nr__write_sweep(f, o, r);
    else
        nr__write_fixed(f, o, r);
    return nr__close(f, path, err);
}

int nr_tcptest_write_syslogs(const char *path, const struct nr_tcptest_result *r, struct nr_error *err)
{
    const struct nr_sysmon_log *logs[2] = {r->mon ? nr_sysmon_get_log(r->mon) : NULL,
                                           r->have_server_log ? &r->server_log : NULL};
    const char *suffix[2] = {"c_log", "s_log"};
    for (int k = 0; k < 2; k++) {
        if (!logs[k])
            continue;
        char name[4096];
        snprintf(name, sizeof name, "%s.%s", path, suffix[k]);
        FILE *f = nr__open(name, err);
        if (!f)
            return NR_E_IO;
        nr_sysmon_log_write(f, logs[k]);
        int rc = nr__close(f, name, err);
        if (rc < 0)
            return rc;
    }
    return NR_OK;
}

int nr_tcptest_write_plot(const char *path, const struct nr_tcptest *o, const struct nr_tcptest_result *r,
                          struct nr_error *err)
{
    char title[512], cs[NR_HOST_MAX], ss[NR_HOST_MAX];
    snprintf(title, sizeof title, "TCP %s%s throughput %s <--> %s", o->nonblocking ? "non-blocking " : "",
             o->pingpong ? "ping-pong" : "stream", nr_hostname_short(r->client_host, cs, sizeof cs),
             nr_hostname_short(r->server_host, ss, sizeof ss));
    return nr_plot_throughput(path, title, "Network throughput", r->kind == NR_RUN_SWEEP, err);
}

static void nr__json_sock(struct nr_json *j, const char *key, const struct nr_tcp_sockinfo *s)
{
    nr_json_key(j, key);
    nr_json_begin_object(j);
    nr_json_kv_uint(j, "rcvbuf_bytes", s->rcvbuf_bytes);
    nr_json_kv_uint(j, "sndbuf_bytes", s->sndbuf_bytes);
    nr_json_kv_bool(j, "blocking", s->blocking);
    nr_json_kv_bool(j, "nodelay", s->nodelay);
    nr_json_kv_bool(j, "cork", s->cork);
    nr_json_kv_uint(j, "mss_bytes", s->mss_bytes);
    nr_json_kv_uint(j, "tos", s->tos);
    nr_json_end_object(j);
}

int nr_tcptest_write_json(const char *path, const struct nr_tcptest *o, const struct nr_tcptest_result *r, int status,
                          const char *error, struct nr_error *err)
{
    FILE *f = nr__open(path, err);
    if (!f)
        return NR_E_IO;
    struct nr_json j;
    nr_json_init(&j, f);
    struct nr_result_meta meta = {"nr-tcptest", r->mode, r->started, status, error};
    nr_result_json_begin(&j, &meta);

    nr_json_key(&j, "hosts");
    nr_json_begin_object(&j);
    nr_json_kv_string(&j, "client", r->client_host);
    nr_json_kv_string(&j, "server", r->server_host[0] ? r->server_host : NULL);
    nr_json_end_object(&j);

    nr_json_key(&j, "options");
    nr_json_begin_object(&j);
    nr_json_kv_string(&j, "host", o->host);
    nr_json_kv_int(&j, "port", o->port);
    nr_json_kv_bool(&j, "blocking", !o->nonblocking);
    nr_json_kv_int(&j, "repetitions", r->kind == NR_RUN_SWEEP ? 1 : o->reps.max);
    if (r->kind != NR_RUN_SWEEP)
        nr_json_kv_int(&j, "repetitions_min", o->reps.min);
    if (r->kind == NR_RUN_SWEEP)
        nr_json_kv_int(&j, "exponent", o->exponent);
    else
        nr_json_kv_uint(&j, "message_size_bytes", r->size_bytes);
    nr_json_kv_uint(&j, "io_size_bytes", r->io_bytes);
    nr_json_kv_double(&j, "test_time_s", o->test_time_s);
    if (r->kind != NR_RUN_SWEEP)
        nr_json_kv_uint(&j, "iterations", r->iterations);
    nr_json_kv_uint(&j, "sndbuf_request_bytes", o->buffer);
    nr_json_kv_uint(&j, "rcvbuf_request_bytes", o->buffer);
    nr_json_kv_bool(&j, "nodelay", o->nodelay || r->kind == NR_RUN_LATENCY);
    nr_json_kv_bool(&j, "cork", o->cork);
    nr_json_kv_uint(&j, "mss_request_bytes", o->mss);
    nr_json_kv_uint(&j, "tos", nr_tcp_tos_byte(o->tos_level));
    nr_json_kv_bool(&j, "auth", o->auth_file != NULL);
    nr_json_end_object(&j);

    if (r->have_sock) {
        nr_json_key(&j, "socket");
        nr_json_begin_object(&j);
        nr__json_sock(&j, "client", &r->sock_client);
        nr__json_sock(&j, "server", &r->sock_server);
        nr_json_end_object(&j);
    }
    if (r->kind == NR_RUN_SWEEP) {
        nr_result_json_sweep(&j, r->reps, r->nreps, "client", "server");
    } else if (r->nreps > 0) {
        nr_result_json_reps(&j, r->reps, r->nreps, "client", "server");
        double *v = malloc(r->nreps * sizeof *v);
        struct nr_stats s;
        if (v) {
            for (size_t i = 0; i < r->nreps; i++)
                v[i] = r->kind == NR_RUN_LATENCY ? r->rtt_us[i] : r->reps[i].throughput_mbps;
            nr_stats_compute(v, r->nreps, &s);
            nr_json_key(&j, "summary");
            nr_json_begin_object(&j);
            nr_json_kv_stats(&j, r->kind == NR_RUN_LATENCY ? "rtt_us" : "throughput_mbps", &s);
            nr_json_end_object(&j);
            if (r->kind == NR_RUN_LATENCY)
                nr_result_json_latency(&j, r->size_bytes, r->reps, r->rtt_us, r->nrtt, &s);
            free(v);
        }
    }
    if (r->kind != NR_RUN_SWEEP && r->nreps > 0)
        nr_repeat_json(&j, &r->rule);
    if (r->calib.runs)
        nr_calib_json(&j, &r->calib);
    nr_json_key(&j, "bytes");
    nr_json_begin_object(&j);
    nr_json_kv_uint(&j, "client", r->bytes_client);
    nr_json_kv_uint(&j, "server", r->bytes_server);
    nr_json_end_object(&j);
    if (r->mon || r->have_server_log) {
        nr_json_key(&j, "sysmon");
        nr_json_begin_object(&j);
        if (r->mon)
            nr_sysmon_log_json(&j, "client", nr_sysmon_get_log(r->mon));
        if (r->have_server_log)
            nr_sysmon_log_json(&j, "server", &r->server_log);
        nr_json_end_object(&j);
    }
    nr_json_end_object(&j);
    int rc = nr_json_finish(&j);
    int crc = nr__close(f, path, err);
    if (rc < 0)
        return nr_error_set(err, rc, "writing JSON to '%s' failed", path);
    return crc;
}
