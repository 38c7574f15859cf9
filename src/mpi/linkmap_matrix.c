/* nr-linkmap: rank 0's record of the rounds, one float a direction, and the statistics read from it without
 * copies (see linkmap.h). */
#include "linkmap.h"

int lm_matrix_alloc(struct lm_ctx *c, struct nr_error *err)
{
    const size_t n = (size_t)c->m->size, nn = n * n;
    c->matrix = malloc(sizeof(float) * nn);
    c->rtt = c->o->rtt ? malloc(sizeof(float) * nn) : NULL;
    c->sent_bytes = calloc(n, sizeof *c->sent_bytes);
    c->recv_bytes = calloc(n, sizeof *c->recv_bytes);
    if (!c->matrix || (c->o->rtt && !c->rtt) || !c->sent_bytes || !c->recv_bytes)
        return nr_error_set(err, NR_E_NOMEM, "out of memory for the %zu x %zu matrix on rank 0", n, n);
    for (size_t i = 0; i < nn; i++)
        c->matrix[i] = NAN;
    for (size_t i = 0; c->rtt && i < nn; i++)
        c->rtt[i] = NAN;
    return NR_OK;
}

void lm_matrix_free(struct lm_ctx *c)
{
    for (size_t i = 0; i < c->nfailures; i++)
        free(c->failures[i].error);
    free(c->failures), free(c->matrix), free(c->rtt), free(c->sent_bytes), free(c->recv_bytes);
    c->failures = NULL, c->matrix = c->rtt = NULL, c->sent_bytes = c->recv_bytes = NULL;
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
        float *cell = &c->matrix[s * n + (size_t)d];
        if (!why[0] && !(v > 0 && isfinite(v)))
            snprintf(why, sizeof why, "moved nothing");
        line.streams++;
        c->streams++;
        if (D)
            c->sent_bytes[s] += D->recv.bytes, c->recv_bytes[d] += D->recv.bytes;
        if (S && c->rtt && S->send.rtt_us >= 0) {
            float *rtt = &c->rtt[s * n + (size_t)d];
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

/* Feed every link's figure, its slower measured direction: a failed direction leaves the other to stand for it. */
static void lm_feed_links(const struct lm_ctx *c, struct lm_select *s)
{
    const size_t n = (size_t)c->m->size;
    for (size_t a = 0; a < n; a++)
        for (size_t b = a + 1; b < n; b++) {
            const float x = c->matrix[a * n + b], y = c->matrix[b * n + a];
            const bool okx = x > 0, oky = y > 0;
            if (okx || oky)
                lm_select_feed(s, okx && oky ? fminf(x, y) : okx ? x : y);
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

int lm_matrix_write(const char *path, const float *m, int n, struct nr_error *err)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return nr_error_set(err, NR_E_USAGE, "matrix file name too long: '%s'", path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return nr_error_sys(err, NR_E_IO, "cannot write '%s'", tmp);
    unsigned char head[16] = "NRLMAT1"; /* the magic's 8th byte is its NUL */
    lm_put_le32(head + 8, (uint32_t)n);
    lm_put_le32(head + 12, 0);
    bool ok = fwrite(head, 1, sizeof head, f) == sizeof head;
    unsigned char *row = malloc(4 * (size_t)(n > 0 ? n : 1));
    ok = ok && row;
    for (size_t s = 0; ok && s < (size_t)n; s++) {
        for (size_t d = 0; d < (size_t)n; d++) {
            const float v = s == d ? NAN : m[s * (size_t)n + d];
            lm_put_le32(row + 4 * d, lm_bits(v));
        }
        ok = fwrite(row, 4, (size_t)n, f) == (size_t)n;
    }
    free(row);
    ok = fflush(f) == 0 && !ferror(f) && ok;
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
        int rc = nr_error_sys(err, NR_E_IO, "cannot write '%s'", path);
        unlink(tmp);
        return rc;
    }
    return NR_OK;
}
