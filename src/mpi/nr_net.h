/* Bounded TCP between MPI ranks, shared by nr-linkmap's TCP transport and nr-mpitest's --duet tcp yardstick: the
 * IPv4 address of an interface (getifaddrs), non-blocking connections from a chosen local address, and reads and
 * writes that end by a deadline on MPI_Wtime's clock, so no rank waits on a socket forever.
 *
 * A wait loop calls the caller's idle hook before each poll with the timeout it means to use; the hook may do work
 * and returns the timeout to poll with. nr-linkmap tests its control sends there: MPI moves a message only while
 * its sender calls MPI.
 */
#ifndef NR_NET_H
#define NR_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nr_error;

typedef int (*nr_net_idle_fn)(void *ctx, int poll_ms);

/* The IPv4 address (network order) of interface iface, or with iface NULL of the loopback interface (its name
 * copied to name when name is not NULL). host names the node in the error: "HOST: no interface 'eth9' on this
 * node" (NR_E_NET). */
int nr_net_iface_ipv4(const char *iface, const char *host, uint32_t *addr, char *name, size_t name_len,
                      struct nr_error *err);

/* errno says the call would block or was interrupted: try again. */
bool nr_net_again(void);

/* A non-blocking connection from local address `from` to to:port (network order addresses, port in host order):
 * the fd, or -errno. */
int nr_net_connect_from(uint32_t from, uint32_t to, uint16_t port);

/* Close a connection that failed with a reset (SO_LINGER 0), so the other side cannot take it for a clean end. */
void nr_net_close_abort(int fd);

/* 1 connected, 0 not yet, -errno failed. */
int nr_net_connected(int fd);

/* Wait for a connection started by nr_net_connect_from: 1 connected, -errno failed, -ETIMEDOUT by the deadline. */
int nr_net_await_connect(int fd, double deadline, nr_net_idle_fn idle, void *ctx);

/* Send out_len bytes from out and receive in_len bytes into in at the same time (either may be 0) on a
 * non-blocking socket, by the deadline: 0, or -1 with why set ("timed out", "connection closed", strerror). */
int nr_net_duplex(int fd, const void *out, size_t out_len, void *in, size_t in_len, double deadline,
                  nr_net_idle_fn idle, void *ctx, char *why, size_t why_len);

#endif
