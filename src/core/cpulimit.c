/* The CPU cgroup of this process (nr/cpulimit.h). */
#include "nr/cpulimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first line of `dir/name` into buf; 0, or -1 when the file cannot be read. */
static int read_line(const char *dir, const char *name, char *buf, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
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

int nr_cpu_limit_read_at(const char *proc_cgroup, const char *sys_root, struct nr_cpu_limit *out)
{
    memset(out, 0, sizeof *out);
    out->quota_us = -1, out->period_us = 100000;
    FILE *f = fopen(proc_cgroup, "r");
    if (!f)
        return -1;
    char line[1024], v1[NR_CGROUP_MAX] = "", v2[NR_CGROUP_MAX] = "";
    int have_v1 = 0, have_v2 = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0';
        if (!have_v1 && names_cpu(c1 + 1))
            snprintf(v1, sizeof v1, "%s", c2 + 1), have_v1 = 1;
        else if (strcmp(line, "0") == 0 && c1[1] == '\0')
            snprintf(v2, sizeof v2, "%s", c2 + 1), have_v2 = 1;
    }
    fclose(f);
    if (!have_v1 && !have_v2)
        return -1;
    char dir[512], buf[256];
    snprintf(out->cgroup, sizeof out->cgroup, "%s", have_v1 ? v1 : v2);
    snprintf(dir, sizeof dir, "%s%s%s", sys_root, have_v1 ? "/cpu" : "", out->cgroup);
    if (read_line(dir, "cpu.cfs_quota_us", buf, sizeof buf) == 0)
        out->quota_us = strtoll(buf, NULL, 10);
    if (read_line(dir, "cpu.cfs_period_us", buf, sizeof buf) == 0)
        out->period_us = strtoll(buf, NULL, 10);
    if (read_line(dir, "cpu.max", buf, sizeof buf) == 0) {
        char quota[64] = "";
        long long period = 0;
        if (sscanf(buf, "%63s %lld", quota, &period) == 2) {
            out->quota_us = strcmp(quota, "max") == 0 ? -1 : strtoll(quota, NULL, 10);
            out->period_us = period;
        }
    }
    char path[600];
    snprintf(path, sizeof path, "%s/cpu.stat", dir);
    if ((f = fopen(path, "r")) != NULL) {
        char key[64];
        unsigned long long value;
        while (fscanf(f, "%63s %llu", key, &value) == 2) {
            if (strcmp(key, "throttled_time") == 0)
                out->throttled_ns = value;
            else if (strcmp(key, "throttled_usec") == 0)
                out->throttled_ns = value * 1000ULL;
        }
        fclose(f);
    }
    out->ok = 1;
    return 0;
}

int nr_cpu_limit_read(struct nr_cpu_limit *out)
{
    return nr_cpu_limit_read_at("/proc/self/cgroup", "/sys/fs/cgroup", out);
}
