/* The CPU cgroup a process runs in: its path, CPU quota and how long the quota has throttled it.
 *
 * A stream between two processes is as fast as the CPU lets it be. When every rank of a job runs under one and the
 * same quota (a container's CPU limit, a machine capped for a test) and that quota throttles them, the streams read
 * what the quota left them at that moment, and comparing one with another compares moments, not links. A kernel
 * records this reading at its start and end so that its caller can tell (netregress.cpulimit in the ReFrame
 * library). Read from /proc/self/cgroup: the cgroup v1 `cpu` controller's group, else the v2 group; its
 * cpu.cfs_quota_us / cpu.cfs_period_us (v1) or cpu.max (v2), and throttled_time (ns, v1) or throttled_usec (v2) of
 * its cpu.stat.
 */
#ifndef NR_CPULIMIT_H
#define NR_CPULIMIT_H

#include <stdint.h>

#define NR_CGROUP_MAX 160

struct nr_cpu_limit {
    int32_t ok;                  /* 1: the group was found; the fields below are valid */
    char cgroup[NR_CGROUP_MAX];  /* its path below the controller's mount ("/" at the root) */
    int64_t quota_us;            /* -1: no quota */
    int64_t period_us;
    uint64_t throttled_ns;       /* cumulative; 0 where the kernel does not count it */
};

/* Read this process's CPU cgroup. Returns 0 and fills `out` (ok = 1), or -1 (ok = 0) when /proc/self/cgroup has
 * no cpu controller or no v2 group. */
int nr_cpu_limit_read(struct nr_cpu_limit *out);

/* The same from another root, for the tests: `proc_cgroup` stands for /proc/self/cgroup and `sys_root` for
 * /sys/fs/cgroup. */
int nr_cpu_limit_read_at(const char *proc_cgroup, const char *sys_root, struct nr_cpu_limit *out);

#endif
