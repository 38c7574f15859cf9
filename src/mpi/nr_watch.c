/* The MPI kernels' watchdog: a deadline on every blocking phase (see nr_mpi.h, "Deadlines").
 *
 * A blocked MPI call cannot be interrupted, and an MPI library started single-threaded cannot be called from a
 * second thread for anything but ending the job. So each rank runs one thread that owns a small TCP listener (its
 * address and port exchanged with every rank at start) and the rank's deadline, and talks no MPI until the end:
 *
 *   - it answers every probe carrying the job's cookie with the rank's phase and progress count, which a stopped
 *     (SIGSTOP) or frozen process cannot do: the kernel still completes the TCP handshake, the thread does not
 *     reply;
 *   - when the deadline passes, rank 0's thread probes every other rank and names the ones that did not answer
 *     (with their nodes); when all answered they are alive, only slow or hung, and rank 0 waits the budget again
 *     (NR__PATIENCE times, saying so on stderr) before it names the ranks whose progress count is behind the rest;
 *     any other rank keeps answering for a grace period (so rank 0 can probe it), then probes rank 0 (rank 1 first,
 *     the others after a second grace period) and names it when it is silent;
 *   - the reporting rank prints one error line, writes the error document (--json) and ends the job with MPI_Abort
 *     (exit status 1); an alarm ends the process with _exit(1) should the library's abort not return control.
 */
#include "nr_mpi.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nr/timer.h"

#define NR__ADDRS 4            /* IPv4 addresses a rank advertises (its interfaces', loopback last) */
#define NR__TICK_MS 200        /* the thread wakes at least this often to check the deadline */
#define NR__PROBE_S 5.0        /* a probed rank that has not answered by then counts as silent (a loaded node's
                                  thread may wait seconds for a CPU) */
#define NR__PROBE_TOTAL_S 10.0 /* rank 0 probes no longer than this in all (ranks not reached: "not probed") */
#define NR__PROBE_BATCH 256    /* connections open at once while probing */
#define NR__CLIENTS 64         /* probe connections served at once */
#define NR__ABORT_BACKSTOP_S 10 /* seconds MPI_Abort gets before the process ends itself */
#define NR__PHASE_MAX 72
#define NR__STALL_S 2.0        /* a tick this late means this process was stopped or starved */
#define NR__PATIENCE 4         /* budgets rank 0 waits again while every rank answers (alive, only slow or hung) */

/* What a rank tells every other one at start. */
struct nr__endpoint {
    uint32_t addr[NR__ADDRS]; /* network order; 0 = none */
    uint16_t port;            /* host order */
    char host[NR_HOST_MAX];
};

/* A probe's answer: the rank's progress count and phase. */
struct nr__pong {
    uint64_t seq;
    char phase[NR__PHASE_MAX];
};

static struct {
    const struct nr_mpi *m;
    int lfd;                        /* the listener */
    int wake[2];                    /* a pipe that ends the thread */
    pthread_t thread;
    bool running;
    pthread_mutex_t mu;             /* guards what follows */
    double deadline;                /* nr_now_s() seconds; 0 = disarmed */
    double budget;                  /* seconds the phase was given */
    char phase[NR__PHASE_MAX];
    uint64_t seq;                   /* phases started */
    uint64_t cookie;                /* rank 0's random number: probes carry it */
    struct nr__endpoint *peers;     /* every rank's endpoint */
} g_watch = {.lfd = -1, .wake = {-1, -1}, .mu = PTHREAD_MUTEX_INITIALIZER};

static void nr__nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* This node's IPv4 addresses: interfaces that are up, loopback last. */
static void nr__local_addrs(uint32_t addr[NR__ADDRS])
{
    memset(addr, 0, sizeof(uint32_t) * NR__ADDRS);
    int n = 0;
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i && n < NR__ADDRS - 1; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
                !(i->ifa_flags & IFF_LOOPBACK))
                addr[n++] = ((const struct sockaddr_in *)(const void *)i->ifa_addr)->sin_addr.s_addr;
        freeifaddrs(ifs);
    }
    addr[n] = htonl(INADDR_LOOPBACK);
}

/* Serve one probe connection that became readable: a cookie in, the pong out. 1 when it is done with. */
static int nr__serve(int fd)
{
    uint64_t cookie = 0;
    ssize_t got = recv(fd, &cookie, sizeof cookie, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (got == (ssize_t)sizeof cookie && cookie == g_watch.cookie) {
        struct nr__pong p;
        memset(&p, 0, sizeof p);
        pthread_mutex_lock(&g_watch.mu);
        p.seq = g_watch.seq;
        memcpy(p.phase, g_watch.phase, sizeof p.phase);
        pthread_mutex_unlock(&g_watch.mu);
        (void)!send(fd, &p, sizeof p, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    return 1; /* answered, wrong cookie, short read or closed: done either way */
}

/* The probe connections this rank is answering (the thread's alone). */
static int g_clients[NR__CLIENTS], g_nclients;
static double g_since[NR__CLIENTS];
#define NR__SERVE_FDS (NR__CLIENTS + 2)

/* The poll entries of serving: the wake pipe, the listener, the clients. Returns how many. */
static int nr__serve_fds(struct pollfd *pf)
{
    pf[0] = (struct pollfd){g_watch.wake[0], POLLIN, 0};
    pf[1] = (struct pollfd){g_watch.lfd, POLLIN, 0};
    for (int i = 0; i < g_nclients; i++)
        pf[2 + i] = (struct pollfd){g_clients[i], POLLIN, 0};
    return 2 + g_nclients;
}

/* Handle what poll found on nr__serve_fds' entries: 1 when woken through the pipe (the end). */
static int nr__serve_events(const struct pollfd *pf)
{
    if (pf[0].revents)
        return 1;
    for (int i = g_nclients - 1; i >= 0; i--)
        if ((pf[2 + i].revents && nr__serve(g_clients[i])) || nr_now_s() - g_since[i] > NR__PROBE_S) {
            close(g_clients[i]);
            g_clients[i] = g_clients[--g_nclients], g_since[i] = g_since[g_nclients];
        }
    if (pf[1].revents & POLLIN) {
        int fd = accept(g_watch.lfd, NULL, NULL);
        if (fd >= 0 && g_nclients < NR__CLIENTS) {
            nr__nonblock(fd);
            g_clients[g_nclients] = fd, g_since[g_nclients++] = nr_now_s();
        } else if (fd >= 0) {
            close(fd);
        }
    }
    return 0;
}

/* Serve probes for up to wait_s seconds (or until woken through the pipe: returns 1 then). */
static int nr__serve_for(double wait_s)
{
    const double until = nr_now_s() + wait_s;
    for (;;) {
        struct pollfd pf[NR__SERVE_FDS];
        int n = nr__serve_fds(pf);
        double left = until - nr_now_s();
        if (left <= 0)
            return 0;
        int ms = left * 1000 < NR__TICK_MS ? (int)(left * 1000) + 1 : NR__TICK_MS;
        int ready = poll(pf, (nfds_t)n, ms);
        if (ready < 0 && errno != EINTR)
            return 1;
        if (ready > 0 && nr__serve_events(pf))
            return 1;
    }
}

/* Probe ranks `who[0..n-1]`: answered[i] 1 with pong[i] filled, 0 silent, -1 not probed (out of time). Probes
 * to this rank are answered meanwhile, so a rank that probes is never taken for a silent one. */
static void nr__probe(const int *who, int n, int *answered, struct nr__pong *pong)
{
    const double give_up = nr_now_s() + NR__PROBE_TOTAL_S;
    for (int i = 0; i < n; i++)
        answered[i] = -1;
    for (int first = 0; first < n && nr_now_s() < give_up; first += NR__PROBE_BATCH / NR__ADDRS) {
        int last = first + NR__PROBE_BATCH / NR__ADDRS < n ? first + NR__PROBE_BATCH / NR__ADDRS : n;
        int fd[NR__PROBE_BATCH], owner[NR__PROBE_BATCH], nfd = 0;
        bool sent[NR__PROBE_BATCH] = {false};
        for (int i = first; i < last; i++) {
            answered[i] = 0;
            const struct nr__endpoint *e = &g_watch.peers[who[i]];
            bool same_host = strcmp(e->host, g_watch.m->host) == 0;
            for (int a = 0; a < NR__ADDRS && e->addr[a]; a++) {
                if (same_host && e->addr[a] != htonl(INADDR_LOOPBACK))
                    continue; /* a rank on this node: loopback is enough */
                int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (s < 0)
                    continue;
                struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(e->port)};
                sa.sin_addr.s_addr = e->addr[a];
                if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS) {
                    close(s);
                    continue;
                }
                fd[nfd] = s, owner[nfd++] = i;
            }
        }
        const double until = nr_now_s() + NR__PROBE_S;
        int open = nfd;
        while (open > 0 && nr_now_s() < until) {
            struct pollfd pf[NR__PROBE_BATCH + NR__SERVE_FDS];
            for (int k = 0; k < nfd; k++)
                pf[k] = (struct pollfd){fd[k], (short)(fd[k] < 0 ? 0 : sent[k] ? POLLIN : POLLOUT), 0};
            int nserve = nr__serve_fds(pf + nfd);
            if (poll(pf, (nfds_t)(nfd + nserve), NR__TICK_MS) <= 0)
                continue;
            nr__serve_events(pf + nfd); /* the end (the pipe) waits: a probe that runs ends the job anyway */
            for (int k = 0; k < nfd; k++) {
                if (fd[k] < 0 || !pf[k].revents)
                    continue;
                bool done = true;
                if (!sent[k] && (pf[k].revents & POLLOUT)) {
                    int soerr = 0;
                    socklen_t len = sizeof soerr;
                    getsockopt(fd[k], SOL_SOCKET, SO_ERROR, &soerr, &len);
                    if (soerr == 0 && send(fd[k], &g_watch.cookie, sizeof g_watch.cookie, MSG_NOSIGNAL) ==
                                          (ssize_t)sizeof g_watch.cookie)
                        sent[k] = true, done = false;
                } else if (sent[k] && (pf[k].revents & POLLIN)) {
                    struct nr__pong p;
                    if (recv(fd[k], &p, sizeof p, MSG_WAITALL) == (ssize_t)sizeof p && answered[owner[k]] != 1) {
                        p.phase[sizeof p.phase - 1] = '\0';
                        answered[owner[k]] = 1, pong[owner[k]] = p;
                    }
                }
                if (done) {
                    close(fd[k]);
                    fd[k] = -1, open--;
                }
            }
        }
        for (int k = 0; k < nfd; k++)
            if (fd[k] >= 0)
                close(fd[k]);
    }
}

/* Append to a message without overflowing it. */
static void nr__add(char *msg, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void nr__add(char *msg, size_t len, const char *fmt, ...)
{
    size_t used = strlen(msg);
    if (used + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + used, len - used, fmt, ap);
    va_end(ap);
}

static void nr__backstop(int sig)
{
    (void)sig;
    _exit(NR_EXIT_RUNTIME);
}

/* Report the expired deadline (what the probes found), write the error document and end the job. */
/* After a deadline passed: probe (rank 0 every rank, the others rank 0). A silent rank ends the job at once. When
 * every rank probed answered they are alive, only slow or hung: a rank other than 0 leaves the verdict to rank 0
 * (returns), and rank 0 waits the phase's budget again, *patience times (a shared host can make a run calibrated
 * a moment before last a hundred times longer), saying so on stderr, then ends the job. Returns when the caller
 * should move the deadline on by the budget. */
static void nr__expire(const char *phase, double budget, int *patience)
{
    const struct nr_mpi *m = g_watch.m;
    const int p = m->size;
    char msg[sizeof ((struct nr_error *)0)->detail] = "";
    nr__add(msg, sizeof msg, "no progress in %s within the %.3g-s deadline%s: ", phase, budget,
            *patience < NR__PATIENCE ? ", extended while every rank answered" : "");
    int *who = malloc(sizeof *who * (size_t)p), *answered = malloc(sizeof *answered * (size_t)p);
    struct nr__pong *pong = malloc(sizeof *pong * (size_t)p);
    int n = 0;
    if (who && answered && pong) {
        if (m->rank == 0)
            for (int r = 1; r < p; r++)
                who[n++] = r;
        else
            who[n++] = 0;
        nr__probe(who, n, answered, pong);
        int silent = 0, unknown = 0;
        uint64_t most = 0;
        for (int i = 0; i < n; i++) {
            silent += answered[i] == 0, unknown += answered[i] < 0;
            if (answered[i] == 1 && pong[i].seq > most)
                most = pong[i].seq;
        }
        if (silent) {
            nr__add(msg, sizeof msg, "%s ", silent > 1 ? "ranks" : "rank");
            for (int i = 0, shown = 0; i < n; i++)
                if (answered[i] == 0 && shown++ < 8)
                    nr__add(msg, sizeof msg, "%s%d (node %s)", shown > 1 ? ", " : "", who[i],
                            g_watch.peers[who[i]].host);
            if (silent > 8)
                nr__add(msg, sizeof msg, " and %d more", silent - 8);
            nr__add(msg, sizeof msg, " did not answer (stopped or frozen)");
        } else if (m->rank == 0) {
            int behind = 0;
            for (int i = 0; i < n; i++)
                behind += answered[i] == 1 && pong[i].seq < most;
            nr__add(msg, sizeof msg, "every rank probed answered (a hung library or network)");
            for (int i = 0, shown = 0; i < n && behind; i++)
                if (answered[i] == 1 && pong[i].seq < most && shown++ < 8)
                    nr__add(msg, sizeof msg, "%s%d (node %s, still in %s)", shown > 1 ? ", " : "; behind: rank ",
                            who[i], g_watch.peers[who[i]].host, pong[i].phase);
        }
        if (unknown)
            nr__add(msg, sizeof msg, " (%d ranks not probed in %.0f s)", unknown, NR__PROBE_TOTAL_S);
        if (!silent && !unknown && (m->rank != 0 || (*patience)-- > 0)) {
            if (m->rank == 0)
                fprintf(stderr, "%s: warning: rank 0: no progress in %s for %.3g s, but every rank answers: "
                        "waiting %.3g s more (%d more times at most)\n", m->prog ? m->prog : "netregress", phase,
                        budget, budget, *patience);
            free(who), free(answered), free(pong);
            return;
        }
    }
    free(who), free(answered), free(pong);
    struct nr_error err;
    nr_error_clear(&err);
    nr_error_set(&err, NR_E_TIMEOUT, "%s", msg);
    signal(SIGALRM, nr__backstop);
    alarm(NR__ABORT_BACKSTOP_S);
    nr_mpi_fail_loop(m, &err); /* reports, writes the error document, MPI_Abort */
}

static void *nr__thread(void *arg)
{
    (void)arg;
    double last = nr_now_s();
    uint64_t seen = 0;
    int patience = NR__PATIENCE;
    for (;;) {
        if (nr__serve_for(NR__TICK_MS / 1000.0))
            return NULL;
        /* A tick that came far too late: this process itself was stopped (and has been let go on, by a launcher
         * that ends the job, say) or starved of CPU. That time does not count against the others: the deadline
         * moves by it, so a rank that was stopped does not accuse the ranks it kept waiting. */
        double now = nr_now_s(), gap = now - last - NR__TICK_MS / 1000.0;
        last = now;
        pthread_mutex_lock(&g_watch.mu);
        if (gap > NR__STALL_S && g_watch.deadline > 0)
            g_watch.deadline += gap;
        double deadline = g_watch.deadline, budget = g_watch.budget;
        if (g_watch.seq != seen)
            seen = g_watch.seq, patience = NR__PATIENCE; /* a new phase: patience anew */
        char phase[NR__PHASE_MAX];
        memcpy(phase, g_watch.phase, sizeof phase);
        pthread_mutex_unlock(&g_watch.mu);
        if (deadline <= 0 || nr_now_s() <= deadline)
            continue;
        /* Rank 0 reports at once; the others keep answering probes first, so rank 0 can tell who is silent. */
        if (g_watch.m->rank != 0) {
            if (nr__serve_for(NR__PROBE_TOTAL_S + NR__PROBE_S + 1))
                return NULL;
            if (g_watch.m->rank != 1 && nr__serve_for(NR__PROBE_TOTAL_S + NR__PROBE_S + 1))
                return NULL;
            pthread_mutex_lock(&g_watch.mu);
            bool kicked = g_watch.deadline != deadline;
            pthread_mutex_unlock(&g_watch.mu);
            if (kicked)
                continue; /* the phase ended after all */
        }
        nr__expire(phase, budget, &patience);
        pthread_mutex_lock(&g_watch.mu);
        if (g_watch.deadline == deadline)
            g_watch.deadline = nr_now_s() + budget;
        pthread_mutex_unlock(&g_watch.mu);
    }
}

int nr_mpi_watch_start(struct nr_mpi *m, double budget_s, const char *phase, struct nr_error *err)
{
    g_watch.m = m;
    struct nr__endpoint me;
    memset(&me, 0, sizeof me);
    nr__local_addrs(me.addr);
    snprintf(me.host, sizeof me.host, "%s", m->host);
    int rc = NR_OK;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, NR__CLIENTS) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0 || pipe(g_watch.wake) < 0)
        rc = nr_error_sys(err, NR_E_SYS, "watchdog: cannot listen for probes");
    if (fd >= 0)
        nr__nonblock(fd);
    g_watch.lfd = fd;
    me.port = ntohs(sa.sin_port);
    g_watch.peers = calloc((size_t)m->size, sizeof *g_watch.peers);
    if (rc == NR_OK && !g_watch.peers)
        rc = nr_error_set(err, NR_E_NOMEM, "watchdog: out of memory for %d endpoints", m->size);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    rc = nr_mpi_check(MPI_Allgather(NR_MPI_IN(&me), (int)sizeof me, MPI_BYTE, g_watch.peers, (int)sizeof me, MPI_BYTE,
                                    MPI_COMM_WORLD), "MPI_Allgather (watchdog endpoints)", err);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    g_watch.cookie = m->rank == 0 ? nr_now_ns() ^ ((uint64_t)getpid() << 32) : 0;
    rc = nr_mpi_check(MPI_Bcast(&g_watch.cookie, 1, NR_MPI_UINT64, 0, MPI_COMM_WORLD), "MPI_Bcast (watchdog)", err);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    nr_mpi_watch(phase, budget_s);
    /* the thread takes no signal meant for the kernel (SIGPIPE, the TCP yardstick's timer) */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int prc = pthread_create(&g_watch.thread, NULL, nr__thread, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    g_watch.running = prc == 0;
    return nr_mpi_agree(prc == 0 ? NR_OK : nr_error_set(err, NR_E_SYS, "watchdog: cannot start its thread"), err);
}

void nr_mpi_watch(const char *phase, double budget_s)
{
    pthread_mutex_lock(&g_watch.mu);
    g_watch.deadline = budget_s > 0 ? nr_now_s() + budget_s : 0;
    g_watch.budget = budget_s;
    snprintf(g_watch.phase, sizeof g_watch.phase, "%s", phase);
    g_watch.seq++;
    pthread_mutex_unlock(&g_watch.mu);
}

void nr_mpi_watch_stop(void)
{
    if (g_watch.running) {
        (void)!write(g_watch.wake[1], "x", 1);
        pthread_join(g_watch.thread, NULL);
        g_watch.running = false;
    }
    for (int i = 0; i < 2; i++)
        if (g_watch.wake[i] >= 0)
            close(g_watch.wake[i]), g_watch.wake[i] = -1;
    if (g_watch.lfd >= 0)
        close(g_watch.lfd), g_watch.lfd = -1;
    free(g_watch.peers);
    g_watch.peers = NULL;
}
