/* TCP socket helpers (see sock.h). */
#include "sock.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "nr/error.h"
#include "nr/timer.h"

static int nr__setint(int fd, int level, int name, int value)
{
    return setsockopt(fd, level, name, &value, sizeof value);
}

int nr_tcp_apply_opts(int fd, int family, const struct nr_tcp_sockopts *o, struct nr_error *err)
{
    if (o->buffer_bytes) {
        if (nr__setint(fd, SOL_SOCKET, SO_SNDBUF, (int)o->buffer_bytes) != 0)
            return nr_error_sys(err, NR_E_NET, "setsockopt(SO_SNDBUF, %u)", o->buffer_bytes);
        if (nr__setint(fd, SOL_SOCKET, SO_RCVBUF, (int)o->buffer_bytes) != 0)
            return nr_error_sys(err, NR_E_NET, "setsockopt(SO_RCVBUF, %u)", o->buffer_bytes);
    }
    /* An MSS the system does not accept is ignored, as in the seed (the effective MSS is reported either way). */
    if (o->mss_bytes && nr__setint(fd, IPPROTO_TCP, TCP_MAXSEG, (int)o->mss_bytes) != 0 && errno != EINVAL)
        return nr_error_sys(err, NR_E_NET, "setsockopt(TCP_MAXSEG, %u)", o->mss_bytes);
    if (o->tos) {
        if (family == AF_INET6 && nr__setint(fd, IPPROTO_IPV6, IPV6_TCLASS, o->tos) != 0)
            return nr_error_sys(err, NR_E_NET, "setsockopt(IPV6_TCLASS, 0x%02x)", o->tos);
        /* IPv4 packets of an IPv6 socket (an IPv4 peer of a dual-stack socket) take IP_TOS, not the traffic class. */
        if (nr__setint(fd, IPPROTO_IP, IP_TOS, o->tos) != 0 && family != AF_INET6)
            return nr_error_sys(err, NR_E_NET, "setsockopt(IP_TOS, 0x%02x)", o->tos);
    }
    if (o->nodelay && nr__setint(fd, IPPROTO_TCP, TCP_NODELAY, 1) != 0)
        return nr_error_sys(err, NR_E_NET, "setsockopt(TCP_NODELAY)");
    if (o->cork && nr__setint(fd, IPPROTO_TCP, TCP_CORK, 1) != 0)
        return nr_error_sys(err, NR_E_NET, "setsockopt(TCP_CORK)");
    return NR_OK;
}

static int nr__getint(int fd, int level, int name, int *value)
{
    socklen_t len = sizeof *value;
    *value = 0;
    return getsockopt(fd, level, name, value, &len);
}

int nr_tcp_sockinfo_get(int fd, int family, struct nr_tcp_sockinfo *out, struct nr_error *err)
{
    int v;
    memset(out, 0, sizeof *out);
    if (nr__getint(fd, SOL_SOCKET, SO_RCVBUF, &v) != 0)
        return nr_error_sys(err, NR_E_NET, "getsockopt(SO_RCVBUF)");
    out->rcvbuf_bytes = (uint32_t)v;
    if (nr__getint(fd, SOL_SOCKET, SO_SNDBUF, &v) != 0)
        return nr_error_sys(err, NR_E_NET, "getsockopt(SO_SNDBUF)");
    out->sndbuf_bytes = (uint32_t)v;
    if (nr__getint(fd, IPPROTO_TCP, TCP_MAXSEG, &v) == 0)
        out->mss_bytes = (uint32_t)v;
    if (nr__getint(fd, IPPROTO_TCP, TCP_NODELAY, &v) == 0)
        out->nodelay = v != 0;
    if (nr__getint(fd, IPPROTO_TCP, TCP_CORK, &v) == 0)
        out->cork = v != 0;
    /* What the packets carry: IP_TOS for IPv4, also for an IPv4 peer of an IPv6 socket (v4-mapped). */
    struct sockaddr_storage peer;
    socklen_t sl = sizeof peer;
    bool v4 = family != AF_INET6 ||
              (getpeername(fd, (struct sockaddr *)&peer, &sl) == 0 && nr_tcp_unmap(&peer));
    if ((v4 ? nr__getint(fd, IPPROTO_IP, IP_TOS, &v) : nr__getint(fd, IPPROTO_IPV6, IPV6_TCLASS, &v)) == 0)
        out->tos = (uint8_t)v;
    int fl = fcntl(fd, F_GETFL);
    out->blocking = fl >= 0 && !(fl & O_NONBLOCK);
    return NR_OK;
}

int nr_tcp_set_blocking(int fd, bool blocking, struct nr_error *err)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, blocking ? (fl & ~O_NONBLOCK) : (fl | O_NONBLOCK)) != 0)
        return nr_error_sys(err, NR_E_SYS, "fcntl(O_NONBLOCK)");
    return NR_OK;
}

/* Wait for events on fd until the monotonic deadline (0 = forever). Returns 1 ready, 0 timeout, -1 error. */
static int nr__wait(int fd, short events, double deadline_s)
{
    for (;;) {
        int ms = -1;
        if (deadline_s > 0) {
            double left = deadline_s - nr_now_s();
            if (left <= 0)
                return 0;
            ms = (int)(left * 1000.0) + 1;
        }
        struct pollfd p = {fd, events, 0};
        int rc = poll(&p, 1, ms);
        if (rc > 0)
            return 1;
        if (rc == 0)
            continue; /* re-check the deadline */
        if (errno != EINTR)
            return -1;
    }
}

int nr_tcp_connect(const char *host, uint16_t port, const struct nr_tcp_sockopts *opts, double timeout_s,
                   int *family, struct nr_error *err)
{
    char service[16];
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(service, sizeof service, "%u", (unsigned)port);
    int gai = getaddrinfo(host, service, &hints, &res);
    if (gai != 0)
        return nr_error_set(err, NR_E_NET, "cannot resolve host '%s': %s", host, gai_strerror(gai));
    int fd = -1, last_errno = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            last_errno = errno;
            continue;
        }
        struct nr_error opt_err;
        nr_error_clear(&opt_err);
        if (opts && nr_tcp_apply_opts(fd, ai->ai_family, opts, &opt_err) < 0) {
            close(fd);
            freeaddrinfo(res);
            if (err)
                *err = opt_err;
            return opt_err.code;
        }
        /* Non-blocking connect so the attempt can time out. */
        int fl = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
        int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            int w = nr__wait(fd, POLLOUT, nr_now_s() + timeout_s);
            if (w == 1) {
                int soerr = 0;
                socklen_t sl = sizeof soerr;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
                rc = soerr ? -1 : 0;
                errno = soerr;
            } else {
                rc = -1;
                errno = w == 0 ? ETIMEDOUT : errno;
            }
        }
        if (rc == 0) {
            fcntl(fd, F_SETFL, fl);
            *family = ai->ai_family;
            freeaddrinfo(res);
            return fd;
        }
        last_errno = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    errno = last_errno;
    return nr_error_sys(err, last_errno == ETIMEDOUT ? NR_E_TIMEOUT : NR_E_NET, "cannot connect to %s port %u", host, (unsigned)port);
}

/* One listening socket on addr:port (dual: an IPv6 wildcard that takes IPv4 too). Returns the fd, or -1 with errno
 * set. */
static int nr__listen_one(const struct sockaddr *addr, socklen_t len, bool dual, const struct nr_tcp_sockopts *opts,
                          int backlog, struct nr_error *opt_err)
{
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    nr__setint(fd, SOL_SOCKET, SO_REUSEADDR, 1);
    /* Set either way, whatever net.ipv6.bindv6only says: a wildcard takes both families, an IPv6 address only
     * its own (so that the IPv4 wildcard can share the port). */
    if (addr->sa_family == AF_INET6)
        nr__setint(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual ? 0 : 1);
    if (opts && nr_tcp_apply_opts(fd, addr->sa_family, opts, opt_err) < 0) {
        close(fd);
        errno = 0;
        return -1;
    }
    if (bind(fd, addr, len) == 0 && listen(fd, backlog) == 0)
        return fd;
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

static uint16_t nr__port_of(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return 0;
    return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                          : ((struct sockaddr_in *)&ss)->sin_port);
}

static struct addrinfo *nr__resolve_passive(const char *addr, uint16_t port, struct nr_error *err)
{
    char service[16];
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(service, sizeof service, "%u", (unsigned)port);
    int gai = getaddrinfo(addr, service, &hints, &res);
    if (gai != 0) {
        nr_error_set(err, NR_E_NET, "cannot resolve bind address '%s': %s", addr, gai_strerror(gai));
        return NULL;
    }
    return res;
}

int nr_tcp_listen(const char *bind_addr, uint16_t port, const struct nr_tcp_sockopts *opts, int backlog,
                  uint16_t *bound_port, int *family, struct nr_error *err)
{
    struct addrinfo *res = nr__resolve_passive(bind_addr, port, err);
    if (!res)
        return NR_E_NET;
    int last_errno = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        struct nr_error opt_err;
        nr_error_clear(&opt_err);
        int fd = nr__listen_one(ai->ai_addr, ai->ai_addrlen, false, opts, backlog, &opt_err);
        if (fd < 0 && opt_err.code) {
            freeaddrinfo(res);
            if (err)
                *err = opt_err;
            return opt_err.code;
        }
        if (fd >= 0) {
            *bound_port = nr__port_of(fd);
            *family = ai->ai_family;
            freeaddrinfo(res);
            return fd;
        }
        last_errno = errno;
    }
    freeaddrinfo(res);
    errno = last_errno;
    return nr_error_sys(err, NR_E_NET, "cannot listen on %s port %u", bind_addr, (unsigned)port);
}

/* The wildcard of a family (an IPv6 one takes IPv4 too). */
static bool nr__is_wildcard(const struct sockaddr *a)
{
    if (a->sa_family == AF_INET6)
        return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)a)->sin6_addr);
    return a->sa_family == AF_INET && ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
}

/* An address to listen on. */
struct nr__bind {
    struct sockaddr_storage addr;
    socklen_t len;
};

/* Add the addresses of name (numeric or not) to b[*n], at most max, without duplicates. */
static int nr__add_binds(const char *name, struct nr__bind *b, int *n, int max, struct nr_error *err)
{
    struct addrinfo *res = nr__resolve_passive(name, 0, err);
    if (!res)
        return NR_E_NET;
    for (const struct addrinfo *ai = res; ai && *n < max; ai = ai->ai_next) {
        if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) || ai->ai_addrlen > sizeof b->addr)
            continue;
        bool seen = false;
        for (int k = 0; k < *n && !seen; k++)
            seen = b[k].len == ai->ai_addrlen && memcmp(&b[k].addr, ai->ai_addr, ai->ai_addrlen) == 0;
        if (seen)
            continue;
        memset(&b[*n].addr, 0, sizeof b[*n].addr);
        memcpy(&b[*n].addr, ai->ai_addr, ai->ai_addrlen);
        b[(*n)++].len = ai->ai_addrlen;
    }
    freeaddrinfo(res);
    return NR_OK;
}

/* One attempt of nr_tcp_listen_set on a given port (0: the first socket picks it). Returns the count of sockets, 0
 * when the port the first socket picked is taken on another address (try again), or a negative NR_E_*. */
static int nr__listen_set_at(const struct nr__bind *b, int nb, uint16_t port, int backlog, int *fds,
                             uint16_t *bound_port, struct nr_error *err)
{
    int n = 0, last_errno = EADDRNOTAVAIL;
    const bool picked = port == 0;
    for (int k = 0; k < nb; k++) {
        struct sockaddr_storage a = b[k].addr;
        if (a.ss_family == AF_INET6)
            ((struct sockaddr_in6 *)&a)->sin6_port = htons(port);
        else
            ((struct sockaddr_in *)&a)->sin_port = htons(port);
        int fd = nr__listen_one((struct sockaddr *)&a, b[k].len, nr__is_wildcard((struct sockaddr *)&a), NULL,
                                backlog, NULL);
        if (fd >= 0) {
            if (port == 0)
                port = nr__port_of(fd);
            fds[n++] = fd;
            continue;
        }
        last_errno = errno;
        if (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL)
            continue; /* an address this host lacks (IPv6 loopback where IPv6 is off): the others serve */
        while (n > 0)
            close(fds[--n]);
        if (errno == EADDRINUSE && picked)
            return 0;
        char host[64];
        errno = last_errno;
        return nr_error_sys(err, NR_E_NET, "cannot listen on %s port %u", nr_tcp_addr_str(&a, host, sizeof host),
                            (unsigned)port);
    }
    if (n == 0) {
        errno = last_errno;
        return nr_error_sys(err, NR_E_NET, "cannot listen on any address");
    }
    *bound_port = port;
    return n;
}

int nr_tcp_listen_set(const char *bind_addr, uint16_t port, int backlog, int *fds, int max, uint16_t *bound_port,
                      struct nr_error *err)
{
    struct nr__bind b[NR_TCP_LISTEN_MAX];
    int nb = 0, rc;
    if (max > NR_TCP_LISTEN_MAX)
        max = NR_TCP_LISTEN_MAX;
    if (bind_addr)
        rc = nr__add_binds(bind_addr, b, &nb, max, err);
    else if ((rc = nr__add_binds("127.0.0.1", b, &nb, max, err)) == 0)
        rc = nr__add_binds("::1", b, &nb, max, err);
    if (rc < 0)
        return rc;
    for (int attempt = 0; attempt < 16; attempt++)
        if ((rc = nr__listen_set_at(b, nb, port, backlog, fds, bound_port, err)) != 0)
            return rc;
    return nr_error_set(err, NR_E_NET, "no port was free on every address of %s", bind_addr ? bind_addr : "loopback");
}

int nr_tcp_write_all(int fd, const void *buf, size_t len, double timeout_s, struct nr_error *err)
{
    const char *p = buf;
    double deadline = nr_now_s() + timeout_s;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return nr_error_sys(err, errno == EPIPE || errno == ECONNRESET ? NR_E_CLOSED : NR_E_NET,
                                "control connection: send");
        int w = nr__wait(fd, POLLOUT, deadline);
        if (w == 0)
            return nr_error_set(err, NR_E_TIMEOUT, "control connection: peer did not accept data within %.0f s",
                                timeout_s);
        if (w < 0)
            return nr_error_sys(err, NR_E_NET, "control connection: poll");
    }
    return NR_OK;
}

int nr_tcp_read_all(int fd, void *buf, size_t len, double timeout_s, struct nr_error *err)
{
    char *p = buf;
    double deadline = nr_now_s() + timeout_s;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0)
            return nr_error_set(err, NR_E_CLOSED, "connection closed by peer");
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return nr_error_sys(err, errno == ECONNRESET ? NR_E_CLOSED : NR_E_NET, "control connection: recv");
        int w = nr__wait(fd, POLLIN, deadline);
        if (w == 0)
            return nr_error_set(err, NR_E_TIMEOUT, "no message from peer within %.0f s", timeout_s);
        if (w < 0)
            return nr_error_sys(err, NR_E_NET, "control connection: poll");
    }
    return NR_OK;
}

const char *nr_tcp_addr_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
    if (ss->ss_family != AF_INET && ss->ss_family != AF_INET6) {
        snprintf(buf, len, "?");
        return buf;
    }
    const void *a = ss->ss_family == AF_INET6 ? (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr
                                              : (const void *)&((const struct sockaddr_in *)ss)->sin_addr;
    if (!inet_ntop(ss->ss_family, a, buf, (socklen_t)len)) {
        snprintf(buf, len, "?");
        return buf;
    }
    /* A link-local IPv6 address is only usable with its interface: keep the scope ("fe80::1%2"). */
    uint32_t scope = ss->ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)ss)->sin6_scope_id : 0;
    size_t n = strlen(buf);
    if (scope && n + 12 < len)
        snprintf(buf + n, len - n, "%%%u", scope);
    return buf;
}

int nr_tcp_random(void *buf, size_t len, struct nr_error *err)
{
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        p += n;
        len -= (size_t)n;
    }
    if (len == 0)
        return NR_OK;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return nr_error_sys(err, NR_E_SYS, "no random source");
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n <= 0) {
            close(fd);
            return nr_error_sys(err, NR_E_SYS, "reading /dev/urandom");
        }
        p += n;
        len -= (size_t)n;
    }
    close(fd);
    return NR_OK;
}

bool nr_tcp_unmap(struct sockaddr_storage *ss)
{
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
    if (ss->ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
        return false;
    struct sockaddr_in s4;
    memset(&s4, 0, sizeof s4);
    s4.sin_family = AF_INET;
    s4.sin_port = s6->sin6_port;
    memcpy(&s4.sin_addr, &s6->sin6_addr.s6_addr[12], 4);
    memset(ss, 0, sizeof *ss);
    memcpy(ss, &s4, sizeof s4);
    return true;
}

bool nr_tcp_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    struct sockaddr_storage x = *a, y = *b;
    nr_tcp_unmap(&x);
    nr_tcp_unmap(&y);
    if (x.ss_family != y.ss_family)
        return false;
    if (x.ss_family == AF_INET)
        return ((struct sockaddr_in *)&x)->sin_addr.s_addr == ((struct sockaddr_in *)&y)->sin_addr.s_addr;
    if (x.ss_family == AF_INET6) {
        const struct sockaddr_in6 *x6 = (struct sockaddr_in6 *)&x, *y6 = (struct sockaddr_in6 *)&y;
        return memcmp(&x6->sin6_addr, &y6->sin6_addr, sizeof x6->sin6_addr) == 0 &&
               x6->sin6_scope_id == y6->sin6_scope_id;
    }
    return false;
}
