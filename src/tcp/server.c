/* nr-tcpserver: the server side of the Hpcbench-style TCP experiments (tcpserver parity).
 *
 * It listens on one port (default 5677, -p 0 picks a free one and prints it), serves one client test after
 * another and never exits because of a bad client: every wait has a timeout, every size and duration the client
 * asks for is checked against the server's limits, and any failure is sent back to the client as an ERROR message
 * and logged on stderr before the server returns to accept(). With --auth-file only clients holding the same
 * shared secret are served (HMAC-SHA-256 challenge/response, see proto.h).
 *
 * The session itself (handshake, limits, data connection, repetitions) is srv.c; this file is options and the
 * accept loop.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nr/core.h"
#include "sock.h"
#include "srv.h"
#include "tcp.h"

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
        nr_tcpsrv_session(&s.cfg, fd, &peer); /* logs and reports its own failure */
        served++;
    }
    close(lfd);
    return NR_EXIT_OK;
}
