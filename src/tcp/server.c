/* nr-tcpserver: the server side of the Hpcbench-style TCP experiments (tcpserver parity).
 *
 * It listens on one port (default 5677, -p 0 picks a free one and prints it), serves one client test after
 * another and never exits because of a bad client: every wait has a timeout, every size and duration the client
 * asks for is checked against the server's limits, and any failure is sent back to the client as an ERROR message
 * and logged on stderr before the server returns to accept(). With --auth-file only clients holding the same
 * shared secret are served (HMAC-SHA-256 challenge/response, see proto.h).
 *
 * One test at a time, and nobody waits without being told. Each session runs in a child process; the parent
 * keeps accepting, and a client that connects while a test runs gets an ERROR at once naming the test in
 * progress and the longest it can still take (the session cap), instead of waiting silently behind it. A
 * connection that never completes the handshake holds the server for --handshake-timeout only, and every session
 * ends by --max-session-time: the child enforces it (and tells its client), the parent kills a child that
 * overruns it by NR__KILL_GRACE_S. Measurements are not disturbed: the parent only sleeps in poll() meanwhile.
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

/* Server options (with the flag that sets each) and what lives across sessions. */
struct nr_tcpserver {
    int port;               /* -p/--port, 0 = pick a free port */
    const char *bind_addr;  /* -B/--bind, NULL = all addresses */
    const char *auth_file;  /* --auth-file */
    int max_tests;          /* --max-tests: exit after this many sessions (0 = serve forever) */
    struct nr_tcpsrv_cfg cfg; /* -v, --timeout, --max-rep-time, the secret: what each session needs */
    unsigned char key[NR_TCP_AUTH_MAX]; /* shared secret read from --auth-file */
    char host[NR_HOST_MAX]; /* our host name, sent in HELLO */
};

static void nr__srv_defaults(struct nr_tcpserver *s)
{
    memset(s, 0, sizeof *s);
    s->port = NR_TCP_DEFAULT_PORT;
    s->cfg.idle_timeout_s = NR_TCP_TIMEOUT_DEFAULT;
    s->cfg.max_rep_s = NR_TCP_REP_TIME_DEFAULT;
    s->cfg.handshake_s = NR__HANDSHAKE_DEFAULT_S;
    s->cfg.max_session_s = NR__SESSION_DEFAULT_S;
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

/* Serve fd in a child process; the parent returns at once. Returns 0 or NR_E_SYS when fork failed (the client
 * is then served in this process). */
static int nr__spawn(const struct nr_tcpserver *s, int lfd, int fd, const struct sockaddr_storage *peer,
                     struct nr__child *ch)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(lfd);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the server */
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        int rc = nr_tcpsrv_session(&s->cfg, fd, peer);
        fflush(NULL);
        _exit(rc < 0 ? 1 : 0);
    }
    if (pid < 0)
        return NR_E_SYS;
    close(fd);
    ch->pid = pid;
    ch->started_s = nr_now_s();
    nr_tcp_addr_str(peer, ch->peer, sizeof ch->peer);
    return NR_OK;
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
        {NR_OPT_COUNT, 'v', "verbose", &s.cfg.verbose, NULL, "log each client on stderr", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "auth-file", &s.auth_file, "FILE", "serve only clients holding the secret in FILE", 0, 0,
         NULL, "none"},
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
    uint16_t port = 0;
    int family = 0;
    int lfd = nr_tcp_listen(s.bind_addr, (uint16_t)s.port, NULL, 64, &port, &family, &err);
    if (lfd < 0) {
        nr_error_report("nr-tcpserver", &err);
        return NR_EXIT_RUNTIME;
    }
    printf("TCP socket listening on port [%u]\n", (unsigned)port);
    fflush(stdout);
    struct nr__child ch = {0, 0, ""};
    int started = 0;
    while (!g_stop) {
        nr__reap(&s, &ch, 0);
        if (!ch.pid && s.max_tests && started >= s.max_tests)
            break;
        struct pollfd p = {lfd, POLLIN, 0};
        int n = poll(&p, 1, ch.pid ? 100 : -1); /* while a child runs: look at it ten times a second */
        if (n < 0 && errno != EINTR) {
            nr_error_sys(&err, NR_E_NET, "poll on the listening socket");
            nr_error_report("nr-tcpserver", &err);
            nr_sleep_s(0.1);
            continue;
        }
        if (n <= 0)
            continue;
        struct sockaddr_storage peer;
        nr_error_clear(&err);
        int fd = nr_tcp_accept(lfd, 0, &peer, &err);
        if (fd < 0) {
            /* Transient (EMFILE, ECONNABORTED, ...): report, back off a little, keep serving. */
            nr_error_report("nr-tcpserver", &err);
            nr_sleep_s(0.1);
            continue;
        }
        /* A client that follows the previous one closely may arrive while that session's process is still
         * exiting: give it a moment before calling the server busy. */
        for (double t0 = nr_now_s(); ch.pid && nr_now_s() - t0 < NR__FINISH_GRACE_S; nr_sleep_s(0.005))
            nr__reap(&s, &ch, 0);
        if (ch.pid || (s.max_tests && started >= s.max_tests)) {
            nr__send_busy(&s, fd, &ch);
            close(fd);
            continue;
        }
        started++;
        if (nr__spawn(&s, lfd, fd, &peer, &ch) < 0)
            nr_tcpsrv_session(&s.cfg, fd, &peer); /* no fork: serve here (logs and reports its own failure) */
    }
    if (ch.pid && g_stop)
        kill(ch.pid, SIGTERM);
    nr__reap(&s, &ch, 1);
    close(lfd);
    return NR_EXIT_OK;
}
