/* nr-linkmap: rank 0 records the rounds and writes the text and the JSON (see linkmap.h). */
#include "linkmap.h"

/* ---- rank 0: recording, text, JSON ---- */

static int lm_add_pair(struct lm_ctx *c, const struct lm_pair *p)
{
    if (c->npairs == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        struct lm_pair *g = realloc(c->pairs, sizeof *g * cap);
        if (!g)
            return -1;
        c->pairs = g, c->cap = cap;
    }
    c->pairs[c->npairs++] = *p;
    return 0;
}

void lm_append(char *buf, size_t len, const char *part)
{
    size_t u = strlen(buf);
    if (u + 1 < len)
        snprintf(buf + u, len - u, "%s%s", u ? "; " : "", part);
}

/* Record round `round` from the reports (missing[r]: rank r sent none). */
void lm_record(struct lm_ctx *c, int round, double wall_s)
{
    const int n = c->m->size;
    const int *p = c->plan + (size_t)round * (size_t)n;
    struct lm_round *rd = &c->rounds[c->rounds_run++];
    rd->index = round, rd->wall_s = wall_s, rd->first = c->npairs, rd->n = 0, rd->failed = 0;
    for (int s = 0; s < n; s++) {
        int d = p[s];
        if (d < 0)
            continue;
        const struct lm_report *S = c->missing[s] ? NULL : &c->reports[s];
        const struct lm_report *D = c->missing[d] ? NULL : &c->reports[d];
        struct lm_pair pr = {round, s, d, 0, 0, 0, 0, NAN, NAN, NULL};
        if (D) {
            pr.bytes = D->recv.bytes, pr.seconds = D->recv.seconds;
            pr.mbps = nr_mbps(pr.bytes, pr.seconds);
            pr.steady_mbps = D->recv.steady_seconds > 0 ? nr_mbps(D->recv.steady_bytes, D->recv.steady_seconds) : NAN;
        }
        if (S && c->o->rtt && S->send.rtt_us >= 0)
            pr.rtt_us = S->send.rtt_us;
        char why[1024] = "", part[400];
        if (!D) {
            snprintf(part, sizeof part, "receiver rank %d (%s) sent no report (hung or dead)", d, lm_host(c, d));
            lm_append(why, sizeof why, part);
        } else if (D->recv.failed) {
            snprintf(part, sizeof part, "receiver: %s", D->recv.error);
            lm_append(why, sizeof why, part);
        }
        if (!S) {
            snprintf(part, sizeof part, "sender rank %d (%s) sent no report (hung or dead)", s, lm_host(c, s));
            lm_append(why, sizeof why, part);
        } else if (S->send.failed) {
            snprintf(part, sizeof part, "sender: %s", S->send.error);
            lm_append(why, sizeof why, part);
        }
        if (why[0]) {
            char full[1200];
            snprintf(full, sizeof full, "round %d, rank %d (%s) -> rank %d (%s): %s", round, s, lm_host(c, s), d,
                     lm_host(c, d), why);
            pr.failed = 1;
            pr.error = strdup(full);
            rd->failed++;
            printf("# FAILED %s\n", full);
        }
        if (lm_add_pair(c, &pr) == 0)
            rd->n++;
        else
            free(pr.error);
    }
    for (int r = 0; r < n; r++)
        if (!c->missing[r])
            c->rejected_total += c->reports[r].rejected;
    double lo = INFINITY, hi = 0;
    for (size_t i = rd->first; i < rd->first + rd->n; i++)
        if (!c->pairs[i].failed) {
            lo = c->pairs[i].mbps < lo ? c->pairs[i].mbps : lo;
            hi = c->pairs[i].mbps > hi ? c->pairs[i].mbps : hi;
        }
    if (lo > hi)
        lo = hi = 0;
    printf("# round %d (%d of %d): %zu pairs, %d failed, %.3f s, %.1f .. %.1f Mbit/s\n", round, c->rounds_run,
           c->nrounds, rd->n, rd->failed, wall_s, lo, hi);
    fflush(stdout);
}

static int lm_cmp_mbps(const void *a, const void *b)
{
    const struct lm_pair *x = *(const struct lm_pair *const *)a, *y = *(const struct lm_pair *const *)b;
    return x->mbps < y->mbps ? -1 : x->mbps > y->mbps;
}

/* The ok pairs, slowest first (malloc'ed; *n of them). */
static const struct lm_pair **lm_sorted_ok(const struct lm_ctx *c, size_t *n)
{
    const struct lm_pair **v = malloc(sizeof *v * (c->npairs ? c->npairs : 1));
    *n = 0;
    if (!v)
        return NULL;
    for (size_t i = 0; i < c->npairs; i++)
        if (!c->pairs[i].failed)
            v[(*n)++] = &c->pairs[i];
    qsort(v, *n, sizeof *v, lm_cmp_mbps);
    return v;
}

void lm_print_table(const struct lm_ctx *c)
{
    const int n = c->m->size;
    int *cell = malloc(sizeof(int) * (size_t)n * (size_t)n); /* pair index + 1, 0 none */
    if (!cell)
        return;
    memset(cell, 0, sizeof(int) * (size_t)n * (size_t)n);
    for (size_t i = 0; i < c->npairs; i++)
        cell[(size_t)c->pairs[i].src * (size_t)n + (size_t)c->pairs[i].dst] = (int)i + 1;
    printf("# nr-linkmap: Mbit/s per directed pair, rows: sender, columns: receiver (FAIL: failed, .: not run)\n");
    printf("#%-4s %-16s", "src", "host");
    for (int d = 0; d < n; d++)
        printf(" %9d", d);
    printf("\n");
    for (int s = 0; s < n; s++) {
        printf("%5d %-16.16s", s, lm_host(c, s));
        for (int d = 0; d < n; d++) {
            int k = cell[(size_t)s * (size_t)n + (size_t)d];
            if (s == d)
                printf(" %9s", "-");
            else if (!k)
                printf(" %9s", ".");
            else if (c->pairs[k - 1].failed)
                printf(" %9s", "FAIL");
            else
                printf(" %9.1f", c->pairs[k - 1].mbps);
        }
        printf("\n");
    }
    free(cell);
    size_t nok = 0, nfail = 0;
    const struct lm_pair **ok = lm_sorted_ok(c, &nok);
    nfail = c->npairs - nok;
    if (ok && nok) {
        double *x = malloc(sizeof(double) * nok);
        struct nr_stats s;
        for (size_t i = 0; x && i < nok; i++)
            x[i] = ok[i]->mbps;
        if (x && nr_stats_compute(x, nok, &s) == 0)
            printf("# pairs: %zu ok, %zu failed; Mbit/s min %.1f median %.1f max %.1f\n", nok, nfail, s.min, s.median,
                   s.max);
        free(x);
        for (size_t i = 0; i < nok && i < (size_t)c->o->slowest; i++)
            printf("# slowest %zu: rank %d (%s) -> rank %d (%s): %.1f Mbit/s (round %d)\n", i + 1, ok[i]->src,
                   lm_host(c, ok[i]->src), ok[i]->dst, lm_host(c, ok[i]->dst), ok[i]->mbps, ok[i]->round);
    } else
        printf("# pairs: %zu ok, %zu failed\n", nok, nfail);
    if (c->o->rtt) {
        printf("# round trip (%llu B, median of %d) us:\n", (unsigned long long)c->o->rtt_size, c->o->rtt_trials);
        for (size_t i = 0; i < c->npairs; i++)
            if (!isnan(c->pairs[i].rtt_us))
                printf("#   %d -> %d: %.2f\n", c->pairs[i].src, c->pairs[i].dst, c->pairs[i].rtt_us);
    }
    free(ok);
    fflush(stdout);
}

static void lm_json_pair_id(struct nr_json *j, const struct lm_ctx *c, const struct lm_pair *p)
{
    nr_json_kv_int(j, "round", p->round);
    nr_json_kv_int(j, "src", p->src);
    nr_json_kv_int(j, "dst", p->dst);
    nr_json_kv_string(j, "src_host", lm_host(c, p->src));
    nr_json_kv_string(j, "dst_host", lm_host(c, p->dst));
}

int lm_write_json(const struct lm_ctx *c, time_t started, int status, const struct nr_error *failure)
{
    const struct lm_opts *o = c->o;
    const int n = c->m->size;
    struct nr_json j;
    FILE *f = nr_mpi_json_begin(&j, o->json, NR__PROG, "linkmap", started, status, failure);
    if (!f)
        return -1;
    nr_json_key(&j, "hosts");
    nr_json_begin_array(&j);
    for (int r = 0; c->hosts && r < n; r++)
        nr_json_string(&j, c->hosts[r]);
    nr_json_end_array(&j);
    nr_json_key(&j, "options");
    nr_json_begin_object(&j);
    nr_json_kv_int(&j, "processes", n);
    nr_json_kv_string(&j, "plan", o->plan_file ? NULL : o->plan);
    nr_json_kv_string(&j, "plan_file", o->plan_file);
    nr_json_kv_string(&j, "transport", o->transport);
    nr_json_kv_string(&j, "bind_iface", o->iface);
    nr_json_kv_string(&j, "bind_addr", o->addr);
    nr_json_kv_uint(&j, "message_size_bytes", o->msg);
    nr_json_kv_int(&j, "window", o->window);
    nr_json_kv_double(&j, "time_s", o->time_s);
    nr_json_kv_double(&j, "warmup", o->warmup);
    nr_json_kv_double(&j, "round_timeout_s", c->rt);
    nr_json_kv_bool(&j, "rtt", o->rtt);
    nr_json_kv_uint(&j, "rtt_size_bytes", o->rtt_size);
    nr_json_kv_int(&j, "rtt_trials", o->rtt_trials);
    nr_json_kv_double(&j, "recheck_below", o->recheck_below);
    nr_json_kv_int(&j, "recheck_max", o->recheck_max);
    nr_json_end_object(&j);
    if (!c->plan || !c->rounds) /* the run failed before its plan was made: the head and the options only */
        return nr_mpi_json_end(&j, f);
    nr_json_kv_string(&j, "plan", c->plan_name);
    nr_json_kv_int(&j, "rounds_planned", c->nplanned);
    nr_json_kv_int(&j, "rounds_run", c->rounds_run);
    nr_json_kv_double(&j, "elapsed_s", MPI_Wtime() - c->started_s);
    if (c->transport == LM_TCP && c->addr && c->port && c->lfd >= 0) {
        nr_json_key(&j, "tcp");
        nr_json_begin_object(&j);
        nr_json_key(&j, "endpoints");
        nr_json_begin_array(&j);
        for (int r = 0; r < n; r++) {
            char ep[64];
            nr_json_string(&j, lm_endpoint_str(c, r, ep, sizeof ep));
        }
        nr_json_end_array(&j);
        nr_json_kv_int(&j, "rejected_connections", c->rejected_total);
        nr_json_end_object(&j);
    }
    nr_json_key(&j, "rounds");
    nr_json_begin_array(&j);
    for (int k = 0; k < c->rounds_run; k++) {
        const struct lm_round *rd = &c->rounds[k];
        nr_json_begin_object(&j);
        nr_json_kv_int(&j, "index", rd->index);
        nr_json_kv_double(&j, "wall_s", rd->wall_s);
        nr_json_kv_int(&j, "failed_pairs", rd->failed);
        nr_json_key(&j, "pairs");
        nr_json_begin_array(&j);
        for (size_t i = rd->first; i < rd->first + rd->n; i++) {
            const struct lm_pair *p = &c->pairs[i];
            nr_json_begin_object(&j);
            nr_json_kv_int(&j, "src", p->src);
            nr_json_kv_int(&j, "dst", p->dst);
            nr_json_kv_string(&j, "src_host", lm_host(c, p->src));
            nr_json_kv_string(&j, "dst_host", lm_host(c, p->dst));
            nr_json_kv_uint(&j, "bytes", p->bytes);
            nr_json_kv_double(&j, "seconds", p->seconds);
            nr_json_kv_double(&j, "mbps", p->mbps);
            nr_json_kv_double(&j, "steady_mbps", p->steady_mbps);
            nr_json_kv_string(&j, "status", p->failed ? "failed" : "ok");
            if (p->error)
                nr_json_kv_string(&j, "error", p->error);
            if (o->rtt)
                nr_json_kv_double(&j, "rtt_us", p->rtt_us);
            nr_json_end_object(&j);
        }
        nr_json_end_array(&j);
        nr_json_end_object(&j);
    }
    nr_json_end_array(&j);
    /* recheck.pairs[]: the directions measured again alone (rounds[] has what they read) */
    nr_json_key(&j, "recheck");
    nr_json_begin_object(&j);
    nr_json_kv_double(&j, "below", o->recheck_below);
    nr_json_kv_int(&j, "max", o->recheck_max);
    nr_json_kv_double(&j, "median_link_mbps", c->recheck_median);
    nr_json_key(&j, "pairs");
    nr_json_begin_array(&j);
    for (int i = 0; i < c->nrecheck; i++) {
        const struct lm_recheck *x = &c->recheck[i];
        nr_json_begin_object(&j);
        nr_json_kv_int(&j, "src", x->src);
        nr_json_kv_int(&j, "dst", x->dst);
        nr_json_kv_string(&j, "src_host", lm_host(c, x->src));
        nr_json_kv_string(&j, "dst_host", lm_host(c, x->dst));
        nr_json_kv_int(&j, "round", x->round);
        nr_json_kv_double(&j, "mbps_before", x->mbps_before);
        nr_json_end_object(&j);
    }
    nr_json_end_array(&j);
    nr_json_end_object(&j);
    /* cpu_limits[rank]: the CPU cgroup each rank ran in, its quota and how long it throttled the rank between the
     * rank's start and its last report (null: no report, or no cgroup found) */
    nr_json_key(&j, "cpu_limits");
    nr_json_begin_array(&j);
    for (int r = 0; c->cpu_first && c->cpu_last && r < n; r++) {
        const struct nr_cpu_limit *a = &c->cpu_first[r], *b = &c->cpu_last[r];
        if (!a->ok || !b->ok) {
            nr_json_null(&j);
            continue;
        }
        nr_json_begin_object(&j);
        nr_json_kv_int(&j, "rank", r);
        nr_json_kv_string(&j, "host", lm_host(c, r));
        nr_json_kv_string(&j, "cgroup", b->cgroup);
        nr_json_kv_int(&j, "quota_us", b->quota_us);
        nr_json_kv_int(&j, "period_us", b->period_us);
        nr_json_kv_uint(&j, "throttled_ns", b->throttled_ns >= a->throttled_ns ? b->throttled_ns - a->throttled_ns : 0);
        nr_json_end_object(&j);
    }
    nr_json_end_array(&j);
    /* matrix_mbps[src][dst]: null on the diagonal, for a pair not run and for a failed pair; a pair run in more than
     * one round (a plan's passes that take each direction's best, a recheck) shows its fastest ok round */
    double *mx = malloc(sizeof(double) * (size_t)n * (size_t)n);
    if (mx) {
        for (size_t i = 0; i < (size_t)n * (size_t)n; i++)
            mx[i] = NAN;
        for (size_t i = 0; i < c->npairs; i++)
            if (!c->pairs[i].failed) {
                double *cell = &mx[(size_t)c->pairs[i].src * (size_t)n + (size_t)c->pairs[i].dst];
                if (isnan(*cell) || c->pairs[i].mbps > *cell)
                    *cell = c->pairs[i].mbps;
            }
        nr_json_key(&j, "matrix_mbps");
        nr_json_begin_array(&j);
        for (int s = 0; s < n; s++) {
            nr_json_begin_array(&j);
            for (int d = 0; d < n; d++)
                nr_json_double(&j, mx[(size_t)s * (size_t)n + (size_t)d]);
            nr_json_end_array(&j);
        }
        nr_json_end_array(&j);
        free(mx);
    }
    size_t nok = 0;
    const struct lm_pair **ok = lm_sorted_ok(c, &nok);
    nr_json_key(&j, "summary");
    nr_json_begin_object(&j);
    nr_json_kv_uint(&j, "pairs", c->npairs);
    nr_json_kv_uint(&j, "ok_pairs", nok);
    nr_json_kv_uint(&j, "failed_pairs", c->npairs - nok);
    double *x = malloc(sizeof(double) * (c->npairs ? c->npairs : 1));
    struct nr_stats s;
    if (ok && x && nok) {
        for (size_t i = 0; i < nok; i++)
            x[i] = ok[i]->mbps;
        nr_stats_compute(x, nok, &s);
        nr_json_kv_stats(&j, "mbps", &s);
    }
    nr_json_key(&j, "slowest");
    nr_json_begin_array(&j);
    for (size_t i = 0; ok && i < nok && i < (size_t)o->slowest; i++) {
        nr_json_begin_object(&j);
        lm_json_pair_id(&j, c, ok[i]);
        nr_json_kv_double(&j, "mbps", ok[i]->mbps);
        nr_json_end_object(&j);
    }
    nr_json_end_array(&j);
    nr_json_key(&j, "failed");
    nr_json_begin_array(&j);
    for (size_t i = 0; i < c->npairs; i++)
        if (c->pairs[i].failed) {
            nr_json_begin_object(&j);
            lm_json_pair_id(&j, c, &c->pairs[i]);
            nr_json_kv_string(&j, "error", c->pairs[i].error);
            nr_json_end_object(&j);
        }
    nr_json_end_array(&j);
    if (o->rtt && x) {
        size_t m = 0;
        for (size_t i = 0; i < c->npairs; i++)
            if (!isnan(c->pairs[i].rtt_us))
                x[m++] = c->pairs[i].rtt_us;
        if (m && nr_stats_compute(x, m, &s) == 0)
            nr_json_kv_stats(&j, "rtt_us", &s);
    }
    nr_json_end_object(&j);
    free(x);
    free(ok);
    return nr_mpi_json_end(&j, f);
}

/* Rank 0, when the job cannot go on: write what is known, then end every rank. */
#if defined(__GNUC__)
__attribute__((noreturn))
#endif
void lm_abort(struct lm_ctx *c, time_t started, struct nr_error *err)
{
    lm_print_table(c);
    char tagged[sizeof err->detail + 64];
    snprintf(tagged, sizeof tagged, "%s; ending every rank", err->detail);
    tagged[sizeof err->detail - 1] = '\0';
    memcpy(err->detail, tagged, sizeof err->detail);
    if (c->o->json && lm_write_json(c, started, err->code, err) != 0)
        fprintf(stderr, "%s: cannot write '%s'\n", NR__PROG, c->o->json);
    nr_error_report(NR__PROG, err);
    fflush(stdout);
    fflush(stderr);
    nr_sleep_s(0.2); /* the launcher forwards the lines above before MPI_Abort ends it (see nr_mpi.c) */
    MPI_Abort(MPI_COMM_WORLD, NR_EXIT_RUNTIME);
    _exit(NR_EXIT_RUNTIME);
}
