/* nr-linkmap: rank 0's plan, a round at a time (see linkmap.h). */
#include "linkmap.h"

/* ---- host names -> ranks ---- */

static uint64_t lm_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* Insert rank r under key into one table (slot: rank + 1; a key two ranks share counts both). */
static void lm_names_put(struct lm_plan *p, int32_t *slot, int32_t *count, const char *key, int r,
                         const struct lm_ctx *c, bool by_short)
{
    for (size_t i = lm_hash(key) & (p->cap - 1);; i = (i + 1) & (p->cap - 1)) {
        if (!slot[i]) {
            slot[i] = r + 1, count[i] = 1;
            return;
        }
        char other[NR_HOST_MAX];
        const char *name = c->hosts[slot[i] - 1];
        if (by_short)
            name = nr_hostname_short(name, other, sizeof other);
        if (strcmp(name, key) == 0) {
            count[i]++;
            return;
        }
    }
}

/* Rank 0: the tables of every rank's full and short host name. */
static int lm_names_build(struct lm_ctx *c, struct nr_error *err)
{
    struct lm_plan *p = &c->plan;
    const int n = c->m->size;
    for (p->cap = 16; p->cap < 2 * (size_t)n; p->cap *= 2) {
    }
    p->by_full = calloc(p->cap, sizeof(int32_t));
    p->by_short = calloc(p->cap, sizeof(int32_t));
    p->full_count = calloc(p->cap, sizeof(int32_t));
    p->short_count = calloc(p->cap, sizeof(int32_t));
    if (!p->by_full || !p->by_short || !p->full_count || !p->short_count)
        return nr_error_set(err, NR_E_NOMEM, "out of memory for the host names");
    for (int r = 0; r < n; r++) {
        char shortname[NR_HOST_MAX];
        lm_names_put(p, p->by_full, p->full_count, c->hosts[r], r, c, false);
        lm_names_put(p, p->by_short, p->short_count, nr_hostname_short(c->hosts[r], shortname, sizeof shortname),
                     r, c, true);
    }
    return NR_OK;
}

/* The rank whose full (else short) host name is tok: its rank and how many ranks share the name (0: none). */
static int lm_names_find(const struct lm_ctx *c, const char *tok, int *count)
{
    const struct lm_plan *p = &c->plan;
    for (int by_short = 0; by_short < 2; by_short++) {
        const int32_t *slot = by_short ? p->by_short : p->by_full, *cnt = by_short ? p->short_count : p->full_count;
        for (size_t i = lm_hash(tok) & (p->cap - 1); slot[i]; i = (i + 1) & (p->cap - 1)) {
            char shortname[NR_HOST_MAX];
            const char *name = c->hosts[slot[i] - 1];
            if (by_short)
                name = nr_hostname_short(name, shortname, sizeof shortname);
            if (strcmp(name, tok) == 0) {
                *count = cnt[i];
                return slot[i] - 1;
            }
        }
    }
    *count = 0;
    return -1;
}

/* A plan or order file's endpoint: a rank number, or the host name (or its short form) of exactly one rank. */
int lm_endpoint(const struct lm_ctx *c, const char *tok, const char *where, int *out, struct nr_error *err)
{
    const int n = c->m->size;
    if (*tok && strspn(tok, "0123456789") == strlen(tok)) {
        long v = strlen(tok) > 9 ? n : strtol(tok, NULL, 10);
        if (v >= n)
            return nr_error_set(err, NR_E_USAGE, "%s: rank %s does not exist (%d ranks)", where, tok, n);
        *out = (int)v;
        return NR_OK;
    }
    int count = 0, found = lm_names_find(c, tok, &count);
    if (count == 0)
        return nr_error_set(err, NR_E_USAGE, "%s: no rank runs on host '%s'", where, tok);
    if (count > 1)
        return nr_error_set(err, NR_E_USAGE, "%s: host '%s' runs %d ranks: name them by rank number", where, tok,
                            count);
    *out = found;
    return NR_OK;
}

/* ---- the plan file ---- */

/* One line of the plan file into c->dst_of (c->src_of the check's scratch). 1: the line holds no round (blank, a
 * comment, `plan NAME`, which sets the name when `name` is true). */
static int lm_parse_line(struct lm_ctx *c, char *line, const char *where, bool name, struct nr_error *err)
{
    const int n = c->m->size;
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
    if (!tok)
        return 1;
    if (strcmp(tok, "plan") == 0) {
        char *word = strtok_r(NULL, " \t\r\n", &save);
        if (!word || strtok_r(NULL, " \t\r\n", &save) || strlen(word) >= sizeof c->plan_name ||
            strspn(word, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") != strlen(word))
            return nr_error_set(err, NR_E_USAGE, "%s: 'plan' takes one name of letters, digits, '_', '.', '-' "
                                "(at most %zu)", where, sizeof c->plan_name - 1);
        if (name)
            snprintf(c->plan_name, sizeof c->plan_name, "%s", word);
        return 1;
    }
    int *dst = c->dst_of, *recv_from = c->src_of;
    for (int r = 0; r < n; r++)
        dst[r] = -1, recv_from[r] = -1;
    for (; tok; tok = strtok_r(NULL, " \t\r\n", &save)) {
        char *gt = strchr(tok, '>');
        int s = -1, d = -1, rc;
        if (!gt || gt == tok || !gt[1] || strchr(gt + 1, '>'))
            return nr_error_set(err, NR_E_USAGE, "%s: '%s' is not SRC>DST", where, tok);
        *gt = '\0';
        if ((rc = lm_endpoint(c, tok, where, &s, err)) < 0 || (rc = lm_endpoint(c, gt + 1, where, &d, err)) < 0)
            return rc;
        if (s == d)
            return nr_error_set(err, NR_E_USAGE, "%s: %s>%s is a self pair (rank %d)", where, tok, gt + 1, s);
        if (dst[s] >= 0)
            return nr_error_set(err, NR_E_USAGE, "%s: rank %d (%s) sends twice in one round (to %d and %d)", where,
                                s, c->hosts[s], dst[s], d);
        if (recv_from[d] >= 0)
            return nr_error_set(err, NR_E_USAGE, "%s: rank %d (%s) receives twice in one round (from %d and %d)",
                                where, d, c->hosts[d], recv_from[d], s);
        dst[s] = d, recv_from[d] = s;
    }
    return NR_OK;
}

/* Rank 0: read the plan file through once (format in docs/mpi.md), every line checked, and keep where each round's
 * line starts; the file stays open for the rounds. Every error names the line. */
static int lm_plan_file_open(struct lm_ctx *c, struct nr_error *err)
{
    struct lm_plan *p = &c->plan;
    const char *path = c->o->plan_file;
    if (!(p->file = fopen(path, "r")))
        return nr_error_sys(err, NR_E_USAGE, "cannot read plan file '%s'", path);
    snprintf(c->plan_name, sizeof c->plan_name, "file");
    size_t cap = 0;
    long lineno = 0, at = ftell(p->file);
    int rc = NR_OK;
    while (rc == NR_OK && getline(&p->line, &p->line_cap, p->file) >= 0) {
        char where[300];
        snprintf(where, sizeof where, "plan file '%s' line %ld", path, ++lineno);
        if ((rc = lm_parse_line(c, p->line, where, true, err)) == 1) {
            rc = NR_OK;
        } else if (rc == NR_OK) {
            if ((size_t)c->nplanned == cap) {
                long *grown = realloc(p->offsets, sizeof *grown * (cap = cap ? 2 * cap : 256));
                if (!grown)
                    return nr_error_set(err, NR_E_NOMEM, "out of memory for the plan");
                p->offsets = grown;
            }
            p->offsets[c->nplanned++] = at;
            for (int r = 0; r < c->m->size; r++)
                p->streams += c->dst_of[r] >= 0;
        }
        at = ftell(p->file);
    }
    if (rc == NR_OK && ferror(p->file))
        rc = nr_error_sys(err, NR_E_USAGE, "cannot read plan file '%s'", path);
    if (rc == NR_OK && c->nplanned == 0)
        rc = nr_error_set(err, NR_E_USAGE, "plan file '%s' has no rounds", path);
    return rc;
}

/* ---- the shift plan ---- */

/* --order FILE: every rank once, by rank number or host name, white space between them; '#' starts a comment. */
static int lm_plan_order(struct lm_ctx *c, struct nr_error *err)
{
    struct lm_plan *p = &c->plan;
    const int n = c->m->size;
    const char *path = c->o->order;
    FILE *f = fopen(path, "r");
    if (!f)
        return nr_error_sys(err, NR_E_USAGE, "cannot read order file '%s'", path);
    int *seen_on = calloc((size_t)n, sizeof(int)); /* the line a rank was listed on, 0: not yet */
    int placed = 0, rc = seen_on ? NR_OK : nr_error_set(err, NR_E_NOMEM, "out of memory for the order");
    long lineno = 0;
    while (rc == NR_OK && getline(&p->line, &p->line_cap, f) >= 0) {
        char where[300], *save = NULL, *hash = strchr(p->line, '#');
        snprintf(where, sizeof where, "order file '%s' line %ld", path, ++lineno);
        if (hash)
            *hash = '\0';
        for (char *tok = strtok_r(p->line, " \t\r\n", &save); tok && rc == NR_OK;
             tok = strtok_r(NULL, " \t\r\n", &save)) {
            int r = -1;
            if ((rc = lm_endpoint(c, tok, where, &r, err)) < 0)
                break;
            if (seen_on[r])
                rc = nr_error_set(err, NR_E_USAGE, "%s: rank %d (%s) is listed twice (first on line %d)", where, r,
                                  c->hosts[r], seen_on[r]);
            else
                seen_on[r] = (int)lineno, p->order[placed++] = r;
        }
    }
    if (rc == NR_OK && ferror(f))
        rc = nr_error_sys(err, NR_E_USAGE, "cannot read order file '%s'", path);
    if (rc == NR_OK && placed < n) {
        int r = 0;
        while (seen_on[r])
            r++;
        rc = nr_error_set(err, NR_E_USAGE, "order file '%s' lists %d of the %d ranks: rank %d (%s) and %d more are "
                          "missing", path, placed, n, r, c->hosts[r], n - placed - 1);
    }
    fclose(f);
    free(seen_on);
    return rc;
}

/* --shifts LIST: shifts and ranges of them, "1-5,9"; each from 1 to N-1, in the order given. */
static int lm_plan_shifts(struct lm_ctx *c, struct nr_error *err)
{
    const int n = c->m->size;
    const char *s = c->o->shifts;
    size_t cap = 0;
    for (;;) {
        char *end = NULL;
        errno = 0;
        long a = strtol(s, &end, 10), b = a;
        bool ok = end != s && errno == 0;
        if (ok && *end == '-') {
            const char *from = end + 1;
            b = strtol(from, &end, 10);
            ok = end != from && errno == 0;
        }
        if (!ok || (*end && *end != ',') || a < 1 || b > n - 1 || a > b)
            return nr_error_set(err, NR_E_USAGE, "--shifts '%s': expected shifts K or ranges A-B of 1 .. %d, "
                                "separated by commas", c->o->shifts, n - 1);
        for (long k = a; k <= b; k++) {
            if ((size_t)c->nplanned == cap) {
                int *grown = realloc(c->plan.shifts, sizeof *grown * (cap = cap ? 2 * cap : 64));
                if (!grown)
                    return nr_error_set(err, NR_E_NOMEM, "out of memory for the plan");
                c->plan.shifts = grown;
            }
            c->plan.shifts[c->nplanned++] = (int)k;
        }
        if (!*end)
            return NR_OK;
        s = end + 1;
    }
}

int lm_plan_open(struct lm_ctx *c, struct nr_error *err)
{
    const int n = c->m->size;
    int rc = lm_names_build(c, err);
    if (rc < 0)
        return rc;
    if (c->o->plan_file)
        return lm_plan_file_open(c, err);
    snprintf(c->plan_name, sizeof c->plan_name, "shift");
    if (!(c->plan.order = malloc(sizeof(int) * (size_t)n)))
        return nr_error_set(err, NR_E_NOMEM, "out of memory for the plan");
    for (int r = 0; r < n; r++)
        c->plan.order[r] = r;
    if (c->o->order && (rc = lm_plan_order(c, err)) < 0)
        return rc;
    if (c->o->shifts) {
        rc = lm_plan_shifts(c, err);
    } else if (!(c->plan.shifts = malloc(sizeof(int) * (size_t)n))) {
        return nr_error_set(err, NR_E_NOMEM, "out of memory for the plan");
    } else {
        for (int k = 1; k < n; k++)
            c->plan.shifts[c->nplanned++] = k;
    }
    c->plan.streams = (uint64_t)c->nplanned * (uint64_t)n;
    return rc;
}

int lm_plan_round(struct lm_ctx *c, int k, struct nr_error *err)
{
    struct lm_plan *p = &c->plan;
    const int n = c->m->size;
    if (!p->file) {
        const int s = p->shifts[k];
        for (int i = 0; i < n; i++)
            c->dst_of[p->order[i]] = p->order[(i + s) % n];
        return NR_OK;
    }
    char where[300];
    snprintf(where, sizeof where, "plan file '%s' (its round %d)", c->o->plan_file, k + 1);
    if (fseek(p->file, p->offsets[k], SEEK_SET) != 0 || getline(&p->line, &p->line_cap, p->file) < 0)
        return nr_error_sys(err, NR_E_IO, "%s: cannot read it again", where);
    int rc = lm_parse_line(c, p->line, where, false, err);
    return rc == 1 ? nr_error_set(err, NR_E_IO, "%s: the file changed during the run", where) : rc;
}

void lm_plan_roles(struct lm_ctx *c)
{
    const int n = c->m->size;
    int last = -1;
    for (int r = 0; r < n; r++)
        c->src_of[r] = -1, c->prev_of[r] = -1, c->next_of[r] = -1;
    for (int r = 0; r < n; r++) {
        if (c->dst_of[r] < 0)
            continue;
        c->src_of[c->dst_of[r]] = r;
        c->prev_of[r] = last;
        if (last >= 0)
            c->next_of[last] = r;
        last = r;
    }
}

void lm_plan_close(struct lm_plan *p)
{
    if (p->file)
        fclose(p->file);
    free(p->order), free(p->shifts), free(p->offsets), free(p->line);
    free(p->by_full), free(p->by_short), free(p->full_count), free(p->short_count);
    memset(p, 0, sizeof *p);
}
