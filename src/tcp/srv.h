/* One nr-tcpserver session on an accepted control connection (see srv.c). */
#ifndef NR_TCP_SRV_H
#define NR_TCP_SRV_H

#include <stdio.h>
#include <sys/socket.h>

/* What a session needs from the server. */
struct nr_tcpsrv_cfg {
    int verbose;               /* log connects and completed tests too, not only failures */
    double idle_timeout_s;     /* longest wait for a message or data once the test is set up */
    double handshake_s;        /* longest wait for each set-up step: CLIENT_HELLO, TEST_REQ, the data connection */
    double max_rep_s;          /* longest repetition served */
    double max_session_s;      /* longest session, from accept to the end (0 = no cap) */
    const unsigned char *key;  /* shared secret, NULL = no authentication */
    int key_len;
    const char *host;          /* our name, sent in HELLO */
    FILE *log;                 /* one line per failed (or, verbose, completed) session; NULL = silent */
};

/* Serve one client on fd (closed on return). Returns 0 or the NR_E_* of the failure, which has already been sent
 * to the client and logged. Never exits the process. */
int nr_tcpsrv_session(const struct nr_tcpsrv_cfg *cfg, int fd, const struct sockaddr_storage *peer);

#endif
