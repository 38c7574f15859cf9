/* One nr-tcpserver session on an accepted control connection (see srv.c). */
#ifndef NR_TCP_SRV_H
#define NR_TCP_SRV_H

#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "proto.h"

/* What a session needs from the server. */
struct nr_tcpsrv_cfg {
    int verbose;               /* log connects and completed tests too, not only failures */
    double idle_timeout_s;     /* longest wait for a message or data once the test is set up */
    double handshake_s;        /* longest wait for each set-up step: CLIENT_HELLO, TEST_REQ, the data connection */
    double max_rep_s;          /* longest repetition served */
    double max_session_s;      /* longest session, from accept to the end (0 = no cap) */
    const unsigned char *key;  /* shared secret, NULL = no authentication */
    int key_len;
    const char *host;          /* our name, sent in WELCOME (to an authenticated client only) */
    FILE *log;                 /* one line per failed (or, verbose, completed) session; NULL = silent */
};

/* The handshake of one client up to its checked CLIENT_HELLO. */
struct nr_tcpsrv_hello {
    uint8_t server_nonce[NR_PROTO_NONCE_BYTES]; /* sent in our HELLO */
    struct nr_msg_client_hello client;          /* the client's answer */
};

/* Send HELLO with a fresh nonce (kept in *h) on fd, within timeout_s. */
int nr_tcpsrv_send_hello(const struct nr_tcpsrv_cfg *cfg, int fd, struct nr_tcpsrv_hello *h, double timeout_s,
                         struct nr_error *err);

/* Check h->client against the shared secret: 0, or NR_E_AUTH naming what is wrong (nothing about the server's
 * state: this is all an unauthenticated peer may learn). */
int nr_tcpsrv_check_hello(const struct nr_tcpsrv_cfg *cfg, const struct nr_tcpsrv_hello *h, struct nr_error *err);

/* Serve a client whose CLIENT_HELLO has been received and checked (h): WELCOME and the rest of the session; the
 * session cap counts from accepted_ns (nr_now_ns). fd is closed on return; result as nr_tcpsrv_session(). */
int nr_tcpsrv_session_hello(const struct nr_tcpsrv_cfg *cfg, int fd, const struct sockaddr_storage *peer,
                            const struct nr_tcpsrv_hello *h, uint64_t accepted_ns);

/* Serve one client on fd (closed on return), handshake included. Returns 0 or the NR_E_* of the failure, which has
 * already been sent to the client and logged. Never exits the process. */
int nr_tcpsrv_session(const struct nr_tcpsrv_cfg *cfg, int fd, const struct sockaddr_storage *peer);

#endif
