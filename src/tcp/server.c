/* nr-tcpserver: the server side of the Hpcbench-style TCP experiments (tcpserver parity).
 *
 * It listens on one port (default 5677, -p 0 picks a free one and prints it), serves one client test after
 * another and never exits because of a bad client: every wait has a timeout, every size and duration the client
 * asks for is checked against the server's limits, and any failure is sent back to the client as an ERROR message
 * and logged on stderr before the server returns to accept(). With --auth-file only clients holding the same
 * shared secret are served (HMAC-SHA-256 challenge/response, see proto.h).
 *
 * Per test the server opens a separate data listener (ephemeral port, the requested socket options applied before
 * listen() so buffer sizes and MSS take effect at connection set-up), accepts the one data connection that
 * presents the cookie of this test, and then runs the repetitions the client drives over the control connection.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nr/core.h"
#include "proto.h"
#include "sock.h"
#include "tcp.h"
#include "xfer.h"

/* Server state: options (with the flag that sets each) and what lives across tests. */
struct nr_tcpserver {
    int port;               /* -p/--port, 0 = pick a free port */
    const char *bind_addr;  /* -B/--bind, NULL = all addresses */
    int verbose;            /* -v/--verbose */
    const char *auth_file;  /* --auth-file */
    double idle_timeout_s;  /* --timeout: longest wait for any message or data */
    double max_rep_s;       /* --max-rep-time: longest repetition served */
    int max_tests;          /* --max-tests: exit after this many sessions (0 = serve forever) */
    unsigned char key[NR_TCP_AUTH_MAX]; /* shared secret */
    int key_len;            /* 0 = no authentication */
    char host[NR_HOST_MAX]; /* our host name, sent in HELLO */
};

static void nr__srv_defaults(struct nr_tcpserver *s)
{
    memset(s, 0, sizeof *s);
    s->port = NR_TCP_DEFAULT_PORT;
    s->idle_timeout_s = NR_TCP_TIMEOUT_DEFAULT;
    s->max_rep_s = NR_TCP_REP_TIME_DEFAULT;
}

/* One test: everything that is released when the session ends. */
struct nr__session {
    struct nr_proto_conn ctl;
    int data_fd;
    int data_listen_fd;
    char *buf;
    struct nr_sysmon *mon;
    char peer[64];
};

static void nr__session_close(struct nr__session *ss)
{
    if (ss->data_fd >= 0)
        close(ss->data_fd);
    if (ss->data_listen_fd >= 0)
        close(ss->data_listen_fd);
    free(ss->buf);
    nr_sysmon_close(ss->mon);
    nr_proto_conn_free(&ss->ctl);
}

static int nr__handshake(const struct nr_tcpserver *s, struct nr__session *ss, struct nr_error *err)
{
    union nr_msg m, in;
    uint8_t server_nonce[NR_PROTO_NONCE_BYTES];
    int rc = nr_tcp_random(server_nonce, sizeof server_nonce, err);
    if (rc < 0)
        return rc;
    memset(&m, 0, sizeof m);
    m.hello.flags = s->key_len ? NR_HELLO_AUTH : 0;
    memcpy(m.hello.nonce, server_nonce, sizeof server_nonce);
    snprintf(m.hello.host, sizeof m.hello.host, "%s", s->host);
    if ((rc = nr_proto_send(&ss->ctl, NR_MSG_HELLO, &m, err)) < 0)
        return rc;
    if ((rc = nr_proto_expect(&ss->ctl, NR_MSG_CLIENT_HELLO, 0, &in, "client", err)) < 0)
        return rc;
    memset(&m, 0, sizeof m);
    if (s->key_len) {
        uint8_t want[NR_SHA256_BYTES];
        if (!(in.client_hello.flags & NR_CHELLO_MAC))
            return nr_error_set(err, NR_E_AUTH, "this server requires authentication: use --auth-file");
        nr_proto_auth_mac(s->key, (size_t)s->key_len, "client", server_nonce, in.client_hello.nonce, want);
        if (!nr_mem_equal_ct(want, in.client_hello.mac, sizeof want))
            return nr_error_set(err, NR_E_AUTH, "authentication failed: the shared secrets differ");
        nr_proto_auth_mac(s->key, (size_t)s->key_len, "server", server_nonce, in.client_hello.nonce, m.welcome.mac);
    }
    m.welcome.max_message_bytes = NR_TCP_MSG_MAX;
    m.welcome.max_io_bytes = NR_TCP_IO_MAX;
    m.welcome.max_rep_time_s = (uint32_t)s->max_rep_s;
    if (s->verbose)
        fprintf(stderr, "nr-tcpserver: client %s (%s) connected%s\n", in.client_hello.host, ss->peer,
                s->key_len ? ", authenticated" : "");
    return nr_proto_send(&ss->ctl, NR_MSG_WELCOME, &m, err);
}

/* Check a TEST_REQ against the server's limits. */
static int nr__check_request(const struct nr_msg_test_req *r, struct nr_error *err)
{
    if (r->io_bytes > NR_TCP_IO_MAX)
        return nr_error_set(err, NR_E_RANGE, "read/write size %u exceeds the server limit %u", r->io_bytes,
                            NR_TCP_IO_MAX);
    if (r->max_message_bytes > NR_TCP_MSG_MAX)
        return nr_error_set(err, NR_E_RANGE, "message size %llu exceeds the server limit %u",
                            (unsigned long long)r->max_message_bytes, NR_TCP_MSG_MAX);
    if (r->buffer_bytes > NR_TCP_BUF_MAX)
        return nr_error_set(err, NR_E_RANGE, "socket buffer %u exceeds the server limit %u", r->buffer_bytes,
                            NR_TCP_BUF_MAX);
    if (r->mss_bytes && (r->mss_bytes < NR_TCP_MSS_MIN || r->mss_bytes > NR_TCP_MSS_MAX))
        return nr_error_set(err, NR_E_RANGE, "MSS %u is outside [%d, %d]", r->mss_bytes, NR_TCP_MSS_MIN,
                            NR_TCP_MSS_MAX);
    return NR_OK;
}

/* Open the data listener, tell the client where it is, accept the connection that shows our cookie. */
static int nr__open_data(const struct nr_tcpserver *s, struct nr__session *ss, const struct nr_tcp_sockopts *opts,
                         int *family, struct nr_error *err)
{
    struct sockaddr_storage local;
    socklen_t sl = sizeof local;
    char addr[64];
    if (getsockname(ss->ctl.fd, (struct sockaddr *)&local, &sl) != 0)
        return nr_error_sys(err, NR_E_NET, "getsockname");
    nr_tcp_addr_str(&local, addr, sizeof addr);
    uint16_t port = 0;
    int fd = nr_tcp_listen(addr, 0, opts, 1, &port, family, err);
    if (fd < 0)
        return fd;
    ss->data_listen_fd = fd;
    union nr_msg m;
    memset(&m, 0, sizeof m);
    m.test_ack.port = port;
    int rc = nr_tcp_random(m.test_ack.cookie, NR_PROTO_COOKIE_BYTES, err);
    if (rc == 0)
        rc = nr_proto_send(&ss->ctl, NR_MSG_TEST_ACK, &m, err);
    if (rc < 0)
        return rc;
    double deadline = nr_now_s() + s->idle_timeout_s;
    for (;;) {
        double left = deadline - nr_now_s();
        if (left <= 0)
            return nr_error_set(err, NR_E_TIMEOUT, "the client did not open the data connection within %.0f s",
                                s->idle_timeout_s);
        struct sockaddr_storage peer;
        int dfd = nr_tcp_accept(ss->data_listen_fd, left, &peer, err);
        if (dfd < 0)
            return dfd;
        uint8_t cookie[NR_PROTO_COOKIE_BYTES];
        struct nr_error cerr;
        nr_error_clear(&cerr);
        if (nr_tcp_read_all(dfd, cookie, sizeof cookie, left < 5.0 ? left : 5.0, &cerr) == 0 &&
            nr_mem_equal_ct(cookie, m.test_ack.cookie, sizeof cookie)) {
            ss->data_fd = dfd;
            break;
        }
        if (s->verbose)
            fprintf(stderr, "nr-tcpserver: dropped a data connection without the test's cookie\n");
        close(dfd); /* a stray or hostile connection: keep waiting for the right one */
    }
    close(ss->data_listen_fd);
    ss->data_listen_fd = -1;
    return NR_OK;
}

/* One repetition as the client asked for it in START. */
static int nr__serve_rep(const struct nr_tcpserver *s, struct nr__session *ss, const struct nr_msg_test_req *r,
                         const struct nr_msg_start *st, struct nr_error *err)
{
    if (st->size_bytes > r->max_message_bytes)
        return nr_error_set(err, NR_E_RANGE, "message size %llu exceeds the %llu bytes announced for this test",
                            (unsigned long long)st->size_bytes, (unsigned long long)r->max_message_bytes);
    if (st->iterations > NR_TCP_ITER_MAX || st->iterations > NR_TCP_TOTAL_MAX / st->size_bytes)
        return nr_error_set(err, NR_E_RANGE, "%llu iterations of %llu bytes exceed the server limit of %llu bytes",
                            (unsigned long long)st->iterations, (unsigned long long)st->size_bytes,
                            (unsigned long long)NR_TCP_TOTAL_MAX);
    int measured_row = ss->mon && (st->flags & NR_START_MEASURED);
    int rc;
    if (measured_row && (rc = nr_sysmon_mark(ss->mon, err)) < 0)
        return rc;
    struct nr_xfer x = {ss->data_fd, (r->flags & NR_REQ_BLOCKING) != 0, r->io_bytes, ss->buf,
                        (int)(s->idle_timeout_s * 1000), 0, 0, (r->flags & NR_REQ_NODELAY) != 0,
                        (r->flags & NR_REQ_CORK) != 0};
    struct nr_cpu_times c0, c1;
    nr_cpu_times_now(&c0);
    if ((rc = nr_proto_send(&ss->ctl, NR_MSG_READY, NULL, err)) < 0)
        return rc;
    uint64_t t0 = nr_now_ns();
    x.deadline_ns = t0 + (uint64_t)(s->max_rep_s * 1e9);
    uint64_t total = st->iterations * st->size_bytes;
    if (r->mode == NR_MODE_STREAM)
        rc = nr_xfer_recv(&x, total, err);
    else if (r->mode == NR_MODE_PINGPONG && !x.blocking)
        rc = nr_xfer_echo(&x, total, err);
    else
        rc = nr_xfer_pingpong(&x, st->iterations, st->size_bytes, false, err);
    uint64_t t1 = nr_now_ns();
    nr_cpu_times_now(&c1);
    if (rc < 0)
        return rc;
    struct nr_cpu_times d = nr_cpu_times_diff(c1, c0);
    union nr_msg m;
    memset(&m, 0, sizeof m);
    m.done.bytes = x.bytes;
    m.done.elapsed_ns = t1 - t0;
    m.done.user_us = (uint64_t)(d.user_s * 1e6);
    m.done.sys_us = (uint64_t)(d.sys_s * 1e6);
    if ((rc = nr_proto_send(&ss->ctl, NR_MSG_DONE, &m, err)) < 0)
        return rc;
    if (measured_row && (rc = nr_sysmon_record(ss->mon, err)) < 0)
        return rc;
    return NR_OK;
}

static int nr__send_syslog(struct nr__session *ss, struct nr_error *err)
{
    size_t len = 0;
    char *text = nr_sysmon_log_serialize(nr_sysmon_get_log(ss->mon), &len);
    if (!text)
        return nr_error_set(err, NR_E_NOMEM, "cannot serialise the system log");
    int rc;
    if (len > NR_PROTO_SYSLOG_MAX) {
        rc = nr_error_set(err, NR_E_RANGE, "system log of %zu bytes exceeds the protocol limit %u", len,
                          NR_PROTO_SYSLOG_MAX);
    } else {
        union nr_msg m;
        m.syslog.text = text;
        m.syslog.length = (uint32_t)len;
        rc = nr_proto_send(&ss->ctl, NR_MSG_SYSLOG, &m, err);
    }
    free(text);
    return rc;
}

static int nr__serve(const struct nr_tcpserver *s, struct nr__session *ss, struct nr_error *err)
{
    int rc = nr__handshake(s, ss, err);
    if (rc < 0)
        return rc;
    union nr_msg in;
    if ((rc = nr_proto_expect(&ss->ctl, NR_MSG_TEST_REQ, 0, &in, "client", err)) < 0)
        return rc;
    struct nr_msg_test_req req = in.test_req;
    if ((rc = nr__check_request(&req, err)) < 0)
        return rc;
    struct nr_tcp_sockopts opts = {req.buffer_bytes, req.mss_bytes, (req.flags & NR_REQ_NODELAY) != 0,
                                   (req.flags & NR_REQ_CORK) != 0, req.tos, (req.flags & NR_REQ_BLOCKING) != 0};
    int family = 0;
    if ((rc = nr__open_data(s, ss, &opts, &family, err)) < 0)
        return rc;
    /* Options that are not inherited from the listener on every kernel: apply again on the accepted socket. */
    struct nr_tcp_sockopts again = opts;
    again.buffer_bytes = 0;
    again.mss_bytes = 0;
    struct nr_tcp_sockinfo si;
    if ((rc = nr_tcp_apply_opts(ss->data_fd, family, &again, err)) < 0 ||
        (rc = nr_tcp_set_blocking(ss->data_fd, opts.blocking, err)) < 0 ||
        (rc = nr_tcp_set_timeouts(ss->data_fd, s->idle_timeout_s, err)) < 0 ||
        (rc = nr_tcp_sockinfo_get(ss->data_fd, family, &si, err)) < 0)
        return rc;
    union nr_msg m;
    memset(&m, 0, sizeof m);
    m.sockinfo.rcvbuf_bytes = si.rcvbuf_bytes;
    m.sockinfo.sndbuf_bytes = si.sndbuf_bytes;
    m.sockinfo.mss_bytes = si.mss_bytes;
    m.sockinfo.blocking = si.blocking;
    m.sockinfo.nodelay = si.nodelay;
    m.sockinfo.cork = si.cork;
    m.sockinfo.tos = si.tos;
    if ((rc = nr_proto_send(&ss->ctl, NR_MSG_SOCKINFO, &m, err)) < 0)
        return rc;
    if (!(ss->buf = malloc(req.io_bytes)))
        return nr_error_set(err, NR_E_NOMEM, "cannot allocate a %u-byte buffer", req.io_bytes);
    memset(ss->buf, 0x5a, req.io_bytes);
    if ((req.flags & NR_REQ_SYSMON) && (rc = nr_sysmon_open(&ss->mon, err)) < 0)
        return rc;
    for (;;) {
        struct nr_proto_hdr h;
        if ((rc = nr_proto_recv(&ss->ctl, 0, &h, &in, err)) < 0)
            return rc;
        switch (h.type) {
        case NR_MSG_START:
            if ((rc = nr__serve_rep(s, ss, &req, &in.start, err)) < 0)
                return rc;
            break;
        case NR_MSG_SAMPLE:
            if (!ss->mon)
                return nr_error_set(err, NR_E_PROTO, "SAMPLE without the system monitor requested");
            rc = in.sample.action == NR_SAMPLE_MARK ? nr_sysmon_mark(ss->mon, err) : nr_sysmon_record(ss->mon, err);
            if (rc < 0 || (rc = nr_proto_send(&ss->ctl, NR_MSG_READY, NULL, err)) < 0)
                return rc;
            break;
        case NR_MSG_FINISH:
            return ss->mon ? nr__send_syslog(ss, err) : nr_proto_send(&ss->ctl, NR_MSG_BYE, NULL, err);
        case NR_MSG_ERROR:
            return nr_error_set(err, NR_E_PEER, "client: %s", in.error.text);
        default:
            return nr_error_set(err, NR_E_PROTO, "unexpected %s message from the client", nr_proto_type_name(h.type));
        }
    }
}

/* One client session: never fails the server, only logs. */
static void nr__session(const struct nr_tcpserver *s, int fd, const struct sockaddr_storage *peer)
{
    struct nr__session ss;
    struct nr_error err;
    memset(&ss, 0, sizeof ss);
    ss.data_fd = ss.data_listen_fd = -1;
    nr_proto_conn_init(&ss.ctl, fd, s->idle_timeout_s);
    nr_tcp_addr_str(peer, ss.peer, sizeof ss.peer);
    nr_error_clear(&err);
    int rc = nr__serve(s, &ss, &err);
    if (rc < 0) {
        char msg[512];
        nr_error_message(&err, msg, sizeof msg);
        /* Tell the client why, unless it is the client that went away or reported the error. */
        if (rc != NR_E_CLOSED && rc != NR_E_PEER)
            nr_proto_send_error(&ss.ctl, rc, msg);
        fprintf(stderr, "nr-tcpserver: client %s: %s\n", ss.peer, msg);
    } else if (s->verbose) {
        fprintf(stderr, "nr-tcpserver: client %s: test done\n", ss.peer);
    }
    nr__session_close(&ss);
    close(fd);
}

static const char nr__description[] =
    "Server for nr-tcptest (Hpcbench tcpserver parity): serves TCP throughput and latency tests one after another.";

int main(int argc, char **argv)
{
    struct nr_tcpserver s;
    nr__srv_defaults(&s);
    const struct nr_opt opts[] = {
        {NR_OPT_INT, 'p', "port", &s.port, "PORT", "port to listen on; 0 picks a free port", 0, 65535, NULL, NULL},
        {NR_OPT_STRING, 'B', "bind", &s.bind_addr, "ADDR", "listen on this address only", 0, 0, NULL, "all"},
        {NR_OPT_COUNT, 'v', "verbose", &s.verbose, NULL, "log each client on stderr", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "auth-file", &s.auth_file, "FILE", "serve only clients holding the secret in FILE", 0, 0,
         NULL, "none"},
        {NR_OPT_DOUBLE, 0, "timeout", &s.idle_timeout_s, "SECONDS", "give up on a client idle this long", 1,
         NR_TCP_TIMEOUT_MAX, NULL, NULL},
        {NR_OPT_DOUBLE, 0, "max-rep-time", &s.max_rep_s, "SECONDS", "longest repetition served", 1,
         NR_TCP_TIMEOUT_MAX, NULL, NULL},
        {NR_OPT_INT, 0, "max-tests", &s.max_tests, "N", "exit after N client sessions (0 = never)", 0, 1000000000,
         NULL, NULL},
        {NR_OPT_END, 0, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL},
    };
    const struct nr_opt_set set = {"nr-tcpserver", "[OPTIONS]", nr__description, opts,
                                   "Example:\n  nr-tcpserver -p 0 &      # prints: TCP socket listening on port [N]"};
    struct nr_error err;
    nr_error_clear(&err);
    int rc = nr_opt_parse(&set, argc, argv, NULL, &err);
    if (rc == NR_OPT_HELP) {
        nr_opt_help(&set, stdout);
        return NR_EXIT_OK;
    }
    if (rc == NR_OPT_VERSION) {
        printf("nr-tcpserver %s\n", nr_version());
        return NR_EXIT_OK;
    }
    if (rc < 0) {
        nr_error_report("nr-tcpserver", &err);
        return nr_exit_status(rc);
    }
    if (s.auth_file) {
        int n = nr_tcp_read_secret(s.auth_file, s.key, &err);
        if (n < 0) {
            nr_error_report("nr-tcpserver", &err);
            return nr_exit_status(n);
        }
        s.key_len = n;
    }
    signal(SIGPIPE, SIG_IGN);
    nr_hostname(s.host, sizeof s.host);
    uint16_t port = 0;
    int family = 0;
    int lfd = nr_tcp_listen(s.bind_addr, (uint16_t)s.port, NULL, 64, &port, &family, &err);
    if (lfd < 0) {
        nr_error_report("nr-tcpserver", &err);
        return NR_EXIT_RUNTIME;
    }
    printf("TCP socket listening on port [%u]\n", (unsigned)port);
    fflush(stdout);
    for (int served = 0; s.max_tests == 0 || served < s.max_tests;) {
        struct sockaddr_storage peer;
        nr_error_clear(&err);
        int fd = nr_tcp_accept(lfd, 0, &peer, &err);
        if (fd < 0) {
            /* Transient (EMFILE, ECONNABORTED, ...): report, back off a little, keep serving. */
            nr_error_report("nr-tcpserver", &err);
            nr_sleep_s(0.1);
            continue;
        }
        nr__session(&s, fd, &peer);
        served++;
    }
    close(lfd);
    return NR_EXIT_OK;
}
