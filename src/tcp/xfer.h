/* The measured data-transfer loops of the TCP kernels (client and server sides).
 *
 * These are the timed loops: they do nothing but send()/recv() of at most io_bytes per call and, in non-blocking
 * mode, poll() when the socket would block; bytes are counted as the kernel reports them moved (partial writes and
 * EAGAIN are normal in non-blocking mode). Payload content is not inspected: the server returns as many bytes as
 * it received, from its own buffer. Safety checks that must stay in the loop are cheap: a process-wide watchdog
 * timer ticks every NR_XFER_TICK_MS (a real-time signal that interrupts a blocked send()/recv(), in either mode; no
 * SO_RCVTIMEO/SO_SNDTIMEO), and only after a tick or an interrupted call is the clock read and the idle timeout
 * (idle_ms: no byte moved for that long) and the deadline (deadline_ns) checked.
 *
 * When a side has queued its last bytes of a run it pushes them out (nr_xfer_push): otherwise Nagle's algorithm
 * (or TCP_CORK) may hold a final partial segment until the peer's delayed ACK, adding up to 40 ms (200 ms) to the
 * end of every run, an artefact of where the run stops rather than a property of the stream.
 *
 * Modes:
 *   stream      client nr_xfer_send()                  server nr_xfer_recv()
 *   ping-pong   blocking: client nr_xfer_pingpong(initiator)  server nr_xfer_pingpong(responder): each message
 *               crosses whole before it is returned;  non-blocking: client nr_xfer_duplex() keeps sending while it
 *               receives, server nr_xfer_echo() returns bytes as they arrive (both directions busy, as Hpcbench)
 *   latency     nr_xfer_pingpong() in either blocking mode: strictly one message in flight
 */
#ifndef NR_TCP_XFER_H
#define NR_TCP_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nr_error;

struct nr_xfer {
    int fd;               /* connected data socket */
    bool blocking;        /* false: fd is O_NONBLOCK and waits use poll() */
    size_t io_bytes;      /* largest single send/recv (-d) */
    char *buf;            /* io_bytes of scratch payload */
    int idle_ms;          /* non-blocking: give up when poll() sees nothing for this long */
    uint64_t deadline_ns; /* monotonic deadline (nr_now_ns), 0 = none */
    uint64_t bytes;       /* payload bytes moved so far (sent + received) */
    bool nodelay;         /* TCP_NODELAY is on for this test */
    bool cork;            /* TCP_CORK is on for this test */
    /* watchdog state (set by the transfer functions) */
    unsigned seen_ticks;      /* watchdog ticks already accounted for */
    uint64_t progress_bytes;  /* bytes at the last tick that saw progress */
    uint64_t progress_ns;     /* when that was */
};

#define NR_XFER_TICK_MS 100 /* watchdog period: the resolution of the idle timeout and the deadline */

/* Send whatever partial segment Nagle or TCP_CORK holds back, keeping the options as they were (one toggle of
 * TCP_NODELAY, or of TCP_CORK, which makes Linux transmit pending data at once). */
void nr_xfer_push(const struct nr_xfer *x);

/* Stream sender: iterations messages of size bytes. */
int nr_xfer_send(struct nr_xfer *x, uint64_t iterations, uint64_t size, struct nr_error *err);

/* Stream receiver: exactly total bytes. */
int nr_xfer_recv(struct nr_xfer *x, uint64_t total, struct nr_error *err);

/* Strict ping-pong: the initiator sends a message and then receives one of the same size; the responder does the
 * opposite. iterations round trips. */
int nr_xfer_pingpong(struct nr_xfer *x, uint64_t iterations, uint64_t size, bool initiator, struct nr_error *err);

/* Non-blocking full-duplex ping-pong client: sends iterations messages while receiving their echo. */
int nr_xfer_duplex(struct nr_xfer *x, uint64_t iterations, uint64_t size, struct nr_error *err);

/* Non-blocking echo server: receives total bytes and returns each as soon as it can. */
int nr_xfer_echo(struct nr_xfer *x, uint64_t total, struct nr_error *err);

#endif
