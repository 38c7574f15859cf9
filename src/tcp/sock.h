/* TCP socket helpers shared by nr-tcptest and nr-tcpserver: resolving and connecting with a timeout, listening,
 * applying the Hpcbench socket options (buffer sizes, TCP_NODELAY, TCP_CORK, MSS, IP TOS) and reading back the
 * values the kernel actually uses, and timed full reads/writes for the control connection.
 */
#ifndef NR_TCP_SOCK_H
#define NR_TCP_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct nr_error;

/* Requested socket options (0 / false = leave the system default). */
struct nr_tcp_sockopts {
    uint32_t buffer_bytes; /* SO_SNDBUF and SO_RCVBUF (-b) */
    uint32_t mss_bytes;    /* TCP_MAXSEG (-M) */
    bool nodelay;          /* TCP_NODELAY (-N) */
    bool cork;             /* TCP_CORK (-C) */
    uint8_t tos;           /* IP_TOS / IPV6_TCLASS byte (-q), 0 = default */
    bool blocking;         /* false: O_NONBLOCK data socket (-n) */
};

/* Effective values of a data socket, as getsockopt reports them. */
struct nr_tcp_sockinfo {
    uint32_t rcvbuf_bytes;
    uint32_t sndbuf_bytes;
    uint32_t mss_bytes;
    bool blocking;
    bool nodelay;
    bool cork;
    uint8_t tos;
};

/* Apply the buffer, MSS, TOS, NODELAY and CORK options to fd (before connect/listen, so that buffer sizes take
 * part in window scaling and the MSS is advertised). The TOS byte goes to IP_TOS and, on an IPv6 socket, to
 * IPV6_TCLASS too (packets to an IPv4 peer of an IPv6 socket carry IP_TOS). Blocking mode is set separately
 * (nr_tcp_set_blocking). An MSS the system refuses (EINVAL) is ignored, not an error, as Hpcbench does; compare the
 * effective MSS. */
int nr_tcp_apply_opts(int fd, int family, const struct nr_tcp_sockopts *o, struct nr_error *err);

/* Read the effective values of fd (the TOS as its packets carry it: IP_TOS for an IPv4 peer, IPV6_TCLASS else). */
int nr_tcp_sockinfo_get(int fd, int family, struct nr_tcp_sockinfo *out, struct nr_error *err);

int nr_tcp_set_blocking(int fd, bool blocking, struct nr_error *err);

/* Connect to host:port (all addresses getaddrinfo returns, in order), each attempt limited to timeout_s.
 * opts (may be NULL) are applied before connecting. Returns the fd (blocking) or a negative NR_E_*.
 * *family receives the address family used. */
int nr_tcp_connect(const char *host, uint16_t port, const struct nr_tcp_sockopts *opts, double timeout_s,
                   int *family, struct nr_error *err);

/* Listen on the first address of bind_addr that takes it, port (0 = pick a free one). opts (may be NULL) are
 * applied before listen() and are inherited by accepted sockets.
 * Returns the fd or a negative NR_E_*; *bound_port receives the port, *family the family. */
int nr_tcp_listen(const char *bind_addr, uint16_t port, const struct nr_tcp_sockopts *opts, int backlog,
                  uint16_t *bound_port, int *family, struct nr_error *err);

#define NR_TCP_LISTEN_MAX 8 /* most sockets of nr_tcp_listen_set */

/* Listen on every address of bind_addr (NULL: the loopback addresses 127.0.0.1 and ::1) on one port (0: one free on
 * all of them), at most max sockets into fds. The IPv6 wildcard "::" takes IPv4 too, whatever
 * net.ipv6.bindv6only says; an address this host lacks (::1 without IPv6) is skipped. Returns the count (> 0) or a
 * negative NR_E_*; *bound_port receives the port. */
int nr_tcp_listen_set(const char *bind_addr, uint16_t port, int backlog, int *fds, int max, uint16_t *bound_port,
                      struct nr_error *err);

/* Write / read exactly len bytes within timeout_s (poll-based, fd may be blocking or not). Reading returns
 * NR_E_CLOSED when the peer closes first. Used for the control connection and handshakes, not for measuring. */
int nr_tcp_write_all(int fd, const void *buf, size_t len, double timeout_s, struct nr_error *err);
int nr_tcp_read_all(int fd, void *buf, size_t len, double timeout_s, struct nr_error *err);

/* Numeric host of a socket address ("127.0.0.1", "::1", "fe80::1%2" with the scope of a link-local address), or
 * "?" for other families. Returns buf. */
const char *nr_tcp_addr_str(const struct sockaddr_storage *ss, char *buf, size_t len);

/* An IPv4-mapped IPv6 address (::ffff:a.b.c.d, an IPv4 peer of a dual-stack socket) turned into the IPv4 address
 * in place; returns whether it was one. */
bool nr_tcp_unmap(struct sockaddr_storage *ss);

/* Whether a and b are the same host address (IPv4-mapped or not; ports ignored). */
bool nr_tcp_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b);

/* Fill buf with random bytes (getrandom, falling back to /dev/urandom). */
int nr_tcp_random(void *buf, size_t len, struct nr_error *err);

#endif
