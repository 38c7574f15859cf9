/* nr-linkmap: the round-trip phase (--rtt; see linkmap.h). */
#include "linkmap.h"

/* ---- the round-trip phase (--rtt): the round's pairs one at a time, in the order of their senders ---- */

/* This rank's round trips to dst (its turn has come). */
static void lm_ping(struct lm_ctx *c, int round, int dst, double deadline, struct lm_report *rep)
{
    const int size = (int)c->o->rtt_size, trials = c->o->rtt_trials;
    const int tping = lm_tag(round, LM_T_PING), tpong = lm_tag(round, LM_T_PONG);
    int got = 0;
    char why[160] = "";
    if (c->transport == LM_MPI) {
        char e[MPI_MAX_ERROR_STRING];
        for (int t = 0; t <= trials; t++) {
            MPI_Request rq[2];
            int rc = MPI_Irecv(c->rtt_in, size, MPI_BYTE, dst, tpong, MPI_COMM_WORLD, &rq[0]);
            if (rc == MPI_SUCCESS && (rc = MPI_Isend(c->rtt_out, size, MPI_BYTE, dst, tping, MPI_COMM_WORLD,
                                                     &rq[1])) != MPI_SUCCESS)
                rq[1] = MPI_REQUEST_NULL;
            if (rc != MPI_SUCCESS) {
                lm_fail(&rep->send, "rtt: MPI_Irecv/MPI_Isend with rank %d (%s): %s", dst, lm_host(c, dst),
                        lm_mpierr(rc, e, sizeof e));
                break;
            }
            double a = MPI_Wtime();
            int flag = 0;
            MPI_Status st[2];
            while (!flag && MPI_Wtime() <= deadline) {
                if (MPI_Testall(2, rq, &flag, st) != MPI_SUCCESS)
                    break;
                if (!flag)
                    lm_spin();
            }
            if (!flag) {
                lm_fail(&rep->send, "rtt: no reply from rank %d (%s) to ping %d within %.1f s", dst, lm_host(c, dst),
                        t + 1, LM_RTT_PAIR_S);
                if (lm_mpi_drain(rq, 2))
                    rep->stuck = 1;
                break;
            }
            if (t > 0)
                c->rtt_samples[got++] = (MPI_Wtime() - a) * 1e6;
        }
    } else {
        unsigned char hello[LM_HELLO_BYTES];
        char ep[64];
        lm_hello(c, hello, LM_KIND_RTT, round);
        int fd = nr_net_connect_from(c->my_addr, c->addr[dst], (uint16_t)c->port[dst]), r = 0, one = 1;
        if (fd < 0) {
            lm_fail(&rep->send, "rtt: connect to rank %d (%s) at %s: %s", dst, lm_host(c, dst),
                    lm_endpoint_str(c, dst, ep, sizeof ep), strerror(-fd));
            return;
        }
        if ((r = nr_net_await_connect(fd, deadline, lm_idle, c)) <= 0)
            snprintf(why, sizeof why, "connect to %s: %s", lm_endpoint_str(c, dst, ep, sizeof ep),
                     r == -ETIMEDOUT ? "timed out" : strerror(-r));
        else {
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            if (lm_tcp_io(c, fd, hello, sizeof hello, true, deadline, why, sizeof why) < 0)
                r = -1;
        }
        int failed_ping = 0;
        for (int t = 0; r > 0 && t <= trials; t++) {
            double a = MPI_Wtime();
            if (lm_tcp_io(c, fd, c->rtt_out, (size_t)size, true, deadline, why, sizeof why) < 0 ||
                lm_tcp_io(c, fd, c->rtt_in, (size_t)size, false, deadline, why, sizeof why) < 0) {
                failed_ping = t + 1;
                r = -1;
                break;
            }
            if (t > 0)
                c->rtt_samples[got++] = (MPI_Wtime() - a) * 1e6;
        }
        if (r <= 0 && failed_ping)
            lm_fail(&rep->send, "rtt with rank %d (%s), ping %d: %s", dst, lm_host(c, dst), failed_ping, why);
        else if (r <= 0)
            lm_fail(&rep->send, "rtt with rank %d (%s): %s", dst, lm_host(c, dst), why);
        close(fd);
    }
    if (got == trials) {
        struct nr_stats s;
        if (nr_stats_compute(c->rtt_samples, (size_t)got, &s) == 0)
            rep->send.rtt_us = s.median;
    }
}

/* Wait until the request completes or the deadline passes: 0 done; -1 on an MPI error or the deadline (the request
 * then cancelled; a request that cannot be marks the job stuck). */
static int lm_complete_by(MPI_Request *rq, double deadline, struct lm_report *rep)
{
    int flag = 0;
    MPI_Status st;
    while (!flag && MPI_Wtime() <= deadline) {
        if (MPI_Test(rq, &flag, &st) != MPI_SUCCESS)
            return -1;
        if (!flag)
            lm_spin();
    }
    if (flag)
        return 0;
    if (lm_mpi_drain(rq, 1))
        rep->stuck = 1;
    return -1;
}

/* MPI: answer the pings of src (the first one has arrived in rtt_in). */
static void lm_echo_mpi(struct lm_ctx *c, int round, int src, double deadline, struct lm_report *rep)
{
    const int size = (int)c->o->rtt_size, tping = lm_tag(round, LM_T_PING), tpong = lm_tag(round, LM_T_PONG);
    for (int t = 0; t <= c->o->rtt_trials; t++) {
        MPI_Request rq = MPI_REQUEST_NULL;
        if (t > 0) { /* the next ping; on failure the sender names it */
            if (MPI_Irecv(c->rtt_in, size, MPI_BYTE, src, tping, MPI_COMM_WORLD, &rq) != MPI_SUCCESS ||
                lm_complete_by(&rq, deadline, rep) != 0)
                return;
        }
        memcpy(c->rtt_out, c->rtt_in, (size_t)size);
        if (MPI_Isend(c->rtt_out, size, MPI_BYTE, src, tpong, MPI_COMM_WORLD, &rq) != MPI_SUCCESS ||
            lm_complete_by(&rq, deadline, rep) != 0)
            return;
    }
}

static void lm_echo_tcp(struct lm_ctx *c, int fd, double deadline)
{
    const size_t size = (size_t)c->o->rtt_size;
    char why[160];
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    for (int t = 0; t <= c->o->rtt_trials; t++)
        if (lm_tcp_io(c, fd, c->rtt_in, size, false, deadline, why, sizeof why) < 0 ||
            lm_tcp_io(c, fd, c->rtt_in, size, true, deadline, why, sizeof why) < 0)
            break;
    close(fd);
}

void lm_rtt(struct lm_ctx *c, int round, int dst, int src, double start, struct lm_report *rep)
{
    const int me = c->m->rank, ttok = lm_tag(round, LM_T_TOKEN);
    const double deadline = start + c->rt;
    const int prev = c->turn.prev, next = c->turn.next;
    MPI_Request tok = MPI_REQUEST_NULL, first = MPI_REQUEST_NULL;
    MPI_Status st;
    char e[MPI_MAX_ERROR_STRING];
    int rc;
    bool have_turn = dst >= 0 && prev < 0, ping_done = dst < 0, echo_done = src < 0;
    if (dst >= 0 && prev >= 0 &&
        (rc = MPI_Irecv(&c->turn_in, 1, MPI_INT, prev, ttok, MPI_COMM_WORLD, &tok)) != MPI_SUCCESS) {
        lm_fail(&rep->send, "rtt: MPI_Irecv (turn) from rank %d: %s", prev, lm_mpierr(rc, e, sizeof e));
        ping_done = true;
    }
    if (src >= 0 && c->transport == LM_MPI &&
        MPI_Irecv(c->rtt_in, (int)c->o->rtt_size, MPI_BYTE, src, lm_tag(round, LM_T_PING), MPI_COMM_WORLD, &first) !=
            MPI_SUCCESS)
        echo_done = true;
    while (!(ping_done && echo_done) && MPI_Wtime() <= deadline) {
        bool progress = false;
        lm_progress(c); /* the turn this rank passed on (and rank 0's RTT-GO) */
        if (!echo_done) {
            double until = MPI_Wtime() + LM_RTT_PAIR_S;
            until = until < deadline ? until : deadline;
            if (c->transport == LM_MPI) {
                int flag = 0;
                if (MPI_Test(&first, &flag, &st) != MPI_SUCCESS)
                    echo_done = true;
                else if (flag) {
                    lm_echo_mpi(c, round, src, until, rep);
                    echo_done = progress = true;
                }
            } else {
                int fd = lm_tcp_accept(c, LM_KIND_RTT, round, src);
                if (fd >= 0) {
                    lm_echo_tcp(c, fd, until);
                    echo_done = progress = true;
                }
            }
        }
        if (!ping_done && !have_turn) {
            int flag = 0;
            if ((rc = MPI_Test(&tok, &flag, &st)) != MPI_SUCCESS) {
                lm_fail(&rep->send, "rtt: MPI_Test (turn from rank %d): %s", prev, lm_mpierr(rc, e, sizeof e));
                ping_done = true;
            } else if (flag)
                have_turn = true;
        }
        if (!ping_done && have_turn) {
            double until = MPI_Wtime() + LM_RTT_PAIR_S;
            lm_ping(c, round, dst, until < deadline ? until : deadline, rep);
            ping_done = progress = true;
            if (next >= 0) { /* the next sender's turn, also after a failure of this pair */
                c->turn_out = 1;
                if ((rc = lm_ctl_send(c, LM_CTL_GROUPS - 1, LM_OWN_TURN, &c->turn_out, 1, MPI_INT, next, ttok)) !=
                    MPI_SUCCESS)
                    lm_fail(&rep->send, "rtt: MPI_Isend (turn) to rank %d: %s", next, lm_mpierr(rc, e, sizeof e));
            }
        }
        if (!progress) {
            if (c->transport == LM_TCP && !echo_done) {
                struct pollfd pl = {c->lfd, POLLIN, 0};
                poll(&pl, 1, 1);
            } else
                lm_nap();
        }
    }
    if (!ping_done) {
        lm_fail(&rep->send, "rtt: the turn of rank %d (%s) did not come (from rank %d) by the round timeout (%.1f s)",
                me, lm_host(c, me), prev, c->rt);
        if (lm_mpi_drain(&tok, 1))
            rep->stuck = 1;
    }
    if (!echo_done && first != MPI_REQUEST_NULL && lm_mpi_drain(&first, 1))
        rep->stuck = 1;
}
