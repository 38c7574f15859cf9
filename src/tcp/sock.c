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
        int rc = family == AF_INET6 ? nr__setint(fd, IPPROTO_IPV6, IPV6_TCLASS, o->tos)
                                    : nr__setint(fd, IPPROTO_IP, IP_TOS, o->tos);
        if (rc != 0)
            return nr_error_sys(err, NR_E_NET, "setsockopt(%s, 0x%02x)", family == AF_INET6 ? "IPV6_TCLASS" : "IP_TOS",
                                o->tos);
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
    if ((family == AF_INET6 ? nr__getint(fd, IPPROTO_IPV6, IPV6_TCLASS, &v) : nr__getint(fd, IPPROTO_IP, IP_TOS, &v)) == 0)
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

int nr_tcp_listen(const char *bind_addr, uint16_t port, const struct nr_tcp_sockopts *opts, int backlog,
                  uint16_t *bound_port, int *family, struct nr_error *err)
{
    char service[16];
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = bind_addr ? AF_UNSPEC : AF_INET6;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(service, sizeof service, "%u", (unsigned)port);
    int gai = getaddrinfo(bind_addr, service, &hints, &res);
    if (gai != 0 && !bind_addr) { /* no IPv6 on this host: plain IPv4 */
        hints.ai_family = AF_INET;
        gai = getaddrinfo(NULL, service, &hints, &res);
    }
    if (gai != 0)
        return nr_error_set(err, NR_E_NET, "cannot resolve bind address '%s': %s", bind_addr ? bind_addr : "*",
                            gai_strerror(gai));
    int fd = -1, last_errno = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            last_errno = errno;
            continue;
        }
        nr__setint(fd, SOL_SOCKET, SO_REUSEADDR, 1);
        if (ai->ai_family == AF_INET6 && !bind_addr)
            nr__setint(fd, IPPROTO_IPV6, IPV6_V6ONLY, 0);
        struct nr_error opt_err;
        nr_error_clear(&opt_err);
        if (opts && nr_tcp_apply_opts(fd, ai->ai_family, opts, &opt_err) < 0) {
            close(fd);
            freeaddrinfo(res);
            if (err)
                *err = opt_err;
            return opt_err.code;
        }
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, backlog) == 0) {
            struct sockaddr_storage ss;
            socklen_t sl = sizeof ss;
            getsockname(fd, (struct sockaddr *)&ss, &sl);
            *bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                          : ((struct sockaddr_in *)&ss)->sin_port);
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
    return nr_error_sys(err, NR_E_NET, "cannot listen on %s port %u", bind_addr ? bind_addr : "*", (unsigned)port);
}

int nr_tcp_accept(int lfd, double timeout_s, struct sockaddr_storage *peer, struct nr_error *err)
{
    int w = nr__wait(lfd, POLLIN, timeout_s > 0 ? nr_now_s() + timeout_s : 0);
    if (w == 0)
        return nr_error_set(err, NR_E_TIMEOUT, "no connection within %.0f s", timeout_s);
    if (w < 0)
        return nr_error_sys(err, NR_E_NET, "poll on listening socket");
    socklen_t sl = sizeof *peer;
    int fd = accept4(lfd, (struct sockaddr *)peer, &sl, SOCK_CLOEXEC);
    if (fd < 0)
        return nr_error_sys(err, NR_E_NET, "accept");
    return fd;
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
