/* The CPU cgroup a process runs in: its path, CPU quota and how long the quota has throttled it.
 *
 * A stream between two processes is as fast as the CPU lets it be. When every rank of a job runs under one and the
 * same quota (a container's CPU limit, a machine capped for a test) and that quota throttles them, the streams read
 * what the quota left them at that moment, and comparing one with another compares moments, not links. A kernel
 * records this reading at its start and end so that its caller can tell (netregress.cpulimit in the ReFrame
 * library). Read from /proc/self/cgroup: the cgroup v1 `cpu` controller's group, else the v2 group; the quota of
 * that group and of every group above it, cpu.cfs_quota_us / cpu.cfs_period_us (v1) or cpu.max (v2): the limit is
 * the smallest of them in CPUs (a parent's quota caps its whole subtree); and throttled_time (ns, v1) or
 * throttled_usec (v2) of the cpu.stat of the group that sets the limit.
 *
 * Unknown is not "no quota": when a level's files cannot be read (no cgroup file system there; cgroup v1 without a
 * cgroup namespace, whose /proc/self/cgroup names the host's path while the container mounts its own group) the
 * reading fails (ok = 0) instead of reporting no quota.
 */
#ifndef NR_CPULIMIT_H
#define NR_CPULIMIT_H

#include <stdint.h>

#define NR_CGROUP_MAX 160

struct nr_cpu_limit {
    int32_t ok;                        /* 1: the group and every level above it were read: the fields are valid;
                                          0: unknown */
    char cgroup[NR_CGROUP_MAX];        /* its path below the controller's mount ("/" at the root) */
    char limit_cgroup[NR_CGROUP_MAX];  /* the group on that path whose quota is the limit ("" when none is) */
    int64_t quota_us;                  /* the limit: -1: no quota on the whole path */
    int64_t period_us;
    uint64_t throttled_ns;             /* cumulative, of limit_cgroup (else of cgroup); 0 where not counted */
};

/* Read this process's CPU cgroup. Returns 0 and fills `out` (ok = 1), or -1 (ok = 0: unknown) when
 * /proc/self/cgroup has no cpu controller or no v2 group, or a level of the group's path cannot be read. */
int nr_cpu_limit_read(struct nr_cpu_limit *out);

/* The same from another root, for the tests: `proc_cgroup` stands for /proc/self/cgroup and `sys_root` for
 * /sys/fs/cgroup. */
int nr_cpu_limit_read_at(const char *proc_cgroup, const char *sys_root, struct nr_cpu_limit *out);

#endif
