/* nr-linkmap: rank 0's text and JSON, read from the matrix (see linkmap.h). */
#include "linkmap.h"

void lm_append(char *buf, size_t len, const char *part)
{
    size_t u = strlen(buf);
    if (u + 1 < len)
        snprintf(buf + u, len - u, "%s%s", u ? "; " : "", part);
}

/* ---- what the matrix says ---- */

/* The ok directions' statistics (nr_stats: the median the mean of the two middle values); n 0 when none. */
static void lm_direction_stats(const float *m, size_t nn, struct nr_stats *s, size_t *failed)
{
    double sum = 0, sumsq = 0;
    memset(s, 0, sizeof *s);
    s->min = INFINITY;
    *failed = 0;
    for (size_t i = 0; i < nn; i++) {
        const float v = m[i];
        if (v == LM_FAILED)
            (*failed)++;
        if (!(v > 0) || isinf(v))
            continue;
        s->n++, sum += v, sumsq += (double)v * v;
        s->min = fmin(s->min, v), s->max = fmax(s->max, v);
    }
    if (!s->n) {
        s->min = 0;
        return;
    }
    size_t count = 0;
    s->avg = sum / (double)s->n;
    s->median = (lm_select_positive(m, nn, 1, (s->n - 1) / 2, &count) + lm_select_positive(m, nn, 1, s->n / 2, &count))
                / 2;
    s->stddev = s->n > 1 ? sqrt(fmax(0, (sumsq - sum * sum / (double)s->n) / (double)(s->n - 1))) : 0;
}

/* The `k` slowest ok directions, slowest first, into at[] (cell indices); returns how many. */
static size_t lm_slowest(const float *m, size_t nn, size_t *at, size_t k)
{
    size_t have = 0;
    for (size_t i = 0; k && i < nn; i++) {
        const float v = m[i];
        if (!(v > 0) || isinf(v) || (have == k && !(v < m[at[have - 1]])))
            continue;
        size_t j = have < k ? have++ : k - 1;
        for (; j > 0 && m[at[j - 1]] > v; j--)
            at[j] = at[j - 1];
        at[j] = i;
    }
    return have;
}

/* A suspect direction: its figure and its cell. */
struct lm_suspect {
    float v;
    size_t at;
};

static int lm_cmp_suspect(const void *a, const void *b)
{
    const struct lm_suspect *x = a, *y = b;
    if (x->v != y->v)
        return x->v < y->v ? -1 : 1; /* LM_FAILED (-1) before every rate */
    return x->at < y->at ? -1 : x->at > y->at;
}

/* The failed directions and those below `threshold`, failed first, then slowest first: *total of them, malloc'ed
 * (NULL with *total 0 when there are none or no memory: then -1). */
static int lm_find_suspects(const struct lm_ctx *c, double threshold, struct lm_suspect **out, size_t *total)
{
    const size_t nn = c->ncells;
    size_t cap = 0;
    *out = NULL, *total = 0;
    for (size_t i = 0; i < nn; i++) {
        const float v = c->matrix[i];
        if (!(v == LM_FAILED || (v > 0 && v < threshold)))
            continue;
        if (*total == cap) {
            struct lm_suspect *grown = realloc(*out, sizeof *grown * (cap = cap ? 2 * cap : 256));
            if (!grown) {
                free(*out), *out = NULL, *total = 0;
                return -1;
            }
            *out = grown;
        }
        (*out)[(*total)++] = (struct lm_suspect){v, i};
    }
    if (*total)
        qsort(*out, *total, sizeof **out, lm_cmp_suspect);
    return 0;
}

/* The first failure recorded for direction src -> dst (NULL: none kept). */
static const struct lm_failure *lm_failure_of(const struct lm_ctx *c, int src, int dst)
{
    for (size_t i = 0; i < c->nfailures; i++)
        if (c->failures[i].src == src && c->failures[i].dst == dst)
            return &c->failures[i];
    return NULL;
}

/* --suspect-below resolved: the option, else --recheck-below, else the link check's default floor. */
static double lm_suspect_fraction(const struct lm_opts *o)
{
    return o->suspect_below > 0 ? o->suspect_below : o->recheck_below > 0 ? o->recheck_below : 0.85;
}

/* ---- text ---- */

void lm_print_table(const struct lm_ctx *c)
{
    const int n = c->m->size;
    const size_t nn = c->ncells;
    if (!c->matrix)
        return;
    if (n <= LM_TABLE_MAX) {
        printf("# nr-linkmap: Mbit/s per direction (its best round), rows: sender, columns: receiver (FAIL: failed, "
               ".: not run)\n#%-4s %-16s", "src", "host");
        for (int d = 0; d < n; d++)
            printf(" %9d", d);
        printf("\n");
        for (int s = 0; s < n; s++) {
            printf("%5d %-16.16s", s, lm_host(c, s));
            for (int d = 0; d < n; d++) {
                const long at = lm_cell(c, s, d);
                const float v = at >= 0 ? c->matrix[at] : NAN;
                if (s == d)
                    printf(" %9s", "-");
                else if (isnan(v))
                    printf(" %9s", ".");
                else if (v == LM_FAILED)
                    printf(" %9s", "FAIL");
                else
                    printf(" %9.1f", v);
            }
            printf("\n");
        }
    }
    struct nr_stats s;
    size_t failed = 0;
    lm_direction_stats(c->matrix, nn, &s, &failed);
    printf("# directions: %zu ok, %zu failed (%llu streams in %d rounds)", s.n, failed,
           (unsigned long long)c->streams, c->rounds_run);
    if (s.n)
        printf("; Mbit/s min %.1f median %.1f max %.1f", s.min, s.median, s.max);
    printf("\n");
    size_t at[1000];
    const size_t k = lm_slowest(c->matrix, nn, at, (size_t)c->o->slowest < 1000 ? (size_t)c->o->slowest : 1000);
    for (size_t i = 0; i < k; i++) {
        int src, dst;
        lm_cell_dir(c, at[i], &src, &dst);
        printf("# slowest %zu: rank %d (%s) -> rank %d (%s): %.1f Mbit/s\n", i + 1, src, lm_host(c, src), dst,
               lm_host(c, dst), c->matrix[at[i]]);
    }
    if (c->rtt && n <= LM_TABLE_MAX) {
        printf("# round trip (%llu B, median of %d) us:\n", (unsigned long long)c->o->rtt_size, c->o->rtt_trials);
        for (size_t i = 0; i < nn; i++) {
            int src, dst;
            lm_cell_dir(c, i, &src, &dst);
            if (!isnan(c->rtt[i]))
                printf("#   %d -> %d: %.2f\n", src, dst, c->rtt[i]);
        }
    }
    fflush(stdout);
}

/* ---- JSON ---- */

static void lm_json_direction(struct nr_json *j, const struct lm_ctx *c, int src, int dst)
{
    nr_json_kv_int(j, "src", src);
    nr_json_kv_int(j, "dst", dst);
    nr_json_kv_string(j, "src_host", lm_host(c, src));
    nr_json_kv_string(j, "dst_host", lm_host(c, dst));
}

static void lm_json_options(struct nr_json *j, const struct lm_ctx *c)
{
    const struct lm_opts *o = c->o;
    nr_json_key(j, "options");
    nr_json_begin_object(j);
    nr_json_kv_int(j, "processes", c->m->size);
    nr_json_kv_string(j, "plan", o->plan_file ? NULL : o->plan);
    nr_json_kv_string(j, "plan_file", o->plan_file);
    nr_json_kv_string(j, "order", o->order);
    nr_json_kv_string(j, "shifts", o->shifts);
    nr_json_kv_string(j, "transport", o->transport);
    nr_json_kv_string(j, "bind_iface", o->iface);
    nr_json_kv_string(j, "bind_addr", o->addr);
    nr_json_kv_uint(j, "message_size_bytes", o->msg);
    nr_json_kv_int(j, "window", o->window);
    nr_json_kv_double(j, "time_s", o->time_s);
    nr_json_kv_double(j, "warmup", o->warmup);
    nr_json_kv_double(j, "round_timeout_s", c->rt);
    nr_json_kv_bool(j, "rtt", o->rtt);
    nr_json_kv_uint(j, "rtt_size_bytes", o->rtt_size);
    nr_json_kv_int(j, "rtt_trials", o->rtt_trials);
    nr_json_kv_double(j, "recheck_below", o->recheck_below);
    nr_json_kv_int(j, "recheck_max", o->recheck_max);
    nr_json_kv_int(j, "recheck_rounds", o->recheck_rounds);
    nr_json_kv_int(j, "recheck_streams", o->recheck_streams);
    nr_json_kv_string(j, "tree", o->tree);
    nr_json_kv_double(j, "time_limit_s", o->time_limit_s);
    nr_json_kv_double(j, "suspect_below", lm_suspect_fraction(o));
    nr_json_kv_int(j, "suspect_max", o->suspect_max);
    nr_json_end_object(j);
}

/* recheck: what was chosen, every measurement (pairs[], round by round) and the directions left with the reason */
static void lm_json_recheck(struct nr_json *j, const struct lm_ctx *c)
{
    int count[LM_RC_FAILED + 1] = {0};
    for (int i = 0; i < c->rc_ndir; i++)
        count[c->rc_dir[i].state]++;
    nr_json_key(j, "recheck");
    nr_json_begin_object(j);
    nr_json_kv_double(j, "below", c->o->recheck_below);
    nr_json_kv_int(j, "max", c->o->recheck_max);
    nr_json_kv_int(j, "rounds_max", c->o->recheck_rounds);
    nr_json_kv_string(j, "batches", c->tree_leaf ? "cables" : "nodes");
    nr_json_kv_double(j, "median_link_mbps", c->recheck_median);
    nr_json_kv_uint(j, "below_count", c->rc_below);
    nr_json_kv_int(j, "taken", c->rc_ndir);
    nr_json_kv_int(j, "rounds", c->rc_rounds);
    nr_json_kv_int(j, "cleared", count[LM_RC_CLEARED]);
    nr_json_kv_int(j, "slow", count[LM_RC_SLOW]);
    nr_json_kv_int(j, "failed", count[LM_RC_FAILED]);
    nr_json_kv_int(j, "left", count[LM_RC_PENDING]);
    nr_json_key(j, "pairs");
    nr_json_begin_array(j);
    for (int i = 0; i < c->nrecheck; i++) {
        const struct lm_recheck *x = &c->recheck[i];
        nr_json_begin_object(j);
        lm_json_direction(j, c, x->src, x->dst);
        nr_json_kv_int(j, "round", x->round);
        nr_json_kv_int(j, "streams", x->streams);
        nr_json_kv_double(j, "mbps_before", x->mbps_before);
        nr_json_kv_double(j, "mbps_after", x->mbps_after);
        nr_json_kv_string(j, "outcome", lm_rc_state_name(x->outcome));
        nr_json_end_object(j);
    }
    nr_json_end_array(j);
    /* the directions taken and not resolved: never measured, or slow in a batch and not measured alone */
    nr_json_key(j, "left_pairs");
    nr_json_begin_array(j);
    for (int i = 0; i < c->rc_ndir; i++) {
        const struct lm_rc_dir *d = &c->rc_dir[i];
        if (d->state != LM_RC_PENDING)
            continue;
        nr_json_begin_object(j);
        lm_json_direction(j, c, d->src, d->dst);
        nr_json_kv_double(j, "mbps_before", d->before);
        nr_json_kv_int(j, "last_streams", d->last_streams);
        nr_json_kv_double(j, "last_mbps", d->last_mbps);
        nr_json_kv_string(j, "reason", c->rc_stopped ? c->rc_stopped : "the job ended");
        nr_json_end_object(j);
    }
    nr_json_end_array(j);
    nr_json_end_object(j);
}

static void lm_json_rounds(struct nr_json *j, const struct lm_ctx *c)
{
    nr_json_key(j, "rounds");
    nr_json_begin_array(j);
    for (int k = 0; k < c->rounds_run; k++) {
        const struct lm_round *rd = &c->rounds[k];
        nr_json_begin_object(j);
        nr_json_kv_int(j, "index", rd->index);
        nr_json_kv_double(j, "wall_s", rd->wall_s);
        nr_json_kv_int(j, "streams", rd->streams);
        nr_json_kv_int(j, "failed_pairs", rd->failed);
        nr_json_kv_double(j, "min_mbps", rd->lo_mbps);
        nr_json_kv_double(j, "max_mbps", rd->hi_mbps);
        nr_json_end_object(j);
    }
    nr_json_end_array(j);
    lm_json_recheck(j, c);
}

/* cpu_limits[rank]: the CPU cgroup each rank ran in, its quota and how long it throttled the rank between the
 * rank's start and its last report (null: no report, or no cgroup found) */
static void lm_json_cpu_limits(struct nr_json *j, const struct lm_ctx *c)
{
    nr_json_key(j, "cpu_limits");
    nr_json_begin_array(j);
    for (int r = 0; c->cpu_first && c->cpu_last && r < c->m->size; r++) {
        const struct nr_cpu_limit *a = &c->cpu_first[r], *b = &c->cpu_last[r];
        if (!a->ok || !b->ok) {
            nr_json_null(j);
            continue;
        }
        nr_json_begin_object(j);
        nr_json_kv_int(j, "rank", r);
        nr_json_kv_string(j, "host", lm_host(c, r));
        nr_json_kv_string(j, "cgroup", b->cgroup);
        nr_json_kv_int(j, "quota_us", b->quota_us);
        nr_json_kv_int(j, "period_us", b->period_us);
        nr_json_kv_uint(j, "throttled_ns", b->throttled_ns >= a->throttled_ns ? b->throttled_ns - a->throttled_ns : 0);
        nr_json_end_object(j);
    }
    nr_json_end_array(j);
}

/* Sparse: every receiver's figures together, receiver r's at (*col_off)[r] .. (*col_off)[r + 1] - 1 (4 bytes a cell
 * and 8 a rank more, for the per-node medians); -1 when out of memory. */
static int lm_by_receiver(const struct lm_ctx *c, size_t **col_off, float **by_col)
{
    const size_t n = (size_t)c->m->size;
    size_t *off = calloc(n + 1, sizeof *off), *at = malloc(sizeof *at * (n ? n : 1));
    float *v = malloc(sizeof *v * (c->ncells ? c->ncells : 1));
    if (!off || !at || !v) {
        free(off), free(at), free(v);
        return -1;
    }
    for (size_t i = 0; i < c->ncells; i++)
        off[c->recv_of[i] + 1]++;
    for (size_t r = 0; r < n; r++)
        off[r + 1] += off[r], at[r] = off[r];
    for (size_t i = 0; i < c->ncells; i++)
        v[at[c->recv_of[i]]++] = c->matrix[i];
    free(at);
    *col_off = off, *by_col = v;
    return 0;
}

/* per_node[rank]: the upper median of the rank's ok directions as sender and as receiver, their failures, the
 * payload its receivers counted and it counted */
static int lm_json_per_node(struct nr_json *j, const struct lm_ctx *c)
{
    const size_t n = (size_t)c->m->size;
    float *scratch = malloc(sizeof(float) * (n ? n : 1)), *by_col = NULL;
    size_t *col_off = NULL;
    if (!scratch || (c->sparse && lm_by_receiver(c, &col_off, &by_col) < 0)) {
        free(scratch);
        return -1;
    }
    nr_json_key(j, "per_node");
    nr_json_begin_array(j);
    for (size_t r = 0; r < n; r++) {
        size_t begin, end;
        lm_row(c, r, &begin, &end);
        /* the rank's column: dense, every n-th cell from r; sparse, its run of by_col */
        const float *row = c->matrix + begin, *col = c->sparse ? by_col + col_off[r] : c->matrix + r;
        const size_t in_row = end - begin, in_col = c->sparse ? col_off[r + 1] - col_off[r] : n,
                     stride = c->sparse ? 1 : n;
        size_t sends = 0, receives = 0, failed_out = 0, failed_in = 0;
        const double out = lm_upper_median(row, in_row, 1, scratch, &sends);
        const double in = lm_upper_median(col, in_col, stride, scratch, &receives);
        for (size_t i = 0; i < in_row; i++)
            failed_out += row[i] == LM_FAILED;
        for (size_t i = 0; i < in_col; i++)
            failed_in += col[i * stride] == LM_FAILED;
        nr_json_begin_object(j);
        nr_json_kv_int(j, "rank", (int64_t)r);
        nr_json_kv_string(j, "host", lm_host(c, (int)r));
        nr_json_kv_double(j, "send_median_mbps", out);
        nr_json_kv_double(j, "recv_median_mbps", in);
        nr_json_kv_uint(j, "sends", sends);
        nr_json_kv_uint(j, "receives", receives);
        nr_json_kv_uint(j, "failed_sends", failed_out);
        nr_json_kv_uint(j, "failed_receives", failed_in);
        nr_json_kv_uint(j, "sent_bytes", c->sent_bytes[r]);
        nr_json_kv_uint(j, "received_bytes", c->recv_bytes[r]);
        nr_json_end_object(j);
    }
    nr_json_end_array(j);
    free(scratch), free(col_off), free(by_col);
    return 0;
}

/* suspect_rule and suspects[]: every failed direction and every one below --suspect-below x the upper median link,
 * failed first, then slowest first, at most --suspect-max listed (the matrix has them all) */
static int lm_json_suspects(struct nr_json *j, const struct lm_ctx *c, struct nr_error *err)
{
    const double fraction = lm_suspect_fraction(c->o), median = lm_median_link(c, err);
    const double threshold = isnan(median) ? 0 : fraction * median;
    struct lm_suspect *s = NULL;
    size_t total = 0;
    if (err->code < 0 || lm_find_suspects(c, threshold, &s, &total) < 0)
        return -1;
    const size_t listed = total < (size_t)c->o->suspect_max ? total : (size_t)c->o->suspect_max;
    nr_json_key(j, "suspect_rule");
    nr_json_begin_object(j);
    nr_json_kv_double(j, "below", fraction);
    nr_json_kv_double(j, "median_link_mbps", median);
    nr_json_kv_double(j, "threshold_mbps", isnan(median) ? NAN : threshold);
    nr_json_kv_uint(j, "total", total);
    nr_json_kv_uint(j, "listed", listed);
    nr_json_end_object(j);
    nr_json_key(j, "suspects");
    nr_json_begin_array(j);
    for (size_t i = 0; i < listed; i++) {
        int src, dst;
        lm_cell_dir(c, s[i].at, &src, &dst);
        const float v = s[i].v;
        nr_json_begin_object(j);
        lm_json_direction(j, c, src, dst);
        if (v == LM_FAILED) {
            const struct lm_failure *f = lm_failure_of(c, src, dst);
            nr_json_kv_string(j, "status", "failed");
            nr_json_kv_double(j, "mbps", NAN);
            if (f) {
                nr_json_kv_int(j, "round", f->round);
                nr_json_kv_string(j, "error", f->error);
            }
        } else {
            nr_json_kv_string(j, "status", "slow");
            nr_json_kv_double(j, "mbps", v);
            nr_json_kv_double(j, "share", v / median);
        }
        if (c->rtt)
            nr_json_kv_double(j, "rtt_us", c->rtt[s[i].at]);
        nr_json_end_object(j);
    }
    nr_json_end_array(j);
    free(s);
    return 0;
}

static void lm_json_summary(struct nr_json *j, const struct lm_ctx *c)
{
    const size_t nn = c->ncells;
    struct nr_stats s;
    size_t failed = 0;
    lm_direction_stats(c->matrix, nn, &s, &failed);
    nr_json_key(j, "summary");
    nr_json_begin_object(j);
    nr_json_kv_uint(j, "pairs", s.n + failed);
    nr_json_kv_uint(j, "ok_pairs", s.n);
    nr_json_kv_uint(j, "failed_pairs", failed);
    nr_json_kv_uint(j, "streams", c->streams);
    if (s.n)
        nr_json_kv_stats(j, "mbps", &s);
    nr_json_key(j, "slowest");
    nr_json_begin_array(j);
    size_t at[1000];
    const size_t k = lm_slowest(c->matrix, nn, at, (size_t)c->o->slowest < 1000 ? (size_t)c->o->slowest : 1000);
    for (size_t i = 0; i < k; i++) {
        int src, dst;
        lm_cell_dir(c, at[i], &src, &dst);
        nr_json_begin_object(j);
        lm_json_direction(j, c, src, dst);
        nr_json_kv_double(j, "mbps", c->matrix[at[i]]);
        nr_json_end_object(j);
    }
    nr_json_end_array(j);
    nr_json_key(j, "failed");
    nr_json_begin_array(j);
    for (size_t i = 0; i < c->nfailures; i++) {
        nr_json_begin_object(j);
        nr_json_kv_int(j, "round", c->failures[i].round);
        lm_json_direction(j, c, c->failures[i].src, c->failures[i].dst);
        nr_json_kv_string(j, "error", c->failures[i].error);
        nr_json_end_object(j);
    }
    nr_json_end_array(j);
    if (c->rtt) {
        struct nr_stats r;
        size_t none = 0;
        lm_direction_stats(c->rtt, nn, &r, &none);
        if (r.n)
            nr_json_kv_stats(j, "rtt_us", &r);
    }
    nr_json_end_object(j);
}

int lm_write_json(const struct lm_ctx *c, time_t started, int status, const struct nr_error *failure)
{
    const struct lm_opts *o = c->o;
    const int n = c->m->size;
    struct nr_error werr = {0};
    const bool planned = c->matrix && c->rounds;
    bool matrix_ok = false, rtt_ok = false;
    if (planned && c->matrix_path[0]) { /* the files first: the document names only what was written */
        matrix_ok = lm_matrix_write(c, c->matrix_path, c->matrix, &werr) == NR_OK;
        rtt_ok = c->rtt && lm_matrix_write(c, c->rtt_path, c->rtt, &werr) == NR_OK;
        if (werr.code < 0)
            nr_error_report(NR__PROG, &werr);
    }
    if (!o->json)
        return planned && c->matrix_path[0] && !matrix_ok ? -1 : 0;
    struct nr_json j;
    FILE *f = nr_mpi_json_begin(&j, o->json, NR__PROG, "linkmap", started, status, failure);
    if (!f)
        return -1;
    nr_json_key(&j, "hosts");
    nr_json_begin_array(&j);
    for (int r = 0; c->hosts && r < n; r++)
        nr_json_string(&j, c->hosts[r]);
    nr_json_end_array(&j);
    lm_json_options(&j, c);
    if (!planned) /* the run failed before its plan was made: the head and the options only */
        return nr_mpi_json_end(&j, f);
    nr_json_kv_string(&j, "plan", c->plan_name);
    nr_json_kv_int(&j, "rounds_planned", c->nplanned);
    nr_json_kv_int(&j, "rounds_run", c->rounds_run);
    nr_json_kv_double(&j, "elapsed_s", MPI_Wtime() - c->started_s);
    nr_json_kv_string(&j, "matrix_file", matrix_ok ? c->matrix_path : NULL);
    if (c->rtt)
        nr_json_kv_string(&j, "rtt_matrix_file", rtt_ok ? c->rtt_path : NULL);
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
    lm_json_rounds(&j, c);
    lm_json_cpu_limits(&j, c);
    struct nr_error serr = {0};
    bool whole = lm_json_per_node(&j, c) == 0 && lm_json_suspects(&j, c, &serr) == 0;
    lm_json_summary(&j, c);
    int rc = nr_mpi_json_end(&j, f);
    if (!whole) {
        fprintf(stderr, "%s: out of memory for the per-node summaries or the suspects in '%s'\n", NR__PROG, o->json);
        rc = -1;
    }
    return rc < 0 || (c->matrix_path[0] && !matrix_ok) ? -1 : 0;
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
    if (lm_write_json(c, started, err->code, err) != 0)
        fprintf(stderr, "%s: cannot write '%s'\n", NR__PROG, c->o->json ? c->o->json : c->matrix_path);
    nr_error_report(NR__PROG, err);
    fflush(stdout);
    fflush(stderr);
    nr_sleep_s(0.2); /* the launcher forwards the lines above before MPI_Abort ends it (see nr_mpi.c) */
    MPI_Abort(MPI_COMM_WORLD, NR_EXIT_RUNTIME);
    _exit(NR_EXIT_RUNTIME);
}
