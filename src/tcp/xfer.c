/* Measured data-transfer loops (see xfer.h). */
#include "xfer.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include "nr/error.h"
#include "nr/timer.h"

#define NR__DEADLINE_EVERY 64          /* system calls between two deadline checks */
#define NR__ECHO_WINDOW (1u << 20)     /* bytes the echo server may read ahead of what it has returned */

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

/* Deadline check, amortised over NR__DEADLINE_EVERY calls. */
static int nr__over_deadline(const struct nr_xfer *x, uint64_t *calls)
{
    return x->deadline_ns && (++*calls % NR__DEADLINE_EVERY) == 0 && nr_now_ns() > x->deadline_ns;
}

static int nr__deadline_error(struct nr_error *err)
{
    return nr_error_set(err, NR_E_TIMEOUT, "repetition exceeded the server's time limit");
}

/* Classify a failed send/recv; EAGAIN in blocking mode means SO_SNDTIMEO/SO_RCVTIMEO expired. */
static int nr__io_error(const struct nr_xfer *x, const char *what, struct nr_error *err)
{
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return nr_error_set(err, NR_E_TIMEOUT, "data connection: %s made no progress within the idle timeout", what);
    if (errno == EPIPE || errno == ECONNRESET)
        return nr_error_sys(err, NR_E_CLOSED, "data connection: %s", what);
    (void)x;
    return nr_error_sys(err, NR_E_NET, "data connection: %s", what);
}

/* Non-blocking wait for events; 0 ready, NR_E_TIMEOUT when idle for idle_ms. */
static int nr__poll(const struct nr_xfer *x, short events, struct nr_error *err)
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
    }
}

/* Send exactly len bytes. */
static int nr__send_n(struct nr_xfer *x, uint64_t len, uint64_t *calls, struct nr_error *err)
{
    while (len > 0) {
        size_t chunk = len < x->io_bytes ? (size_t)len : x->io_bytes;
        ssize_t n = send(x->fd, x->buf, chunk, MSG_NOSIGNAL);
        if (n > 0) {
            x->bytes += (uint64_t)n;
            len -= (uint64_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && !x->blocking && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = nr__poll(x, POLLOUT, err);
            if (rc < 0)
                return rc;
        } else {
            return nr__io_error(x, "send", err);
        }
        if (nr__over_deadline(x, calls))
            return nr__deadline_error(err);
    }
    return NR_OK;
}

/* Receive exactly len bytes. */
static int nr__recv_n(struct nr_xfer *x, uint64_t len, uint64_t *calls, struct nr_error *err)
{
    while (len > 0) {
        size_t chunk = len < x->io_bytes ? (size_t)len : x->io_bytes;
        ssize_t n = recv(x->fd, x->buf, chunk, 0);
        if (n > 0) {
            x->bytes += (uint64_t)n;
            len -= (uint64_t)n;
        } else if (n == 0) {
            return nr_error_set(err, NR_E_CLOSED, "data connection closed by peer with %llu bytes outstanding",
                                (unsigned long long)len);
        } else if (errno == EINTR) {
            continue;
        } else if (!x->blocking && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = nr__poll(x, POLLIN, err);
            if (rc < 0)
                return rc;
        } else {
            return nr__io_error(x, "recv", err);
        }
        if (nr__over_deadline(x, calls))
            return nr__deadline_error(err);
    }
    return NR_OK;
}

int nr_xfer_send(struct nr_xfer *x, uint64_t iterations, uint64_t size, struct nr_error *err)
{
    uint64_t calls = 0;
    for (uint64_t i = 0; i < iterations; i++) {
        int rc = nr__send_n(x, size, &calls, err);
        if (rc < 0)
            return rc;
    }
    nr_xfer_push(x);
    return NR_OK;
}

int nr_xfer_recv(struct nr_xfer *x, uint64_t total, struct nr_error *err)
{
    uint64_t calls = 0;
    return nr__recv_n(x, total, &calls, err);
}

int nr_xfer_pingpong(struct nr_xfer *x, uint64_t iterations, uint64_t size, bool initiator, struct nr_error *err)
{
    uint64_t calls = 0;
    for (uint64_t i = 0; i < iterations; i++) {
        int rc;
        if (initiator) {
            rc = nr__send_n(x, size, &calls, err);
            if (rc == 0 && i + 1 == iterations)
                nr_xfer_push(x);
            if (rc == 0)
                rc = nr__recv_n(x, size, &calls, err);
        } else {
            rc = nr__recv_n(x, size, &calls, err);
            if (rc == 0)
                rc = nr__send_n(x, size, &calls, err);
            if (rc == 0 && i + 1 == iterations)
                nr_xfer_push(x);
        }
        if (rc < 0)
            return rc;
    }
    return NR_OK;
}

int nr_xfer_duplex(struct nr_xfer *x, uint64_t iterations, uint64_t size, struct nr_error *err)
{
    uint64_t total = iterations * size, sent = 0, rcvd = 0, calls = 0;
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
        if (!progress) {
            int rc = nr__poll(x, (short)(POLLIN | (sent < total ? POLLOUT : 0)), err);
            if (rc < 0)
                return rc;
        }
        if (nr__over_deadline(x, &calls))
            return nr__deadline_error(err);
    }
    x->bytes += sent + rcvd;
    return NR_OK;
}

int nr_xfer_echo(struct nr_xfer *x, uint64_t total, struct nr_error *err)
{
    uint64_t sent = 0, rcvd = 0, calls = 0;
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
        if (!progress) {
            short ev = (short)((rcvd < total && rcvd - sent < window ? POLLIN : 0) | (rcvd > sent ? POLLOUT : 0));
            int rc = nr__poll(x, ev, err);
            if (rc < 0)
                return rc;
        }
        if (nr__over_deadline(x, &calls))
            return nr__deadline_error(err);
    }
    x->bytes += sent + rcvd;
    return NR_OK;
}
