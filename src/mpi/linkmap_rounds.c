/* nr-linkmap: the rounds, driven by rank 0 over small control messages, every wait bounded (see linkmap.h). */
#include "linkmap.h"

/* ---- the faults of the test build (nr-linkmap-faulty): NR_LINKMAP_FAULT=stall:RANK:ROUND | hang:RANK:ROUND:S |
 * slow:RANK:ROUND:MS (that rank as sender waits MS ms between messages or writes: slow, but ok); RANK -1: every
 * rank, ROUND -1: every round; several, separated by commas ---- */
#ifdef NR_LINKMAP_FAULTS
bool lm_fault(const char *kind, int rank, int round, double *seconds)
{
    for (const char *s = getenv("NR_LINKMAP_FAULT"); s && *s; s = strchr(s, ',') ? strchr(s, ',') + 1 : "") {
        char k[8] = "";
        int fr = -1, fround = -1;
        double sec = 0;
        if (sscanf(s, "%7[a-z]:%d:%d:%lf", k, &fr, &fround, &sec) < 3)
            return false;
        if (strcmp(k, kind) != 0 || (fr != rank && fr != -1) || (fround != round && fround != -1))
            continue;
        if (seconds)
            *seconds = sec;
        return true;
    }
    return false;
}
#else
bool lm_fault(const char *kind, int rank, int round, double *seconds)
{
    (void)kind, (void)rank, (void)round, (void)seconds;
    return false;
}
#endif

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void lm_fail(struct lm_side *s, const char *fmt, ...)
{
    if (s->failed)
        return; /* the first failure is the cause */
    s->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->error, sizeof s->error, fmt, ap);
    va_end(ap);
}

const char *lm_mpierr(int rc, char *buf, size_t len)
{
    char text[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, text, &n) != MPI_SUCCESS)
        snprintf(buf, len, "MPI error %d", rc);
    else
        snprintf(buf, len, "%s", text);
    return buf;
}

const char *lm_host(const struct lm_ctx *c, int r)
{
    if (c->hosts)
        return r >= 0 && r < c->m->size ? c->hosts[r] : "?";
    if (r == c->m->rank)
        return c->my_host;
    if (r == 0)
        return c->root_host;
    if (r >= 0 && r == c->turn.dst)
        return c->turn.dst_host;
    if (r >= 0 && r == c->turn.src)
        return c->turn.src_host;
    return "?";
}

void lm_nap(void)
{
    nr_sleep_s(LM_SIMULATED ? LM_SIM_POLL_S : 50e-6);
}

/* ---- control plane: rank 0 <-> every rank, every wait bounded ---- */

/* The control messages are small MPI_Isends whose requests are kept, never freed at once: MPI moves a message only
 * while its sender calls MPI, and the TCP transport's loops (transfer, round trips) would call none for seconds. On
 * one host a shared-memory or loopback path delivered them at MPI_Isend, so freeing worked there; across hosts
 * Open MPI's TCP BTL opens its connection to a peer at the first message (the GO to the one rank no set-up
 * collective had talked to), and that connection is made only by the sender's progress: rank 0 sat in its TCP
 * transfer, the GO waited, the rank never started its round (issue: "rank 3 (fast4) did not end its transfers").
 * So every wait loop calls lm_progress, which tests the control sends still in flight (MPI_Testsome: the standard's
 * progress rule for a request that is tested). */
static MPI_Request *lm_ctl_slot(struct lm_ctx *c, int group, int i)
{
    /* a rank's own sends first (LM_CTL_OWN: all a rank other than 0 has), then rank 0's four groups of n */
    if (group == LM_CTL_GROUPS - 1)
        return c->ctl + i;
    return c->ctl + LM_CTL_OWN + (size_t)group * (size_t)c->m->size + (size_t)i;
}

/* Test the control sends in flight: completed ones are released. Nothing to do (and no MPI call) when none are. */
void lm_progress(struct lm_ctx *c)
{
    for (int g = 0; g < LM_CTL_GROUPS; g++) {
        if (c->ctl_busy[g] <= 0)
            continue;
        const int len = g < LM_CTL_GROUPS - 1 ? c->m->size : LM_CTL_OWN;
        MPI_Request *rq = lm_ctl_slot(c, g, 0);
        int out = 0;
        if (MPI_Testsome(len, rq, &out, c->ctl_idx, c->ctl_st) != MPI_SUCCESS) {
            /* a failed control send: its receiver's deadline names the rank; let the library finish the rest */
            for (int i = 0; i < len; i++)
                if (rq[i] != MPI_REQUEST_NULL)
                    MPI_Request_free(&rq[i]);
            c->ctl_busy[g] = 0;
        } else if (out == MPI_UNDEFINED)
            c->ctl_busy[g] = 0;
        else
            c->ctl_busy[g] -= out;
    }
}

/* Poll timeouts: while control sends are in flight, a loop comes back for them every millisecond. */
int lm_poll_ms(const struct lm_ctx *c, int ms)
{
    for (int g = 0; g < LM_CTL_GROUPS; g++)
        if (c->ctl_busy[g] > 0)
            return ms < 1 ? ms : 1;
    return ms;
}

/* Start a control send in slot (group, i). A request still in the slot belongs to a message its receiver has
 * already taken (the callers' buffer rules below; the rtt turn's buffer never changes): it is freed, the library
 * ends it on its own. */
int lm_ctl_send(struct lm_ctx *c, int group, int i, void *buf, int count, MPI_Datatype type, int dest, int tag)
{
    MPI_Request *rq = lm_ctl_slot(c, group, i);
    if (*rq != MPI_REQUEST_NULL) {
        MPI_Request_free(rq);
        c->ctl_busy[group]--;
    }
    int rc = MPI_Isend(buf, count, type, dest, tag, MPI_COMM_WORLD, rq);
    if (rc != MPI_SUCCESS)
        *rq = MPI_REQUEST_NULL;
    else
        c->ctl_busy[group]++;
    return rc;
}

/* The end: control sends still in flight (the last DONE) are left to the library to finish. */
void lm_ctl_release(struct lm_ctx *c)
{
    if (!c->ctl)
        return;
    const size_t slots = LM_CTL_OWN + (c->m->rank == 0 ? (size_t)(LM_CTL_GROUPS - 1) * (size_t)c->m->size : 0);
    for (size_t i = 0; i < slots; i++)
        if (c->ctl[i] != MPI_REQUEST_NULL)
            MPI_Request_free(&c->ctl[i]);
    memset(c->ctl_busy, 0, sizeof c->ctl_busy);
}

/* Rank 0: rank r's word for the next step; with GO its part in the round (c->dst_of and the roles from it). */
static void lm_word(const struct lm_ctx *c, int r, int action, int round, struct lm_go *g)
{
    g->action = action, g->round = round;
    g->dst = g->src = g->prev = g->next = -1;
    if (action != LM_GO)
        return;
    g->dst = c->dst_of[r], g->src = c->src_of[r], g->prev = c->prev_of[r], g->next = c->next_of[r];
    snprintf(g->dst_host, sizeof g->dst_host, "%s", g->dst >= 0 ? c->hosts[g->dst] : "");
    snprintf(g->src_host, sizeof g->src_host, "%s", g->src >= 0 ? c->hosts[g->src] : "");
}

/* Rank 0: tell every other rank the next step (GO with its part in the round, RTT-GO, DONE). The buffers rotate
 * over four decisions: a buffer is reused only after every rank has reported twice since, so its earlier sends were
 * received. */
static int lm_tell_all(struct lm_ctx *c, int action, int round, struct nr_error *err)
{
    const int slot = c->dec_seq++ % 4;
    struct lm_go *d = c->dec + (size_t)slot * (size_t)c->m->size;
    for (int r = 1; r < c->m->size; r++) {
        lm_word(c, r, action, round, &d[r]);
        int rc = lm_ctl_send(c, slot, r, &d[r], action == LM_GO ? (int)sizeof d[r] : LM_GO_SHORT, MPI_BYTE, r,
                             LM_TAG_GO);
        if (rc != MPI_SUCCESS) {
            char what[64];
            snprintf(what, sizeof what, "MPI_Isend (control message to rank %d)", r);
            return nr_mpi_check(rc, what, err);
        }
    }
    return NR_OK;
}

/* Send a small message to rank 0 from own slot `own` (its buffer stays untouched until rank 0 has answered). */
static int lm_tell_root(struct lm_ctx *c, int own, void *buf, int bytes, int tag, struct nr_error *err)
{
    int rc = lm_ctl_send(c, LM_CTL_GROUPS - 1, own, buf, bytes, MPI_BYTE, 0, tag);
    if (rc != MPI_SUCCESS)
        return nr_mpi_check(rc, "MPI_Isend (to rank 0)", err);
    return NR_OK;
}

/* A rank other than 0: wait for rank 0's next word until the deadline. Silence ends the job (nr_mpi_fail_loop). */
static int lm_await(struct lm_ctx *c, int round, double deadline, const char *after, struct nr_error *err)
{
    MPI_Request rq;
    MPI_Status st;
    const double since = MPI_Wtime();
    int rc = MPI_Irecv(&c->word, (int)sizeof c->word, MPI_BYTE, 0, LM_TAG_GO, MPI_COMM_WORLD, &rq), flag = 0;
    while (rc == MPI_SUCCESS && !flag) {
        lm_progress(c);
        if ((rc = MPI_Test(&rq, &flag, &st)) != MPI_SUCCESS || flag)
            break;
        if (MPI_Wtime() > deadline) {
            nr_error_set(err, NR_E_TIMEOUT, "round %d: no word from rank 0 (%s) %s within %.1f s: rank 0 is hung or "
                         "dead", round, lm_host(c, 0), after, deadline - since);
            nr_mpi_fail_loop(c->m, err);
        }
        lm_nap();
    }
    if (rc != MPI_SUCCESS) {
        nr_mpi_check(rc, "MPI_Irecv/MPI_Test (control message from rank 0)", err);
        nr_mpi_fail_loop(c->m, err);
    }
    return c->word.action;
}

/* Rank 0: every other rank's `bytes` with `tag` into base + r x stride, until the deadline. missing[r] is set for
 * each rank whose message did not come. Returns the number missing. */
static int lm_collect(struct lm_ctx *c, int tag, void *base, size_t stride, int bytes, double deadline,
                      struct nr_error *err)
{
    const int n = c->m->size;
    int left = 0;
    memset(c->missing, 0, (size_t)n);
    c->creq[0] = MPI_REQUEST_NULL;
    for (int r = 1; r < n; r++) {
        int rc = MPI_Irecv((char *)base + (size_t)r * stride, bytes, MPI_BYTE, r, tag, MPI_COMM_WORLD, &c->creq[r]);
        if (rc != MPI_SUCCESS) {
            nr_mpi_check(rc, "MPI_Irecv (report)", err);
            nr_mpi_fail_loop(c->m, err);
        }
        left++;
    }
    while (left > 0 && MPI_Wtime() <= deadline) {
        int out = 0;
        lm_progress(c);
        int rc = MPI_Testsome(n, c->creq, &out, c->idx, c->st);
        if (rc != MPI_SUCCESS) {
            nr_mpi_check(rc, "MPI_Testsome (reports)", err);
            nr_mpi_fail_loop(c->m, err);
        }
        if (out == MPI_UNDEFINED)
            break;
        left -= out;
        if (out == 0)
            lm_nap();
    }
    int miss = 0;
    for (int r = 1; r < n; r++)
        if (c->creq[r] != MPI_REQUEST_NULL) {
            c->missing[r] = 1, miss++;
            MPI_Cancel(&c->creq[r]);
        }
    return miss;
}

int lm_run(struct lm_ctx *c, time_t started, struct nr_error *err)
{
    const int n = c->m->size, me = c->m->rank;
    const bool root = me == 0;
    double phase_end = MPI_Wtime() + c->rt; /* a rank's deadline for rank 0's next word is phase_end + 3 grace */
    for (int k = 0;; k++) { /* the plan's rounds, then the recheck rounds rank 0 builds, then DONE */
        double wall0 = MPI_Wtime();
        int action, rc;
        if (root) {
            if (k >= c->nplanned && c->o->recheck_below > 0) { /* a recheck round sets c->nrounds to k + 1 */
                if (!c->recheck_planned && lm_plan_recheck(c, err) < 0)
                    lm_abort(c, started, err);
                if (c->rc_ndir > 0 && lm_recheck_round(c, k, err) < 0)
                    lm_abort(c, started, err);
            }
            action = k >= c->nrounds ? LM_DONE : LM_GO;
            if (action == LM_GO) {
                if (k < c->nplanned && lm_plan_round(c, k, err) < 0)
                    lm_abort(c, started, err);
                lm_plan_roles(c);
            }
            if ((rc = lm_tell_all(c, action, k, err)) < 0)
                nr_mpi_fail_loop(c->m, err);
            lm_word(c, 0, action, k, &c->turn);
        } else if ((action = lm_await(c, k, phase_end + 3 * LM_GRACE_S, "to start the round", err)) != LM_DONE &&
                   action != LM_GO) {
            nr_error_set(err, NR_E_INTERNAL, "round %d: control message %d from rank 0 out of order", k, action);
            nr_mpi_fail_loop(c->m, err);
        }
        if (action == LM_DONE)
            break;
        if (!root)
            c->turn = c->word;
        if (c->turn.round != k) {
            nr_error_set(err, NR_E_INTERNAL, "round %d: rank 0 started round %d", k, c->turn.round);
            nr_mpi_fail_loop(c->m, err);
        }
        const int dst = c->turn.dst, src = c->turn.src;
        if (dst >= n || src >= n || dst == me || src == me) {
            nr_error_set(err, NR_E_INTERNAL, "round %d: rank 0 sent a part of -> %d, <- %d", k, dst, src);
            nr_mpi_fail_loop(c->m, err);
        }
        struct lm_report *rep = &c->rep_out[k % 2];
        memset(rep, 0, sizeof *rep);
        rep->round = k, rep->rank = me;
        rep->send.peer = dst, rep->recv.peer = src;
        rep->send.rtt_us = -1;
        double hang = 0;
        if (lm_fault("hang", me, k, &hang))
            nr_sleep_s(hang); /* the test build's hung rank */
        double t0 = MPI_Wtime();
        c->rejected = 0;
        if (c->transport == LM_MPI)
            lm_bw_mpi(c, k, dst, src, t0, rep);
        else
            lm_bw_tcp(c, k, dst, src, t0, rep);
        phase_end = t0 + c->rt;
        if (c->o->rtt) {
            /* checkpoint: no round trip while any transfer of the round still runs */
            if (root) {
                if (lm_collect(c, LM_TAG_READY, c->ready_in, sizeof(int), (int)sizeof(int), phase_end + LM_GRACE_S,
                               err) > 0) {
                    int r = 1;
                    while (r < n - 1 && !c->missing[r])
                        r++;
                    /* the round is not recorded: no rank has reported its pairs yet */
                    nr_error_set(err, NR_E_TIMEOUT, "round %d: rank %d (%s) did not end its transfers within %.1f s "
                                 "(hung or dead)", k, r, lm_host(c, r), c->rt + LM_GRACE_S);
                    lm_abort(c, started, err);
                }
                if ((rc = lm_tell_all(c, LM_RTT_GO, k, err)) < 0)
                    nr_mpi_fail_loop(c->m, err);
            } else {
                c->ready_out = k;
                if ((rc = lm_tell_root(c, LM_OWN_READY, &c->ready_out, (int)sizeof(int), LM_TAG_READY, err)) < 0)
                    nr_mpi_fail_loop(c->m, err);
                if (lm_await(c, k, phase_end + 3 * LM_GRACE_S, "to start the round trips", err) != LM_RTT_GO) {
                    nr_error_set(err, NR_E_INTERNAL, "round %d: control message from rank 0 out of order", k);
                    nr_mpi_fail_loop(c->m, err);
                }
            }
            double r0 = MPI_Wtime();
            lm_rtt(c, k, dst, src, r0, rep);
            phase_end = r0 + c->rt;
        }
        rep->rejected = c->rejected;
        rep->cpu_start = c->cpu_start;
        nr_cpu_limit_read(&rep->cpu_now);
        if (!root) {
            if ((rc = lm_tell_root(c, LM_OWN_REPORT + k % 2, rep, (int)sizeof *rep, LM_TAG_REPORT, err)) < 0)
                nr_mpi_fail_loop(c->m, err);
            continue;
        }
        int miss = lm_collect(c, LM_TAG_REPORT, c->reports, sizeof *c->reports, (int)sizeof *c->reports,
                              phase_end + LM_GRACE_S, err);
        c->reports[0] = *rep;
        for (int r = 0; r < n; r++)
            if (!c->missing[r] && c->reports[r].cpu_now.ok)
                c->cpu_first[r] = c->reports[r].cpu_start, c->cpu_last[r] = c->reports[r].cpu_now;
        lm_record(c, k, MPI_Wtime() - wall0);
        if (miss > 0) {
            char who[200] = "";
            int shown = 0;
            for (int r = 1; r < n; r++)
                if (c->missing[r] && shown++ < 8) {
                    char one[NR_HOST_MAX + 32]; /* a rank number and a whole host name: nothing cut */
                    snprintf(one, sizeof one, "%s%d (%s)", shown > 1 ? ", " : "", r, lm_host(c, r));
                    lm_append(who, sizeof who, one);
                }
            nr_error_set(err, NR_E_TIMEOUT, "round %d: no report from %d rank(s) within %.1f s (hung or dead): %s", k,
                         miss, c->rt + LM_GRACE_S, who);
            lm_abort(c, started, err);
        }
        for (int r = 0; r < n; r++)
            if (c->reports[r].stuck) {
                nr_error_set(err, NR_E_MPI, "round %d: rank %d (%s) has MPI requests that neither completed nor could "
                             "be cancelled", k, r, lm_host(c, r));
                lm_abort(c, started, err);
            }
    }
    return NR_OK;
}
