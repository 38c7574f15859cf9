/* nr-linkmap: rank 0's record of the rounds, one float a direction, and the statistics read from it without
 * copies (see linkmap.h). */
#include "linkmap.h"

bool lm_sparse_smaller(uint64_t n, uint64_t cells)
{
    /* sparse: a 24-byte head, 8 bytes a row offset, 8 a cell (receiver, figure); dense: 16 and 4 a cell of n x n */
    return 24 + 8 * (n + 1) + 8 * cells < 16 + 4 * n * n;
}

static int lm_cmp_u32(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Rank 0: the sparse index of the plan's directions: the plan read through twice (each sender's count, then its
 * receivers), each row sorted and a direction in two rounds kept once. */
static int lm_sparse_index(struct lm_ctx *c, struct nr_error *err)
{
    const size_t n = (size_t)c->m->size;
    uint64_t *off = calloc(n + 1, sizeof *off), *at = malloc(sizeof *at * n);
    int rc = off && at ? NR_OK : nr_error_set(err, NR_E_NOMEM, "out of memory for the matrix's index");
    for (int k = 0; rc == NR_OK && k < c->nplanned; k++)
        if ((rc = lm_plan_round(c, k, err)) == NR_OK)
            for (size_t s = 0; s < n; s++)
                off[s + 1] += c->dst_of[s] >= 0;
    for (size_t s = 0; rc == NR_OK && s < n; s++)
        off[s + 1] += off[s], at[s] = off[s];
    uint32_t *recv = NULL;
    if (rc == NR_OK && !(recv = malloc(sizeof *recv * (off[n] ? off[n] : 1))))
        rc = nr_error_set(err, NR_E_NOMEM, "out of memory for the matrix's index (%llu directions)",
                          (unsigned long long)off[n]);
    for (int k = 0; rc == NR_OK && k < c->nplanned; k++)
        if ((rc = lm_plan_round(c, k, err)) == NR_OK)
            for (size_t s = 0; s < n; s++)
                if (c->dst_of[s] >= 0)
                    recv[at[s]++] = (uint32_t)c->dst_of[s];
    if (rc < 0) {
        free(off), free(at), free(recv);
        return rc;
    }
    uint64_t kept = 0;
    for (size_t s = 0; s < n; s++) { /* rows sorted, a repeated direction once, compacted in place */
        const uint64_t begin = off[s], end = off[s + 1];
        qsort(recv + begin, (size_t)(end - begin), sizeof *recv, lm_cmp_u32);
        off[s] = kept;
        for (uint64_t i = begin; i < end; i++)
            if (i == begin || recv[i] != recv[i - 1])
                recv[kept++] = recv[i];
    }
    off[n] = kept;
    uint32_t *fit = realloc(recv, sizeof *recv * (kept ? kept : 1));
    free(at);
    c->sparse = true, c->row_off = off, c->recv_of = fit ? fit : recv, c->ncells = (size_t)kept;
    return NR_OK;
}

int lm_matrix_alloc(struct lm_ctx *c, struct nr_error *err)
{
    const size_t n = (size_t)c->m->size;
    c->sent_bytes = calloc(n, sizeof *c->sent_bytes);
    c->recv_bytes = calloc(n, sizeof *c->recv_bytes);
    if (!c->sent_bytes || !c->recv_bytes)
        return nr_error_set(err, NR_E_NOMEM, "out of memory for the byte counts on rank 0");
    const uint64_t most = (uint64_t)n * (n - (n > 0)); /* every direction */
    int rc;
    if (lm_sparse_smaller(n, c->plan.streams < most ? c->plan.streams : most)) {
        if ((rc = lm_sparse_index(c, err)) < 0)
            return rc;
    } else
        c->ncells = n * n;
    const size_t cells = c->ncells ? c->ncells : 1;
    c->matrix = malloc(sizeof(float) * cells);
    c->rtt = c->o->rtt ? malloc(sizeof(float) * cells) : NULL;
    if (!c->matrix || (c->o->rtt && !c->rtt))
        return nr_error_set(err, NR_E_NOMEM, "out of memory for the matrix on rank 0 (%zu %s cells)", c->ncells,
                            c->sparse ? "sparse" : "dense");
    for (size_t i = 0; i < c->ncells; i++)
        c->matrix[i] = NAN;
    for (size_t i = 0; c->rtt && i < c->ncells; i++)
        c->rtt[i] = NAN;
    return NR_OK;
}

long lm_cell(const struct lm_ctx *c, int s, int d)
{
    const size_t n = (size_t)c->m->size;
    if (s == d || s < 0 || d < 0 || (size_t)s >= n || (size_t)d >= n)
        return -1;
    if (!c->sparse)
        return (long)((size_t)s * n + (size_t)d);
    size_t lo = (size_t)c->row_off[s], hi = (size_t)c->row_off[s + 1];
    while (lo < hi) { /* the first receiver >= d */
        const size_t mid = lo + (hi - lo) / 2;
        if (c->recv_of[mid] < (uint32_t)d)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < (size_t)c->row_off[s + 1] && c->recv_of[lo] == (uint32_t)d ? (long)lo : -1;
}

void lm_cell_dir(const struct lm_ctx *c, size_t i, int *s, int *d)
{
    const size_t n = (size_t)c->m->size;
    if (!c->sparse) {
        *s = (int)(i / n), *d = (int)(i % n);
        return;
    }
    size_t lo = 0, hi = n; /* the last row whose first cell is at or before i */
    while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        if (c->row_off[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    *s = (int)lo, *d = (int)c->recv_of[i];
}

void lm_matrix_free(struct lm_ctx *c)
{
    for (size_t i = 0; i < c->nfailures; i++)
        free(c->failures[i].error);
    free(c->failures), free(c->matrix), free(c->rtt), free(c->sent_bytes), free(c->recv_bytes);
    free(c->row_off), free(c->recv_of);
    c->failures = NULL, c->matrix = c->rtt = NULL, c->sent_bytes = c->recv_bytes = NULL;
    c->row_off = NULL, c->recv_of = NULL, c->ncells = 0, c->sparse = false;
}

static void lm_add_failure(struct lm_ctx *c, int round, int src, int dst, const char *error)
{
    if (c->nfailures == c->failures_cap) {
        size_t cap = c->failures_cap ? 2 * c->failures_cap : 64;
        struct lm_failure *grown = realloc(c->failures, sizeof *grown * cap);
        if (!grown)
            return; /* the matrix still marks the direction failed; only its text is lost */
        c->failures = grown, c->failures_cap = cap;
    }
    c->failures[c->nfailures++] = (struct lm_failure){round, src, dst, strdup(error)};
}

/* A direction's figure in one round as the link verdict reads it: the rate after the warm-up where the stream had
 * one, else the whole stream's. */
static double lm_figure(const struct lm_report *d)
{
    double steady = d->recv.steady_seconds > 0 ? nr_mbps(d->recv.steady_bytes, d->recv.steady_seconds) : NAN;
    return steady > 0 && isfinite(steady) ? steady : nr_mbps(d->recv.bytes, d->recv.seconds);
}

void lm_record(struct lm_ctx *c, int round, double wall_s)
{
    const size_t n = (size_t)c->m->size;
    if (c->rounds_run == c->rounds_cap) {
        int cap = c->rounds_cap ? 2 * c->rounds_cap : 64;
        struct lm_round *grown = realloc(c->rounds, sizeof *grown * (size_t)cap);
        if (!grown) {
            printf("# round %d: out of memory for its line (its directions are recorded)\n", round);
        } else
            c->rounds = grown, c->rounds_cap = cap;
    }
    struct lm_round line = {round, wall_s, 0, 0, INFINITY, 0};
    for (size_t s = 0; s < n; s++) {
        const int d = c->dst_of[s];
        if (d < 0)
            continue;
        const struct lm_report *S = c->missing[s] ? NULL : &c->reports[s];
        const struct lm_report *D = c->missing[d] ? NULL : &c->reports[d];
        char why[1024] = "", part[400];
        if (!D) {
            snprintf(part, sizeof part, "receiver rank %d (%s) sent no report (hung or dead)", d, lm_host(c, d));
            lm_append(why, sizeof why, part);
        } else if (D->recv.failed) {
            snprintf(part, sizeof part, "receiver: %s", D->recv.error);
            lm_append(why, sizeof why, part);
        }
        if (!S) {
            snprintf(part, sizeof part, "sender rank %d (%s) sent no report (hung or dead)", (int)s,
                     lm_host(c, (int)s));
            lm_append(why, sizeof why, part);
        } else if (S->send.failed) {
            snprintf(part, sizeof part, "sender: %s", S->send.error);
            lm_append(why, sizeof why, part);
        }
        const double v = D ? lm_figure(D) : NAN;
        const long at = lm_cell(c, (int)s, d);
        float spare = NAN; /* a direction the index lacks (none: the plan's and its rechecks' are all in it) */
        float *cell = at >= 0 ? &c->matrix[at] : &spare;
        if (!why[0] && !(v > 0 && isfinite(v)))
            snprintf(why, sizeof why, "moved nothing");
        line.streams++;
        c->streams++;
        if (D)
            c->sent_bytes[s] += D->recv.bytes, c->recv_bytes[d] += D->recv.bytes;
        if (S && c->rtt && S->send.rtt_us >= 0 && at >= 0) {
            float *rtt = &c->rtt[at];
            if (isnan(*rtt) || S->send.rtt_us < *rtt)
                *rtt = (float)S->send.rtt_us;
        }
        if (why[0]) {
            char full[1200];
            snprintf(full, sizeof full, "round %d, rank %d (%s) -> rank %d (%s): %s", round, (int)s,
                     lm_host(c, (int)s), d, lm_host(c, d), why);
            *cell = LM_FAILED; /* a failure stands whatever another round reads */
            line.failed++;
            lm_add_failure(c, round, (int)s, d, full);
            printf("# FAILED %s\n", full);
            if (round >= c->nplanned)
                lm_recheck_read(c, (int)s, d, NAN);
            continue;
        }
        if (*cell != LM_FAILED && !(*cell >= v))
            *cell = (float)v;
        line.lo_mbps = fmin(line.lo_mbps, v), line.hi_mbps = fmax(line.hi_mbps, v);
        if (round >= c->nplanned)
            lm_recheck_read(c, (int)s, d, v);
    }
    for (size_t r = 0; r < n; r++)
        if (!c->missing[r])
            c->rejected_total += c->reports[r].rejected;
    if (line.lo_mbps > line.hi_mbps)
        line.lo_mbps = line.hi_mbps = 0;
    if (c->rounds_run < c->rounds_cap)
        c->rounds[c->rounds_run++] = line;
    c->longest_round_s = fmax(c->longest_round_s, wall_s);
    printf("# round %d (%d of %d): %d streams, %d failed, %.3f s, %.1f .. %.1f Mbit/s\n", round, c->rounds_run,
           c->nrounds, line.streams, line.failed, wall_s, line.lo_mbps, line.hi_mbps);
    fflush(stdout);
}

/* ---- selection without copies: positive floats order as their bit patterns ---- */

/* The exact k-th smallest of the positive finite values fed, in two passes over them and 512 KB: the first pass
 * counts the values by the upper 16 bits of their pattern, the second, inside the bucket that holds the k-th, by
 * the lower 16. */
struct lm_select {
    uint64_t *hist;
    uint64_t total, below; /* values fed in pass 1; pass 2: values in the buckets under the chosen one */
    uint64_t k;
    uint32_t top;
    int pass;
};

static uint32_t lm_bits(float v)
{
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

static void lm_select_feed(struct lm_select *s, float v)
{
    if (!(v > 0) || isinf(v))
        return;
    const uint32_t b = lm_bits(v);
    if (s->pass == 1)
        s->hist[b >> 16]++, s->total++;
    else if (b >> 16 == s->top)
        s->hist[b & 0xffff]++;
}

/* After pass 1: look for the k-th of s->total; false when there is none. */
static bool lm_select_next(struct lm_select *s, uint64_t k)
{
    if (k >= s->total)
        return false;
    uint64_t cum = 0;
    uint32_t t = 0;
    while (cum + s->hist[t] <= k)
        cum += s->hist[t++];
    s->top = t, s->below = cum, s->k = k, s->pass = 2;
    memset(s->hist, 0, sizeof(uint64_t) * 65536);
    return true;
}

static double lm_select_result(const struct lm_select *s)
{
    uint64_t cum = s->below;
    uint32_t low = 0;
    while (cum + s->hist[low] <= s->k)
        cum += s->hist[low++];
    const uint32_t b = s->top << 16 | low;
    float v;
    memcpy(&v, &b, sizeof v);
    return v;
}

static int lm_select_begin(struct lm_select *s, struct nr_error *err)
{
    memset(s, 0, sizeof *s);
    s->pass = 1;
    s->hist = calloc(65536, sizeof(uint64_t));
    return s->hist ? NR_OK : nr_error_set(err, NR_E_NOMEM, "out of memory for a median");
}

/* Feed every link's figure, its slower measured direction: a failed direction leaves the other to stand for it.
 * A link is fed from its cell a -> b with a < b, or from b -> a when the matrix has no cell a -> b. */
static void lm_feed_links(const struct lm_ctx *c, struct lm_select *s)
{
    const size_t n = (size_t)c->m->size;
    for (size_t a = 0; a < n; a++) {
        size_t i, end;
        for (lm_row(c, a, &i, &end); i < end; i++) {
            const size_t b = lm_recv_at(c, a, i);
            const long back = b == a ? -1 : lm_cell(c, (int)b, (int)a);
            if (b == a || (b < a && back >= 0))
                continue;
            const float x = c->matrix[i], y = back >= 0 ? c->matrix[back] : NAN;
            const bool okx = x > 0, oky = y > 0;
            if (okx || oky)
                lm_select_feed(s, okx && oky ? fminf(x, y) : okx ? x : y);
        }
    }
}

double lm_median_link(const struct lm_ctx *c, struct nr_error *err)
{
    struct lm_select s;
    if (lm_select_begin(&s, err) < 0)
        return NAN;
    lm_feed_links(c, &s);
    double median = NAN;
    if (lm_select_next(&s, s.total / 2)) {
        lm_feed_links(c, &s);
        median = lm_select_result(&s);
    }
    free(s.hist);
    return median;
}

double lm_select_positive(const float *v, size_t n, size_t stride, size_t k, size_t *count)
{
    struct lm_select s;
    struct nr_error ignored = {0};
    *count = 0;
    if (lm_select_begin(&s, &ignored) < 0)
        return NAN;
    for (size_t i = 0; i < n; i++)
        lm_select_feed(&s, v[i * stride]);
    *count = (size_t)s.total;
    double out = NAN;
    if (lm_select_next(&s, k)) {
        for (size_t i = 0; i < n; i++)
            lm_select_feed(&s, v[i * stride]);
        out = lm_select_result(&s);
    }
    free(s.hist);
    return out;
}

/* Quickselect: v[k] in place, with the smaller values before it. */
static float lm_qselect(float *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        const float pivot = v[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                const float t = v[i];
                v[i] = v[j], v[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            break;
    }
    return v[k];
}

double lm_upper_median(const float *v, size_t n, size_t stride, float *scratch, size_t *count)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i * stride] > 0 && !isinf(v[i * stride]))
            scratch[m++] = v[i * stride];
    *count = m;
    return m ? lm_qselect(scratch, m, m / 2) : NAN;
}

/* ---- linkmatrix.bin ---- */

static void lm_put_le32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8), p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static void lm_put_le64(unsigned char *p, uint64_t v)
{
    lm_put_le32(p, (uint32_t)v), lm_put_le32(p + 4, (uint32_t)(v >> 32));
}

/* Buffered little-endian output: words into buf, written out when full (ok false after a short write). */
struct lm_out {
    FILE *f;
    unsigned char buf[1 << 16];
    size_t used;
    bool ok;
};

static void lm_out_word(struct lm_out *o, uint32_t v)
{
    if (o->used + 4 > sizeof o->buf) {
        o->ok = o->ok && fwrite(o->buf, 1, o->used, o->f) == o->used;
        o->used = 0;
    }
    lm_put_le32(o->buf + o->used, v);
    o->used += 4;
}

static void lm_out_u64(struct lm_out *o, uint64_t v)
{
    lm_out_word(o, (uint32_t)v), lm_out_word(o, (uint32_t)(v >> 32));
}

/* The dense form: the head, then every row of n figures (NAN where the matrix has no figure). */
static void lm_write_dense(struct lm_out *o, const struct lm_ctx *c, const float *values)
{
    const size_t n = (size_t)c->m->size;
    unsigned char head[16] = "NRLMAT1"; /* the magic's 8th byte is its NUL */
    lm_put_le32(head + 8, (uint32_t)n);
    lm_put_le32(head + 12, 0);
    o->ok = fwrite(head, 1, sizeof head, o->f) == sizeof head;
    float *row = malloc(sizeof(float) * (n ? n : 1));
    o->ok = o->ok && row;
    for (size_t s = 0; o->ok && s < n; s++) {
        size_t i, end;
        for (size_t d = 0; d < n; d++)
            row[d] = NAN;
        for (lm_row(c, s, &i, &end); i < end; i++)
            row[lm_recv_at(c, s, i)] = values[i];
        row[s] = NAN;
        for (size_t d = 0; d < n; d++)
            lm_out_word(o, lm_bits(row[d]));
    }
    free(row);
}

/* The sparse form: the head and the count of cells with a figure, each row's first cell, the receivers, the
 * figures (docs/json-schema.md). */
static void lm_write_sparse(struct lm_out *o, const struct lm_ctx *c, const float *values, uint64_t cells)
{
    const size_t n = (size_t)c->m->size;
    unsigned char head[24] = "NRLMAT2";
    lm_put_le32(head + 8, (uint32_t)n);
    lm_put_le32(head + 12, 1); /* layout 1: sparse */
    lm_put_le64(head + 16, cells);
    o->ok = fwrite(head, 1, sizeof head, o->f) == sizeof head;
    uint64_t at = 0;
    for (size_t s = 0; s < n; s++) {
        size_t i, end;
        lm_out_u64(o, at);
        for (lm_row(c, s, &i, &end); i < end; i++)
            at += !isnan(values[i]) && lm_recv_at(c, s, i) != s;
    }
    lm_out_u64(o, at);
    for (int pass = 0; pass < 2; pass++) /* the receivers, then the figures */
        for (size_t s = 0; s < n; s++) {
            size_t i, end;
            for (lm_row(c, s, &i, &end); i < end; i++) {
                const size_t d = lm_recv_at(c, s, i);
                if (!isnan(values[i]) && d != s)
                    lm_out_word(o, pass == 0 ? (uint32_t)d : lm_bits(values[i]));
            }
        }
}

int lm_matrix_write(const struct lm_ctx *c, const char *path, const float *values, struct nr_error *err)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return nr_error_set(err, NR_E_USAGE, "matrix file name too long: '%s'", path);
    const size_t n = (size_t)c->m->size;
    uint64_t cells = 0; /* the directions with a figure */
    for (size_t s = 0; s < n; s++) {
        size_t i, end;
        for (lm_row(c, s, &i, &end); i < end; i++)
            cells += !isnan(values[i]) && lm_recv_at(c, s, i) != s;
    }
    struct lm_out *o = malloc(sizeof *o);
    if (!o)
        return nr_error_set(err, NR_E_NOMEM, "out of memory to write '%s'", path);
    o->used = 0, o->ok = true;
    if (!(o->f = fopen(tmp, "wb"))) {
        free(o);
        return nr_error_sys(err, NR_E_IO, "cannot write '%s'", tmp);
    }
    if (lm_sparse_smaller(n, cells))
        lm_write_sparse(o, c, values, cells);
    else
        lm_write_dense(o, c, values);
    bool ok = o->ok && fwrite(o->buf, 1, o->used, o->f) == o->used;
    ok = fflush(o->f) == 0 && !ferror(o->f) && ok;
    ok = fclose(o->f) == 0 && ok;
    free(o);
    if (!ok || rename(tmp, path) != 0) {
        int rc = nr_error_sys(err, NR_E_IO, "cannot write '%s'", path);
        unlink(tmp);
        return rc;
    }
    return NR_OK;
}
