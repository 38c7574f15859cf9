/* nr-linkmap: the link test of a whole partition as one MPI job (one rank per node), the idea of LLNL's mpiGraph
 * (written anew here): in every round each rank sends to one rank and receives from one rank, all pairs at once,
 * and the job ends with the N x N matrix of directed-pair bandwidths.
 *
 * Plans. `--plan shift` (default): rounds k = 1 .. N-1, in round k rank r sends to (r+k) mod N and receives from
 * (r-k) mod N, so every directed pair is measured once. `--plan-file FILE`: the caller's rounds (one round per line
 * of SRC>DST pairs by rank number or host name, docs/mpi.md), checked on rank 0 and broadcast.
 *
 * Transports. `--transport mpi` (default): -w messages of -m bytes in flight (MPI_Isend / MPI_Irecv), the sender
 * sends until -t seconds after the round's start and then a 16-byte end marker that carries its message count.
 * `--transport tcp`: MPI is only the control plane; every rank listens on the IPv4 address of --bind-iface (or
 * --bind-addr), addresses and ports are exchanged with MPI_Allgather, and the data moves over a TCP connection from
 * sender to receiver whose first 32 bytes carry a per-job random token (MPI_Bcast from rank 0): a connection without
 * it is closed and counted. The receiver returns its byte count when the sender has shut its side down.
 *
 * Rechecks (`--recheck-below F`). When the plan's rounds are done, rank 0 takes each direction's best ok rate over
 * the rounds (steady_mbps, else mbps: as the link verdict reads it), a link's figure its slower direction, and
 * measures every direction below F x the upper median link once more, alone in a round of its own (slowest first, at
 * most --recheck-max). On shared CPUs a healthy link's stream read 0.44-0.6 x the median when the host's scheduler
 * starved it for a moment: such a stall passes its recheck, a slow link stays slow. The recheck rounds are recorded
 * as any round, so a verdict that takes each direction's best round sees them; they cost at most --recheck-max
 * rounds of one pair each. A failed pair is not rechecked: its failure stands.
 *
 * Bounded time. Rank 0 drives the rounds with small point-to-point control messages (no blocking collective inside
 * the rounds, so nothing needs MPI-3): GO(round), the ranks run the round (transfer, then with --rtt the serial
 * round-trip phase after a READY/RTT-GO checkpoint), every rank sends its report to rank 0, and rank 0 records the
 * round and sends the next GO. The control messages are MPI_Isends whose requests every wait loop, the TCP ones
 * too, keeps testing (lm_progress): MPI moves a message only while its sender calls MPI, and across hosts Open MPI's
 * TCP BTL makes its connection to a peer only then. Every wait has a deadline derived from --round-timeout: a pair
 * that did not finish by then is recorded as failed (round, ranks, hosts, what stalled) and the next round runs.
 * When the job cannot go on (a rank sent no report: hung or dead; an MPI request could neither complete nor be
 * cancelled), rank 0 writes the JSON with everything it knows and ends the job with MPI_Abort; a rank that hears
 * nothing from rank 0 in time ends the job itself (nr_mpi_fail_loop).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nr_mpi.h"
#include "nr_net.h"
#include "sock.h"

#define NR__PROG "nr-linkmap"
#define LM_ERR 200                /* one side's error text */
#define LM_GRACE_S 3.0            /* rank 0's patience beyond a phase's deadline for a rank's message */
#define LM_CANCEL_S 1.0           /* how long cancelled MPI requests may take to complete */
#define LM_RTT_PAIR_S 2.0         /* one pair's round trips, at most */
#define LM_TERM_BYTES 16          /* the MPI end marker: magic, message count */
#define LM_TERM_MAGIC 0x4e524c4d454e4455ULL
#define LM_SEND_FAILED UINT64_MAX /* the end marker's count when the sender failed */
#define LM_MSG_MIN 32
#define LM_HELLO_BYTES 32         /* TCP: "NRLM", kind, round, source rank, 16-byte token */
#define LM_TOKEN_BYTES 16
#define LM_PENDING_MAX 8          /* accepted connections waiting for their hello */
#define LM_HELLO_TIMEOUT_S 2.0
#define LM_TAG_GO 11              /* rank 0 -> all: GO, GO-PAIR, RTT-GO, DONE */
#define LM_TAG_READY 12           /* all -> rank 0: transfer phase over (--rtt) */
#define LM_TAG_REPORT 13          /* all -> rank 0: the round's report */
#define LM_TAG_BASE 100
#define LM_TAG_ROUNDS 5000        /* data tags cycle every 5000 rounds (tags stay below 32767) */
#define LM_CTL_GROUPS 5           /* control sends: rank 0's four decision buffers, and a rank's own */
#define LM_CTL_OWN 4              /* a rank's own control sends: READY, the reports of two rounds, the rtt turn */

enum { LM_T_HELLO, LM_T_DATA, LM_T_PING, LM_T_PONG, LM_T_TOKEN, LM_T_KINDS };
enum { LM_GO = 1, LM_RTT_GO, LM_DONE, LM_GO_PAIR }; /* GO-PAIR: a recheck round of one pair */
enum { LM_OWN_READY, LM_OWN_REPORT, LM_OWN_TURN = LM_OWN_REPORT + 2 };
enum { LM_KIND_DATA = 1, LM_KIND_RTT = 2 };
enum lm_transport { LM_MPI, LM_TCP };

static int lm_tag(int round, int kind)
{
    return LM_TAG_BASE + (round % LM_TAG_ROUNDS) * LM_T_KINDS + kind;
}

struct lm_opts {
    const char *plan;       /* --plan */
    const char *plan_file;  /* --plan-file */
    const char *transport;  /* --transport */
    const char *iface;      /* --bind-iface */
    const char *addr;       /* --bind-addr */
    uint64_t msg;           /* -m */
    int window;             /* -w */
    double time_s;          /* -t */
    double warmup;          /* --warmup: share of -t at a stream's start left out of its steady rate */
    double round_timeout_s; /* --round-timeout (0: 10 x -t + 5) */
    int rtt;                /* --rtt */
    uint64_t rtt_size;      /* --rtt-size */
    int rtt_trials;         /* --rtt-trials */
    double recheck_below;   /* --recheck-below (0: off) */
    int recheck_max;        /* --recheck-max */
    int slowest;            /* --slowest */
    const char *json;       /* --json */
};

/* One rank's view of one direction of its round. */
struct lm_side {
    int32_t peer;    /* the other rank, -1 when this rank has no such role in the round */
    int32_t failed;
    uint64_t bytes;  /* sender: bytes sent; receiver: bytes received */
    double seconds;  /* receiver: from the sender's hello to the last byte */
    uint64_t steady_bytes;  /* receiver: bytes after the warm-up (--warmup) */
    double steady_seconds;  /* receiver: from the first byte after the warm-up to the last byte */
    double rtt_us;   /* sender with --rtt: median round trip, < 0 when not measured */
    char error[LM_ERR];
};

/* What every rank sends rank 0 after a round. */
struct lm_report {
    int32_t round;
    int32_t rank;
    int32_t stuck;    /* MPI requests that neither completed nor could be cancelled: the job must end */
    int32_t rejected; /* TCP connections closed for a missing or wrong token */
    struct lm_side send, recv;
    struct nr_cpu_limit cpu_start, cpu_now; /* the rank's CPU cgroup at its start and at this report */
};

/* Rank 0's record of one directed pair. */
struct lm_pair {
    int32_t round, src, dst, failed;
    uint64_t bytes;
    double seconds, mbps, rtt_us;
    double steady_mbps; /* the rate after the warm-up: what the link carries once queues and buckets have filled */
    char *error;
};

struct lm_round {
    int index;
    double wall_s;
    size_t first, n; /* its pairs in ctx.pairs */
    int failed;
};

/* Rank 0's record of one recheck: the direction measured again alone in round `round`. */
struct lm_recheck {
    int src, dst, round;
    double mbps_before; /* its best ok rate over the plan's rounds */
};

struct lm_pending {
    int fd;
    double since;
    size_t got;
    unsigned char h[LM_HELLO_BYTES];
};

struct lm_ctx {
    struct lm_opts *o;
    struct nr_mpi *m;
    enum lm_transport transport;
    char (*hosts)[NR_HOST_MAX];
    int nrounds;  /* the plan's rounds and, once planned, the recheck rounds after them */
    int nplanned; /* the plan's rounds */
    int *plan;    /* nrounds x size: the rank each rank sends to in the round, -1 none */
    char plan_name[64];
    double rt; /* the round timeout */
    char *sbuf, *rbuf;
    size_t rbuf_bytes;
    MPI_Request *sreq, *rreq, *creq;
    MPI_Status *st;
    int *idx;
    long long *rseq;
    unsigned char hello_out[8], hello_in[8];
    uint64_t term_out[2];
    unsigned char *rtt_out, *rtt_in;
    double *rtt_samples;
    int dec[4][4], dec_seq, din[4]; /* control messages: action, round, and for GO-PAIR its src, dst */
    int ready_out, *ready_in, turn_out, turn_in;
    struct lm_report rep_out[2];
    struct nr_cpu_limit cpu_start; /* this rank's CPU cgroup when it started (nr/cpulimit.h) */
    /* the control sends in flight (lm_ctl_send): groups 0-3 rank 0's decisions by buffer (n each, by rank), group 4
     * this rank's own (LM_CTL_OWN); ctl_busy[g] counts the group's active requests */
    MPI_Request *ctl;
    int ctl_busy[LM_CTL_GROUPS];
    int *ctl_idx;
    MPI_Status *ctl_st;
    /* tcp */
    int lfd;
    uint32_t my_addr;
    uint32_t *addr; /* network order, per rank */
    uint32_t *port;
    unsigned char token[LM_TOKEN_BYTES];
    struct lm_pending pending[LM_PENDING_MAX];
    int npending;
    int rejected;
    /* rank 0 */
    struct lm_report *reports;
    struct nr_cpu_limit *cpu_first, *cpu_last; /* per rank: its reading at its start and at its last report */
    char *missing;
    struct lm_pair *pairs;
    size_t npairs, cap;
    struct lm_round *rounds;
    int rounds_run;
    bool recheck_planned;
    struct lm_recheck *recheck;
    int nrecheck;
    double recheck_median; /* the upper median link the rechecks were chosen by, NAN when not chosen */
    long rejected_total;
    double started_s;
};

/* ---- the faults of the test build (nr-linkmap-faulty): NR_LINKMAP_FAULT=stall:RANK:ROUND | hang:RANK:ROUND:S |
 * slow:RANK:ROUND:MS (that rank as sender waits MS ms between messages or writes: slow, but ok); ROUND -1: every
 * round ---- */
#ifdef NR_LINKMAP_FAULTS
static bool lm_fault(const char *kind, int rank, int round, double *seconds)
{
    const char *s = getenv("NR_LINKMAP_FAULT");
    char k[8] = "";
    int fr = -1, fround = -1;
    double sec = 0;
    if (!s || sscanf(s, "%7[a-z]:%d:%d:%lf", k, &fr, &fround, &sec) < 3)
        return false;
    if (strcmp(k, kind) != 0 || fr != rank || (fround != round && fround != -1))
        return false;
    if (seconds)
        *seconds = sec;
    return true;
}
#else
static bool lm_fault(const char *kind, int rank, int round, double *seconds)
{
    (void)kind, (void)rank, (void)round, (void)seconds;
    return false;
}
#endif

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void lm_fail(struct lm_side *s, const char *fmt, ...)
{
    if (s->failed)
        return; /* the first failure is the cause */
    s->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->error, sizeof s->error, fmt, ap);
    va_end(ap);
}

static const char *lm_mpierr(int rc, char *buf, size_t len)
{
    char text[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, text, &n) != MPI_SUCCESS)
        snprintf(buf, len, "MPI error %d", rc);
    else
        snprintf(buf, len, "%s", text);
    return buf;
}

static const char *lm_host(const struct lm_ctx *c, int r)
{
    return c->hosts && r >= 0 && r < c->m->size ? c->hosts[r] : "?";
}

static void lm_nap(void)
{
    nr_sleep_s(50e-6);
}

/* ---- plans ---- */

static int lm_plan_shift(struct lm_ctx *c, struct nr_error *err)
{
    const int n = c->m->size;
    c->nrounds = n - 1;
    c->plan = malloc(sizeof(int) * (size_t)(c->nrounds > 0 ? c->nrounds : 1) * (size_t)n);
    if (!c->plan)
        return nr_error_set(err, NR_E_NOMEM, "out of memory for the plan");
    for (int k = 0; k < c->nrounds; k++)
        for (int r = 0; r < n; r++)
            c->plan[(size_t)k * (size_t)n + (size_t)r] = (r + k + 1) % n;
    snprintf(c->plan_name, sizeof c->plan_name, "shift");
    return NR_OK;
}

/* A plan-file endpoint: a rank number, or the host name (or its short form) of exactly one rank. */
static int lm_endpoint(const struct lm_ctx *c, const char *tok, const char *where, int *out, struct nr_error *err)
{
    const int n = c->m->size;
    if (*tok && strspn(tok, "0123456789") == strlen(tok)) {
        long v = strlen(tok) > 9 ? n : strtol(tok, NULL, 10);
        if (v >= n)
            return nr_error_set(err, NR_E_USAGE, "%s: rank %s does not exist (%d ranks)", where, tok, n);
        *out = (int)v;
        return NR_OK;
    }
    int found = -1, count = 0;
    for (int r = 0; r < n; r++) {
        char shortname[NR_HOST_MAX];
        nr_hostname_short(c->hosts[r], shortname, sizeof shortname);
        if (strcmp(c->hosts[r], tok) == 0 || strcmp(shortname, tok) == 0) {
            if (found < 0)
                found = r;
            count++;
        }
    }
    if (count == 0)
        return nr_error_set(err, NR_E_USAGE, "%s: no rank runs on host '%s'", where, tok);
    if (count > 1)
        return nr_error_set(err, NR_E_USAGE, "%s: host '%s' runs %d ranks: name them by rank number", where, tok,
                            count);
    *out = found;
    return NR_OK;
}

/* Rank 0: read and check the plan file (format in docs/mpi.md). Every error names the line. */
static int lm_plan_file(struct lm_ctx *c, struct nr_error *err)
{
    const int n = c->m->size;
    const char *path = c->o->plan_file;
    FILE *f = fopen(path, "r");
    if (!f)
        return nr_error_sys(err, NR_E_USAGE, "cannot read plan file '%s'", path);
    snprintf(c->plan_name, sizeof c->plan_name, "file");
    int *recv_from = malloc(sizeof(int) * (size_t)n);
    int *first_round = NULL;
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    int rc = recv_from ? NR_OK : nr_error_set(err, NR_E_NOMEM, "out of memory for the plan");
    while (rc == NR_OK && getline(&line, &cap, f) >= 0) {
        lineno++;
        char where[300];
        snprintf(where, sizeof where, "plan file '%s' line %ld", path, lineno);
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
        if (!tok)
            continue;
        if (strcmp(tok, "plan") == 0) {
            char *name = strtok_r(NULL, " \t\r\n", &save);
            if (!name || strtok_r(NULL, " \t\r\n", &save) || strlen(name) >= sizeof c->plan_name ||
                strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") != strlen(name))
                rc = nr_error_set(err, NR_E_USAGE, "%s: 'plan' takes one name of letters, digits, '_', '.', '-' "
                                  "(at most %zu)", where, sizeof c->plan_name - 1);
            else
                snprintf(c->plan_name, sizeof c->plan_name, "%s", name);
            continue;
        }
        int *grown = realloc(c->plan, sizeof(int) * (size_t)(c->nrounds + 1) * (size_t)n);
        int *fr = realloc(first_round, sizeof(int) * (size_t)(c->nrounds + 1));
        if (grown)
            c->plan = grown;
        if (fr)
            first_round = fr;
        if (!grown || !fr) {
            rc = nr_error_set(err, NR_E_NOMEM, "out of memory for the plan");
            break;
        }
        int *dst = c->plan + (size_t)c->nrounds * (size_t)n;
        for (int r = 0; r < n; r++)
            dst[r] = -1, recv_from[r] = -1;
        first_round[c->nrounds] = (int)lineno;
        for (; tok && rc == NR_OK; tok = strtok_r(NULL, " \t\r\n", &save)) {
            char *gt = strchr(tok, '>');
            int s = -1, d = -1;
            if (!gt || gt == tok || !gt[1] || strchr(gt + 1, '>')) {
                rc = nr_error_set(err, NR_E_USAGE, "%s: '%s' is not SRC>DST", where, tok);
                break;
            }
            *gt = '\0';
            if ((rc = lm_endpoint(c, tok, where, &s, err)) < 0 || (rc = lm_endpoint(c, gt + 1, where, &d, err)) < 0)
                break;
            if (s == d)
                rc = nr_error_set(err, NR_E_USAGE, "%s: %s>%s is a self pair (rank %d)", where, tok, gt + 1, s);
            else if (dst[s] >= 0)
                rc = nr_error_set(err, NR_E_USAGE, "%s: rank %d (%s) sends twice in one round (to %d and %d)",
                                  where, s, c->hosts[s], dst[s], d);
            else if (recv_from[d] >= 0)
                rc = nr_error_set(err, NR_E_USAGE, "%s: rank %d (%s) receives twice in one round (from %d and %d)",
                                  where, d, c->hosts[d], recv_from[d], s);
            else
                dst[s] = d, recv_from[d] = s;
        }
        c->nrounds++;
    }
    if (rc == NR_OK && ferror(f))
        rc = nr_error_sys(err, NR_E_USAGE, "cannot read plan file '%s'", path);
    if (rc == NR_OK && c->nrounds == 0)
        rc = nr_error_set(err, NR_E_USAGE, "plan file '%s' has no rounds", path);
    fclose(f);
    free(line), free(recv_from), free(first_round);
    return rc;
}

/* A recheck round after the others: src sends to dst, every other rank idles. */
static int lm_plan_append(struct lm_ctx *c, int src, int dst, struct nr_error *err)
{
    const int n = c->m->size;
    int *grown = realloc(c->plan, sizeof(int) * (size_t)(c->nrounds + 1) * (size_t)n);
    if (!grown)
        return nr_error_set(err, NR_E_NOMEM, "out of memory for the plan");
    c->plan = grown;
    int *row = c->plan + (size_t)c->nrounds++ * (size_t)n;
    for (int r = 0; r < n; r++)
        row[r] = -1;
    row[src] = dst;
    return NR_OK;
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
    return c->ctl + (size_t)group * (size_t)c->m->size + (size_t)i;
}

/* Test the control sends in flight: completed ones are released. Nothing to do (and no MPI call) when none are. */
static void lm_progress(struct lm_ctx *c)
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
static int lm_poll_ms(const struct lm_ctx *c, int ms)
{
    for (int g = 0; g < LM_CTL_GROUPS; g++)
        if (c->ctl_busy[g] > 0)
            return ms < 1 ? ms : 1;
    return ms;
}

/* Start a control send in slot (group, i). A request still in the slot belongs to a message its receiver has
 * already taken (the callers' buffer rules below; the rtt turn's buffer never changes): it is freed, the library
 * ends it on its own. */
static int lm_ctl_send(struct lm_ctx *c, int group, int i, void *buf, int count, MPI_Datatype type, int dest, int tag)
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
static void lm_ctl_release(struct lm_ctx *c)
{
    if (!c->ctl)
        return;
    for (size_t i = 0; i < (size_t)(LM_CTL_GROUPS - 1) * (size_t)c->m->size + LM_CTL_OWN; i++)
        if (c->ctl[i] != MPI_REQUEST_NULL)
            MPI_Request_free(&c->ctl[i]);
    memset(c->ctl_busy, 0, sizeof c->ctl_busy);
}

/* Rank 0: tell every other rank the next step (GO, GO-PAIR with its src and dst, RTT-GO, DONE). The buffers rotate
 * over four decisions: a buffer is reused only after every rank has reported twice since, so its earlier sends were
 * received. */
static int lm_tell_all(struct lm_ctx *c, int action, int round, int src, int dst, struct nr_error *err)
{
    const int slot = c->dec_seq++ % 4;
    int *d = c->dec[slot];
    d[0] = action, d[1] = round, d[2] = src, d[3] = dst;
    for (int r = 1; r < c->m->size; r++) {
        int rc = lm_ctl_send(c, slot, r, d, 4, MPI_INT, r, LM_TAG_GO);
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
    int rc = MPI_Irecv(c->din, 4, MPI_INT, 0, LM_TAG_GO, MPI_COMM_WORLD, &rq), flag = 0;
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
    return c->din[0];
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

/* Cancel every pending request and give them LM_CANCEL_S to complete: 1 when some are still pending. */
/* The receiver marks where the warm-up ends (--warmup x -t after the sender's hello): what arrives before it is
 * left out of the steady rate, since a short stream's start is not the link's rate (a token bucket sends its burst
 * at wire speed, TCP's window is still opening). */
static void lm_warm_mark(const struct lm_ctx *c, const struct lm_report *rep, double t_start, double now,
                         double *t_warm, uint64_t *b_warm)
{
    if (*t_warm < 0 && now - t_start >= c->o->warmup * c->o->time_s)
        *t_warm = now, *b_warm = rep->recv.bytes;
}

static void lm_steady(struct lm_report *rep, double t_last, double t_warm, uint64_t b_warm)
{
    if (t_warm >= 0 && t_last > t_warm)
        rep->recv.steady_bytes = rep->recv.bytes - b_warm, rep->recv.steady_seconds = t_last - t_warm;
}

static int lm_mpi_drain(MPI_Request *rq, int n)
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
        sched_yield();
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

static void lm_bw_mpi(struct lm_ctx *c, int round, int dst, int src, double t0, struct lm_report *rep)
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
            sched_yield();
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

static void lm_hello(const struct lm_ctx *c, unsigned char *h, uint32_t kind, int round)
{
    memcpy(h, "NRLM", 4);
    lm_put32(h + 4, kind);
    lm_put32(h + 8, (uint32_t)round);
    lm_put32(h + 12, (uint32_t)c->m->rank);
    memcpy(h + 16, c->token, LM_TOKEN_BYTES);
}

static const char *lm_endpoint_str(const struct lm_ctx *c, int r, char *buf, size_t len)
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
static int lm_tcp_accept(struct lm_ctx *c, uint32_t kind, int round, int src)
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

static void lm_bw_tcp(struct lm_ctx *c, int round, int dst, int src, double t0, struct lm_report *rep)
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

/* Move len bytes over a socket within the deadline: 0, or -1 (timeout, closed, error: why says which). */
/* The idle hook of a socket wait (nr_net.h): the control sends in flight, and their poll timeout. */
static int lm_idle(void *ctx, int ms)
{
    struct lm_ctx *c = ctx;
    lm_progress(c);
    return lm_poll_ms(c, ms);
}

static int lm_tcp_io(struct lm_ctx *c, int fd, unsigned char *buf, size_t len, bool out, double deadline, char *why,
                     size_t wlen)
{
    return nr_net_duplex(fd, out ? buf : NULL, out ? len : 0, out ? NULL : buf, out ? 0 : len, deadline, lm_idle, c,
                         why, wlen);
}

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
            while (!flag && MPI_Wtime() <= deadline)
                if (MPI_Testall(2, rq, &flag, st) != MPI_SUCCESS)
                    break;
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
    while (!flag && MPI_Wtime() <= deadline)
        if (MPI_Test(rq, &flag, &st) != MPI_SUCCESS)
            return -1;
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

static void lm_rtt(struct lm_ctx *c, int round, int dst, int src, double start, struct lm_report *rep)
{
    const int n = c->m->size, me = c->m->rank, ttok = lm_tag(round, LM_T_TOKEN);
    const int *p = c->plan + (size_t)round * (size_t)n;
    const double deadline = start + c->rt;
    int prev = -1, next = -1;
    for (int r = me - 1; r >= 0 && prev < 0; r--)
        if (p[r] >= 0)
            prev = r;
    for (int r = me + 1; r < n && next < 0; r++)
        if (p[r] >= 0)
            next = r;
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

/* ---- rank 0: recording, text, JSON ---- */

static int lm_add_pair(struct lm_ctx *c, const struct lm_pair *p)
{
    if (c->npairs == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        struct lm_pair *g = realloc(c->pairs, sizeof *g * cap);
        if (!g)
            return -1;
        c->pairs = g, c->cap = cap;
    }
    c->pairs[c->npairs++] = *p;
    return 0;
}

static void lm_append(char *buf, size_t len, const char *part)
{
    size_t u = strlen(buf);
    if (u + 1 < len)
        snprintf(buf + u, len - u, "%s%s", u ? "; " : "", part);
}

/* Record round `round` from the reports (missing[r]: rank r sent none). */
static void lm_record(struct lm_ctx *c, int round, double wall_s)
{
    const int n = c->m->size;
    const int *p = c->plan + (size_t)round * (size_t)n;
    struct lm_round *rd = &c->rounds[c->rounds_run++];
    rd->index = round, rd->wall_s = wall_s, rd->first = c->npairs, rd->n = 0, rd->failed = 0;
    for (int s = 0; s < n; s++) {
        int d = p[s];
        if (d < 0)
            continue;
        const struct lm_report *S = c->missing[s] ? NULL : &c->reports[s];
        const struct lm_report *D = c->missing[d] ? NULL : &c->reports[d];
        struct lm_pair pr = {round, s, d, 0, 0, 0, 0, NAN, NAN, NULL};
        if (D) {
            pr.bytes = D->recv.bytes, pr.seconds = D->recv.seconds;
            pr.mbps = nr_mbps(pr.bytes, pr.seconds);
            pr.steady_mbps = D->recv.steady_seconds > 0 ? nr_mbps(D->recv.steady_bytes, D->recv.steady_seconds) : NAN;
        }
        if (S && c->o->rtt && S->send.rtt_us >= 0)
            pr.rtt_us = S->send.rtt_us;
        char why[1024] = "", part[400];
        if (!D) {
            snprintf(part, sizeof part, "receiver rank %d (%s) sent no report (hung or dead)", d, lm_host(c, d));
            lm_append(why, sizeof why, part);
        } else if (D->recv.failed) {
            snprintf(part, sizeof part, "receiver: %s", D->recv.error);
            lm_append(why, sizeof why, part);
        }
        if (!S) {
            snprintf(part, sizeof part, "sender rank %d (%s) sent no report (hung or dead)", s, lm_host(c, s));
            lm_append(why, sizeof why, part);
        } else if (S->send.failed) {
            snprintf(part, sizeof part, "sender: %s", S->send.error);
            lm_append(why, sizeof why, part);
        }
        if (why[0]) {
            char full[1200];
            snprintf(full, sizeof full, "round %d, rank %d (%s) -> rank %d (%s): %s", round, s, lm_host(c, s), d,
                     lm_host(c, d), why);
            pr.failed = 1;
            pr.error = strdup(full);
            rd->failed++;
            printf("# FAILED %s\n", full);
        }
        if (lm_add_pair(c, &pr) == 0)
            rd->n++;
        else
            free(pr.error);
    }
    for (int r = 0; r < n; r++)
        if (!c->missing[r])
            c->rejected_total += c->reports[r].rejected;
    double lo = INFINITY, hi = 0;
    for (size_t i = rd->first; i < rd->first + rd->n; i++)
        if (!c->pairs[i].failed) {
            lo = c->pairs[i].mbps < lo ? c->pairs[i].mbps : lo;
            hi = c->pairs[i].mbps > hi ? c->pairs[i].mbps : hi;
        }
    if (lo > hi)
        lo = hi = 0;
    printf("# round %d (%d of %d): %zu pairs, %d failed, %.3f s, %.1f .. %.1f Mbit/s\n", round, c->rounds_run,
           c->nrounds, rd->n, rd->failed, wall_s, lo, hi);
    fflush(stdout);
}

static int lm_cmp_mbps(const void *a, const void *b)
{
    const struct lm_pair *x = *(const struct lm_pair *const *)a, *y = *(const struct lm_pair *const *)b;
    return x->mbps < y->mbps ? -1 : x->mbps > y->mbps;
}

/* The ok pairs, slowest first (malloc'ed; *n of them). */
static const struct lm_pair **lm_sorted_ok(const struct lm_ctx *c, size_t *n)
{
    const struct lm_pair **v = malloc(sizeof *v * (c->npairs ? c->npairs : 1));
    *n = 0;
    if (!v)
        return NULL;
    for (size_t i = 0; i < c->npairs; i++)
        if (!c->pairs[i].failed)
            v[(*n)++] = &c->pairs[i];
    qsort(v, *n, sizeof *v, lm_cmp_mbps);
    return v;
}

static void lm_print_table(const struct lm_ctx *c)
{
    const int n = c->m->size;
    int *cell = malloc(sizeof(int) * (size_t)n * (size_t)n); /* pair index + 1, 0 none */
    if (!cell)
        return;
    memset(cell, 0, sizeof(int) * (size_t)n * (size_t)n);
    for (size_t i = 0; i < c->npairs; i++)
        cell[(size_t)c->pairs[i].src * (size_t)n + (size_t)c->pairs[i].dst] = (int)i + 1;
    printf("# nr-linkmap: Mbit/s per directed pair, rows: sender, columns: receiver (FAIL: failed, .: not run)\n");
    printf("#%-4s %-16s", "src", "host");
    for (int d = 0; d < n; d++)
        printf(" %9d", d);
    printf("\n");
    for (int s = 0; s < n; s++) {
        printf("%5d %-16.16s", s, lm_host(c, s));
        for (int d = 0; d < n; d++) {
            int k = cell[(size_t)s * (size_t)n + (size_t)d];
            if (s == d)
                printf(" %9s", "-");
            else if (!k)
                printf(" %9s", ".");
            else if (c->pairs[k - 1].failed)
                printf(" %9s", "FAIL");
            else
                printf(" %9.1f", c->pairs[k - 1].mbps);
        }
        printf("\n");
    }
    free(cell);
    size_t nok = 0, nfail = 0;
    const struct lm_pair **ok = lm_sorted_ok(c, &nok);
    nfail = c->npairs - nok;
    if (ok && nok) {
        double *x = malloc(sizeof(double) * nok);
        struct nr_stats s;
        for (size_t i = 0; x && i < nok; i++)
            x[i] = ok[i]->mbps;
        if (x && nr_stats_compute(x, nok, &s) == 0)
            printf("# pairs: %zu ok, %zu failed; Mbit/s min %.1f median %.1f max %.1f\n", nok, nfail, s.min, s.median,
                   s.max);
        free(x);
        for (size_t i = 0; i < nok && i < (size_t)c->o->slowest; i++)
            printf("# slowest %zu: rank %d (%s) -> rank %d (%s): %.1f Mbit/s (round %d)\n", i + 1, ok[i]->src,
                   lm_host(c, ok[i]->src), ok[i]->dst, lm_host(c, ok[i]->dst), ok[i]->mbps, ok[i]->round);
    } else
        printf("# pairs: %zu ok, %zu failed\n", nok, nfail);
    if (c->o->rtt) {
        printf("# round trip (%llu B, median of %d) us:\n", (unsigned long long)c->o->rtt_size, c->o->rtt_trials);
        for (size_t i = 0; i < c->npairs; i++)
            if (!isnan(c->pairs[i].rtt_us))
                printf("#   %d -> %d: %.2f\n", c->pairs[i].src, c->pairs[i].dst, c->pairs[i].rtt_us);
    }
    free(ok);
    fflush(stdout);
}

static void lm_json_pair_id(struct nr_json *j, const struct lm_ctx *c, const struct lm_pair *p)
{
    nr_json_kv_int(j, "round", p->round);
    nr_json_kv_int(j, "src", p->src);
    nr_json_kv_int(j, "dst", p->dst);
    nr_json_kv_string(j, "src_host", lm_host(c, p->src));
    nr_json_kv_string(j, "dst_host", lm_host(c, p->dst));
}

static int lm_write_json(const struct lm_ctx *c, time_t started, int status, const struct nr_error *failure)
{
    const struct lm_opts *o = c->o;
    const int n = c->m->size;
    struct nr_json j;
    FILE *f = nr_mpi_json_begin(&j, o->json, NR__PROG, "linkmap", started, status, failure);
    if (!f)
        return -1;
    nr_json_key(&j, "hosts");
    nr_json_begin_array(&j);
    for (int r = 0; c->hosts && r < n; r++)
        nr_json_string(&j, c->hosts[r]);
    nr_json_end_array(&j);
    nr_json_key(&j, "options");
    nr_json_begin_object(&j);
    nr_json_kv_int(&j, "processes", n);
    nr_json_kv_string(&j, "plan", o->plan_file ? NULL : o->plan);
    nr_json_kv_string(&j, "plan_file", o->plan_file);
    nr_json_kv_string(&j, "transport", o->transport);
    nr_json_kv_string(&j, "bind_iface", o->iface);
    nr_json_kv_string(&j, "bind_addr", o->addr);
    nr_json_kv_uint(&j, "message_size_bytes", o->msg);
    nr_json_kv_int(&j, "window", o->window);
    nr_json_kv_double(&j, "time_s", o->time_s);
    nr_json_kv_double(&j, "warmup", o->warmup);
    nr_json_kv_double(&j, "round_timeout_s", c->rt);
    nr_json_kv_bool(&j, "rtt", o->rtt);
    nr_json_kv_uint(&j, "rtt_size_bytes", o->rtt_size);
    nr_json_kv_int(&j, "rtt_trials", o->rtt_trials);
    nr_json_kv_double(&j, "recheck_below", o->recheck_below);
    nr_json_kv_int(&j, "recheck_max", o->recheck_max);
    nr_json_end_object(&j);
    if (!c->plan || !c->rounds) /* the run failed before its plan was made: the head and the options only */
        return nr_mpi_json_end(&j, f);
    nr_json_kv_string(&j, "plan", c->plan_name);
    nr_json_kv_int(&j, "rounds_planned", c->nplanned);
    nr_json_kv_int(&j, "rounds_run", c->rounds_run);
    nr_json_kv_double(&j, "elapsed_s", MPI_Wtime() - c->started_s);
    if (c->transport == LM_TCP && c->addr && c->port && c->lfd >= 0) {
        nr_json_key(&j, "tcp");
        nr_json_begin_object(&j);
        nr_json_key(&j, "endpoints");
        nr_json_begin_array(&j);
        for (int r = 0; r < n; r++) {
            char ep[64];
            nr_json_string(&j, lm_endpoint_str(c, r, ep, sizeof ep));
        }
        nr_json_end_array(&j);
        nr_json_kv_int(&j, "rejected_connections", c->rejected_total);
        nr_json_end_object(&j);
    }
    nr_json_key(&j, "rounds");
    nr_json_begin_array(&j);
    for (int k = 0; k < c->rounds_run; k++) {
        const struct lm_round *rd = &c->rounds[k];
        nr_json_begin_object(&j);
        nr_json_kv_int(&j, "index", rd->index);
        nr_json_kv_double(&j, "wall_s", rd->wall_s);
        nr_json_kv_int(&j, "failed_pairs", rd->failed);
        nr_json_key(&j, "pairs");
        nr_json_begin_array(&j);
        for (size_t i = rd->first; i < rd->first + rd->n; i++) {
            const struct lm_pair *p = &c->pairs[i];
            nr_json_begin_object(&j);
            nr_json_kv_int(&j, "src", p->src);
            nr_json_kv_int(&j, "dst", p->dst);
            nr_json_kv_string(&j, "src_host", lm_host(c, p->src));
            nr_json_kv_string(&j, "dst_host", lm_host(c, p->dst));
            nr_json_kv_uint(&j, "bytes", p->bytes);
            nr_json_kv_double(&j, "seconds", p->seconds);
            nr_json_kv_double(&j, "mbps", p->mbps);
            nr_json_kv_double(&j, "steady_mbps", p->steady_mbps);
            nr_json_kv_string(&j, "status", p->failed ? "failed" : "ok");
            if (p->error)
                nr_json_kv_string(&j, "error", p->error);
            if (o->rtt)
                nr_json_kv_double(&j, "rtt_us", p->rtt_us);
            nr_json_end_object(&j);
        }
        nr_json_end_array(&j);
        nr_json_end_object(&j);
    }
    nr_json_end_array(&j);
    /* recheck.pairs[]: the directions measured again alone (rounds[] has what they read) */
    nr_json_key(&j, "recheck");
    nr_json_begin_object(&j);
    nr_json_kv_double(&j, "below", o->recheck_below);
    nr_json_kv_int(&j, "max", o->recheck_max);
    nr_json_kv_double(&j, "median_link_mbps", c->recheck_median);
    nr_json_key(&j, "pairs");
    nr_json_begin_array(&j);
    for (int i = 0; i < c->nrecheck; i++) {
        const struct lm_recheck *x = &c->recheck[i];
        nr_json_begin_object(&j);
        nr_json_kv_int(&j, "src", x->src);
        nr_json_kv_int(&j, "dst", x->dst);
        nr_json_kv_string(&j, "src_host", lm_host(c, x->src));
        nr_json_kv_string(&j, "dst_host", lm_host(c, x->dst));
        nr_json_kv_int(&j, "round", x->round);
        nr_json_kv_double(&j, "mbps_before", x->mbps_before);
        nr_json_end_object(&j);
    }
    nr_json_end_array(&j);
    nr_json_end_object(&j);
    /* cpu_limits[rank]: the CPU cgroup each rank ran in, its quota and how long it throttled the rank between the
     * rank's start and its last report (null: no report, or no cgroup found) */
    nr_json_key(&j, "cpu_limits");
    nr_json_begin_array(&j);
    for (int r = 0; c->cpu_first && c->cpu_last && r < n; r++) {
        const struct nr_cpu_limit *a = &c->cpu_first[r], *b = &c->cpu_last[r];
        if (!a->ok || !b->ok) {
            nr_json_null(&j);
            continue;
        }
        nr_json_begin_object(&j);
        nr_json_kv_int(&j, "rank", r);
        nr_json_kv_string(&j, "host", lm_host(c, r));
        nr_json_kv_string(&j, "cgroup", b->cgroup);
        nr_json_kv_int(&j, "quota_us", b->quota_us);
        nr_json_kv_int(&j, "period_us", b->period_us);
        nr_json_kv_uint(&j, "throttled_ns", b->throttled_ns >= a->throttled_ns ? b->throttled_ns - a->throttled_ns : 0);
        nr_json_end_object(&j);
    }
    nr_json_end_array(&j);
    /* matrix_mbps[src][dst]: null on the diagonal, for a pair not run and for a failed pair; a pair run in more than
     * one round (a plan's passes that take each direction's best, a recheck) shows its fastest ok round */
    double *mx = malloc(sizeof(double) * (size_t)n * (size_t)n);
    if (mx) {
        for (size_t i = 0; i < (size_t)n * (size_t)n; i++)
            mx[i] = NAN;
        for (size_t i = 0; i < c->npairs; i++)
            if (!c->pairs[i].failed) {
                double *cell = &mx[(size_t)c->pairs[i].src * (size_t)n + (size_t)c->pairs[i].dst];
                if (isnan(*cell) || c->pairs[i].mbps > *cell)
                    *cell = c->pairs[i].mbps;
            }
        nr_json_key(&j, "matrix_mbps");
        nr_json_begin_array(&j);
        for (int s = 0; s < n; s++) {
            nr_json_begin_array(&j);
            for (int d = 0; d < n; d++)
                nr_json_double(&j, mx[(size_t)s * (size_t)n + (size_t)d]);
            nr_json_end_array(&j);
        }
        nr_json_end_array(&j);
        free(mx);
    }
    size_t nok = 0;
    const struct lm_pair **ok = lm_sorted_ok(c, &nok);
    nr_json_key(&j, "summary");
    nr_json_begin_object(&j);
    nr_json_kv_uint(&j, "pairs", c->npairs);
    nr_json_kv_uint(&j, "ok_pairs", nok);
    nr_json_kv_uint(&j, "failed_pairs", c->npairs - nok);
    double *x = malloc(sizeof(double) * (c->npairs ? c->npairs : 1));
    struct nr_stats s;
    if (ok && x && nok) {
        for (size_t i = 0; i < nok; i++)
            x[i] = ok[i]->mbps;
        nr_stats_compute(x, nok, &s);
        nr_json_kv_stats(&j, "mbps", &s);
    }
    nr_json_key(&j, "slowest");
    nr_json_begin_array(&j);
    for (size_t i = 0; ok && i < nok && i < (size_t)o->slowest; i++) {
        nr_json_begin_object(&j);
        lm_json_pair_id(&j, c, ok[i]);
        nr_json_kv_double(&j, "mbps", ok[i]->mbps);
        nr_json_end_object(&j);
    }
    nr_json_end_array(&j);
    nr_json_key(&j, "failed");
    nr_json_begin_array(&j);
    for (size_t i = 0; i < c->npairs; i++)
        if (c->pairs[i].failed) {
            nr_json_begin_object(&j);
            lm_json_pair_id(&j, c, &c->pairs[i]);
            nr_json_kv_string(&j, "error", c->pairs[i].error);
            nr_json_end_object(&j);
        }
    nr_json_end_array(&j);
    if (o->rtt && x) {
        size_t m = 0;
        for (size_t i = 0; i < c->npairs; i++)
            if (!isnan(c->pairs[i].rtt_us))
                x[m++] = c->pairs[i].rtt_us;
        if (m && nr_stats_compute(x, m, &s) == 0)
            nr_json_kv_stats(&j, "rtt_us", &s);
    }
    nr_json_end_object(&j);
    free(x);
    free(ok);
    return nr_mpi_json_end(&j, f);
}

/* Rank 0, when the job cannot go on: write what is known, then end every rank. */
#if defined(__GNUC__)
__attribute__((noreturn))
#endif
static void lm_abort(struct lm_ctx *c, time_t started, struct nr_error *err)
{
    lm_print_table(c);
    char tagged[sizeof err->detail + 64];
    snprintf(tagged, sizeof tagged, "%s; ending every rank", err->detail);
    tagged[sizeof err->detail - 1] = '\0';
    memcpy(err->detail, tagged, sizeof err->detail);
    if (c->o->json && lm_write_json(c, started, err->code, err) != 0)
        fprintf(stderr, "%s: cannot write '%s'\n", NR__PROG, c->o->json);
    nr_error_report(NR__PROG, err);
    fflush(stdout);
    fflush(stderr);
    nr_sleep_s(0.2); /* the launcher forwards the lines above before MPI_Abort ends it (see nr_mpi.c) */
    MPI_Abort(MPI_COMM_WORLD, NR_EXIT_RUNTIME);
    _exit(NR_EXIT_RUNTIME);
}

/* ---- the rounds ---- */

static int lm_cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int lm_cmp_recheck(const void *a, const void *b)
{
    const struct lm_recheck *x = a, *y = b;
    if (x->mbps_before != y->mbps_before)
        return x->mbps_before < y->mbps_before ? -1 : 1;
    return x->src != y->src ? x->src - y->src : x->dst - y->dst;
}

/* A pair's rate as the link verdict reads it (linkverdict.collect_links): after the warm-up, else the whole. */
static double lm_rate(const struct lm_pair *p)
{
    return p->steady_mbps > 0 && isfinite(p->steady_mbps) ? p->steady_mbps : p->mbps;
}

/* Rank 0, when the plan's rounds are done (--recheck-below): each direction's best ok rate, a link's figure its
 * slower direction, and every direction below the fraction of the upper median link, slowest first, at most
 * --recheck-max, gets a round of its own after the plan's. */
static int lm_plan_recheck(struct lm_ctx *c, struct nr_error *err)
{
    const int n = c->m->size;
    const size_t nn = (size_t)n * (size_t)n;
    double *best = malloc(sizeof(double) * nn), *links = malloc(sizeof(double) * (nn / 2 + 1));
    char *failed = calloc(nn, 1);
    int rc = best && links && failed ? NR_OK : nr_error_set(err, NR_E_NOMEM, "out of memory for the rechecks");
    size_t nl = 0, nsel = 0;
    c->recheck_planned = true;
    for (size_t i = 0; rc == NR_OK && i < nn; i++)
        best[i] = NAN;
    for (size_t i = 0; rc == NR_OK && i < c->npairs; i++) {
        const struct lm_pair *p = &c->pairs[i];
        const size_t at = (size_t)p->src * (size_t)n + (size_t)p->dst;
        const double v = lm_rate(p);
        if (p->failed || !(v > 0) || !isfinite(v))
            failed[at] = 1; /* the verdict fails its link whatever a recheck reads */
        else if (isnan(best[at]) || v > best[at])
            best[at] = v;
    }
    for (int a = 0; rc == NR_OK && a < n; a++)
        for (int b = a + 1; b < n; b++) {
            const double x = best[(size_t)a * (size_t)n + (size_t)b], y = best[(size_t)b * (size_t)n + (size_t)a];
            if (!isnan(x) || !isnan(y))
                links[nl++] = isnan(x) ? y : isnan(y) ? x : fmin(x, y);
        }
    if (rc == NR_OK && nl > 0) {
        qsort(links, nl, sizeof *links, lm_cmp_double);
        c->recheck_median = links[nl / 2];
        const double below = c->o->recheck_below * c->recheck_median;
        for (size_t i = 0; i < nn; i++)
            nsel += !failed[i] && best[i] < below;
        if (!(c->recheck = malloc(sizeof *c->recheck * (nsel ? nsel : 1))))
            rc = nr_error_set(err, NR_E_NOMEM, "out of memory for the rechecks");
        for (size_t i = 0, m = 0; rc == NR_OK && i < nn; i++)
            if (!failed[i] && best[i] < below)
                c->recheck[m++] = (struct lm_recheck){(int)(i / (size_t)n), (int)(i % (size_t)n), -1, best[i]};
    }
    const int want = nsel < (size_t)c->o->recheck_max ? (int)nsel : c->o->recheck_max;
    if (rc == NR_OK && want > 0) {
        qsort(c->recheck, nsel, sizeof *c->recheck, lm_cmp_recheck);
        struct lm_round *grown = realloc(c->rounds, sizeof *grown * (size_t)(c->nrounds + want));
        if (!grown)
            rc = nr_error_set(err, NR_E_NOMEM, "out of memory for the rechecks");
        else
            c->rounds = grown;
        for (int i = 0; rc == NR_OK && i < want; i++) {
            c->recheck[i].round = c->nrounds;
            if ((rc = lm_plan_append(c, c->recheck[i].src, c->recheck[i].dst, err)) == NR_OK)
                c->nrecheck = i + 1;
        }
    }
    if (rc == NR_OK && want > 0) {
        char more[96] = "";
        if ((size_t)want < nsel)
            snprintf(more, sizeof more, "; the slowest %d of %zu (--recheck-max)", want, nsel);
        printf("# recheck: %d direction(s) below %g x the median link (%.1f Mbit/s), each measured again alone%s\n",
               want, c->o->recheck_below, c->recheck_median, more);
        fflush(stdout);
    }
    free(best), free(links), free(failed);
    return rc;
}

static int lm_run(struct lm_ctx *c, time_t started, struct nr_error *err)
{
    const int n = c->m->size, me = c->m->rank;
    const bool root = me == 0;
    double phase_end = MPI_Wtime() + c->rt; /* a rank's deadline for rank 0's next word is phase_end + 3 grace */
    for (int k = 0;; k++) { /* the plan's rounds, then the rechecks rank 0 appends (GO-PAIR), then DONE */
        double wall0 = MPI_Wtime();
        int action, rc;
        if (root) {
            if (k == c->nrounds && c->o->recheck_below > 0 && !c->recheck_planned && lm_plan_recheck(c, err) < 0)
                lm_abort(c, started, err);
            const struct lm_recheck *x = k >= c->nplanned && k < c->nrounds ? &c->recheck[k - c->nplanned] : NULL;
            action = k >= c->nrounds ? LM_DONE : x ? LM_GO_PAIR : LM_GO;
            if ((rc = lm_tell_all(c, action, k, x ? x->src : -1, x ? x->dst : -1, err)) < 0)
                nr_mpi_fail_loop(c->m, err);
        } else if ((action = lm_await(c, k, phase_end + 3 * LM_GRACE_S, "to start the round", err)) != LM_DONE &&
                   !(action == LM_GO && k < c->nrounds) && !(action == LM_GO_PAIR && k == c->nrounds)) {
            nr_error_set(err, NR_E_INTERNAL, "round %d: control message %d from rank 0 out of order", k, action);
            nr_mpi_fail_loop(c->m, err);
        }
        if (action == LM_DONE)
            break;
        if (!root && c->din[1] != k) {
            nr_error_set(err, NR_E_INTERNAL, "round %d: rank 0 started round %d", k, c->din[1]);
            nr_mpi_fail_loop(c->m, err);
        }
        if (!root && action == LM_GO_PAIR) {
            const int s = c->din[2], d = c->din[3];
            if (s < 0 || s >= n || d < 0 || d >= n || s == d) {
                nr_error_set(err, NR_E_INTERNAL, "round %d: rank 0 sent a recheck of %d -> %d", k, s, d);
                nr_mpi_fail_loop(c->m, err);
            }
            if (lm_plan_append(c, s, d, err) < 0)
                nr_mpi_fail_loop(c->m, err);
        }
        const int *p = c->plan + (size_t)k * (size_t)n;
        int dst = p[me], src = -1;
        for (int r = 0; r < n; r++)
            if (p[r] == me)
                src = r;
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
                if ((rc = lm_tell_all(c, LM_RTT_GO, k, -1, -1, err)) < 0)
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
                    char one[80];
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

/* ---- set-up ---- */

static int lm_tcp_setup(struct lm_ctx *c, struct nr_error *err)
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

static int lm_setup(struct lm_ctx *c, struct nr_error *err)
{
    const struct lm_opts *o = c->o;
    const int n = c->m->size, me = c->m->rank;
    int rc = NR_OK;
    if (strcmp(o->transport, "mpi") == 0)
        c->transport = LM_MPI;
    else if (strcmp(o->transport, "tcp") == 0)
        c->transport = LM_TCP;
    else
        rc = nr_error_set(err, NR_E_USAGE, "--transport: '%s' is neither mpi nor tcp", o->transport);
    if (rc == NR_OK && strcmp(o->plan, "shift") != 0)
        rc = nr_error_set(err, NR_E_USAGE, "--plan: unknown plan '%s' (shift; or --plan-file FILE)", o->plan);
    else if (rc == NR_OK && c->transport == LM_TCP && !o->iface == !o->addr)
        rc = nr_error_set(err, NR_E_USAGE, "--transport tcp needs one of --bind-iface IFACE and --bind-addr ADDR");
    else if (rc == NR_OK && c->transport == LM_MPI && (o->iface || o->addr))
        rc = nr_error_set(err, NR_E_USAGE, "--bind-iface and --bind-addr go with --transport tcp");
    else if (rc == NR_OK && c->rt <= o->time_s)
        rc = nr_error_set(err, NR_E_USAGE, "--round-timeout (%.3g s) must be longer than -t (%.3g s)", c->rt,
                          o->time_s);
    else if (rc == NR_OK && n < 2)
        rc = nr_error_set(err, NR_E_USAGE, "needs at least 2 MPI ranks (one per node), got %d", n);
    uint64_t need = (uint64_t)(o->window + 2) * o->msg + 2 * o->rtt_size;
    if (rc == NR_OK && need > nr_mpi_memory_budget(c->m))
        rc = nr_error_set(err, NR_E_RANGE, "-m %llu with -w %d needs more memory than this node allows a rank",
                          (unsigned long long)o->msg, o->window);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    const int w = o->window;
    c->rbuf_bytes = c->transport == LM_MPI ? (size_t)w * o->msg : o->msg;
    c->sbuf = malloc(o->msg);
    c->rbuf = malloc(c->rbuf_bytes);
    c->rtt_out = malloc(o->rtt_size);
    c->rtt_in = malloc(o->rtt_size);
    c->rtt_samples = malloc(sizeof(double) * (size_t)o->rtt_trials);
    c->hosts = calloc((size_t)n, sizeof *c->hosts);
    c->sreq = malloc(sizeof(MPI_Request) * (size_t)(w + 2 > n ? w + 2 : n));
    c->rreq = malloc(sizeof(MPI_Request) * (size_t)(w + 1));
    c->creq = malloc(sizeof(MPI_Request) * (size_t)n);
    c->st = malloc(sizeof(MPI_Status) * (size_t)(w + 2 > n ? w + 2 : n));
    c->idx = malloc(sizeof(int) * (size_t)(w + 2 > n ? w + 2 : n));
    c->rseq = malloc(sizeof(long long) * (size_t)w);
    c->missing = calloc((size_t)n, 1);
    c->ctl = malloc(sizeof(MPI_Request) * ((size_t)(LM_CTL_GROUPS - 1) * (size_t)n + LM_CTL_OWN));
    c->ctl_idx = malloc(sizeof(int) * (size_t)(n > LM_CTL_OWN ? n : LM_CTL_OWN));
    c->ctl_st = malloc(sizeof(MPI_Status) * (size_t)(n > LM_CTL_OWN ? n : LM_CTL_OWN));
    for (size_t i = 0; c->ctl && i < (size_t)(LM_CTL_GROUPS - 1) * (size_t)n + LM_CTL_OWN; i++)
        c->ctl[i] = MPI_REQUEST_NULL;
    if (me == 0) {
        c->reports = calloc((size_t)n, sizeof *c->reports);
        c->ready_in = calloc((size_t)n, sizeof(int));
        c->cpu_first = calloc((size_t)n, sizeof *c->cpu_first);
        c->cpu_last = calloc((size_t)n, sizeof *c->cpu_last);
    }
    if (!c->sbuf || !c->rbuf || !c->rtt_out || !c->rtt_in || !c->rtt_samples || !c->hosts || !c->sreq || !c->rreq ||
        !c->creq || !c->st || !c->idx || !c->rseq || !c->missing || !c->ctl || !c->ctl_idx || !c->ctl_st ||
        (me == 0 && (!c->reports || !c->ready_in || !c->cpu_first || !c->cpu_last)))
        rc = nr_error_set(err, NR_E_NOMEM, "out of memory");
    if (rc == NR_OK) { /* written before anything runs: no shared zero page in any transfer */
        nr_buffer_fill(c->sbuf, o->msg, (uint32_t)me);
        nr_buffer_fill(c->rbuf, c->rbuf_bytes, (uint32_t)me + 1000u);
        nr_buffer_fill(c->rtt_out, o->rtt_size, (uint32_t)me + 2000u);
        nr_buffer_fill(c->rtt_in, o->rtt_size, (uint32_t)me + 3000u);
    }
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    /* every rank's node, as MPI names it */
    char name[MPI_MAX_PROCESSOR_NAME + 1] = "";
    char mine[NR_HOST_MAX] = "";
    int len = 0;
    if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS && len > 0) {
        size_t l = (size_t)(len < MPI_MAX_PROCESSOR_NAME ? len : MPI_MAX_PROCESSOR_NAME);
        l = l < sizeof mine - 1 ? l : sizeof mine - 1;
        memcpy(mine, name, l);
        mine[l] = '\0';
    } else
        snprintf(mine, sizeof mine, "%s", c->m->host);
    rc = nr_mpi_check(MPI_Allgather(mine, NR_HOST_MAX, MPI_CHAR, c->hosts, NR_HOST_MAX, MPI_CHAR, MPI_COMM_WORLD),
                      "MPI_Allgather (host names)", err);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    /* the plan: rank 0 builds or reads it, everyone gets it */
    if (me == 0)
        rc = o->plan_file ? lm_plan_file(c, err) : lm_plan_shift(c, err);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    rc = nr_mpi_check(MPI_Bcast(&c->nrounds, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast (plan)", err);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    c->nplanned = c->nrounds;
    if (me != 0 && !(c->plan = malloc(sizeof(int) * (size_t)c->nrounds * (size_t)n)))
        rc = nr_error_set(err, NR_E_NOMEM, "out of memory for the plan");
    if (me == 0 && !(c->rounds = calloc((size_t)c->nrounds, sizeof *c->rounds)))
        rc = nr_error_set(err, NR_E_NOMEM, "out of memory for the plan");
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    rc = nr_mpi_check(MPI_Bcast(c->plan, c->nrounds * n, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast (plan)", err);
    if (rc == NR_OK)
        rc = nr_mpi_check(MPI_Bcast(c->plan_name, (int)sizeof c->plan_name, MPI_CHAR, 0, MPI_COMM_WORLD),
                          "MPI_Bcast (plan name)", err);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    if (c->transport == LM_TCP)
        rc = lm_tcp_setup(c, err);
    return rc;
}

int main(int argc, char **argv)
{
    struct nr_error err = {0};
    struct nr_mpi mpi;
    time_t started = time(NULL);
    int rc = nr_mpi_init(&argc, &argv, &mpi, &err);
    if (rc < 0)
        return nr_mpi_finish(NR__PROG, rc, &err);
    struct lm_opts o = {.plan = "shift", .transport = "mpi", .msg = 1048576, .window = 8, .time_s = 1.0, .warmup = 0.2,
                        .rtt_size = 8, .rtt_trials = 20, .recheck_max = 64, .slowest = 5};
    const struct nr_opt opts[] = {
        {NR_OPT_SECTION, 0, NULL, NULL, NULL, "What is measured", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "plan", &o.plan, "NAME", "the rounds: shift (round k: rank r sends to r+k mod N)", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "plan-file", &o.plan_file, "FILE", "the rounds from a file: one round per line of SRC>DST (rank or host; docs/mpi.md)", 0, 0, NULL, NULL},
        {NR_OPT_SIZE, 'm', "message-size", &o.msg, "SIZE", "message size (MPI) / write size (TCP)", LM_MSG_MIN, 1073741824.0, NULL, NULL},
        {NR_OPT_INT, 'w', "window", &o.window, "N", "MPI messages in flight per pair", 1, 64, NULL, NULL},
        {NR_OPT_DOUBLE, 't', "time", &o.time_s, "SECONDS", "each round's transfer time (senders send until then)", 0.01, 3600, NULL, NULL},
        {NR_OPT_DOUBLE, 0, "warmup", &o.warmup, "FRACTION", "share of -t at a stream's start left out of steady_mbps", 0, 0.9, NULL, "0.2"},
        {NR_OPT_DOUBLE, 0, "round-timeout", &o.round_timeout_s, "SECONDS", "a pair not done by then has failed (0: 10 x -t + 5)", 0, 86400, NULL, "0"},
        {NR_OPT_FLAG, 0, "rtt", &o.rtt, NULL, "also a small-message round trip per pair, one pair at a time", 0, 0, NULL, NULL},
        {NR_OPT_SIZE, 0, "rtt-size", &o.rtt_size, "SIZE", "round-trip message size", 1, 1048576, NULL, NULL},
        {NR_OPT_INT, 0, "rtt-trials", &o.rtt_trials, "N", "timed round trips per pair (median reported)", 1, 10000, NULL, NULL},
        {NR_OPT_DOUBLE, 0, "recheck-below", &o.recheck_below, "F", "measure again, alone, each direction below F x the median link (0: off)", 0, 1, NULL, "0"},
        {NR_OPT_INT, 0, "recheck-max", &o.recheck_max, "N", "directions measured again at most (slowest first)", 0, 100000, NULL, NULL},
        {NR_OPT_SECTION, 0, NULL, NULL, NULL, "Transport", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "transport", &o.transport, "mpi|tcp", "data over MPI, or over TCP with MPI as control plane", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "bind-iface", &o.iface, "IFACE", "tcp: listen and connect on this interface's IPv4 address", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "bind-addr", &o.addr, "ADDR", "tcp: this IPv4 address on every rank (one host)", 0, 0, NULL, NULL},
        {NR_OPT_SECTION, 0, NULL, NULL, NULL, "Output", 0, 0, NULL, NULL},
        {NR_OPT_INT, 0, "slowest", &o.slowest, "N", "slowest pairs listed", 0, 1000, NULL, NULL},
        {NR_OPT_STRING, 0, "json", &o.json, "FILE", "machine-readable results (docs/json-schema.md)", 0, 0, NULL, NULL},
        {NR_OPT_END, 0, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL},
    };
    const struct nr_opt_set set = {
        NR__PROG, "[OPTIONS]",
        "Link test of a whole partition as one MPI job (one rank per node): in every round each rank sends to one "
        "rank and receives from one, all at once; the result is the N x N matrix of directed-pair bandwidths.",
        opts,
        "Examples:\n  srun -N 400 --ntasks-per-node=1 nr-linkmap -t 1 --json linkmap.json\n"
        "  mpirun -np 4 nr-linkmap --transport tcp --bind-iface eth1 --rtt\n"};
    struct lm_ctx c;
    memset(&c, 0, sizeof c);
    c.o = &o, c.m = &mpi, c.lfd = -1, c.recheck_median = NAN;
    rc = nr_mpi_parse(&set, argc, argv, &err);
    nr_mpi_set_report(&mpi, NR__PROG, o.json, "linkmap", started);
#ifdef NR_LINKMAP_FAULTS
    if (rc == NR_OK && getenv("NR_LINKMAP_FAULT")) {
        char k[8] = "";
        int a = 0, b = 0;
        double ms = 0;
        const int got = sscanf(getenv("NR_LINKMAP_FAULT"), "%7[a-z]:%d:%d:%lf", k, &a, &b, &ms);
        if (got < 3 || (strcmp(k, "stall") != 0 && strcmp(k, "hang") != 0 && strcmp(k, "slow") != 0) ||
            (strcmp(k, "slow") == 0 && (got != 4 || !(ms > 0))))
            rc = nr_error_set(&err, NR_E_USAGE, "NR_LINKMAP_FAULT: stall:RANK:ROUND, hang:RANK:ROUND:SECONDS or "
                              "slow:RANK:ROUND:MS (ROUND -1: every round)");
        rc = nr_mpi_agree(rc, &err);
    }
#endif
    if (rc == NR_OK) {
        c.rt = o.round_timeout_s > 0 ? o.round_timeout_s : 10 * o.time_s + 5;
        rc = lm_setup(&c, &err);
    }
    if (rc == NR_OK && mpi.rank == 0) {
        char sz[32];
        printf("# nr-linkmap %s: %d ranks, plan %s (%d rounds), transport %s, -m %s%s, -t %g s per round, round "
               "timeout %g s%s\n", nr_version(), mpi.size, c.plan_name, c.nrounds, c.transport == LM_TCP ? "tcp" : "mpi",
               nr_size_format(o.msg, sz, sizeof sz), c.transport == LM_MPI ? "" : " writes", o.time_s, c.rt,
               o.rtt ? ", round trips" : "");
        for (int r = 0; c.transport == LM_TCP && r < mpi.size && mpi.size <= 64; r++) {
            char ep[64];
            printf("# tcp: rank %d (%s) listens on %s\n", r, c.hosts[r], lm_endpoint_str(&c, r, ep, sizeof ep));
        }
        fflush(stdout);
    }
    if (rc == NR_OK) {
        c.started_s = MPI_Wtime();
        nr_cpu_limit_read(&c.cpu_start);
        rc = lm_run(&c, started, &err);
    }
    if (rc == NR_OK && mpi.rank == 0) {
        lm_print_table(&c);
        size_t failed = 0;
        const struct lm_pair *first = NULL;
        for (size_t i = 0; i < c.npairs; i++)
            if (c.pairs[i].failed && failed++ == 0)
                first = &c.pairs[i];
        if (failed)
            rc = nr_error_set(&err, NR_E_NET, "%zu of %zu pairs failed; the first: %s", failed, c.npairs,
                              first->error ? first->error : "?");
    }
    if (rc <= 0 && mpi.rank == 0 && o.json && lm_write_json(&c, started, rc, &err) != 0 && rc == NR_OK)
        rc = nr_error_sys(&err, NR_E_IO, "cannot write '%s'", o.json);
    lm_ctl_release(&c);
    for (int i = 0; i < c.npending; i++)
        close(c.pending[i].fd);
    if (c.lfd >= 0)
        close(c.lfd);
    for (size_t i = 0; i < c.npairs; i++)
        free(c.pairs[i].error);
    free(c.pairs), free(c.rounds), free(c.plan), free(c.hosts), free(c.sbuf), free(c.rbuf), free(c.rtt_out);
    free(c.rtt_in), free(c.rtt_samples), free(c.sreq), free(c.rreq), free(c.creq), free(c.st), free(c.idx);
    free(c.rseq), free(c.missing), free(c.reports), free(c.ready_in), free(c.addr), free(c.port), free(c.ctl);
    free(c.ctl_idx), free(c.ctl_st), free(c.cpu_first), free(c.cpu_last), free(c.recheck);
    return nr_mpi_finish(NR__PROG, rc, &err);
}
