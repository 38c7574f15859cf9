/* Unit tests of the cgroup reader (nr/cpulimit.h) on fake cgroup trees in a temporary directory: v1 and v2, the
 * smallest quota along the group's path, and "unknown" (not "no quota") where a level cannot be read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "nr/core.h"

static char g_root[64];
static char g_proc[128];

/* Write text to root/rel, making the directories on the way. */
static void put(const char *rel, const char *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", g_root, rel);
    for (char *p = path + strlen(g_root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0700);
            *p = '/';
        }
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* A fresh tree (root/cgroup stands for /proc/self/cgroup, root for /sys/fs/cgroup). */
static void tree(const char *proc_cgroup)
{
    if (g_root[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
        CHECK(system(cmd) == 0);
    }
    snprintf(g_root, sizeof g_root, "/tmp/nr-cpulimit-XXXXXX");
    CHECK(mkdtemp(g_root) != NULL);
    snprintf(g_proc, sizeof g_proc, "%s/cgroup", g_root);
    put("cgroup", proc_cgroup);
}

static void done(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    CHECK(system(cmd) == 0);
    g_root[0] = '\0';
}

/* A v1 group of the cpu hierarchy: quota (-1: none) and period. */
static void v1_group(const char *path, long quota, long period)
{
    char rel[300], text[32];
    snprintf(rel, sizeof rel, "cpu%s/cpu.cfs_quota_us", path);
    snprintf(text, sizeof text, "%ld\n", quota);
    put(rel, text);
    snprintf(rel, sizeof rel, "cpu%s/cpu.cfs_period_us", path);
    snprintf(text, sizeof text, "%ld\n", period);
    put(rel, text);
}

/* A v2 group: cpu_max NULL when the parent did not enable the cpu controller (no cpu.max). */
static void v2_group(const char *path, const char *cpu_max)
{
    char rel[300];
    snprintf(rel, sizeof rel, ".%s/cgroup.controllers", path);
    put(rel, cpu_max ? "cpu io memory\n" : "io memory\n");
    if (cpu_max) {
        snprintf(rel, sizeof rel, ".%s/cpu.max", path);
        put(rel, cpu_max);
    }
}

static void test_v1(void)
{
    struct nr_cpu_limit c;
    /* The group of the controller list naming cpu (cpuacct or cpuset alone do not). */
    tree("3:cpuset:/\n2:cpuacct:/x\n1:cpu,cpuacct:/slow-7\n0::/\n");
    v1_group("", -1, 100000);
    v1_group("/slow-7", 50000, 100000);
    put("cpu/slow-7/cpu.stat", "nr_periods 10\nnr_throttled 4\nthrottled_time 123456789\n");
    CHECK(nr_cpu_limit_read_at(g_proc, g_root, &c) == 0 && c.ok == 1);
    CHECK_STR(c.cgroup, "/slow-7");
    CHECK_STR(c.limit_cgroup, "/slow-7");
    CHECK(c.quota_us == 50000 && c.period_us == 100000 && c.throttled_ns == 123456789ULL);
    /* No quota anywhere: known to be none. */
    v1_group("/slow-7", -1, 100000);
    CHECK(nr_cpu_limit_read_at(g_proc, g_root, &c) == 0 && c.ok == 1 && c.quota_us == -1);
    CHECK_STR(c.limit_cgroup, "");
    CHECK(c.throttled_ns == 123456789ULL); /* the group's own counter when no level limits it */
    done();
}

static void test_v2(void)
{
    struct nr_cpu_limit c;
    tree("0::/job\n");
    v2_group("", NULL);                     /* the root never has cpu.max */
    v2_group("/job", "max 100000\n");
    put("job/cpu.stat", "usage_usec 5\nthrottled_usec 7\n");
    CHECK(nr_cpu_limit_read_at(g_proc, g_root, &c) == 0 && c.ok == 1);
    CHECK_STR(c.cgroup, "/job");
    CHECK(c.quota_us == -1 && c.throttled_ns == 7000ULL);
    v2_group("/job", "150000 100000\n");
    CHECK(nr_cpu_limit_read_at(g_proc, g_root, &c) == 0 && c.quota_us == 150000 && c.period_us == 100000);
    CHECK_STR(c.limit_cgroup, "/job");
    done();
}

static void test_parents_v1(void)
{
    struct nr_cpu_limit c;
    /* The parent's 0.2 CPU caps the child's 0.5: the limit is the parent's, and so is the throttling counted. */
    tree("4:cpu,cpuacct:/a/b\n");
    v1_group("", -1, 100000);
    v1_group("/a", 20000, 100000);
    v1_group("/a/b", 50000, 100000);
    put("cpu/a/cpu.stat", "throttled_time 900\n");
    put("cpu/a/b/cpu.stat", "throttled_time 100\n");
    CHECK(nr_cpu_limit_read_at(g_proc, g_root, &c) == 0 && c.ok == 1);
    CHECK_STR(c.cgroup, "/a/b");
    CHECK_STR(c.limit_cgroup, "/a");
    CHECK(c.quota_us == 20000 && c.period_us == 100000 && c.throttled_ns == 900);
    /* Compared in CPUs, not in microseconds: 30000/50000 (0.6) above 50000/100000 (0.5) leaves the child's. */
    v1_group("/a", 30000, 50000);
    CHECK(nr_cpu_limit_read_at(g_proc, g_root, &c) == 0 && c.quota_us == 50000 && c.period_us == 100000);
    CHECK_STR(c.limit_cgroup, "/a/b");
    done();
}

static void test_parents_v2(void)
{
    struct nr_cpu_limit c;
    /* A quota two levels up, a level without the cpu controller between, "max" below: the limit is 1 CPU. */
    tree("0::/machine/job/step\n");
    v2_group("", NULL);
    v2_group("/machine", "100000 100000\n");
    v2_group("/machine/job", NULL);
    v2_group("/machine/job/step", "max 100000\n");
    put("machine/cpu.stat", "throttled_usec 3\n");
    CHECK(nr_cpu_limit_read_at(g_proc, g_root, &c) == 0 && c.ok == 1);
    CHECK_STR(c.cgroup, "/machine/job/step");
    CHECK_STR(c.limit_cgroup, "/machine");
    CHECK(c.quota_us == 100000 && c.throttled_ns == 3000);
    v2_group("/machine/job/step", "25000 50000\n"); /* 0.5 CPU below the parent's 1 */
    CHECK(nr_cpu_limit_read_at(g_proc, g_root, &c) == 0 && c.quota_us == 25000 && c.period_us == 50000);
    CHECK_STR(c.limit_cgroup, "/machine/job/step");
    done();
}

static void test_unknown(void)
{
    struct nr_cpu_limit c;
    /* cgroup v1 without a cgroup namespace: /proc/self/cgroup names the host's path, the container's cpu mount is
     * its own group. Nothing there to read: unknown, not "no quota". */
    tree("5:cpu,cpuacct:/docker/0123abcd\n");
    v1_group("", 50000, 100000);
    CHECK(nr_cpu_limit_read_at(g_proc, g_root, &c) == -1 && c.ok == 0);
    /* A level whose files are missing or garbled (a parent of v1), a v2 group gone ("(deleted)") */
    tree("5:cpu:/a/b\n");
    v1_group("/a/b", -1, 100000);
    v1_group("", -1, 100000);
    CHECK(nr_cpu_limit_read_at(g_proc, g_root, &c) == -1);
    v1_group("/a", -1, 100000);
    CHECK(nr_cpu_limit_read_at(g_proc, g_root, &c) == 0 && c.quota_us == -1);
    put("cpu/a/cpu.cfs_quota_us", "lots\n");
    CHECK(nr_cpu_limit_read_at(g_proc, g_root, &c) == -1);
    tree("0::/job (deleted)\n");
    v2_group("", NULL);
    CHECK(nr_cpu_limit_read_at(g_proc, g_root, &c) == -1);
    tree("0::/job\n");
    v2_group("", NULL);
    v2_group("/job", "100000 0\n");              /* a zero period */
    CHECK(nr_cpu_limit_read_at(g_proc, g_root, &c) == -1);
    /* No cpu controller, no v2 group, no file, a path longer than the reading holds: not found, never a crash. */
    tree("5:memory:/m\ngarbage\n");
    CHECK(nr_cpu_limit_read_at(g_proc, g_root, &c) == -1 && c.ok == 0);
    CHECK(nr_cpu_limit_read_at("/nonexistent/cgroup", g_root, &c) == -1);
    char longer[400] = "0::/";
    memset(longer + 4, 'x', 300);
    longer[304] = '\n';
    tree(longer);
    CHECK(nr_cpu_limit_read_at(g_proc, g_root, &c) == -1);
    done();
}

static void test_this_process(void)
{
    /* Whatever this process runs in, a reading is consistent or says it cannot tell. */
    struct nr_cpu_limit c;
    int rc = nr_cpu_limit_read(&c);
    CHECK(rc == 0 || (rc == -1 && c.ok == 0));
    if (rc == 0)
        CHECK(c.ok == 1 && c.cgroup[0] == '/' && c.period_us > 0 && (c.quota_us == -1 || c.limit_cgroup[0] == '/'));
    printf("this process: %s\n", rc == 0 ? c.cgroup : "unknown");
}

int main(int argc, char **argv)
{
    static const struct nr_test_case cases[] = {
        {"v1", test_v1},         {"v2", test_v2},           {"parents_v1", test_parents_v1},
        {"parents_v2", test_parents_v2}, {"unknown", test_unknown}, {"this_process", test_this_process},
        {NULL, NULL},
    };
    return nr_test_main(cases, argc, argv);
}
