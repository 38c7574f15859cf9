/* The server side of one nr-tcptest session (used by nr-tcpserver and by the session fuzzer).
 *
 * nr_tcpsrv_session() runs the whole conversation on an accepted control connection: handshake and shared-secret
 * authentication (nr-tcpserver does HELLO / CLIENT_HELLO itself for many connections at once, see gate.c, and hands
 * an authenticated client over with nr_tcpsrv_session_hello()), every later message tagged under the session key,
 * the test request checked against the server's limits, the data connection (separate ephemeral listener with the
 * requested socket options applied before listen(), taking only connections from the client's address and of those
 * the one that presents this session's cookie, all of them read at once, while the control connection is watched
 * for a client that gives up), then the repetitions and system-monitor samples the client drives. Every wait has a
 * timeout: each set-up step the short handshake timeout (an idle connection cannot hold the server for the idle
 * timeout), everything later the idle timeout, and all of it the session cap (--max-session-time), which also
 * bounds every repetition's deadline. Every failure is sent to the client as an ERROR message (unless the client is
 * gone or reported it), logged as one line, and returned; nothing in here exits the process.
 */
#include "srv.h"

#include <errno.h>
#include <poll.h>
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

#define NR__DATA_PENDING 8        /* connections to the data port read at once (the oldest makes room) */
#define NR__DATA_ACCEPT_BURST 64  /* data connections accepted per wake-up */

/* One test: everything that is released when the session ends. */
struct nr__session {
    uint64_t deadline_ns; /* end of the session cap (nr_now_ns), 0 = none */
    struct nr_proto_conn ctl;
    int data_fd;
    int data_listen_fd;
    char *buf;
    struct nr_sysmon *mon;
    struct sockaddr_storage peer_addr; /* the client: data connections are taken from its address only */
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

/* The longest wait allowed now: `want` seconds, cut to what is left of the session cap (at least 1 ms). */
static double nr__wait_s(const struct nr__session *ss, double want)
{
    if (!ss->deadline_ns)
        return want;
    uint64_t now = nr_now_ns();
    double left = now >= ss->deadline_ns ? 0.001 : (double)(ss->deadline_ns - now) * 1e-9;
    return left < want ? (left > 0.001 ? left : 0.001) : want;
}

/* A timeout that is really the session cap gets the cap's own message. */
static int nr__session_timeout(const struct nr_tcpsrv_cfg *cfg, const struct nr__session *ss, int rc,
                               struct nr_error *err)
{
    if (rc == NR_E_TIMEOUT && ss->deadline_ns && nr_now_ns() >= ss->deadline_ns) {
        nr_error_clear(err);
        return nr_error_set(err, NR_E_TIMEOUT, "the session reached the server's cap of %.0f s (--max-session-time)",
                            cfg->max_session_s);
    }
    return rc;
}

int nr_tcpsrv_send_hello(const struct nr_tcpsrv_cfg *cfg, int fd, struct nr_tcpsrv_hello *h, double timeout_s,
                         struct nr_error *err)
{
    memset(h, 0, sizeof *h);
    int rc = nr_tcp_random(h->server_nonce, sizeof h->server_nonce, err);
    if (rc < 0)
        return rc;
    union nr_msg m;
    memset(&m, 0, sizeof m);
    m.hello.flags = cfg->key_len ? NR_HELLO_AUTH : 0;
    memcpy(m.hello.nonce, h->server_nonce, sizeof h->server_nonce);
    struct nr_proto_conn c;
    nr_proto_conn_init(&c, fd, timeout_s);
    rc = nr_proto_send(&c, NR_MSG_HELLO, &m, err);
    nr_proto_conn_free(&c);
    return rc;
}

int nr_tcpsrv_check_hello(const struct nr_tcpsrv_cfg *cfg, const struct nr_tcpsrv_hello *h, struct nr_error *err)
{
    if (!cfg->key_len)
        return NR_OK;
    uint8_t want[NR_SHA256_BYTES];
    if (!(h->client.flags & NR_CHELLO_MAC))
        return nr_error_set(err, NR_E_AUTH, "this server requires authentication: use --auth-file");
    nr_proto_auth_mac(cfg->key, (size_t)cfg->key_len, "client", h->server_nonce, h->client.nonce, want);
    if (!nr_mem_equal_ct(want, h->client.mac, sizeof want))
        return nr_error_set(err, NR_E_AUTH, "authentication failed: the shared secrets differ");
    return NR_OK;
}

/* The rest of the handshake once CLIENT_HELLO is in and checked: the session key, then WELCOME (the first tagged
 * message) with the server's name, its limits and its proof of the secret. */
static int nr__welcome(const struct nr_tcpsrv_cfg *cfg, struct nr__session *ss, const struct nr_tcpsrv_hello *h,
                       struct nr_error *err)
{
    union nr_msg m;
    memset(&m, 0, sizeof m);
    if (cfg->key_len)
        nr_proto_auth_mac(cfg->key, (size_t)cfg->key_len, "server", h->server_nonce, h->client.nonce, m.welcome.mac);
    m.welcome.max_message_bytes = NR_TCP_MSG_MAX;
    m.welcome.max_io_bytes = NR_TCP_IO_MAX;
    m.welcome.max_rep_time_s = (uint32_t)cfg->max_rep_s;
    snprintf(m.welcome.host, sizeof m.welcome.host, "%s", cfg->host);
    nr_proto_conn_key(&ss->ctl, cfg->key, (size_t)cfg->key_len, h->server_nonce, h->client.nonce, 1);
    if (cfg->verbose && cfg->log)
        fprintf(cfg->log, "nr-tcpserver: client %s (%s) connected%s\n", h->client.host, ss->peer,
                cfg->key_len ? ", authenticated" : "");
    return nr_proto_send(&ss->ctl, NR_MSG_WELCOME, &m, err);
}

/* The whole handshake in this process, blocking (nr_tcpsrv_session: the fuzzer and the server without fork). */
static int nr__handshake(const struct nr_tcpsrv_cfg *cfg, struct nr__session *ss, struct nr_tcpsrv_hello *h,
                         struct nr_error *err)
{
    int rc = nr_tcpsrv_send_hello(cfg, ss->ctl.fd, h, ss->ctl.timeout_s, err);
    if (rc < 0)
        return rc;
    union nr_msg in;
    if ((rc = nr_proto_expect(&ss->ctl, NR_MSG_CLIENT_HELLO, nr__wait_s(ss, cfg->handshake_s), &in, "client",
                              err)) < 0)
        return nr__session_timeout(cfg, ss, rc, err);
    h->client = in.client_hello;
    return nr_tcpsrv_check_hello(cfg, h, err);
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

/* A connection to the data port that has not shown its cookie yet. */
struct nr__data_conn {
    int fd;               /* -1: free slot */
    uint64_t accepted_ns;
    uint32_t have;        /* cookie bytes received so far */
    uint8_t cookie[NR_PROTO_COOKIE_BYTES];
};

/* Waiting for the data connection: the listener, the control connection, the connections reading their cookie. */
struct nr__data_wait {
    const struct nr_tcpsrv_cfg *cfg;
    struct nr__session *ss;
    uint8_t want[NR_PROTO_COOKIE_BYTES];
    struct nr__data_conn conns[NR__DATA_PENDING];
};

static void nr__data_drop(struct nr__data_wait *w, struct nr__data_conn *d, const char *why)
{
    if (w->cfg->verbose && w->cfg->log)
        fprintf(w->cfg->log, "nr-tcpserver: client %s: dropped a data connection %s\n", w->ss->peer, why);
    close(d->fd);
    d->fd = -1;
}

/* Accept what the data listener has: from another address than the client's closed at once; the others wait for
 * their cookie, the oldest making room when all slots are taken. */
static void nr__data_accept(struct nr__data_wait *w)
{
    for (int k = 0; k < NR__DATA_ACCEPT_BURST; k++) {
        struct sockaddr_storage from;
        socklen_t sl = sizeof from;
        int fd = accept4(w->ss->data_listen_fd, (struct sockaddr *)&from, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return; /* EAGAIN, or a failure the next poll() shows again */
        if (!nr_tcp_same_host(&from, &w->ss->peer_addr)) {
            char addr[64];
            if (w->cfg->verbose && w->cfg->log)
                fprintf(w->cfg->log, "nr-tcpserver: client %s: refused a data connection from %s\n", w->ss->peer,
                        nr_tcp_addr_str(&from, addr, sizeof addr));
            close(fd);
            continue;
        }
        struct nr__data_conn *slot = NULL, *oldest = NULL;
        for (int i = 0; i < NR__DATA_PENDING && !slot; i++) {
            struct nr__data_conn *d = &w->conns[i];
            if (d->fd < 0)
                slot = d;
            else if (!oldest || d->accepted_ns < oldest->accepted_ns)
                oldest = d;
        }
        if (!slot) {
            nr__data_drop(w, oldest, "that sent no cookie, to make room");
            slot = oldest;
        }
        *slot = (struct nr__data_conn){fd, nr_now_ns(), 0, {0}};
    }
}

/* Read what d has sent; 1 when it showed the right cookie, 0 otherwise (d is closed when it failed). */
static int nr__data_read(struct nr__data_wait *w, struct nr__data_conn *d)
{
    ssize_t got = recv(d->fd, d->cookie + d->have, sizeof d->cookie - d->have, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (got <= 0) {
        nr__data_drop(w, d, "closed before its cookie");
        return 0;
    }
    d->have += (uint32_t)got;
    if (d->have < sizeof d->cookie)
        return 0;
    if (nr_mem_equal_ct(d->cookie, w->want, sizeof w->want))
        return 1;
    nr__data_drop(w, d, "with a wrong cookie");
    return 0;
}

/* Open the data listener, tell the client where it is, take the connection that shows this session's cookie.
 * Every connection to the data port is read at once, so none (a port scanner's) can hold up the client's. */
static int nr__open_data(const struct nr_tcpsrv_cfg *cfg, struct nr__session *ss, const struct nr_tcp_sockopts *opts,
                         int *family, struct nr_error *err)
{
    struct sockaddr_storage local;
    socklen_t sl = sizeof local;
    char addr[64];
    if (getsockname(ss->ctl.fd, (struct sockaddr *)&local, &sl) != 0)
        return nr_error_sys(err, NR_E_NET, "getsockname");
    /* An IPv4 client of a dual-stack listener gets a plain IPv4 data listener: it works with bindv6only=1 and
     * takes IP_TOS as any IPv4 socket. */
    nr_tcp_unmap(&local);
    nr_tcp_addr_str(&local, addr, sizeof addr);
    uint16_t port = 0;
    int fd = nr_tcp_listen(addr, 0, opts, NR__DATA_PENDING, &port, family, err);
    if (fd < 0)
        return fd;
    ss->data_listen_fd = fd;
    struct nr__data_wait w = {.cfg = cfg, .ss = ss};
    for (int i = 0; i < NR__DATA_PENDING; i++)
        w.conns[i].fd = -1;
    nr_proto_data_cookie(&ss->ctl, port, w.want);
    union nr_msg m;
    memset(&m, 0, sizeof m);
    m.test_ack.port = port;
    int rc = nr_tcp_set_blocking(fd, false, err);
    if (rc == 0)
        rc = nr_proto_send(&ss->ctl, NR_MSG_TEST_ACK, &m, err);
    double wait_s = nr__wait_s(ss, cfg->handshake_s), deadline = nr_now_s() + wait_s;
    while (rc == 0 && ss->data_fd < 0) {
        double left = deadline - nr_now_s();
        if (left <= 0) {
            rc = nr__session_timeout(cfg, ss, nr_error_set(err, NR_E_TIMEOUT, "the client did not open the data "
                                                           "connection within %.1f s", wait_s), err);
            break;
        }
        /* Watch the control connection too: a client that gives up here is noticed at once. */
        struct pollfd p[2 + NR__DATA_PENDING];
        int idx[2 + NR__DATA_PENDING], n = 2;
        p[0] = (struct pollfd){ss->data_listen_fd, POLLIN, 0};
        p[1] = (struct pollfd){ss->ctl.fd, POLLIN, 0};
        for (int i = 0; i < NR__DATA_PENDING; i++)
            if (w.conns[i].fd >= 0) {
                idx[n] = i;
                p[n++] = (struct pollfd){w.conns[i].fd, POLLIN, 0};
            }
        int got = poll(p, (nfds_t)n, (int)(left * 1000) + 1);
        if (got < 0 && errno != EINTR) {
            rc = nr_error_sys(err, NR_E_NET, "poll");
            break;
        }
        if (got <= 0)
            continue;
        if (p[1].revents) {
            struct nr_proto_hdr h;
            union nr_msg in;
            if ((rc = nr_proto_recv(&ss->ctl, left, &h, &in, err)) == 0)
                rc = h.type == NR_MSG_ERROR
                         ? nr_error_set(err, NR_E_PEER, "client: %s", in.error.text)
                         : nr_error_set(err, NR_E_PROTO, "unexpected %s message while waiting for the data "
                                        "connection", nr_proto_type_name(h.type));
            break;
        }
        for (int k = 2; k < n && ss->data_fd < 0; k++)
            if (p[k].revents && nr__data_read(&w, &w.conns[idx[k]])) {
                ss->data_fd = w.conns[idx[k]].fd;
                w.conns[idx[k]].fd = -1;
            }
        if (ss->data_fd < 0 && p[0].revents)
            nr__data_accept(&w);
    }
    for (int i = 0; i < NR__DATA_PENDING; i++)
        if (w.conns[i].fd >= 0)
            close(w.conns[i].fd);
    close(ss->data_listen_fd);
    ss->data_listen_fd = -1;
    return rc;
}

/* One repetition as the client asked for it in START. */
static int nr__serve_rep(const struct nr_tcpsrv_cfg *cfg, struct nr__session *ss, const struct nr_msg_test_req *r,
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
    struct nr_xfer x = {.fd = ss->data_fd, .blocking = (r->flags & NR_REQ_BLOCKING) != 0, .io_bytes = r->io_bytes,
                        .buf = ss->buf, .idle_ms = (int)(cfg->idle_timeout_s * 1000),
                        .nodelay = (r->flags & NR_REQ_NODELAY) != 0, .cork = (r->flags & NR_REQ_CORK) != 0};
    struct nr_cpu_times c0, c1;
    nr_cpu_times_now(&c0);
    if ((rc = nr_proto_send(&ss->ctl, NR_MSG_READY, NULL, err)) < 0)
        return rc;
    uint64_t t0 = nr_now_ns();
    x.deadline_ns = t0 + (uint64_t)(cfg->max_rep_s * 1e9);
    if (ss->deadline_ns && ss->deadline_ns < x.deadline_ns)
        x.deadline_ns = ss->deadline_ns;
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
        return nr__session_timeout(cfg, ss, rc, err);
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

/* Serve the session; h is the handshake so far (NULL: do the whole handshake here). */
static int nr__serve(const struct nr_tcpsrv_cfg *cfg, struct nr__session *ss, const struct nr_tcpsrv_hello *hello,
                     struct nr_error *err)
{
    struct nr_tcpsrv_hello own;
    int rc;
    if (!hello && (rc = nr__handshake(cfg, ss, &own, err)) < 0)
        return rc;
    if ((rc = nr__welcome(cfg, ss, hello ? hello : &own, err)) < 0)
        return rc;
    union nr_msg in;
    if ((rc = nr_proto_expect(&ss->ctl, NR_MSG_TEST_REQ, nr__wait_s(ss, cfg->handshake_s), &in, "client",
                              err)) < 0)
        return nr__session_timeout(cfg, ss, rc, err);
    struct nr_msg_test_req req = in.test_req;
    if ((rc = nr__check_request(&req, err)) < 0)
        return rc;
    struct nr_tcp_sockopts opts = {req.buffer_bytes, req.mss_bytes, (req.flags & NR_REQ_NODELAY) != 0,
                                   (req.flags & NR_REQ_CORK) != 0, req.tos, (req.flags & NR_REQ_BLOCKING) != 0};
    int family = 0;
    if ((rc = nr__open_data(cfg, ss, &opts, &family, err)) < 0)
        return rc;
    /* Options that are not inherited from the listener on every kernel: apply again on the accepted socket. */
    struct nr_tcp_sockopts again = opts;
    again.buffer_bytes = 0;
    again.mss_bytes = 0;
    struct nr_tcp_sockinfo si;
    if ((rc = nr_tcp_apply_opts(ss->data_fd, family, &again, err)) < 0 ||
        (rc = nr_tcp_set_blocking(ss->data_fd, opts.blocking, err)) < 0 ||
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
        if ((rc = nr_proto_recv(&ss->ctl, nr__wait_s(ss, cfg->idle_timeout_s), &h, &in, err)) < 0)
            return nr__session_timeout(cfg, ss, rc, err);
        switch (h.type) {
        case NR_MSG_START:
            if ((rc = nr__serve_rep(cfg, ss, &req, &in.start, err)) < 0)
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

/* One client session from wherever its handshake stands (see srv.h). */
static int nr__session(const struct nr_tcpsrv_cfg *cfg, int fd, const struct sockaddr_storage *peer,
                       const struct nr_tcpsrv_hello *h, uint64_t started_ns)
{
    struct nr__session ss;
    struct nr_error err;
    memset(&ss, 0, sizeof ss);
    ss.data_fd = ss.data_listen_fd = -1;
    if (cfg->max_session_s > 0)
        ss.deadline_ns = started_ns + (uint64_t)(cfg->max_session_s * 1e9);
    nr_proto_conn_init(&ss.ctl, fd, cfg->idle_timeout_s);
    ss.ctl.max_payload = NR_PROTO_SMALL_MAX;
    ss.peer_addr = *peer;
    nr_tcp_unmap(&ss.peer_addr);
    nr_tcp_addr_str(&ss.peer_addr, ss.peer, sizeof ss.peer);
    nr_error_clear(&err);
    int rc = nr__serve(cfg, &ss, h, &err);
    if (rc < 0) {
        char msg[512];
        nr_error_message(&err, msg, sizeof msg);
        /* Tell the client why, unless it is the client that went away or reported the error. */
        if (rc != NR_E_CLOSED && rc != NR_E_PEER)
            nr_proto_send_error(&ss.ctl, rc, msg);
        if (cfg->log)
            fprintf(cfg->log, "nr-tcpserver: client %s: %s\n", ss.peer, msg);
    } else if (cfg->verbose && cfg->log) {
        fprintf(cfg->log, "nr-tcpserver: client %s: test done\n", ss.peer);
    }
    nr__session_close(&ss);
    close(fd);
    return rc;
}

int nr_tcpsrv_session(const struct nr_tcpsrv_cfg *cfg, int fd, const struct sockaddr_storage *peer)
{
    return nr__session(cfg, fd, peer, NULL, nr_now_ns());
}

int nr_tcpsrv_session_hello(const struct nr_tcpsrv_cfg *cfg, int fd, const struct sockaddr_storage *peer,
                            const struct nr_tcpsrv_hello *h, uint64_t accepted_ns)
{
    return nr__session(cfg, fd, peer, h, accepted_ns);
}
