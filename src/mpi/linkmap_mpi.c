/* nr-linkmap: the transfer phase over MPI, and what the TCP transport shares with it (see linkmap.h). */
#include "linkmap.h"

/* The receiver marks where the warm-up ends (--warmup x -t after the sender's hello): what arrives before it is
 * left out of the steady rate, since a short stream's start is not the link's rate (a token bucket sends its burst
 * at wire speed, TCP's window is still opening). */
void lm_warm_mark(const struct lm_ctx *c, const struct lm_report *rep, double t_start, double now,
                         double *t_warm, uint64_t *b_warm)
{
    if (*t_warm < 0 && now - t_start >= c->o->warmup * c->o->time_s)
        *t_warm = now, *b_warm = rep->recv.bytes;
}

void lm_steady(struct lm_report *rep, double t_last, double t_warm, uint64_t b_warm)
{
    if (t_warm >= 0 && t_last > t_warm)
        rep->recv.steady_bytes = rep->recv.bytes - b_warm, rep->recv.steady_seconds = t_last - t_warm;
}

/* Cancel every pending request and give them LM_CANCEL_S to complete: 1 when some are still pending. */
int lm_mpi_drain(MPI_Request *rq, int n)
{
    for (int i = 0; i < n; i++)
        if (rq[i] != MPI_REQUEST_NULL)
            MPI_Cancel(&rq[i]);
    double until = MPI_Wtime() + LM_CANCEL_S;
    for (;;) {
        int left = 0;
        for (int i = 0; i < n; i++) {
            if (rq[i] == MPI_REQUEST_NULL)
                continue;
            int flag = 0;
            MPI_Status st;
            if (MPI_Test(&rq[i], &flag, &st) != MPI_SUCCESS)
                return 1;
            left += !flag;
        }
        if (!left)
            return 0;
        if (MPI_Wtime() > until)
            return 1;
        lm_yield();
    }
}

static bool lm_all_null(const MPI_Request *rq, int n)
{
    for (int i = 0; i < n; i++)
        if (rq[i] != MPI_REQUEST_NULL)
            return false;
    return true;
}

/* ---- the transfer phase over MPI ---- */

void lm_bw_mpi(struct lm_ctx *c, int round, int dst, int src, double t0, struct lm_report *rep)
{
    const int w = c->o->window, msg = (int)c->o->msg, me = c->m->rank;
    const int th = lm_tag(round, LM_T_HELLO), td = lm_tag(round, LM_T_DATA);
    const double until = t0 + c->o->time_s, deadline = t0 + c->rt;
    MPI_Request *sq = c->sreq, *rq = c->rreq; /* sq: w data, [w] hello, [w+1] end marker; rq: w data, [w] hello */
    for (int i = 0; i < w + 2; i++)
        sq[i] = MPI_REQUEST_NULL;
    for (int i = 0; i < w + 1; i++)
        rq[i] = MPI_REQUEST_NULL;
    char e[MPI_MAX_ERROR_STRING];
    int rc;
    const bool stall = dst >= 0 && lm_fault("stall", me, round, NULL);
    double gap_ms = 0, next_send = 0; /* the test build's slow sender: one message per gap, receives go on */
    if (dst >= 0)
        lm_fault("slow", me, round, &gap_ms);
    bool s_stop = false, s_term = false, s_done = dst < 0;
    uint64_t posted = 0;
    if (dst >= 0) {
        memcpy(c->hello_out, &round, sizeof round);
        if ((rc = MPI_Isend(c->hello_out, 8, MPI_BYTE, dst, th, MPI_COMM_WORLD, &sq[w])) != MPI_SUCCESS) {
            sq[w] = MPI_REQUEST_NULL;
            lm_fail(&rep->send, "MPI_Isend (hello) to rank %d (%s): %s", dst, lm_host(c, dst),
                    lm_mpierr(rc, e, sizeof e));
            s_stop = true;
        }
    }
    bool r_hello = false, r_term = false, r_done = src < 0;
    long long r_seq = 0, term_seq = -1;
    uint64_t term_count = 0;
    double t_start = 0, t_last = 0, t_warm = -1;
    uint64_t b_warm = 0;
    if (src >= 0 && (rc = MPI_Irecv(c->hello_in, 8, MPI_BYTE, src, th, MPI_COMM_WORLD, &rq[w])) != MPI_SUCCESS) {
        rq[w] = MPI_REQUEST_NULL;
        lm_fail(&rep->recv, "MPI_Irecv (hello) from rank %d (%s): %s", src, lm_host(c, src),
                lm_mpierr(rc, e, sizeof e));
        r_done = true;
    }
    while (!(s_done && r_done)) {
        bool progress = false;
        double now = MPI_Wtime();
        if (now > deadline)
            break;
        lm_progress(c);
        if (!s_done) {
            if (!s_stop && now >= until)
                s_stop = true;
            for (int i = 0; i < w && !s_stop && !stall && now >= next_send; i++) {
                if (sq[i] != MPI_REQUEST_NULL)
                    continue;
                if ((rc = MPI_Isend(c->sbuf, msg, MPI_BYTE, dst, td, MPI_COMM_WORLD, &sq[i])) != MPI_SUCCESS) {
                    sq[i] = MPI_REQUEST_NULL;
                    lm_fail(&rep->send, "MPI_Isend of data message %llu to rank %d (%s): %s",
                            (unsigned long long)posted + 1, dst, lm_host(c, dst), lm_mpierr(rc, e, sizeof e));
                    s_stop = true;
                    break;
                }
                posted++, progress = true;
                next_send = now + gap_ms * 1e-3;
            }
            int out = 0;
            if ((rc = MPI_Testsome(w + 2, sq, &out, c->idx, c->st)) != MPI_SUCCESS) {
                lm_fail(&rep->send, "MPI_Testsome (sends to rank %d (%s)): %s", dst, lm_host(c, dst),
                        lm_mpierr(rc, e, sizeof e));
                rep->stuck = 1, s_done = true;
            } else if (out != MPI_UNDEFINED && out > 0)
                progress = true;
            if (!s_done && s_stop && !s_term && !stall && lm_all_null(sq, w)) {
                c->term_out[0] = LM_TERM_MAGIC;
                c->term_out[1] = rep->send.failed ? LM_SEND_FAILED : posted;
                if ((rc = MPI_Isend(c->term_out, LM_TERM_BYTES, MPI_BYTE, dst, td, MPI_COMM_WORLD, &sq[w + 1])) !=
                    MPI_SUCCESS) {
                    sq[w + 1] = MPI_REQUEST_NULL;
                    lm_fail(&rep->send, "MPI_Isend (end marker) to rank %d (%s): %s", dst, lm_host(c, dst),
                            lm_mpierr(rc, e, sizeof e));
                }
                s_term = progress = true;
            }
            if (!s_done && s_term && lm_all_null(sq, w + 2))
                s_done = true;
        }
        if (!r_done) {
            int out = 0;
            if ((rc = MPI_Testsome(w + 1, rq, &out, c->idx, c->st)) != MPI_SUCCESS) {
                lm_fail(&rep->recv, "MPI_Testsome (receives from rank %d (%s)): %s", src, lm_host(c, src),
                        lm_mpierr(rc, e, sizeof e));
                rep->stuck = 1, r_done = true;
                out = 0;
            }
            for (int j = 0; out != MPI_UNDEFINED && j < out; j++) {
                int i = c->idx[j], cancelled = 0, cnt = 0;
                progress = true;
                MPI_Test_cancelled(&c->st[j], &cancelled);
                if (cancelled)
                    continue;
                if (i == w) { /* the hello: the receiver's clock starts, the data receives are posted */
                    r_hello = true;
                    t_start = t_last = MPI_Wtime();
                    for (int s = 0; s < w && !r_term; s++) {
                        c->rseq[s] = r_seq++;
                        if ((rc = MPI_Irecv(c->rbuf + (size_t)s * (size_t)msg, msg, MPI_BYTE, src, td,
                                            MPI_COMM_WORLD, &rq[s])) != MPI_SUCCESS) {
                            rq[s] = MPI_REQUEST_NULL;
                            lm_fail(&rep->recv, "MPI_Irecv from rank %d (%s): %s", src, lm_host(c, src),
                                    lm_mpierr(rc, e, sizeof e));
                            r_term = true;
                        }
                    }
                    continue;
                }
                MPI_Get_count(&c->st[j], MPI_BYTE, &cnt);
                if (cnt == msg) {
                    rep->recv.bytes += (uint64_t)msg;
                    t_last = MPI_Wtime();
                    lm_warm_mark(c, rep, t_start, t_last, &t_warm, &b_warm);
                    if (r_term)
                        continue;
                    c->rseq[i] = r_seq++;
                    if ((rc = MPI_Irecv(c->rbuf + (size_t)i * (size_t)msg, msg, MPI_BYTE, src, td, MPI_COMM_WORLD,
                                        &rq[i])) != MPI_SUCCESS) {
                        rq[i] = MPI_REQUEST_NULL;
                        lm_fail(&rep->recv, "MPI_Irecv from rank %d (%s): %s", src, lm_host(c, src),
                                lm_mpierr(rc, e, sizeof e));
                        r_term = true;
                    }
                } else if (cnt == LM_TERM_BYTES) {
                    /* the end marker: the receives posted after it match nothing (same source, tag: in order) */
                    uint64_t t[2];
                    memcpy(t, c->rbuf + (size_t)i * (size_t)msg, sizeof t);
                    if (t[0] != LM_TERM_MAGIC)
                        lm_fail(&rep->recv, "a %d-byte message from rank %d (%s) that is no end marker", cnt, src,
                                lm_host(c, src));
                    r_term = true, term_seq = c->rseq[i], term_count = t[1];
                    for (int s = 0; s < w; s++)
                        if (rq[s] != MPI_REQUEST_NULL && c->rseq[s] > term_seq)
                            MPI_Cancel(&rq[s]);
                } else {
                    lm_fail(&rep->recv, "an unexpected %d-byte message from rank %d (%s)", cnt, src, lm_host(c, src));
                    r_term = true;
                    for (int s = 0; s < w; s++)
                        if (rq[s] != MPI_REQUEST_NULL)
                            MPI_Cancel(&rq[s]);
                }
            }
            if (!r_done && r_term && lm_all_null(rq, w + 1))
                r_done = true;
        }
        if (!progress)
            lm_yield();
    }
    if (!s_done) {
        int left = 0;
        for (int i = 0; i < w + 2; i++)
            left += sq[i] != MPI_REQUEST_NULL;
        if (stall)
            lm_fail(&rep->send, "send to rank %d (%s) stalled (injected by NR_LINKMAP_FAULT)", dst, lm_host(c, dst));
        else
            lm_fail(&rep->send, "send to rank %d (%s) stalled: %d message(s) not completed by the round timeout "
                    "(%.1f s)", dst, lm_host(c, dst), left, c->rt);
        if (lm_mpi_drain(sq, w + 2))
            rep->stuck = 1;
    }
    if (!r_done) {
        if (r_hello)
            lm_fail(&rep->recv, "receive from rank %d (%s) stalled: %llu bytes in %.2f s and no end marker by the "
                    "round timeout (%.1f s)", src, lm_host(c, src), (unsigned long long)rep->recv.bytes,
                    t_last - t_start, c->rt);
        else
            lm_fail(&rep->recv, "nothing arrived from rank %d (%s) by the round timeout (%.1f s)", src,
                    lm_host(c, src), c->rt);
        if (lm_mpi_drain(rq, w + 1))
            rep->stuck = 1;
    }
    if (src >= 0) {
        rep->recv.seconds = t_last - t_start;
        lm_steady(rep, t_last, t_warm, b_warm);
        if (r_done && term_seq >= 0 && !rep->recv.failed) {
            if (term_count == LM_SEND_FAILED)
                lm_fail(&rep->recv, "the sender, rank %d (%s), reported a failure", src, lm_host(c, src));
            else if (term_count * (uint64_t)msg != rep->recv.bytes)
                lm_fail(&rep->recv, "received %llu bytes, rank %d (%s) sent %llu", (unsigned long long)rep->recv.bytes,
                        src, lm_host(c, src), (unsigned long long)(term_count * (uint64_t)msg));
        }
    }
    if (dst >= 0)
        rep->send.bytes = posted * (uint64_t)msg;
}
