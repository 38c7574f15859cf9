/* nr-tcpserver: the server side of the Hpcbench-style TCP experiments (tcpserver parity).
 *
 * It listens on one port (default 5677, -p 0 picks a free one and prints it) of the loopback addresses, or of the
 * addresses -B names, serves one client test after another and never exits because of a bad client: every wait has
 * a timeout, every size and duration the client asks for is checked against the server's limits, and any failure is
 * sent back to the client as an ERROR message and logged on stderr before the server returns to accept(). Only
 * clients holding the shared secret of --auth-file are served (HMAC-SHA-256 challenge/response, then every control
 * message tagged, see proto.h); without one the server refuses to start unless told --insecure.
 *
 * One test at a time, and nobody waits without being told. New connections wait in the handshake gate (gate.h):
 * the server sends HELLO at once and watches every pending handshake in one poll(), each with its own deadline
 * (--handshake-timeout), at most --max-pending of them (the oldest is dropped for a newcomer), so connections that
 * connect and say nothing cannot keep a real client out, however many there are. A client whose CLIENT_HELLO
 * passes the shared-secret check is served in a child process while the parent keeps accepting; one that
 * authenticates while a test runs is told at once that the server is busy, naming the test in progress and the
 * longest it can still take (the session cap). Nothing about the server's state is sent before a client has
 * authenticated. Every session ends by --max-session-time: the child enforces it (and tells its client), the
 * parent kills a child that overruns it by NR__KILL_GRACE_S. Measurements are not disturbed: the parent only
 * sleeps in poll() meanwhile (a new connection costs it one HELLO). The soft RLIMIT_NOFILE is raised to the hard
 * limit at start, and --max-pending is cut to what the descriptors allow.
 *
 * The session itself (handshake, limits, data connection, repetitions) is srv.c; this file is options and the
 * accept loop.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/resource.h>

#include "gate.h"
#include "nr/core.h"
#include "proto.h"
#include "sock.h"
#include "srv.h"
#include "tcp.h"

#define NR__HANDSHAKE_DEFAULT_S 5.0     /* --handshake-timeout */
#define NR__SESSION_DEFAULT_S 3600.0    /* --max-session-time */
#define NR__KILL_GRACE_S 5.0            /* the parent's backstop beyond the session cap */
#define NR__BUSY_SEND_S 1.0             /* longest the parent spends telling a client it is busy */
#define NR__FINISH_GRACE_S 1.0          /* a new client waits this long for a session that is ending anyway */
#define NR__PENDING_DEFAULT 1024        /* --max-pending */
#define NR__PENDING_MAX 65536
#define NR__FD_RESERVE 64               /* descriptors kept for the listener, a session and the standard streams */
#define NR__ACCEPT_BURST 256            /* connections accepted per wake-up before the others get a look */

/* Server options (with the flag that sets each) and what lives across sessions. */
struct nr_tcpserver {
    int port;               /* -p/--port, 0 = pick a free port */
    const char *bind_addr;  /* -B/--bind, NULL = loopback (127.0.0.1 and ::1) */
    const char *auth_file;  /* --auth-file */
    int insecure;           /* --insecure: serve without a shared secret */
    int max_tests;          /* --max-tests: exit after this many sessions (0 = serve forever) */
    int max_pending;        /* --max-pending: handshakes in progress at once (the oldest is dropped when full) */
    struct nr_tcpsrv_cfg cfg; /* -v, --timeout, --max-rep-time, the secret: what each session needs */
    unsigned char key[NR_TCP_AUTH_MAX]; /* shared secret read from --auth-file */
    char host[NR_HOST_MAX]; /* our host name, sent in WELCOME */
};

static void nr__srv_defaults(struct nr_tcpserver *s)
{
    memset(s, 0, sizeof *s);
    s->port = NR_TCP_DEFAULT_PORT;
    s->cfg.idle_timeout_s = NR_TCP_TIMEOUT_DEFAULT;
    s->cfg.max_rep_s = NR_TCP_REP_TIME_DEFAULT;
    s->cfg.handshake_s = NR__HANDSHAKE_DEFAULT_S;
    s->cfg.max_session_s = NR__SESSION_DEFAULT_S;
    s->max_pending = NR__PENDING_DEFAULT;
}

/* The session in progress (run by a child process). */
struct nr__child {
    pid_t pid;          /* 0: none */
    double started_s;   /* nr_now_s() at accept */
    char peer[64];      /* client address */
};

static volatile sig_atomic_t g_stop; /* SIGTERM/SIGINT: stop serving (set by the handler only) */

static void nr__on_stop(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* Tell a client that connected during a test that the server is busy, and for how long at most. */
static void nr__send_busy(const struct nr_tcpserver *s, int fd, const struct nr__child *ch)
{
    double running = nr_now_s() - ch->started_s;
    double left = s->cfg.max_session_s > 0 ? s->cfg.max_session_s - running : 0;
    char text[NR_PROTO_TEXT_MAX];
    if (left > 0)
        snprintf(text, sizeof text, "busy: a test from %s has been running for %.0f s and may take up to %.0f s more "
                 "(--max-session-time %.0f s); retry then", ch->peer, running, left, s->cfg.max_session_s);
    else
        snprintf(text, sizeof text, "busy: a test from %s has been running for %.0f s; retry later", ch->peer,
                 running);
    struct nr_proto_conn c;
    nr_proto_conn_init(&c, fd, NR__BUSY_SEND_S);
    nr_proto_send_error(&c, NR_E_TIMEOUT, text);
    nr_proto_conn_free(&c);
    if (s->cfg.verbose)
        fprintf(stderr, "nr-tcpserver: told a client it must wait: %s\n", text);
}

/* Reap the child if it ended; kill it when it overran the session cap by the grace period. */
static void nr__reap(const struct nr_tcpserver *s, struct nr__child *ch, int block)
{
    if (!ch->pid)
        return;
    int status;
    pid_t r = waitpid(ch->pid, &status, block ? 0 : WNOHANG);
    if (r == ch->pid || (r < 0 && errno == ECHILD)) {
        ch->pid = 0;
        return;
    }
    if (s->cfg.max_session_s > 0 && nr_now_s() - ch->started_s > s->cfg.max_session_s + NR__KILL_GRACE_S) {
        fprintf(stderr, "nr-tcpserver: client %s: session overran the %.0f-s cap, stopped\n", ch->peer,
                s->cfg.max_session_s);
        kill(ch->pid, SIGKILL);
        waitpid(ch->pid, &status, 0);
        ch->pid = 0;
    }
}

/* Serve the gate's ready slot i in a child process; the parent returns at once. Returns 0 or NR_E_SYS when fork
 * failed (the client is then served in this process). The slot leaves the gate either way. */
static int nr__spawn(const struct nr_tcpserver *s, const int *lfds, int nl, struct nr_gate *g, int i,
                     struct nr__child *ch)
{
    struct nr_gate_conn c = g->conns[i];
    nr_gate_release(g, i);
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the server */
        if (getppid() != parent)          /* the server died before the line above took effect */
            _exit(1);
        for (int k = 0; k < nl; k++)
            close(lfds[k]);
        nr_gate_close_all_except(g, c.fd); /* the other pending connections are the parent's business */
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        struct nr_error err;
        nr_error_clear(&err);
        nr_tcp_set_blocking(c.fd, true, &err);
        int rc = nr_tcpsrv_session_hello(&s->cfg, c.fd, &c.peer, &c.hello, c.accepted_ns);
        fflush(NULL);
        _exit(rc < 0 ? 1 : 0);
    }
    if (pid < 0) {
        nr_tcpsrv_session_hello(&s->cfg, c.fd, &c.peer, &c.hello, c.accepted_ns); /* logs its own failure */
        return NR_E_SYS;
    }
    close(c.fd);
    ch->pid = pid;
    ch->started_s = nr_now_s();
    nr_tcp_addr_str(&c.peer, ch->peer, sizeof ch->peer);
    return NR_OK;
}

/* Raise the soft descriptor limit to the hard one; the pending handshakes the descriptors allow. */
static int nr__fd_budget(int want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return want;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit up = {rl.rlim_max, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl.rlim_cur = rl.rlim_max;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)want + NR__FD_RESERVE)
        return want;
    int n = (int)rl.rlim_cur - NR__FD_RESERVE;
    return n < 1 ? 1 : n;
}

/* Accept what the listener has (at most NR__ACCEPT_BURST) into the gate. */
static void nr__accept_burst(int lfd, struct nr_gate *g)
{
    for (int k = 0; k < NR__ACCEPT_BURST; k++) {
        struct sockaddr_storage peer;
        socklen_t sl = sizeof peer;
        int fd = accept4(lfd, (struct sockaddr *)&peer, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
                return;
            if ((errno == EMFILE || errno == ENFILE) && nr_gate_drop_oldest(g))
                continue; /* out of descriptors: the oldest pending connection makes room */
            struct nr_error err;
            nr_error_clear(&err);
            nr_error_sys(&err, NR_E_NET, "accept");
            nr_error_report("nr-tcpserver", &err);
            nr_sleep_s(0.1);
            return;
        }
        struct nr_error err;
        nr_error_clear(&err);
        nr_gate_add(g, fd, &peer, &err); /* a connection that cannot take HELLO is closed there */
    }
}

static const char nr__description[] =
    "Server for nr-tcptest (Hpcbench tcpserver parity): serves TCP throughput and latency tests one after another.";

int main(int argc, char **argv)
{
    struct nr_tcpserver s;
    nr__srv_defaults(&s);
    const struct nr_opt opts[] = {
        {NR_OPT_INT, 'p', "port", &s.port, "PORT", "port to listen on; 0 picks a free port", 0, 65535, NULL, NULL},
        {NR_OPT_STRING, 'B', "bind", &s.bind_addr, "ADDR", "listen on the addresses of ADDR (:: for all)", 0, 0,
         NULL, "loopback"},
        {NR_OPT_COUNT, 'v', "verbose", &s.cfg.verbose, NULL, "log each client on stderr", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "auth-file", &s.auth_file, "FILE", "serve only clients holding the secret in FILE", 0, 0,
         NULL, "none"},
        {NR_OPT_FLAG, 0, "insecure", &s.insecure, NULL, "serve without a secret: anyone who can connect", 0, 0, NULL,
         NULL},
        {NR_OPT_DOUBLE, 0, "timeout", &s.cfg.idle_timeout_s, "SECONDS", "give up on a client idle this long", 1,
         NR_TCP_TIMEOUT_MAX, NULL, NULL},
        {NR_OPT_DOUBLE, 0, "max-rep-time", &s.cfg.max_rep_s, "SECONDS", "longest repetition served", 1,
         NR_TCP_TIMEOUT_MAX, NULL, NULL},
        {NR_OPT_DOUBLE, 0, "handshake-timeout", &s.cfg.handshake_s, "SECONDS",
         "longest wait for each set-up step of a new client (hello, test request, data connection)", 0.1,
         NR_TCP_TIMEOUT_MAX, NULL, NULL},
        {NR_OPT_DOUBLE, 0, "max-session-time", &s.cfg.max_session_s, "SECONDS",
         "longest client session; clients that connect meanwhile are told how long they may wait", 1, 86400, NULL,
         NULL},
        {NR_OPT_INT, 0, "max-pending", &s.max_pending, "N",
         "new connections kept in their handshake at once; when full the oldest is dropped", 1, NR__PENDING_MAX,
         NULL, NULL},
        {NR_OPT_INT, 0, "max-tests", &s.max_tests, "N", "exit after N client sessions (0 = never)", 0, 1000000000,
         NULL, NULL},
        {NR_OPT_END, 0, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL},
    };
    const struct nr_opt_set set = {"nr-tcpserver", "[OPTIONS]", nr__description, opts,
                                   "Examples:\n"
                                   "  nr-tcpserver -p 0 --auth-file ~/.netregress-secret &   # prints: TCP socket "
                                   "listening on port [N]\n"
                                   "  nr-tcpserver -B :: --auth-file ~/.netregress-secret    # every address"};
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
    if (!s.auth_file && !s.insecure) {
        nr_error_set(&err, NR_E_USAGE, "no shared secret: give --auth-file FILE (the client the same), or --insecure "
                     "to serve anyone who can connect");
        nr_error_report("nr-tcpserver", &err);
        return NR_EXIT_USAGE;
    }
    if (s.auth_file && s.insecure) {
        nr_error_set(&err, NR_E_USAGE, "--auth-file and --insecure cannot be combined");
        nr_error_report("nr-tcpserver", &err);
        return NR_EXIT_USAGE;
    }
    if (s.auth_file) {
        int n = nr_tcp_read_secret(s.auth_file, s.key, &err);
        if (n < 0) {
            nr_error_report("nr-tcpserver", &err);
            return nr_exit_status(n);
        }
        s.cfg.key = s.key;
        s.cfg.key_len = n;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = nr__on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    nr_hostname(s.host, sizeof s.host);
    s.cfg.host = s.host;
    s.cfg.log = stderr;
    int budget = nr__fd_budget(s.max_pending);
    if (budget < s.max_pending) {
        fprintf(stderr, "nr-tcpserver: warning: --max-pending %d cut to %d (open-file limit)\n", s.max_pending, budget);
        s.max_pending = budget;
    }
    struct nr_gate gate;
    if (nr_gate_init(&gate, &s.cfg, s.max_pending, &err) < 0) {
        nr_error_report("nr-tcpserver", &err);
        return NR_EXIT_RUNTIME;
    }
    struct pollfd *pfd = calloc((size_t)s.max_pending + NR_TCP_LISTEN_MAX, sizeof *pfd);
    int *idx = calloc((size_t)s.max_pending + NR_TCP_LISTEN_MAX, sizeof *idx);
    if (!pfd || !idx) {
        nr_error_set(&err, NR_E_NOMEM, "cannot allocate the poll set of %d connections", s.max_pending);
        nr_error_report("nr-tcpserver", &err);
        return NR_EXIT_RUNTIME;
    }
    uint16_t port = 0;
    int lfds[NR_TCP_LISTEN_MAX];
    int nl = nr_tcp_listen_set(s.bind_addr, (uint16_t)s.port, NR__ACCEPT_BURST * 4, lfds, NR_TCP_LISTEN_MAX, &port,
                               &err);
    for (int k = 0; k < nl && err.code == 0; k++)
        nr_tcp_set_blocking(lfds[k], false, &err);
    if (nl < 0 || err.code) {
        nr_error_report("nr-tcpserver", &err);
        return NR_EXIT_RUNTIME;
    }
    printf("TCP socket listening on port [%u]\n", (unsigned)port);
    fflush(stdout);
    struct nr__child ch = {0, 0, ""};
    int started = 0;
    while (!g_stop) {
        nr__reap(&s, &ch, 0);
        bool exhausted = s.max_tests && started >= s.max_tests;
        if (!ch.pid && exhausted)
            break;
        /* Authenticated clients: serve the one waiting longest when no test runs; tell the others the server is
         * busy once they have waited NR__FINISH_GRACE_S for a session that may be ending anyway. */
        int r;
        while (!ch.pid && !exhausted && (r = nr_gate_next_ready(&gate)) >= 0) {
            started++;
            nr__spawn(&s, lfds, nl, &gate, r, &ch);
            exhausted = s.max_tests && started >= s.max_tests;
        }
        bool waiting = false;
        for (int i = 0; i < gate.cap; i++) {
            struct nr_gate_conn *c = &gate.conns[i];
            if (c->fd < 0 || !c->ready)
                continue;
            if (exhausted || nr_now_ns() - c->ready_ns >= (uint64_t)(NR__FINISH_GRACE_S * 1e9)) {
                nr__send_busy(&s, c->fd, &ch);
                nr_gate_close(&gate, i);
            } else {
                waiting = true;
            }
        }
        int timeout = nr_gate_expire(&gate);
        if (waiting && (timeout < 0 || timeout > 5))
            timeout = 5;   /* a client waits for the slot: look at the session often */
        if (ch.pid && (timeout < 0 || timeout > 100))
            timeout = 100; /* while a child runs: look at it ten times a second */
        for (int k = 0; k < nl; k++)
            pfd[k] = (struct pollfd){lfds[k], POLLIN, 0};
        int n = nl + nr_gate_pollfds(&gate, pfd + nl, idx + nl);
        int got = poll(pfd, (nfds_t)n, timeout);
        if (got < 0 && errno != EINTR) {
            nr_error_sys(&err, NR_E_NET, "poll on the listening sockets and %d pending connections", n - nl);
            nr_error_report("nr-tcpserver", &err);
            nr_sleep_s(0.1);
            continue;
        }
        if (got <= 0)
            continue;
        for (int k = nl; k < n; k++)
            if (pfd[k].revents)
                nr_gate_read(&gate, idx[k]);
        for (int k = 0; k < nl; k++)
            if (pfd[k].revents)
                nr__accept_burst(lfds[k], &gate);
    }
    if (ch.pid && g_stop)
        kill(ch.pid, SIGTERM);
    nr__reap(&s, &ch, 1);
    nr_gate_free(&gate);
    free(pfd);
    free(idx);
    for (int k = 0; k < nl; k++)
        close(lfds[k]);
    return NR_EXIT_OK;
}
