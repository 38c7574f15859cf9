/* nr-mpitest --duet: the yardsticks and the record of the pairs (see duet.h). */
#include "duet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nr_net.h"
#include "sock.h"

#define NR__SLOTS 16         /* slots of a shared-memory ring */
#define NR__CHUNK 32768      /* bytes a slot carries (Open MPI's vader BTL moves 32 KiB fragments) */
#define NR__SPIN_CHECK 256   /* empty polls between two looks at the clock */
#define NR__SPIN_YIELD 4096  /* empty polls after which a rank yields even with a CPU of its own (a peer the host
                                descheduled gets to run) */
#define NR__TOKEN 16
#define NR__SETUP_S 10.0     /* connecting and presenting the token */
#define NR__TOKEN_S 2.0      /* one accepted connection's time to present it */

/* A slot's sequence word on a cache line of its own: 2 x lap while empty for that lap, 2 x lap + 1 once full. */
struct nr__slot {
    _Alignas(64) _Atomic uint64_t seq;
};

struct nr__ring {
    struct nr__slot slot[NR__SLOTS];
    _Alignas(64) unsigned char data[NR__SLOTS][NR__CHUNK];
};

struct nr__seg {
    unsigned char cookie[NR__TOKEN]; /* rank 0's random bytes: rank 1 checks it mapped rank 0's segment */
    struct nr__ring ring[2];         /* ring[r]: rank r writes, the other rank reads */
};

/* What rank 0 tells rank 1 about the segment. */
struct nr__shm_id {
    char name[64];
    unsigned char cookie[NR__TOKEN];
};

/* A rank's TCP endpoint (rank 1 listens) and rank 0's token. */
struct nr__endpoint {
    uint32_t addr; /* network order */
    uint32_t port;
    unsigned char token[NR__TOKEN];
};

struct nr_duet_link {
    int rank;
    int fd;              /* tcp */
    struct nr__seg *seg; /* shm */
    uint64_t tx, rx;     /* shm: chunks this rank wrote into its ring, and read from the other's */
    bool oversub;        /* the two ranks share one CPU, so a waiting rank yields at once */
    unsigned long idle;  /* tcp: empty polls (a yield every NR__SPIN_YIELD) */
    double longest_s;    /* the longest yardstick run so far, and its time per message: the next deadline's basis */
    double msg_s;
    unsigned runs;       /* yardstick runs so far, the warm-up first (the test build's fault counter) */
};

const char *nr_duet_name(int kind)
{
    return kind == NR_DUET_TCP ? "tcp" : kind == NR_DUET_SHM ? "shm" : "off";
}

int nr_duet_parse_kind(const char *arg, void *dest, const struct nr_opt *opt, struct nr_error *err)
{
    char name[64];
    int kind = strcmp(arg, "tcp") == 0 ? NR_DUET_TCP : strcmp(arg, "shm") == 0 ? NR_DUET_SHM : NR_DUET_OFF;
    if (kind == NR_DUET_OFF)
        return nr_error_set(err, NR_E_USAGE, "%s: '%s' is neither tcp nor shm", nr_opt_name(opt, name, sizeof name),
                            arg);
    *(int *)dest = kind;
    return NR_OK;
}

/* ---- the test build's faults (nr-mpitest-faulty): NR_DUET_FAULT=stall:RANK:RUN:SECONDS | reset:RANK:RUN ---- */
#ifdef NR_DUET_FAULTS
/* At the start of its RUN-th yardstick run (the warm-up is the 1st) the rank sleeps (a hung rank; 60 s unless
 * given), after resetting its TCP connection with `reset`. */
static void nr__fault(struct nr_duet_link *l)
{
    const char *s = getenv("NR_DUET_FAULT");
    char kind[8] = "";
    int rank = -1;
    unsigned run = 0;
    double seconds = 60;
    if (!s || sscanf(s, "%7[a-z]:%d:%u:%lf", kind, &rank, &run, &seconds) < 3 || rank != l->rank || run != l->runs)
        return;
    if (strcmp(kind, "reset") == 0 && l->fd >= 0)
        nr_net_close_abort(l->fd), l->fd = -1;
    nr_sleep_s(seconds);
}
#else
static void nr__fault(struct nr_duet_link *l)
{
    (void)l;
}
#endif

/* ---- set-up ---- */

static const char *nr__host_of(const struct nr_duet *d, int rank)
{
    return rank == d->mpi_ctx->rank ? d->mpi_ctx->host : d->peer_host;
}

/* Rank 0: connect from its own address to rank 1's and present the token. */
static int nr__tcp_connect(struct nr_duet *d, uint32_t from, uint32_t to, const unsigned char *token, double deadline,
                           struct nr_error *err)
{
    char why[128] = "";
    int fd = nr_net_connect_from(from, to, d->port), r = fd;
    if (fd >= 0 && (r = nr_net_await_connect(fd, deadline, NULL, NULL)) > 0 &&
        nr_net_duplex(fd, token, NR__TOKEN, NULL, 0, deadline, NULL, NULL, why, sizeof why) == 0) {
        d->link->fd = fd;
        return NR_OK;
    }
    if (fd >= 0)
        close(fd);
    if (r <= 0)
        snprintf(why, sizeof why, "%s", r == -ETIMEDOUT ? "timed out" : strerror(-r));
    return nr_error_set(err, NR_E_NET, "--duet tcp: connect to rank 1 (%s) at %s:%u: %s", d->peer_host, d->address,
                        (unsigned)d->port, why);
}

/* Rank 1: take the connection that presents rank 0's token; any other is closed (a stranger on the port cannot take
 * rank 0's place). */
static int nr__tcp_accept(struct nr_duet *d, int lfd, const unsigned char *token, double deadline,
                          struct nr_error *err)
{
    unsigned strangers = 0;
    for (;;) {
        double left = deadline - MPI_Wtime();
        if (left <= 0)
            return nr_error_set(err, NR_E_TIMEOUT, "--duet tcp: no connection from rank 0 (%s) with the job's token "
                                "within %.0f s (%u other connection(s) refused)", d->peer_host, NR__SETUP_S,
                                strangers);
        struct pollfd p = {lfd, POLLIN, 0};
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
            continue;
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        unsigned char got[NR__TOKEN];
        char why[128];
        double by = fmin(MPI_Wtime() + NR__TOKEN_S, deadline);
        if (nr_net_duplex(fd, NULL, 0, got, sizeof got, by, NULL, NULL, why, sizeof why) == 0 &&
            nr_mem_equal_ct(got, token, NR__TOKEN)) {
            d->link->fd = fd;
            return NR_OK;
        }
        close(fd);
        strangers++;
    }
}

/* Rank 1 listens on its interface's address (port 0: the kernel picks), rank 0 learns it over MPI and connects from
 * its own address on the interface, so the yardstick crosses the interface under test. */
static int nr__tcp_open(struct nr_duet *d, const char *iface, struct nr_error *err)
{
    const struct nr_mpi *m = d->mpi_ctx;
    int rc = NR_OK, lfd = -1;
    uint32_t mine = 0;
    /* Another host: neither shared memory nor the processor name says one (MPICH with MPIR_CVAR_NOLOCAL=1, how the
     * interconnect table forces its TCP path, makes every rank its own node in MPI_COMM_TYPE_SHARED) */
    const bool apart = m->local_ranks < 2 && strcmp(nr__host_of(d, 0), nr__host_of(d, 1)) != 0;
    if (!iface && apart)
        rc = nr_error_set(err, NR_E_USAGE, "--duet tcp: the ranks run on different hosts (%s, %s): name the "
                          "interface to measure with --duet-iface", nr__host_of(d, 0), nr__host_of(d, 1));
    if (rc == NR_OK)
        rc = nr_net_iface_ipv4(iface, m->host, &mine, d->iface, sizeof d->iface, err);
    if (rc == NR_OK && apart && ntohl(mine) >> 24 == 127)
        rc = nr_error_set(err, NR_E_USAGE, "--duet-iface %s: a loopback address does not reach the other host", iface);
    struct nr__endpoint ep, all[2];
    memset(&ep, 0, sizeof ep);
    if (rc == NR_OK && m->rank == 1) {
        char ip[INET_ADDRSTRLEN];
        uint16_t port = 0;
        int family = 0;
        inet_ntop(AF_INET, &(struct in_addr){.s_addr = mine}, ip, sizeof ip);
        if ((lfd = nr_tcp_listen(ip, 0, NULL, 4, &port, &family, err)) < 0)
            rc = lfd, lfd = -1;
        else if (fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK) < 0)
            rc = nr_error_sys(err, NR_E_NET, "fcntl O_NONBLOCK");
        ep.addr = mine, ep.port = port;
    }
    if (rc == NR_OK && m->rank == 0)
        rc = nr_tcp_random(ep.token, sizeof ep.token, err);
    if ((rc = nr_mpi_agree(rc, err)) == NR_OK)
        rc = nr_mpi_agree(nr_mpi_check(MPI_Allgather(&ep, (int)sizeof ep, MPI_BYTE, all, (int)sizeof ep, MPI_BYTE,
                                                     MPI_COMM_WORLD), "MPI_Allgather (duet endpoint)", err), err);
    if (rc == NR_OK) {
        d->port = (uint16_t)all[1].port;
        inet_ntop(AF_INET, &(struct in_addr){.s_addr = all[1].addr}, d->address, sizeof d->address);
        double deadline = MPI_Wtime() + NR__SETUP_S;
        rc = m->rank == 0 ? nr__tcp_connect(d, mine, all[1].addr, all[0].token, deadline, err)
                          : nr__tcp_accept(d, lfd, all[0].token, deadline, err);
    }
    if (lfd >= 0)
        close(lfd);
    /* Every pattern: MPI's TCP transports set it too, and Nagle could hold a stream's last segment behind a
     * delayed acknowledgement. */
    int one = 1;
    if (rc == NR_OK && setsockopt(d->link->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
        rc = nr_error_sys(err, NR_E_NET, "setsockopt TCP_NODELAY");
    return nr_mpi_agree(rc, err);
}

static int nr__shm_map(struct nr_duet_link *l, int fd, const char *name, struct nr_error *err)
{
    void *p = mmap(NULL, sizeof *l->seg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return nr_error_sys(err, NR_E_SYS, "--duet shm: mmap of '%s'", name);
    l->seg = p;
    if (!atomic_is_lock_free(&l->seg->ring[0].slot[0].seq))
        return nr_error_set(err, NR_E_UNSUPPORTED, "--duet shm: 64-bit atomics are not lock-free here");
    return NR_OK;
}

/* Rank 0: a segment with an unpredictable name, created exclusively, mode 0600. */
static int nr__shm_create(struct nr_duet_link *l, struct nr__shm_id *id, struct nr_error *err)
{
    unsigned char rnd[NR__TOKEN];
    int rc = nr_tcp_random(rnd, sizeof rnd, err);
    if (rc == NR_OK)
        rc = nr_tcp_random(id->cookie, sizeof id->cookie, err);
    if (rc < 0)
        return rc;
    int n = snprintf(id->name, sizeof id->name, "/nr-duet-%ld-", (long)getpid());
    for (size_t i = 0; i < sizeof rnd && n > 0 && (size_t)n + 2 < sizeof id->name; i++)
        n += snprintf(id->name + n, sizeof id->name - (size_t)n, "%02x", rnd[i]);
    int fd = shm_open(id->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0)
        return nr_error_sys(err, NR_E_SYS, "--duet shm: shm_open '%s'", id->name);
    if (ftruncate(fd, (off_t)sizeof *l->seg) < 0) {
        rc = nr_error_sys(err, NR_E_SYS, "--duet shm: ftruncate of '%s' to %zu bytes", id->name, sizeof *l->seg);
        close(fd);
    } else if ((rc = nr__shm_map(l, fd, id->name, err)) == NR_OK)
        memcpy(l->seg->cookie, id->cookie, sizeof id->cookie);
    if (rc < 0)
        shm_unlink(id->name);
    return rc;
}

/* Rank 1: map rank 0's segment and check it is rank 0's. */
static int nr__shm_attach(struct nr_duet_link *l, const struct nr__shm_id *id, struct nr_error *err)
{
    int fd = shm_open(id->name, O_RDWR, 0);
    if (fd < 0)
        return nr_error_sys(err, NR_E_SYS, "--duet shm: cannot open rank 0's shared-memory segment '%s' (do the "
                            "ranks share /dev/shm?)", id->name);
    struct stat st;
    if (fstat(fd, &st) < 0 || (size_t)st.st_size != sizeof *l->seg) {
        close(fd);
        return nr_error_set(err, NR_E_SYS, "--duet shm: segment '%s' is not rank 0's (wrong size)", id->name);
    }
    int rc = nr__shm_map(l, fd, id->name, err);
    if (rc == NR_OK && !nr_mem_equal_ct(l->seg->cookie, id->cookie, sizeof id->cookie))
        rc = nr_error_set(err, NR_E_SYS, "--duet shm: segment '%s' is not rank 0's (wrong cookie)", id->name);
    return rc;
}

static int nr__shm_open(struct nr_duet *d, struct nr_error *err)
{
    const struct nr_mpi *m = d->mpi_ctx;
    struct nr_duet_link *l = d->link;
    struct nr__shm_id id;
    memset(&id, 0, sizeof id);
    int rc = NR_OK;
    if (m->local_ranks < 2)
        rc = nr_error_set(err, NR_E_USAGE, "--duet shm needs both ranks on one host: rank 0 runs on %s, rank 1 on %s "
                          "(between hosts: --duet tcp --duet-iface IFACE)", nr__host_of(d, 0), nr__host_of(d, 1));
    if (rc == NR_OK && m->rank == 0)
        rc = nr__shm_create(l, &id, err);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    rc = nr_mpi_check(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast (duet segment)", err);
    if (rc == NR_OK && m->rank == 1)
        rc = nr__shm_attach(l, &id, err);
    rc = nr_mpi_agree(rc, err);
    if (m->rank == 0)
        shm_unlink(id.name); /* both ranks have it mapped (or gave up): no name is left behind */
    return rc;
}

/* Both yardsticks spin while they wait, as MPI libraries do; two ranks whose CPUs together are one must yield
 * instead, or each spins away the other's turn. */
static int nr__oversubscribed(struct nr_duet_link *l, struct nr_error *err)
{
    cpu_set_t mine, both[2], any;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) < 0)
        for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && c < CPU_SETSIZE; c++)
            CPU_SET((int)c, &mine);
    int rc = nr_mpi_check(MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, both, (int)sizeof mine, MPI_BYTE,
                                        MPI_COMM_WORLD), "MPI_Allgather (CPU affinity)", err);
    CPU_OR(&any, &both[0], &both[1]);
    l->oversub = CPU_COUNT(&any) < 2;
    return nr_mpi_agree(rc, err);
}

/* rank 0's seed for the order: the time and the process, so repeated jobs draw different orders */
static uint64_t nr__seed(void)
{
    uint64_t s = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid() << 32 ^ nr_now_ns();
    return s ? s : 1;
}

static uint64_t nr__xorshift64s(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dULL;
}

int nr_duet_open(struct nr_duet *d, int kind, const char *iface, const struct nr_mpi *m, const char *peer_host,
                 size_t pairs, bool latency, struct nr_error *err)
{
    d->kind = kind;
    d->mpi_ctx = m;
    d->latency = latency;
    snprintf(d->peer_host, sizeof d->peer_host, "%s", peer_host);
    int rc = NR_OK;
    d->link = calloc(1, sizeof *d->link);
    d->yard_first = calloc(pairs ? pairs : 1, 1);
    d->reps = calloc(pairs ? pairs : 1, sizeof *d->reps);
    d->mpi = calloc(pairs ? pairs : 1, sizeof *d->mpi);
    d->yard = calloc(pairs ? pairs : 1, sizeof *d->yard);
    d->ratio = calloc(pairs ? pairs : 1, sizeof *d->ratio);
    if (!d->link || !d->yard_first || !d->reps || !d->mpi || !d->yard || !d->ratio)
        rc = nr_error_set(err, NR_E_NOMEM, "out of memory (--duet)");
    else {
        d->link->rank = m->rank, d->link->fd = -1;
        d->cap = pairs;
    }
    /* A coin per pair: which of the two runs first, so neither always follows the other's after-effects. */
    if (rc == NR_OK && m->rank == 0) {
        uint64_t s = d->seed = nr__seed();
        for (size_t i = 0; i < pairs; i++)
            d->yard_first[i] = (unsigned char)(nr__xorshift64s(&s) >> 63);
    }
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    rc = nr_mpi_check(MPI_Bcast(d->yard_first, (int)pairs, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast (duet order)",
                      err);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    if ((rc = nr__oversubscribed(d->link, err)) < 0)
        return rc;
    rc = d->kind == NR_DUET_TCP ? nr__tcp_open(d, iface, err) : nr__shm_open(d, err);
    const char *waits = d->kind == NR_DUET_TCP && d->sleep ? "; waits sleep in poll"
                        : d->link->oversub                 ? "; one CPU for both ranks: waits yield"
                                                           : "";
    if (rc == NR_OK && m->rank == 0 && d->kind == NR_DUET_TCP)
        printf("Duet yardstick: tcp over %s (rank 1 listens on %s:%u%s), order seed %llu\n", d->iface, d->address,
               (unsigned)d->port, waits, (unsigned long long)d->seed);
    else if (rc == NR_OK && m->rank == 0)
        printf("Duet yardstick: shm (a ring of %d x %d-byte slots each way%s), order seed %llu\n", NR__SLOTS,
               NR__CHUNK, waits, (unsigned long long)d->seed);
    return rc;
}

/* ---- the timed part ---- */

static void nr__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Move out_len bytes into this rank's ring and in_len bytes out of the other's, chunk by chunk (both ranks cut a
 * message the same way), spinning until the deadline. */
static int nr__shm_duplex(struct nr_duet_link *l, const unsigned char *out, size_t out_len, unsigned char *in,
                          size_t in_len, double deadline, char *why, size_t why_len)
{
    struct nr__ring *tx = &l->seg->ring[l->rank], *rx = &l->seg->ring[1 - l->rank];
    size_t sent = 0, got = 0;
    unsigned long empty = 0;
    while (sent < out_len || got < in_len) {
        bool moved = false;
        if (sent < out_len) {
            const size_t i = (size_t)(l->tx % NR__SLOTS);
            const uint64_t lap = l->tx / NR__SLOTS;
            if (atomic_load_explicit(&tx->slot[i].seq, memory_order_acquire) == 2 * lap) {
                size_t n = out_len - sent < NR__CHUNK ? out_len - sent : NR__CHUNK;
                memcpy(tx->data[i], out + sent, n);
                atomic_store_explicit(&tx->slot[i].seq, 2 * lap + 1, memory_order_release);
                sent += n, l->tx++, moved = true;
            }
        }
        if (got < in_len) {
            const size_t i = (size_t)(l->rx % NR__SLOTS);
            const uint64_t lap = l->rx / NR__SLOTS;
            if (atomic_load_explicit(&rx->slot[i].seq, memory_order_acquire) == 2 * lap + 1) {
                size_t n = in_len - got < NR__CHUNK ? in_len - got : NR__CHUNK;
                memcpy(in + got, rx->data[i], n);
                atomic_store_explicit(&rx->slot[i].seq, 2 * lap + 2, memory_order_release);
                got += n, l->rx++, moved = true;
            }
        }
        if (moved) {
            empty = 0;
            continue;
        }
        if (++empty % NR__SPIN_CHECK == 0 && MPI_Wtime() > deadline) {
            snprintf(why, why_len, "timed out");
            return -1;
        }
        if (l->oversub || empty % NR__SPIN_YIELD == 0)
            sched_yield();
        else
            nr__cpu_relax();
    }
    return 0;
}

/* A TCP yardstick waits as MPI's TCP transports do, polling without sleeping (Open MPI's and UCX's progress engines
 * call epoll with a zero timeout): one that slept in poll would pay the host's wake-up latency, which moves with
 * the host's state and which the MPI run does not pay. */
static int nr__tcp_spin(void *ctx, int ms)
{
    struct nr_duet_link *l = ctx;
    (void)ms;
    if (l->oversub || ++l->idle % NR__SPIN_YIELD == 0)
        sched_yield();
    return 0;
}

static int nr__move(struct nr_duet *d, const unsigned char *out, size_t out_len, unsigned char *in, size_t in_len,
                    double deadline, char *why, size_t why_len)
{
    if (d->kind == NR_DUET_TCP)
        return nr_net_duplex(d->link->fd, out, out_len, in, in_len, deadline, d->sleep ? NULL : nr__tcp_spin, d->link,
                             why, why_len);
    return nr__shm_duplex(d->link, out, out_len, in, in_len, deadline, why, why_len);
}

int nr_duet_transfer(struct nr_duet *d, enum nr_duet_pattern how, const unsigned char *sbuf, unsigned char *rbuf,
                     uint64_t size, uint64_t iters)
{
    struct nr_duet_link *l = d->link;
    const int me = l->rank;
    const size_t n = (size_t)size;
    const double t0 = MPI_Wtime();
    /* 10 x what the run should take (the target, or the longest run's rate) + 10 s: a stall, never a slow host */
    const double limit = 10 * fmax(d->calib.target_s, (double)iters * l->msg_s) + 10;
    char why[160] = "";
    const char *step = "";
    int rc = 0;
    l->runs++;
    nr__fault(l);
    uint64_t k = 0;
    for (; k < iters && rc == 0; k++) {
        /* rank 0 sends first and rank 1 receives first, but in an exchange, where both do both at once */
        const bool out = me == 0 || how == NR_DUET_EXCHANGE, in = me == 1 || how == NR_DUET_EXCHANGE;
        step = how == NR_DUET_EXCHANGE ? "exchanging" : out ? "sending" : "receiving";
        rc = nr__move(d, out ? sbuf : NULL, out ? n : 0, in ? rbuf : NULL, in ? n : 0, t0 + limit, why, sizeof why);
        if (rc == 0 && how == NR_DUET_ROUNDTRIP) {
            step = me == 0 ? "receiving the reply to" : "returning";
            rc = nr__move(d, me == 0 ? NULL : sbuf, me == 0 ? 0 : n, me == 0 ? rbuf : NULL, me == 0 ? n : 0,
                          t0 + limit, why, sizeof why);
        }
    }
    /* A stream ends when rank 1's acknowledgement of the last message arrives, as the MPI stream does. */
    bool ack = rc == 0 && how == NR_DUET_STREAM;
    unsigned char byte = 1;
    if (ack)
        rc = me == 0 ? nr__move(d, NULL, 0, &byte, 1, t0 + limit, why, sizeof why)
                     : nr__move(d, &byte, 1, NULL, 0, t0 + limit, why, sizeof why);
    if (rc != 0) {
        static const char *const names[] = {"stream", "exchange", "round trip"};
        const bool late = strcmp(why, "timed out") == 0;
        struct nr_error err = {0};
        char what[200];
        if (late)
            snprintf(why, sizeof why, "timed out after %.1f s (10 x the run's expected time + 10 s)", limit);
        if (ack)
            snprintf(what, sizeof what, "%s the end-of-stream acknowledgement", me == 0 ? "receiving" : "sending");
        else
            snprintf(what, sizeof what, "%s message %llu of %llu (%llu bytes)", step, (unsigned long long)k,
                     (unsigned long long)iters, (unsigned long long)size);
        nr_error_set(&err, late ? NR_E_TIMEOUT : NR_E_NET, "--duet %s yardstick, %s with rank %d (%s): %s: %s",
                     nr_duet_name(d->kind), names[how], 1 - me, d->peer_host, what, why);
        nr_mpi_fail_loop(d->mpi_ctx, &err);
    }
    double took = MPI_Wtime() - t0;
    if (took > l->longest_s)
        l->longest_s = took, l->msg_s = took / (double)(iters ? iters : 1);
    return NR_OK;
}

/* ---- the record ---- */

void nr_duet_record(struct nr_duet *d, double mpi_figure, double yard_figure)
{
    if (d->npairs >= d->cap)
        return;
    d->mpi[d->npairs] = mpi_figure;
    d->yard[d->npairs] = yard_figure;
    d->ratio[d->npairs] = yard_figure > 0 ? mpi_figure / yard_figure : NAN;
    d->npairs++;
}

void nr_duet_print_pair(const struct nr_duet *d, size_t i)
{
    const char *y = nr_duet_name(d->kind);
    printf("  duet (%zu): %s %.4f %s, MPI/%s %.4f, %s first\n", i + 1, y, d->yard[i], d->latency ? "usec" : "Mbps", y,
           d->ratio[i], d->yard_first[i] ? y : "MPI");
    fflush(stdout);
}

void nr_duet_print_summary(const struct nr_duet *d)
{
    struct nr_stats s;
    if (nr_stats_compute(d->ratio, d->npairs, &s) == 0)
        printf("Duet MPI/%s ratio min/median/max = %.4f/%.4f/%.4f (%zu pairs; %s)\n", nr_duet_name(d->kind), s.min,
               s.median, s.max, d->npairs, d->latency ? "round-trip times: above 1, MPI is slower"
                                                       : "throughputs: below 1, MPI is slower");
}

int nr_duet_verdict(const struct nr_duet *d, struct nr_error *err)
{
    struct nr_error e = {0};
    int rc = nr_calib_verdict(&d->calib, &e);
    return rc < 0 ? nr_error_set(err, rc, "--duet %s yardstick: %s", nr_duet_name(d->kind), e.detail) : NR_OK;
}

static void nr__values(struct nr_json *j, const char *key, const double *v, size_t n)
{
    nr_json_key(j, key);
    nr_json_begin_array(j);
    for (size_t i = 0; i < n; i++)
        nr_json_double(j, v[i]);
    nr_json_end_array(j);
}

/* min, avg, max, median, stddev, each key with `unit` appended */
static void nr__stats_json(struct nr_json *j, const struct nr_stats *s, const char *unit)
{
    const char *names[] = {"min", "avg", "max", "median", "stddev"};
    const double v[] = {s->min, s->avg, s->max, s->median, s->stddev};
    char key[32];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        snprintf(key, sizeof key, "%s%s", names[i], unit);
        nr_json_kv_double(j, key, v[i]);
    }
}

/* One side's figures, shaped as the main result is: a latency test's `latency`, a throughput test's `summary`. */
static void nr__side_json(struct nr_json *j, const char *key, const struct nr_duet *d, const double *v)
{
    struct nr_stats s;
    nr_stats_compute(v, d->npairs, &s);
    nr_json_key(j, key);
    nr_json_begin_object(j);
    if (d->latency) {
        nr__values(j, "rtt_us", v, d->npairs);
        nr__stats_json(j, &s, "_us");
    } else {
        nr_json_kv_stats(j, "throughput_mbps", &s);
        nr__values(j, "values_mbps", v, d->npairs);
    }
    nr_json_end_object(j);
}

void nr_duet_json(struct nr_json *j, const struct nr_duet *d)
{
    if (d->kind == NR_DUET_OFF || d->npairs == 0)
        return;
    nr_json_key(j, "duet");
    nr_json_begin_object(j);
    nr_json_kv_string(j, "yardstick", nr_duet_name(d->kind));
    if (d->kind == NR_DUET_TCP) {
        nr_json_kv_string(j, "iface", d->iface);
        nr_json_kv_string(j, "address", d->address);
        nr_json_kv_uint(j, "port", d->port);
        nr_json_kv_bool(j, "sleeps", d->sleep);
    }
    nr_json_kv_uint(j, "seed", d->seed);
    nr_json_key(j, "order");
    nr_json_begin_array(j);
    for (size_t i = 0; i < d->npairs; i++)
        nr_json_string(j, d->yard_first[i] ? "yardstick" : "mpi");
    nr_json_end_array(j);
    nr_json_kv_uint(j, "iterations", d->npairs ? d->reps[d->npairs - 1].iterations : 0);
    /* what the yardstick moved in its measured runs: over --duet tcp the interface under test carries it beside
     * MPI's payload, and the counter witness must not count it as MPI's */
    uint64_t moved = 0;
    for (size_t i = 0; i < d->npairs; i++)
        moved += d->reps[i].bytes_local;
    nr_json_kv_uint(j, "payload_bytes", moved);
    nr_json_key(j, "figures");
    nr_json_begin_object(j);
    nr__side_json(j, "mpi", d, d->mpi);
    nr__side_json(j, "yardstick", d, d->yard);
    nr_json_end_object(j);
    struct nr_stats s;
    nr_stats_compute(d->ratio, d->npairs, &s);
    nr_json_key(j, "ratio");
    nr_json_begin_object(j);
    nr__stats_json(j, &s, "");
    nr__values(j, "values", d->ratio, d->npairs);
    nr_json_end_object(j);
    nr_calib_json(j, &d->calib);
    nr_json_end_object(j);
}

void nr_duet_close(struct nr_duet *d)
{
    if (d->link) {
        if (d->link->fd >= 0)
            close(d->link->fd);
        if (d->link->seg)
            munmap(d->link->seg, sizeof *d->link->seg);
        free(d->link);
    }
    free(d->yard_first);
    free(d->reps);
    free(d->mpi);
    free(d->yard);
    free(d->ratio);
    d->link = NULL, d->yard_first = NULL, d->reps = NULL, d->mpi = d->yard = d->ratio = NULL;
}
