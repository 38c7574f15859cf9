/* An LD_PRELOAD library for the loopback tests (never installed): it stalls one send() the way a descheduled
 * process stalls, to show that one slow calibration probe cannot fool nr-tcptest, and it plays a port scanner that
 * reaches the server's data port first, to show that an idle connection there cannot hold up the real one.
 *
 *   NR_STALL=BYTES:SKIP:MS[:COUNT]   the (SKIP+1)-th send() of exactly BYTES bytes, and the COUNT-1 (default 0)
 *                                    after it, sleep MS milliseconds before they send: one stall, or a slow phase.
 *   NR_SCAN=N[:SRC]                  before the N-th TCP connect() of the process, connect one more socket to the
 *                                    same address (from the IPv4 address SRC when given) and leave it open and
 *                                    silent; nr-tcptest's second connect() is its data connection.
 *
 * nr-tcptest's warm-up is one message, so with -m 8k -d 8k and NR_STALL=8192:1:60 the stall lands in the first
 * calibration probe (one 8-KiB message): the case the calibration used to turn into 9 iterations for a 0.5-s
 * target. Any other send() and connect() goes straight through.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

ssize_t send(int fd, const void *buf, size_t len, int flags);
int connect(int fd, const struct sockaddr *addr, socklen_t len);

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    static ssize_t (*real_send)(int, const void *, size_t, int);
    static long seen;
    if (!real_send)
        *(void **)&real_send = dlsym(RTLD_NEXT, "send");
    const char *spec = getenv("NR_STALL");
    unsigned long bytes = 0, skip = 0, ms = 0, count = 1;
    if (spec && sscanf(spec, "%lu:%lu:%lu:%lu", &bytes, &skip, &ms, &count) >= 3 && len == bytes &&
        seen++ >= (long)skip && seen <= (long)(skip + count)) {
        struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return real_send(fd, buf, len, flags);
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    static int (*real_connect)(int, const struct sockaddr *, socklen_t);
    static long seen;
    if (!real_connect)
        *(void **)&real_connect = dlsym(RTLD_NEXT, "connect");
    const char *spec = getenv("NR_SCAN");
    int type = 0;
    socklen_t tl = sizeof type;
    char src[64] = "";
    long nth = 0;
    if (spec && sscanf(spec, "%ld:%63s", &nth, src) >= 1 && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 &&
        type == SOCK_STREAM && ++seen == nth) {
        int scan = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0); /* left open until the process ends */
        struct sockaddr_in from = {.sin_family = AF_INET};
        if (scan >= 0 && src[0] && addr->sa_family == AF_INET && inet_pton(AF_INET, src, &from.sin_addr) == 1)
            bind(scan, (struct sockaddr *)&from, sizeof from);
        if (scan >= 0 && real_connect(scan, addr, len) != 0)
            perror("stall_shim: the scanner's connect");
    }
    return real_connect(fd, addr, len);
}
