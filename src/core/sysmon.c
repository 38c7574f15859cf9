/* Linux /proc system monitor: samples of the CPU, memory, paging, interrupt, context-switch and network counters,
 * and the rows of the system log computed between two samples (see nr/sysmon.h). The log's writers are
 * sysmon_log.c (Hpcbench layout, text serialisation) and sysmon_json.c (JSON). */
#include "nr/sysmon.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nr/error.h"
#include "nr/timer.h"

#define NR__MAX_IRQS_PER_IF 64
#define NR__CPU_FIELDS 4 /* user, sys, idle, total (jiffies) */

/* Cumulative counters at one instant. */
struct nr__sample {
    double t_s;
    uint64_t *cpu; /* [ncpu + 1][NR__CPU_FIELDS]; row 0 = all CPUs, row 1 + i = CPU i */
    uint64_t intr, ctxt, pgin, pgout, swin, swout;
    double mem_used_pct;
    struct nr_sysmon_net *net; /* [nif] */
    uint64_t *irq;             /* [nif][ncpu] */
};

struct nr_sysmon {
    struct nr_sysmon_log log;
    int nirq[NR_SYSMON_MAX_IFS];                      /* IRQs found per interface */
    unsigned irqnum[NR_SYSMON_MAX_IFS][NR__MAX_IRQS_PER_IF]; /* their numbers */
    struct nr__sample mark, now;
};

/* Read a whole (small) /proc file into a malloc'ed NUL-terminated buffer. */
static char *nr__slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 16384, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (len < cap - 1)
            break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

#include "sysmon_internal.h"

/* ---- sampling ---- */

static int nr__sample_alloc(struct nr__sample *s, int ncpu, int nif)
{
    s->cpu = calloc(((size_t)ncpu + 1) * NR__CPU_FIELDS, sizeof *s->cpu);
    s->net = calloc(nif ? (size_t)nif : 1, sizeof *s->net);
    s->irq = calloc((nif ? (size_t)nif : 1) * (size_t)ncpu, sizeof *s->irq);
    return (s->cpu && s->net && s->irq) ? NR_OK : NR_E_NOMEM;
}

static void nr__sample_free(struct nr__sample *s)
{
    free(s->cpu);
    free(s->net);
    free(s->irq);
}

/* /proc/stat: cpu lines, intr, ctxt. */
static int nr__read_stat(struct nr_sysmon *m, struct nr__sample *s)
{
    char *buf = nr__slurp("/proc/stat");
    if (!buf)
        return NR_E_IO;
    int ncpu = m->log.ncpu;
    memset(s->cpu, 0, ((size_t)ncpu + 1) * NR__CPU_FIELDS * sizeof *s->cpu);
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "cpu", 3) == 0) {
            char *p = line + 3;
            int row = 0;
            if (isdigit((unsigned char)*p)) {
                long id = strtol(p, &p, 10);
                if (id < 0 || id >= ncpu)
                    continue;
                row = (int)id + 1;
            }
            unsigned long long v[10] = {0};
            for (int k = 0; k < 10; k++)
                v[k] = strtoull(p, &p, 10);
            /* user nice system idle iowait irq softirq steal (guest time is already in user) */
            uint64_t *c = s->cpu + (size_t)row * NR__CPU_FIELDS;
            c[0] = v[0] + v[1];
            c[1] = v[2] + v[5] + v[6] + v[7];
            c[2] = v[3] + v[4];
            c[3] = c[0] + c[1] + c[2];
        } else if (strncmp(line, "intr ", 5) == 0) {
            s->intr = strtoull(line + 5, NULL, 10);
        } else if (strncmp(line, "ctxt ", 5) == 0) {
            s->ctxt = strtoull(line + 5, NULL, 10);
        }
    }
    free(buf);
    return NR_OK;
}

static uint64_t nr__kv(const char *buf, const char *key)
{
    size_t klen = strlen(key);
    for (const char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, key, klen) == 0 && (p[klen] == ' ' || p[klen] == ':'))
            return strtoull(p + klen + 1, NULL, 10);
    return 0;
}

static void nr__read_vm_mem(struct nr__sample *s)
{
    char *vm = nr__slurp("/proc/vmstat");
    if (vm) {
        s->pgin = nr__kv(vm, "pgpgin");
        s->pgout = nr__kv(vm, "pgpgout");
        s->swin = nr__kv(vm, "pswpin");
        s->swout = nr__kv(vm, "pswpout");
        free(vm);
    }
    char *mi = nr__slurp("/proc/meminfo");
    s->mem_used_pct = 0;
    if (mi) {
        uint64_t total = nr__kv(mi, "MemTotal"), avail = nr__kv(mi, "MemAvailable");
        if (total > 0 && avail <= total)
            s->mem_used_pct = 100.0 * (double)(total - avail) / (double)total;
        free(mi);
    }
}

/* /proc/net/dev: "  name: rxbytes rxpackets errs drop fifo frame compressed multicast txbytes txpackets ..." */
static void nr__read_netdev(struct nr_sysmon *m, struct nr__sample *s)
{
    char *buf = nr__slurp("/proc/net/dev");
    memset(s->net, 0, (size_t)(m->log.nif ? m->log.nif : 1) * sizeof *s->net);
    if (!buf)
        return;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        *colon = '\0';
        while (*line == ' ')
            line++;
        for (int i = 0; i < m->log.nif; i++) {
            if (strcmp(line, m->log.ifname[i]) != 0)
                continue;
            char *p = colon + 1;
            unsigned long long v[10];
            for (int k = 0; k < 10; k++)
                v[k] = strtoull(p, &p, 10);
            s->net[i].rx_bytes = v[0];
            s->net[i].rx_packets = v[1];
            s->net[i].tx_bytes = v[8];
            s->net[i].tx_packets = v[9];
        }
    }
    free(buf);
}

/* /proc/interrupts: the header names the CPU of each column; sum the columns of each interface's IRQs. */
static void nr__read_irqs(struct nr_sysmon *m, struct nr__sample *s)
{
    int ncpu = m->log.ncpu, nif = m->log.nif;
    memset(s->irq, 0, (size_t)(nif ? nif : 1) * (size_t)ncpu * sizeof *s->irq);
    if (nif == 0)
        return;
    char *buf = nr__slurp("/proc/interrupts");
    if (!buf)
        return;
    int colcpu[NR_SYSMON_MAX_CPUS];
    int ncol = 0;
    char *save = NULL;
    char *line = strtok_r(buf, "\n", &save);
    for (char *p = line; p && *p && ncol < NR_SYSMON_MAX_CPUS;) {
        p = strstr(p, "CPU");
        if (!p)
            break;
        colcpu[ncol++] = atoi(p + 3);
        p += 3;
    }
    for (line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *p = line;
        while (*p == ' ')
            p++;
        if (!isdigit((unsigned char)*p))
            continue;
        unsigned long irq = strtoul(p, &p, 10);
        if (*p != ':')
            continue;
        p++;
        for (int i = 0; i < nif; i++) {
            int hit = 0;
            for (int k = 0; k < m->nirq[i] && !hit; k++)
                hit = m->irqnum[i][k] == irq;
            if (!hit)
                continue;
            char *q = p;
            for (int c = 0; c < ncol; c++) {
                unsigned long long v = strtoull(q, &q, 10);
                if (colcpu[c] >= 0 && colcpu[c] < ncpu)
                    s->irq[(size_t)i * (size_t)ncpu + (size_t)colcpu[c]] += v;
            }
        }
    }
    free(buf);
}

static int nr__sample(struct nr_sysmon *m, struct nr__sample *s)
{
    s->t_s = nr_now_s();
    int rc = nr__read_stat(m, s);
    if (rc < 0)
        return rc;
    nr__read_vm_mem(s);
    nr__read_netdev(m, s);
    nr__read_irqs(m, s);
    return NR_OK;
}

/* Does an /proc/interrupts action name belong to interface ifname (or its device dev, e.g. "virtio2")? */
static int nr__irq_name_matches(const char *action, const char *ifname, const char *dev)
{
    const char *names[2] = {ifname, dev};
    for (int k = 0; k < 2; k++) {
        if (!names[k] || !names[k][0])
            continue;
        size_t n = strlen(names[k]);
        for (const char *p = strstr(action, names[k]); p; p = strstr(p + 1, names[k])) {
            int start_ok = p == action || !isalnum((unsigned char)p[-1]);
            int end_ok = !isalnum((unsigned char)p[n]);
            if (start_ok && end_ok)
                return 1;
        }
    }
    return 0;
}

static void nr__add_irq(struct nr_sysmon *m, int i, unsigned long irq)
{
    for (int k = 0; k < m->nirq[i]; k++)
        if (m->irqnum[i][k] == irq)
            return;
    if (m->nirq[i] < NR__MAX_IRQS_PER_IF)
        m->irqnum[i][m->nirq[i]++] = (unsigned)irq;
}

/* Find each interface's IRQs once, at open. */
static void nr__discover_irqs(struct nr_sysmon *m)
{
    char devname[NR_SYSMON_MAX_IFS][64];
    for (int i = 0; i < m->log.nif; i++) {
        char path[256], link[256];
        devname[i][0] = '\0';
        snprintf(path, sizeof path, "/sys/class/net/%s/device", m->log.ifname[i]);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n > 0) {
            link[n] = '\0';
            const char *base = strrchr(link, '/');
            base = base ? base + 1 : link;
            size_t blen = strlen(base);
            if (blen < sizeof devname[i])
                memcpy(devname[i], base, blen + 1);
        }
        const char *dirs[2] = {"device/msi_irqs", "device/../msi_irqs"};
        for (int d = 0; d < 2; d++) {
            snprintf(path, sizeof path, "/sys/class/net/%s/%s", m->log.ifname[i], dirs[d]);
            DIR *dir = opendir(path);
            if (!dir)
                continue;
            for (struct dirent *e = readdir(dir); e; e = readdir(dir))
                if (isdigit((unsigned char)e->d_name[0]))
                    nr__add_irq(m, i, strtoul(e->d_name, NULL, 10));
            closedir(dir);
            break;
        }
    }
    char *buf = nr__slurp("/proc/interrupts");
    if (!buf)
        return;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *p = line;
        while (*p == ' ')
            p++;
        if (!isdigit((unsigned char)*p))
            continue;
        unsigned long irq = strtoul(p, &p, 10);
        if (*p != ':')
            continue;
        /* The action names are the last whitespace-separated field(s); match on the whole rest of the line. */
        for (int i = 0; i < m->log.nif; i++)
            if (nr__irq_name_matches(p + 1, m->log.ifname[i], devname[i]))
                nr__add_irq(m, i, irq);
    }
    free(buf);
}

int nr_sysmon_open(struct nr_sysmon **out, struct nr_error *err)
{
    *out = NULL;
    struct nr_sysmon *m = calloc(1, sizeof *m);
    if (!m)
        return nr_error_set(err, NR_E_NOMEM, "system monitor: out of memory");
    nr_sysmon_log_init(&m->log);
    nr_hostname(m->log.host, sizeof m->log.host);
    m->log.started = time(NULL);

    char *stat = nr__slurp("/proc/stat");
    if (!stat) {
        free(m);
        return nr_error_sys(err, NR_E_UNSUPPORTED, "system monitor: cannot read /proc/stat");
    }
    int ncpu = 0;
    for (char *p = strstr(stat, "\ncpu"); p; p = strstr(p + 1, "\ncpu")) {
        if (isdigit((unsigned char)p[4])) {
            long id = strtol(p + 4, NULL, 10);
            if (id >= 0 && id < NR_SYSMON_MAX_CPUS && id + 1 > ncpu)
                ncpu = (int)id + 1;
        }
    }
    free(stat);
    m->log.ncpu = ncpu > 0 ? ncpu : 1;

    char *dev = nr__slurp("/proc/net/dev");
    if (dev) {
        char *save = NULL;
        for (char *line = strtok_r(dev, "\n", &save); line && m->log.nif < NR_SYSMON_MAX_IFS;
             line = strtok_r(NULL, "\n", &save)) {
            char *colon = strchr(line, ':');
            if (!colon)
                continue;
            *colon = '\0';
            while (*line == ' ')
                line++;
            if (!*line || strlen(line) >= NR_SYSMON_IFNAME_MAX)
                continue;
            snprintf(m->log.ifname[m->log.nif++], NR_SYSMON_IFNAME_MAX, "%s", line);
        }
        free(dev);
    }
    nr__discover_irqs(m);

    if (nr__sample_alloc(&m->mark, m->log.ncpu, m->log.nif) < 0 ||
        nr__sample_alloc(&m->now, m->log.ncpu, m->log.nif) < 0) {
        nr_sysmon_close(m);
        return nr_error_set(err, NR_E_NOMEM, "system monitor: out of memory");
    }
    int rc = nr__sample(m, &m->mark);
    if (rc < 0) {
        nr_sysmon_close(m);
        return nr_error_sys(err, rc, "system monitor: cannot read /proc");
    }
    *out = m;
    return NR_OK;
}

int nr_sysmon_mark(struct nr_sysmon *m, struct nr_error *err)
{
    int rc = nr__sample(m, &m->mark);
    if (rc < 0)
        return nr_error_sys(err, rc, "system monitor: cannot read /proc");
    return NR_OK;
}

static uint64_t nr__delta(uint64_t after, uint64_t before)
{
    return after >= before ? after - before : 0;
}

/* CPU percentages of one cpu row between two samples: load, user, sys. */
static void nr__cpu_pct(const uint64_t *a, const uint64_t *b, double *out3)
{
    double total = (double)nr__delta(a[3], b[3]);
    if (total <= 0) {
        out3[0] = out3[1] = out3[2] = 0;
        return;
    }
    double idle = (double)nr__delta(a[2], b[2]);
    out3[0] = 100.0 * (total - idle) / total;
    out3[1] = 100.0 * (double)nr__delta(a[0], b[0]) / total;
    out3[2] = 100.0 * (double)nr__delta(a[1], b[1]) / total;
}

int nr_sysmon_record(struct nr_sysmon *m, struct nr_error *err)
{
    struct nr_sysmon_log *log = &m->log;
    int rc = nr__sample(m, &m->now);
    if (rc < 0)
        return nr_error_sys(err, rc, "system monitor: cannot read /proc");
    if ((rc = nr__sysmon_log_reserve(log, log->nrows + 1)) < 0)
        return nr_error_set(err, rc, "system monitor: cannot hold more than %d rows", NR_SYSMON_MAX_ROWS);
    size_t r = log->nrows, ncpu = (size_t)log->ncpu, nif = (size_t)log->nif;
    const struct nr__sample *a = &m->now, *b = &m->mark;
    struct nr_sysmon_row *row = &log->rows[r];
    double all[3];
    nr__cpu_pct(a->cpu, b->cpu, all);
    row->interval_s = a->t_s - b->t_s;
    row->load_pct = all[0];
    row->user_pct = all[1];
    row->sys_pct = all[2];
    row->mem_used_pct = a->mem_used_pct;
    row->interrupts = nr__delta(a->intr, b->intr);
    row->page_in = nr__delta(a->pgin, b->pgin);
    row->page_out = nr__delta(a->pgout, b->pgout);
    row->swap_in = nr__delta(a->swin, b->swin);
    row->swap_out = nr__delta(a->swout, b->swout);
    row->ctxt = nr__delta(a->ctxt, b->ctxt);
    for (size_t c = 0; c < ncpu; c++)
        nr__cpu_pct(a->cpu + (c + 1) * NR__CPU_FIELDS, b->cpu + (c + 1) * NR__CPU_FIELDS, &log->cpu_pct[(r * ncpu + c) * 3]);
    for (size_t i = 0; i < nif; i++) {
        struct nr_sysmon_net *n = &log->net[r * nif + i];
        n->rx_packets = nr__delta(a->net[i].rx_packets, b->net[i].rx_packets);
        n->rx_bytes = nr__delta(a->net[i].rx_bytes, b->net[i].rx_bytes);
        n->tx_packets = nr__delta(a->net[i].tx_packets, b->net[i].tx_packets);
        n->tx_bytes = nr__delta(a->net[i].tx_bytes, b->net[i].tx_bytes);
        for (size_t c = 0; c < ncpu; c++)
            log->irq[(r * nif + i) * ncpu + c] = nr__delta(a->irq[i * ncpu + c], b->irq[i * ncpu + c]);
    }
    log->nrows++;
    /* The new sample becomes the mark: swap buffers. */
    struct nr__sample t = m->mark;
    m->mark = m->now;
    m->now = t;
    return NR_OK;
}

const struct nr_sysmon_log *nr_sysmon_get_log(const struct nr_sysmon *m)
{
    return &m->log;
}

void nr_sysmon_close(struct nr_sysmon *m)
{
    if (!m)
        return;
    nr_sysmon_log_free(&m->log);
    nr__sample_free(&m->mark);
    nr__sample_free(&m->now);
    free(m);
}
