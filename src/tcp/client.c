/* nr-tcptest: the client side of the Hpcbench-style TCP experiments (tcptest parity).
 *
 * Experiments (see docs/tcp.md): stream (default) or ping-pong (-i), blocking (default) or non-blocking (-n),
 * fixed-size repetitions (-r, -m) or an exponential sweep (-e N), and round-trip latency (-a, -A SIZE); socket
 * options -b -N -C -M -q applied on both ends with the effective values reported for both.
 *
 * Methodology. The client drives every repetition over the control connection: START, wait for the server's
 * READY (the handshake before timing), then the timed loop on the data connection, which does nothing but send and
 * receive. The client's elapsed time ends when completion is proven: for stream tests when the server's DONE
 * arrives (it sends DONE after its last byte was received), for ping-pong and latency when the last returned byte
 * has arrived. One untimed message (per size in a sweep) is the warm-up, whether the count is calibrated or fixed
 * (--iterations). Before the measured repetitions the iteration count is calibrated (nr/calib.h): probe runs with a
 * growing count until one lasts a tenth of the test time, that count probed again so one stalled probe cannot
 * decide, then the count is scaled to the test time (-t); a repetition shorter than half the test time is run
 * again with the count its own rate gives (that count then holds for the rest), and a test whose repetitions
 * mostly lasted less than a tenth of the test time fails (exit 3) instead of reporting ok. A repetition run again
 * leaves one more server system-monitor row (-c). Process times (getrusage) of both sides are taken around each
 * repetition; system-monitor samples (-c) are taken only outside timed loops. Both sides count the payload bytes
 * they moved; a disagreement is a validation failure (exit 3).
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto.h"
#include "tcp.h"
#include "tcptest.h"
#include "xfer.h"

#define NR__LATENCY_DEFAULT_BYTES 64 /* -a */
#define NR__SYSLOG_INTERVAL_MAX_S 1.0 /* pre- and post-test system-monitor interval (at most the test time) */

static void nr__defaults(struct nr_tcptest *o)
{
    memset(o, 0, sizeof *o);
    o->host = "localhost";
    o->port = NR_TCP_DEFAULT_PORT;
    o->exponent = -1;
    o->reps = (struct nr_repeat){.min = 10, .max = 10};
    o->msg_size = 65536;
    o->io_size = 8192; /* every seed-002 header: "Data size of each read/write (Bytes): 8192" */
    o->test_time_s = 5.0;
    o->timeout_s = NR_TCP_TIMEOUT_DEFAULT;
}

/* Connection state of one run. */
struct nr__client {
    const struct nr_tcptest *o;
    struct nr_tcptest_result *r;
    struct nr_proto_conn ctl;
    int data_fd;
    int family;
    uint8_t mode;         /* NR_MODE_* */
    bool blocking;
    uint64_t io_bytes;    /* effective read/write size */
    uint64_t max_msg;     /* largest message of the test */
    char *buf;
    uint32_t next_index;  /* START index */
    bool bytes_mismatch;  /* a repetition's byte counts disagreed */
    char mismatch[160];
    unsigned char key[NR_TCP_AUTH_MAX];
    int key_len;
};

static int nr__handshake(struct nr__client *c, struct nr_error *err)
{
    struct nr_msg_welcome w; /* the protocol's handshake (proto.h); here only what the server told */
    int rc = nr_proto_client_handshake(&c->ctl, c->key, (size_t)c->key_len, c->r->client_host, &w, err);
    if (rc < 0)
        return rc;
    snprintf(c->r->server_host, sizeof c->r->server_host, "%s", w.host);
    if (c->max_msg > w.max_message_bytes)
        return nr_error_set(err, NR_E_RANGE, "message size %llu exceeds the server's limit %llu",
                            (unsigned long long)c->max_msg, (unsigned long long)w.max_message_bytes);
    if (c->io_bytes > w.max_io_bytes)
        return nr_error_set(err, NR_E_RANGE, "read/write size %llu exceeds the server's limit %u",
                            (unsigned long long)c->io_bytes, w.max_io_bytes);
    return NR_OK;
}

/* TEST_REQ, data connection, effective socket options of both sides. */
static int nr__setup_data(struct nr__client *c, const struct nr_tcp_sockopts *opts, struct nr_error *err)
{
    const struct nr_tcptest *o = c->o;
    union nr_msg m, in;
    memset(&m, 0, sizeof m);
    m.test_req.mode = c->mode;
    m.test_req.flags = (uint8_t)((opts->blocking ? NR_REQ_BLOCKING : 0) | (opts->nodelay ? NR_REQ_NODELAY : 0) |
                                 (opts->cork ? NR_REQ_CORK : 0) | (o->syslog ? NR_REQ_SYSMON : 0));
    m.test_req.tos = opts->tos;
    m.test_req.buffer_bytes = opts->buffer_bytes;
    m.test_req.mss_bytes = opts->mss_bytes;
    m.test_req.io_bytes = (uint32_t)c->io_bytes;
    m.test_req.max_message_bytes = c->max_msg;
    int rc = nr_proto_send(&c->ctl, NR_MSG_TEST_REQ, &m, err);
    if (rc < 0 || (rc = nr_proto_expect(&c->ctl, NR_MSG_TEST_ACK, 0, &in, "server", err)) < 0)
        return rc;
    /* Connect to the address the control connection reached, so both connections take the same path. */
    struct sockaddr_storage peer;
    socklen_t sl = sizeof peer;
    char addr[64];
    if (getpeername(c->ctl.fd, (struct sockaddr *)&peer, &sl) != 0)
        return nr_error_sys(err, NR_E_NET, "getpeername");
    nr_tcp_addr_str(&peer, addr, sizeof addr);
    c->data_fd = nr_tcp_connect(addr, in.test_ack.port, opts, o->timeout_s, &c->family, err);
    if (c->data_fd < 0)
        return c->data_fd;
    uint8_t cookie[NR_PROTO_COOKIE_BYTES];
    nr_proto_data_cookie(&c->ctl, in.test_ack.port, cookie);
    if ((rc = nr_tcp_write_all(c->data_fd, cookie, sizeof cookie, o->timeout_s, err)) < 0 ||
        (rc = nr_proto_expect(&c->ctl, NR_MSG_SOCKINFO, 0, &in, "server", err)) < 0)
        return rc;
    struct nr_tcp_sockinfo *s = &c->r->sock_server;
    s->rcvbuf_bytes = in.sockinfo.rcvbuf_bytes;
    s->sndbuf_bytes = in.sockinfo.sndbuf_bytes;
    s->mss_bytes = in.sockinfo.mss_bytes;
    s->blocking = in.sockinfo.blocking;
    s->nodelay = in.sockinfo.nodelay;
    s->cork = in.sockinfo.cork;
    s->tos = in.sockinfo.tos;
    /* No SO_RCVTIMEO/SO_SNDTIMEO on the data socket: the transfer watchdog (xfer.h) bounds every wait instead,
     * without arming a kernel timer per message. */
    if ((rc = nr_tcp_set_blocking(c->data_fd, opts->blocking, err)) < 0 ||
        (rc = nr_tcp_sockinfo_get(c->data_fd, c->family, &c->r->sock_client, err)) < 0)
        return rc;
    c->r->have_sock = true;
    /* The effective MSS is the request less the TCP options in use (up to 40 bytes); much less means ignored. */
    if (opts->mss_bytes && c->r->sock_client.mss_bytes + 40 < opts->mss_bytes)
        fprintf(stderr, "nr-tcptest: warning: -M %u ignored by the system (larger than the path allows or not "
                "accepted); MSS in use -- client: %u  server: %u\n", opts->mss_bytes, c->r->sock_client.mss_bytes,
                s->mss_bytes);
    if (!(c->buf = malloc(c->io_bytes)))
        return nr_error_set(err, NR_E_NOMEM, "cannot allocate a %llu-byte buffer", (unsigned long long)c->io_bytes);
    memset(c->buf, 0xa5, c->io_bytes);
    return NR_OK;
}

/* A repetition failed with *xerr. When the server stopped it, its ERROR message is waiting on the control
 * connection and says why (a limit, a timeout): report that rather than the reset the client saw. */
static int nr__peer_reason(struct nr__client *c, const struct nr_error *xerr, struct nr_error *err)
{
    if (xerr->code != NR_E_PEER) {
        struct nr_proto_hdr h;
        union nr_msg m;
        if (nr_proto_recv(&c->ctl, 1.0, &h, &m, NULL) == 0 && h.type == NR_MSG_ERROR)
            return nr_error_set(err, NR_E_PEER, "server: %s", m.error.text);
    }
    if (err && err->code == 0)
        *err = *xerr;
    return xerr->code;
}

/* One run of iterations messages of size bytes; measured runs are recorded and checked. */
static int nr__run_once(struct nr__client *c, uint64_t iterations, uint64_t size, bool measured, struct nr_rep *rep,
                        struct nr_error *err)
{
    union nr_msg m, done;
    memset(&m, 0, sizeof m);
    m.start.index = c->next_index++;
    m.start.flags = measured ? NR_START_MEASURED : 0;
    m.start.iterations = iterations;
    m.start.size_bytes = size;
    int rc = nr_proto_send(&c->ctl, NR_MSG_START, &m, err);
    if (rc < 0 || (rc = nr_proto_expect(&c->ctl, NR_MSG_READY, 0, &done, "server", err)) < 0)
        return rc;
    struct nr_xfer x = {.fd = c->data_fd, .blocking = c->blocking, .io_bytes = (size_t)c->io_bytes, .buf = c->buf,
                        .idle_ms = (int)(c->o->timeout_s * 1000), .nodelay = c->r->sock_client.nodelay,
                        .cork = c->r->sock_client.cork};
    struct nr_error xerr; /* a data-connection failure may only be the echo of a failure the server reports */
    nr_error_clear(&xerr);
    struct nr_cpu_times c0, c1;
    nr_cpu_times_now(&c0);
    uint64_t t0 = nr_now_ns(), t1;
    if (c->mode == NR_MODE_STREAM) {
        rc = nr_xfer_send(&x, iterations, size, &xerr);
        if (rc == 0)
            rc = nr_proto_expect(&c->ctl, NR_MSG_DONE, 0, &done, "server", &xerr);
        t1 = nr_now_ns();
    } else {
        if (c->mode == NR_MODE_PINGPONG && !c->blocking)
            rc = nr_xfer_duplex(&x, iterations, size, &xerr);
        else
            rc = nr_xfer_pingpong(&x, iterations, size, true, &xerr);
        t1 = nr_now_ns();
        if (rc == 0)
            rc = nr_proto_expect(&c->ctl, NR_MSG_DONE, 0, &done, "server", &xerr);
    }
    nr_cpu_times_now(&c1);
    if (rc < 0)
        return nr__peer_reason(c, &xerr, err);
    struct nr_cpu_times d = nr_cpu_times_diff(c1, c0);
    uint64_t expect = iterations * size * (c->mode == NR_MODE_STREAM ? 1 : 2);
    memset(rep, 0, sizeof *rep);
    rep->size_bytes = size;
    rep->iterations = iterations;
    rep->bytes_local = x.bytes;
    rep->bytes_peer = done.done.bytes;
    rep->local.elapsed_s = (double)(t1 - t0) * 1e-9;
    rep->local.user_s = d.user_s;
    rep->local.sys_s = d.sys_s;
    rep->peer.elapsed_s = (double)done.done.elapsed_ns * 1e-9;
    rep->peer.user_s = (double)done.done.user_us * 1e-6;
    rep->peer.sys_s = (double)done.done.sys_us * 1e-6;
    rep->throughput_mbps = nr_mbps(expect, rep->local.elapsed_s);
    if (measured) {
        c->r->bytes_client += x.bytes;
        c->r->bytes_server += done.done.bytes;
        if ((x.bytes != expect || done.done.bytes != expect) && !c->bytes_mismatch) {
            c->bytes_mismatch = true;
            snprintf(c->mismatch, sizeof c->mismatch,
                     "byte counts disagree: expected %llu, client moved %llu, server moved %llu",
                     (unsigned long long)expect, (unsigned long long)x.bytes, (unsigned long long)done.done.bytes);
        }
    }
    return NR_OK;
}

/* One calibration probe: an unmeasured run of n messages. */
struct nr__probe {
    struct nr__client *c;
    uint64_t size;
};

static int nr__probe_run(void *ctx, uint64_t n, double *elapsed_s, struct nr_error *err)
{
    const struct nr__probe *p = ctx;
    struct nr_rep probe;
    int rc = nr__run_once(p->c, n, p->size, false, &probe, err);
    if (rc == NR_OK)
        *elapsed_s = probe.local.elapsed_s;
    return rc;
}

/* The largest count of size-byte messages one repetition may have (the server's limits). */
static uint64_t nr__cap(uint64_t size)
{
    return NR_TCP_TOTAL_MAX / size < NR_TCP_ITER_MAX ? NR_TCP_TOTAL_MAX / size : NR_TCP_ITER_MAX;
}

/* Iterations of size bytes that take about the calibration's target (nr_calibrate, the same rule as nr-mpitest). */
static int nr__calibrate(struct nr__client *c, uint64_t size, uint64_t *iterations, struct nr_error *err)
{
    struct nr__probe p = {c, size};
    c->r->calib.cap = nr__cap(size);
    int rc = nr_calibrate(nr__probe_run, &p, &c->r->calib, iterations, err);
    if (rc == NR_OK && c->o->verbose)
        fprintf(stderr, "nr-tcptest: %llu bytes: %llu iterations for %.3f s\n", (unsigned long long)size,
                (unsigned long long)*iterations, c->r->calib.target_s);
    return rc;
}

/* One measured repetition of *n messages into rep. A repetition of a calibrated count that lasted less than half
 * the target is discarded (its bytes taken off the totals) and run again with the count its own rate gives
 * (nr_calib_recheck; *n is updated). */
static int nr__measured_run(struct nr__client *c, uint64_t *n, uint64_t size, struct nr_rep *rep,
                            struct nr_error *err)
{
    struct nr_tcptest_result *r = c->r;
    int rechecks = 0, rc;
    for (;;) {
        /* The client's monitor row starts here; the server's starts when it receives the measured START. */
        if (r->mon && (rc = nr_sysmon_mark(r->mon, err)) < 0)
            return rc;
        if ((rc = nr__run_once(c, *n, size, true, rep, err)) < 0)
            return rc;
        uint64_t next;
        if (!nr_calib_recheck(&r->calib, *n, rep->local.elapsed_s, &rechecks, &next))
            break;
        if (c->o->verbose)
            fprintf(stderr, "nr-tcptest: %llu bytes: %llu iterations took %.3g s of the %.3g-s target: run again "
                    "with %llu\n", (unsigned long long)size, (unsigned long long)*n, rep->local.elapsed_s,
                    r->calib.target_s, (unsigned long long)next);
        r->bytes_client -= rep->bytes_local;
        r->bytes_server -= rep->bytes_peer;
        *n = next;
    }
    nr_calib_record(&r->calib, *n, rep->local.elapsed_s);
    if (r->mon && (rc = nr_sysmon_record(r->mon, err)) < 0)
        return rc;
    return NR_OK;
}

/* System-monitor sample on both sides (SAMPLE mark/record), outside any timed loop. */
static int nr__sample_both(struct nr__client *c, uint8_t action, struct nr_error *err)
{
    union nr_msg m;
    m.sample.action = action;
    int rc = action == NR_SAMPLE_MARK ? nr_sysmon_mark(c->r->mon, err) : nr_sysmon_record(c->r->mon, err);
    if (rc < 0 || (rc = nr_proto_send(&c->ctl, NR_MSG_SAMPLE, &m, err)) < 0)
        return rc;
    return nr_proto_expect(&c->ctl, NR_MSG_READY, 0, &m, "server", err);
}

static int nr__measure(struct nr__client *c, struct nr_error *err)
{
    const struct nr_tcptest *o = c->o;
    struct nr_tcptest_result *r = c->r;
    int rc;
    size_t nruns = r->kind == NR_RUN_SWEEP ? (size_t)o->exponent + 1 : (size_t)o->reps.max;
    if (!(r->reps = calloc(nruns, sizeof *r->reps)) || !(r->samples = calloc(nruns, sizeof *r->samples)))
        return nr_error_set(err, NR_E_NOMEM, "out of memory");
    if (r->kind == NR_RUN_LATENCY && !(r->rtt_us = calloc(nruns, sizeof *r->rtt_us)))
        return nr_error_set(err, NR_E_NOMEM, "out of memory");
    uint64_t iterations = (uint64_t)o->iterations;
    /* a latency test's -t is the whole test at the minimum count of trials */
    double target = iterations ? 0 : r->kind == NR_RUN_LATENCY ? o->test_time_s / o->reps.min : o->test_time_s;
    r->rule = o->reps;
    nr_calib_init(&r->calib, target, nr__cap(r->kind == NR_RUN_SWEEP ? 1 : r->size_bytes));
    struct nr_rep warm;
    /* Warm-up: one untimed message before anything timed, also with --iterations (no calibration). */
    if (r->kind != NR_RUN_SWEEP && (rc = nr__run_once(c, 1, r->size_bytes, false, &warm, err)) < 0)
        return rc;
    if (r->kind != NR_RUN_SWEEP && iterations == 0 && (rc = nr__calibrate(c, r->size_bytes, &iterations, err)) < 0)
        return rc;
    for (size_t i = 0; i < nruns; i++) {
        uint64_t size = r->kind == NR_RUN_SWEEP ? (uint64_t)1 << i : r->size_bytes;
        uint64_t n = iterations;
        if (r->kind == NR_RUN_SWEEP && (rc = nr__run_once(c, 1, size, false, &warm, err)) < 0)
            return rc;
        if (r->kind == NR_RUN_SWEEP && n == 0 && (rc = nr__calibrate(c, size, &n, err)) < 0)
            return rc;
        r->calib.cap = nr__cap(size);
        /* Every repetition of a calibrated count is re-checked, not only the first: a machine that was busy while
         * the probes and the first repetition ran and then fell idle made the later ones last 6 % of the target. */
        if ((rc = nr__measured_run(c, &n, size, &r->reps[i], err)) < 0)
            return rc;
        if (r->kind != NR_RUN_SWEEP)
            iterations = n;       /* a re-checked count holds for the repetitions that follow */
        r->iterations = iterations;
        if (r->kind == NR_RUN_LATENCY)
            r->rtt_us[i] = r->reps[i].local.elapsed_s / (double)n * 1e6;
        r->nreps = i + 1;
        r->nrtt = r->kind == NR_RUN_LATENCY ? i + 1 : 0;
        nr_tcptest_print_run(r, i);
        r->samples[i] = r->kind == NR_RUN_LATENCY ? r->rtt_us[i] : r->reps[i].throughput_mbps;
        if (r->kind != NR_RUN_SWEEP && !nr_repeat_more(&r->rule, r->samples, r->nreps))
            break;
    }
    nr_tcptest_print_end(r);
    return NR_OK;
}

/* The whole conversation with the server. */
static int nr__run(struct nr__client *c, struct nr_error *err)
{
    const struct nr_tcptest *o = c->o;
    struct nr_tcp_sockopts opts = {(uint32_t)o->buffer, (uint32_t)o->mss, o->nodelay != 0, o->cork != 0,
                                   nr_tcp_tos_byte(o->tos_level), !o->nonblocking};
    if (c->mode == NR_MODE_LATENCY)
        opts.nodelay = true; /* a round-trip test must not wait for Nagle's algorithm (NPtcp does the same) */
    int family = 0;
    int fd = nr_tcp_connect(o->host, (uint16_t)o->port, NULL, o->timeout_s, &family, err);
    if (fd < 0)
        return fd;
    nr_proto_conn_init(&c->ctl, fd, o->timeout_s);
    int rc = nr__handshake(c, err);
    if (rc < 0 || (rc = nr__setup_data(c, &opts, err)) < 0)
        return rc;
    double interval = o->test_time_s < NR__SYSLOG_INTERVAL_MAX_S ? o->test_time_s : NR__SYSLOG_INTERVAL_MAX_S;
    if (o->syslog) {
        if ((rc = nr_sysmon_open(&c->r->mon, err)) < 0 || (rc = nr__sample_both(c, NR_SAMPLE_MARK, err)) < 0)
            return rc;
        nr_sleep_s(interval);
        if ((rc = nr__sample_both(c, NR_SAMPLE_RECORD, err)) < 0)
            return rc;
    }
    if ((rc = nr__measure(c, err)) < 0)
        return rc;
    if (o->syslog) {
        if ((rc = nr__sample_both(c, NR_SAMPLE_MARK, err)) < 0)
            return rc;
        nr_sleep_s(interval);
        if ((rc = nr__sample_both(c, NR_SAMPLE_RECORD, err)) < 0)
            return rc;
    }
    if ((rc = nr_proto_send(&c->ctl, NR_MSG_FINISH, NULL, err)) < 0)
        return rc;
    union nr_msg in;
    if (o->syslog) {
        if ((rc = nr_proto_expect(&c->ctl, NR_MSG_SYSLOG, 0, &in, "server", err)) < 0 ||
            (rc = nr_sysmon_log_parse(in.syslog.text, in.syslog.length, &c->r->server_log, err)) < 0)
            return rc;
        c->r->have_server_log = true;
    } else if ((rc = nr_proto_expect(&c->ctl, NR_MSG_BYE, 0, &in, "server", err)) < 0) {
        return rc;
    }
    if (c->bytes_mismatch)
        return nr_error_set(err, NR_E_VALIDATE, "%s", c->mismatch);
    return nr_calib_verdict(&c->r->calib, err);
}

/* Combinations the option table cannot express. */
static int nr__check_options(const struct nr_tcptest *o, struct nr_error *err)
{
    bool lat = o->latency || o->latency_size;
    if (lat && o->exponent >= 0)
        return nr_error_set(err, NR_E_USAGE, "-a/-A (latency) and -e (exponential) cannot be combined");
    if (lat && o->pingpong)
        return nr_error_set(err, NR_E_USAGE, "-a/-A (latency) is a ping-pong test already: drop -i");
    if (o->syslog && !o->output && !o->json)
        return nr_error_set(err, NR_E_USAGE, "-c (system log) needs -o FILE (FILE.c_log, FILE.s_log) or --json FILE");
    if (o->plot && !o->output)
        return nr_error_set(err, NR_E_USAGE, "-P (plot) needs -o FILE (it writes FILE.plot)");
    if (o->plot && lat)
        return nr_error_set(err, NR_E_USAGE, "-P (plot) applies to throughput tests, not to -a/-A");
    if (o->iterations && o->exponent >= 0)
        return nr_error_set(err, NR_E_USAGE, "--iterations applies to fixed-size and latency tests, not to -e");
    if (nr_repeat_sequential(&o->reps) && o->exponent >= 0)
        return nr_error_set(err, NR_E_USAGE, "-r MIN:MAX stops repetitions of one size; -e runs each size once");
    return NR_OK;
}

static const char nr__description[] =
    "TCP throughput and latency tests against nr-tcpserver (Hpcbench tcptest parity).\n"
    "Default: blocking stream test, 10 repetitions of 5 s with 64 KiB messages. Sizes take k, M, G (x1024).";

static const char nr__epilog[] =
    "Examples (docs/tcp.md):\n"
    "  nr-tcptest -h mk4 -r 5 -o output          blocking stream, 5 repetitions, Hpcbench result file\n"
    "  nr-tcptest -in -h mk4 -r 5 -o out.txt     non-blocking ping-pong\n"
    "  nr-tcptest -h mk4 -e 25 -i -o out.txt     ping-pong sweep 1 byte .. 32 MiB\n"
    "  nr-tcptest -h mk4 -b 500k -N -q 2 -M 8k   socket options\n"
    "  nr-tcptest -ah mk4                        64-byte round-trip time, 10 trials\n"
    "  nr-tcptest -ch mk4 -r 5 -o output -P      with system logs and a gnuplot file\n"
    "Exit status: 0 ok, 1 runtime failure, 2 usage error, 3 validation failure (byte counts disagree).";

int main(int argc, char **argv)
{
    struct nr_tcptest o;
    nr__defaults(&o);
    const struct nr_opt opts[] = {
        {NR_OPT_SECTION, 0, NULL, NULL, NULL, "Connection", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 'h', "host", &o.host, "HOST", "server host name or address", 0, 0, NULL, NULL},
        {NR_OPT_INT, 'p', "port", &o.port, "PORT", "server port", 1, 65535, NULL, NULL},
        {NR_OPT_STRING, 0, "auth-file", &o.auth_file, "FILE", "shared secret the server requires", 0, 0, NULL, "none"},
        {NR_OPT_DOUBLE, 0, "timeout", &o.timeout_s, "SECONDS", "give up when the server is idle this long", 1,
         NR_TCP_TIMEOUT_MAX, NULL, NULL},
        {NR_OPT_SECTION, 0, NULL, NULL, NULL, "Experiment", 0, 0, NULL, NULL},
        {NR_OPT_FLAG, 'i', "pingpong", &o.pingpong, NULL, "ping-pong (bidirectional) instead of stream", 0, 0, NULL,
         NULL},
        {NR_OPT_FLAG, 'n', "nonblocking", &o.nonblocking, NULL, "non-blocking sockets (poll based)", 0, 0, NULL, NULL},
        {NR_OPT_INT, 'e', "exponential", &o.exponent, "N", "sweep message sizes 1, 2, 4 .. 2^N bytes", 0,
         NR_TCP_EXP_MAX, NULL, "off"},
        {NR_OPT_FLAG, 'a', "latency", &o.latency, NULL, "round-trip time test with 64-byte messages", 0, 0, NULL,
         NULL},
        {NR_OPT_SIZE, 'A', "latency-size", &o.latency_size, "SIZE", "round-trip time test with SIZE-byte messages", 1,
         NR_TCP_MSG_MAX, NULL, "off"},
        {NR_OPT_CALL, 'r', "repetitions", &o.reps, "N|MIN:MAX",
         "repetitions (latency: trials): N, or from MIN to MAX until the median is known to --precision", 1,
         NR_TCP_REPS_MAX, nr_repeat_parse_opt, "10"},
        {NR_OPT_DOUBLE, 0, "precision", &o.reps.precision, "FRACTION",
         "with -r MIN:MAX: stop once the median's 90 % interval is within FRACTION of it", 0.0001, 0.5, NULL,
         "0.025"},
        {NR_OPT_SIZE, 'm', "message-size", &o.msg_size, "SIZE", "message size of fixed-size tests", 1, NR_TCP_MSG_MAX,
         NULL, NULL},
        {NR_OPT_SIZE, 'd', "io-size", &o.io_size, "SIZE", "largest single read/write", 1, NR_TCP_IO_MAX, NULL, NULL},
        {NR_OPT_DOUBLE, 't', "time", &o.test_time_s, "SECONDS",
         "test time each repetition is calibrated to (latency: the whole test)", NR_TCP_TIME_MIN, NR_TCP_TIME_MAX,
         NULL, NULL},
        {NR_OPT_INT, 0, "iterations", &o.iterations, "N", "fixed iterations per repetition instead of calibrating", 1,
         2000000000, NULL, "calibrate"},
        {NR_OPT_SECTION, 0, NULL, NULL, NULL, "Socket options (applied on both ends)", 0, 0, NULL, NULL},
        {NR_OPT_SIZE, 'b', "buffer", &o.buffer, "SIZE", "socket send and receive buffer size", 1, NR_TCP_BUF_MAX, NULL,
         "system"},
        {NR_OPT_FLAG, 'N', "nodelay", &o.nodelay, NULL, "TCP_NODELAY (always on for -a/-A)", 0, 0, NULL, NULL},
        {NR_OPT_FLAG, 'C', "cork", &o.cork, NULL, "TCP_CORK", 0, 0, NULL, NULL},
        {NR_OPT_SIZE, 'M', "mss", &o.mss, "SIZE", "TCP maximum segment size", NR_TCP_MSS_MIN, NR_TCP_MSS_MAX, NULL,
         "system"},
        {NR_OPT_INT, 'q', "tos", &o.tos_level, "N",
         "IP TOS: 1 min-delay, 2 max-throughput, 3 max-reliability, 4 min-cost", 0, NR_TCP_TOS_LEVEL_MAX, NULL,
         "0 = system"},
        {NR_OPT_SECTION, 0, NULL, NULL, NULL, "Output", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 'o', "output", &o.output, "FILE", "write the Hpcbench result file", 0, 0, NULL, "none"},
        {NR_OPT_FLAG, 'c', "syslog", &o.syslog, NULL, "system logs of both sides: FILE.c_log, FILE.s_log", 0, 0, NULL,
         NULL},
        {NR_OPT_FLAG, 'P', "plot", &o.plot, NULL, "gnuplot script FILE.plot (with -o)", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "json", &o.json, "FILE", "machine-readable results (docs/json-schema.md)", 0, 0, NULL,
         "none"},
        {NR_OPT_COUNT, 'v', "verbose", &o.verbose, NULL, "diagnostics on stderr", 0, 0, NULL, NULL},
        {NR_OPT_END, 0, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL},
    };
    const struct nr_opt_set set = {"nr-tcptest", "[OPTIONS]", nr__description, opts, nr__epilog};
    struct nr_error err;
    nr_error_clear(&err);
    int rc = nr_opt_parse(&set, argc, argv, NULL, &err);
    if (rc == NR_OPT_HELP) {
        nr_opt_help(&set, stdout);
        return NR_EXIT_OK;
    }
    if (rc == NR_OPT_VERSION) {
        printf("nr-tcptest %s\n", nr_version());
        return NR_EXIT_OK;
    }
    if (rc == 0)
        rc = nr__check_options(&o, &err);
    if (rc == 0)
        rc = nr_repeat_check(&o.reps, "-r/--repetitions", "--precision", &err);
    if (rc < 0) {
        nr_error_report("nr-tcptest", &err);
        return nr_exit_status(rc);
    }
    signal(SIGPIPE, SIG_IGN);

    struct nr_tcptest_result r;
    memset(&r, 0, sizeof r);
    nr_sysmon_log_init(&r.server_log);
    r.started = time(NULL);
    nr_hostname(r.client_host, sizeof r.client_host);
    struct nr__client c;
    memset(&c, 0, sizeof c);
    c.o = &o;
    c.r = &r;
    c.data_fd = -1;
    c.ctl.fd = -1;
    c.blocking = !o.nonblocking;
    if (o.latency || o.latency_size) {
        r.kind = NR_RUN_LATENCY;
        r.mode = "latency";
        c.mode = NR_MODE_LATENCY;
        r.size_bytes = o.latency_size ? o.latency_size : NR__LATENCY_DEFAULT_BYTES;
        c.max_msg = r.size_bytes;
    } else if (o.exponent >= 0) {
        r.kind = NR_RUN_SWEEP;
        r.mode = o.pingpong ? "pingpong-exp" : "stream-exp";
        c.mode = o.pingpong ? NR_MODE_PINGPONG : NR_MODE_STREAM;
        c.max_msg = (uint64_t)1 << o.exponent;
    } else {
        r.kind = NR_RUN_FIXED;
        r.mode = o.pingpong ? "pingpong" : "stream";
        c.mode = o.pingpong ? NR_MODE_PINGPONG : NR_MODE_STREAM;
        r.size_bytes = o.msg_size;
        c.max_msg = o.msg_size;
    }
    c.io_bytes = o.io_size < c.max_msg ? o.io_size : c.max_msg;
    r.io_bytes = c.io_bytes;
    if (o.auth_file && (c.key_len = nr_tcp_read_secret(o.auth_file, c.key, &err)) < 0) {
        nr_error_report("nr-tcptest", &err);
        return nr_exit_status(c.key_len);
    }

    rc = nr__run(&c, &err);
    if (c.data_fd >= 0)
        close(c.data_fd);
    if (c.ctl.fd >= 0)
        close(c.ctl.fd);
    nr_proto_conn_free(&c.ctl);
    free(c.buf);

    /* Results (including a validation failure, which still has complete data) go out before the error. */
    struct nr_error werr;
    nr_error_clear(&werr);
    bool complete = rc == 0 || rc == NR_E_VALIDATE;
    if (complete && r.kind != NR_RUN_LATENCY)
        printf("Test done!\n");
    if (complete && o.output) {
        if (nr_tcptest_write_output(o.output, &o, &r, &werr) == 0 && o.syslog)
            nr_tcptest_write_syslogs(o.output, &r, &werr);
        if (werr.code == 0 && o.plot)
            nr_tcptest_write_plot(o.output, &o, &r, &werr);
        if (werr.code == 0 && r.kind != NR_RUN_LATENCY) {
            printf("Test-result: \"%s\"", o.output);
            if (o.syslog)
                printf("  Local-syslog: \"%s.c_log\"  server-syslog: \"%s.s_log\"", o.output, o.output);
            printf("\n");
        }
    }
    fflush(stdout);
    char msg[512] = "";
    if (rc < 0)
        nr_error_message(&err, msg, sizeof msg);
    if (o.json)
        nr_tcptest_write_json(o.json, &o, &r, rc, msg, &werr);
    if (rc < 0)
        nr_error_report("nr-tcptest", &err);
    if (werr.code != 0) {
        nr_error_report("nr-tcptest", &werr);
        if (rc == 0)
            rc = werr.code;
    }
    nr_sysmon_close(r.mon);
    nr_sysmon_log_free(&r.server_log);
    free(r.reps);
    free(r.samples);
    free(r.rtt_us);
    return nr_exit_status(rc);
}
