/* nr-linkmap: the TCP transport, MPI only the control plane (see linkmap.h). */
#include "linkmap.h"

/* ---- TCP ---- */

static void lm_put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static uint32_t lm_get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void lm_put64(unsigned char *p, uint64_t v)
{
    lm_put32(p, (uint32_t)(v >> 32));
    lm_put32(p + 4, (uint32_t)v);
}

static uint64_t lm_get64(const unsigned char *p)
{
    return (uint64_t)lm_get32(p) << 32 | lm_get32(p + 4);
}

void lm_hello(const struct lm_ctx *c, unsigned char *h, uint32_t kind, int round)
{
    memcpy(h, "NRLM", 4);
    lm_put32(h + 4, kind);
    lm_put32(h + 8, (uint32_t)round);
    lm_put32(h + 12, (uint32_t)c->m->rank);
    memcpy(h + 16, c->token, LM_TOKEN_BYTES);
}

const char *lm_endpoint_str(const struct lm_ctx *c, int r, char *buf, size_t len)
{
    char a[INET_ADDRSTRLEN] = "?";
    struct in_addr in = {.s_addr = c->addr[r]};
    inet_ntop(AF_INET, &in, a, sizeof a);
    snprintf(buf, len, "%s:%u", a, (unsigned)c->port[r]);
    return buf;
}

/* Accept waiting connections and read their hellos: the fd of the one that is (kind, round, src) with the job's
 * token, else -1. A wrong token closes the connection and counts it; so does a hello not whole in
 * LM_HELLO_TIMEOUT_S, and the oldest waiting connection when LM_PENDING_MAX wait. */
int lm_tcp_accept(struct lm_ctx *c, uint32_t kind, int round, int src)
{
    double now = MPI_Wtime();
    for (;;) {
        int fd = accept4(c->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            break;
        if (c->npending == LM_PENDING_MAX) {
            close(c->pending[0].fd);
            memmove(c->pending, c->pending + 1, sizeof c->pending[0] * (LM_PENDING_MAX - 1));
            c->npending--, c->rejected++;
        }
        struct lm_pending *p = &c->pending[c->npending++];
        p->fd = fd, p->since = now, p->got = 0;
    }
    int found = -1;
    for (int i = 0; i < c->npending;) {
        struct lm_pending *p = &c->pending[i];
        bool drop = false;
        ssize_t n = recv(p->fd, p->h + p->got, LM_HELLO_BYTES - p->got, 0);
        if (n > 0)
            p->got += (size_t)n;
        else if (n == 0 || !nr_net_again())
            drop = true;
        if (p->got == LM_HELLO_BYTES) {
            if (memcmp(p->h, "NRLM", 4) != 0 || !nr_mem_equal_ct(p->h + 16, c->token, LM_TOKEN_BYTES)) {
                drop = true;
                c->rejected++;
            } else if (found < 0 && lm_get32(p->h + 4) == kind && lm_get32(p->h + 8) == (uint32_t)round &&
                       lm_get32(p->h + 12) == (uint32_t)src) {
                found = p->fd;
                memmove(p, p + 1, sizeof *p * (size_t)(c->npending - i - 1));
                c->npending--;
                continue;
            } else
                drop = true; /* the job's, but not the connection awaited (a late one of an earlier round) */
        } else if (drop || now - p->since > LM_HELLO_TIMEOUT_S) {
            drop = true;
            c->rejected++;
        }
        if (drop) {
            close(p->fd);
            memmove(p, p + 1, sizeof *p * (size_t)(c->npending - i - 1));
            c->npending--;
            continue;
        }
        i++;
    }
    return found;
}

enum { S_NONE, S_CONNECT, S_HELLO, S_DATA, S_ACK };
enum { R_NONE, R_WAIT, R_DATA, R_ACK };

void lm_bw_tcp(struct lm_ctx *c, int round, int dst, int src, double t0, struct lm_report *rep)
{
    const double until = t0 + c->o->time_s, deadline = t0 + c->rt;
    const size_t msg = c->o->msg;
    const bool stall = dst >= 0 && lm_fault("stall", c->m->rank, round, NULL);
    double gap_ms = 0, next_write = 0; /* the test build's slow sender: one write per gap */
    if (dst >= 0)
        lm_fault("slow", c->m->rank, round, &gap_ms);
    char ep[64];
    unsigned char hello[LM_HELLO_BYTES], ack[8], rack[8];
    size_t hoff = 0, soff = 0, aoff = 0, raoff = 0;
    int sfd = -1, sstate = S_NONE, rfd = -1, rstate = src >= 0 ? R_WAIT : R_NONE;
    double t_start = 0, t_last = 0, t_warm = -1;
    uint64_t b_warm = 0;
    if (dst >= 0) {
        lm_hello(c, hello, LM_KIND_DATA, round);
        sfd = nr_net_connect_from(c->my_addr, c->addr[dst], (uint16_t)c->port[dst]);
        if (sfd < 0)
            lm_fail(&rep->send, "connect to rank %d (%s) at %s: %s", dst, lm_host(c, dst),
                    lm_endpoint_str(c, dst, ep, sizeof ep), strerror(-sfd));
        else
            sstate = S_CONNECT;
    }
    while (sstate != S_NONE || rstate != R_NONE) {
        double now = MPI_Wtime();
        if (now > deadline)
            break;
        struct pollfd pf[2 + LM_PENDING_MAX + 1];
        nfds_t np = 0;
        if (sfd >= 0 && !((stall || now < next_write) && sstate == S_DATA))
            pf[np].fd = sfd, pf[np].events = sstate == S_ACK ? POLLIN : POLLOUT, pf[np++].revents = 0;
        if (rfd >= 0)
            pf[np].fd = rfd, pf[np].events = rstate == R_ACK ? POLLOUT : POLLIN, pf[np++].revents = 0;
        if (rstate == R_WAIT) {
            pf[np].fd = c->lfd, pf[np].events = POLLIN, pf[np++].revents = 0;
            for (int i = 0; i < c->npending; i++)
                pf[np].fd = c->pending[i].fd, pf[np].events = POLLIN, pf[np++].revents = 0;
        }
        double wake = deadline;
        if (sstate == S_DATA && !stall && until < wake)
            wake = until;
        if (sstate == S_DATA && now < next_write && next_write < wake)
            wake = next_write;
        int ms = (int)((wake - now) * 1000.0) + 1;
        poll(pf, np, lm_poll_ms(c, ms > 50 ? 50 : ms < 0 ? 0 : ms));
        lm_progress(c); /* rank 0's GO to the others, above all (see lm_progress) */
        now = MPI_Wtime();
        /* the sender */
        if (sstate == S_CONNECT) {
            int r = nr_net_connected(sfd);
            if (r < 0) {
                lm_fail(&rep->send, "connect to rank %d (%s) at %s: %s", dst, lm_host(c, dst),
                        lm_endpoint_str(c, dst, ep, sizeof ep), strerror(-r));
                nr_net_close_abort(sfd), sfd = -1, sstate = S_NONE;
            } else if (r > 0)
                sstate = S_HELLO;
        }
        if (sstate == S_HELLO) {
            ssize_t n = send(sfd, hello + hoff, sizeof hello - hoff, MSG_NOSIGNAL);
            if (n > 0 && (hoff += (size_t)n) == sizeof hello)
                sstate = S_DATA;
            else if (n < 0 && !nr_net_again()) {
                lm_fail(&rep->send, "send (hello) to rank %d (%s): %s", dst, lm_host(c, dst), strerror(errno));
                nr_net_close_abort(sfd), sfd = -1, sstate = S_NONE;
            }
        }
        if (sstate == S_DATA && !stall) {
            for (int k = 0; k < 64 && now < until && now >= next_write; k++) {
                ssize_t n = send(sfd, c->sbuf + soff, msg - soff, MSG_NOSIGNAL);
                if (n > 0) {
                    rep->send.bytes += (uint64_t)n;
                    soff = (soff + (size_t)n) % msg;
                    now = MPI_Wtime();
                    next_write = now + gap_ms * 1e-3;
                    continue;
                }
                if (n < 0 && !nr_net_again()) {
                    lm_fail(&rep->send, "send to rank %d (%s): %s", dst, lm_host(c, dst), strerror(errno));
                    nr_net_close_abort(sfd), sfd = -1, sstate = S_NONE;
                }
                break;
            }
            if (sstate == S_DATA && now >= until) {
                shutdown(sfd, SHUT_WR);
                sstate = S_ACK;
            }
        }
        if (sstate == S_ACK) {
            ssize_t n = recv(sfd, ack + aoff, sizeof ack - aoff, 0);
            if (n > 0 && (aoff += (size_t)n) == sizeof ack) {
                uint64_t got = lm_get64(ack);
                if (got != rep->send.bytes)
                    lm_fail(&rep->send, "rank %d (%s) received %llu of the %llu bytes sent", dst, lm_host(c, dst),
                            (unsigned long long)got, (unsigned long long)rep->send.bytes);
                close(sfd), sfd = -1, sstate = S_NONE;
            } else if (n == 0 || (n < 0 && !nr_net_again())) {
                lm_fail(&rep->send, "rank %d (%s) closed the connection without its byte count%s%s", dst,
                        lm_host(c, dst), n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
                close(sfd), sfd = -1, sstate = S_NONE;
            }
        }
        /* the receiver */
        if (rstate == R_WAIT) {
            int fd = lm_tcp_accept(c, LM_KIND_DATA, round, src);
            if (fd >= 0) {
                rfd = fd, rstate = R_DATA;
                t_start = t_last = MPI_Wtime();
            }
        }
        if (rstate == R_DATA) {
            for (int k = 0; k < 64; k++) {
                ssize_t n = recv(rfd, c->rbuf, c->rbuf_bytes, 0);
                if (n > 0) {
                    rep->recv.bytes += (uint64_t)n;
                    t_last = MPI_Wtime();
                    lm_warm_mark(c, rep, t_start, t_last, &t_warm, &b_warm);
                    continue;
                }
                int soerr = 0;
                socklen_t sl = sizeof soerr;
                if (n == 0 && getsockopt(rfd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr) {
                    /* a reset reads as the end of the stream: the error pending on the socket tells them apart */
                    lm_fail(&rep->recv, "receive from rank %d (%s): %s after %llu bytes", src, lm_host(c, src),
                            strerror(soerr), (unsigned long long)rep->recv.bytes);
                    nr_net_close_abort(rfd), rfd = -1, rstate = R_NONE;
                } else if (n == 0) {
                    lm_put64(rack, rep->recv.bytes);
                    rstate = R_ACK;
                } else if (!nr_net_again()) {
                    lm_fail(&rep->recv, "receive from rank %d (%s): %s", src, lm_host(c, src), strerror(errno));
                    nr_net_close_abort(rfd), rfd = -1, rstate = R_NONE;
                }
                break;
            }
        }
        if (rstate == R_ACK) {
            ssize_t n = send(rfd, rack + raoff, sizeof rack - raoff, MSG_NOSIGNAL);
            if ((n > 0 && (raoff += (size_t)n) == sizeof rack) || (n < 0 && !nr_net_again())) {
                if (n < 0)
                    lm_fail(&rep->recv, "returning the byte count to rank %d (%s): %s", src, lm_host(c, src),
                            strerror(errno));
                close(rfd), rfd = -1, rstate = R_NONE;
            }
        }
    }
    if (sstate != S_NONE) {
        if (stall)
            lm_fail(&rep->send, "send to rank %d (%s) stalled (injected by NR_LINKMAP_FAULT)", dst, lm_host(c, dst));
        else if (sstate == S_CONNECT || sstate == S_HELLO)
            lm_fail(&rep->send, "connection to rank %d (%s) at %s not made by the round timeout (%.1f s)", dst,
                    lm_host(c, dst), lm_endpoint_str(c, dst, ep, sizeof ep), c->rt);
        else if (sstate == S_DATA)
            lm_fail(&rep->send, "send to rank %d (%s) stalled: %llu bytes sent by the round timeout (%.1f s)", dst,
                    lm_host(c, dst), (unsigned long long)rep->send.bytes, c->rt);
        else
            lm_fail(&rep->send, "no byte count from rank %d (%s) by the round timeout (%.1f s; %llu bytes sent)", dst,
                    lm_host(c, dst), c->rt, (unsigned long long)rep->send.bytes);
        nr_net_close_abort(sfd); /* a reset: the receiver must not take this for the end of the data */
    }
    if (rstate != R_NONE) {
        if (rstate == R_WAIT)
            lm_fail(&rep->recv, "no connection from rank %d (%s) by the round timeout (%.1f s)", src, lm_host(c, src),
                    c->rt);
        else if (rstate == R_DATA)
            lm_fail(&rep->recv, "receive from rank %d (%s) stalled: %llu bytes in %.2f s and no end (EOF) by the "
                    "round timeout (%.1f s)", src, lm_host(c, src), (unsigned long long)rep->recv.bytes,
                    t_last - t_start, c->rt);
        else
            lm_fail(&rep->recv, "could not return the byte count to rank %d (%s) by the round timeout (%.1f s)", src,
                    lm_host(c, src), c->rt);
        if (rfd >= 0)
            nr_net_close_abort(rfd);
    }
    if (src >= 0) {
        rep->recv.seconds = t_last - t_start;
        lm_steady(rep, t_last, t_warm, b_warm);
    }
}

/* The idle hook of a socket wait (nr_net.h): the control sends in flight, and their poll timeout. */
int lm_idle(void *ctx, int ms)
{
    struct lm_ctx *c = ctx;
    lm_progress(c);
    return lm_poll_ms(c, ms);
}

/* Move len bytes over a socket within the deadline: 0, or -1 (timeout, closed, error: why says which). */
int lm_tcp_io(struct lm_ctx *c, int fd, unsigned char *buf, size_t len, bool out, double deadline, char *why,
                     size_t wlen)
{
    return nr_net_duplex(fd, out ? buf : NULL, out ? len : 0, out ? NULL : buf, out ? 0 : len, deadline, lm_idle, c,
                         why, wlen);
}

/* ---- set-up ---- */

int lm_tcp_setup(struct lm_ctx *c, struct nr_error *err)
{
    const struct lm_opts *o = c->o;
    const int n = c->m->size;
    int rc = NR_OK;
    char ip[INET_ADDRSTRLEN] = "";
    if (o->addr) {
        struct in_addr in = {0};
        if (inet_pton(AF_INET, o->addr, &in) != 1)
            rc = nr_error_set(err, NR_E_USAGE, "--bind-addr '%s' is not an IPv4 address", o->addr);
        c->my_addr = in.s_addr;
    } else
        rc = nr_net_iface_ipv4(o->iface, c->m->host, &c->my_addr, NULL, 0, err);
    uint16_t port = 0;
    int family = 0;
    if (rc == NR_OK) {
        struct in_addr in = {.s_addr = c->my_addr};
        inet_ntop(AF_INET, &in, ip, sizeof ip);
        c->lfd = nr_tcp_listen(ip, 0, NULL, n + 64, &port, &family, err);
        if (c->lfd < 0)
            rc = c->lfd, c->lfd = -1;
        else if (fcntl(c->lfd, F_SETFL, fcntl(c->lfd, F_GETFL) | O_NONBLOCK) < 0)
            rc = nr_error_sys(err, NR_E_NET, "fcntl O_NONBLOCK");
    }
    c->addr = calloc((size_t)n, sizeof *c->addr);
    c->port = calloc((size_t)n, sizeof *c->port);
    if (rc == NR_OK && (!c->addr || !c->port))
        rc = nr_error_set(err, NR_E_NOMEM, "out of memory");
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    uint32_t mine[2] = {c->my_addr, port};
    uint32_t *all = malloc(sizeof(uint32_t) * 2 * (size_t)n);
    rc = all ? NR_OK : nr_error_set(err, NR_E_NOMEM, "out of memory");
    if ((rc = nr_mpi_agree(rc, err)) < 0) {
        free(all);
        return rc;
    }
    rc = nr_mpi_check(MPI_Allgather(mine, 2 * (int)sizeof(uint32_t), MPI_BYTE, all, 2 * (int)sizeof(uint32_t),
                                    MPI_BYTE, MPI_COMM_WORLD), "MPI_Allgather (addresses)", err);
    for (int r = 0; rc == NR_OK && r < n; r++)
        c->addr[r] = all[2 * r], c->port[r] = all[2 * r + 1];
    free(all);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    /* the job's token: only ranks of this job know it */
    if (c->m->rank == 0)
        rc = nr_tcp_random(c->token, sizeof c->token, err);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    rc = nr_mpi_check(MPI_Bcast(c->token, LM_TOKEN_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast (token)", err);
    return nr_mpi_agree(rc, err);
}
