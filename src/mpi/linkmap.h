/* nr-linkmap: the link test of a whole partition as one MPI job (one rank per node), the idea of LLNL's mpiGraph
 * (written anew here): in every round each rank sends to one rank and receives from one rank, all pairs at once,
 * and the job ends with the N x N matrix of directed-pair bandwidths.
 *
 * Plans (linkmap_plan.c). `--plan shift` (default): in round k the rank at position i of the order sends to the one
 * at position i+k mod N, every rank at once (mpiGraph's pattern); the order is rank order or `--order FILE` (the
 * switch tree's order: under destination-based routing on a fat tree no two streams of a round then share a link),
 * the shifts 1 .. N-1 or `--shifts LIST`. `--plan-file FILE`: the caller's rounds (one round per line of SRC>DST
 * pairs by rank number or host name, docs/mpi.md), checked whole on rank 0 before the first round. No rank holds
 * the plan: rank 0 computes a shift round, or reads the file's line, when the round comes, and tells every rank its
 * part (whom it sends to and receives from) in the round's GO.
 *
 * Transports. `--transport mpi` (default): -w messages of -m bytes in flight (MPI_Isend / MPI_Irecv), the sender
 * sends until -t seconds after the round's start and then a 16-byte end marker that carries its message count.
 * `--transport tcp`: MPI is only the control plane; every rank listens on the IPv4 address of --bind-iface (or
 * --bind-addr), addresses and ports are exchanged with MPI_Allgather, and the data moves over a TCP connection from
 * sender to receiver whose first 32 bytes carry a per-job random token (MPI_Bcast from rank 0): a connection without
 * it is closed and counted. The receiver returns its byte count when the sender has shut its side down.
 *
 * What is kept (linkmap_matrix.c, linkmap_output.c). Rank 0 keeps one float per direction the plan runs, its best
 * figure over the rounds (the rate after the warm-up, else the whole stream's: as the link verdict reads it; a
 * failure sticks): the dense N x N matrix for a plan of most directions, else (lm_sparse_smaller) only the plan's
 * directions, sender by sender. It writes linkmatrix.bin in the smaller form (docs/json-schema.md: dense, 4 bytes a
 * direction of N x N; sparse, 8 bytes a direction measured); the JSON holds the
 * run's head, a line per round, per-node summaries and, in full, only the suspect directions (failed, or below
 * --suspect-below x the median link) and the rechecks. Nothing N x N is written as text.
 *
 * Rechecks (`--recheck-below F`, linkmap_recheck.c). When the plan's rounds are done, rank 0 takes each direction's
 * figure, a link's figure its slower direction, and measures the directions below F x the upper median link again
 * (the slowest --recheck-max of them), many in one round: a batch is directions that share no node and, with
 * --tree (the switch tree: each node's leaf switch and the uplink a stream to it takes), no switch cable. A
 * direction that reads at least the line in its batch is cleared; one still slow in a batch of m is measured again
 * in a batch of at most m/2 (alone when no direction of its batch read the line: then halving would cost more
 * rounds than it can save), down to alone, and only a direction slow alone is named slow (rechecked): contention
 * inside a batch names nothing. The slowest pending direction leads each batch (the others join as far as their
 * own halving allows), so a stall costs a share of a round and a slow link about a round. The rechecks stop after
 * --recheck-rounds rounds, or when one more round (the longest so far, and as much again to write the output) would
 * pass --time-limit or Slurm's SLURM_JOB_END_TIME; what is left is listed with the reason. On shared CPUs a healthy
 * link's stream read 0.44-0.6 x the median when the host's scheduler starved it for a moment: such a stall passes
 * its recheck, a slow link stays slow. A failed direction is not rechecked: its failure stands.
 *
 * Bounded time (linkmap_rounds.c). Rank 0 drives the rounds with small point-to-point control messages (no
 * blocking collective inside the rounds, so nothing needs MPI-3): GO(round, the rank's part), the ranks run the
 * round (transfer, then with --rtt the serial round-trip phase after a READY/RTT-GO checkpoint), every rank sends its
 * report to rank 0, and rank 0 records the round and sends the next GO. The control messages are MPI_Isends whose
 * requests every wait loop, the TCP ones too, keeps testing (lm_progress): MPI moves a message only while its sender
 * calls MPI, and across hosts Open MPI's TCP BTL makes its connection to a peer only then. Every wait has a deadline
 * derived from --round-timeout: a pair that did not finish by then is recorded as failed (round, ranks, hosts, what
 * stalled) and the next round runs. When the job cannot go on (a rank sent no report: hung or dead; an MPI request
 * could neither complete nor be cancelled), rank 0 writes the JSON and the matrix with everything it knows and ends
 * the job with MPI_Abort; a rank that hears nothing from rank 0 in time ends the job itself (nr_mpi_fail_loop).
 *
 * Memory. Every rank: its buffers and O(1) more (rank 0 sends each its peers' host names with the GO). Rank 0: the
 * matrix (dense: 4 bytes a direction of N x N; sparse: 8 bytes a direction of the plan, 4 more while the per-node
 * medians are written), O(N) per-rank state, O(rounds) round lines, and the failures.
 */
#ifndef NR_LINKMAP_H
#define NR_LINKMAP_H

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
#include <stddef.h>
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
#define LM_TAG_GO 11              /* rank 0 -> all: GO, RTT-GO, DONE */
#define LM_TAG_READY 12           /* all -> rank 0: transfer phase over (--rtt) */
#define LM_TAG_REPORT 13          /* all -> rank 0: the round's report */
#define LM_TAG_BASE 100
#define LM_TAG_ROUNDS 5000        /* data tags cycle every 5000 rounds (tags stay below 32767) */
#define LM_CTL_GROUPS 5           /* control sends: rank 0's four decision buffers, and a rank's own */
#define LM_CTL_OWN 4              /* a rank's own control sends: READY, the reports of two rounds, the rtt turn */
#define LM_TABLE_MAX 16           /* ranks up to which the text has the table of every direction */
#define LM_MATRIX_FILE "linkmatrix.bin"
#define LM_RTT_FILE "linkrtt.bin"
#define LM_FAILED (-1.0f)         /* a matrix cell: the direction failed or moved nothing */

/* Under SimGrid's SMPI (its mpi.h defines SMPI_SHARED_MALLOC; tools/simcentre runs nr-linkmap on a simulated
 * fabric) every rank's payload is one block shared by all ranks, which the simulator moves without copying, and
 * the receive buffers are never written before use, so that only the pages the end markers land in become
 * resident: 10,000 simulated ranks fit in one machine's memory. Everywhere else both are plain, written memory. */
#ifdef SMPI_SHARED_MALLOC
#define LM_SIMULATED 1
#define LM_PAYLOAD_ALLOC(size) SMPI_SHARED_MALLOC(size)
#else
#define LM_SIMULATED 0
#define LM_PAYLOAD_ALLOC(size) malloc(size)
#endif
/* SMPI's clock moves only while every rank waits in the simulator: a polling loop that found nothing to do lets
 * LM_SIM_POLL_S of simulated time pass (tools/simcentre runs smpirun with --cfg=smpi/test:0, so that testing a
 * request costs no simulated time). The simulation's cost grows as 1 / LM_SIM_POLL_S; with simcentre's 128 MiB
 * messages at 100 Gbit/s (10.7 ms each) every healthy stream read 99.88 % of the line rate at 20 us, 99.42 % at
 * 200 us and 97.61 % at 1 ms, for 2.5 x less CPU than at 200 us (docs/scale.md). */
#ifndef LM_SIM_POLL_S
#define LM_SIM_POLL_S 1e-3
#endif

enum { LM_T_HELLO, LM_T_DATA, LM_T_PING, LM_T_PONG, LM_T_TOKEN, LM_T_KINDS };
enum { LM_GO = 1, LM_RTT_GO, LM_DONE };
enum { LM_OWN_READY, LM_OWN_REPORT, LM_OWN_TURN = LM_OWN_REPORT + 2 };
enum { LM_KIND_DATA = 1, LM_KIND_RTT = 2 };
enum lm_transport { LM_MPI, LM_TCP };

static inline int lm_tag(int round, int kind)
{
    return LM_TAG_BASE + (round % LM_TAG_ROUNDS) * LM_T_KINDS + kind;
}

/* A wait loop's turn when nothing moved: the CPU to other processes (real), simulated time passing (SMPI). */
static inline void lm_yield(void)
{
    if (LM_SIMULATED)
        nr_sleep_s(LM_SIM_POLL_S);
    else
        sched_yield();
}

/* A spinning loop's turn (the round trips, which must not give their CPU away): nothing on real hardware,
 * simulated time passing under SMPI. */
static inline void lm_spin(void)
{
    if (LM_SIMULATED)
        nr_sleep_s(LM_SIM_POLL_S);
}

struct lm_opts {
    const char *plan;       /* --plan */
    const char *plan_file;  /* --plan-file */
    const char *order;      /* --order */
    const char *shifts;     /* --shifts */
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
    int recheck_max;        /* --recheck-max: directions taken */
    int recheck_rounds;     /* --recheck-rounds */
    int recheck_streams;    /* --recheck-streams (0: as many as share nothing) */
    const char *tree;       /* --tree */
    double time_limit_s;    /* --time-limit (0: none) */
    double suspect_below;   /* --suspect-below (0: as --recheck-below, else 0.85) */
    int suspect_max;        /* --suspect-max */
    int slowest;            /* --slowest */
    const char *json;       /* --json */
    const char *matrix;     /* --matrix (NULL: linkmatrix.bin beside --json) */
};

/* Rank 0's word to one rank: what to do next and, with GO, the rank's part in the round. */
struct lm_go {
    int32_t action, round;
    int32_t dst, src;   /* the rank this one sends to and receives from, -1: none */
    int32_t prev, next; /* the round's senders before and after this one in rank order (--rtt's turns), -1: none */
    char dst_host[NR_HOST_MAX], src_host[NR_HOST_MAX];
};
#define LM_GO_SHORT ((int)offsetof(struct lm_go, dst_host)) /* RTT-GO and DONE carry the numbers only */

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

/* Rank 0's line of one round. */
struct lm_round {
    int index;
    double wall_s;
    int streams, failed;
    double lo_mbps, hi_mbps; /* the slowest and fastest ok stream (0 when none) */
};

/* Rank 0's record of one failed direction in one round. */
struct lm_failure {
    int32_t round, src, dst;
    char *error;
};

/* What became of a recheck measurement, or of a suspect direction. */
enum lm_rc_state {
    LM_RC_PENDING, /* to be measured (again) */
    LM_RC_CLEARED, /* read at least the line */
    LM_RC_SPLIT,   /* slow in a batch of several: measured again in a smaller one */
    LM_RC_SLOW,    /* slow alone: named */
    LM_RC_FAILED,  /* its recheck failed: the failure stands */
};

/* Rank 0: one suspect direction of the rechecks. */
struct lm_rc_dir {
    int src, dst;
    float before;      /* its figure over the plan's rounds */
    int cap;           /* its next batch's streams at most */
    int last_streams;  /* streams of the last batch it was in (0: not measured) */
    float last_mbps;   /* what it read there (NAN: failed or not measured) */
    enum lm_rc_state state;
};

/* Rank 0: one recheck measurement, a direction in one recheck round (recheck.pairs[]). */
struct lm_recheck {
    int dir; /* its direction in rc_dir */
    int src, dst, round, streams;
    double mbps_before; /* its figure over the plan's rounds */
    double mbps_after;  /* what this round read, NAN until it ran (or when it failed) */
    enum lm_rc_state outcome;
};

/* Rank 0: where the plan's rounds come from (linkmap_plan.c). */
struct lm_plan {
    int *order;     /* shift: the rank at each position */
    int *shifts;    /* shift: each round's shift */
    FILE *file;     /* --plan-file, open for the rounds */
    long *offsets;  /* --plan-file: where each round's line starts */
    char *line;     /* --plan-file: the line being read */
    size_t line_cap;
    uint64_t streams; /* directed streams of all rounds (a direction in two rounds counts twice) */
    /* host name -> rank: open addressing, by full and by short name; slot: rank + 1 (0 empty), count of ranks */
    size_t cap;
    int32_t *by_full, *by_short, *full_count, *short_count;
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
    char my_host[NR_HOST_MAX];   /* this rank's node, as MPI names it */
    char root_host[NR_HOST_MAX]; /* rank 0's */
    int nrounds;  /* rank 0: the plan's rounds and, once planned, the recheck rounds after them */
    int nplanned; /* rank 0: the plan's rounds */
    char plan_name[64];
    double rt; /* the round timeout */
    struct lm_go turn; /* this rank's part in the current round */
    struct lm_go word; /* rank 0's last word to this rank */
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
    int ready_out, turn_out, turn_in;
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
    char (*hosts)[NR_HOST_MAX]; /* every rank's node */
    struct lm_plan plan;
    char matrix_path[4096], rtt_path[4096]; /* where the matrix files go ("": none) */
    int *dst_of, *src_of, *prev_of, *next_of; /* the round being run, by rank, -1: none */
    struct lm_go *dec;  /* the decisions in flight: four buffers of one word per rank (lm_tell_all) */
    int dec_seq;
    int *ready_in;
    struct lm_report *reports;
    struct nr_cpu_limit *cpu_first, *cpu_last; /* per rank: its reading at its start and at its last report */
    char *missing;
    /* The matrix's cells (linkmap_matrix.c): dense, n x n, cell s x n + d; or, when the plan runs few of the
     * directions (lm_sparse_smaller), sparse: the plan's directions only, sender s's cells row_off[s] ..
     * row_off[s + 1] - 1, their receivers in recv_of[] ascending. lm_cell and lm_row find them in either. */
    bool sparse;
    size_t ncells;
    uint64_t *row_off; /* sparse: n + 1 */
    uint32_t *recv_of; /* sparse: ncells */
    float *matrix;  /* ncells: each direction's figure, Mbit/s (LM_FAILED, NAN: not measured) */
    float *rtt;     /* --rtt: ncells, each direction's least median round trip, us (NAN: not measured) */
    uint64_t *sent_bytes, *recv_bytes; /* per rank: payload its receivers counted, payload it counted */
    struct lm_failure *failures;
    size_t nfailures, failures_cap;
    uint64_t streams;  /* directed streams recorded, every round's */
    struct lm_round *rounds;
    int rounds_run, rounds_cap;
    bool recheck_planned;
    double recheck_median; /* the upper median link the rechecks were chosen by, NAN when not chosen */
    size_t rc_below;       /* directions below the line (taken: the slowest --recheck-max) */
    struct lm_rc_dir *rc_dir; /* the directions taken, slowest first */
    int rc_ndir;
    struct lm_recheck *recheck; /* every recheck measurement, round by round */
    int nrecheck, recheck_cap;
    int *rc_in_batch;       /* by sender rank: its measurement in recheck[] in the round being run, -1 */
    int rc_streams;         /* streams of the recheck round being run */
    int rc_batch_first;     /* its first measurement in recheck[] */
    int rc_rounds;          /* recheck rounds started */
    const char *rc_stopped; /* why rechecks ended with directions pending (NULL: all resolved, or still running) */
    char *rc_node_busy;     /* by rank: in the batch being built */
    int *tree_leaf, *tree_cable; /* --tree, by rank (-1: not in the tree) */
    int tree_leaves, tree_cables;
    char *rc_up_busy, *rc_down_busy; /* by leaf x cable: in the batch being built */
    double longest_round_s; /* the longest round recorded so far */
    long rejected_total;
    double started_s;
};

/* ---- linkmap_rounds.c: common helpers, the control plane, the rounds ---- */

/* The test build's faults (NR_LINKMAP_FAULT, nr-linkmap-faulty only): true when `kind` hits `rank` in `round`. */
bool lm_fault(const char *kind, int rank, int round, double *seconds);
/* Mark a side failed with its first error (later ones are consequences). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void lm_fail(struct lm_side *s, const char *fmt, ...);
/* The MPI library's text for rc, in buf. */
const char *lm_mpierr(int rc, char *buf, size_t len);
/* Rank r's host name: every rank's on rank 0; on the others their own, rank 0's and the current round's peers'
 * ("?" for any other). */
const char *lm_host(const struct lm_ctx *c, int r);
/* A wait loop's pause when nothing moved. */
void lm_nap(void);
void lm_progress(struct lm_ctx *c);
int lm_poll_ms(const struct lm_ctx *c, int ms);
int lm_ctl_send(struct lm_ctx *c, int group, int i, void *buf, int count, MPI_Datatype type, int dest, int tag);
void lm_ctl_release(struct lm_ctx *c);
/* Every rank: the plan's rounds, then the rechecks, until rank 0 says DONE. */
int lm_run(struct lm_ctx *c, time_t started, struct nr_error *err);

/* ---- linkmap_plan.c: rank 0's plan ---- */
/* Rank 0: the plan from the options (--plan shift with --order and --shifts, or --plan-file), checked whole;
 * c->nplanned rounds. Every error names the file and line, or the option. */
int lm_plan_open(struct lm_ctx *c, struct nr_error *err);
/* Rank 0: a file's endpoint (a rank number, or the host name or short name of exactly one rank) into *out. */
int lm_endpoint(const struct lm_ctx *c, const char *tok, const char *where, int *out, struct nr_error *err);
/* Rank 0: round k of the plan into c->dst_of (the rank each rank sends to, -1: none). */
int lm_plan_round(struct lm_ctx *c, int k, struct nr_error *err);
/* Rank 0: from c->dst_of, every rank's sender (src_of) and the senders before and after it (prev_of, next_of). */
void lm_plan_roles(struct lm_ctx *c);
void lm_plan_close(struct lm_plan *p);

/* ---- linkmap_recheck.c ---- */
/* Rank 0, at set-up (--tree): each rank's leaf switch and uplink cable. Errors name the file and line. */
int lm_tree_open(struct lm_ctx *c, struct nr_error *err);
/* Rank 0, when the plan's rounds are done: the suspect directions to measure again. */
int lm_plan_recheck(struct lm_ctx *c, struct nr_error *err);
/* Rank 0: recheck round k into c->dst_of: 1 (c->nrounds is then k + 1), or 0 when the rechecks are over. */
int lm_recheck_round(struct lm_ctx *c, int k, struct nr_error *err);
/* Rank 0, recording recheck round `round`: direction src -> dst read mbps (NAN: failed). */
void lm_recheck_read(struct lm_ctx *c, int src, int dst, double mbps);
/* Rank 0: the rechecks' outcome names (JSON and text). */
const char *lm_rc_state_name(enum lm_rc_state s);
void lm_recheck_free(struct lm_ctx *c);

/* ---- linkmap_matrix.c: rank 0's record of the rounds ---- */
/* True when `cells` directions of an n x n matrix take fewer bytes sparse than dense (linkmatrix.bin's two forms,
 * docs/json-schema.md; in memory the same rule). */
bool lm_sparse_smaller(uint64_t n, uint64_t cells);
/* Rank 0, after the plan is open: the matrix (every cell NAN; sparse when the plan's streams are few enough: then
 * the plan is read through once more for its directions), the rtt matrix with --rtt, the per-rank byte counts. */
int lm_matrix_alloc(struct lm_ctx *c, struct nr_error *err);
/* The cell of direction s -> d, -1 when the matrix has none (sparse: the plan does not run it; the diagonal). */
long lm_cell(const struct lm_ctx *c, int s, int d);
/* Sender s's cells: [*begin, *end); lm_recv_at: the receiver of its cell i. */
static inline void lm_row(const struct lm_ctx *c, size_t s, size_t *begin, size_t *end)
{
    const size_t n = (size_t)c->m->size;
    *begin = c->sparse ? (size_t)c->row_off[s] : s * n;
    *end = c->sparse ? (size_t)c->row_off[s + 1] : (s + 1) * n;
}
static inline size_t lm_recv_at(const struct lm_ctx *c, size_t s, size_t i)
{
    return c->sparse ? c->recv_of[i] : i - s * (size_t)c->m->size;
}
/* The direction of cell i. */
void lm_cell_dir(const struct lm_ctx *c, size_t i, int *s, int *d);
/* Record round `round` (c->dst_of) from the reports (missing[r]: rank r sent none). */
void lm_record(struct lm_ctx *c, int round, double wall_s);
/* The upper median of the link figures (a link: its slower measured direction; NAN when none). */
double lm_median_link(const struct lm_ctx *c, struct nr_error *err);
/* The k-th smallest (0-based) of the positive finite v[i x stride], i < n (their number in *count), NAN when there
 * are not k+1; in two passes and O(1) memory, v not modified: for the whole matrix. */
double lm_select_positive(const float *v, size_t n, size_t stride, size_t k, size_t *count);
/* The upper median of the positive finite v[i x stride], i < n (their number in *count), NAN when none; through
 * scratch (n floats): for a row or a column. */
double lm_upper_median(const float *v, size_t n, size_t stride, float *scratch, size_t *count);
/* Write `values` (ncells, as c->matrix) in the linkmatrix.bin format (docs/json-schema.md), through a temporary
 * file: sparse (the cells with a figure) when lm_sparse_smaller says so, else the dense n x n matrix. */
int lm_matrix_write(const struct lm_ctx *c, const char *path, const float *values, struct nr_error *err);
void lm_matrix_free(struct lm_ctx *c);

/* ---- linkmap_mpi.c ---- */
void lm_warm_mark(const struct lm_ctx *c, const struct lm_report *rep, double t_start, double now, double *t_warm,
                  uint64_t *b_warm);
/* The receiver's steady rate from the warm-up mark to its last byte. */
void lm_steady(struct lm_report *rep, double t_last, double t_warm, uint64_t b_warm);
int lm_mpi_drain(MPI_Request *rq, int n);
/* One round's transfer over MPI: this rank sends to dst and receives from src (-1: no such role). */
void lm_bw_mpi(struct lm_ctx *c, int round, int dst, int src, double t0, struct lm_report *rep);

/* ---- linkmap_tcp.c ---- */
/* The 32-byte hello of a TCP connection: "NRLM", kind, round, this rank, the job's token. */
void lm_hello(const struct lm_ctx *c, unsigned char *h, uint32_t kind, int round);
/* Rank r's TCP endpoint "a.b.c.d:port", in buf. */
const char *lm_endpoint_str(const struct lm_ctx *c, int r, char *buf, size_t len);
int lm_tcp_accept(struct lm_ctx *c, uint32_t kind, int round, int src);
/* One round's transfer over TCP, as lm_bw_mpi. */
void lm_bw_tcp(struct lm_ctx *c, int round, int dst, int src, double t0, struct lm_report *rep);
int lm_idle(void *ctx, int ms);
int lm_tcp_io(struct lm_ctx *c, int fd, unsigned char *buf, size_t len, bool out, double deadline, char *why,
              size_t wlen);
/* Collective: every rank's listening endpoint and the job's token (--transport tcp). */
int lm_tcp_setup(struct lm_ctx *c, struct nr_error *err);

/* ---- linkmap_rtt.c ---- */
/* One round's round trips (--rtt): the round's pairs one at a time, in the order of their senders
 * (c->turn.prev, c->turn.next). */
void lm_rtt(struct lm_ctx *c, int round, int dst, int src, double start, struct lm_report *rep);

/* ---- linkmap_output.c ---- */
void lm_append(char *buf, size_t len, const char *part);
/* Rank 0's text: the table of every direction (up to LM_TABLE_MAX ranks), the summary, the slowest directions. */
void lm_print_table(const struct lm_ctx *c);
/* Rank 0: the JSON document and, once the plan was made, the matrix files (docs/json-schema.md). */
int lm_write_json(const struct lm_ctx *c, time_t started, int status, const struct nr_error *failure);
#if defined(__GNUC__)
__attribute__((noreturn))
#endif
void lm_abort(struct lm_ctx *c, time_t started, struct nr_error *err);

#endif
