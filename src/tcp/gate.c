/* The handshake gate of nr-tcpserver (see gate.h). */
#include "gate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nr/core.h"
#include "sock.h"

#define NR__HELLO_SEND_S 0.5 /* HELLO is a few hundred bytes into a fresh socket: it never waits in practice */

int nr_gate_init(struct nr_gate *g, const struct nr_tcpsrv_cfg *cfg, int cap, struct nr_error *err)
{
    memset(g, 0, sizeof *g);
    g->cfg = cfg;
    g->cap = cap < 1 ? 1 : cap;
    if (!(g->conns = calloc((size_t)g->cap, sizeof *g->conns)))
        return nr_error_set(err, NR_E_NOMEM, "cannot allocate %d pending-connection slots", g->cap);
    for (int i = 0; i < g->cap; i++)
        g->conns[i].fd = -1;
    return NR_OK;
}

void nr_gate_free(struct nr_gate *g)
{
    for (int i = 0; g->conns && i < g->cap; i++)
        if (g->conns[i].fd >= 0)
            nr_gate_close(g, i);
    free(g->conns);
    g->conns = NULL;
    g->n = 0;
}

void nr_gate_close(struct nr_gate *g, int i)
{
    close(g->conns[i].fd);
    nr_gate_release(g, i);
}

void nr_gate_release(struct nr_gate *g, int i)
{
    g->conns[i].fd = -1;
    g->conns[i].ready = false;
    g->conns[i].have = 0;
    g->n--;
}

int nr_gate_drop_oldest(struct nr_gate *g)
{
    int oldest = -1;
    for (int i = 0; i < g->cap; i++)
        if (g->conns[i].fd >= 0 && !g->conns[i].ready &&
            (oldest < 0 || g->conns[i].accepted_ns < g->conns[oldest].accepted_ns))
            oldest = i;
    if (oldest < 0) /* only authenticated clients waiting: the oldest of them goes */
        for (int i = 0; i < g->cap; i++)
            if (g->conns[i].fd >= 0 && (oldest < 0 || g->conns[i].accepted_ns < g->conns[oldest].accepted_ns))
                oldest = i;
    if (oldest < 0)
        return 0;
    nr_gate_close(g, oldest);
    g->dropped++;
    return 1;
}

int nr_gate_add(struct nr_gate *g, int fd, const struct sockaddr_storage *peer, struct nr_error *err)
{
    if (g->n >= g->cap)
        nr_gate_drop_oldest(g);
    int i = 0;
    while (i < g->cap && g->conns[i].fd >= 0)
        i++;
    if (i == g->cap) { /* cannot happen after a drop; refuse rather than overrun */
        close(fd);
        return nr_error_set(err, NR_E_INTERNAL, "no free pending-connection slot");
    }
    struct nr_gate_conn *c = &g->conns[i];
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->peer = *peer;
    nr_tcp_unmap(&c->peer); /* an IPv4 client of the dual-stack socket is named as IPv4 in logs and messages */
    c->accepted_ns = nr_now_ns();
    c->deadline_ns = c->accepted_ns + (uint64_t)(g->cfg->handshake_s * 1e9);
    g->n++;
    int rc = nr_tcpsrv_send_hello(g->cfg, fd, &c->hello, NR__HELLO_SEND_S, err);
    if (rc < 0)
        nr_gate_close(g, i);
    return rc;
}

int nr_gate_pollfds(const struct nr_gate *g, struct pollfd *pfd, int *idx)
{
    int k = 0;
    for (int i = 0; i < g->cap; i++)
        if (g->conns[i].fd >= 0 && !g->conns[i].ready) {
            pfd[k] = (struct pollfd){g->conns[i].fd, POLLIN, 0};
            idx[k++] = i;
        }
    return k;
}

/* Log and answer a failed handshake, then close it. */
static void nr__refuse(struct nr_gate *g, int i, const struct nr_error *e)
{
    char msg[512], peer[64];
    nr_error_message(e, msg, sizeof msg);
    if (e->code != NR_E_CLOSED && e->code != NR_E_PEER) {
        struct nr_proto_conn c;
        nr_proto_conn_init(&c, g->conns[i].fd, NR__HELLO_SEND_S);
        nr_proto_send_error(&c, e->code, msg);
        nr_proto_conn_free(&c);
    }
    if (g->cfg->log)
        fprintf(g->cfg->log, "nr-tcpserver: client %s: %s\n", nr_tcp_addr_str(&g->conns[i].peer, peer, sizeof peer),
                msg);
    nr_gate_close(g, i);
}

void nr_gate_read(struct nr_gate *g, int i)
{
    struct nr_gate_conn *c = &g->conns[i];
    struct nr_error e;
    nr_error_clear(&e);
    uint32_t want = NR_PROTO_HDR_BYTES;
    struct nr_proto_hdr h = {0};
    if (c->have >= NR_PROTO_HDR_BYTES) {
        nr_proto_decode_header(c->buf, &h, NULL);
        want += h.length;
    }
    ssize_t got = recv(c->fd, c->buf + c->have, want - c->have, MSG_DONTWAIT);
    if (got == 0) {
        nr_error_set(&e, NR_E_CLOSED, "closed the connection during the handshake");
    } else if (got < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return;
        nr_error_sys(&e, errno == ECONNRESET ? NR_E_CLOSED : NR_E_NET, "handshake: recv");
    } else {
        c->have += (uint32_t)got;
        if (c->have == NR_PROTO_HDR_BYTES) {
            /* The header decides how much follows: CLIENT_HELLO (its length checked by type) or an ERROR. */
            if (nr_proto_decode_header(c->buf, &h, &e) == 0 && h.type != NR_MSG_CLIENT_HELLO && h.type != NR_MSG_ERROR)
                nr_error_set(&e, NR_E_PROTO, "expected CLIENT_HELLO from client, got %s", nr_proto_type_name(h.type));
            if (e.code == 0 && (h.flags & NR_HDR_TAGGED))
                nr_error_set(&e, NR_E_PROTO, "tagged %s message before the handshake", nr_proto_type_name(h.type));
            if (e.code == 0 && h.length > NR_PROTO_SMALL_MAX)
                nr_error_set(&e, NR_E_PROTO, "%s message of %u bytes exceeds the %u this side accepts",
                             nr_proto_type_name(h.type), h.length, NR_PROTO_SMALL_MAX);
            if (e.code == 0 && h.length > 0)
                return; /* the payload follows */
        } else if (c->have < NR_PROTO_HDR_BYTES || c->have < want) {
            return;
        }
    }
    if (e.code == 0) { /* a whole message */
        union nr_msg m;
        nr_proto_decode_header(c->buf, &h, NULL);
        if (nr_proto_decode(&h, c->buf + NR_PROTO_HDR_BYTES, &m, &e) == 0) {
            if (h.type == NR_MSG_ERROR) {
                nr_error_set(&e, NR_E_PEER, "client: %s", m.error.text);
            } else {
                c->hello.client = m.client_hello;
                if (nr_tcpsrv_check_hello(g->cfg, &c->hello, &e) == 0) {
                    c->ready = true;
                    c->ready_ns = nr_now_ns();
                    return;
                }
            }
        }
    }
    nr__refuse(g, i, &e);
}

int nr_gate_expire(struct nr_gate *g)
{
    uint64_t now = nr_now_ns(), next = 0;
    for (int i = 0; i < g->cap; i++) {
        struct nr_gate_conn *c = &g->conns[i];
        if (c->fd < 0 || c->ready)
            continue;
        if (now >= c->deadline_ns) {
            struct nr_error e;
            nr_error_clear(&e);
            nr_error_set(&e, NR_E_TIMEOUT, "no CLIENT_HELLO within %.1f s (--handshake-timeout)", g->cfg->handshake_s);
            nr__refuse(g, i, &e);
        } else if (!next || c->deadline_ns < next) {
            next = c->deadline_ns;
        }
    }
    if (!next)
        return -1;
    return (int)((next - now) / 1000000u) + 1;
}

int nr_gate_next_ready(const struct nr_gate *g)
{
    int best = -1;
    for (int i = 0; i < g->cap; i++)
        if (g->conns[i].fd >= 0 && g->conns[i].ready && (best < 0 || g->conns[i].ready_ns < g->conns[best].ready_ns))
            best = i;
    return best;
}

void nr_gate_close_all_except(const struct nr_gate *g, int keep_fd)
{
    for (int i = 0; i < g->cap; i++)
        if (g->conns[i].fd >= 0 && g->conns[i].fd != keep_fd)
            close(g->conns[i].fd);
}
