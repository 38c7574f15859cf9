/* A PMPI interposition layer linked only into the test builds of the MPI kernels (nr-*-faulty, never installed):
 * it lets the integration tests make an MPI call fail, corrupt a message, or watch the order of a ping-pong,
 * without any hook in the production kernels.
 *
 *   NR_FAULT=NAME:N      the N-th call (1-based, counted per process) of MPI_NAME on the ranks named by
 *                        NR_FAULT_RANK (default 0; -1 = every rank) returns MPI_ERR_OTHER. The call itself is
 *                        made first, so a collective still completes on every rank and nothing hangs: the
 *                        kernel must notice the code, agree on it across ranks and report it.
 *   NR_FAULT_STALL=NAME:N:MS[:COUNT]  the N-th call of MPI_NAME (Send or Recv) on the ranks NR_FAULT_RANK names,
 *                        and the COUNT-1 (default 0) calls after it, sleep MS milliseconds first, as a descheduled
 *                        process would: with N = 2 on rank 0, nr-mpitest's first calibration probe (the warm-up is
 *                        the first message); with a COUNT, a slow phase that then lets up.
 *   NR_FAULT_CORRUPT=1   rank 0 flips one bit in the middle of every data message (tag 1) it sends: --verify
 *                        must catch it.
 *   NR_FAULT_ZERO=1      every message of at least a page (point-to-point sends, MPI_Sendrecv, the root's MPI_Bcast)
 *                        is checked for content: an all-zero buffer (an untouched malloc/calloc buffer maps the
 *                        kernel's shared zero page) is printed on stderr as "NR_FAULT_ZERO: ...".
 *   NR_FAULT_ORDER=1     rank 1 checks that it never sends a data message (tag 1) before it has received one more
 *                        than it has sent, i.e. that it only returns messages; a violation is printed on stderr as
 *                        "NR_FAULT_ORDER: ..." (a round trip must not be a simultaneous exchange).
 *   NR_FAULT_DELAY_US=N  every MPI_Send, MPI_Isend, MPI_Ssend, MPI_Rsend and MPI_Sendrecv on the ranks NR_FAULT_RANK
 *                        names (for this fault by default every rank) busy-waits N microseconds (3.45: to the
 *                        nanosecond) before the real call:
 *                        an MPI stack whose per-message latency regressed. A clock loop, not a sleep, whose
 *                        granularity (50 us and more) would swamp a delay of a few microseconds.
 *   NR_FAULT_PIDDIR=DIR  every rank writes its process id to DIR/rank.N once MPI_Init returned, so a test can stop
 *                        (SIGSTOP) one chosen rank.
 * A value that does not read whole as what it must be (a count, a rank, a number of microseconds) stops the run
 * with exit status 2, naming the variable: a typo must not pass as a run without the fault.
 */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NR__DATA_TAG 1
#define NR__MAX_PENDING 64

static int nr__rank(void)
{
    int r = -1, init = 0;
    MPI_Initialized(&init);
    if (init)
        PMPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

/* The variable `var` holds `value`, which is not `what`: said once, and the run stops (exit status 2). */
static void nr__bad(const char *var, const char *value, const char *what)
{
    int init = 0;
    fprintf(stderr, "%s: %s is not %s\n", var, value, what);
    MPI_Initialized(&init);
    if (init)
        PMPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* `text` read whole as an integer in [lo, hi], else nr__bad. */
static long nr__whole(const char *var, const char *text, long lo, long hi, const char *what)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end || v < lo || v > hi)
        nr__bad(var, text, what);
    return v;
}

/* The rank NR_FAULT_RANK names (-1: every rank); `fallback` where it is not set. */
static int nr__chosen_rank(int fallback)
{
    const char *who = getenv("NR_FAULT_RANK");
    return who ? (int)nr__whole("NR_FAULT_RANK", who, -1, INT_MAX, "a rank (or -1: every rank)") : fallback;
}

/* MPI_ERR_OTHER when this call of `name` is the one NR_FAULT names, else rc. */
static int nr__fault(const char *name, int rc)
{
    static long counts[32];
    static const char *names[32];
    const char *spec = getenv("NR_FAULT");
    if (!spec || rc != MPI_SUCCESS)
        return rc;
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len != strlen(name) || strncmp(spec, name, len) != 0)
        return rc;
    int rank = nr__chosen_rank(0);
    if (rank >= 0 && rank != nr__rank())
        return rc;
    int slot = 0;
    while (slot < 31 && names[slot] && strcmp(names[slot], name) != 0)
        slot++;
    names[slot] = name;
    long want = colon ? nr__whole("NR_FAULT", colon + 1, 1, LONG_MAX, "NAME:N with N a call count from 1") : 1;
    return ++counts[slot] == want ? MPI_ERR_OTHER : rc;
}

/* NR_FAULT_STALL: sleep before the N-th call of `name` on the chosen ranks. */
static void nr__stall(const char *name)
{
    /* read once, as the delay is: every Send and Recv passes here, inside the kernels' timed loops */
    static int parsed, rank;
    static long counts[2], n, ms, count = 1;
    static char want[32];
    if (!parsed) {
        const char *spec = getenv("NR_FAULT_STALL");
        int used = 0, more = 0;
        parsed = spec ? 1 : -1;
        if (spec && (sscanf(spec, "%31[^:]:%ld:%ld%n", want, &n, &ms, &used) < 3 || n < 1 || ms < 0 ||
                     (spec[used] == ':' ? sscanf(spec + used + 1, "%ld%n", &count, &more) < 1 ||
                                              spec[used + 1 + more] || count < 1
                                        : spec[used] != 0)))
            nr__bad("NR_FAULT_STALL", spec, "NAME:N:MS[:COUNT] (N and COUNT from 1, MS from 0)");
        rank = spec ? nr__chosen_rank(0) : 0;
    }
    if (parsed < 0 || strcmp(want, name) != 0 || (rank >= 0 && rank != nr__rank()))
        return;
    long k = ++counts[strcmp(name, "Send") == 0];
    if (k >= n && k < n + count) {
        struct timespec ts = {(time_t)(ms / 1000), (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* NR_FAULT_DELAY_US: busy-wait before a send on the chosen ranks (read once: a send must stay cheap). */
static void nr__delay(void)
{
    static long delay_ns = -1;
    if (delay_ns < 0) {
        const char *us = getenv("NR_FAULT_DELAY_US");
        int rank = nr__chosen_rank(-1);
        delay_ns = 0;
        if (us && (rank < 0 || rank == nr__rank())) {
            char *end;
            double v = strtod(us, &end);
            if (end == us || *end || !(v >= 0 && v < 1e9))
                nr__bad("NR_FAULT_DELAY_US", us, "a number of microseconds");
            delay_ns = (long)(v * 1000.0 + 0.5);
        }
    }
    if (delay_ns <= 0)
        return;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < delay_ns);
}

/* NR_FAULT_ORDER bookkeeping on rank 1: data receives completed and data sends started. */
static long g_received, g_sent;
static MPI_Request g_pending[NR__MAX_PENDING];
static int g_npending;

static void nr__sending(int tag)
{
    if (tag != NR__DATA_TAG || !getenv("NR_FAULT_ORDER") || nr__rank() != 1)
        return;
    if (g_sent >= g_received)
        fprintf(stderr, "NR_FAULT_ORDER: rank 1 sends data message %ld having received only %ld\n", g_sent + 1,
                g_received);
    g_sent++;
}

static void nr__completed(MPI_Request before)
{
    for (int i = 0; i < g_npending; i++)
        if (g_pending[i] == before) {
            g_received++;
            g_pending[i] = g_pending[--g_npending];
            return;
        }
}

/* NR_FAULT_ZERO: complain about a page-sized or larger message that holds nothing but zero bytes. */
static void nr__zero_check(const char *call, const void *buf, int count, MPI_Datatype type)
{
    int size = 0;
    if (!getenv("NR_FAULT_ZERO") || count <= 0 || !buf)
        return;
    PMPI_Type_size(type, &size);
    size_t bytes = (size_t)count * (size_t)(size > 0 ? size : 0);
    if (bytes < 4096)
        return;
    const unsigned char *b = buf;
    for (size_t i = 0; i < bytes; i++)
        if (b[i])
            return;
    fprintf(stderr, "NR_FAULT_ZERO: rank %d: %s of %zu bytes that are all zero\n", nr__rank(), call, bytes);
}

/* NR_FAULT_CORRUPT: the buffer to send instead of buf, a copy with one bit flipped (the kernels complete each
 * send before they start the next, so one scratch copy is enough). */
static const void *nr__corrupt(const void *buf, int count, MPI_Datatype type, int tag)
{
    static unsigned char *copy;
    static size_t cap;
    int size = 0;
    if (tag != NR__DATA_TAG || !getenv("NR_FAULT_CORRUPT") || nr__rank() != 0 || count <= 0)
        return buf;
    PMPI_Type_size(type, &size);
    size_t bytes = (size_t)count * (size_t)(size > 0 ? size : 0);
    if (bytes == 0)
        return buf;
    if (bytes > cap) {
        unsigned char *grown = realloc(copy, bytes);
        if (!grown)
            return buf;
        copy = grown, cap = bytes;
    }
    memcpy(copy, buf, bytes);
    copy[bytes / 2] ^= 0x01;
    return copy;
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    const char *dir = getenv("NR_FAULT_PIDDIR");
    if (rc == MPI_SUCCESS && dir) {
        char path[4096], tmp[4200];
        snprintf(path, sizeof path, "%s/rank.%d", dir, nr__rank());
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "w");
        if (f) {
            fprintf(f, "%ld\n", (long)getpid());
            if (fclose(f) == 0)
                rename(tmp, path);
        }
    }
    return rc;
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    nr__zero_check("MPI_Send", buf, count, type);
    nr__sending(tag);
    nr__stall("Send");
    nr__delay();
    return nr__fault("Send", PMPI_Send(nr__corrupt(buf, count, type, tag), count, type, dest, tag, comm));
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *rq)
{
    nr__zero_check("MPI_Isend", buf, count, type);
    nr__sending(tag);
    nr__delay();
    return nr__fault("Isend", PMPI_Isend(nr__corrupt(buf, count, type, tag), count, type, dest, tag, comm, rq));
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    nr__delay();
    return nr__fault("Ssend", PMPI_Ssend(buf, count, type, dest, tag, comm));
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    nr__delay();
    return nr__fault("Rsend", PMPI_Rsend(buf, count, type, dest, tag, comm));
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Status *st)
{
    nr__stall("Recv");
    int rc = PMPI_Recv(buf, count, type, src, tag, comm, st);
    if (tag == NR__DATA_TAG)
        g_received++;
    return nr__fault("Recv", rc);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Request *rq)
{
    int rc = PMPI_Irecv(buf, count, type, src, tag, comm, rq);
    if (rc == MPI_SUCCESS && tag == NR__DATA_TAG && g_npending < NR__MAX_PENDING)
        g_pending[g_npending++] = *rq;
    return nr__fault("Irecv", rc);
}

int MPI_Wait(MPI_Request *rq, MPI_Status *st)
{
    MPI_Request before = *rq;
    int rc = PMPI_Wait(rq, st);
    nr__completed(before);
    return nr__fault("Wait", rc);
}

int MPI_Waitall(int n, MPI_Request rq[], MPI_Status st[])
{
    MPI_Request before[NR__MAX_PENDING];
    for (int i = 0; i < n && i < NR__MAX_PENDING; i++)
        before[i] = rq[i];
    int rc = PMPI_Waitall(n, rq, st);
    for (int i = 0; i < n && i < NR__MAX_PENDING; i++)
        nr__completed(before[i]);
    return nr__fault("Waitall", rc);
}

int MPI_Barrier(MPI_Comm comm)
{
    return nr__fault("Barrier", PMPI_Barrier(comm));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    if (root == nr__rank())
        nr__zero_check("MPI_Bcast", buf, count, type);
    return nr__fault("Bcast", PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Gather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, int root, MPI_Comm comm)
{
    return nr__fault("Gather", PMPI_Gather(sb, sc, st, rb, rc, rt, root, comm));
}

int MPI_Allgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, MPI_Comm comm)
{
    return nr__fault("Allgather", PMPI_Allgather(sb, sc, st, rb, rc, rt, comm));
}

int MPI_Sendrecv(const void *sb, int sc, MPI_Datatype st, int dest, int stag, void *rb, int rc, MPI_Datatype rt,
                 int src, int rtag, MPI_Comm comm, MPI_Status *status)
{
    nr__zero_check("MPI_Sendrecv", sb, sc, st);
    nr__delay();
    return nr__fault("Sendrecv", PMPI_Sendrecv(sb, sc, st, dest, stag, rb, rc, rt, src, rtag, comm, status));
}
