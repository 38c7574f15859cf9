/* Monotonic clock, sleeping and getrusage process times (see nr/timer.h). */
#include "nr/timer.h"

#include <errno.h>
#include <sys/resource.h>
#include <time.h>

#include "nr/error.h"

uint64_t nr_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double nr_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void nr_sleep_s(double seconds)
{
    if (!(seconds > 0))
        return;
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int nr_cpu_times_now(struct nr_cpu_times *t)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return NR_E_SYS;
    t->user_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
    t->sys_s = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    return NR_OK;
}

struct nr_cpu_times nr_cpu_times_diff(struct nr_cpu_times after, struct nr_cpu_times before)
{
    struct nr_cpu_times d = {after.user_s - before.user_s, after.sys_s - before.sys_s};
    return d;
}
