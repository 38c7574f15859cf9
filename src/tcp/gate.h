/* The handshake gate of nr-tcpserver: every accepted connection waits here, many at once, until it has sent a
 * CLIENT_HELLO that passes the shared-secret check; only then does the server look at it as a client (serve it or
 * tell it the server is busy).
 *
 * Why. The server used to run each new connection's handshake in turn, each with its own --handshake-timeout, so
 * N connections that connected and said nothing held a real client for N x 5 s. Here one poll() watches all of
 * them, each with its own deadline; the set is bounded (--max-pending) and, when full, the oldest connection is
 * dropped for the new one, so no number of idle connections can keep a real client out. An unauthenticated peer
 * learns nothing about the server: it gets HELLO (the protocol version, whether a secret is required and a nonce,
 * as every client does), and, when its CLIENT_HELLO fails the check, the reason it failed.
 */
#ifndef NR_TCP_GATE_H
#define NR_TCP_GATE_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proto.h"
#include "srv.h"

struct nr_error;

/* One connection in the gate. */
struct nr_gate_conn {
    int fd;                          /* -1: free slot */
    uint64_t accepted_ns;            /* nr_now_ns() at accept: the oldest is dropped first */
    uint64_t deadline_ns;            /* end of its handshake (accept + --handshake-timeout) */
    struct sockaddr_storage peer;
    struct nr_tcpsrv_hello hello;    /* our nonce, then its checked CLIENT_HELLO */
    bool ready;                      /* CLIENT_HELLO received and checked: a client waiting to be served */
    uint64_t ready_ns;               /* when it became ready */
    uint32_t have;                   /* bytes of its CLIENT_HELLO received so far */
    uint8_t buf[NR_PROTO_HDR_BYTES + NR_PROTO_SMALL_MAX];
};

struct nr_gate {
    const struct nr_tcpsrv_cfg *cfg;
    struct nr_gate_conn *conns;      /* cap slots */
    int cap;                         /* --max-pending */
    int n;                           /* slots in use */
    unsigned long dropped;           /* connections dropped because the gate was full */
};

/* Allocate cap slots. */
int nr_gate_init(struct nr_gate *g, const struct nr_tcpsrv_cfg *cfg, int cap, struct nr_error *err);

/* Close every connection and free the slots. */
void nr_gate_free(struct nr_gate *g);

/* Take an accepted connection (non-blocking fd): send HELLO and start its deadline. A full gate first drops its
 * oldest connection. Returns 0, or the error that made fd unusable (fd is then closed). */
int nr_gate_add(struct nr_gate *g, int fd, const struct sockaddr_storage *peer, struct nr_error *err);

/* Drop the oldest connection (to free a descriptor). Returns 1 if one was dropped. */
int nr_gate_drop_oldest(struct nr_gate *g);

/* Fill pfd (room for g->cap entries) with the connections still in their handshake; idx[k] is the slot of
 * pfd[k]. Returns the count. */
int nr_gate_pollfds(const struct nr_gate *g, struct pollfd *pfd, int *idx);

/* Read what slot i has sent (after poll() reported it). A complete CLIENT_HELLO is checked: a pass makes the slot
 * ready, a failure is answered with an ERROR naming what failed and the connection is closed. */
void nr_gate_read(struct nr_gate *g, int i);

/* Close the connections whose handshake deadline passed (each told so). Returns the milliseconds until the next
 * deadline (-1: none). */
int nr_gate_expire(struct nr_gate *g);

/* The ready slot waiting longest, or -1. */
int nr_gate_next_ready(const struct nr_gate *g);

/* Take slot i out of the gate without closing its fd (handed to a session). */
void nr_gate_release(struct nr_gate *g, int i);

/* Close slot i's connection. */
void nr_gate_close(struct nr_gate *g, int i);

/* In a session's child process: close every connection of the gate except keep_fd (the child must not hold the
 * others open), without touching the parent's bookkeeping. */
void nr_gate_close_all_except(const struct nr_gate *g, int keep_fd);

#endif
