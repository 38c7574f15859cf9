/* The system log as records: storage, the Hpcbench system-log writer (the -c files), and the text serialisation
 * that carries a peer's log to the reporting side (parsed as untrusted input). See nr/sysmon.h. */
#include "nr/sysmon.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nr/error.h"
#include "nr/host.h"
#include "sysmon_internal.h"

/* ---- log storage ---- */

void nr_sysmon_log_init(struct nr_sysmon_log *log)
{
    memset(log, 0, sizeof *log);
}

void nr_sysmon_log_free(struct nr_sysmon_log *log)
{
    free(log->rows);
    free(log->cpu_pct);
    free(log->net);
    free(log->irq);
    log->rows = NULL;
    log->cpu_pct = NULL;
    log->net = NULL;
    log->irq = NULL;
    log->nrows = log->cap = 0;
}

/* Make room for at least want rows (see sysmon_internal.h). */
int nr__sysmon_log_reserve(struct nr_sysmon_log *log, size_t want)
{
    if (want <= log->cap)
        return NR_OK;
    if (want > NR_SYSMON_MAX_ROWS)
        return NR_E_RANGE;
    size_t cap = log->cap ? log->cap * 2 : 8;
    if (cap < want)
        cap = want;
    size_t ncpu = (size_t)log->ncpu, nif = (size_t)log->nif;
    void *rows = realloc(log->rows, cap * sizeof *log->rows);
    if (rows)
        log->rows = rows;
    void *cpu = realloc(log->cpu_pct, cap * (ncpu ? ncpu : 1) * 3 * sizeof *log->cpu_pct);
    if (cpu)
        log->cpu_pct = cpu;
    void *net = realloc(log->net, cap * (nif ? nif : 1) * sizeof *log->net);
    if (net)
        log->net = net;
    void *irq = realloc(log->irq, cap * (nif ? nif : 1) * (ncpu ? ncpu : 1) * sizeof *log->irq);
    if (irq)
        log->irq = irq;
    if (!rows || !cpu || !net || !irq)
        return NR_E_NOMEM;
    log->cap = cap;
    return NR_OK;
}

/* ---- writers ---- */

int nr_sysmon_log_write(FILE *f, const struct nr_sysmon_log *log)
{
    char when[64];
    size_t ncpu = (size_t)log->ncpu, nif = (size_t)log->nif;
    fprintf(f, "# %s syslog -- %s\n", log->host, nr_time_ctime(log->started, when, sizeof when));
    fprintf(f, "# Watch times: %zu\n", log->nrows);
    fprintf(f, "# Network devices (interface): %d (", log->nif);
    for (size_t i = 0; i < nif; i++)
        fprintf(f, " %s", log->ifname[i]);
    fprintf(f, " )\n# CPU number: %d\n", log->ncpu);
    for (size_t i = 0; i < nif; i++) {
        fprintf(f, "\n##### System info, statistics of network interface <%s> and its interrupts to each CPU #####\n",
                log->ifname[i]);
        fprintf(f, "#       CPU(%%)     Mem(%%)  Interrupt  Page   Swap   Context           <%s> information\n",
                log->ifname[i]);
        fprintf(f, "#   Load User  Sys  Usage   Overall  In/out In/out   Switch   RecvPkg    RecvByte   SentPkg    "
                   "SentByte");
        for (size_t c = 0; c < ncpu; c++)
            fprintf(f, "  Int-CPU%zu", c);
        fputc('\n', f);
        for (size_t r = 0; r < log->nrows; r++) {
            const struct nr_sysmon_row *w = &log->rows[r];
            const struct nr_sysmon_net *n = &log->net[r * nif + i];
            fprintf(f, "%-3zu %4.0f %4.0f %4.0f %6.0f %9" PRIu64 " %7" PRIu64 " %6" PRIu64 " %8" PRIu64 " %9" PRIu64
                       " %11" PRIu64 " %9" PRIu64 " %11" PRIu64,
                    r, w->load_pct, w->user_pct, w->sys_pct, w->mem_used_pct, w->interrupts, w->page_in + w->page_out,
                    w->swap_in + w->swap_out, w->ctxt, n->rx_packets, n->rx_bytes, n->tx_packets, n->tx_bytes);
            for (size_t c = 0; c < ncpu; c++)
                fprintf(f, " %9" PRIu64, log->irq[(r * nif + i) * ncpu + c]);
            fputc('\n', f);
        }
    }
    fprintf(f, "\n## CPU workload distribution: \n##\n");
    for (size_t c = 0; c < ncpu; c++) {
        fprintf(f, "##         CPU%zu workload (%%)           Overall CPU workload (%%)\n", c);
        fprintf(f, "#   < load   user  system   idle >  < load   user  system   idle >\n");
        for (size_t r = 0; r < log->nrows; r++) {
            const double *p = &log->cpu_pct[(r * ncpu + c) * 3];
            const struct nr_sysmon_row *w = &log->rows[r];
            fprintf(f, "%-3zu %6.1f %6.1f %6.1f %7.1f    %6.1f %6.1f %6.1f %7.1f\n", r, p[0], p[1], p[2], 100.0 - p[0],
                    w->load_pct, w->user_pct, w->sys_pct, 100.0 - w->load_pct);
        }
        if (c + 1 < ncpu)
            fputc('\n', f);
    }
    return (fflush(f) != 0 || ferror(f)) ? NR_E_IO : NR_OK;
}

/* ---- text serialisation ---- */

char *nr_sysmon_log_serialize(const struct nr_sysmon_log *log, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return NULL;
    size_t ncpu = (size_t)log->ncpu, nif = (size_t)log->nif;
    char host[NR_HOST_MAX];
    snprintf(host, sizeof host, "%s", log->host[0] ? log->host : "unknown");
    for (char *p = host; *p; p++)
        if (isspace((unsigned char)*p))
            *p = '_';
    fprintf(f, "nr-sysmon 1\nhost %s\nstarted %lld\nncpu %zu\nnif %zu\n", host, (long long)log->started, ncpu, nif);
    for (size_t i = 0; i < nif; i++)
        fprintf(f, "if %s\n", log->ifname[i]);
    fprintf(f, "rows %zu\n", log->nrows);
    for (size_t r = 0; r < log->nrows; r++) {
        const struct nr_sysmon_row *w = &log->rows[r];
        fprintf(f, "r %.9g %.6g %.6g %.6g %.6g %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\nc",
                w->interval_s, w->load_pct, w->user_pct, w->sys_pct, w->mem_used_pct, w->interrupts, w->page_in,
                w->page_out, w->swap_in, w->swap_out, w->ctxt);
        for (size_t k = 0; k < ncpu * 3; k++)
            fprintf(f, " %.6g", log->cpu_pct[r * ncpu * 3 + k]);
        fputc('\n', f);
        for (size_t i = 0; i < nif; i++) {
            const struct nr_sysmon_net *q = &log->net[r * nif + i];
            fprintf(f, "n %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64, q->rx_packets, q->rx_bytes, q->tx_packets,
                    q->tx_bytes);
            for (size_t c = 0; c < ncpu; c++)
                fprintf(f, " %" PRIu64, log->irq[(r * nif + i) * ncpu + c]);
            fputc('\n', f);
        }
    }
    fputs("end\n", f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    if (len)
        *len = n;
    return buf;
}

/* A cursor over untrusted text. */
struct nr__cur {
    const char *p, *end;
};

/* Next whitespace-separated token: pointer and length; 0 length at the end. */
static size_t nr__tok(struct nr__cur *c, const char **tok)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n'))
        c->p++;
    *tok = c->p;
    while (c->p < c->end && *c->p != ' ' && *c->p != '\n')
        c->p++;
    return (size_t)(c->p - *tok);
}

static int nr__expect(struct nr__cur *c, const char *word)
{
    const char *t;
    size_t n = nr__tok(c, &t);
    return n == strlen(word) && memcmp(t, word, n) == 0;
}

static int nr__tok_u64(struct nr__cur *c, uint64_t *v)
{
    const char *t;
    size_t n = nr__tok(c, &t);
    if (n == 0 || n > 20)
        return 0;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] < '0' || t[i] > '9')
            return 0;
        uint64_t d = (uint64_t)(t[i] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return 0;
        x = x * 10 + d;
    }
    *v = x;
    return 1;
}

static int nr__tok_double(struct nr__cur *c, double *v)
{
    const char *t;
    size_t n = nr__tok(c, &t);
    char tmp[48];
    if (n == 0 || n >= sizeof tmp)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(isdigit((unsigned char)t[i]) || t[i] == '.' || t[i] == '-' || t[i] == '+' || t[i] == 'e' || t[i] == 'E'))
            return 0;
    memcpy(tmp, t, n);
    tmp[n] = '\0';
    char *e;
    *v = strtod(tmp, &e);
    return *e == '\0' && isfinite(*v);
}

static int nr__tok_name(struct nr__cur *c, char *buf, size_t cap)
{
    const char *t;
    size_t n = nr__tok(c, &t);
    if (n == 0 || n >= cap)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isgraph((unsigned char)t[i]))
            return 0;
    memcpy(buf, t, n);
    buf[n] = '\0';
    return 1;
}

int nr_sysmon_log_parse(const char *text, size_t len, struct nr_sysmon_log *out, struct nr_error *err)
{
    struct nr__cur c = {text, text + len};
    struct nr_sysmon_log log;
    uint64_t v, ncpu, nif, nrows;
    const char *what = "header";
    nr_sysmon_log_init(&log);
    if (!nr__expect(&c, "nr-sysmon") || !nr__tok_u64(&c, &v) || v != 1)
        goto bad;
    if (!nr__expect(&c, "host") || !nr__tok_name(&c, log.host, sizeof log.host))
        goto bad;
    if (!nr__expect(&c, "started") || !nr__tok_u64(&c, &v) || v > (uint64_t)INT64_MAX)
        goto bad;
    log.started = (time_t)v;
    what = "counts";
    if (!nr__expect(&c, "ncpu") || !nr__tok_u64(&c, &ncpu) || ncpu == 0 || ncpu > NR_SYSMON_MAX_CPUS)
        goto bad;
    if (!nr__expect(&c, "nif") || !nr__tok_u64(&c, &nif) || nif > NR_SYSMON_MAX_IFS)
        goto bad;
    log.ncpu = (int)ncpu;
    log.nif = (int)nif;
    what = "interface names";
    for (uint64_t i = 0; i < nif; i++)
        if (!nr__expect(&c, "if") || !nr__tok_name(&c, log.ifname[i], NR_SYSMON_IFNAME_MAX))
            goto bad;
    what = "row count";
    if (!nr__expect(&c, "rows") || !nr__tok_u64(&c, &nrows) || nrows > NR_SYSMON_MAX_ROWS)
        goto bad;
    /* Every number takes at least two bytes of text: refuse counts the text cannot possibly hold before
     * allocating anything for them. */
    if (nrows * (11 + ncpu * 3 + nif * (4 + ncpu)) > len / 2)
        goto bad;
    if (nrows && nr__sysmon_log_reserve(&log, (size_t)nrows) < 0) {
        nr_sysmon_log_free(&log);
        return nr_error_set(err, NR_E_NOMEM, "system log: out of memory");
    }
    what = "row";
    for (uint64_t r = 0; r < nrows; r++) {
        struct nr_sysmon_row *w = &log.rows[r];
        if (!nr__expect(&c, "r") || !nr__tok_double(&c, &w->interval_s) || !nr__tok_double(&c, &w->load_pct) ||
            !nr__tok_double(&c, &w->user_pct) || !nr__tok_double(&c, &w->sys_pct) ||
            !nr__tok_double(&c, &w->mem_used_pct) || !nr__tok_u64(&c, &w->interrupts) ||
            !nr__tok_u64(&c, &w->page_in) || !nr__tok_u64(&c, &w->page_out) || !nr__tok_u64(&c, &w->swap_in) ||
            !nr__tok_u64(&c, &w->swap_out) || !nr__tok_u64(&c, &w->ctxt))
            goto bad;
        if (!nr__expect(&c, "c"))
            goto bad;
        for (uint64_t k = 0; k < ncpu * 3; k++)
            if (!nr__tok_double(&c, &log.cpu_pct[r * ncpu * 3 + k]))
                goto bad;
        for (uint64_t i = 0; i < nif; i++) {
            struct nr_sysmon_net *q = &log.net[r * nif + i];
            if (!nr__expect(&c, "n") || !nr__tok_u64(&c, &q->rx_packets) || !nr__tok_u64(&c, &q->rx_bytes) ||
                !nr__tok_u64(&c, &q->tx_packets) || !nr__tok_u64(&c, &q->tx_bytes))
                goto bad;
            for (uint64_t k = 0; k < ncpu; k++)
                if (!nr__tok_u64(&c, &log.irq[(r * nif + i) * ncpu + k]))
                    goto bad;
        }
        log.nrows = (size_t)r + 1;
    }
    what = "end";
    const char *t;
    if (!nr__expect(&c, "end") || nr__tok(&c, &t) != 0)
        goto bad;
    nr_sysmon_log_free(out);
    *out = log;
    return NR_OK;
bad:
    nr_sysmon_log_free(&log);
    return nr_error_set(err, NR_E_PROTO, "system log from peer is malformed (at %s)", what);
}
