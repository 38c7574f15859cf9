/* Measured data-transfer loops (see xfer.h). */
#include "xfer.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "nr/error.h"
#include "nr/timer.h"

#define NR__ECHO_WINDOW (1u << 20)     /* bytes the echo server may read ahead of what it has returned */

/* The watchdog (see xfer.h): one process-wide timer and its tick counter, the only state a signal handler may
 * touch. A real-time signal, so neither SIGALRM users (alarm(), libFuzzer's -timeout) nor SIGPIPE interfere. */
static volatile sig_atomic_t g_ticks;
static timer_t g_timer;
static int g_timer_ready;

static void nr__on_tick(int sig)
{
    (void)sig;
    g_ticks++;
}

static int nr__watch_arm(struct nr_xfer *x, long period_ms, struct nr_error *err)
{
    if (!g_timer_ready) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = nr__on_tick;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = 0; /* no SA_RESTART: a blocked call must return EINTR */
        struct sigevent ev;
        memset(&ev, 0, sizeof ev);
        ev.sigev_notify = SIGEV_SIGNAL;
        ev.sigev_signo = SIGRTMIN + 1;
        if (sigaction(SIGRTMIN + 1, &sa, NULL) != 0 || timer_create(CLOCK_MONOTONIC, &ev, &g_timer) != 0)
            return nr_error_sys(err, NR_E_SYS, "cannot create the transfer watchdog timer");
        g_timer_ready = 1;
    }
    x->seen_ticks = (unsigned)g_ticks;
    x->progress_bytes = x->bytes;
    x->progress_ns = nr_now_ns();
    struct itimerspec it;
    memset(&it, 0, sizeof it);
    it.it_interval.tv_sec = period_ms / 1000;
    it.it_interval.tv_nsec = (period_ms % 1000) * 1000000L;
    it.it_value = it.it_interval;
    if (timer_settime(g_timer, 0, &it, NULL) != 0)
        return nr_error_sys(err, NR_E_SYS, "cannot arm the transfer watchdog timer");
    return NR_OK;
}

static void nr__watch_disarm(void)
{
    struct itimerspec off;
    memset(&off, 0, sizeof off);
    if (g_timer_ready)
        timer_settime(g_timer, 0, &off, NULL);
}

/* After a tick (or an interrupted call): idle timeout and deadline, with one clock read. */
static int nr__watch_check(struct nr_xfer *x, uint64_t moved, struct nr_error *err)
{
    x->seen_ticks = (unsigned)g_ticks;
    uint64_t now = nr_now_ns();
    if (x->deadline_ns && now > x->deadline_ns)
        return nr_error_set(err, NR_E_TIMEOUT, "repetition exceeded the server's time limit");
    if (moved != x->progress_bytes) {
        x->progress_bytes = moved;
        x->progress_ns = now;
    } else if (x->idle_ms > 0 && now - x->progress_ns >= (uint64_t)x->idle_ms * 1000000u) {
        return nr_error_set(err, NR_E_TIMEOUT, "data connection: no progress for %d ms", x->idle_ms);
    }
    return NR_OK;
}

/* The per-call check: one memory read unless a tick arrived. */
static inline int nr__watch(struct nr_xfer *x, uint64_t moved, struct nr_error *err)
{
    return (unsigned)g_ticks == x->seen_ticks ? NR_OK : nr__watch_check(x, moved, err);
}

/* Arm the watchdog for one transfer: the tick is NR_XFER_TICK_MS, shorter when the idle timeout is. */
static int nr__begin(struct nr_xfer *x, struct nr_error *err)
{
    long period = NR_XFER_TICK_MS;
    if (x->idle_ms > 0 && x->idle_ms / 2 < period)
        period = x->idle_ms / 2 > 0 ? x->idle_ms / 2 : 1;
    return nr__watch_arm(x, period, err);
}

static int nr__end(int rc)
{
    nr__watch_disarm();
    return rc;
}

void nr_xfer_push(const struct nr_xfer *x)
{
    int on = 1, off = 0;
    if (x->cork) {
        setsockopt(x->fd, IPPROTO_TCP, TCP_CORK, &off, sizeof off);
        setsockopt(x->fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
    } else if (!x->nodelay) {
        setsockopt(x->fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        setsockopt(x->fd, IPPROTO_TCP, TCP_NODELAY, &off, sizeof off);
    }
}

/* Classify a failed send/recv; EAGAIN (no socket here has a send or receive timeout: a socket option set from
 * outside) is reported as no progress. */
static int nr__io_error(const struct nr_xfer *x, const char *what, struct nr_error *err)
{
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return nr_error_set(err, NR_E_TIMEOUT, "data connection: %s made no progress within the idle timeout", what);
    if (errno == EPIPE || errno == ECONNRESET)
        return nr_error_sys(err, NR_E_CLOSED, "data connection: %s", what);
    (void)x;
    return nr_error_sys(err, NR_E_NET, "data connection: %s", what);
}

/* Non-blocking wait for events; 0 ready, NR_E_TIMEOUT when idle for idle_ms or past the deadline (the watchdog
 * interrupts the wait every tick). */
static int nr__poll(struct nr_xfer *x, short events, uint64_t moved, struct nr_error *err)
{
    struct pollfd p = {x->fd, events, 0};
    for (;;) {
        int rc = poll(&p, 1, x->idle_ms);
        if (rc > 0)
            return NR_OK;
        if (rc == 0)
            return nr_error_set(err, NR_E_TIMEOUT, "data connection: idle for %d ms", x->idle_ms);
        if (errno != EINTR)
            return nr_error_sys(err, NR_E_NET, "data connection: poll");
        if ((rc = nr__watch_check(x, moved, err)) < 0)
            return rc;
    }
}

/* Send exactly len bytes; the watchdog is checked after every call. */
static int nr__send_n(struct nr_xfer *x, uint64_t len, struct nr_error *err)
{
    while (len > 0) {
        size_t chunk = len < x->io_bytes ? (size_t)len : x->io_bytes;
        ssize_t n = send(x->fd, x->buf, chunk, MSG_NOSIGNAL);
        int rc = NR_OK;
        if (n > 0) {
            x->bytes += (uint64_t)n;
            len -= (uint64_t)n;
        } else if (n < 0 && errno == EINTR) {
            rc = nr__watch_check(x, x->bytes, err);
        } else if (n < 0 && !x->blocking && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            rc = nr__poll(x, POLLOUT, x->bytes, err);
        } else {
            return nr__io_error(x, "send", err);
        }
        if (rc < 0 || (rc = nr__watch(x, x->bytes, err)) < 0)
            return rc;
    }
    return NR_OK;
}

/* Receive exactly len bytes; the watchdog is checked after every call. */
static int nr__recv_n(struct nr_xfer *x, uint64_t len, struct nr_error *err)
{
    while (len > 0) {
        size_t chunk = len < x->io_bytes ? (size_t)len : x->io_bytes;
        ssize_t n = recv(x->fd, x->buf, chunk, 0);
        int rc = NR_OK;
        if (n > 0) {
            x->bytes += (uint64_t)n;
            len -= (uint64_t)n;
        } else if (n == 0) {
            return nr_error_set(err, NR_E_CLOSED, "data connection closed by peer with %llu bytes outstanding",
                                (unsigned long long)len);
        } else if (errno == EINTR) {
            rc = nr__watch_check(x, x->bytes, err);
        } else if (!x->blocking && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            rc = nr__poll(x, POLLIN, x->bytes, err);
        } else {
            return nr__io_error(x, "recv", err);
        }
        if (rc < 0 || (rc = nr__watch(x, x->bytes, err)) < 0)
            return rc;
    }
    return NR_OK;
}

int nr_xfer_send(struct nr_xfer *x, uint64_t iterations, uint64_t size, struct nr_error *err)
{
    int rc = nr__begin(x, err);
    for (uint64_t i = 0; i < iterations && rc == NR_OK; i++)
        rc = nr__send_n(x, size, err);
    if (rc == NR_OK)
        nr_xfer_push(x);
    return nr__end(rc);
}

int nr_xfer_recv(struct nr_xfer *x, uint64_t total, struct nr_error *err)
{
    int rc = nr__begin(x, err);
    if (rc == NR_OK)
        rc = nr__recv_n(x, total, err);
    return nr__end(rc);
}

int nr_xfer_pingpong(struct nr_xfer *x, uint64_t iterations, uint64_t size, bool initiator, struct nr_error *err)
{
    int rc = nr__begin(x, err);
    for (uint64_t i = 0; i < iterations && rc == NR_OK; i++) {
        if (initiator) {
            rc = nr__send_n(x, size, err);
            if (rc == 0 && i + 1 == iterations)
                nr_xfer_push(x);
            if (rc == 0)
                rc = nr__recv_n(x, size, err);
        } else {
            rc = nr__recv_n(x, size, err);
            if (rc == 0)
                rc = nr__send_n(x, size, err);
            if (rc == 0 && i + 1 == iterations)
                nr_xfer_push(x);
        }
    }
    return nr__end(rc);
}

static int nr__duplex(struct nr_xfer *x, uint64_t iterations, uint64_t size, struct nr_error *err);
static int nr__echo(struct nr_xfer *x, uint64_t total, struct nr_error *err);

int nr_xfer_duplex(struct nr_xfer *x, uint64_t iterations, uint64_t size, struct nr_error *err)
{
    int rc = nr__begin(x, err);
    return nr__end(rc == NR_OK ? nr__duplex(x, iterations, size, err) : rc);
}

int nr_xfer_echo(struct nr_xfer *x, uint64_t total, struct nr_error *err)
{
    int rc = nr__begin(x, err);
    return nr__end(rc == NR_OK ? nr__echo(x, total, err) : rc);
}

static int nr__duplex(struct nr_xfer *x, uint64_t iterations, uint64_t size, struct nr_error *err)
{
    uint64_t total = iterations * size, sent = 0, rcvd = 0;
    while (rcvd < total) {
        int progress = 0;
        if (sent < total) {
            uint64_t left_in_msg = size - sent % size;
            size_t chunk = left_in_msg < x->io_bytes ? (size_t)left_in_msg : x->io_bytes;
            ssize_t n = send(x->fd, x->buf, chunk, MSG_NOSIGNAL);
            if (n > 0) {
                sent += (uint64_t)n;
                progress = 1;
                if (sent == total)
                    nr_xfer_push(x);
            } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return nr__io_error(x, "send", err);
            }
        }
        uint64_t want = total - rcvd;
        ssize_t n = recv(x->fd, x->buf, want < x->io_bytes ? (size_t)want : x->io_bytes, 0);
        if (n > 0) {
            rcvd += (uint64_t)n;
            progress = 1;
        } else if (n == 0) {
            return nr_error_set(err, NR_E_CLOSED, "data connection closed by peer with %llu bytes outstanding",
                                (unsigned long long)(total - rcvd));
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            return nr__io_error(x, "recv", err);
        }
        int rc = NR_OK;
        if (!progress)
            rc = nr__poll(x, (short)(POLLIN | (sent < total ? POLLOUT : 0)), sent + rcvd, err);
        if (rc < 0 || (rc = nr__watch(x, sent + rcvd, err)) < 0)
            return rc;
    }
    x->bytes += sent + rcvd;
    return NR_OK;
}

static int nr__echo(struct nr_xfer *x, uint64_t total, struct nr_error *err)
{
    uint64_t sent = 0, rcvd = 0;
    uint64_t window = x->io_bytes > NR__ECHO_WINDOW ? x->io_bytes : NR__ECHO_WINDOW;
    while (sent < total) {
        int progress = 0;
        uint64_t owed = rcvd - sent;
        if (rcvd < total && owed < window) {
            uint64_t want = total - rcvd;
            if (want > window - owed)
                want = window - owed;
            ssize_t n = recv(x->fd, x->buf, want < x->io_bytes ? (size_t)want : x->io_bytes, 0);
            if (n > 0) {
                rcvd += (uint64_t)n;
                owed += (uint64_t)n;
                progress = 1;
            } else if (n == 0) {
                return nr_error_set(err, NR_E_CLOSED, "data connection closed by peer with %llu bytes outstanding",
                                    (unsigned long long)(total - rcvd));
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return nr__io_error(x, "recv", err);
            }
        }
        if (owed > 0) {
            ssize_t n = send(x->fd, x->buf, owed < x->io_bytes ? (size_t)owed : x->io_bytes, MSG_NOSIGNAL);
            if (n > 0) {
                sent += (uint64_t)n;
                progress = 1;
                if (sent == total)
                    nr_xfer_push(x);
            } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return nr__io_error(x, "send", err);
            }
        }
        int rc = NR_OK;
        if (!progress) {
            short ev = (short)((rcvd < total && rcvd - sent < window ? POLLIN : 0) | (rcvd > sent ? POLLOUT : 0));
            rc = nr__poll(x, ev, sent + rcvd, err);
        }
        if (rc < 0 || (rc = nr__watch(x, sent + rcvd, err)) < 0)
            return rc;
    }
    x->bytes += sent + rcvd;
    return NR_OK;
}
