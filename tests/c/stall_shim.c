/* An LD_PRELOAD library for the loopback tests (never installed): it stalls one send() the way a descheduled
 * process stalls, to show that one slow calibration probe cannot fool nr-tcptest.
 *
 *   NR_STALL=BYTES:SKIP:MS[:COUNT]   the (SKIP+1)-th send() of exactly BYTES bytes, and the COUNT-1 (default 0)
 *                                    after it, sleep MS milliseconds before they send: one stall, or a slow phase.
 *
 * nr-tcptest's warm-up is one message, so with -m 8k -d 8k and NR_STALL=8192:1:60 the stall lands in the first
 * calibration probe (one 8-KiB message): the case the calibration used to turn into 9 iterations for a 0.5-s
 * target. Any other send() goes straight through.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

ssize_t send(int fd, const void *buf, size_t len, int flags);

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
