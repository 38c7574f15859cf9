/* Bounded TCP between MPI ranks: see nr_net.h. */
#include "nr_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nr_mpi.h"

int nr_net_iface_ipv4(const char *iface, const char *host, uint32_t *addr, char *name, size_t name_len,
                      struct nr_error *err)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) < 0)
        return nr_error_sys(err, NR_E_SYS, "getifaddrs");
    bool seen = false, found = false;
    for (struct ifaddrs *a = ifs; a && !found; a = a->ifa_next) {
        if (!a->ifa_name || (iface ? strcmp(a->ifa_name, iface) != 0 : !(a->ifa_flags & IFF_LOOPBACK)))
            continue;
        seen = true;
        if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET) {
            *addr = ((struct sockaddr_in *)(void *)a->ifa_addr)->sin_addr.s_addr;
            if (name)
                snprintf(name, name_len, "%s", a->ifa_name);
            found = true;
        }
    }
    freeifaddrs(ifs);
    if (found)
        return NR_OK;
    if (!iface)
        return nr_error_set(err, NR_E_NET, "%s: no loopback interface with an IPv4 address", host);
    return nr_error_set(err, NR_E_NET, seen ? "%s: interface '%s' has no IPv4 address"
                                            : "%s: no interface '%s' on this node", host, iface);
}

bool nr_net_again(void)
{
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

int nr_net_connect_from(uint32_t from, uint32_t to, uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in me, peer;
    memset(&me, 0, sizeof me);
    me.sin_family = AF_INET, me.sin_addr.s_addr = from;
    memset(&peer, 0, sizeof peer);
    peer.sin_family = AF_INET, peer.sin_addr.s_addr = to, peer.sin_port = htons(port);
    if (bind(fd, (struct sockaddr *)&me, sizeof me) < 0 ||
        (connect(fd, (struct sockaddr *)&peer, sizeof peer) < 0 && errno != EINPROGRESS)) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

void nr_net_close_abort(int fd)
{
    struct linger l = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
}

int nr_net_connected(int fd)
{
    struct pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, 0) <= 0)
        return 0;
    int e = 0;
    socklen_t l = sizeof e;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) < 0)
        return -errno;
    return e ? -e : 1;
}

/* The poll timeout towards a deadline: at most 100 ms, so an idle hook runs often enough. */
static int nr__wait_ms(double left, nr_net_idle_fn idle, void *ctx)
{
    int ms = left > 0.1 ? 100 : (int)(left * 1000) + 1;
    return idle ? idle(ctx, ms) : ms;
}

int nr_net_await_connect(int fd, double deadline, nr_net_idle_fn idle, void *ctx)
{
    int r;
    while ((r = nr_net_connected(fd)) == 0) {
        double left = deadline - MPI_Wtime();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {fd, POLLOUT, 0};
        poll(&p, 1, nr__wait_ms(left < 0.01 ? left : 0.01, idle, ctx));
    }
    return r;
}

int nr_net_duplex(int fd, const void *out, size_t out_len, void *in, size_t in_len, double deadline,
                  nr_net_idle_fn idle, void *ctx, char *why, size_t why_len)
{
    const unsigned char *o = out;
    unsigned char *i = in;
    size_t sent = 0, got = 0;
    while (sent < out_len || got < in_len) {
        bool moved = false;
        if (sent < out_len) {
            ssize_t n = send(fd, o + sent, out_len - sent, MSG_NOSIGNAL);
            if (n > 0)
                sent += (size_t)n, moved = true;
            else if (!nr_net_again()) {
                snprintf(why, why_len, "%s", strerror(errno));
                return -1;
            }
        }
        if (got < in_len) {
            ssize_t n = recv(fd, i + got, in_len - got, 0);
            if (n > 0)
                got += (size_t)n, moved = true;
            else if (n == 0) {
                snprintf(why, why_len, "connection closed");
                return -1;
            } else if (!nr_net_again()) {
                snprintf(why, why_len, "%s", strerror(errno));
                return -1;
            }
        }
        if (moved)
            continue;
        double left = deadline - MPI_Wtime();
        if (left <= 0) {
            snprintf(why, why_len, "timed out");
            return -1;
        }
        struct pollfd p = {fd, (short)((sent < out_len ? POLLOUT : 0) | (got < in_len ? POLLIN : 0)), 0};
        poll(&p, 1, nr__wait_ms(left, idle, ctx));
    }
    return 0;
}
