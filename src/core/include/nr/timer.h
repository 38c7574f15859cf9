/* Monotonic timers and process times.
 *
 * The measurements of the TCP kernels and the core are taken with CLOCK_MONOTONIC (never gettimeofday, which jumps
 * with NTP); the MPI kernels time their loops with MPI_Wtime, the MPI library's own clock, and use these functions
 * for everything around the loops.
 * Process user/system times come from getrusage(RUSAGE_SELF) and are reported per repetition as in the
 * Hpcbench tables (C-process/S-process User-mode and System-mode columns).
 */
#ifndef NR_TIMER_H
#define NR_TIMER_H

#include <stdint.h>

/* Nanoseconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
uint64_t nr_now_ns(void);

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC), as a double. */
double nr_now_s(void);

/* Sleep for the given number of seconds (restarted on EINTR; <= 0 returns at once). */
void nr_sleep_s(double seconds);

/* User and system CPU time consumed by this process so far. */
struct nr_cpu_times {
    double user_s; /* user mode, seconds */
    double sys_s;  /* system (kernel) mode, seconds */
};

/* Fill *t from getrusage(RUSAGE_SELF). Returns 0 or NR_E_SYS. */
int nr_cpu_times_now(struct nr_cpu_times *t);

/* after - before, component-wise. */
struct nr_cpu_times nr_cpu_times_diff(struct nr_cpu_times after, struct nr_cpu_times before);

#endif
