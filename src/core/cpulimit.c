/* The CPU cgroup of this process (nr/cpulimit.h). */
#include "nr/cpulimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first line of `dir/name` into buf; 0, or -1 when the file cannot be read. */
static int read_line(const char *dir, const char *name, char *buf, size_t len)
{
    char path[512];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return -1;
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int rc = fgets(buf, (int)len, f) ? 0 : -1;
    fclose(f);
    return rc;
}

/* Whether the comma-separated controller list `list` names `cpu` itself (not only cpuacct or cpuset). */
static int names_cpu(const char *list)
{
    size_t n = strlen(list);
    for (const char *p = list; p < list + n;) {
        size_t k = strcspn(p, ",");
        if (k == 3 && strncmp(p, "cpu", 3) == 0)
            return 1;
        p += k + 1;
    }
    return 0;
}

/* The quota of the group in dir: 1 and *quota, *period when it has one, 0 when it has none, -1 when its files
 * cannot be read. v1: cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us, in every group; v2: cpu.max ("max":
 * none), only where the parent enabled the cpu controller (absent: no quota at this level). */
static int group_quota(const char *dir, int v1, long long *quota, long long *period)
{
    char buf[128], q[64] = "";
    if (v1) {
        if (read_line(dir, "cpu.cfs_quota_us", buf, sizeof buf) != 0 || sscanf(buf, "%lld", quota) != 1)
            return -1;
        if (*quota <= 0)
            return 0;
        if (read_line(dir, "cpu.cfs_period_us", buf, sizeof buf) != 0 || sscanf(buf, "%lld", period) != 1 ||
            *period <= 0)
            return -1;
        return 1;
    }
    if (read_line(dir, "cgroup.controllers", buf, sizeof buf) != 0)
        return -1; /* every v2 group has it: no such group here */
    if (read_line(dir, "cpu.max", buf, sizeof buf) != 0)
        return 0;
    if (sscanf(buf, "%63s %lld", q, period) != 2 || *period <= 0)
        return -1;
    if (strcmp(q, "max") == 0)
        return 0;
    *quota = strtoll(q, NULL, 10);
    return *quota > 0 ? 1 : -1;
}

static uint64_t throttled_ns(const char *dir)
{
    char path[600], key[64];
    unsigned long long value, ns = 0;
    snprintf(path, sizeof path, "%s/cpu.stat", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    while (fscanf(f, "%63s %llu", key, &value) == 2) {
        if (strcmp(key, "throttled_time") == 0)
            ns = value;
        else if (strcmp(key, "throttled_usec") == 0)
            ns = value * 1000ULL;
    }
    fclose(f);
    return ns;
}

int nr_cpu_limit_read_at(const char *proc_cgroup, const char *sys_root, struct nr_cpu_limit *out)
{
    memset(out, 0, sizeof *out);
    out->quota_us = -1, out->period_us = 100000;
    FILE *f = fopen(proc_cgroup, "r");
    if (!f)
        return -1;
    char line[1024], v1[NR_CGROUP_MAX] = "", v2[NR_CGROUP_MAX] = "";
    int have_v1 = 0, have_v2 = 0, cut = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0';
        if (!have_v1 && names_cpu(c1 + 1))
            cut |= (size_t)snprintf(v1, sizeof v1, "%s", c2 + 1) >= sizeof v1, have_v1 = 1;
        else if (strcmp(line, "0") == 0 && c1[1] == '\0')
            cut |= (size_t)snprintf(v2, sizeof v2, "%s", c2 + 1) >= sizeof v2, have_v2 = 1;
    }
    fclose(f);
    if ((!have_v1 && !have_v2) || cut)
        return -1;
    snprintf(out->cgroup, sizeof out->cgroup, "%s", have_v1 ? v1 : v2);
    if (out->cgroup[0] != '/')
        return -1;
    /* From the group up to the root of the hierarchy: the smallest quota in CPUs (quota / period) is the limit. */
    char path[NR_CGROUP_MAX], dir[512], limit_dir[512] = "";
    snprintf(path, sizeof path, "%s", out->cgroup);
    for (;;) {
        long long quota = -1, period = 0;
        if ((size_t)snprintf(dir, sizeof dir, "%s%s%s", sys_root, have_v1 ? "/cpu" : "", path) >= sizeof dir)
            return -1;
        int rc = group_quota(dir, have_v1, &quota, &period);
        if (rc < 0)
            return -1; /* a level we cannot read: the hierarchy is not where the path says (v1 without a cgroup
                          namespace shows the host's path), the limit is unknown */
        if (rc > 0 && (out->quota_us < 0 || (double)quota / (double)period <
                                                (double)out->quota_us / (double)out->period_us)) {
            out->quota_us = quota, out->period_us = period;
            snprintf(out->limit_cgroup, sizeof out->limit_cgroup, "%s", path);
            snprintf(limit_dir, sizeof limit_dir, "%s", dir);
        }
        char *slash = strrchr(path, '/');
        if (slash == path && path[1] == '\0')
            break;
        if (slash == path)
            slash[1] = '\0'; /* "/a" -> "/" */
        else
            *slash = '\0';
    }
    /* Throttling by the group that sets the limit (a parent's counts its whole subtree), else by the group itself. */
    if (!limit_dir[0] &&
        (size_t)snprintf(limit_dir, sizeof limit_dir, "%s%s%s", sys_root, have_v1 ? "/cpu" : "", out->cgroup) >=
            sizeof limit_dir)
        return -1;
    out->throttled_ns = throttled_ns(limit_dir);
    out->ok = 1;
    return 0;
}

int nr_cpu_limit_read(struct nr_cpu_limit *out)
{
    return nr_cpu_limit_read_at("/proc/self/cgroup", "/sys/fs/cgroup", out);
}
